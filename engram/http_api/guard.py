"""The guard in front of every route: Host, Origin and the bearer token, and the body's size.

A web page must not reach the memories through the user's browser. The ``Host`` header must
name this machine (127.0.0.0/8, ``localhost``, ``[::1]``, any port) or the address the server was
told to bind, else 421 (DNS rebinding); a write (POST, PUT, PATCH, DELETE) whose ``Origin`` is
not the server's own, or whose ``Sec-Fetch-Site`` is neither ``same-origin`` nor ``none``, gets
403. No CORS headers are ever sent, so browsers keep other pages from reading answers. Clients
that are not browsers (curl, agents) send no ``Origin`` and are unaffected.

With a token set, every request but ``GET /health`` must carry ``Authorization: Bearer <token>``
(compared in constant time), else 401. A browser cannot send that header, so the pages people
open (the web page under ``/`` and ``/ui/``, the API docs) also take the sign-in cookie
``/ui/login`` sets once the token is typed there (``web_cookie``: an HMAC of the token, so the
server keeps no session); a browser asking for a page without it is sent to that form. A body
over the limit gets 413, and one nested deeper
than ``model.MAX_JSON_DEPTH`` 422, before any parser sees it. The server binds to 127.0.0.1
unless told otherwise, and ``check_exposure`` refuses any other address without a token.

This is pure ASGI and the standard library: cheap, and it knows nothing of the routes.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote, urlsplit

from engram.errors import InputTooLarge
from engram.http_api.defaults import DEFAULT_HOST, TOKEN_ENV
from engram.http_api.errors import ServeError, error_body
from engram.model import MAX_JSON_DEPTH, json_depth_exceeded

WILDCARDS: Final = frozenset({"0.0.0.0", "::", ""})
WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
WEB_COOKIE: Final = "engram_web"
LOGIN_PATH: Final = "/ui/login"
# The pages a person opens in a browser: the sign-in cookie stands for the token there only.
_PAGES: Final = ("/ui/", "/docs", "/redoc")


def web_cookie(token: str | bytes) -> str:
    """Return the sign-in cookie's value for a token: an HMAC of it, never the token itself."""
    key = token.encode() if isinstance(token, str) else token
    return hmac.new(key, b"engram web sign-in", hashlib.sha256).hexdigest()


def is_page(path: str) -> bool:
    """Tell whether a path is one of the pages people open in a browser."""
    return path == "/" or path == "/openapi.json" or path.startswith(_PAGES)


def _open(path: str) -> bool:
    """Tell whether a path needs no token: liveness, the sign-in form and the page's style."""
    return path in ("/health", LOGIN_PATH) or path.startswith("/ui/static/")


def _cookie(headers: Mapping[bytes, bytes], name: str) -> bytes:
    """Return a cookie's value from the request's Cookie header (empty when absent)."""
    for part in headers.get(b"cookie", b"").split(b";"):
        key, _, value = part.strip().partition(b"=")
        if key == name.encode():
            return value.strip()
    return b""


def is_loopback(host: str) -> bool:
    """Tell whether ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]")
    if name.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 (Python 3.11 does not call it loopback)
    return address.is_loopback


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to serve a non-loopback address without a token."""
    if not is_loopback(host) and not (token or "").strip():
        raise ServeError(
            f"refusing to serve on {host} without a token: anyone who can reach it could read "
            f"and change the memories; set {TOKEN_ENV} (clients send it as "
            "'Authorization: Bearer <token>')"
        )


def host_name(value: str) -> str | None:
    """Return the lowercased name of a ``Host`` header (``[::1]:80`` gives ``::1``), or None."""
    value = value.strip()
    if not value or any(c in value for c in "/?#@ \t"):
        return None
    try:
        name = urlsplit(f"//{value}").hostname
    except ValueError:
        return None
    return name.rstrip(".") if name else None


def host_allowed(value: str, bound: str = DEFAULT_HOST) -> bool:
    """Tell whether a ``Host`` header names this machine or the address the server binds."""
    name = host_name(value)
    if name is None:
        return False
    if is_loopback(name):
        return True
    bound_name = bound.strip().strip("[]").lower().rstrip(".")
    if bound_name in WILDCARDS:
        return True  # every address of the machine is served, and a token is required there
    return name == bound_name


def cross_origin_write(method: str, host: str, origin: str | None, fetch_site: str | None) -> bool:
    """Tell whether a request is a write a browser sends for another origin."""
    if method.upper() not in WRITES:
        return False
    if fetch_site is not None and fetch_site.strip().lower() not in ("same-origin", "none"):
        return True
    if origin is None:
        return False  # not a browser (curl, an agent), or a same-origin GET-style navigation
    own = host.strip().lower()
    return origin.strip().lower() not in (f"http://{own}", f"https://{own}")


