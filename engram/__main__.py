"""The composition root: the ``engram`` command is the CLI plus the commands other adapters serve.

Adapters never import each other; this module is the one place that puts them together, and it
imports none of them but the CLI. The CLI declares the ``mcp``, ``daemon``, ``serve``, ``tui``
and ``hook`` commands (typer lives there only); ``RUNNERS`` names the function of another
adapter that serves each, and the CLI imports it only when that command runs. So ``engram
--help``, ``engram check`` and ``engram recall`` load no MCP SDK, event loop, web framework or
textual. ``engram hook AGENT EVENT``, which an agent runs on every edit, goes straight to its
adapter without the CLI (typer is a tenth of a second); ``engram hook --help`` still reaches it.
So does ``engram textconv FILE``, which git's diff driver runs for each side of every diff.
``main`` is the ``engram`` console script and ``python -m engram``.

The thin client: an ``engram recall``, ``search``, ``check``, ``context``, ``get``, ``why``,
``related`` or ``remember`` line, run in a folder whose store has a daemon, is sent to that
daemon (``engram_cli``, answered by ``engram.cli.forwarded`` on the daemon's open Engram) and
its output printed as the command would have printed it; the process imports only
``engram.reach`` and the standard library, so it costs little more than the interpreter. When
no daemon answers within ``CONNECT`` seconds, or it refuses the line, the command runs here as
always, and a daemon is started in the background for the next call (``engram.reach.start``:
detached, leaving when idle, one per store). ``ENGRAM_DAEMON=off`` keeps every command in
process. The daemon this starts is ``serve_daemon``: the socket daemon with the command line's
method added.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing costs a hook process 10 ms: annotations only (mypy reads this)
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from types import ModuleType
    from typing import Any, Final

RUNNERS: Final = {
    "mcp": "engram.mcp_server:run",
    "daemon": "engram.__main__:serve_daemon",
    "serve": "engram.http_api:serve",
    "tui": "engram.tui:run",
    "hook": "engram.hooks:run",
}


# The commands a daemon answers (engram.cli.forwarded.FORWARDED), and those of them that write.
FORWARDED: Final = ("recall", "search", "check", "context", "get", "show", "why", "related")
WRITES: Final = ("remember", "save")
CONNECT: Final = 0.3  # seconds to wait for the daemon to accept before running here
ANSWER: Final = 10.0  # seconds to wait for a read's answer (a daemon busy past that: run here)
ANSWER_WRITE: Final = 60.0  # for a write's: run here after that, the store lock serialises
BROKEN_PIPE: Final = 141  # as the CLI exits when its reader goes away
INTERRUPTED: Final = 130  # and on Ctrl-C


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
    if len(args) == 2 and args[0] == "textconv" and not args[1].startswith("-"):
        from engram.sync.gitdiff import textconv_main  # git runs it per side of every diff

        raise SystemExit(textconv_main(args[1:]))
    mcp = mcp_line(args)
    if mcp is not None:  # an agent starting its server: no typer (a tenth of a second)
        raise SystemExit(_serve_mcp(*mcp))
    status = forward(args)
    if status is not None:
        raise SystemExit(status)
    _cli().main()


COMPAT_NAMES: Final = ("go-engram", "engram-rs")  # engram mcp --compat (the CLI's choices)


def mcp_line(args: list[str]) -> tuple[str | None, dict[str, Any]] | None:
    """Return the folder and options of a plain ``[-C PATH] mcp`` line (None: let typer parse).

    Only ``--tools``, ``--compat`` (repeatable) and ``--budget`` with plain values are read
    here; anything else (help, a value typer would refuse) goes to the CLI, which explains.
    """
    import os

    start, words = (args[1], args[2:]) if args[:1] == ["-C"] and len(args) > 2 else (None, args)
    if words[:1] != ["mcp"] or (start is not None and not os.path.isdir(start)):
        return None
    options: dict[str, Any] = {"tools": None, "compat": [], "budget": None}
    rest = words[1:]
    while rest:
        name, eq, value = rest[0].partition("=")
        if name not in ("--tools", "--compat", "--budget") or (not eq and len(rest) < 2):
            return None
        value, rest = (value, rest[1:]) if eq else (rest[1], rest[2:])
        if name == "--tools":
            options["tools"] = value
        elif name == "--compat" and value in COMPAT_NAMES:
            options["compat"].append(value)
        elif name == "--budget" and value.isdigit():
            options["budget"] = int(value)
        else:
            return None
    return start, options


def _serve_mcp(start: str | None, options: dict[str, Any]) -> int:
    """Serve MCP as ``engram mcp`` does; an engram error is printed as the CLI prints it."""
    from pathlib import Path

    from engram.errors import EngramError, InvalidInput
    from engram.mcp_server.server import run

    try:
        run(Path(start) if start is not None else None, profile="agent", **options)
    except EngramError as exc:
        hint = exc.hint
        if isinstance(exc, InvalidInput) and hint == InvalidInput.hint:
            hint = "see `engram mcp --help`"
        sys.stderr.write(f"error: {exc.message}\n" + (f"hint: {hint}\n" if hint else ""))
        return 1
    return 0


def forward(args: list[str]) -> int | None:
    """Have the store's daemon answer a plain read command; return its exit status.

    None: no daemon answered (one is started for the next call), or the line is not one a
    daemon answers; the caller runs the command itself.
    """
    from engram import reach

    start, words = (args[1], args[2:]) if args[:1] == ["-C"] and len(args) > 2 else (None, args)
    command = words[0] if words else ""
    if command not in FORWARDED + WRITES or reach.off(reach.DAEMON_SWITCH):
        return None
    if "--help" in words or "-h" in words:
        return None  # typer's help, here
    import os

    try:
        cwd = os.getcwd()
    except OSError:  # the current folder was removed: the CLI explains
        return None
    folder = os.path.abspath(os.path.join(cwd, start)) if start is not None else cwd
    root = reach.find_store(folder) if os.path.isdir(folder) else None
    if root is None:
        return None  # no store here (or no such -C folder): the CLI says so
    params = {
        "argv": ["-C", folder, *words],
        "cwd": cwd,
        "stdin": _stdin_kind(),
        "env": reach.environment(),
    }
    wait = ANSWER_WRITE if command in WRITES else ANSWER
    try:
        data = reach.call(root, "engram_cli", params, connect=CONNECT, answer=wait)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")  # as the CLI says it
        return INTERRUPTED
    if not isinstance(data, dict) or not isinstance(data.get("output"), list):
        reach.start(root)
        return None
    try:
        for number, text in data["output"]:
            _emit(sys.stderr if number == 2 else sys.stdout, text)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE
    code = data.get("code")
    return code if isinstance(code, int) else 0


def _emit(stream: Any, text: str) -> None:
    """Write text as the CLI's echo would: a stream set to ASCII gets UTF-8 (as click does)."""
    import codecs

    encoding = getattr(stream, "encoding", None) or "ascii"
    binary = getattr(stream, "buffer", None)
    if binary is not None and codecs.lookup(encoding).name == "ascii":
        stream.flush()
        binary.write(text.encode("utf-8", "replace"))
        binary.flush()
    else:
        stream.write(text)
        stream.flush()


def _stdin_kind() -> str:
    """Return what this process's standard input is: tty, none or pipe (a file counts too)."""
    if sys.stdin is None:
        return "none"
    try:
        return "tty" if sys.stdin.isatty() else "pipe"
    except (OSError, ValueError):
        return "none"


def serve_daemon(
    root: Path,
    socket: Path | None = None,
    *,
    ready: Callable[[], None] | None = None,
    idle: float | None = None,
    first_use: bool = False,
) -> None:
    """Serve the store of ``root`` (``engram daemon``): the socket daemon, and the CLI's calls."""
    from engram.cli import forwarded
    from engram.daemon import server as daemon

    methods = {forwarded.METHOD: daemon.Method(forwarded.PARAMS, forwarded.answer)}
    daemon.serve(root, socket, ready=ready, idle=idle, methods=methods, first_use=first_use)


if __name__ == "__main__":
    main()
