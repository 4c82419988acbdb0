"""The optimizer step's kernels: Megatron's mixed-precision Adam, per parameter a GPU updates, at HBM bandwidth."""

from __future__ import annotations

from simcore.cost.parameters import KERNEL_OVERHEAD_S, CostParameters
from topology.hardware import GpuSpec

__all__ = ["FP16_UNSCALE_BYTES_PER_PARAMETER", "OPTIMIZER_BYTES_PER_PARAMETER", "optimizer_step_s"]

# The optimizer step of Megatron's mixed-precision optimizer, per parameter it updates, in bytes each kernel
# reads and writes (fp32 main gradients and parameters, Adam's two fp32 moments):
# - the gradient norm for clipping (Apex multi_tensor_l2norm) reads each main gradient: 4;
# - Adam (Apex multi_tensor_adam over the lists g, p, m, v) reads all four and writes p, m and v: 16 + 12;
# - the updated main parameters are copied to the 16-bit model weights (multi_tensor_scale): reads 4, writes 2;
# - the main-gradient buffer is zeroed for the next iteration: writes 4.
# With fp16 the gradients are first unscaled and checked for inf/nan (torch._amp_foreach_non_finite_check_and_
# unscale_): reads and writes each main gradient, 8 more.
OPTIMIZER_BYTES_PER_PARAMETER = 4 + 16 + 12 + 6 + 4
FP16_UNSCALE_BYTES_PER_PARAMETER = 8
# Apex's multi_tensor_apply launches one kernel per 320 blocks of 65,536-element chunks (csrc/
# multi_tensor_apply.cuh: depth_to_max_blocks 320, chunk_size 2048 x 32), so about one launch per 21M elements
# for each of the four multi-tensor kernels above.
_MULTI_TENSOR_ELEMENTS = 320 * 65536
_OPTIMIZER_KERNELS = 4


def optimizer_step_s(parameters: float, gpu: GpuSpec, params: CostParameters, fp16: bool) -> float:
    """Seconds of one optimizer step's kernels on a GPU that updates `parameters` (its shard with ZeRO), plus the
    per-iteration host and framework time (the fitted host_iteration_s)."""
    per_parameter = OPTIMIZER_BYTES_PER_PARAMETER + (FP16_UNSCALE_BYTES_PER_PARAMETER if fp16 else 0)
    memory_s = parameters * per_parameter / (gpu.hbm_bandwidth_bytes_per_s * params.memory_efficiency)
    launches = _OPTIMIZER_KERNELS * max(1.0, -(-parameters // _MULTI_TENSOR_ELEMENTS))
    return params.host_iteration_s + memory_s + launches * KERNEL_OVERHEAD_S
