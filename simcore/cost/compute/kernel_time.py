"""How long a kernel of simcore/cost/compute/kernels.py takes on a GPU: the roofline of its compute and memory
times plus launch overhead, a GEMM by its shape (simcore/cost/compute/gemm_shape.py) or by the user's measured GEMM
sweep, the weight-gradient part of a backward GEMM, and the host's time to issue a sequence of kernels.
"""

from __future__ import annotations

from dataclasses import replace

from simcore.cost.compute.attention_kernels import fp8_attention_efficiency
from simcore.cost.compute.flash2 import flash2_efficiency
from simcore.cost.compute.fp8 import fp8_gemm_efficiency
from simcore.cost.compute.gemm_ceilings import ceiling_fraction, fp8_over_bf16_ceiling, large_gemm_efficiency
from simcore.cost.compute.gemm_shape import MAIN_GRAD_BYTES, Product, gradient_products, stream_ramps, tiled_compute_s
from simcore.cost.compute.kernels import BYTES, FITTED_GENERATION, Op, OpKind, gemm_op
from simcore.cost.compute.measured_gemm import slowdown
from simcore.cost.compute.nvfp4 import fp4_ceiling_fraction, fp4_gemm_efficiency
from simcore.cost.parameters import FLASH_RELATIVE_EFFICIENCY, HOST_DISPATCH_S, KERNEL_OVERHEAD_S, CostParameters
from topology.hardware import GpuSpec
from topology.measured import MeasuredGemm

__all__ = ["gemm_dtype", "issue_s", "main_grad_bytes", "measured_products_s", "op_time", "ops_flops", "ops_time",
           "shaped_gemm_times", "weight_gradient_time"]


def op_time(op: Op, gpu: GpuSpec, params: CostParameters) -> float:
    """Seconds for one kernel: the slower of its compute and memory times, plus launch overhead. With the shape
    model on (params.gemm_shape_model) a GEMM that knows its shape is costed by it (`shaped_gemm_times`). With the
    user's GEMM sweep (cluster.measured.gemm; params then a measured_gemm.MeasuredParameters) a GEMM kernel takes,
    for each of its products, the model's time of that product scaled to the nearest measured shape's
    (`measured_products_s`, simcore/cost/compute/measured_gemm.py)."""
    rows = getattr(params, "measured_gemms", ())
    if rows and op.kind is OpKind.GEMM and op.shape is not None:
        kernels = 2 if op.gradient and op.group > 1 and not params.gemm_shape_model else 1
        return kernels * KERNEL_OVERHEAD_S + sum(measured_products_s(op, gpu, params, rows))
    return _model_op_time(op, gpu, params)


def measured_products_s(op: Op, gpu: GpuSpec, params: CostParameters,
                        rows: tuple[MeasuredGemm, ...]) -> tuple[float, ...]:
    """Seconds of each product of a GEMM kernel (one forward; a backward's input and then weight gradient) by the
    user's sweep: the model's time of the product alone, without launch overhead, times measured over modelled time
    at the nearest measured shape of its dtype."""
    assert op.shape is not None
    dtype = gemm_dtype(op)

    def model_s(shape: Product) -> float:
        probe = replace(gemm_op("probe", shape.m, shape.n, shape.k, shape.batch), fp8=op.fp8, fp4=op.fp4)
        return _model_op_time(probe, gpu, params) - KERNEL_OVERHEAD_S

    products = gradient_products(op.shape) if op.gradient else (op.shape,)
    return tuple(model_s(p) * slowdown(p, dtype, rows, model_s) for p in products)


