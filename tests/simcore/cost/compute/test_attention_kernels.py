"""FP8 attention at cuDNN's measured rate (simcore/cost/compute/attention_kernels.py): the figures are the reference
file's (simcore/calibration/reference/attention-kernels.json), a large FP8 kernel runs at them forward and backward,
the same silicon shares them, other GPUs keep the 16-bit kernel x the GEMM ceiling ratio, and FP8 attention is never
slower than the modelled 16-bit kernel."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from simcore.cost.compute.attention_kernels import (
    FP8_ATTENTION_FLOPS_PER_S,
    MEASURED_AT_TOKENS,
    SAME_GPU,
    fp8_attention_efficiency,
)
from simcore.cost.compute.gemm_ceilings import fp8_over_bf16_ceiling
from simcore.cost.compute.kernel_time import op_time
from simcore.cost.compute.kernels import flash_attention_op
from simcore.cost.parameters import FITTED, KERNEL_OVERHEAD_S
from topology.hardware import GPUS, GpuKind

REFERENCE = Path(__file__).parents[4] / "simcore" / "calibration" / "reference" / "attention-kernels.json"
ROWS = json.loads(REFERENCE.read_text(encoding="utf-8"))["rows"]


def _row(gpu: str, dtype: str) -> dict:
    (row,) = [r for r in ROWS if r["gpu"] == gpu and r["dtype"] == dtype and r["seq"] == MEASURED_AT_TOKENS]
    return row


def test_the_rates_are_the_reference_files_fp8_rows_at_8192_tokens() -> None:
    assert {
        gpu: (_row(gpu, "fp8")["forward_tflops"] * 1e12, _row(gpu, "fp8")["backward_tflops"] * 1e12)
        for gpu in {r["gpu"] for r in ROWS}} == FP8_ATTENTION_FLOPS_PER_S
    for row in ROWS:
        assert row["causal"] and row["source"].startswith("NVIDIA/cudnn-frontend @") and row["cudnn"]


@pytest.mark.parametrize("gpu", sorted(FP8_ATTENTION_FLOPS_PER_S))
def test_fp8_attention_gains_less_than_a_gemm(gpu: str) -> None:
    """The softmax costs the same in FP8: cuDNN's FP8 kernel is 1.0-1.6 x its BF16 kernel, below the GEMM ratio."""
    fp8, bf16 = _row(gpu, "fp8"), _row(gpu, "bf16")
    for key in ("forward_tflops", "backward_tflops"):
        assert 1.0 < fp8[key] / bf16[key] < 1.6 < fp8_over_bf16_ceiling(GPUS[GpuKind(gpu)])


@pytest.mark.parametrize("gpu", sorted(FP8_ATTENTION_FLOPS_PER_S))
def test_a_large_fp8_kernel_runs_at_the_measured_rate(gpu: str) -> None:
    """The benchmark's own shape (128 heads of 128, 8 key/value heads, 8,192 tokens, causal; H200's 2 x 16 heads):
    the kernel's time is its FLOPs at the measured rate, within the fitted ramp time and a launch."""
    row, spec = _row(gpu, "fp8"), GPUS[GpuKind(gpu)]
    kernel = replace(flash_attention_op("flash_attention", row["batch"], row["heads"], row["kv_heads"],
                                        row["head_dim"], row["seq"], row["seq"], 0.5), fp8=True)
    ramp = FITTED.gemm_half_time_s("hopper") + KERNEL_OVERHEAD_S
    for op, rate in ((kernel, row["forward_tflops"]), (kernel.backward(), row["backward_tflops"])):
        measured = op.flops / (rate * 1e12)
        assert measured < op_time(op, spec, FITTED) <= measured + ramp + 1e-12


@pytest.mark.parametrize(("gpu", "measured"), sorted(SAME_GPU.items()))
def test_the_same_silicon_shares_the_fraction_of_its_peak(gpu: str, measured: str) -> None:
    for backward in (False, True):
        assert fp8_attention_efficiency(GPUS[GpuKind(gpu)], backward) == \
            fp8_attention_efficiency(GPUS[GpuKind(measured)], backward)


def test_unmeasured_gpus_keep_the_16_bit_kernel_times_the_gemm_ratio() -> None:
    l40s = GPUS[GpuKind("l40s-48gb")]
    assert fp8_attention_efficiency(l40s, False) is None
    assert fp8_attention_efficiency(replace(GPUS[GpuKind("gb200-186gb")], name="my-gpu"), False) is None
    kernel = flash_attention_op("flash_attention", 1, 64, 8, 128, 8192, 8192, 0.5)
    fp8 = replace(kernel, fp8=True)
    for a, b in ((kernel, fp8), (kernel.backward(), fp8.backward())):
        speedup = (op_time(a, l40s, FITTED) - KERNEL_OVERHEAD_S) / (op_time(b, l40s, FITTED) - KERNEL_OVERHEAD_S)
        assert 0.98 * fp8_over_bf16_ceiling(l40s) < speedup < fp8_over_bf16_ceiling(l40s)


@pytest.mark.parametrize("gpu", sorted({*FP8_ATTENTION_FLOPS_PER_S, *SAME_GPU}))
@pytest.mark.parametrize("seq", [256, 1024, 8192, 65536])
def test_fp8_attention_never_slower_than_the_16_bit_kernel(gpu: str, seq: int) -> None:
    spec = GPUS[GpuKind(gpu)]
    kernel = flash_attention_op("flash_attention", 1, 8, 1, 128, seq, seq, 0.5)
    fp8 = replace(kernel, fp8=True)
    assert op_time(fp8, spec, FITTED) < op_time(kernel, spec, FITTED)
    assert op_time(fp8.backward(), spec, FITTED) < op_time(kernel.backward(), spec, FITTED)
