"""The composition root: the ``engram`` command is the CLI plus the commands other adapters add.

Adapters never import each other; this module is the one place that puts them together:
``engram.cli.app`` gets ``mcp`` from ``engram.mcp_server.register``, ``daemon`` from
``engram.daemon.register``, ``serve`` from ``engram.http_api.register`` and ``tui`` from
``engram.tui.register``. These imports are cheap (none imports mcp, rich,
fastapi, textual or the index), so ``engram --help`` stays fast. ``main`` is the ``engram``
console script and ``python -m engram``.
"""

from __future__ import annotations

from engram import cli, daemon, http_api, mcp_server, tui

app = cli.app
mcp_server.register(app)
daemon.register(app)
http_api.register(app)
tui.register(app)


def main() -> None:
    """Run the engram command line with every adapter's commands."""
    cli.main()


if __name__ == "__main__":
    main()
