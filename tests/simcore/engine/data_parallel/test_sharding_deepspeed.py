"""`zero_implementation` deepspeed and deepspeed_2021: sub-module units, per-parameter list collectives with
device-wide synchronisations (2021), coalesced ones built rank by rank on the host (2023), as events."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from simcore.cost.layer_params import layer_submodules
from simcore.cost.parameters import FITTED, HOST_DISPATCH_S
from simcore.cost.sharding import (
    HOST_OP_2021_S,
    POLICIES,
    chunk_units,
    pass_visits,
)
from simcore.domain.layout import Fidelity, Layout, Recompute, ZeroImplementation, validate_layout
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.simulate import Outcome, Scenario, simulate
from topology import NODE_PRESETS, sized
from topology.errors import SpecError

GPT3 = model_from_fields(MODEL_PRESETS["gpt3-175b"])
TWO_LAYERS = model_from_fields({**MODEL_PRESETS["gpt3-175b"], "num_layers": 2})
LAYOUT = Layout(dp=16, tp=1, pp=1, microbatch_size=1, global_batch_size=32, zero_stage=3,
                recompute=Recompute.FULL, overlap_grad_reduce=True)


def outcome(implementation: str, dp: int = 16, model: object = TWO_LAYERS, **changes: object) -> Outcome:
    layout = dataclasses.replace(LAYOUT, dp=dp, global_batch_size=2 * dp,
                                 zero_implementation=ZeroImplementation(implementation), **changes)
    return simulate(Scenario(model, sized(NODE_PRESETS["dgx-a100"], dp), layout, keep_spans=True))  # type: ignore[arg-type]


def collectives(out: Outcome) -> Counter[str]:
    # the name without NCCL's choice ("all-gather param (ring/LL)" under auto): these tests count collectives
    return Counter(s.name.split(" (")[0] for s in out.spans if s.track == "stage 0 gather")


def test_a_layer_s_submodules_hold_its_parameters_in_megatron_s_modules() -> None:
    mods = layer_submodules(GPT3, GPT3.main_layer(), 1)
    assert sum(p for params, _ in mods for p in params) == GPT3.parameters_per_layer(GPT3.main_layer())
    h = 12288
    # norm, QKV, attention output, norm, fc1, fc2: the four matrices carry the compute
    assert [w for _, w in mods] == [0, 3 * h * h, h * h, 0, 4 * h * h, 4 * h * h]
    per_tp = layer_submodules(GPT3, GPT3.main_layer(), 8)
    assert per_tp[1][0] == (3 * h * h // 8, 3 * h // 8)


def test_deepspeed_2021_keeps_only_the_last_linear_from_recomputation_to_backward() -> None:
    # Reuse distance 1e9 elements: fc2's recomputation is followed at once by its backward; QKV, the attention
    # output and fc1 see 1.2e9 to 2.7e9 elements of other parameters in between, so they are gathered again.
    policy = POLICIES[ZeroImplementation.DEEPSPEED_2021]
    layer = GPT3.parameters_per_layer(GPT3.main_layer())
    units = chunk_units(GPT3, (("transformer", 2),), 2 * layer, 1, True)
    forward, backward = pass_visits(units, 1.0, 1.0, 3.0, True, policy.reuse_distance_elements)
    assert len(units) == 12 and len(forward) == 12 and len(backward) == 24
    kept = [units[v.unit].weight for v in backward if v.keep]
    assert kept == [4 * 12288 * 12288] * 2  # each layer's fc2
    assert sum(v.compute_s for v in forward) == pytest.approx(1.0)
    assert sum(v.compute_s for v in backward) == pytest.approx(3.0)


def test_deepspeed_2021_gathers_per_parameter_and_reduces_every_parameter() -> None:
    out = outcome("deepspeed_2021")
    counts = collectives(out)
    microbatches = 2
    # Per layer: 4 weights gathered in forward, 4 again for the recomputation, 3 in backward (fc2 kept); the
    # biases and norms (< 1e5 elements) stay resident. The embedding: once in forward and once in backward.
    assert counts["all-gather param"] == microbatches * (2 * 11 + 2)
    # Every parameter's gradient is reduce-scattered on its own: 12 per layer, and the embedding's.
    assert counts["reduce-scatter grad"] == microbatches * (2 * 12 + 1)
    host = [s.end_s - s.start_s for s in out.spans if s.name == "host: issue all-gather"]
    assert host and all(h == pytest.approx(16 * 2 * HOST_OP_2021_S) for h in host)


def test_today_s_deepspeed_coalesces_per_submodule_and_per_bucket() -> None:
    counts = collectives(outcome("deepspeed"))
    assert counts["all-gather param"] == 2 * (2 * 11 + 2)  # one coalesced gather per sub-module's weights
    # gradients in 5e8-element buckets: each layer's 1.8e9 elements overflow it about four times
    assert counts["reduce-scatter grad"] < 2 * (2 * 12 + 1) / 2


def test_the_2021_host_issue_grows_with_the_group() -> None:
    def host_s(out: Outcome) -> float:
        return sum(s.end_s - s.start_s for s in out.spans if s.name == "host: issue all-gather")

    small, large = outcome("deepspeed_2021", 16), outcome("deepspeed_2021", 64)
    assert host_s(large) == pytest.approx(4 * host_s(small))  # dp x 2 ops per gather, the same gathers
    assert large.metrics.time_breakdown_s["dp_comm"] > small.metrics.time_breakdown_s["dp_comm"]
    for out, dp in ((small, 16), (large, 64)):
        assert out.metrics.iteration_time_s > outcome("deepspeed", dp).metrics.iteration_time_s
        assert host_s(outcome("deepspeed", dp)) == 0.0  # coalesced: no per-rank host ops


def test_deepspeed_refuses_pipeline_parallelism() -> None:
    layout = dataclasses.replace(LAYOUT, dp=8, pp=2, zero_implementation=ZeroImplementation.DEEPSPEED)
    with pytest.raises(SpecError) as err:
        validate_layout(layout, TWO_LAYERS, 16)
    assert err.value.field == "layout.zero_implementation"


def test_megatron_and_fsdp_do_not_take_the_sub_module_path() -> None:
    for impl in ("megatron", "fsdp"):
        assert collectives(outcome(impl))["all-gather param"] == 2 * 2 * 2  # a gather per layer per pass


def free_run(impl: str, dp: int = 16) -> float:
    layout = dataclasses.replace(LAYOUT, dp=dp, global_batch_size=2 * dp, zero_implementation=ZeroImplementation(impl))
    out = simulate(Scenario(TWO_LAYERS, sized(NODE_PRESETS["dgx-a100"], dp), layout, free_communication=True))
    assert sum(out.metrics.time_breakdown_s.values()) == pytest.approx(out.metrics.iteration_time_s)
    return out.metrics.iteration_time_s


def test_with_free_communication_only_the_host_work_remains() -> None:
    # Collectives take no time: megatron and fsdp run the compute alone; deepspeed_2021 adds its host issue:
    # every all-gather's dp x 2 ops before the compute is launched (2 microbatches x 24 gathers), and at most
    # every reduce-scatter's (those the compute does not cover). deepspeed's host builds each bucket's
    # reduce-scatter beside the compute; only the last one of each backward pass shows (below).
    compute = free_run("megatron")
    assert free_run("fsdp") == pytest.approx(compute)
    assert compute < free_run("deepspeed") < compute + 1e-3
    host = 16 * 2 * HOST_OP_2021_S
    assert compute + 48 * host - 1e-9 <= free_run("deepspeed_2021") <= compute + (48 + 50) * host


def test_a_2023_reduce_scatter_is_built_rank_by_rank() -> None:
    # reduce_scatter_coalesced (DeepSpeed v0.8.3-v0.9.5): a slice per rank of each gradient, a view per rank
    built = POLICIES[ZeroImplementation.DEEPSPEED].reduce_host_s
    assert built([10**6, 4096, 4096], 384) == pytest.approx(384 * 4 * HOST_DISPATCH_S)
    assert built([10**6], 16) == pytest.approx(16 * 2 * HOST_DISPATCH_S)
    assert built([10**6], 1) == 0.0  # no group, no collective
    for other in (ZeroImplementation.DEEPSPEED_2021, ZeroImplementation.FSDP):
        assert POLICIES[other].reduce_host_s([10**6, 4096], 384) == 0.0


@pytest.mark.parametrize("dp", [16, 64])
def test_the_last_bucket_s_build_is_exposed_and_grows_with_the_group(dp: int) -> None:
    # The backward pass ends with the embedding's gradient alone in the bucket: its build (dp x 2 ops) follows
    # the last compute, once per microbatch (2); every earlier build hides under the next sub-module's compute.
    assert free_run("deepspeed", dp) == pytest.approx(free_run("megatron", dp) + 2 * dp * 2 * HOST_DISPATCH_S,
                                                      rel=1e-9)


def test_interference_slows_the_sub_module_compute() -> None:
    # With the engine's interference on (an SM per NCCL channel in flight), each visit's compute runs slower
    # beside the gathers and reduce-scatters it overlaps.
    layout = dataclasses.replace(LAYOUT, zero_implementation=ZeroImplementation.DEEPSPEED)
    cluster = sized(NODE_PRESETS["dgx-a100"], 16)
    def visits_s(share: float) -> float:
        out = simulate(Scenario(TWO_LAYERS, cluster, layout, keep_spans=True,
                                cost_parameters=dataclasses.replace(FITTED, comm_sm_share=share)))
        return sum(s.end_s - s.start_s for s in out.spans if s.track == "stage 0" and " unit " in s.name)

    assert visits_s(1.0) > 1.01 * visits_s(0.0)


@pytest.mark.parametrize("implementation", ["deepspeed", "deepspeed_2021", "fsdp"])
def test_full_fidelity_agrees_with_the_representative_replica(implementation: str) -> None:
    layout = dataclasses.replace(LAYOUT, dp=8, global_batch_size=16,
                                 zero_implementation=ZeroImplementation(implementation))
    times = [simulate(Scenario(TWO_LAYERS, sized(NODE_PRESETS["dgx-a100"], 8), layout,
                               fidelity=fidelity)).metrics.iteration_time_s
             for fidelity in (Fidelity.REPRESENTATIVE, Fidelity.FULL)]
    assert times[1] == pytest.approx(times[0], rel=1e-12)
