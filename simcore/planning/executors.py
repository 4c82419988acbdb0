"""Where search candidates and sweep points run: in this process, in a local process pool (the default), or as
Ray tasks on a Ray cluster (`pip install clustersim[ray]`).

Every executor runs a module-level function over (index, task) items and hands each result back with its index,
so what a search or sweep returns never depends on which worker finished first: results are the same whichever
executor ran them. Items are submitted a window at a time (twice the workers), so that a search bounded by time
stops starting new simulations as soon as its time is up.

A local pool's workers end with the process that owns the pool, even when it is killed (simcore.planning.lifeline),
and a block that ends with an exception (Ctrl-C's KeyboardInterrupt, a task's error) kills them at once rather
than waiting for the simulations in flight. So do the processes of a local Ray runtime the Ray executor starts
(simcore.planning.ray_keeper).

An executor that cannot be set up (an unknown kind, Ray not installed, no Ray cluster at the address) or that
fails while it runs (a worker process died, the Ray cluster went away) raises `ExecutorError`, not `SpecError`:
nothing is wrong with the scenarios. An exception a task raises itself reaches the caller unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from types import TracebackType
from typing import Any, Protocol

from simcore.planning.lifeline import Lifeline, watch_owner
from simcore.planning.ray_keeper import KeeperError, LocalRay, use_auth_mode

EXECUTORS = ("local", "ray")
# An item that says: nothing to start until a task in flight has returned (a search that chooses its next
# candidates from the results of the last ones).
WAIT: Any = object()


class ExecutorError(RuntimeError):
    """An executor could not start or failed while running. `option` names the setting at fault when the caller
    chose it (executor, address or workers), None when the executor failed on its own."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(f"{option}: {message}" if option else message)
        self.option = option
        self.message = message


class Executor(Protocol):
    name: str
    workers: int

    def run(self, fn: Callable[[Any], Any], items: Iterator[Any], on_result: Callable[[Any], None],
            stop: Callable[[], bool]) -> None:
        """Call fn on each item (in any order, `workers` at a time) and on_result on each result in this thread,
        until the items run out or stop() says so; items already started finish. An item that is `WAIT` starts
        nothing: the next item is asked for when a task in flight has returned."""

    def close(self) -> None: ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None: ...


class _Closing:
    def close(self) -> None:
        pass

    def __enter__(self) -> Any:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class InlineExecutor(_Closing):
    """One item after the other in this process (workers = 1)."""

    name = "inline"
    workers = 1

    def run(self, fn: Callable[[Any], Any], items: Iterator[Any], on_result: Callable[[Any], None],
            stop: Callable[[], bool]) -> None:
        while not stop():
            item = next(items, None)
            if item is None:
                return
            if item is WAIT:  # every task has returned here
                raise RuntimeError("the items wait for a result with no task in flight")
            on_result(fn(item))


def _start_method() -> str:
    # fork starts a worker in milliseconds, but forking a process that runs other threads (a server, a progress
    # bar) can deadlock the child; then forkserver (or spawn where there is no forkserver) is the safe choice.
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def _ready() -> int:
    return os.getpid()


def _windowed(submit: Callable[[Any], Any], wait_one: Callable[[list[Any]], tuple[list[Any], list[Any]]],
              cancel: Callable[[Any], Any], window: int, items: Iterator[Any], on_result: Callable[[Any], None],
              stop: Callable[[], bool]) -> None:
    """Keep at most `window` tasks in flight, hand each result to `on_result` as it arrives, stop taking new
    items once `stop()` says so, and cancel what is still in flight if anything raises."""
    pending: list[Any] = []
    exhausted = False
    try:
        while True:
            while not exhausted and len(pending) < window and not stop():
                item = next(items, None)
                if item is None:
                    exhausted = True
                    break
                if item is WAIT:
                    if not pending:
                        raise RuntimeError("the items wait for a result with no task in flight")
                    break
                pending.append(submit(item))
            if not pending:
                return
            results, pending = wait_one(pending)
            for result in results:
                on_result(result)
            if stop():
                exhausted = True
    except BaseException:
        for task in pending:
            cancel(task)
        raise


