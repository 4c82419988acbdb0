"""examples/stragglers: its README is current, and what it says holds: one slow GPU in 1,024 slows the whole
iteration, and the healthy data-parallel replicas wait longer than the straggler's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import load_script

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "stragglers" / "report.py"


def test_readme_is_current_and_the_peers_wait_for_the_straggler() -> None:
    module = load_script(SCRIPT)
    text = module.render()
    assert (SCRIPT.parent / "README.md").read_text(encoding="utf-8") == text, (
        "stale: run python examples/stragglers/report.py")
    growth = float(re.search(r"\| one GPU 1.2x \| [\d.]+ \| \+([\d.]+)% \|", text)[1])  # type: ignore[index]
    assert 1 < growth < 20
    own, others = (float(x) for x in re.search(  # type: ignore[union-attr]
        r"the straggler's\) ([\d.]+) s, the other replicas ([\d.]+) s", text).groups())
    assert others > own
