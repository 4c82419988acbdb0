"""Context parallelism by all-to-all (`cp_comm: a2a`, Transformer Engine's AttnFuncWithCPAndQKVOA2A): the segments
of a layer, the bytes (closed form), the exposed time (every all-to-all waited for, exactly), the whole-sequence
kernel over 1/cp of the heads, memory, full fidelity, and the heads rule."""

from __future__ import annotations

import dataclasses

import pytest

from simcore.cost.comm.collectives import CollectiveModel
from simcore.cost.compute.kernel_time import ops_time
from simcore.cost.compute.kernels import flash_attention_op
from simcore.cost.context_parallel import AllToAll, RingStep, kv_buffer_bytes
from simcore.cost.moe import all_to_all_time
from simcore.cost.parameters import FITTED
from simcore.cost.workload import Workload, build_workload
from simcore.domain.layout import CollectiveAlgorithm, CpComm, Fidelity, Layout, Recompute
from simcore.domain.model import ModelShape, model_from_fields
from simcore.domain.placement import place
from simcore.errors import SpecError
from simcore.simulate import Outcome, Scenario, check, simulate
from topology import GPUS, NODE_PRESETS, Router, build_cluster, sized
from topology.cluster_spec import ClusterSpec

DGX_H100 = NODE_PRESETS["dgx-h100"]
ONE_GPU_NODES = dataclasses.replace(DGX_H100, gpus_per_node=1, nics_per_node=1, num_gpus=2)


def small(seq: int = 1024, layers: int = 2, heads: int = 8, kv_heads: int = 8) -> ModelShape:
    return model_from_fields({"architecture": "decoder_only", "num_layers": layers, "hidden_size": 1024,
                              "num_attention_heads": heads, "num_kv_heads": kv_heads, "vocab_size": 1024,
                              "seq_length": seq, "attention": "flash"})


def a2a(cp: int, **fields: object) -> Layout:
    return Layout(**{"dp": 1, "tp": 1, "pp": 1, "cp": cp, "microbatch_size": 1, "global_batch_size": 1,
                     "cp_comm": CpComm.A2A, **fields})  # type: ignore[arg-type]


def run(model: ModelShape, cluster: ClusterSpec, layout: Layout, **options: object) -> Outcome:
    return simulate(Scenario(model, cluster, layout, **options))  # type: ignore[arg-type]


def workload_of(model: ModelShape, cluster: ClusterSpec, layout: Layout) -> Workload:
    built = build_cluster(cluster)
    placement = place(layout.dp, layout.tp, layout.pp, layout.placement, cluster.num_gpus, layout.cp)
    collectives = CollectiveModel(built, Router(built), CollectiveAlgorithm.AUTO)
    return build_workload(model, layout, GPUS[cluster.gpu], placement, collectives)


def test_a_layer_is_an_all_to_all_a_whole_sequence_kernel_and_an_all_to_all() -> None:
    """GQA (8 query, 2 key/value heads of 128) at CP 2: forward exchanges Q, K, V (b s/cp (a + 2g) d x 2 bytes),
    attends the whole causal sequence with a/cp and g/cp heads, and exchanges O (b s/cp a d x 2); backward dO, the
    kernel's backward, dQ, dK, dV."""
    model, layout = small(heads=8, kv_heads=2), a2a(2)
    chunk = workload_of(model, ONE_GPU_NODES, layout).chunks[0]
    assert chunk.cp_forward is not None and chunk.cp_backward is not None
    q = 1024 / 2 * 8 * 128 * 2
    qkv = 1024 / 2 * (8 + 2 * 2) * 128 * 2
    forward = [s for s in chunk.cp_forward.layer if not isinstance(s, float)]
    backward = [s for s in chunk.cp_backward.layer if not isinstance(s, float)]
    assert [type(s) for s in forward] == [AllToAll, RingStep, AllToAll] == [type(s) for s in backward]
    assert [s.size_bytes for s in forward if isinstance(s, AllToAll)] == [qkv, q]
    assert [s.size_bytes for s in backward if isinstance(s, AllToAll)] == [q, qkv]
    kernel = flash_attention_op("flash_attention", 1, 4, 1, 128, 1024, 1024, 0.5)
    gpu = GPUS[ONE_GPU_NODES.gpu]
    assert forward[1].compute_s == ops_time((kernel,), gpu, FITTED)  # type: ignore[union-attr]
    assert backward[1].compute_s == ops_time((kernel.backward(),), gpu, FITTED)  # type: ignore[union-attr]
    assert chunk.cp_forward.sent_bytes == 0.0  # no ring sends: the all-to-alls are counted by the engine


