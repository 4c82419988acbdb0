"""Export then import is the identity: for every example request Megatron-LM can run, the Megatron command read
back gives the same model, layout and cluster (the same scenario, so the same simulated figures; for a cluster
beyond a preset and a size, a fabric or a graph a launch command does not carry, the same model, layout and GPU
count); the others are refused naming the field. Megatron-Core always overlaps the input-gradient all-reduce
(async_tensor_model_parallel_allreduce), so the original is compared with that field set."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from api_schemas import RequestError, SimulationRequest
from service import convert
from service.interop import export_config, import_config
from simcore import Activation, Fp8Recipe, Precision

ROOT = Path(__file__).resolve().parents[2]


def _requests() -> list[Path]:
    out = []
    for path in sorted((ROOT / "examples").rglob("*.yaml")) + sorted((ROOT / "examples").rglob("*.json")):
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and {"model", "cluster", "layout"} <= data.keys():
            out.append(path)
    return out


EXAMPLES = _requests()


def _plain_cluster(request: SimulationRequest) -> str | None:
    """The preset of a cluster given as a preset and a size only (what a launch command can carry)."""
    given = request.cluster.model_dump(exclude_none=True, exclude_defaults=True)
    return given["preset"] if set(given) <= {"preset", "num_nodes", "num_gpus"} and "preset" in given else None


def _activation_named(model: Any) -> Any:
    """A model whose activation is left to gated_mlp, with it named (what a launch command says: --swiglu)."""
    if model.activation is not None:
        return model
    name = "swiglu" if model.gated_mlp else "gelu"
    return replace(model, activation=Activation(name))


def test_there_are_examples() -> None:
    assert len(EXAMPLES) > 20


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_torchtitan_export_then_import_is_the_identity(path: Path) -> None:
    from api_schemas import load_request_file

    request = load_request_file(str(path))
    preset = _plain_cluster(request)
    try:
        text = export_config("torchtitan", request)
    except RequestError as err:  # a model or layout torchtitan cannot run: named, with who can
        assert err.details[0].field.startswith(("layout.", "model."))
        return
    if preset is None:
        pytest.skip("a cluster beyond a preset and a size (a job TOML does not carry it)")
    scenario = convert.to_scenario(request)
    back = SimulationRequest.model_validate(import_config(
        "torchtitan", text, cluster=preset, nodes=scenario.cluster.num_nodes).request)
    again = convert.to_scenario(back)
    assert again.model == scenario.model
    # torchtitan overlaps the gradient reduction with backward (DDP buckets, FSDP's reduce-scatter) always
    lay = replace(scenario.layout, overlap_grad_reduce=True)
    if lay.placement == "tp,dp,pp":
        lay = replace(lay, placement="tp,cp,dp,pp")
    assert again.layout == lay


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_export_then_import_is_the_identity(path: Path) -> None:
    from api_schemas import load_request_file

    request = load_request_file(str(path))
    preset = _plain_cluster(request)
    try:
        command = export_config("megatron", request)
    except RequestError as err:  # a layout Megatron-LM cannot run: the error names the field and who can
        assert err.details[0].field.startswith(("layout.", "model."))
        assert "Megatron-LM cannot run it" in err.details[0].rule
        return
    original = convert.to_scenario(request.model_copy(update={"layout": request.layout.model_copy(
        update={"async_tensor_model_parallel_allreduce": True})}))
    if preset is None:  # a cluster beyond a preset and a size (a fabric, a graph): the command carries its model
        # and layout, and its size; the cluster itself is the request's to give again
        preset = request.cluster.preset or "dgx-h100"
    back = SimulationRequest.model_validate(import_config("megatron", command, cluster=preset).request)
    again = convert.to_scenario(back)
    assert again.model == _activation_named(original.model)
    assert again.cluster.num_gpus == original.cluster.num_gpus
    if _plain_cluster(request) is not None:
        assert again.cluster == original.cluster
    lay, lay_back = original.layout, again.layout
    if lay.tp == 1:  # sequence parallelism means nothing without TP; Megatron turns it off
        lay = replace(lay, sequence_parallel=False)
    if lay.fp8_recipe is None and lay.precision == Precision.FP8:  # the default recipe, named
        lay = replace(lay, fp8_recipe=Fp8Recipe.TENSORWISE)
    if lay.placement == "tp,dp,pp":  # cp left out follows tp: the same order
        lay = replace(lay, placement="tp,cp,dp,pp")
    assert lay_back == lay
