"""Memory per GPU of each pipeline stage: model states, activations in flight, buffers (bytes, then GiB).

Model states (Rajbhandari et al., ZeRO, §3; mixed-precision Adam): 2 bytes of 16-bit weights, the gradients and
12 of optimizer states (fp32 master weights, two moments) per parameter. Megatron-Core (zero_implementation
megatron) keeps its gradients in its gradient buffer, whose dtype is the reduction's (`layout.reduce_dtype`):
megatron/core/distributed/param_and_grad_buffer.py allocates grad_data of every parameter in fp32 when
DistributedDataParallelConfig.grad_reduce_in_fp32, else in the parameters' dtype (group_params_for_buffers), and
Megatron-LM sets it for bf16 unless --grad-reduce-in-bf16 (arguments.py validate_args; NVIDIA/Megatron-LM
@d98e8a64): 4 bytes a parameter by default for bf16 and FP8 training (18 bytes in all), 2 for fp16. The buffer is
whole on every rank with DDP and the distributed optimizer (ZeRO 0 and 1: the optimizer's fp32 main gradients are
views of it) and sharded over dp by ZeRO 2 and 3 (Megatron-FSDP's sharded main gradients). FSDP and DeepSpeed's
ZeRO 3 count 2 bytes: FSDP2 keeps fp32 sharded parameters, which are the master weights, and fp32 sharded
gradients (4 + 4 + 8 moments = the same 16 bytes as 2 + 2 + 12); DeepSpeed keeps 16-bit parameter and gradient
partitions beside its fp32 master weights and moments. LoRA's frozen base weights (simcore/cost/compute/lora.py) hold
their 2 bytes only: gradients and optimizer states are the adapters'. ZeRO 1 divides the optimizer states by dp, ZeRO 2
the gradients too, ZeRO 3 the weights too. FP8 training adds, to the weights, the FP8 copies of the GEMM weights
that its recipe keeps over an iteration (simcore/cost/compute/fp8.py); with `fp8_param_gather` and Megatron-Core
(or LoRA's `fp8_params`) those FP8 tensors are the parameters, so the GEMM weights' 2 bytes go (fp8_params.py), and
ZeRO 3's gathered layers hold them in FP8 (FSDP's too: torchao's float8 all-gather). Its activations are counted
at 16 bits as in BF16 training (Transformer Engine keeps some GEMM inputs as FP8 copies instead, which is not
modelled: an upper bound); FP8 attention keeps Q, K and V in FP8 (simcore/cost/compute/fp8_attention.py).

Activations per transformer layer per microbatch (Korthikanti et al. 2022, §4, 16-bit activations, 1-byte
dropout masks), written out per stored tensor so that GQA, gated MLPs and ffn != 4h are counted:
- kept on every tensor rank (unless sequence parallel): the two layer-norm inputs (4sbh), the attention block's
  input and dropout mask (3sbh), the MLP block's input and dropout mask (3sbh): 10sbh;
- split over tensor ranks: Q, K, V and the attention output (2sb(2ad + 2gd)), the MLP's first product and its
  activation (2sb·f·up + 2sb·f): 24sbh for a GPT;
- the attention core: softmax output, dropout mask and dropout output, 5as²b (split over tensor ranks); not
  stored with selective recomputation or a fused (flash) kernel.
For a GPT this is sbh(10 + 24/t + 5as/(ht)), or sbh/t(34 + 5as/h) with sequence parallelism, or 34sbh/t with
selective recomputation too. Full recomputation keeps only each layer's input (2sbh, /t with sequence
parallelism) plus one layer's full activations while it is recomputed.

Microbatches in flight: the most forward passes a rank has run whose backward has not (per chunk, by its layers).

`stage_memory` runs in three steps, each a function of fewer inputs than the last, so that a layout search
(simcore.planning.prune) can share them between the layouts that agree on those inputs: `memory_shape` (what
each rank holds of the workload), `rank_holdings` (its activations and buffers under the layout's schedule,
microbatch and recomputation) and `sharded` (ZeRO's division of the model states over dp).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from simcore.cost.compute.fp8 import FP8_WEIGHT_COPY_BYTES, fp8_weight_elements, parameter_gather_bytes
from simcore.cost.compute.fp8_attention import saved_qkv_saving
from simcore.cost.context_parallel import kv_buffer_bytes, local_model
from simcore.cost.moe import mla_attention_activation_elements, moe_activation_bytes
from simcore.cost.workload import ChunkCost, Workload
from simcore.cost.zeropp import secondary_shard_bytes
from simcore.domain.grad_reduce import GRAD_REDUCE_DTYPE_BYTES
from simcore.domain.hybrid_shard import shard_ranks
from simcore.domain.layout import Layout, Recompute, Schedule, ZeroImplementation
from simcore.domain.model import AttentionKind, LayerType, ModelShape
from simcore.domain.schedules import (
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    FORWARD,
    OVERLAPPED,
    POLICIES,
    releases_activations,
)
from topology.hardware import GIB

BYTES = 2
WEIGHT_BYTES, GRADIENT_BYTES, OPTIMIZER_BYTES = 2, 2, 12
# CUDA context, cuBLAS workspaces and NCCL's channel buffers on a training process: an estimate, neither measured
# here nor fitted (no reference row checks memory). Its parts: the CUDA context with PyTorch's kernels loaded
# (several hundred MiB), cuBLAS workspaces (CUBLAS_WORKSPACE_CONFIG's default :4096:8, 32 MiB a stream: PyTorch's
# reproducibility notes), NCCL's buffers (NCCL_BUFFSIZE, 4 MiB per channel and peer: NCCL's environment
# documentation) for each communicator; about a gibibyte in all.
RUNTIME_BYTES = 1.0 * GIB
# Tensor-parallel communication overlap (tp_comm_overlap) runs on Transformer Engine's userbuffers: Megatron-Core
# calls te.module.base.initialize_ub(shape=[seq_length * micro_batch_size / cp, hidden_size]) once per process,
# which registers one communicator, with a buffer of that shape, per overlapped GEMM: 4 ring-exchange (qkv_fprop,
# fc1_fprop, proj_dgrad, fc2_dgrad), 2 pipelined (proj_fprop, fc2_fprop), 4 bulk (qkv/fc1 dgrad and wgrad) and
# 2 external (proj_wgrad, fc2_wgrad); the 8 all-gather buffers hold FP8 (1 byte) in FP8 training, the rest 16
# bits (TransformerEngine @d0067d0: transformer_engine/pytorch/module/base.py, initialize_ub; common/
# comm_gemm_overlap/comm_gemm_overlap.cpp registers a buffer of the whole shape for each, the ring-exchange ones
# all-gathers; Megatron-LM _initialize_tp_communicators). Small at 4K tokens, 12 GiB at 128K tokens of h = 4096.
USERBUFFER_GEMMS, USERBUFFER_ALL_GATHERS = 12, 8
# Schedules whose passes split the backward pass (the inputs of deferred W are held) or overlap two microbatches.
SPLITS = frozenset({Schedule.ZB_H1, Schedule.ZB_H2, Schedule.ZB_V, Schedule.DUALPIPE})


@dataclass(frozen=True, slots=True)
class StageMemory:
    """Bytes per GPU of one pipeline rank."""

    weights: float
    gradients: float
    optimizer_states: float
    activations: float
    buffers: float
    # Of the weights, gradients and optimizer states above, the experts' (a mixture-of-experts model's routed
    # experts, sharded over the expert data-parallel group): the breakdown shows them apart.
    expert_weights: float = 0.0
    expert_gradients: float = 0.0
    expert_optimizer_states: float = 0.0

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer_states + self.activations + self.buffers


def layer_activation_bytes(model: ModelShape, b: int, t: int, sequence_parallel: bool, recompute: Recompute,
                           layer: LayerType | None = None, expert_tp: int = 1) -> float:
    """Bytes one transformer layer keeps for backward, per microbatch, per GPU (the model's main layer unless
    `layer` says otherwise). A decoder layer with cross-attention also keeps, on its s target tokens, the block's
    norm input, query-projection input and dropout mask (5sbh), the queries and the attention context (4sb·ad),
    the keys and values projected from the encoder's e tokens (4eb·gd) and, unless recomputed or fused, the
    softmax output, mask and dropout output (5a·s·e·b). The encoder output it reads is kept once per microbatch
    per stage, not per layer (see `stage_memory`)."""
    layer = layer or model.main_layer()
    s, h, d, f = layer.seq, model.hidden_size, model.head_dim, model.ffn_hidden_size
    a, g = model.num_attention_heads, model.num_kv_heads
    up = 2 if model.gated_mlp else 1
    if recompute is Recompute.FULL:
        return BYTES * s * b * h / (t if sequence_parallel else 1)
    keep_core = recompute is Recompute.NONE and model.attention is AttentionKind.STANDARD
    replicated = s * b * (4 * h + 3 * h + 3 * h)
    split: float = s * b * (2 * (2 * a * d + 2 * g * d) + 2 * f * up + 2 * f)
    if model.mla is not None or layer.moe:
        split = s * b * (mla_attention_activation_elements(model) + (0 if layer.moe else 2 * f * up + 2 * f))
    if layer.moe:
        # per rank already (its sequence-parallel shard of tokens): add back the factor t divided below
        split += t * moe_activation_bytes(model, b, t, expert_tp)
    core = 5.0 * a * s * s * b if keep_core else 0.0
    if layer.cross_seq:
        e = layer.cross_seq
        replicated += 5 * s * b * h
        split += 4 * s * b * a * d + 4 * e * b * g * d
        core += 5.0 * a * s * e * b if keep_core else 0.0
    return (replicated / (t if sequence_parallel else 1)) + split / t + core / t


def weight_gradient_bytes(model: ModelShape, b: int, t: int, sequence_parallel: bool,
                          layer: LayerType | None = None) -> float:
    """Bytes one layer keeps per microbatch between its input gradient (I) and its deferred weight gradient (W):
    the inputs of its weight GEMMs (QKV and MLP-up read the normed hidden states, the attention output reads the
    attention context, MLP-down the activation) and the gradients of their outputs, which W multiplies
    (dW = X^T dY); 16-bit. What the zero-bubble schedules hold for deferred W (Qi et al. 2024, section 3)."""
    layer = layer or model.main_layer()
    s, h, d, f = layer.seq, model.hidden_size, model.head_dim, model.ffn_hidden_size
    a, g = model.num_attention_heads, model.num_kv_heads
    up = 2 if model.gated_mlp else 1
    full = h / (t if sequence_parallel else 1)  # a hidden-state tensor: sharded only with sequence parallelism
    inputs = 2 * full + a * d / t + f / t
    output_grads = (a + 2 * g) * d / t + 2 * full + up * f / t
    return BYTES * s * b * (inputs + output_grads)


def _full_layer_bytes(model: ModelShape, layout: Layout, layer: LayerType) -> float:
    return layer_activation_bytes(model, layout.microbatch_size, layout.tp, layout.sequence_parallel, Recompute.NONE,
                                  layer)


def in_flight(layout: Layout, rank: int, bytes_of_chunk: Mapping[int, float],
              deferred_of_chunk: Mapping[int, float] | None = None) -> float:
    """The most microbatch activations the rank holds at once under its schedule, given what one microbatch of
    each of its chunks keeps (in any unit: layers or bytes) until its backward pass, and, for schedules that
    split it, what it keeps from its input gradient to its deferred weight gradient (`deferred_of_chunk`)."""
    m = layout.num_microbatches
    if deferred_of_chunk is not None and layout.schedule in SPLITS:
        return walk_in_flight(layout, rank, bytes_of_chunk, deferred_of_chunk)
    if len(bytes_of_chunk) == 1 and layout.schedule in (Schedule.ONE_F_ONE_B, Schedule.GPIPE):
        # One chunk: 1F1B holds its pp - rank - 1 warm-up forwards plus one, GPipe every microbatch (the same
        # as walking the schedule below, which the tests check).
        (one,) = bytes_of_chunk.values()
        return float((min(layout.pp - rank, m) if layout.schedule is Schedule.ONE_F_ONE_B else m) * one)
    return walk_in_flight(layout, rank, bytes_of_chunk)


def walk_in_flight(layout: Layout, rank: int, bytes_of_chunk: Mapping[int, float],
                   deferred_of_chunk: Mapping[int, float] | None = None) -> float:
    """`in_flight` by walking the rank's passes in its schedule's order."""
    chunks = sorted(bytes_of_chunk)
    split = deferred_of_chunk is not None and layout.schedule in SPLITS
    counts = _held_counts(layout.schedule, rank, layout.pp, layout.num_microbatches, layout.shape.chunks,
                          tuple(chunks), split)
    weights = [bytes_of_chunk[c] for c in chunks]
    if split:
        assert deferred_of_chunk is not None
        weights += [deferred_of_chunk[c] for c in chunks]
    return float(max((sum(n * w for n, w in zip(held, weights)) for held in counts), default=0.0))


@lru_cache(maxsize=4096)
def _held_counts(schedule: Schedule, rank: int, pp: int, m: int, v: int,
                 chunks: tuple[int, ...], split: bool = False) -> tuple[tuple[int, ...], ...]:
    """The numbers of microbatches a rank holds per chunk (in `chunks` order) after each of its forward passes,
    those that no other one holds at least as many of in every chunk: what it holds in bytes at its peak is the
    largest of these weighted by each chunk's bytes, whatever those are (the same peak as walking the passes with
    the bytes, up to the rounding of the sums), so one walk of the schedule serves every microbatch size and
    recomputation. A dominated count is dropped because it can never weigh more: with weights >= 0 each product
    and each partial sum of the dominating count is at least as large, in floating point too (rounding is
    monotone), so the maximum is the same number."""
    index = {c: i for i, c in enumerate(chunks)}
    # with `split`, a second count per chunk: the microbatches between their input and weight gradients
    deferred = len(chunks)
    held = [0] * (2 * deferred if split else deferred)
    seen: dict[tuple[int, ...], None] = {}
    for ps in POLICIES[schedule].passes(rank, pp, m, v):
        k = index[ps.chunk]
        if ps.direction == BACKWARD_INPUT:
            held[k] -= 1
            if split:
                held[deferred + k] += 1
                seen[tuple(held)] = None
        elif ps.direction == BACKWARD_WEIGHT:
            if split:
                held[deferred + k] -= 1
        elif ps.direction == OVERLAPPED:  # the forward half holds its microbatch before the backward half frees one
            held[k] += 1
            seen[tuple(held)] = None
            held[index[ps.backward_chunk]] -= 1
        elif releases_activations(ps.direction):
            held[k] -= 1
        elif ps.direction == FORWARD:
            held[k] += 1
            seen[tuple(held)] = None
    front: list[tuple[int, ...]] = []
    for count in sorted(seen, key=sum, reverse=True):  # a dominating count sums to more: it comes first
        if not any(all(a <= b for a, b in zip(count, kept)) for kept in front):
            front.append(count)
    return tuple(front)


@dataclass(frozen=True, slots=True)
class RankChunks:
    """What memory reads of one pipeline rank's model chunks in a workload."""

    chunks: tuple[tuple[int, tuple[tuple[str, int], ...], bool], ...]  # chunk, its layers by kind, holds a decoder
    kinds: tuple[str, ...]  # the kinds of layer the rank holds
    parameters: int  # per tensor rank
    largest_layer_parameters: float  # of its largest layer: what ZeRO 3 gathers at once
    embeds_tokens: bool  # it holds the first virtual stage
    embeds_target: bool  # it embeds an encoder-decoder model's target tokens
    has_logits: bool
    expert_parameters: int = 0  # of `parameters`: the experts it holds (sharded by ZeRO over expert dp)
    frozen_parameters: int = 0  # of `parameters`: frozen base weights (LoRA): no gradients, no optimizer states
    bf16_gemm_weights: float = 0.0  # its BF16 layers' GEMM weights (layout.bf16_layers): no FP8/FP4 copies


