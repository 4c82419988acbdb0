"""Bodies a hostile client sends, through a real app (TestClient runs the lifespan) and, where the connection
matters, a real server: read by their Content-Type (JSON as JSON, so a surrogate pair is one character), 415 for
a type the routes do not read (before the body is read), lone surrogates, deep nesting and YAML bombs refused
with 422 (never a 500 or a reset connection), a simulation process that dies answered 503, a slow upload 408,
and a foreign Host or Origin 403 on a local server without a token."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import LARGE, Server, descendants, request_doc
from fastapi.testclient import TestClient

from service.http.app import create_app
from service.settings import Settings

# GPT-3 125M on 8 A100s: milliseconds each.
DP8: dict[str, Any] = {"model": {"preset": "gpt3-125m"}, "cluster": {"preset": "dgx-a100", "num_gpus": 8},
                       "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 16}}
EMOJI = "\U0001f600"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    database: Path = tmp_path_factory.mktemp("hostile") / "api.db"
    with TestClient(create_app(Settings(database=str(database), workers=1)), base_url="http://localhost") as c:
        yield c


def error_of(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    if code is not None:
        assert error["code"] == code, error
    return error


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", None])
def test_a_comparison_labelled_with_an_emoji_escaped_as_json_does_is_answered(
        client: TestClient, content_type: str | None) -> None:
    body = json.dumps({"requests": [DP8], "labels": [f"fast {EMOJI}"]})  # "\ud83d\ude00": two escapes
    assert "\\ud83d\\ude00" in body
    headers = {"content-type": content_type} if content_type else {}
    response = client.post("/v1/comparisons", content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["rows"][0]["label"] == f"fast {EMOJI}"


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml", None])
def test_a_lone_surrogate_is_422_naming_the_field_and_never_500(client: TestClient, content_type: str | None) -> None:
    body = json.dumps({"requests": [DP8], "labels": ["\ud800 x"]})
    headers = {"content-type": content_type} if content_type else {}
    error = error_of(client.post("/v1/comparisons", content=body, headers=headers), 422, "invalid_request")
    assert "surrogate" in error["details"][0]["rule"]
    # A key of the client's own that cannot be encoded is escaped in the error, not echoed raw.
    error = error_of(client.post("/v1/simulations", content=json.dumps({**DP8, "\udfff" * 3: 1}),
                                 headers={"content-type": "application/json"}), 422)
    assert "\\udfff" in json.dumps(error) or "surrogate" in json.dumps(error)


def test_a_long_bad_value_is_echoed_only_as_a_bounded_prefix(client: TestClient) -> None:
    doc = {**DP8, "model": {"preset": "x" * 200_000}}
    response = client.post("/v1/simulations", json=doc)
    error_of(response, 422)
    assert len(response.content) < 5_000


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/xml",
                                          "application/json; charset=latin-1"])
def test_other_content_types_are_415_before_the_body_is_read(client: TestClient, content_type: str) -> None:
    for route in ("/v1/simulations", "/v1/jobs", "/v1/comparisons", "/v1/searches"):
        # The body is over the size limit: a 415 rather than a 413 shows it was never read.
        response = client.post(route, content=b"x" * 1_100_000, headers={"content-type": content_type})
        error = error_of(response, 415, "unsupported_media_type")
        assert "application/json" in error["accepted"]


def test_json_declared_is_read_as_json_only_and_yaml_declared_as_yaml_only(client: TestClient) -> None:
    yaml_text = "model: {preset: gpt3-125m}\ncluster: {preset: dgx-a100, num_gpus: 8}\n" \
                "layout: {dp: 8, tp: 1, pp: 1, global_batch_size: 16}\n"
    error = error_of(client.post("/v1/simulations", content=yaml_text, headers={"content-type": "application/json"}),
                     422)
    assert "not valid JSON" in error["details"][0]["rule"]
    assert client.post("/v1/simulations", content=yaml_text,
                       headers={"content-type": "application/yaml"}).status_code == 200
    error = error_of(client.post("/v1/simulations", content='{"a": NaN}',
                                 headers={"content-type": "application/json"}), 422)
    assert "NaN" in error["details"][0]["rule"]


@pytest.mark.parametrize(("body", "content_type", "rule"), [
    ("[" * 200_000 + "]" * 200_000, "application/json", "nests more than"),
    ("[" * 200_000 + "]" * 200_000, "application/yaml", "nests more than"),
    ("a:\n" + "".join(" " * i + "- \n" for i in range(1, 60)), "application/yaml", "nests more than"),
    ("a: &a [x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 8)}]\n" for i in range(7)),
     "application/yaml", "holds more than"),
    ("a: &a [*a]", "application/yaml", "contains itself"),
    ("a: !!python/object/apply:os.system [ls]", "application/yaml", "constructor"),
    ("[" + ",".join(["0"] * 100_000) + "]", "application/json", "holds more than"),
])
def test_deep_wide_and_recursive_documents_are_422_and_cheap(client: TestClient, body: str, content_type: str,
                                                            rule: str) -> None:
    started = time.perf_counter()
    error = error_of(client.post("/v1/simulations", content=body, headers={"content-type": content_type}), 422)
    assert rule in error["details"][0]["rule"], error
    assert time.perf_counter() - started < 5.0


def _kill_simulation_processes(stop: threading.Event) -> None:
    """SIGKILL every grandchild of this process (the simulation processes under the forkserver) until `stop`."""
    me = os.getpid()
    while not stop.is_set():
        children = set(descendants(me)) - set(_children(me))
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def test_a_simulation_process_that_dies_is_503_worker_died_not_500(tmp_path: Path) -> None:
    settings = Settings(database=str(tmp_path / "die.db"), workers=1, max_inline_events=10_000_000)
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        stop = threading.Event()
        killer = threading.Thread(target=_kill_simulation_processes, args=(stop,), daemon=True)
        killer.start()
        try:
            response = c.post("/v1/simulations", content=LARGE.read_bytes(),
                              headers={"content-type": "application/yaml"})
        finally:
            stop.set()
            killer.join()
        error = error_of(response, 503, "worker_died")
        assert "SIGKILL" in error["message"]
        assert response.headers["retry-after"]
        assert c.get("/healthz").status_code == 200  # the service itself is fine


def _simulation_processes() -> set[int]:
    me = os.getpid()
    return set(descendants(me)) - set(_children(me))


def test_a_comparison_that_fails_ends_its_other_simulations(tmp_path: Path) -> None:
    # The long run takes about 2 s of CPU on a quiet machine: well past an inline limit of 0.4 s
    settings = Settings(database=str(tmp_path / "cmp.db"), workers=1, inline_timeout_s=0.4)
    large = yaml.safe_load(LARGE.read_text(encoding="utf-8"))
    # no cache hits: each would run
    requests = [{**large, "options": {**large["options"], "seed": seed}} for seed in (1, 2, 3)]
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        response = c.post("/v1/comparisons", json={"requests": requests})
        error = error_of(response, 413, "too_large_for_inline")
        assert error["message"].startswith("requests[0]")
        deadline = time.monotonic() + 1.0  # before: the second and third ran on after the answer
        while _simulation_processes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _simulation_processes()


# --- connections and access, on a real server ------------------------------------------------------------------

@pytest.fixture(scope="module")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile-server") / "server.log"


@pytest.fixture(scope="module")
def server(server_log: Path) -> Iterator[Server]:
    running = Server(server_log.parent / "s.db", server_log, CLUSTERSIM_WORKERS="1", CLUSTERSIM_BODY_TIMEOUT_S="1")
    yield running
    running.stop()


@pytest.mark.slow
def test_a_lone_surrogate_over_a_real_connection_keeps_the_connection(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for _ in range(3):  # the same keep-alive connection: no reset after the first answer
            response = http.post("/v1/comparisons", content=json.dumps({"requests": [DP8], "labels": ["\udc00"]}),
                                 headers={"content-type": "application/yaml"})
            assert response.status_code == 422, response.text
        assert http.get("/healthz").status_code == 200


def _raw(server: Server, head: bytes, body: bytes, wait_s: float) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head + body)
        time.sleep(wait_s)
        return sock.recv(65536)


@pytest.mark.slow
def test_a_slow_upload_is_408_and_a_dropped_one_is_not_an_internal_error(server: Server, server_log: Path) -> None:
    head = (b"POST /v1/simulations HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n")
    answer = _raw(server, head, b'{"model": ', 1.5)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head + b'{"model": ')
    time.sleep(0.5)
    assert httpx.get(f"{server.url}/healthz").status_code == 200
    text = server_log.read_text(encoding="utf-8", errors="replace")
    assert "internal error" not in text and "Traceback" not in text, text[-2000:]


@pytest.mark.parametrize(("headers", "status"), [
    ({"host": "evil.example"}, 403),
    ({"host": "evil.example:8000"}, 403),
    ({"host": "localhost:1"}, 200),
    ({"host": "127.0.0.1"}, 200),
    ({"host": "[::1]:80"}, 200),
    ({"origin": "https://evil.example"}, 403),
    ({"origin": "null"}, 403),
    ({"origin": "http://localhost:3000"}, 403),  # a page of another server on this machine
])
def test_a_local_server_without_a_token_answers_only_local_names(server: Server, headers: dict[str, str],
                                                                 status: int) -> None:
    response = httpx.get(f"{server.url}/v1/presets/gpus", headers=headers)
    assert response.status_code == status, response.text
    if status == 403:
        assert response.json()["error"]["code"] == "forbidden"


def test_with_a_token_or_a_public_address_the_host_is_not_checked(tmp_path: Path) -> None:
    for settings in (Settings(database=str(tmp_path / "a.db"), workers=1, api_token="s3cret"),
                     Settings(database=str(tmp_path / "b.db"), workers=1, host="0.0.0.0"),
                     Settings(database=str(tmp_path / "c.db"), workers=1, allowed_hosts="*")):
        with TestClient(create_app(settings), base_url="http://evil.example") as c:
            assert c.get("/v1/presets/gpus", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    with TestClient(create_app(Settings(database=str(tmp_path / "d.db"), workers=1, allowed_hosts="sim.lan")),
                    base_url="http://sim.lan:8000") as c:
        assert c.get("/v1/presets/gpus").status_code == 200


def test_request_doc_is_still_accepted_as_before(client: TestClient) -> None:
    assert client.post("/v1/simulations", json=request_doc()).status_code == 200
