"""The terminal UI adapter: ``engram tui``, a textual app over the service facade.

``run`` is what the ``engram tui`` command calls (the CLI declares the command, and
``engram.__main__`` names this function to it); the screens live in ``engram.tui.app``:
dashboard, search, memory detail and the tidy-up actions. It must not import the other adapters
(cli, mcp_server, daemon, http_api) nor reach below the facade to write files. textual is
imported only when the UI runs, so importing this package (and ``engram --help``) stays cheap.
"""

from __future__ import annotations

from pathlib import Path


def run(root: Path, *, ansi: bool = False) -> None:
    """Open the project at ``root`` and run the terminal UI until the user quits."""
    from engram.errors import EngramError
    from engram.service import Engram

    try:
        from engram.tui import app as screens
    except ImportError as exc:  # textual is an optional extra
        raise EngramError(
            f"engram tui needs textual, which is not installed ({exc.name})",
            hint="pip install 'engram-git[tui]'",
        ) from exc
    with Engram(root) as engram:
        screens.EngramApp(engram, ansi=ansi).run()
