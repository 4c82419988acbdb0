"""Host and framework time: the optimizer step as the multi-tensor kernels' bytes plus the fitted per-iteration
host time, and the host's dispatch floor where the GPU outruns it (closed forms)."""

from __future__ import annotations

import pytest

from simcore.cost.compute.kernel_time import op_time, ops_time
from simcore.cost.compute.kernels import Op, OpKind
from simcore.cost.compute.optimizer import (
    FP16_UNSCALE_BYTES_PER_PARAMETER,
    OPTIMIZER_BYTES_PER_PARAMETER,
    optimizer_step_s,
)
from simcore.cost.parameters import FITTED, HOST_DISPATCH_S, KERNEL_OVERHEAD_S
from topology.hardware import GPUS, GpuKind

A100 = GPUS[GpuKind.A100_80GB]


def test_optimizer_bytes_are_the_kernels_reads_and_writes() -> None:
    # l2norm reads g (4); Adam reads g, p, m, v and writes p, m, v (28); copy to 16-bit (4 + 2); zero g (4)
    assert OPTIMIZER_BYTES_PER_PARAMETER == 42
    assert FP16_UNSCALE_BYTES_PER_PARAMETER == 8


@pytest.mark.parametrize("fp16", [False, True])
def test_optimizer_step_closed_form(fp16: bool) -> None:
    n = 1e9  # 48 launches of 21M elements for each of 4 kernels
    per = 42 + (8 if fp16 else 0)
    expected = (FITTED.host_iteration_s + n * per / (A100.hbm_bandwidth_bytes_per_s * FITTED.memory_efficiency)
                + 4 * 48 * KERNEL_OVERHEAD_S)
    assert optimizer_step_s(n, A100, FITTED, fp16) == pytest.approx(expected, rel=1e-12)


def test_an_empty_shard_still_pays_the_host_and_one_launch_a_kernel() -> None:
    assert optimizer_step_s(0.0, A100, FITTED, False) == pytest.approx(
        FITTED.host_iteration_s + 4 * KERNEL_OVERHEAD_S)


def test_tiny_kernels_are_bound_by_the_host() -> None:
    tiny = tuple(Op(f"k{i}", OpKind.MEMORY, 0.0, 64.0) for i in range(10))
    gpu_s = sum(op_time(op, A100, FITTED) for op in tiny)
    assert gpu_s < 10 * HOST_DISPATCH_S
    assert ops_time(tiny, A100, FITTED) == pytest.approx(10 * HOST_DISPATCH_S)


def test_large_kernels_are_bound_by_the_gpu() -> None:
    big = (Op("gemm", OpKind.GEMM, 2.0 * 8192**3, 2.0 * 3 * 8192**2),) * 3
    assert ops_time(big, A100, FITTED) == pytest.approx(3 * op_time(big[0], A100, FITTED))
