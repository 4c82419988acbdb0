"""`layout.zero_shard_size` (HSDP) through the CLI and the HTTP API: bad input exits 2 (HTTP 422) naming the field and
the rule; a request without it is full sharding, and the field comes back in a layout's JSON."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses

from api_schemas import SimulationRequest
from service import convert

BASE: dict[str, Any] = {
    "model": {"preset": "llama2-7b", "seq_length": 2048, "num_layers": 8, "attention": "flash"},
    "cluster": {"preset": "dgx-h100", "num_nodes": 2},
    "layout": {"dp": 16, "tp": 1, "pp": 1, "microbatch_size": 1, "global_batch_size": 32, "zero_stage": 3,
               "zero_implementation": "fsdp", "overlap_grad_reduce": True},
}
BAD = [
    ("not dividing dp", {"zero_shard_size": 5}, "must divide dp"),
    ("zero 2", {"zero_shard_size": 8, "zero_stage": 2, "zero_implementation": "megatron"}, "applies to zero_stage 3"),
    ("deepspeed", {"zero_shard_size": 8, "zero_implementation": "deepspeed"}, "zero_implementation fsdp"),
    ("context parallel", {"zero_shard_size": 4, "dp": 8, "cp": 2}, "context parallelism"),
    ("zero", {"zero_shard_size": 0}, ""),
]


def _bad(layout: dict[str, Any]) -> dict[str, Any]:
    document = copy.deepcopy(BASE)
    document["layout"].update(layout)
    return document


@pytest.mark.parametrize(("name", "layout", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_exits_2_naming_field_and_rule(name: str, layout: dict[str, Any], rule: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert_cli_refuses(capsys, tmp_path, _bad(layout), "layout.zero_shard_size", rule)


@pytest.mark.parametrize(("name", "layout", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_http_422_naming_field_and_rule(name: str, layout: dict[str, Any], rule: str,
                                                     tmp_path: Path) -> None:
    assert_http_refuses(tmp_path, _bad(layout), "layout.zero_shard_size", rule)


def test_the_default_is_full_sharding_and_the_layout_json_carries_the_field() -> None:
    plain = convert.to_scenario(SimulationRequest.model_validate(BASE)).layout
    assert plain.zero_shard_size is None and "zero_shard_size" not in convert.layout_json(plain)
    hybrid = convert.to_scenario(SimulationRequest.model_validate(_bad({"zero_shard_size": 8}))).layout
    assert convert.layout_json(hybrid)["zero_shard_size"] == 8
