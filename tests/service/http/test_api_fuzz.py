"""Fuzz the API from its own OpenAPI schema (schemathesis, valid and invalid inputs) against a real server:
no response is a 5xx, and every status, content type, header and body matches the schema. Bounded for CI:
a few dozen examples per operation, small limits so any request that does simulate is quick."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from conftest import Server
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from service.http.app import create_app
from service.settings import Settings

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

# Every check but positive_data_acceptance: a schema-valid request may still break a domain rule (dp * tp * pp
# = GPUs) or a limit, and then a 422 or 413 is the right answer.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, negative_data_rejection, unsupported_method]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder: Path = tmp_path_factory.mktemp("fuzz")
    limits = {"CLUSTERSIM_WORKERS": "2", "CLUSTERSIM_MAX_GPUS": "64", "CLUSTERSIM_MAX_MICROBATCHES": "64",
              "CLUSTERSIM_MAX_INLINE_EVENTS": "5000", "CLUSTERSIM_MAX_JOB_EVENTS": "5000",
              "CLUSTERSIM_JOB_TIMEOUT_S": "5", "CLUSTERSIM_INLINE_TIMEOUT_S": "5",
              "CLUSTERSIM_MAX_BODY_BYTES": "100000"}
    server = Server(folder / "fuzz.db", folder / "server.log", **limits)
    yield server
    server.stop()


# The schema the app serves at /openapi.json (building it starts nothing); the calls go to the server.
schema = schemathesis.openapi.from_dict(create_app(Settings(database=":memory:")).openapi())


@schema.parametrize()
@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
          database=None)
def test_api_matches_its_schema_and_never_fails(case: Any, server: Server) -> None:
    case.call_and_validate(base_url=server.url, checks=CHECKS, timeout=30)
