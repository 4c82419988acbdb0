"""POST /v1/searches: a layout search accepted as a background job; its result is the search result document."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api_schemas.search import SearchRequest
from service.http.context import AUTHORIZED, ServiceDep
from service.http.httpio import accepted, read_document
from service.http.models import JobStatus
from service.http.openapi import ERROR, accepted_job, body_of

router = APIRouter(tags=["searches"], dependencies=AUTHORIZED)


@router.post("/v1/searches", status_code=202, openapi_extra=body_of(SearchRequest), response_model=JobStatus,
             responses={202: accepted_job("accepted as a job; Location names it, GET /v1/jobs/{id}/result gives "
                                          "the search result"),
                        401: ERROR, 408: ERROR, 413: ERROR, 415: ERROR, 422: ERROR, 429: ERROR})
async def submit_search(request: Request, svc: ServiceDep) -> JSONResponse:
    """Accept a layout search as a background job (bounds.max_candidates capped by the service): 202 with
    the job and a Location header; its result is the search result document, and it has no trace."""
    body, syntax = await read_document(request, svc.settings)
    job_id = uuid.uuid4().hex
    admitted = await svc.off_loop(svc.admit_search, body, job_id, syntax)
    return accepted(svc.jobs.submit(admitted.submission(), job_id))
