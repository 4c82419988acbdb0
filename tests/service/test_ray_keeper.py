"""A local Ray runtime started by the Ray executor lives below a keeper process and ends with the executor: its
tasks' results come back with their index, and when the executor's block ends every process of the runtime (the
keeper, GCS server, raylet, agents, workers) is gone. That it also ends when its owner is killed with SIGKILL is
tests/service/cli/test_orphan_workers.py's. Skipped where ray is not installed; Linux only (reads /proc)."""

from __future__ import annotations

import os
import sys
import time
from types import ModuleType

import pytest

ray = pytest.importorskip("ray")

from bench_scripts import load  # noqa: E402

from service.executors import make_executor  # noqa: E402
from service.executors.ray_keeper import KeeperError, LocalRay  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from /proc")
GONE_S = 10.0  # generous: the keeper kills at once, but a loaded machine may be slow to schedule it


def procs() -> ModuleType:
    module = load("orphan_workers")
    return module


def square(item: tuple[int, int]) -> tuple[int, int]:
    return item[0], item[1] * item[1]


def wait_gone(bench: ModuleType, processes: list[object]) -> list[object]:
    end = time.monotonic() + GONE_S
    while time.monotonic() < end and any(bench.alive(p) for p in processes):
        time.sleep(0.05)
    return [p for p in processes if bench.alive(p)]


def test_the_keeper_stops_every_process_below_it() -> None:
    bench = procs()
    local = LocalRay(num_cpus=1)
    try:
        below = bench.descendants(local.pid)
        titles = " ".join(bench.title(p.pid) for p in below)
        assert "gcs_server" in titles and "raylet" in titles, titles
        assert local.address.count(":") == 1
    finally:
        local.stop()
    assert wait_gone(bench, below) == []


def test_a_runtime_that_cannot_start_says_why() -> None:
    with pytest.raises(KeeperError, match="did not start: ValueError: .*CPU"):
        LocalRay(num_cpus=-1)


@pytest.mark.skipif(ray.is_initialized(), reason="this process already runs a Ray runtime")
def test_the_ray_executor_runs_on_a_runtime_that_ends_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = procs()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    before = {p.pid for p in bench.descendants(os.getpid())}
    out: dict[int, int] = {}
    with make_executor("ray", workers=2) as executor:
        below = [p for p in bench.descendants(os.getpid()) if p.pid not in before]
        assert any("service.executors.ray_keeper" in bench.title(p.pid) for p in below)
        executor.run(square, iter([(i, i) for i in range(6)]), lambda r: out.__setitem__(*r), lambda: False)
        below += [p for p in bench.descendants(os.getpid()) if p.pid not in before and p not in below]
    assert out == {i: i * i for i in range(6)}
    assert not ray.is_initialized()
    assert wait_gone(bench, below) == []
