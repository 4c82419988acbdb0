"""Which fused attention kernel a layout's framework runs (`layout.attention_backend`), and the rules that tie it to
the model and the GPU (simcore/cost/compute/flash2.py prices it).

- `fused` (the default): the fused attention the Megatron-Core, NeMo and Megatron-Bridge stacks run, Transformer
  Engine's FusedAttention (cuDNN's scaled dot-product attention), what the model has always priced
  (kernels.FLASH_RELATIVE_EFFICIENCY of a large GEMM's rate) and what `fp8_attention` runs in FP8.
- `flash2`: Dao's FlashAttention-2 kernels, which PyTorch's `scaled_dot_product_attention` runs by default on an
  A100 or an H100 from PyTorch 2.2 (its flash backend is FlashAttention-2) until cuDNN's backend becomes the default
  on Hopper: PyTorch 2.5 made cuDNN the default there and 2.5.1 made it opt-in again (pytorch/pytorch#138522,
  tracked in #138649), and from then on only a cuDNN newer than 9.15 is preferred (sdp_utils.cpp's
  check_prefer_cudnn_attention). pytorch/pytorch#142132 (2024-12, PyTorch 2.6 nightly on H100) measures the default
  at 329 TFLOP/s against cuDNN's 631 at one shape. torchtitan asks for cuDNN's backend first from its pull request
  #1000 (2025-03) on; the IBM/Meta FSDP runs name "SDPA FlashAttention v2".

Rules: flash2 needs fused attention in the model (`model.attention: flash`); it has no FP8 kernel
(`fp8_attention` is cuDNN's FP8 attention) and takes one head dim for queries, keys and values (MLA's differ); it
runs on Ampere, Ada and Hopper (sm80 to sm90). On Blackwell PyTorch's flash backend runs FlashAttention-2's sm80
kernels, whose rate nobody has published: refused there, as on Volta, which FlashAttention-2 does not support.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from simcore.domain.model import AttentionKind, ModelShape
from topology.errors import SpecError
from topology.hardware import GpuSpec

__all__ = ["AttentionBackend", "FLASH2_GENERATIONS", "validate_attention_backend", "validate_backend_gpu"]

FIELD = "layout.attention_backend"
FLASH2_GENERATIONS = ("ampere", "ada", "hopper")


class AttentionBackend(StrEnum):
    FUSED = "fused"  # Transformer Engine's / cuDNN's fused attention (or the A100's FlashAttention-2: the same rate)
    FLASH2 = "flash2"  # FlashAttention-2's kernels (PyTorch SDPA's flash backend)


class _Layout(Protocol):
    @property
    def attention_backend(self) -> AttentionBackend: ...
    @property
    def fp8_attention(self) -> bool: ...


def validate_attention_backend(layout: _Layout, model: ModelShape) -> None:
    """Raise SpecError naming layout.attention_backend when flash2 does not suit the model or the layout."""
    if layout.attention_backend is not AttentionBackend.FLASH2:
        return
    if model.attention is not AttentionKind.FLASH:
        raise SpecError(FIELD, f"flash2 needs model.attention flash (this model's attention is {model.attention}: "
                        "unfused kernels)")
    if layout.fp8_attention:
        raise SpecError(FIELD, "flash2 has no FP8 kernel: fp8_attention is cuDNN's FP8 attention (use fused)")
    if model.mla is not None:
        raise SpecError(FIELD, "flash2 takes one head dim for queries, keys and values, and MLA's differ (use fused)")


def validate_backend_gpu(layout: _Layout, gpu: GpuSpec) -> None:
    """Raise SpecError naming layout.attention_backend when flash2 has no kernel rate on the GPU."""
    if layout.attention_backend is AttentionBackend.FLASH2 and gpu.generation not in FLASH2_GENERATIONS:
        raise SpecError(FIELD, f"flash2 runs on Ampere, Ada and Hopper GPUs (FlashAttention-2's kernels; no "
                        f"published rate elsewhere); {gpu.label} is {gpu.generation}: use fused")
