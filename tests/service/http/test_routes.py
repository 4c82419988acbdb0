"""The app's routes, one router per resource: the bearer token is one FastAPI dependency
(service.http.context.require_token) that really refuses, declared on every route that changes state and on no
other, and checked before the body is read; a 405 names every method of the path."""

from __future__ import annotations

from pathlib import Path

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from service.http.app import create_app
from service.http.context import require_token
from service.http.routes import comparisons, health, jobs, plots, presets, searches, simulations
from service.settings import Settings


def _needs_token(route: APIRoute) -> bool:
    return any(d.call is require_token for d in route.dependant.dependencies)


def test_every_route_that_changes_state_and_no_other_needs_the_token() -> None:
    routers = [m.router for m in (simulations, jobs, plots, searches, comparisons, presets, health)]
    routes = [r for router in routers for r in router.routes if isinstance(r, APIRoute)]
    assert len(routes) == 17
    writes = {(m, r.path) for r in routes for m in r.methods if m in ("POST", "DELETE")}
    assert writes == {("POST", "/v1/simulations"), ("POST", "/v1/jobs"), ("POST", "/v1/searches"),
                      ("POST", "/v1/comparisons"), ("POST", "/v1/plots"), ("DELETE", "/v1/jobs/{job_id}")}
    for route in routes:
        assert _needs_token(route) == bool(route.methods & {"POST", "DELETE"}), route.path


def test_the_token_is_checked_before_the_body_is_read(tmp_path: Path) -> None:
    settings = Settings(database=str(tmp_path / "auth.db"), workers=1, api_token="s3cret", max_body_bytes=10)
    with TestClient(create_app(settings)) as client:
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
    assert "security" not in guarded["paths"]["/v1/jobs"]["get"]


def test_a_wrong_method_is_405_naming_every_method_of_the_path(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(database=str(tmp_path / "allow.db"), workers=1))) as client:
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
