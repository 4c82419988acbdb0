"""FlashAttention-2's kernels (`layout.attention_backend: flash2`, simcore/domain/attention_backend.py): the fused
attention as PyTorch's default scaled_dot_product_attention runs it on Ampere and Hopper.

- Ampere and Ada: FlashAttention-2 is the kernel the model's fused attention was always priced as (kernels.
  FLASH_RELATIVE_EFFICIENCY: Dao 2023, FlashAttention-2, section 4, measured on A100), so nothing changes.
- Hopper: FlashAttention-2 runs its sm80 kernels (warp-level mma.sync, no wgmma or TMA), which reach about a
  third of Hopper's BF16 peak where cuDNN's Hopper kernels reach two thirds. The rate is measured: NVIDIA's
  cudnn-frontend benchmark of PyTorch's default SDPA against cuDNN's on H200 (simcore/calibration/reference/
  flash2-kernels.json; at 8,192 tokens, causal, 2 x 16 heads of 128: 321.9 TFLOP/s forward and 275.4 backward,
  against cuDNN's 645.9 and 461.9). Like the FP8 attention rate (simcore/cost/compute/attention_kernels.py) it is
  the 8,192-token causal figure read as a fraction of the GPU's 16-bit peak, and every Hopper GPU takes that
  fraction (the same GH100 compute: H100 and H200 have equal peaks). A large kernel reaches it and a small one
  pays the generation's ramp time on top. The file's other rows show how far one figure reaches: 296.5 / 245.2
  at 4,096 tokens and 338.9 / 324.0 at 65,536 (causal); unmasked, 362-364 forward.
"""

from __future__ import annotations

from dataclasses import replace

from simcore.cost.compute.fp8_attention import fp8_attention_ops
from simcore.cost.compute.kernels import Op, OpKind
from simcore.domain.attention_backend import AttentionBackend
from simcore.domain.layout import Layout
from topology.hardware import GPUS, GpuKind, GpuSpec

__all__ = ["FLASH2_HOPPER_FLOPS_PER_S", "MEASURED_AT_TOKENS", "MEASURED_ON", "attention_as_run", "flash2_efficiency",
           "flash2_op", "flash2_ops"]

MEASURED_ON = GpuKind.H200_141GB
MEASURED_AT_TOKENS = 8192
FLASH2_HOPPER_FLOPS_PER_S = (321.94e12, 275.40e12)  # (forward, backward), causal, at MEASURED_AT_TOKENS


def flash2_efficiency(gpu: GpuSpec, backward: bool) -> float | None:
    """The fraction of its 16-bit peak a large FlashAttention-2 kernel reaches on a Hopper GPU; None elsewhere
    (Ampere and Ada keep the fused kernel's rate, which is FlashAttention-2's)."""
    if gpu.generation != "hopper":
        return None
    return FLASH2_HOPPER_FLOPS_PER_S[1 if backward else 0] / GPUS[MEASURED_ON].peak_flops_per_s


def flash2_op(op: Op, layout: Layout) -> Op:
    """A fused attention kernel as `layout.attention_backend` runs it (marked for FlashAttention-2's rate)."""
    if layout.attention_backend is not AttentionBackend.FLASH2 or op.kind is not OpKind.FLASH:
        return op
    return replace(op, flash2=True)


def flash2_ops(ops: tuple[Op, ...], layout: Layout) -> tuple[Op, ...]:
    """A layer's kernels with its fused attention marked as `flash2_op` marks it."""
    if layout.attention_backend is not AttentionBackend.FLASH2:
        return ops
    return tuple(flash2_op(op, layout) for op in ops)


def attention_as_run(ops: tuple[Op, ...], layout: Layout) -> tuple[Op, ...]:
    """A layer's kernels with its fused attention as the layout runs it: in FP8 (`fp8_attention`,
    simcore/cost/compute/fp8_attention.py), by FlashAttention-2's kernels (`attention_backend: flash2`)."""
    return flash2_ops(fp8_attention_ops(ops, layout), layout)
