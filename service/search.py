"""Layout search: the runner behind `clustersim search` and POST /v1/searches.

Enumerate the space the request generates (simcore.planning.space), discard what breaks a layout rule or does not
fit in memory, order the rest by a closed-form estimate, simulate the most promising ones (up to the bounds) on
an executor, and rank what was simulated by tokens/s, saying why for each and why each discarded family was.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from api_schemas import LayoutIn, SimulationRequest
from api_schemas.search import SearchRequest, SearchSpaceIn, search_request_from
from service import convert as adapters
from simcore import GIB, GPUS, SpecError
from simcore.domain.layout import Layout, Precision, Recompute, Schedule
from simcore.planning.executors import make_executor
from simcore.planning.rank import Estimator, Evaluation, describe, evaluate, explain, rank
from simcore.planning.space import Space, family_of, plan_search
from simcore.simulate import VERSION, Network, Scenario, build_network, check

Progress = Callable[[int, int], None]  # (candidates done, candidates to simulate)

# Per worker process: the built network of the cluster its candidates run on (a search has one cluster), so
# each candidate does not build the graph, routes and collective phases again.
_NETWORK: list[Network] = []


def evaluate_reusing_network(task: tuple[int, Scenario]) -> Evaluation:
    """`evaluate`, sharing one built network per process across candidates on the same cluster.

    The cyclic garbage collector is paused while a candidate is simulated: the engine allocates hundreds of
    thousands of short-lived objects, which the collector would scan again and again (a quarter of the time of a
    large candidate), and it makes no reference cycles, so nothing waits for the collector meanwhile."""
    scenario = task[1]
    if not _NETWORK or _NETWORK[0].spec != scenario.cluster or _NETWORK[0].algorithm is not scenario.algorithm:
        _NETWORK[:] = [build_network(scenario.cluster, scenario.algorithm)]
    collecting = gc.isenabled()
    gc.disable()
    try:
        return evaluate(task, _NETWORK[0])
    finally:
        if collecting:
            gc.enable()


BASELINE = -1  # the index of the baseline layout among the simulated tasks


def to_space(space: SearchSpaceIn) -> Space:
    """The request's space as the domain's."""

    def ints(values: list[int] | None) -> tuple[int, ...] | None:
        return tuple(values) if values is not None else None

    return Space(
        dp=ints(space.dp), tp=ints(space.tp), pp=ints(space.pp), virtual_stages=ints(space.virtual_stages),
        microbatch_size=ints(space.microbatch_size),
        schedule=tuple(Schedule(s) for s in space.schedule) if space.schedule is not None else None,
        zero_stage=tuple(space.zero_stage) if space.zero_stage is not None else None,
        recompute=tuple(Recompute(r) for r in space.recompute) if space.recompute is not None else None,
        sequence_parallel=tuple(space.sequence_parallel) if space.sequence_parallel is not None else None,
        placement=tuple(space.placement) if space.placement is not None else None,
        overlap_grad_reduce=tuple(space.overlap_grad_reduce), tp_comm_overlap=tuple(space.tp_comm_overlap),
        precision=tuple(Precision(p) for p in space.precision),
        max_microbatch_size=space.max_microbatch_size, max_virtual_stages=space.max_virtual_stages,
        min_free_memory_bytes=space.min_free_memory_gib * GIB,
    )


def layout_json(layout: Layout) -> dict[str, Any]:
    """A layout as the request's `layout` section (paste it into a simulation request)."""
    return {
        "dp": layout.dp, "tp": layout.tp, "pp": layout.pp, "virtual_stages": layout.virtual_stages,
        "microbatch_size": layout.microbatch_size, "global_batch_size": layout.global_batch_size,
        "schedule": str(layout.schedule), "sequence_parallel": layout.sequence_parallel,
        "zero_stage": layout.zero_stage, "recompute": str(layout.recompute),
        "overlap_grad_reduce": layout.overlap_grad_reduce, "placement": layout.placement,
        "tp_comm_overlap": layout.tp_comm_overlap, "precision": str(layout.precision),
        **({"pipeline_partition": str(layout.pipeline_partition)} if layout.pipeline_partition else {}),
        **({"encoder_pipeline_stages": layout.encoder_pipeline_stages} if layout.encoder_pipeline_stages else {}),
        **({"zero3_gather_bucket_elements": layout.zero3_gather_bucket_elements}
           if layout.zero3_gather_bucket_elements else {}),
    }


def _scenario(request: SearchRequest, layout: LayoutIn) -> Scenario:
    return adapters.to_scenario(SimulationRequest(model=request.model, cluster=request.cluster, layout=layout,
                                                  options=request.options))


def _baseline(request: SearchRequest, base: Scenario) -> Scenario | None:
    if request.baseline is None:
        return None
    try:
        scenario = _scenario(request, request.baseline)
        check(scenario)
    except SpecError as err:
        field = err.field.replace("layout.", "baseline.", 1) if err.field.startswith("layout.") else err.field
        raise SpecError(field, err.rule) from None
    return replace(scenario, model=base.model, cluster=base.cluster)


def _figures(e: Evaluation) -> dict[str, Any]:
    return {
        "tokens_per_s": e.tokens_per_s, "samples_per_s": e.samples_per_s, "iteration_time_s": e.iteration_time_s,
        "mfu": e.mfu, "hardware_tflops_per_gpu": e.hardware_tflops_per_gpu, "bubble_fraction": e.bubble_fraction,
        "pipeline_overhead": e.pipeline_overhead, "exposed_communication_s": e.exposed_communication_s,
        "communication_s": dict(e.communication_s), "time_breakdown_s": dict(e.time_breakdown_s),
        "memory": {"peak_gib_per_gpu": e.peak_memory_gib, "capacity_gib": e.capacity_gib,
                   "headroom_gib": e.headroom_gib, "fits": e.fits},
        "warnings": list(e.warnings),
    }


