"""README.md's generated figures (the "Other checks" list, what the accuracy figures say, the FP8 and Blackwell
validation) are what bench/readme_checks.py renders from the current code."""

from __future__ import annotations

from bench_scripts import load


def test_the_readme_carries_the_current_generated_figures() -> None:
    script = load("readme_checks")
    text = script.README.read_text(encoding="utf-8")
    assert script.fresh(text) == text, "run python bench/readme_checks.py"
