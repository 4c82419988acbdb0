"""A pool of worker processes on this machine: the default executor of searches and sweeps (service.executors).

A local pool's workers end with the process that owns the pool, even when it is killed (service.executors.lifeline),
and a block that ends with an exception (Ctrl-C's KeyboardInterrupt, a task's error) kills them at once rather
than waiting for the simulations in flight. A worker that dies mid-task raises `ExecutorError`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from types import TracebackType
from typing import Any

from service.executors.lifeline import Lifeline, watch_owner
from service.executors.windowed import windowed
from simcore.planning.executor import ExecutorError

__all__ = ["LocalExecutor"]


def _start_method() -> str:
    # fork starts a worker in milliseconds, but forking a process that runs other threads (a server, a progress
    # bar) can deadlock the child; then forkserver (or spawn where there is no forkserver) is the safe choice.
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def _ready() -> int:
    return os.getpid()


class LocalExecutor:
    """A pool of worker processes on this machine (default: one per CPU), each ending with this process."""

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        context = multiprocessing.get_context(_start_method())
        self._lifeline = Lifeline(context)
        self._pool = ProcessPoolExecutor(self.workers, mp_context=context, initializer=watch_owner,
                                         initargs=self._lifeline.initargs())
        try:
            self._pool.submit(_ready).result()  # start the workers now, before the caller starts any thread
        except BrokenProcessPool as err:
            self.terminate()
            raise ExecutorError(f"the local process pool could not start its workers: {err}") from err
        except BaseException:  # interrupted while starting: no block will end it
            self.terminate()
            raise

    def run(self, fn: Callable[[Any], Any], items: Iterator[Any], on_result: Callable[[Any], None],
            stop: Callable[[], bool]) -> None:
        def wait_one(pending: list[Future[Any]]) -> tuple[list[Any], list[Future[Any]]]:
            done, rest = wait(pending, return_when=FIRST_COMPLETED)
            return [future.result() for future in done], list(rest)

        try:
            windowed(lambda item: self._pool.submit(fn, item), wait_one, lambda future: future.cancel(),
                      2 * self.workers, items, on_result, stop)
        except BrokenProcessPool as err:  # a worker died (killed, out of memory): its task has no result
            raise ExecutorError(f"a worker process of the local pool ended abruptly: {err}") from err

    def close(self) -> None:
        """Let the tasks in flight finish, then end the workers."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._lifeline.close()

    def terminate(self) -> None:
        """End the workers now (SIGKILL), their tasks unfinished."""
        # The pool has no public way to kill its workers (shutdown waits for the running tasks, or leaves them
        # running with wait=False), so its own table of them is read: `_processes`, pid -> Process, stable
        # since Python 3.8.
        processes = list((getattr(self._pool, "_processes", None) or {}).values())
        for process in processes:
            with contextlib.suppress(OSError, ValueError):
                process.kill()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            with contextlib.suppress(OSError, ValueError, AssertionError):
                process.join(1.0)
        self._lifeline.close()

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:  # Ctrl-C or a failure: nobody wants the simulations in flight any more
            self.terminate()