@dataclass(frozen=True, slots=True)
class MemoryShape:
    """What memory reads of a workload: each rank's chunks and the largest message between stages (bytes)."""

    ranks: tuple[RankChunks, ...]
    largest_message_bytes: float


def memory_shape(workload: Workload, pp: int) -> MemoryShape:
    """The workload's chunks by pipeline rank, as memory reads them (each chunk's rank, layers, parameters, input
    message and what it embeds): the same for every schedule, microbatch count, ZeRO stage and dp."""
    of_rank: list[list[ChunkCost]] = [[] for _ in range(pp)]
    for c in workload.chunks:
        of_rank[c.rank].append(c)
    ranks = tuple(RankChunks(
        chunks=tuple((c.chunk, c.layer_counts, any(kind == "decoder" for kind, _ in c.layer_counts))
                     for c in chunks),
        kinds=tuple(dict.fromkeys(kind for c in chunks for kind, _ in c.layer_counts)),
        parameters=sum(c.parameters for c in chunks),
        largest_layer_parameters=max((c.parameters / max(c.layers, 1) for c in chunks), default=0.0),
        embeds_tokens=any(c.virtual_stage == 0 or (c.has_embedding and not c.embeds_target) for c in chunks),
        embeds_target=any(c.embeds_target for c in chunks), has_logits=any(c.has_logits for c in chunks),
        expert_parameters=sum(c.expert_parameters for c in chunks),
        frozen_parameters=sum(c.frozen_parameters for c in chunks),
        bf16_gemm_weights=sum(c.bf16_gemm_weights for c in chunks),
    ) for chunks in of_rank)
    return MemoryShape(ranks, max((c.input_bytes for c in workload.chunks), default=0.0))


