"""`validate`: each row's own layout fields before the source's defaults, which sources are fitted read from the
fit's record, and the accuracy summarised per reference file, per source and per source group."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from simcore.calibration.validate import (
    SOURCES,
    group_of,
    is_fitted,
    load_reference,
    run_validation,
    scenario_for,
    summarise,
)
from simcore.cost.parameters import FITTED_SOURCES
from simcore.domain.layout import Precision, Recompute


def row(row_id: str) -> dict[str, Any]:
    return copy.deepcopy(next(c for c in load_reference() if c["id"] == row_id))


def test_a_row_zero_stage_wins_over_the_source_default() -> None:
    case = row("narayanan21-t2-175b-zero3-384")
    assert SOURCES["narayanan21"].zero_stage == 0
    layout = scenario_for(case).layout
    assert layout.zero_stage == 3
    assert layout.recompute is Recompute.FULL
    assert layout.microbatch_size == 1  # not published: the source's default


def test_a_row_microbatch_wins_over_the_whole_batch_default() -> None:
    case = row("megatron20-dgxa100-dp128-tp1-1b")
    assert scenario_for(case).layout.microbatch_size == 16  # 2048 / 128: the 2020 source's default
    case["layout"]["microbatch_size"] = 4
    assert scenario_for(case).layout.microbatch_size == 4


def test_a_row_recompute_and_precision_win_and_a_description_does_not() -> None:
    case = row("narayanan21-t1-1.7b")
    assert scenario_for(case).layout.precision is Precision.FP16  # "fp16/bf16 mixed (16-bit)": the default
    case["layout"]["precision"] = "bf16"
    case["layout"]["recompute"] = "selective"
    layout = scenario_for(case).layout
    assert layout.precision is Precision.BF16
    assert layout.recompute is Recompute.SELECTIVE


def test_fitted_sources_come_from_the_fit_record() -> None:
    assert FITTED_SOURCES == ("megatron20", "mcore24")
    assert is_fitted("mcore24-h100-weak-1.7b") and is_fitted("megatron20-dgx2v100-tp1-1b")
    assert not is_fitted("narayanan21-t1-1t") and not is_fitted("nemo-t5-3b-a100-8gpu")
    assert not is_fitted("unknown-row")


def test_groups_are_the_first_two_parts_of_the_id() -> None:
    assert group_of("narayanan21-t2-175b-zero3-384") == "narayanan21-t2"
    assert group_of("megatron20-dgx2v100-tp1-1b") == "megatron20-dgx2v100"
    assert group_of("nemo-t5-3b-a100-8gpu") == "nemo-t5"


def test_summarise_gives_rows_mean_and_max_per_part() -> None:
    cases = [
        {"g": "a", "calibration": True, "error_pct": -2.0},
        {"g": "a", "calibration": True, "error_pct": 4.0},
        {"g": "a", "calibration": False, "error_pct": -9.0},
        {"g": "b", "calibration": False, "error_pct": 1.0},
    ]
    summary = summarise(cases, "g")
    assert list(summary) == ["a", "b"]
    assert summary["a"]["fitted"] == {"rows": 2, "mean_abs_error_pct": 3.0, "max_abs_error_pct": 4.0}
    assert summary["a"]["not_fitted"] == {"rows": 1, "mean_abs_error_pct": 9.0, "max_abs_error_pct": 9.0}
    assert summary["a"]["all"] == {"rows": 3, "mean_abs_error_pct": 5.0, "max_abs_error_pct": 9.0}
    assert summary["b"]["fitted"] == {"rows": 0, "mean_abs_error_pct": None, "max_abs_error_pct": None}


@pytest.fixture(scope="module")
def small_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ids = ("megatron20-dgx2v100-tp1-1b", "megatron20-dgx2v100-tp2-2b", "narayanan21-t1-1.7b")
    path = tmp_path_factory.mktemp("reference") / "small.json"
    path.write_text(json.dumps({"cases": [row(i) for i in ids]}), encoding="utf-8")
    return run_validation(str(path))


def test_the_report_keeps_the_contract_keys_and_adds_the_summaries(small_report: dict[str, Any]) -> None:
    report = small_report
    assert {"cases", "mean_abs_error_pct", "max_abs_error_pct", "skipped"} <= set(report)
    for case in report["cases"]:
        assert {"id", "measured_s", "predicted_s", "error_pct", "calibration"} <= set(case)
        assert case["reference"] == "small.json"
    judged = [abs(c["error_pct"]) for c in report["cases"] if not c["calibration"]]
    assert report["mean_abs_error_pct"] == pytest.approx(sum(judged) / len(judged))
    assert list(report["by_reference"]) == ["small.json"]
    assert report["by_reference"]["small.json"]["fitted"]["rows"] == 2
    assert report["by_reference"]["small.json"]["not_fitted"]["rows"] == 1
    assert list(report["by_group"]) == ["megatron20-dgx2v100", "narayanan21-t1"]
    fitted = [abs(c["error_pct"]) for c in report["cases"] if c["calibration"]]
    assert report["by_source"]["megatron20"]["fitted"]["max_abs_error_pct"] == pytest.approx(max(fitted))
    assert report["fitted_sources"] == list(FITTED_SOURCES)


def test_cli_json_carries_the_summaries(small_report: dict[str, Any], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from service.cli.main import main
    path = tmp_path / "one.json"
    path.write_text(json.dumps([row("megatron20-dgx2v100-tp1-1b")]), encoding="utf-8")
    assert main(["validate", "--json", "--reference", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["by_group"]["megatron20-dgx2v100"]["fitted"]["rows"] == 1
    assert out["mean_abs_error_pct"] is None  # no row here is judged



def test_a_modern_row_that_publishes_virtual_stages_runs_interleaved() -> None:
    """A row that publishes virtual pipeline stages runs interleaved 1F1B with them, or with its Megatron-Bridge
    recipe preset's (simcore/calibration/moe_rows.py's RECIPE_BATCHING)."""
    from simcore.calibration import modern
    from simcore.calibration.moe_rows import recipe_batching
    from simcore.domain.layout import Schedule

    rows = [c for c in load_reference(shipped="training-runs-modern.json") if modern.handles(c)]
    chunks = {c["id"]: int(c["layout"].get("virtual_stages") or 1) for c in rows}
    for c in rows:
        preset = recipe_batching(modern.source_of(c), c)
        chunks[c["id"]] = preset[1] if preset is not None else chunks[c["id"]]
    assert any(v > 1 for v in chunks.values()) and any(v == 1 for v in chunks.values())
    for case in rows:
        try:
            layout = modern.scenario_for(case).layout
        except ValueError:
            continue  # a row validate cannot express (it says why)
        assert layout.virtual_stages == chunks[case["id"]]
        expected = Schedule.INTERLEAVED_1F1B if chunks[case["id"]] > 1 else Schedule.ONE_F_ONE_B
        assert layout.schedule is expected, case["id"]
