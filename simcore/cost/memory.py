"""Memory per GPU of each pipeline stage: model states, activations in flight, buffers (bytes, then GiB).

Model states (Rajbhandari et al., ZeRO, §3; mixed-precision Adam): 2 bytes of 16-bit weights, 2 of 16-bit
gradients and 12 of optimizer states (fp32 master weights, two moments) per parameter = 16 bytes. ZeRO 1 divides
the optimizer states by dp, ZeRO 2 the gradients too, ZeRO 3 the weights too. FP8 training adds, to the
weights, the FP8 copies of the GEMM weights that its recipe keeps over an iteration (simcore/cost/fp8.py); its
activations are counted at 16 bits as in BF16 training (Transformer Engine keeps some GEMM inputs as FP8 copies
instead, which is not modelled: an upper bound).

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

Microbatches in flight come from the schedule itself: the most forward passes a rank has run whose backward has
not run yet (per chunk, weighted by the chunk's layers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from simcore.cost.fp8 import FP8_WEIGHT_COPY_BYTES
from simcore.cost.workload import Workload, fp8_gemm_weights
from simcore.domain.layout import Layout, Recompute, Schedule
from simcore.domain.model import AttentionKind, LayerType, ModelShape
from simcore.domain.schedules import BACKWARD, POLICIES
from topology.hardware import GIB

BYTES = 2
WEIGHT_BYTES, GRADIENT_BYTES, OPTIMIZER_BYTES = 2, 2, 12
# CUDA context, cuBLAS workspaces and NCCL's channel buffers on a training process: an estimate, neither measured
# here nor fitted (no reference row checks memory). Its parts: the CUDA context with PyTorch's kernels loaded
# (several hundred MiB), cuBLAS workspaces (CUBLAS_WORKSPACE_CONFIG's default :4096:8, 32 MiB a stream: PyTorch's
# reproducibility notes), NCCL's buffers (NCCL_BUFFSIZE, 4 MiB per channel and peer: NCCL's environment
# documentation) for each communicator; about a gibibyte in all.
RUNTIME_BYTES = 1.0 * GIB


@dataclass(frozen=True, slots=True)
class StageMemory:
    """Bytes per GPU of one pipeline rank."""

    weights: float
    gradients: float
    optimizer_states: float
    activations: float
    buffers: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer_states + self.activations + self.buffers


def layer_activation_bytes(model: ModelShape, b: int, t: int, sequence_parallel: bool, recompute: Recompute,
                           layer: LayerType | None = None) -> float:
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
    split = s * b * (2 * (2 * a * d + 2 * g * d) + 2 * f * up + 2 * f)
    core = 5.0 * a * s * s * b if keep_core else 0.0
    if layer.cross_seq:
        e = layer.cross_seq
        replicated += 5 * s * b * h
        split += 4 * s * b * a * d + 4 * e * b * g * d
        core += 5.0 * a * s * e * b if keep_core else 0.0
    return (replicated / (t if sequence_parallel else 1)) + split / t + core / t


def _full_layer_bytes(model: ModelShape, layout: Layout, layer: LayerType) -> float:
    return layer_activation_bytes(model, layout.microbatch_size, layout.tp, layout.sequence_parallel, Recompute.NONE,
                                  layer)


def in_flight(layout: Layout, rank: int, bytes_of_chunk: Mapping[int, float]) -> float:
    """The most microbatch activations the rank holds at once under its schedule, given what one microbatch of
    each of its chunks keeps (in any unit: layers or bytes)."""
    m = layout.num_microbatches
    if len(bytes_of_chunk) == 1 and layout.schedule is not Schedule.INTERLEAVED_1F1B:
        # One chunk: 1F1B holds its pp - rank - 1 warm-up forwards plus one, GPipe every microbatch (the same
        # as walking the schedule below, which the tests check).
        (one,) = bytes_of_chunk.values()
        return float((min(layout.pp - rank, m) if layout.schedule is Schedule.ONE_F_ONE_B else m) * one)
    return walk_in_flight(layout, rank, bytes_of_chunk)


def walk_in_flight(layout: Layout, rank: int, bytes_of_chunk: Mapping[int, float]) -> float:
    """`in_flight` by walking the rank's passes in its schedule's order."""
    chunks = sorted(bytes_of_chunk)
    counts = _held_counts(layout.schedule, rank, layout.pp, layout.num_microbatches, layout.virtual_stages,
                          tuple(chunks))
    weights = [bytes_of_chunk[c] for c in chunks]
    return float(max((sum(n * w for n, w in zip(held, weights)) for held in counts), default=0.0))


@lru_cache(maxsize=4096)
def _held_counts(schedule: Schedule, rank: int, pp: int, m: int, v: int,
                 chunks: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The distinct numbers of microbatches a rank holds per chunk (in `chunks` order) after each of its
    forward passes: what it holds in bytes at its peak is the largest of these weighted by each chunk's bytes,
    whatever those are (the same peak as walking the passes with the bytes, up to the rounding of the sums), so
    one walk of the schedule serves every microbatch size and recomputation."""
    index = {c: i for i, c in enumerate(chunks)}
    held = [0] * len(chunks)
    seen: dict[tuple[int, ...], None] = {}
    for ps in POLICIES[schedule].passes(rank, pp, m, v):
        if ps.direction == BACKWARD:
            held[index[ps.chunk]] -= 1
        else:
            held[index[ps.chunk]] += 1
            seen[tuple(held)] = None
    return tuple(seen)


