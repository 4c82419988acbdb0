"""Context parallelism's attention, per layer and microbatch on one rank: the blocks it computes and what it sends.

Megatron-Core splits each sample's s tokens over cp ranks in 2*cp chunks of c = s/(2cp) tokens; rank r holds
chunks r and 2cp-1-r, so that under a causal mask every rank has the same work (Transformer Engine,
transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py @d0067d0). Everything but the
attention core works on the rank's s/cp tokens alone; the core needs every earlier token's keys and values:

- `p2p` (AttnFuncWithCPAndKVP2P, the default): cp steps. At step i a rank posts the send of the K/V block it
  holds to the next rank of the ring (and the receive of the previous rank's) and computes its queries against
  the block of step i; the next step waits for that receive. Step 0 is the diagonal tile (its own K/V, causal: a
  2c x 2c causal kernel); every later tile computes half a block: all 2c queries against the earlier half of the
  K/V block (c keys) or the later half of the queries (c) against the whole block (2c), 2c^2 score pairs either
  way. Without a causal mask every step is a full 2c x 2c block. The last step sends nothing: cp - 1 sends of
  K and V in forward. Backward runs the same ring with the gradients: at step 0 it sends K/V, at steps 1 to
  cp - 2 K/V together with the dK/dV accumulated so far, at the last step dK/dV only (home to their owner), each
  overlapped with that step's backward block and waited for at the step's end. So a rank sends
  (cp - 1)/cp x 2 x s x b x g x d x 2 bytes per layer in forward and twice that in backward.
- `all_gather` (AttnFuncWithCPAndKVAllGather, Llama 3's; TE: "KV all-gather between CP ranks is exposed"): K and V
  are all-gathered before attention, then the rank's two query chunks run against the key prefix each needs (a
  bottom-right causal mask); backward all-gathers K and V again, runs both chunks' backward and reduce-scatters
  dK and dV.
- `a2a` (AttnFuncWithCPAndQKVOA2A, "like Ulysses, applying A2A to QKVO", DeepSpeed-Ulysses, Jacobs et al. 2023;
  Megatron-LM's --cp-comm-type a2a): an all-to-all over the CP group trades the rank's s/cp tokens of every head for
  all s tokens of 1/cp of the heads (flash_attn_a2a_communicate, before_attn: Q, K and V one after another), one
  fused kernel then attends the whole (causal) sequence with a/cp query and g/cp key/value heads, and a second
  all-to-all returns the output to the sequence split (O). Backward: dO all-to-all, the kernel's backward, then
  dQ, dK and dV all-to-all. Each all-to-all sends (cp-1)/cp of the rank's buffer; the compute stream waits for it
  (the collectives run on cp_stream and the function ends with current_stream().wait_stream(cp_stream)). With
  per-tensor FP8 attention Q, K, V (quantized before the exchange), O and dO travel as FP8 bytes (uint8), as do dQ,
  dK and dV under delayed scaling (current scaling sends them in 16 bits: not told apart here, as for the ring).

What each step exposes is what its attention block cannot hide: max(0, send - block). The engine runs the steps
as events (simcore/engine/context_parallel.py); the sends are flows on the real links of the ring, the all-to-alls
flows between every pair of the CP group.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcore.cost.comm.collectives import Collective
from simcore.cost.compute.flash2 import flash2_op
from simcore.cost.compute.fp8_attention import fp8_flash, ring_element_bytes
from simcore.cost.compute.kernel_time import ops_time
from simcore.cost.compute.kernels import ATTENTION_CORE, Op, flash_attention_op
from simcore.cost.parameters import CostParameters
from simcore.domain.layout import CpComm, Layout, Recompute
from simcore.domain.model import LayerType, ModelShape
from topology.hardware import GpuSpec

__all__ = ["AllToAll", "AttentionRing", "CpPass", "Exchange", "RingStep", "Segment", "attention_ring",
           "kv_buffer_bytes", "local_model", "pass_plans", "split_at_attention"]


@dataclass(frozen=True, slots=True)
class RingStep:
    """One step of the ring: the attention block computed (s) while `send_bytes` go to the next rank (0: none);
    the step ends when both have."""

    compute_s: float
    send_bytes: float


@dataclass(frozen=True, slots=True)
class Exchange:
    """A collective on the context-parallel group that the compute stream waits for (all_gather's K/V gathers and
    dK/dV reduce-scatters), on a buffer of `size_bytes`."""

    kind: Collective
    size_bytes: float


@dataclass(frozen=True, slots=True)
class AllToAll:
    """An all-to-all over the context-parallel group that the compute stream waits for (a2a's Q/K/V, O, dO and
    dQ/dK/dV exchanges): each rank's buffer of `size_bytes`, (cp-1)/cp of it sent to the other ranks."""

    size_bytes: float


