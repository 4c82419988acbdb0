"""Hugging Face config.json files (real ones, tests/interop/data/hf/SOURCES.md) map to the model they describe,
inline as `model.hf_config` too; unmapped keys are listed with their values; unsupported input names the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import clustersim
from api_schemas import RequestError, SimulationRequest
from interop import model_from_hf
from service import convert
from service.interop import import_config

HF = Path(__file__).parent / "data" / "hf"


def _config(name: str) -> dict:
    return json.loads((HF / name).read_text())


def test_deepseek_r1_maps_to_the_deepseek_v3_preset() -> None:
    mapped = model_from_hf(_config("deepseek-r1.json"))
    request = SimulationRequest.model_validate({
        "model": {"hf_config": _config("deepseek-r1.json"), "seq_length": 4096, "attention": "flash"},
        "cluster": {"preset": "dgx-h100", "num_nodes": 1}, "layout": {"dp": 8, "tp": 1, "pp": 1,
                                                                       "global_batch_size": 8}})
    # the preset is the main model; the config also holds one multi-token prediction depth
    preset = SimulationRequest.model_validate({**request.model_dump(exclude_none=True),
                                               "model": {"preset": "deepseek-v3", "seq_length": 4096,
                                                         "mtp_layers": 1}})
    assert convert.to_scenario(request).model == convert.to_scenario(preset).model
    assert mapped.fields["first_dense_layers"] == 3 and mapped.fields["attention_variant"] == "mla"
    assert mapped.fields["mtp_layers"] == 1 and "num_nextn_predict_layers" not in mapped.ignored
    assert mapped.ignored["rope_theta"] == 10000


@pytest.mark.parametrize("name, expected", [
    ("llama-3.1-70b.json", {"num_layers": 80, "hidden_size": 8192, "num_kv_heads": 8, "ffn_hidden_size": 28672,
                            "vocab_size": 128256, "activation": "swiglu", "tied_embeddings": False}),
    ("qwen3-8b.json", {"num_layers": 36, "hidden_size": 4096, "num_kv_heads": 8, "head_dim": 128,
                       "ffn_hidden_size": 12288, "vocab_size": 151936}),
    ("deepseek-v2.5.json", {"num_experts": 160, "moe_top_k": 6, "num_shared_experts": 2, "first_dense_layers": 1,
                            "moe_ffn_hidden_size": 1536, "kv_lora_rank": 512, "q_lora_rank": 1536}),
])
def test_real_configs_map_their_shape(name: str, expected: dict) -> None:
    fields = model_from_hf(_config(name)).fields
    assert {k: fields[k] for k in expected} == expected


def test_llama_3_1_70b_config_is_the_llama3_70b_preset() -> None:
    cfg = _config("llama-3.1-70b.json")
    base = {"cluster": {"preset": "dgx-h100", "num_nodes": 1},
            "layout": {"dp": 1, "tp": 8, "pp": 1, "global_batch_size": 8}}
    inline = {**base, "model": {"hf_config": cfg, "seq_length": 8192, "attention": "flash"}}
    preset = {**base, "model": {"preset": "llama3-70b"}}
    # The preset says gated_mlp, the config hidden_act silu (swiglu): the same three matrices, the same figures.
    assert clustersim.simulate(inline).iteration_time_s == clustersim.simulate(preset).iteration_time_s


def test_import_prints_a_runnable_request_with_the_ignored_keys() -> None:
    result = import_config("hf", (HF / "qwen3-8b.json").read_text(), "qwen3-8b.json")
    assert result.assumed == {"seq_length": 131072}  # max_position_embeddings: a config holds no training length
    assert result.ignored["rope_scaling"]["rope_type"] == "yarn"
    SimulationRequest.model_validate(result.request)


@pytest.mark.parametrize("config, field, rule", [
    ({"architectures": ["MiniMaxM1ForCausalLM"], "hidden_size": 6144}, "cfg.architectures", "not a supported"),
    ({"hidden_size": 8}, "cfg.architectures", "must be a list"),
    ({**json.loads((HF / "qwen3-8b.json").read_text()), "hidden_act": "mish"}, "cfg.hidden_act", "activation"),
    ({**json.loads((HF / "deepseek-r1.json").read_text()), "moe_layer_freq": 2}, "cfg.moe_layer_freq",
     "not supported"),
    ({"architectures": ["Qwen3MoeForCausalLM"], **{k: 8 for k in ("hidden_size", "num_attention_heads",
     "num_hidden_layers", "intermediate_size", "vocab_size", "moe_intermediate_size", "num_experts",
     "num_experts_per_tok")}, "mlp_only_layers": [0]}, "cfg.mlp_only_layers", "not represented"),
])
def test_what_cannot_be_mapped_is_an_error_naming_the_key(config: dict, field: str, rule: str) -> None:
    with pytest.raises(RequestError) as err:
        model_from_hf(config, where="cfg")
    assert err.value.details[0].field == field and rule in err.value.details[0].rule


def test_a_config_that_is_not_json_names_the_line() -> None:
    with pytest.raises(RequestError) as err:
        import_config("hf", '{\n  "architectures": [\n  oops\n}', "config.json")
    assert err.value.details[0].field == "config.json:3"
