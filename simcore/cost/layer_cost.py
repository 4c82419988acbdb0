"""One layer of a type on one tensor rank, per microbatch: its kernels' times (forward, backward and the weight
gradients' share of it, the attention core, the GEMMs that hide collectives, context parallelism's ring) and its
tensor-parallel collectives on the rank's real groups (exposed or hidden under the GEMMs, and the interference of
hidden ones with the GEMMs beside them)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcore.cost.collectives import Collective, CollectiveModel, ring_factor
from simcore.cost.context_parallel import (
    AttentionRing,
    attention_ring,
    split_at_attention,
)
from simcore.cost.interference import comm_load, slowdown
from simcore.cost.kernels import (
    ATTENTION_CORE,
    BYTES,
    PROJECTIONS,
    Op,
    layer_forward_ops,
    ops_time,
)
from simcore.cost.parameters import CostParameters
from simcore.cost.weight_gradients import weight_share
from simcore.domain.layout import Layout, Recompute
from simcore.domain.model import LayerType, ModelShape
from topology.hardware import GpuSpec

__all__ = ["LayerCost", "LayerKernels", "backward_ops", "layer_cost", "layer_kernels", "one_collective",
           "tp_bytes", "tp_time"]


@dataclass(frozen=True, slots=True)
class LayerCost:
    """One layer of a type, per microbatch: compute, exposed and hidden tensor-parallel time, bytes, weights."""

    forward: float
    backward: float
    backward_weight: float  # of `backward`, the weight-gradient GEMMs
    core: float  # the attention core's forward (what selective recomputation repeats)
    gemm_fraction: float  # of its compute time, the share in GEMMs and attention (compute-bound)
    tp_forward: float  # exposed tensor-parallel time
    tp_backward: float
    tp_hidden_forward: float
    tp_hidden_backward: float
    tp_bytes_forward: float
    tp_bytes_backward: float
    parameters: int  # per tensor rank

    def recompute(self, mode: Recompute) -> float:
        if mode is Recompute.FULL:
            return self.forward + self.tp_forward
        return self.core if mode is Recompute.SELECTIVE else 0.0


@dataclass(frozen=True, slots=True)
class LayerKernels:
    """One layer of a type, per microbatch, on one tensor rank: its kernels' times (the same on every rank)."""

    forward: float
    backward: float
    core: float  # the attention core's forward
    gemm_forward: float  # the projections, which tp_comm_overlap hides collectives under
    gemm_backward: float
    backward_weight: float  # of `backward`, the projections' weight-gradient GEMMs (W)
    ring: AttentionRing | None = None  # context parallelism: the attention core's ring (its time is in the above)
    pre: tuple[float, float] = (0.0, 0.0)  # with a ring: (forward, backward) s of the kernels before the core
    post: tuple[float, float] = (0.0, 0.0)  # and after it


def layer_kernels(model: ModelShape, layer: LayerType, layout: Layout, gpu: GpuSpec,
                  params: CostParameters) -> LayerKernels:
    """`model` is the one a rank runs (s/cp tokens a sample with context parallelism, whose attention core is
    the ring's, costed on the whole sequence by simcore/cost/context_parallel.py)."""
    ops = layer_forward_ops(model, layout.microbatch_size, layout.tp, layout.sequence_parallel, layer, layout.fp8)
    gemm_forward = ops_time(tuple(op for op in ops if op.name in PROJECTIONS), gpu, params)
    gemm_backward = ops_time(tuple(op.backward() for op in ops if op.name in PROJECTIONS), gpu, params)
    backward = ops_time(backward_ops(ops), gpu, params)
    # The weight-gradient GEMMs run outside the attention core: the same with or without a ring.
    backward_weight = weight_share(backward_ops(ops), gpu, params) * backward
    if layout.cp == 1:
        return LayerKernels(
            forward=ops_time(ops, gpu, params), backward=backward, backward_weight=backward_weight,
            core=ops_time(tuple(op for op in ops if op.name in ATTENTION_CORE), gpu, params),
            gemm_forward=gemm_forward, gemm_backward=gemm_backward)
    whole = replace(layer, seq=layer.seq * layout.cp)
    ring = attention_ring(replace(model, seq_length=whole.seq), whole, layout, gpu, params)
    before, after = split_at_attention(ops)
    pre = (ops_time(before, gpu, params), ops_time(backward_ops(before), gpu, params))
    post = (ops_time(after, gpu, params), ops_time(backward_ops(after), gpu, params))
    return LayerKernels(forward=pre[0] + ring.forward_s + post[0], backward=pre[1] + ring.backward_s + post[1],
                    backward_weight=backward_weight, core=ring.forward_s, gemm_forward=gemm_forward,
                    gemm_backward=gemm_backward, ring=ring, pre=pre, post=post)


