"""Hybrid sharding (HSDP, `layout.zero_shard_size`, simcore/domain/hybrid_shard.py; FSDP, and Megatron-Core's partial
distributed optimizer at the end): a shard group as large as dp is
full sharding to the bit; the model states divide by the shard group; the gathers and reduce-scatters stay inside
the shard groups and each unit's gradient shard is all-reduced across them (the bytes each rank sends, in closed
form); on a slow network between nodes HSDP beats full sharding; full fidelity agrees with one replica (bad input:
tests/service/test_hybrid_shard_requests.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from api_schemas import SimulationRequest
from service import convert
from simcore.simulate import simulate

BASE: dict[str, Any] = {
    "model": {"preset": "llama2-7b", "seq_length": 2048, "num_layers": 8, "attention": "flash"},
    "cluster": {"preset": "dgx-h100", "num_nodes": 2},
    "layout": {"dp": 16, "tp": 1, "pp": 1, "microbatch_size": 1, "global_batch_size": 32, "zero_stage": 3,
               "zero_implementation": "fsdp", "overlap_grad_reduce": True},
}


def doc(shard: int | None = None, fidelity: str = "representative", **cluster: Any) -> dict[str, Any]:
    out = copy.deepcopy(BASE)
    if shard is not None:
        out["layout"]["zero_shard_size"] = shard
    out["cluster"].update(cluster)
    out["options"] = {"fidelity": fidelity}
    return out


def run(document: dict[str, Any]):
    return simulate(convert.to_scenario(SimulationRequest.model_validate(document)))


def test_a_shard_group_of_dp_is_full_sharding() -> None:
    assert run(doc(16)).metrics == run(doc()).metrics


def test_a_shard_group_of_dp_with_context_parallelism_is_full_sharding_over_dp_x_cp() -> None:
    base = copy.deepcopy(BASE)
    base["layout"].update(dp=8, cp=2, global_batch_size=16)
    sharded = copy.deepcopy(base)
    sharded["layout"]["zero_shard_size"] = 8
    assert run(sharded).metrics == run(base).metrics


def test_the_optimizer_step_updates_the_shard_groups_share() -> None:
    """Each rank steps 1/s of the parameters: the step's memory-bound part (beyond its fixed kernel launches) grows
    by n/8 - n/16 from full sharding over 16 to HSDP over 8, and by twice that from 8 to 4 (within the multi-tensor
    kernels' launch count, which steps by chunks)."""
    steps = [run(doc(shard)).metrics.time_breakdown_s["optimizer"] for shard in (None, 8, 4)]
    assert steps[2] - steps[1] == pytest.approx(2 * (steps[1] - steps[0]), rel=0.01) and steps[1] > steps[0]


def test_the_model_states_divide_by_the_shard_group() -> None:
    full, hybrid = run(doc()).metrics.stages[0].memory, run(doc(4)).metrics.stages[0].memory
    for name in ("weights", "gradients", "optimizer_states"):
        assert getattr(hybrid, name) == pytest.approx(4 * getattr(full, name))
    assert hybrid.activations == full.activations


def test_each_rank_sends_what_the_shard_and_replicate_groups_make_it_send() -> None:
    """Full shard over 16: gathers and reduce-scatters send 15/16 of their buffers. HSDP over 8: 7/8, and each
    reduce-scatter's 1/8 output is all-reduced between the 2 replicas, 2 (2 - 1) / 2 of it: the gradient bytes
    come to (7/8 + 1/8) of the full-shard buffers."""
    full, hybrid = run(doc()).metrics.communication_bytes, run(doc(8)).metrics.communication_bytes
    assert hybrid["zero"] == pytest.approx(full["zero"] / (15 / 16) * (7 / 8))
    assert hybrid["dp"] == pytest.approx(full["dp"] / (15 / 16) * (7 / 8 + 1 / 8))


def test_on_a_slow_network_between_nodes_hsdp_beats_full_sharding() -> None:
    """One 25 Gbit/s NIC a node: full sharding sends every gather across it, HSDP only the all-reduce."""
    slow = {"nics_per_node": 1, "nic_bandwidth_gbit_per_s": 25}
    full, hybrid = run(doc(**slow)).metrics, run(doc(8, **slow)).metrics
    assert hybrid.iteration_time_s < 0.7 * full.iteration_time_s


def test_full_fidelity_agrees_with_one_replica() -> None:
    one, every = run(doc(8)).metrics, run(doc(8, "full")).metrics
    assert every.iteration_time_s == pytest.approx(one.iteration_time_s, rel=1e-6)
    assert every.communication_bytes == pytest.approx(one.communication_bytes)


def megatron(shard: int | None = None, fidelity: str = "representative") -> dict[str, Any]:
    """Megatron-Core's distributed optimizer (ZeRO 1), partial with zero_shard_size < dp."""
    out = doc(shard, fidelity)
    out["layout"].update(zero_stage=1, zero_implementation="megatron", global_batch_size=64)
    return out


def test_megatrons_partial_distributed_optimizer_sends_what_its_groups_make_it_send() -> None:
    """Each gradient bucket: a reduce-scatter within the instance (7/8 of it over 8), then its shard's all-reduce
    across the 2 instances (2 (2 - 1) / 2 of an eighth); the updated parameters gathered within the instance."""
    full, partial = run(megatron()).metrics, run(megatron(8)).metrics
    assert run(megatron(16)).metrics == full
    assert partial.communication_bytes["dp"] == pytest.approx(full.communication_bytes["dp"] / (15 / 16))
    assert partial.communication_bytes["zero"] == pytest.approx(full.communication_bytes["zero"] / (15 / 16) * 7 / 8)
    assert partial.stages[0].memory.optimizer_states == pytest.approx(2 * full.stages[0].memory.optimizer_states)
    assert partial.stages[0].memory.gradients == full.stages[0].memory.gradients  # ZeRO 1 keeps whole gradients
    every = run(megatron(8, "full")).metrics
    assert every.iteration_time_s == pytest.approx(partial.iteration_time_s, rel=1e-6)
