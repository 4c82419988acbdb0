"""DeepSpeed's ZeRO++ (simcore/domain/zeropp.py) in and out: zero_optimization's zero_quantized_weights,
zero_hpz_partition_size and zero_quantized_gradients import to the layout fields of those names at stage 3 (at
stages 0-2 DeepSpeed ignores them, and so are they listed), export back into zero_optimization, and round-trip;
bad values and layouts DeepSpeed would ignore them in are errors naming the key or field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api_schemas import RequestError, SimulationRequest
from interop.deepspeed import deepspeed_keys, layout_from_deepspeed, read_launch
from service import convert
from service.interop import export_config, import_config

ZEROPP = {"zero_quantized_weights": True, "zero_hpz_partition_size": 8, "zero_quantized_gradients": True}
DP16 = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 2},
        "layout": {"dp": 16, "tp": 1, "pp": 1, "microbatch_size": 1, "global_batch_size": 32, "zero_stage": 3,
                   "zero_implementation": "deepspeed", "overlap_grad_reduce": True}}


def _config(stage: int, **zero: Any) -> str:
    return json.dumps({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                       "zero_optimization": {"stage": stage, **zero}})


def _request(**layout: Any) -> SimulationRequest:
    return SimulationRequest.model_validate({**DP16, "layout": {**DP16["layout"], **layout}})


def test_the_keys_are_deepspeeds() -> None:
    assert set(ZEROPP) <= deepspeed_keys()


def test_stage_3_imports_the_three_options() -> None:
    result = import_config("deepspeed", _config(3, **ZEROPP), "ds.json", nodes=2, model="gpt3-1.3b")
    layout = result.request["layout"]
    assert {k: layout[k] for k in ZEROPP} == ZEROPP and layout["zero_implementation"] == "deepspeed"
    assert not {f"zero_optimization.{k}" for k in ZEROPP} & set(result.ignored)


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_below_stage_3_they_are_ignored_as_deepspeed_ignores_them(stage: int) -> None:
    result = import_config("deepspeed", _config(stage, **ZEROPP), "ds.json", nodes=2, model="gpt3-1.3b")
    assert not set(ZEROPP) & set(result.request["layout"])
    assert {k: result.ignored[f"zero_optimization.{k}"] for k in ZEROPP} == ZEROPP


@pytest.mark.parametrize("size, expected", [(0, None), (1, None), (4, 4), (64, 16)])
def test_a_partition_size_of_0_or_1_is_off_and_one_above_the_ranks_is_all_of_them(size: int,
                                                                                   expected: int | None) -> None:
    layout, ignored = layout_from_deepspeed(_config(3, zero_hpz_partition_size=size), dp=16)
    assert layout.get("zero_hpz_partition_size") == expected
    assert "zero_optimization.zero_hpz_partition_size" not in ignored


@pytest.mark.parametrize("zero, key, rule", [
    ({"zero_hpz_partition_size": -1}, "zero_hpz_partition_size", "must be an integer >= 0"),
    ({"zero_hpz_partition_size": "8"}, "zero_hpz_partition_size", "must be an integer >= 0"),
    ({"zero_hpz_partition_size": 2.0}, "zero_hpz_partition_size", "must be an integer >= 0"),
    ({"zero_hpz_partition_size": True}, "zero_hpz_partition_size", "must be an integer >= 0"),
    ({"zero_hpz_partition_size": 3}, "zero_hpz_partition_size", "must divide the 16 data-parallel ranks"),
    ({"zero_quantized_weights": "yes"}, "zero_quantized_weights", "must be true or false"),
    ({"zero_quantized_gradients": 1}, "zero_quantized_gradients", "must be true or false"),
])
def test_a_bad_value_names_the_key(zero: dict[str, Any], key: str, rule: str) -> None:
    with pytest.raises(RequestError) as err:
        layout_from_deepspeed(_config(3, **zero), dp=16, source="ds")
    assert err.value.details[0].field == f"ds.zero_optimization.{key}" and rule in err.value.details[0].rule


def test_a_bad_value_is_an_error_at_every_stage_as_deepspeeds_config_model_says() -> None:
    with pytest.raises(RequestError) as err:
        layout_from_deepspeed(_config(2, zero_hpz_partition_size=-2), dp=16, source="ds")
    assert err.value.details[0].field == "ds.zero_optimization.zero_hpz_partition_size"


def test_the_domains_rules_still_apply_to_an_import() -> None:
    script = export_config("deepspeed", _request(zero_quantized_gradients=True))
    assert '"gradient_accumulation_steps": 2' in script
    tp2 = (script.replace("--tensor-model-parallel-size 1", "--tensor-model-parallel-size 2")
           .replace('"gradient_accumulation_steps": 2', '"gradient_accumulation_steps": 4'))
    with pytest.raises(RequestError) as err:  # qgZ needs tp = 1 (simcore/domain/zeropp.py)
        import_config("deepspeed", tp2, "run.sh", cluster="dgx-h100", model="gpt3-1.3b")
    assert err.value.details[0].field == "layout.zero_quantized_gradients"


@pytest.mark.parametrize("options", [ZEROPP, {"zero_quantized_weights": True}, {"zero_hpz_partition_size": 2},
                                     {"zero_quantized_gradients": True}])
def test_export_writes_the_options_and_import_gives_them_back(options: dict[str, Any]) -> None:
    original = _request(**options)
    script = export_config("deepspeed", original)
    config, _launch = read_launch(script)
    zero = json.loads(config)["zero_optimization"]
    assert {k: zero[k] for k in ZEROPP if k in zero} == options
    back = import_config("deepspeed", script, "launch.sh", cluster="dgx-h100", model="gpt3-1.3b")
    assert {k: back.request["layout"][k] for k in ZEROPP if k in back.request["layout"]} == options
    assert convert.to_scenario(SimulationRequest.model_validate(back.request)).layout == convert.to_scenario(
        original).layout


def test_without_zeropp_nothing_is_written() -> None:
    config, _launch = read_launch(export_config("deepspeed", _request()))
    assert not set(ZEROPP) & set(json.loads(config)["zero_optimization"])


@pytest.mark.parametrize("layout, field", [
    ({"zero_stage": 2, "zero_implementation": "megatron", "zero_quantized_weights": True},
     "layout.zero_quantized_weights"),
    ({"zero_stage": 1, "zero_implementation": "megatron", "zero_hpz_partition_size": 2},
     "layout.zero_hpz_partition_size"),
    ({"zero_implementation": "deepspeed_2021", "zero_quantized_gradients": True}, "layout.zero_quantized_gradients"),
])
def test_a_layout_deepspeed_would_ignore_them_in_is_refused(layout: dict[str, Any], field: str) -> None:
    with pytest.raises(RequestError) as err:
        export_config("deepspeed", _request(**layout))
    detail = err.value.details[0]
    assert detail.field == field and "ZeRO 3" in detail.rule
    assert detail.rule.endswith("Megatron-DeepSpeed cannot run it")
