"""The exhaustive best of a search space, found by events without simulating every layout: each feasible layout's
tokens/s ceiling (simcore/planning/floor.py: its busiest rank's passes and optimizer step, which no simulation of
it can beat) is computed, and the layouts are simulated in order of their ceiling, best first, until the next
ceiling does not beat the best simulated. Every layout not simulated then has a ceiling at or under the best: the
answer is the best of every layout simulated, proven by a floor that trusts no estimate. Each simulated layout's
speed is checked against its ceiling (a layout faster than its ceiling would break the proof: the run fails).

Only the layouts the search itself may simulate take part: a candidate over the service's engine-event or memory
limit (service/search_limits.py, the request's bounds) is screened by the search as it is here, and counted.

Used by bench/search_proof.py --exhaustive CASE, which stores the answer with the code version.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from api_schemas.search import search_request_from
from service import convert as adapters
from service.executors import make_executor
from service.search import prepare
from service.search_limits import screen_for
from simcore.planning.floor import tokens_ceiling
from simcore.planning.prune import plan_search
from simcore.planning.rank import describe
from simcore.planning.worker import evaluate_candidate
from simcore.simulate import Scenario
from topology.hardware import GPUS

CEILING_BATCH = 64  # layouts per ceiling task (a task's pickled scenarios and results stay small)


@dataclass(frozen=True, slots=True)
class Exhaustive:
    best: str
    tokens_per_s: float
    feasible: int
    simulated: int
    screened: int  # over the search's limits, with a ceiling above the best: neither side simulates them
    tightest: float  # the highest simulated / ceiling ratio seen (at most 1)
    wall_s: float


def _ceilings(task: tuple[int, list[Scenario]]) -> tuple[int, list[float]]:
    start, scenarios = task
    return start, [tokens_ceiling(s) for s in scenarios]


def exhaustive_best(request: dict[str, Any], workers: int | None = None) -> Exhaustive:
    """The best layout of the search `request` (one cluster size, the fastest goal) by tokens/s, proven as the
    module docstring says."""
    started = time.perf_counter()
    req = search_request_from(dict(request))
    base, clusters, goal = prepare(req)
    if len(clusters) > 1 or req.objective != "time":
        raise ValueError("the exhaustive best is found for one cluster size and the time objective")
    cluster = base.cluster
    plan = plan_search(base.model, cluster.num_gpus, cluster.gpus_per_node, GPUS[cluster.gpu],
                       req.global_batch_size, adapters.to_space(req.space), base.cost_parameters)
    scenarios = [replace(base, layout=layout, training=goal.training) for layout in plan.candidates]
    ceilings = [0.0] * len(scenarios)
    with make_executor(workers=workers) as runner:
        def chunks() -> Iterator[tuple[int, list[Scenario]]]:
            for start in range(0, len(scenarios), CEILING_BATCH):
                yield start, scenarios[start:start + CEILING_BATCH]

        def got(result: tuple[int, list[float]]) -> None:
            start, values = result
            ceilings[start:start + len(values)] = values

        runner.run(_ceilings, chunks(), got, lambda: False)
    order = sorted(range(len(scenarios)), key=lambda i: (-ceilings[i], i))
    screen = screen_for(req.bounds)
    best: list[tuple[float, int]] = []  # (tokens/s, index) of the best simulated so far
    tightest, simulated, screened = 0.0, 0, 0

    def tasks() -> Iterator[tuple[int, Scenario]]:
        nonlocal screened
        for i in order:
            if best and ceilings[i] <= best[0][0]:
                return  # this ceiling and every one after it are at or under the best
            if screen is not None and screen.reason(screen.cost(scenarios[i])) is not None:
                screened += 1
                continue
            yield i, scenarios[i]

    def done(e: Any) -> None:
        nonlocal tightest, simulated
        simulated += 1
        ratio = e.tokens_per_s / ceilings[e.index]
        if ratio > 1 + 1e-9:
            raise AssertionError(f"{describe(plan.candidates[e.index])}: simulated {e.tokens_per_s:,.0f} tokens/s, "
                                 f"over its ceiling {ceilings[e.index]:,.0f}: the floor does not hold")
        tightest = max(tightest, ratio)
        if e.fits and (not best or (e.tokens_per_s, -e.index) > (best[0][0], -best[0][1])):
            best[:] = [(e.tokens_per_s, e.index)]

    with make_executor(workers=workers) as runner:
        runner.run(evaluate_candidate, tasks(), done, lambda: False)
    if not best:
        raise ValueError("no feasible layout")
    speed, index = best[0]
    layout = plan.candidates[index]
    return Exhaustive(f"{describe(layout)}", speed, len(scenarios), simulated, screened, tightest,
                      time.perf_counter() - started)
