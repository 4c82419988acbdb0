"""`clustersim compare` and service.compare: the table has a column per file and a row per figure, --json has the
comparison document (the same figures `simulate` gives), an invalid file exits 2 with one line naming the file
and the field before anything is simulated, and stage_imbalance is 1 for one stage and > 1 for unequal stages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli

from api_schemas import SimulationRequest
from api_schemas.compare import ComparisonResult
from service import convert as adapters
from service.cli.compare import METRICS, labels_for
from service.compare import ComparisonError, compare_requests, stage_imbalance
from simcore.simulate import simulate

# GPT-3 125M on 8 A100s (milliseconds each): data parallel only (one stage), and a 4-stage pipeline of 5 layers
# with a small vocabulary (whole layers: one stage holds two, whatever the split, so the stages are unequal).
DP8: dict[str, Any] = {"model": {"preset": "gpt3-125m"}, "cluster": {"preset": "dgx-a100", "num_gpus": 8},
                       "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 16}}
PP4: dict[str, Any] = {"model": {"preset": "gpt3-125m", "num_layers": 5, "vocab_size": 1024},
                       "cluster": {"preset": "dgx-a100", "num_gpus": 8},
                       "layout": {"dp": 2, "tp": 1, "pp": 4, "global_batch_size": 16, "zero_stage": 1}}
ROW_FIELDS = {"label", "summary", "layout", "gpu", "iteration_time_s", "tokens_per_s", "samples_per_s", "mfu", "hfu",
              "bubble_fraction", "stage_imbalance", "exposed_communication_s", "memory", "warnings"}


def table_row(out: str, name: str) -> list[str]:
    """The cells after the first of the table row named `name` (rich draws the cells between '│')."""
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("│").split("│")]
        if cells and cells[0] == name:
            return cells[1:]
    raise AssertionError(f"no row {name!r} in\n{out}")


def write(tmp_path: Path, name: str, data: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def with_layout(data: dict[str, Any], **layout: Any) -> dict[str, Any]:
    return {**data, "layout": {**data["layout"], **layout}}


def result_of(data: dict[str, Any]) -> dict[str, Any]:
    return adapters.to_response(simulate(adapters.to_scenario(SimulationRequest.model_validate(data))))


def test_table_has_a_column_per_file_and_a_row_per_metric(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    files = [write(tmp_path, "data-parallel.yaml", DP8), write(tmp_path, "pipeline.json", PP4)]
    code, out, err = run_cli(capsys, "compare", *files)
    assert code == 0, err
    assert err == ""
    for label in ("data-parallel", "pipeline"):
        assert label in out
    lines = out.splitlines()
    for name, _ in METRICS:
        if name in ("exposed cp s", "exposed ep s"):  # shown where a request has context or expert parallelism
            assert name not in out
            continue
        assert any(name in line for line in lines), f"no row {name!r} in\n{out}"
    for name in ("iteration time s", "tokens/s", "MFU", "bubble fraction", "stage imbalance", "exposed tp s",
                 "exposed pp s", "exposed dp s", "peak GiB/GPU", "fits"):
        assert name in out
    imbalance = next(line for line in lines if "stage imbalance" in line)
    assert "1.000" in imbalance
    assert "2 x 1 x 4" in out and "8 x 1 x 1" in out
    assert table_row(out, "GPU") == ["A100 80GB", "A100 80GB"]
    assert table_row(out, "precision") == ["bf16", "bf16"]
    assert table_row(out, "CP") == table_row(out, "EP") == ["1", "1"]


def test_json_has_every_field_and_the_simulated_figures(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    files = [write(tmp_path, "dp8.yaml", DP8), write(tmp_path, "pp4.yaml", PP4)]
    code, out, err = run_cli(capsys, "compare", *files, "--json")
    assert code == 0, err
    document = json.loads(out)
    ComparisonResult.model_validate(document)
    rows = document["rows"]
    assert [row["label"] for row in rows] == ["dp8", "pp4"]
    for row, data in zip(rows, (DP8, PP4)):
        assert set(row) == ROW_FIELDS
        result = result_of(data)
        for key in ("iteration_time_s", "tokens_per_s", "samples_per_s", "mfu", "hfu", "bubble_fraction"):
            assert row[key] == result[key], key
        breakdown = result["time_breakdown_s"]
        assert row["exposed_communication_s"] == {"tp": breakdown["tp_comm"], "pp": breakdown["pp_comm"],
                                                  "dp": breakdown["dp_comm"]}
        memory = result["memory"]
        assert row["memory"] == {"peak_gib_per_gpu": memory["peak_gib_per_gpu"],
                                 "capacity_gib": memory["capacity_gib"], "fits": memory["fits"]}
    assert rows[1]["layout"] == {"dp": 2, "tp": 1, "pp": 4, "virtual_stages": 1, "microbatch_size": 1,
                                 "global_batch_size": 16, "schedule": "1f1b", "zero_stage": 1, "recompute": "none"}
    assert rows[1]["summary"].startswith("DP 2 x TP 1 x PP 4, mb 1, 1f1b, ZeRO 1")
    assert rows[0]["gpu"] == rows[1]["gpu"] == "A100 80GB"


def test_stage_imbalance_is_one_for_one_stage_and_above_one_for_unequal_stages() -> None:
    rows = compare_requests([("dp", DP8), ("pp", PP4)])["rows"]
    assert rows[0]["stage_imbalance"] == 1.0
    stages = result_of(PP4)["stages"]
    assert len(stages) == 4 and sum(s["layers"].get("transformer", 0) for s in stages) == 5
    busy = [s["busy_fraction"] for s in stages]
    assert rows[1]["stage_imbalance"] == pytest.approx(max(busy) / (sum(busy) / len(busy)))
    assert rows[1]["stage_imbalance"] > 1.2


def test_stage_imbalance_definition() -> None:
    assert stage_imbalance([]) == 1.0
    assert stage_imbalance([{"busy_fraction": 0.7}]) == 1.0
    assert stage_imbalance([{"busy_fraction": 0.5}, {"busy_fraction": 0.5}]) == 1.0
    assert stage_imbalance([{"busy_fraction": 0.2}, {"busy_fraction": 0.6}]) == pytest.approx(1.5)
    assert stage_imbalance([{"busy_fraction": 0.0}, {"busy_fraction": 0.0}]) == 1.0


BAD_FILES: list[tuple[str, dict[str, Any], str, str]] = [
    # (id, the second file's request, field named, a fragment of the rule)
    ("below range", with_layout(DP8, tp=0), "layout.tp", ">= 1"),
    ("unknown field", with_layout(DP8, tpp=2), "layout.tpp", "unknown field"),
    ("domain rule", with_layout(DP8, dp=4), "layout.dp", "must equal the number of GPUs"),
]


@pytest.mark.parametrize(("name", "bad", "field", "rule"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_an_invalid_file_exits_2_with_one_line_naming_the_file_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, bad: dict[str, Any], field: str,
        rule: str) -> None:
    good, wrong = write(tmp_path, "good.yaml", DP8), write(tmp_path, "wrong.yaml", bad)
    code, out, err = run_cli(capsys, "compare", good, wrong)
    assert code == 2
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert f"{wrong}: {field}: " in err and rule in err


def test_unreadable_and_unparsable_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing.yaml")
    code, _, err = run_cli(capsys, "compare", write(tmp_path, "good.yaml", DP8), missing)
    assert code == 2 and err.count("\n") == 1 and "file: " in err and missing in err
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: [unclosed", encoding="utf-8")
    code, _, err = run_cli(capsys, "compare", str(broken))
    assert code == 2 and err.count("\n") == 1 and str(broken) in err
    code, _, err = run_cli(capsys, "compare")
    assert code == 2 and err.count("\n") == 1


def test_an_invalid_request_names_its_index_before_anything_runs() -> None:
    with pytest.raises(ComparisonError) as caught:
        compare_requests([("a", DP8), ("b", with_layout(DP8, pp=0)), ("c", with_layout(DP8, dp=3))])
    assert caught.value.index == 1
    assert caught.value.error.details[0].field == "layout.pp"
    assert caught.value.details[0].field == "requests[1].layout.pp"


def test_labels_are_file_names_unless_they_repeat() -> None:
    assert labels_for(["a/x.yaml", "b/y.json"]) == ["x", "y"]
    assert labels_for(["a/x.yaml", "b/x.yaml", "c/z.yaml"]) == ["a/x.yaml", "b/x.yaml", "z"]
    assert labels_for(["x.yaml", "x.yaml"]) == ["x.yaml #1", "x.yaml #2"]
