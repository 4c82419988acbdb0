"""HOST_OP_2021_S is what bench/fit_zero3_host.py fits: no step of 0.1 us lowers the larger |error| of the two
ZeRO 3 rows, it lies in the source's range, and validate marks the two rows as calibration rows."""

from __future__ import annotations

import pytest
from bench_scripts import load

from simcore.calibration.validate import is_calibration_case, load_reference, render_table
from simcore.cost.sharding import FITTED_ROWS, HOST_OP_2021_S, HOST_OP_RANGE_S


@pytest.mark.slow
def test_the_constant_is_the_fit() -> None:
    fit = load("fit_zero3_host")
    assert HOST_OP_RANGE_S[0] <= HOST_OP_2021_S <= HOST_OP_RANGE_S[1]
    worst = {x: max(abs(e) for e in fit.errors(x)) for x in (HOST_OP_2021_S - 1e-7, HOST_OP_2021_S,
                                                               HOST_OP_2021_S + 1e-7)}
    assert worst[HOST_OP_2021_S] <= min(worst.values())
    assert worst[HOST_OP_2021_S] < 15.0  # the bound both rows are held to


def test_validate_marks_the_two_rows_as_fitted() -> None:
    rows = [c for c in load_reference() if c.get("id") in FITTED_ROWS]
    assert len(rows) == 2 and all(is_calibration_case(c) for c in rows)


def test_validate_names_the_constant_and_its_rows() -> None:
    report = {"cases": [], "mean_abs_error_pct": None, "max_abs_error_pct": None, "skipped": [],
              "fitted_sources": ["megatron20"], "fitted_rows": {"HOST_OP_2021_S": list(FITTED_ROWS)},
              "by_reference": {}, "by_source": {}, "by_group": {}}
    assert f"fitted on the rows {', '.join(FITTED_ROWS)}: HOST_OP_2021_S" in render_table(report)
