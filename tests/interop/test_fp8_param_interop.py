"""FP8 parameters in and out (`layout.fp8_param_gather`): Megatron-LM's --fp8-param-gather (its Llama 3 8B FP8
example passes it) and torchtitan's [quantize.linear.float8] enable_fsdp_float8_all_gather import to it and export
back; where the framework would refuse the flag, the import is an error naming it; where it has no effect
(torchtitan without FSDP), it stays in `ignored`."""

from __future__ import annotations

from pathlib import Path

import pytest

from api_schemas import RequestError, SimulationRequest
from service import convert
from service.interop import export_config, import_config
from simcore import SpecError, check, simulate

DATA = Path(__file__).parent / "data"
ARGS = (DATA / "train_llama3_8b_h100_fp8.args").read_text()
TOML = (DATA / "llama3_70b.toml").read_text()


def _response(request: SimulationRequest) -> dict:
    return convert.to_response(simulate(convert.to_scenario(request)))


def test_llama3_8b_fp8_example_keeps_fp8_parameters_and_exports_them_back() -> None:
    imported = import_config("megatron", ARGS, "train_llama3_8b_h100_fp8.args")
    layout = imported.request["layout"]
    assert layout["fp8_param_gather"] is True and "fp8_param_gather" not in imported.ignored
    request = SimulationRequest.model_validate(imported.request)
    exported = export_config("megatron", request)
    assert "--fp8-param-gather" in exported.split()
    back = SimulationRequest.model_validate(import_config("megatron", exported, "run.sh").request)
    assert convert.to_scenario(back).layout == convert.to_scenario(request).layout
    # the flag changes the answer: without it the weights keep their bf16 copy
    without = SimulationRequest.model_validate({**imported.request, "layout": {**layout, "fp8_param_gather": False}})
    assert convert.to_scenario(without).layout != convert.to_scenario(request).layout
    assert "--fp8-param-gather" not in export_config("megatron", without).split()
    weights = [_response(r)["stages"][0]["memory"]["breakdown_gib"]["weights"] for r in (without, request)]
    assert weights[1] < weights[0]


@pytest.mark.parametrize(("remove", "rule"), [
    ("--fp8-format hybrid", "needs --fp8-format"),
    ("--use-distributed-optimizer", "needs --use-distributed-optimizer"),
])
def test_megatron_refusals_name_the_flag(remove: str, rule: str) -> None:
    with pytest.raises(RequestError) as err:
        import_config("megatron", ARGS.replace(f" {remove} ", " "), "run.sh")
    detail = err.value.details[0]
    assert "fp8-param-gather" in detail.rule or "fp8_param_gather" in detail.field
    assert rule in detail.rule


def _titan(flag: str, shard: int = 8, recipe: str = "") -> str:
    text = TOML.replace('# converters = ["float8"]', 'converters = ["float8"]').replace(
        "enable_fsdp_float8_all_gather = false", f"enable_fsdp_float8_all_gather = {flag}{recipe}").replace(
        "data_parallel_shard_degree = -1", f"data_parallel_shard_degree = {shard}")
    assert 'converters = ["float8"]' in text.replace("# converters", "")
    return text


def test_torchtitan_fsdp_float8_all_gather_maps_both_ways() -> None:
    imported = import_config("torchtitan", _titan("true"), "llama3_70b.toml")
    layout = imported.request["layout"]
    assert (layout["precision"], layout["zero_implementation"], layout["fp8_param_gather"]) == ("fp8", "fsdp", True)
    assert "quantize.linear.float8.enable_fsdp_float8_all_gather" not in imported.ignored
    request = SimulationRequest.model_validate(imported.request)
    toml = export_config("torchtitan", request)
    assert "enable_fsdp_float8_all_gather = true" in toml
    back = SimulationRequest.model_validate(import_config("torchtitan", toml, cluster="dgx-h100", nodes=8).request)
    assert convert.to_scenario(back).layout == convert.to_scenario(request).layout
    off = import_config("torchtitan", _titan("false"), "llama3_70b.toml").request["layout"]
    assert "fp8_param_gather" not in off


def test_torchtitan_flag_without_effect_stays_ignored() -> None:
    # a recipe_name (torchtitan then takes torchao's recipe and not the flag), or no FSDP
    for text, nodes in ((_titan("true", recipe='\nrecipe_name = "rowwise"'), 8), (_titan("true", shard=1), 1)):
        imported = import_config("torchtitan", text, "llama3_70b.toml", nodes=nodes)
        assert "fp8_param_gather" not in imported.request["layout"]
        assert imported.ignored["quantize.linear.float8.enable_fsdp_float8_all_gather"] is True


def test_a_request_where_it_cannot_apply_is_refused_naming_the_field() -> None:
    base = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
            "layout": {"dp": 8, "tp": 1, "pp": 1, "microbatch_size": 1, "global_batch_size": 8,
                       "fp8_param_gather": True}}
    for layout in ({"precision": "bf16", "zero_stage": 1}, {"precision": "fp8", "zero_stage": 0}):
        request = SimulationRequest.model_validate({**base, "layout": {**base["layout"], **layout}})
        with pytest.raises(SpecError) as err:
            check(convert.to_scenario(request))
        assert err.value.field == "layout.fp8_param_gather"
