"""POST /v1/simulations: one request simulated while the client waits (or answered from the results cache)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api_schemas import SimulationRequest, SimulationResult
from service.http.context import AUTHORIZED, ServiceDep
from service.http.httpio import read_body, result_response
from service.http.inline import busy, cached, run_inline
from service.http.openapi import ERROR, body_of

router = APIRouter(tags=["simulations"])


@router.post("/v1/simulations", openapi_extra=body_of(SimulationRequest), dependencies=AUTHORIZED,
             responses={200: {"model": SimulationResult, "description": "the result (with a trace if asked)"},
                        401: ERROR, 413: ERROR, 422: ERROR, 429: ERROR})
async def run_simulation(request: Request, svc: ServiceDep) -> Response:
    """Simulate one request and answer with its result. Over the inline event limit: 413, use jobs."""
    body = await read_body(request, svc.settings.max_body_bytes)
    admitted = await asyncio.to_thread(svc.admit, body, True)
    hit = cached(svc, admitted, admitted.trace)
    if hit is not None:
        return result_response(hit, admitted.trace, {"X-Clustersim-Cache": "hit"})
    if svc.inline.full:
        raise busy()
    result = await run_inline(svc, admitted, admitted.trace)
    return result_response(result, admitted.trace, {"X-Clustersim-Cache": "miss"})
