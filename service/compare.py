"""Comparison: several simulation requests side by side (`clustersim compare`, POST /v1/comparisons).

`compare_requests` validates every request first (one invalid request fails the whole comparison, naming it),
simulates each exactly as `clustersim simulate` does, and returns ``{"rows": [...]}``, one row per request in
the order given. The HTTP service runs each simulation in its worker processes instead and builds the same
document from the results with `comparison`.

A row: `label`, `summary` (the layout in one line), `layout` (dp, tp, pp, virtual_stages, microbatch_size,
global_batch_size, schedule, zero_stage, recompute; precision where not bf16, cp and ep where above 1), `gpu` (the
cluster's GPU, service.naming), `iteration_time_s`, `tokens_per_s`, `samples_per_s`, `mfu`, `hfu`,
`bubble_fraction` (as in the result), `stage_imbalance`, `exposed_communication_s` (`tp`, `pp`, `dp`, and `cp`,
`ep` where used: the result's time_breakdown_s tp_comm, pp_comm, dp_comm, cp_comm and ep_comm, seconds the
critical rank's compute stream waited for each kind; dp includes ZeRO), `memory` (`peak_gib_per_gpu`,
`capacity_gib`, `fits`) and `warnings`.

`stage_imbalance` is the largest per-stage busy time over the mean per-stage busy time, from the result's
`stages[]` (busy_fraction is each stage's busy time over the same iteration time, so their ratio is the ratio of
busy times): 1.0 when the stages are equally loaded, and 1.0 when there is one stage; 1.25 means the busiest
stage works 25% more than the average one, which the others spend waiting on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from api_schemas import FieldError, RequestError, SimulationRequest, from_validation_error
from api_schemas.compare import item_field
from service import convert as adapters
from service.naming import gpu_name
from simcore import Scenario, SpecError, check, simulate
from simcore.planning.rank import describe

__all__ = ["ComparisonError", "comparison", "comparison_row", "compare_requests", "stage_imbalance"]


class ComparisonError(RequestError):
    """One request of a comparison is invalid. `index` (0-based) says which and `error` is its own error (fields
    as in a single request, ``layout.tp``); the details name the field in the comparison (``requests[1].layout.tp``).
    """

    def __init__(self, index: int, error: RequestError) -> None:
        super().__init__(FieldError(item_field(index, d.field), d.rule) for d in error.details)
        self.index = index
        self.error = error

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (the base class pickles its details only)
        return (ComparisonError, (self.index, self.error))


def stage_imbalance(stages: Sequence[Mapping[str, Any]]) -> float:
    """Max over stages of busy_fraction over its mean; 1.0 for one stage (or none busy)."""
    busy = [float(s["busy_fraction"]) for s in stages]
    mean = sum(busy) / len(busy) if busy else 0.0
    if len(busy) < 2 or mean <= 0.0:
        return 1.0
    return max(busy) / mean


def _precision(request: SimulationRequest) -> dict[str, Any]:
    """The precision, shown when it is not the default bf16 (with its FP8 recipe for fp8)."""
    layout = request.layout
    if layout.precision == "bf16":
        return {}
    if layout.precision == "fp8":
        return {"precision": "fp8", "fp8_recipe": layout.fp8_recipe or "tensorwise",
                **({"fp8_scaling": layout.fp8_scaling} if layout.fp8_scaling else {})}
    return {"precision": layout.precision}


def comparison_row(label: str, request: SimulationRequest, result: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the comparison from a request and its result document (what `clustersim simulate` prints)."""
    layout = request.layout
    breakdown = result["time_breakdown_s"]
    memory = result.get("memory") or {}
    return {
        "label": label,
        "summary": describe(adapters.to_scenario(request).layout),
        "layout": {"dp": layout.dp, "tp": layout.tp, "pp": layout.pp, "virtual_stages": layout.virtual_stages,
                   "microbatch_size": layout.microbatch_size, "global_batch_size": layout.global_batch_size,
                   "schedule": layout.schedule, "zero_stage": layout.zero_stage, "recompute": layout.recompute,
                   **_precision(request), **({"cp": layout.cp} if layout.cp > 1 else {}),
                   **({"ep": layout.ep} if layout.ep > 1 else {})},
        "gpu": gpu_name(request.cluster),
        "iteration_time_s": result["iteration_time_s"],
        "tokens_per_s": result["tokens_per_s"],
        "samples_per_s": result["samples_per_s"],
        "mfu": result["mfu"],
        "hfu": result["hfu"],
        "bubble_fraction": result["bubble_fraction"],
        "stage_imbalance": stage_imbalance(result["stages"]),
        "exposed_communication_s": {"tp": breakdown["tp_comm"], "pp": breakdown["pp_comm"],
                                    "dp": breakdown["dp_comm"],
                                    **({"cp": breakdown["cp_comm"]} if "cp_comm" in breakdown else {}),
                                    **({"ep": breakdown["ep_comm"]} if "ep_comm" in breakdown else {})},
        "memory": {"peak_gib_per_gpu": memory.get("peak_gib_per_gpu"), "capacity_gib": memory.get("capacity_gib"),
                   "fits": memory.get("fits")},
        "warnings": list(result.get("warnings", [])),
        **_training_row(result.get("training")),
    }


def _training_row(training: Mapping[str, Any] | None) -> dict[str, Any]:
    """The whole run's headline figures (with checkpoints and failures), where the request has a training section."""
    if not training:
        return {}
    run = training["with_failures"]
    figures = {"days": run["days"], "gpu_hours": run["gpu_hours"], "cost_usd": run.get("cost_usd"),
               "goodput": training["goodput"]}
    return {"training": {key: value for key, value in figures.items() if value is not None}}


def comparison(rows: Iterable[tuple[str, SimulationRequest, Mapping[str, Any]]]) -> dict[str, Any]:
    """The comparison document from (label, request, result) triples, in their order."""
    return {"rows": [comparison_row(label, request, result) for label, request, result in rows]}


def _validated(index: int, document: SimulationRequest | Mapping[str, Any]) -> tuple[SimulationRequest, Scenario]:
    try:
        request = (document if isinstance(document, SimulationRequest)
                   else SimulationRequest.model_validate(document))
        scenario = adapters.to_scenario(request)
        check(scenario)
    except ValidationError as exc:
        raise ComparisonError(index, from_validation_error(exc)) from None
    except (SpecError, RequestError) as err:
        raise ComparisonError(index, adapters.request_error(err)) from None
    return request, replace(scenario, keep_spans=False)  # a comparison shows no trace: do not record spans


def compare_requests(items: Sequence[tuple[str, SimulationRequest | Mapping[str, Any]]]) -> dict[str, Any]:
    """Simulate each (label, request) in turn and return the comparison document ``{"rows": [...]}``.

    A request is a request document (a mapping, as read from YAML or JSON) or an already validated
    SimulationRequest. Every request is validated (schema and domain rules) before any is simulated; the first
    invalid one raises ComparisonError, which names it by index.
    """
    return comparison(compare_results(items))


def compare_results(items: Sequence[tuple[str, SimulationRequest | Mapping[str, Any]]]
                    ) -> list[tuple[str, SimulationRequest, dict[str, Any]]]:
    """(label, request, full result document, echoing its request) for each (label, request), validated as
    compare_requests does (every request before any is simulated); for callers that need more than the comparison's
    rows (pictures)."""
    prepared = [(label, *_validated(index, document)) for index, (label, document) in enumerate(items)]
    return [(label, request, adapters.to_response(simulate(scenario), request=request))
            for label, request, scenario in prepared]
