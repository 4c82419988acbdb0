"""`clustersim validate` on the NeMo T5-3B rows (NeMo-Framework-Launcher README, DGX A100, 1-20 nodes): they are
simulated (not skipped), each gets an error figure, they are judged rows (not calibration), and their mean error
stays within what was measured when they were added.

Measured when added (encoder tokens as the reading of "tokens"; service/validate.py says why): errors +5.0,
+3.5, +2.1, +1.7, -1.2 and -8.9% at 8, 16, 32, 40, 80 and 160 GPUs, mean |error| 3.7%, max 8.9%. The bounds
below (mean under 6%, each under 15%) leave room for cost-model changes without hiding a real regression.
The NeMo GPT rows publish no global batch, so they stay skipped.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from service.cli.main import main
from simcore.calibration.validate import load_reference, measured_time, run_validation, scenario_for
from simcore.domain.layout import Precision, Recompute
from simcore.domain.model import Architecture, AttentionKind
from simcore.simulate import simulate

T5_ID = re.compile(r"^nemo-t5-3b-a100-\d+gpu$")
MEAN_BOUND_PCT = 6.0
ROW_BOUND_PCT = 15.0


def nemo_rows() -> list[dict[str, Any]]:
    return [case for case in load_reference() if str(case.get("id", "")).startswith("nemo-")]


def t5_rows() -> list[dict[str, Any]]:
    return [case for case in nemo_rows() if T5_ID.match(case["id"])]


@pytest.fixture(scope="module")
def nemo_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped NeMo rows (T5 and GPT) alone, so the module does not simulate the whole reference set."""
    path = tmp_path_factory.mktemp("reference") / "nemo.json"
    path.write_text(json.dumps({"cases": nemo_rows()}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def report(nemo_reference: Path) -> dict[str, Any]:
    return run_validation(str(nemo_reference))


def t5_cases(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in report["cases"] if T5_ID.match(c["id"])]


def test_the_shipped_reference_has_the_six_t5_rows() -> None:
    assert sorted(int(c["cluster"]["num_gpus"]) for c in t5_rows()) == [8, 16, 32, 40, 80, 160]


def test_t5_rows_are_run_not_skipped(report: dict[str, Any]) -> None:
    ran = {c["id"] for c in t5_cases(report)}
    assert ran == {c["id"] for c in t5_rows()}
    assert not [s for s in report["skipped"] if T5_ID.match(s["id"])]


def test_each_t5_row_has_an_error_figure_and_is_not_calibration(report: dict[str, Any]) -> None:
    for case in t5_cases(report):
        assert case["calibration"] is False
        assert case["measured_s"] > 0 and case["predicted_s"] > 0
        expected = 100.0 * (case["predicted_s"] - case["measured_s"]) / case["measured_s"]
        assert case["error_pct"] == pytest.approx(expected)
        assert abs(case["error_pct"]) < ROW_BOUND_PCT, case


def test_mean_t5_error_is_within_the_measured_bound(report: dict[str, Any]) -> None:
    errors = [abs(c["error_pct"]) for c in t5_cases(report)]
    assert sum(errors) / len(errors) < MEAN_BOUND_PCT
    # only the T5 rows are judged in this report, so its mean is theirs
    assert report["mean_abs_error_pct"] == pytest.approx(sum(errors) / len(errors))


def test_measured_time_reads_tokens_as_encoder_tokens() -> None:
    for case in t5_rows():
        expected = 1920 * 512 / case["measured"]["tokens_per_s"]
        assert measured_time(case) == pytest.approx(expected)
    one_node = next(c for c in t5_rows() if c["cluster"]["num_gpus"] == 8)
    assert measured_time(one_node) == pytest.approx(8.875, abs=1e-3)


def test_t5_scenario_is_nemos_t5_3b_with_the_source_settings() -> None:
    scenario = scenario_for(next(c for c in t5_rows() if c["cluster"]["num_gpus"] == 16))
    model, layout = scenario.model, scenario.layout
    assert model.architecture is Architecture.ENCODER_DECODER
    assert (model.encoder_layers, model.decoder_layers) == (24, 24)
    assert (model.hidden_size, model.ffn_hidden_size, model.num_attention_heads, model.head_dim) == (
        2048, 5120, 32, 64)
    assert model.gated_mlp and model.tied_embeddings
    assert (model.seq_length, model.decoder_seq_length, model.vocab_size) == (512, 128, 29184)
    assert model.attention is AttentionKind.STANDARD
    assert (layout.dp, layout.tp, layout.pp, layout.microbatch_size, layout.global_batch_size) == (8, 2, 1, 24, 1920)
    assert layout.zero_stage == 1 and not layout.overlap_grad_reduce
    assert not layout.sequence_parallel and not layout.tp_comm_overlap
    assert layout.recompute is Recompute.NONE and layout.precision is Precision.BF16


def test_each_t5_simulation_is_fast() -> None:
    for case in t5_rows():
        started = time.perf_counter()
        simulate(scenario_for(case))
        assert time.perf_counter() - started < 2.0, case["id"]


def test_a_global_batch_that_is_not_whole_microbatches_is_skipped_with_a_reason(tmp_path: Path) -> None:
    case = json.loads(json.dumps(t5_rows()[0]))
    case["layout"]["global_batch"] = 1900  # dp 4 x microbatch 24 = 96 does not divide it
    path = tmp_path / "odd.json"
    path.write_text(json.dumps([case]), encoding="utf-8")
    report = run_validation(str(path))
    assert report["cases"] == []
    assert "whole number of microbatches" in report["skipped"][0]["reason"]


def test_nemo_gpt_rows_publish_no_global_batch_and_stay_skipped(report: dict[str, Any]) -> None:
    gpt = [c for c in nemo_rows() if c["model"]["arch"] == "gpt"]
    assert gpt and all("global_batch" not in c["layout"] for c in gpt)
    skipped = {s["id"]: s["reason"] for s in report["skipped"]}
    for case in gpt:
        assert "global batch" in skipped[case["id"]]
    assert not [c for c in report["cases"] if c["id"].startswith("nemo-gpt")]


def test_validate_json_includes_the_t5_rows_as_not_calibration(
        nemo_reference: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--json", "--reference", str(nemo_reference)]) == 0
    document = json.loads(capsys.readouterr().out)
    # the contract's keys, plus the per-file, per-source and per-group summaries and the rows fitted on
    assert set(document) == {"cases", "mean_abs_error_pct", "max_abs_error_pct", "skipped", "fitted_sources",
                             "fitted_rows", "by_reference", "by_source", "by_group"}
    rows = [c for c in document["cases"] if T5_ID.match(c["id"])]
    assert len(rows) == 6
    for row in rows:
        assert set(row) == {"id", "measured_s", "predicted_s", "error_pct", "calibration", "reference", "source",
                            "group"}
        assert row["calibration"] is False
    assert document["max_abs_error_pct"] == pytest.approx(max(abs(r["error_pct"]) for r in rows))
