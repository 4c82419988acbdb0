"""The cost model's constants: the fitted ones (loaded from simcore/cost/fitted.py, data that the fit writes), and
the fixed ones with their sources.

Fitted (by `python bench/fit_cost_model.py` on the rows of the sources that simcore/cost/fitted.py names: the
Megatron 2020 and Megatron-Core 2024 runs; judged on the others, which the fit never sees):
- gemm_efficiency_<generation>: the fraction of the dense 16-bit peak a large matrix product reaches.
- gemm_half_time_<generation>_s: a matrix product that would take this long at full efficiency runs at half
  of it; equivalently every product pays this time on top of its ideal one (wave quantization, ramp-up and
  tail). Bounded so that a newer generation's is never longer than an older one's, and a newer generation's
  effective peak (peak x efficiency) never lower: a GEMM of any shape is then never slower on a newer GPU
  (tests/simcore/calibration/test_gemm_monotone.py).
- memory_efficiency: the fraction of HBM bandwidth that memory-bound kernels (norms, softmax, dropout,
  activations, the optimizer) reach.
- comm_sm_share: the share of an SM that each NCCL channel in flight takes from the compute beside it
  (simcore/cost/comm/interference.py: compute slows while collectives overlap it, from the SMs and HBM bandwidth
  their channels take).
- host_iteration_s: host and framework time once per iteration that no GPU kernel accounts for: fetching the
  batch from the data loader, the loss and timer reductions, logging, the optimizer's Python loop over its
  parameter groups (simcore/cost/workload.py adds the optimizer's own kernels by the bytes they move).

Why a generated Python module and not a JSON file read here: simcore does no I/O (design.md), and a module is
loaded by import with the code that uses it, so the engine path never opens a file; the fit writes it with
`repr` of plain literals, and tests/simcore/calibration/test_fitted_parameters.py checks that it is what the fit
produces on the current code.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.cost.fitted import FIT

# GPU generations oldest first: newer ones must never be slower (the fit's bounds keep it so).
GENERATIONS = ("volta", "ampere", "hopper")


@dataclass(frozen=True, slots=True)
class CostParameters:
    """The fitted parameters of the compute cost model (efficiencies are fractions, times seconds)."""

    gemm_efficiency_volta: float
    gemm_efficiency_ampere: float
    gemm_efficiency_hopper: float
    gemm_half_time_volta_s: float
    gemm_half_time_ampere_s: float
    gemm_half_time_hopper_s: float
    memory_efficiency: float
    host_iteration_s: float
    # The share of an SM that each resident NCCL channel denies to compute beside it
    # (simcore/cost/comm/interference.py); 0 turns interference off (compute beside collectives at full speed, the model
    # before it was fitted).
    comm_sm_share: float = 0.0
    # The GEMM shape model (simcore/cost/compute/gemm_shape.py): tile and wave quantization over the SMs and a fixed
    # cost per tile of `gemm_prologue_k` k-elements; off, a GEMM's time depends on its FLOPs alone (the model before).
    gemm_shape_model: bool = False
    gemm_prologue_k: float = 0.0

    def gemm_efficiency(self, generation: str) -> float:
        return {"volta": self.gemm_efficiency_volta, "ampere": self.gemm_efficiency_ampere,
                "hopper": self.gemm_efficiency_hopper}[generation]

    def gemm_half_time_s(self, generation: str) -> float:
        return {"volta": self.gemm_half_time_volta_s, "ampere": self.gemm_half_time_ampere_s,
                "hopper": self.gemm_half_time_hopper_s}[generation]


FITTED = CostParameters(**FIT["parameters"])
# The sources (reference-row id prefixes) whose rows the parameters were fitted on; validate marks their rows.
FITTED_SOURCES: tuple[str, ...] = tuple(FIT["fitted_sources"])

# A fused attention kernel (FlashAttention-2) reaches about 70% of what a large GEMM does in forward and its
# backward does 2.5x the forward's work (it recomputes the scores): Dao 2023, FlashAttention-2, §4.
FLASH_RELATIVE_EFFICIENCY = 0.7
FLASH_BACKWARD_FACTOR = 2.5

# Each CUDA kernel costs at least this much on the GPU's stream, seconds: back-to-back empty kernels launch at
# about 334,000 a second at best, 3 us each (University of Virginia, "CUDA Kernel Overhead",
# cs.virginia.edu/~mwb7w/cuda_support/kernel_overhead.html, Fig. 2). A GEMM's own ramp and tail are in its
# fitted half-time.
KERNEL_OVERHEAD_S = 3e-6

# Host time to issue one kernel from PyTorch eager code (Python, autograd and ATen dispatch, cudaLaunchKernel):
# about 5-25 us per op ("From PyTorch op to kernel launch", jiahuanglin.xyz/all_lessons/gpu_kernel_serving/
# 18_pytorch_to_kernel.html). The host runs ahead of the GPU, so this only shows where kernels are shorter than
# it: a pass then takes its kernel count times this (the lower end of the range: a floor, not a typical cost).
HOST_DISPATCH_S = 5e-6

# Fraction of a link's line rate that NCCL's bulk protocol achieves, by link kind (../shared/reference/README.md
# §4, §5):
# - NVLink: about 230 of 300 GB/s per direction on A100 (nccl-tests #149): 0.77. H100's ring reaches about 370
#   of 450 (0.82); one figure serves both, the A100's, so H100 NVLink is modelled about 6% slow.
# - InfiniBand: about 24 of 25 GB/s per HDR NIC (nccl #412): 0.96 (NDR: 46-48 of 50).
# - PCIe (the GPU-NIC path, Gen4 x16 at 32 GB/s per direction): no measured figure in the reference data. The
#   protocol alone caps it near 0.9 (256-byte payloads in about 280 bytes of transaction-layer packet); 0.80
#   allows for flow-control and ordering traffic on top. An assumption, not fitted: no reference row puts a
#   PCIe link on its critical path (each GPU reaches its own NIC at 32 GB/s, above the NIC's 25 or 50).
LINK_EFFICIENCY: dict[str, float] = {"nvlink": 0.77, "pcie": 0.80, "ib": 0.96}

# Software cost of one collective step (proxy thread, flag polling), seconds, on top of the hops' latency, and
# of launching the collective: set together so that an 8-GPU all-reduce of a few bytes takes about 15 us, as
# NCCL measures (collectives.json: 13-20 us on DGX H100), not fitted to training rows.
COLLECTIVE_STEP_OVERHEAD_S = 0.1e-6
COLLECTIVE_LAUNCH_S = 4e-6

# Megatron-Core's data-parallel gradient buckets (elements): its DistributedDataParallel default,
# bucket_size = max(40,000,000, 1,000,000 x dp) (megatron/core/distributed/distributed_data_parallel.py).
DP_BUCKET_ELEMENTS = 40_000_000
