"""The OpenAPI schema of the HTTP service: the request documents' own schemas (api_schemas) as components, the
request bodies of the routes that read a raw YAML or JSON body, and the bearer scheme only where it is used."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from api_schemas import SimulationRequest
from api_schemas.compare import ComparisonRequest
from api_schemas.search import SearchRequest
from service.http.models import ErrorBody

__all__ = ["ERROR", "JOB_RESULT", "SEARCH_RESULT_SCHEMA", "accepted_job", "body_of", "openapi"]

ERROR: dict[str, Any] = {"model": ErrorBody}
"""The `responses=` entry of an error status: the contract's error document."""


SEARCH_RESULT_SCHEMA: dict[str, Any] = {
    "title": "SearchResult", "type": "object",
    "description": "the search result document (docs/search.md, Search and sweeps): the problem, the best layout "
                   "and the top ones with their simulated figures, what was generated, pruned and simulated, "
                   "and the run",
    "required": ["problem", "best", "top", "search", "discarded_families", "run"],
    "properties": {"problem": {"type": "object"}, "best": {"anyOf": [{"type": "object"}, {"type": "null"}]},
                   "top": {"type": "array", "items": {"type": "object"}}, "search": {"type": "object"},
                   "discarded_families": {"type": "array", "items": {"type": "object"}},
                   "baseline": {"type": "object"}, "run": {"type": "object"}},
}

JOB_RESULT: dict[str, Any] = {
    "description": "the result: a simulation result for a simulation job, the search result document for a search "
                   "job (the job's `kind` says which)",
    "content": {"application/json": {"schema": {"anyOf": [{"$ref": "#/components/schemas/SimulationResult"},
                                                           SEARCH_RESULT_SCHEMA]}}},
}
"""The 200 response of GET /v1/jobs/{id}/result: either result document."""


def body_of(document: type[BaseModel]) -> dict[str, Any]:
    """The `openapi_extra` of a route that reads `document` from a raw JSON or YAML body."""
    schema = {"schema": {"$ref": f"#/components/schemas/{document.__name__}"}}
    return {"requestBody": {"required": True, "content": {"application/json": schema, "application/yaml": schema}}}


def accepted_job(description: str) -> dict[str, Any]:
    """The 202 response of a route that accepts a job: its description and the Location header."""
    return {"description": description,
            "headers": {"Location": {"description": "/v1/jobs/{id}", "required": True, "schema": {"type": "string"}}}}


def openapi(app: FastAPI, bearer: bool, bodies: tuple[type[BaseModel], ...] = ()) -> dict[str, Any]:
    """The app's schema, built once; `bearer` False drops the bearer scheme (no token is configured). The request
    documents and `bodies` (the models of the JSON bodies FastAPI reads itself) are described by pydantic's own
    schemas: FastAPI writes its schema without None values, which drops every `default: null`."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {})
        schemas = components.setdefault("schemas", {})
        documents: tuple[type[BaseModel], ...] = (SimulationRequest, SearchRequest, ComparisonRequest, *bodies)
        for document in documents:
            own = document.model_json_schema(ref_template="#/components/schemas/{model}")
            for name, definition in own.pop("$defs", {}).items():
                schemas.setdefault(name, definition)  # sections shared by several documents: the same schema
            schemas[document.__name__] = own
        if not bearer:
            components.pop("securitySchemes", None)
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.pop("security", None)
        app.openapi_schema = schema
    return app.openapi_schema
