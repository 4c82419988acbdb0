"""`layout.zero_implementation` in requests: accepted, carried into a layout's document, and refused (exit 2,
HTTP 422) with the field and the rule when it does not apply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses

from api_schemas import SimulationRequest
from service import convert
from simcore import ZeroImplementation

BASE: dict[str, Any] = {
    "model": {"preset": "gpt3-125m"},
    "cluster": {"preset": "dgx-a100", "num_nodes": 1},
    "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 16, "zero_stage": 3},
}
BAD = [
    ("unknown implementation", {"zero_implementation": "colossal"}, "layout.zero_implementation", "megatron"),
    ("fsdp with zero 1", {"zero_implementation": "fsdp", "zero_stage": 1}, "layout.zero_implementation",
     "zero_stage 3"),
    ("buckets with deepspeed", {"zero_implementation": "deepspeed", "zero3_gather_bucket_elements": 1000},
     "layout.zero3_gather_bucket_elements", "megatron only"),
]


def doc(**layout: Any) -> dict[str, Any]:
    return {**BASE, "layout": {**BASE["layout"], **layout}}


@pytest.mark.parametrize("name", ["megatron", "fsdp", "deepspeed", "deepspeed_2021"])
def test_each_implementation_reaches_the_layout_and_its_document(name: str) -> None:
    scenario = convert.to_scenario(SimulationRequest.model_validate(doc(zero_implementation=name)))
    assert scenario.layout.zero_implementation is ZeroImplementation(name)
    written = convert.layout_json(scenario.layout)
    assert written.get("zero_implementation", "megatron") == name


def test_megatron_is_the_default_and_leaves_the_document_as_it_was() -> None:
    scenario = convert.to_scenario(SimulationRequest.model_validate(doc()))
    assert scenario.layout.zero_implementation is ZeroImplementation.MEGATRON
    assert "zero_implementation" not in convert.layout_json(scenario.layout)


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_exits_2_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_cli_refuses(capsys, tmp_path, doc(**patch), field, rule)


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_http_422_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                     tmp_path: Path) -> None:
    assert_http_refuses(tmp_path, doc(**patch), field, rule)
