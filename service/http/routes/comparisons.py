"""POST /v1/comparisons: 1 to 16 requests simulated inline, one row of headline figures each."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api_schemas.compare import ComparisonRequest, ComparisonResult
from service.compare import comparison
from service.http.admission import Admitted
from service.http.context import AUTHORIZED, Service, ServiceDep
from service.http.errors import ApiError, within_item
from service.http.httpio import read_document
from service.http.inline import busy, cached, run_inline
from service.http.openapi import ERROR, body_of

router = APIRouter(tags=["comparisons"], dependencies=AUTHORIZED)


async def _result(svc: Service, index: int, admitted: Admitted) -> dict[str, Any]:
    """The result document of one admitted request, from the cache or simulated (no trace)."""
    found = cached(svc, admitted, False)
    if found is None:
        try:
            found = await run_inline(svc, admitted, False)
        except ApiError as err:
            raise within_item(err, index) from None
    result: dict[str, Any] = json.loads(found.result)
    return result


async def _all_or_none(svc: Service, requests: list[Admitted]) -> list[dict[str, Any]]:
    """Every request's result, simulated at once; the first that fails ends the others (their processes are
    killed, the ones waiting for a slot never start) and its error is the answer."""
    tasks = [asyncio.create_task(_result(svc, i, a)) for i, a in enumerate(requests)]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


@router.post("/v1/comparisons", openapi_extra=body_of(ComparisonRequest),
             responses={200: {"model": ComparisonResult, "description": "one row per request, in their order"},
                        401: ERROR, 408: ERROR, 413: ERROR, 415: ERROR, 422: ERROR, 429: ERROR, 503: ERROR})
async def run_comparison(request: Request, svc: ServiceDep) -> JSONResponse:
    """Simulate 1 to 16 requests, each as POST /v1/simulations does (the same limits, worker processes and
    results cache), and answer with one row of headline figures per request, in order. One invalid request
    fails the comparison: 422 (or 413) naming it, e.g. `requests[1].layout.tp`; one that fails while simulating
    (past the inline time limit) ends the others' simulations at once."""
    body, syntax = await read_document(request, svc.settings)
    admitted = await svc.off_loop(svc.admit_comparison, body, syntax)
    if svc.inline.full:
        raise busy()
    results = await _all_or_none(svc, admitted.requests)
    requests = [a.request for a in admitted.requests]
    document = await asyncio.to_thread(comparison, zip(admitted.labels, requests, results))
    return JSONResponse(document)
