"""The HTTP API (FastAPI): simulations and comparisons inline, jobs and searches in the background, presets,
health. OpenAPI at /docs.

`create_app(settings)` builds an app from one router per resource (service/http/routes/) whose lifespan opens
the SQLite store, starts the simulation processes' forkserver and the job dispatcher, and on shutdown puts
running jobs back in the queue. Request bodies are read raw and parsed by api_schemas (YAML or JSON, duplicate
keys refused) as their Content-Type says (service.http.httpio). Every /v1 route needs the bearer token when one
is configured (service.http.context.require_token); without one, a server on a loopback address answers only
requests addressed to this machine (service.http.guard).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service.http import errors
from service.http.context import Service
from service.http.guard import HostGuard, guarded
from service.http.metrics import MetricsMiddleware
from service.http.openapi import openapi
from service.http.pictures import Pictures
from service.http.routes import comparisons, health, interop, jobs, pages, plots, presets, searches, simulations
from service.jobs.manager import JobManager
from service.jobs.pool import InlineSlots, WorkerPool
from service.jobs.store import Store
from service.provenance import package_version
from service.settings import Settings

__all__ = ["create_app"]

_DESCRIPTION = ("Discrete-event simulator of distributed LLM training. Errors are "
                '`{"error": {"code", "message", "details": [{"field", "rule"}]}}`. Request bodies are JSON or YAML.')


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new app; nothing starts until its lifespan does (uvicorn, or `with TestClient(app)`)."""
    svc = Service(settings or Settings())
    s = svc.settings

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        svc.store = Store(s.database_path())
        svc.pool = WorkerPool(threads=2 * s.workers + 2, memory_mb=s.memory_cap_mb(),
                              observer=svc.metrics.run_finished)
        svc.inline = InlineSlots(s.workers, s.max_queued_jobs)
        await asyncio.to_thread(svc.pool.warm)
        svc.jobs = JobManager(svc.store, svc.pool, workers=s.workers, max_queued=s.max_queued_jobs,
                              timeout_s=s.job_timeout_s, max_attempts=s.max_job_attempts,
                              max_trace_bytes=s.max_trace_bytes, retention_s=s.retention_days * 86400)
        svc.jobs.start()
        svc.pictures = Pictures(s.memory_cap_mb(), observer=svc.metrics.run_finished)
        svc.pictures.start(svc.store, s.database_path())
        svc.ready = True
        try:
            yield
        finally:
            svc.ready = False
            await svc.jobs.stop()
            await svc.pictures.stop()
            svc.pool.close()
            svc.store.close()

    app = FastAPI(title="clustersim", version=package_version(), lifespan=lifespan, description=_DESCRIPTION,
                  docs_url=None, redoc_url=None)
    app.state.service = svc
    routers = [r.router for r in (simulations, jobs, plots, searches, comparisons, presets, health, interop)]
    for router in routers:
        app.include_router(router)
    pages.install(app)  # the web page and /docs, served from the package
    errors.install(app, routers)
    app.add_middleware(MetricsMiddleware, metrics=svc.metrics)
    if guarded(s):
        app.add_middleware(HostGuard, settings=s)
    # The bearer scheme appears in the OpenAPI schema only when a token is required.
    app.openapi = lambda: openapi(app, bearer=s.api_token is not None,  # type: ignore[method-assign]
                                  bodies=interop.BODIES)
    return app
