"""Response documents of the HTTP service beyond the simulation result (api_schemas has the request and the
result): job status, job pages, errors and health, as pydantic models for the OpenAPI schema.

Times are ISO 8601 UTC timestamps; progress is a fraction in [0, 1].
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ErrorBody", "ErrorDetail", "ErrorInfo", "Health", "JobError", "JobLinks", "JobPage", "JobState",
           "JobStatus", "Ready", "SearchAccepted", "TERMINAL", "job_links"]

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled", "timed_out"]
"""queued -> running -> succeeded | failed | timed_out; queued or running -> cancelled (DELETE)."""
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "timed_out"})


class ErrorDetail(BaseModel):
    """One problem: the dotted path of the field (``layout.tp``; ``query.limit``) and the rule it broke."""

    field: str
    rule: str


class ErrorInfo(BaseModel):
    """What went wrong. A 413 for an inline simulation also gives `estimated_events`, `limit` and `jobs`."""

    model_config = ConfigDict(extra="allow")

    code: str = Field(description="stable, machine-readable, e.g. invalid_request, not_found, too_large")
    message: str = Field(description="one line for a person")
    details: list[ErrorDetail] = Field(default_factory=list)
    estimated_events: int | None = Field(default=None, description="413: the estimate of the engine events")
    limit: int | None = Field(default=None, description="413: the limit the estimate or value is over")
    jobs: str | None = Field(default=None, description="413: where to submit the request as a job instead")


class ErrorBody(BaseModel):
    """Every error response of the API."""

    error: ErrorInfo


class JobError(BaseModel):
    """Why a job did not succeed (failed, timed out or cancelled)."""

    code: str
    message: str
    details: list[ErrorDetail] = Field(default_factory=list)


class JobLinks(BaseModel):
    """Where to read the job, the request it runs, its result and its Chrome trace."""

    self: str
    request: str
    result: str
    trace: str


class JobStatus(BaseModel):
    """One job as the service stores it."""

    id: str
    kind: Literal["simulation", "search"] = Field(
        default="simulation", description="simulation (POST /v1/jobs) or search (POST /v1/searches: no trace)")
    status: JobState
    progress: float = Field(ge=0, le=1, description=(
        "fraction done: 1 once succeeded; while running, the compute passes the engine has finished over those of "
        "the iteration (a search: candidates done over planned), below 1 until it ends; 0 otherwise"))
    created_at: datetime
    started_at: datetime | None = Field(description="when its latest run started")
    finished_at: datetime | None
    attempts: int = Field(ge=0, description="runs started, counting reruns after a restart")
    cached: bool = Field(description="the result came from the results cache, without simulating")
    estimated_events: int = Field(ge=0, description="admission estimate of the engine events")
    error: JobError | None
    links: JobLinks


class SearchAccepted(JobStatus):
    """A search accepted as a job: its status, the bounds it runs under and each bound the service lowered or
    set, with the rule that did it (its estimated_events is an upper bound: what those bounds allow)."""

    bounds: dict[str, Any] = Field(description="the request's bounds as the job runs them (SearchRequest.bounds)")
    capped: list[ErrorDetail] = Field(description=(
        "each bound the service lowered or set, and why: bounds.max_candidates, bounds.max_candidate_events and "
        "bounds.max_candidate_memory_mb (a candidate over them is screened, not simulated), bounds.max_estimated_s "
        "(the estimated seconds of all its simulations, so that it ends within the job time limit)"))


class JobPage(BaseModel):
    """A page of jobs, newest first; pass `next_cursor` as `cursor` for the next page (null: no more)."""

    jobs: list[JobStatus]
    next_cursor: str | None


class Health(BaseModel):
    """Liveness: the process answers."""

    status: Literal["ok"]


class Ready(BaseModel):
    """Readiness: the database answers and the worker pool has started."""

    status: Literal["ready", "not_ready"]
    database: Literal["ok", "unavailable"]
    workers: int
    queued_jobs: int
    running_jobs: int


def job_links(job_id: str) -> dict[str, Any]:
    base = f"/v1/jobs/{job_id}"
    return {"self": base, "request": f"{base}/request", "result": f"{base}/result", "trace": f"{base}/trace"}
