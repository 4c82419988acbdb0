"""POST /v1/simulations: one request simulated while the client waits (or answered from the results cache)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api_schemas import SimulationRequest, SimulationResult
from service.http.context import AUTHORIZED, ServiceDep
from service.http.httpio import read_document
from service.http.inline import busy, cached, run_inline
from service.http.openapi import ERROR, body_of
from service.http.traces import result_response

router = APIRouter(tags=["simulations"], dependencies=AUTHORIZED)


@router.post("/v1/simulations", openapi_extra=body_of(SimulationRequest),
             responses={200: {"model": SimulationResult, "description": "the result (with a trace if asked)"},
                        401: ERROR, 408: ERROR, 413: ERROR, 415: ERROR, 422: ERROR, 429: ERROR, 503: ERROR})
async def run_simulation(request: Request, svc: ServiceDep) -> Response:
    """Simulate one request and answer with its result. Over the inline event limit: 413, use jobs."""
    body, syntax = await read_document(request, svc.settings)
    admitted = await svc.off_loop(svc.admit, body, True, syntax)
    hit = cached(svc, admitted, admitted.trace)
    if hit is not None:
        return result_response(svc.store, hit, admitted.trace, {"X-Clustersim-Cache": "hit"})
    if svc.inline.full:
        raise busy()
    result = await run_inline(svc, admitted, admitted.trace)
    return result_response(svc.store, result, admitted.trace, {"X-Clustersim-Cache": "miss"})
