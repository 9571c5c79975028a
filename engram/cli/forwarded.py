"""A command line another process forwarded: answered here, with this process's open Engram.

The thin client (``engram.__main__``) sends a store's daemon a plain ``engram recall``,
``search``, ``check`` or ``context`` line, its current folder and the part of its environment
that can change an answer (``engram.reach.environment``). ``answer`` runs the very command the
CLI would run, parsed by the fast path (``engram.cli.fast``), on the daemon's Engram, and
returns what it printed, in order, with its exit status; the client prints that. Relative paths
are taken as typed in the client's folder (``Engram.calling_from``); errors are the CLI's own
messages and hints. Whatever the daemon cannot answer exactly as the process would (another
store, another environment, a line the fast path leaves to typer) it refuses, and the client
runs the command itself.

The composition root adds ``answer`` to the daemon's methods as ``engram_cli``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import typer

from engram import config as config_mod
from engram import reach
from engram.cli.app import OUTPUT, Capture, boundary
from engram.cli.fast import FAST_COMMANDS, fast_command
from engram.errors import EngramError, InvalidInput
from engram.operations.params import Param

if TYPE_CHECKING:
    from engram.service import Engram

METHOD: Final = "engram_cli"
PARAMS: Final = (
    Param("argv", "array", "The command line after `engram`, -C made absolute.", required=True),
    Param("cwd", "string", "The caller's current folder.", required=True),
    Param("env", "object", "The caller's environment that can change the answer.", default={}),
)


def answer(engram: Engram, args: dict[str, Any]) -> dict[str, Any]:
    """Run a forwarded command line on ``engram``; return its output chunks and exit status.

    A line it cannot answer as the caller's process would is refused (``InvalidInput``).
    """
    argv, cwd = args["argv"], args["cwd"]
    if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv):
        raise InvalidInput("argv must be a list of strings")
    if args["env"] != reach.environment():
        raise InvalidInput("the caller's environment differs from the daemon's: run in process")
    fast = fast_command(argv)
    words = argv[2:] if argv[:1] == ["-C"] else argv
    if fast is None or not words or words[0] not in FAST_COMMANDS:
        raise InvalidInput("not a plain recall, check or context line: run in process")
    function, kwargs = fast
    context = next(value for value in kwargs.values() if isinstance(value, typer.Context))
    start = Path(argv[1]) if argv[:1] == ["-C"] else Path(cwd)
    if not start.is_absolute() or not start.is_dir() or _root(start) != engram.root.resolve():
        raise InvalidInput(f"{start} is not in the store this daemon serves: run in process")
    context.obj = {"dir": start, "engram": engram}
    captured = Capture()
    token = OUTPUT.set(captured)
    status = 0
    try:
        with engram.calling_from(cwd), boundary():
            function(**kwargs)
    except typer.Exit as exit_:
        status = exit_.exit_code
    finally:
        OUTPUT.reset(token)
    return {"output": captured.chunks, "code": status}


def _root(start: Path) -> Path | None:
    try:
        return config_mod.find_root(start)
    except EngramError:
        return None
