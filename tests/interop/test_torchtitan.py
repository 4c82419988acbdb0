"""torchtitan's job TOML in and out: its own Llama 3 70B TOML (tests/interop/data/llama3_70b.toml, from the
commit named there) imports to an FSDP layout, HSDP to FSDP over its shard degree, export then import is the
identity, every emitted key is torchtitan's, and bad input names the line or key."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from api_schemas import RequestError, SimulationRequest
from interop.torchtitan import torchtitan_keys
from service import convert
from service.interop import export_config, import_config

TOML = (Path(__file__).parent / "data" / "llama3_70b.toml").read_text()


def test_llama3_70b_toml_with_shard_8_imports_to_fsdp_8() -> None:
    text = TOML.replace("data_parallel_shard_degree = -1", "data_parallel_shard_degree = 8").replace(
        "local_batch_size = 8", "local_batch_size = 6")
    result = import_config("torchtitan", text, "llama3_70b.toml")
    layout, model = result.request["layout"], result.request["model"]
    assert (layout["dp"], layout["zero_stage"], layout["zero_implementation"]) == (8, 3, "fsdp")
    assert (layout["tp"], layout["microbatch_size"], layout["global_batch_size"]) == (8, 6, 48)
    assert (model, layout["recompute"]) == ({"preset": "llama3-70b", "seq_length": 8192}, "full")
    assert result.request["cluster"] == {"preset": "dgx-h100", "num_gpus": 64}
    assert result.ignored["optimizer.lr"] == 1.5e-4


def test_shard_minus_one_takes_the_gpus_left_over() -> None:
    result = import_config("torchtitan", TOML, "llama3_70b.toml", nodes=4)
    assert result.request["layout"]["dp"] == 4  # 32 GPUs / TP 8


def test_hsdp_imports_to_fsdp_over_the_shard_degree() -> None:
    text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\ndata_parallel_replicate_degree = 2\n" \
           "data_parallel_shard_degree = 4\n"
    layout = import_config("torchtitan", text, "t.toml", nodes=1).request["layout"]
    assert (layout["dp"], layout["zero_stage"], layout["zero_implementation"], layout["zero_shard_size"]) == (
        8, 3, "fsdp", 4)


@pytest.mark.parametrize("layout", [
    {"dp": 8, "tp": 8, "pp": 1, "microbatch_size": 2, "global_batch_size": 64, "zero_stage": 3,
     "zero_implementation": "fsdp", "recompute": "full", "sequence_parallel": True},
    {"dp": 8, "tp": 8, "pp": 1, "microbatch_size": 2, "global_batch_size": 64, "zero_stage": 3,
     "zero_implementation": "fsdp", "zero_shard_size": 2, "recompute": "full", "sequence_parallel": True},
    {"dp": 2, "tp": 4, "pp": 8, "microbatch_size": 1, "global_batch_size": 64, "schedule": "interleaved_1f1b",
     "virtual_stages": 2, "sequence_parallel": True, "recompute": "selective", "precision": "fp8",
     "fp8_scaling": "current"},
    {"dp": 8, "tp": 8, "pp": 1, "microbatch_size": 2, "global_batch_size": 64, "zero_stage": 3,
     "zero_implementation": "fsdp", "precision": "fp8", "fp8_recipe": "rowwise", "sequence_parallel": True},
    {"dp": 16, "tp": 2, "pp": 2, "microbatch_size": 1, "global_batch_size": 64, "schedule": "gpipe",
     "sequence_parallel": True, "zero_stage": 3, "zero_implementation": "fsdp"},
])
def test_export_then_import_is_the_identity(layout: dict) -> None:
    request = SimulationRequest.model_validate({"model": {"preset": "llama3-70b"},
                                                "cluster": {"preset": "dgx-h100", "num_nodes": 8},
                                                "layout": {**layout, "overlap_grad_reduce": True}})
    text = export_config("torchtitan", request)
    assert set(_keys(tomllib.loads(text))) <= torchtitan_keys()
    back = SimulationRequest.model_validate(import_config("torchtitan", text, cluster="dgx-h100", nodes=8).request)
    assert convert.to_scenario(back).layout == convert.to_scenario(request).layout
    assert convert.to_scenario(back).model == convert.to_scenario(request).model


def _keys(table: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in table.items():
        out += _keys(value, f"{prefix}{key}.") if isinstance(value, dict) else [prefix + key]
    return out


@pytest.mark.parametrize("text, field, rule", [
    ("[training]\nlocal_batch_size = \n", "t.toml:2", "is not TOML"),
    ("[parallelism]\ntensor_parallel = 8\n", "t.toml.parallelism.tensor_parallel", "not a torchtitan job config"),
    ("[model]\nname = \"llama4\"\nflavor = \"17bx16e\"\n", "t.toml.model.flavor", "not a model with a preset"),
])
def test_bad_toml_names_the_line_or_key(text: str, field: str, rule: str) -> None:
    with pytest.raises(RequestError) as err:
        import_config("torchtitan", text, "t.toml", nodes=1)
    assert err.value.details[0].field == field and rule in err.value.details[0].rule


def test_what_torchtitan_cannot_run_names_who_can() -> None:
    request = SimulationRequest.model_validate({"model": {"preset": "llama3-8b"},
                                                "cluster": {"preset": "dgx-h100", "num_nodes": 1},
                                                "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 8,
                                                           "zero_stage": 1}})
    with pytest.raises(RequestError, match="Megatron-LM"):
        export_config("torchtitan", request)
    custom = request.model_copy(update={"model": request.model.model_copy(update={"preset": "gpt3-1.3b"})})
    with pytest.raises(RequestError, match="export megatron"):
        export_config("torchtitan", custom)
