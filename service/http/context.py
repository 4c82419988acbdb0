"""What every route of the HTTP service shares, as FastAPI dependencies: the running service (settings, store,
worker pool, inline slots, job manager) and the bearer token check.

The token is checked in one place, `require_token`, which every /v1 router declares for all its routes (reads
too: a job's id is not a secret, since GET /v1/jobs lists them): with ``CLUSTERSIM_API_TOKEN`` set, a request
without ``Authorization: Bearer <token>`` is refused with 401 before its body is read; without a token set,
every request passes. /healthz, /readyz and the documentation stay open.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api_schemas.loading import Syntax
from service.http.admission import Admitted, AdmittedComparison, AdmittedSearch, admit, admit_comparison, admit_search
from service.http.errors import ApiError
from service.http.metrics import ServiceMetrics
from service.http.pictures import Pictures
from service.jobs.manager import JobManager
from service.jobs.pool import InlineSlots, WorkerPool
from service.jobs.store import Store
from service.settings import Settings

__all__ = ["AUTHORIZED", "PARSERS", "Service", "ServiceDep", "require_token", "service"]

PARSERS = 2
T = TypeVar("T")


class Service:
    """The parts of a running service; `store`, `pool`, `inline`, `jobs` and `pictures` (drawn pictures) exist
    once the lifespan started. `metrics` (GET /metrics) lives as long as the app."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.ready = False
        self.metrics = ServiceMetrics()
        self.metrics.watch(self.live_figures)
        self.pictures: Pictures
        self.store: Store
        self.pool: WorkerPool
        self.jobs: JobManager
        self.inline: InlineSlots
        # Parsing and admission run in threads, at most PARSERS at once: they hold the GIL while they work, and
        # many at once would slow the event loop's own turns (/healthz) as much as running on it.
        self._parsers = asyncio.Semaphore(PARSERS)

    def live_figures(self) -> dict[str, Any]:
        """What GET /metrics reads when scraped: jobs by status, running jobs, inline runs waiting."""
        started = self.ready and self.store.ping()
        return {"jobs": self.store.counts() if started else {}, "running": self.jobs.running if started else 0,
                "inline_waiting": self.inline.waiting if started else 0}

    async def off_loop(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` in a thread, once one of the PARSERS turns is free."""
        async with self._parsers:
            return await asyncio.to_thread(work, *args)

    def admit(self, body: bytes, inline: bool, syntax: Syntax | None = None) -> Admitted:
        """A simulation body admitted under the inline or the job limits (ApiError 422 or 413 otherwise)."""
        return admit(body, self.settings, inline=inline, syntax=syntax)

    def admit_search(self, body: bytes, job_id: str, syntax: Syntax | None = None) -> AdmittedSearch:
        s = self.settings
        return admit_search(body, max_gpus=s.max_gpus, max_candidates=s.max_search_candidates, job_id=job_id,
                            max_space=s.max_search_space, job_limits=s.limits(inline=False),
                            job_timeout_s=s.job_timeout_s, syntax=syntax)

    def admit_comparison(self, body: bytes, syntax: Syntax | None = None) -> AdmittedComparison:
        return admit_comparison(body, self.settings, syntax)


def service(request: Request) -> Service:
    """The service of the app that received the request (set by create_app)."""
    svc: Service = request.app.state.service
    return svc


ServiceDep = Annotated[Service, Depends(service)]

_bearer = HTTPBearer(auto_error=False, description="required on every /v1 route when CLUSTERSIM_API_TOKEN is set")


def require_token(svc: ServiceDep,
                  credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)]) -> None:
    """401 unless the request carries ``Authorization: Bearer <CLUSTERSIM_API_TOKEN>`` (when a token is set)."""
    token = svc.settings.api_token
    if token is None:
        return
    given = credentials.credentials.strip().encode("utf-8") if credentials is not None else b""
    if credentials is None or not hmac.compare_digest(given, token.get_secret_value().encode("utf-8")):
        raise ApiError(401, "unauthorized", "this request needs the header 'Authorization: Bearer <token>' with "
                       "the service's token", headers={"WWW-Authenticate": 'Bearer realm="clustersim"'})


AUTHORIZED = [Depends(require_token)]
"""The `dependencies=` of every /v1 router."""
