"""What the `clustersim` Python package does: requests in (a mapping as read from YAML or JSON, a validated
document, or a file path), the documents the HTTP API answers out, and pictures drawn by service.plots.

Conversion between documents and the domain is service.convert's; comparison and search are service.compare's
and service.search's. Invalid input raises InvalidRequest, a ValueError that names the field and the rule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from api_schemas import FieldError, RequestError, SimulationRequest, SimulationResult, from_validation_error
from api_schemas.compare import ComparisonResult
from api_schemas.loading import load_request_file
from api_schemas.search import SearchRequest, SweepRequest, load_search_file
from service import convert
from service.compare import ComparisonError, compare_requests
from service.plots.kinds import KINDS
from service.search import run_search
from simcore import Scenario, SpecError, check
from simcore import simulate as run_simulation

if TYPE_CHECKING:
    from service.plots import Figure

__all__ = ["InvalidRequest", "SimulationRequest", "SimulationResult", "Sweep", "compare", "plot", "request_from",
           "search", "simulate", "sweep"]

Request = Mapping[str, Any] | SimulationRequest | str | os.PathLike[str]


class InvalidRequest(ValueError):
    """Invalid input: `field` is the dotted path of the first bad field (e.g. 'layout.tp'), `rule` what must hold,
    `details` every problem found as (field, rule) pairs."""

    def __init__(self, details: Sequence[FieldError]) -> None:
        self.details = [(d.field, d.rule) for d in details] or [("request", "is invalid")]
        self.field, self.rule = self.details[0]
        super().__init__(str(RequestError(list(details))))


def _invalid(err: RequestError | SpecError | ValidationError) -> InvalidRequest:
    if isinstance(err, ValidationError):
        return InvalidRequest(from_validation_error(err).details)
    if isinstance(err, RequestError):
        return InvalidRequest(err.details)
    return InvalidRequest([FieldError(err.field, err.rule)])


def request_from(request: Request) -> SimulationRequest:
    """The validated request document from a mapping, a document or the path of a YAML or JSON file."""
    try:
        if isinstance(request, SimulationRequest):
            return request
        if isinstance(request, str | os.PathLike):
            return load_request_file(os.fspath(request))
        if isinstance(request, Mapping):
            return SimulationRequest.model_validate(dict(request))
    except (RequestError, ValidationError) as err:
        raise _invalid(err) from None
    raise TypeError(f"a request is a mapping, a SimulationRequest or a file path, not {type(request).__name__}")


def _prepare(request: Request, keep_spans: bool) -> tuple[SimulationRequest, Scenario]:
    """The validated document and its domain scenario, checked against the domain's rules (cheap)."""
    document = request_from(request)
    try:
        scenario = convert.to_scenario(document)
        check(scenario)
    except SpecError as err:
        raise _invalid(err) from None
    return document, convert.replace_spans(scenario) if keep_spans else scenario


def _execute(document: SimulationRequest, scenario: Scenario) -> tuple[SimulationResult, tuple[Any, ...]]:
    outcome = run_simulation(scenario)
    body = convert.to_response(outcome, include_trace=document.options.trace, request=document)
    return SimulationResult.model_validate(body), outcome.spans


def _run(request: Request, keep_spans: bool) -> tuple[SimulationRequest, SimulationResult, tuple[Any, ...]]:
    document, scenario = _prepare(request, keep_spans)
    return (document, *_execute(document, scenario))


def simulate(request: Request) -> SimulationResult:
    """Simulate one training iteration; the result document POST /v1/simulations answers (`.model_dump()`
    gives its JSON). With `options.trace` the result carries the Chrome trace, which `plot` can draw."""
    return _run(request, keep_spans=False)[1]


