"""Megatron-LM's --cp-comm-type: exported from layout.cp_comm (p2p is the default and writes nothing) and imported
back; a type that differs by layer, or a2a+p2p, is refused naming the flag."""

from __future__ import annotations

import pytest

from api_schemas import RequestError, SimulationRequest
from service.interop import export_config, import_config

REQUEST = {"model": {"preset": "llama3-8b", "seq_length": 32768},
           "cluster": {"preset": "dgx-h100", "num_nodes": 1},
           "layout": {"dp": 2, "tp": 1, "pp": 1, "cp": 4, "global_batch_size": 8, "zero_stage": 1}}


@pytest.mark.parametrize(("cp_comm", "flag"), [("p2p", None), ("a2a", "a2a"), ("all_gather", "allgather")])
def test_cp_comm_exports_and_imports_back(cp_comm: str, flag: str | None) -> None:
    doc = {**REQUEST, "layout": {**REQUEST["layout"], "cp_comm": cp_comm}}
    command = export_config("megatron", SimulationRequest.model_validate(doc))
    words = command.split()
    if flag is None:
        assert "--cp-comm-type" not in words
    else:
        assert words[words.index("--cp-comm-type") + 1] == flag
    imported = import_config("megatron", command, "run.sh", cluster="dgx-h100", nodes=1)
    assert imported.request["layout"].get("cp_comm", "p2p") == cp_comm
    assert "cp_comm_type" not in imported.ignored


@pytest.mark.parametrize("value", ["p2p a2a", "a2a+p2p"])
def test_per_layer_or_hierarchical_types_are_refused(value: str) -> None:
    command = export_config("megatron", SimulationRequest.model_validate(REQUEST))
    with pytest.raises(RequestError) as err:
        import_config("megatron", f"{command} --cp-comm-type {value}", "run.sh", cluster="dgx-h100", nodes=1)
    assert "--cp-comm-type" in err.value.details[0].rule and "a2a+p2p is not modelled" in err.value.details[0].rule
