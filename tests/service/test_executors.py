"""Executors: results handed back with their index, a time limit that stops new work, and failures of the
executor itself raised as ExecutorError (not SpecError: the scenarios are not at fault)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from service.executors import make_executor
from service.executors.pool import LocalExecutor
from simcore import SpecError
from simcore.planning.executor import ExecutorError, InlineExecutor


def square(item: tuple[int, int]) -> tuple[int, int]:
    index, value = item
    return index, value * value


def die(item: tuple[int, int]) -> tuple[int, int]:
    os._exit(3)  # a worker killed mid-task (out of memory, say)


def refuse(item: tuple[int, int]) -> tuple[int, int]:
    raise ZeroDivisionError(f"item {item[0]}")


def run(executor: Any, fn: Any, n: int, stop_after: int | None = None) -> dict[int, int]:
    out: dict[int, int] = {}

    def on_result(result: tuple[int, int]) -> None:
        out[result[0]] = result[1]

    executor.run(fn, iter([(i, i) for i in range(n)]), on_result,
                 lambda: stop_after is not None and len(out) >= stop_after)
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_every_result_comes_back_with_its_index(workers: int) -> None:
    with make_executor("local", workers=workers) as executor:
        assert executor.name == ("inline" if workers == 1 else "local")
        assert run(executor, square, 9) == {i: i * i for i in range(9)}


def test_stop_takes_no_new_item() -> None:
    with InlineExecutor() as executor:
        assert run(executor, square, 9, stop_after=3) == {0: 0, 1: 1, 2: 4}


@pytest.mark.parametrize("kind, address, option", [("slurm", None, "executor"), ("local", "ray://x:1", "address")])
def test_a_bad_choice_is_an_executor_error_naming_the_option(kind: str, address: str | None, option: str) -> None:
    with pytest.raises(ExecutorError) as err:
        make_executor(kind, address)
    assert err.value.option == option and not isinstance(err.value, SpecError)


def test_a_worker_that_dies_is_an_executor_error() -> None:
    with LocalExecutor(2) as executor, pytest.raises(ExecutorError) as err:
        run(executor, die, 4)
    assert err.value.option is None and "ended abruptly" in str(err.value)


def test_a_tasks_own_exception_reaches_the_caller_unchanged() -> None:
    with LocalExecutor(2) as executor, pytest.raises(ZeroDivisionError):
        run(executor, refuse, 4)
