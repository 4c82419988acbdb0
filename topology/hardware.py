"""GPU catalog: peak dense 16-bit and FP8 FLOP/s, HBM capacity and bandwidth, NVLink and PCIe per GPU, TDP.

Sources: ../shared/reference/README.md §4 (NVIDIA datasheets as transcribed there) and §10 for V100; the B200
and GB200 figures (and H100's FP8 rate) are the `hardware` section of
../shared/reference/training-runs-modern.json, which transcribes NVIDIA/dgxc-benchmarking README.md
@841f5466cd86b66abd48049e839c563776f6d716 ("B200 / GB200 Reference Architecture"). As for the older entries,
the marketed HBM size is taken as GiB (H100 "80 GB" = 80 GiB).
SMs: V100 80, A100 108, H100 SXM5 and H200 132 (NVIDIA's Volta, Ampere and Hopper architecture whitepapers), B200
and GB200 148 (NVIDIA Blackwell architecture technical brief: 2 dies of 74).
TDP (SXM modules, W): V100 SXM2 300 (NVIDIA V100 datasheet), A100 SXM4 40 and 80 GB 400 (NVIDIA A100 datasheet),
H100 and H200 SXM 700, B200 1,000 (the modern reference); GB200 has none in the sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

GIB = 2**30
GB = 1e9


class GpuKind(StrEnum):
    V100_32GB = "v100-32gb"
    A100_40GB = "a100-40gb"
    A100_80GB = "a100-80gb"
    H100_80GB = "h100-80gb"
    H200_141GB = "h200-141gb"
    B200_180GB = "b200-180gb"
    GB200_186GB = "gb200-186gb"


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU kind. Bandwidths are per direction."""

    kind: GpuKind
    peak_flops_per_s: float  # dense bf16/fp16 tensor-core peak
    hbm_capacity_bytes: float
    hbm_bandwidth_bytes_per_s: float
    nvlink_bandwidth_bytes_per_s: float  # per GPU, per direction, into the node's switch
    pcie_bandwidth_bytes_per_s: float  # GPU <-> NIC path, per direction
    generation: str  # "volta" | "ampere" | "hopper" | "blackwell": GEMM efficiencies are fitted per generation
    peak_fp8_flops_per_s: float = 0.0  # dense FP8 tensor-core peak; 0: no FP8 tensor cores (V100, A100)
    tdp_w: float | None = None  # board power; None where the reference data gives none
    name: str = ""  # a user-defined GPU's name (cluster.gpu_spec); catalog GPUs are named by `kind`
    num_sms: int = 0  # streaming multiprocessors; 0: the catalog GPU of its kind's (a user-defined GPU)

    @property
    def label(self) -> str:
        """What messages call this GPU: its catalog id, or a user-defined GPU's name."""
        return self.name or str(self.kind)

    @property
    def has_fp8(self) -> bool:
        return self.peak_fp8_flops_per_s > 0

    @property
    def sm_count(self) -> int:
        """Its SMs, or for a user-defined GPU those of the catalog GPU it stands beside."""
        return self.num_sms or GPUS[self.kind].num_sms


# NVLink 5 (B200, GB200): 1,800 GB/s per GPU counted both ways (reference `hardware`: nvlink_GBps_per_gpu 1800,
# 18 links), 900 GB/s per direction. The NIC path keeps Hopper's PCIe Gen5 x16 figure (64 GB/s per direction):
# the reference names 400 Gbit/s NICs (50 GB/s), which that path carries.
GPUS: dict[GpuKind, GpuSpec] = {
    GpuKind.V100_32GB: GpuSpec(GpuKind.V100_32GB, 125e12, 32 * GIB, 900 * GB, 150 * GB, 16 * GB, "volta",
                               tdp_w=300.0, num_sms=80),
    GpuKind.A100_40GB: GpuSpec(GpuKind.A100_40GB, 312e12, 40 * GIB, 1555 * GB, 300 * GB, 32 * GB, "ampere",
                               tdp_w=400.0, num_sms=108),
    GpuKind.A100_80GB: GpuSpec(GpuKind.A100_80GB, 312e12, 80 * GIB, 2039 * GB, 300 * GB, 32 * GB, "ampere",
                               tdp_w=400.0, num_sms=108),
    # H100 SXM: FP8 1978.9 dense (README §4; the modern reference rounds it to 1979), 700 W (both).
    GpuKind.H100_80GB: GpuSpec(GpuKind.H100_80GB, 989.4e12, 80 * GIB, 3350 * GB, 450 * GB, 64 * GB, "hopper",
                               1978.9e12, 700.0, num_sms=132),
    # H200 SXM: compute equal to H100 (README §4 and the modern reference's note), 700 W (README §4).
    GpuKind.H200_141GB: GpuSpec(GpuKind.H200_141GB, 989.4e12, 140 * GIB, 4800 * GB, 450 * GB, 64 * GB, "hopper",
                                1978.9e12, 700.0, num_sms=132),
    # B200 (DGX B200): 2,250 bf16 / 4,500 FP8 dense TFLOP/s, 180 GB, 7.7 TB/s, NVLink 1.8 TB/s, 1,000 W.
    GpuKind.B200_180GB: GpuSpec(GpuKind.B200_180GB, 2250e12, 180 * GIB, 7700 * GB, 900 * GB, 64 * GB, "blackwell",
                                4500e12, 1000.0, num_sms=148),
    # GB200 (NVL72): 2,450 bf16 / 4,900 FP8 dense TFLOP/s, 186 GB, 8 TB/s, NVLink 1.8 TB/s. The source states
    # no TDP for it (None).
    GpuKind.GB200_186GB: GpuSpec(GpuKind.GB200_186GB, 2450e12, 186 * GIB, 8000 * GB, 900 * GB, 64 * GB,
                                 "blackwell", 4900e12, None, num_sms=148),
}


def nearest_catalog_gpu(peak_flops_per_s: float) -> GpuSpec:
    """The catalog GPU whose dense 16-bit peak is nearest to `peak_flops_per_s` on a log scale (the first in
    catalog order on a tie): a user-defined GPU takes its GEMM efficiencies and its NIC path from it."""
    return min(GPUS.values(), key=lambda g: abs(math.log(g.peak_flops_per_s / peak_flops_per_s)))
