"""The typer app of the ``engram`` command: its one error boundary, ``-C``, and the I/O helpers.

``EngramGroup.invoke`` (and ``boundary`` for the fast path) turns every ``EngramError`` into a
message and a hint on stderr and a non-zero exit; no traceback reaches a user. Every command
module of ``engram.cli`` registers its commands on ``app`` where they are defined and prints
through ``echo`` / ``emit_json`` (control characters shown, never obeyed). Heavy modules (the
service and its index, rich) are imported inside the helpers that need them, so ``engram
--help`` starts fast. This module knows no command.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import CommandFunctionType

from engram.errors import EngramError, InvalidInput
from engram.terminal import json_c1, visible

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from rich.console import Console

    from engram.service import Engram


def safe(text: str) -> str:
    """Return text with every control character but newline and tab shown as \\xNN."""
    return visible(text)


class StdinNeeded(Exception):
    """A forwarded command would read the caller's standard input: the caller runs it itself."""


class Lent:
    """What a daemon lends a command line it answers for another process.

    Its open Engram (``open_engram`` uses it and leaves it open), the kind of the caller's
    standard input (``tty``, ``none`` or ``pipe``: a command that would read a pipe raises
    ``StdinNeeded`` before it changes anything), and the output, kept in order as (stream,
    text) pairs, 1 or 2, for the caller to print (``engram.cli.forwarded``).
    """

    def __init__(self, engram: Engram, stdin: str) -> None:
        self.engram = engram
        self.stdin = stdin
        self.chunks: list[tuple[int, str]] = []

    def write(self, text: str, *, err: bool) -> None:
        """Keep ``text`` as written to stderr (``err``) or stdout."""
        if text:
            self.chunks.append((2 if err else 1, text))


LENT: contextvars.ContextVar[Lent | None] = contextvars.ContextVar("engram_cli_lent", default=None)


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """Print one message of the CLI, control characters made visible (see ``safe``)."""
    _print(safe(str(message)), err=err, nl=nl)


def _print(text: str, *, err: bool = False, nl: bool = True) -> None:
    lent = LENT.get()
    if lent is None:
        typer.echo(text, err=err, nl=nl)
    else:
        lent.write(text + ("\n" if nl else ""), err=err)


def rich_text(text: object) -> str:
    """Return text for a rich console: control characters visible, markup taken literally."""
    from rich.markup import escape

    return escape(safe(str(text)))


@contextlib.contextmanager
def boundary(command: Callable[[], str] | None = None) -> Iterator[None]:
    """The CLI's one error boundary: message and hint on stderr, non-zero exit, no traceback.

    ``command`` tells the path of the command that ran (``session start``): a wrong input's
    hint names its ``--help``.
    """
    try:
        yield
    except EngramError as exc:
        hint = exc.hint
        path = command() if command is not None else ""
        if isinstance(exc, InvalidInput) and hint == InvalidInput.hint and path:
            hint = f"see `engram {path} --help`"
        fail(exc.message, hint)
    except BrokenPipeError:
        # The reader went away (e.g. `engram recall x | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(141) from None
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        fail(f"{exc.strerror or exc}{where}", "check the path and its permissions")
    except KeyboardInterrupt:
        echo("interrupted", err=True)
        raise typer.Exit(130) from None


def placeholder(param: TyperArgument | TyperOption) -> str:
    """Return what help shows for a value: N for a number, else the parameter's name (FILES)."""
    annotation = param.type_descriptor.annotation
    if annotation is int:
        return "N"
    if annotation is float:
        return "NUMBER"
    return (param.name or "value").upper().replace("_", "-")


