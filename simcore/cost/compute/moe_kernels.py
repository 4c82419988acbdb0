"""The forward kernels of a transformer layer whose attention is multi-head latent attention (MLA) or whose MLP
is a mixture of experts: simcore/cost/compute/kernels.py's dense layer with those blocks replaced (simcore/cost/moe.py
describes the MoE block as Megatron-Core runs it). A dense model's layers are kernels.py's, unchanged.

MLA (DeepSeek-V3 §2.1.1; Megatron-Core's MLASelfAttention), per tensor rank with a/t heads, on the b·s tokens:
the query down projection h -> q_lora_rank and the key/value down projection h -> kv_lora_rank + rope dims are
replicated on every tensor rank (plain linears), each followed by its latent norm; the up projections are split
by heads: q_lora_rank -> heads x (nope + rope), kv_lora_rank -> heads x (nope + v_head_dim); the fused attention
works on query/key heads of nope + rope dims and value heads of v_head_dim; the output projection is row-split.

The sequence contains a `HOST_SYNC` marker where the MoE dispatcher copies the token counts to the host:
`sequence_time` costs the kernels before and after it as two host-issued sequences (kernel_time.ops_time each) plus
the synchronisation.
"""

from __future__ import annotations

from dataclasses import replace

from simcore.cost.compute.eager import eager_elementwise
from simcore.cost.compute.kernel_time import ops_time
from simcore.cost.compute.kernels import (
    BYTES,
    NORM_BACKWARD_BYTES,
    Op,
    OpKind,
    fp8_ops,
    gemm_op,
    grouped_gemm_op,
    layer_forward_ops,
    memory_op,
)
from simcore.cost.compute.lora import adapted_kernels, lora_layer_ops
from simcore.cost.compute.weight_gradients import weight_share
from simcore.cost.moe import (
    HOST_SYNC_S,
    MOE_BLOCK,
    MOE_HOST_KERNEL_S,
    ROUTER_SCORE_BYTES,
    expert_load,
    grouped_gemm_tokens,
)
from simcore.cost.parameters import CostParameters
from simcore.domain.layout import Fp8Recipe
from simcore.domain.model import LayerType, ModelShape
from topology.hardware import GpuSpec

HOST_SYNC = "moe_host_sync"
_MLP = ("mlp_up", "activation", "mlp_down")
_ATTENTION = ("qkv", "flash_attention", "attention_scores", "softmax_dropout", "attention_values",
              "attention_output")


def transformer_layer_ops(model: ModelShape, b: int, t: int, sequence_parallel: bool, layer: LayerType,
                          fp8: Fp8Recipe | None = None, ep: int = 1, expert_tp: int = 1,
                          eager: bool = False) -> tuple[Op, ...]:
    """Forward kernels of one layer on one rank: kernels.layer_forward_ops, with MLA's attention and the MoE
    block where the model has them (ep and expert_tp fold the experts over the stage's ranks); `eager`: its
    norms, rotary embedding and gated activation as PyTorch eager kernels (simcore/cost/compute/eager.py)."""
    ops = layer_forward_ops(model, b, t, sequence_parallel, layer)
    if eager:
        ops = eager_elementwise(ops, model, b, t, layer)
    if model.mla is None and not layer.moe:
        # (an adapted projection gets its norm's 16-bit output: NeMo's LoRA sets return_layernorm_output, which
        # turns Transformer Engine's quantized norm off, layernorm_linear.py `with_quantized_norm`)
        unfused = frozenset(adapted_kernels(model.lora)) if model.lora is not None else frozenset()
        ops = ops if fp8 is None else fp8_ops(ops, fp8, unfused)
        return ops if model.lora is None else lora_layer_ops(ops, model.lora, t)
    out: list[Op] = []
    attention_done = mlp_done = False
    for op in ops:
        if model.mla is not None and op.name in _ATTENTION:
            if not attention_done:
                out += _mla_ops(model, b, t, layer)
                attention_done = True
        elif layer.moe and op.name in _MLP:
            if not mlp_done:
                out += _moe_ops(model, b, t, ep, expert_tp, fp8 is not None)
                mlp_done = True
        else:
            out.append(op)
    ops = tuple(out) if fp8 is None else fp8_ops(tuple(out), fp8)
    if not layer.moe:
        return ops
    # the MoE block's kernels are issued by its Python path (routing, permutation, the per-expert splits)
    return tuple(replace(op, host_s=MOE_HOST_KERNEL_S) if _in_moe_block(op.name) else op for op in ops)