Segment = float | RingStep | Exchange | AllToAll  # a float: compute with no communication (s)


@dataclass(frozen=True, slots=True)
class AttentionRing:
    """One layer's attention under context parallelism, per microbatch on one rank (tensor rank included)."""

    forward: tuple[Segment, ...]
    backward: tuple[Segment, ...]

    @property
    def forward_s(self) -> float:
        return _compute(self.forward)

    @property
    def backward_s(self) -> float:
        return _compute(self.backward)

    @property
    def forward_bytes(self) -> float:
        return _sent(self.forward)

    @property
    def backward_bytes(self) -> float:
        return _sent(self.backward)


@dataclass(frozen=True, slots=True)
class CpPass:
    """A pass of a model chunk under context parallelism: `extra_s` of work outside its layers (embedding, logits,
    run first), then `layers` times the segments of one layer."""

    extra_s: float
    layer: tuple[Segment, ...]
    layers: int

    @property
    def sent_bytes(self) -> float:
        return self.layers * _sent(self.layer)

    def scaled(self, factor: float) -> CpPass:
        """The pass on a GPU whose compute takes `factor` times as long (a straggler): its sends unchanged."""
        def one(segment: Segment) -> Segment:
            if isinstance(segment, float):
                return segment * factor
            if isinstance(segment, RingStep):
                return RingStep(segment.compute_s * factor, segment.send_bytes)
            return segment
        return CpPass(self.extra_s * factor, tuple(one(s) for s in self.layer), self.layers)


def _compute(segments: tuple[Segment, ...]) -> float:
    return sum(s if isinstance(s, float) else s.compute_s for s in segments if isinstance(s, float | RingStep))


def _sent(segments: tuple[Segment, ...]) -> float:
    """Bytes one rank sends: ring sends, and a ring collective's (cp-1)/cp of its buffer (added by the caller)."""
    return sum(s.send_bytes for s in segments if isinstance(s, RingStep))


