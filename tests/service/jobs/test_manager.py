"""JobManager without HTTP: what it refuses, it raises as its own errors (service.jobs.errors), which the HTTP
layer maps to responses in one place (service.http.errors.from_job_error)."""

from __future__ import annotations

import ast
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.http.errors import from_job_error
from service.jobs.errors import JobFinished, JobNotFinished, JobNotFound, NoTrace, QueueFull
from service.jobs.manager import JobManager, Submission
from service.jobs.pool import WorkerPool
from service.jobs.store import Store

JOBS = Path(__file__).resolve().parents[3] / "service" / "jobs"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(str(tmp_path / "jobs.db"))
    yield s
    s.close()


def manager(store: Store, max_queued: int = 2) -> JobManager:
    # Never started: nothing is dispatched, so submitted jobs stay queued.
    pool = WorkerPool.__new__(WorkerPool)  # no process is ever started by these tests
    return JobManager(store, pool, workers=1, max_queued=max_queued, timeout_s=1.0, max_attempts=1)


def test_the_manager_raises_its_own_errors(store: Store) -> None:
    jobs = manager(store, max_queued=1)
    with pytest.raises(JobNotFound):
        jobs.job("nope")
    with pytest.raises(JobNotFound):
        jobs.cancel("nope")
    queued = jobs.submit(Submission("simulation", "{}", "key-1", 10), "a")
    with pytest.raises(JobNotFinished) as waiting:
        jobs.result("a")
    assert waiting.value.waiting and waiting.value.status == "queued"
    with pytest.raises(QueueFull) as full:
        jobs.submit(Submission("simulation", "{}", "key-2"), "b")
    assert full.value.queued == 1
    assert jobs.cancel(queued.id).status == "cancelled"
    with pytest.raises(JobFinished) as finished:
        jobs.cancel("a")
    assert finished.value.status == "cancelled"
    with pytest.raises(JobNotFinished) as ended:
        jobs.result("a")
    assert not ended.value.waiting


def test_cached_results_and_traces(store: Store) -> None:
    jobs = manager(store)
    store.put_result("sim", '{"x": 1}', zlib.compress(b"{}"))
    store.put_result("search:s", '{"top": []}', None)
    done = jobs.submit(Submission("simulation", "{}", "sim"), "sim-job")
    assert done.status == "succeeded" and done.cached
    assert zlib.decompress(b"".join(store.trace_chunks(jobs.trace("sim-job").key))) == b"{}"
    search = jobs.submit(Submission("search", "{}", "search:s"), "search-job")
    assert search.status == "succeeded"
    with pytest.raises(NoTrace) as no_trace:
        jobs.trace("search-job")
    assert no_trace.value.kind == "search"
    # A search that may not reuse another's result (a time limit) is queued even with its key cached.
    assert jobs.submit(Submission("search", "{}", "search:s", reuse_cached=False), "fresh").status == "queued"


@pytest.mark.parametrize(("error", "status", "code"), [
    (JobNotFound("j"), 404, "not_found"), (JobNotFinished("j", "running"), 409, "not_finished"),
    (JobNotFinished("j", "failed"), 409, "no_result"), (JobFinished("j", "succeeded"), 409, "job_finished"),
    (NoTrace("j", "search"), 409, "no_trace"), (NoTrace("j", "simulation"), 409, "no_trace"),
    (QueueFull(100), 429, "queue_full"),
])
def test_each_error_has_one_response(error: Exception, status: int, code: str) -> None:
    assert isinstance(error, (JobNotFound, JobNotFinished, JobFinished, NoTrace, QueueFull))
    api = from_job_error(error)
    assert (api.status, api.code) == (status, code)


def test_jobs_import_nothing_of_http() -> None:
    for path in sorted(JOBS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                       else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for module in modules:
                assert not module.startswith(("service.http", "fastapi", "starlette")), f"{path.name}: {module}"


def test_traces_are_read_back_in_chunks_and_old_rows_pruned(store: Store) -> None:
    blob = bytes(range(256)) * 1000
    store.put_result("big", "{}", blob)
    chunks = list(store.trace_chunks("big", chunk_bytes=10_000))
    assert b"".join(chunks) == blob and max(map(len, chunks)) == 10_000
    assert list(store.trace_chunks("missing")) == []
    jobs = manager(store)
    jobs.submit(Submission("simulation", "{}", "big"), "old")  # succeeded from the cache
    store.put_result("orphan", "{}", None)
    later = time.time() + 10
    assert store.prune(time.time() - 3600) == (0, 0)  # nothing that old
    assert store.prune(later) == (1, 2)
    assert store.job("old") is None and store.result("big") is None and store.result("orphan") is None