@dataclass(frozen=True, slots=True)
class RankHolding:
    """What one pipeline rank holds per GPU before ZeRO shards its model states (see `sharded`)."""

    parameters: int  # per tensor rank
    largest_layer_parameters: float  # of its largest layer: what ZeRO 3 gathers at once
    activations: float  # bytes at its peak
    buffers: float  # bytes: runtime and pipeline send and receive buffers
    fp8_weight_bytes: float = 0.0  # FP8 training: the FP8 copies of its GEMM weights (sharded like the weights)
    expert_parameters: int = 0  # of `parameters`: its experts' (ZeRO shards them over the expert dp group)
    frozen_parameters: int = 0  # of `parameters`: frozen base weights (LoRA): weights only
    fp8_parameters: float = 0.0  # FP8 training: of `parameters`, its FP8 GEMMs' weights


def rank_holdings(model: ModelShape, layout: Layout, shape: MemoryShape) -> tuple[RankHolding, ...]:
    """Per pipeline rank, its parameters and its peak activations and buffers. Of the layout it reads the
    microbatch size, tp, sequence parallelism, recomputation, schedule, pp, virtual stages, number of
    microbatches and the FP8 recipe, not dp or the ZeRO stage (`sharded` applies those), so that a search can
    share it between layouts that differ only there."""
    b, t, sp = layout.microbatch_size, layout.tp, layout.sequence_parallel
    # Context parallelism: a rank keeps the activations of its s/cp tokens, plus the K/V blocks in flight while a
    # layer's attention runs (simcore/cost/context_parallel.py).
    ring_buffers = kv_buffer_bytes(model, layout)
    model = local_model(model, layout.cp)
    kinds = {layer.kind: layer for layer, _ in model.layer_stacks()}
    per_layer = {kind: layer_activation_bytes(model, b, t, sp, layout.recompute, layer, layout.expert_tp)
                 - saved_qkv_saving(model, layout, layer) for kind, layer in kinds.items()}  # FP8 attention's Q, K, V
    deferred_layer = {kind: weight_gradient_bytes(model, b, t, sp, layer) for kind, layer in kinds.items()}
    full = layout.recompute is Recompute.FULL
    # with full recomputation, the layer being recomputed keeps all its activations
    recomputed = {kind: _full_layer_bytes(model, layout, layer) for kind, layer in kinds.items()} if full else {}
    # A decoder stage keeps each microbatch's encoder output, which all its layers' cross-attention read.
    encoder_output = BYTES * b * model.seq_length * model.hidden_size / (t if sp else 1)
    buffers = RUNTIME_BYTES + (2 * shape.largest_message_bytes if layout.pp > 1 else 0.0)  # send and receive
    buffers += ring_buffers + userbuffer_bytes(model, layout)
    out = []
    for rank, r in enumerate(shape.ranks):
        held = {chunk: sum(n * per_layer[kind] for kind, n in counts) + (encoder_output if decoder else 0.0)
                for chunk, counts, decoder in r.chunks}
        deferred = {chunk: sum(n * deferred_layer[kind] for kind, n in counts) for chunk, counts, _ in r.chunks}
        activations = in_flight(layout, rank, held, deferred)
        if full:
            activations += max(recomputed[kind] for kind in r.kinds)
        # Embedding dropout masks: the first stage's on the (encoder's) tokens, the decoder's on the target's.
        if r.embeds_tokens:
            activations += b * model.seq_length * model.hidden_size
        if r.embeds_target:
            activations += b * model.decoder_seq_length * model.hidden_size
        if r.has_logits:  # fp32 logits for the loss, and those of each multi-token prediction depth
            activations += (1 + model.mtp_layers) * 4.0 * b * model.output_seq_length * model.vocab_size / t
        fp8_copies = fp8_elements = 0.0
        if layout.fp8 is not None:  # the FP8 copies (and transposes) of the GEMM weights the recipe keeps
            fp8_elements = sum(n * fp8_weight_elements(model, kinds[kind], t) for _chunk, counts, _decoder in r.chunks
                               for kind, n in counts) - r.bf16_gemm_weights  # BF16 layers: no FP8 copies
            fp8_copies = FP8_WEIGHT_COPY_BYTES[layout.fp8] * fp8_elements
            fp8_elements = min(fp8_elements, float(r.parameters))
        if r.expert_parameters:  # the dispatch and combine buffers of one layer: the routed copies, sent and received
            activations += 2 * 2 * BYTES * b * model.seq_length / t * _top_k(model) * model.hidden_size
        out.append(RankHolding(r.parameters, r.largest_layer_parameters, activations, buffers, fp8_copies,
                               r.expert_parameters, r.frozen_parameters, fp8_elements))
    return tuple(out)