class EngramCommand(TyperCommand):
    """A command whose help names each value by a placeholder (``--files FILES``, ``ID``).

    Typer writes a value's Python type instead (``<list[str]>``, ``<int range>``) and braces a
    required argument in the usage line (``{ID}``); engram's help reads as its README does.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if not isinstance(param, TyperArgument | TyperOption):
                continue
            flag = isinstance(param, TyperOption) and (param.is_flag or param.count)
            if param.metavar is None and not flag:
                param.metavar = placeholder(param)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """Return the usage line's pieces: ``ID`` when required, ``[CONTENT]`` when not."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.metavar or placeholder(param)
                dots = "..." if param.nargs != 1 and "..." not in name else ""
                pieces.append(f"{name}{dots}" if param.required else f"[{name}]{dots}")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """Write the Arguments and Options sections, an argument by its placeholder alone."""
        arguments: list[tuple[str, str]] = []
        options: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, TyperArgument):
                arguments.append((param.metavar or placeholder(param), record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class EngramTyper(typer.Typer):
    """A typer app whose commands are ``EngramCommand`` unless a command names its own class."""

    def command(
        self, name: str | None = None, **kwargs: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        """Register a command, as ``typer.Typer.command`` does, with engram's help."""
        kwargs["cls"] = kwargs.get("cls") or EngramCommand
        return super().command(name, **kwargs)


class EngramGroup(TyperGroup):
    """The command group with engram's one error boundary."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        def path() -> str:
            words = [ctx.invoked_subcommand or ""]
            at: Any = ctx
            while at.parent is not None:
                words.insert(0, at.info_name or "")
                at = at.parent
            return " ".join(words).strip()

        with boundary(path):
            return super().invoke(ctx)


def fail(message: str, hint: str = "") -> NoReturn:
    """Print an error and its hint on stderr and exit 1."""
    echo(f"error: {message}", err=True)
    if hint:
        echo(f"hint: {hint}", err=True)
    raise typer.Exit(1)


app = EngramTyper(
    cls=EngramGroup,
    name="engram",
    help="Git-native, file-first memory for AI coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def group(name: str, help: str) -> typer.Typer:
    """Return a command group added to ``app`` (``engram NAME …``), with the error boundary."""
    sub = EngramTyper(cls=EngramGroup, help=help, no_args_is_help=True, rich_markup_mode=None)
    app.add_typer(sub, name=name)
    return sub


JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def _version(wanted: bool) -> None:
    """Print engram's version and stop (``--version``, ``-v``: Go engram's names for it)."""
    if wanted:
        from engram.service import version_info

        echo(f"engram {version_info()['engram']}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    directory: Annotated[
        Path | None,
        typer.Option(
            "-C", help="Run as if engram was started in PATH (like git -C).", metavar="PATH"
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-v",
            callback=_version,
            is_eager=True,
            expose_value=False,
            help="Print engram's version and exit (`engram version` lists its libraries too).",
        ),
    ] = False,
) -> None:
    """Git-native, file-first memory for AI coding agents."""
    ctx.obj = {"dir": directory}


def start_of(ctx: typer.Context) -> Path | None:
    """Return the folder ``-C`` names (None: the current one); refuse one that does not exist."""
    directory = (ctx.obj or {}).get("dir")
    if directory is not None and not Path(directory).is_dir():
        raise InvalidInput(f"-C {directory}: no such folder")
    return Path(directory) if directory is not None else None


def open_engram(ctx: typer.Context) -> contextlib.AbstractContextManager[Engram]:
    """Open the project the command runs in (``-C`` or the current folder).

    A daemon answering the command line lends its open Engram (``LENT``): it is used, and
    left open, instead.
    """
    lent = LENT.get()
    if lent is not None:
        return contextlib.nullcontext(lent.engram)
    from engram.service import Engram

    return Engram.open(start_of(ctx))


def emit_json(value: Any) -> None:
    """Print a value as indented JSON, every control character escaped."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    _print(json_c1(text))


def warn_problems(engram: Engram) -> None:
    """Warn about the first lines of the store that could not be read."""
    problems = engram.problems()
    for _, message in problems[:3]:
        echo(f"warning: skipped {message}", err=True)
    if problems:
        echo(
            "hint: run `engram doctor` for the full list, `engram doctor --fix` to repair", err=True
        )


def offer_driver(engram: Engram) -> None:
    """Say so when this clone lacks the drivers its .gitattributes asks for (a fresh clone).

    git config is not cloned: a teammate's clone has the attributes and not the drivers.
    """
    setup = engram.git_setup()
    if not setup.repo:
        return
    missing = []
    if setup.attributes and not setup.driver:
        missing.append("the merge driver (git merges of .engram/)")
    if setup.diff_attribute and not setup.diff:
        missing.append("the diff driver (readable memories in git diff, log -p and show)")
    if missing:
        echo(
            f"hint: this clone does not have engram's {' nor '.join(missing)} yet: run "
            "`engram doctor --fix` to install them",
            err=True,
        )


def stdout_console() -> Console:
    """Return a rich console for stdout; in a pipe or file, one wide enough never to wrap a line.

    Rich takes 80 columns (or $COLUMNS) when stdout is no terminal, and would break a table's
    cells mid-phrase for a reader that has no width at all (``engram stats | less``, a grep).
    """
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    return Console(width=_PIPE_WIDTH, no_color=True, highlight=False)


_PIPE_WIDTH = 10_000


def table(headers: list[str], rows: list[list[str]]) -> None:
    """Print rows as a rich table (plain columns when stdout is not a terminal)."""
    from rich.table import Table

    drawn = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for header in headers:
        drawn.add_column(header)
    for row in rows:
        drawn.add_row(*(rich_text(cell) for cell in row))
    stdout_console().print(drawn)


def read_stdin() -> str:
    """Return standard input as text (UTF-8, the last line break dropped)."""
    if LENT.get() is not None:
        raise StdinNeeded("the caller's standard input")
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    try:
        return data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"standard input is not valid UTF-8 (byte {exc.start})") from exc


def stdin_has_data() -> bool:
    """Tell whether stdin is a pipe or file with something to read now (never blocks)."""
    lent = LENT.get()
    if lent is not None:
        if lent.stdin == "pipe":
            raise StdinNeeded("whether the caller's standard input has data")
        return False
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return False
        import select

        ready, _, _ = select.select([sys.stdin], [], [], 0)
        return bool(ready)
    except (OSError, ValueError):
        return False


def text_arg(value: str | None, what: str) -> str:
    """Return an argument's text; '-', or nothing while stdin is not a terminal, reads stdin."""
    lent = LENT.get()
    if lent is not None:
        piped = lent.stdin == "pipe"
    else:
        piped = sys.stdin is not None and not sys.stdin.isatty()
    if value == "-" or (value is None and piped):
        return read_stdin()
    if value is None:
        raise InvalidInput(f"no {what} given", hint=f"pass the {what}, or pipe it in with '-'")
    return value


def progress(label: str) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """Return a (callback, close) pair drawing a rich progress bar on a terminal."""
    if not sys.stderr.isatty():
        return None, lambda: None
    from rich.progress import Progress

    bar = Progress(transient=True)
    bar.start()
    task = bar.add_task(label, total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop
