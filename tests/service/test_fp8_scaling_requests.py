"""Requests with `layout.fp8_scaling` (simcore/cost/compute/fp8.py; the kernels: tests/simcore/cost/compute/
test_fp8_scaling.py): current scaling costs more than delayed (the default) and less than BF16, bad input exits 2 /
HTTP 422 naming the field, and Megatron-LM's and torchtitan's names for the two scalings import and export."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses

from api_schemas import RequestError, SimulationRequest
from service import convert
from service.interop import export_config, import_config
from simcore.simulate import simulate

BASE: dict[str, Any] = {
    "model": {"preset": "llama3-8b", "seq_length": 8192},
    "cluster": {"preset": "dgx-h100", "num_nodes": 1},
    "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 16, "precision": "fp8"},
}


def _seconds(doc: dict[str, Any]) -> float:
    return simulate(convert.to_scenario(SimulationRequest.model_validate(doc))).metrics.iteration_time_s


@pytest.mark.parametrize("preset", ["dgx-h100", "dgx-b200"])
def test_current_scaling_costs_more_than_delayed_and_less_than_bf16(preset: str) -> None:
    delayed = copy.deepcopy(BASE)
    delayed["cluster"]["preset"] = preset
    current = copy.deepcopy(delayed)
    current["layout"]["fp8_scaling"] = "current"
    bf16 = copy.deepcopy(delayed)
    bf16["layout"]["precision"] = "bf16"
    named = copy.deepcopy(delayed)
    named["layout"]["fp8_scaling"] = "delayed"
    assert _seconds(named) == _seconds(delayed)  # delayed is the default
    assert _seconds(delayed) < _seconds(current) < _seconds(bf16)


BAD = [
    ("bf16", {"precision": "bf16", "fp8_scaling": "current"}, "layout.fp8_scaling", "fp8_recipe tensorwise only"),
    ("rowwise", {"fp8_recipe": "rowwise", "fp8_scaling": "current"}, "layout.fp8_scaling",
     "fp8_recipe tensorwise only"),
    ("unknown", {"fp8_scaling": "dynamic"}, "layout.fp8_scaling", "must be one of 'delayed', 'current'"),
]


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_scaling_exits_2_and_is_http_422_naming_the_field(name: str, patch: dict[str, Any], field: str,
                                                               rule: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    doc = copy.deepcopy(BASE)
    doc["layout"].update(patch)
    assert_cli_refuses(capsys, tmp_path, doc, field, rule)
    assert_http_refuses(tmp_path, doc, field, rule)


def test_megatron_names_current_scaling_tensorwise_and_delayed_delayed() -> None:
    for scaling, flag in ((None, "--fp8-recipe delayed"), ("current", "--fp8-recipe tensorwise")):
        doc = copy.deepcopy(BASE)
        if scaling:
            doc["layout"]["fp8_scaling"] = scaling
        command = export_config("megatron", SimulationRequest.model_validate(doc))
        assert flag in command
        back = import_config("megatron", command, cluster="dgx-h100").request["layout"]
        assert back.get("fp8_scaling") == scaling and back["fp8_recipe"] == "tensorwise"


def test_torchtitan_float8_is_current_scaling_and_delayed_is_not_exported_to_it() -> None:
    toml = ('[model]\nname = "llama3"\nflavor = "8B"\nconverters = ["quantize.linear.float8"]\n'
            '[parallelism]\ndata_parallel_shard_degree = 8\n')
    layout = import_config("torchtitan", toml, "t.toml", nodes=1).request["layout"]
    assert layout["precision"] == "fp8" and layout["fp8_scaling"] == "current"
    doc = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
           "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 8, "zero_stage": 3,
                      "zero_implementation": "fsdp", "precision": "fp8"}}
    with pytest.raises(RequestError) as refused:
        export_config("torchtitan", SimulationRequest.model_validate(doc))
    assert refused.value.details[0].field == "layout.fp8_scaling"
