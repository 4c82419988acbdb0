"""Memory per GPU of each pipeline stage: model states, activations in flight, buffers (bytes, then GiB).

Model states (Rajbhandari et al., ZeRO, §3; mixed-precision Adam): 2 bytes of 16-bit weights, 2 of 16-bit
gradients and 12 of optimizer states (fp32 master weights, two moments) per parameter = 16 bytes. ZeRO 1 divides
the optimizer states by dp, ZeRO 2 the gradients too, ZeRO 3 the weights too.

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

from dataclasses import dataclass

from simcore.layout import Layout, Recompute
from simcore.model import AttentionKind, ModelShape
from simcore.schedules import BACKWARD, POLICIES
from simcore.workload import Workload
from topology.hardware import GIB

BYTES = 2
WEIGHT_BYTES, GRADIENT_BYTES, OPTIMIZER_BYTES = 2, 2, 12
# CUDA context, cuBLAS workspaces and NCCL's channel buffers: about a gibibyte on a training process.
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


def layer_activation_bytes(model: ModelShape, b: int, t: int, sequence_parallel: bool, recompute: Recompute) -> float:
    """Bytes one transformer layer keeps for backward, per microbatch, per GPU."""
    s, h, d, f = model.seq_length, model.hidden_size, model.head_dim, model.ffn_hidden_size
    a, g = model.num_attention_heads, model.num_kv_heads
    up = 2 if model.gated_mlp else 1
    if recompute is Recompute.FULL:
        return BYTES * s * b * h / (t if sequence_parallel else 1)
    replicated = s * b * (4 * h + 3 * h + 3 * h)
    split = s * b * (2 * (2 * a * d + 2 * g * d) + 2 * f * up + 2 * f)
    core = 0.0
    if recompute is Recompute.NONE and model.attention is AttentionKind.STANDARD:
        core = 5.0 * a * s * s * b
    return (replicated / (t if sequence_parallel else 1)) + split / t + core / t


def _full_layer_bytes(model: ModelShape, layout: Layout) -> float:
    return layer_activation_bytes(model, layout.microbatch_size, layout.tp, layout.sequence_parallel, Recompute.NONE)


def in_flight(layout: Layout, rank: int, layers_of_chunk: dict[int, int]) -> float:
    """Most transformer layers' worth of microbatch activations the rank holds at once under its schedule."""
    passes = POLICIES[layout.schedule].passes(rank, layout.pp, layout.num_microbatches, layout.virtual_stages)
    held = peak = 0
    for ps in passes:
        held += layers_of_chunk[ps.chunk] * (-1 if ps.direction == BACKWARD else 1)
        peak = max(peak, held)
    return float(peak)


def stage_memory(model: ModelShape, layout: Layout, workload: Workload) -> tuple[StageMemory, ...]:
    """Per pipeline rank, the peak memory the iteration needs."""
    b, t, dp, zero = layout.microbatch_size, layout.tp, layout.dp, layout.zero_stage
    per_layer = layer_activation_bytes(model, b, t, layout.sequence_parallel, layout.recompute)
    message = BYTES * b * model.seq_length * model.hidden_size
    out = []
    for rank in range(layout.pp):
        chunks = [c for c in workload.chunks if c.rank == rank]
        params = sum(c.parameters for c in chunks)
        layers = {c.chunk: c.layers for c in chunks}
        activations = in_flight(layout, rank, layers) * per_layer
        if layout.recompute is Recompute.FULL:
            activations += _full_layer_bytes(model, layout)  # the layer being recomputed
        if any(c.has_embedding for c in chunks):
            activations += b * model.seq_length * model.hidden_size  # embedding dropout mask
        if any(c.has_logits for c in chunks):
            activations += 4.0 * b * model.seq_length * model.vocab_size / t  # fp32 logits for the loss
        buffers = RUNTIME_BYTES + (2 * message / t if layout.pp > 1 else 0.0)  # send and receive buffers
        largest_layer = max((c.parameters / max(c.layers, 1) for c in chunks), default=0.0)
        if zero >= 3:
            buffers += 2 * WEIGHT_BYTES * largest_layer  # the gathered layer and the prefetched next one
        out.append(StageMemory(
            weights=WEIGHT_BYTES * params / (dp if zero >= 3 else 1),
            gradients=GRADIENT_BYTES * params / (dp if zero >= 2 else 1),
            optimizer_states=OPTIMIZER_BYTES * params / (dp if zero >= 1 else 1),
            activations=activations,
            buffers=buffers,
        ))
    return tuple(out)
