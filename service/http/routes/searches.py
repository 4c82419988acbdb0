"""POST /v1/searches: a layout search accepted as a background job; its result is the search result document."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api_schemas.search import SearchRequest
from service.http.context import AUTHORIZED, ServiceDep
from service.http.httpio import job_status, read_document
from service.http.models import ErrorDetail, SearchAccepted
from service.http.openapi import ERROR, accepted_job, body_of

router = APIRouter(tags=["searches"], dependencies=AUTHORIZED)


@router.post("/v1/searches", status_code=202, openapi_extra=body_of(SearchRequest), response_model=SearchAccepted,
             responses={202: accepted_job("accepted as a job, with the bounds it runs under and what the service "
                                          "capped; Location names it, GET /v1/jobs/{id}/result gives the search "
                                          "result"),
                        401: ERROR, 408: ERROR, 413: ERROR, 415: ERROR, 422: ERROR, 429: ERROR})
async def submit_search(request: Request, svc: ServiceDep) -> JSONResponse:
    """Accept a layout search as a background job, its bounds capped by the service (candidates, each one's
    estimated events and memory, the estimated seconds of them all): 202 with the job, the bounds it runs under,
    what was capped, and a Location header; its result is the search result document, and it has no trace."""
    body, syntax = await read_document(request, svc.settings)
    job_id = uuid.uuid4().hex
    admitted = await svc.off_loop(svc.admit_search, body, job_id, syntax)
    job = svc.jobs.submit(admitted.submission(), job_id)
    status = SearchAccepted(**job_status(job).model_dump(), bounds=admitted.request.bounds.model_dump(mode="json"),
                            capped=[ErrorDetail(field=c.field, rule=c.rule) for c in admitted.caps])
    return JSONResponse(status.model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})
