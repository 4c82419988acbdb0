"""DeepSpeed ds_config.json in: DeepSpeed's own test configs (tests/interop/data/deepspeed/SOURCES.md) give the
batch, ZeRO stage and precision; the batch rule is DeepSpeed's; offload and unknown keys are errors naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api_schemas import RequestError
from interop.deepspeed import layout_from_deepspeed
from service.interop import import_config

DATA = Path(__file__).parent / "data" / "deepspeed"


def test_zero2_fp16_config() -> None:
    text = (DATA / "ds_config_func_bs8_zero2.json").read_text()
    result = import_config("deepspeed", text, "ds.json", cluster="dgx-a100", model="gpt3-350m")
    layout = result.request["layout"]
    assert (layout["dp"], layout["microbatch_size"], layout["global_batch_size"]) == (8, 1, 8)
    assert (layout["zero_stage"], layout["precision"]) == (2, "fp16")
    assert result.ignored["zero_optimization.reduce_bucket_size"] == 7000000


def test_micro_batch_and_accumulation_give_the_global_batch() -> None:
    layout, _ = layout_from_deepspeed((DATA / "ds_config_func_bs8_zero0_gas3.json").read_text(), dp=8)
    assert (layout["microbatch_size"], layout["global_batch_size"], layout["zero_stage"]) == (8, 192, 0)


@pytest.mark.parametrize("config, field, rule", [
    ({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1},
     "ds.train_batch_size", "= 1 x 1 x 8 = 8"),
    ({"train_batch_size": 8, "zero_optimization": {"stage": 2, "cpu_offload": True}},
     "ds.zero_optimization.cpu_offload", "not simulated"),
    ({"train_batch_size": 8, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}},
     "ds.zero_optimization.offload_param.device", "not simulated"),
    ({"train_batch_size": 8, "zero_optimisation": {"stage": 1}}, "ds.zero_optimisation.stage", "not a DeepSpeed"),
])
def test_what_cannot_be_mapped_names_the_key(config: dict, field: str, rule: str) -> None:
    with pytest.raises(RequestError) as err:
        layout_from_deepspeed(json.dumps(config), dp=8, source="ds")
    assert err.value.details[0].field == field and rule in err.value.details[0].rule


def test_zero3_is_deepspeeds_zero3_with_overlap_by_default() -> None:
    layout, _ = layout_from_deepspeed(json.dumps({"train_batch_size": 16, "bf16": {"enabled": True},
                                                  "zero_optimization": {"stage": 3}}), dp=8)
    assert (layout["zero_implementation"], layout["overlap_grad_reduce"], layout["precision"]) == (
        "deepspeed", True, "bf16")


def test_a_model_is_needed() -> None:
    with pytest.raises(RequestError, match="--model"):
        import_config("deepspeed", '{"train_batch_size": 8}', "ds.json")
