"""Admission by the true cost estimate (service.limits over simcore.run_cost), the same in the HTTP service and
the CLI: what once ran for minutes or ran the machine out of memory (ZeRO 3 gathers of a few elements, NICs near
2^31, a huge vocabulary, a million GPUs) is refused up front, naming the field or the estimate and the limit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import SMALL, request_doc, run_cli, with_field
from fastapi.testclient import TestClient

from service.http.app import create_app
from service.settings import Settings

ZERO3_TINY: dict[str, Any] = {
    "model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_gpus": 64},
    "layout": {"dp": 8, "tp": 4, "pp": 2, "global_batch_size": 64, "zero_stage": 3,
               "zero3_gather_bucket_elements": 4}}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    database: Path = tmp_path_factory.mktemp("limits") / "api.db"
    with TestClient(create_app(Settings(database=str(database), workers=1, worker_memory_mb=4096)),
                    base_url="http://localhost") as c:
        yield c


def test_zero3_gathers_of_a_few_elements_are_refused_as_inline_and_as_a_job(client: TestClient) -> None:
    for route in ("/v1/simulations", "/v1/jobs"):
        response = client.post(route, json=ZERO3_TINY)
        assert response.status_code == 413, response.text
        error = response.json()["error"]
        assert error["code"] == "too_large"
        assert error["estimated_events"] > 10**8
        assert error["details"][0]["field"] == "request"


@pytest.mark.parametrize(("field", "value", "rule"), [
    ("cluster.nics_per_node", 2**31 - 1, "must be <= 64"),
    ("model.vocab_size", 2**40, "must be <= 16777216"),
    ("cluster.nic_bandwidth_gbit_per_s", 1e300, "must be <= 10000000"),
    ("cluster.inter_node_latency_us", 1e300, "must be <= 1000000"),
    ("model.num_layers", 10**7, "must be <= 10000"),
    ("layout.global_batch_size", 2**50, "must be <= 16777216"),
])
def test_fields_have_physical_maxima(client: TestClient, field: str, value: Any, rule: str) -> None:
    response = client.post("/v1/simulations", json=with_field(request_doc(), field, value))
    assert response.status_code == 422, response.text
    details = response.json()["error"]["details"]
    assert {"field": field, "rule": rule} in details


def test_a_job_over_the_memory_it_may_use_is_refused_with_the_estimate(tmp_path: Path) -> None:
    settings = Settings(database=str(tmp_path / "m.db"), workers=1, worker_memory_mb=256)
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        assert c.post("/v1/simulations", json=request_doc()).status_code == 200  # ~50 MB: within 128 MB
        big = with_field(with_field(request_doc(), "layout.global_batch_size", 8192), "options.trace", True)
        response = c.post("/v1/jobs", json=big)  # a trace of ~100,000 spans
        assert response.status_code == 413, response.text
        error = response.json()["error"]
        assert error["estimated_memory_mb"] > error["limit_mb"] == 128


def test_the_cli_has_the_services_limits_and_no_limits_lifts_them(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    million = tmp_path / "million.yaml"
    million.write_text(yaml.safe_dump({
        "model": {"preset": "gpt3-175b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 131_072},
        "layout": {"dp": 8192, "tp": 8, "pp": 16, "global_batch_size": 65536}}), encoding="utf-8")
    code, out, err = run_cli(capsys, "simulate", str(million))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--no-limits" in err and "1048576" in err, err
    monkeypatch.setenv("CLUSTERSIM_MAX_GPUS", "8")
    code, _, err = run_cli(capsys, "simulate", str(SMALL))  # 64 GPUs
    assert code == 2 and "cluster.num_gpus" in err and "--no-limits" in err, err
    code, _, err = run_cli(capsys, "compare", str(SMALL), str(SMALL))
    assert code == 2 and str(SMALL) in err, err
    code, out, _ = run_cli(capsys, "simulate", str(SMALL), "--no-limits")
    assert code == 0 and out.startswith("{")


SEARCH: dict[str, Any] = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
                          "global_batch_size": 32, "space": {"tp": [1, 2], "pp": [1, 2]},
                          "bounds": {"max_candidates": 2}}


def test_a_search_is_checked_whole_before_202(client: TestClient) -> None:
    bad_baseline = {**SEARCH, "baseline": {"dp": 4, "tp": 4, "pp": 4, "global_batch_size": 32}}  # 64 != 8 GPUs
    response = client.post("/v1/searches", json=bad_baseline)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["details"][0]["field"].startswith("baseline.")
    huge_batch = {**SEARCH, "global_batch_size": 2**60}
    response = client.post("/v1/searches", json=huge_batch)
    assert response.status_code == 422 and response.json()["error"]["details"][0]["field"] == "global_batch_size"
    long_list = {**SEARCH, "space": {"microbatch_size": list(range(1, 1000))}}
    assert client.post("/v1/searches", json=long_list).status_code == 422


def test_a_search_space_over_the_bound_is_413_before_anything_is_enumerated(tmp_path: Path) -> None:
    settings = Settings(database=str(tmp_path / "s.db"), workers=1, max_search_space=100_000)
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        wide = {**SEARCH, "cluster": {"preset": "dgx-a100", "num_nodes": 128}, "space": {}}
        response = c.post("/v1/searches", json=wide)
        assert response.status_code == 413, response.text
        error = response.json()["error"]
        assert error["details"][0]["field"] == "space" and error["estimated_layouts"] > error["limit"] == 100_000
        assert c.post("/v1/searches", json=SEARCH).status_code == 202
