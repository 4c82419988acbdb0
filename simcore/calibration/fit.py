"""Fitting the cost model's free parameters (simcore.cost.parameters.CostParameters) on the calibration rows, and
checking that the shipped fit (simcore/cost/fitted.py) is what the fit gives on the current code.

The calibration rows are those of the sources in FIT_SOURCES (Megatron 2020 and Megatron-Core 2024); every
other row is judged by `clustersim validate` on parameters that never saw it. The objective is the mean
absolute relative error of iteration time, plus a weak prior that keeps a GEMM half-time near 10 us where the
rows cannot tell (a generation whose rows all use large matrix products): PRIOR_WEIGHT * ln(t / 10 us)^2.
Coordinate descent from a fixed start (START, not the shipped values, so the fit is a function of the code and
the rows alone): each parameter in turn by golden-section search within its bounds, a GPU generation's
parameters judged only on that generation's rows. The bounds of a generation's parameters depend on its
neighbours' (a newer generation's half-time is never longer, its effective peak never lower), so that no GEMM
is slower on a newer GPU.

Freshness: the fit records, beside the parameters, a digest of its inputs (the rows fitted, the settings
below) and the iteration time it predicts for every row it fitted. `freshness_problems` re-simulates those rows
with the recorded parameters: if the code, the rows or the parameters changed since the fit, a prediction or
the digest differs, and the fit must be run again (`python bench/fit_cost_model.py`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from simcore.calibration.validate import load_reference, measured_time, scenario_for, source_of
from simcore.cost.parameters import GENERATIONS, CostParameters
from simcore.simulate import Scenario, simulate
from topology.hardware import GPUS

FIT_SOURCES = ("megatron20", "mcore24")
START = CostParameters(
    gemm_efficiency_volta=0.7, gemm_efficiency_ampere=0.7, gemm_efficiency_hopper=0.7,
    gemm_half_time_volta_s=1e-5, gemm_half_time_ampere_s=1e-5, gemm_half_time_hopper_s=1e-5,
    memory_efficiency=0.8, host_iteration_s=0.02,
)
# With the GEMM shape model (simcore/cost/compute/gemm_shape.py; `fit_document(shape_model=True)`, `python
# bench/fit_cost_model.py --shape-model`) the fit also fits its per-tile cost. The shipped fit runs without it: a
# GEMM's time depends on its FLOPs alone (docs/accuracy.md: weight-gradient passes).
SHAPE_START = replace(START, gemm_shape_model=True, gemm_prologue_k=64.0)
SHAPE_BOUNDS = {"gemm_prologue_k": (0.0, 512.0)}
BOUNDS = {
    "gemm_efficiency_volta": (0.4, 0.95),
    "gemm_efficiency_ampere": (0.4, 0.95),
    "gemm_efficiency_hopper": (0.4, 0.95),
    "gemm_half_time_volta_s": (1e-6, 3e-4),
    "gemm_half_time_ampere_s": (1e-6, 3e-4),
    "gemm_half_time_hopper_s": (1e-6, 3e-4),
    "memory_efficiency": (0.5, 0.95),
    "host_iteration_s": (0.0, 0.2),
}
LOG_SCALE = ("gemm_half_time_volta_s", "gemm_half_time_ampere_s", "gemm_half_time_hopper_s")
PRIOR_HALF_TIME_S = 1e-5
PRIOR_WEIGHT = 0.0005  # an order of magnitude away from the prior costs 0.27 points of mean error
SWEEPS = 2
GOLDEN_STEPS = 7
SIGNIFICANT_DIGITS = 3
PREDICTION_RTOL = 1e-9


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    generation: str
    scenario: Scenario
    measured_s: float


def calibration_cases(sources: Iterable[str] = FIT_SOURCES) -> list[dict[str, Any]]:
    """The reference rows of the fitted sources that carry an iteration time, in the reference file's order."""
    wanted = set(sources)
    return [case for case in load_reference()
            if source_of(str(case.get("id", ""))) in wanted and measured_time(case) is not None]


def calibration_rows(cases: list[dict[str, Any]]) -> list[Row]:
    rows = []
    for case in cases:
        scenario = scenario_for(case)
        measured = measured_time(case)
        assert measured is not None
        rows.append(Row(str(case["id"]), GPUS[scenario.cluster.gpu].generation, scenario, measured))
    return rows


