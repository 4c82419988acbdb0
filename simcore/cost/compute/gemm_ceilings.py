"""The best dense GEMM throughput measured per GPU and dtype, the ceiling no modelled GEMM may run above, and the
large-GEMM efficiency of a GPU whose own runs were never fitted (Blackwell) from its ceiling.

Source: simcore/calibration/reference/gemm-ceilings.json (stas00/ml-engineering, compute/accelerator/README.md, the
maximum achievable matmul FLOPs table, snapshot 744d01e): the best GEMM of a shape sweep, TFLOP/s, as a fraction of
the GPU's dense peak (read against the catalog's peak). H200 is listed as H100's ("H200 the same"). The test
tests/simcore/cost/compute/test_gemm_ceilings.py checks these figures against that file.

Why a ceiling ratio for Blackwell: the reference data holds no 16-bit Blackwell run to fit B200's or GB200's GEMM
efficiency on, and the fitted Hopper one (a fraction of H100's peak) is not Blackwell's: the measured best GEMM
reaches 80.3% of peak on H100 but 77.6% on B200 and 72.9% on GB200. A fitted efficiency sits some way below the
measured best (the fit's GEMMs are not the sweep's best shape); that share of the ceiling is what carries over
to a GPU of the next generation, so Blackwell's efficiency is Hopper's fitted one x (its ceiling / H100's), each
as a fraction of its own peak. Every GEMM efficiency is then capped at its GPU's ceiling for its dtype.

Where no row was measured (`ceiling_basis` says which case holds for a GPU and dtype; `clustersim presets gpus`
shows it):
- GB300 (bf16) is derived, not measured: it stands to B300 as GB200 to B200 (the same die in the Grace superchip,
  at a higher marketed peak), so its ceiling fraction is B300's measured one x (GB200's / B200's). Its FP8 ceiling,
  like B300's, H100's and GB200's, is absent (no FP8 row): the FP8 efficiency follows from the 16-bit one
  (simcore/cost/compute/fp8.py).
- L40S (Ada) has no row and no relative in the file: no ceiling. Its large-GEMM efficiency is the fitted Ampere
  one as a fraction of its own peak (simcore/cost/compute/kernels.py FITTED_GENERATION: sm_89 runs the Ampere family's
  mma.sync tensor-core kernels, Hopper's wgmma does not exist on it), uncapped.
"""

from __future__ import annotations

from topology.hardware import GPUS, GpuKind, GpuSpec

__all__ = ["CEILING_FLOPS_PER_S", "DERIVED", "FP8_OVER_BF16_CEILING", "REFERENCE_GPU", "REFERENCE_NAMES",
           "ceiling_basis", "ceiling_fraction", "fp8_over_bf16_ceiling", "large_gemm_efficiency"]

# Best measured GEMM, FLOP/s, per GPU kind and dtype ("bf16", "fp8"): the best row of that GPU and dtype in
# gemm-ceilings.json. As a fraction it is read against the catalog's peak (topology/hardware.py), which for GB200
# (2,450 TFLOP/s) is below the one the table's percentage assumes (2,500).
CEILING_FLOPS_PER_S: dict[str, dict[str, float]] = {
    "a100-80gb": {"bf16": 271.2e12},
    "h100-80gb": {"bf16": 794.5e12},
    "h200-141gb": {"bf16": 794.5e12},
    "b200-180gb": {"bf16": 1745e12, "fp8": 3432.5e12},
    "gb200-186gb": {"bf16": 1822e12},
    "b300-288gb": {"bf16": 1769e12},  # the file's "b300" row
}
# The reference file's GPU names that differ from the catalog's kinds.
REFERENCE_NAMES = {"b300": "b300-288gb"}
# GPUs without a measured row whose ceiling is derived (module docstring): kind -> (like, as, to): its fraction is
# like's x (to's / as's), where all three are measured in the dtype.
DERIVED: dict[str, tuple[str, str, str]] = {"gb300-288gb": ("b300-288gb", "b200-180gb", "gb200-186gb")}
# The best FP8 (e4m3) GEMM over the best BF16 GEMM of one GPU, for the two GPUs of the file measured in both: GH200
# (Hopper: 1,535 / 828.6 TFLOP/s) and B200 (Blackwell: 3,432.5 / 1,745). What FP8 attention runs at relative to
# 16-bit attention (simcore/cost/compute/fp8_attention.py); Ada, with no such pair, takes Hopper's.
FP8_OVER_BF16_CEILING: dict[str, tuple[str, float, float]] = {"hopper": ("gh200", 1535e12, 828.6e12),
                                                              "blackwell": ("b200-180gb", 3432.5e12, 1745e12)}
# The GPU of each fitted generation whose ceiling the fitted efficiency is read against.
REFERENCE_GPU = {"hopper": "h100-80gb"}


def ceiling_fraction(gpu: GpuSpec, dtype: str) -> float | None:
    """The best measured GEMM of a GPU in a dtype as a fraction of its peak in that dtype, or None where the
    reference gives none (a user-defined GPU has none: its kind's figures are not its own)."""
    if gpu.name:
        return None
    derived = DERIVED.get(str(gpu.kind))
    if derived is not None:
        like, as_, to = (ceiling_fraction(GPUS[GpuKind(k)], dtype) for k in derived)
        return like * to / as_ if like is not None and as_ is not None and to is not None else None
    best = CEILING_FLOPS_PER_S.get(str(gpu.kind), {}).get(dtype)
    peak = gpu.peak_fp8_flops_per_s if dtype == "fp8" else gpu.peak_flops_per_s
    return best / peak if best is not None and peak > 0 else None


def ceiling_basis(gpu: GpuSpec, dtype: str) -> str:
    """Where a GPU's ceiling in a dtype comes from: "measured" (a row of gemm-ceilings.json), "derived" (DERIVED:
    from the measured rows of its relatives), or "none" (no ceiling: its fitted efficiency stands uncapped)."""
    if ceiling_fraction(gpu, dtype) is None:
        return "none"
    return "derived" if str(gpu.kind) in DERIVED else "measured"


def large_gemm_efficiency(fitted: float, gpu: GpuSpec, fitted_generation: str) -> float:
    """The 16-bit large-GEMM efficiency (fraction of the 16-bit peak) of a GPU: the fitted one of its generation;
    for a generation that borrows another's fit, scaled by the two ceilings (module docstring); never above its
    own ceiling."""
    efficiency = fitted
    own = ceiling_fraction(gpu, "bf16")
    if gpu.generation != fitted_generation and own is not None:
        reference = REFERENCE_GPU.get(fitted_generation)
        if reference is not None:
            efficiency = fitted * own / ceiling_fraction(GPUS[GpuKind(reference)], "bf16")  # type: ignore[operator]
    return min(efficiency, own) if own is not None else efficiency


def fp8_over_bf16_ceiling(gpu: GpuSpec) -> float:
    """The measured FP8-over-BF16 GEMM ceiling ratio of the GPU's generation (FP8_OVER_BF16_CEILING)."""
    _name, fp8, bf16 = FP8_OVER_BF16_CEILING["blackwell" if gpu.generation == "blackwell" else "hopper"]
    return fp8 / bf16
