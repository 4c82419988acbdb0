"""The app's routes, one router per resource: the bearer token is one FastAPI dependency
(service.http.context.require_token) that really refuses, declared on every /v1 route (reads too) and on no
other, and checked before the body is read; a 405 names every method of the path."""

from __future__ import annotations

from pathlib import Path

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from service.http.app import create_app
from service.http.context import require_token
from service.http.routes import comparisons, health, interop, jobs, plots, presets, searches, simulations
from service.settings import Settings


def _needs_token(route: APIRoute) -> bool:
    return any(d.call is require_token for d in route.dependant.dependencies)


def test_every_v1_route_and_no_other_needs_the_token() -> None:
    routers = [m.router for m in (simulations, jobs, plots, searches, comparisons, presets, health, interop)]
    routes = [r for router in routers for r in router.routes if isinstance(r, APIRoute)]
    assert len(routes) == 21
    writes = {(m, r.path) for r in routes for m in r.methods if m in ("POST", "DELETE")}
    assert writes == {("POST", "/v1/simulations"), ("POST", "/v1/jobs"), ("POST", "/v1/searches"),
                      ("POST", "/v1/comparisons"), ("POST", "/v1/plots"), ("DELETE", "/v1/jobs/{job_id}"),
                      ("POST", "/v1/imports/{kind}"), ("POST", "/v1/exports/{kind}"),
                      ("POST", "/v1/calibrations/nccl-tests")}
    for route in routes:
        assert _needs_token(route) == route.path.startswith("/v1/"), route.path


def test_with_a_token_reads_need_it_too_and_health_and_docs_stay_open(tmp_path: Path) -> None:
    settings = Settings(database=str(tmp_path / "read.db"), workers=1, api_token="s3cret")
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        for path in ("/v1/jobs", "/v1/jobs/x", "/v1/jobs/x/request", "/v1/jobs/x/result", "/v1/jobs/x/trace",
                     "/v1/presets/models"):
            assert client.get(path).status_code == 401, path
            assert client.get(path, headers={"Authorization": "Bearer s3cret"}).status_code in (200, 404), path
        for path in ("/healthz", "/readyz", "/openapi.json", "/docs", "/", "/metrics"):
            assert client.get(path).status_code == 200, path


def test_the_token_is_checked_before_the_body_is_read(tmp_path: Path) -> None:
    settings = Settings(database=str(tmp_path / "auth.db"), workers=1, api_token="s3cret", max_body_bytes=10)
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        response = client.post("/v1/simulations", content=b"x" * 100)  # over the body limit, and no token
        assert response.status_code == 401, response.text
        assert response.json()["error"]["code"] == "unauthorized"
        good = client.post("/v1/simulations", content=b"x" * 100, headers={"Authorization": "Bearer s3cret"})
        assert good.status_code == 413


def test_the_bearer_scheme_is_in_the_schema_only_with_a_token() -> None:
    open_schema = create_app(Settings(database=":memory:")).openapi()
    assert "securitySchemes" not in open_schema["components"]
    assert all("security" not in op for ops in open_schema["paths"].values() for op in ops.values())
    guarded = create_app(Settings(database=":memory:", api_token="s3cret")).openapi()
    assert guarded["paths"]["/v1/simulations"]["post"]["security"] == [{"HTTPBearer": []}]
    assert guarded["paths"]["/v1/jobs"]["get"]["security"] == [{"HTTPBearer": []}]
    assert "security" not in guarded["paths"]["/healthz"]["get"]


def test_a_wrong_method_is_405_naming_every_method_of_the_path(tmp_path: Path) -> None:
    app = create_app(Settings(database=str(tmp_path / "allow.db"), workers=1))
    with TestClient(app, base_url="http://localhost") as client:
        for path, allowed in (("/v1/jobs", "GET, POST"), ("/v1/jobs/x", "DELETE, GET"), ("/healthz", "GET")):
            response = client.put(path)
            assert response.status_code == 405
            assert response.json()["error"]["code"] == "method_not_allowed"
            assert response.headers["allow"] == allowed, path


def test_create_app_stays_small_and_no_service_module_is_over_400_lines() -> None:
    import inspect

    import service
    from service.http import app

    lines, _ = inspect.getsourcelines(app.create_app)
    assert len(lines) < 60
    root = Path(service.__file__).parent
    long = {str(p.relative_to(root)): n for p in root.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}


def test_the_docs_settings_table_names_every_setting_and_no_other() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "service.md").read_text(encoding="utf-8")
    section = docs.split("Settings (environment variables):", 1)[1].split("\n\n", 2)[1]
    listed = {line.split("`")[1] for line in section.splitlines() if line.startswith("| `CLUSTERSIM_")}
    assert listed == {f"CLUSTERSIM_{name.upper()}" for name in Settings.model_fields}
