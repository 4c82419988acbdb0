"""GPU catalog: peak dense 16-bit FLOP/s, HBM capacity and bandwidth, NVLink and PCIe per GPU.

Sources: ../shared/reference/README.md §4 (NVIDIA datasheets as transcribed there) and §10 for V100. TDP (SXM
modules): V100 SXM2 300 W (NVIDIA V100 datasheet), A100 SXM4 40 and 80 GB 400 W (NVIDIA A100 datasheet), H100 SXM
700 W (training-runs-modern.json `hardware`, from NVIDIA's DGX benchmarking README), H200 SXM up to 700 W (NVIDIA
H200 datasheet).
"""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU kind. Bandwidths are per direction."""

    kind: GpuKind
    peak_flops_per_s: float  # dense bf16/fp16 tensor-core peak
    hbm_capacity_bytes: float
    hbm_bandwidth_bytes_per_s: float
    nvlink_bandwidth_bytes_per_s: float  # per GPU, per direction, into the node's switch
    pcie_bandwidth_bytes_per_s: float  # GPU <-> NIC path, per direction
    generation: str  # "volta" | "ampere" | "hopper": the cost model's efficiency is fitted per generation
    tdp_w: float | None = None  # board power (SXM module TDP), W: what a whole-run energy estimate charges per GPU


GPUS: dict[GpuKind, GpuSpec] = {
    GpuKind.V100_32GB: GpuSpec(GpuKind.V100_32GB, 125e12, 32 * GIB, 900 * GB, 150 * GB, 16 * GB,
                                 "volta", tdp_w=300),
    GpuKind.A100_40GB: GpuSpec(GpuKind.A100_40GB, 312e12, 40 * GIB, 1555 * GB, 300 * GB, 32 * GB,
                                 "ampere", tdp_w=400),
    GpuKind.A100_80GB: GpuSpec(GpuKind.A100_80GB, 312e12, 80 * GIB, 2039 * GB, 300 * GB, 32 * GB,
                                 "ampere", tdp_w=400),
    GpuKind.H100_80GB: GpuSpec(GpuKind.H100_80GB, 989.4e12, 80 * GIB, 3350 * GB, 450 * GB, 64 * GB,
                                 "hopper", tdp_w=700),
    GpuKind.H200_141GB: GpuSpec(GpuKind.H200_141GB, 989.4e12, 140 * GIB, 4800 * GB, 450 * GB, 64 * GB,
                                 "hopper", tdp_w=700),
}
