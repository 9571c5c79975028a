"""The one options decorator: a command's typer parameters, derived from its operation.

``@options(RECALL)`` gives a command every parameter the declaration offers the CLI
(``Operation.params_for("cli")``): an option ``--{wire}`` (``-`` for ``_``) with the declared
short name, or a positional argument (``argument=True``); the declared help; the type
(``str``, ``int``, ``float``, ``bool``, ``list[str]`` for a repeatable option, whose values are
also split at commas, ``--tag a,b`` as ``--tag a --tag b``); and the limits
``minimum``/``maximum``, which the CLI enforces (it refuses, it never clamps). Enum values are
left to the service to check, as they always were: it names the allowed ones. The decorator
sets the command's ``__signature__`` and ``__annotations__``, which typer reads (a declared
parameter's typer ``Option`` or ``Argument`` is its default there), and hands the command body
the values by parameter name (``values: Values``). A command keeps its own options
(``--json``, a file argument …) beside them, where the CLI genuinely differs.

Where the CLI offers a parameter differently from the declaration (an id the CLI always needs,
``-s`` for ``--session``, help on reading standard input) the command says so in its decorator
(``options(GET, id=REQUIRED)``), in sight of the reader. The fast path reads the same
derivation (``declared``), so a parameter added to a declaration reaches both paths.

This module imports typer and the contract only, never the service.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import typer

from engram.operations import Operation, Param
from engram.operations.params import split

TYPES: Final[Mapping[str, Any]] = {
    "string": str,
    "id": str,
    "csv": str,
    "date": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "strings": list[str],
}
VALUES: Final = "values"  # the command body's parameter that receives the declared values
REQUIRED: Final[Mapping[str, Any]] = {"required": True}
OPTIONAL: Final[Mapping[str, Any]] = {"required": False}

Command = Callable[..., Any]


class Values(dict[str, Any]):
    """The values of a command's declared parameters, by parameter name."""

    def __init__(self, params: Iterable[Param], values: Mapping[str, Any]) -> None:
        super().__init__(values)
        self.params = tuple(params)

    def keywords(self, *leave: str) -> dict[str, Any]:
        """Return the values given (not None) by service keyword, but the parameters ``leave``."""
        return {
            p.key: self[p.name]
            for p in self.params
            if p.name not in leave and self[p.name] is not None
        }

    def filters(self) -> dict[str, Any]:
        """Return the recall filters by service keyword (None: not filtered)."""
        return {p.key: self[p.name] for p in self.params if p.filter}


@dataclass(frozen=True)
class Declared:
    """What ``options`` made of a command: its operation, parameters and own parameters."""

    operation: Operation
    params: tuple[Param, ...]  # as the CLI offers them
    own: tuple[inspect.Parameter, ...]  # the command's own, annotations resolved

    def param(self, name: str) -> Param:
        """Return the declared parameter called ``name``."""
        return next(p for p in self.params if p.name == name)


def option_names(param: Param) -> tuple[str, ...]:
    """Return the CLI names of a declared option: ``--wire-name`` and its short name."""
    long = "--" + param.wire.replace("_", "-")
    return (long, param.short) if param.short else (long,)


def default(param: Param) -> Any:
    """Return the CLI's default of a parameter (a flag is off unless declared on)."""
    if param.type == "boolean":
        return bool(param.default)
    return param.default


def cli_params(
    operation: Operation, omit: Iterable[str], changes: Mapping[str, Mapping[str, Any]]
) -> tuple[Param, ...]:
    """Return the parameters ``operation`` offers the CLI, with the command's changes made.

    A change names Param fields to replace, and ``note``: CLI-only help added to the declared.
    """
    params = operation.params_for("cli")
    left = set(omit)
    unknown = (left | set(changes)) - {p.name for p in params}
    if unknown:
        raise ValueError(f"{operation.name} has no CLI parameter {', '.join(sorted(unknown))}")
    out: list[Param] = []
    for param in params:
        if param.name in left:
            continue
        change = dict(changes.get(param.name, {}))
        note = str(change.pop("note", ""))
        param = param._replace(**change)
        if note:
            param = param._replace(help=f"{param.help} {note}")
        if param.type not in TYPES or not param.name.isidentifier():
            raise ValueError(f"{operation.name}: the CLI cannot take {param.name} ({param.type})")
        out.append(param)
    return tuple(out)


