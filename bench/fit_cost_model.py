"""Fit the cost model's free parameters (simcore.cost.parameters.CostParameters) on the calibration rows.

The calibration rows are the Megatron 2020 and Megatron-Core 2024 runs of the reference data; the Narayanan'21
rows are never used here, so `clustersim validate` judges the fit on data it has not seen. The objective is the
mean absolute relative error of iteration time, plus a weak prior that keeps a GEMM half-time near 10 us where
the rows cannot tell (a generation whose rows all use large matrix products): PRIOR_WEIGHT * ln(t / 10 us)^2.
Coordinate descent: each parameter in turn by golden-section search within physical bounds, a GPU
generation's parameters judged only on that generation's rows.

Run:  python bench/fit_cost_model.py      (prints the fitted values to paste into simcore/calibration.py)
"""

from __future__ import annotations

import math
import time
from dataclasses import fields, replace

from simcore.calibration.validate import SOURCES, _source, load_reference, measured_time, scenario_for
from simcore.cost.parameters import FITTED, CostParameters
from simcore.simulate import simulate
from topology.hardware import GPUS

BOUNDS = {
    "gemm_efficiency_volta": (0.4, 0.95),
    "gemm_efficiency_ampere": (0.4, 0.95),
    "gemm_efficiency_hopper": (0.4, 0.95),
    "gemm_half_time_volta_s": (1e-6, 3e-4),
    "gemm_half_time_ampere_s": (1e-6, 3e-4),
    "gemm_half_time_hopper_s": (1e-6, 3e-4),
    "memory_efficiency": (0.5, 0.95),
}
GENERATION = {"gemm_efficiency_volta": "volta", "gemm_efficiency_ampere": "ampere",
              "gemm_efficiency_hopper": "hopper", "gemm_half_time_volta_s": "volta",
              "gemm_half_time_ampere_s": "ampere", "gemm_half_time_hopper_s": "hopper"}
PRIOR_HALF_TIME_S = 1e-5
PRIOR_WEIGHT = 0.0005  # an order of magnitude away from the prior costs 0.27 points of mean error


def calibration_rows() -> list[tuple[str, object, float]]:
    rows = []
    for case in load_reference():
        source = _source(case["id"])
        if source is None or not SOURCES[source][0]:
            continue
        measured = measured_time(case)
        if measured is None:
            continue
        scenario = scenario_for(case)
        rows.append((GPUS[scenario.cluster.gpu].generation, scenario, measured))
    return rows


def error(params: CostParameters, rows: list) -> float:
    total = 0.0
    for _gen, scenario, measured in rows:
        predicted = simulate(replace(scenario, cost_parameters=params)).metrics.iteration_time_s
        total += abs(predicted - measured) / measured
    return total / len(rows)


def objective(params: CostParameters, rows: list) -> float:
    prior = sum(math.log(getattr(params, name) / PRIOR_HALF_TIME_S) ** 2
                for name in ("gemm_half_time_volta_s", "gemm_half_time_ampere_s", "gemm_half_time_hopper_s"))
    return error(params, rows) + PRIOR_WEIGHT * prior


def golden(f, lo: float, hi: float, log: bool, steps: int = 7) -> float:
    g = (math.sqrt(5) - 1) / 2
    tr = (math.log, math.exp) if log else (lambda x: x, lambda x: x)
    a, b = tr[0](lo), tr[0](hi)
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(tr[1](c)), f(tr[1](d))
    for _ in range(steps):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(tr[1](c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(tr[1](d))
    return tr[1]((a + b) / 2)


def main() -> None:
    started = time.perf_counter()
    rows = calibration_rows()
    params = FITTED
    print(f"{len(rows)} calibration rows; start error {100 * error(params, rows):.2f}%")
    for sweep in range(2):
        for field in fields(CostParameters):
            name = field.name
            subset = [r for r in rows if GENERATION.get(name, r[0]) == r[0]]
            lo, hi = BOUNDS[name]
            best = golden(lambda x, n=name, s=subset, p=params: objective(replace(p, **{n: x}), s), lo, hi,
                          log=name.startswith("gemm_half_time"))
            params = replace(params, **{name: float(f"{best:.3g}")})
            print(f"sweep {sweep} {name} = {getattr(params, name)}  error {100 * error(params, rows):.2f}%")
    print(params)
    print(f"fitted in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
