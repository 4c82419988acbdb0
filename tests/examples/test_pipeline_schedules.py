"""examples/pipeline-schedules: the README's table is what the simulator gives now (the T5-100B and GPT-3 175B
m = 16 rows are simulated again; `report.py --check` redoes them all), and what its sentences say holds."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from bench_scripts import load_file

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "examples" / "pipeline-schedules"


def report() -> ModuleType:
    module = load_file(HERE / "report.py", "pipeline_schedules_report")
    return module


def test_the_readme_rows_are_current() -> None:
    module = report()
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    t5 = next(c for c in module.CASES if c.preset == "t5-100b")
    gpt = next(c for c in module.CASES if c.preset == "gpt3-175b")
    cases = (t5, module.Case(gpt.name, gpt.preset, gpt.pp, (16,), gpt.schedules))
    lines = module.table(cases)
    for line in lines[2:]:
        if line.startswith("|"):
            assert line in readme, f"stale row: {line}; run python examples/pipeline-schedules/report.py"
    # the sentence of each case is as the table gives it
    for line in lines:
        if line.startswith("- "):
            assert line in readme, line


def test_schedules_past_1f1b_shrink_the_bubble_and_dualpipe_doubles_the_weights() -> None:
    module = report()
    gpt = next(c for c in module.CASES if c.preset == "gpt3-175b")
    one = module.figures(gpt, module.Schedule.ONE_F_ONE_B, 16)
    for schedule in gpt.schedules[1:]:
        assert module.figures(gpt, schedule, 16)["bubble"] < one["bubble"]
    assert module.figures(gpt, module.Schedule.DUALPIPE, 16)["weights"] > 1.9 * one["weights"]
