"""`layout.bf16_layers`: the first and last transformer layers of an NVFP4 layout kept in BF16 (Megatron-LM's
--first-last-layers-bf16). The iteration is slower than all-NVFP4 and faster than all-BF16; the stages holding
those layers are the slower ones; they hold no FP4 weight copies; bad input is refused naming the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses

from api_schemas import SimulationRequest
from service import convert
from simcore.simulate import simulate

DOC: dict[str, Any] = {
    "model": {"preset": "llama3-8b", "seq_length": 2048, "attention": "flash"},
    "cluster": {"preset": "gb200-nvl72", "num_gpus": 8, "gpus_per_node": 4, "nics_per_node": 4,
                "nvlink_domain_gpus": 8},
    "layout": {"dp": 1, "tp": 2, "pp": 4, "global_batch_size": 8, "precision": "nvfp4"},
}


def with_layout(**fields: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    doc["layout"].update(fields)
    return doc


def result(doc: dict[str, Any]) -> dict[str, Any]:
    return convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))


def stage_seconds(res: dict[str, Any]) -> list[float]:
    return [s["forward_s"] + s["backward_s"] for s in res["stages"]]


def test_bf16_layers_cost_between_all_nvfp4_and_all_bf16() -> None:
    fp4 = result(DOC)["iteration_time_s"]
    bf16 = result(with_layout(precision="bf16"))["iteration_time_s"]
    one = result(with_layout(bf16_layers={"first": 1, "last": 1}))["iteration_time_s"]
    two = result(with_layout(bf16_layers={"first": 2, "last": 2}))["iteration_time_s"]
    assert fp4 < one < two < bf16
    # every layer in BF16 under nvfp4 is the bf16 run's compute (the optimizer step and messages aside)
    every = result(with_layout(bf16_layers={"first": 16, "last": 16}))["iteration_time_s"]
    assert every == pytest.approx(bf16, rel=0.02)


def test_the_stages_holding_them_are_the_slow_ones() -> None:
    plain = stage_seconds(result(DOC))
    first = stage_seconds(result(with_layout(bf16_layers={"first": 2})))
    last = stage_seconds(result(with_layout(bf16_layers={"last": 2})))
    assert first[0] > plain[0] and first[1:] == plain[1:]
    assert last[-1] > plain[-1] and last[:-1] == plain[:-1]
    assert first[0] == max(first[:-1])  # slower than every stage without the logits


def test_their_weights_have_no_fp4_copies() -> None:
    def weights(doc: dict[str, Any]) -> float:
        return float(result(doc)["memory"]["breakdown_gib"]["weights"])

    plain, every = weights(DOC), weights(with_layout(bf16_layers={"first": 32}))
    assert weights(with_layout(bf16_layers={"first": 4, "last": 4})) < plain
    # every layer in BF16 holds the weights BF16 training holds: no FP4 copies (1.125 bytes a GEMM weight)
    assert every == weights(with_layout(precision="bf16")) < plain


def test_zero_layers_change_nothing() -> None:
    zero, plain = result(with_layout(bf16_layers={"first": 0, "last": 0})), result(DOC)
    assert {k: v for k, v in zero.items() if k != "simulator"} == {k: v for k, v in plain.items() if k != "simulator"}


@pytest.mark.parametrize(("layout", "rule"), [
    ({"precision": "bf16", "bf16_layers": {"first": 1}}, "needs precision fp8, mxfp8 or nvfp4"),
    ({"bf16_layers": {"first": 20, "last": 20}}, "exceeds the model's layers (32)"),
])
def test_bad_bf16_layers_refused_naming_the_field(layout: dict[str, Any], rule: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    doc = with_layout(**layout)
    assert_http_refuses(tmp_path, doc, "layout.bf16_layers", rule)
    assert_cli_refuses(capsys, tmp_path, doc, "layout.bf16_layers", rule)


def test_encoder_decoder_refused() -> None:
    doc = {"model": {"preset": "t5-11b"}, "cluster": {"preset": "dgx-h100", "num_gpus": 8},
           "layout": {"dp": 1, "tp": 8, "pp": 1, "global_batch_size": 8, "precision": "fp8",
                      "bf16_layers": {"first": 1}}}
    with pytest.raises(ValueError, match="layout.bf16_layers: applies to single-stack models only"):
        result(doc)