def _model_op_time(op: Op, gpu: GpuSpec, params: CostParameters) -> float:
    """`op_time` by the model alone (no measured GEMM rows)."""
    if op.kind is OpKind.GEMM and op.shape is not None and params.gemm_shape_model:
        return sum(shaped_gemm_times(op, gpu, params)) + stream_ramps(op.group) * KERNEL_OVERHEAD_S
    if op.gradient and op.group > 1:
        # a grouped GEMM's backward is two grouped GEMMs, the input gradients and then the weight gradients
        # (GroupedLinear's backward calls general_grouped_gemm for each), each with its own ramp, tail and launch
        half = replace(op, flops=op.flops / 2, bytes=op.bytes / 2, gradient=False)
        return 2 * _model_op_time(half, gpu, params)
    memory_s = op.bytes / (gpu.hbm_bandwidth_bytes_per_s * params.memory_efficiency)
    if op.kind is OpKind.MEMORY:
        return memory_s + KERNEL_OVERHEAD_S
    peak, peak_efficiency, generation = _gemm_peak(op, gpu, params)
    ramps = stream_ramps(op.group)
    half_flops = ramps * peak * peak_efficiency * params.gemm_half_time_s(generation)
    flash2 = op.kind is OpKind.FLASH and _measured_flash2(op, gpu)
    if flash2:
        half_flops /= FLASH_RELATIVE_EFFICIENCY  # the fused kernel's fixed time (its ramp over 0.7, below) is its own
    efficiency = peak_efficiency * op.flops / (op.flops + half_flops)
    if op.kind is OpKind.FLASH and not flash2 and not _measured_fp8_attention(op, gpu):
        efficiency *= FLASH_RELATIVE_EFFICIENCY
    compute_s = op.flops / (peak * efficiency) if op.flops > 0 else 0.0
    return max(compute_s, memory_s) + ramps * KERNEL_OVERHEAD_S


def _gemm_peak(op: Op, gpu: GpuSpec, params: CostParameters) -> tuple[float, float, str]:
    """The peak a GEMM runs against (16-bit, FP8 or FP4), the fraction of it a large one reaches (under the
    dtype's ceiling), and the generation whose fitted parameters apply."""
    generation = FITTED_GENERATION.get(gpu.generation, gpu.generation)
    efficiency = large_gemm_efficiency(params.gemm_efficiency(generation), gpu, generation)
    if op.kind is OpKind.FLASH and op.fp8:
        measured = fp8_attention_efficiency(gpu, op.backward_pass)  # FP8 attention where measured (attention_kernels)
        if measured is not None:
            return gpu.peak_fp8_flops_per_s, measured, generation
        # elsewhere the 16-bit kernel's rate x the FP8/BF16 GEMM ceilings
        return gpu.peak_flops_per_s * fp8_over_bf16_ceiling(gpu), efficiency, generation
    if op.kind is OpKind.FLASH and _measured_flash2(op, gpu):
        return gpu.peak_flops_per_s, flash2_efficiency(gpu, op.backward_pass) or 0.0, generation
    if op.fp8 or op.fp4:
        fp8 = fp8_gemm_efficiency(efficiency)
        ceiling = ceiling_fraction(gpu, "fp8")
        fp8 = fp8 if ceiling is None else min(fp8, ceiling)
        if not op.fp4:
            return gpu.peak_fp8_flops_per_s, fp8, generation
        fp4, ceiling = fp4_gemm_efficiency(fp8), fp4_ceiling_fraction(gpu)
        return gpu.peak_fp4_flops_per_s, fp4 if ceiling is None else min(fp4, ceiling), generation
    return gpu.peak_flops_per_s, efficiency, generation


def _measured_fp8_attention(op: Op, gpu: GpuSpec) -> bool:
    """An FP8 attention kernel on a GPU where its rate was measured: that rate is the kernel's own (no
    FLASH_RELATIVE_EFFICIENCY on top of it)."""
    return op.fp8 and fp8_attention_efficiency(gpu, op.backward_pass) is not None


def _measured_flash2(op: Op, gpu: GpuSpec) -> bool:
    """A FlashAttention-2 kernel on a GPU where its own rate applies (simcore/cost/compute/flash2.py)."""
    return op.flash2 and flash2_efficiency(gpu, op.backward_pass) is not None


def gemm_dtype(op: Op) -> str:
    """The dtype a GEMM kernel runs in: "fp4", "fp8" or "bf16" (16 bits), as measured GEMM rows name them."""
    return "fp4" if op.fp4 else "fp8" if op.fp8 else "bf16"


