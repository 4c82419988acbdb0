"""Durability: a server killed with SIGKILL while a job runs loses no accepted job. Started again on the same
database, it runs the interrupted and the queued jobs, and each ends with the result it would have had; crashes
of the service never count against a job (five in a row included), nor do graceful stops or a Ctrl-C, while a
job whose own simulation process is killed runs again and has that run counted. No simulation process outlives
the killed server.

Every wait here is on a condition (a job's state or progress, processes gone) with a generous deadline, never a
fixed sleep: on a loaded machine a restart and the long run take many times what they take on a quiet one."""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import LARGE, alive, descendants, request_doc

from api_schemas import SimulationRequest
from service import convert as adapters
from service.http.picture_process import PROCESS_NAME
from simcore.simulate import simulate

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

DEADLINE_S = 300.0  # for a job to reach a state: a few seconds on a quiet machine, tens on a loaded one
GONE_S = 60.0  # for the processes of a killed server to exit (well under a second when the machine is quiet)
FINISHED = {"succeeded", "failed", "cancelled", "timed_out"}


def expected_result(doc: dict[str, Any]) -> dict[str, Any]:
    request = SimulationRequest.model_validate(doc)
    result = adapters.to_response(simulate(adapters.to_scenario(request)), request=request)
    result["simulator"].pop("wall_time_s")
    return result


def submit(url: str, doc: dict[str, Any]) -> str:
    response = httpx.post(f"{url}/v1/jobs", json=doc, timeout=60)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    return job_id


