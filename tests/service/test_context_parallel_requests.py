"""Requests with context parallelism: the result carries cp's figures (and only where cp > 1), the trace shows the
ring's sends, and bad input exits 2 (HTTP 422) naming the field and the rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses

from api_schemas import SimulationRequest, SimulationResult
from service import convert
from simcore.simulate import simulate

BASE: dict[str, Any] = {
    "model": {"preset": "llama3-8b", "seq_length": 8192},
    "cluster": {"preset": "dgx-h100", "num_nodes": 1},
    "layout": {"dp": 4, "tp": 1, "pp": 1, "cp": 2, "global_batch_size": 8},
}


def result(doc: dict[str, Any]) -> dict[str, Any]:
    return convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))


def test_result_has_cp_figures_only_with_cp() -> None:
    body = result(BASE)
    SimulationResult.model_validate(body)
    assert body["communication_bytes"]["cp"] > 0 and body["communication_s"]["cp"] > 0
    assert "cp_comm" in body["time_breakdown_s"]
    plain = copy.deepcopy(BASE)
    plain["layout"].update(dp=8, cp=1)
    body = result(plain)
    assert "cp" not in body["communication_bytes"] and "cp_comm" not in body["time_breakdown_s"]


def test_trace_shows_the_ring_sends() -> None:
    doc = copy.deepcopy(BASE)
    doc["options"] = {"trace": True}
    outcome = simulate(convert.to_scenario(SimulationRequest.model_validate(doc)))
    sends = [s for s in outcome.spans if s.track.endswith(" cp") and s.name.startswith("kv send")]
    # 32 layers, 2 microbatches per replica: one send per layer in forward, two in backward
    assert len(sends) == 32 * 2 * 3


BAD = [
    ("seq not divisible by 2cp", {"model": {"preset": "llama3-8b", "seq_length": 8190}}, "layout.cp", "2*cp = 4"),
    ("gpu count", {"layout": {"dp": 8, "tp": 1, "pp": 1, "cp": 2, "global_batch_size": 8}}, "layout.dp",
     "dp*tp*pp*cp = 8*1*1*2 = 16 must equal the number of GPUs (8)"),
    ("encoder-decoder", {"model": {"preset": "t5-small"}}, "layout.cp", "encoder_decoder"),
    ("unknown cp_comm", {"layout": {"dp": 4, "tp": 1, "pp": 1, "cp": 2, "global_batch_size": 8, "cp_comm": "ring"}},
     "layout.cp_comm", "p2p"),
    ("placement with cp twice", {"layout": {"dp": 4, "tp": 1, "pp": 1, "cp": 2, "global_batch_size": 8,
                                            "placement": "tp,cp,dp,pp,cp"}}, "layout.placement", "at most once"),
]


def bad_doc(patch: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc.update(copy.deepcopy(patch))
    return doc


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_exits_2_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_cli_refuses(capsys, tmp_path, bad_doc(patch), field, rule)


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_http_422_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                     tmp_path: Path) -> None:
    assert_http_refuses(tmp_path, bad_doc(patch), field, rule)
