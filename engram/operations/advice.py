"""Advice in each adapter's words: "run `engram get ID`" on the CLI, "call `get` with id=ID" in MCP.

A hint, a note or a footer that tells the reader what to do next names an operation, and each
adapter says it in its own terms: the CLI as its command path and options
(``engram recall --kind KIND``), MCP as its tool name and parameter names (``recall`` with
kind=KIND), read from the declarations in ``OPERATIONS``. Code above the leaves writes advice
with ``cmd`` (the reference), ``run`` (with its verb), ``name`` and ``option``; they render in
the surface the adapter serving the call set with ``using`` (default: the CLI's, for people and
for library callers). A leaf (``engram.errors``, ``engram.model``), which cannot see the
declarations, writes its hints as the CLI types them ("run `engram doctor --fix`"); the MCP
and HTTP error boundaries pass every hint through ``render``, which turns each backticked
``engram …`` command line of a declared operation (``parse``) into the surface's words. The
CLI's words are the default, so the CLI (and the socket daemon, which sets no surface) shows
hints as written.

In MCP an operation the server does not offer as a tool is advice for the person: "the user can
run `engram doctor --fix`", "`engram export` (the user's command)"; ``render`` leaves those as
they are, so rendering twice changes nothing.

This module imports only the contract and the leaves; it knows nothing of typer, mcp or HTTP.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Final

from engram.operations.params import Param
from engram.operations.spec import OPERATIONS, Operation

__all__ = [
    "CLI",
    "OPERATION_NAMES",
    "PERSON",
    "USERS",
    "Surface",
    "Tools",
    "cmd",
    "current",
    "name",
    "option",
    "parse",
    "render",
    "run",
    "using",
]

PERSON: Final = "the user can run "  # what precedes a command the person is to run
USERS: Final = " (the user's command)"  # what follows a command named for the person
_COMMAND: Final = re.compile(r"(?P<verb>\brun )?`engram (?P<line>[^`]+)`")


def _operation(op: str) -> Operation:
    try:
        return OPERATIONS[op]
    except KeyError:
        raise KeyError(f"advice names no declared operation {op!r}") from None


def _param(operation: Operation, key: str, adapter: str) -> Param:
    for param in operation.params_for(adapter):
        if param.name == key:
            return param
    raise KeyError(f"{operation.name} offers {adapter} no parameter {key!r}")


class Surface:
    """How one adapter names operations: the CLI's command lines (this class)."""

    adapter: str = "cli"

    def name(self, operation: Operation) -> str:
        """Return what the reader calls the operation: ``engram session start``."""
        if not operation.command:
            raise KeyError(f"{operation.name} has no CLI command to advise")
        return f"engram {operation.command}"

    def option(self, operation: Operation, key: str) -> str:
        """Return how the reader gives parameter ``key``: ``--budget``."""
        return "--" + _param(operation, key, self.adapter).wire.replace("_", "-")

    def ref(self, operation: Operation, args: Mapping[str, Any]) -> str:
        """Return the operation with ``args`` as the reader types it, in backticks."""
        words = [self.name(operation)]
        params = {key: _param(operation, key, self.adapter) for key in args}
        words += [str(args[key]) for key, param in params.items() if param.argument]
        for key, param in params.items():
            value = args[key]
            if param.argument or value is False or value is None:
                continue
            flag = self.option(operation, key)
            if value is True:
                words.append(flag)
                continue
            for item in value if isinstance(value, list | tuple) else [value]:
                words += [flag, _word(item)]
        return f"`{' '.join(words)}`"

    def run(self, operation: Operation, args: Mapping[str, Any]) -> str:
        """Return the advice to run the operation: ``run `engram doctor --fix```."""
        return f"run {self.ref(operation, args)}"


class Tools(Surface):
    """How MCP names operations: tools and their parameters; ``served`` the tools it offers.

    ``served=None`` names every operation; ``adapter`` says whose parameters (HTTP names its
    routes' operations and body fields so).
    """

    def __init__(self, served: Iterable[str] | None = None, adapter: str = "mcp") -> None:
        self.served = frozenset(served) if served is not None else None
        self.adapter = adapter

    def offers(self, operation: Operation) -> bool:
        """Tell whether the reader can call the operation (else it is advice for the person)."""
        return self.served is None or operation.name in self.served

    def name(self, operation: Operation) -> str:
        return operation.name if self.offers(operation) else CLI.name(operation)

    def option(self, operation: Operation, key: str) -> str:
        if not self.offers(operation):
            return CLI.option(operation, key)
        return _param(operation, key, self.adapter).name

    def ref(self, operation: Operation, args: Mapping[str, Any]) -> str:
        if not self.offers(operation):
            return CLI.ref(operation, args) + USERS
        given = [f"{_param(operation, k, self.adapter).name}={_value(v)}" for k, v in args.items()]
        return f"`{operation.name}`" + (f" with {', '.join(given)}" if given else "")

    def run(self, operation: Operation, args: Mapping[str, Any]) -> str:
        if not self.offers(operation):
            return PERSON + CLI.ref(operation, args)
        return f"call {self.ref(operation, args)}"


