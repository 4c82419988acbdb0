"""A DeepSpeed `ds_config.json` -> a request's layout (its batch, ZeRO and precision; the model and the
tensor/pipeline degrees come from elsewhere: a model preset and the launcher's flags).

Keys are DeepSpeed's own (interop/data/deepspeed_keys.txt, read from deepspeed/runtime/constants.py, config*.py and
zero/config.py at the commit its header names); an unknown key is an error naming it. The batch rule is DeepSpeed's
(runtime/config.py _batch_assertion): train_batch_size = train_micro_batch_size_per_gpu x
gradient_accumulation_steps x data-parallel ranks, any two giving the third. What maps: zero_optimization.stage
(3: `zero_implementation: deepspeed`), overlap_comm (`overlap_grad_reduce`; DeepSpeed's default is on for stage 3),
fp16/bf16 enabled, communication_data_type (`grad_reduce_dtype`: fp32 or the 16-bit type), and ZeRO++'s
zero_quantized_weights, zero_hpz_partition_size and zero_quantized_gradients (the layout fields of those names,
simcore/domain/zeropp.py). CPU or NVMe offload changes the answer and is not simulated: an error. Bucket and
prefetch sizes, and every other key, are listed in `ignored` with their values (the simulator buckets as its own
model says). overlap_comm is read at ZeRO 1 to 3 only: at stage 0 DeepSpeed all-reduces after backward whatever it
says. The ZeRO++ keys are read at ZeRO 3 only (runtime/engine.py passes them to the stage 3 optimizer alone); at
stages 0 to 2 they are listed in `ignored`, their values checked as DeepSpeed's config model checks them at every
stage (booleans; a partition size an integer >= 0). A partition size of 0 or 1 is off (DeepSpeed builds the
secondary groups when it is above 1), and one above the data-parallel ranks is taken as all of them
(utils/groups.py _create_zero_param_parallel_group: min(size, world size)).

`read_launch` also takes the script `clustersim export deepspeed` writes (a heredoc writing the config, then the
`deepspeed ... pretrain_gpt.py` command): the config, and from the command the GPUs per node and nodes, the tensor
and pipeline degrees, sequence parallelism, recompute and the schedule (interop/deepspeed_export.py says which
flags mean what); every other flag is listed in `ignored`, one Megatron-DeepSpeed does not have is an error.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from api_schemas import RequestError

__all__ = ["Launch", "deepspeed_keys", "layout_from_deepspeed", "megatron_deepspeed_flags", "read_launch"]

_OFFLOAD = ("offload_optimizer", "offload_param", "cpu_offload", "cpu_offload_param")
_ZEROPP_FLAGS = ("zero_quantized_weights", "zero_quantized_gradients")  # ZeRO++ qwZ, qgZ (runtime/zero/config.py)


@cache
def deepspeed_keys() -> frozenset[str]:
    text = resources.files("interop").joinpath("data/deepspeed_keys.txt").read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


@cache
def megatron_deepspeed_flags() -> frozenset[str]:
    """The flags of a Megatron-DeepSpeed launch, as recorded in interop/data/megatron_deepspeed_flags.txt."""
    text = resources.files("interop").joinpath("data/megatron_deepspeed_flags.txt").read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def _flat(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict) and value and key not in ("optimizer", "scheduler"):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def layout_from_deepspeed(text: str, *, dp: int, source: str = "<ds_config>") -> tuple[dict[str, Any],
                                                                                      dict[str, Any]]:
    """(layout fields, ignored keys with their values) for `dp` data-parallel ranks; RequestError naming the key."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestError.for_field(f"{source}:{exc.lineno}", f"is not JSON ({exc.msg})") from None
    if not isinstance(config, dict):
        raise RequestError.for_field(source, "must be a ds_config.json mapping")
    flat = _flat(config)
    for key in flat:
        if key.split(".")[-1] not in deepspeed_keys() or key.split(".")[0] not in deepspeed_keys():
            raise RequestError.for_field(f"{source}.{key}", "is not a DeepSpeed config key (checked against "
                                         "deepspeed/runtime/constants.py and zero/config.py)")
    read: set[str] = set()

    def get(key: str, default: Any = None) -> Any:
        read.add(key)
        return flat.get(key, default)

    def error(key: str, rule: str) -> RequestError:
        return RequestError.for_field(f"{source}.{key}", rule)

    batch, micro, steps = (get(k) for k in ("train_batch_size", "train_micro_batch_size_per_gpu",
                                            "gradient_accumulation_steps"))
    for key, value in (("train_batch_size", batch), ("train_micro_batch_size_per_gpu", micro),
                       ("gradient_accumulation_steps", steps)):
        if value is not None and (type(value) is not int or value < 1):
            raise error(key, f"must be an integer >= 1 (given {value!r})")
    if batch is None and micro is None:
        raise error("train_batch_size", "give train_batch_size or train_micro_batch_size_per_gpu")
    if batch is not None and micro is not None and steps is not None and batch != micro * steps * dp:
        raise error("train_batch_size", f"must be train_micro_batch_size_per_gpu x gradient_accumulation_steps x "
                    f"data-parallel ranks = {micro} x {steps} x {dp} = {micro * steps * dp} (given {batch})")
    if batch is not None and micro is not None and steps is None and batch % (micro * dp):
        raise error("train_batch_size", f"must divide by train_micro_batch_size_per_gpu x data-parallel ranks "
                    f"({micro} x {dp})")
    if micro is None:
        steps = steps or 1
        if batch % (steps * dp):
            raise error("train_batch_size", f"must divide by gradient_accumulation_steps x data-parallel ranks "
                        f"({steps} x {dp})")
        micro = batch // (steps * dp)
    batch = batch or micro * (steps or 1) * dp
    stage = get("zero_optimization.stage", 0)
    if stage not in (0, 1, 2, 3):
        raise error("zero_optimization.stage", f"must be 0, 1, 2 or 3 (given {stage!r})")
    for key in _OFFLOAD:
        value = get(f"zero_optimization.{key}")
        if value not in (None, False) and not (isinstance(value, dict) and value.get("device", "cpu") == "none"):
            raise error(f"zero_optimization.{key}", "offloading to CPU or NVMe is not simulated")
        for sub in [k for k in flat if k.startswith(f"zero_optimization.{key}.")]:
            read.add(sub)
            if sub.endswith(".device") and flat[sub] != "none":
                raise error(sub, "offloading to CPU or NVMe is not simulated")
    fp16, bf16 = get("fp16.enabled", False) is True, get("bf16.enabled", False) is True
    if fp16 and bf16:
        raise error("bf16.enabled", "fp16 and bf16 cannot both be enabled")
    layout: dict[str, Any] = {
        "microbatch_size": micro, "global_batch_size": batch, "zero_stage": stage,
        "overlap_grad_reduce": stage > 0 and bool(get("zero_optimization.overlap_comm", stage == 3)),
        "precision": "fp16" if get("fp16.enabled", False) is True else "bf16",
    }
    comm = get("communication_data_type")  # runtime/config.py get_communication_data_type
    if comm is not None:
        own = layout["precision"]
        if not isinstance(comm, str) or comm.lower() not in ("fp32", own):
            raise error("communication_data_type", f"must be fp32 or the training's 16-bit type ({own}) (given "
                        f"{comm!r})")
        layout["grad_reduce_dtype"] = comm.lower()
    if stage == 3:
        layout["zero_implementation"] = "deepspeed"
    layout.update(_zeropp(get, error, stage, dp))
    if stage == 0:  # not read: DeepSpeed overlaps nothing at stage 0 (engine.py allreduce_gradients)
        read.discard("zero_optimization.overlap_comm")
    if stage < 3:  # not read: ZeRO++ is an option of the stage 3 optimizer (engine.py _configure_zero_optimizer)
        read.difference_update(f"zero_optimization.{key}" for key in (*_ZEROPP_FLAGS, "zero_hpz_partition_size"))
    ignored = {k: v for k, v in sorted(flat.items()) if k not in read}
    return layout, ignored


