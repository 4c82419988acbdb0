"""No modelled GEMM runs above the best GEMM measured on its GPU (simcore/calibration/reference/gemm-ceilings.json),
whatever its shape, dtype, pass or cost model; the ceilings in simcore/cost/compute/gemm_ceilings.py are that file's;
and a GEMM never gets slower when its dtype gets faster."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from simcore.cost.compute.gemm_ceilings import CEILING_FLOPS_PER_S, REFERENCE_NAMES, ceiling_basis, ceiling_fraction
from simcore.cost.compute.kernel_time import op_time
from simcore.cost.compute.kernels import Op, fp8_ops, gemm_op, grouped_gemm_op
from simcore.cost.parameters import FITTED
from simcore.domain.layout import Fp8Recipe
from topology.hardware import GPUS, GpuKind

CEILINGS = Path(__file__).parents[4] / "simcore" / "calibration" / "reference" / "gemm-ceilings.json"
SHAPED = replace(FITTED, gemm_shape_model=True, gemm_prologue_k=64.0)
# Efficiencies above every ceiling: what the cap must hold (a refit that drifts high, say)
OVERFIT = replace(FITTED, gemm_efficiency_ampere=0.95, gemm_efficiency_hopper=0.95)
DTYPES = {"bf16": "bf16", "fp8_e4m3": "fp8"}
SIZES = (1, 7, 64, 128, 500, 1024, 2048, 3072, 4096, 8192, 16384, 65536)


def _best_rows() -> dict[tuple[str, str], float]:
    """The best measured TFLOP/s per (GPU kind, dtype) of the reference file, H200 as H100 (its note)."""
    best: dict[tuple[str, str], float] = {}
    for row in json.loads(CEILINGS.read_text(encoding="utf-8"))["rows"]:
        key = (REFERENCE_NAMES.get(row["gpu"], row["gpu"]), DTYPES[row["dtype"]])
        best[key] = max(best.get(key, 0.0), row["best_tflops"])
    best[("h200-141gb", "bf16")] = best[("h100-80gb", "bf16")]
    return best


BEST = _best_rows()
CATALOG = {(gpu, dtype): tflops for (gpu, dtype), tflops in BEST.items() if gpu in {str(k) for k in GPUS}}


def test_the_ceilings_are_the_reference_files() -> None:
    assert {
        (gpu, dtype): best / 1e12 for gpu, dtypes in CEILING_FLOPS_PER_S.items() for dtype, best in dtypes.items()
    } == CATALOG


def _gemms(m: int, n: int, k: int, fp8: bool) -> list[Op]:
    forward = [gemm_op("mlp_up", m, n, k), grouped_gemm_op("expert_fc1", m, n, k, 16)]
    if fp8:
        forward = [op for op in fp8_ops(tuple(forward), Fp8Recipe.TENSORWISE) if op.fp8]
    return forward + [op.backward() for op in forward]


@pytest.mark.parametrize(("gpu", "dtype"), sorted(CATALOG))
def test_no_gemm_runs_above_its_gpus_measured_best(gpu: str, dtype: str) -> None:
    spec = GPUS[GpuKind(gpu)]
    ceiling = CATALOG[(gpu, dtype)] * 1e12
    fastest = 0.0
    for params in (FITTED, SHAPED, OVERFIT, replace(OVERFIT, gemm_shape_model=True)):
        for m in SIZES:
            for n in SIZES:
                for k in SIZES:
                    for op in _gemms(m, n, k, dtype == "fp8"):
                        fastest = max(fastest, op.flops / op_time(op, spec, params))
    assert fastest <= ceiling
    assert fastest > 0.5 * ceiling  # the sweep reaches large GEMMs: the bound is not vacuous


@pytest.mark.parametrize("kind", [GpuKind.H100_80GB, GpuKind.B200_180GB, GpuKind.GB200_186GB])
def test_a_gemm_is_never_slower_in_fp8(kind: GpuKind) -> None:
    spec = GPUS[kind]
    for params in (FITTED, SHAPED):
        for m in SIZES:
            for n in SIZES[::2]:
                for k in SIZES[::2]:
                    for bf16, fp8 in zip(_gemms(m, n, k, False), _gemms(m, n, k, True)):
                        assert op_time(fp8, spec, params) <= op_time(bf16, spec, params)


def test_gb300s_ceiling_is_derived_from_its_relatives_measured_rows() -> None:
    """GB300 stands to B300 as GB200 to B200: B300's measured fraction x (GB200's / B200's), marked derived."""
    b200, gb200, b300, gb300 = (GPUS[GpuKind(k)] for k in ("b200-180gb", "gb200-186gb", "b300-288gb", "gb300-288gb"))
    fraction = (1769 / 2250) * (1822 / 2450) / (1745 / 2250)
    assert ceiling_fraction(gb300, "bf16") == pytest.approx(fraction, rel=1e-12)
    assert ceiling_fraction(gb300, "bf16") * gb300.peak_flops_per_s == pytest.approx(1884.8e12, rel=1e-4)
    assert (ceiling_basis(gb300, "bf16"), ceiling_basis(b300, "bf16"), ceiling_basis(b200, "fp8")) == (
        "derived", "measured", "measured")
    assert ceiling_basis(gb300, "fp8") == "none" and ceiling_basis(gb200, "fp8") == "none"


def test_l40s_has_no_ceiling_and_takes_amperes_fitted_efficiency() -> None:
    """No row measures L40S: no ceiling, and its large GEMM reaches the fitted Ampere fraction of its own peak."""
    l40s, a100 = GPUS[GpuKind.L40S_48GB], GPUS[GpuKind.A100_80GB]
    assert ceiling_basis(l40s, "bf16") == "none"
    big = gemm_op("mlp_up", 16384, 16384, 16384)
    l40s_rate = big.flops / op_time(big, l40s, FITTED)
    a100_rate = big.flops / op_time(big, a100, FITTED)
    # the same fraction of each GPU's peak (A100's stays under its ceiling at the fitted efficiency)
    assert l40s_rate / l40s.peak_flops_per_s == pytest.approx(a100_rate / a100.peak_flops_per_s, rel=1e-3)
    assert l40s_rate / l40s.peak_flops_per_s == pytest.approx(FITTED.gemm_efficiency_ampere, rel=0.02)
