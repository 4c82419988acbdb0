"""What one training iteration costs, per model chunk and per pipeline rank: the records simcore/cost/workload.py
builds and the engine runs (times per microbatch, sizes per tensor-parallel rank)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcore.cost.context_parallel import CpPass

__all__ = ["ChunkCost", "Workload"]


@dataclass(frozen=True, slots=True)
class ChunkCost:
    """One model chunk on one pipeline rank; times per microbatch, in seconds; sizes per tensor-parallel rank."""

    virtual_stage: int
    rank: int
    chunk: int
    layers: int
    layer_counts: tuple[tuple[str, int], ...]  # its layers by kind ("transformer", or "encoder"/"decoder")
    has_embedding: bool  # it embeds tokens: the first chunk, and the one that starts a decoder
    embeds_target: bool  # it embeds an encoder-decoder model's target tokens
    has_logits: bool
    forward_compute_s: float
    forward_tp_s: float
    backward_compute_s: float
    backward_tp_s: float
    recompute_s: float  # the recomputed forward, its tensor-parallel collectives included
    recompute_tp_s: float
    parameters: int
    input_bytes: float  # the message it receives in forward (and whose gradient it sends back), per tensor rank
    tp_hidden_forward_s: float  # tensor-parallel time overlapped with the GEMMs (tp_comm_overlap), per microbatch
    tp_hidden_backward_s: float  # the same for the backward pass, the recomputed forward included
    tp_bytes_forward: float  # bytes one tensor rank sends in tensor-parallel collectives, per microbatch
    tp_bytes_backward: float  # the same for the backward pass, the recomputed forward included
    # Context parallelism (cp > 1): each pass as its layers' segments (compute, ring steps, exchanges) for the
    # engine to run as events (simcore/cost/context_parallel.py); None without it.
    cp_forward: CpPass | None = None
    cp_backward: CpPass | None = None
    gemm_fraction: float = 1.0  # of its compute time, the share in GEMMs and attention (its layers')
    tp_message_bytes: float = 0.0  # one tensor-parallel all-reduce's buffer: its first layer's hidden states
    # Mixture of experts (simcore/cost/moe.py): the all-to-alls (and expert-TP collectives) per microbatch,
    # the recomputed forward's in recompute_ep_s (also inside recompute_s), bytes one rank sends, and the expert
    # weights among `parameters` (reduced over the expert data-parallel group, not dp x cp).
    forward_ep_s: float = 0.0
    backward_ep_s: float = 0.0
    recompute_ep_s: float = 0.0
    ep_bytes_forward: float = 0.0
    ep_bytes_backward: float = 0.0
    expert_parameters: int = 0
    # Expert gradients reduce over the expert data-parallel group (edp = tp*cp*dp / (ep*expert_tp)), not dp x cp:
    # the bytes each rank sends in a ring over edp, per byte it would send over dp x cp.
    expert_reduce_ratio: float = 1.0
    # Of backward_compute_s, the weight-gradient GEMMs (W) and the embedding's gradient: what a zero-bubble
    # schedule defers; the rest of the backward pass is B, the input gradient the previous stage waits for.
    backward_weight_s: float = 0.0
    # Mixture of experts, for DualPipe's overlapped pairs (simcore/engine/pair_overlap.py): its MoE layers, their
    # forward and backward kernels (W included; and apart) before the dispatch all-to-all (attention, router,
    # permutation) and after it (experts, unpermutation, shared experts), summed over the layers; how much slower
    # compute runs beside one of its all-to-alls (simcore/cost/comm/interference.py; 1 without interference).
    moe_layers: int = 0
    moe_forward_s: tuple[float, float] = (0.0, 0.0)
    moe_backward_s: tuple[float, float] = (0.0, 0.0)
    moe_weight_s: tuple[float, float] = (0.0, 0.0)  # of moe_backward_s, the weight gradients (W)
    ep_slowdown: float = 1.0

    # Of `parameters`, the frozen base weights of a LoRA run (simcore/cost/compute/lora.py): no gradient, optimizer
    # state or data-parallel traffic.
    frozen_parameters: int = 0
    # Of `parameters`, the weights of its FP8 GEMMs (FP8 training; simcore/cost/compute/fp8.py): what
    # layout.fp8_param_gather keeps and all-gathers as FP8.
    fp8_parameters: float = 0.0
    # Under a low precision, the GEMM weights of its layers kept in BF16 (layout.bf16_layers): no FP8/FP4 copies.
    bf16_gemm_weights: float = 0.0
    # Its data-parallel gradient buckets (elements of reduced_parameters), in the order backward makes them ready
    # (simcore/cost/comm/grad_buckets.py); empty: not bucketed yet (the engine then takes equal layers).
    grad_buckets: tuple[int, ...] = ()

    @property
    def reduced_parameters(self) -> int:
        """The parameters whose gradients the data-parallel reduction carries, the experts' weighted by
        expert_reduce_ratio (the engine's buckets run on the dp x cp group); frozen ones carry none."""
        dense = self.parameters - self.expert_parameters - self.frozen_parameters
        return dense + round(self.expert_parameters * self.expert_reduce_ratio)

    @property
    def forward_s(self) -> float:
        return self.forward_compute_s + self.forward_tp_s + self.forward_ep_s

    def slowed(self, factor: float) -> ChunkCost:
        """The chunk on a GPU whose compute takes `factor` times as long (a straggler): its kernels, the
        recomputed forward's included, scale; its tensor-parallel collectives do not (they wait for it, which
        the longer compute before them already is)."""
        recompute_kernels = self.recompute_s - self.recompute_tp_s - self.recompute_ep_s
        # Context parallelism's passes run their segments: every compute segment scales (the tensor-parallel
        # time folded into them too, an approximation); the ring's sends do not. The all-to-alls do not either.
        return replace(self, forward_compute_s=self.forward_compute_s * factor,
                       backward_compute_s=self.backward_compute_s * factor,
                       backward_weight_s=self.backward_weight_s * factor,
                       moe_forward_s=(self.moe_forward_s[0] * factor, self.moe_forward_s[1] * factor),
                       moe_backward_s=(self.moe_backward_s[0] * factor, self.moe_backward_s[1] * factor),
                       moe_weight_s=(self.moe_weight_s[0] * factor, self.moe_weight_s[1] * factor),
                       recompute_s=recompute_kernels * factor + self.recompute_tp_s + self.recompute_ep_s,
                       cp_forward=self.cp_forward.scaled(factor) if self.cp_forward else None,
                       cp_backward=self.cp_backward.scaled(factor) if self.cp_backward else None)

    @property
    def backward_s(self) -> float:
        return self.recompute_s + self.backward_compute_s + self.backward_tp_s + self.backward_ep_s

    @property
    def backward_input_s(self) -> float:
        """B: the recomputed forward, the input-gradient GEMMs, the memory-bound backward kernels and the
        backward's tensor-parallel collectives and all-to-alls (the input gradient is what they carry)."""
        return (self.recompute_s + (self.backward_compute_s - self.backward_weight_s) + self.backward_tp_s
                + self.backward_ep_s)


@dataclass(frozen=True, slots=True)
class Workload:
    chunks: tuple[ChunkCost, ...]  # by virtual stage
    optimizer_s: tuple[float, ...]  # per pipeline rank
    grad_bytes: tuple[float, ...]  # per pipeline rank: gradient bytes each rank reduces over data parallelism
    encoder_stages: int = 0  # pipeline ranks holding the encoder (encoder-decoder models)
    # Tied embeddings under pipelining: the ranks that hold a copy of the shared word embedding (the first stage,
    # a decoder's first stage, the last stage's output layer) all-reduce its gradient after the data-parallel
    # reduction, before the step (Megatron-Core's finalize_model_grads, _allreduce_word_embedding_grads);
    # bytes per tensor rank. Empty when there is no second copy.
    embedding_sync_ranks: tuple[int, ...] = ()
    embedding_sync_bytes: float = 0.0
