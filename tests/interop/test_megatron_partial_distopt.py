"""Megatron-LM's --num-distributed-optimizer-instances (the partial distributed optimizer): exported from
`layout.zero_shard_size` with zero_stage 1 and imported back; without --use-distributed-optimizer, or not dividing
the data-parallel size, it is refused naming the flag."""

from __future__ import annotations

import pytest

from api_schemas import RequestError, SimulationRequest
from service.interop import export_config, import_config

REQUEST = {"model": {"preset": "llama3-8b", "seq_length": 4096},
           "cluster": {"preset": "dgx-h100", "num_nodes": 4},
           "layout": {"dp": 16, "tp": 2, "pp": 1, "global_batch_size": 64, "zero_stage": 1,
                      "sequence_parallel": True, "zero_shard_size": 4}}


def test_partial_distributed_optimizer_exports_and_imports_back() -> None:
    command = export_config("megatron", SimulationRequest.model_validate(REQUEST))
    words = command.split()
    assert words[words.index("--num-distributed-optimizer-instances") + 1] == "4"
    imported = import_config("megatron", command, "run.sh", cluster="dgx-h100", nodes=4)
    assert imported.request["layout"]["zero_shard_size"] == 4
    assert "num_distributed_optimizer_instances" not in imported.ignored


def test_full_sharding_writes_no_instances() -> None:
    doc = {**REQUEST, "layout": {**REQUEST["layout"], "zero_shard_size": 16}}
    command = export_config("megatron", SimulationRequest.model_validate(doc))
    assert "--num-distributed-optimizer-instances" not in command


@pytest.mark.parametrize(("instances", "distributed"), [(3, True), (2, False)])
def test_bad_instances_are_refused(instances: int, distributed: bool) -> None:
    plain = {**REQUEST, "layout": {**REQUEST["layout"], "zero_shard_size": None}}
    command = export_config("megatron", SimulationRequest.model_validate(plain))
    if not distributed:
        command = command.replace("--use-distributed-optimizer", "")
    with pytest.raises(RequestError) as err:
        import_config("megatron", f"{command} --num-distributed-optimizer-instances {instances}", "run.sh",
                      cluster="dgx-h100", nodes=4)
    rule = err.value.details[0].rule
    assert "--num-distributed-optimizer-instances" in rule and "needs --use-distributed-optimizer" in rule
