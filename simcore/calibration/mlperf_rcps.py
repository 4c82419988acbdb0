"""The MLPerf Training benchmarks `training.mlperf` names, read from the shipped reference data
(reference/mlperf-rcps.json: MLCommons' RCPs per version, the rules' evaluation cadence and size, with their
sources); simcore/domain/mlperf.py turns one into steps, evaluations and minutes."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from simcore.domain.mlperf import MlperfBenchmark
from simcore.errors import SpecError

__all__ = ["BENCHMARKS", "mlperf_benchmark", "versions"]

BENCHMARKS = ("gpt3", "llama31_8b", "llama31_405b", "llama2_70b_lora")


@cache
def _reference() -> dict[str, Any]:
    text = resources.files("simcore.calibration").joinpath("reference/mlperf-rcps.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)["benchmarks"]
    return data


def versions(benchmark: str) -> tuple[str, ...]:
    """The MLPerf Training versions whose RCPs the reference holds for a benchmark."""
    return tuple(_reference()[benchmark]["rcps"])


def _per_version(value: Any, version: str) -> Any:
    return value[version] if isinstance(value, dict) else value


def mlperf_benchmark(benchmark: str, version: str) -> MlperfBenchmark:
    """A benchmark in a version; SpecError naming `training.mlperf.benchmark` or `.version` when there is none."""
    if benchmark not in BENCHMARKS:
        raise SpecError("training.mlperf.benchmark", f"unknown benchmark {benchmark!r}; one of {', '.join(BENCHMARKS)}")
    entry = _reference()[benchmark]
    known = versions(benchmark)
    if version not in known:
        raise SpecError("training.mlperf.version", f"{benchmark} has reference convergence points for MLPerf "
                        f"Training {', '.join(known)} (not {version!r})")
    seq = int(entry["seq_length"])
    per_sample = seq if entry["unit"] == "tokens" else 1  # gpt3's RCPs count tokens
    rcps = tuple((int(batch), tuple(float(n) / per_sample for n in runs))
                 for batch, runs in sorted(entry["rcps"][version].items(), key=lambda kv: int(kv[0])))
    skip = _per_version(entry["skip_evaluations"], version)
    return MlperfBenchmark(
        name=benchmark, version=version, seq_length=seq, rcps=rcps,
        eval_interval_samples=int(_per_version(entry["eval_interval_samples"], version)),
        eval_samples=int(entry["eval_samples"]), skip_evaluations=None if skip is None else (skip[0], skip[1]),
        starts_from_checkpoint=bool(entry["starts_from_checkpoint"]))