def _zeropp(get: Callable[..., Any], error: Callable[[str, str], RequestError], stage: int,
            dp: int) -> dict[str, Any]:
    """The ZeRO++ layout fields a config's zero_optimization turns on (none below stage 3), its values checked as
    DeepSpeed's config model checks them (the module docstring)."""
    fields: dict[str, Any] = {}
    for key in _ZEROPP_FLAGS:
        value = get(f"zero_optimization.{key}", False)
        if type(value) is not bool:
            raise error(f"zero_optimization.{key}", f"must be true or false (given {value!r})")
        if value and stage == 3:
            fields[key] = True
    key = "zero_optimization.zero_hpz_partition_size"
    hpz = get(key, 1)
    if type(hpz) is not int or hpz < 0:
        raise error(key, f"must be an integer >= 0, the ranks of a secondary partition group (0 or 1: none; "
                    f"given {hpz!r})")
    hpz = min(hpz, dp)  # DeepSpeed: min(size, world size), the data-parallel ranks where hpZ runs (tp = cp = 1)
    if hpz > 1 and stage == 3:
        if dp % hpz:
            raise error(key, f"must divide the {dp} data-parallel ranks: DeepSpeed builds its secondary groups of "
                        f"{hpz} consecutive ranks over all of them (utils/groups.py _ensure_divisibility)")
        fields["zero_hpz_partition_size"] = hpz
    return fields


