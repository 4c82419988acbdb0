"""Who may reach the service when no token guards it: a pure ASGI middleware that answers 403 before any route
runs.

A server on a loopback address without ``CLUSTERSIM_API_TOKEN`` trusts whoever can connect, which a web page in
the user's browser can too: by DNS rebinding (a name of the attacker's that now resolves to 127.0.0.1, so the
browser sends ``Host: evil.example``) or by a cross-site request (``Origin: https://evil.example``). So such a
server accepts only requests whose ``Host`` names this machine (localhost, 127.0.0.1, ::1 or a name in
``CLUSTERSIM_ALLOWED_HOSTS``) and, when a browser says where the request comes from, whose ``Origin`` does
too. Request bodies of the types a page may send without asking first (text/plain, forms) are refused by the
routes (415, service.http.httpio). With a token, every /v1 route needs it instead (service.http.context).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

from service.settings import Settings

__all__ = ["HostGuard", "guarded", "is_loopback"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOCAL = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether a listening address is this machine only."""
    if host == "localhost":
        return True
    try:
        return ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def guarded(settings: Settings) -> bool:
    """Whether the Host and Origin checks apply: no token, a loopback address, and not turned off with '*'."""
    extra = {name.strip() for name in settings.allowed_hosts.split(",")}
    return settings.api_token is None and is_loopback(settings.host) and "*" not in extra


def _name(host: str) -> str:
    """The host name of a Host header value or URL authority, without its port, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class HostGuard:
    """403 for a request whose Host or Origin is not one of `allowed` names (see the module's docstring)."""

    def __init__(self, app: App, settings: Settings) -> None:
        self.app = app
        self.allowed = _LOCAL | {n.strip().lower() for n in settings.allowed_hosts.split(",") if n.strip()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            refusal = self._refusal(headers)
            if refusal is not None:
                await _forbidden(send, refusal)
                return
        await self.app(scope, receive, send)

    def _refusal(self, headers: dict[str, str]) -> str | None:
        if _name(headers.get("host", "")) not in self.allowed:
            return "the Host header must name this machine (localhost); set CLUSTERSIM_ALLOWED_HOSTS to add names"
        origin = headers.get("origin")
        if origin is not None and _name(urlsplit(origin).netloc) not in self.allowed:
            return "requests from web pages of other sites are refused (Origin)"
        return None


async def _forbidden(send: Send, message: str) -> None:
    body = json.dumps({"error": {"code": "forbidden", "message": message, "details": []}}).encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