def local_model(model: ModelShape, cp: int) -> ModelShape:
    """The model as one context-parallel rank runs it outside the attention core: s/cp tokens a sample."""
    return model if cp == 1 else replace(model, seq_length=model.seq_length // cp)


def split_at_attention(ops: tuple[Op, ...]) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """A layer's kernels before its attention core and after it (the core itself left out)."""
    first = next(i for i, op in enumerate(ops) if op.name in ATTENTION_CORE)
    last = max(i for i, op in enumerate(ops) if op.name in ATTENTION_CORE)
    return ops[:first], ops[last + 1:]


def kv_block_bytes(model: ModelShape, layout: Layout) -> float:
    """Bytes of the K and V one rank holds for one microbatch: 2 x b x s/cp x g x d x 2 (g: its tensor rank's
    key/value heads, all of them replicated when tp exceeds them); x 1 with FP8 attention's FP8 ring."""
    g = max(model.num_kv_heads / layout.tp, 1.0)
    tokens = layout.microbatch_size * (model.seq_length / layout.cp)
    return 2.0 * tokens * g * model.head_dim * ring_element_bytes(layout)


def attention_ring(model: ModelShape, layer: LayerType, layout: Layout, gpu: GpuSpec,
                   params: CostParameters) -> AttentionRing:
    """The attention core of one layer on context-parallel rank 0 (every rank does the same work): its blocks and
    sends (p2p), its blocks and collectives (all_gather), or its kernel between all-to-alls (a2a)."""
    b, cp = layout.microbatch_size, layout.cp
    a, g, d = model.num_attention_heads / layout.tp, max(model.num_kv_heads / layout.tp, 1.0), model.head_dim
    c = model.seq_length / (2 * cp)
    kv = kv_block_bytes(model, layout)

    def kernel(op: Op) -> Op:  # the fused kernel as the layout runs it (FP8, FlashAttention-2)
        return flash2_op(fp8_flash(op, layout), layout)

    def block(s_q: float, s_kv: float, computed: float) -> tuple[float, float]:
        op = kernel(flash_attention_op("flash_attention", b, a, g, d, s_q, s_kv, computed))
        return ops_time((op,), gpu, params), ops_time((op.backward(),), gpu, params)

    if layout.cp_comm is CpComm.A2A:
        # the whole sequence (2cp chunks of c) for a/cp query and g/cp key/value heads (the validated split)
        op = kernel(flash_attention_op("flash_attention", b, a / cp, g / cp, d, 2 * cp * c, 2 * cp * c,
                                       0.5 if layer.causal else 1.0))
        forward_s, backward_s = ops_time((op,), gpu, params), ops_time((op.backward(),), gpu, params)
        q = b * (model.seq_length / cp) * a * d * ring_element_bytes(layout)  # the rank's Q (and O, dO, dQ)
        qkv = q + kv
        return AttentionRing(forward=(AllToAll(qkv), RingStep(forward_s, 0.0), AllToAll(q)),
                             backward=(AllToAll(q), RingStep(backward_s, 0.0), AllToAll(qkv)))
    if layout.cp_comm is CpComm.ALL_GATHER:
        # Chunk r = 0 runs against keys [0, c), chunk 2cp-1 against all 2cp*c keys, causal from the bottom right
        # (a c x n block keeps c*n - c*c/2 pairs); without a mask each chunk sees all keys.
        if layer.causal:
            blocks = [block(c, c, 0.5), block(c, 2 * cp * c, 1 - 1 / (4 * cp))]
        else:
            blocks = [block(c, 2 * cp * c, 1.0), block(c, 2 * cp * c, 1.0)]
        gathered = kv * cp  # the whole sequence's K and V: the all-gather's (and reduce-scatter's) buffer
        return AttentionRing(
            forward=(Exchange(Collective.ALL_GATHER, gathered), *(RingStep(f, 0.0) for f, _ in blocks)),
            backward=(Exchange(Collective.ALL_GATHER, gathered), *(RingStep(bw, 0.0) for _, bw in blocks),
                      Exchange(Collective.REDUCE_SCATTER, gathered)))
    if layer.causal:
        steps = [block(2 * c, 2 * c, 0.5)] + [block(c, 2 * c, 1.0)] * (cp - 1)
    else:
        steps = [block(2 * c, 2 * c, 1.0)] * cp
    forward = tuple(RingStep(f, kv if i < cp - 1 else 0.0) for i, (f, _) in enumerate(steps))
    # Backward: K/V at step 0, K/V with dK/dV in between, dK/dV alone at the last step (cp = 2: K/V, then dK/dV).
    sends = [kv] + [2 * kv] * (cp - 2) + [kv]
    backward = tuple(RingStep(bw, sent) for (_, bw), sent in zip(steps, sends))
    return AttentionRing(forward, backward)


def pass_plans(ring: AttentionRing, pre: tuple[float, float], post: tuple[float, float], recompute: Recompute,
               layers: int, forward_total_s: float, backward_total_s: float) -> tuple[CpPass, CpPass]:
    """The forward and backward passes of a chunk of `layers` layers as segments. `pre` and `post` are one
    layer's (forward, backward) seconds of the kernels before and after its attention core (its exposed
    tensor-parallel time in `post`); the chunk's totals give the work outside the layers. Backward runs each
    layer's recomputation before its backward: the whole forward (full), or the attention core with its ring
    (selective: Megatron recomputes the core attention, communication included)."""
    forward_layer = (pre[0], *ring.forward, post[0])
    backward_layer: tuple[Segment, ...] = (post[1], *ring.backward, pre[1])
    if recompute is Recompute.FULL:
        backward_layer = forward_layer + backward_layer
    elif recompute is Recompute.SELECTIVE:
        backward_layer = ring.forward + backward_layer
    return (CpPass(max(0.0, forward_total_s - layers * _compute(forward_layer)), forward_layer, layers),
            CpPass(max(0.0, backward_total_s - layers * _compute(backward_layer)), backward_layer, layers))


def kv_buffer_bytes(model: ModelShape, layout: Layout) -> float:
    """Transient bytes of K/V in flight while one layer's attention runs (per GPU): p2p's forward keeps every
    step's received block until the layer's output is corrected (cp blocks), its backward two double buffers of
    K/V and dK/dV (4 blocks); all_gather holds the gathered K/V, and in backward dK/dV of the whole sequence too;
    a2a the reordered copies of the rank's Q, K and V beside them (the all-to-all's input and output)."""
    if layout.cp == 1:
        return 0.0
    kv = kv_block_bytes(model, layout)
    if layout.cp_comm is CpComm.A2A:
        q = layout.microbatch_size * (model.seq_length / layout.cp) * model.num_attention_heads / layout.tp \
            * model.head_dim * ring_element_bytes(layout)
        return 2.0 * (q + kv)
    if layout.cp_comm is CpComm.ALL_GATHER:
        return 2.0 * layout.cp * kv
    return max(layout.cp, 4) * kv
