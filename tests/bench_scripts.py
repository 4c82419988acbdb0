"""Load a script of bench/ (not a package) as a module, for the tests that check what it writes. bench/ is put on
the import path (last, so that it shadows nothing), as it is for a script run from there, so that a script's
imports of its sibling modules (`from doc_sections import ...`) work the same way."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load(name: str) -> ModuleType:
    """bench/<name>.py, executed as a module of that name."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.append(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
