"""The HTTP API (FastAPI): simulations and comparisons inline, jobs in the background, presets, health. OpenAPI
at /docs.

`create_app(settings)` builds an app whose lifespan opens the SQLite store, starts the simulation processes'
forkserver and the job dispatcher, and on shutdown puts running jobs back in the queue. Request bodies are
read raw and parsed by api_schemas (YAML or JSON, duplicate keys refused), exactly as the CLI reads a file.
"""

from __future__ import annotations

import asyncio
import json
import uuid
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPBearer

from api_schemas import FieldError, SimulationRequest, SimulationResult
from api_schemas.compare import ComparisonRequest, ComparisonResult
from api_schemas.search import SearchRequest
from service import convert as adapters
from service.compare import comparison
from service.http import errors
from service.http.admission import Admitted, AdmittedComparison, AdmittedSearch, admit, admit_comparison, admit_search
from service.http.errors import ApiError, within_item
from service.http.httpio import authorize, job_status, read_body, result_response, wants_trace
from service.http.models import ErrorBody, Health, JobPage, JobState, JobStatus, Ready
from service.jobs.manager import JobManager
from service.jobs.pool import InlineSlots, RunResult, WorkerPool
from service.jobs.store import CachedResult, JobRow, Store
from service.settings import Settings
from simcore.simulate import VERSION

__all__ = ["create_app"]

_ERR: dict[str, Any] = {"model": ErrorBody}
_REQUEST_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"$ref": "#/components/schemas/SimulationRequest"}},
    "application/yaml": {"schema": {"$ref": "#/components/schemas/SimulationRequest"}},
}}}
_SEARCH_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"$ref": "#/components/schemas/SearchRequest"}},
    "application/yaml": {"schema": {"$ref": "#/components/schemas/SearchRequest"}},
}}}
_COMPARISON_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"$ref": "#/components/schemas/ComparisonRequest"}},
    "application/yaml": {"schema": {"$ref": "#/components/schemas/ComparisonRequest"}},
}}}
# Numeric failures of the simulator on extreme (schema-valid) values are the request's fault, not a bug.
_INPUT_ERRORS = frozenset({"OverflowError", "ZeroDivisionError", "ValueError", "FloatingPointError"})

_bearer = HTTPBearer(auto_error=False, description="required for POST and DELETE when CLUSTERSIM_API_TOKEN is set")


