"""Request plumbing shared by the routes: the bounded body read (its size counted and its shape scanned as it
arrives, service.http.bodyshape), result responses, and the job status document.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from api_schemas import FieldError, RequestError
from api_schemas.errors import WHOLE_REQUEST
from api_schemas.loading import Syntax
from service.http.bodyshape import BodyShape
from service.http.errors import ApiError, invalid
from service.http.models import JobStatus, job_links
from service.jobs.store import JobRow
from service.settings import Settings

__all__ = ["ACCEPTED_TYPES", "accepted", "body_syntax", "job_status", "read_body", "read_document", "wants_trace"]

log = logging.getLogger("clustersim.service")


# The request body types a route reads, and how: JSON as JSON only, YAML as YAML only. A body without a
# Content-Type is read as the CLI reads a file (YAML, else JSON). Any other type (text/plain, a form) is 415
# before the body is read: those are the types a web page may POST to another site without asking first.
_JSON_TYPES = frozenset({"application/json"})
_YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})
ACCEPTED_TYPES = sorted(_JSON_TYPES | _YAML_TYPES)


def body_syntax(request: Request) -> Syntax | None:
    """How to read the request's body by its Content-Type; 415 for a type the routes do not read."""
    declared = request.headers.get("content-type")
    if declared is None:
        return None
    media, _, parameters = declared.partition(";")
    media = media.strip().lower()
    charset = next((p.split("=", 1)[1].strip().strip('"').lower() for p in parameters.split(";")
                    if p.strip().lower().startswith("charset=")), "utf-8")
    if charset in ("utf-8", "utf8"):
        if media in _JSON_TYPES or (media.startswith("application/") and media.endswith("+json")):
            return "json"
        if media in _YAML_TYPES:
            return "yaml"
    raise ApiError(415, "unsupported_media_type",
                   f"Content-Type {declared[:100]!r} is not read here: send UTF-8 application/json or "
                   "application/yaml", [FieldError("header.content-type", "must be UTF-8 application/json (or "
                                                   "+json), or a YAML type: " + ", ".join(ACCEPTED_TYPES))],
                   extra={"accepted": ACCEPTED_TYPES})


# The most bytes of a chunk scanned at once: between slices the event loop serves other requests (/healthz), so
# that even a chunk dense with what the scan steps over one at a time holds it for a few milliseconds at most.
_SCAN_SLICE_BYTES = 16_384


async def read_body(request: Request, limit_bytes: int, timeout_s: float = 30.0,
                    shape: BodyShape | None = None) -> bytes:
    """The whole body, or 413 as soon as it is known to exceed `limit_bytes`, 408 when it has not all arrived
    within `timeout_s`, 400 (not an internal error) when the client disconnects before sending it all. With a
    `shape`, each chunk is scanned as it arrives; a body that breaks one of its rules is 422 once it has all
    arrived (the rest is read without scanning, so that the client gets the answer on a connection it can read),
    before any parser sees it."""
    def too_large() -> ApiError:
        return ApiError(413, "body_too_large", f"the request body is over the limit of {limit_bytes} bytes",
                        [FieldError("body", f"must be at most {limit_bytes} bytes (CLUSTERSIM_MAX_BODY_BYTES)")],
                        extra={"limit": limit_bytes})

    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit_bytes:
        raise too_large()
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit_bytes:
                    raise too_large()
                chunks.append(chunk)
                if shape is not None:
                    await _scan(shape, chunk)
    except TimeoutError:
        raise ApiError(408, "body_timeout", f"the request body did not arrive within {timeout_s:g} s",
                       [FieldError("body", f"must arrive within {timeout_s:g} s of the headers "
                                   "(CLUSTERSIM_BODY_TIMEOUT_S)")], headers={"Connection": "close"}) from None
    except ClientDisconnect:
        log.info("client disconnected during the upload of %s %s", request.method, request.url.path)
        raise ApiError(400, "client_disconnected", "the client disconnected before sending the whole body",
                       [FieldError("body", "must arrive whole (the connection closed first)")],
                       headers={"Connection": "close"}) from None
    if shape is not None and shape.refusal is not None:
        raise invalid(RequestError.for_field(WHOLE_REQUEST, shape.refusal))
    return b"".join(chunks)


async def _scan(shape: BodyShape, chunk: bytes) -> None:
    """Feed `chunk` to `shape` a slice at a time, letting the event loop run between slices."""
    for start in range(0, len(chunk), _SCAN_SLICE_BYTES):
        if shape.refusal is not None:
            return
        if start:
            await asyncio.sleep(0)
        shape.feed(chunk[start:start + _SCAN_SLICE_BYTES] if len(chunk) > _SCAN_SLICE_BYTES else chunk)


async def read_document(request: Request, settings: Settings) -> tuple[bytes, Syntax | None]:
    """The body of a route that reads a document and how to read it: 415 by its Content-Type before anything
    is read, then `read_body` under the settings' size and time limits, its shape scanned as it arrives (422
    for a body nested, wide or indented past what the parsers accept; service.http.bodyshape)."""
    syntax = body_syntax(request)
    body = await read_body(request, settings.max_body_bytes, settings.body_timeout_s, BodyShape(syntax))
    return body, syntax


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
