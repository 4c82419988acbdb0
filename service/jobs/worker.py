"""What runs inside a simulation process: one request in, one message out through a pipe.

A search job runs `run_search` instead: the layout search on the in-process ("inline") executor, no nested
process pool; its "ok" message carries the search result document and no trace.

The outcome message is ``("ok", result_json, trace_gzip_or_None, cpu_seconds, peak_rss_bytes)``,
``("invalid", [(field, rule), ...])`` or ``("error", exception_type_name, one_line_message, traceback_text)``.
Before it, a simulation sends ``("progress", fraction)`` as its engine runs (compute passes finished over the
passes of the iteration, sent each time it has grown by a hundredth), and a search as its candidates finish (done
over planned). The result JSON is exactly what ``clustersim simulate`` prints (`adapters.to_response`), without
the trace; the trace is the Chrome trace JSON, gzip-compressed. The forkserver preloads this module so that a
new process starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import threading
import traceback
import zlib
from collections.abc import Callable
from multiprocessing.connection import Connection

from api_schemas import RequestError, SimulationRequest
from api_schemas.search import SearchRequest
from service import convert as adapters
from service.provenance import package_version
from service.search import run_search as search
from simcore import SpecError, simulate

__all__ = ["Reporter", "noop", "run", "run_search"]

PROGRESS_STEP = 0.01  # a fraction reported once it has grown by this much since the last report

# The version every result carries, read from the package's metadata here, in the forkserver that preloads this
# module, so that the simulation processes it forks have it (about 6 ms each otherwise).
package_version()


class Reporter:
    """Sends ``("progress", done / total)`` through `conn` each time it has grown by PROGRESS_STEP (and when it
    reaches 1): at most about a hundred small messages a run, however many times it is called."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._last = -1.0

    def __call__(self, done: int, total: int) -> None:
        fraction = done / total if total > 0 else 1.0
        if fraction >= self._last + PROGRESS_STEP or (fraction >= 1.0 > self._last):
            self._last = fraction
            self._conn.send(("progress", fraction))

def _exit_with_server(alive: Connection) -> None:
    """End this process as soon as the service dies (even by SIGKILL), so no orphan keeps simulating.

    The service holds the only write end of `alive` and never writes: a read returns when it closes it, which
    the kernel does when the service dies. The forkserver cannot tell us: each of its children holds its
    liveness pipe open, so it outlives the service as long as they run.
    """

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            alive.recv()
        os._exit(1)

    threading.Thread(target=watch, name="clustersim-watchdog", daemon=True).start()


def _obey_only_the_service() -> None:
    """Ignore SIGINT and SIGTERM: a run ends when its service ends it (a kill, at a cancel, a time limit or the
    service's own graceful stop, after which the job runs again) or dies (the watchdog). A Ctrl-C in a terminal
    reaches the whole process group: handled here it would end the run as a KeyboardInterrupt error, and the
    job would fail for a stop of the service."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _limit_memory(memory_mb: int | None) -> None:
    if memory_mb is None:
        return
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def noop() -> None:
    """Started once at service start-up so the forkserver (and its preloaded modules) is ready."""


def _serve(work: Callable[[], tuple[object, ...]], memory_mb: int | None, conn: Connection,
           alive: Connection) -> None:
    """Run `work` in this process and send its outcome message (or what went wrong) through `conn`."""
    _obey_only_the_service()
    _exit_with_server(alive)
    try:
        _limit_memory(memory_mb)
        message = work()
        if message[0] == "ok":  # what the run took: the process's CPU time and peak resident memory
            usage = resource.getrusage(resource.RUSAGE_SELF)
            message = (*message, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024)
    except (SpecError, RequestError) as err:
        message = ("invalid", [(d.field, d.rule) for d in adapters.request_error(err).details])
    except BaseException as err:  # noqa: BLE001 -- reported to the parent, which decides what it means
        message = ("error", type(err).__name__, " ".join(str(err).split())[:500], traceback.format_exc())
    try:
        conn.send(message)
    finally:
        conn.close()


def run(request_json: str, keep_spans: bool, memory_mb: int | None, conn: Connection, alive: Connection) -> None:
    """Simulate the canonical request JSON and send the outcome message through `conn`."""

    def work() -> tuple[object, ...]:
        request = SimulationRequest.model_validate_json(request_json)
        scenario = adapters.to_scenario(request)
        if keep_spans:
            scenario = adapters.replace_spans(scenario)
        outcome = simulate(scenario, progress=Reporter(conn))
        trace = None
        if keep_spans:
            packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip, as it is served
            trace = packer.compress(json.dumps(adapters.chrome_trace(outcome.spans)).encode("utf-8")) + packer.flush()
        return ("ok", json.dumps(adapters.to_response(outcome, request=request)), trace)

    _serve(work, memory_mb, conn, alive)


def run_search(request_json: str, keep_spans: bool, memory_mb: int | None, conn: Connection,
               alive: Connection) -> None:
    """Run the canonical search request JSON (its bounds already capped by the service) in this process and
    send the outcome message through `conn`; `keep_spans` is ignored (a search records no trace)."""
    del keep_spans

    def work() -> tuple[object, ...]:
        request = SearchRequest.model_validate_json(request_json)
        document = search(request, executor="local", workers=1, progress=Reporter(conn))  # workers=1: inline
        return ("ok", json.dumps(document), None)

    _serve(work, memory_mb, conn, alive)
