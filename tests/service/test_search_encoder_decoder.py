"""Layout search on encoder-decoder models: GPT-100B against T5-100B on 1024 A100s, the direction of
examples/decoder-vs-encoder-decoder's report."""

from __future__ import annotations

from typing import Any

import pytest

from service.search import run_search

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

SPACE = {"tp": [4, 8], "recompute": ["selective", "full"]}


def search(preset: str) -> dict[str, Any]:
    return run_search({"model": {"preset": preset}, "cluster": {"preset": "dgx-a100", "num_nodes": 128},
                       "global_batch_size": 1536, "space": SPACE, "bounds": {"max_candidates": 24, "top_k": 3}},
                      workers=1)


@pytest.fixture(scope="module")
def searches() -> dict[str, dict[str, Any]]:
    return {"gpt": search("gpt-100b"), "t5": search("t5-100b")}


def test_search_finds_gpt_faster_per_gpu_than_t5(searches: dict[str, dict[str, Any]]) -> None:
    gpt, t5 = searches["gpt"]["best"], searches["t5"]["best"]
    assert gpt["mfu"] > 1.05 * t5["mfu"]  # the report: GPT's MFU is higher than T5's at either split


def test_t5_candidates_do_not_interleave_and_fit(searches: dict[str, dict[str, Any]]) -> None:
    r = searches["t5"]
    assert r["search"]["discarded"]["invalid"] == 0  # interleaving is not generated for encoder-decoder models
    for entry in r["top"]:
        assert entry["layout"]["schedule"] != "interleaved_1f1b"
        assert entry["memory"]["fits"]
