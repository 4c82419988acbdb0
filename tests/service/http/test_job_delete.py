"""DELETE /v1/jobs/{id} cancels and does not remove: the job stays readable as `cancelled`. The OpenAPI schema
says so (the DELETE's 200 response, and links from an accepted job to reading and cancelling it and from a
cancel to the read that still answers it), and a client that follows those links sees each response match the
schema (schemathesis' response checks).

Schemathesis' `use_after_free` check assumes the other meaning (a 404 after a successful DELETE); it does not
apply to a schema that declares this one, so it is not among the checks here."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import schemathesis
from conftest import LARGE, request_doc
from fastapi.testclient import TestClient
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service.http.app import create_app
from service.settings import Settings

DEADLINE_S = 300.0  # generous: a loaded machine is many times slower than a quiet one
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance]
JOB = "/v1/jobs/{job_id}"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Any]]:
    app = create_app(Settings(database=str(tmp_path_factory.mktemp("delete") / "jobs.db"), workers=1))
    with TestClient(app, base_url="http://localhost") as client:
        yield client, app.openapi()


def resolve(schema: dict[str, Any], ref: str) -> Any:
    """The object a local JSON pointer (`#/paths/~1v1~1jobs~1{job_id}/get`) names."""
    assert ref.startswith("#/"), ref
    node: Any = schema
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def follow(schema: dict[str, Any], link: dict[str, Any], body: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    """(method, path template, path parameters) of the request a link leads to from a response `body`."""
    ref = link["operationRef"]
    path, method = ref[len("#/paths/"):].rsplit("/", 1)
    assert resolve(schema, ref) is schema["paths"][path.replace("~1", "/")][method]
    parameters = {}
    for name, expression in link["parameters"].items():
        assert expression.startswith("$response.body#/"), expression
        parameters[name] = body[expression[len("$response.body#/"):]]
    return method, path.replace("~1", "/"), parameters


def call(client: TestClient, schema: Any, method: str, path: str, parameters: dict[str, str]) -> Any:
    """Send the request and check its response against the schema with schemathesis."""
    response = client.request(method.upper(), path.format(**parameters))
    case = schema[path][method.upper()].Case(path_parameters=parameters)
    case.validate_response(response, checks=CHECKS)
    return response


def wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not {what} after {DEADLINE_S:g} s"
        time.sleep(0.05)


def test_the_schema_declares_that_a_cancelled_job_stays_readable(api: tuple[TestClient, Any]) -> None:
    _, schema = api
    cancelled = schema["paths"][JOB]["delete"]["responses"]["200"]
    assert cancelled["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/JobStatus"}
    assert "does not remove" in cancelled["description"] and "`cancelled`" in cancelled["description"]
    (link,) = cancelled["links"].values()
    assert follow(schema, link, {"id": "j"}) == ("get", JOB, {"job_id": "j"})
    accepted = schema["paths"]["/v1/jobs"]["post"]["responses"]["202"]["links"]
    assert {follow(schema, link, {"id": "j"})[0] for link in accepted.values()} == {"get", "delete"}
    assert "cancelled" in schema["components"]["schemas"]["JobStatus"]["properties"]["status"]["enum"]


@pytest.mark.parametrize("while_", ["running", "queued"])
def test_a_client_following_the_links_reads_the_cancelled_job(api: tuple[TestClient, Any], while_: str) -> None:
    client, spec = api
    schema = schemathesis.openapi.from_dict(spec)
    links = spec["paths"]["/v1/jobs"]["post"]["responses"]["202"]["links"]
    # With one worker the first long job runs and the second waits behind it.
    first = client.post("/v1/jobs", json=request_doc(LARGE, seed=31 if while_ == "running" else 32)).json()
    second = client.post("/v1/jobs", json=request_doc(LARGE, seed=33 if while_ == "running" else 34)).json()
    job = first if while_ == "running" else second
    wait(lambda: call(client, schema, *follow(spec, links["GetJob"], job)).json()["status"] == while_, while_)

    deleted = call(client, schema, *follow(spec, links["CancelJob"], job))
    assert deleted.status_code == 200 and deleted.json()["status"] == "cancelled"
    after = spec["paths"][JOB]["delete"]["responses"]["200"]["links"]["GetCancelledJob"]
    for moment in ("at once", "after its process has gone"):
        read = call(client, schema, *follow(spec, after, deleted.json()))
        assert read.status_code == 200, (moment, read.text)
        assert read.json()["status"] == "cancelled" and read.json()["error"]["code"] == "cancelled", moment
        assert read.json()["id"] == job["id"]
        if while_ == "running":  # one worker: the job queued behind starts once the killed run has ended
            wait(lambda: client.get(f"/v1/jobs/{second['id']}").json()["status"] == "running",
                 "running the next job")
    result = call(client, schema, "get", JOB + "/result", {"job_id": job["id"]})
    assert result.status_code == 409 and result.json()["error"]["code"] == "no_result"
    again = call(client, schema, "delete", JOB, {"job_id": job["id"]})
    assert again.status_code == 409 and again.json()["error"]["code"] == "job_finished"
    listed = client.get("/v1/jobs", params={"status": "cancelled"}).json()["jobs"]
    assert job["id"] in {j["id"] for j in listed}
    for other in (first, second):  # leave nothing running for the next case
        client.delete(f"/v1/jobs/{other['id']}")
