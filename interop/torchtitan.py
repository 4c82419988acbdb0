"""torchtitan's job TOML <-> a request's model and layout.

Keys are torchtitan's own (torchtitan/config/job_config.py at the commit interop/data/torchtitan_keys.txt names, the
last that reads TOML files); defaults where a key is absent are that JobConfig's (activation_checkpoint.mode
"selective", pipeline_parallel_schedule "1F1B", data_parallel_shard_degree -1: the GPUs left over). What maps:
- [model] name/flavor -> a model preset (llama3 8B/70B/405B); [training] seq_len overrides its sequence length;
- [parallelism]: data_parallel_shard_degree > 1 is FSDP full shard (`zero_stage: 3`, `zero_implementation: fsdp`),
  data_parallel_replicate_degree alone is DDP; both > 1 is HSDP, FSDP over the shard degree (`zero_shard_size`,
  the mesh's dp_shard inside dp_replicate: consecutive data-parallel ranks); tensor_parallel_degree (always with
  sequence parallelism in torchtitan), pipeline_parallel_degree and _schedule (1F1B, Interleaved1F1B with
  pipeline_parallel_layers_per_stage, GPipe, ZBVZeroBubble), context_parallel_degree, expert_parallel_degree;
- [training] local_batch_size and global_batch_size (default local x DP); with PP the microbatch is
  pipeline_parallel_microbatch_size;
- [activation_checkpoint] mode full / selective / none; float8 in [model] converters -> `precision: fp8` with
  torchao's dynamic scaling (every tensor scaled from its own amax): tensorwise (no [quantize.linear.float8]
  recipe_name) `fp8_scaling: current`, recipe_name "rowwise" `fp8_recipe: rowwise` (another is refused); and with FSDP
  [quantize.linear.float8] enable_fsdp_float8_all_gather -> `fp8_param_gather`. Export refuses FP8 that torchao's
  float8 does not run (delayed scaling, mxfp8, blockwise), naming the field.
Every key not read is returned in `ignored`; an unknown key is an error naming it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from api_schemas import RequestError, SimulationRequest

__all__ = ["request_from_torchtitan", "torchtitan_keys", "torchtitan_toml"]

# torchtitan's model names and flavors (torchtitan/models/llama3/__init__.py llama3_args) -> clustersim presets.
MODELS: dict[tuple[str, str], str] = {("llama3", "8B"): "llama3-8b", ("llama3", "70B"): "llama3-70b",
                                      ("llama3", "405B"): "llama3-405b"}
SCHEDULES = {"1F1B": "1f1b", "Interleaved1F1B": "interleaved_1f1b", "GPipe": "gpipe", "ZBVZeroBubble": "zb_v"}
_RECOMPUTE = {"full": "full", "selective": "selective", "none": "none"}
_FLOAT8 = ("float8", "quantize.linear.float8")


@cache
def torchtitan_keys() -> frozenset[str]:
    """torchtitan's TOML keys as `section.key`, from interop/data/torchtitan_keys.txt."""
    text = resources.files("interop").joinpath("data/torchtitan_keys.txt").read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict) and f"{prefix}{key}" not in torchtitan_keys():
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _read(text: str, source: str) -> dict[str, Any]:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        where = f"{source}:{line.group(1)}" if line else source
        raise RequestError.for_field(where, f"is not TOML ({str(exc).split(' (at')[0]})") from None
    flat = _flatten(document)
    for key in flat:
        if key not in torchtitan_keys():
            raise RequestError.for_field(f"{source}.{key}", "is not a torchtitan job config key (checked against "
                                         "torchtitan/config/job_config.py)")
    return flat


