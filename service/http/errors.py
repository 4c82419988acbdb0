"""HTTP errors in the contract's format: ``{"error": {"code", "message", "details": [{"field", "rule"}]}}``.

`ApiError` is what the service raises for a refused request; the handlers installed by `install` turn it, what
the job manager refuses (service.jobs.errors), and FastAPI's own errors (a bad query parameter, an unknown
route), into that JSON. A request error from the request documents (`RequestError`) or the domain (`SpecError`,
made a RequestError by service.convert.request_error) is a 422 naming the field and the rule. Every error names
at least one (field, rule): one raised without details gets the part of the request its status is about
(``header.authorization`` for a 401, ``body`` for a 408, ...) with its message as the rule. This module is the
one place where an error becomes a response.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from api_schemas import FieldError, RequestError, error_body
from api_schemas.compare import item_field
from api_schemas.errors import printable
from service.jobs.errors import JobError, JobFinished, JobNotFinished, JobNotFound, NoTrace, QueueFull

__all__ = ["ApiError", "from_job_error", "install", "invalid", "invalid_details", "within_item"]

log = logging.getLogger("clustersim.service")

# What a status is about when an error names no field itself: a header, the path, the body, or the service.
_FIELDS = {401: "header.authorization", 403: "header.origin", 404: "path", 405: "method", 406: "header.accept",
           408: "body", 409: "path", 413: "request", 415: "header.content-type", 429: "queue", 500: "request",
           503: "service"}

_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
          405: "method_not_allowed", 408: "request_timeout", 409: "conflict", 413: "too_large",
          415: "unsupported_media_type", 422: "invalid_request", 429: "too_many_requests", 500: "internal_error",
          503: "not_ready"}


class ApiError(Exception):
    """A refused request: HTTP status, a stable code, a one-line message and (field, rule) details.

    `extra` adds keys beside code/message/details (e.g. a 413's ``estimated_events`` and ``limit``). Without
    `details`, the one detail is the field the status is about (_FIELDS) and the message as its rule.
    """

    def __init__(self, status: int, code: str, message: str, details: Iterable[FieldError] = (),
                 extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> None:
        message = printable(message)
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = list(details) or [FieldError(_FIELDS.get(status, "request"), message)]
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message,
                                 "details": [{"field": d.field, "rule": d.rule} for d in self.details]}
        error.update(self.extra)
        return {"error": error}

    def response(self) -> Response:
        # ASCII escapes: whatever a message or an extra value holds (a lone surrogate), it encodes.
        return Response(json.dumps(self.body(), ensure_ascii=True), status_code=self.status,
                        headers=self.headers or None, media_type="application/json")


def invalid(err: RequestError) -> ApiError:
    """422 for an invalid request document, every (field, rule) it broke."""
    body = error_body(err)["error"]
    return ApiError(422, body["code"], body["message"], err.details)


def invalid_details(details: Iterable[tuple[str, str]]) -> ApiError:
    """422 from (field, rule) pairs (what a simulation process reports)."""
    return invalid(RequestError(FieldError(f, r) for f, r in details))


def from_job_error(err: JobError) -> ApiError:
    """What the job manager refused, as the API says it: 404, 409 or 429."""
    job_id = err.job_id
    if isinstance(err, JobNotFound):
        return ApiError(404, "not_found", str(err), [FieldError("job_id", "no such job")])
    if isinstance(err, JobNotFinished):
        rule = "must have succeeded" + ("; it has not finished yet" if err.waiting else f"; it is {err.status}")
        return ApiError(409, "not_finished" if err.waiting else "no_result",
                        str(err) + ("; poll GET /v1/jobs/{id}" if err.waiting else ""),
                        [FieldError("job_id", rule)], extra={"job_status": err.status})
    if isinstance(err, JobFinished):
        return ApiError(409, "job_finished", f"{err}; only a queued or running job can be cancelled",
                        [FieldError("job_id", f"must be queued or running to be cancelled; it is {err.status}")])
    if isinstance(err, NoTrace) and err.kind != "simulation":
        return ApiError(409, "no_trace", f"job {job_id} is a {err.kind} job; only simulation jobs have a trace",
                        [FieldError("job_id", f"must be a simulation job; it is a {err.kind} job")],
                        extra={"job_kind": err.kind})
    if isinstance(err, NoTrace):
        return ApiError(409, "no_trace", str(err), [FieldError("job_id", "must have a stored trace")])
    if isinstance(err, QueueFull):
        return ApiError(429, "queue_full", f"{err}; retry later",
                        [FieldError("queue", f"at most {err.queued} jobs may wait for a worker "
                                    "(CLUSTERSIM_MAX_QUEUED_JOBS); retry later")], headers={"Retry-After": "5"})
    raise TypeError(f"no response for {type(err).__name__}")


def within_item(err: ApiError, index: int) -> ApiError:
    """The same error about the request at `index` of a comparison: fields named ``requests[1].layout.tp``."""
    details = [FieldError(item_field(index, d.field), d.rule) for d in err.details]
    if err.status == 422 and details:
        return invalid(RequestError(details))
    return ApiError(err.status, err.code, f"{item_field(index, '')}: {err.message}", details, err.extra,
                    err.headers)


def _loc(loc: Iterable[Any]) -> str:
    return ".".join(str(part) for part in loc) or "request"


async def _api_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _job_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, JobError)
    return from_job_error(exc).response()


async def _validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    details = [FieldError(_loc(e.get("loc", ())), " ".join(str(e.get("msg", "is invalid")).split()))
               for e in exc.errors()]
    return invalid(RequestError(details)).response()


def _allowed_methods(request: Request) -> str:
    """Every method of every route on this path (Starlette names only the first route's). The routers' own
    routes are walked too: newer FastAPI keeps an included router as one opaque route of the app."""
    methods: set[str] = set()
    for route in [*request.app.routes, *request.app.state.router_routes]:
        regex, route_methods = getattr(route, "path_regex", None), getattr(route, "methods", None)
        if regex is not None and route_methods and regex.match(request.url.path):
            methods |= set(route_methods)
    return ", ".join(sorted(methods))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = _CODES.get(exc.status_code, "error")
    message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    headers = dict(exc.headers or {})
    details = []
    if exc.status_code == 404:
        details = [FieldError("path", f"no route {request.url.path[:200]}; the routes are in /openapi.json")]
    elif exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request)
        details = [FieldError("method", f"must be one of {headers['Allow']} on this path")]
    return ApiError(exc.status_code, code, message, details, headers=headers).response()


async def _unexpected(request: Request, exc: Exception) -> Response:
    # A bug, never a client's fault: log it, answer in the contract's format without internals.
    log.exception("internal error on %s %s", request.method, request.url.path)
    return ApiError(500, "internal_error", "internal error; the server log has the details",
                    [FieldError("request", "could not be answered: a fault of the service, not of the request")]
                    ).response()


def install(app: FastAPI, routers: Iterable[APIRouter] = ()) -> None:
    """Route every error through the contract's format; `routers` are those the app includes (for the Allow
    header of a 405)."""
    app.state.router_routes = [route for router in routers for route in router.routes]
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(JobError, _job_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