def compare(requests: Sequence[Request] | Mapping[str, Request], labels: Sequence[str] | None = None
            ) -> ComparisonResult:
    """Simulate requests side by side: the comparison document (one row of headline figures per request).
    `requests` is a sequence (labels default to 'requests[i]') or a mapping of label to request."""
    if isinstance(requests, Mapping):
        labels, requests = list(requests), list(requests.values())
    items = list(requests)
    names = list(labels) if labels is not None else [f"requests[{i}]" for i in range(len(items))]
    if len(names) != len(items):
        raise InvalidRequest([FieldError("labels", f"give one label per request ({len(items)})")])
    documents: list[SimulationRequest | Mapping[str, Any]] = []
    for i, item in enumerate(items):
        try:
            documents.append(item if isinstance(item, Mapping | SimulationRequest) else request_from(item))
        except InvalidRequest as err:
            raise InvalidRequest([FieldError(f"requests[{i}].{f}", r) for f, r in err.details]) from None
    try:
        return ComparisonResult.model_validate(compare_requests(list(zip(names, documents))))
    except ComparisonError as err:
        raise _invalid(err) from None


def search(request: Mapping[str, Any] | SearchRequest | str | os.PathLike[str], *, top_k: int | None = None,
           max_candidates: int | None = None, time_limit_s: float | None = None, workers: int | None = None
           ) -> dict[str, Any]:
    """Search the layouts of a model on a cluster at a global batch (a search request, or a simulation request
    whose layout becomes the baseline); the document POST /v1/searches answers, ranked best first."""
    try:
        if isinstance(request, str | os.PathLike):
            request = load_search_file(os.fspath(request))
        document = request if isinstance(request, SearchRequest) else dict(request)
        return run_search(document, top_k=top_k, max_candidates=max_candidates, time_limit_s=time_limit_s,
                          workers=workers)
    except (RequestError, SpecError, ValidationError) as err:
        raise _invalid(err) from None


@dataclass(frozen=True, slots=True)
class Sweep:
    """A sweep of one field: its dotted path, the values in order, and each value's result document."""

    field: str
    values: tuple[Any, ...]
    results: tuple[SimulationResult, ...]

    def figures(self, metric: str) -> list[float]:
        """A top-level figure of every result, e.g. 'bubble_fraction', 'mfu', 'iteration_time_s'."""
        values = [getattr(r, metric, None) for r in self.results]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            raise InvalidRequest([FieldError("metric", f"'{metric}' is not a number of the result document")])
        return [float(v) for v in values]  # type: ignore[arg-type]


def sweep(base: Mapping[str, Any] | str | os.PathLike[str], field: str, values: Sequence[Any]) -> Sweep:
    """Simulate `base` once for each value of one field (a dotted path such as 'layout.global_batch_size')."""
    if isinstance(base, str | os.PathLike):
        base = request_from(base).model_dump(exclude_none=True, exclude_unset=True)
    try:
        points = SweepRequest(base=dict(base), grid={field: list(values)}).requests()
    except (RequestError, ValidationError) as err:
        raise _invalid(err) from None
    prepared = []
    for value, (_point, request) in zip(values, points):  # every point checked before any is simulated
        try:
            prepared.append(_prepare(request, keep_spans=False))
        except InvalidRequest as err:
            raise InvalidRequest([FieldError(f, f"{r} (sweep value {value!r})") for f, r in err.details]) from None
    return Sweep(field, tuple(values), tuple(_execute(*point)[0] for point in prepared))


