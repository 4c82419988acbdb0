"""The pictures the HTTP routes answer with (service/http/routes/plots.py): drawn once, in the background, by a
process of their own (service.http.picture_process), never in a simulation's slot, and kept.

A picture is looked for in memory (`PictureCache`, the most recently used), then in the store
(service.http.picture_store, beside the result it pictures), and only then drawn. Drawings wait in one queue,
the pictures a client waits for ahead of those drawn unasked, and are drawn one at a time, each kind once in
every format (the figure is built once; the format asked for is saved first). A job estimated at
`DRAW_WHEN_DONE_EVENTS` engine events or more has its timeline drawn as soon as it has succeeded (the process is
started while it runs), so that its picture is ready about when its result is. A drawing that fails or runs past
`DRAW_TIMEOUT_S` fails the same way when asked again (until the service restarts): it is not drawn over and over.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from service.http.picture_process import DrawOutcome, PictureProcess
from service.http.picture_store import PictureStore
from service.jobs.pool import RunResult
from service.jobs.store import Store
from service.plots.kinds import FORMATS, NEEDS_SPANS

__all__ = ["DRAW_TIMEOUT_S", "DRAW_WHEN_DONE_EVENTS", "MAX_DRAWINGS", "MEDIA_TYPES", "PictureCache", "PictureFailed",
           "Pictures", "PicturesBusy", "Source"]

log = logging.getLogger("clustersim.service")

MEDIA_TYPES = {"svg": "image/svg+xml", "png": "image/png"}
DRAW_TIMEOUT_S = 300.0  # a drawing's wall-time limit; its cost is bounded (binned timelines), seconds in practice
MAX_DRAWINGS = 64  # drawings queued or under way before a new one is refused (PicturesBusy)
DRAW_WHEN_DONE_EVENTS = 200_000  # jobs estimated at this many engine events have their timeline drawn unasked
WATCH_S = 0.25  # how often the running jobs are looked at, for those about to need a picture
_FAILURES_KEPT = 256
_ASKED, _UNASKED = 0, 1  # queue priorities: a client waits for the first
_BASE_S, _FIRST_S_PER_MB = 1.0, 1.5  # guess of a timeline's drawing time: base + per MB of compressed trace


class PictureCache:
    """The most recently used pictures, at most `max_entries` of them and `max_bytes` in all."""

    def __init__(self, max_entries: int = 64, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._pictures: OrderedDict[tuple[str, str, str], bytes] = OrderedDict()
        self._max_entries, self._max_bytes = max_entries, max_bytes
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> bytes | None:
        with self._lock:
            picture = self._pictures.get(key)
            if picture is not None:
                self._pictures.move_to_end(key)
            return picture

    def put(self, key: tuple[str, str, str], picture: bytes) -> None:
        if len(picture) > self._max_bytes:
            return
        with self._lock:
            old = self._pictures.pop(key, None)
            self._bytes -= len(old) if old is not None else 0
            self._pictures[key] = picture
            self._bytes += len(picture)
            while len(self._pictures) > self._max_entries or self._bytes > self._max_bytes:
                _, dropped = self._pictures.popitem(last=False)
                self._bytes -= len(dropped)


class PictureFailed(Exception):
    """A picture could not be drawn: `status` "timeout" (past DRAW_TIMEOUT_S) or "error" (`error_type`)."""

    def __init__(self, status: str, error_type: str = "", message: str = "") -> None:
        super().__init__(message or status)
        self.status, self.error_type, self.message = status, error_type, message


class PicturesBusy(Exception):
    """MAX_DRAWINGS drawings are queued or under way already."""


@dataclass(frozen=True, slots=True)
class Source:
    """What a picture is drawn from: the result's cache key, the kind (service.plots.stored's STORED_KINDS), the
    canonical request JSON and the result JSON; for the timeline, the compressed Chrome trace, or None to read
    it from the store when the drawing's turn comes."""

    key: str
    kind: str
    request_json: str
    result_json: str
    trace: bytes | None = None


@dataclass(eq=False)
class _Drawing:
    source: Source
    formats: tuple[str, ...]
    priority: int
    ready: dict[str, asyncio.Future[bytes]] = field(default_factory=dict)
    started_at: float | None = None  # time.monotonic()
    expected_s: float = _BASE_S  # how long it is expected to take, once its trace is read
    order: int = 0  # its place in the queue, among drawings of its priority


