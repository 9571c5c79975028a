"""The composition root: the ``engram`` command is the CLI plus the commands other adapters add.

Adapters never import each other; this module is the one place that puts them together:
``engram.cli.app`` gets the ``mcp`` command from ``engram.mcp_server.register`` and the
``daemon`` command from ``engram.daemon.register``. These imports are cheap (none imports mcp,
rich or the index), so ``engram --help`` stays fast. ``main`` is
the ``engram`` console script and ``python -m engram``.
"""

from __future__ import annotations

from engram import cli, daemon, mcp_server

app = cli.app
mcp_server.register(app)
daemon.register(app)


def main() -> None:
    """Run the engram command line with every adapter's commands."""
    cli.main()


if __name__ == "__main__":
    main()
