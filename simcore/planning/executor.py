"""What a search (or a sweep) needs of an executor: run a module-level function over (index, task) items, `workers`
at a time, and hand each result back in this thread, until the items run out or the caller says stop.

Every executor hands each result back with its index, so what a search or sweep returns never depends on which
worker finished first: results are the same whichever executor ran them. An executor is a context manager: a
block that ends normally lets the tasks in flight finish, one that ends with an exception (Ctrl-C's
KeyboardInterrupt, a task's error) may end them at once.

Here are the protocol, its error, the `WAIT` item and the inline executor (this process, one item after the
other), which is all the pure core needs. The executors that start processes (a local process pool, Ray tasks)
live in service/executors/, which builds them from the command line's and the requests' strings.

An executor that cannot be set up or that fails while it runs raises `ExecutorError`, not `SpecError`: nothing is
wrong with the scenarios. An exception a task raises itself reaches the caller unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Protocol

__all__ = ["WAIT", "Executor", "ExecutorError", "InlineExecutor"]

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
    name: str  # what a search result's `run.executor` says: inline, local or ray
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


class InlineExecutor:
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

    def close(self) -> None:
        pass

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
