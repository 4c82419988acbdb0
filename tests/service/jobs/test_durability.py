"""Durability: a server killed with SIGKILL while a job runs loses no accepted job. Started again on the same
database, it runs the interrupted and the queued jobs, and each ends with the result it would have had. No
simulation process outlives the killed server."""

from __future__ import annotations

import copy
import time
from typing import Any

import httpx
from conftest import LARGE, alive, descendants, request_doc

from api_schemas import SimulationRequest
from service import convert as adapters
from simcore.simulate import simulate


def expected_result(doc: dict[str, Any]) -> dict[str, Any]:
    result = adapters.to_response(simulate(adapters.to_scenario(SimulationRequest.model_validate(doc))))
    result["simulator"].pop("wall_time_s")
    return result


def poll(url: str, job_id: str, states: set[str], timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job: dict[str, Any] = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=5).json()
        if job["status"] in states:
            return job
        assert time.monotonic() < deadline, f"job {job_id} stayed {job['status']}"
        time.sleep(0.05)


def test_jobs_survive_sigkill(start_server: Any) -> None:
    # The long run (the 1T GPT, every period simulated: about two seconds), long enough to kill.
    long = request_doc(LARGE)
    docs = [long, request_doc(seed=1), request_doc(seed=2, trace=True)]
    server = start_server(CLUSTERSIM_WORKERS="1")
    ids = []
    for doc in docs:
        response = httpx.post(f"{server.url}/v1/jobs", json=doc, timeout=10)
        assert response.status_code == 202
        ids.append(response.json()["id"])
    poll(server.url, ids[0], {"running"}, 10)
    time.sleep(0.3)
    assert httpx.get(f"{server.url}/v1/jobs/{ids[0]}", timeout=5).json()["status"] == "running"
    workers = descendants(server.process.pid)
    assert workers  # the forkserver and the running simulation
    server.kill()
    deadline = time.monotonic() + 5
    while alive(workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(workers), "a simulation process outlived the killed server"

    server = start_server(CLUSTERSIM_WORKERS="1")
    for job_id, doc in zip(ids, docs):
        job = poll(server.url, job_id, {"succeeded", "failed", "cancelled", "timed_out"}, 30)
        assert job["status"] == "succeeded", job
        result = httpx.get(f"{server.url}/v1/jobs/{job_id}/result", timeout=10).json()
        trace = result.pop("trace", None)
        assert (trace is not None) == bool(doc.get("options", {}).get("trace"))
        result["simulator"].pop("wall_time_s")
        assert result == expected_result(copy.deepcopy(doc))
    assert httpx.get(f"{server.url}/v1/jobs/{ids[0]}", timeout=5).json()["attempts"] == 2


def test_graceful_restarts_do_not_count_as_attempts(start_server: Any) -> None:
    # Two deploys (SIGTERM: running jobs are put back) and one crash (SIGKILL) while the same job runs, with the
    # default of 3 attempts: only the crash counts, and the job succeeds.
    long = request_doc(LARGE)
    long["options"] = {**long["options"], "seed": 11}
    server = start_server(CLUSTERSIM_WORKERS="1", CLUSTERSIM_MAX_JOB_ATTEMPTS="2")
    job_id = httpx.post(f"{server.url}/v1/jobs", json=long, timeout=10).json()["id"]
    for stop in ("stop", "stop", "kill"):
        poll(server.url, job_id, {"running"}, 30)
        time.sleep(0.2)
        assert httpx.get(f"{server.url}/v1/jobs/{job_id}", timeout=5).json()["status"] == "running"
        getattr(server, stop)()
        server = start_server(CLUSTERSIM_WORKERS="1", CLUSTERSIM_MAX_JOB_ATTEMPTS="2")
    job = poll(server.url, job_id, {"succeeded", "failed", "cancelled", "timed_out"}, 60)
    assert job["status"] == "succeeded", job
    assert job["attempts"] == 2  # the crashed run and the one that finished
