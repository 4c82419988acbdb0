"""`layout.grad_bucket_elements`: Megatron-Core's data-parallel gradient bucket (simcore/cost/comm/grad_buckets.py).
With FP8 parameters every 16-bit parameter joins the last bucket, reduced once backward is over and gathered first
in the next forward: the bucket size sets how much of the reduction and the gather is left exposed. Bad values are
refused naming the field; a request without it keeps Megatron-Core's default."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses

from api_schemas import SimulationRequest
from service import convert
from simcore.calibration.mlperf_runs import request_for, runs
from simcore.simulate import simulate

# Llama 3.1 8B on 8 GB200 NVL72 racks as MLPerf Training v5.1 ran it (TP 2, CP 4, DP 64, FP8 parameters)
RUN = next(r for r in runs() if r["id"] == "v5.1-llama31_8b-tyche_ngpu512")


def result(doc: dict[str, Any]) -> dict[str, Any]:
    return convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))


def with_bucket(elements: int | None) -> dict[str, Any]:
    doc = copy.deepcopy(request_for(RUN))
    doc["layout"].pop("grad_bucket_elements", None)
    if elements is not None:
        doc["layout"]["grad_bucket_elements"] = elements
    return doc


def test_the_mlperf_run_passes_its_configs_bucket() -> None:
    assert RUN["layout"]["grad_bucket_elements"] == 768_000_000
    assert request_for(RUN)["layout"]["grad_bucket_elements"] == 768_000_000
    # NeMo 2's pretraining hands bucket_size to Megatron-Core; NeMo 1's gpt3 (Apex's optimizer) and LoRA do not
    given = {(r["version"], r["benchmark"], r["layout"]["grad_bucket_elements"]) for r in runs()}
    assert {(v, b, n) for v, b, n in given if n is not None} == {
        ("5.0", "llama31_405b", 200), ("5.1", "llama31_405b", 134_217_728), ("5.1", "llama31_8b", 768_000_000)}
    assert all(n is None for v, b, n in given if b in ("gpt3", "llama2_70b_lora"))


def test_the_bucket_sets_the_exposed_reduction_and_gather() -> None:
    """The config's 768M buckets: 5 reduce-scatters and all-gathers; Megatron's default (64M, dp 64) makes 33 of each,
    smaller and slower on the links; a bucket as large as the chunk makes one of each, all exposed."""
    default, config, whole = (result(with_bucket(n)) for n in (None, 768_000_000, 10_000_000_000))
    assert config["iteration_time_s"] < default["iteration_time_s"] < whole["iteration_time_s"]
    exposed = [r["time_breakdown_s"]["dp_comm"] for r in (default, config, whole)]
    assert exposed[1] < exposed[0] < exposed[2]
    assert whole["communication_s"]["dp"] < config["communication_s"]["dp"] < default["communication_s"]["dp"]


@pytest.mark.parametrize(("layout", "rule"), [
    ({"grad_bucket_elements": 0}, "must be >= 1"),
    ({"zero_stage": 3, "grad_bucket_elements": 1000, "fp8_param_gather": False}, "zero_stage 0, 1 or 2"),
])
def test_bad_buckets_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: dict[str, Any],
                                 rule: str) -> None:
    doc = with_bucket(None)
    doc["layout"].update(layout)
    assert_cli_refuses(capsys, tmp_path, doc, "layout.grad_bucket_elements", rule)
    assert_http_refuses(tmp_path, doc, "layout.grad_bucket_elements", rule)
