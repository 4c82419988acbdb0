"""DeepSpeed out: `export deepspeed` writes a script holding ds_config.json and the Megatron-DeepSpeed launch; every
key and flag it emits is in the recorded lists; the batch follows DeepSpeed's rule; what DeepSpeed's pipeline
engine cannot run is an error naming the field and who can; and `import deepspeed` of the script gives back the
layout (over every example request it can run)."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from api_schemas import RequestError, SimulationRequest, load_request_file
from interop.deepspeed import deepspeed_keys, megatron_deepspeed_flags, read_launch
from service import convert
from service.interop import export_config, import_config
from simcore import Precision, Schedule, ZeroImplementation

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ROOT / "interop" / "data" / "megatron_deepspeed_flags.txt"


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


def request(**layout: Any) -> SimulationRequest:
    base = {"dp": 2, "tp": 8, "pp": 4, "microbatch_size": 1, "global_batch_size": 64, "recompute": "full",
            "zero_stage": 1, "overlap_grad_reduce": True, "sequence_parallel": True}
    return SimulationRequest.model_validate({"model": {"preset": "gpt3-13b"},
                                             "cluster": {"preset": "dgx-a100", "num_nodes": 8},
                                             "layout": {**base, **layout}})


def split(script: str) -> tuple[dict[str, Any], list[str]]:
    """(the ds_config.json the script writes, the flags of its command)."""
    config, _ = read_launch(script)
    command = script[script.rindex("EOF\n") + 4:]
    return json.loads(config), [w for w in shlex.split(command.replace("\\\n", " ")) if w.startswith("--")]


def keys(config: dict[str, Any]) -> list[str]:
    out = []
    for key, value in config.items():
        out.append(key)
        if isinstance(value, dict):
            out += keys(value)
    return out


def test_the_flag_list_names_its_sources() -> None:
    header = FLAGS.read_text().splitlines()[:3]
    assert "Megatron-DeepSpeed commit f4157bea69f3df8c6cb66f2ebcda66ba03d1288e" in header[0]
    assert "DeepSpeed commit 38327e07f6cd39b63418f60cedd1651b0be3e7c3" in header[1]
    assert {"--tensor-model-parallel-size", "--zero-stage", "--no-pipeline-parallel", "--enable-zbh1-pipeline",
            "--deepspeed", "--deepspeed_config", "--num_nodes", "--num_gpus"} <= megatron_deepspeed_flags()
    assert "--context-parallel-size" not in megatron_deepspeed_flags()  # Megatron-LM's, not Megatron-DeepSpeed's


def test_a_pipeline_layout_is_written_as_deepspeed_runs_it() -> None:
    script = export_config("deepspeed", request())
    config, flags = split(script)
    assert script.startswith("# Megatron-DeepSpeed") and "cat > ds_config.json <<'EOF'\n" in script
    assert "deepspeed --num_nodes 8 --num_gpus 8 pretrain_gpt.py" in script
    assert config == {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 32,
                      "zero_optimization": {"stage": 1, "overlap_comm": True, "reduce_bucket_size": 40_000_000},
                      "bf16": {"enabled": True}}
    command = " ".join(flags)
    for expected in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--sequence-parallel",
                     "--zero-stage", "--deepspeed_config", "--recompute-granularity"):
        assert expected in command
    assert "--no-pipeline-parallel" not in flags  # pp 4: DeepSpeed's pipeline engine
    assert "--tensor-model-parallel-size 8" in script and "--global-batch-size 64" in script


def test_zero3_writes_deepspeeds_bucket_and_prefetch_sizes_and_the_plain_engine() -> None:
    lay = {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 32, "zero_stage": 3, "zero_implementation": "deepspeed",
           "overlap_grad_reduce": True, "sequence_parallel": False, "recompute": "selective"}
    script = export_config("deepspeed", request(**lay).model_copy(update={"cluster": request().cluster.model_copy(
        update={"num_nodes": 1})}))
    config, flags = split(script)
    assert config["zero_optimization"] == {"stage": 3, "overlap_comm": True, "reduce_bucket_size": 500_000_000,
                                           "stage3_prefetch_bucket_size": 50_000_000,
                                           "stage3_param_persistence_threshold": 100_000,
                                           "stage3_max_reuse_distance": 1_000_000_000}
    assert "--no-pipeline-parallel" in flags and "--recompute-granularity" in flags and "--zero-stage" in flags
    assert config["gradient_accumulation_steps"] == 4


def test_zb_h1_is_the_exact_zero_bubble_schedule() -> None:
    _config, flags = split(export_config("deepspeed", request(schedule="zb_h1", sequence_parallel=False,
                                                              global_batch_size=16)))
    assert "--enable-zbh1-pipeline" in flags and "--enable-zbh1-exact-semantics" in flags


@pytest.mark.parametrize("layout, field, who", [
    ({"zero_stage": 2}, "layout.zero_stage", "torchtitan"),
    ({"schedule": "interleaved_1f1b", "virtual_stages": 2}, "layout.schedule", "Megatron-LM can"),
    ({"schedule": "dualpipe", "global_batch_size": 16}, "layout.schedule", "DualPipe"),
    ({"schedule": "zb_v", "global_batch_size": 16}, "layout.schedule", "torchtitan can"),
    ({"schedule": "zb_h1", "global_batch_size": 16}, "layout.sequence_parallel", "torchtitan can"),
    ({"dp": 1, "cp": 2}, "layout.cp", "Megatron-LM can"),
    ({"precision": "fp8"}, "layout.precision", "Megatron-LM can"),
    ({"zero_stage": 0}, "layout.overlap_grad_reduce", "Megatron-LM can"),
    ({"tp_comm_overlap": True}, "layout.tp_comm_overlap", "Megatron-LM can"),
    ({"async_tensor_model_parallel_allreduce": True}, "layout.async_tensor_model_parallel_allreduce",
     "Megatron-LM can"),
    ({"placement": "dp,tp,pp"}, "layout.placement", "rank order"),
    ({"stage_layers": [9, 11, 11, 9]}, "layout.stage_layers", "Megatron-LM can"),
    ({"dp": 8, "pp": 1, "zero_stage": 3, "global_batch_size": 64}, "layout.zero_implementation",
     "--use-megatron-fsdp"),
    ({"dp": 8, "pp": 1, "zero_stage": 3, "zero_implementation": "fsdp", "global_batch_size": 64},
     "layout.zero_implementation", "torchtitan can"),
])
def test_what_deepspeed_cannot_run_is_named_with_who_can(layout: dict[str, Any], field: str, who: str) -> None:
    with pytest.raises(RequestError) as err:
        export_config("deepspeed", request(**layout))
    detail = err.value.details[0]
    assert detail.field == field
    assert who in detail.rule and detail.rule.endswith("Megatron-DeepSpeed cannot run it")


def test_models_it_cannot_write_are_named() -> None:
    base = request().model_dump(exclude_none=True)
    for model, field in (({"preset": "t5-11b"}, "model.architecture"),
                         ({"preset": "mixtral-8x7b"}, "model.num_experts"),
                         ({"preset": "deepseek-v3"}, "model.num_experts")):
        doc = {**base, "model": model, "layout": {"dp": 8, "tp": 8, "pp": 1, "global_batch_size": 64}}
        with pytest.raises(RequestError) as err:
            export_config("deepspeed", SimulationRequest.model_validate(doc))
        assert err.value.details[0].field == field


def _normalised(layout: Any) -> Any:
    """The layout as a Megatron-DeepSpeed launch says it: what means nothing at these degrees dropped, the
    defaults named."""
    lay = layout
    if lay.placement == "tp,dp,pp":  # cp left out follows tp: the same order
        lay = replace(lay, placement="tp,cp,dp,pp")
    if lay.tp == 1:  # sequence parallelism and the async all-reduce mean nothing without TP
        lay = replace(lay, sequence_parallel=False, async_tensor_model_parallel_allreduce=False)
    if lay.pp == 1 and lay.schedule == Schedule.GPIPE:  # one stage: no pipeline schedule
        lay = replace(lay, schedule=Schedule.ONE_F_ONE_B)
    if lay.zero_implementation == ZeroImplementation.DEEPSPEED_2021:  # the same config; today's DeepSpeed reads it
        lay = replace(lay, zero_implementation=ZeroImplementation.DEEPSPEED)
    if str(lay.pipeline_partition) == "even":
        lay = replace(lay, pipeline_partition=None)
    return lay


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_export_then_import_gives_the_layout_back(path: Path) -> None:
    original = load_request_file(str(path))
    try:
        script = export_config("deepspeed", original)
    except RequestError as err:  # a layout Megatron-DeepSpeed cannot run: the field and who can
        assert err.details[0].field.startswith(("layout.", "model."))
        assert "Megatron-DeepSpeed cannot run it" in err.details[0].rule
        return
    config, flags = split(script)
    assert set(keys(config)) <= deepspeed_keys() and set(flags) <= megatron_deepspeed_flags()
    lay = original.layout
    assert config["train_batch_size"] == (config["train_micro_batch_size_per_gpu"]
                                          * config["gradient_accumulation_steps"] * lay.dp)
    given = original.cluster.model_dump(exclude_none=True, exclude_defaults=True)
    if not set(given) <= {"preset", "num_nodes", "num_gpus"} or "preset" not in given:
        pytest.skip("a cluster beyond a preset and a size (a launch command does not carry it)")
    back = import_config("deepspeed", script, "launch.sh", cluster=given["preset"],
                         model=original.model.model_dump(exclude_none=True))
    scenario, again = convert.to_scenario(original), convert.to_scenario(SimulationRequest.model_validate(
        back.request))
    assert again.cluster == scenario.cluster
    assert again.model == scenario.model
    assert again.layout == _normalised(scenario.layout)
    assert again.layout.precision in (Precision.BF16, Precision.FP16)


def test_some_examples_round_trip() -> None:
    ran = []
    for path in EXAMPLES:
        try:
            export_config("deepspeed", load_request_file(str(path)))
            ran.append(path.name)
        except RequestError:
            pass
    assert len(ran) >= 5, ran


def test_the_script_read_back_checks_the_launch_against_the_config() -> None:
    script = export_config("deepspeed", request())
    with pytest.raises(RequestError) as err:
        import_config("deepspeed", script.replace("--zero-stage 1", "--zero-stage 0"), "run.sh", cluster="dgx-a100",
                      model="gpt3-13b")
    assert err.value.details[0].field == "run.sh.--zero-stage"
    with pytest.raises(RequestError) as err:
        import_config("deepspeed", script.replace("--bf16", "--bf17"), "run.sh", cluster="dgx-a100", model="gpt3-13b")
    assert err.value.details[0].field == "run.sh.--bf17"
    back = import_config("deepspeed", script, "run.sh", cluster="dgx-a100", model="gpt3-13b")
    assert back.request["layout"] == {"dp": 2, "tp": 8, "pp": 4, "sequence_parallel": True, "recompute": "full",
                                      "microbatch_size": 1, "global_batch_size": 64, "zero_stage": 1,
                                      "overlap_grad_reduce": True, "precision": "bf16"}
    assert back.request["cluster"] == {"preset": "dgx-a100", "num_nodes": 8}
    assert back.ignored["launch.num-layers"] == "40"


def test_a_stage_0_config_overlaps_nothing() -> None:
    text = json.dumps({"train_batch_size": 8, "zero_optimization": {"stage": 0, "overlap_comm": True}})
    result = import_config("deepspeed", text, "ds.json", cluster="dgx-a100", model="gpt3-350m")
    assert result.request["layout"]["overlap_grad_reduce"] is False
    assert result.ignored["zero_optimization.overlap_comm"] is True