class LocalExecutor(_Closing):
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
            _windowed(lambda item: self._pool.submit(fn, item), wait_one, lambda future: future.cancel(),
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

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:  # Ctrl-C or a failure: nobody wants the simulations in flight any more
            self.terminate()


class RayExecutor(_Closing):
    """Ray tasks on the Ray cluster at `address` (RAY_ADDRESS when None and set), or on a local Ray runtime of
    its own, or on the runtime this process already started. clustersim must be importable on every Ray node.

    A local runtime of its own is started by a keeper process (simcore.planning.ray_keeper) that ends every Ray
    process of it when this executor closes or this process dies, SIGKILL included."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise ExecutorError("ray is not installed: pip install 'clustersim[ray]'", "executor") from None
        self._ray = ray
        self._owned = False
        self._local: LocalRay | None = None
        if not ray.is_initialized():
            address = address or os.environ.get("RAY_ADDRESS") or None
            if address is None:
                try:
                    self._local = LocalRay(workers)
                except KeeperError as err:
                    raise ExecutorError(str(err)) from None
                use_auth_mode(self._local.auth_mode)
            try:
                ray.init(address=self._local.address if self._local else address, logging_level=logging.ERROR,
                         log_to_driver=False)
            except ConnectionError as err:
                if self._local is not None:
                    self._stop_local()
                    raise ExecutorError(f"cannot connect to the local Ray runtime it started: {err}") from None
                raise ExecutorError(f"cannot reach a Ray cluster at {address!r}: {err}", "address") from None
            except BaseException:
                self._stop_local()
                raise
            self._owned = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = max(1, min(workers, cpus) if workers else cpus)

    def run(self, fn: Callable[[Any], Any], items: Iterator[Any], on_result: Callable[[Any], None],
            stop: Callable[[], bool]) -> None:
        ray = self._ray
        remote = ray.remote(num_cpus=1, max_retries=0)(fn)

        def wait_one(pending: list[Any]) -> tuple[list[Any], list[Any]]:
            done, rest = ray.wait(pending, num_returns=1)
            return [ray.get(ref) for ref in done], list(rest)

        try:
            _windowed(remote.remote, wait_one, lambda ref: ray.cancel(ref, force=True), 2 * self.workers, items,
                      on_result, stop)
        except ray.exceptions.RayTaskError:  # the task's own exception (ray.get raises it as its own type too)
            raise
        except ray.exceptions.RayError as err:  # a worker or node died, the cluster went away
            raise ExecutorError(f"the Ray executor failed: {err}") from err

    def _stop_local(self) -> None:
        if self._local is not None:
            self._local.stop()
            self._local = None

    def close(self) -> None:
        """Disconnect from Ray (this process's own runtime: shut it down), then end the local runtime with
        whatever still runs there (after Ctrl-C or a failure: the tasks `run` cancelled). In this order: a
        driver whose cluster has gone spends seconds in `ray.shutdown` trying to reach it."""
        try:
            if self._owned:
                self._ray.shutdown()
        finally:
            self._stop_local()


def make_executor(kind: str = "local", address: str | None = None, workers: int | None = None) -> Executor:
    """The executor a CLI flag or request names: 'local' (one worker: this process) or 'ray'."""
    if kind == "ray":
        return RayExecutor(address, workers)
    if kind != "local":
        raise ExecutorError(f"must be one of {', '.join(EXECUTORS)}", "executor")
    if address is not None:
        raise ExecutorError("only applies to the ray executor", "address")
    count = max(1, workers or os.cpu_count() or 1)
    return InlineExecutor() if count == 1 else LocalExecutor(count)
