"""`layout.attention_backend` (docs/contract-attention.md): flash2 runs through the API, costs more than the fused
kernel on Hopper by its attention alone and the same on Ampere, comes back in a layout's JSON, leaves requests without
the field unchanged, and bad input exits 2 (HTTP 422) naming the field and the rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses

from api_schemas import SimulationRequest
from service import convert
from simcore.domain.attention_backend import AttentionBackend
from simcore.simulate import simulate

BASE: dict[str, Any] = {
    "model": {"preset": "llama2-7b", "seq_length": 4096, "attention": "flash"},
    "cluster": {"preset": "dgx-h100", "num_nodes": 1},
    "layout": {"dp": 8, "tp": 1, "pp": 1, "microbatch_size": 2, "global_batch_size": 16, "zero_stage": 3,
               "zero_implementation": "fsdp", "overlap_grad_reduce": True},
}


def doc_with(layout: dict[str, Any] | None = None, **sections: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["layout"].update(layout or {})
    for name, value in sections.items():
        doc[name] = {**doc[name], **value}
    return doc


def run(doc: dict[str, Any]) -> dict[str, Any]:
    return convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))


def test_the_default_is_fused_and_a_request_without_the_field_is_unchanged() -> None:
    scenario = convert.to_scenario(SimulationRequest.model_validate(BASE))
    assert scenario.layout.attention_backend is AttentionBackend.FUSED
    assert "attention_backend" not in convert.layout_json(scenario.layout)
    assert run(BASE)["iteration_time_s"] == run(doc_with({"attention_backend": "fused"}))["iteration_time_s"]


def test_flash2_costs_more_on_hopper_by_its_attention_alone() -> None:
    fused, flash2 = run(BASE), run(doc_with({"attention_backend": "flash2"}))
    assert 1.02 < flash2["iteration_time_s"] / fused["iteration_time_s"] < 1.3
    assert flash2["memory"] == fused["memory"]


def test_on_ampere_flash2_is_the_fused_kernels_price() -> None:
    a100 = {"preset": "dgx-a100", "num_nodes": 1}
    fused, flash2 = run(doc_with(cluster=a100)), run(doc_with({"attention_backend": "flash2"}, cluster=a100))
    assert flash2["iteration_time_s"] == fused["iteration_time_s"]


def test_the_layout_json_carries_flash2() -> None:
    scenario = convert.to_scenario(SimulationRequest.model_validate(doc_with({"attention_backend": "flash2"})))
    assert convert.layout_json(scenario.layout)["attention_backend"] == "flash2"


BAD = [
    ("unknown value", {"attention_backend": "flash3"}, {}, "layout.attention_backend", ""),
    ("standard attention", {"attention_backend": "flash2"}, {"model": {"attention": "standard"}},
     "layout.attention_backend", "needs model.attention flash"),
    ("fp8 attention", {"attention_backend": "flash2", "precision": "fp8", "fp8_attention": True}, {},
     "layout.attention_backend", "no FP8 kernel"),
    ("blackwell", {"attention_backend": "flash2"}, {"cluster": {"preset": "dgx-b200"}},
     "layout.attention_backend", "runs on Ampere, Ada and Hopper"),
]


def _bad(layout: dict[str, Any], sections: dict[str, Any]) -> dict[str, Any]:
    return doc_with(layout, **sections)


@pytest.mark.parametrize(("name", "layout", "sections", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_exits_2_naming_field_and_rule(name: str, layout: dict[str, Any], sections: dict[str, Any],
                                                 field: str, rule: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert_cli_refuses(capsys, tmp_path, _bad(layout, sections), field, rule)


@pytest.mark.parametrize(("name", "layout", "sections", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_http_422_naming_field_and_rule(name: str, layout: dict[str, Any], sections: dict[str, Any],
                                                     field: str, rule: str, tmp_path: Path) -> None:
    assert_http_refuses(tmp_path, _bad(layout, sections), field, rule)


def test_mla_is_refused() -> None:
    from simcore.simulate import check
    from topology.errors import SpecError

    doc = {"model": {"preset": "deepseek-v3", "num_layers": 4, "first_dense_layers": 1},
           "cluster": {"preset": "dgx-h100", "num_nodes": 1},
           "layout": {"dp": 1, "tp": 8, "pp": 1, "ep": 8, "global_batch_size": 1, "sequence_parallel": True,
                      "attention_backend": "flash2"}}
    with pytest.raises(SpecError, match="MLA"):
        check(convert.to_scenario(SimulationRequest.model_validate(doc)))