def request_from_torchtitan(text: str, *, cluster_preset: str, gpus: int | None, num_nodes: int | None,
                            source: str = "<toml>") -> tuple[dict[str, Any], dict[str, Any]]:
    """(request, ignored keys with their values) of one job TOML; RequestError naming the key or line."""
    flat = _read(text, source)
    read: set[str] = set()

    def get(key: str, default: Any) -> Any:
        read.add(key)
        return flat.get(key, default)

    def error(key: str, rule: str) -> RequestError:
        return RequestError.for_field(f"{source}.{key}", rule)

    name, flavor = get("model.name", "llama3"), get("model.flavor", "debugmodel")
    if (name, flavor) not in MODELS:
        raise error("model.flavor", f"{name} {flavor} is not a model with a preset (known: "
                    f"{', '.join(f'{n} {f}' for n, f in MODELS)})")
    tp, pp = get("parallelism.tensor_parallel_degree", 1), get("parallelism.pipeline_parallel_degree", 1)
    cp, ep = get("parallelism.context_parallel_degree", 1), get("parallelism.expert_parallel_degree", 1)
    replicate, shard = get("parallelism.data_parallel_replicate_degree", 1), get(
        "parallelism.data_parallel_shard_degree", -1)
    if shard == -1:
        if gpus is None:
            raise error("parallelism.data_parallel_shard_degree", "-1 (the GPUs left over) needs the cluster size: "
                        "give --nodes")
        shard = gpus // (replicate * tp * pp * cp)
    dp = replicate * shard
    local = get("training.local_batch_size", 8)
    global_batch = get("training.global_batch_size", -1)
    schedule = get("parallelism.pipeline_parallel_schedule", "1F1B")
    if schedule not in SCHEDULES:
        raise error("parallelism.pipeline_parallel_schedule", f"{schedule!r} is not simulated (known: "
                    f"{', '.join(SCHEDULES)})")
    mode = get("activation_checkpoint.mode", "selective")
    if mode not in _RECOMPUTE:
        raise error("activation_checkpoint.mode", f"{mode!r} is not simulated (full, selective or none)")
    layout: dict[str, Any] = {
        "dp": dp, "tp": tp, "pp": pp, "cp": cp,
        "microbatch_size": get("parallelism.pipeline_parallel_microbatch_size", 1) if pp > 1 else local,
        "global_batch_size": global_batch if global_batch > 0 else local * dp,
        "schedule": SCHEDULES[schedule] if pp > 1 else "1f1b",
        "sequence_parallel": tp > 1, "recompute": _RECOMPUTE[mode],
        "zero_stage": 3 if shard > 1 else 0, "zero_implementation": "fsdp" if shard > 1 else "megatron",
        "overlap_grad_reduce": True,
    }
    if ep > 1:
        layout["ep"] = ep
    if replicate > 1 and shard > 1:  # HSDP: FSDP over the shard degree, replicated (simcore/domain/hybrid_shard.py)
        layout["zero_shard_size"] = shard
    per_stage = get("parallelism.pipeline_parallel_layers_per_stage", None)
    first_less = get("parallelism.pipeline_parallel_first_stage_less_layers", 1)
    last_less = get("parallelism.pipeline_parallel_last_stage_less_layers", 1)
    if pp > 1 and per_stage is None and (first_less or last_less):
        raise error("parallelism.pipeline_parallel_first_stage_less_layers", "first and last stages with fewer "
                    "layers are not simulated: set both *_less_layers to 0 or give pipeline_parallel_layers_per_stage")
    model: dict[str, Any] = {"preset": MODELS[(name, flavor)], "seq_length": get("training.seq_len", 2048)}
    if per_stage is not None and pp > 1:
        from_preset = {"llama3-8b": 32, "llama3-70b": 80, "llama3-405b": 126}[model["preset"]]
        if from_preset % (per_stage * pp):
            raise error("parallelism.pipeline_parallel_layers_per_stage", f"must divide the layers per rank "
                        f"({from_preset} / {pp})")
        layout["virtual_stages"] = from_preset // (per_stage * pp)
    # [training] mixed_precision_param: the parameters' dtype under FSDP (or autocast's): float32 trains in fp32,
    # which is not simulated; mixed_precision_reduce: FSDP's gradient reduce-scatter dtype, only "float32" in
    # torchtitan's JobConfig (the simulator's default for bf16: grad_reduce_dtype fp32)
    param = get("training.mixed_precision_param", "bfloat16")
    if param != "bfloat16":
        raise error("training.mixed_precision_param", f"{param!r} is not simulated (bfloat16: the simulator trains "
                    "in 16 bits)")
    reduce = get("training.mixed_precision_reduce", "float32")
    if reduce != "float32":
        raise error("training.mixed_precision_reduce", f"must be \"float32\", the only value torchtitan's "
                    f"JobConfig takes (given {reduce!r})")
    if any(c in _FLOAT8 for c in get("model.converters", [])):
        layout["precision"] = "fp8"
        recipe = get(f"{_FLOAT8[1]}.recipe_name", None)  # (torchao's float8 recipes scale dynamically)
        if recipe not in (None, "tensorwise", "rowwise"):
            raise error(f"{_FLOAT8[1]}.recipe_name", f"{recipe!r} is not simulated (tensorwise or rowwise)")
        if recipe == "rowwise":
            layout["fp8_recipe"] = "rowwise"
        else:
            layout["fp8_scaling"] = "current"
        # torchao's float8 all-gather under FSDP (torchtitan/components/quantization/float8.py passes it only
        # without a recipe_name and with data_parallel_shard_degree > 1: elsewhere it stays in `ignored`)
        if shard > 1 and flat.get(f"{_FLOAT8[1]}.recipe_name") is None and get(
                f"{_FLOAT8[1]}.enable_fsdp_float8_all_gather", False):
            layout["fp8_param_gather"] = True
    cluster: dict[str, Any] = {"preset": cluster_preset}
    cluster.update({"num_nodes": num_nodes} if num_nodes is not None else {"num_gpus": dp * tp * pp * cp})
    ignored = {k: v for k, v in sorted(flat.items()) if k not in read}
    return {"model": model, "cluster": cluster, "layout": layout}, ignored


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return str(value)


