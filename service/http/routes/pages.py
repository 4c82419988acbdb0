"""What a browser opens, none of it behind the token: the web page at `/` (static files shipped in the package,
service/web/, served under /web/), and the OpenAPI documentation at /docs: Swagger UI 5 (it reads OpenAPI 3.1,
which FastAPI writes), its files from the fastapi-offline package served by this service (no CDN: it works on a
cluster with no Internet access)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["WEB", "install", "router"]

WEB = Path(__file__).resolve().parents[2] / "web"
"""The page's files: index.html, app.js, style.css (plain HTML, JavaScript and CSS; no build step)."""

SWAGGER_UI = Path(str(files("fastapi_offline") / "static"))
"""swagger-ui-bundle.js, swagger-ui.css and favicon.png, as the fastapi-offline package ships them."""

router = APIRouter(include_in_schema=False)


@router.get("/")
async def page() -> FileResponse:
    """The web page: run a request, see its figures and pictures, compare layouts, follow jobs, search."""
    return FileResponse(WEB / "index.html", media_type="text/html")


@router.get("/docs")
async def docs() -> HTMLResponse:
    """Swagger UI on /openapi.json, its scripts and styles served by this service."""
    return get_swagger_ui_html(openapi_url="/openapi.json", title="clustersim API",
                               swagger_js_url="/docs/assets/swagger-ui-bundle.js",
                               swagger_css_url="/docs/assets/swagger-ui.css",
                               swagger_favicon_url="/docs/assets/favicon.png",
                               swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": True})


def install(app: FastAPI) -> None:
    """Mount the static files (/web, /docs/assets) and include the page and docs routes."""
    app.mount("/web", StaticFiles(directory=WEB), name="web")
    app.mount("/docs/assets", StaticFiles(directory=SWAGGER_UI), name="docs-assets")
    app.include_router(router)
