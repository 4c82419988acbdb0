"""Context parallelism end to end: the K/V ring's bytes (closed form), its exposed time (max(0, send - block) per
step, exactly), all_gather's exposed collectives, the gradient reduction over DP x CP, memory, placement and the
rules."""

from __future__ import annotations

import dataclasses

import pytest

from simcore.cost.comm.collectives import Collective, CollectiveModel
from simcore.cost.context_parallel import Exchange, RingStep, kv_block_bytes
from simcore.cost.workload import Workload, build_workload
from simcore.domain.layout import CollectiveAlgorithm, CpComm, Fidelity, Layout, Recompute
from simcore.domain.model import ModelShape, model_from_fields
from simcore.domain.placement import Placement, place
from simcore.domain.presets import MODEL_PRESETS
from simcore.errors import SpecError
from simcore.simulate import Outcome, Scenario, check, simulate
from topology import GPUS, NODE_PRESETS, Router, build_cluster, sized
from topology.cluster_spec import ClusterSpec

DGX_H100 = NODE_PRESETS["dgx-h100"]


def llama3_8b(seq: int) -> ModelShape:
    return dataclasses.replace(model_from_fields(MODEL_PRESETS["llama3-8b"]), seq_length=seq)


def small(seq: int = 1024, layers: int = 2, causal: bool = True) -> ModelShape:
    return model_from_fields({"architecture": "decoder_only" if causal else "encoder_only", "num_layers": layers,
                              "hidden_size": 1024, "num_attention_heads": 8, "num_kv_heads": 8,
                              "vocab_size": 1024, "seq_length": seq, "attention": "flash"})


def run(model: ModelShape, cluster: ClusterSpec, layout: Layout, **options: object) -> Outcome:
    return simulate(Scenario(model, cluster, layout, **options))  # type: ignore[arg-type]


def network(cluster: ClusterSpec, layout: Layout) -> tuple[Placement, CollectiveModel]:
    built = build_cluster(cluster)
    placement = place(layout.dp, layout.tp, layout.pp, layout.placement, cluster.num_gpus, layout.cp)
    return placement, CollectiveModel(built, Router(built), CollectiveAlgorithm.AUTO)  # the scenarios' default


def workload_of(model: ModelShape, cluster: ClusterSpec, layout: Layout) -> Workload:
    placement, collectives = network(cluster, layout)
    return build_workload(model, layout, GPUS[cluster.gpu], placement, collectives)


# One GPU a node: a CP ring of two GPUs crosses InfiniBand (one 400 Gbit/s NIC each), slow against short blocks.
ONE_GPU_NODES = dataclasses.replace(DGX_H100, gpus_per_node=1, nics_per_node=1, num_gpus=2)


# -- the closed form --------------------------------------------------------------------------------------
def test_llama3_8b_cp2_kv_bytes_closed_form_and_hidden_ring() -> None:
    """Llama-3-8B, CP 2 x DP 4 on one DGX H100 at 8K tokens, BF16: each rank sends (cp-1)/cp x 2 x s x b x
    kv_heads x head_dim x 2 bytes per layer per microbatch in forward, twice that in backward (dK/dV come back),
    and the ring hides under the attention blocks (exposed cp_comm under 5% of the iteration)."""
    model = llama3_8b(8192)
    layout = Layout(dp=4, tp=1, pp=1, cp=2, microbatch_size=1, global_batch_size=32, zero_stage=1,
                    overlap_grad_reduce=True)
    outcome = run(model, sized(DGX_H100, 8), layout)
    closed = (2 - 1) / 2 * 2 * 8192 * 1 * 8 * 128 * 2
    m, layers = layout.num_microbatches, model.num_layers
    forward_per_layer = outcome.metrics.communication_bytes["cp"] / (m * layers * 3)  # backward sends 2x forward
    assert forward_per_layer == pytest.approx(closed, rel=0.01)
    chunk = workload_of(model, sized(DGX_H100, 8), layout).chunks[0]
    assert chunk.cp_forward is not None and chunk.cp_backward is not None
    assert chunk.cp_forward.sent_bytes / layers == pytest.approx(closed, rel=1e-12)
    assert chunk.cp_backward.sent_bytes / layers == pytest.approx(2 * closed, rel=1e-12)
    breakdown = outcome.metrics.time_breakdown_s
    assert breakdown["cp_comm"] < 0.05 * outcome.metrics.iteration_time_s
    assert sum(breakdown.values()) == pytest.approx(outcome.metrics.iteration_time_s, rel=1e-9)
    assert outcome.metrics.communication_s["cp"] > 0


