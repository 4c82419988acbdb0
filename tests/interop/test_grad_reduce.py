"""The data-parallel gradient reduction's dtype (`layout.grad_reduce_dtype`): Megatron-LM reduces bf16 training's
gradients in fp32 unless --grad-reduce-in-bf16 (megatron/training/arguments.py validate_args; the gradient buffer's
dtype in megatron/core/distributed/param_and_grad_buffer.py), which halves the bytes the data-parallel collectives
move. It imports from Megatron-LM's flags, DeepSpeed's communication_data_type, and exports back; torchtitan (which
reduces in float32) refuses it naming who can."""

from __future__ import annotations

import json

import pytest

from api_schemas import RequestError, SimulationRequest
from service import convert
from service.interop import export_config, import_config
from simcore import SpecError, check, simulate

DP8 = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
       "layout": {"dp": 8, "tp": 1, "pp": 1, "microbatch_size": 4, "global_batch_size": 32}}
MODEL = ("--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 --vocab-size 51200 "
         "--micro-batch-size 4 --global-batch-size 32")


def _request(**layout: object) -> SimulationRequest:
    return SimulationRequest.model_validate({**DP8, "layout": {**DP8["layout"], **layout}})


def _dp_s(request: SimulationRequest) -> float:
    return float(convert.to_response(simulate(convert.to_scenario(request)))["communication_s"]["dp"])


def test_bf16_reduction_halves_the_data_parallel_time() -> None:
    fp32, bf16 = _dp_s(_request()), _dp_s(_request(grad_reduce_dtype="bf16"))
    assert bf16 / fp32 == pytest.approx(0.5, abs=0.02)
    assert _dp_s(_request(grad_reduce_dtype="fp32")) == fp32  # the default, said


@pytest.mark.parametrize("precision, dtype", [("bf16", "fp16"), ("fp16", "bf16"), ("fp8", "fp16")])
def test_a_dtype_other_than_fp32_or_the_parameters_is_refused(precision: str, dtype: str) -> None:
    request = _request(precision=precision, grad_reduce_dtype=dtype)
    with pytest.raises(SpecError) as err:
        check(convert.to_scenario(request))
    assert err.value.field == "layout.grad_reduce_dtype" and "fp32 or the parameters' 16-bit type" in str(err.value)


@pytest.mark.parametrize("flags, precision, dtype", [
    ("--bf16", "bf16", None),  # Megatron's default for bf16: fp32
    ("--bf16 --grad-reduce-in-bf16", "bf16", "bf16"),
    ("--bf16 --main-grads-dtype bf16", "bf16", "bf16"),  # validate_args leaves fp32 accumulation off
    ("--bf16 --accumulate-allreduce-grads-in-fp32", "bf16", None),
    ("--fp16", "fp16", None),  # fp16: reduced in fp16
    ("--fp16 --accumulate-allreduce-grads-in-fp32", "fp16", "fp32"),
    ("--fp16 --grad-reduce-in-bf16", "fp16", None),  # validate_args reads it under --bf16 only
])
def test_megatron_flags_import_and_export_back(flags: str, precision: str, dtype: str | None) -> None:
    command = f"torchrun --nproc_per_node 8 pretrain_gpt.py {MODEL} {flags}"
    imported = import_config("megatron", command)
    layout = imported.request["layout"]
    assert layout["precision"] == precision and layout.get("grad_reduce_dtype") == dtype
    assert not {"grad_reduce_in_bf16", "accumulate_allreduce_grads_in_fp32", "main_grads_dtype"} & set(
        imported.ignored)
    exported = export_config("megatron", SimulationRequest.model_validate(imported.request))
    assert ("--grad-reduce-in-bf16" in exported) == (dtype == "bf16")
    assert ("--accumulate-allreduce-grads-in-fp32" in exported) == (dtype == "fp32")
    back = import_config("megatron", exported).request["layout"]
    assert back.get("grad_reduce_dtype") == dtype


def test_a_bad_main_grads_dtype_names_the_flag() -> None:
    with pytest.raises(RequestError) as err:
        import_config("megatron", f"torchrun --nproc_per_node 8 pretrain_gpt.py {MODEL} --bf16 "
                      "--main-grads-dtype fp16", "run.sh")
    assert "--main-grads-dtype" in err.value.details[0].rule


def test_deepspeed_communication_data_type_maps_both_ways() -> None:
    config = {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 1}, "communication_data_type": "fp32"}
    imported = import_config("deepspeed", json.dumps(config), "ds.json", model="gpt3-1.3b")
    assert "communication_data_type" not in imported.ignored
    assert imported.request["layout"]["grad_reduce_dtype"] == "fp32"
    request = _request(zero_stage=1, grad_reduce_dtype="bf16")
    script = export_config("deepspeed", request)
    assert '"communication_data_type": "bf16"' in script
    back = import_config("deepspeed", script, "launch.sh", model="gpt3-1.3b").request["layout"]
    assert back["grad_reduce_dtype"] == "bf16"
    with pytest.raises(RequestError) as err:
        import_config("deepspeed", json.dumps({**config, "communication_data_type": "fp16"}), "ds.json",
                      model="gpt3-1.3b")
    assert err.value.details[0].field == "ds.json.communication_data_type"


def test_torchtitan_reduces_in_float32_and_trains_in_bfloat16() -> None:
    request = SimulationRequest.model_validate({
        "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
        "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 8, "zero_stage": 3,
                   "zero_implementation": "fsdp", "grad_reduce_dtype": "bf16"}})
    with pytest.raises(RequestError) as err:
        export_config("torchtitan", request)
    assert err.value.details[0].field == "layout.grad_reduce_dtype"
    assert "Megatron-LM can" in err.value.details[0].rule
    toml = '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nmixed_precision_param = "float32"\n'
    with pytest.raises(RequestError) as err:
        import_config("torchtitan", toml, "train.toml", nodes=1)
    assert err.value.details[0].field == "train.toml.training.mixed_precision_param"
