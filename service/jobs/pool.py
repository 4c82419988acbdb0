"""Simulation processes: each run in its own process (forkserver context), so the API's event loop never
blocks, and a wall-time limit or a cancel can end the run by killing its process.

A thread per run waits on the process's pipe (polling every 50 ms for a cancel); the callers cap how many run
at once (the job dispatcher for jobs, `InlineSlots` for inline simulations). A run's process may report its
progress on the same pipe before its outcome (service/jobs/worker.py); `on_progress` receives it. Pictures are
drawn by a process of their own (service/http/picture_process.py), never in a run's process or slot.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from service.jobs import worker

__all__ = ["WORKER_DIED", "InlineSlots", "OnProgress", "RunResult", "WorkerPool"]

WORKER_DIED = "WorkerDied"
"""The `error_type` of a run whose process ended without answering (killed, out of memory)."""

STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT})
"""Signals that ask a process to stop. A simulation process ignores SIGINT and SIGTERM (its service decides when
a run ends), so dying of one of these means a stop from outside (a terminal's hangup reaching the whole process
group, say), not something the run did."""

_POLL_S = 0.05

RunStatus = Literal["ok", "invalid", "error", "timeout", "cancelled"]
OnProgress = Callable[[float], None]
"""Receives a run's progress, a fraction in [0, 1] that only grows (called on a pool thread)."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended. ok: `result` JSON and `trace` (gzip, or None), and what the run took; invalid: `details`
    (field, rule); error: `error_type` and `message`; timeout and cancelled: nothing more."""

    status: RunStatus
    result: str | None = None
    trace: bytes | None = None
    details: list[tuple[str, str]] = field(default_factory=list)
    error_type: str = ""
    message: str = ""
    exit_code: int | None = None  # a process that died without answering: its exit status (-N: signal N)
    cpu_seconds: float = 0.0  # ok: the CPU time of its process
    peak_rss_bytes: int = 0  # ok: the process's peak resident memory

    @property
    def stopped_from_outside(self) -> bool:
        """The run's process died of a stop signal (STOP_SIGNALS): the run was interrupted, it did not fail."""
        code = self.exit_code
        return self.error_type == WORKER_DIED and code is not None and code < 0 and -code in STOP_SIGNALS


class WorkerPool:
    """Starts one process per run from a forkserver that has the simulator imported already."""

    def __init__(self, threads: int, memory_mb: int | None = None,
                 observer: Callable[[str, RunResult, float], None] | None = None) -> None:
        """`observer(kind, outcome, seconds)`, when given, hears of every run that ends (kind "simulation",
        or "search"), on the event loop's thread."""
        self._observer = observer
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(["service.jobs.worker"])
        self._threads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="clustersim-run")
        self._memory_mb = memory_mb

    def warm(self) -> None:
        """Start the forkserver now (about a second) rather than on the first request."""
        process = self._ctx.Process(target=worker.noop, daemon=True)
        process.start()
        process.join()

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)

    async def run(self, request_json: str, keep_spans: bool, timeout_s: float,
                  cancel: threading.Event | None = None, kind: str = "simulation",
                  on_progress: OnProgress | None = None) -> RunResult:
        """Simulate (or, for kind "search", search) in a new process; ends it at `timeout_s` seconds of wall time
        or when `cancel` is set. `on_progress` receives the progress the process reports."""
        target = worker.run_search if kind == "search" else worker.run
        return await self._start(kind, target, (request_json, keep_spans), timeout_s, cancel, on_progress)

    async def _start(self, kind: str, target: Callable[..., None], args: tuple[Any, ...], timeout_s: float,
                     cancel: threading.Event | None, on_progress: OnProgress | None) -> RunResult:
        loop = asyncio.get_running_loop()
        stop = cancel or threading.Event()
        started = time.monotonic()
        future = loop.run_in_executor(self._threads, self._run_blocking, target, args, timeout_s, stop, on_progress)
        try:
            outcome = await asyncio.shield(future)
        except asyncio.CancelledError:  # the caller went away (shutdown): end the process too
            stop.set()
            raise
        if self._observer is not None:
            self._observer(kind, outcome, time.monotonic() - started)
        return outcome

    def _run_blocking(self, target: Callable[..., None], args: tuple[Any, ...], timeout_s: float,
                      cancel: threading.Event, on_progress: OnProgress | None) -> RunResult:
        receiver, sender = self._ctx.Pipe(duplex=False)
        alive_r, alive_w = self._ctx.Pipe(duplex=False)  # the child exits when alive_w closes (we die)
        process = self._ctx.Process(target=target, args=(*args, self._memory_mb, sender, alive_r), daemon=True)
        deadline = time.monotonic() + timeout_s
        try:
            process.start()
            sender.close()
            alive_r.close()
            while True:
                if cancel.is_set():
                    return RunResult("cancelled")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return RunResult("timeout")
                if receiver.poll(min(_POLL_S, remaining)):
                    try:
                        message = receiver.recv()
                    except EOFError:  # it has gone: wait for its exit status, which says why (a loaded machine is slow)
                        process.join(10)
                        return RunResult("error", error_type=WORKER_DIED, message=_death(process.exitcode),
                                         exit_code=process.exitcode)
                    if message[0] == "progress":
                        if on_progress is not None:
                            on_progress(float(message[1]))
                        continue
                    return _result(message)
        finally:
            if process.is_alive():
                process.kill()
            if process.pid is not None:
                process.join()
            receiver.close()
            alive_w.close()


def _death(exitcode: int | None) -> str:
    """Why a simulation process ended without answering, in words."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        cause = " (the out-of-memory killer sends it)" if name == "SIGKILL" else ""
        return f"the simulation process was killed by {name}{cause}"
    return f"the simulation process ended with exit code {exitcode} before answering"


def _result(message: tuple[object, ...]) -> RunResult:
    kind = message[0]
    if kind == "ok":
        result, trace, seconds, peak = message[1:5]
        assert isinstance(result, str) and (trace is None or isinstance(trace, bytes))
        assert isinstance(seconds, float) and isinstance(peak, int)
        return RunResult("ok", result=result, trace=trace, cpu_seconds=seconds, peak_rss_bytes=peak)
    if kind == "invalid":
        details = message[1]
        assert isinstance(details, list)
        return RunResult("invalid", details=[(str(f), str(r)) for f, r in details])
    return RunResult("error", error_type=str(message[1]), message=str(message[2]))


class InlineSlots:
    """At most `size` inline simulations at once, and at most `max_waiting` waiting for a turn."""

    def __init__(self, size: int, max_waiting: int) -> None:
        self._slots = asyncio.Semaphore(size)
        self._waiting = 0
        self._max_waiting = max_waiting

    @property
    def waiting(self) -> int:
        """Inline runs waiting for a slot now."""
        return self._waiting

    @property
    def full(self) -> bool:
        return self._waiting >= self._max_waiting and self._slots.locked()

    async def __aenter__(self) -> None:
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1

    async def __aexit__(self, *_: object) -> None:
        self._slots.release()
