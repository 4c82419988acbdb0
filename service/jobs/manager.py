"""Jobs: accepted requests that run in the background, at most `workers` at once, in submission order.

The store is the truth: a job is queued in SQLite before the API answers 202, the dispatcher claims the oldest
queued job when a worker is free, and a finished run writes its result and status in one transaction. After a
crash, `start` queues again whatever was running, so every accepted job finishes (the simulator is
deterministic: a rerun gives the same result).

A run that ends without an outcome counts against its job only when the job caused it. Its process died while
the service ran (killed by the out-of-memory killer, a crash): the job's own doing, run again until it has ended
so `max_attempts` times, then failed `worker_died`. The service crashed or was killed (the job is found running
at `start`), or its process died of a stop signal: an interruption, run again, up to MAX_INTERRUPTIONS
interrupted runs (a bound only a job that keeps bringing the whole service down reaches), then failed
`interrupted`. A graceful stop counts nothing. A job whose request is already in the results cache succeeds
without simulating. Simulation jobs always record their trace, so GET /v1/jobs/{id}/trace works for each of
them. A search job (kind "search", from POST /v1/searches) runs the layout search in one worker process and
stores its result document under its cache key; it has no trace. While a job runs, its process reports its
progress (service/jobs/worker.py), kept here in memory: `progress(job_id)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Literal

from service.jobs.errors import JobFinished, JobNotFinished, JobNotFound, NoTrace, QueueFull
from service.jobs.pool import WORKER_DIED, RunResult, WorkerPool
from service.jobs.store import CachedResult, JobRow, Store

__all__ = ["JobManager", "Submission"]

log = logging.getLogger("clustersim.service")

PRUNE_EVERY_S = 3600.0

MAX_INTERRUPTIONS = 25
"""Runs of one job that crashes of the service (or stop signals to the run's process) may end before the job
fails `interrupted`: generous, since no such run is the job's fault; the bound only stops a job that brings the
service down with it every time (exhausting the machine's memory, say) from doing so forever."""


def _error(code: str, message: str, details: list[tuple[str, str]] | None = None) -> str:
    return json.dumps({"code": code, "message": message,
                       "details": [{"field": f, "rule": r} for f, r in details or []]})


@dataclass(frozen=True, slots=True)
class Submission:
    """A job to accept: its kind, the canonical request JSON a worker runs, its results-cache key and the
    admission estimate of its engine events. `reuse_cached` False: never served from another job's result (a
    search with a time limit)."""

    kind: Literal["simulation", "search"]
    request_json: str
    cache_key: str
    estimated_events: int = 0
    reuse_cached: bool = True


@dataclass
class _Running:
    cancel: threading.Event
    task: asyncio.Task[None]


class JobManager:
    """Submits, dispatches, cancels and recovers jobs; all methods run on the event loop's thread."""

    def __init__(self, store: Store, pool: WorkerPool, *, workers: int, max_queued: int, timeout_s: float,
                 max_attempts: int, max_trace_bytes: int = 2**62, retention_s: float = 0.0,
                 max_interruptions: int = MAX_INTERRUPTIONS) -> None:
        """`max_attempts`: runs of a job whose process died (the job's doing) before it fails; `max_interruptions`:
        runs that the service's crashes ended before it fails (see the module's docstring)."""
        self._store = store
        self._pool = pool
        self._workers = workers
        self._max_queued = max_queued
        self._timeout_s = timeout_s
        self._max_attempts = max_attempts
        self._max_interruptions = max_interruptions
        self._max_trace_bytes = max_trace_bytes
        self._retention_s = retention_s
        self._pruner: asyncio.Task[None] | None = None
        self._running: dict[str, _Running] = {}
        self._progress: dict[str, float] = {}  # running job -> last reported fraction (set on pool threads)
        self._wake = asyncio.Event()
        self._dispatcher: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def running(self) -> int:
        return len(self._running)

    def progress(self, job_id: str) -> float | None:
        """The last progress a running job reported (a fraction in [0, 1]), or None (none yet, or not running)."""
        return self._progress.get(job_id)

    def start(self) -> None:
        """Queue again the jobs a dead process left running, then start dispatching."""
        requeued, failed = self._store.recover(self._max_interruptions, self._interrupted_error())
        if requeued or failed:
            log.warning("recovered jobs after a restart: %d queued again, %d failed", requeued, failed)
        self._dispatcher = asyncio.create_task(self._dispatch(), name="clustersim-dispatcher")
        if self._retention_s > 0:
            self._pruner = asyncio.create_task(self._prune(), name="clustersim-pruner")

    async def stop(self) -> None:
        """Stop dispatching; running jobs are ended and queued again, to run after the next start."""
        self._stopping = True
        for task in (self._dispatcher, self._pruner):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for running in list(self._running.values()):
            running.task.cancel()
        for running in list(self._running.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await running.task

    def submit(self, job: Submission, job_id: str | None = None) -> JobRow:
        """Accept a job: QueueFull if the queue is full; succeeded at once if its result (and, for a simulation,
        its trace) is cached (unless it may not reuse a cached result)."""
        job_id = job_id or uuid.uuid4().hex
        simulation = job.kind == "simulation"
        if job.reuse_cached and self._store.has_result(job.cache_key, with_trace=simulation):
            return self._store.add_job(job_id, job.request_json, job.cache_key, job.estimated_events,
                                       status="succeeded", cached=True, kind=job.kind)
        queued = self._store.count("queued")
        if queued >= self._max_queued:
            raise QueueFull(queued)
        row = self._store.add_job(job_id, job.request_json, job.cache_key, job.estimated_events, kind=job.kind)
        self._wake.set()
        return row

    def job(self, job_id: str) -> JobRow:
        """The stored job; JobNotFound if there is none."""
        job = self._store.job(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    def result(self, job_id: str) -> tuple[JobRow, CachedResult]:
        """A succeeded job and its stored result; JobNotFound, or JobNotFinished until it has succeeded."""
        job = self.job(job_id)
        if job.status != "succeeded":
            raise JobNotFinished(job_id, job.status)
        cached = self._store.result(job.cache_key)
        assert cached is not None, "a succeeded job has its result stored"
        return job, cached

    def trace(self, job_id: str) -> CachedResult:
        """The stored result of a succeeded simulation job, which has a trace (`Store.trace_chunks` reads it);
        NoTrace for a search job (or a trace that was not recorded), JobNotFound, JobNotFinished."""
        job = self.job(job_id)
        if job.kind != "simulation":
            raise NoTrace(job_id, job.kind)
        _, cached = self.result(job_id)
        if not cached.has_trace:
            raise NoTrace(job_id, job.kind)
        return cached

    def cancel(self, job_id: str) -> JobRow:
        """Cancel a queued or running job: JobNotFound if unknown, JobFinished if it has finished."""
        job = self.job(job_id)
        if not self._store.cancel(job_id, _error("cancelled", "cancelled by a DELETE request")):
            raise JobFinished(job_id, job.status)
        running = self._running.get(job_id)
        if running is not None:
            running.cancel.set()
        return self.job(job_id)

    async def _prune(self) -> None:
        """Every hour (and at start), delete what is older than the retention (Store.prune)."""
        while True:
            jobs, results = await asyncio.to_thread(self._store.prune, time.time() - self._retention_s)
            if jobs or results:
                log.info("retention: deleted %d finished jobs and %d results", jobs, results)
            await asyncio.sleep(PRUNE_EVERY_S)

    async def _dispatch(self) -> None:
        while not self._stopping:
            self._wake.clear()
            while len(self._running) < self._workers:
                job = self._store.claim_next()
                if job is None:
                    break
                cancel = threading.Event()
                task = asyncio.create_task(self._run(job, cancel), name=f"clustersim-job-{job.id}")
                self._running[job.id] = _Running(cancel, task)
            await self._wake.wait()

    async def _run(self, job: JobRow, cancel: threading.Event) -> None:
        try:
            search = job.kind == "search"
            cached = None if search else self._store.result(job.cache_key)
            if cached is not None and cached.has_trace:
                self._store.succeed(job.id, job.cache_key, cached.result, None, cached=True)  # the trace stays
                return
            outcome = await self._pool.run(job.request, not search, self._timeout_s, cancel, kind=job.kind,
                                           on_progress=lambda fraction: self._progress.__setitem__(job.id, fraction))
            self._record(job, outcome)
        except asyncio.CancelledError:  # the service is stopping: run it again after the restart
            self._store.requeue(job.id)
            raise
        except Exception:
            log.exception("job %s failed in the service", job.id)
            self._store.finish(job.id, "failed", _error("internal_error", "internal error while running the job"))
        finally:
            self._running.pop(job.id, None)
            self._progress.pop(job.id, None)
            self._wake.set()

    def _record(self, job: JobRow, outcome: RunResult) -> None:
        if outcome.status == "ok" and outcome.trace is not None and len(outcome.trace) > self._max_trace_bytes:
            self._store.finish(job.id, "failed", _error(
                "trace_too_large", f"the trace is {len(outcome.trace)} bytes compressed, over the limit of "
                f"{self._max_trace_bytes}"))
        elif outcome.status == "ok":
            assert outcome.result is not None
            self._store.succeed(job.id, job.cache_key, outcome.result, outcome.trace, cached=False)
        elif outcome.status == "invalid":
            self._store.finish(job.id, "failed", _error("invalid_request", "the simulator rejected the request",
                                                        outcome.details))
        elif outcome.status == "timeout":
            self._store.finish(job.id, "timed_out", _error(
                "timeout", f"the {job.kind} ran past the wall-time limit of {self._timeout_s:g} s"))
        elif outcome.status == "error" and outcome.error_type == WORKER_DIED:
            self._worker_died(job, outcome)
        elif outcome.status == "error":
            code = {"MemoryError": "out_of_memory"}.get(outcome.error_type, "simulation_error")
            self._store.finish(job.id, "failed", _error(code, f"{outcome.error_type}: {outcome.message}"))
        # cancelled: the DELETE already stored it

    def _interrupted_error(self) -> str:
        return _error("interrupted", f"the service stopped during each of {self._max_interruptions} runs of this "
                      "job (crashed or killed; a graceful stop does not count)")

    def _worker_died(self, job: JobRow, outcome: RunResult) -> None:
        """A run whose process died without answering: counted as an interruption when the service was stopping
        or the process died of a stop signal, else against the job; queued again until the bound is reached."""
        if self._stopping or outcome.stopped_from_outside:
            if job.interruptions + 1 < self._max_interruptions:
                self._store.rerun(job.id, "interrupted")
            else:
                self._store.finish(job.id, "failed", self._interrupted_error())
        elif job.worker_deaths + 1 < self._max_attempts:
            log.warning("job %s: %s; running it again (%d of %d runs ended so)", job.id, outcome.message,
                        job.worker_deaths + 1, self._max_attempts)
            self._store.rerun(job.id, "worker_died")
        else:
            self._store.finish(job.id, "failed", _error("worker_died", (
                f"{WORKER_DIED}: {outcome.message}; so ended each of the {self._max_attempts} runs of this job")))
