"""One parameter of an operation: its type, default, help and limits, and the one check of it.

A ``Param`` is declared once, in the operation that takes it (``engram.operations``), and every
adapter reads it: the MCP input schema (``schema``), the checks of MCP and socket arguments
(``check``), the CLI option (``flag``, ``short``, ``argument``, ``multiple``) and the HTTP query
or body field (``wire``). ``target`` names the service keyword the value is passed as.

Types: ``string``, ``integer``, ``number``, ``boolean``, ``object``, ``array`` (any list),
``strings`` (an array of strings, or one string of comma-separated items: ``split``), ``csv``
(a comma-separated string, or an array of strings, joined), ``id`` (a string id or prefix, or an
integer id of another tool), ``objects`` (an array of objects) and ``date`` (an RFC 3339 date or
time, or a relative age such as ``7d``; passed on as written, the index reads it).

List values: every adapter hands a ``strings`` value to ``split`` (through ``check``, or the
CLI's and HTTP's own reading of it), so ``"a.py, b.py"``, ``["a.py,b.py"]`` and
``["a.py", "b.py"]`` are the same two items wherever they come from. A comma always separates:
an item cannot hold one (no tag, kind, status or project name does, and a path with a comma
must be given through a glob such as ``a?b.py``); see docs/decisions.md.

This module imports nothing above the leaves and knows nothing of typer, mcp or HTTP.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final, NamedTuple

from engram.errors import InvalidInput

TYPES: Final = (
    "string",
    "integer",
    "number",
    "boolean",
    "object",
    "array",
    "strings",
    "csv",
    "id",
    "objects",
    "date",
)
_JSON_NAMES: Final = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    list: "array",
    dict: "object",
    type(None): "null",
}
_EXPECTED: Final = {
    "strings": "an array of strings (or one comma-separated string)",
    "csv": "a comma-separated string",
    "id": "a string or integer id",
    "objects": "an array of objects",
    "date": "a date (2026-01-31, an RFC 3339 time, or an age such as 7d)",
}


def json_type(value: Any) -> str:
    """Name the JSON type of a decoded value (for messages)."""
    return _JSON_NAMES.get(type(value), type(value).__name__)


def split(value: str | Iterable[str]) -> list[str]:
    """Return the items of a list value: each string split at commas, stripped, blanks dropped.

    The one reading of a list parameter: a JSON array, one comma-separated string, a repeated
    CLI option or HTTP query value (``?tags=a,b`` as ``?tags=a&tags=b``).
    """
    items = [value] if isinstance(value, str) else value
    return [part.strip() for item in items for part in str(item).split(",") if part.strip()]


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


class Param(NamedTuple):
    """One argument of an operation, as every adapter offers it."""

    name: str
    type: str
    help: str
    required: bool = False
    enum: tuple[str, ...] = ()
    accept: tuple[str, ...] = ()  # further accepted values, not advertised (aliases)
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    clamp: bool = False  # above maximum: use maximum instead of refusing
    target: str = ""  # the service keyword (default: name)
    flag: str = ""  # the CLI option and HTTP query name, without dashes (default: name)
    short: str = ""  # a one-letter CLI option, e.g. "-k"
    argument: bool = False  # a positional CLI argument instead of an option
    filter: bool = False  # a recall filter: passed to the index's Query
    only: tuple[str, ...] = ()  # the adapters that offer it (default: every one)

    @property
    def key(self) -> str:
        """Return the service keyword this value is passed as."""
        return self.target or self.name

    @property
    def wire(self) -> str:
        """Return the CLI option / HTTP query name (``tag`` for ``tags``)."""
        return self.flag or self.name

    @property
    def multiple(self) -> bool:
        """Tell whether the value is a list (a repeatable CLI option)."""
        return self.type in ("strings", "objects", "array")

    def schema(self) -> dict[str, Any]:
        """Return this argument's JSON schema."""
        out: dict[str, Any]
        if self.type == "strings":
            items: dict[str, Any] = {"type": "string"}
            if self.enum:
                items["enum"] = list(self.enum)
            # One comma-separated string is taken too (``split``): agents send both.
            out = {"type": ["array", "string"], "items": items}
        elif self.type == "objects":
            out = {"type": "array", "items": {"type": "object"}}
        elif self.type == "id":
            out = {"type": ["string", "integer"]}
        elif self.type in ("csv", "date"):
            out = {"type": "string"}
        else:
            out = {"type": self.type}
            if self.enum:
                out["enum"] = list(self.enum)
        out["description"] = self.help
        if self.default is not None:
            out["default"] = self.default
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        return out

    def check(self, value: Any, where: str) -> Any:
        """Return ``value`` checked against this argument (raise InvalidInput if it is wrong).

        ``where`` names the operation (or tool) in the message.
        """
        kind = self.type
        if kind in ("string", "csv", "date") and isinstance(value, str):
            if kind == "string" and self.enum:
                return self._member(value, where)
            return value
        if kind == "csv" and _is_strings(value):
            return ",".join(value)
        if kind == "strings" and (isinstance(value, str) or _is_strings(value)):
            items = split(value)
            return [self._member(item, where) for item in items] if self.enum else items
        if kind == "integer" and not isinstance(value, bool):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, int):
                return self._in_range(value, where)
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        if kind == "number" and is_number and math.isfinite(value):
            return self._in_range(float(value), where)
        if kind == "boolean" and isinstance(value, bool):
            return value
        if kind == "id" and not isinstance(value, bool) and isinstance(value, str | int):
            if isinstance(value, str) and not value.strip():
                raise InvalidInput(f"{where}: argument {self.name!r} must not be empty")
            return value
        if kind == "object" and isinstance(value, dict):
            return value
        if kind in ("objects", "array") and isinstance(value, list):
            return value
        expected = _EXPECTED.get(kind, f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}")
        raise InvalidInput(
            f"{where}: argument {self.name!r} must be {expected}, got {json_type(value)}"
        )

    def _member(self, value: str, where: str) -> str:
        folded = value.strip().lower()
        if folded in self.enum or folded in self.accept:
            return folded
        raise InvalidInput(f"{where}: {self.name} {value!r} is not one of: {', '.join(self.enum)}")

    def _in_range(self, value: float, where: str) -> Any:
        if self.minimum is not None and value < self.minimum:
            raise InvalidInput(
                f"{where}: {self.name} must be at least {_num(self.minimum)}, got {_num(value)}"
            )
        if self.maximum is not None and value > self.maximum:
            if self.clamp:
                return type(value)(self.maximum)
            raise InvalidInput(
                f"{where}: {self.name} must be at most {_num(self.maximum)}, got {_num(value)}"
            )
        return value


def _num(value: float) -> str:
    """Write a number as a person would: 5, not 5.0."""
    return str(int(value)) if float(value).is_integer() else str(value)