def run_search(request: SearchRequest | Mapping[str, Any], *, top_k: int | None = None,
               max_candidates: int | None = None, time_limit_s: float | None = None, executor: str = "local",
               address: str | None = None, workers: int | None = None,
               progress: Progress | None = None) -> dict[str, Any]:
    """Run one search and return its result document (JSON-ready). Arguments override the request's bounds.
    Raises RequestError or SpecError for invalid input."""
    started = time.perf_counter()
    req = request if isinstance(request, SearchRequest) else search_request_from(dict(request))
    bounds = req.bounds
    top_k = top_k if top_k is not None else bounds.top_k
    limit = max_candidates if max_candidates is not None else bounds.max_candidates
    seconds = time_limit_s if time_limit_s is not None else bounds.time_limit_s
    batch = req.global_batch_size
    base = _scenario(req, LayoutIn(dp=1, tp=1, pp=1, global_batch_size=batch))
    baseline = _baseline(req, base)
    model, cluster = base.model, base.cluster
    gpu = GPUS[cluster.gpu]

    plan = plan_search(model, cluster.num_gpus, cluster.gpus_per_node, gpu, batch, to_space(req.space))
    estimator = Estimator(model, cluster, base.cost_parameters)
    estimates = [estimator.tokens_per_s(layout) for layout in plan.candidates]
    order = sorted(range(len(plan.candidates)), key=lambda i: (-estimates[i], i))
    chosen = order if limit is None else order[:limit]
    planning_s = time.perf_counter() - started

    started_candidates = 0

    def tasks() -> Iterator[tuple[int, Scenario]]:
        nonlocal started_candidates
        if baseline is not None:
            yield BASELINE, baseline
        for i in chosen:
            started_candidates += 1
            yield i, replace(base, layout=plan.candidates[i])

    results: dict[int, Evaluation] = {}
    total = len(chosen) + (baseline is not None)
    timed_out = False

    def stop() -> bool:
        # The time limit counts from the start (planning included); at least one candidate is always simulated.
        nonlocal timed_out
        if seconds is not None and started_candidates > 0 and time.perf_counter() - started >= seconds:
            timed_out = True
        return timed_out

    def on_result(e: Evaluation) -> None:
        results[e.index] = e
        if progress is not None:
            progress(len(results), total)

    with make_executor(executor, address, workers) as runner:
        if progress is not None:
            progress(0, total)
        runner.run(evaluate_reusing_network, tasks(), on_result, stop)
        executor_name, worker_count = runner.name, runner.workers

    base_eval = results.pop(BASELINE, None)
    top = rank(list(results.values()), top_k)
    best = top[0] if top else None
    simulated = len(results)
    if timed_out and simulated < len(chosen):
        stopped_by = "time_limit"
    elif limit is not None and len(chosen) < len(plan.candidates):
        stopped_by = "max_candidates"
    else:
        stopped_by = "complete"

    out: dict[str, Any] = {
        "problem": {
            "model": req.model.preset or "custom", "parameters": model.total_parameters(),
            "gpu": str(cluster.gpu), "num_gpus": cluster.num_gpus, "gpus_per_node": cluster.gpus_per_node,
            "global_batch_size": batch,
        },
        "best": None,
        "top": [],
        "search": {
            "generated": plan.generated,
            "pruned": plan.pruned,
            "discarded": dict(plan.discarded),
            "feasible": len(plan.candidates),
            "simulated": simulated,
            "not_simulated": len(plan.candidates) - simulated,
            "stopped_by": stopped_by,
            "order": "closed-form estimate of tokens/s, most promising first; ranked by simulated tokens/s",
        },
        "discarded_families": [
            {"family": {"dp": f[0], "tp": f[1], "pp": f[2], "zero_stage": f[3], "recompute": f[4],
                        "sequence_parallel": f[5]},
             "layouts": record.layouts, "kind": record.first_discard.kind, "reason": record.first_discard.reason}
            for f, record in plan.discarded_families() if record.first_discard is not None
        ],
    }
    for position, e in enumerate(top, start=1):
        layout = plan.candidates[e.index]
        entry = {"rank": position, "layout": layout_json(layout), "summary": describe(layout), **_figures(e),
                 "estimated_tokens_per_s": estimates[e.index], "why": explain(layout, e, best)}
        out["top"].append(entry)
    if out["top"]:
        out["best"] = out["top"][0]
    if baseline is not None and base_eval is not None:
        entry = {"layout": layout_json(baseline.layout), "summary": describe(baseline.layout), **_figures(base_eval),
                 "why": explain(baseline.layout, base_eval)}
        fam = family_of(baseline.layout)
        record = plan.families.get(fam)
        if record is not None and record.feasible == 0 and record.first_discard is not None:
            entry["family_discarded"] = record.first_discard.reason
        if best is not None:
            entry["best_speedup"] = best.tokens_per_s / base_eval.tokens_per_s
        out["baseline"] = entry
    out["run"] = {"executor": executor_name, "workers": worker_count, "simulator_version": VERSION,
                  "planning_s": planning_s, "wall_time_s": time.perf_counter() - started}
    return out
