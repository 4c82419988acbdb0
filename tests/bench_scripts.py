"""The one loader of the repository's scripts (bench/ and examples/ are not packages) as modules, for the tests that
check what they compute or write. pytest puts tests/ on the import path (pyproject's `pythonpath`), so every test
imports this as `bench_scripts`. bench/ is put on the import path too (last, so that it shadows nothing), as it is
for a script run from there, so that a script's imports of its sibling modules (`from doc_sections import ...`)
work the same way; a loaded script is registered under its name in sys.modules (its dataclasses look their module
up there)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_file(path: Path | str, name: str) -> ModuleType:
    """The script at `path`, executed as a module called `name`."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.append(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load(name: str) -> ModuleType:
    """bench/<name>.py, executed as a module of that name."""
    return load_file(ROOT / "bench" / f"{name}.py", name)
