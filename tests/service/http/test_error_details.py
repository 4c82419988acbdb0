"""Every error names the field it is about and the rule broken (contract: ``details: [{field, rule}]``): the
header of a 401, 403 and 415, the body of a 413 and its limit, the queue of a 429, the path of a 404, the method
of a 405, through a real app; and an error raised without details still gets one."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Server, request_doc
from fastapi.testclient import TestClient

from api_schemas import FieldError
from service.http.app import create_app
from service.http.errors import ApiError, from_job_error
from service.http.inline import busy
from service.jobs.errors import JobNotFinished, QueueFull
from service.settings import Settings


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(database=str(tmp_path_factory.mktemp("details") / "api.db"), workers=1,
                        max_body_bytes=10_000)
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        yield c


def details(response: Any, status: int) -> list[dict[str, str]]:
    assert response.status_code == status, response.text
    found: list[dict[str, str]] = response.json()["error"]["details"]
    assert found and all(isinstance(d["field"], str) and d["field"] and d["rule"] for d in found), found
    return found


def test_a_body_over_the_limit_names_the_body_and_the_limit(client: TestClient) -> None:
    # The declared length says so, or (chunked, no length) the count of what arrives does.
    for body in (b" " * 10_001, iter([b" " * 6_000, b" " * 6_000])):
        response = client.post("/v1/simulations", content=body, headers={"content-type": "application/json"})
        [detail] = details(response, 413)
        assert detail["field"] == "body"
        assert "10000 bytes" in detail["rule"] and "CLUSTERSIM_MAX_BODY_BYTES" in detail["rule"]
        assert response.json()["error"]["limit"] == 10_000


def test_a_missing_token_names_the_authorization_header(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(database=str(tmp_path / "t.db"), workers=1, api_token="s3cret")),
                    base_url="http://localhost") as c:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            [detail] = details(c.post("/v1/simulations", json=request_doc(), headers=headers), 401)
            assert detail["field"] == "header.authorization" and "Bearer" in detail["rule"]


def test_routes_methods_types_and_jobs_name_their_field(client: TestClient) -> None:
    assert details(client.get("/v1/nothing"), 404)[0]["field"] == "path"
    assert details(client.get("/v1/jobs/nope"), 404)[0]["field"] == "job_id"
    [detail] = details(client.put("/v1/simulations"), 405)
    assert detail["field"] == "method" and "POST" in detail["rule"]
    [detail] = details(client.post("/v1/simulations", content=b"x", headers={"content-type": "text/plain"}), 415)
    assert detail["field"] == "header.content-type" and "application/json" in detail["rule"]
    [detail] = details(client.get("/v1/jobs?limit=0"), 422)
    assert detail["field"] == "query.limit"


def test_a_foreign_host_or_origin_names_the_header(client: TestClient) -> None:
    [detail] = details(client.get("/v1/presets/gpus", headers={"host": "evil.example"}), 403)
    assert detail["field"] == "header.host"
    [detail] = details(client.get("/v1/presets/gpus", headers={"origin": "https://evil.example"}), 403)
    assert detail["field"] == "header.origin"


def test_a_full_queue_names_the_queue_and_its_setting() -> None:
    [detail] = from_job_error(QueueFull(100)).body()["error"]["details"]
    assert detail == {"field": "queue", "rule": "at most 100 jobs may wait for a worker (CLUSTERSIM_MAX_QUEUED_JOBS); "
                      "retry later"}
    assert from_job_error(JobNotFinished("j1", "running")).body()["error"]["details"] == [
        {"field": "job_id", "rule": "must have succeeded; it has not finished yet"}]


def test_an_error_raised_without_details_gets_the_field_its_status_is_about() -> None:
    assert busy().body()["error"]["details"] == [
        {"field": "queue", "rule": "too many simulations are waiting; retry later"}]
    for status, field in ((401, "header.authorization"), (408, "body"), (503, "service"), (418, "request")):
        error = ApiError(status, "x", "what happened").body()["error"]
        assert error["details"] == [{"field": field, "rule": "what happened"}]
    given = ApiError(413, "too_large", "m", [FieldError("cluster.num_gpus", "must be <= 8")]).body()["error"]
    assert given["details"] == [{"field": "cluster.num_gpus", "rule": "must be <= 8"}]


@pytest.mark.slow
def test_a_slow_upload_names_the_body_and_its_time_limit(tmp_path: Path) -> None:
    server = Server(tmp_path / "s.db", tmp_path / "server.log", CLUSTERSIM_WORKERS="1", CLUSTERSIM_BODY_TIMEOUT_S="1")
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"POST /v1/simulations HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{")
            answer = b""
            while b"}}" not in answer:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        [detail] = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["details"]
        assert detail["field"] == "body" and "CLUSTERSIM_BODY_TIMEOUT_S" in detail["rule"]
    finally:
        server.stop()