class _Service:
    """What the routes share: settings, store, worker pool, inline slots, job manager."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.ready = False
        self.store: Store
        self.pool: WorkerPool
        self.jobs: JobManager
        self.inline: InlineSlots

    def admit(self, body: bytes, inline: bool) -> Admitted:
        s = self.settings
        return admit(body, max_gpus=s.max_gpus, max_microbatches=s.max_microbatches,
                     max_events=s.max_inline_events if inline else s.max_job_events, inline=inline)

    def admit_search(self, body: bytes, job_id: str) -> AdmittedSearch:
        s = self.settings
        return admit_search(body, max_gpus=s.max_gpus, max_candidates=s.max_search_candidates, job_id=job_id)

    def admit_comparison(self, body: bytes) -> AdmittedComparison:
        s = self.settings
        return admit_comparison(body, max_gpus=s.max_gpus, max_microbatches=s.max_microbatches,
                                max_events=s.max_inline_events)


def _inline_error(outcome: RunResult, settings: Settings) -> ApiError:
    if outcome.status == "invalid":
        return errors.invalid_details(outcome.details)
    if outcome.status == "timeout":
        return ApiError(413, "too_large_for_inline",
                        f"the simulation ran past the inline limit of {settings.inline_timeout_s:g} s; "
                        "submit it as a job: POST /v1/jobs", extra={"jobs": "/v1/jobs"})
    if outcome.error_type == "MemoryError":
        return ApiError(413, "too_large", "the simulation ran out of its memory limit",
                        extra={"limit": settings.worker_memory_mb})
    if outcome.error_type in _INPUT_ERRORS:
        return errors.invalid_details([("request", f"cannot be simulated: {outcome.message}")])
    raise RuntimeError(f"simulation failed: {outcome.error_type}: {outcome.message}")


def _openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        request = SimulationRequest.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(request.pop("$defs", {}))
        components["SimulationRequest"] = request
        search = SearchRequest.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(search.pop("$defs", {}))
        components["SearchRequest"] = search
        compared = ComparisonRequest.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in compared.pop("$defs", {}).items():
            components.setdefault(name, definition)  # SimulationRequest and its sections: already there
        components["ComparisonRequest"] = compared
        app.openapi_schema = schema
    return app.openapi_schema


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new app; nothing starts until its lifespan does (uvicorn, or `with TestClient(app)`)."""
    svc = _Service(settings or Settings())
    s = svc.settings

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        svc.store = Store(s.database_path())
        svc.pool = WorkerPool(threads=2 * s.workers + 2, memory_mb=s.worker_memory_mb)
        svc.inline = InlineSlots(s.workers, s.max_queued_jobs)
        await asyncio.to_thread(svc.pool.warm)
        svc.jobs = JobManager(svc.store, svc.pool, workers=s.workers, max_queued=s.max_queued_jobs,
                              timeout_s=s.job_timeout_s, max_attempts=s.max_job_attempts)
        svc.jobs.start()
        svc.ready = True
        try:
            yield
        finally:
            svc.ready = False
            await svc.jobs.stop()
            svc.pool.close()
            svc.store.close()

    app = FastAPI(title="clustersim", version=VERSION, lifespan=lifespan,
                  description="Discrete-event simulator of distributed LLM training. Errors are "
                  '`{"error": {"code", "message", "details": [{"field", "rule"}]}}`. Request bodies are JSON or '
                  "YAML.")
    errors.install(app)
    # The bearer scheme appears in the OpenAPI schema only when a token is required.
    auth = [Depends(_bearer)] if s.api_token is not None else []
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.state.service = svc

    def job_or_404(job_id: str) -> JobRow:
        job = svc.store.job(job_id)
        if job is None:
            raise ApiError(404, "not_found", f"no job {job_id}", [FieldError("job_id", "no such job")])
        return job

    @app.post("/v1/simulations", tags=["simulations"], openapi_extra=_REQUEST_BODY,
              responses={200: {"model": SimulationResult, "description": "the result (with a trace if asked)"},
                         401: _ERR, 413: _ERR, 422: _ERR, 429: _ERR},
              dependencies=auth)
    async def run_simulation(request: Request) -> Response:
        """Simulate one request and answer with its result. Over the inline event limit: 413, use jobs."""
        authorize(request, s)
        body = await read_body(request, s.max_body_bytes)
        admitted = await asyncio.to_thread(svc.admit, body, True)
        cached = svc.store.result(admitted.cache_key)
        if cached is not None and (cached.trace is not None or not admitted.trace):
            return result_response(cached, admitted.trace, {"X-Clustersim-Cache": "hit"})
        if svc.inline.full:
            raise ApiError(429, "busy", "too many simulations are waiting; retry later", headers={"Retry-After": "1"})
        async with svc.inline:
            outcome = await svc.pool.run(admitted.canonical_json, admitted.trace, s.inline_timeout_s)
        if outcome.status != "ok" or outcome.result is None:
            raise _inline_error(outcome, s)
        svc.store.put_result(admitted.cache_key, outcome.result, outcome.trace)
        return result_response(CachedResult(outcome.result, outcome.trace), admitted.trace,
                               {"X-Clustersim-Cache": "miss"})

    @app.post("/v1/jobs", tags=["jobs"], status_code=202, openapi_extra=_REQUEST_BODY, response_model=JobStatus,
              dependencies=auth,
              responses={202: {"description": "accepted; Location names the job",
                               "headers": {"Location": {"description": "/v1/jobs/{id}", "required": True,
                                                        "schema": {"type": "string"}}}},
                         401: _ERR, 413: _ERR, 422: _ERR, 429: _ERR})
    async def submit_job(request: Request) -> JSONResponse:
        """Accept a request as a background job: 202 with the job and a Location header."""
        authorize(request, s)
        body = await read_body(request, s.max_body_bytes)
        admitted = await asyncio.to_thread(svc.admit, body, False)
        job = svc.jobs.submit(admitted)
        return JSONResponse(job_status(job).model_dump(mode="json"), status_code=202,
                            headers={"Location": f"/v1/jobs/{job.id}"})

    @app.post("/v1/searches", tags=["searches"], status_code=202, openapi_extra=_SEARCH_BODY,
              response_model=JobStatus, dependencies=auth,
              responses={202: {"description": "accepted as a job; Location names it, GET /v1/jobs/{id}/result "
                               "gives the search result",
                               "headers": {"Location": {"description": "/v1/jobs/{id}", "required": True,
                                                        "schema": {"type": "string"}}}},
                         401: _ERR, 413: _ERR, 422: _ERR, 429: _ERR})
    async def submit_search(request: Request) -> JSONResponse:
        """Accept a layout search as a background job (bounds.max_candidates capped by the service): 202 with
        the job and a Location header; its result is the search result document, and it has no trace."""
        authorize(request, s)
        body = await read_body(request, s.max_body_bytes)
        job_id = uuid.uuid4().hex
        admitted = await asyncio.to_thread(svc.admit_search, body, job_id)
        job = svc.jobs.submit(admitted, job_id)
        return JSONResponse(job_status(job).model_dump(mode="json"), status_code=202,
                            headers={"Location": f"/v1/jobs/{job.id}"})

    async def inline_result(index: int, admitted: Admitted) -> dict[str, Any]:
        """The result of one admitted request, from the cache or simulated in a worker process (no trace)."""
        cached = svc.store.result(admitted.cache_key)
        if cached is not None:
            result: dict[str, Any] = json.loads(cached.result)
            return result
        async with svc.inline:
            outcome = await svc.pool.run(admitted.canonical_json, False, s.inline_timeout_s)
        if outcome.status != "ok" or outcome.result is None:
            raise within_item(_inline_error(outcome, s), index)
        svc.store.put_result(admitted.cache_key, outcome.result, None)
        result = json.loads(outcome.result)
        return result

    @app.post("/v1/comparisons", tags=["comparisons"], openapi_extra=_COMPARISON_BODY,
              responses={200: {"model": ComparisonResult, "description": "one row per request, in their order"},
                         401: _ERR, 413: _ERR, 422: _ERR, 429: _ERR},
              dependencies=auth)
    async def run_comparison(request: Request) -> JSONResponse:
        """Simulate 1 to 16 requests, each as POST /v1/simulations does (the same limits, worker processes and
        results cache), and answer with one row of headline figures per request, in order. One invalid request
        fails the comparison: 422 (or 413) naming it, e.g. `requests[1].layout.tp`."""
        authorize(request, s)
        body = await read_body(request, s.max_body_bytes)
        admitted = await asyncio.to_thread(svc.admit_comparison, body)
        if svc.inline.full:
            raise ApiError(429, "busy", "too many simulations are waiting; retry later", headers={"Retry-After": "1"})
        results = await asyncio.gather(*(inline_result(i, a) for i, a in enumerate(admitted.requests)))
        requests = [a.request for a in admitted.requests]
        document = await asyncio.to_thread(comparison, zip(admitted.labels, requests, results))
        return JSONResponse(document)

    @app.get("/v1/jobs", tags=["jobs"], response_model=JobPage, responses={422: _ERR})
    async def list_jobs(limit: Annotated[int, Query(ge=1, le=100, description="jobs per page")] = 20,
                        cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$",
                                                            description="next_cursor of the previous page")] = None,
                        status: Annotated[JobState | None, Query(description="only jobs in this state")] = None,
                        ) -> JobPage:
        """Jobs, newest first, a page at a time."""
        rows = svc.store.jobs(limit + 1, int(cursor) if cursor else None, status)
        more = len(rows) > limit
        rows = rows[:limit]
        return JobPage(jobs=[job_status(r) for r in rows], next_cursor=str(rows[-1].seq) if more else None)

    @app.get("/v1/jobs/{job_id}", tags=["jobs"], response_model=JobStatus, responses={404: _ERR})
    async def get_job(job_id: str) -> JobStatus:
        """Status, progress, timestamps and error of one job."""
        return job_status(job_or_404(job_id))

    def finished_result(job_id: str) -> tuple[JobRow, CachedResult]:
        job = job_or_404(job_id)
        if job.status != "succeeded":
            waiting = job.status in ("queued", "running")
            raise ApiError(409, "not_finished" if waiting else "no_result",
                           f"job {job_id} is {job.status}" + ("; poll GET /v1/jobs/{id}" if waiting else ""),
                           extra={"job_status": job.status})
        cached = svc.store.result(job.cache_key)
        assert cached is not None, "a succeeded job has its result stored"
        return job, cached

    @app.get("/v1/jobs/{job_id}/result", tags=["jobs"],
             responses={200: {"model": SimulationResult, "description": "the result"}, 404: _ERR, 409: _ERR})
    async def get_job_result(job_id: str) -> Response:
        """The result of a succeeded job (409 until then); with the trace if the request asked for it. A search
        job's result is the search result document."""
        job, cached = finished_result(job_id)
        return result_response(cached, job.kind == "simulation" and wants_trace(job))

    @app.get("/v1/jobs/{job_id}/trace", tags=["jobs"],
             responses={200: {"content": {"application/json": {"schema": {"type": "object"}}},
                              "description": "Chrome trace (Trace Event Format), for Perfetto"},
                        404: _ERR, 409: _ERR})
    async def get_job_trace(job_id: str) -> Response:
        """The Chrome trace of a succeeded simulation job (Perfetto, chrome://tracing); 409 for a search job."""
        job = job_or_404(job_id)
        if job.kind != "simulation":
            raise ApiError(409, "no_trace", f"job {job_id} is a {job.kind} job; only simulation jobs have a trace",
                           extra={"job_kind": job.kind})
        _, cached = finished_result(job_id)
        if cached.trace is None:
            raise ApiError(409, "no_trace", f"job {job_id} has no trace")
        return Response(zlib.decompress(cached.trace), media_type="application/json")

    @app.delete("/v1/jobs/{job_id}", tags=["jobs"], response_model=JobStatus, dependencies=auth,
                responses={401: _ERR, 404: _ERR, 409: _ERR})
    async def cancel_job(job_id: str, request: Request) -> JobStatus:
        """Cancel a queued or running job (409 if it has finished)."""
        authorize(request, s)
        return job_status(svc.jobs.cancel(job_id))

    def presets_route(kind: str) -> None:
        async def presets() -> dict[str, Any]:
            return adapters.presets(kind)

        presets.__doc__ = f"The {kind} presets a request may name."
        app.get(f"/v1/presets/{kind}", tags=["presets"], response_model=dict[str, Any],
                name=f"presets_{kind}")(presets)

    for kind in ("models", "clusters", "gpus"):
        presets_route(kind)

    @app.get("/healthz", tags=["health"], response_model=Health)
    async def healthz() -> Health:
        """Liveness: the process answers (no database access)."""
        return Health(status="ok")

    @app.get("/readyz", tags=["health"], response_model=Ready, responses={503: {"model": Ready}})
    async def readyz() -> JSONResponse:
        """Readiness: started, the database answers; 503 otherwise."""
        db_ok = svc.ready and svc.store.ping()
        ready = Ready(status="ready" if db_ok else "not_ready", database="ok" if db_ok else "unavailable",
                      workers=s.workers, queued_jobs=svc.store.count("queued") if db_ok else 0,
                      running_jobs=svc.jobs.running if db_ok else 0)
        return JSONResponse(ready.model_dump(), status_code=200 if db_ok else 503)

    return app
