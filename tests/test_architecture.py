"""The architecture, checked: imports point one way, no module imports another's private name, no import cycles,
and no module grows past its size limit.

The arrows (design.md): service -> (api_schemas, simcore, interop); interop -> api_schemas; simcore -> topology;
inside simcore domain <- cost <- engine <- (network, metrics, trace) <- simulate, with planning/ and calibration/
on top.
Inside cost and engine, rooms group one concept each (cost/compute, cost/comm; engine/data_parallel,
engine/steady_state): the two rooms of a package do not import each other, and each room's docstring names its modules.
bench/, the repository's tooling, is a package whose docstring names its modules too; nothing shipped imports it.
api_schemas and topology import nothing of the project. A `clustersim` facade, where it exists, sits on top of service.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("api_schemas", "interop", "topology", "simcore", "service", "clustersim")
MAX_LINES = 400

# Layers, lowest first; a module may import only from its own layer or a lower one.
LAYERS: dict[str, int] = {
    "topology": 0,
    "simcore.errors": 1,
    "simcore.domain": 2,
    "simcore.cost": 3,
    "simcore.engine": 4,
    "simcore.metrics": 5,
    "simcore.trace": 5,
    "simcore.training_plan": 5,
    "simcore.network": 5,
    "simcore.simulate": 6,
    "simcore.planning": 7,
    "simcore.calibration": 7,
    "simcore": 8,  # the public face, simcore/__init__.py
    "api_schemas": 0,
    "interop": 1,
    "service": 9,
    "clustersim": 10,
}
# Rooms of one package that must not import each other: each holds one concept, and what needs both sits beside them.
SIBLING_ROOMS = (("simcore.cost.compute", "simcore.cost.comm"),
                 ("simcore.engine.data_parallel", "simcore.engine.steady_state"))
# Which top-level packages each package may import at all.
ALLOWED = {
    "topology": {"topology"},
    "api_schemas": {"api_schemas"},
    "simcore": {"simcore", "topology"},
    "interop": {"interop", "api_schemas"},
    "service": {"service", "api_schemas", "simcore", "interop"},
    "clustersim": {"clustersim", "service", "api_schemas", "simcore", "interop"},
}


def modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        base = ROOT / package
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


def layer_of(module: str) -> int:
    best = ""
    for prefix in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    return LAYERS[best]


def imports(module: str, path: Path) -> Iterator[tuple[str, list[str], int]]:
    """(imported module, imported names, line) for each project import, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([target] if target else []))
            if target.split(".")[0] in PACKAGES:
                yield target, [a.name for a in node.names], node.lineno


ALL = dict(modules())


def test_imports_follow_the_arrows() -> None:
    wrong = []
    for module, path in ALL.items():
        top = module.split(".")[0]
        for target, _names, line in imports(module, path):
            target_top = target.split(".")[0]
            if target_top not in ALLOWED[top]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target} ({top} may not import {target_top})")
            elif top == "simcore" and target_top == "simcore" and layer_of(target) > layer_of(module):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}, a layer above it")
    assert not wrong, "imports against the arrows:\n" + "\n".join(wrong)


def test_sibling_rooms_do_not_import_each_other() -> None:
    wrong = []
    for module, path in ALL.items():
        for pair in SIBLING_ROOMS:
            for room, other in (pair, pair[::-1]):
                if module == room or module.startswith(room + "."):
                    wrong += [f"{path.relative_to(ROOT)}:{line} imports {target}"
                              for target, _names, line in imports(module, path)
                              if target == other or target.startswith(other + ".")]
    assert not wrong, "rooms importing their sibling room:\n" + "\n".join(wrong)


@pytest.mark.parametrize("package", ["simcore.cost", "simcore.engine", *(r for pair in SIBLING_ROOMS for r in pair),
                                     "bench"])
def test_a_package_docstring_names_each_of_its_modules(package: str) -> None:
    folder = ROOT.joinpath(*package.split("."))
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""
    listed = {line[2:].split(":")[0] for line in doc.splitlines() if line.startswith("- ")}
    present = {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}
    present |= {f"{p.name}/" for p in folder.iterdir() if (p / "__init__.py").is_file()}
    assert listed == present, f"{package}'s docstring lists {sorted(listed - present)} that are not there " \
                              f"and leaves out {sorted(present - listed)}"


def test_the_product_does_not_import_bench() -> None:
    """bench/ is the repository's tooling, not shipped (pyproject's packages): nothing shipped may need it."""
    wrong = []
    for path in ALL.values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            wrong += [f"{path.relative_to(ROOT)}:{node.lineno} imports {name}" for name in names
                      if name == "bench" or name.startswith("bench.")]
    assert not wrong, "the product importing bench/:\n" + "\n".join(wrong)


def test_no_private_names_across_modules() -> None:
    wrong = []
    for module, path in ALL.items():
        for target, names, line in imports(module, path):
            if target == module:
                continue
            private = [n for n in names if n.startswith("_")]
            if private or any(part.startswith("_") and part != "__init__" for part in target.split(".")):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target} {private}")
    assert not wrong, "private names imported across modules:\n" + "\n".join(wrong)


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {m: set() for m in ALL}
    for module, path in ALL.items():
        for target, names, _line in imports(module, path):
            for candidate in [f"{target}.{n}" for n in names] + [target]:
                if candidate in ALL and candidate != module:
                    graph[module].add(candidate)
                    break
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("module", sorted(ALL))
def test_module_size(module: str) -> None:
    lines = ALL[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{ALL[module].relative_to(ROOT)} has {lines} lines (at most {MAX_LINES})"


def test_create_app_is_short() -> None:
    for module, path in ALL.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "create_app":
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                assert length < 60, f"{module}.create_app is {length} lines (under 60)"


# What starts processes: the executors that do (a process pool, Ray) live in service/executors; simcore runs its
# candidates through the `Executor` protocol of simcore/planning/executor.py and starts none itself.
PROCESS_MODULES = ("multiprocessing", "concurrent.futures", "ray", "subprocess")


def test_simcore_starts_no_process() -> None:
    wrong = []
    for module, path in ALL.items():
        if module.split(".")[0] not in ("simcore", "topology"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            wrong += [f"{path.relative_to(ROOT)}:{node.lineno} imports {name}" for name in names
                      if any(name == m or name.startswith(m + ".") for m in PROCESS_MODULES)]
    assert not wrong, "process pools imported in the pure core:\n" + "\n".join(wrong)