# -- exposed time: max(0, send - block), step by step -------------------------------------------------------------
@pytest.mark.parametrize("cp", [2, 4])
def test_exposed_ring_time_is_send_minus_block(cp: int) -> None:
    """With one microbatch, no data parallelism and no pipeline, the ring's sends are the only traffic: each step
    exposes exactly max(0, latency + bytes / rate - block)."""
    cluster = dataclasses.replace(ONE_GPU_NODES, num_gpus=cp)
    model = small()
    layout = Layout(dp=1, tp=1, pp=1, cp=cp, microbatch_size=1, global_batch_size=1)
    outcome = run(model, cluster, layout)
    placement, collectives = network(cluster, layout)
    send = collectives.context_parallel_send(placement, 0, [0])
    chunk = workload_of(model, cluster, layout).chunks[0]
    assert chunk.cp_forward is not None and chunk.cp_backward is not None

    def exposed(segments: tuple[object, ...]) -> float:
        steps = [s for s in segments if isinstance(s, RingStep) and s.send_bytes > 0]
        return sum(max(0.0, send.latency_s + s.send_bytes / send.isolated_rate(collectives.capacity) - s.compute_s)
                   for s in steps)

    expected = model.num_layers * (exposed(chunk.cp_forward.layer) + exposed(chunk.cp_backward.layer))
    assert expected > 0  # the case is one where the blocks cannot hide the sends
    assert outcome.metrics.time_breakdown_s["cp_comm"] == pytest.approx(expected, rel=1e-9)
    # and the iteration is the compute plus that, the gradient all-reduce over the CP ranks and the optimizer
    t = outcome.metrics.time_breakdown_s
    assert t["dp_comm"] > 0
    assert outcome.metrics.iteration_time_s == pytest.approx(
        t["compute"] + t["cp_comm"] + t["dp_comm"] + t["optimizer"], rel=1e-9)


def test_all_gather_exposes_its_collectives() -> None:
    """all_gather: K/V gathered before attention (forward and backward) and dK/dV reduce-scattered, none of it
    hidden; it sends the same bytes as the ring."""
    cluster = dataclasses.replace(ONE_GPU_NODES, num_gpus=2)
    model = small()
    layout = Layout(dp=1, tp=1, pp=1, cp=2, microbatch_size=1, global_batch_size=1, cp_comm=CpComm.ALL_GATHER)
    outcome = run(model, cluster, layout)
    placement, collectives = network(cluster, layout)
    chunk = workload_of(model, cluster, layout).chunks[0]
    assert chunk.cp_forward is not None and chunk.cp_backward is not None
    exchanges = [s for s in chunk.cp_forward.layer + chunk.cp_backward.layer if isinstance(s, Exchange)]
    assert [e.kind for e in exchanges] == [Collective.ALL_GATHER, Collective.ALL_GATHER, Collective.REDUCE_SCATTER]
    groups = [placement.cp_group(0, 0, 0)]
    expected = model.num_layers * sum(collectives.isolated_time(e.kind, groups, e.size_bytes) for e in exchanges)
    assert outcome.metrics.time_breakdown_s["cp_comm"] == pytest.approx(expected, rel=1e-9)
    ring = run(model, cluster, dataclasses.replace(layout, cp_comm=CpComm.P2P))
    assert outcome.metrics.communication_bytes["cp"] == pytest.approx(ring.metrics.communication_bytes["cp"])


def test_causal_blocks_are_balanced_and_split_the_work() -> None:
    """Every ring step after the diagonal computes half a block (2c^2 score pairs, as the diagonal's causal 2c x
    2c); the blocks add up to the whole causal attention divided by cp (FLOPs, not time)."""
    model = small(seq=4096)
    cluster = sized(DGX_H100, 4)
    layout = Layout(dp=1, tp=1, pp=1, cp=4, microbatch_size=1, global_batch_size=1, recompute=Recompute.NONE)
    chunk = workload_of(model, cluster, layout).chunks[0]
    assert chunk.cp_forward is not None
    blocks = [s.compute_s for s in chunk.cp_forward.layer if isinstance(s, RingStep)]
    assert len(blocks) == 4
    assert blocks[1] == blocks[2] == blocks[3]
    sends = [s.send_bytes for s in chunk.cp_forward.layer if isinstance(s, RingStep)]
    assert sends == [kv_block_bytes(model, layout)] * 3 + [0.0]


# -- DP x CP: gradients and memory ------------------------------------------------------------------------------------
def test_gradients_reduce_over_dp_times_cp() -> None:
    """CP 2 x DP 1 still reduces gradients (over the two CP ranks); ZeRO 1 shards optimizer states over dp x cp."""
    model = llama3_8b(8192)
    cluster = sized(DGX_H100, 8)
    cp8 = run(model, cluster, Layout(dp=1, tp=1, pp=1, cp=8, microbatch_size=1, global_batch_size=4,
                                     zero_stage=1, overlap_grad_reduce=True))
    assert cp8.metrics.communication_bytes["dp"] > 0
    dp8 = run(model, cluster, Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=32, zero_stage=1,
                                     overlap_grad_reduce=True))
    assert cp8.metrics.communication_bytes["dp"] == pytest.approx(dp8.metrics.communication_bytes["dp"])
    assert cp8.metrics.peak_stage.memory.optimizer_states == pytest.approx(
        dp8.metrics.peak_stage.memory.optimizer_states)


