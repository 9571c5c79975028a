"""The HTTP adapter's one error boundary: statuses, error bodies and the handlers that send them.

Every error is ``{"error": {"code", "message", "hint"}}``: NotFound 404, InvalidInput and
request validation 422, every other ``EngramError`` (AmbiguousId, LockTimeout, CorruptStore …)
409, an unknown route 404, a wrong method 405. A 500 means a bug in engram: it is logged with its
traceback, and the client gets no traceback. ``ServeError`` is the server refusing to start.
Go engram's routes (``--compat go-engram``) answer as Go's server does: ``GoRouteError`` is
sent as ``{"error": "message"}`` with its status (400 bad input, 404 unknown id).

This module imports fastapi only in ``install`` (and the handlers it installs), so that the
package can say what is missing when the optional extra is not installed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from engram.errors import EngramError, InvalidInput, NotFound
from engram.http_api.defaults import DEFAULT_HOST, TOKEN_ENV
from engram.operations import advice

if TYPE_CHECKING:
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse

log = logging.getLogger("engram.http")

ERROR_HINT: Final = "this is a bug in engram: the server log has the details"
ROUTES_HINT: Final = "see /openapi.json (or /docs) for the routes"
SHAPES_HINT: Final = "see /openapi.json (or /docs) for the shape of each request"
_CODES: Final = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}


class ServeError(EngramError):
    """The server cannot start as asked (an exposed address without a token, say)."""

    code = "serve"
    hint = f"bind to {DEFAULT_HOST}, or set {TOKEN_ENV} to a long random secret"


class GoRouteError(Exception):
    """A Go engram route's failure, sent in Go's shape: ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def status_for(exc: EngramError) -> int:
    """Return the HTTP status an engram error maps to."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, InvalidInput):
        return 422
    return 409  # the request conflicts with the state of the store: ambiguous id, lock, …


def error_body(code: str, message: str, hint: str = "") -> dict[str, Any]:
    """Return the body of an error response."""
    return {"error": {"code": code, "message": message, "hint": hint}}


def install(app: FastAPI) -> None:
    """Send every failure of ``app`` as an error body with its status (no traceback)."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    app.add_exception_handler(EngramError, _engram_error)  # type: ignore[arg-type]
    app.add_exception_handler(GoRouteError, _go_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _bug)


def _json(
    body: dict[str, Any], status: int, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    from starlette.responses import JSONResponse

    return JSONResponse(body, status_code=status, headers=headers)


async def _engram_error(_: Request, exc: EngramError) -> JSONResponse:
    body = {
        key: advice.render(value, advice.OPERATION_NAMES) for key, value in exc.to_dict().items()
    }
    return _json({"error": body}, status_for(exc))


async def _go_error(_: Request, exc: GoRouteError) -> JSONResponse:
    return _json({"error": exc.message}, exc.status)


async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
    problems = []
    for item in exc.errors()[:10]:
        where = ".".join(str(part) for part in item.get("loc", ()))
        problems.append(f"{where}: {item.get('msg', 'invalid')}")
    message = "; ".join(problems) or "invalid request"
    return _json(error_body("invalid_input", message, SHAPES_HINT), 422)


async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
    hint = ROUTES_HINT if exc.status_code in (404, 405) else ""
    code = _CODES.get(exc.status_code, "http")
    body = error_body(code, str(exc.detail), hint)
    return _json(body, exc.status_code, headers=exc.headers)


async def _bug(request: Request, exc: Exception) -> JSONResponse:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    message = f"internal error ({type(exc).__name__})"
    return _json(error_body("internal", message, ERROR_HINT), 500)
