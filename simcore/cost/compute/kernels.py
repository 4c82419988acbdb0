"""FLOPs and bytes of every kernel of a transformer layer (their time on a GPU: simcore/cost/compute/kernel_time.py).

Shapes per tensor-parallel rank: b = microbatch size, s = sequence length, h = hidden size, a = attention heads,
g = key/value heads, d = head dimension, f = MLP hidden size, t = tensor-parallel size, V = vocabulary.
Activations are 16-bit (2 bytes). Matrix products follow Megatron's split: QKV and MLP-up by columns, the
attention output and MLP-down by rows. With sequence parallelism the norms and dropouts work on s/t tokens;
without it every tensor-parallel rank repeats them on all s tokens.

Backward: each matrix product runs twice (input gradient and weight gradient), the fused attention kernel does
FLASH_BACKWARD_FACTOR times its forward work, and each memory-bound kernel moves what its backward kernel reads
and writes, counted per kernel below (its `backward_bytes` factor).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from simcore.cost.compute.fp8 import (
    AMAX_BYTES,
    FUSED_NORM_SAVING_BYTES,
    OPERAND_BYTES,
    QUANTIZE_BYTES,
    TRANSPOSE_BYTES,
    scale_update_bytes,
)
from simcore.cost.compute.gemm_shape import Product, gradient_products
from simcore.cost.parameters import (
    FLASH_BACKWARD_FACTOR,
)
from simcore.domain.layout import Fp8Recipe
from simcore.domain.model import AttentionKind, LayerType, ModelShape

BYTES = 2  # 16-bit activations and weights


# Kernel names by role: the attention core (what selective recomputation repeats) and the projections (what
# tensor-parallel communication can hide under); cross-attention's carry a "cross_" prefix.
ATTENTION_CORE = ("attention_scores", "softmax_dropout", "attention_values", "flash_attention",
                  "cross_attention_scores", "cross_softmax_dropout", "cross_attention_values", "cross_flash_attention")
PROJECTIONS = ("qkv", "attention_output", "mlp_up", "mlp_down", "cross_q", "cross_kv", "cross_attention_output")
# Multi-head latent attention's projections and the experts' (simcore/cost/compute/moe_kernels.py): FP8 GEMMs too.
LATENT_AND_EXPERT_PROJECTIONS = ("q_down", "q_up", "kv_down", "kv_up", "expert_fc1", "expert_fc2", "shared_fc1",
                                 "shared_fc2")
# The projections whose norm Transformer Engine runs inside them, and that norm (Megatron-Core's
# TELayerNormColumnParallelLinear: the layer's input norm with QKV, the pre-MLP norm with the MLP's first GEMM, MLA's
# q/kv norms with q_up/kv_up): it hands the GEMM its quantized input (simcore/cost/compute/fp8.py). Not the
# cross-attention's query: Megatron-Core's encoder-decoder spec runs its norm as a TENorm of its own.
NORM_FED = {"qkv": "layernorm", "mlp_up": "layernorm", "q_up": "q_norm", "kv_up": "kv_norm"}


# Blackwell takes Hopper's fitted half time, and its 16-bit GEMM efficiency read against the measured GEMM
# ceilings (simcore/cost/compute/gemm_ceilings.py): the reference data holds no 16-bit Blackwell run to fit them on. Ada
# (L40S, sm_89) takes Ampere's: it runs the Ampere family's mma.sync kernels, and no Ada run was fitted.
FITTED_GENERATION = {"blackwell": "hopper", "ada": "ampere"}


class OpKind(StrEnum):
    GEMM = "gemm"
    FLASH = "flash"
    MEMORY = "memory"


@dataclass(frozen=True, slots=True)
class Op:
    name: str
    kind: OpKind
    flops: float
    bytes: float
    backward_bytes: float = 2.0  # backward traffic over forward traffic
    elements_in: float = 0.0  # a GEMM's m x k input operand (elements), what FP8 quantizes before it
    elements_out: float = 0.0  # its m x n output, whose gradient FP8 quantizes before the backward GEMMs
    fp8: bool = False  # runs on the FP8 tensor cores (simcore/cost/compute/fp8.py)
    fp4: bool = False  # runs on the FP4 tensor cores (NVFP4, simcore/cost/compute/nvfp4.py)
    host_s: float | None = None  # host time to issue it; None: HOST_DISPATCH_S (simcore/cost/moe.py sets its own)
    shape: Product | None = None  # a GEMM's (forward) product, which the shape model costs (gemm_shape.py)
    gradient: bool = False  # the backward of a shaped GEMM: its two gradient products
    weight: bool = False  # a GEMM by a layer's weight, whose weight gradient accumulates into fp32 main_grad
    group: int = 1  # GEMMs in one grouped kernel (the local experts' GroupedLinear: shape.batch of them)
    fused_host: bool = False  # issued inside the preceding kernel's framework call: no host time of its own
    # by a frozen weight (LoRA, simcore/cost/compute/lora.py): its backward is the input gradient only
    frozen: bool = False
    backward_pass: bool = False  # a backward kernel (what `backward()` returns)
    flash2: bool = False  # a fused attention kernel run by FlashAttention-2 (simcore/cost/compute/flash2.py)

    def backward(self) -> Op:
        if self.frozen:  # dX = dY W^T alone: the forward's FLOPs, one product of its own shape, no weight gradient
            shape = gradient_products(self.shape)[0] if self.shape is not None else None
            return Op(self.name + "_bwd", self.kind, self.flops, self.bytes, fp8=self.fp8, fp4=self.fp4,
                      host_s=self.host_s, shape=shape, group=self.group, fused_host=self.fused_host, frozen=True,
                      backward_pass=True, flash2=self.flash2)
        factor = FLASH_BACKWARD_FACTOR if self.kind is OpKind.FLASH else 2.0
        return Op(self.name + "_bwd", self.kind, self.flops * factor, self.bytes * self.backward_bytes,
                  fp8=self.fp8, fp4=self.fp4, host_s=self.host_s, shape=self.shape, gradient=self.shape is not None,
                  weight=self.weight, group=self.group, fused_host=self.fused_host, backward_pass=True,
                  flash2=self.flash2)


# Backward traffic over forward traffic of the memory-bound kernels, from what each kernel reads and writes:
# layer norm reads x and writes y; its backward reads x and dy and writes dx (3/2). Scale-mask-softmax reads the
# scores and writes the probabilities, dropout reads them and writes them and a 1-byte mask (9 bytes a score);
# backward: softmax reads y and dy and writes dx, dropout reads dy and the mask and writes dx (11/9). Bias-
# dropout-residual reads x and the residual and writes y and a mask (7 bytes an element); backward reads dy and
# the mask and writes dx (5/7). An activation reads its input(s) and writes its output; backward reads the
# input(s) and dy and writes d(input(s)).
_NORM_BWD = 3 / 2
_SOFTMAX_DROPOUT_BWD = 11 / 9
_DROPOUT_RESIDUAL_BWD = 5 / 7


def _gemm(name: str, m: float, n: float, k: float, batch: float = 1.0, weight: bool = True) -> Op:
    """A (batched) product of an m x k and a k x n matrix: 2mnk FLOPs, reads both, writes the result. `weight`:
    the k x n operand is a layer's weight (not so for the attention core's products)."""
    return Op(name, OpKind.GEMM, 2.0 * m * n * k * batch, BYTES * batch * (m * k + k * n + m * n),
              elements_in=batch * m * k, elements_out=batch * m * n, shape=Product(m, n, k, batch),
              weight=weight)


def _mem(name: str, nbytes: float, backward_bytes: float) -> Op:
    return Op(name, OpKind.MEMORY, 0.0, nbytes, backward_bytes)


def gemm_op(name: str, m: float, n: float, k: float, batch: float = 1.0) -> Op:
    """A (batched) m x k by k x n matrix product as a kernel (what the other cost modules build layers from)."""
    return _gemm(name, m, n, k, batch)


def grouped_gemm_op(name: str, rows: float, n: float, k: float, groups: int) -> Op:
    """One grouped GEMM over `groups` weights (the local experts), each a `rows` x k by k x n product: Transformer
    Engine's GroupedLinear, which Megatron-Core's TEGroupedMLP runs for all local experts in one framework call
    (transformer_engine/pytorch/module/grouped_linear.py: general_grouped_gemm over the m_splits). Inside that call
    each product is its own cuBLAS kernel on one of GROUPED_GEMM_STREAMS streams: the streams' kernels share the
    GPU, so their FLOPs add as one kernel's, but each stream's kernels ramp up and drain one after another
    (gemm_shape.stream_ramps: the group pays ceil(groups / streams) ramps, not one)."""
    return replace(_gemm(name, rows, n, k, batch=groups), group=groups)


def memory_op(name: str, nbytes: float, backward_bytes: float) -> Op:
    """A memory-bound kernel moving `nbytes` forward and `backward_bytes` times that in backward."""
    return _mem(name, nbytes, backward_bytes)


NORM_BACKWARD_BYTES = _NORM_BWD


def layer_forward_ops(model: ModelShape, b: int, t: int, sequence_parallel: bool,
                      layer: LayerType | None = None, fp8: Fp8Recipe | None = None) -> tuple[Op, ...]:
    """Kernels of one transformer layer's forward pass on one tensor-parallel rank (the model's main layer unless
    `layer` says otherwise). A decoder layer of an encoder-decoder model has a cross-attention block between its
    self-attention and its MLP: queries from its own s tokens, keys and values projected from the encoder's
    output (its cross_seq tokens), each part costed with its own sequence lengths. With an FP8 recipe the
    projections run in FP8 (`fp8_ops`)."""
    ops = _layer_ops(model, b, t, sequence_parallel, layer)
    return ops if fp8 is None else fp8_ops(ops, fp8)


def fp8_ops(ops: tuple[Op, ...], recipe: Fp8Recipe, unfused: frozenset[str] = frozenset()) -> tuple[Op, ...]:
    """A layer's forward kernels with its projections in FP8 (simcore/cost/compute/fp8.py): each projection GEMM runs on
    the FP8 tensor cores with one-byte operands and is preceded by the quantization of its input, whose backward
    kernel quantizes the GEMM's output gradient for the two backward GEMMs. Tensorwise scaling as fp8.py's docstring
    gives it: delayed, a norm-fed input comes FP8 out of its norm (then transposed) and the layer ends with its amax
    and scale update; current, every tensor but a norm-fed input gets an amax pass first (`fp8_amax_*`, with the
    scale's one-thread kernel, costed as one kernel). `unfused`: projections whose norm hands them a 16-bit output
    whatever the recipe (LoRA's adapted ones)."""
    out: list[Op] = []
    gemms = 0
    for i, op in enumerate(ops):
        if op.name not in PROJECTIONS and op.name not in LATENT_AND_EXPERT_PROJECTIONS:
            out.append(op)
            continue
        gemms += op.group
        quantize_in = QUANTIZE_BYTES[recipe] * op.elements_in
        quantize_grad = QUANTIZE_BYTES[recipe] * op.elements_out
        fed_by_norm = (i > 0 and NORM_FED.get(op.name) == ops[i - 1].name and out[-1] is ops[i - 1]
                       and op.name not in unfused)
        if recipe is Fp8Recipe.TENSORWISE and fed_by_norm:
            norm = out.pop()  # writes the FP8 input itself (its backward unchanged)
            fused = norm.bytes - FUSED_NORM_SAVING_BYTES * norm.bytes / (2 * BYTES)  # it reads and writes BYTES
            out.append(replace(norm, bytes=fused, backward_bytes=norm.bytes * norm.backward_bytes / fused))
            quantize_in = TRANSPOSE_BYTES * op.elements_in
        if recipe is Fp8Recipe.TENSORWISE_CURRENT:
            amax_in = (0.0 if fed_by_norm else AMAX_BYTES * op.elements_in) + 4 * op.group  # (+ the fp32 scales)
            amax_grad = AMAX_BYTES * op.elements_out + 4 * op.group
            out.append(replace(_mem("fp8_amax_" + op.name, amax_in, amax_grad / amax_in), fused_host=True))
        # A grouped GEMM quantizes all its groups' inputs in one multi-tensor kernel issued by the same framework
        # call (GroupedLinear: tex.split_quantize / fp8_multi_cast_transpose_fused), so it has no host time of its
        # own; the backward quantizes the output gradients the same way.
        out.append(replace(_mem("fp8_quantize_" + op.name, quantize_in, quantize_grad / quantize_in),
                           fused_host=op.group > 1))
        operands = op.bytes - BYTES * op.elements_out  # 16-bit input and weight: OPERAND_BYTES each quantized
        fp4 = recipe is Fp8Recipe.NVFP4
        out.append(replace(op, fp8=not fp4, fp4=fp4,
                           bytes=operands / BYTES * OPERAND_BYTES[recipe] + BYTES * op.elements_out))
    if recipe is Fp8Recipe.TENSORWISE and gemms:
        out.append(_mem("fp8_scale_update", scale_update_bytes(gemms), 1.0))
    return tuple(out)


def _layer_ops(model: ModelShape, b: int, t: int, sequence_parallel: bool,
               layer: LayerType | None = None) -> tuple[Op, ...]:
    layer = layer or model.main_layer()
    s, h, f = layer.seq, model.hidden_size, model.ffn_hidden_size
    a, g, d = model.num_attention_heads / t, max(model.num_kv_heads / t, 1.0), model.head_dim
    tokens = b * s
    norm_tokens = tokens / t if sequence_parallel else tokens
    up = 2 if model.gated_mlp else 1
    flash = model.attention is AttentionKind.FLASH
    ops = [
        _mem("layernorm", 2 * BYTES * norm_tokens * h, _NORM_BWD),
        _gemm("qkv", tokens, (a + 2 * g) * d, h),
        *_attention_core("", b, a, g, d, s, s, layer.causal, flash),
        _gemm("attention_output", tokens, h, a * d),
        _mem("dropout_residual", 3 * BYTES * norm_tokens * h + norm_tokens * h, _DROPOUT_RESIDUAL_BWD),
    ]
    if layer.cross_seq:
        enc = layer.cross_seq
        ops += [
            _mem("cross_layernorm", 2 * BYTES * norm_tokens * h, _NORM_BWD),
            _gemm("cross_q", tokens, a * d, h),
            _gemm("cross_kv", b * enc, 2 * g * d, h),
            *_attention_core("cross_", b, a, g, d, s, enc, False, flash),
            _gemm("cross_attention_output", tokens, h, a * d),
            _mem("cross_dropout_residual", 3 * BYTES * norm_tokens * h + norm_tokens * h, _DROPOUT_RESIDUAL_BWD),
        ]
    ops += [
        _mem("layernorm", 2 * BYTES * norm_tokens * h, _NORM_BWD),
        _gemm("mlp_up", tokens, up * f / t, h),
        _mem("activation", BYTES * tokens * f / t * (up + 1), (2 * up + 1) / (up + 1)),
        _gemm("mlp_down", tokens, h, f / t),
        _mem("dropout_residual", 3 * BYTES * norm_tokens * h + norm_tokens * h, _DROPOUT_RESIDUAL_BWD),
    ]
    return tuple(ops)


def _attention_core(prefix: str, b: int, a: float, g: float, d: int, s_q: int, s_kv: int, causal: bool,
                    flash: bool) -> list[Op]:
    """Scores, softmax and dropout, and values: `s_q` queries over `s_kv` keys, `a` heads (`g` key/value heads)."""
    if flash:
        # FLOPs of QK^T and AV; a causal kernel skips the masked half of the score blocks.
        return [flash_attention_op(prefix + "flash_attention", b, a, g, d, s_q, s_kv, 0.5 if causal else 1.0)]
    scores = b * a * s_q * s_kv
    return [
        _gemm(prefix + "attention_scores", s_q, s_kv, d, batch=b * a, weight=False),
        # Megatron's fused scale-mask-softmax reads and writes the scores; dropout reads them, writes them and a
        # 1-byte mask.
        _mem(prefix + "softmax_dropout", BYTES * scores * 4 + scores, _SOFTMAX_DROPOUT_BWD),
        _gemm(prefix + "attention_values", s_q, d, s_kv, batch=b * a, weight=False),
    ]


def flash_attention_op(name: str, b: int, a: float, g: float, d: int, s_q: float, s_kv: float,
                       computed: float) -> Op:
    """One fused attention kernel: `s_q` queries over `s_kv` keys of which the fraction `computed` of the (query,
    key) pairs is computed (1 unmasked, 1/2 for a causal square), `a` heads (`g` key/value heads). It reads Q and
    K/V and writes the output, never the score matrix: 4 b a d FLOPs per computed pair (QK^T and AV)."""
    work = 4.0 * b * a * s_q * s_kv * d * computed
    return Op(name, OpKind.FLASH, work, BYTES * b * d * (2 * a * s_q + 2 * g * s_kv))


def embedding_forward_ops(model: ModelShape, b: int, t: int, tokens_per_sample: int | None = None) -> tuple[Op, ...]:
    """Word (and position) embedding lookup on a stage that embeds: the first stage, and for an encoder-decoder
    model the first decoder stage too, on the target tokens (vocabulary split over tensor ranks)."""
    tokens = b * (tokens_per_sample or model.seq_length)
    # forward: gather word and position rows and add them; backward: scatter-add the gradient rows
    return (_mem("embedding", 3 * BYTES * tokens * model.hidden_size, 1.0),)


def logits_forward_ops(model: ModelShape, b: int, t: int, sequence_parallel: bool) -> tuple[Op, ...]:
    """Final norm, the output projection onto the (split) vocabulary, and the cross-entropy loss, over the
    tokens the output layer sees (the target for an encoder-decoder model)."""
    tokens = b * model.output_seq_length
    norm_tokens = tokens / t if sequence_parallel else tokens
    vocab = model.vocab_size / t
    return (
        _mem("final_layernorm", 2 * BYTES * norm_tokens * model.hidden_size, _NORM_BWD),
        _gemm("logits", tokens, vocab, model.hidden_size),
        # softmax cross-entropy in fp32: read the logits, write and re-read fp32 probabilities; backward reads
        # the fp32 probabilities and writes the 16-bit logit gradient
        _mem("cross_entropy", tokens * vocab * (BYTES + 8), (4 + BYTES) / (BYTES + 8)),
    )
