"""Layout search documents: the runner behind `clustersim search` and POST /v1/searches.

The search itself is simcore.planning.search's, on domain objects; this module turns a search request into
them (through service.convert) and the domain's result into the result document (JSON-ready).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from api_schemas import LayoutIn, SimulationRequest
from api_schemas.search import SearchRequest, search_request_from
from service import convert as adapters
from service.executors import make_executor
from service.provenance import package_version
from service.search_limits import screen_for
from simcore import ClusterSpec, Scenario, SpecError, check
from simcore.planning.objective import Goal, Objective
from simcore.planning.rank import Evaluation, describe
from simcore.planning.search import Bounds, Progress, Ranked, SearchResult, search
from simcore.planning.space import space_bound

__all__ = ["SCREENED_SHOWN", "Progress", "baseline_scenario", "prepare", "run_search", "space_size_bound"]

SCREENED_SHOWN = 10  # screened candidates the result lists (the first in the estimate's order); `search` counts all

ESTIMATE_ORDER = {
    "time": "closed-form estimate of tokens/s, most promising first; ranked by simulated tokens/s",
    "cost": "closed-form estimate of the run's cost, cheapest first; ranked by the simulated run's cost",
    "goodput_time": "closed-form estimate of the run's days with failures, fewest first; ranked by the simulated "
                    "run's days with failures",
}
# Without bounds.exhaustive: only what can still win is simulated (simcore.planning.frontier).
BOUNDED_ORDER = ("the candidates whose bound (the closed-form estimate over its kind's measured error) can beat the "
                 "best simulated, most chance to win per estimated second first; ranked by the simulated {}")
RANKED_BY = {"time": "tokens/s", "cost": "run's cost", "goodput_time": "run's days with failures"}


def _scenario(request: SearchRequest, layout: LayoutIn) -> Scenario:
    return adapters.to_scenario(SimulationRequest(model=request.model, cluster=request.cluster, layout=layout,
                                                  options=request.options))


def _clusters(request: SearchRequest) -> tuple[ClusterSpec, ...]:
    """The cluster sizes the space lists (whole nodes of the request's cluster); () for the request's own."""
    if request.space.num_nodes is None:
        return ()
    sizes = []
    for i, nodes in enumerate(request.space.num_nodes):
        cluster = request.cluster.model_copy(update={"num_nodes": nodes, "num_gpus": None})
        try:
            layout = LayoutIn(dp=1, tp=1, pp=1, global_batch_size=request.global_batch_size)
            sizes.append(adapters.to_cluster(SimulationRequest(model=request.model, cluster=cluster, layout=layout,
                                                               options=request.options)))
        except SpecError as err:
            raise SpecError(f"space.num_nodes[{i}]", f"{err.field}: {err.rule}") from None
    return tuple(sizes)


def _goal(request: SearchRequest) -> Goal:
    training = adapters.to_training(request.training) if request.training is not None else None
    return Goal(Objective(request.objective), training).validate()


def baseline_scenario(request: SearchRequest, base: Scenario) -> Scenario | None:
    """The request's baseline layout as a scenario on the search's model and cluster (None without one);
    raises SpecError naming ``baseline.<field>``."""
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


def prepare(request: SearchRequest) -> tuple[Scenario, tuple[ClusterSpec, ...], Goal]:
    """The search's base scenario (the request's cluster), the cluster sizes of `space.num_nodes` (() for the
    request's alone) and its goal, with the baseline and the space checked too: raises SpecError naming the
    field (``baseline.tp``). Cheap: nothing is enumerated."""
    base = _scenario(request, LayoutIn(dp=1, tp=1, pp=1, global_batch_size=request.global_batch_size))
    baseline_scenario(request, base)
    adapters.to_space(request.space)
    return base, _clusters(request), _goal(request)


def space_size_bound(request: SearchRequest, base: Scenario, clusters: tuple[ClusterSpec, ...]) -> int:
    """An upper bound of the layouts the search would generate over its cluster sizes (before enumerating)."""
    space = adapters.to_space(request.space)
    return sum(space_bound(base.model, c.num_gpus, c.gpus_per_node, space) for c in clusters or (base.cluster,))


def _ranked(entry: Ranked) -> dict[str, Any]:
    out = {"layout": adapters.layout_json(entry.layout), "summary": describe(entry.layout),
           "num_gpus": entry.cluster.num_gpus, "num_nodes": entry.cluster.num_nodes, **_figures(entry.evaluation)}
    if entry.evaluation.training is not None:
        out["training"] = adapters.training_json(entry.evaluation.training)
    return out


def result_document(req: SearchRequest, base: Scenario, result: SearchResult) -> dict[str, Any]:
    """The search result document of the contract."""
    model, cluster, plan = base.model, base.cluster, result.plan
    out: dict[str, Any] = {
        "problem": {
            "model": req.model.preset or "custom", "parameters": model.total_parameters(),
            "gpu": str(cluster.gpu), "num_gpus": cluster.num_gpus, "gpus_per_node": cluster.gpus_per_node,
            "global_batch_size": req.global_batch_size, "objective": req.objective,
            "cluster_sizes": [{"num_nodes": c.num_nodes, "num_gpus": c.num_gpus}
                              for c in result.clusters or (cluster,)],
            # the search's own model and cluster: with a ranked layout, the request `clustersim export` writes
            "request": {"model": req.model.model_dump(exclude_none=True, exclude_defaults=True),
                        "cluster": req.cluster.model_dump(exclude_none=True, exclude_defaults=True)},
        },
        "best": None,
        "top": [],
        "search": {
            "generated": plan.generated,
            "pruned": plan.pruned,
            "discarded": dict(plan.discarded),
            "feasible": len(plan.candidates),
            "simulated": result.simulated,
            "not_simulated": len(plan.candidates) - result.simulated,
            "screened": len(result.screened),
            "estimated_s": round(result.estimated_s, 3) if result.estimated_s is not None else None,
            "stopped_by": str(result.stopped_by),
            "order": ESTIMATE_ORDER[req.objective] if req.bounds.exhaustive else
            BOUNDED_ORDER.format(RANKED_BY[req.objective]),
            "could_win": result.could_win,
            "screened_could_win": result.screened_could_win,
            "stopped_running": result.stopped_running,
            "estimate_error": [
                {"kind": r.kind, "placement": r.placement, "simulated": r.simulated, "ratio_min": r.ratio_min,
                 "ratio_max": r.ratio_max, "bound_low": r.low, "bound_high": r.high, "bound_exceeded": r.exceeded}
                for r in result.errors if r.simulated],
        },
        "screened": [
            {"layout": adapters.layout_json(entry.layout), "summary": describe(entry.layout),
             "num_gpus": entry.cluster.num_gpus, "num_nodes": entry.cluster.num_nodes,
             "estimated_tokens_per_s": entry.estimated_tokens_per_s, "estimated_events": entry.cost.events,
             "estimated_seconds": round(entry.cost.seconds, 3),
             "estimated_memory_mb": entry.cost.memory_bytes // (1024 * 1024), "reason": entry.reason}
            for entry in result.screened[:SCREENED_SHOWN]
        ],
        "discarded_families": [
            {"family": {"dp": f[0], "tp": f[1], "pp": f[2], "zero_stage": f[3], "recompute": f[4],
                        "sequence_parallel": f[5], **({"cp": f[6]} if f[6] > 1 else {})},
             "layouts": record.layouts, "kind": record.first_discard.kind, "reason": record.first_discard.reason}
            for f, record in plan.discarded_families() if record.first_discard is not None
        ],
    }
    for position, entry in enumerate(result.top, start=1):
        out["top"].append({"rank": position, **_ranked(entry), "estimated_tokens_per_s": entry.estimated_tokens_per_s,
                           "why": list(entry.why)})
    if out["top"]:
        out["best"] = out["top"][0]
    if result.baseline is not None:
        baseline = {**_ranked(result.baseline), "why": list(result.baseline.why)}
        if result.baseline_family_discard is not None:
            baseline["family_discarded"] = result.baseline_family_discard
        if result.best_speedup is not None:
            baseline["best_speedup"] = result.best_speedup
        out["baseline"] = baseline
    run = result.run
    out["run"] = {"executor": run.executor, "workers": run.workers, "simulator_version": package_version(),
                  "planning_s": run.planning_s, "wall_time_s": run.wall_time_s}
    return out


def run_search(request: SearchRequest | Mapping[str, Any], *, top_k: int | None = None,
               max_candidates: int | None = None, time_limit_s: float | None = None, executor: str = "local",
               address: str | None = None, workers: int | None = None,
               progress: Progress | None = None) -> dict[str, Any]:
    """Run one search and return its result document (JSON-ready). Arguments override the request's bounds;
    the request's candidate limits and budget of estimated seconds (service.search_limits) screen its
    candidates. Raises RequestError or SpecError for invalid input, ExecutorError when the executor cannot start
    or fails."""
    req = request if isinstance(request, SearchRequest) else search_request_from(dict(request))
    given = req.bounds
    bounds = Bounds(top_k=top_k if top_k is not None else given.top_k,
                    max_candidates=max_candidates if max_candidates is not None else given.max_candidates,
                    time_limit_s=time_limit_s if time_limit_s is not None else given.time_limit_s,
                    exhaustive=given.exhaustive)
    base, clusters, goal = prepare(req)
    result = search(base, req.global_batch_size, adapters.to_space(req.space), bounds, goal=goal,
                    clusters=clusters, baseline=baseline_scenario(req, base),
                    executor=make_executor(executor, address, workers), progress=progress,
                    screen=screen_for(req.bounds))
    return result_document(req, base, result)
