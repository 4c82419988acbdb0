"""Pipeline schedules past 1F1B: GPT-3 175B and the 1T GPT on A100s under 1F1B, interleaved 1F1B, ZB-H1, ZB-H2,
ZB-V and DualPipe, and T5-100B under 1F1B, ZB-H1 and ZB-H2, each at a few microbatch counts. Every figure of
README.md comes from here.

Setups (DGX A100 80 GB nodes, TP 8 inside a node, microbatch 1, full recomputation, as the Megatron runs):
- GPT-3 175B (96 layers): PP 8 on 64 GPUs; GPT 1T (128 layers): PP 32 on 256 GPUs; T5-100B (36 + 36 layers): PP 8
  on 64 GPUs. DP 1: the pipeline alone.
- interleaved 1F1B with 2 chunks per rank; ZB-H2 and ZB-V with post-validation (they need it, section 3 of the
  paper; the authors run both with it).

Usage, from the repository root:  python examples/pipeline-schedules/report.py          (writes README.md)
                                  python examples/pipeline-schedules/report.py --check  (exit 1 if it is stale)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from simcore import (
    MODEL_PRESETS,
    NODE_PRESETS,
    Layout,
    Recompute,
    Scenario,
    Schedule,
    model_from_fields,
    simulate,
    sized,
)
from topology.hardware import GIB

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"

GPT_SCHEDULES = (Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED_1F1B, Schedule.ZB_H1, Schedule.ZB_H2, Schedule.ZB_V,
                 Schedule.DUALPIPE)
T5_SCHEDULES = (Schedule.ONE_F_ONE_B, Schedule.ZB_H1, Schedule.ZB_H2)


@dataclass(frozen=True)
class Case:
    name: str
    preset: str
    pp: int
    microbatches: tuple[int, ...]
    schedules: tuple[Schedule, ...]


CASES = (
    Case("GPT-3 175B", "gpt3-175b", 8, (16, 32, 64), GPT_SCHEDULES),
    Case("GPT 1T", "gpt-1t", 32, (64, 128), GPT_SCHEDULES),
    Case("T5-100B", "t5-100b", 8, (16, 32, 64), T5_SCHEDULES),
)


def scenario(case: Case, schedule: Schedule, m: int) -> Scenario:
    layout = Layout(dp=1, tp=8, pp=case.pp, microbatch_size=1, global_batch_size=m, schedule=schedule,
                    virtual_stages=2 if schedule is Schedule.INTERLEAVED_1F1B else 1, recompute=Recompute.FULL,
                    optimizer_post_validation=schedule in (Schedule.ZB_H2, Schedule.ZB_V))
    return Scenario(model_from_fields(MODEL_PRESETS[case.preset]), sized(NODE_PRESETS["dgx-a100"], 8 * case.pp),
                    layout)


def figures(case: Case, schedule: Schedule, m: int) -> dict[str, float]:
    metrics = simulate(scenario(case, schedule, m)).metrics
    peak = metrics.peak_stage.memory
    return {"time": metrics.iteration_time_s, "bubble": 100 * metrics.bubble_fraction, "mfu": 100 * metrics.mfu,
            "peak": peak.total / GIB, "weights": peak.weights / GIB, "activations": peak.activations / GIB}


def table(cases: tuple[Case, ...] = CASES) -> list[str]:
    lines = ["| model | schedule | m | iteration s | bubble % | MFU % | peak GiB/GPU | weights GiB | activations GiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    found: dict[tuple[str, Schedule, int], dict[str, float]] = {}
    for case in cases:
        for m in case.microbatches:
            for schedule in case.schedules:
                f = found[(case.name, schedule, m)] = figures(case, schedule, m)
                lines.append(f"| {case.name} | {schedule} | {m} | {f['time']:.2f} | {f['bubble']:.1f} | {f['mfu']:.1f} "
                             f"| {f['peak']:.1f} | {f['weights']:.1f} | {f['activations']:.1f} |")
    return lines + [""] + summary(found, cases)


def summary(found: dict[tuple[str, Schedule, int], dict[str, float]], cases: tuple[Case, ...]) -> list[str]:
    """What the table says, sentence by sentence, from its own figures."""
    out = []
    for case in cases:
        m = case.microbatches[0]
        one = found[(case.name, Schedule.ONE_F_ONE_B, m)]
        best = min(case.schedules, key=lambda s: found[(case.name, s, m)]["time"])
        parts = ", ".join(f"{s} {found[(case.name, s, m)]['bubble']:.1f}%" for s in case.schedules)
        out.append(f"- {case.name} at m = {m}: bubble {parts}; fastest {best}, "
                   f"{one['time'] / found[(case.name, best, m)]['time']:.2f}x 1F1B's iteration.")
    return out


BEGIN, END = "<!-- schedules-table: begin -->", "<!-- schedules-table: end -->"


def write(lines: list[str]) -> str:
    text = README.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + tail


if __name__ == "__main__":
    fresh = write(table())
    if sys.argv[1:] == ["--check"]:
        raise SystemExit(0 if fresh == README.read_text(encoding="utf-8") else 1)
    README.write_text(fresh, encoding="utf-8")
    print(f"wrote {README}")
