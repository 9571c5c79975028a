"""The composition root: the ``engram`` command is the CLI plus the commands other adapters serve.

Adapters never import each other; this module is the one place that puts them together, and it
imports none of them but the CLI. The CLI declares the ``mcp``, ``daemon``, ``serve``, ``tui``
and ``hook`` commands (typer lives there only); ``RUNNERS`` names the function of another
adapter that serves each, and the CLI imports it only when that command runs. So ``engram
--help``, ``engram check`` and ``engram recall`` load no MCP SDK, event loop, web framework or
textual. ``engram hook AGENT EVENT``, which an agent runs on every edit, goes straight to its
adapter without the CLI (typer is a tenth of a second); ``engram hook --help`` still reaches it.
``main`` is the ``engram`` console script and ``python -m engram``.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing costs a hook process 10 ms: annotations only (mypy reads this)
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any, Final

RUNNERS: Final = {
    "mcp": "engram.mcp_server:run",
    "daemon": "engram.daemon:serve",
    "serve": "engram.http_api:serve",
    "tui": "engram.tui:run",
    "hook": "engram.hooks:run",
}


def _cli() -> ModuleType:
    """Return the CLI with every adapter's commands added (imported on first use)."""
    from engram import cli

    cli.add_adapters(RUNNERS)
    return cli


def __getattr__(name: str) -> Any:
    """``app``: the typer app with every command (``from engram.__main__ import app``)."""
    if name == "app":
        return _cli().app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Run the engram command line with every adapter's commands."""
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "hook" and not any(a.startswith("-") for a in args):
        from engram.hooks import main as hook

        raise SystemExit(hook(args[1:]))
    _cli().main()


if __name__ == "__main__":
    main()
