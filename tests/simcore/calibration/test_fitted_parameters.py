"""The fitted parameters are data (simcore/cost/fitted.py, written by bench/fit_cost_model.py), and the shipped
data is what the fit gives on the current code: re-simulating the rows it fitted with its parameters gives the
predictions it recorded, and its inputs' digest matches. Editing one parameter in a copy makes that check fail.
"""

from __future__ import annotations

import copy
import os
from dataclasses import asdict, fields, replace
from typing import Any

import pytest

from simcore.calibration import fit
from simcore.calibration.validate import is_fitted, load_reference, source_of
from simcore.cost.fitted import FIT
from simcore.cost.parameters import FITTED, FITTED_SOURCES, CostParameters

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")


@pytest.fixture(scope="module")
def problems() -> list[str]:
    return fit.freshness_problems(FIT)


def test_the_shipped_fit_is_fresh(problems: list[str]) -> None:
    assert problems == [], "stale fit: run python bench/fit_cost_model.py\n" + "\n".join(problems)


def test_parameters_load_from_the_fit_record() -> None:
    assert asdict(FITTED) == FIT["parameters"]
    assert {f.name for f in fields(CostParameters)} == set(FIT["parameters"])
    assert tuple(FIT["fitted_sources"]) == FITTED_SOURCES


def test_the_record_names_the_rows_fitted_and_the_code_version() -> None:
    fitted_ids = [r["id"] for r in FIT["rows"]]
    expected = [str(c["id"]) for c in load_reference()
                if source_of(str(c["id"])) in FITTED_SOURCES and (c.get("measured") or c.get("derived"))]
    assert fitted_ids == expected
    assert all(is_fitted(row_id) for row_id in fitted_ids)
    assert FIT["code_version"]["simulator"]
    assert len(FIT["code_version"]["git_commit"]) >= 40
    errors = [abs(r["predicted_s"] - r["measured_s"]) / r["measured_s"] for r in FIT["rows"]]
    assert FIT["mean_abs_error_pct"] == pytest.approx(100 * sum(errors) / len(errors), abs=1e-3)


@pytest.mark.parametrize("name", ["memory_efficiency", "gemm_half_time_volta_s", "host_iteration_s"])
def test_editing_one_fitted_parameter_in_a_copy_makes_the_check_fail(name: str) -> None:
    edited: dict[str, Any] = copy.deepcopy(FIT)
    edited["parameters"][name] = edited["parameters"][name] * 1.01 + 1e-4
    problems = fit.freshness_problems(edited)
    assert problems and all("predicted" in p for p in problems)


def test_a_changed_setting_or_source_list_changes_the_digest() -> None:
    cases = fit.calibration_cases(FITTED_SOURCES)
    digest = fit.inputs_digest(cases, FITTED_SOURCES)
    assert digest == FIT["inputs_sha256"]
    assert fit.inputs_digest(cases[1:], FITTED_SOURCES) != digest
    assert fit.inputs_digest(cases, ("megatron20",)) != digest


def test_the_module_text_round_trips() -> None:
    namespace: dict[str, Any] = {}
    exec(fit.render_module(FIT), namespace)  # noqa: S102 - the text the fit writes, checked to load back
    assert namespace["FIT"] == FIT


def test_bounds_keep_newer_generations_no_slower() -> None:
    lo, hi = fit.bounds("gemm_half_time_ampere_s", FITTED)
    assert lo == max(fit.BOUNDS["gemm_half_time_ampere_s"][0], FITTED.gemm_half_time_hopper_s)
    assert hi == min(fit.BOUNDS["gemm_half_time_ampere_s"][1], FITTED.gemm_half_time_volta_s)


@pytest.mark.skipif(not os.environ.get("CLUSTERSIM_FULL_FIT"), reason="minutes: set CLUSTERSIM_FULL_FIT=1")
def test_the_full_fit_reproduces_the_shipped_parameters() -> None:
    document = fit.fit_document(FIT["code_version"], FIT["fitted_sources"])
    assert document["parameters"] == FIT["parameters"]
    assert document["rows"] == FIT["rows"]


def test_the_shape_model_fit_has_its_own_settings_and_per_sm_bounds() -> None:
    cases = fit.calibration_cases(FITTED_SOURCES)
    assert fit.inputs_digest(cases, FITTED_SOURCES, shape_model=True) != fit.inputs_digest(cases, FITTED_SOURCES)
    assert fit.settings(shape_model=True)["bounds"]["gemm_prologue_k"] == fit.SHAPE_BOUNDS["gemm_prologue_k"]
    assert "gemm_prologue_k" not in fit.settings()["bounds"]
    # With the shape model a wave runs at one SM's rate: A100's SM (312/108 TFLOP/s) no slower than V100's (125/80).
    shaped = replace(FITTED, gemm_shape_model=True)
    lo, _ = fit.bounds("gemm_efficiency_ampere", shaped)
    assert lo == pytest.approx(max(fit.BOUNDS["gemm_efficiency_ampere"][0],
                                   FITTED.gemm_efficiency_volta * (125e12 / 80) / (312e12 / 108)))
