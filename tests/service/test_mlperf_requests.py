"""`training.mlperf` and `layout.precision: nvfp4` through the request contract (docs/contract-mlperf.md): a
published MLPerf Training v5.1 result against its prediction, and bad input that exits 2 (HTTP 422) naming the field
and the rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses

from api_schemas import SimulationRequest
from service import convert
from simcore.simulate import simulate

CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "contract-mlperf.md"
# NVIDIA's MLPerf Training v5.1 closed Llama 3.1 8B runs on 8 GPUs (mlcommons/training_results_v5.1 @441d65f,
# NVIDIA/results/<system>/llama31_8b/result_0..9.txt; layout from NVIDIA/benchmarks/llama31_8b/implementations/nemo/
# config_<GPU>_2x4x2xtp1pp1cp1_8b_fp4.sh: NVFP4, TP 1, PP 1, CP 1, microbatch 2, global batch 16). The score is the
# olympic mean of the 10 runs' run_start-to-run_stop minutes: Tyche (GB200 NVL72) 75.233 ... 83.825 -> 79.325;
# Theia (GB300 NVL72) 64.226 ... 69.140 -> 67.373.
PUBLISHED_MIN = {"gb200-nvl72": 79.325, "gb300-nvl72": 67.373}

BASE: dict[str, Any] = {
    "model": {"preset": "llama3-8b", "seq_length": 8192, "attention": "flash"},
    "cluster": {"preset": "gb200-nvl72", "num_gpus": 8},
    "layout": {"dp": 8, "tp": 1, "pp": 1, "microbatch_size": 2, "global_batch_size": 16, "precision": "nvfp4",
               "zero_stage": 1, "overlap_grad_reduce": True},
    "training": {"mlperf": {"benchmark": "llama31_8b", "version": "5.1"}},
}


def _run(doc: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))
    return body


@pytest.mark.parametrize("preset", sorted(PUBLISHED_MIN))
def test_a_published_mlperf_result_against_its_prediction(preset: str) -> None:
    doc = copy.deepcopy(BASE)
    doc["cluster"]["preset"] = preset
    body = _run(doc)
    ml = body["training"]["mlperf"]
    assert ml["step_time_s"] == body["iteration_time_s"]
    assert ml["time_to_train_min"] == pytest.approx(
        (ml["steps"] * ml["step_time_s"] + ml["evaluations"] * ml["eval_time_s"]) / 60)
    error = ml["time_to_train_min"] / PUBLISHED_MIN[preset] - 1
    print(f"llama31_8b v5.1 on 8 x {preset}: predicted {ml['time_to_train_min']:.1f} min ({ml['steps']} steps of "
          f"{ml['step_time_s']:.3f} s, {ml['evaluations']} evaluations of {ml['eval_time_s']:.2f} s), published "
          f"{PUBLISHED_MIN[preset]:.1f} min: {100 * error:+.1f}%")
    assert abs(error) < 0.30
    # docs/contract-mlperf.md ("A published result against its prediction") carries these figures as printed here
    text = CONTRACT.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| 8 x ") and f"(`{preset}`," in line)
    assert row.split(" | ", 1)[1] == (
        f"{ml['time_to_train_min']:.1f} min ({ml['steps']:,} steps of {ml['step_time_s']:.3f} s, "
        f"{ml['evaluations']} evaluations of {ml['eval_time_s']:.2f} s) | {PUBLISHED_MIN[preset]:.1f} min | "
        f"{100 * error:+.1f}% |"), f"docs/contract-mlperf.md's {preset} row is stale"
    if preset == "gb200-nvl72":  # the prose after the table quotes the GB200 step and evaluation
        prose = " ".join(text.split())
        assert f"on GB200 ({ml['step_time_s']:.3f} s predicted;" in prose, "stale GB200 step in the prose"
        assert f"evaluations 8.2 s ({ml['eval_time_s']:.2f} s predicted)" in prose, "stale GB200 evaluation"


def test_mlperf_sets_the_training_sections_tokens_and_iterations() -> None:
    body = _run(BASE)
    training, ml = body["training"], body["training"]["mlperf"]
    assert training["iterations"] == ml["steps"]
    assert training["tokens"] == ml["steps"] * 16 * 8192
    assert training["without_failures"]["days"] == pytest.approx(ml["time_to_train_min"] / 1440)
    assert "energy_mwh" not in training["without_failures"]  # GB200 has no sourced TDP: no energy, no error


def test_nvfp4_runs_faster_than_fp8_at_the_same_layout() -> None:
    fp8 = copy.deepcopy(BASE)
    fp8["layout"]["precision"] = "fp8"
    assert _run(BASE)["iteration_time_s"] < _run(fp8)["iteration_time_s"]


BAD = [
    ("unknown benchmark", {"training": {"mlperf": {"benchmark": "bert", "version": "5.1"}}},
     "training.mlperf.benchmark", ""),
    ("unknown version", {"training": {"mlperf": {"benchmark": "llama31_8b", "version": "5.0"}}},
     "training.mlperf.version", "5.1"),
    ("tokens beside mlperf", {"training": {"tokens": 1e9, "mlperf": {"benchmark": "llama31_8b", "version": "5.1"}}},
     "training.mlperf", "without tokens"),
    ("batch outside the rcps", {"layout": {"dp": 8, "global_batch_size": 512}}, "layout.global_batch_size",
     "nearest: 128"),
    ("sequence length", {"model": {"preset": "llama3-8b", "seq_length": 4096}}, "model.seq_length", "8192"),
    ("nvfp4 on hopper", {"cluster": {"preset": "dgx-h100", "num_nodes": 1}}, "layout.precision",
     "FP4 tensor cores"),
    ("nvfp4 is no fp8 recipe", {"layout": {"fp8_recipe": "nvfp4"}}, "layout.fp8_recipe", ""),
]


def _bad(patch: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for key, value in patch.items():
        if key == "layout":
            doc["layout"].update(value)
        else:
            doc[key] = value
    return doc


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_exits_2_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_cli_refuses(capsys, tmp_path, _bad(patch), field, rule)


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD[:4], ids=[b[0] for b in BAD[:4]])
def test_bad_input_is_http_422_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                     tmp_path: Path) -> None:
    assert_http_refuses(tmp_path, _bad(patch), field, rule)