def userbuffer_bytes(local: ModelShape, layout: Layout) -> float:
    """Bytes of the userbuffers tp_comm_overlap registers per GPU (see USERBUFFER_GEMMS); `local` is the model a
    rank runs (s/cp tokens a sample with context parallelism)."""
    if not layout.tp_comm_overlap or layout.tp == 1:
        return 0.0
    elements = local.seq_length * layout.microbatch_size * local.hidden_size
    fp8_gathers = USERBUFFER_ALL_GATHERS if layout.fp8 is not None else 0
    return elements * (BYTES * (USERBUFFER_GEMMS - fp8_gathers) + 1 * fp8_gathers)


def _top_k(model: ModelShape) -> int:
    return model.moe.top_k if model.moe is not None else 0


def sharded(holdings: tuple[RankHolding, ...], layout: Layout) -> tuple[StageMemory, ...]:
    """Each rank's memory once ZeRO shards its model states: dense states over its dp x cp ranks (HSDP: its shard
    group), expert states over the expert data-parallel group (parallel folding: tp*cp*dp / (ep*expert_tp))."""
    dp, zero = shard_ranks(layout), layout.zero_stage
    edp = layout.expert_dp
    grad_bytes = gradient_bytes(layout)
    # Megatron-Core's fp8_param_gather, LoRA's fp8_params: the FP8 GEMM weights are the parameters (no 16-bit copy).
    fp8_params = layout.fp8_params or layout.fp8_param_gather and layout.zero_implementation == "megatron"

    def states(per_parameter: float, h: RankHolding, stage: int) -> float:
        if stage < 3 and h.frozen_parameters:  # gradients and optimizer states of what trains (LoRA's adapters)
            return per_parameter * (h.parameters - h.frozen_parameters) / (dp if zero >= stage else 1)
        if zero < stage:
            return per_parameter * h.parameters
        if not h.expert_parameters:
            return per_parameter * h.parameters / dp
        dense, experts = h.parameters - h.expert_parameters, h.expert_parameters
        return per_parameter * (dense / dp + experts / edp)

    def expert_states(per_parameter: float, h: RankHolding, stage: int) -> float:
        return per_parameter * h.expert_parameters / (edp if zero >= stage else 1)

    return tuple([StageMemory(
        states(WEIGHT_BYTES, h, 3) + (h.fp8_weight_bytes - (WEIGHT_BYTES * h.fp8_parameters if fp8_params else 0.0))
        / (dp if zero >= 3 else 1) + secondary_shard_bytes(layout, h.parameters),
        states(grad_bytes, h, 2),
        states(OPTIMIZER_BYTES, h, 1),
        h.activations,
        # ZeRO 3: the gathered layer and the prefetched next one (16-bit, or its FP8 weights in FP8)
        h.buffers + 2 * parameter_gather_bytes(layout, h.parameters, h.fp8_parameters) * h.largest_layer_parameters
        if zero >= 3 else h.buffers,
        expert_states(WEIGHT_BYTES, h, 3), expert_states(grad_bytes, h, 2), expert_states(OPTIMIZER_BYTES, h, 1),
    ) for h in holdings])


def gradient_bytes(layout: Layout) -> int:
    """Bytes a parameter's gradient occupies (module docstring): Megatron-Core's gradient buffer in the
    reduction's dtype; FSDP's and DeepSpeed's GRADIENT_BYTES."""
    if layout.zero_implementation is not ZeroImplementation.MEGATRON:
        return GRADIENT_BYTES
    return GRAD_REDUCE_DTYPE_BYTES[layout.reduce_dtype]


def stage_memory(model: ModelShape, layout: Layout, workload: Workload) -> tuple[StageMemory, ...]:
    """Per pipeline rank, the peak memory the iteration needs."""
    return sharded(rank_holdings(model, layout, memory_shape(workload, layout.pp)), layout)