class Pictures:
    """The service's pictures: `picture()` gives one, from memory, the store or drawn (`start` first)."""

    def __init__(self, memory_mb: int | None, *, timeout_s: float = DRAW_TIMEOUT_S,
                 observer: Callable[[str, RunResult, float], None] | None = None) -> None:
        """`observer(kind, outcome, seconds)`, when given, hears of every drawing that ends (kind "picture"), as
        the worker pool's observer does of the simulations."""
        self.cache = PictureCache()
        self._process = PictureProcess(memory_mb)
        self._timeout_s = timeout_s
        self._observer = observer
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clustersim-pictures")
        self._drawings: dict[tuple[str, str], _Drawing] = {}
        self._queue: list[tuple[int, int, tuple[str, str]]] = []
        self._order = itertools.count()
        self._wake = asyncio.Event()
        self._failed: OrderedDict[tuple[str, str], PictureFailed] = OrderedDict()
        self._s_per_mb = _FIRST_S_PER_MB
        self._tasks: list[asyncio.Task[None]] = []
        self._store: Store | None = None
        self._kept: PictureStore | None = None

    def start(self, store: Store, database_path: str) -> None:
        """Start drawing (on the event loop's thread), keeping pictures beside `store`'s results."""
        self._store = store
        self._kept = PictureStore(database_path)
        self._tasks = [asyncio.create_task(self._draw_queued(), name="clustersim-pictures"),
                       asyncio.create_task(self._watch_jobs(), name="clustersim-pictures-watch")]

    @property
    def _jobs(self) -> Store:
        assert self._store is not None, "Pictures.start first"
        return self._store

    @property
    def _pictures(self) -> PictureStore:
        assert self._kept is not None, "Pictures.start first"
        return self._kept

    async def stop(self) -> None:
        """End the drawing under way, if any, and the process; pictures waited for are cancelled."""
        self._process.interrupt()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for drawing in self._drawings.values():
            for future in drawing.ready.values():
                future.cancel()
        await asyncio.get_running_loop().run_in_executor(self._thread, self._process.close)
        self._thread.shutdown(wait=True)
        if self._kept is not None:
            self._kept.close()

    async def picture(self, source: Source, fmt: str, wait_s: float, asked: bool = True) -> bytes | None:
        """The picture in format `fmt`, or None if it is not drawn within `wait_s` seconds (it goes on being
        drawn; ask again). PictureFailed if it cannot be drawn, PicturesBusy if too many wait to be."""
        found = self.cache.get((source.key, source.kind, fmt))
        if found is not None:
            return found
        failed = self._failed.get((source.key, source.kind))
        if failed is not None:  # a new exception each time: one raised again would grow its traceback
            raise PictureFailed(failed.status, failed.error_type, failed.message)
        drawing = self._drawings.get((source.key, source.kind))
        if drawing is None:
            found = await asyncio.get_running_loop().run_in_executor(
                None, self._pictures.get, source.key, source.kind, fmt)
            if found is not None:
                self.cache.put((source.key, source.kind, fmt), found)
                return found
            drawing = self._drawings.get((source.key, source.kind)) or self._queue_drawing(source, fmt, asked)
        elif asked and drawing.priority != _ASKED and drawing.started_at is None:
            drawing.priority = _ASKED  # asked for now: ahead of the pictures drawn unasked
            self._push(drawing)
        try:
            return await asyncio.wait_for(asyncio.shield(drawing.ready[fmt]), wait_s)
        except TimeoutError:
            return None

    def retry_after_s(self, source: Source) -> int:
        """Seconds until the picture of `source` is expected to be drawn (at least 1): its drawing's expected
        time left, after the drawings ahead of it when it waits."""
        drawing = self._drawings.get((source.key, source.kind))
        if drawing is None:
            return 1
        now = time.monotonic()
        left = sum(max(0.0, d.expected_s - (now - d.started_at)) for d in self._drawings.values()
                   if d.started_at is not None)
        if drawing.started_at is None:
            left += sum(d.expected_s for d in self._drawings.values()
                        if d.started_at is None and (d.priority, d.order) <= (drawing.priority, drawing.order))
        return max(1, min(60, math.ceil(left)))

    def _queue_drawing(self, source: Source, first: str, asked: bool) -> _Drawing:
        if len(self._drawings) >= MAX_DRAWINGS:
            raise PicturesBusy()
        loop = asyncio.get_running_loop()
        formats = (first, *(f for f in FORMATS if f != first))
        drawing = _Drawing(source, formats, _ASKED if asked else _UNASKED,
                           {f: loop.create_future() for f in formats})
        for future in drawing.ready.values():
            future.add_done_callback(_quiet)
        self._drawings[source.key, source.kind] = drawing
        self._push(drawing)
        return drawing

    def _push(self, drawing: _Drawing) -> None:
        drawing.order = next(self._order)
        heapq.heappush(self._queue, (drawing.priority, drawing.order, (drawing.source.key, drawing.source.kind)))
        self._wake.set()

    async def _draw_queued(self) -> None:
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            _, _, which = heapq.heappop(self._queue)
            drawing = self._drawings.get(which)
            if drawing is None or drawing.started_at is not None:
                continue  # an entry left behind when its drawing was moved ahead
            drawing.started_at = time.monotonic()
            try:
                await self._draw(drawing)
            except Exception:  # noqa: BLE001 -- the next drawings still get drawn
                log.exception("drawing the %s picture of %s failed in the service", *which[::-1])
            finally:
                del self._drawings[which]
                for future in drawing.ready.values():
                    if not future.done():
                        future.set_exception(PictureFailed("error", "NotDrawn", "the drawing ended without it"))

    async def _draw(self, drawing: _Drawing) -> None:
        loop = asyncio.get_running_loop()
        source = drawing.source
        started = time.monotonic()
        trace = source.trace
        if source.kind in NEEDS_SPANS and trace is None:
            trace = await loop.run_in_executor(self._thread, self._read_trace, source.key)
        if trace is not None:
            drawing.expected_s = _BASE_S + self._s_per_mb * len(trace) / 1e6

        def deliver(fmt: str, picture: bytes) -> None:  # on the drawing thread, as each format is saved
            loop.call_soon_threadsafe(self._delivered, drawing, fmt, picture)
            try:
                self._pictures.put(source.key, source.kind, fmt, picture)
            except Exception:  # noqa: BLE001 -- a picture that is not kept is drawn again next time
                log.exception("could not keep the %s picture of %s", source.kind, source.key)

        if source.kind in NEEDS_SPANS and trace is None:
            outcome = DrawOutcome("error", "NoTrace", "the result has no stored trace to draw the timeline from")
        else:
            outcome = await loop.run_in_executor(
                self._thread, self._process.draw, source.kind, drawing.formats, source.request_json,
                source.result_json, trace, self._timeout_s, deliver)
        seconds = time.monotonic() - started
        if outcome.status == "ok" and trace is not None and len(trace) > 500_000:
            # learn how long a timeline takes per MB of trace, for the Retry-After of the next ones
            self._s_per_mb = 0.7 * self._s_per_mb + 0.3 * max(0.1, (seconds - _BASE_S) / (len(trace) / 1e6))
        if outcome.status != "ok":
            failure = PictureFailed(outcome.status, outcome.error_type, outcome.message)
            self._failed[source.key, source.kind] = failure
            while len(self._failed) > _FAILURES_KEPT:
                self._failed.popitem(last=False)
            for future in drawing.ready.values():
                if not future.done():
                    future.set_exception(failure)
        if self._observer is not None:
            self._observer("picture", RunResult(outcome.status, error_type=outcome.error_type,
                                                message=outcome.message), seconds)

    def _delivered(self, drawing: _Drawing, fmt: str, picture: bytes) -> None:
        self.cache.put((drawing.source.key, drawing.source.kind, fmt), picture)
        future = drawing.ready.get(fmt)
        if future is not None and not future.done():
            future.set_result(picture)

    def _read_trace(self, key: str) -> bytes | None:
        chunks = list(self._jobs.trace_chunks(key))
        return b"".join(chunks) if chunks else None

    async def _watch_jobs(self) -> None:
        """Draw the timeline of each large job once it has succeeded; start the drawing process while one runs."""
        loop = asyncio.get_running_loop()
        watched: set[str] = set()
        while True:
            await asyncio.sleep(WATCH_S)
            try:
                running = {job.id for job in self._jobs.jobs(limit=MAX_DRAWINGS, status="running")
                           if job.kind == "simulation" and job.estimated_events >= DRAW_WHEN_DONE_EVENTS}
                if running - watched:
                    await loop.run_in_executor(self._thread, self._process.warm)
                for job_id in watched - running:
                    job = self._jobs.job(job_id)
                    stored = self._jobs.result(job.cache_key) if job and job.status == "succeeded" else None
                    if job is not None and stored is not None and stored.has_trace:
                        source = Source(job.cache_key, "timeline", job.request, stored.result)
                        with contextlib.suppress(PicturesBusy, PictureFailed):
                            await self.picture(source, "png", 0.0, asked=False)
                watched = running
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 -- a picture not drawn ahead is drawn when asked for
                log.exception("could not look at the running jobs for pictures to draw")


def _quiet(future: asyncio.Future[bytes]) -> None:
    """Mark a drawing's failure as seen, so that asyncio does not log it when no client waited for it."""
    if not future.cancelled():
        future.exception()
