"""Who may reach the service when no token guards it: a pure ASGI middleware that answers 403 before any route
runs.

A server on a loopback address without ``CLUSTERSIM_API_TOKEN`` trusts whoever can connect, which a web page in
the user's browser can too: by DNS rebinding (a name of the attacker's that now resolves to 127.0.0.1, so the
browser sends ``Host: evil.example``) or by a cross-site request (``Origin: https://evil.example``, or a page
of another server on this machine: ``Origin: http://localhost:3000``). So such a server accepts only requests
whose ``Host`` names this machine (localhost, 127.0.0.1, ::1 or a name in ``CLUSTERSIM_ALLOWED_HOSTS``) and,
when a browser says where the request comes from, whose ``Origin`` is this server itself: the same scheme, a
name of this machine and the port the request was sent to (the ``Host`` header's, else the scheme's default),
as a page the service serves itself has. Request bodies of the types a page may send without asking first
(text/plain, forms) are refused by the routes (415, service.http.httpio). With a token, every /v1 route needs
it instead (service.http.context).
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


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _port(authority: str, scheme: str) -> int | None:
    """The port of a Host header value or URL authority, else the scheme's default; None when it is no port."""
    authority = authority.strip()
    text = authority.rsplit("]", 1)[1] if authority.startswith("[") else (
        authority if authority.count(":") == 1 else "")
    if ":" not in text:
        return _DEFAULT_PORTS.get(scheme)
    digits = text.rsplit(":", 1)[1]
    return int(digits) if digits.isdigit() and len(digits) <= 5 else None


class HostGuard:
    """403 for a request whose Host or Origin is not one of `allowed` names (see the module's docstring)."""

    def __init__(self, app: App, settings: Settings) -> None:
        self.app = app
        self.allowed = _LOCAL | {n.strip().lower() for n in settings.allowed_hosts.split(",") if n.strip()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            refusal = self._refusal(headers, str(scope.get("scheme", "http")))
            if refusal is not None:
                await _forbidden(send, *refusal)
                return
        await self.app(scope, receive, send)

    def _refusal(self, headers: dict[str, str], scheme: str) -> tuple[str, str, str] | None:
        """(message, field, rule) when the request is refused, else None."""
        host = headers.get("host", "")
        if _name(host) not in self.allowed:
            return ("the Host header must name this machine (localhost); set CLUSTERSIM_ALLOWED_HOSTS to add names",
                    "header.host", "must name this machine: localhost, 127.0.0.1, ::1 or a name in "
                    "CLUSTERSIM_ALLOWED_HOSTS")
        origin = headers.get("origin")
        if origin is None:
            return None
        parts = urlsplit(origin.strip())
        port = _port(host, scheme)
        if (parts.scheme.lower() == scheme and _name(parts.netloc) in self.allowed and port is not None
                and _port(parts.netloc, scheme) == port):
            return None
        return ("requests from web pages of other sites, or of other servers on this machine, are refused (Origin)",
                "header.origin", f"must be this server itself: {scheme}://, a name of this machine and port "
                f"{port}, as the service's own pages are")


async def _forbidden(send: Send, message: str, field: str, rule: str) -> None:
    error = {"code": "forbidden", "message": message, "details": [{"field": field, "rule": rule}]}
    body = json.dumps({"error": error}).encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
