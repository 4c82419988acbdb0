"""What a browser opens, through a real app: /docs works with no network (every file it loads is served here),
the page is at / and its files under /web, and none of them (nor /metrics, /healthz, /openapi.json) needs the
token, while the API does."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from test_api import client_for

_REFERENCE = re.compile(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]""")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with client_for(tmp_path_factory.mktemp("pages") / "pages.db", api_token="tok") as c:
        yield c


def references(html: str) -> list[str]:
    return _REFERENCE.findall(html)


def test_docs_reference_no_external_host(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and "swagger-ui" in page.text
    found = references(page.text)
    assert {"/openapi.json", "/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"} <= set(found)
    for url in found:
        assert url.startswith("/") and not url.startswith("//"), url  # this host only
        assert client.get(url).status_code == 200, url
    assert "http://" not in page.text and "https://" not in page.text
    assert client.get("/docs/assets/swagger-ui-bundle.js").headers["content-type"].startswith(
        ("application/javascript", "text/javascript"))
    assert client.get("/redoc").status_code == 404  # ReDoc would load from a CDN: not served


def test_the_bearer_scheme_is_in_the_openapi_document(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert {"/v1/plots", "/v1/jobs/{job_id}/plot", "/metrics"} <= spec["paths"].keys()
    assert spec["paths"]["/v1/plots"]["post"]["security"] == [{"HTTPBearer": []}]


def test_the_page_and_its_files_are_served_without_the_token(client: TestClient) -> None:
    for path in ("/", "/docs", "/openapi.json", "/healthz", "/readyz", "/metrics"):
        assert client.get(path).status_code == 200, path
    page = client.get("/")
    assert page.headers["content-type"].startswith("text/html")
    for url in references(page.text):
        if url.startswith("data:"):
            continue  # inline (the empty favicon): nothing is fetched
        assert url.startswith("/"), url
        assert client.get(url).status_code == 200, url
    assert client.post("/v1/simulations", json={}).status_code == 401  # the API itself does
