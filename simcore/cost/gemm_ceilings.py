"""The best dense GEMM throughput measured per GPU and dtype, the ceiling no modelled GEMM may run above, and the
large-GEMM efficiency of a GPU whose own runs were never fitted (Blackwell) from its ceiling.

Source: simcore/calibration/reference/gemm-ceilings.json (stas00/ml-engineering, compute/accelerator/README.md, the
maximum achievable matmul FLOPs table, snapshot 744d01e): the best GEMM of a shape sweep, TFLOP/s, as a fraction of
the GPU's dense peak (the table's pct_of_peak). H200 is listed as H100's ("H200 the same"). The test
tests/simcore/cost/test_gemm_ceilings.py checks these figures against that file.

Why a ceiling ratio for Blackwell: the reference data holds no 16-bit Blackwell run to fit B200's or GB200's GEMM
efficiency on, and the fitted Hopper one (a fraction of H100's peak) is not Blackwell's: the measured best GEMM
reaches 80.3% of peak on H100 but 77.6% on B200 and 72.9% on GB200. A fitted efficiency sits some way below the
measured best (the fit's GEMMs are not the sweep's best shape); that share of the ceiling is what carries over
to a GPU of the next generation, so Blackwell's efficiency is Hopper's fitted one x (its ceiling / H100's), each
as a fraction of its own peak. Every GEMM efficiency is then capped at its GPU's ceiling for its dtype.
"""

from __future__ import annotations

__all__ = ["CEILING_FRACTION", "REFERENCE_GPU", "ceiling_fraction", "large_gemm_efficiency"]

# Best measured GEMM as a fraction of the dense peak, per GPU kind and dtype ("bf16", "fp8"): pct_of_peak of the
# best row of that GPU and dtype in gemm-ceilings.json.
CEILING_FRACTION: dict[str, dict[str, float]] = {
    "a100-80gb": {"bf16": 0.869},
    "h100-80gb": {"bf16": 0.803},
    "h200-141gb": {"bf16": 0.803},
    "b200-180gb": {"bf16": 0.776, "fp8": 0.763},
    "gb200-186gb": {"bf16": 0.729},
}
# The GPU of each fitted generation whose ceiling the fitted efficiency is read against.
REFERENCE_GPU = {"hopper": "h100-80gb"}


def ceiling_fraction(gpu_kind: str, dtype: str) -> float | None:
    """The best measured GEMM of a GPU kind in a dtype as a fraction of its peak, or None where none is given."""
    return CEILING_FRACTION.get(gpu_kind, {}).get(dtype)


def large_gemm_efficiency(fitted: float, gpu_kind: str, generation: str, fitted_generation: str) -> float:
    """The 16-bit large-GEMM efficiency (fraction of the 16-bit peak) of a GPU kind: the fitted one of its
    generation; for a generation that borrows another's fit, scaled by the two ceilings (module docstring); never
    above its own ceiling."""
    efficiency = fitted
    own = ceiling_fraction(gpu_kind, "bf16")
    if generation != fitted_generation and own is not None:
        reference = ceiling_fraction(REFERENCE_GPU.get(fitted_generation, ""), "bf16")
        if reference is not None:
            efficiency = fitted * own / reference
    return min(efficiency, own) if own is not None else efficiency
