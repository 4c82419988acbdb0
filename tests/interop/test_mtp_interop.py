"""Multi-token prediction in and out: Megatron-LM's --mtp-num-layers and config.json's num_nextn_predict_layers are
`model.mtp_layers`; export writes the flag back; what the simulator does not model (one layer shared by every
depth, MTP in a stage of its own) is an error naming the flag; Megatron-DeepSpeed refuses it naming who can."""

from __future__ import annotations

import pytest

from api_schemas import RequestError, SimulationRequest
from service import convert
from service.interop import export_config, import_config

BASE = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 2048 --num-attention-heads 16 "
        "--seq-length 2048 --vocab-size 51200 --micro-batch-size 1 --global-batch-size 16 "
        "--pipeline-model-parallel-size 2 --bf16")


def test_mtp_num_layers_imports_and_exports_back() -> None:
    imported = import_config("megatron", f"{BASE} --mtp-num-layers 2 --mtp-loss-scaling-factor 0.1")
    assert imported.request["model"]["mtp_layers"] == 2
    assert "mtp_num_layers" not in imported.ignored and imported.ignored["mtp_loss_scaling_factor"] == "0.1"
    request = SimulationRequest.model_validate(imported.request)
    command = export_config("megatron", request)
    assert "--mtp-num-layers 2" in command
    back = SimulationRequest.model_validate(import_config("megatron", command).request)
    assert convert.to_scenario(back).model == convert.to_scenario(request).model
    assert convert.to_scenario(request).model.mtp_layers == 2


@pytest.mark.parametrize("flag, name", [("--mtp-use-repeated-layer", "--mtp-use-repeated-layer"),
                                        ("--mtp-standalone", "--mtp-standalone")])
def test_what_is_not_modelled_names_the_flag(flag: str, name: str) -> None:
    with pytest.raises(RequestError) as err:
        import_config("megatron", f"{BASE} --mtp-num-layers 1 {flag}", "run.sh")
    assert err.value.details[0].rule.startswith(name)


def test_megatron_deepspeed_refuses_it_naming_who_can() -> None:
    request = SimulationRequest.model_validate(import_config("megatron", f"{BASE} --mtp-num-layers 1").request)
    with pytest.raises(RequestError) as err:
        export_config("deepspeed", request)
    assert err.value.details[0].field == "model.mtp_layers" and "Megatron-LM can" in err.value.details[0].rule
