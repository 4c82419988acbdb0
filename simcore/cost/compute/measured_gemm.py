"""GEMM times from the user's own sweep (cluster.measured.gemm: rows m, n, k, dtype, TFLOP/s) in place of the
roofline's (simcore/cost/compute/kernels.py), as a factor on each matrix product's time.

For a product of shape (m, n, k) the nearest measured shape of its dtype (Euclidean in log m, log n, log k; ties to
the first row) gives slowdown = t_measured / t_model at that shape, where t_measured = 2mnk / measured rate and
t_model is the roofline's time of that shape on this GPU without its launch overhead (a sweep times the kernels
alone, back to back: MAMF-finder's benchmark_mm, or any cuBLAS timing loop). The product's own modelled time
alone, without its launch overhead, is multiplied by it: at a measured shape the product takes the measured time,
and between or beyond measured shapes the model's shape dependence is kept, scaled by the nearest measured ratio
(a shape outside the sweep's box in any dimension is an extrapolation). A backward kernel is its two products
(input and weight gradient, gemm_shape.gradient_products), each costed alone so and added, plus one launch (the
model alone costs them as one kernel of twice the FLOPs); a batched product (attention
scores: a product per head) is compared as a batch, the measured rate of its matrices' nearest shape against the
model's time of the whole batch of that shape (a batched kernel fills the GPU as one large GEMM does, which a
sweep of single products measures). The fused attention kernel is not a GEMM and keeps the model's time.

Why a factor and not the measured rate alone: the measured rate of one shape says nothing of another's wave and
tile quantization, its ramp or its memory traffic, which the roofline models; the factor carries what the sweep
measured (the GPU's clocks, power cap, cuBLAS version) onto the shapes it did not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from simcore.cost.compute.gemm_shape import Product
from simcore.cost.parameters import CostParameters
from topology.cluster_spec import ClusterSpec
from topology.hardware import GPUS, GpuSpec
from topology.measured import MeasuredGemm

__all__ = ["MeasuredParameters", "for_gpu", "measured_parameters", "nearest", "rows_for", "slowdown"]


@dataclass(frozen=True, slots=True)
class MeasuredParameters(CostParameters):
    """The cost parameters with the user's GEMM sweep beside them: what kernel_time.op_time reads. A subclass, so that
    the fitted parameters (CostParameters, what the fit writes and checks) stay the fit's alone."""

    measured_gemms: tuple[MeasuredGemm, ...] = ()


def measured_parameters(params: CostParameters, cluster: ClusterSpec) -> CostParameters:
    """`params` with the cluster's measured GEMM rows, if it has any; `params` itself otherwise. On one GPU kind
    the rows that apply to it; with node groups all of them, each group's GPU taking its own (`for_gpu`)."""
    gemms = cluster.measured.gemms if cluster.measured is not None else ()
    if not cluster.node_groups:
        gemms = rows_for(tuple(gemms), cluster.hardware)
    if not gemms:
        return params
    base = {name: getattr(params, name) for name in CostParameters.__dataclass_fields__}
    return MeasuredParameters(**base, measured_gemms=tuple(gemms)) if not isinstance(params, MeasuredParameters) \
        else replace(params, measured_gemms=tuple(gemms))


def rows_for(rows: tuple[MeasuredGemm, ...], gpu: GpuSpec) -> tuple[MeasuredGemm, ...]:
    """The rows that apply to `gpu`: a sweep's that names no GPU, and one's that names `gpu`'s kind when `gpu` is
    that catalog GPU (a user-defined GPU near it in peak is not the GPU the sweep ran on)."""
    return tuple(r for r in rows if r.gpu is None or (r.gpu == gpu.kind and gpu == GPUS[gpu.kind]))


def for_gpu(params: CostParameters, gpu: GpuSpec) -> CostParameters:
    """`params` with only the measured rows that apply to `gpu` (a heterogeneous cluster's GPUs each cost their
    GEMMs by their own sweep, or by the model where none ran on them)."""
    if not isinstance(params, MeasuredParameters):
        return params
    rows = rows_for(params.measured_gemms, gpu)
    return params if rows == params.measured_gemms else replace(params, measured_gemms=rows)


def _distance(p: Product, g: MeasuredGemm) -> float:
    return (math.log(p.m / g.m) ** 2 + math.log(p.n / g.n) ** 2 + math.log(p.k / g.k) ** 2)


def nearest(product: Product, dtype: str, rows: Sequence[MeasuredGemm]) -> MeasuredGemm | None:
    """The measured row of `dtype` nearest to `product` in log shape (module docstring); None if none of it."""
    best, best_d = None, math.inf
    for row in rows:
        if row.dtype == dtype:
            d = _distance(product, row)
            if d < best_d:
                best, best_d = row, d
    return best


def slowdown(product: Product, dtype: str, rows: Sequence[MeasuredGemm],
             model_s: Callable[[Product], float]) -> float:
    """Measured over modelled time at the nearest measured shape of `dtype` (1.0 where none is measured);
    `model_s(shape)` is the roofline's time of a (batched) product of that shape, without its launch overhead."""
    row = nearest(Product(max(product.m, 1.0), max(product.n, 1.0), max(product.k, 1.0)), dtype, rows)
    if row is None:
        return 1.0
    modelled = model_s(Product(row.m, row.n, row.k, product.batch))
    return product.batch * row.seconds / modelled if modelled > 0 else 1.0
