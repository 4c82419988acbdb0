"""A DeepSpeed `ds_config.json` -> a request's layout (its batch, ZeRO and precision; the model and the
tensor/pipeline degrees come from elsewhere: a model preset and the launcher's flags).

Keys are DeepSpeed's own (interop/data/deepspeed_keys.txt, read from deepspeed/runtime/constants.py, config*.py and
zero/config.py at the commit its header names); an unknown key is an error naming it. The batch rule is DeepSpeed's
(runtime/config.py _batch_assertion): train_batch_size = train_micro_batch_size_per_gpu x
gradient_accumulation_steps x data-parallel ranks, any two giving the third. What maps: zero_optimization.stage
(3: `zero_implementation: deepspeed`), overlap_comm (`overlap_grad_reduce`; DeepSpeed's default is on for stage 3),
fp16/bf16 enabled. CPU or NVMe offload changes the answer and is not simulated: an error. Bucket and prefetch
sizes, and every other key, are listed in `ignored` with their values (the simulator buckets as its own model
says).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from api_schemas import RequestError

__all__ = ["deepspeed_keys", "layout_from_deepspeed"]

_OFFLOAD = ("offload_optimizer", "offload_param", "cpu_offload", "cpu_offload_param")


@cache
def deepspeed_keys() -> frozenset[str]:
    text = resources.files("interop").joinpath("data/deepspeed_keys.txt").read_text(encoding="utf-8")
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
    if get("fp16.enabled", False) is True and get("bf16.enabled", False) is True:
        raise error("bf16.enabled", "fp16 and bf16 cannot both be enabled")
    layout: dict[str, Any] = {
        "microbatch_size": micro, "global_batch_size": batch, "zero_stage": stage,
        "overlap_grad_reduce": bool(get("zero_optimization.overlap_comm", stage == 3)),
        "precision": "fp16" if get("fp16.enabled", False) is True else "bf16",
    }
    if stage == 3:
        layout["zero_implementation"] = "deepspeed"
    ignored = {k: v for k, v in sorted(flat.items()) if k not in read}
    return layout, ignored
