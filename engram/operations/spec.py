"""What an operation is: its name, parameters, help, result and effects, and the registry of them.

Each operation is declared once, where its area is (``operations/memory.py`` …), with
``declare``; the adapters derive their surfaces from ``OPERATIONS``: the CLI command and its
options, the MCP tool and its input schema, the HTTP route's request model, the socket
daemon's checks. ``arguments`` is the one check of raw JSON arguments every adapter shares.

This module knows nothing of typer, mcp or HTTP, and imports nothing above the leaves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

from engram.errors import InputTooLarge, InvalidInput
from engram.model import MAX_JSON_DEPTH, value_too_deep
from engram.operations.params import Param

ADAPTERS: Final = ("cli", "mcp", "http", "daemon")
PROFILES: Final = ("agent", "admin")


class Operation(NamedTuple):
    """One operation of the facade, as every adapter offers it."""

    name: str  # the MCP tool name and the key of OPERATIONS
    summary: str  # one line: the CLI command's help, the HTTP route's summary
    description: str  # the MCP tool description: a prompt to the model, when to use it
    params: tuple[Param, ...]
    command: str = ""  # the CLI command ("session start"); empty: no CLI command of its own
    profile: str = "agent"  # the MCP profile that offers it: agent or admin
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    result: str = ""  # the result type the facade returns (documentation and OpenAPI)
    only: tuple[str, ...] = ()  # the adapters that offer it (default: every one)

    def param(self, name: str) -> Param:
        """Return the parameter called ``name`` (KeyError if this operation has none)."""
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(f"{self.name} has no parameter {name!r}")

    def params_for(self, adapter: str) -> tuple[Param, ...]:
        """Return the parameters ``adapter`` offers (a parameter may be for some adapters only)."""
        return tuple(p for p in self.params if not p.only or adapter in p.only)

    @property
    def filters(self) -> tuple[Param, ...]:
        """Return the recall filters among the parameters (they go to the index's Query)."""
        return tuple(p for p in self.params if p.filter)

    def input_schema(self, adapter: str = "mcp") -> dict[str, Any]:
        """Return the JSON schema of this operation's arguments."""
        params = self.params_for(adapter)
        return {
            "type": "object",
            "properties": {p.name: p.schema() for p in params},
            "required": [p.name for p in params if p.required],
            "additionalProperties": False,
        }

    def arguments(
        self,
        raw: Mapping[str, Any] | None,
        *,
        adapter: str = "mcp",
        where: str = "",
        unknown: str = "refuse",
    ) -> dict[str, Any]:
        """Check raw JSON arguments; return them by parameter name, defaults filled in."""
        return check_arguments(where or self.name, self.params_for(adapter), raw, unknown=unknown)

    def filter_values(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Return the recall filters among checked ``args``, keyed by their Query field."""
        return {p.key: args[p.name] for p in self.filters if args.get(p.name) is not None}


def check_arguments(
    where: str,
    params: Iterable[Param],
    raw: Mapping[str, Any] | None,
    *,
    unknown: str = "refuse",
) -> dict[str, Any]:
    """Check raw JSON arguments against ``params``; return them by name, defaults filled in.

    ``unknown="refuse"`` names arguments no parameter takes; ``"ignore"`` drops them. ``where``
    names the operation (or another tool's name for it) in every message.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"{where}: arguments must be a JSON object")
    if value_too_deep(dict(raw), MAX_JSON_DEPTH):
        raise InputTooLarge(f"{where}: arguments nest deeper than {MAX_JSON_DEPTH} levels; refused")
    params = tuple(params)
    known = {p.name for p in params}
    extra = sorted(set(raw) - known)
    if extra and unknown == "refuse":
        takes = ", ".join(p.name for p in params) or "no arguments"
        raise InvalidInput(
            f"{where}: unknown argument{'s' if len(extra) > 1 else ''} "
            f"{', '.join(repr(u) for u in extra)}; it takes: {takes}"
        )
    out: dict[str, Any] = {}
    for param in params:
        value = raw.get(param.name)
        if value is None:
            if param.required:
                raise InvalidInput(f"{where}: missing required argument {param.name!r}")
            if param.default is not None:
                out[param.name] = param.default
            continue
        out[param.name] = param.check(value, where)
    return out


OPERATIONS: Final[dict[str, Operation]] = {}


def declare(operation: Operation) -> Operation:
    """Register an operation where it is defined (its name must be new)."""
    if operation.name in OPERATIONS:
        raise ValueError(f"operation {operation.name!r} is declared twice")
    names = [p.name for p in operation.params if not p.only]
    if len(names) != len(set(names)):
        raise ValueError(f"operation {operation.name!r} declares a parameter twice")
    OPERATIONS[operation.name] = operation
    return operation


def for_adapter(adapter: str, names: Iterable[str] | None = None) -> list[Operation]:
    """Return the operations ``adapter`` offers, in declaration order."""
    chosen = set(names) if names is not None else None
    return [
        op
        for op in OPERATIONS.values()
        if (not op.only or adapter in op.only) and (chosen is None or op.name in chosen)
    ]
