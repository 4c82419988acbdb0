"""Admission: a request body becomes a validated, canonical request within the service's limits, or an error.

Everything here is cheap (no cluster graph is built, no engine runs), so it runs on the event loop before a
request is accepted. Order: the body (UTF-8, YAML or JSON, the contract's fields) -> 422; the domain's rules
(dp * tp * pp = GPUs, ...) -> 422; the service's limits (GPUs, microbatches, estimated engine events) -> 413.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from api_schemas import ClusterIn, FieldError, RequestError, SimulationRequest, parse_request
from api_schemas.compare import parse_comparison_request
from api_schemas.loading import Syntax
from api_schemas.search import SearchRequest, parse_search_request
from service import convert as adapters
from service import provenance
from service.http.errors import ApiError, invalid, within_item
from service.jobs.manager import Submission
from service.limits import LimitError, Limits, admit_scenario
from service.search import baseline_scenario, space_size_bound
from service.search import prepare as prepare_search
from service.search_limits import cap_bounds, events_bound
from service.settings import Settings
from simcore import Scenario, SpecError, check

__all__ = ["MAX_INT", "Admitted", "AdmittedComparison", "AdmittedSearch", "admit", "admit_comparison", "admit_request",
           "admit_search", "cache_key", "parse_body"]

# Integers above 2^53 are not exact in JSON readers that use doubles, nor in the float arithmetic of the cost
# model: the service refuses them rather than simulate a rounded value.
MAX_INT = 2**53

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Admitted:
    """An accepted request: its canonical JSON (what a worker runs), its cache key, and the event estimate."""

    request: SimulationRequest
    canonical_json: str
    cache_key: str
    estimated_events: int
    trace: bool

    def submission(self) -> Submission:
        """This request as a simulation job."""
        return Submission("simulation", self.canonical_json, self.cache_key, self.estimated_events)


@dataclass(frozen=True, slots=True)
class AdmittedSearch:
    """An accepted search: its canonical JSON (bounds capped by the service) and its results-cache key.

    The cache is used only when the search is deterministic (no time limit): its key is "search:" and the SHA-256
    of the canonical request, the package's version and the simulator's code digest. A search with a time limit
    gets a key of its own (`cacheable` False), so its result is stored for its job but never served to another."""

    request: SearchRequest
    canonical_json: str
    cache_key: str
    cacheable: bool
    estimated_events: int = 0  # an upper bound: what its capped bounds allow (service.search_limits.events_bound)
    caps: tuple[FieldError, ...] = ()  # each bound the service lowered or set, with the rule that did it

    def submission(self) -> Submission:
        """This search as a job."""
        return Submission("search", self.canonical_json, self.cache_key, self.estimated_events, self.cacheable)


def _digest(kind: str, document: dict[str, Any]) -> str:
    """SHA-256 of a canonical document (every field, defaults filled in, keys sorted) under `kind`, with the
    package's version and the digest of the simulator's code and data (service.provenance): after an upgrade,
    or any change to the code or fitted parameters, a long-lived database never serves older code's results."""
    simulator = {"version": provenance.package_version(), "code": provenance.code_digest()}
    text = json.dumps({kind: document, "simulator": simulator}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(request: SimulationRequest) -> str:
    """The results-cache key of a simulation request. `options.trace` is left out: a trace is stored beside the
    result it belongs to."""
    data = request.model_dump(mode="json")
    data["options"].pop("trace", None)
    return _digest("request", data)


def _big_ints(value: Any, path: str) -> list[FieldError]:
    if isinstance(value, dict):
        return [e for k, v in value.items() for e in _big_ints(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        return [FieldError(path, f"must be <= 2^53 ({MAX_INT})")]
    return []


def _refuse_big_ints(request: SimulationRequest | SearchRequest) -> None:
    """422 naming every integer field above 2^53."""
    big = _big_ints(request.model_dump(), "")
    if big:
        raise invalid(RequestError(big))


def _text(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid(RequestError.for_field("request", "must be UTF-8 text")) from None


def _parse(body: bytes, parser: Callable[..., T], syntax: Syntax | None) -> T:
    """The body read by `parser` (one of api_schemas' parse_* functions) as `syntax` says (JSON, YAML, or YAML
    then JSON); raise ApiError 422 naming the field."""
    text = _text(body)
    try:
        return parser(text, source="the request body", syntax=syntax)
    except RequestError as err:
        raise invalid(err) from None
    except (ValueError, RecursionError) as err:  # a number with thousands of digits, nesting past the stack
        rule = "cannot be read: " + " ".join(str(err).split())[:200]
        raise invalid(RequestError.for_field("request", rule)) from None


def parse_body(body: bytes, syntax: Syntax | None) -> SimulationRequest:
    """A simulation request body (JSON, YAML, or YAML then JSON, as `syntax` says), validated, not simulated: what
    POST /v1/exports/{kind} reads. ApiError 422 naming the field."""
    request = _parse(body, parse_request, syntax)
    _refuse_big_ints(request)
    return request


def _over(field: str, what: str, value: int, limit: int) -> ApiError:
    return ApiError(413, "too_large", f"{field}: {what} {value} is over this service's limit of {limit}",
                    [FieldError(field, f"{what} must be <= {limit}")], extra={"limit": limit})


def _refuse_over_gpus(cluster: ClusterIn, gpus: int, max_gpus: int) -> None:
    """413 for a cluster over the service's GPU limit, naming the size field the request gave."""
    if gpus > max_gpus:
        field = "cluster.num_nodes" if cluster.num_nodes is not None else "cluster.num_gpus"
        raise _over(field, "GPU count", gpus, max_gpus)


def _over_limit(err: LimitError, request: SimulationRequest, code: str, jobs: bool = False) -> ApiError:
    """413 for a request over a limit, naming the size field the request gave for the GPU count."""
    field = err.field
    if field == "cluster.num_gpus" and request.cluster.num_nodes is not None:
        field = "cluster.num_nodes"
    message = f"{err.message}; submit it as a job: POST /v1/jobs" if jobs else err.message
    rule = f"{err.rule} inline; use POST /v1/jobs" if jobs else err.rule
    extra: dict[str, Any] = {**err.extra, "jobs": "/v1/jobs"} if jobs else dict(err.extra)
    return ApiError(413, code, message, [FieldError(field, rule)], extra=extra)


def admit(body: bytes, settings: Settings, *, inline: bool, syntax: Syntax | None = None) -> Admitted:
    """Validate a body against the contract, the domain and the limits; raise ApiError (422 or 413)."""
    return admit_request(_parse(body, parse_request, syntax), settings, inline=inline)


def admit_request(request: SimulationRequest, settings: Settings, *, inline: bool) -> Admitted:
    """Check a request valid by the contract against the domain and the limits (service.limits: the job
    limits, and for an inline run the inline ones too, each on the run it would be: a job records its trace);
    raise ApiError (422 or 413)."""
    _refuse_big_ints(request)
    try:
        scenario = adapters.to_scenario(request)
        check(scenario)
        as_job = adapters.replace_spans(scenario)
        as_inline = as_job if request.options.trace else scenario
    except (SpecError, RequestError) as err:
        raise invalid(adapters.request_error(err)) from None
    except (ArithmeticError, ValueError) as err:  # arithmetic on extreme values the schema allows
        rule = "cannot be simulated: " + " ".join(str(err).split())[:200]
        raise invalid(RequestError.for_field("request", rule)) from None
    try:
        cost = admit_scenario(as_inline if inline else as_job, settings.limits(inline=inline))
    except LimitError as err:
        if not inline:
            raise _over_limit(err, request, "too_large") from None
        try:  # a job could run it: say so
            admit_scenario(as_job, settings.limits(inline=False))
        except LimitError as job_err:
            raise _over_limit(job_err, request, "too_large") from None
        raise _over_limit(err, request, "too_large_for_inline", jobs=True) from None
    return Admitted(request, request.model_dump_json(), cache_key(request), cost.events, request.options.trace)


def _admit_baseline(request: SearchRequest, base: Scenario, limits: Limits) -> int:
    """The baseline's estimated engine events (0 without one); 413 naming ``baseline`` when a job could not
    simulate it (it is simulated whatever the screen says of candidates)."""
    baseline = baseline_scenario(request, base)
    if baseline is None:
        return 0
    try:
        return admit_scenario(replace(baseline, keep_spans=False), limits).events
    except LimitError as err:
        field = err.field.replace("layout.", "baseline.") if err.field.startswith("layout.") else "baseline"
        raise ApiError(413, "too_large", f"baseline: {err.message}", [FieldError(field, err.rule)],
                       extra=dict(err.extra)) from None


def admit_search(body: bytes, *, max_gpus: int, max_candidates: int, job_id: str, max_space: int = 2**62,
                 job_limits: Limits | None = None, job_timeout_s: float | None = None,
                 syntax: Syntax | None = None) -> AdmittedSearch:
    """Validate a search body (or a simulation request: its layout becomes the baseline) and cap its bounds
    (service.search_limits): bounds.max_candidates at `max_candidates`, and given the job limits and time limit,
    each candidate's estimated events and memory (a candidate over one is screened, not simulated) and the
    estimated seconds of all its simulations, so that it ends within `job_timeout_s`. Raise ApiError: 422 for
    any invalid part, baseline and space included; 413 over the GPU limit, when the space could hold more than
    `max_space` layouts, when the baseline is over the job limits, or when planning alone may take more than
    half of `job_timeout_s`. Cheap: the space is bounded from its number of choices and enumerated by the job,
    not here."""
    request = _parse(body, parse_search_request, syntax)
    _refuse_big_ints(request)
    try:
        base, sizes, _ = prepare_search(request)
    except (SpecError, RequestError) as err:
        raise invalid(adapters.request_error(err)) from None
    _refuse_over_gpus(request.cluster, base.cluster.num_gpus, max_gpus)
    for i, size in enumerate(sizes):
        if size.num_gpus > max_gpus:
            raise _over(f"space.num_nodes[{i}]", "GPU count", size.num_gpus, max_gpus)
    layouts = space_size_bound(request, base, sizes)
    if layouts > max_space:
        raise ApiError(413, "too_large", f"the search space may hold up to {layouts} layouts, over this service's "
                       f"limit of {max_space}; list fewer values in space", [FieldError(
                           "space", f"layouts generated must be <= {max_space} (bound {layouts})")],
                       extra={"estimated_layouts": layouts, "limit": max_space})
    baseline_events = _admit_baseline(request, base, job_limits) if job_limits is not None else 0
    try:
        capped = cap_bounds(request.bounds, job_limits, max_candidates=max_candidates, job_timeout_s=job_timeout_s,
                            layouts=layouts)
    except LimitError as err:
        raise ApiError(413, "too_large", err.message, [FieldError(err.field, err.rule)],
                       extra=dict(err.extra)) from None
    cacheable = request.bounds.time_limit_s is None
    request = request.model_copy(update={"bounds": capped.bounds})
    canonical = request.model_dump_json()
    key = "search:" + _digest("search", json.loads(canonical)) if cacheable else f"search-job:{job_id}"
    events = events_bound(capped.bounds)
    return AdmittedSearch(request, canonical, key, cacheable, baseline_events + (events or 0), capped.caps)


@dataclass(frozen=True, slots=True)
class AdmittedComparison:
    """An accepted comparison: its labels and each request admitted as an inline simulation, in order."""

    labels: list[str]
    requests: list[Admitted]


def admit_comparison(body: bytes, settings: Settings, syntax: Syntax | None = None) -> AdmittedComparison:
    """Validate a comparison body, then admit each of its requests as an inline simulation (the same rules and
    limits as POST /v1/simulations); raise ApiError (422 or 413) naming the field as ``requests[i].layout.tp``."""
    comparison = _parse(body, parse_comparison_request, syntax)
    admitted = []
    for index, request in enumerate(comparison.requests):
        try:
            admitted.append(admit_request(request, settings, inline=True))
        except ApiError as err:
            raise within_item(err, index) from None
    return AdmittedComparison(comparison.label_list(), admitted)
