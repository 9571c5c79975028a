"""The composition root: the ``engram`` command is the CLI plus the commands other adapters serve.

Adapters never import each other; this module is the one place that puts them together, and it
imports none of them but the CLI. The CLI declares the ``mcp``, ``daemon``, ``serve`` and
``tui`` commands (typer lives there only); ``RUNNERS`` names the function of another adapter
that serves each, and the CLI imports it only when that command runs. So ``engram --help``,
``engram check`` and ``engram recall`` load no MCP SDK, event loop, web framework or textual.
``main`` is the ``engram`` console script and ``python -m engram``.
"""

from __future__ import annotations

from typing import Final

from engram import cli

RUNNERS: Final = {
    "mcp": "engram.mcp_server:run",
    "daemon": "engram.daemon:serve",
    "serve": "engram.http_api:serve",
    "tui": "engram.tui:run",
}

cli.add_adapters(RUNNERS)
app = cli.app


def main() -> None:
    """Run the engram command line with every adapter's commands."""
    cli.main()


if __name__ == "__main__":
    main()
