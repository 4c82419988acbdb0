"""FP8 attention (`layout.fp8_attention`): Transformer Engine's FP8 dot-product attention (its recipe's `fp8_dpa`;
NeMo's `fp8_dot_product_attention`, the MLPerf configs' FP8_DPA=1 with NVTE_FP8_DPA_BWD=1), as TransformerEngine
@d0067d0 runs it (transformer_engine/pytorch/attention/dot_product_attention/backends.py FusedAttnFunc and
context_parallel.py AttnFuncWithCPAndKVP2P).

- What runs in FP8. The fused kernel (cuDNN's FP8 backend, FusedAttnBackend["FP8"]) takes Q, K and V in FP8 (E4M3)
  and computes both products of the forward, Q K^T and P V (P quantized to FP8 inside the kernel with the S
  quantizer), and the four of the backward, dP = dO V^T, dV = P^T dO, dQ = dS K and dK = dS^T Q (dO in FP8, E5M2
  in the HYBRID format; dS quantized inside the kernel with the dP quantizer). The softmax, its running max and
  sum and the output rescaling stay in fp32 inside the kernel; the 16-bit tensors around it are unchanged.
- Rate. Where cuDNN's FP8 attention was measured (H100/H200, B200, GB200, GB300/B300) a large kernel runs at the
  measured rate, forward and backward apart (simcore/cost/compute/attention_kernels.py: the softmax does not get
  faster in FP8, so the kernel gains far less than a GEMM). Elsewhere it keeps the 16-bit fused kernel's efficiency
  (kernels.FLASH_RELATIVE_EFFICIENCY of a GEMM's) against the 16-bit peak times the measured FP8-over-BF16 GEMM
  ceiling ratio of its generation (gemm_ceilings.FP8_OVER_BF16_CEILING, ../shared/reference/gemm-ceilings.json:
  1,535 / 828.6 = 1.853 on Hopper from GH200, 3,432.5 / 1,745 = 1.967 on Blackwell from B200). Either way the fixed
  ramp time (the fitted half-time) keeps a small kernel below the large-kernel rate. The kernel reads and writes
  1-byte Q, K, V and O (MXFP8: plus one scale a 32 elements).
- Added kernels. Q, K and V are quantized before the kernel (combine_and_quantize: read 2 bytes, write 1) and O is
  dequantized after it for the output projection (read 1, write 2); backward quantizes dO and dequantizes dQ, dK
  and dV: 3 bytes an element of Q, K, V and O each way (`fp8_attention_cast`). With per-tensor delayed scaling
  the attention's six FP8 tensors (QKV, S, O; dO, dP, dQKV) join the layer's amax and scale update.
- Memory. For backward TE saves q_fp8, k_fp8 and v_fp8 instead of the 16-bit Q, K and V: 1 byte an element
  instead of 2 (`saved_qkv_saving`). The attention output is counted as before: the kernel keeps its FP8 O
  (delayed scaling; MXFP8 keeps it 16-bit) and the projection its own FP8 copy of its input, about the 2 bytes the
  memory model counts for it (simcore/cost/memory.py counts FP8 GEMM inputs at 16 bits).
- Context parallelism. With per-tensor scaling the p2p ring sends K/V, and in backward K/V and dK/dV, as FP8 bytes
  (uint8 communication buffers), and a2a exchanges Q, K, V, O and their gradients so; with MXFP8 they stay 16-bit
  (its CP path keeps Q, K, V in the nominal dtype and quantizes per step).
The scaling the attention uses: per-tensor for fp8 (tensorwise, blockwise) and nvfp4 (NVIDIA's NVFP4 configs set
NVTE_DPA_FP8_RECIPE=DelayedScaling for attention), microscaling for mxfp8.
"""

from __future__ import annotations

from dataclasses import replace

from simcore.cost.compute.fp8 import scale_update_bytes
from simcore.cost.compute.kernels import BYTES, Op, OpKind, memory_op
from simcore.domain.layout import Fp8Recipe, Layout, Recompute
from simcore.domain.model import LayerType, ModelShape

__all__ = ["CAST_BYTES", "attention_fp8_bytes", "fp8_attention_ops", "fp8_flash", "ring_element_bytes",
           "saved_qkv_saving"]

CAST_BYTES = 2 + 1  # a 16-bit element quantized to FP8, or an FP8 one dequantized: read one, write the other


def attention_fp8_bytes(recipe: Fp8Recipe | None) -> float:
    """Bytes an element of the attention's FP8 tensors: 1, and MXFP8's E8M0 scale per 32 elements."""
    return 1 + 1 / 32 if recipe is Fp8Recipe.MXFP8 else 1.0


def ring_element_bytes(layout: Layout) -> float:
    """Bytes an element of the K/V (and dK/dV) blocks context parallelism's p2p ring sends (module docstring)."""
    return 1.0 if layout.fp8_attention and layout.fp8 is not Fp8Recipe.MXFP8 else float(BYTES)


def fp8_flash(op: Op, layout: Layout) -> Op:
    """A fused attention kernel as FP8 attention runs it (unchanged without `layout.fp8_attention`)."""
    if not layout.fp8_attention or op.kind is not OpKind.FLASH:
        return op
    return replace(op, fp8=True, bytes=op.bytes / BYTES * attention_fp8_bytes(layout.fp8))


def fp8_attention_ops(ops: tuple[Op, ...], layout: Layout) -> tuple[Op, ...]:
    """A layer's forward kernels with its fused attention in FP8: each kernel preceded by the casts of Q, K, V and
    O (backward: dO, dQ, dK, dV), and with per-tensor scaling one scale update of the attention's tensors."""
    if not layout.fp8_attention:
        return ops
    out: list[Op] = []
    kernels = 0
    for op in ops:
        if op.kind is OpKind.FLASH:
            kernels += 1
            elements = op.bytes / BYTES  # Q, K, V and O
            out.append(memory_op("fp8_attention_cast", CAST_BYTES * elements, 1.0))
        out.append(fp8_flash(op, layout))
    # (under current scaling Transformer Engine's attention keeps delayed scaling for S and dP by default, its
    # recipe table and NVTE_DPA_FP8_RECIPE: their amax histories are updated all the same)
    if kernels and layout.fp8 in (Fp8Recipe.TENSORWISE, Fp8Recipe.TENSORWISE_CURRENT):
        out.append(memory_op("fp8_attention_scale_update", scale_update_bytes(2 * kernels), 1.0))
    return tuple(out)


def saved_qkv_saving(model: ModelShape, layout: Layout, layer: LayerType) -> float:
    """Bytes per microbatch and GPU that one layer's FP8 attention saves against 16-bit attention: its Q, K and V
    kept in FP8 for backward (`model` the one a rank runs: s/cp tokens with context parallelism). None with full
    recomputation (only the layer's input is kept) or latent attention (not modelled)."""
    if not layout.fp8_attention or layout.recompute is Recompute.FULL or model.mla is not None:
        return 0.0
    elements = layer.seq * layout.microbatch_size * (model.num_attention_heads + 2 * model.num_kv_heads)
    return elements * model.head_dim / layout.tp * (BYTES - attention_fp8_bytes(layout.fp8))