class Guard:
    """Check Host, Origin and the bearer token, and bound the body (pure ASGI middleware)."""

    def __init__(
        self, app: Any, *, token: str | None, max_body: int, host: str = DEFAULT_HOST
    ) -> None:
        self.app = app
        self.expected = token.encode() if token else None
        self.signed_in = web_cookie(token).encode() if token else None
        self.max_body = max_body
        self.host = host

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _reply(send, *refusal)
            return
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await _reply(send, 413, self._too_large())
            return
        # The body is read here, whole (it is bounded), so that its size and JSON depth are
        # checked before any parser sees it; the app is then given it as one message.
        pieces: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            piece = message.get("body", b"")
            seen += len(piece)
            if seen > self.max_body:
                await _reply(send, 413, self._too_large())
                return
            pieces.append(piece)
            if not message.get("more_body", False):
                break
        body = b"".join(pieces)
        problem = _too_deep(scope, body)
        if problem is not None:
            await _reply(send, 422, {"error": problem.to_dict()})
            return
        whole = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay([whole], receive), send)

    def _refusal(
        self, scope: Any, headers: Mapping[bytes, bytes]
    ) -> tuple[int, dict[str, Any], list[tuple[bytes, bytes]]] | None:
        """Return the status, body and headers refusing a request by its headers, or None."""
        host = headers.get(b"host", b"").decode("latin-1")
        if not host_allowed(host, self.host):
            shown = host[:100] or "(none)"
            return 421, _wrong_host(shown), []
        origin = headers.get(b"origin")
        fetch_site = headers.get(b"sec-fetch-site")
        if cross_origin_write(
            str(scope.get("method", "")),
            host,
            origin.decode("latin-1") if origin is not None else None,
            fetch_site.decode("latin-1") if fetch_site is not None else None,
        ):
            shown = (origin or fetch_site or b"").decode("latin-1")[:100]
            return 403, _cross_origin(shown), []
        path = str(scope.get("path", ""))
        if self.expected is not None and not _open(path):
            scheme, _, given = headers.get(b"authorization", b"").strip().partition(b" ")
            right = hmac.compare_digest(given.strip(), self.expected)  # constant time
            if scheme.lower() == b"bearer" and right:
                return None
            if is_page(path) and self.signed_in is not None:
                if hmac.compare_digest(_cookie(headers, WEB_COOKIE), self.signed_in):
                    return None
                if scope.get("method") == "GET" and b"text/html" in headers.get(b"accept", b""):
                    back = path + (
                        f"?{scope['query_string'].decode('latin-1')}"
                        if scope.get("query_string")
                        else ""
                    )
                    where = f"{LOGIN_PATH}?next={quote(back, safe='')}".encode("latin-1")
                    return 303, _unauthorized(), [(b"location", where)]
            return 401, _unauthorized(), [(b"www-authenticate", b"Bearer")]
        return None

    def _too_large(self) -> dict[str, Any]:
        return error_body(
            "too_large",
            f"request body over {self.max_body} bytes",
            "send fewer memories per request (import a large export in parts)",
        )


def _wrong_host(shown: str) -> dict[str, Any]:
    return error_body(
        "wrong_host",
        f"Host {shown!r} is not served here: only this machine's names are",
        "connect to http://127.0.0.1:PORT or http://localhost:PORT; a web page "
        "reaching this server through another name is refused (DNS rebinding)",
    )


def _cross_origin(shown: str) -> dict[str, Any]:
    return error_body(
        "cross_origin",
        f"a write from another origin ({shown}) is refused",
        "call the API from a client that is not a web page (curl, an agent), "
        "or from a page served by this server",
    )


def _unauthorized() -> dict[str, Any]:
    return error_body(
        "unauthorized",
        "missing or wrong bearer token",
        f"send 'Authorization: Bearer <token>' with the server's {TOKEN_ENV}",
    )


def _too_deep(scope: Any, body: bytes) -> InputTooLarge | None:
    """Return the error for a body nested deeper than the JSON limit (no parser recursed yet)."""
    offset = json_depth_exceeded(body)
    if offset is None:
        return None
    where = f"{scope.get('method', '')} {scope.get('path', '')}".strip()
    return InputTooLarge(
        f"request body of {where}: JSON nested deeper than {MAX_JSON_DEPTH} levels "
        f"(at byte {offset}); refused"
    )


def _replay(messages: list[Any], receive: Any) -> Any:
    """Return an ASGI ``receive`` that gives ``messages`` first, then the real ones."""
    queue = list(messages)

    async def replay() -> Any:
        if queue:
            return queue.pop(0)
        return await receive()

    return replay


async def _reply(
    send: Any, status: int, body: Mapping[str, Any], extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *extra]})
    await send({"type": "http.response.body", "body": data})