@pytest.mark.parametrize("cp", [2, 4])
def test_every_all_to_all_is_exposed_and_sends_cp_minus_1_over_cp(cp: int) -> None:
    """With one microbatch and no other traffic, cp_comm is the all-to-alls' isolated time, exactly; each sends
    (cp-1)/cp of its buffer."""
    cluster = dataclasses.replace(ONE_GPU_NODES, num_gpus=cp)
    model, layout = small(), a2a(cp)
    outcome = run(model, cluster, layout)
    built = build_cluster(cluster)
    collectives = CollectiveModel(built, Router(built), CollectiveAlgorithm.AUTO)
    group = [place(1, 1, 1, layout.placement, cp, cp).cp_group(0, 0, 0)]
    chunk = workload_of(model, cluster, layout).chunks[0]
    assert chunk.cp_forward is not None and chunk.cp_backward is not None
    exchanges = [s for s in chunk.cp_forward.layer + chunk.cp_backward.layer if isinstance(s, AllToAll)]
    expected = model.num_layers * sum(all_to_all_time(collectives, group, e.size_bytes) for e in exchanges)
    assert outcome.metrics.time_breakdown_s["cp_comm"] == pytest.approx(expected, rel=1e-9)
    sent = model.num_layers * (cp - 1) / cp * sum(e.size_bytes for e in exchanges)
    assert outcome.metrics.communication_bytes["cp"] == pytest.approx(sent, rel=1e-12)
    t = outcome.metrics.time_breakdown_s
    assert outcome.metrics.iteration_time_s == pytest.approx(
        t["compute"] + t["cp_comm"] + t["dp_comm"] + t["optimizer"], rel=1e-9)


def test_whole_sequence_kernel_beats_the_rings_small_blocks_at_high_cp() -> None:
    """At CP 8 on one node the ring computes eight small blocks; a2a one kernel over the whole sequence: less
    compute, and on NVLink both exchanges are cheap."""
    model, cluster = small(seq=8192, heads=16, kv_heads=8), sized(DGX_H100, 8)
    ring = run(model, cluster, dataclasses.replace(a2a(8), cp_comm=CpComm.P2P)).metrics
    alltoall = run(model, cluster, a2a(8)).metrics
    assert alltoall.time_breakdown_s["compute"] < ring.time_breakdown_s["compute"]


def test_memory_counts_the_exchanged_copies() -> None:
    model = small(seq=8192, heads=16, kv_heads=8)
    layout = a2a(8)
    assert model.head_dim == 64
    q = 8192 / 8 * 16 * 64 * 2
    kv = 2 * 8192 / 8 * 8 * 64 * 2
    assert kv_buffer_bytes(model, layout) == 2 * (q + kv)


def test_full_fidelity_agrees_with_representative() -> None:
    model = small(seq=4096, layers=4)
    layout = Layout(dp=2, tp=2, pp=2, cp=2, microbatch_size=1, global_batch_size=8, zero_stage=1,
                    overlap_grad_reduce=True, sequence_parallel=True, cp_comm=CpComm.A2A,
                    recompute=Recompute.SELECTIVE)
    cluster = sized(DGX_H100, 16)
    representative = run(model, cluster, layout).metrics
    full = run(model, cluster, layout, fidelity=Fidelity.FULL).metrics
    assert full.iteration_time_s == pytest.approx(representative.iteration_time_s, rel=1e-9)
    assert full.communication_bytes["cp"] == pytest.approx(representative.communication_bytes["cp"], rel=1e-12)


@pytest.mark.parametrize(("heads", "kv_heads", "tp", "cp"), [(8, 8, 1, 16), (8, 2, 1, 4), (32, 8, 2, 8)])
def test_cp_must_divide_a_tensor_ranks_heads(heads: int, kv_heads: int, tp: int, cp: int) -> None:
    model = small(seq=4096, heads=heads, kv_heads=kv_heads)
    layout = a2a(cp, tp=tp, sequence_parallel=tp > 1)
    with pytest.raises(SpecError) as err:
        check(Scenario(model, sized(DGX_H100, tp * cp), layout))
    assert err.value.field == "layout.cp_comm" and "a2a needs cp" in err.value.rule
