"""Jobs: POST /v1/jobs accepts a simulation to run in the background; GET lists, reads, and gives the request,
the result and the Chrome trace of a job; DELETE cancels one, which stays readable as `cancelled` (a DELETE does
not remove the job: retention does, with the other finished jobs). A search job (POST /v1/searches) is read the
same way. The OpenAPI links say so to clients that follow them: from an accepted job to reading and cancelling
it, and from a cancel to the read that still answers it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from api_schemas import SimulationRequest
from api_schemas.search import SearchRequest
from service.http.context import AUTHORIZED, ServiceDep
from service.http.httpio import accepted, job_status, read_document, wants_trace
from service.http.models import JobPage, JobState, JobStatus
from service.http.openapi import ERROR, JOB_RESULT, accepted_job, body_of
from service.http.traces import result_response, trace_response

router = APIRouter(tags=["jobs"], dependencies=AUTHORIZED)

_JOB = "#/paths/~1v1~1jobs~1{job_id}"  # JSON pointer to the path item of one job


def _link(method: str, description: str) -> dict[str, Any]:
    """An OpenAPI link to `method` of the job the response describes (its `id`)."""
    return {"operationRef": f"{_JOB}/{method}", "parameters": {"job_id": "$response.body#/id"},
            "description": description}


JOB_LINKS: dict[str, Any] = {
    "GetJob": _link("get", "the job's status, progress and error"),
    "CancelJob": _link("delete", "cancel the job; it stays readable, as `cancelled`"),
}

CANCELLED: dict[str, Any] = {
    "description": "the job, now `cancelled` (a running job's simulation process is killed). A DELETE cancels, it "
                   "does not remove: GET /v1/jobs/{job_id} goes on answering 200 with this job, status `cancelled` "
                   "and error code `cancelled` (until the retention deletes it with the other finished jobs); its "
                   "result is 409 `no_result`, and a second DELETE is 409 `job_finished`",
    "links": {"GetCancelledJob": _link("get", "the same job, still readable: status `cancelled`")},
}
"""The 200 response of DELETE /v1/jobs/{job_id}."""


@router.post("/v1/jobs", status_code=202, openapi_extra=body_of(SimulationRequest), response_model=JobStatus,
             responses={202: {**accepted_job("accepted; Location names the job"), "links": JOB_LINKS},
                        401: ERROR, 408: ERROR, 413: ERROR, 415: ERROR, 422: ERROR, 429: ERROR})
async def submit_job(request: Request, svc: ServiceDep) -> JSONResponse:
    """Accept a request as a background job: 202 with the job and a Location header."""
    body, syntax = await read_document(request, svc.settings)
    admitted = await svc.off_loop(svc.admit, body, False, syntax)
    job = svc.jobs.submit(admitted.submission())
    svc.metrics.cache_lookup(job.cached)
    return accepted(job)


@router.get("/v1/jobs", response_model=JobPage, responses={422: ERROR})
async def list_jobs(svc: ServiceDep,
                    limit: Annotated[int, Query(ge=1, le=100, description="jobs per page")] = 20,
                    cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$",
                                                        description="next_cursor of the previous page")] = None,
                    status: Annotated[JobState | None, Query(description="only jobs in this state")] = None,
                    ) -> JobPage:
    """Jobs, newest first, a page at a time."""
    rows = svc.store.jobs(limit + 1, int(cursor) if cursor else None, status)
    more = len(rows) > limit
    rows = rows[:limit]
    return JobPage(jobs=[job_status(r, svc.jobs.progress(r.id)) for r in rows],
                   next_cursor=str(rows[-1].seq) if more else None)


@router.get("/v1/jobs/{job_id}", response_model=JobStatus, responses={404: ERROR})
async def get_job(job_id: str, svc: ServiceDep) -> JobStatus:
    """Status, progress, timestamps and error of one job."""
    return job_status(svc.jobs.job(job_id), svc.jobs.progress(job_id))


@router.get("/v1/jobs/{job_id}/request",
            responses={200: {"description": "the request the job runs: a simulation request for a simulation job, a "
                             "search request for a search job (its `kind` says which)",
                             "content": {"application/json": {"schema": {"anyOf": [
                                 {"$ref": "#/components/schemas/SimulationRequest"},
                                 {"$ref": "#/components/schemas/SearchRequest"}]}}}},
                       401: ERROR, 404: ERROR})
async def get_job_request(job_id: str, svc: ServiceDep) -> JSONResponse:
    """The request a job runs, whatever its status (a failed job's too): as the service admitted it, every default
    written out and no null field, as a simulation result echoes it (a search's bounds as capped). Submit it
    again, or edit it."""
    job = svc.jobs.job(job_id)
    document: type[BaseModel] = SearchRequest if job.kind == "search" else SimulationRequest
    return JSONResponse(document.model_validate_json(job.request).model_dump(mode="json", exclude_none=True))


@router.get("/v1/jobs/{job_id}/result",
            responses={200: JOB_RESULT, 401: ERROR, 404: ERROR, 409: ERROR})
async def get_job_result(job_id: str, svc: ServiceDep) -> Response:
    """The result of a succeeded job (409 until then); with the trace if the request asked for it. A search
    job's result is the search result document."""
    job, cached = svc.jobs.result(job_id)
    return result_response(svc.store, cached, job.kind == "simulation" and wants_trace(job))


@router.get("/v1/jobs/{job_id}/trace",
            responses={200: {"content": {"application/json": {"schema": {"type": "object"}}},
                             "description": "Chrome trace (Trace Event Format), for Perfetto"},
                       404: ERROR, 409: ERROR})
async def get_job_trace(job_id: str, request: Request, svc: ServiceDep) -> Response:
    """The Chrome trace of a succeeded simulation job (Perfetto, chrome://tracing); 409 for a search job."""
    return trace_response(request, svc.store, svc.jobs.trace(job_id))


@router.delete("/v1/jobs/{job_id}", response_model=JobStatus,
               responses={200: CANCELLED, 401: ERROR, 404: ERROR, 409: ERROR})
async def cancel_job(job_id: str, svc: ServiceDep) -> JobStatus:
    """Cancel a queued or running job (409 if it has finished). The job is not removed: later reads answer it,
    with status `cancelled`."""
    return job_status(svc.jobs.cancel(job_id))
