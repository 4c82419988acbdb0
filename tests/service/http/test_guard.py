"""The Origin check of a local server without a token (service.http.guard): a page may call the service only
from the service's own origin, the same scheme, a name of this machine and the same port; a page of another
server on this machine (another port) or served over another scheme is refused 403 naming the header."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.http.app import create_app
from service.settings import Settings


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    database: Path = tmp_path_factory.mktemp("guard") / "api.db"
    with TestClient(create_app(Settings(database=str(database), workers=1)), base_url="http://127.0.0.1:8000") as c:
        yield c


@pytest.mark.parametrize("origin", ["http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000",
                                    "HTTP://LOCALHOST:8000"])
def test_a_page_of_this_server_is_answered(client: TestClient, origin: str) -> None:
    assert client.get("/v1/presets/gpus", headers={"origin": origin}).status_code == 200
    assert client.post("/v1/simulations", content=b"{}", headers={"origin": origin,
                                                                   "content-type": "application/json"}
                       ).status_code == 422  # read, and refused for what it says


@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1:8001", "http://localhost",
                                    "https://127.0.0.1:8000", "http://127.0.0.1:80", "http://localhost:8000x",
                                    "http://evil.example:8000", "null", ""])
def test_a_page_of_another_port_scheme_or_site_is_refused(client: TestClient, origin: str) -> None:
    for response in (client.get("/v1/presets/gpus", headers={"origin": origin}),
                     client.post("/v1/simulations", content=b"{}", headers={"origin": origin,
                                                                            "content-type": "application/json"})):
        assert response.status_code == 403, (origin, response.text)
        [detail] = response.json()["error"]["details"]
        assert detail["field"] == "header.origin" and "port 8000" in detail["rule"]


def test_without_a_port_the_host_and_origin_are_on_the_schemes_default(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(database=str(tmp_path / "g.db"), workers=1)),
                    base_url="http://localhost") as c:
        assert c.get("/v1/presets/gpus", headers={"origin": "http://localhost"}).status_code == 200
        assert c.get("/v1/presets/gpus", headers={"origin": "http://localhost:80"}).status_code == 200
        assert c.get("/v1/presets/gpus", headers={"origin": "http://localhost:8080"}).status_code == 403
