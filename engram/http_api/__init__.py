"""The HTTP adapter: ``engram serve``, a REST API (FastAPI on uvicorn) over the service facade.

Routes are thin: each takes a request model derived from the operations' declarations, calls
the facade and returns a response model, so the OpenAPI document at ``/openapi.json`` is
precise; memories are open JSON objects (unknown fields are kept). The package:

    defaults.py   the address, port, token variable and body limit
    guard.py      Host, Origin, token and body-size checks in front of every route (pure ASGI)
    errors.py     statuses, error bodies, the handlers (the one error boundary), ServeError
    declared.py   request models and query-parameter sets built from the declarations
    models.py     every request and response model
    deps.py       the facade (one call at a time, in a worker thread), path parameters
    routers/      one router per area: memories, search, graph, agents, sessions, sync, …, and
                  goengram (Go engram's routes, under ``engram serve --compat go-engram``)
    app.py        create_app: the app, its guard and handlers, the routers
    serve.py      serve (uvicorn) and ``python -m engram.http_api``

This is an adapter: it imports engram.service and what lies below it, never another adapter.
fastapi, pydantic and uvicorn (the optional extra ``engram-git[http]``) are imported only when
an app is made or served, so importing this package needs none of them. This module only
re-exports.
"""

from __future__ import annotations

from engram.http_api.app import create_app
from engram.http_api.defaults import (
    COMPATS,
    DEFAULT_HOST,
    DEFAULT_PORT,
    MAX_BODY_BYTES,
    PORT_ENV,
    TOKEN_ENV,
)
from engram.http_api.errors import GoRouteError, ServeError, status_for
from engram.http_api.guard import (
    check_exposure,
    cross_origin_write,
    host_allowed,
    host_name,
    is_loopback,
)
from engram.http_api.serve import port_for, serve

__all__ = [
    "COMPATS",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MAX_BODY_BYTES",
    "PORT_ENV",
    "TOKEN_ENV",
    "GoRouteError",
    "ServeError",
    "check_exposure",
    "create_app",
    "cross_origin_write",
    "host_allowed",
    "host_name",
    "is_loopback",
    "port_for",
    "serve",
    "status_for",
]
