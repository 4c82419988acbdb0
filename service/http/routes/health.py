"""Liveness (GET /healthz) and readiness (GET /readyz) for probes and load balancers."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from service.http.context import ServiceDep
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
