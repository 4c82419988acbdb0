"""POST /v1/searches through a real app instance (TestClient runs the lifespan: store, worker processes, job
dispatcher): a search runs as a job in a worker process, its result is the search result document, invalid
bodies are 422 naming the field, a search job has no trace (409), and the jobs table of an older database file
gains its `kind` column."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.http.admission import admit_search
from service.http.app import create_app
from service.jobs.store import Store
from service.settings import Settings

# GPT-3 1.3B on one DGX A100 node (8 GPUs), a narrowed space, three candidates: well under a second.
SEARCH: dict[str, Any] = {
    "model": {"preset": "gpt3-1.3b"},
    "cluster": {"preset": "dgx-a100", "num_nodes": 1},
    "global_batch_size": 32,
    "space": {"tp": [1, 2], "pp": [1, 2], "recompute": ["selective"], "zero_stage": [0, 1]},
    "bounds": {"top_k": 2, "max_candidates": 3},
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(database=str(tmp_path_factory.mktemp("search") / "api.db"), workers=2,
                        max_search_candidates=2)
    with TestClient(create_app(settings)) as c:
        yield c


def wait_done(client: TestClient, job_id: str, timeout_s: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def submit(client: TestClient, doc: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/searches", json=doc)
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["kind"] == "search"
    return job


def test_a_search_runs_as_a_job_and_its_result_is_the_search_document(client: TestClient) -> None:
    job = submit(client, SEARCH)
    done = wait_done(client, job["id"])
    assert done["status"] == "succeeded", done
    response = client.get(f"/v1/jobs/{job['id']}/result")
    assert response.status_code == 200
    result = response.json()
    assert result["top"] and all(entry["tokens_per_s"] > 0 for entry in result["top"])
    assert result["best"] == result["top"][0]
    assert result["problem"]["num_gpus"] == 8
    # The service capped bounds.max_candidates (3) at CLUSTERSIM_MAX_SEARCH_CANDIDATES (2), on one process.
    assert result["search"]["simulated"] == 2
    assert result["run"]["executor"] == "inline"
    # The trace: 409 with its own code, whatever the job's state.
    trace = client.get(f"/v1/jobs/{job['id']}/trace")
    assert trace.status_code == 409
    assert trace.json()["error"]["code"] == "no_trace"
    # The same deterministic search again: from the results cache.
    again = submit(client, SEARCH)
    assert again["status"] == "succeeded" and again["cached"] is True
    assert client.get(f"/v1/jobs/{again['id']}/result").json()["top"] == result["top"]


def test_a_simulation_request_is_a_search_around_its_layout(client: TestClient) -> None:
    doc = {"model": SEARCH["model"], "cluster": SEARCH["cluster"], "space": SEARCH["space"],
           "bounds": {"max_candidates": 1}, "layout": {"dp": 4, "tp": 2, "pp": 1, "global_batch_size": 32}}
    job = submit(client, doc)
    assert wait_done(client, job["id"])["status"] == "succeeded"
    result = client.get(f"/v1/jobs/{job['id']}/result").json()
    assert result["baseline"]["layout"]["tp"] == 2


@pytest.mark.parametrize(("change", "field"), [
    ({"global_batch_size": 0}, "global_batch_size"),
    ({"bounds": {"max_candidates": -1}}, "bounds.max_candidates"),
    ({"space": {"tp": "two"}}, "space.tp"),
    ({"colour": "blue"}, "colour"),  # unknown field
    ({"bounds": {"top_k": 2, "max_candidate": 3}}, "bounds.max_candidate"),  # unknown nested field
    ({"objective": "cost"}, "training"),  # a cost ranking needs the run it is measured on
    ({"objective": "cost", "training": {"tokens": -1}}, "training.tokens"),
    ({"space": {"num_nodes": [1, 0]}}, "space.num_nodes.1"),
])
def test_an_invalid_search_is_422_naming_the_field(client: TestClient, change: dict[str, Any], field: str) -> None:
    response = client.post("/v1/searches", json={**SEARCH, **change})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert any(d["field"] == field and d["rule"] for d in error["details"]), error


def test_missing_fields_and_unreadable_bodies_are_422(client: TestClient) -> None:
    missing = client.post("/v1/searches", json={"model": SEARCH["model"], "cluster": SEARCH["cluster"]})
    assert missing.status_code == 422
    assert "global_batch_size" in {d["field"] for d in missing.json()["error"]["details"]}
    assert client.post("/v1/searches", content=b"model: [").status_code == 422
    unknown = client.post("/v1/searches", json={**SEARCH, "model": {"preset": "no-such-model"}})
    assert unknown.status_code == 422
    assert unknown.json()["error"]["details"][0]["field"].startswith("model")


def test_a_search_over_the_gpu_limit_is_413(tmp_path: Path) -> None:
    settings = Settings(database=str(tmp_path / "small.db"), workers=1, max_gpus=4)
    with TestClient(create_app(settings)) as c:
        response = c.post("/v1/searches", json=SEARCH)
    assert response.status_code == 413
    assert response.json()["error"]["details"][0]["field"] == "cluster.num_nodes"


def test_a_search_size_over_the_gpu_limit_is_413_naming_it(tmp_path: Path) -> None:
    settings = Settings(database=str(tmp_path / "small.db"), workers=1, max_gpus=16)
    with TestClient(create_app(settings)) as c:
        response = c.post("/v1/searches", json={**SEARCH, "space": {"num_nodes": [1, 2, 4]}})
    assert response.status_code == 413
    assert response.json()["error"]["details"][0]["field"] == "space.num_nodes[2]"


def test_an_older_database_gains_the_kind_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, status TEXT NOT NULL,
            request TEXT NOT NULL, cache_key TEXT NOT NULL, estimated_events INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0, cached INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL,
            started_at REAL, finished_at REAL, error TEXT);
        INSERT INTO jobs (id, status, request, cache_key, estimated_events, created_at)
            VALUES ('old', 'queued', '{}', 'k', 10, 1.0);
    """)
    db.commit()
    db.close()
    store = Store(str(path))
    try:
        old = store.job("old")
        assert old is not None and old.kind == "simulation"
        new = store.add_job("new", "{}", "search:k", 0, kind="search")
        assert new.kind == "search"
    finally:
        store.close()
    again = Store(str(path))  # opening an upgraded file again changes nothing
    try:
        assert again.job("new") is not None
    finally:
        again.close()


def test_a_search_job_left_running_runs_again_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "restart.db"
    admitted = admit_search(json.dumps(SEARCH).encode(), max_gpus=64, max_candidates=2, job_id="x")
    store = Store(str(path))
    try:
        store.add_job("interrupted", admitted.canonical_json, admitted.cache_key, 0, kind="search")
        claimed = store.claim_next()  # as a service that then died would have
        assert claimed is not None and claimed.status == "running"
    finally:
        store.close()
    with TestClient(create_app(Settings(database=str(path), workers=1))) as c:
        done = wait_done(c, "interrupted")
        assert done["status"] == "succeeded" and done["kind"] == "search" and done["attempts"] == 2
        assert c.get("/v1/jobs/interrupted/result").json()["top"]