def stage_memory(model: ModelShape, layout: Layout, workload: Workload) -> tuple[StageMemory, ...]:
    """Per pipeline rank, the peak memory the iteration needs."""
    b, t, dp, zero = layout.microbatch_size, layout.tp, layout.dp, layout.zero_stage
    sp = layout.sequence_parallel
    kinds = {layer.kind: layer for layer, _ in model.layer_stacks()}
    per_layer = {kind: layer_activation_bytes(model, b, t, sp, layout.recompute, layer)
                 for kind, layer in kinds.items()}
    # A decoder stage keeps each microbatch's encoder output, which all its layers' cross-attention read.
    encoder_output = BYTES * b * model.seq_length * model.hidden_size / (t if sp else 1)
    largest_message = max((c.input_bytes for c in workload.chunks), default=0.0)
    out = []
    for rank in range(layout.pp):
        chunks = [c for c in workload.chunks if c.rank == rank]
        params = sum(c.parameters for c in chunks)
        held = {c.chunk: sum(n * per_layer[kind] for kind, n in c.layer_counts)
                + (encoder_output if any(kind == "decoder" for kind, _ in c.layer_counts) else 0.0) for c in chunks}
        activations = in_flight(layout, rank, held)
        if layout.recompute is Recompute.FULL:  # the layer being recomputed
            activations += max(_full_layer_bytes(model, layout, kinds[kind]) for c in chunks
                               for kind, _ in c.layer_counts)
        # Embedding dropout masks: the first stage's on the (encoder's) tokens, the decoder's on the target's.
        if any(c.virtual_stage == 0 for c in chunks):
            activations += b * model.seq_length * model.hidden_size
        if any(c.embeds_target for c in chunks):
            activations += b * model.decoder_seq_length * model.hidden_size
        if any(c.has_logits for c in chunks):
            activations += 4.0 * b * model.output_seq_length * model.vocab_size / t  # fp32 logits for the loss
        buffers = RUNTIME_BYTES + (2 * largest_message if layout.pp > 1 else 0.0)  # send and receive buffers
        largest_layer = max((c.parameters / max(c.layers, 1) for c in chunks), default=0.0)
        if zero >= 3:
            buffers += 2 * WEIGHT_BYTES * largest_layer  # the gathered layer and the prefetched next one
        weights = float(WEIGHT_BYTES * params)
        if layout.fp8 is not None:  # the FP8 copies (and transposes) of the GEMM weights the recipe keeps
            weights += FP8_WEIGHT_COPY_BYTES[layout.fp8] * fp8_gemm_weights(model, workload.chunks, rank, t)
        out.append(StageMemory(
            weights=weights / (dp if zero >= 3 else 1),
            gradients=GRADIENT_BYTES * params / (dp if zero >= 2 else 1),
            optimizer_states=OPTIMIZER_BYTES * params / (dp if zero >= 1 else 1),
            activations=activations,
            buffers=buffers,
        ))
    return tuple(out)
