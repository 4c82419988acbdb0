"""Every optional field of a request body states its default in the OpenAPI schema the service publishes (GET
/openapi.json): as `default`, or in a description that names it (docs/usage.md sends readers there for every
field's default). pydantic leaves a `default_factory`'s value out of the schema and FastAPI drops `default: null`,
so both are stated on purpose; a stated default must be what the field really gets."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fastapi.testclient import TestClient
from pydantic import BaseModel, TypeAdapter

from api_schemas import SimulationRequest
from api_schemas.compare import ComparisonRequest
from api_schemas.search import SearchRequest
from service.http.app import create_app
from service.http.routes.interop import BODIES
from service.settings import Settings

NAMES_A_DEFAULT = re.compile(r"\bdefault", re.IGNORECASE)


def refs(node: Any) -> Iterator[str]:
    """The component names a schema fragment refers to."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.rsplit("/", 1)[-1]
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def request_components(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every component schema a request body reaches, by name."""
    components = document["components"]["schemas"]
    todo = [name for operations in document["paths"].values() for operation in operations.values()
            for name in refs(operation.get("requestBody", {}))]
    found: dict[str, dict[str, Any]] = {}
    while todo:
        name = todo.pop()
        if name not in found:
            found[name] = components[name]
            todo += refs(components[name])
    return found


def test_every_optional_request_field_states_its_default() -> None:
    with TestClient(create_app(Settings(database=":memory:")), base_url="http://localhost") as client:
        document = client.get("/openapi.json").json()
    schemas = request_components(document)
    assert {"SimulationRequest", "SearchRequest", "ComparisonRequest", "ImportIn", "CalibrationIn", "OptionsIn",
            "ClusterIn", "MeasuredIn"} <= set(schemas)  # the walk reaches the bodies and their sections
    silent = [f"{name}.{field}" for name, schema in sorted(schemas.items())
              for field, spec in schema.get("properties", {}).items()
              if field not in schema.get("required", ()) and "default" not in spec
              and not NAMES_A_DEFAULT.search(spec.get("description", ""))]
    assert not silent, f"optional request fields whose default the OpenAPI schema does not state: {silent}"


def models(roots: tuple[type[BaseModel], ...]) -> Iterator[type[BaseModel]]:
    """The request models and every model their fields hold (one level of list, dict, union or annotation)."""
    seen: set[type[BaseModel]] = set()
    todo = list(roots)
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        yield model
        for field in model.model_fields.values():
            todo += [t for t in nested_types(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]


def nested_types(annotation: Any) -> Iterator[Any]:
    yield annotation
    for argument in getattr(annotation, "__args__", ()):
        yield from nested_types(argument)
    for meta in getattr(annotation, "__metadata__", ()):
        yield from nested_types(meta)
    origin = getattr(annotation, "__origin__", None)
    if origin is not None:
        yield from nested_types(origin)


def test_a_stated_default_of_a_factory_is_what_the_factory_makes() -> None:
    checked = []
    for model in models((SimulationRequest, SearchRequest, ComparisonRequest, *BODIES)):
        for name, field in model.model_fields.items():
            if field.default_factory is None:
                continue
            extra = field.json_schema_extra
            assert isinstance(extra, dict) and "default" in extra, f"{model.__name__}.{name}: no stated default"
            stated = TypeAdapter(field.annotation).validate_python(extra["default"])
            assert stated == field.default_factory(), f"{model.__name__}.{name}: {extra['default']!r}"
            checked.append(f"{model.__name__}.{name}")
    assert {"ClusterIn.slow_gpus", "SimulationRequest.options", "CalibrationIn.files"} <= set(checked)
