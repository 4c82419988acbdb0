"""The process that draws the service's pictures: one of its own, beside the simulation processes and never in
one of their slots, drawing one picture at a time (service.plots.stored).

It is started once (from the same forkserver as the simulation processes), imports matplotlib and draws a first
throw-away picture once, so a picture costs its own drawing only. It runs at a lower CPU priority (`NICE`): where
cores are short, simulations, inline ones above all, and the API's event loop go first. Its address space is
capped like a simulation process's. It exits as soon as the service dies, even by SIGKILL (it waits on a pipe
whose only writer is the service). A drawing that runs past its time limit, or a process that dies or runs out of
memory, costs only that drawing: the process is ended and the next drawing starts a new one.

`PictureProcess` is the service's side; its methods block and are called from one thread at a time, except
`interrupt`, which any thread may call.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import resource
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Literal

__all__ = ["NICE", "PROCESS_NAME", "DrawOutcome", "PictureProcess"]

PROCESS_NAME = "clustersim-draw"  # the drawing process's name (at most 15 bytes: the kernel's limit)
NICE = 5  # added to the drawing process's niceness: about a quarter of a core that a simulation also wants
_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class DrawOutcome:
    """How a drawing ended: ok (every format was delivered), timeout, or error (`error_type`, `message`;
    "WorkerDied" when the process ended without answering)."""

    status: Literal["ok", "timeout", "error"]
    error_type: str = ""
    message: str = ""


class PictureProcess:
    """The service's handle on its drawing process (started on the first drawing, or by `warm`)."""

    def __init__(self, memory_mb: int | None) -> None:
        self._memory_mb = memory_mb
        self._ctx = multiprocessing.get_context("forkserver")
        self._process: Any = None
        self._conn: Connection | None = None
        self._alive: Connection | None = None
        self._interrupted = threading.Event()

    def warm(self) -> None:
        """Start the process now (it imports matplotlib, about a second of CPU) unless it runs already."""
        if self._process is None or not self._process.is_alive():
            self._stop()
            conn, child = self._ctx.Pipe(duplex=True)
            alive_r, alive_w = self._ctx.Pipe(duplex=False)
            process = self._ctx.Process(target=serve, args=(child, alive_r, self._memory_mb, NICE), daemon=True,
                                        name="clustersim-pictures")
            process.start()
            child.close()
            alive_r.close()
            self._process, self._conn, self._alive = process, conn, alive_w

    def draw(self, kind: str, formats: Sequence[str], request_json: str, result_json: str, trace: bytes | None,
             timeout_s: float, deliver: Callable[[str, bytes], None]) -> DrawOutcome:
        """Draw picture `kind` of a stored result in each of `formats`, calling `deliver(format, bytes)` as each
        is saved; the process is ended if it runs past `timeout_s` seconds, or once `interrupt` is called."""
        if self._interrupted.is_set():
            return DrawOutcome("error", "Interrupted", "the service is stopping")
        self.warm()
        assert self._conn is not None
        deadline = time.monotonic() + timeout_s
        try:
            self._conn.send(("draw", kind, tuple(formats), request_json, result_json, trace))
            while True:
                remaining = deadline - time.monotonic()
                if self._interrupted.is_set():
                    self._stop()
                    return DrawOutcome("error", "Interrupted", "the service is stopping")
                if remaining <= 0:
                    self._stop()
                    return DrawOutcome("timeout")
                if not self._conn.poll(min(_POLL_S, remaining)):
                    continue
                message = self._conn.recv()
                if message[0] == "picture":
                    deliver(message[1], message[2])
                elif message[0] == "done":
                    return DrawOutcome("ok")
                else:
                    _, error_type, text = message
                    if error_type == "MemoryError":  # what it holds may be left half-freed: start afresh
                        self._stop()
                    return DrawOutcome("error", error_type, text)
        except (EOFError, OSError, BrokenPipeError):
            exitcode = self._process.exitcode if self._process is not None else None
            self._stop()
            return DrawOutcome("error", "WorkerDied", f"the drawing process ended (exit code {exitcode}) before "
                               "answering")

    def interrupt(self) -> None:
        """End the drawing under way within a poll (50 ms), and refuse every later one: the service stops."""
        self._interrupted.set()

    def close(self) -> None:
        """End the process."""
        self._stop()

    def _stop(self) -> None:
        process, self._process = self._process, None
        for end in (self._conn, self._alive):
            if end is not None:
                with contextlib.suppress(OSError):
                    end.close()
        self._conn = self._alive = None
        if process is not None:
            if process.is_alive():
                process.kill()
            process.join(5)


def _exit_with_service(alive: Connection) -> None:
    """End this process as soon as the service dies: the service holds the only write end of `alive` and never
    writes, so a read returns when the kernel closes it, at the service's death (SIGKILL included)."""

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            alive.recv()
        os._exit(1)

    threading.Thread(target=watch, name="clustersim-pictures-watchdog", daemon=True).start()


def _name_process(name: str) -> None:
    """Give this process `name` where the kernel keeps one (Linux: /proc/PID/comm, what `ps` and `top` show), so
    an operator, and a test that counts the simulation processes, can tell the drawing process apart."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME


def serve(conn: Connection, alive: Connection, memory_mb: int | None, nice: int) -> None:
    """The drawing process: answer each ("draw", kind, formats, request_json, result_json, trace) message on
    `conn` with ("picture", format, bytes) per format, then ("done",), or ("error", type, message)."""
    _exit_with_service(alive)
    _name_process(PROCESS_NAME)
    with contextlib.suppress(OSError):
        os.nice(nice)
    if memory_mb is not None:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from service.plots.stored import draw_stored, warm_up  # matplotlib: imported once, by this process only

    warm_up()

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        _, kind, formats, request_json, result_json, trace = message
        try:
            for fmt, picture in draw_stored(kind, formats, request_json, result_json, trace):
                conn.send(("picture", fmt, picture))
            reply: tuple[str, ...] = ("done",)
        except BaseException as err:  # noqa: BLE001 -- reported to the service, which decides what it means
            reply = ("error", type(err).__name__, " ".join(str(err).split())[:500])
        finally:
            del trace, message
        conn.send(reply)