CLI: Final = Surface()
OPERATION_NAMES: Final = Tools(adapter="http")  # every operation by name: the HTTP API's
_SURFACE: ContextVar[Surface] = ContextVar("engram_advice_surface", default=CLI)


def _word(value: Any) -> str:
    text = str(value)
    return text if text and not any(c.isspace() or c in "'\"`" for c in text) else repr(text)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(item) for item in value) + "]"
    return str(value)


@contextlib.contextmanager
def using(surface: Surface) -> Iterator[Surface]:
    """Render the advice written inside this block in ``surface`` (an adapter's call)."""
    token = _SURFACE.set(surface)
    try:
        yield surface
    finally:
        _SURFACE.reset(token)


def current() -> Surface:
    """Return the surface advice renders in now."""
    return _SURFACE.get()


def cmd(op: str, **args: Any) -> str:
    """Return operation ``op`` with ``args`` as the reader gives it (``"ID"``: a placeholder)."""
    return current().ref(_operation(op), args)


def run(op: str, **args: Any) -> str:
    """Return the advice to run ``op``: "run `engram get ID`", "call `get` with id=ID"."""
    return current().run(_operation(op), args)


def name(op: str) -> str:
    """Return what the reader calls ``op``: ``engram check`` on the CLI, ``check`` in MCP."""
    return current().name(_operation(op))


def option(op: str, key: str) -> str:
    """Return how the reader gives ``op``'s parameter ``key``: ``--budget``, ``budget``."""
    return current().option(_operation(op), key)


def render(text: str, surface: Surface | None = None) -> str:
    """Return ``text`` with its backticked ``engram …`` commands in the surface's words.

    What is written for the CLI (a leaf's hint) comes back unchanged on the CLI. A command
    that names no operation of the reader's (``engram init``, a CLI-only option) is the
    person's: "the user can run `engram init`"; one already the person's is left as it is.
    """
    surface = surface or current()
    if type(surface) is Surface or "`engram " not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        before = text[: match.start()] + (match.group("verb") or "")
        if before.endswith(PERSON) or text[match.end() :].startswith(USERS):
            return match.group(0)  # already the person's
        parsed = parse(match.group("line"))
        if parsed is None or not _offered(parsed[0], parsed[1], surface):
            # No operation of the reader's: a command for the person (engram init, index …).
            command = match.group(0).removeprefix("run ")
            return PERSON + command if match.group("verb") else command + USERS
        operation, args = parsed
        if match.group("verb"):
            return surface.run(operation, args)
        return surface.ref(operation, args)

    return _COMMAND.sub(replace, text)


def _offered(operation: Operation, args: Mapping[str, Any], surface: Surface) -> bool:
    """Tell whether the surface has words for each argument (not a CLI-only option)."""
    names = {p.name for p in operation.params_for(surface.adapter)}
    return all(key in names for key in args)


def parse(line: str) -> tuple[Operation, dict[str, Any]] | None:
    """Return the operation and arguments of a CLI command line after ``engram`` (None: none)."""
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    paths = [(op.command.split(), op) for op in OPERATIONS.values() if op.command]
    found = [(path, op) for path, op in paths if words[: len(path)] == path]
    if not found:
        return None
    path, best = max(found, key=lambda item: len(item[0]))
    params = best.params_for("cli")
    flags = {"--" + p.wire.replace("_", "-"): p for p in params}
    flags.update({p.short: p for p in params if p.short})
    positional = [p for p in params if p.argument]
    args: dict[str, Any] = {}
    rest = words[len(path) :]
    while rest:
        word = rest.pop(0)
        if word.startswith("-"):
            param = flags.get(word)
            if param is None or (param.type != "boolean" and not rest):
                return None
            args[param.name] = True if param.type == "boolean" else rest.pop(0)
        elif positional:
            args[positional.pop(0).name] = word
        else:
            return None
    return best, args