def _in_moe_block(name: str) -> bool:
    return name.removeprefix("fp8_quantize_") in MOE_BLOCK


def _mla_ops(model: ModelShape, b: int, t: int, layer: LayerType) -> list[Op]:
    mla = model.mla
    assert mla is not None
    tokens, h, a = b * layer.seq, model.hidden_size, model.num_attention_heads / t
    qk, dv = model.head_dim + mla.qk_rope_head_dim, mla.v_head_dim
    ops: list[Op] = []
    if mla.q_lora_rank:
        ops += [gemm_op("q_down", tokens, mla.q_lora_rank, h),
                memory_op("q_norm", 2 * BYTES * tokens * mla.q_lora_rank, NORM_BACKWARD_BYTES),
                gemm_op("q_up", tokens, a * qk, mla.q_lora_rank)]
    else:
        ops.append(gemm_op("q_up", tokens, a * qk, h))
    ops += [gemm_op("kv_down", tokens, mla.kv_lora_rank + mla.qk_rope_head_dim, h),
            memory_op("kv_norm", 2 * BYTES * tokens * mla.kv_lora_rank, NORM_BACKWARD_BYTES),
            gemm_op("kv_up", tokens, a * (model.head_dim + dv), mla.kv_lora_rank)]
    s = layer.seq
    # scores over qk dims and values over v dims; a causal kernel skips the masked half
    work = 2.0 * b * a * s * s * (qk + dv) * (0.5 if layer.causal else 1.0)
    ops.append(Op("flash_attention", OpKind.FLASH, work, BYTES * b * s * a * (2 * qk + 2 * dv)))
    ops.append(gemm_op("attention_output", tokens, h, a * dv))
    return ops


def _moe_ops(model: ModelShape, b: int, t: int, ep: int, expert_tp: int, fp8: bool = False) -> list[Op]:
    moe = model.moe
    assert moe is not None
    h, e = model.hidden_size, moe.num_experts
    load = expert_load(model, moe, b, t, ep, expert_tp)
    up = 2 if model.gated_mlp else 1
    f = moe.ffn_hidden_size / expert_tp
    scores = load.tokens * e
    ops = [
        gemm_op("router", load.tokens, e, h),
        # fused softmax + top-k: reads the scores, writes the probabilities and the routing map (1 byte)
        memory_op("router_topk", scores * (2 * ROUTER_SCORE_BYTES + 1), 1.0),
        # load-balancing loss and the tokens-per-expert count read the probabilities and the map
        memory_op("router_aux_loss", scores * (ROUTER_SCORE_BYTES + 1), 1.0),
        # the fused permutation gathers each routed copy's hidden state (and its probability)
        memory_op("permute", BYTES * h * (load.tokens + load.sent), 1.0),
    ]
    if moe.capacity_factor is None:
        # dropless: the all-to-all's split sizes are copied to the host before it runs (token_dispatcher.py's
        # cuda_sync_point "before_ep_alltoall"); with a capacity the buffers are padded to it and need none
        ops.append(Op(HOST_SYNC, OpKind.MEMORY, 0.0, 0.0))
    if load.local_experts > 1:  # the received chunks are sorted by local expert, and back after the experts
        ops.append(memory_op("sort_chunks", 2 * BYTES * h * load.received, 1.0))
    rows = grouped_gemm_tokens(load.per_expert)
    # FP8 dropless: TEGroupedMLP pads each expert's rows to the FP8 GEMM's alignment (Transformer Engine's
    # Fp8Padding, fused_multi_row_padding: a copy of the received copies and their probabilities, skipped only when
    # every expert's count is already aligned, which routed counts are not) and unpads fc2's output
    # (Fp8Unpadding); backward copies the gradients back through both
    pad = fp8 and moe.capacity_factor is None
    if pad:
        ops.append(memory_op("expert_fp8_pad", 2 * load.received * (BYTES * h + ROUTER_SCORE_BYTES), 1.0))
    # one grouped GEMM for all local experts (Megatron-Core's TEGroupedMLP, moe_grouped_gemm), fc1 and fc2
    ops.append(grouped_gemm_op("expert_fc1", rows, up * f, h, load.local_experts))
    ops.append(memory_op("expert_activation", BYTES * load.received * f * (up + 1), (2 * up + 1) / (up + 1)))
    ops.append(grouped_gemm_op("expert_fc2", rows, h, f, load.local_experts))
    if pad:
        ops.append(memory_op("expert_fp8_unpad", 2 * BYTES * h * load.received, 1.0))
    if load.local_experts > 1:
        ops.append(memory_op("unsort_chunks", 2 * BYTES * h * load.received, 1.0))
    # the weighted scatter-add back to each token; its backward gathers the gradient to every copy and, for the
    # routing probabilities' gradient, reads the copies' expert outputs again (Transformer Engine's fused
    # moe_unpermute backward takes the forward input beside the gradient when the probabilities are given)
    unpermute = load.sent + load.tokens
    ops.append(memory_op("unpermute", BYTES * h * unpermute, (load.tokens + 2 * load.sent) / unpermute))
    if moe.num_shared_experts:
        fs, tokens = moe.num_shared_experts * moe.ffn_hidden_size / t, b * model.seq_length
        ops += [gemm_op("shared_fc1", tokens, up * fs, h),
                memory_op("shared_activation", BYTES * tokens * fs * (up + 1), (2 * up + 1) / (up + 1)),
                gemm_op("shared_fc2", tokens, h, fs)]
    return ops


