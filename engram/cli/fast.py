"""The fast path: ``engram recall``, ``check`` and ``context`` parsed from their declarations.

These are what agents and hooks run most, often as a fresh process. typer 0.29 builds a
validator for every parameter of a command it runs, which costs more than the command itself;
so ``main`` parses a plain command line of these commands itself and calls the command. Its
option table comes from the operation's declaration as the command offers it
(``engram.cli.options.declared``: names, short names, which take values, numbers and their
limits, lists) plus the command's own flags (``--json``), so a parameter added to a
declaration reaches this path with no edit here. Anything else (help, unknown options, values
out of range or not plain digits, a missing required value) is handed to typer, which
explains. tests/cli/test_cli.py checks that both paths accept the same options and print the same.
"""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, NamedTuple, get_args, get_origin

import typer
from typer.core import TyperCommand
from typer.models import OptionInfo

from engram.cli.app import app, boundary
from engram.cli.options import Command, declared, default, option_names
from engram.operations import Param

FAST_COMMANDS: Final = ("recall", "search", "check", "context")


@dataclass(frozen=True)
class Slot:
    """One parameter of a fast command: its keyword, what it holds, its default and limits."""

    keyword: str
    kind: str  # flag, text, number (an integer), real (left to typer), list
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    required: bool = False


class Shape(NamedTuple):
    """What the fast path reads of a command: its function, context keyword, options, argument."""

    function: Command
    context: str
    options: dict[str, Slot]
    argument: Slot | None


def _slot(param: Param) -> Slot:
    """Return the slot of a declared parameter, as the options decorator offers it."""
    if param.type == "boolean":
        kind = "flag"
    elif param.multiple:
        kind = "list"
    else:
        kind = {"integer": "number", "number": "real"}.get(param.type, "text")
    required = param.required and kind != "flag"
    return Slot(param.name, kind, default(param), param.minimum, param.maximum, required)


def _plain(info: OptionInfo) -> bool:
    """Tell whether a typer option does nothing the fast path would have to copy."""
    return (
        info.callback is None
        and info.parser is None
        and info.envvar is None
        and info.default_factory is None
        and info.expose_value
        and not info.is_eager
        and not info.prompt
        and not info.count
    )


def _own_flag(parameter: inspect.Parameter) -> tuple[list[str], Slot] | None:
    """Return the names and slot of a command's own flag (``--json``), None for anything else."""
    hint = parameter.annotation
    if get_origin(hint) is not Annotated:
        return None
    base, info = get_args(hint)[:2]
    if base is not bool or not isinstance(info, OptionInfo) or not _plain(info):
        return None
    # In Annotated[…, typer.Option("--name", "-n")] typer reads the first name as `default`.
    names = [*([info.default] if isinstance(info.default, str) else []), *(info.param_decls or ())]
    if not names or any("/" in n or not n.startswith("-") for n in names):
        return None  # a flag's --x/--no-x: typer's own business
    return names, Slot(parameter.name, "flag", parameter.default)


def _function(command: str) -> Command | None:
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")
        if name == command:
            return info.callback
    return None


def shape(command: str) -> Shape | None:
    """Return how to call a fast command from its declaration, or None to leave it to typer."""
    function = _function(command) if command in FAST_COMMANDS else None
    return shape_of(function) if function is not None else None


def shape_of(function: Command) -> Shape | None:
    """Return how to call a command from its declaration (None: it has none, or is not plain)."""
    found = declared(function)
    if found is None:
        return None
    context, options, argument = "", {}, None
    for param in found.params:
        slot = _slot(param)
        if not param.argument:
            options.update(dict.fromkeys(option_names(param), slot))
        elif slot.kind != "text" or slot.required or argument is not None:
            return None
        else:
            argument = slot
    for parameter in found.own:
        if parameter.annotation is typer.Context:
            context = parameter.name
            continue
        flag = _own_flag(parameter)
        if flag is None:
            return None
        options.update(dict.fromkeys(flag[0], flag[1]))
    return Shape(function, context, options, argument) if context else None


def fast_options(command: str) -> set[str] | None:
    """Return the options the fast path reads for ``command``, or None if it leaves it to typer."""
    found = shape(command)
    return set(found.options) if found else None


def _number(text: str, slot: Slot) -> int | None:
    if not (text.isascii() and text.isdigit()):
        return None  # signs, spaces, other digits: typer decides
    value = int(text)
    low = slot.minimum if slot.minimum is not None else value
    high = slot.maximum if slot.maximum is not None else value
    return value if low <= value <= high else None


def _parse(rest: list[str], options: dict[str, Slot]) -> tuple[dict[str, Any], list[str]] | None:
    """Return the options given (by keyword) and the words, or None to leave the line to typer."""
    given: dict[str, Any] = {}
    words: list[str] = []
    position = 0
    while position < len(rest):
        token = rest[position]
        position += 1
        if token == "--":
            words.extend(rest[position:])
            break
        if not token.startswith("-") or len(token) == 1:
            words.append(token)
            continue
        name, has_value, inline = token.partition("=")
        inline_value = has_value and name.startswith("--")
        slot = options.get(name if inline_value else token)
        if slot is None or (slot.kind == "flag" and inline_value) or slot.kind == "real":
            return None  # --help, unknown options, --json=…, a float: typer explains
        if slot.kind == "flag":
            given[slot.keyword] = True
            continue
        if not inline_value:
            if position == len(rest):
                return None
            inline, position = rest[position], position + 1
        if slot.kind == "list":
            given.setdefault(slot.keyword, []).append(inline)
        elif slot.kind == "number":
            number = _number(inline, slot)
            if number is None:
                return None
            given[slot.keyword] = number
        else:
            given[slot.keyword] = inline
    return given, words


def fast_command(argv: list[str]) -> tuple[Command, dict[str, Any]] | None:
    """Parse a plain `[-C PATH] recall|search|check|context …` line, or None to leave it to typer.

    Returns the command's function and its keyword arguments, the context among them.
    """
    args = list(argv)
    start: str | None = None
    if args[:1] == ["-C"] and len(args) >= 2:
        start, args = args[1], args[2:]
    found = shape(args[0]) if args else None
    parsed = _parse(args[1:], found.options) if found else None
    if found is None or parsed is None:
        return None
    given, words = parsed
    argument = found.argument
    if len(words) > (1 if argument else 0):
        return None
    if argument is not None and words:
        given[argument.keyword] = words[0]
    slots = [*found.options.values(), *([argument] if argument else [])]
    if any(slot.required and slot.keyword not in given for slot in slots):
        return None  # typer names what is missing
    kwargs = {slot.keyword: slot.default for slot in slots}
    kwargs.update(given)
    command = TyperCommand(args[0])
    kwargs[found.context] = typer.Context(command, obj={"dir": Path(start) if start else None})
    return found.function, kwargs


def main() -> None:
    """Run the CLI (the ``engram`` console script): the fast path if it can, else typer."""
    os.environ.setdefault("PYTHONIOENCODING", "utf-8")
    fast = fast_command(sys.argv[1:])
    if fast is None:
        app()
        return
    function, kwargs = fast
    try:
        with boundary(lambda: named(kwargs)):
            function(**kwargs)
    except typer.Exit as exit_:
        raise SystemExit(exit_.exit_code) from None
    except typer.TyperException:
        app()  # a usage error, refused before the command did anything: typer shows it


def named(kwargs: dict[str, Any]) -> str:
    """Return the name of the command a fast call runs (its context's), for a hint."""
    return next((v.command.name or "" for v in kwargs.values() if isinstance(v, typer.Context)), "")
