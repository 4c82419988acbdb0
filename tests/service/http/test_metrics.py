"""GET /metrics: Prometheus' text format, parsed by prometheus-client's own parser, after real traffic."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import SMALL, request_doc, with_field
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from test_api import client_for, wait_for

YAML = {"content-type": "application/yaml"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with client_for(tmp_path_factory.mktemp("metrics") / "metrics.db", api_token="tok") as c:
        yield c


def scrape(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample: (name, sorted labels) -> value."""
    response = client.get("/metrics")  # open even with a token set
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_requests_runs_jobs_and_cache_are_counted(client: TestClient) -> None:
    auth = {**YAML, "Authorization": "Bearer tok"}
    before = scrape(client)
    body = SMALL.read_bytes()
    assert client.post("/v1/simulations", content=body, headers=auth).status_code == 200  # a miss, simulated
    assert client.post("/v1/simulations", content=body, headers=auth).status_code == 200  # a hit
    assert client.post("/v1/simulations", json=with_field(request_doc(), "layout.tp", 0),
                       headers=auth).status_code == 422
    assert client.post("/v1/simulations", content=body).status_code == 401
    client.headers["Authorization"] = "Bearer tok"  # every /v1 route needs the token, reads too
    try:
        assert client.get("/v1/jobs/missing").status_code == 404
        assert client.get("/no/such/path").status_code == 404
        assert client.get("/web/app.js").status_code == 200
        job = client.post("/v1/jobs", json=with_field(request_doc(), "layout.global_batch_size", 16)).json()
        wait_for(client, job["id"], {"succeeded"})
    finally:
        del client.headers["Authorization"]
    after = scrape(client)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    sims = {"route": "/v1/simulations", "method": "POST"}
    assert grew("clustersim_http_requests_total", status="200", **sims) == 2
    assert grew("clustersim_http_requests_total", status="422", **sims) == 1
    assert grew("clustersim_http_requests_total", status="401", **sims) == 1
    assert grew("clustersim_http_requests_total", route="/v1/jobs/{job_id}", method="GET", status="404") == 1
    assert grew("clustersim_http_requests_total", route="unmatched", method="GET", status="404") == 1
    assert grew("clustersim_http_requests_total", route="/web/{path}", method="GET", status="200") == 1
    assert grew("clustersim_http_request_duration_seconds_count", **sims) == 4
    assert grew("clustersim_http_request_duration_seconds_sum", **sims) > 0
    assert grew("clustersim_simulations_total") == 2  # the inline miss and the job
    assert grew("clustersim_runs_total", kind="simulation", outcome="ok") == 2
    assert grew("clustersim_run_duration_seconds_count", kind="simulation") == 2
    assert grew("clustersim_results_cache_total", outcome="hit") == 1
    assert grew("clustersim_results_cache_total", outcome="miss") == 2  # the first inline run and the job
    assert value(after, "clustersim_jobs", status="succeeded") >= 1
    assert value(after, "clustersim_jobs", status="queued") == value(after, "clustersim_queue_depth") == 0
    assert value(after, "clustersim_running_jobs") == 0
    assert ("clustersim_worker_deaths_total", ()) in after
    assert ("clustersim_inline_waiting", ()) in after