def shaped_gemm_times(op: Op, gpu: GpuSpec, params: CostParameters) -> tuple[float, ...]:
    """Seconds of each product of a shaped GEMM kernel (one forward; a backward's input and then weight
    gradient), without the launch overhead: the slower of its tiled compute time (simcore/cost/compute/gemm_shape.py)
    plus the generation's half-time, and its memory time. A weight gradient accumulated into fp32 main_grad
    also reads and writes 4-byte C."""
    assert op.shape is not None
    peak, peak_efficiency, generation = _gemm_peak(op, gpu, params)
    sm_rate = peak * peak_efficiency / gpu.sm_count
    half_s = stream_ramps(op.group) * params.gemm_half_time_s(generation)
    bandwidth = gpu.hbm_bandwidth_bytes_per_s * params.memory_efficiency
    products: tuple[Product, ...] = (op.shape,)
    nbytes: tuple[float, ...] = (op.bytes,)
    if op.gradient:
        products = gradient_products(op.shape)
        nbytes = (op.bytes / 2, op.bytes / 2 + main_grad_bytes(op))
    return tuple(max(tiled_compute_s(p, gpu.sm_count, sm_rate, params.gemm_prologue_k) + half_s, b / bandwidth)
                 for p, b in zip(products, nbytes))


def main_grad_bytes(op: Op) -> float:
    """What a weight-gradient GEMM moves beyond its 16-bit output by accumulating into the fp32 main_grad (read
    and write 4-byte C, gemm_shape.MAIN_GRAD_BYTES), for every weight of a grouped GEMM; 0 for other kernels.
    The shape model counts it (shaped_gemm_times); the plain roofline's fitted efficiencies carry it."""
    if not (op.gradient and op.weight and op.shape is not None):
        return 0.0
    return (MAIN_GRAD_BYTES - BYTES) * op.shape.k * op.shape.n * op.shape.batch


def weight_gradient_time(op: Op, gpu: GpuSpec, params: CostParameters) -> float:
    """Of a GEMM's backward kernel time (op_time), what its weight gradient takes: the second product's time
    with the shape model, else half of it (two products of equal FLOPs)."""
    rows = getattr(params, "measured_gemms", ())
    if op.frozen:
        return 0.0
    if op.gradient and op.shape is not None and params.gemm_shape_model:
        weight_s = measured_products_s(op, gpu, params, rows)[1] if rows else shaped_gemm_times(op, gpu, params)[1]
        return weight_s + KERNEL_OVERHEAD_S / 2
    return op_time(op, gpu, params) / 2


def issue_s(op: Op) -> float:
    """Host seconds to issue a kernel: its framework call (HOST_DISPATCH_S, or the kernel's own host_s; none for
    one issued inside the call before it) and, for a grouped GEMM, one cuBLAS launch a product: Transformer
    Engine's GroupedLinear hands its products to multi_stream_cublas_gemm, which launches them one by one from C++
    (transformer_engine/common/gemm/cublaslt_gemm.cu:941-964 @ v2.9, 70f5366), HOST_DISPATCH_S each (a launch, no
    Python). A grouped GEMM's backward is two such calls, the input gradients and the weight gradients."""
    if op.fused_host:
        return 0.0
    call = HOST_DISPATCH_S if op.host_s is None else op.host_s
    if op.group <= 1:
        return call
    return (2 if op.gradient else 1) * (call + op.group * HOST_DISPATCH_S)


def ops_time(ops: tuple[Op, ...], gpu: GpuSpec, params: CostParameters) -> float:
    """Seconds for a sequence of kernels issued by the host one after another: their GPU time, or, where the
    GPU outruns the host, the host's time to issue them (`issue_s` each)."""
    return max(sum(op_time(op, gpu, params) for op in ops), sum(issue_s(op) for op in ops))


def ops_flops(ops: tuple[Op, ...]) -> float:
    return sum(op.flops for op in ops)