_HEREDOC = re.compile(r"^cat > (\S+) <<'?(\w+)'?\n(.*?)\n\2$", re.S | re.M)
_RECOMPUTE = {"full": "full", "selective": "selective"}


@dataclass(frozen=True, slots=True)
class Launch:
    """What a Megatron-DeepSpeed launch command says beside its config: layout fields, the cluster's size (None
    where it does not say), the ZeRO stage and precision flags (which must agree with the config) and the flags it
    holds that the request cannot represent, with their values."""

    layout: dict[str, Any] = field(default_factory=dict)
    num_nodes: int | None = None
    gpus_per_node: int | None = None
    zero_stage: int | None = None
    precision: str | None = None
    microbatch_size: int | None = None
    global_batch_size: int | None = None
    ignored: dict[str, Any] = field(default_factory=dict)


def _launch_flags(command: str, source: str) -> dict[str, str]:
    try:
        words = shlex.split(command.replace("\\\n", " "), comments=True)
    except ValueError as exc:
        raise RequestError.for_field(source, f"cannot be read as a command line ({exc})") from None
    flags: dict[str, str] = {}
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        name, _, inline = word.partition("=")
        if name not in megatron_deepspeed_flags():
            raise RequestError.for_field(f"{source}.{name}", "is not a Megatron-DeepSpeed or DeepSpeed launcher "
                                         "flag (checked against megatron/arguments.py and deepspeed/launcher)")
        following = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else "True"
        flags[name] = inline or (following if not following.endswith(".py") else "True")
    return flags


def _int_flag(flags: dict[str, str], name: str, source: str) -> int | None:
    if name not in flags:
        return None
    value = flags.pop(name)
    if not value.isdigit() or int(value) < 1:
        raise RequestError.for_field(f"{source}.{name}", f"must be an integer >= 1 (given {value!r})")
    return int(value)


def read_launch(text: str, source: str = "<ds_config>") -> tuple[str, Launch | None]:
    """(the ds_config.json text, what the launch command says) of an exported script; (text, None) for a
    ds_config.json alone."""
    found = _HEREDOC.search(text)
    if found is None or text.lstrip().startswith("{"):
        return text, None
    flags = _launch_flags(text[found.end():], source)
    for name in ("--deepspeed", "--deepspeed_config"):
        flags.pop(name, None)
    layout: dict[str, Any] = {}
    for name, key in (("--tensor-model-parallel-size", "tp"), ("--pipeline-model-parallel-size", "pp")):
        layout[key] = _int_flag(flags, name, source) or 1
    if flags.pop("--sequence-parallel", None) is not None and layout["tp"] > 1:
        layout["sequence_parallel"] = True
    if flags.pop("--enable-zbh1-pipeline", None) is not None and layout["pp"] > 1:
        if flags.pop("--enable-zbh1-exact-semantics", None) is None:
            raise RequestError.for_field(f"{source}.--enable-zbh1-pipeline", "without --enable-zbh1-exact-semantics "
                                         "it defers weight gradients only where needed, which is not simulated")
        layout["schedule"] = "zb_h1"
    granularity = flags.pop("--recompute-granularity", None)
    if granularity is not None:
        layout["recompute"] = _RECOMPUTE.get(granularity, "none")
        if granularity == "full" and (flags.pop("--recompute-method", "uniform") != "uniform"
                                      or flags.pop("--recompute-num-layers", "1") != "1"):
            raise RequestError.for_field(f"{source}.--recompute-num-layers", "recomputing other than every layer "
                                         "(uniform, 1) is not simulated")
    flags.pop("--no-pipeline-parallel", None)
    nodes, per_node = _int_flag(flags, "--num_nodes", source), _int_flag(flags, "--num_gpus", source)
    stage = flags.pop("--zero-stage", None)
    precision = "fp16" if flags.pop("--fp16", None) else "bf16" if flags.pop("--bf16", None) else None
    micro, batch = _int_flag(flags, "--micro-batch-size", source), _int_flag(flags, "--global-batch-size", source)
    return found.group(3), Launch(layout, nodes, per_node, int(stage) if stage and stage.isdigit() else None,
                                  precision, micro, batch, {k.lstrip("-"): v for k, v in sorted(flags.items())})
