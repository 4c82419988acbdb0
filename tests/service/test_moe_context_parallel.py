"""A mixture of experts with context parallelism: the experts fold over the stage's tp x cp x dp GPUs (Megatron-Core's
expert groups take the CP ranks), both kinds of communication appear in the result, and a straggler's chunk keeps
its all-to-alls."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from test_moe_requests import SMALL

from api_schemas import SimulationRequest
from service import convert
from simcore.cost.workload import build_workload
from simcore.domain.layout import validate_layout
from simcore.domain.moe import expert_groups
from simcore.simulate import simulate
from topology.errors import SpecError


def with_cp(**layout: Any) -> dict[str, Any]:
    doc = copy.deepcopy(SMALL)
    doc["layout"].update({"dp": 4, "cp": 2, "ep": 8, **layout})
    return doc


def test_ep_folds_over_the_cp_ranks_too() -> None:
    # ep 8 is more than tp x dp = 4: only the CP ranks make room for it
    scenario = convert.to_scenario(SimulationRequest.model_validate(with_cp()))
    validate_layout(scenario.layout, scenario.model, 8)
    assert scenario.layout.expert_dp == 1
    assert expert_groups(8, 1, 8) == [tuple(range(8))]
    with pytest.raises(SpecError) as error:
        validate_layout(replace(scenario.layout, ep=16), scenario.model, 8)
    assert error.value.field == "layout.ep" and "tp*cp*dp = 8" in error.value.rule


def test_result_has_both_kinds_and_the_all_to_all_bytes_in_closed_form() -> None:
    doc = with_cp()
    out = convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))
    for section in ("communication_s", "communication_bytes"):
        assert {"cp", "ep"} <= out[section].keys()
    assert {"cp_comm", "ep_comm"} <= out["time_breakdown_s"].keys()
    model, lay = doc["model"], doc["layout"]
    m = lay["global_batch_size"] // (lay["dp"] * lay["microbatch_size"])
    tokens = lay["microbatch_size"] * model["seq_length"] / lay["cp"]  # a CP rank's share of each sample
    # a pass's dispatch and combine of the copies' bf16 hidden states, and the dispatch's fp32 routing
    # probabilities in an all-to-all of their own (Megatron-Core's token_dispatcher.py)
    copies = tokens * model["moe_top_k"]
    per_layer = (2 * copies * model["hidden_size"] * 2 + copies * 4) * (lay["ep"] - 1) / lay["ep"]
    assert out["communication_bytes"]["ep"] == pytest.approx(m * model["num_layers"] * 2 * per_layer, rel=1e-9)


def test_a_stragglers_chunk_keeps_its_all_to_alls() -> None:
    scenario = convert.to_scenario(SimulationRequest.model_validate(with_cp()))
    workload = build_workload(scenario.model, scenario.layout, scenario.cluster.hardware, None, None, True)
    chunk = workload.chunks[0]
    slow = chunk.slowed(2.0)
    assert chunk.expert_parameters > 0 and chunk.ep_bytes_forward > 0
    for name in ("forward_ep_s", "backward_ep_s", "recompute_ep_s", "ep_bytes_forward", "ep_bytes_backward",
                 "expert_parameters", "expert_reduce_ratio"):
        assert getattr(slow, name) == getattr(chunk, name)
    assert slow.forward_compute_s == pytest.approx(2 * chunk.forward_compute_s)
    assert slow.cp_forward is not None


def test_framework_sharding_is_refused_for_experts() -> None:
    doc = copy.deepcopy(SMALL)
    doc["layout"].update({"zero_stage": 3, "zero_implementation": "fsdp"})
    scenario = convert.to_scenario(SimulationRequest.model_validate(doc))
    with pytest.raises(SpecError) as error:
        validate_layout(scenario.layout, scenario.model, 8)
    assert error.value.field == "layout.zero_implementation"
