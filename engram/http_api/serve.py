"""Serving the API: ``engram serve`` and ``python -m engram.http_api`` run it on uvicorn.

The server refuses a non-loopback address without a token before anything is opened, and says
what to install when the optional extra ``engram-git[http]`` (fastapi, uvicorn) is missing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from engram.errors import EngramError
from engram.http_api.app import create_app
from engram.http_api.defaults import DEFAULT_HOST, DEFAULT_PORT, TOKEN_ENV
from engram.http_api.errors import ServeError
from engram.http_api.guard import check_exposure


def serve(
    root: Path | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the API until interrupted; refuse a non-loopback host without a token.

    ``engram serve`` calls this (the CLI declares the command's options); ``ready`` gets the URL
    just before the server starts.
    """
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    check_exposure(host, token)
    try:
        import fastapi  # noqa: F401  (create_app needs it: say so before opening anything)
        import uvicorn
    except ImportError as exc:
        raise ServeError(
            f"the HTTP API needs fastapi and uvicorn ({exc.name} is missing)",
            hint="pip install 'engram-git[http]'",
        ) from exc
    app = create_app(root, token=token, host=host)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    if ready is not None:
        where = f"[{host}]" if ":" in host else host
        ready(f"http://{where}:{port}")
    server.run()


def main(argv: list[str]) -> int:
    """Run ``python -m engram.http_api [--host H] [--port P] [-C DIR]`` in the project here."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m engram.http_api")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("-C", dest="directory", type=Path, default=None)
    args = parser.parse_args(argv)

    def ready(url: str) -> None:
        print(f"serving {url}", file=sys.stderr, flush=True)

    try:
        serve(args.directory, host=args.host, port=args.port, ready=ready)
    except EngramError as exc:
        print(f"error: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
        return 1
    return 0
