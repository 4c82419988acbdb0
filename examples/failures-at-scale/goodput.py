"""Failures at scale: Llama 3 405B on 16,384 H100s for 15T tokens, with the paper's interruption rate.

Simulates the request of this folder once (the same path as `clustersim simulate`), then, from its simulated
throughput and simcore/training_plan.py's formulas, tabulates goodput against the checkpoint interval (Daly's optimum
marked) and goodput at the optimum for other checkpoint write and restart times, and writes README.md.

Usage, from the repository root:  python examples/failures-at-scale/goodput.py          (writes README.md)
                                  python examples/failures-at-scale/goodput.py --check  (exit 1 if it is stale)
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

if __spec__ is None:  # run by its path: the repository root first, to import bench/ (README tooling) as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from api_schemas import load_request_file
from bench.generated import write_or_check
from service.convert import to_scenario
from simcore import Checkpointing, Failures, TrainingRun, simulate
from simcore.training_plan import TrainingPlan, plan_training

HERE = Path(__file__).resolve().parent
REQUEST = HERE / "llama3-405b-16k-h100.yaml"
INTERVALS_MIN = (2, 5, 10, 14, 16, 17, 18, 19, 20, 25, 30, 45, 60, 120)
WRITES_S = (10, 30, 60, 120, 300)
RESTARTS_S = (60, 180, 600, 1200)


def _plans(base: TrainingRun, outcome_args: dict[str, float | int | None]) -> dict[str, object]:
    def plan(run: TrainingRun) -> TrainingPlan:
        return plan_training(run, **outcome_args)  # type: ignore[arg-type]

    assert base.checkpoint is not None and base.failures is not None
    best = plan(base)
    curve = [(m, plan(replace(base, checkpoint=replace(base.checkpoint, interval_s=60.0 * m))).goodput)
             for m in INTERVALS_MIN]
    grid = {(w, r): plan(replace(base, checkpoint=Checkpointing(write_s=float(w)),
                                 failures=Failures(restart_s=float(r), mtbf_s_per_gpu=base.failures.mtbf_s_per_gpu)))
            for w in WRITES_S for r in RESTARTS_S}
    return {"best": best, "curve": curve, "grid": grid}


def render() -> str:
    scenario = to_scenario(load_request_file(str(REQUEST)))
    outcome = simulate(scenario)
    metrics, training = outcome.metrics, scenario.training
    assert training is not None and outcome.training is not None
    args: dict[str, float | int | None] = {
        "tokens_per_s": metrics.tokens_per_s, "tokens_per_iteration": metrics.tokens_per_s * metrics.iteration_time_s,
        "parameters": scenario.model.total_parameters(), "num_gpus": scenario.cluster.num_gpus,
        "num_nodes": scenario.cluster.num_nodes, "gpu_power_w": 700.0}
    plans = _plans(training, args)
    best: TrainingPlan = plans["best"]  # type: ignore[assignment]
    assert best == outcome.training
    curve: list[tuple[int, float]] = plans["curve"]  # type: ignore[assignment]
    grid: dict[tuple[int, int], TrainingPlan] = plans["grid"]  # type: ignore[assignment]
    assert best.job_mtbf_s is not None and best.daly_interval_s is not None and best.young_interval_s is not None
    peak = max(curve, key=lambda row: row[1])
    lines = [
        "# Failures at scale: Llama 3 405B on 16,384 H100s",
        "",
        "Written by `python examples/failures-at-scale/goodput.py` from the simulation of",
        "[llama3-405b-16k-h100.yaml](llama3-405b-16k-h100.yaml); a test checks that it is current.",
        "",
        "The run: Llama 3 405B trained on 15T tokens with the layout of its paper (Dubey et al. 2024, Table 4: TP 8",
        "x PP 16 x DP 128, 8,192-token sequences, 16M tokens a step), and the paper's failure rate: 466",
        f"interruptions in 54 days, a job MTBF of {best.job_mtbf_s / 60:.0f} minutes (given as an MTBF per GPU of",
        "that times 16,384). The checkpoint write time (1 minute) and the restart time (10 minutes) are assumptions;",
        "the last table varies them.",
        "",
        "## The simulated iteration",
        "",
        f"- iteration {metrics.iteration_time_s:.2f} s, {metrics.tokens_per_s / 1e6:.2f}M tokens/s, MFU "
        f"{metrics.mfu:.1%} (the paper reports 41% BF16 MFU for this layout on 16,384 GPUs)",
        f"- {best.iterations:,} iterations; without failures {best.without_failures.days:.1f} days, "
        f"{best.without_failures.gpu_hours / 1e6:.1f}M GPU-hours, "
        f"${(best.without_failures.cost_usd or 0) / 1e6:.1f}M at $2 a GPU-hour, "
        f"{best.without_failures.energy_mwh:,.0f} MWh at 700 W a GPU",
    ]
    lines += [f"- warning: {w}" for w in outcome.warnings]
    lines += [
        "",
        "## With checkpoints and failures, at Daly's optimum",
        "",
        f"- checkpoint every {best.daly_interval_s / 60:.1f} minutes of training (Daly 2006; Young 1974 gives "
        f"{best.young_interval_s / 60:.1f})",
        f"- {best.with_failures.days:.1f} days, {best.with_failures.gpu_hours / 1e6:.1f}M GPU-hours, "
        f"${(best.with_failures.cost_usd or 0) / 1e6:.1f}M",
        f"- {best.expected_interruptions:,.0f} expected interruptions; checkpoints take "
        f"{best.checkpoint_overhead_s / 86_400:.1f} days, failures {best.lost_work_s / 86_400:.1f} days "
        f"(recomputed work and restarts; to first order {best.lost_work_per_failure_s or 0:.0f} s a failure)",
        f"- **goodput {best.goodput:.3f}**",
        "",
        "## Goodput against the checkpoint interval",
        "",
        "| interval (min) | goodput |",
        "|---:|---:|",
    ]
    lines += [f"| {m} | {g:.4f}{' (highest)' if (m, g) == peak else ''} |" for m, g in curve]
    lines += [
        "",
        f"The highest goodput on this grid is at {peak[0]} minutes; Daly's optimum is "
        f"{best.daly_interval_s / 60:.1f} minutes.",
        "",
        "## Goodput at the optimum, by checkpoint write time and restart time",
        "",
        "| write \\ restart | " + " | ".join(f"{r // 60} min" for r in RESTARTS_S) + " |",
        "|---|" + "---:|" * len(RESTARTS_S),
    ]
    for w in WRITES_S:
        cells = [f"{grid[(w, r)].goodput:.3f}{' **>0.9**' if grid[(w, r)].goodput > 0.9 else ''}" for r in RESTARTS_S]
        lines.append(f"| {w} s | " + " | ".join(cells) + " |")
    keeps = []
    for w in WRITES_S:
        ok = [r for r in RESTARTS_S if grid[(w, r)].goodput > 0.9]
        keeps.append(f"{w} s writes with restarts up to {max(ok) // 60} min" if ok else None)
    said = [k for k in keeps if k is not None]
    lines += [
        "",
        "The published run kept more than 90% effective training time. At this failure rate goodput stays above",
        "0.9 with " + ("; ".join(said) if said else "none of these combinations")
        + " (the bold cells), and with no checkpoint write of "
        + f"{min(w for w, k in zip(WRITES_S, keeps) if k is None)} s or more: that takes asynchronous checkpointing",
        "and fast restarts, as the paper describes, not the 1-minute synchronous write and 10-minute restart",
        "assumed above.",
        "",
        "Formulas: docs/usage.md, \"A whole training run\"; the expected wall time follows Daly's exponential",
        "failure model, T = M e^(R/M) (e^((tau + delta)/M) - 1) W / tau.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return write_or_check(HERE / "README.md", render(), argv, "python examples/failures-at-scale/goodput.py")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
