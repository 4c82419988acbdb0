"""Requests with the FP8 and Blackwell fields: a user-defined GPU copying H100 gives H100's result, the new fields
leave the old requests alone, and bad input exits 2 (HTTP 422) naming the field and the rule."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses, run_cli

from api_schemas import SimulationRequest
from service import convert
from simcore.simulate import simulate

BASE: dict[str, Any] = {
    "model": {"preset": "llama3-8b", "seq_length": 2048},
    "cluster": {"preset": "dgx-h100", "num_nodes": 1},
    "layout": {"dp": 2, "tp": 4, "pp": 1, "global_batch_size": 8, "sequence_parallel": True},
}
H100_SPEC = {"name": "my-h100", "peak_tflops_bf16": 989.4, "peak_tflops_fp8": 1978.9, "memory_gib": 80,
             "hbm_bandwidth_gb_per_s": 3350, "tdp_w": 700, "nvlink_bandwidth_gb_per_s": 450}


def result(doc: dict[str, Any]) -> dict[str, Any]:
    body = convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))
    body.pop("simulator")
    return body


def close(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)
    return bool(a == b)


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_gpu_spec_copying_h100_gives_h100s_result(precision: str) -> None:
    doc = copy.deepcopy(BASE)
    doc["layout"]["precision"] = precision
    custom = copy.deepcopy(doc)
    custom["cluster"] = {"num_nodes": 1, "gpu_spec": H100_SPEC}
    catalog, mine = result(doc), result(custom)
    warnings = mine.pop("warnings")
    assert [w for w in warnings if "user-defined" in w] == warnings and len(warnings) == 1
    assert "hopper" in warnings[0]
    catalog.pop("warnings")
    assert close(catalog, mine)


def test_fp8_on_b200_and_gb200_nvl72() -> None:
    for preset in ("dgx-b200", "gb200-nvl72"):
        doc = copy.deepcopy(BASE)
        doc["cluster"] = {"preset": preset, "num_gpus": 8}
        doc["layout"].update(precision="fp8", fp8_recipe="mxfp8")
        assert result(doc)["iteration_time_s"] > 0


def test_nemotron_preset_with_squared_relu_simulates() -> None:
    doc = copy.deepcopy(BASE)
    doc["model"] = {"preset": "nemotron4-15b"}
    assert result(doc)["iteration_time_s"] > 0


BAD = [
    ("fp8 on a100", {"cluster": {"preset": "dgx-a100", "num_nodes": 1}, "layout": {"precision": "fp8"}},
     "layout.precision", "FP8 tensor cores"),
    ("fp8 on v100", {"cluster": {"preset": "dgx-2-v100", "num_gpus": 8}, "layout": {"precision": "fp8"}},
     "layout.precision", "FP8 tensor cores"),
    ("gpu_spec without fp8 peak", {"cluster": {"num_nodes": 1, "gpu_spec": {
        k: v for k, v in H100_SPEC.items() if k != "peak_tflops_fp8"}}},
     "cluster.gpu_spec.peak_tflops_fp8", "is required"),
    ("gpu_spec without bf16 peak", {"cluster": {"num_nodes": 1, "gpu_spec": {
        k: v for k, v in H100_SPEC.items() if k != "peak_tflops_bf16"}}},
     "cluster.gpu_spec.peak_tflops_bf16", "is required"),
    ("domain larger than the cluster", {"cluster": {"preset": "dgx-h100", "num_nodes": 1, "nvlink_domain_gpus": 16}},
     "cluster.nvlink_domain_gpus", "must not exceed"),
]


def bad_doc(patch: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for section, fields in patch.items():
        if section == "cluster":
            doc["cluster"] = fields
        else:
            doc[section].update(fields)
    return doc


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_exits_2_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_cli_refuses(capsys, tmp_path, bad_doc(patch), field, rule)


@pytest.mark.parametrize(("name", "patch", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_http_422_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                     tmp_path: Path) -> None:
    assert_http_refuses(tmp_path, bad_doc(patch), field, rule)


def test_activation_sets_gated_mlp_and_a_contradiction_is_refused() -> None:
    swiglu = convert.to_scenario(SimulationRequest.model_validate(
        {**BASE, "model": {"preset": "gpt3-1.3b", "activation": "swiglu"}})).model
    assert swiglu.gated_mlp and swiglu.activation == "swiglu"
    nemotron = convert.to_scenario(SimulationRequest.model_validate({**BASE, "model": {"preset": "nemotron4-15b"}}))
    assert not nemotron.model.gated_mlp and nemotron.model.activation == "squared_relu"
    # a request's gated_mlp overrides the preset's activation; both given and contradicting is refused
    gated = convert.to_scenario(SimulationRequest.model_validate(
        {**BASE, "model": {"preset": "nemotron4-15b", "gated_mlp": True}})).model
    assert gated.gated_mlp and gated.activation is None
    with pytest.raises(ValueError) as err:
        convert.to_scenario(SimulationRequest.model_validate(
            {**BASE, "model": {"preset": "nemotron4-15b", "gated_mlp": True, "activation": "squared_relu"}}))
    assert "model.activation" in str(err.value)


def test_presets_list_the_blackwell_gpus_and_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "presets")
    assert code == 0
    catalog = json.loads(out)
    assert catalog["gpus"]["b200-180gb"]["peak_tflops_fp8"] == 4500
    assert catalog["clusters"]["gb200-nvl72"]["nvlink_domain_gpus"] == 72
    assert {"nemotron4-15b", "nemotron4-340b"} <= catalog["models"].keys()


def test_compare_shows_precision_and_recipe() -> None:
    from service.compare import compare_requests

    fp8 = copy.deepcopy(BASE)
    fp8["layout"].update(precision="fp8")
    rows = compare_requests([("bf16", BASE), ("fp8", fp8)])["rows"]
    assert "precision" not in rows[0]["layout"] and "fp8" not in rows[0]["summary"]
    assert rows[1]["layout"]["precision"] == "fp8" and rows[1]["layout"]["fp8_recipe"] == "tensorwise"
    assert "fp8 tensorwise" in rows[1]["summary"]
    assert rows[1]["iteration_time_s"] < rows[0]["iteration_time_s"]


def test_tp_across_nodes_of_one_nvlink_domain_stays_on_nvlink() -> None:
    def tp16(cluster: dict[str, Any]) -> dict[str, Any]:
        doc = copy.deepcopy(BASE)
        doc["cluster"] = cluster
        doc["layout"] = {"dp": 1, "tp": 16, "pp": 1, "global_batch_size": 4, "sequence_parallel": True}
        return result(doc)

    domain = tp16({"preset": "dgx-h100", "num_nodes": 2, "nvlink_domain_gpus": 16})
    one_node = tp16({"preset": "dgx-h100", "num_nodes": 1, "gpus_per_node": 16, "nics_per_node": 16})
    assert domain["communication_s"]["tp"] == pytest.approx(one_node["communication_s"]["tp"], rel=1e-9)
    # Two plain nodes send TP over InfiniBand. With the preset's 8 NICs a node has 8 x 48 GB/s (collectives.json,
    # NDR 400) for NCCL's 8 rings, more than NVLink's 346 GB/s effective per GPU: IB is no bottleneck there. With
    # 2 NICs a ring's channels leave the node through 2 x 48 = 96 GB/s, under a third of NVLink's.
    over_ib = tp16({"preset": "dgx-h100", "num_nodes": 2, "nics_per_node": 2})
    assert over_ib["communication_s"]["tp"] > 1.5 * domain["communication_s"]["tp"]
