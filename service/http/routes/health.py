"""Liveness (GET /healthz) and readiness (GET /readyz) for probes and load balancers; GET /metrics for
Prometheus (service/http/metrics.py says what it counts). None of them needs the token."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from service.http.context import ServiceDep
from service.http.metrics import CONTENT_TYPE
from service.http.models import Health, Ready

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: the process answers (no database access)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Ready, responses={503: {"model": Ready}})
async def readyz(svc: ServiceDep) -> JSONResponse:
    """Readiness: started, the database answers; 503 otherwise."""
    db_ok = svc.ready and svc.store.ping()
    ready = Ready(status="ready" if db_ok else "not_ready", database="ok" if db_ok else "unavailable",
                  workers=svc.settings.workers, queued_jobs=svc.store.count("queued") if db_ok else 0,
                  running_jobs=svc.jobs.running if db_ok else 0)
    return JSONResponse(ready.model_dump(), status_code=200 if db_ok else 503)


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE: {"schema": {"type": "string"}}},
                             "description": "Prometheus text format"}})
async def metrics(svc: ServiceDep) -> Response:
    """Requests by route and status, latencies, runs and their durations, jobs by status, queue depth, running
    jobs, results-cache hits, worker deaths: Prometheus' text format."""
    return Response(svc.metrics.exposition(), media_type=CONTENT_TYPE)
