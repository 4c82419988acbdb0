"""The shipped FP8 GEMM efficiency ratio is what bench/fit_fp8.py fits on the current code (a stale constant fails
here, as the cost model's fitted parameters do in tests/simcore/calibration/test_fitted_parameters.py)."""

from __future__ import annotations

import pytest
from bench_scripts import load

import simcore.cost.compute.fp8 as fp8

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")



def test_the_shipped_fp8_ratio_is_the_fit_on_the_current_code() -> None:
    script = load("fit_fp8")
    shipped = fp8.FP8_GEMM_EFFICIENCY_RATIO
    best, error, pairs = script.fit()
    assert shipped == fp8.FP8_GEMM_EFFICIENCY_RATIO  # the fit puts the constant back
    assert len(pairs) == 8
    assert best == shipped, f"run python bench/fit_fp8.py: it fits {best} (mean |speed-up error| {error:.4f})"
    assert error < 0.02
