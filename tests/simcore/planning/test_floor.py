"""The floor under a layout's iteration time (simcore/planning/floor.py): no simulation ends before it, on every kind
of layout (schedules, context parallelism, ZeRO 3, tensor parallelism across nodes, experts); it is the simulated
time itself where nothing but kernels runs, and the 1F1B closed form (p - 1 + m passes of F + B) where a pipeline's
sends are free."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from api_schemas import SimulationRequest
from service import convert
from simcore import simulate
from simcore.planning.floor import iteration_floor_s, tokens_ceiling


def scenario(layout: dict[str, Any], model: str = "gpt3-1.3b", nodes: int = 2, preset: str = "dgx-a100",
             gpus: int | None = None) -> Any:
    size = {"num_gpus": gpus} if gpus is not None else {"num_nodes": nodes}
    doc = {"model": {"preset": model, "attention": "flash"}, "cluster": {"preset": preset, **size}, "layout": layout}
    return convert.to_scenario(SimulationRequest.model_validate(doc))


LAYOUTS: dict[str, Any] = {
    "1f1b": ({"dp": 2, "tp": 2, "pp": 4, "microbatch_size": 2, "global_batch_size": 64},),
    "gpipe": ({"dp": 4, "tp": 1, "pp": 4, "microbatch_size": 1, "global_batch_size": 32, "schedule": "gpipe"},),
    "interleaved": ({"dp": 2, "tp": 2, "pp": 4, "microbatch_size": 1, "global_batch_size": 32,
                     "schedule": "interleaved_1f1b", "virtual_stages": 3},),
    "zb-h1": ({"dp": 2, "tp": 2, "pp": 4, "microbatch_size": 1, "global_batch_size": 32, "schedule": "zb_h1"},),
    "zb-v": ({"dp": 2, "tp": 2, "pp": 4, "microbatch_size": 1, "global_batch_size": 32, "schedule": "zb_v"},),
    "dualpipe": ({"dp": 2, "tp": 2, "pp": 4, "microbatch_size": 1, "global_batch_size": 32, "schedule": "dualpipe"},),
    "tp across nodes": ({"dp": 1, "tp": 16, "pp": 1, "microbatch_size": 1, "global_batch_size": 8},),
    "tp across nodes, placed": ({"dp": 2, "tp": 8, "pp": 1, "microbatch_size": 1, "global_batch_size": 8,
                                 "placement": "dp,tp,pp"},),
    "context parallel": ({"dp": 2, "tp": 2, "pp": 2, "cp": 2, "microbatch_size": 1, "global_batch_size": 16},),
    "zero 3": ({"dp": 16, "tp": 1, "pp": 1, "microbatch_size": 1, "global_batch_size": 64, "zero_stage": 3},),
    "zero 1, overlapped": ({"dp": 8, "tp": 2, "pp": 1, "microbatch_size": 2, "global_batch_size": 64,
                            "zero_stage": 1, "overlap_grad_reduce": True},),
    "tp comm overlap": ({"dp": 2, "tp": 8, "pp": 1, "microbatch_size": 1, "global_batch_size": 16,
                         "tp_comm_overlap": True, "sequence_parallel": True},),
    "full recompute": ({"dp": 2, "tp": 2, "pp": 4, "microbatch_size": 1, "global_batch_size": 32,
                        "recompute": "full"},),
    "experts": ({"dp": 4, "tp": 1, "pp": 2, "ep": 4, "microbatch_size": 1, "global_batch_size": 32},
                "mixtral-8x7b", 1, "dgx-h100"),
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_no_simulation_ends_before_the_floor(name: str) -> None:
    layout, *rest = LAYOUTS[name]
    s = scenario(layout, *rest)
    outcome = simulate(s)
    floor = iteration_floor_s(s)
    assert 0 < floor <= outcome.metrics.iteration_time_s * (1 + 1e-12), name
    assert outcome.metrics.tokens_per_s <= tokens_ceiling(s) * (1 + 1e-12)
    assert floor > 0.5 * outcome.metrics.iteration_time_s, name  # (a floor of use: not far under)


def test_on_one_gpu_the_floor_is_the_iteration() -> None:
    s = scenario({"dp": 1, "tp": 1, "pp": 1, "microbatch_size": 2, "global_batch_size": 8}, gpus=1)
    assert iteration_floor_s(s) == pytest.approx(simulate(s).metrics.iteration_time_s, rel=1e-9)


def test_with_free_sends_a_1f1b_pipeline_floor_is_its_closed_form() -> None:
    """p - 1 + m passes of F + B on the last stage's path, then the first stage's optimizer step."""
    s = replace(scenario({"dp": 1, "tp": 1, "pp": 4, "microbatch_size": 1, "global_batch_size": 16}, gpus=4),
                free_communication=True)
    floor = iteration_floor_s(s)
    simulated = simulate(s).metrics.iteration_time_s
    assert floor <= simulated * (1 + 1e-12)
    assert floor == pytest.approx(simulated, rel=0.02)  # (stages differ a little: embedding and logits)
