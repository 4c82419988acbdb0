"""Requests with `cluster.node_groups`: bad groups exit 2 (HTTP 422) naming the field and the rule, and the
result validates against the result schema with each stage's GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli
from fastapi.testclient import TestClient

from api_schemas import SimulationResult
from service.http.app import create_app
from service.settings import Settings

DOC: dict[str, Any] = {
    "model": {"preset": "gpt3-1.3b"},
    "cluster": {"node_groups": [{"num_nodes": 1, "gpu": "a100-80gb"}, {"num_nodes": 1, "gpu": "h100-80gb"}]},
    "layout": {"dp": 1, "tp": 8, "pp": 2, "global_batch_size": 8, "pipeline_partition": "balanced"},
}
BAD = [
    ("counts-do-not-add-up", {"cluster": {**DOC["cluster"], "num_nodes": 3}}, "cluster.node_groups",
     "must add up to cluster.num_nodes (3)"),
    ("mixed-tp-group", {"layout": {**DOC["layout"], "tp": 16, "pp": 1}}, "layout.tp",
     "a tensor-parallel group must run on one GPU kind"),
    ("group-without-nodes", {"cluster": {"node_groups": [{"num_nodes": 0, "gpu": "a100-80gb"}]}},
     "cluster.node_groups.0.num_nodes", ">= 1"),
    ("unknown-group-field", {"cluster": {"node_groups": [{"num_nodes": 1, "gpus": "a100-80gb"}]}},
     "cluster.node_groups.0.gpus", "unknown field"),
]


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_groups_exit_2_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump({**DOC, **patch}), encoding="utf-8")
    code, out, err = run_cli(capsys, "simulate", str(path))
    assert code == 2 and out == ""
    assert field in err and rule in err and err.count("\n") == 1


def test_http_422_names_the_field_and_the_result_validates(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(database=str(tmp_path / "db.sqlite"))), base_url="http://localhost") as client:
        bad = client.post("/v1/simulations", content=json.dumps({**DOC, **BAD[1][1]}),
                          headers={"content-type": "application/json"})
        good = client.post("/v1/simulations", content=json.dumps(DOC), headers={"content-type": "application/json"})
    assert bad.status_code == 422
    assert any(d["field"] == "layout.tp" for d in bad.json()["error"]["details"])
    assert good.status_code == 200, good.text
    result = SimulationResult.model_validate(good.json())
    assert [s.gpu for s in result.stages] == ["a100-80gb", "h100-80gb"]
