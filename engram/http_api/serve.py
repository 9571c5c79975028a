"""Serving the API: ``engram serve`` and ``python -m engram.http_api`` run it on uvicorn.

The server refuses a non-loopback address without a token before anything is opened, and says
what to install when the optional extra ``engram-git[http]`` (fastapi, uvicorn) is missing.
Under ``--compat go-engram`` with no port given, the port is ``ENGRAM_PORT`` when set: the one
Go engram's plugins call. Without ``--compat``, the project's ``serve.compat`` setting names the
routes served: a team whose Go engram plugins start a plain ``engram serve`` sets it once.
The port is bound before the store is opened, so a busy port is one line naming it and
``--port``, not uvicorn's log.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from engram.errors import EngramError
from engram.http_api.app import create_app
from engram.http_api.defaults import COMPATS, DEFAULT_HOST, DEFAULT_PORT, PORT_ENV, TOKEN_ENV
from engram.http_api.errors import ServeError
from engram.http_api.guard import check_exposure


def serve(
    root: Path | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int | None = None,
    ready: Callable[[str], None] | None = None,
    compat: Sequence[str] = (),
) -> None:
    """Serve the API until interrupted; refuse a non-loopback host without a token.

    ``engram serve`` calls this (the CLI declares the command's options); ``ready`` gets the URL
    just before the server starts. ``compat`` names other tools whose routes are served too
    (none given: the project's ``serve.compat`` setting).
    """
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    check_exposure(host, token)
    compat = compat or configured_compat(root)
    port = port_for(port, compat)
    try:
        import fastapi  # noqa: F401  (create_app needs it: say so before opening anything)
        import uvicorn
    except ImportError as exc:
        raise ServeError(
            f"the HTTP API needs fastapi and uvicorn ({exc.name} is missing)",
            hint="pip install 'engram-git[http]'",
        ) from exc
    listening = bind(host, port)  # before opening the store: a busy port is said in one line
    with listening:
        app = create_app(root, token=token, host=host, compat=compat)
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, lifespan="on"
        )
        server = uvicorn.Server(config)
        if ready is not None:
            where = f"[{host}]" if ":" in host else host
            ready(f"http://{where}:{listening.getsockname()[1]}")
        server.run(sockets=[listening])


def bind(host: str, port: int) -> socket.socket:
    """Return a listening socket on ``host``:``port``; a port in use is a ServeError naming it.

    uvicorn would log its own traceback-like line after the server said it was serving; the
    socket is bound here, as uvicorn binds it, and handed to it.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, as socket.create_server and asyncio do: asyncio turns Nagle off
    # (TCP_NODELAY) only on connections whose socket says TCP, and with proto 0 every
    # keep-alive answer waited ~40 ms for the client's delayed ACK (1 client: 22 req/s).
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host.strip("[]"), port))
        listening.listen(2048)
    except OSError as exc:
        listening.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServeError(
                f"port {port} on {host} is in use: pass --port to serve on another",
                hint=f"stop what listens on port {port}, or run engram serve --port PORT",
            ) from exc
        raise ServeError(
            f"cannot listen on {host} port {port}: {exc.strerror or exc}",
            hint="pass another --host or --port",
        ) from exc
    listening.set_inheritable(True)
    return listening


def configured_compat(root: Path | None) -> tuple[str, ...]:
    """Return the routes the project's ``serve.compat`` setting names (none outside a project)."""
    from engram import config
    from engram.errors import ConfigError, NotInitialized

    try:
        found = config.find_root(root)
    except NotInitialized:
        return ()  # create_app says what is missing
    value = config.load(found).get("serve.compat")
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ConfigError(f"setting 'serve.compat' must be a list of names, got {value!r}")
    unknown = [name for name in names if name not in COMPATS]
    if unknown:
        raise ConfigError(
            f"setting 'serve.compat' names {unknown[0]!r}; known: {', '.join(COMPATS)}"
        )
    return tuple(names)


def port_for(port: int | None, compat: Sequence[str] = ()) -> int:
    """Return the port to serve: the one given, else ENGRAM_PORT under go-engram, else 7437."""
    if port is not None:
        return port
    written = os.environ.get(PORT_ENV, "").strip()
    if "go-engram" not in compat or not written:
        return DEFAULT_PORT
    if not written.isdigit() or not 0 < int(written) < 65536:
        raise ServeError(
            f"{PORT_ENV}={written[:20]!r} is not a port (1-65535)",
            hint=f"set {PORT_ENV} to a port number, or pass --port",
        )
    return int(written)


def main(argv: list[str]) -> int:
    """Run ``python -m engram.http_api [--host H] [--port P] [-C DIR]`` in the project here."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m engram.http_api")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--compat", action="append", choices=COMPATS, default=[])
    parser.add_argument("-C", dest="directory", type=Path, default=None)
    args = parser.parse_args(argv)

    def ready(url: str) -> None:
        print(f"serving {url}", file=sys.stderr, flush=True)

    try:
        serve(args.directory, host=args.host, port=args.port, ready=ready, compat=args.compat)
    except EngramError as exc:
        print(f"error: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
        return 1
    return 0
