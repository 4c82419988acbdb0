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

Blackwell Ultra (B300, GB300) and L40S, from the vendors' figures (each entry's comment cites its own):
- Dense rates are the datasheets' sparse figures halved where the sheet marks them "with sparsity".
- HBM capacity of B300 and GB300 is what the driver reports in the MLPerf Training v5.1 system descriptions
  (mlcommons/training_results_v5.1 @4da2d1c: Nebius/systems/nebius_b300_n1.json "275040 MiB",
  NVIDIA/systems/theia_ngpu72_ngc25.09_nemo.json "284208 MiB"), not the marketed 288 GB: the marketed size of the
  older entries is within 1% of what their driver reports (H100 81,559 MiB), Blackwell Ultra's is not. L40S has no
  such description in the sources: its marketed 48 GB is taken as GiB, as for the older entries.
- FP4 (NVFP4) dense peaks: B200 and GB200 from the modern reference (nvfp4_dense_tflops 9000, 9800); B300 and
  GB300 from their datasheets; 0 on GPUs without FP4 tensor cores.
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
    B300_288GB = "b300-288gb"
    GB300_288GB = "gb300-288gb"
    L40S_48GB = "l40s-48gb"


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU kind. Bandwidths are per direction."""

    kind: GpuKind
    peak_flops_per_s: float  # dense bf16/fp16 tensor-core peak
    hbm_capacity_bytes: float
    hbm_bandwidth_bytes_per_s: float
    nvlink_bandwidth_bytes_per_s: float  # per GPU, per direction, into the node's switch
    pcie_bandwidth_bytes_per_s: float  # GPU <-> NIC path, per direction
    generation: str  # "volta" | "ampere" | "ada" | "hopper" | "blackwell": GEMM efficiencies are fitted per generation
    peak_fp8_flops_per_s: float = 0.0  # dense FP8 tensor-core peak; 0: no FP8 tensor cores (V100, A100)
    tdp_w: float | None = None  # board power; None where the reference data gives none
    name: str = ""  # a user-defined GPU's name (cluster.gpu_spec); catalog GPUs are named by `kind`
    num_sms: int = 0  # streaming multiprocessors; 0: the catalog GPU of its kind's (a user-defined GPU)
    peak_fp4_flops_per_s: float = 0.0  # dense FP4 (NVFP4) tensor-core peak; 0: no FP4 tensor cores

    @property
    def label(self) -> str:
        """What messages call this GPU: its catalog id, or a user-defined GPU's name."""
        return self.name or str(self.kind)

    @property
    def has_fp8(self) -> bool:
        return self.peak_fp8_flops_per_s > 0

    @property
    def has_fp4(self) -> bool:
        return self.peak_fp4_flops_per_s > 0

    @property
    def has_nvlink(self) -> bool:
        """False for a PCIe card without NVLink (L40S): its GPUs talk through PCIe switches and the host."""
        return self.nvlink_bandwidth_bytes_per_s > 0

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
                                4500e12, 1000.0, num_sms=148, peak_fp4_flops_per_s=9000e12),
    # GB200 (NVL72): 2,450 bf16 / 4,900 FP8 dense TFLOP/s, 186 GB, 8 TB/s, NVLink 1.8 TB/s. The source states
    # no TDP for it (None).
    GpuKind.GB200_186GB: GpuSpec(GpuKind.GB200_186GB, 2450e12, 186 * GIB, 8000 * GB, 900 * GB, 64 * GB,
                                 "blackwell", 4900e12, None, num_sms=148, peak_fp4_flops_per_s=9800e12),
    # B300 SXM (HGX / DGX B300, Blackwell Ultra): NVIDIA HGX B300 specifications, 8 GPUs: FP16/BF16 36 PFLOPS and
    # FP8 72 PFLOPS with sparsity, FP4 144 | 105 PFLOPS (sparse | dense), as transcribed by glennklockwood.com
    # /garden/processors/B300 (per GPU: BF16 2,250, FP8 4,500, FP4 13,125 dense TFLOP/s) and fibermall.com's HGX
    # B300 table; HBM3e 7.7 TB/s (verda.com/blog/gb300-nvl72-architecture, per-GPU table; B200's figure);
    # NVLink 5 at 14.4 TB/s for 8 GPUs, 1,100 W TGP, 275,040 MiB (MLPerf v5.1 Nebius B300 system description).
    # PCIe Gen6 x16 to the ConnectX-8 (its built-in PCIe Gen6 switch): 64 GT/s x 16 lanes = 128 GB/s per direction.
    # 160 SMs (NVIDIA technical blog "Inside NVIDIA Blackwell Ultra", 2025: 2 dies, 160 SMs).
    GpuKind.B300_288GB: GpuSpec(GpuKind.B300_288GB, 2250e12, 275040 * 2**20, 7700 * GB, 900 * GB, 128 * GB,
                                "blackwell", 4500e12, 1100.0, num_sms=160, peak_fp4_flops_per_s=13125e12),
    # GB300 (GB300 NVL72): NVIDIA GB300 NVL72 specifications, 72 GPUs: FP4 1,440 | 1,080 PFLOPS (sparse | dense),
    # FP8/FP6 720 and FP16/BF16 360 PFLOPS with sparsity, HBM3e 576 TB/s, NVLink 130 TB/s (per GPU: FP4 15,000,
    # FP8 5,000, BF16 2,500 dense TFLOP/s, 8 TB/s, 1.8 TB/s), as transcribed by verda.com/blog/gb300-nvl72-
    # architecture (per-GPU table: 1.4 kW TDP) and glennklockwood.com/garden/processors/B300; 284,208 MiB (MLPerf
    # v5.1 NVIDIA Theia system description, 1x GB300 NVL72). PCIe Gen6 x16 to its ConnectX-8, as B300.
    GpuKind.GB300_288GB: GpuSpec(GpuKind.GB300_288GB, 2500e12, 284208 * 2**20, 8000 * GB, 900 * GB, 128 * GB,
                                 "blackwell", 5000e12, 1400.0, num_sms=160, peak_fp4_flops_per_s=15000e12),
    # L40S (Ada Lovelace, PCIe card): NVIDIA L40S datasheet: BF16 362.05 | 733 TFLOPS and FP8 733 | 1,466 TFLOPS
    # (dense | sparse), 48 GB GDDR6 at 864 GB/s, PCIe Gen4 x16 (64 GB/s both ways: 32 per direction), no NVLink,
    # 350 W; 568 fourth-generation tensor cores, 4 per SM: 142 SMs.
    GpuKind.L40S_48GB: GpuSpec(GpuKind.L40S_48GB, 362.05e12, 48 * GIB, 864 * GB, 0.0, 32 * GB, "ada",
                               733e12, 350.0, num_sms=142),
}


def nearest_catalog_gpu(peak_flops_per_s: float) -> GpuSpec:
    """The catalog GPU whose dense 16-bit peak is nearest to `peak_flops_per_s` on a log scale (the first in
    catalog order on a tie): a user-defined GPU takes its GEMM efficiencies and its NIC path from it."""
    return min(GPUS.values(), key=lambda g: abs(math.log(g.peak_flops_per_s / peak_flops_per_s)))
