"""Inline simulations (POST /v1/simulations and each request of POST /v1/comparisons): from the results cache,
or run in a worker process under the inline limits while the client waits."""

from __future__ import annotations

from service.http import errors
from service.http.admission import Admitted
from service.http.context import Service
from service.http.errors import ApiError
from service.jobs.pool import WORKER_DIED, RunResult
from service.jobs.store import CachedResult
from service.settings import Settings

__all__ = ["busy", "cached", "run_inline"]

# Numeric failures of the simulator on extreme (schema-valid) values are the request's fault, not a bug.
_INPUT_ERRORS = frozenset({"OverflowError", "ZeroDivisionError", "ValueError", "FloatingPointError"})


def busy() -> ApiError:
    """429: every inline slot is taken and the waiting line is full."""
    return ApiError(429, "busy", "too many simulations are waiting; retry later", headers={"Retry-After": "1"})


def cached(svc: Service, admitted: Admitted, trace: bool) -> CachedResult | None:
    """The stored result of this request, if there is one (with its trace when `trace` is asked for)."""
    found = svc.store.result(admitted.cache_key)
    hit = found if found is not None and (found.has_trace or not trace) else None
    svc.metrics.cache_lookup(hit is not None)
    return hit


async def run_inline(svc: Service, admitted: Admitted, trace: bool) -> CachedResult:
    """Simulate in a worker process once an inline slot is free, store the result, and return it; raise
    ApiError (422, 413) for what the request asked that cannot be simulated inline."""
    async with svc.inline:
        outcome = await svc.pool.run(admitted.canonical_json, trace, svc.settings.inline_timeout_s)
    if outcome.status != "ok" or outcome.result is None:
        raise _inline_error(outcome, svc.settings)
    limit = svc.settings.max_trace_bytes
    if outcome.trace is not None and len(outcome.trace) > limit:
        raise ApiError(413, "trace_too_large", f"the trace is {len(outcome.trace)} bytes compressed, over the limit "
                       f"of {limit}", extra={"limit_bytes": limit})
    svc.store.put_result(admitted.cache_key, outcome.result, outcome.trace)
    return CachedResult(outcome.result, admitted.cache_key, outcome.trace is not None, outcome.trace)


def _inline_error(outcome: RunResult, settings: Settings) -> ApiError:
    if outcome.status == "invalid":
        return errors.invalid_details(outcome.details)
    if outcome.status == "timeout":
        return ApiError(413, "too_large_for_inline",
                        f"the simulation ran past the inline limit of {settings.inline_timeout_s:g} s; "
                        "submit it as a job: POST /v1/jobs", extra={"jobs": "/v1/jobs"})
    if outcome.error_type == "MemoryError":
        return ApiError(413, "too_large", "the simulation ran out of its memory limit",
                        extra={"limit": settings.memory_cap_mb()})
    if outcome.error_type == WORKER_DIED:
        return ApiError(503, "worker_died", f"{outcome.message}; the service is up, retry later or with a "
                        "smaller request", extra={"limit_mb": settings.memory_cap_mb()},
                        headers={"Retry-After": "5"})
    if outcome.error_type in _INPUT_ERRORS:
        return errors.invalid_details([("request", f"cannot be simulated: {outcome.message}")])
    raise RuntimeError(f"simulation failed: {outcome.error_type}: {outcome.message}")
