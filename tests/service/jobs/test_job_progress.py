"""Honest progress: a job's worker process reports its engine's progress (compute passes finished over those of
the iteration) and a search its candidates (done over planned) while they run, through the pool to the job
manager and GET /v1/jobs/{id}, however fast the run."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import yaml
from conftest import SMALL

from api_schemas import SimulationRequest
from api_schemas.search import SearchRequest
from service.jobs.pool import RunResult, WorkerPool

SEARCH: dict[str, Any] = {
    "model": {"preset": "gpt3-1.3b"},
    "cluster": {"preset": "dgx-a100", "num_nodes": 1},
    "global_batch_size": 16,
    "space": {"tp": [1, 2], "pp": [1, 2], "recompute": ["selective"], "zero_stage": [0, 1]},
    "bounds": {"top_k": 2, "max_candidates": 6},
}


def run_in_pool(request_json: str, kind: str) -> tuple[RunResult, list[float]]:
    reported: list[float] = []
    pool = WorkerPool(threads=2)

    async def run() -> RunResult:
        return await pool.run(request_json, kind == "simulation", 60.0, kind=kind, on_progress=reported.append)

    try:
        outcome = asyncio.run(run())
    finally:
        pool.close()
    return outcome, reported


def test_a_simulation_reports_at_least_five_growing_fractions() -> None:
    # 8 microbatches on 8 stages: 128 passes, about 10 ms of simulation
    request = SimulationRequest.model_validate(yaml.safe_load(SMALL.read_text(encoding="utf-8")))
    outcome, reported = run_in_pool(request.model_dump_json(), "simulation")
    assert outcome.status == "ok", outcome
    assert len(reported) >= 5
    assert all(0.0 <= f <= 1.0 for f in reported)
    assert all(a < b for a, b in zip(reported, reported[1:])), reported  # strictly growing
    assert reported[-1] == 1.0  # every pass done (the result follows)
    assert len(reported) <= 101  # a report per hundredth at most


def test_a_search_reports_candidates_done_over_planned() -> None:
    outcome, reported = run_in_pool(SearchRequest.model_validate(SEARCH).model_dump_json(), "search")
    assert outcome.status == "ok", outcome
    simulated = json.loads(outcome.result or "{}")["search"]["simulated"]
    assert simulated >= 2
    assert reported == sorted(reported) and reported[-1] == 1.0
    # the start, the candidates as they return (the total is what could still win, so equal fractions are one
    # report), and the end
    assert len(reported) >= 3 and reported[0] == 0.0