def predict(params: CostParameters, rows: Iterable[Row]) -> dict[str, float]:
    return {row.id: simulate(replace(row.scenario, cost_parameters=params)).metrics.iteration_time_s
            for row in rows}


def mean_abs_error(params: CostParameters, rows: list[Row]) -> float:
    predicted = predict(params, rows)
    return sum(abs(predicted[r.id] - r.measured_s) / r.measured_s for r in rows) / len(rows)


def objective(params: CostParameters, rows: list[Row]) -> float:
    prior = sum(math.log(getattr(params, name) / PRIOR_HALF_TIME_S) ** 2 for name in LOG_SCALE)
    return mean_abs_error(params, rows) + PRIOR_WEIGHT * prior


def generation_of(name: str) -> str | None:
    return next((g for g in GENERATIONS if f"_{g}" in name), None)


def bounds(name: str, params: CostParameters) -> tuple[float, float]:
    """The search interval of one parameter given the others: within BOUNDS, and for a generation's GEMM
    parameters also no slower than the generation before it nor faster than the one after it."""
    lo, hi = (BOUNDS | SHAPE_BOUNDS)[name]
    generation = generation_of(name)
    if generation is None:
        return lo, hi
    index = GENERATIONS.index(generation)
    older = GENERATIONS[index - 1] if index > 0 else None
    newer = GENERATIONS[index + 1] if index + 1 < len(GENERATIONS) else None
    per_sm = params.gemm_shape_model
    peak = _peak(generation, per_sm)
    if name.startswith("gemm_half_time"):
        if older is not None:
            hi = min(hi, params.gemm_half_time_s(older))
        if newer is not None:
            lo = max(lo, params.gemm_half_time_s(newer))
    else:  # effective peak = peak x efficiency, never lower on a newer generation
        if older is not None:
            lo = max(lo, params.gemm_efficiency(older) * _peak(older, per_sm) / peak)
        if newer is not None:
            hi = min(hi, params.gemm_efficiency(newer) * _peak(newer, per_sm) / peak)
    return lo, max(lo, hi)


def _peak(generation: str, per_sm: bool) -> float:
    """The generation's slowest dense 16-bit peak; with the shape model, per SM (the rate a wave of tiles runs
    at: a newer generation's SM is then never slower, and it has no fewer SMs)."""
    return min(g.peak_flops_per_s / (g.sm_count if per_sm else 1) for g in GPUS.values()
               if g.generation == generation)


