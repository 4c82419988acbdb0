"""What a search (or a sweep) keeps in each worker process between simulations, and the functions the executors
run.

A search simulates hundreds of candidates on one cluster. Each worker process (a process of the local pool, a Ray
worker, or this process for the inline executor) keeps the built network of the cluster its last candidate ran
on, so that the next candidate on the same cluster does not build the graph, the routes and the collective
phases again. This one slot is the only state simcore keeps between calls, and it is a cache: a candidate's
result is the same whether the network was built for it or reused (`simulate` says so of its `network`).

The cyclic garbage collector is paused while a candidate is simulated: the engine allocates hundreds of
thousands of short-lived objects, which the collector would scan again and again (a quarter of the time of a
large candidate), and it makes no reference cycles, so nothing waits for the collector meanwhile. It is turned
back on (if it was on) when the candidate ends, so a process that runs candidates inline, a server's job worker
say, collects as usual between them.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from simcore.network import Network, shared_network
from simcore.planning.rank import Evaluation, evaluate
from simcore.simulate import Outcome, Scenario, simulate


class NetworkCache:
    """The process's built network of the cluster and collective algorithm asked for (simcore/network.py)."""

    def network_for(self, scenario: Scenario) -> Network:
        return shared_network(scenario.cluster, scenario.algorithm)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (back to how it was after it)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


# Per process: the cache of the process this module is imported in (each worker imports it once).
_CACHE = NetworkCache()


@dataclass(frozen=True, slots=True)
class Overdue:
    """A candidate stopped at its deadline (the search's time limit): it has no figures."""

    index: int


class _PastDeadline(Exception):
    pass


def evaluate_candidate(task: tuple[int, Scenario] | tuple[int, Scenario, float | None]) -> Evaluation | Overdue:
    """`evaluate` one (index, scenario) or (index, scenario, deadline) task on this process's cached network with
    the collector paused; with a deadline (a `time.time()`, None: none) the simulation stops when it passes (the
    engine reports its progress about 200 times a run) and the task returns `Overdue`. A module-level function,
    so that the process pool and Ray can run it."""
    index, scenario = task[0], task[1]
    deadline = task[2] if len(task) > 2 else None
    network = _CACHE.network_for(scenario)
    progress = None
    if deadline is not None:
        def progress(done: int, total: int) -> None:
            if time.time() >= deadline:
                raise _PastDeadline
    with gc_paused():
        try:
            return evaluate((index, scenario), network, progress)
        except _PastDeadline:
            return Overdue(index)


def simulate_in_worker(scenario: Scenario) -> Outcome:
    """`simulate` on this process's cached network with the collector paused (a sweep's points)."""
    network = _CACHE.network_for(scenario)
    with gc_paused():
        return simulate(scenario, network)
