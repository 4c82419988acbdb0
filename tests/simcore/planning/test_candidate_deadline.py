"""A search's time limit stops a candidate while it runs: the worker's task carries the deadline, the engine's
progress reports (about 200 a run) check it, and the task returns `Overdue` instead of figures."""

from __future__ import annotations

import time

from api_schemas import SimulationRequest
from service import convert
from simcore import MODEL_PRESETS, NODE_PRESETS, Layout, Scenario, model_from_fields, sized
from simcore.planning.worker import Overdue, evaluate_candidate


def test_a_running_candidate_stops_at_its_deadline() -> None:
    # Llama-3-70B with context parallelism 32 on 256 H100s: about a minute of engine time (millions of events).
    scenario = convert.to_scenario(SimulationRequest.model_validate({
        "model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 32},
        "layout": {"dp": 2, "tp": 1, "pp": 4, "cp": 32, "microbatch_size": 1, "global_batch_size": 1024,
                   "schedule": "interleaved_1f1b", "virtual_stages": 4, "zero_stage": 1}}))
    started = time.perf_counter()
    returned = evaluate_candidate((7, scenario, time.time() + 1.0))
    assert returned == Overdue(7)
    assert time.perf_counter() - started < 10.0  # building the network, then a second of engine time


def test_a_candidate_without_a_deadline_runs_to_its_end() -> None:
    small = Scenario(model=model_from_fields(MODEL_PRESETS["gpt3-350m"]), cluster=sized(NODE_PRESETS["dgx-a100"], 8),
                     layout=Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=16))
    result = evaluate_candidate((3, small, None))
    assert not isinstance(result, Overdue) and result.index == 3 and result.tokens_per_s > 0
    assert evaluate_candidate((3, small)) == result  # the two-field task of earlier callers
