"""The MLPerf table of `clustersim validate`: every published MLPerf Training LLM run of the shipped reference
(simcore/calibration/reference/mlperf-results.json) simulated at its published layout with `training.mlperf`,
predicted against published time-to-train (MLPerf's score) and, where the logs give one, step time.

The runs are requests (simcore/calibration/mlperf_runs.py writes them), validated and converted as any user's;
none was fitted on. One iteration each, so the table adds about a second per ten runs to `validate`.
docs/accuracy.md carries it between the markers below (bench/mlperf_table.py writes it; a test checks it).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from api_schemas import SimulationRequest
from service import convert
from simcore.calibration.mlperf_runs import request_for, runs
from simcore.errors import SpecError
from simcore.simulate import simulate

START_MARKER = "<!-- mlperf-table: written by python bench/mlperf_table.py; do not edit by hand -->"
END_MARKER = "<!-- mlperf-table: end -->"


def _error(predicted: float, published: float) -> float:
    return 100.0 * (predicted - published) / published


def _stats(errors: list[float]) -> dict[str, Any]:
    magnitudes = [abs(e) for e in errors]
    return {"rows": len(errors), "mean_abs_error_pct": sum(magnitudes) / len(magnitudes) if errors else None,
            "max_abs_error_pct": max(magnitudes) if errors else None}


def run_mlperf_validation() -> dict[str, Any]:
    """Per run: the published and predicted time-to-train and step time and their errors (%); the mean and the
    worst |error| of each over the runs, and per benchmark; the runs that could not be simulated, with why."""
    cases, refused = [], []
    for run in runs():
        try:
            request = SimulationRequest.model_validate(request_for(run))
            body = convert.to_response(simulate(convert.to_scenario(request)))
        except (ValidationError, SpecError, ValueError) as err:
            refused.append({"id": run["id"], "reason": str(err).split("\n")[0]})
            continue
        ml = body["training"]["mlperf"]
        published_step = run.get("step_time_s")
        cases.append({
            "id": run["id"], "benchmark": run["benchmark"], "version": run["version"], "gpus": run["num_gpus"],
            "gpu": run["cluster_preset"], "precision": run["layout"]["precision"],
            "published_min": run["time_to_train_min"], "predicted_min": ml["time_to_train_min"],
            "ttt_error_pct": _error(ml["time_to_train_min"], run["time_to_train_min"]),
            "published_step_s": published_step, "predicted_step_s": ml["step_time_s"],
            "step_error_pct": None if published_step is None else _error(ml["step_time_s"], published_step),
            "steps": ml["steps"], "published_samples": run.get("samples_to_target_mean"),
            "predicted_samples": ml["samples"],
        })
    by_benchmark = {name: {"time_to_train": _stats([c["ttt_error_pct"] for c in cases if c["benchmark"] == name]),
                           "step_time": _stats([c["step_error_pct"] for c in cases
                                                if c["benchmark"] == name and c["step_error_pct"] is not None])}
                    for name in dict.fromkeys(c["benchmark"] for c in cases)}
    return {"cases": cases, "refused": refused, "fitted": False,
            "time_to_train": _stats([c["ttt_error_pct"] for c in cases]),
            "step_time": _stats([c["step_error_pct"] for c in cases if c["step_error_pct"] is not None]),
            "by_benchmark": by_benchmark}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def _summary(report: dict[str, Any]) -> list[str]:
    ttt, step = report["time_to_train"], report["step_time"]
    lines = [f"MLPerf runs (not fitted): time-to-train over {ttt['rows']} runs: mean |error| "
             f"{ttt['mean_abs_error_pct']:.1f}%, worst {ttt['max_abs_error_pct']:.1f}%"]
    if step["rows"]:
        lines.append(f"MLPerf runs (not fitted): step time over {step['rows']} runs: mean |error| "
                     f"{step['mean_abs_error_pct']:.1f}%, worst {step['max_abs_error_pct']:.1f}%")
    return lines


def render_mlperf_table(report: dict[str, Any]) -> str:
    """The text table `clustersim validate` prints after the other sources'."""
    lines = [f"{'MLPerf run':40s} {'published min':>13s} {'predicted min':>13s} {'error %':>8s} "
             f"{'published s':>11s} {'predicted s':>11s} {'error %':>8s}"]
    for c in report["cases"]:
        published_step = "-" if c["published_step_s"] is None else f"{c['published_step_s']:.3f}"
        lines.append(f"{c['id']:40s} {c['published_min']:13.2f} {c['predicted_min']:13.2f} "
                     f"{c['ttt_error_pct']:+8.1f} {published_step:>11s} {c['predicted_step_s']:11.3f} "
                     f"{_pct(c['step_error_pct']):>8s}")
    lines += _summary(report)
    lines += [f"refused {r['id']}: {r['reason']}" for r in report["refused"]]
    return "\n".join(lines)


def render_markdown(report: dict[str, Any]) -> str:
    """The documentation's MLPerf table: the summary, per benchmark, then every run."""
    lines = [*_summary(report), "",
             "| benchmark | runs | time-to-train mean \\|error\\| % | worst % | runs with a step time | step mean "
             "\\|error\\| % | worst % |", "|---|---|---|---|---|---|---|"]
    for name, parts in report["by_benchmark"].items():
        t, s = parts["time_to_train"], parts["step_time"]
        step = f"{s['rows']} | {s['mean_abs_error_pct']:.1f} | {s['max_abs_error_pct']:.1f}" if s["rows"] \
            else "0 | - | -"
        lines.append(f"| `{name}` | {t['rows']} | {t['mean_abs_error_pct']:.1f} | {t['max_abs_error_pct']:.1f} | "
                     f"{step} |")
    lines += ["", "| run | GPUs | precision | published min | predicted min | error % | published step s | "
              "predicted step s | error % |", "|---|---|---|---|---|---|---|---|---|"]
    for c in report["cases"]:
        published_step = "-" if c["published_step_s"] is None else f"{c['published_step_s']:.3f}"
        lines.append(f"| `{c['id']}` | {c['gpus']} {c['gpu']} | {c['precision']} | {c['published_min']:.2f} | "
                     f"{c['predicted_min']:.2f} | {c['ttt_error_pct']:+.1f} | {published_step} | "
                     f"{c['predicted_step_s']:.3f} | {_pct(c['step_error_pct'])} |")
    if report["refused"]:
        lines += ["", "Refused: " + ", ".join(f"`{r['id']}` ({r['reason']})" for r in report["refused"])]
    return "\n".join(lines)


def replace_section(text: str, table: str) -> str:
    """`text` with what lies between the markers replaced by `table`; ValueError without the markers."""
    start, end = text.find(START_MARKER), text.find(END_MARKER)
    if start < 0 or end < start:
        raise ValueError("the text has no mlperf-table markers")
    return text[:start + len(START_MARKER)] + "\n" + table + "\n" + text[end:]


def current_section(text: str) -> str:
    start, end = text.find(START_MARKER), text.find(END_MARKER)
    if start < 0 or end < start:
        raise ValueError("the text has no mlperf-table markers")
    return text[start + len(START_MARKER):end].strip("\n")