def plot(subject: Any, out: str | os.PathLike[str] | None = None, *, kind: str = "timeline",
         metric: str = "iteration_time_s", title: str | None = None) -> Figure:
    """Draw a picture and return the matplotlib Figure (also written to `out`, .svg or .png, when given).

    - a request (mapping, document or file): simulated, then drawn as `kind` (timeline, breakdown, memory);
    - a SimulationResult: `breakdown` or `memory`, or `timeline` when it carries a trace (`options.trace`);
    - a Sweep: `metric` against the swept field;
    - several results (a mapping of label to result, or a sequence): side by side, time by category;
    - a search result (what `search` gives): the top layouts and the largest discarded families.

    `title` replaces the picture's title (by default it names what was simulated, where that is known).
    """
    # (matplotlib is imported here, when a picture is drawn: `import clustersim` stays without it)
    from service.plots import (
        comparison_figure,
        result_figure,
        save,
        search_figure,
        spans_from_chrome_trace,
        sweep_figure,
    )

    if kind not in KINDS:
        raise InvalidRequest([FieldError("kind", f"must be one of {', '.join(KINDS)}, not '{kind}'")])
    figure: Figure
    if isinstance(subject, Sweep):
        figure = sweep_figure(list(subject.values), subject.figures(metric), x_label=subject.field,
                              y_label=metric, title=title)
    elif isinstance(subject, SimulationResult):
        spans = spans_from_chrome_trace(subject.trace) if subject.trace is not None else None
        if kind == "timeline" and spans is None:
            raise InvalidRequest([FieldError("options.trace", "a result draws its timeline only when simulated "
                                             "with options.trace: true (or plot the request itself)")])
        figure = result_figure(kind, subject, spans=spans, title=title)
    elif isinstance(subject, Mapping) and {"top", "discarded_families", "search"} <= subject.keys():
        figure = search_figure(subject, title=title)
    elif isinstance(subject, Mapping) and subject and all(isinstance(v, SimulationResult) for v in subject.values()):
        figure = comparison_figure(list(subject), list(subject.values()), title=title)
    elif (isinstance(subject, Sequence) and not isinstance(subject, str) and subject
          and all(isinstance(v, SimulationResult) for v in subject)):
        figure = comparison_figure([f"requests[{i}]" for i in range(len(subject))], list(subject), title=title)
    else:
        document, result, recorded = _run(subject, keep_spans=kind == "timeline")
        figure = result_figure(kind, result, spans=recorded, request=document, title=title)
    if out is not None:
        save(figure, out)
    return figure


def import_config(kind: str, text: str, *, cluster: str = "dgx-h100", nodes: int | None = None
                  ) -> dict[str, Any]:
    """A request from a framework's configuration text (`kind` megatron: a pretrain_gpt.py command line or a log's
    arguments block; hf: a config.json): `{"request", "ignored", "assumed"}`, as `clustersim import` and
    POST /v1/imports/{kind} give; `request` is what `simulate` takes."""
    from service.interop import import_config as run

    try:
        result = run(kind, text, "input", cluster=cluster, nodes=nodes)
    except (RequestError, SpecError) as err:
        raise _invalid(err) from None
    return {"request": result.request, "ignored": result.ignored, "assumed": result.assumed}


def calibrate(nccl_tests: Sequence[str | os.PathLike[str]] = (), gemm: str | os.PathLike[str] | None = None,
              gemm_gpu: str | None = None) -> dict[str, Any]:
    """A `cluster.measured` overlay from nccl-tests output files and a GEMM sweep file (what `clustersim calibrate`
    writes; `gemm_gpu` the catalog GPU the sweep ran on); a request's `cluster.measured` takes it. InvalidRequest
    naming the file and line otherwise."""
    from api_schemas.loading import read_request_text
    from service.interop import calibrate as run

    try:
        files = [(read_request_text(os.fspath(p)), os.fspath(p)) for p in nccl_tests]
        sweep = (read_request_text(os.fspath(gemm)), os.fspath(gemm)) if gemm is not None else None
        return run(files, sweep, gemm_gpu)
    except RequestError as err:
        raise _invalid(err) from None


def export_config(kind: str, request: Request) -> str:
    """The launch configuration of a request's layout (`kind` megatron: the torchrun command), as
    `clustersim export` and POST /v1/exports/{kind} give."""
    from service.interop import export_config as run

    try:
        return run(kind, request_from(request))
    except (RequestError, SpecError) as err:
        raise _invalid(err) from None
