"""The one loader of the repository's scripts as modules, for the tests that check what they compute or write: the
bench package's modules (bench/, `load`) and the example scripts (examples/*/*.py, not a package: `load_file`).
pytest puts tests/ on the import path (pyproject's `pythonpath`), so every test imports this as `bench_scripts`. The
repository root is put on the import path too (last, so that it shadows nothing), as `python -m` does for a script
run from there, so that `bench` imports as a package and a script's `from bench.generated import ...` works the same
way; a loaded example is registered under its name in sys.modules (its dataclasses look their module up there)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _root_on_path() -> None:
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))


def load_file(path: Path | str, name: str) -> ModuleType:
    """The script at `path`, executed as a module called `name`."""
    _root_on_path()
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load(name: str) -> ModuleType:
    """bench/<name>.py, imported as the module bench.<name>."""
    _root_on_path()
    return importlib.import_module(f"bench.{name}")
