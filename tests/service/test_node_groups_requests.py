"""Requests with `cluster.node_groups`: bad groups exit 2 (HTTP 422) naming the field and the rule, and the
result validates against the result schema with each stage's GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses
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
    assert_cli_refuses(capsys, tmp_path, {**DOC, **patch}, field, rule)


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD[:2], ids=[b[0] for b in BAD[:2]])
def test_bad_groups_are_http_422_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                       tmp_path: Path) -> None:
    assert_http_refuses(tmp_path, {**DOC, **patch}, field, rule)


def test_the_result_validates_with_each_stages_gpu(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(database=str(tmp_path / "db.sqlite"))), base_url="http://localhost") as client:
        good = client.post("/v1/simulations", content=json.dumps(DOC), headers={"content-type": "application/json"})
    assert good.status_code == 200, good.text
    result = SimulationResult.model_validate(good.json())
    assert [s.gpu for s in result.stages] == ["a100-80gb", "h100-80gb"]