_PLACEHOLDERS: Final[Mapping[str, str]] = {"id": "ID", "integer": "N", "number": "NUMBER"}
_NAMED: Final[Mapping[str, str]] = {"query": "WORDS"}  # what a name alone would not say


def placeholder(param: Param) -> str:
    """Return the help's placeholder of a declared value: ID, N, WORDS, else FILES, KIND …"""
    if param.type in _PLACEHOLDERS:
        return _PLACEHOLDERS[param.type]
    name = param.wire if not param.argument else param.name
    return _NAMED.get(name, name.upper().replace("_", "-"))


def _limits(param: Param) -> dict[str, Any]:
    if param.type not in ("integer", "number"):
        return {}
    cast = int if param.type == "integer" else float
    return {
        key: cast(value)
        for key, value in (("min", param.minimum), ("max", param.maximum))
        if value is not None
    }


def parameter(param: Param) -> inspect.Parameter:
    """Return the typer parameter of a declared one (its default says how typer offers it)."""
    base = TYPES[param.type]
    needed = param.required and param.type != "boolean"
    value = ... if needed else default(param)  # typer reads ... as "required"
    info: Any
    metavar = None if param.type == "boolean" else placeholder(param)
    if param.argument:
        info = typer.Argument(value, help=param.help, metavar=metavar, **_limits(param))
    else:
        info = typer.Option(
            value, *option_names(param), help=param.help, metavar=metavar, **_limits(param)
        )
    hint = base if needed or value is not None else base | None
    return inspect.Parameter(
        param.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=hint
    )


def options(
    operation: Operation, *, omit: Iterable[str] = (), **changes: Mapping[str, Any]
) -> Callable[[Command], Command]:
    """Give a command the CLI parameters of ``operation``; its body takes them as ``values``.

    The command's own parameters before ``values`` come first, then the declared ones, then
    its own after ``values``. ``omit`` leaves declared parameters to the command's own options;
    ``changes`` (by parameter name) say how the CLI offers a parameter differently.
    """
    params = cli_params(operation, omit, changes)

    def decorate(function: Command) -> Command:
        signature = inspect.signature(function, eval_str=True)
        names = list(signature.parameters)
        if VALUES not in names:
            raise TypeError(f"{function.__name__} must take {VALUES!r} to use options()")
        own = tuple(
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in signature.parameters.values()
            if p.name != VALUES
        )
        clash = {p.name for p in params} & {p.name for p in own}
        if clash:
            raise TypeError(f"{function.__name__}: {', '.join(sorted(clash))} declared twice")
        cut = names.index(VALUES)
        declared = [parameter(param) for param in params]
        every = [*own[:cut], *declared, *own[cut:]]

        @functools.wraps(function)
        def command(**given: Any) -> Any:
            values = Values(params, {p.name: _value(p, given.pop(p.name)) for p in params})
            return function(**given, values=values)

        command.__signature__ = signature.replace(parameters=every)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in every}
        command.__annotations__["return"] = signature.return_annotation
        command.engram_declared = Declared(operation, params, own)  # type: ignore[attr-defined]
        return command

    return decorate


def _value(param: Param, value: Any) -> Any:
    """Return a given value, a list's items split at commas as for every adapter (``split``)."""
    if param.type == "strings" and value:
        return split(value)
    return value


def declared(command: Command) -> Declared | None:
    """Return what ``options`` declared of a command (None: it declares its options itself)."""
    found = getattr(command, "engram_declared", None)
    return found if isinstance(found, Declared) else None
