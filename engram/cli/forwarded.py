"""A command line another process forwarded: answered here, with this process's open Engram.

The thin client (``engram.__main__``) sends a store's daemon a command line of ``FORWARDED``,
its current folder, what its standard input is, and the part of its environment that can
change an answer (``engram.reach.environment``). ``answer`` runs the very command the CLI would
run (parsed by the fast path, ``engram.cli.fast``, or else by typer) on the daemon's Engram and
returns what it printed, in order, with its exit status; the client prints that. Relative paths
are taken as typed in the client's folder (``Engram.calling_from``); errors are the CLI's own
messages and hints.

Whatever the daemon cannot answer exactly as the process would, it refuses before the command
changes anything, and the client runs the command itself: another store or environment, a line
typer must explain (an unknown option, a bad value), a command that would read the client's
standard input (``remember`` with its content piped in).

The composition root adds ``answer`` to the daemon's methods as ``engram_cli``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import typer

from engram import config as config_mod
from engram import reach
from engram.cli.app import LENT, Lent, StdinNeeded, app, boundary
from engram.cli.fast import FAST_COMMANDS, fast_command, named
from engram.errors import EngramError, InvalidInput
from engram.operations.params import Param

if TYPE_CHECKING:
    from engram.service import Engram

METHOD: Final = "engram_cli"
READS: Final = (*FAST_COMMANDS, "get", "show", "why", "related")
WRITES: Final = ("remember", "save")
FORWARDED: Final = (*READS, *WRITES)  # engram.__main__.FORWARDED
STDIN_KINDS: Final = ("tty", "none", "pipe")
PARAMS: Final = (
    Param("argv", "array", "The command line after `engram`, -C made absolute.", required=True),
    Param("cwd", "string", "The caller's current folder.", required=True),
    Param("stdin", "string", "The caller's standard input: tty, none or pipe.", default="pipe"),
    Param("env", "object", "The caller's environment that can change the answer.", default={}),
)


def answer(engram: Engram, args: dict[str, Any]) -> dict[str, Any]:
    """Run a forwarded command line on ``engram``; return its output chunks and exit status.

    A line it cannot answer as the caller's process would is refused (``InvalidInput``).
    """
    argv, cwd, stdin = args["argv"], args["cwd"], args["stdin"]
    if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv):
        raise InvalidInput("argv must be a list of strings")
    if argv[:1] != ["-C"] or len(argv) < 3 or argv[2] not in FORWARDED:
        raise InvalidInput(f"argv must be -C FOLDER and one of: {', '.join(FORWARDED)}")
    if stdin not in STDIN_KINDS:
        raise InvalidInput(f"stdin must be one of: {', '.join(STDIN_KINDS)}")
    if args["env"] != reach.environment():
        raise InvalidInput("the caller's environment differs from the daemon's: run in process")
    start = Path(argv[1])
    if not start.is_absolute() or not start.is_dir() or _root(start) != engram.root.resolve():
        raise InvalidInput(f"{start} is not in the store this daemon serves: run in process")
    lent = Lent(engram, stdin)
    token = LENT.set(lent)
    try:
        with engram.calling_from(cwd):
            status = _run(argv)
    except StdinNeeded:
        raise InvalidInput(
            "the command reads the caller's standard input: run in process"
        ) from None
    finally:
        LENT.reset(token)
    return {"output": lent.chunks, "code": status}


def _run(argv: list[str]) -> int:
    """Run one command line as the CLI would; return its exit status."""
    fast = fast_command(argv)
    if fast is not None:
        function, kwargs = fast
        try:
            with boundary(lambda: named(kwargs)):
                function(**kwargs)
        except typer.Exit as exit_:
            return exit_.exit_code
        except typer.TyperException as exc:  # a usage error: typer shows it, in process
            raise InvalidInput(f"typer explains this line ({exc}): run in process") from exc
        return 0
    command = typer.main.get_command(app)
    try:
        with command.make_context("engram", list(argv)) as context:
            command.invoke(context)
    except typer.Exit as exit_:
        return exit_.exit_code
    except typer.TyperException as exc:  # a usage error, found before the command runs
        raise InvalidInput(f"typer explains this line ({exc}): run in process") from exc
    return 0


def _root(start: Path) -> Path | None:
    try:
        return config_mod.find_root(start)
    except EngramError:
        return None
