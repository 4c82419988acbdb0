"""Request plumbing shared by the routes: the bounded body read, result responses, and the job status
document.
"""

from __future__ import annotations

import json
import zlib
from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from service.http.errors import ApiError
from service.http.models import JobStatus, job_links
from service.jobs.store import CachedResult, JobRow

__all__ = ["accepted", "job_status", "read_body", "result_response", "wants_trace"]

async def read_body(request: Request, limit_bytes: int) -> bytes:
    """The whole body, or 413 as soon as it is known to exceed `limit_bytes`."""
    def too_large() -> ApiError:
        return ApiError(413, "body_too_large", f"the request body is over the limit of {limit_bytes} bytes",
                        extra={"limit": limit_bytes})

    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit_bytes:
        raise too_large()
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit_bytes:
            raise too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def result_response(cached: CachedResult, include_trace: bool, headers: dict[str, str] | None = None) -> Response:
    """The result JSON as stored; with the Chrome trace under "trace" when asked for (options.trace)."""
    body = cached.result.encode("utf-8")
    if include_trace and cached.trace is not None:
        body = body[:-1] + b', "trace": ' + zlib.decompress(cached.trace) + b"}"
    return Response(body, media_type="application/json", headers=headers)


def wants_trace(job: JobRow) -> bool:
    """Whether the job's request asked for the trace inside its result (options.trace)."""
    return bool(json.loads(job.request).get("options", {}).get("trace", False))


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, tz=UTC)


def _progress(job: JobRow, reported: float | None) -> float:
    """1 once succeeded; while running, what the job's process reported (below 1 until it has finished);
    0 before it runs; a job that ended otherwise keeps 0."""
    if job.status == "succeeded":
        return 1.0
    if job.status != "running" or reported is None:
        return 0.0
    return round(min(0.99, max(0.0, reported)), 3)


def job_status(job: JobRow, progress: float | None = None) -> JobStatus:
    """The API's view of a stored job; `progress` is what a running job last reported."""
    error: dict[str, Any] | None = json.loads(job.error) if job.error else None
    return JobStatus(
        id=job.id, kind=job.kind, status=job.status,  # type: ignore[arg-type]
        progress=_progress(job, progress), created_at=_time(job.created_at),  # type: ignore[arg-type]
        started_at=_time(job.started_at), finished_at=_time(job.finished_at), attempts=job.attempts,
        cached=job.cached, estimated_events=job.estimated_events, error=error,  # type: ignore[arg-type]
        links=job_links(job.id),  # type: ignore[arg-type]
    )


def accepted(job: JobRow) -> JSONResponse:
    """202 with the accepted job's status and a Location header naming it."""
    return JSONResponse(job_status(job).model_dump(mode="json"), status_code=202,
                        headers={"Location": f"/v1/jobs/{job.id}"})
