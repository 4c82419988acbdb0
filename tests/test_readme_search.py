"""The search results of docs/search.md ("Search and sweeps") are what bench/readme_search.py renders from the
current code: searches bounded by candidate counts, so the figures depend on the code alone."""

from __future__ import annotations

from bench_scripts import load


def test_the_readme_carries_the_current_search_results() -> None:
    assert load("readme_search").main(["--check"]) == 0, "run python bench/readme_search.py"
