"""The HTTP API through real app instances (FastAPI's TestClient runs the lifespan: SQLite store, worker
processes, job dispatcher): every route, and every error status in the contract's format."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, LARGE, SMALL, request_doc, with_field
from fastapi.testclient import TestClient

from api_schemas import SimulationResult
from service import convert as adapters
from service.cli.main import main
from service.http.app import create_app
from service.settings import Settings

M32 = EXAMPLES / "bubble-vs-microbatches" / "m32.yaml"
M64 = EXAMPLES / "bubble-vs-microbatches" / "m64.yaml"


@contextmanager
def client_for(database: Path, **settings: Any) -> Iterator[TestClient]:
    options: dict[str, Any] = {"workers": 2, **settings}
    with TestClient(create_app(Settings(database=str(database), **options)), base_url="http://localhost") as client:
        yield client


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with client_for(tmp_path_factory.mktemp("api") / "api.db") as c:
        yield c


def without_wall_time(result: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(result)
    out["simulator"].pop("wall_time_s")
    return out


def wait_for(client: TestClient, job_id: str, states: set[str], timeout_s: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in states:
            return job
        assert time.monotonic() < deadline, f"job stayed {job['status']}"
        time.sleep(0.02)


def assert_error(response: Any, status: int, code: str, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    if field is not None:
        assert error["details"][0]["field"] == field, error
        assert error["details"][0]["rule"]
    return error


# --- health, docs, presets -----------------------------------------------------------------------------------

def test_health_ready_and_docs(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready" and ready.json()["workers"] == 2
    assert "swagger" in client.get("/docs").text.lower()
    spec = client.get("/openapi.json").json()
    assert {"/v1/simulations", "/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/result",
            "/v1/jobs/{job_id}/trace", "/v1/presets/models", "/healthz", "/readyz"} <= spec["paths"].keys()
    assert "SimulationRequest" in spec["components"]["schemas"]


@pytest.mark.parametrize("kind", ["models", "clusters", "gpus"])
def test_presets(client: TestClient, kind: str) -> None:
    response = client.get(f"/v1/presets/{kind}")
    assert response.status_code == 200
    assert response.json() == json.loads(json.dumps(adapters.presets(kind)))


def test_unknown_route_and_method_in_contract_format(client: TestClient) -> None:
    assert_error(client.get("/v1/presets/tpus"), 404, "not_found")
    assert_error(client.put("/v1/jobs"), 405, "method_not_allowed")


# --- simulations --------------------------------------------------------------------------------------------

def test_simulation_is_the_cli_result(client: TestClient, capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.json"
    assert main(["simulate", str(SMALL), "--trace", str(trace_file)]) == 0
    cli = json.loads(capsys.readouterr().out)
    response = client.post("/v1/simulations", content=SMALL.read_bytes(),
                           headers={"content-type": "application/yaml"})
    assert response.status_code == 200
    body = response.json()
    SimulationResult.model_validate(body)
    assert without_wall_time(body) == without_wall_time(cli)
    assert "trace" not in body
    traced = client.post("/v1/simulations", json=request_doc(trace=True)).json()
    assert traced["trace"] == json.loads(trace_file.read_text())
    assert without_wall_time({k: v for k, v in traced.items() if k not in ("trace", "request")}) == \
        without_wall_time({k: v for k, v in cli.items() if k != "request"})
    assert traced["request"]["options"]["trace"] is True  # the echo is the request as simulated


def test_identical_request_comes_from_the_cache(client: TestClient) -> None:
    doc = request_doc(seed=11)
    first = client.post("/v1/simulations", json=doc)
    second = client.post("/v1/simulations", json=doc)
    assert first.headers["x-clustersim-cache"] == "miss"
    assert second.headers["x-clustersim-cache"] == "hit"
    assert second.content == first.content
    # The canonical form: the same request spelled differently (a default given, YAML) is the same entry.
    spelled = with_field(doc, "options.fidelity", "representative")
    assert client.post("/v1/simulations", json=spelled).headers["x-clustersim-cache"] == "hit"


BAD_BODIES: list[tuple[str, bytes, str]] = [
    ("unknown field", json.dumps(with_field(request_doc(), "layout.tpp", 2)).encode(), "layout.tpp"),
    ("wrong type", json.dumps(with_field(request_doc(), "layout.tp", "8")).encode(), "layout.tp"),
    ("below range", json.dumps(with_field(request_doc(), "layout.pp", 0)).encode(), "layout.pp"),
    ("domain rule", json.dumps(with_field(request_doc(), "layout.dp", 2)).encode(), "layout.dp"),
    ("unknown preset", json.dumps(with_field(request_doc(), "model.preset", "gpt-5")).encode(), "model.preset"),
    ("missing section", json.dumps({"model": {"preset": "gpt3-13b"}}).encode(), "cluster"),
    ("duplicate key", b'{"model": {"preset": "gpt3-13b", "preset": "gpt3-1.3b"}}', "model.preset"),
    ("bad yaml", b"model: [unclosed", "request"),
    ("not a mapping", b"[1, 2, 3]", "request"),
    ("empty body", b"", "request"),
    ("not utf-8", b"\xff\xfe\x00model", "request"),
    ("beyond 2^53", json.dumps(with_field(request_doc(), "model.hidden_size", 2**60)).encode(),
     "model.hidden_size"),
    ("thousands of digits", b'{"model": {"hidden_size": 1' + b"0" * 5000 + b"}}", "request"),
    ("deep nesting", b"[" * 5_000 + b"]" * 5_000, "request"),
]


@pytest.mark.parametrize("route", ["/v1/simulations", "/v1/jobs"])
@pytest.mark.parametrize(("name", "body", "field"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_invalid_requests_are_422_naming_the_field(client: TestClient, route: str, name: str, body: bytes,
                                                   field: str) -> None:
    assert_error(client.post(route, content=body), 422, "invalid_request", field)


# --- limits: 413 --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with client_for(tmp_path_factory.mktemp("limits") / "limits.db", max_gpus=64, max_microbatches=32,
                    max_inline_events=2000, max_job_events=3000, max_body_bytes=2000) as c:
        yield c


def test_over_the_inline_event_limit_points_to_jobs(limited: TestClient) -> None:
    assert limited.post("/v1/simulations", json=request_doc()).status_code == 200
    error = assert_error(limited.post("/v1/simulations", json=request_doc(M32)), 413, "too_large_for_inline",
                         "request")
    assert error["estimated_events"] > error["limit"] == 2000
    assert error["jobs"] == "/v1/jobs"
    assert limited.post("/v1/jobs", json=request_doc(M32)).status_code == 202


def test_over_the_job_event_limit(limited: TestClient) -> None:
    doc = with_field(request_doc(M32), "layout.schedule", "interleaved_1f1b")
    doc = with_field(doc, "layout.virtual_stages", 2)
    error = assert_error(limited.post("/v1/jobs", json=doc), 413, "too_large", "request")
    assert error["estimated_events"] > error["limit"] == 3000


def test_over_the_gpu_and_microbatch_limits(limited: TestClient) -> None:
    big = with_field(with_field(request_doc(), "cluster.num_nodes", 16), "layout.dp", 2)
    for route in ("/v1/simulations", "/v1/jobs"):
        assert_error(limited.post(route, json=big), 413, "too_large", "cluster.num_nodes")
        assert_error(limited.post(route, json=request_doc(M64)), 413, "too_large", "layout.global_batch_size")


def test_over_the_body_limit(limited: TestClient) -> None:
    body = SMALL.read_bytes() + b"#" * 2000
    for route in ("/v1/simulations", "/v1/jobs"):
        assert_error(limited.post(route, content=body), 413, "body_too_large")


# --- jobs -------------------------------------------------------------------------------------------------

def test_job_lifecycle(client: TestClient) -> None:
    doc = request_doc(seed=21)
    response = client.post("/v1/jobs", json=doc)
    assert response.status_code == 202
    job = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}" == job["links"]["self"]
    assert job["status"] in ("queued", "running", "succeeded")
    done = wait_for(client, job["id"], {"succeeded", "failed"})
    assert done["status"] == "succeeded" and done["progress"] == 1.0 and done["error"] is None
    assert done["started_at"] <= done["finished_at"] and done["attempts"] == 1 and not done["cached"]
    result = client.get(f"/v1/jobs/{job['id']}/result")
    assert result.status_code == 200
    inline = client.post("/v1/simulations", json=doc)
    assert inline.headers["x-clustersim-cache"] == "hit"  # the job's result is the cache entry
    assert without_wall_time(result.json()) == without_wall_time(inline.json())
    trace = client.get(f"/v1/jobs/{job['id']}/trace").json()
    assert any(event["ph"] == "X" for event in trace["traceEvents"])
    assert_error(client.delete(f"/v1/jobs/{job['id']}"), 409, "job_finished")
    again = client.post("/v1/jobs", json=doc).json()  # already cached, with its trace: no simulation
    assert again["status"] == "succeeded" and again["cached"]


def test_job_with_trace_option_has_the_trace_in_its_result(client: TestClient) -> None:
    job = client.post("/v1/jobs", json=request_doc(seed=22, trace=True)).json()
    wait_for(client, job["id"], {"succeeded"})
    result = client.get(f"/v1/jobs/{job['id']}/result").json()
    assert result["trace"] == client.get(f"/v1/jobs/{job['id']}/trace").json()


@pytest.mark.parametrize("suffix", ["", "/result", "/trace"])
def test_unknown_job_is_404(client: TestClient, suffix: str) -> None:
    assert_error(client.get(f"/v1/jobs/no-such-job{suffix}"), 404, "not_found", "job_id")


def test_cancelling_an_unknown_job_is_404(client: TestClient) -> None:
    assert_error(client.delete("/v1/jobs/no-such-job"), 404, "not_found")


def test_jobs_are_paged_newest_first(client: TestClient) -> None:
    ids = [client.post("/v1/jobs", json=request_doc(seed=30 + i)).json()["id"] for i in range(3)]
    for job_id in ids:
        wait_for(client, job_id, {"succeeded"})
    first = client.get("/v1/jobs", params={"limit": 2}).json()
    assert [j["id"] for j in first["jobs"]] == ids[::-1][:2]
    assert first["next_cursor"] is not None
    second = client.get("/v1/jobs", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert second["jobs"][0]["id"] == ids[0]
    everything = client.get("/v1/jobs", params={"limit": 100, "status": "succeeded"}).json()
    assert everything["next_cursor"] is None and set(ids) <= {j["id"] for j in everything["jobs"]}
    assert client.get("/v1/jobs", params={"status": "failed"}).json()["jobs"] == []
    assert_error(client.get("/v1/jobs", params={"limit": 0}), 422, "invalid_request", "query.limit")
    assert_error(client.get("/v1/jobs", params={"cursor": "abc"}), 422, "invalid_request", "query.cursor")
    assert_error(client.get("/v1/jobs", params={"status": "done"}), 422, "invalid_request", "query.status")


def test_cancel_queued_and_running_jobs_and_a_full_queue(tmp_path: Path) -> None:
    with client_for(tmp_path / "one.db", workers=1, max_queued_jobs=1) as c:
        running = c.post("/v1/jobs", json=request_doc(LARGE)).json()
        wait_for(c, running["id"], {"running"})
        assert_error(c.get(f"/v1/jobs/{running['id']}/result"), 409, "not_finished")
        assert_error(c.get(f"/v1/jobs/{running['id']}/trace"), 409, "not_finished")
        queued = c.post("/v1/jobs", json=request_doc(LARGE, seed=1)).json()
        assert queued["status"] == "queued"
        full = c.post("/v1/jobs", json=request_doc(LARGE, seed=2))
        assert_error(full, 429, "queue_full")
        assert full.headers["retry-after"]
        for job in (queued, running):
            cancelled = c.delete(f"/v1/jobs/{job['id']}")
            assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        time.sleep(0.2)  # the running one's process is killed; its status must stay cancelled
        status = c.get(f"/v1/jobs/{running['id']}").json()
        assert status["status"] == "cancelled" and status["error"]["code"] == "cancelled"
        assert_error(c.get(f"/v1/jobs/{running['id']}/result"), 409, "no_result")
        assert_error(c.delete(f"/v1/jobs/{running['id']}"), 409, "job_finished")
        assert c.get("/readyz").json()["running_jobs"] == 0


def test_a_job_past_its_wall_time_limit_says_so(tmp_path: Path) -> None:
    with client_for(tmp_path / "timeout.db", job_timeout_s=0.3) as c:
        job = c.post("/v1/jobs", json=request_doc(LARGE)).json()
        done = wait_for(c, job["id"], {"timed_out", "succeeded", "failed"})
        assert done["status"] == "timed_out" and done["error"]["code"] == "timeout"
        assert_error(c.get(f"/v1/jobs/{job['id']}/result"), 409, "no_result")


def test_jobs_and_cache_survive_a_restart(tmp_path: Path) -> None:
    database = tmp_path / "restart.db"
    doc = request_doc(seed=41)
    with client_for(database) as c:
        first = c.post("/v1/simulations", json=doc).content
        job = c.post("/v1/jobs", json=request_doc(seed=42)).json()
        wait_for(c, job["id"], {"succeeded"})
        result = c.get(f"/v1/jobs/{job['id']}/result").content
    with client_for(database) as c:
        again = c.post("/v1/simulations", json=doc)
        assert again.headers["x-clustersim-cache"] == "hit" and again.content == first
        assert c.get(f"/v1/jobs/{job['id']}").json()["status"] == "succeeded"
        assert c.get(f"/v1/jobs/{job['id']}/result").content == result


# --- bearer token: 401 ------------------------------------------------------------------------------------------

def test_token_is_required_to_create_read_and_delete(tmp_path: Path) -> None:
    with client_for(tmp_path / "auth.db", api_token="s3cret") as c:
        good = {"Authorization": "Bearer s3cret"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
            for route in ("/v1/simulations", "/v1/jobs"):
                response = c.post(route, json=request_doc(), headers=headers)
                assert_error(response, 401, "unauthorized")
                assert response.headers["www-authenticate"].startswith("Bearer")
            assert_error(c.delete("/v1/jobs/anything", headers=headers), 401, "unauthorized")
        assert c.post("/v1/simulations", json=request_doc(), headers=good).status_code == 200
        job = c.post("/v1/jobs", json=request_doc(seed=5), headers=good).json()
        for path in (f"/v1/jobs/{job['id']}", "/v1/jobs", f"/v1/jobs/{job['id']}/result"):
            assert_error(c.get(path), 401, "unauthorized")  # reading needs the token too: ids are listed
            assert c.get(path, headers=good).status_code in (200, 409)
        assert c.delete(f"/v1/jobs/{job['id']}", headers=good).status_code in (200, 409)
