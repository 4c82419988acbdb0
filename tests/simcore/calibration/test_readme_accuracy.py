"""docs/accuracy.md carries the accuracy table of the current code (bench/accuracy_table.py writes it from the same
report as `clustersim validate --json`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.calibration.accuracy import END_MARKER, START_MARKER, current_section, render_markdown, replace_section
from simcore.calibration.validate import run_validation

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

ACCURACY = Path(__file__).resolve().parents[3] / "docs" / "accuracy.md"


def test_the_docs_carry_the_current_accuracy_table() -> None:
    table = render_markdown(run_validation())
    assert current_section(ACCURACY.read_text(encoding="utf-8")) == table, \
        "stale accuracy table: run python bench/accuracy_table.py"


def test_replace_section_only_touches_the_marked_text() -> None:
    text = f"# a\nbefore\n{START_MARKER}\nold\n{END_MARKER}\nafter\n"
    replaced = replace_section(text, "new | table")
    assert replaced == f"# a\nbefore\n{START_MARKER}\nnew | table\n{END_MARKER}\nafter\n"
    assert current_section(replaced) == "new | table"
    with pytest.raises(ValueError):
        replace_section("no markers", "x")