def golden(f: Callable[[float], float], lo: float, hi: float, log: bool, steps: int = GOLDEN_STEPS) -> float:
    """The minimum of f on [lo, hi] by golden-section search (on a log scale if `log`), to `steps` steps."""
    if hi <= lo:
        return lo
    g = (math.sqrt(5) - 1) / 2
    to, back = (math.log, math.exp) if log else ((lambda x: x), (lambda x: x))
    a, b = to(lo), to(hi)
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(back(c)), f(back(d))
    for _ in range(steps):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(back(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(back(d))
    return back((a + b) / 2)


def _round(x: float) -> float:
    return float(f"{x:.{SIGNIFICANT_DIGITS}g}")


def _table(shape_model: bool) -> tuple[CostParameters, dict[str, tuple[float, float]]]:
    """The start and the bounds of the fit with or without the GEMM shape model."""
    return (SHAPE_START, BOUNDS | SHAPE_BOUNDS) if shape_model else (START, BOUNDS)


def fit(rows: list[Row], progress: Callable[[str], None] = lambda _: None,
        shape_model: bool = False) -> CostParameters:
    """Coordinate descent from START (SHAPE_START with the shape model; module docstring)."""
    params, table = _table(shape_model)
    for sweep in range(SWEEPS):
        for field in fields(CostParameters):
            name = field.name
            if name not in table:  # held at its value in START (the default of a parameter not fitted yet)
                continue
            generation = generation_of(name)
            subset = [r for r in rows if generation in (None, r.generation)]
            if not subset:
                continue
            lo, hi = bounds(name, params)
            def cost(x: float, n: str = name, s: list[Row] = subset, p: CostParameters = params) -> float:
                change: dict[str, Any] = {n: x}
                return objective(replace(p, **change), s)

            best = golden(cost, lo, hi, log=name in LOG_SCALE)
            chosen: dict[str, Any] = {name: min(max(_round(best), lo), hi)}
            params = replace(params, **chosen)
            progress(f"sweep {sweep} {name} = {getattr(params, name)}")
    return params


def settings(shape_model: bool = False) -> dict[str, Any]:
    """Everything besides the rows and the code that decides the fit's result."""
    start_params, table = _table(shape_model)
    start = {name: value for name, value in asdict(start_params).items() if name in table}
    out = {"start": start, "bounds": table, "log_scale": list(LOG_SCALE),
           "prior_half_time_s": PRIOR_HALF_TIME_S, "prior_weight": PRIOR_WEIGHT, "sweeps": SWEEPS,
           "golden_steps": GOLDEN_STEPS, "significant_digits": SIGNIFICANT_DIGITS}
    return out | ({"gemm_shape_model": True} if shape_model else {})


def inputs_digest(cases: list[dict[str, Any]], sources: Iterable[str], shape_model: bool = False) -> str:
    """SHA-256 of the fit's inputs: the rows it fits (as published), the sources, and its settings."""
    text = json.dumps({"rows": cases, "sources": sorted(sources), "settings": settings(shape_model)},
                      sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fit_document(code_version: dict[str, str], sources: Iterable[str] = FIT_SOURCES,
                 progress: Callable[[str], None] = lambda _: None, shape_model: bool = False) -> dict[str, Any]:
    """Run the fit (with the GEMM shape model if `shape_model`) and describe it: what simcore/cost/fitted.py
    holds."""
    sources = tuple(sources)
    cases = calibration_cases(sources)
    rows = calibration_rows(cases)
    params = fit(rows, progress, shape_model)
    predicted = predict(params, rows)
    errors = [abs(predicted[r.id] - r.measured_s) / r.measured_s for r in rows]
    return {
        "parameters": asdict(params),
        "fitted_sources": list(sources),
        "rows": [{"id": r.id, "measured_s": r.measured_s, "predicted_s": predicted[r.id]} for r in rows],
        "mean_abs_error_pct": round(100 * sum(errors) / len(errors), 3),
        "inputs_sha256": inputs_digest(cases, sources, shape_model),
        "code_version": code_version,
    }


def freshness_problems(document: dict[str, Any]) -> list[str]:
    """Why `document` (a fit's record) is not what the fit gives on the current code and rows; empty if fresh.
    Re-simulates every row it fitted with its parameters (a few seconds)."""
    problems = []
    sources = tuple(document["fitted_sources"])
    cases = calibration_cases(sources)
    shape_model = bool(document["parameters"].get("gemm_shape_model"))
    if document["inputs_sha256"] != inputs_digest(cases, sources, shape_model):
        problems.append("the fit's inputs (the fitted rows or the fit's settings) changed since it ran")
    recorded = {r["id"]: r for r in document["rows"]}
    if sorted(recorded) != sorted(str(c["id"]) for c in cases):
        problems.append("the rows fitted differ from the fitted sources' rows")
    params = CostParameters(**document["parameters"])
    rows = [r for r in calibration_rows(cases) if r.id in recorded]
    for row_id, predicted in predict(params, rows).items():
        was = float(recorded[row_id]["predicted_s"])
        if not math.isclose(predicted, was, rel_tol=PREDICTION_RTOL):
            problems.append(f"{row_id}: predicted {predicted!r} s now, {was!r} s when fitted")
    return problems


def render_module(document: dict[str, Any]) -> str:
    """simcore/cost/fitted.py's text for a fit's record (plain literals, one key a line)."""
    lines = [
        '"""The fitted cost-model parameters and the record of the fit that produced them.',
        "",
        "Written by `python bench/fit_cost_model.py` (simcore/calibration/fit.py); do not edit by hand:",
        "tests/simcore/calibration/test_fitted_parameters.py fails when this is not what the fit gives on the",
        "current code.",
        '"""',
        "",
        "from typing import Any",
        "",
        "FIT: dict[str, Any] = {",
    ]
    for key, value in document.items():
        if key == "rows":
            lines.append('    "rows": [')
            lines += [f"        {row!r}," for row in value]
            lines.append("    ],")
        elif isinstance(value, dict):
            lines.append(f"    {key!r}: {{")
            lines += [f"        {k!r}: {v!r}," for k, v in value.items()]
            lines.append("    },")
        else:
            lines.append(f"    {key!r}: {value!r},")
    lines.append("}")
    return "\n".join(lines).replace("'", '"') + "\n"
