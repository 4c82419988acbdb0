"""The cost model's constants: the few fitted ones, and the fixed ones with their sources.

Fitted (by `bench/fit_cost_model.py` on the calibration rows of the reference data: Megatron 2020 and
Megatron-Core 2024; judged on the Narayanan'21 rows, which the fit never sees):
- gemm_efficiency_<generation>: the fraction of the dense 16-bit peak a large matrix product reaches.
- gemm_half_time_<generation>_s: a matrix product that would take this long at full efficiency runs at half
  of it (small products are slower: wave quantization, ramp-up and tail). A time, not a FLOP count, so that a
  faster GPU needs a proportionally larger product to fill it; per generation, since their kernels differ
  (Hopper's warpgroup tiles need larger products to fill the GPU than Ampere's).
- memory_efficiency: the fraction of HBM bandwidth that memory-bound kernels (norms, softmax, dropout,
  activations, the optimizer) reach.

Fixed, from sources (../shared/reference/README.md §4, §5):
- NCCL moves about 240 of 300 GB/s over A100 NVLink (80%), about 370 of 450 GB/s over H100 NVLink (82%), and
  about 24 of 25 GB/s per HDR NIC (96%; 46-48 of 50 GB/s for NDR).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CostParameters:
    """The fitted parameters of the compute cost model."""

    gemm_efficiency_volta: float
    gemm_efficiency_ampere: float
    gemm_efficiency_hopper: float
    gemm_half_time_volta_s: float
    gemm_half_time_ampere_s: float
    gemm_half_time_hopper_s: float
    memory_efficiency: float

    def gemm_efficiency(self, generation: str) -> float:
        return {"volta": self.gemm_efficiency_volta, "ampere": self.gemm_efficiency_ampere,
                "hopper": self.gemm_efficiency_hopper}[generation]

    def gemm_half_time_s(self, generation: str) -> float:
        return {"volta": self.gemm_half_time_volta_s, "ampere": self.gemm_half_time_ampere_s,
                "hopper": self.gemm_half_time_hopper_s}[generation]


FITTED = CostParameters(  # python bench/fit_cost_model.py: mean |error| 4.55% over the 21 calibration rows
    gemm_efficiency_volta=0.749,
    gemm_efficiency_ampere=0.65,
    gemm_efficiency_hopper=0.65,
    gemm_half_time_volta_s=1.18e-04,
    gemm_half_time_ampere_s=1.34e-05,
    gemm_half_time_hopper_s=6.27e-05,
    memory_efficiency=0.795,
)

# A fused attention kernel (FlashAttention-2) reaches about 70% of what a large GEMM does in forward and its
# backward does 2.5x the forward's work (it recomputes the scores): Dao 2023, FlashAttention-2, §4.
FLASH_RELATIVE_EFFICIENCY = 0.7
FLASH_BACKWARD_FACTOR = 2.5

# Each CUDA kernel costs at least this much (launch and tail), seconds.
KERNEL_OVERHEAD_S = 4e-6

# Fraction of a link's line rate that NCCL's bulk protocol achieves, by link kind.
LINK_EFFICIENCY: dict[str, float] = {"nvlink": 0.77, "pcie": 0.80, "ib": 0.96}

# Software cost of one collective step (proxy thread, flag polling), seconds, on top of the hops' latency;
# with it an 8-GPU all-reduce of a few bytes takes about 15 us, as NCCL measures (collectives.json).
COLLECTIVE_STEP_OVERHEAD_S = 0.1e-6
COLLECTIVE_LAUNCH_S = 4e-6

# Megatron's data-parallel gradient buckets (elements).
DP_BUCKET_ELEMENTS = 40_000_000
