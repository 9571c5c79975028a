"""The HTTP API as an app: the facade opened, the guard and error handlers in front, the routers.

One ``Engram`` is opened when the app is made and closed when it stops. The OpenAPI document at
``/openapi.json`` describes every request and response; with a token it declares the bearer
scheme too. ``/docs`` and ``/redoc`` render it from files installed with the extra (apidocs).
fastapi is imported when an app is made, not when this module is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.http_api.defaults import COMPATS, DEFAULT_HOST, MAX_BODY_BYTES, TOKEN_ENV
from engram.http_api.errors import ServeError

if TYPE_CHECKING:
    from fastapi import APIRouter, FastAPI


def create_app(
    root: Path | None = None,
    *,
    token: str | None = None,
    max_body: int = MAX_BODY_BYTES,
    host: str = DEFAULT_HOST,
    compat: Sequence[str] = (),
) -> FastAPI:
    """Return the API over the project at ``root`` (default: found from the working directory).

    ``token`` defaults to ``ENGRAM_HTTP_TOKEN``; when set, requests need it as a bearer token.
    ``host`` is the address served: Host headers naming it (or loopback) are accepted.
    ``compat`` names other tools whose routes are served too (``go-engram``): where one of
    theirs has the method and path of one of engram's, theirs is served there.
    """
    unknown = sorted(set(compat) - set(COMPATS))
    if unknown:
        raise ServeError(
            f"unknown --compat {', '.join(unknown)}", hint=f"use one of: {', '.join(COMPATS)}"
        )
    from fastapi import FastAPI

    from engram.http_api import apidocs, errors
    from engram.http_api.declared import document_routes
    from engram.http_api.deps import Facade
    from engram.http_api.guard import Guard
    from engram.http_api.models import error_responses
    from engram.http_api.routers import ROUTERS
    from engram.service import Engram, version_info

    token = (token if token is not None else os.environ.get(TOKEN_ENV, "")).strip() or None
    assets = apidocs.asset_folder()  # before the store is opened: missing files are said first
    facade = Facade(Engram.open(root), version_info()["engram"])

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await facade.call(facade.engram.close)

    app = FastAPI(
        title="engram",
        version=facade.version,
        description="Git-native, file-first memory for AI coding agents: the HTTP API.",
        lifespan=lifespan,
        responses=error_responses(token=bool(token)),
        redirect_slashes=False,
        docs_url=None,  # apidocs serves /docs and /redoc from installed files, not a CDN
        redoc_url=None,
    )
    app.state.engram = facade.engram
    app.state.facade = facade
    errors.install(app)
    apidocs.install(app, assets)
    app.add_middleware(Guard, token=token, max_body=max_body, host=host)
    routers: list[APIRouter] = list(ROUTERS)
    if "go-engram" in compat:
        from engram.http_api.routers import goengram

        routers = [goengram.router, *(_without(r, goengram.router) for r in ROUTERS)]
    for router in routers:
        document_routes(router.routes)
        app.include_router(router)
    from engram.http_api.web import pages

    pages.install(app, token=token)  # the web page at / (no route of the API's there)
    if token:
        _declare_bearer(app)
    return app


def _without(router: APIRouter, first: APIRouter) -> APIRouter:
    """Return ``router`` without the routes whose method and path ``first`` serves."""
    from fastapi import APIRouter

    def served(route: Any) -> set[tuple[str, str]]:
        return {(method, route.path) for method in getattr(route, "methods", None) or ()}

    taken = set().union(*(served(route) for route in first.routes))
    kept = [route for route in router.routes if not served(route) & taken]
    return APIRouter(tags=list(router.tags), routes=kept)


def _declare_bearer(app: FastAPI) -> None:
    """Declare the bearer token in the OpenAPI document (/docs offers to send it)."""
    plain = app.openapi

    def secured() -> dict[str, Any]:
        schema = plain()
        components = schema.setdefault("components", {})
        components.setdefault("securitySchemes", {})["bearer"] = {
            "type": "http",
            "scheme": "bearer",
            "description": f"the server's {TOKEN_ENV}",
        }
        schema["security"] = [{"bearer": []}]
        schema["paths"]["/health"]["get"]["security"] = []  # liveness stays open
        return schema

    app.openapi = secured  # type: ignore[method-assign]