def sequence_time(ops: tuple[Op, ...], gpu: GpuSpec, params: CostParameters) -> float:
    """Seconds for a layer's kernels: kernel_time.ops_time of the kernels between host synchronisations, plus each
    synchronisation's own time."""
    if not any(op.name == HOST_SYNC for op in ops):
        return ops_time(ops, gpu, params)
    total, segment = 0.0, list[Op]()
    for op in ops:
        if op.name == HOST_SYNC:
            total += (ops_time(tuple(segment), gpu, params) if segment else 0.0) + HOST_SYNC_S
            segment = []
        else:
            segment.append(op)
    return total + (ops_time(tuple(segment), gpu, params) if segment else 0.0)


def backward_ops(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    """The backward kernels of a forward sequence (the host synchronisation is forward only: backward reuses
    the split sizes)."""
    return tuple(op.backward() for op in ops if op.name != HOST_SYNC)


def dispatch_split(ops: tuple[Op, ...], gpu: GpuSpec, params: CostParameters
                   ) -> tuple[float, float, float, float]:
    """Of a MoE layer's forward and of its backward kernel time, the share on the attention side of its dispatch
    all-to-all: the kernels up to the permutation and the host synchronisation (attention, router, permute), and
    their backward, which runs after the dispatch's gradient comes back. The experts, the unpermutation and the
    shared experts are the rest (simcore/engine/pair_overlap.py runs the two sides around the all-to-alls). Then
    of each side's backward (attention side, expert side) the share in weight gradients (W)."""
    names = [op.name for op in ops]
    if "permute" not in names:
        return 0.0, 0.0, 0.0, 0.0
    cut = names.index("permute") + 1
    if cut < len(ops) and names[cut] == HOST_SYNC:
        cut += 1
    before, after = ops[:cut], ops[cut:]
    forward = (sequence_time(before, gpu, params), sequence_time(after, gpu, params))
    backward = (ops_time(backward_ops(before), gpu, params), ops_time(backward_ops(after), gpu, params))
    return (forward[0] / sum(forward) if sum(forward) > 0 else 0.0,
            backward[0] / sum(backward) if sum(backward) > 0 else 0.0,
            weight_share(backward_ops(before), gpu, params), weight_share(backward_ops(after), gpu, params))
