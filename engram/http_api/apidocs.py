"""The API's documentation pages, ``/docs`` (Swagger UI) and ``/redoc``, served with no network.

FastAPI's own pages load Swagger UI, ReDoc, a favicon and web fonts from CDNs: offline the page is
blank, and a page that loads scripts from elsewhere runs code nobody here reviewed. The assets
come from the ``fastapi-offline`` package (part of the ``engram-git[http]`` extra), which ships
Swagger UI's bundle and stylesheet and ReDoc's standalone script; they are served from
``ASSETS`` below, and the pages name nothing but this server. Swagger UI's validator badge is
off (it would send the document's address to a public validator), and a Content-Security-Policy
keeps the browser from loading anything from elsewhere (ReDoc's sidebar asks a CDN for a logo).
The guard stays in front of these routes too. It must not import another adapter.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Final

from engram.http_api.errors import ServeError

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.responses import HTMLResponse

DOCS: Final = "/docs"
REDOC: Final = "/redoc"
ASSETS: Final = "/docs/assets"
PACKAGE: Final = "fastapi_offline"
FILES: Final = {  # served name -> media type; nothing else in the package is served
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
    "favicon.png": "image/png",
}
HINT: Final = "pip install 'engram-git[http]'"
# The pages may load nothing from elsewhere, whatever the scripts ask: ReDoc's sidebar asks a
# CDN for a logo. Inline script (Swagger UI's start-up) and styles, blob workers (ReDoc's
# search) and data: images (icons) are the pages' own.
POLICY: Final = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)


def asset_folder() -> Path:
    """Return the installed folder of Swagger UI's and ReDoc's files; ServeError if missing."""
    try:
        folder = Path(str(resources.files(PACKAGE) / "static"))
    except ModuleNotFoundError as exc:
        raise ServeError(
            f"the API docs need {PACKAGE.replace('_', '-')}, which is not installed", hint=HINT
        ) from exc
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise ServeError(f"the API docs' files are missing from {folder}: {', '.join(missing)}")
    return folder


def install(app: FastAPI, folder: Path) -> None:
    """Add ``/docs``, ``/redoc`` and the assets in ``folder`` to an app made with docs_url=None."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import FileResponse, Response

    title = f"{app.title} {app.version}"
    openapi = app.openapi_url or "/openapi.json"

    async def swagger(_: Request) -> HTMLResponse:
        return _confined(
            get_swagger_ui_html(
                openapi_url=openapi,
                title=f"{title}: API docs",
                swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                swagger_css_url=f"{ASSETS}/swagger-ui.css",
                swagger_favicon_url=f"{ASSETS}/favicon.png",
                oauth2_redirect_url=None,
                swagger_ui_parameters={"validatorUrl": None},
            )
        )

    async def redoc(_: Request) -> HTMLResponse:
        return _confined(
            get_redoc_html(
                openapi_url=openapi,
                title=f"{title}: API reference",
                redoc_js_url=f"{ASSETS}/redoc.standalone.js",
                redoc_favicon_url=f"{ASSETS}/favicon.png",
                with_google_fonts=False,
            )
        )

    async def asset(request: Request) -> Response:
        name = str(request.path_params["name"])
        if name not in FILES:
            raise HTTPException(404)
        return FileResponse(folder / name, media_type=FILES[name])

    app.add_route(DOCS, swagger, methods=["GET"], include_in_schema=False)
    app.add_route(REDOC, redoc, methods=["GET"], include_in_schema=False)
    app.add_route(f"{ASSETS}/{{name}}", asset, methods=["GET"], include_in_schema=False)


def _confined(page: HTMLResponse) -> HTMLResponse:
    """Return the page with the policy that keeps the browser on this server."""
    page.headers["Content-Security-Policy"] = POLICY
    return page
