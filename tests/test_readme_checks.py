"""The documentation's generated figures (the README's `simulate` excerpt, the "Other checks" list, what the
accuracy figures say, the `compare` example, the FP8 and Blackwell validation) are what bench/readme_checks.py
renders from the current code, in whichever files (README.md, docs/*.md) hold their markers."""

from __future__ import annotations

import pytest
from bench_scripts import load

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")


def test_the_documentation_carries_the_current_generated_figures() -> None:
    script = load("readme_checks")
    texts = script.texts()
    fresh = script.fresh(texts)
    stale = [str(path.relative_to(script.ROOT)) for path in texts if fresh[path] != texts[path]]
    assert not stale, f"stale generated figures in {', '.join(stale)}: run python bench/readme_checks.py"
