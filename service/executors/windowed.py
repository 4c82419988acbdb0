"""The window of tasks in flight that the process pool and Ray keep: items are submitted a window at a time
(twice the workers), so that a search bounded by time stops starting new simulations as soon as its time is up,
and what is still in flight is cancelled when anything raises."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from simcore.planning.executor import WAIT

__all__ = ["windowed"]


def windowed(submit: Callable[[Any], Any], wait_one: Callable[[list[Any]], tuple[list[Any], list[Any]]],
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
