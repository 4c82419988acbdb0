"""README.md's generated figures (the "Other checks" list, what the accuracy figures say, the FP8 and Blackwell
validation) are what bench/readme_checks.py renders from the current code."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_carries_the_current_generated_figures() -> None:
    spec = importlib.util.spec_from_file_location("readme_checks", ROOT / "bench" / "readme_checks.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    text = script.README.read_text(encoding="utf-8")
    assert script.fresh(text) == text, "run python bench/readme_checks.py"