def test_activations_shrink_by_cp() -> None:
    model = llama3_8b(32768)
    cluster = sized(DGX_H100, 8)
    base = Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=8, recompute=Recompute.FULL)
    one = run(model, cluster, base).metrics.peak_stage.memory
    four = run(model, cluster, dataclasses.replace(base, dp=2, cp=4, global_batch_size=2)).metrics.peak_stage.memory
    assert four.activations == pytest.approx(one.activations / 4, rel=0.02)
    assert four.buffers > one.buffers  # K/V blocks in flight


# -- placement ------------------------------------------------------------------------------------------------------
def test_placement_puts_cp_after_tp_by_default() -> None:
    p = place(2, 2, 1, "tp,cp,dp,pp", 8, cp=2)
    assert p.cp_group(0, 0, 0) == (0, 2)
    assert p.tp_group(0, 0, 1) == (2, 3)
    assert p.dp_group(0, 0) == (0, 4, 2, 6)
    assert place(2, 2, 1, "tp,dp,pp", 8, cp=2) == p  # an order without cp: cp right after tp
    outer = place(2, 2, 1, "tp,dp,pp,cp", 8, cp=2)
    assert outer.cp_group(0, 0, 0) == (0, 4)


def test_cp_1_is_the_layout_without_context_parallelism() -> None:
    model = llama3_8b(8192)
    layout = Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=16)
    with_cp = run(model, sized(DGX_H100, 8), dataclasses.replace(layout, placement="tp,dp,pp"))
    plain = run(model, sized(DGX_H100, 8), layout)
    assert with_cp.metrics == plain.metrics
    assert "cp_comm" not in plain.metrics.time_breakdown_s
    assert "cp" not in plain.metrics.communication_s


# -- rules ---------------------------------------------------------------------------------------------------------
def _check(model: ModelShape, layout: Layout, gpus: int) -> SpecError:
    with pytest.raises(SpecError) as err:
        check(Scenario(model, sized(DGX_H100, gpus), layout))
    return err.value


def test_seq_length_must_split_into_2cp_chunks() -> None:
    err = _check(small(seq=1000), Layout(dp=1, tp=1, pp=1, cp=8, microbatch_size=1, global_batch_size=1), 8)
    assert err.field == "layout.cp" and "2*cp = 16" in err.rule


def test_gpu_count_counts_cp() -> None:
    err = _check(small(), Layout(dp=4, tp=1, pp=1, cp=2, microbatch_size=1, global_batch_size=4), 4)
    assert err.field == "layout.dp" and "dp*tp*pp*cp = 4*1*1*2 = 8" in err.rule


def test_cp_refuses_encoder_decoder_and_standard_attention() -> None:
    t5 = model_from_fields(MODEL_PRESETS["t5-small"])
    err = _check(t5, Layout(dp=1, tp=1, pp=1, cp=2, microbatch_size=1, global_batch_size=1), 2)
    assert err.field == "layout.cp" and "encoder_decoder" in err.rule
    standard = dataclasses.replace(small(), attention=type(small().attention)("standard"))
    err = _check(standard, Layout(dp=1, tp=1, pp=1, cp=2, microbatch_size=1, global_batch_size=1), 2)
    assert err.field == "layout.cp" and "flash" in err.rule


def test_full_fidelity_agrees_with_representative_on_a_symmetric_case() -> None:
    """Every data-parallel replica simulated with its own ring flows gives the representative result."""
    model = small(seq=4096, layers=4)
    layout = Layout(dp=2, tp=2, pp=2, cp=2, microbatch_size=1, global_batch_size=8, zero_stage=1,
                    overlap_grad_reduce=True, sequence_parallel=True)
    cluster = sized(DGX_H100, 16)
    representative = run(model, cluster, layout).metrics
    full = run(model, cluster, layout, fidelity=Fidelity.FULL).metrics
    assert full.iteration_time_s == pytest.approx(representative.iteration_time_s, rel=1e-9)
    assert full.time_breakdown_s["cp_comm"] == pytest.approx(representative.time_breakdown_s["cp_comm"], abs=1e-12)
    assert full.communication_bytes["cp"] == pytest.approx(representative.communication_bytes["cp"], rel=1e-12)


@pytest.mark.parametrize("zero", [1, 3])
def test_ring_passes_behind_parameter_gathers(zero: int) -> None:
    """ZeRO 1's overlapped gathers and ZeRO 3's per-layer gathers gate a context-parallel pass layer by layer;
    the breakdown still sums to the iteration and the ring sends the same bytes."""
    model = small(seq=4096, layers=4)
    layout = Layout(dp=2, tp=1, pp=1, cp=2, microbatch_size=1, global_batch_size=4, zero_stage=zero,
                    overlap_grad_reduce=True)
    outcome = run(model, sized(DGX_H100, 4), layout)
    breakdown = outcome.metrics.time_breakdown_s
    assert sum(breakdown.values()) == pytest.approx(outcome.metrics.iteration_time_s, rel=1e-9)
    plain = run(model, sized(DGX_H100, 4), dataclasses.replace(layout, zero_stage=0))
    assert outcome.metrics.communication_bytes["cp"] == pytest.approx(plain.metrics.communication_bytes["cp"])