def layer_cost(model: ModelShape, layer: LayerType, layout: Layout, kernels: LayerKernels,
                collectives: CollectiveModel | None, groups: list[tuple[int, ...]], free: bool,
                gpu: GpuSpec, params: CostParameters) -> LayerCost:
    """The layer's kernels plus its tensor-parallel collectives on one rank's groups."""
    b, t, sp = layout.microbatch_size, layout.tp, layout.sequence_parallel
    message = b * layer.seq * model.hidden_size * BYTES  # one microbatch's hidden states
    one_tp = 0.0 if free else tp_time(collectives, groups, message, sp)
    # Two collectives per layer per direction (Megatron's f and g operators around attention and the MLP), three
    # with cross-attention.
    blocks = 3 if layer.cross_seq else 2
    tp_fwd = tp_bwd = blocks * one_tp
    bytes_fwd = bytes_bwd = blocks * tp_bytes(t, message)
    if layer.cross_seq:
        # The encoder output enters the column-parallel key/value projection: its gradient is all-reduced over
        # the tensor ranks in backward (with sequence parallelism it is all-gathered in forward and
        # reduce-scattered in backward).
        encoder_out = b * layer.cross_seq * model.hidden_size * BYTES
        if not free:
            if sp:
                tp_fwd += one_collective(collectives, Collective.ALL_GATHER, groups, encoder_out)
                tp_bwd += one_collective(collectives, Collective.REDUCE_SCATTER, groups, encoder_out)
            else:
                tp_bwd += one_collective(collectives, Collective.ALL_REDUCE, groups, encoder_out)
        half = tp_bytes(t, encoder_out) / 2
        bytes_fwd += half if sp else 0.0
        bytes_bwd += half if sp else 2 * half
    # With tp_comm_overlap the collectives run in chunks under the GEMMs that feed or consume them
    # (Megatron-Core's userbuffers): only what the GEMMs cannot cover stays on the critical path.
    exposed_fwd = max(0.0, tp_fwd - kernels.gemm_forward) if layout.tp_comm_overlap else tp_fwd
    exposed_bwd = max(0.0, tp_bwd - kernels.gemm_backward) if layout.tp_comm_overlap else tp_bwd
    # The GEMMs that hide them run slower while the collectives' channels hold SMs (simcore/cost/interference.py):
    # a GEMM beside T seconds of communication takes T x (s - 1) / s longer, s the slowdown.
    slowed = 0.0
    if layout.tp_comm_overlap and not free and params.comm_sm_share > 0 and one_tp > 0:
        assert collectives is not None
        kind = Collective.ALL_GATHER if sp else Collective.ALL_REDUCE
        load = comm_load(kind, t, message, one_tp, collectives.communicator(groups[0]).channels,
                         params.comm_sm_share)
        s = slowdown(load.sms, load.hbm_bytes_per_s, gpu.sm_count, gpu.hbm_bandwidth_bytes_per_s, 1.0)
        slowed = (s - 1) / s
    return LayerCost(
        forward=kernels.forward + slowed * (tp_fwd - exposed_fwd),
        backward=kernels.backward + slowed * (tp_bwd - exposed_bwd), backward_weight=kernels.backward_weight,
        core=kernels.core,
        gemm_fraction=min(1.0, (kernels.gemm_forward + kernels.core) / kernels.forward) if kernels.forward else 1.0,
        tp_forward=exposed_fwd, tp_backward=exposed_bwd,
        tp_hidden_forward=tp_fwd - exposed_fwd, tp_hidden_backward=tp_bwd - exposed_bwd,
        tp_bytes_forward=bytes_fwd, tp_bytes_backward=bytes_bwd,
        parameters=model.parameters_per_layer(layer) // t)


def tp_time(model: CollectiveModel | None, groups: list[tuple[int, ...]], size: float, sp: bool) -> float:
    if len(groups[0]) < 2:
        return 0.0
    assert model is not None, "tensor-parallel time needs a collective model (or free communication)"
    if sp:
        return (model.isolated_time(Collective.ALL_GATHER, groups, size)
                + model.isolated_time(Collective.REDUCE_SCATTER, groups, size))
    return model.isolated_time(Collective.ALL_REDUCE, groups, size)


def one_collective(model: CollectiveModel | None, kind: Collective, groups: list[tuple[int, ...]],
                   size: float) -> float:
    if len(groups[0]) < 2:
        return 0.0
    assert model is not None, "tensor-parallel time needs a collective model (or free communication)"
    return model.isolated_time(kind, groups, size)


def backward_ops(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    return tuple(op.backward() for op in ops)


def tp_bytes(t: int, size: float) -> float:
    """Bytes one tensor rank sends for one all-reduce (or reduce-scatter plus all-gather) of `size` bytes in a
    ring: 2(t-1)/t S."""
    if t < 2:
        return 0.0
    return ring_factor(Collective.ALL_REDUCE, t) * size
