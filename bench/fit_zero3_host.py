"""Fit HOST_OP_2021_S (simcore/cost/sharding.py) on the two ZeRO 3 rows of Narayanan et al. 2021 (FITTED_ROWS):
the host time per op of DeepSpeed v0.4's list-based collectives, within HOST_OP_RANGE_S.

The rows' errors move in the same direction with it (more host time, slower at both sizes), so the value that
minimises the larger |error| is where the two errors are opposite; it is found by bisection on their sum, to
0.1 us. Prints that value and both rows' errors at it.

Run:  python bench/fit_zero3_host.py
"""

from __future__ import annotations

import dataclasses

from simcore.calibration.validate import load_reference, measured_time, scenario_for
from simcore.cost import sharding
from simcore.domain.layout import ZeroImplementation
from simcore.simulate import simulate

STEP_S = 1e-7


def errors(host_op_s: float) -> list[float]:
    """The two rows' errors (%) with `host_op_s` per host op."""
    rows = {c["id"]: c for c in load_reference() if c.get("id") in sharding.FITTED_ROWS}
    saved = sharding.POLICIES[ZeroImplementation.DEEPSPEED_2021]
    sharding.POLICIES[ZeroImplementation.DEEPSPEED_2021] = dataclasses.replace(saved, host_op_s=host_op_s)
    try:
        out = []
        for row_id in sharding.FITTED_ROWS:
            predicted = simulate(scenario_for(rows[row_id])).metrics.iteration_time_s
            measured = measured_time(rows[row_id])
            assert measured is not None
            out.append(100.0 * (predicted - measured) / measured)
        return out
    finally:
        sharding.POLICIES[ZeroImplementation.DEEPSPEED_2021] = saved


def fit() -> float:
    low, high = (round(x / STEP_S) for x in sharding.HOST_OP_RANGE_S)
    while high - low > 1:
        middle = (low + high) // 2
        if sum(errors(middle * STEP_S)) < 0:
            low = middle
        else:
            high = middle
    return min((low * STEP_S, high * STEP_S), key=lambda x: max(abs(e) for e in errors(x)))


def main() -> None:
    best = fit()
    print(f"HOST_OP_2021_S = {best:.1e}: errors " + ", ".join(
        f"{row} {e:+.1f}%" for row, e in zip(sharding.FITTED_ROWS, errors(best), strict=True)))


if __name__ == "__main__":
    main()