def wait_job(url: str, job_id: str, reached: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    """The job once `reached(job)` holds, read every 50 ms; fails after DEADLINE_S saying what it waited for."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        job: dict[str, Any] = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=60).json()
        if reached(job):
            return job
        assert time.monotonic() < deadline, f"job {job_id} not {what} after {DEADLINE_S:g} s: {job}"
        time.sleep(0.05)


def wait_finished(url: str, job_id: str) -> dict[str, Any]:
    return wait_job(url, job_id, lambda job: job["status"] in FINISHED, "finished")


def wait_mid_run(url: str, job_id: str, progress: float) -> dict[str, Any]:
    """The job once its process is simulating and has reported at least `progress`; fails if it ends first."""

    def reached(job: dict[str, Any]) -> bool:
        assert job["status"] not in FINISHED, f"job {job_id} ended before it could be interrupted: {job}"
        return bool(job["status"] == "running" and job["progress"] >= progress)

    return wait_job(url, job_id, reached, f"running past progress {progress}")


def wait_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + GONE_S
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pids), f"processes {alive(pids)} outlived the killed server by {GONE_S:g} s"


def assert_clean_result(url: str, job_id: str, doc: dict[str, Any]) -> None:
    """The job's result is the one a clean run of its request gives (the trace only if asked for)."""
    result = httpx.get(f"{url}/v1/jobs/{job_id}/result", timeout=60).json()
    trace = result.pop("trace", None)
    assert (trace is not None) == bool(doc.get("options", {}).get("trace"))
    result["simulator"].pop("wall_time_s")
    assert result == expected_result(copy.deepcopy(doc))


def counters(database: Path, job_id: str) -> tuple[int, int]:
    """(interruptions, worker_deaths) of a job, read from the service's database."""
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        row = db.execute("SELECT interruptions, worker_deaths FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return int(row[0]), int(row[1])


def simulation_processes(server_pid: int) -> list[int]:
    """The server's grandchildren that simulate: what its forkserver started, but the drawing process (it names
    itself, service/http/picture_process.py)."""
    found = []
    for pid in descendants(server_pid):
        with contextlib.suppress(OSError):  # gone meanwhile
            if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) != server_pid and \
                    Path(f"/proc/{pid}/comm").read_text().strip() != PROCESS_NAME:
                found.append(pid)
    return found


def test_jobs_survive_sigkill(start_server: Any) -> None:
    # The long run (the 1T GPT, every period simulated: about two seconds), long enough to kill.
    long = request_doc(LARGE)
    docs = [long, request_doc(seed=1), request_doc(seed=2, trace=True)]
    server = start_server(CLUSTERSIM_WORKERS="1")
    ids = [submit(server.url, doc) for doc in docs]
    wait_mid_run(server.url, ids[0], 0.05)
    workers = descendants(server.process.pid)
    assert workers  # the forkserver and the running simulation
    server.kill()
    wait_gone(workers)

    server = start_server(CLUSTERSIM_WORKERS="1")
    for job_id, doc in zip(ids, docs):
        job = wait_finished(server.url, job_id)
        assert job["status"] == "succeeded", job
        assert_clean_result(server.url, job_id, doc)
    assert httpx.get(f"{server.url}/v1/jobs/{ids[0]}", timeout=60).json()["attempts"] == 2


def test_a_job_survives_five_sigkills_of_the_service(start_server: Any, tmp_path: Path) -> None:
    # The default of 3 attempts: crashes of the service are not the job's doing and do not use them up.
    long = request_doc(LARGE, seed=21)
    server = start_server(CLUSTERSIM_WORKERS="1")
    job_id = submit(server.url, long)
    for kill in range(1, 6):
        wait_mid_run(server.url, job_id, kill / 10)  # each run killed a little further in
        workers = descendants(server.process.pid)
        server.kill()
        wait_gone(workers)
        server = start_server(CLUSTERSIM_WORKERS="1")
    job = wait_finished(server.url, job_id)
    assert job["status"] == "succeeded", job
    assert job["attempts"] == 6  # five runs the kills ended (none had finished) and the one that finished
    assert counters(tmp_path / "jobs.db", job_id) == (5, 0)
    assert_clean_result(server.url, job_id, long)


def test_graceful_restarts_do_not_count_as_attempts(start_server: Any, tmp_path: Path) -> None:
    # Two deploys (SIGTERM: running jobs are put back) and one crash (SIGKILL) while the same job runs: none is
    # the job's doing, and the job succeeds.
    long = request_doc(LARGE, seed=11)
    server = start_server(CLUSTERSIM_WORKERS="1", CLUSTERSIM_MAX_JOB_ATTEMPTS="1")
    job_id = submit(server.url, long)
    for graceful in (True, True, False):
        wait_mid_run(server.url, job_id, 0.05)
        if graceful:  # waited for as long as it takes: a stop cut short by a SIGKILL would be a crash
            server.process.terminate()
            server.process.wait(DEADLINE_S)  # its exit status is SIGTERM's: uvicorn raises it again once stopped
            server.stop()
        else:
            server.kill()
        server = start_server(CLUSTERSIM_WORKERS="1", CLUSTERSIM_MAX_JOB_ATTEMPTS="1")
    job = wait_finished(server.url, job_id)
    assert job["status"] == "succeeded", job
    assert job["attempts"] == 2  # the crashed run and the one that finished
    assert counters(tmp_path / "jobs.db", job_id) == (1, 0)


def test_a_ctrl_c_of_the_service_puts_its_job_back(start_server: Any, tmp_path: Path) -> None:
    # A terminal's Ctrl-C signals the whole process group: the server, its forkserver and the simulation.
    long = request_doc(LARGE, seed=12)
    server = start_server(CLUSTERSIM_WORKERS="1", CLUSTERSIM_MAX_JOB_ATTEMPTS="1")
    job_id = submit(server.url, long)
    wait_mid_run(server.url, job_id, 0.05)
    workers = descendants(server.process.pid)
    for pid in (server.process.pid, *workers):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)
    server.process.wait(DEADLINE_S)  # a graceful stop, which the job's counters below show
    server.stop()
    wait_gone(workers)
    server = start_server(CLUSTERSIM_WORKERS="1", CLUSTERSIM_MAX_JOB_ATTEMPTS="1")
    job = wait_finished(server.url, job_id)
    assert job["status"] == "succeeded", job  # before: failed, simulation_error "KeyboardInterrupt"
    assert job["attempts"] == 1 and counters(tmp_path / "jobs.db", job_id) == (0, 0)
    assert_clean_result(server.url, job_id, long)


def test_a_job_whose_own_process_is_killed_runs_again_and_counts_it(start_server: Any, tmp_path: Path) -> None:
    long = request_doc(LARGE, seed=13)
    server = start_server(CLUSTERSIM_WORKERS="1", CLUSTERSIM_MAX_JOB_ATTEMPTS="2")
    job_id = submit(server.url, long)
    reported = wait_mid_run(server.url, job_id, 0.05)["progress"]
    (simulation,) = simulation_processes(server.process.pid)
    # Stop signals from outside: ignored by a simulation process, whose service decides when a run ends.
    os.kill(simulation, signal.SIGTERM)
    os.kill(simulation, signal.SIGINT)
    wait_mid_run(server.url, job_id, reported + 0.1)  # the same run goes on
    assert simulation_processes(server.process.pid) == [simulation]
    os.kill(simulation, signal.SIGKILL)  # as the out-of-memory killer would
    job = wait_finished(server.url, job_id)
    assert job["status"] == "succeeded", job
    assert job["attempts"] == 2 and counters(tmp_path / "jobs.db", job_id) == (0, 1)
    assert_clean_result(server.url, job_id, long)
