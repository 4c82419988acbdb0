"""examples/failures-at-scale: its README is current, and the goodput curve peaks at Daly's optimum."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "failures-at-scale" / "goodput.py"


@pytest.mark.slow
def test_readme_is_current_and_the_curve_peaks_at_the_optimum() -> None:
    module = load_script(SCRIPT)
    text = module.render()
    assert (SCRIPT.parent / "README.md").read_text(encoding="utf-8") == text, (
        "stale: run python examples/failures-at-scale/goodput.py")
    assert "**goodput 0.84" in text  # Llama 3's rate, 1-minute writes, 10-minute restarts: the closed form's 0.84
    highest = next(line for line in text.splitlines() if "(highest)" in line)
    interval_min = float(highest.split("|")[1])
    daly_min = float(text.split("Daly's optimum is ")[1].split(" minutes")[0])
    grid = [2, 5, 10, 14, 16, 17, 18, 19, 20, 25, 30, 45, 60, 120]
    i = grid.index(int(interval_min))
    assert grid[max(i - 1, 0)] <= daly_min <= grid[min(i + 1, len(grid) - 1)]
