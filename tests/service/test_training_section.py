"""The request's `training` section through the CLI and the API: the result's `training` section, and bad input
named by field (exit 2 / 422)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import request_doc, run_cli, with_field
from fastapi.testclient import TestClient

from api_schemas import SimulationResult

TRAINING: dict[str, Any] = {
    "tokens_per_parameter": 20, "gpu_hour_usd": 2.0,
    "checkpoint": {"interval_s": "auto", "write_gb_per_s_per_node": 5},
    "failures": {"mtbf_hours_per_gpu": 50_000, "restart_s": 600},
}


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_cli_result_carries_the_whole_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = request_doc()
    doc["training"] = TRAINING
    code, out, err = run_cli(capsys, "simulate", str(_write(tmp_path, doc)))
    assert code == 0, err
    result = SimulationResult.model_validate_json(out)
    body = json.loads(out)["training"]
    assert result.training is not None
    days = body["tokens"] / result.tokens_per_s / 86_400
    assert body["without_failures"]["days"] == pytest.approx(days, rel=1e-9)
    assert body["with_failures"]["days"] > days
    assert body["checkpoint_interval_s"] == pytest.approx(body["daly_interval_s"])
    assert 0 < body["goodput"] < 1
    assert body["with_failures"]["cost_usd"] == pytest.approx(body["with_failures"]["gpu_hours"] * 2.0)


def test_results_without_the_section_have_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(capsys, "simulate", str(_write(tmp_path, request_doc())))
    assert code == 0 and "training" not in json.loads(out)


@pytest.mark.parametrize(("path", "value", "field"), [
    ("training.tokens", 1e12, "training.tokens"),  # beside tokens_per_parameter
    ("training.pue", 0.5, "training.pue"),
    ("training.checkpoint.write_gb_per_s_per_node", -1, "training.checkpoint.write_gb_per_s_per_node"),
    ("training.failures.mtbf_hours_per_gpu", 0, "training.failures.mtbf_hours_per_gpu"),
    ("training.failures.restart_s", "soon", "training.failures.restart_s"),
    ("training.tokenz", 1, "training.tokenz"),
])
def test_bad_training_fields_exit_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     path: str, value: Any, field: str) -> None:
    doc = with_field({**request_doc(), "training": json.loads(json.dumps(TRAINING))}, path, value)
    code, out, err = run_cli(capsys, "simulate", str(_write(tmp_path, doc)))
    assert code == 2 and out == ""
    assert field in err and len(err.strip().splitlines()) == 1


def test_api_answers_the_training_section(tmp_path: Path) -> None:
    from service.http.app import create_app
    from service.settings import Settings

    app = create_app(Settings(data_dir=str(tmp_path), workers=1))
    with TestClient(app, base_url="http://localhost") as client:
        doc = {**request_doc(), "training": TRAINING}
        answer = client.post("/v1/simulations", json=doc)
        assert answer.status_code == 200, answer.text
        assert answer.json()["training"]["iterations"] > 0
        bad = with_field(doc, "training.checkpoint.interval_s", "sometimes")
        refused = client.post("/v1/simulations", json=bad)
        assert refused.status_code == 422
        assert any(d["field"].startswith("training.checkpoint.interval_s") for d in refused.json()["error"]["details"])


def test_compare_shows_days_and_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with_run = {**request_doc(), "training": TRAINING}
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump(with_run), encoding="utf-8")
    b.write_text(yaml.safe_dump(request_doc()), encoding="utf-8")
    code, out, err = run_cli(capsys, "compare", str(a), str(b), "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    single, _ = run_cli(capsys, "simulate", str(a))[1:]
    training = json.loads(single)["training"]
    assert rows[0]["training"] == {"days": training["with_failures"]["days"],
                                   "gpu_hours": training["with_failures"]["gpu_hours"],
                                   "cost_usd": training["with_failures"]["cost_usd"], "goodput": training["goodput"]}
    assert "training" not in rows[1]
    code, table, _ = run_cli(capsys, "compare", str(a), str(b))
    assert code == 0 and "training days" in table and "cost USD" in table
