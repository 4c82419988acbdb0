"""Mixture-of-experts requests: presets with their published sizes, the all-to-all bytes in closed form, where EP
lives (inside a node, across nodes, an NVL72 rack), memory that does not fit, and bad input (exit 2 / HTTP 422
naming the field and the rule)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses
from fastapi.testclient import TestClient

from api_schemas import SimulationRequest
from service import convert
from service.http.app import create_app
from service.settings import Settings
from simcore.cost.comm.collectives import CollectiveModel
from simcore.cost.moe import all_to_all_pattern
from simcore.domain.layout import CollectiveAlgorithm
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.simulate import simulate
from topology.cluster_spec import NODE_PRESETS, sized
from topology.graph import build_cluster
from topology.routing import Router

# A small balanced, dropless MoE: 4 layers, 8 experts top-2.
SMALL: dict[str, Any] = {
    "model": {"architecture": "decoder_only", "num_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
              "ffn_hidden_size": 4096, "vocab_size": 32000, "seq_length": 1024, "activation": "swiglu",
              "attention": "flash", "num_experts": 8, "moe_top_k": 2, "moe_ffn_hidden_size": 1024},
    "cluster": {"preset": "dgx-h100", "num_nodes": 1},
    "layout": {"dp": 8, "tp": 1, "pp": 1, "ep": 8, "microbatch_size": 2, "global_batch_size": 32},
}


def result(doc: dict[str, Any]) -> dict[str, Any]:
    return convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))


def patched(doc: dict[str, Any], **sections: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    for section, fields in sections.items():
        out[section].update(fields)
    return out


@pytest.mark.parametrize("name,billions", [("mixtral-8x7b", 46.7), ("mixtral-8x22b", 140.6),
                                           ("qwen3-30b-a3b", 30.5), ("qwen3-235b-a22b", 235.1),
                                           ("deepseek-v3", 671.0), ("gpt-oss-120b", 116.8)])
def test_presets_have_their_published_sizes(name: str, billions: float) -> None:
    total = model_from_fields(MODEL_PRESETS[name]).total_parameters() / 1e9
    assert total == pytest.approx(billions, rel=0.01)


def test_all_to_all_bytes_closed_form() -> None:
    """Per MoE layer per microbatch a rank sends 2 (dispatch, combine) x tokens x top_k x hidden x 2 bytes x
    (ep-1)/ep, and the dispatch's fp32 routing probabilities, tokens x top_k x 4 bytes x (ep-1)/ep, in forward and
    the same in backward."""
    body = result(SMALL)
    m, layers, tokens, k, h, ep = 32 // (8 * 2), 4, 2 * 1024, 2, 1024, 8
    per_direction = m * layers * (2 * tokens * k * h * 2 + tokens * k * 4) * (ep - 1) / ep
    assert body["communication_bytes"]["ep"] == pytest.approx(2 * per_direction, rel=1e-9)
    assert body["time_breakdown_s"]["ep_comm"] > 0
    assert sum(body["time_breakdown_s"].values()) == pytest.approx(body["iteration_time_s"], rel=1e-9)


def test_dense_results_have_no_expert_keys() -> None:
    doc = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
           "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 8}}
    body = result(doc)
    assert "ep_comm" not in body["time_breakdown_s"] and "ep" not in body["communication_s"]


def test_ep_across_nodes_exposes_more_than_inside_a_node() -> None:
    """The same model, tokens and layout on 2 nodes: EP groups of consecutive data-parallel ranks stay in a node;
    with pipeline ranks innermost (pp 2) every EP group spans both nodes and crosses the NICs."""
    base = patched(SMALL, cluster={"num_nodes": 2}, layout={"dp": 8, "pp": 2, "ep": 8})
    inside = result(patched(base, layout={"placement": "tp,dp,pp"}))
    across = result(patched(base, layout={"placement": "tp,pp,dp"}))
    assert across["time_breakdown_s"]["ep_comm"] > 2 * inside["time_breakdown_s"]["ep_comm"] > 0
    assert across["communication_bytes"]["ep"] == pytest.approx(inside["communication_bytes"]["ep"])


def test_ep_64_on_an_nvl72_rack_sends_nothing_over_the_nics() -> None:
    cluster = build_cluster(sized(NODE_PRESETS["gb200-nvl72"], 72))
    model = CollectiveModel(cluster, Router(cluster), CollectiveAlgorithm.RING)
    pattern = all_to_all_pattern(model, [tuple(range(64))])
    assert pattern.links and {cluster.link_kind[link] for link in pattern.links} == {"nvlink"}
    h100 = build_cluster(sized(NODE_PRESETS["dgx-h100"], 64))
    across = all_to_all_pattern(CollectiveModel(h100, Router(h100), CollectiveAlgorithm.RING), [tuple(range(64))])
    assert "ib" in {h100.link_kind[link] for link in across.links}


def test_deepseek_v3_with_ep_1_on_64_h100_does_not_fit() -> None:
    doc = {"model": {"preset": "deepseek-v3"}, "cluster": {"preset": "dgx-h100", "num_nodes": 8},
           "layout": {"dp": 8, "tp": 1, "pp": 8, "ep": 1, "global_batch_size": 64, "zero_stage": 1}}
    body = result(doc)
    assert body["memory"]["fits"] is False
    assert any("exceed" in w or "GiB" in w for w in body["warnings"])


BAD = [
    ("ep not dividing num_experts", {"model": {"num_experts": 12}, "layout": {"ep": 8}}, "layout.ep",
     "divide num_experts"),
    ("ep x expert_tp not dividing tp x dp", {"model": {"num_experts": 16}, "layout": {"ep": 16}}, "layout.ep",
     "must divide tp*cp*dp"),
    ("top_k above num_experts", {"model": {"moe_top_k": 9}}, "model.moe_top_k", "must be <= num_experts"),
    ("ep on a dense model", {"model": {"num_experts": None, "moe_top_k": None, "moe_ffn_hidden_size": None}},
     "layout.ep", "must be 1 for a dense model"),
    ("MoE field without experts", {"model": {"num_experts": None, "moe_ffn_hidden_size": None}, "layout": {"ep": 1}},
     "model.moe_top_k", "applies to mixture-of-experts models only"),
    ("zero-bubble schedule on a MoE model", {"layout": {"dp": 4, "pp": 2, "ep": 4, "schedule": "zb_h1"}},
     "layout.schedule", "MoE layers"),
    ("dualpipe on a MoE model keeps its rules", {"layout": {"dp": 4, "pp": 2, "ep": 1, "schedule": "dualpipe",
                                                             "global_batch_size": 8}},
     "layout.schedule", "microbatches of at least 2 x pp"),
]


def bad_doc(patch: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(SMALL)
    for section, fields in patch.items():
        for key, value in fields.items():
            if value is None:
                doc[section].pop(key, None)
            else:
                doc[section][key] = value
    return doc


@pytest.mark.parametrize("name,patch,field,rule", BAD, ids=[b[0] for b in BAD])
def test_bad_input_exits_2_naming_field_and_rule(name: str, patch: dict[str, Any], field: str, rule: str,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_cli_refuses(capsys, tmp_path, bad_doc(patch), field, rule)


def test_bad_input_is_http_422(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(database=str(tmp_path / "db.sqlite"))), base_url="http://localhost") as client:
        response = client.post("/v1/simulations", content=json.dumps(bad_doc({"layout": {"ep": 3}})),
                               headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert any(d["field"] == "layout.ep" for d in response.json()["error"]["details"])


def test_memory_shows_the_experts_apart_and_the_trace_shows_the_all_to_alls() -> None:
    doc = {**patched(SMALL, layout={"zero_stage": 1}), "options": {"trace": True}}
    outcome = simulate(convert.to_scenario(SimulationRequest.model_validate(doc)))
    body = convert.to_response(outcome, include_trace=True)
    breakdown = body["memory"]["breakdown_gib"]
    for kind in ("weights", "gradients", "optimizer_states"):
        assert 0 < breakdown[f"expert_{kind}"] < breakdown[kind]
    # ep = dp = 8: one expert of 3 matrices of 1024 x 1024 per rank and layer, its states not sharded further
    # (expert data parallelism 1), 4 layers
    expert = 3 * 1024 * 1024
    assert breakdown["expert_weights"] * 2**30 == pytest.approx(4 * 2 * expert, rel=1e-9)
    assert breakdown["expert_optimizer_states"] * 2**30 == pytest.approx(4 * 12 * expert, rel=1e-9)
    names = {event.get("name", "") for event in body["trace"]["traceEvents"]}
    assert any(name.startswith("ep dispatch+combine") for name in names)


def test_stage_layers_cut_dense_then_moe_layers_in_order() -> None:
    """stage_layers on a model with dense first layers: the stages take the layers in order, the dense ones
    first (the cut falls inside the MoE stack here)."""
    doc = patched(SMALL, model={"num_layers": 6, "first_dense_layers": 1},
                  layout={"dp": 4, "pp": 2, "ep": 4, "stage_layers": [2, 4]})
    stages = result(doc)["stages"]
    assert [s["layers"] for s in stages] == [{"transformer": 1, "moe": 1, "embedding": 1},
                                             {"moe": 4, "logits": 1}]
