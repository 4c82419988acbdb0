"""The Zero Bubble paper's setups (reference rows `zb-*`, simcore/calibration/zero_bubble.py): the simulated
per-stage T_F, T_B, T_W of a middle stage against the paper's profiled ones (Table 9), and the simulated speed-ups
of ZB-H1 and ZB-H2 (with post-validation, as the paper ran them) over 1F1B on the setups with m >= 2p.

    python bench/zero_bubble.py          # a table
    python bench/zero_bubble.py --json   # the figures
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import Any

from simcore.calibration import zero_bubble
from simcore.calibration.validate import load_reference
from simcore.domain.layout import Schedule
from simcore.simulate import simulate

# The targets: the per-stage times within 15%, the speed-ups in these ranges.
PASS_TIME_TOLERANCE = 0.15
SPEEDUP_RANGES = {"zb_h1": (1.03, 1.20), "zb_h2": (1.05, 1.35)}


def rows() -> list[dict[str, Any]]:
    return [c for c in load_reference(None, "training-runs-modern.json") if zero_bubble.handles(c)]


def pass_times() -> list[dict[str, Any]]:
    """Per pass-time row: measured and simulated T_F, T_B, T_W (ms) of a middle stage."""
    out = []
    for case in rows():
        if case.get("kind") != "microbenchmark":
            continue
        stage = simulate(zero_bubble.scenario_for(case, Schedule.ZB_H1)).metrics.stages[1]
        simulated = {"T_F": stage.forward_s * 1e3, "T_B": stage.backward_input_s * 1e3,
                     "T_W": stage.backward_weight_s * 1e3}
        out.append({"id": case["id"], "measured_ms": {k: case["measured"][k] for k in simulated},
                    "simulated_ms": simulated,
                    "error_pct": {k: 100 * (simulated[k] / case["measured"][k] - 1) for k in simulated}})
    return out


def speedups(ids: set[str] | None = None) -> list[dict[str, Any]]:
    """Per 1F1B row with m >= 2p (of `ids`, if given): simulated iteration times and the zero-bubble schedules'
    speed-ups."""
    out = []
    for case in rows():
        lay = case["layout"]
        if case.get("kind") != "training" or int(lay["num_microbatches"]) < 2 * int(lay["pp"]):
            continue
        if ids is not None and case["id"] not in ids:
            continue
        base = zero_bubble.scenario_for(case)
        times = {"1f1b": simulate(base).metrics.iteration_time_s}
        for name, schedule in (("zb_h1", Schedule.ZB_H1), ("zb_h2", Schedule.ZB_H2)):
            layout = replace(base.layout, schedule=schedule, optimizer_post_validation=True)
            times[name] = simulate(replace(base, layout=layout)).metrics.iteration_time_s
        out.append({"id": case["id"], "iteration_s": times,
                    "speedup": {k: times["1f1b"] / times[k] for k in SPEEDUP_RANGES}})
    return out


def main() -> None:
    report = {"pass_times": pass_times(), "speedups": speedups()}
    if sys.argv[1:] == ["--json"]:
        print(json.dumps(report, indent=1))
        return
    print("row                          T_F meas/sim     T_B meas/sim     T_W meas/sim  (ms)")
    for r in report["pass_times"]:
        cells = "  ".join(f"{r['measured_ms'][k]:6.2f}/{r['simulated_ms'][k]:6.2f}" for k in ("T_F", "T_B", "T_W"))
        print(f"{r['id']:28} {cells}")
    print("\nrow                          1F1B s    ZB-H1 speed-up  ZB-H2 speed-up")
    for r in report["speedups"]:
        print(f"{r['id']:28} {r['iteration_s']['1f1b']:7.3f}   {r['speedup']['zb_h1']:6.3f}          "
              f"{r['speedup']['zb_h2']:6.3f}")


if __name__ == "__main__":
    main()
