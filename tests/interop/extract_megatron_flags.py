"""Writes interop/data/megatron_flags.txt: Megatron-LM's command-line flags, read from a checkout's
megatron/training/arguments.py (every add_argument literal) and the config dataclasses its ArgumentGroupFactory
turns into flags (megatron/training/argument_utils.py's rules: --name-with-dashes; a bool defaulting to True as
--no-name and --disable-name; argparse_meta arg_names override; the factory's exclude lists left out).

    python tests/interop/extract_megatron_flags.py /path/to/Megatron-LM > flags.txt
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys


def _show(repo: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], capture_output=True, text=True).stdout


def _classes(repo: str) -> dict[str, ast.ClassDef]:
    names = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "HEAD", "--name-only", "megatron"],
                           capture_output=True, text=True).stdout.split()
    found: dict[str, ast.ClassDef] = {}
    for name in names:
        if not name.endswith(".py"):
            continue
        try:
            tree = ast.parse(_show(repo, name))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, node)
    return found


def _fields(classes: dict[str, ast.ClassDef], name: str) -> list[ast.AnnAssign]:
    node = classes.get(name)
    if node is None:
        return []
    out: list[ast.AnnAssign] = []
    for base in node.bases:
        base_name = getattr(base, "id", getattr(base, "attr", None))
        if base_name:
            out += _fields(classes, base_name)
    out += [s for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    return out


def _excluded(call: ast.Call, tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for kw in call.keywords:
        if kw.arg != "exclude":
            continue
        value = kw.value
        if isinstance(value, ast.Name):  # a list assigned before the call
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == value.id:
                    out |= {e.value for e in node.value.elts}  # type: ignore[attr-defined]
        else:
            out |= {e.value for e in value.elts}  # type: ignore[attr-defined]
    return out


def flags(repo: str) -> set[str]:
    tree = ast.parse(_show(repo, "megatron/training/arguments.py"))
    classes = _classes(repo)
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if getattr(node.func, "attr", "") == "add_argument":
            found |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                      and a.value.startswith("--")}
        if getattr(node.func, "id", "") == "ArgumentGroupFactory":
            exclude = _excluded(node, tree)
            for field in _fields(classes, node.args[0].id):  # type: ignore[attr-defined]
                name = field.target.id  # type: ignore[attr-defined]
                text = ast.unparse(field)
                if name in exclude or name.startswith("_") or "init=False" in text:
                    continue
                meta = re.search(r"'arg_names':\s*\[([^\]]*)\]", text)
                if meta:
                    found |= set(re.findall(r"'(--[^']+)'", meta.group(1)))
                    continue
                default = ast.unparse(field.value) if field.value is not None else ""
                dashed = name.replace("_", "-")
                if ast.unparse(field.annotation) in ("bool", "Optional[bool]") and (
                        default == "True" or "default=True" in default):
                    found |= {f"--no-{dashed}", f"--disable-{dashed}"}
                else:
                    found.add(f"--{dashed}")
    return found


if __name__ == "__main__":
    print("\n".join(sorted(flags(sys.argv[1]))))
