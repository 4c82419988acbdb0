"""The work of one training iteration, per model chunk: what each pass costs, what it sends, what it holds.

Layers are split over pp * virtual_stages model chunks in order (virtual stage i = chunk * pp + rank, Megatron's
layout); when they do not divide evenly the extra layers go to the middle stages first, since the first stage
also embeds and the last also computes the logits. Tensor-parallel collectives are folded into the pass that
issues them; their time comes from the collective model on the real tensor-parallel group and its paths, with
the concurrent groups of the other data-parallel replicas sharing the links.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.calibration import FITTED, CostParameters
from simcore.collectives import Collective, CollectiveModel
from simcore.costs import BYTES, Op, embedding_forward_ops, layer_forward_ops, logits_forward_ops, ops_time
from simcore.layout import Layout, Recompute
from simcore.model import ModelShape
from topology.hardware import GpuSpec
from topology.placement import Placement

# Adam in mixed precision touches about 40 bytes per parameter per step: fp32 master weight, two moments and
# the fp32 gradient read and written, the bf16 weight written, and the gradient-norm pass.
OPTIMIZER_BYTES_PER_PARAMETER = 40


@dataclass(frozen=True, slots=True)
class ChunkCost:
    """One model chunk on one pipeline rank; times per microbatch, in seconds; sizes per tensor-parallel rank."""

    virtual_stage: int
    rank: int
    chunk: int
    layers: int
    has_embedding: bool
    has_logits: bool
    forward_compute_s: float
    forward_tp_s: float
    backward_compute_s: float
    backward_tp_s: float
    recompute_s: float  # the recomputed forward, its tensor-parallel collectives included
    recompute_tp_s: float
    parameters: int
    activation_bytes: float  # message to the next virtual stage (and the gradient back), per tensor rank
    tp_hidden_forward_s: float  # tensor-parallel time overlapped with the GEMMs (tp_comm_overlap), per microbatch
    tp_hidden_backward_s: float  # the same for the backward pass, the recomputed forward included
    tp_bytes_forward: float  # bytes one tensor rank sends in tensor-parallel collectives, per microbatch
    tp_bytes_backward: float  # the same for the backward pass, the recomputed forward included

    @property
    def forward_s(self) -> float:
        return self.forward_compute_s + self.forward_tp_s

    @property
    def backward_s(self) -> float:
        return self.recompute_s + self.backward_compute_s + self.backward_tp_s


@dataclass(frozen=True, slots=True)
class Workload:
    chunks: tuple[ChunkCost, ...]  # by virtual stage
    optimizer_s: tuple[float, ...]  # per pipeline rank
    grad_bytes: tuple[float, ...]  # per pipeline rank: gradient bytes each rank reduces over data parallelism


_PROJECTIONS = ("qkv", "attention_output", "mlp_up", "mlp_down")
ATTENTION_CORE = ("attention_scores", "softmax_dropout", "attention_values", "flash_attention")


def split_layers(num_layers: int, parts: int) -> list[int]:
    base, extra = divmod(num_layers, parts)
    counts = [base] * parts
    order = list(range(1, parts - 1)) + [0, parts - 1] if parts > 2 else list(range(parts))
    for i in order[:extra]:
        counts[i] += 1
    return counts


def _tp_time(model: CollectiveModel, groups: list[tuple[int, ...]], size: float, sp: bool) -> float:
    if len(groups[0]) < 2:
        return 0.0
    if sp:
        return (model.isolated_time(Collective.ALL_GATHER, groups, size)
                + model.isolated_time(Collective.REDUCE_SCATTER, groups, size))
    return model.isolated_time(Collective.ALL_REDUCE, groups, size)


def build_workload(model: ModelShape, layout: Layout, gpu: GpuSpec, placement: Placement,
                   collectives: CollectiveModel, free_communication: bool = False,
                   params: CostParameters = FITTED) -> Workload:
    """Cost every chunk of the layout; pure function of its inputs. With `free_communication` the
    tensor-parallel collectives take no time."""
    b, t, p, v = layout.microbatch_size, layout.tp, layout.pp, layout.virtual_stages
    sp = layout.sequence_parallel
    full = layout.recompute is Recompute.FULL
    selective = layout.recompute is Recompute.SELECTIVE
    layer_ops = layer_forward_ops(model, b, t, sp)
    layer_fwd = ops_time(layer_ops, gpu, params)
    layer_bwd = ops_time(tuple(op.backward() for op in layer_ops), gpu, params)
    # Selective recomputation repeats the attention core (scores, softmax, dropout, values) in backward.
    core_fwd = ops_time(tuple(op for op in layer_ops if op.name in ATTENTION_CORE), gpu, params)
    gemm_fwd = ops_time(tuple(op for op in layer_ops if op.name in _PROJECTIONS), gpu, params)
    gemm_bwd = ops_time(tuple(op.backward() for op in layer_ops if op.name in _PROJECTIONS), gpu, params)
    emb_ops = embedding_forward_ops(model, b, t)
    logit_ops = logits_forward_ops(model, b, t, sp)
    emb_fwd, emb_bwd = ops_time(emb_ops, gpu, params), ops_time(_bwd(emb_ops), gpu, params)
    logit_fwd, logit_bwd = ops_time(logit_ops, gpu, params), ops_time(_bwd(logit_ops), gpu, params)
    message = b * model.seq_length * model.hidden_size * BYTES  # one microbatch's activations
    per_layer_params = model.parameters_per_layer() // t
    vocab_params = model.vocab_size * model.hidden_size // t

    counts = split_layers(model.num_layers, p * v)
    chunks = []
    for vs, layers in enumerate(counts):
        chunk, rank = divmod(vs, p)
        groups = [placement.tp_group(d, rank) for d in range(layout.dp)]
        one_tp = 0.0 if free_communication else _tp_time(collectives, groups, message, sp)
        rs_time = _one(collectives, Collective.REDUCE_SCATTER, groups, message)
        ag_time = _one(collectives, Collective.ALL_GATHER, groups, message)
        layer_tp = 2 * one_tp  # two collectives per layer per direction (Megatron's f and g operators)
        # With tp_comm_overlap the collectives run in chunks under the GEMMs that feed or consume them
        # (Megatron-Core's userbuffers): only what the GEMMs cannot cover stays on the critical path.
        exposed_fwd = max(0.0, layer_tp - gemm_fwd) if layout.tp_comm_overlap else layer_tp
        exposed_bwd = max(0.0, layer_tp - gemm_bwd) if layout.tp_comm_overlap else layer_tp
        first, last = vs == 0, vs == p * v - 1
        # The vocabulary-parallel embedding ends with an all-reduce (a reduce-scatter with sequence parallelism);
        # with sequence parallelism the logits first all-gather the final hidden states (and reduce-scatter their
        # gradient in backward): Korthikanti et al. 2022.
        emb_tp = (rs_time if sp else one_tp) if first and not free_communication else 0.0
        logit_tp = ag_time if sp and last and not free_communication else 0.0
        fwd_compute = layers * layer_fwd + (emb_fwd if first else 0.0) + (logit_fwd if last else 0.0)
        bwd_compute = layers * layer_bwd + (emb_bwd if first else 0.0) + (logit_bwd if last else 0.0)
        # The last stage holds the output layer: its own matrix when untied, a copy of the embedding when tied and
        # the pipeline has more than one stage (Megatron keeps both copies' gradients in sync).
        output_layer = last and (p * v > 1 or not model.tied_embeddings)
        weights = layers * per_layer_params + (vocab_params + model.seq_length * model.hidden_size // t
                                               if first else 0) + (vocab_params if output_layer else 0)
        chunks.append(ChunkCost(
            virtual_stage=vs, rank=rank, chunk=chunk, layers=layers, has_embedding=first, has_logits=last,
            forward_compute_s=fwd_compute, forward_tp_s=layers * exposed_fwd + emb_tp + logit_tp,
            backward_compute_s=bwd_compute, backward_tp_s=layers * exposed_bwd + logit_tp,
            recompute_s=layers * (layer_fwd + exposed_fwd) if full else layers * core_fwd if selective else 0.0,
            recompute_tp_s=layers * exposed_fwd if full else 0.0,
            tp_hidden_forward_s=layers * (layer_tp - exposed_fwd),
            tp_hidden_backward_s=layers * (layer_tp - exposed_bwd + ((layer_tp - exposed_fwd) if full else 0.0)),
            parameters=weights,
            activation_bytes=message / t,  # scatter/gather over tensor ranks (or sequence-parallel shards)
            tp_bytes_forward=_tp_bytes(t, message) * (2 * layers + (1 if first else 0)),
            tp_bytes_backward=_tp_bytes(t, message) * 2 * layers * (2 if full else 1),
        ))
    params_per_rank = [sum(c.parameters for c in chunks if c.rank == r) for r in range(p)]
    shards = layout.dp if layout.zero_stage >= 1 else 1  # ZeRO 1: each rank updates 1/dp of the parameters
    optimizer = tuple(n / shards * OPTIMIZER_BYTES_PER_PARAMETER
                      / (gpu.hbm_bandwidth_bytes_per_s * params.memory_efficiency) for n in params_per_rank)
    grads = tuple(float(n * layout.grad_reduce_bytes) if layout.dp > 1 else 0.0 for n in params_per_rank)
    return Workload(tuple(chunks), optimizer, grads)


def _one(model: CollectiveModel, kind: Collective, groups: list[tuple[int, ...]], size: float) -> float:
    return model.isolated_time(kind, groups, size) if len(groups[0]) > 1 else 0.0


def _bwd(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    return tuple(op.backward() for op in ops)


def _tp_bytes(t: int, size: float) -> float:
    """Bytes one tensor rank sends for one all-reduce (or reduce-scatter plus all-gather) of `size` bytes in a
    ring: 2(t-1)/t S."""
    if t < 2:
        return 0.0
    return 2 * (t - 1) / t * size
