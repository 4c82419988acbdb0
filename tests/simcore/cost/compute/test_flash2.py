"""FlashAttention-2's kernels (`layout.attention_backend: flash2`, simcore/cost/compute/flash2.py): the Hopper rate is
the reference file's (simcore/calibration/reference/flash2-kernels.json) and a large kernel runs at it, forward and
backward; on Hopper the kernel is slower than the fused one (never faster, short kernels too), on Ampere the two are
the same kernel's price; a layer's attention alone changes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from simcore.cost.compute.flash2 import (
    FLASH2_HOPPER_FLOPS_PER_S,
    MEASURED_AT_TOKENS,
    MEASURED_ON,
    flash2_efficiency,
    flash2_ops,
)
from simcore.cost.compute.kernel_time import op_time
from simcore.cost.compute.kernels import OpKind, flash_attention_op, layer_forward_ops
from simcore.cost.parameters import FITTED, FLASH_RELATIVE_EFFICIENCY, KERNEL_OVERHEAD_S
from simcore.domain.attention_backend import AttentionBackend
from simcore.domain.layout import Layout
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from topology.hardware import GPUS, GpuKind

REFERENCE = Path(__file__).parents[4] / "simcore" / "calibration" / "reference" / "flash2-kernels.json"
ROWS = json.loads(REFERENCE.read_text(encoding="utf-8"))["rows"]
H100, H200, A100 = GPUS[GpuKind.H100_80GB], GPUS[GpuKind.H200_141GB], GPUS[GpuKind.A100_80GB]
FLASH2 = Layout(dp=1, tp=1, pp=1, microbatch_size=1, global_batch_size=1, attention_backend=AttentionBackend.FLASH2)


def _row(causal: bool, seq: int = MEASURED_AT_TOKENS) -> dict:
    (row,) = [r for r in ROWS if r["causal"] is causal and r["seq"] == seq]
    return row


def _kernel(row: dict):
    op = flash_attention_op("flash_attention", row["batch"], row["heads"], row["kv_heads"], row["head_dim"],
                            row["seq"], row["seq"], 0.5 if row["causal"] else 1.0)
    return replace(op, flash2=True), op


def test_the_rate_is_the_reference_files_causal_row_at_8192_tokens() -> None:
    row = _row(True)
    assert pytest.approx((row["forward_tflops"] * 1e12, row["backward_tflops"] * 1e12)) == FLASH2_HOPPER_FLOPS_PER_S
    assert row["gpu"] == str(MEASURED_ON)
    for r in ROWS:
        assert r["source"].startswith("NVIDIA/cudnn-frontend @") and r["dtype"] == "bf16"


def test_flash2_runs_at_about_half_cudnns_rate_on_hopper_as_measured() -> None:
    """The file's own pairs: PyTorch's default SDPA at 0.45-0.72 x cuDNN's BF16 kernel (the model's fused kernel
    is priced near cuDNN's rate)."""
    for r in ROWS:
        assert 0.45 < r["forward_tflops"] / r["cudnn_bf16_forward_tflops"] < 0.6
        assert 0.5 < r["backward_tflops"] / r["cudnn_bf16_backward_tflops"] < 0.72


@pytest.mark.parametrize("gpu", [H100, H200], ids=["h100", "h200"])
def test_a_large_kernel_runs_at_the_measured_rate(gpu) -> None:
    """The benchmark's own shape (2 x 16 heads of 128, 8,192 tokens, causal): FLOPs at the measured rate, within
    the fitted ramp time and a launch."""
    kernel, _ = _kernel(_row(True))
    ramp = FITTED.gemm_half_time_s("hopper") / FLASH_RELATIVE_EFFICIENCY + KERNEL_OVERHEAD_S  # the fused kernel's
    for op, rate in ((kernel, FLASH2_HOPPER_FLOPS_PER_S[0]), (kernel.backward(), FLASH2_HOPPER_FLOPS_PER_S[1])):
        measured = op.flops / rate * gpu.peak_flops_per_s / H200.peak_flops_per_s
        assert measured <= op_time(op, gpu, FITTED) <= measured + ramp


def test_on_hopper_flash2_is_slower_than_the_fused_kernel_and_on_ampere_the_same() -> None:
    flash2, fused = _kernel(_row(True))
    for op2, op in ((flash2, fused), (flash2.backward(), fused.backward())):
        assert 1.3 < op_time(op2, H100, FITTED) / op_time(op, H100, FITTED) < 2.6
        assert op_time(op2, A100, FITTED) == op_time(op, A100, FITTED)
    assert flash2_efficiency(A100, False) is None and flash2_efficiency(H100, True) == pytest.approx(0.2783, 1e-3)


@pytest.mark.parametrize("seq", [128, 256, 512, 1024, 4096, 16384])
def test_flash2_is_never_faster_than_the_fused_kernel_on_hopper(seq: int) -> None:
    """Short kernels too: flash2 pays the fused kernel's fixed ramp time, and its rate is below the fused one's."""
    fused = flash_attention_op("flash_attention", 2, 16, 16, 128, seq, seq, 0.5)
    flash2 = replace(fused, flash2=True)
    for op2, op in ((flash2, fused), (flash2.backward(), fused.backward())):
        assert op_time(op2, H100, FITTED) >= op_time(op, H100, FITTED)


def test_a_layers_attention_alone_is_marked() -> None:
    model = model_from_fields({**MODEL_PRESETS["llama3-8b"], "attention": "flash"})
    ops = tuple(layer_forward_ops(model, 1, 1, False))
    marked = flash2_ops(ops, FLASH2)
    assert [op.name for op in marked if op.flash2] == [op.name for op in ops if op.kind is OpKind.FLASH] != []
    assert all(op.flash2 and op.backward().flash2 for op in marked if op.kind is OpKind.FLASH)
    assert flash2_ops(ops, replace(FLASH2, attention_backend=AttentionBackend.FUSED)) == ops
