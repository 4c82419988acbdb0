"""service/ stands on api_schemas and simcore's public face and subpackages: it imports nothing from topology/
(the floor below simcore) and no private (_underscore) name of another module."""

from __future__ import annotations

import ast
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[2] / "service"


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((a.name, []) for a in node.names)
    return found


def test_service_imports_nothing_from_topology() -> None:
    offenders = [f"{p.relative_to(SERVICE.parent)}: {module}" for p in sorted(SERVICE.rglob("*.py"))
                 for module, _ in _imports(p) if module == "topology" or module.startswith("topology.")]
    assert offenders == []


def test_service_imports_no_private_name() -> None:
    offenders = [f"{p.relative_to(SERVICE.parent)}: {module}.{name}" for p in sorted(SERVICE.rglob("*.py"))
                 for module, names in _imports(p) for name in names
                 if name.startswith("_") and name != "__future__" and module != "__future__"]
    assert offenders == []