def torchtitan_toml(request: SimulationRequest) -> str:
    """The job TOML of a request's model and layout; RequestError naming the field torchtitan cannot run."""
    lay, model = request.layout, request.model
    preset = {v: k for k, v in MODELS.items()}.get(model.preset or "")
    overrides = set(model.model_dump(exclude_none=True)) - {"preset", "seq_length"}
    if preset is None or overrides:
        raise RequestError.for_field("model.preset", f"torchtitan trains the models it defines (llama3 8B, 70B, "
                                     f"405B here), not {model.preset or 'a custom shape'}; Megatron-LM can "
                                     "(clustersim export megatron)")
    if lay.zero_stage in (1, 2):
        raise RequestError.for_field("layout.zero_stage", f"torchtitan has DDP (0) and FSDP (3), not ZeRO "
                                     f"{lay.zero_stage}; Megatron-LM (1: --use-distributed-optimizer) or DeepSpeed "
                                     "can")
    schedule = {v: k for k, v in SCHEDULES.items()}.get(lay.schedule)
    if schedule is None:
        raise RequestError.for_field("layout.schedule", f"torchtitan has no {lay.schedule} schedule here (1f1b, "
                                     "interleaved_1f1b, gpipe, zb_v)")
    if lay.tp > 1 and not lay.sequence_parallel:
        raise RequestError.for_field("layout.sequence_parallel", "torchtitan's TP is always sequence parallel")
    if lay.grad_reduce_dtype not in (None, "fp32"):
        raise RequestError.for_field("layout.grad_reduce_dtype", f"torchtitan reduces gradients in float32 (FSDP's "
                                     f"training.mixed_precision_reduce; DDP's fp32 parameters), not "
                                     f"{lay.grad_reduce_dtype}; Megatron-LM can (--grad-reduce-in-bf16)")
    if lay.zero_stage == 3 and lay.zero_implementation != "fsdp":
        raise RequestError.for_field("layout.zero_implementation", f"torchtitan's ZeRO 3 is FSDP, not "
                                     f"{lay.zero_implementation}'s (set zero_implementation: fsdp)")
    if lay.precision == "fp8" and lay.fp8_recipe not in (None, "tensorwise", "rowwise"):
        raise RequestError.for_field("layout.fp8_recipe", f"torchtitan's float8 (torchao) runs tensorwise and "
                                     f"rowwise scaling, not {lay.fp8_recipe}; Megatron-LM can")
    if lay.precision == "fp8" and lay.fp8_recipe in (None, "tensorwise") and lay.fp8_scaling != "current":
        raise RequestError.for_field("layout.fp8_scaling", "torchtitan's float8 (torchao) scales every tensor from "
                                     "its own amax: set fp8_scaling: current (delayed scaling: Megatron-LM can, "
                                     "--fp8-recipe delayed)")
    fsdp = lay.zero_stage == 3
    shard = lay.zero_shard_size or lay.dp  # HSDP: replicated shard groups
    sections: dict[str, dict[str, Any]] = {
        "model": {"name": preset[0], "flavor": preset[1]},
        "training": {"local_batch_size": lay.global_batch_size // lay.dp if lay.pp > 1 else lay.microbatch_size,
                     "global_batch_size": lay.global_batch_size,
                     "seq_len": model.seq_length or {"llama3": 8192}[preset[0]]},
        "parallelism": {"data_parallel_replicate_degree": lay.dp // shard if fsdp else lay.dp,
                        "data_parallel_shard_degree": shard if fsdp else 1,
                        "tensor_parallel_degree": lay.tp, "pipeline_parallel_degree": lay.pp,
                        "context_parallel_degree": lay.cp},
        "activation_checkpoint": {"mode": lay.recompute},
    }
    if lay.pp > 1:
        sections["parallelism"].update(pipeline_parallel_schedule=schedule,
                                       pipeline_parallel_microbatch_size=lay.microbatch_size,
                                       pipeline_parallel_first_stage_less_layers=0,
                                       pipeline_parallel_last_stage_less_layers=0)
        if lay.virtual_stages > 1:
            layers = {"8B": 32, "70B": 80, "405B": 126}[preset[1]]
            sections["parallelism"]["pipeline_parallel_layers_per_stage"] = layers // (lay.pp * lay.virtual_stages)
    if lay.ep > 1:
        sections["parallelism"]["expert_parallel_degree"] = lay.ep
    if lay.precision == "fp8":
        sections["model"]["converters"] = ["quantize.linear.float8"]
        float8 = sections.setdefault("quantize.linear.float8", {})
        if lay.fp8_recipe == "rowwise":
            float8["recipe_name"] = "rowwise"
        if lay.fp8_param_gather:
            float8["enable_fsdp_float8_all_gather"] = True
        if not float8:
            del sections["quantize.linear.float8"]
    lines: list[str] = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
        lines.append("")
    text = "\n".join(lines)
    unknown = [k for k in _flatten(tomllib.loads(text)) if k not in torchtitan_keys()]
    if unknown:  # a bug here: every key above is torchtitan's (tests say so)
        raise RuntimeError(f"emitted keys not in torchtitan's job config: {unknown}")
    return text
