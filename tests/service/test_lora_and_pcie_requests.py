"""Requests with `model.lora` (docs/contract-lora.md) and the new cluster presets: they run through the CLI and the
HTTP API, the lora defaults are MLPerf's targets, and bad input exits 2 (HTTP 422) naming the field and the rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses

from api_schemas import SimulationRequest
from service import convert

BASE: dict[str, Any] = {
    "model": {"preset": "llama2-7b", "seq_length": 2048, "lora": {"rank": 16}},
    "cluster": {"preset": "dgx-h100", "num_nodes": 1},
    "layout": {"dp": 2, "tp": 4, "pp": 1, "global_batch_size": 8, "sequence_parallel": True, "zero_stage": 1},
}


def test_lora_defaults_to_the_attentions_projections() -> None:
    scenario = convert.to_scenario(SimulationRequest.model_validate(BASE))
    lora = scenario.model.lora
    assert lora is not None and [str(t) for t in lora.targets] == ["qkv", "proj"] and lora.dropout == 0.0


@pytest.mark.parametrize("preset", ["l40s-pcie", "dgx-b300", "gb300-nvl72"])
def test_the_new_presets_take_a_lora_request(preset: str) -> None:
    from simcore.simulate import simulate

    doc = copy.deepcopy(BASE)
    doc["cluster"] = {"preset": preset, "num_gpus": 8}
    body = convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))
    assert body["iteration_time_s"] > 0 and body["memory"]["breakdown_gib"]["optimizer_states"] < 0.1


BAD = [
    ("rank above hidden", {"lora": {"rank": 4097}}, "model.lora.rank", "must not exceed hidden_size"),
    ("unknown target", {"lora": {"rank": 16, "targets": ["q_proj"]}}, "model.lora.targets.0", "must be one of"),
    ("unknown lora field", {"lora": {"rank": 16, "alpha": 32}}, "model.lora.alpha", ""),
    ("zero 3", {"layout": {"zero_stage": 3}}, "layout.zero_stage", "at most 2 with model.lora"),
    ("l40s on nvlink", {"cluster": {"preset": "dgx-h100", "gpu": "l40s-48gb", "num_nodes": 1}}, "cluster.gpu",
     "no NVLink"),
]


def _bad(patch: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    if "lora" in patch:
        doc["model"]["lora"] = patch["lora"]
    if "layout" in patch:
        doc["layout"].update(patch["layout"])
    if "cluster" in patch:
        doc["cluster"] = patch["cluster"]
    return doc


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_exits_2_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_cli_refuses(capsys, tmp_path, _bad(patch), field, rule)


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_http_422_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                     tmp_path: Path) -> None:
    assert_http_refuses(tmp_path, _bad(patch), field, rule)
