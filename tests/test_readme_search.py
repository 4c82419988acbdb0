"""README.md's search results ("Search and sweeps") are what bench/readme_search.py renders from the current code:
searches bounded by candidate counts, so the figures depend on the code alone."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_carries_the_current_search_results() -> None:
    spec = importlib.util.spec_from_file_location("readme_search", ROOT / "bench" / "readme_search.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--check"]) == 0, "run python bench/readme_search.py"
