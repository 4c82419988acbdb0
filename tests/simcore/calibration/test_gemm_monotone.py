"""With the fitted parameters, a matrix product of any shape is never slower on a newer GPU generation: H100 not
slower than A100, A100 not slower than V100 (time = ideal time + the generation's half-time, or the memory time,
plus the launch; the fit's bounds keep half-times non-increasing and effective peaks non-decreasing). With the
GEMM shape model on (simcore/cost/compute/gemm_shape.py), the same for its forward and both gradient products: a newer
GPU has no fewer SMs (never more waves) and an SM no slower (never a longer wave)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.cost.compute.kernel_time import op_time, weight_gradient_time
from simcore.cost.compute.kernels import Op, OpKind, gemm_op
from simcore.cost.parameters import FITTED, GENERATIONS
from topology.hardware import GPUS, GpuKind

BYTES = 2
ORDER = (GpuKind.V100_32GB, GpuKind.A100_40GB, GpuKind.A100_80GB, GpuKind.H100_80GB, GpuKind.H200_141GB)
dims = st.integers(min_value=1, max_value=65536)


def gemm(m: int, n: int, k: int, batch: int) -> Op:
    return Op("gemm", OpKind.GEMM, 2.0 * m * n * k * batch, BYTES * batch * (m * k + k * n + m * n))


@settings(max_examples=300, deadline=None)
@given(m=dims, n=dims, k=dims, batch=st.integers(min_value=1, max_value=256),
       kind=st.sampled_from([OpKind.GEMM, OpKind.FLASH]))
def test_no_gemm_is_slower_on_a_newer_gpu(m: int, n: int, k: int, batch: int, kind: OpKind) -> None:
    op = gemm(m, n, k, batch)
    op = Op(op.name, kind, op.flops, op.bytes)
    times = [op_time(op, GPUS[g], FITTED) for g in ORDER]
    for older, newer in zip(times, times[1:]):
        assert newer <= older * (1 + 1e-12)


@settings(max_examples=300, deadline=None)
@given(m=dims, n=dims, k=dims, batch=st.integers(min_value=1, max_value=256),
       prologue_k=st.floats(min_value=0.0, max_value=512.0))
def test_no_gemm_is_slower_on_a_newer_gpu_with_the_shape_model(m: int, n: int, k: int, batch: int,
                                                               prologue_k: float) -> None:
    params = replace(FITTED, gemm_shape_model=True, gemm_prologue_k=prologue_k)
    forward = gemm_op("gemm", m, n, k, batch)
    for op in (forward, forward.backward()):
        times = [op_time(op, GPUS[g], params) for g in ORDER]
        weights = [weight_gradient_time(op, GPUS[g], params) for g in ORDER]
        for series in (times, weights):
            for older, newer in zip(series, series[1:]):
                assert newer <= older * (1 + 1e-12)


def test_the_issue_example_512x1024x1024() -> None:
    op = gemm(512, 1024, 1024, 1)
    assert op_time(op, GPUS[GpuKind.H100_80GB], FITTED) <= op_time(op, GPUS[GpuKind.A100_80GB], FITTED)


def test_the_catalog_orders_generations_as_the_parameters_do() -> None:
    assert [GPUS[g].generation for g in ORDER] == sorted((GPUS[g].generation for g in ORDER), key=GENERATIONS.index)
