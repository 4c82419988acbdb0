"""The Ray executor (an optional extra): on a local Ray runtime with two CPUs, a small search and a small sweep
give exactly what the local process pool gives. Skipped when ray is not installed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from api_schemas.search import SweepRequest  # noqa: E402
from service.search import run_search  # noqa: E402
from service.sweep import RESULTS_CSV, RESULTS_JSONL, run_sweep  # noqa: E402

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

SEARCH: dict[str, Any] = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2},
                          "global_batch_size": 64, "bounds": {"max_candidates": 12, "top_k": 5}}
SWEEP: dict[str, Any] = {
    "base": {"model": {"preset": "gpt3-350m"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
             "layout": {"dp": 2, "tp": 2, "pp": 2, "global_batch_size": 16}},
    "grid": {"layout.microbatch_size": [1, 2], "layout.zero_stage": [0, 1, 3]},
}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_search_equals_local_search(local_ray: None) -> None:
    by_ray = run_search(SEARCH, executor="ray")
    local = run_search(SEARCH, executor="local", workers=2)
    assert by_ray["run"]["executor"] == "ray" and local["run"]["executor"] == "local"
    strip = [{k: v for k, v in r.items() if k != "run"} for r in (by_ray, local)]
    assert json.dumps(strip[0]) == json.dumps(strip[1])
    assert by_ray["search"]["simulated"] == 12


def test_ray_sweep_writes_the_same_files(local_ray: None, tmp_path: Path) -> None:
    request = SweepRequest.model_validate(SWEEP)
    run_sweep(request, tmp_path / "ray", executor="ray")
    run_sweep(request, tmp_path / "local", executor="local", workers=2)
    for name in (RESULTS_JSONL, RESULTS_CSV):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
