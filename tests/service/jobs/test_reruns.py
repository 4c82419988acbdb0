"""What counts against a job: a run whose own process dies while the service runs does (the job fails once
`max_attempts` runs ended so); a crash of the service (the job found running at start-up) or a stop signal to
the run's process does not, up to a separate, generous bound of interrupted runs; a graceful stop counts
nothing. The manager runs here on a scripted pool, so each ending is exact."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.jobs.manager import MAX_INTERRUPTIONS, JobManager, Submission
from service.jobs.pool import WORKER_DIED, RunResult
from service.jobs.store import JobRow, Store

OK = RunResult("ok", result='{"answer": 42}', cpu_seconds=0.1, peak_rss_bytes=1)


def died(sig: signal.Signals) -> RunResult:
    return RunResult("error", error_type=WORKER_DIED, message=f"the simulation process was killed by {sig.name}",
                     exit_code=-sig)


class ScriptedPool:
    """Stands for WorkerPool: each run ends as the next outcome of the script."""

    def __init__(self, outcomes: list[RunResult]) -> None:
        self._outcomes = list(outcomes)
        self.runs = 0

    async def run(self, request_json: str, keep_spans: bool, timeout_s: float, cancel: Any = None,
                  kind: str = "simulation", on_progress: Any = None) -> RunResult:
        self.runs += 1
        return self._outcomes.pop(0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(str(tmp_path / "jobs.db"))
    yield s
    s.close()


def run_job(store: Store, outcomes: list[RunResult], max_attempts: int = 3) -> tuple[JobRow, int]:
    """Submit one job to a started manager on the scripted pool; the job once it has finished, and the runs."""
    pool = ScriptedPool(outcomes)

    async def scenario() -> JobRow:
        jobs = JobManager(store, pool, workers=1, max_queued=10, timeout_s=60.0,  # type: ignore[arg-type]
                          max_attempts=max_attempts)
        jobs.start()
        try:
            jobs.submit(Submission("simulation", "{}", "key"), "job")
            deadline = time.monotonic() + 60
            while (job := jobs.job("job")).status in ("queued", "running"):
                assert time.monotonic() < deadline, job
                await asyncio.sleep(0.001)
            return job
        finally:
            await jobs.stop()

    return asyncio.run(scenario()), pool.runs


def test_a_process_that_dies_counts_against_its_job_until_the_limit(store: Store) -> None:
    job, runs = run_job(store, [died(signal.SIGKILL), died(signal.SIGSEGV), OK])
    assert job.status == "succeeded" and runs == 3
    assert (job.attempts, job.worker_deaths, job.interruptions) == (3, 2, 0)


def test_the_last_allowed_death_fails_the_job_worker_died(store: Store) -> None:
    job, runs = run_job(store, [died(signal.SIGKILL)] * 3 + [OK])
    assert job.status == "failed" and runs == 3
    error = json.loads(job.error or "{}")
    assert error["code"] == "worker_died"
    assert "SIGKILL" in error["message"] and "each of the 3 runs" in error["message"]


def test_a_stop_signal_to_the_process_interrupts_and_does_not_count(store: Store) -> None:
    # One attempt allowed: a single death of the job's own would fail it.
    job, runs = run_job(store, [died(signal.SIGTERM), died(signal.SIGHUP), OK], max_attempts=1)
    assert job.status == "succeeded" and runs == 3
    assert (job.worker_deaths, job.interruptions) == (0, 2)


def crash_during_a_run(store: Store) -> None:
    """As a service that claimed the job and was then killed would leave it."""
    claimed = store.claim_next()
    assert claimed is not None and claimed.status == "running"


def test_restarts_after_crashes_queue_the_job_again_up_to_their_own_bound(store: Store) -> None:
    store.add_job("job", "{}", "key", 0)
    for restart in range(1, 5):
        crash_during_a_run(store)
        assert store.recover(5, '{"code": "interrupted"}') == (1, 0)
        job = store.job("job")
        assert job is not None and job.status == "queued"
        assert (job.attempts, job.interruptions, job.worker_deaths) == (restart, restart, 0)
    crash_during_a_run(store)
    assert store.recover(5, '{"code": "interrupted"}') == (0, 1)  # the fifth interrupted run
    job = store.job("job")
    assert job is not None and job.status == "failed" and job.error == '{"code": "interrupted"}'


def test_the_manager_fails_an_interrupted_job_only_at_the_stated_bound(store: Store) -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "service.md").read_text(encoding="utf-8")
    assert f"only after {MAX_INTERRUPTIONS} interrupted runs" in " ".join(docs.split())  # docs/service.md states it
    store.add_job("job", "{}", "key", 0)
    for _ in range(MAX_INTERRUPTIONS - 1):
        crash_during_a_run(store)
        store.recover(MAX_INTERRUPTIONS, "{}")
    job = store.job("job")
    assert job is not None and job.status == "queued" and job.interruptions == MAX_INTERRUPTIONS - 1
    crash_during_a_run(store)

    async def restart() -> None:
        jobs = JobManager(store, ScriptedPool([]), workers=1, max_queued=1, timeout_s=1.0,  # type: ignore[arg-type]
                          max_attempts=1)
        jobs.start()
        await jobs.stop()

    asyncio.run(restart())
    job = store.job("job")
    assert job is not None and job.status == "failed"
    error = json.loads(job.error or "{}")
    assert error["code"] == "interrupted" and f"each of {MAX_INTERRUPTIONS} runs" in error["message"]


def test_a_graceful_stop_counts_nothing(store: Store) -> None:
    store.add_job("job", "{}", "key", 0)
    crash_during_a_run(store)
    store.requeue("job")
    job = store.job("job")
    assert job is not None and job.status == "queued"
    assert (job.attempts, job.interruptions, job.worker_deaths) == (0, 0, 0)


def test_a_cancelled_job_is_not_queued_again_by_a_late_death(store: Store) -> None:
    store.add_job("job", "{}", "key", 0)
    crash_during_a_run(store)
    assert store.cancel("job", "{}")
    assert not store.rerun("job", "worker_died")
    job = store.job("job")
    assert job is not None and job.status == "cancelled" and job.worker_deaths == 0


def test_an_older_database_gains_the_counters(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, status TEXT NOT NULL,
            request TEXT NOT NULL, cache_key TEXT NOT NULL, estimated_events INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0, cached INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL,
            started_at REAL, finished_at REAL, error TEXT, kind TEXT NOT NULL DEFAULT 'simulation');
        INSERT INTO jobs (id, status, request, cache_key, estimated_events, attempts, created_at)
            VALUES ('old', 'running', '{}', 'k', 10, 2, 1.0);
    """)
    db.commit()
    db.close()
    store = Store(str(path))
    try:
        # Two runs started under the old counting, one of them now ended by the crash: queued again.
        assert store.recover(3, "{}") == (1, 0)
        old = store.job("old")
        assert old is not None and (old.status, old.interruptions, old.worker_deaths) == ("queued", 1, 0)
    finally:
        store.close()
