"""Edit JSON and JSONC files (comments, trailing commas) by splicing text, byte for byte.

Agents keep their settings in JSON files that people edit by hand: VS Code's and Cursor's are
JSONC, Claude Code's ``~/.claude.json`` is large and rewritten by the agent itself. A parse and
dump would drop comments, reorder keys and reformat numbers, so this module parses the text into
nodes that remember their offsets and changes only the bytes of the value it sets: every other
byte of the file, comments and formatting included, stays as it was.

It owns the JSONC syntax (``//`` and ``/* */`` comments, trailing commas, a UTF-8 byte order
mark) and the layout of what it inserts (the file's own indentation and line endings). It knows
nothing about agents and never reads or writes files: callers pass text and get text back.
Errors carry the 1-based line and column of the offending character.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.model import MAX_DOCUMENT_DEPTH

__all__ = ["Document", "JsoncError", "Node", "dumps"]

MAX_DEPTH = MAX_DOCUMENT_DEPTH  # nesting the recursive parser accepts (engram.model)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}

PathPart = str | int


class JsoncError(ValueError):
    """The text is not valid JSON or JSONC; ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, text: str, offset: int) -> None:
        self.line, self.column = position(text, offset)
        self.reason = message
        super().__init__(f"line {self.line}, column {self.column}: {message}")


def position(text: str, offset: int) -> tuple[int, int]:
    """Return the 1-based (line, column) of a character offset."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


@dataclass
class Node:
    """One value in the text: its span, its Python value and, for containers, its children."""

    kind: str  # "object", "array" or "scalar"
    start: int
    end: int  # one past the closing bracket or the last character
    value: Any
    keys: list[str] = field(default_factory=list)  # object member names, in order
    key_starts: list[int] = field(default_factory=list)  # offsets of the opening quote
    children: list[Node] = field(default_factory=list)  # member values or array items
    commas: list[int | None] = field(default_factory=list)  # comma after each child

    def child(self, part: PathPart) -> Node | None:
        """Return the member (last one wins, as in JSON) or item named by ``part``."""
        if self.kind == "object" and isinstance(part, str):
            for index in range(len(self.keys) - 1, -1, -1):
                if self.keys[index] == part:
                    return self.children[index]
        if self.kind == "array" and isinstance(part, int) and 0 <= part < len(self.children):
            return self.children[part]
        return None


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, message: str, offset: int) -> JsoncError:
        return JsoncError(message, self.text, offset)

    def skip(self, i: int) -> int:
        """Return the offset of the next character that is not whitespace or a comment."""
        text = self.text
        while i < len(text):
            char = text[i]
            if char in " \t\r\n" or (char == "\ufeff" and i == 0):
                i += 1
            elif text.startswith("//", i):
                newline = text.find("\n", i)
                i = len(text) if newline < 0 else newline + 1
            elif text.startswith("/*", i):
                close = text.find("*/", i + 2)
                if close < 0:
                    raise self.fail("unterminated /* comment", i)
                i = close + 2
            else:
                break
        return i

    def document(self) -> Node | None:
        i = self.skip(0)
        if i >= len(self.text):
            return None
        node = self.value(i, 0)
        rest = self.skip(node.end)
        if rest < len(self.text):
            raise self.fail("unexpected text after the top-level value", rest)
        return node

    def value(self, i: int, depth: int) -> Node:
        text = self.text
        if i >= len(text):
            raise self.fail("unexpected end of file, expected a value", i)
        if depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels", i)
        char = text[i]
        if char == "{":
            return self.container(i, depth, "object")
        if char == "[":
            return self.container(i, depth, "array")
        if char == '"':
            end, value = self.string(i)
            return Node("scalar", i, end, value)
        match = _NUMBER.match(text, i)
        if match and match.end() > i:
            end = match.end()
            if end < len(text) and (text[end].isalnum() or text[end] in "._"):
                raise self.fail(f"invalid number {text[i : end + 1]!r}", i)
            return Node("scalar", i, end, json.loads(match.group()))
        for word, literal in _LITERALS.items():
            if text.startswith(word, i):
                end = i + len(word)
                if end < len(text) and (text[end].isalnum() or text[end] == "_"):
                    break
                return Node("scalar", i, end, literal)
        token = re.match(r"[^\s,:{}\[\]\"/]+", text[i:])
        shown = token.group() if token else char
        raise self.fail(f"unexpected {shown!r}, expected a value", i)

    def string(self, i: int) -> tuple[int, str]:
        text = self.text
        j = i + 1
        while j < len(text):
            char = text[j]
            if char == '"':
                try:
                    return j + 1, str(json.loads(text[i : j + 1]))
                except ValueError as exc:
                    raise self.fail(f"invalid escape in string: {exc.args[0]}", i) from exc
            if char == "\\":
                j += 2
                continue
            if char == "\n" or ord(char) < 0x20:
                raise self.fail("unterminated string (control character or line break)", j)
            j += 1
        raise self.fail("unterminated string", i)

    def container(self, start: int, depth: int, kind: str) -> Node:
        text = self.text
        close_char = "}" if kind == "object" else "]"
        node = Node(kind, start, start, {} if kind == "object" else [])
        i = self.skip(start + 1)
        while True:
            if i >= len(text):
                raise self.fail(f"unexpected end of file, expected {close_char!r}", i)
            if text[i] == close_char:
                node.end = i + 1
                return node
            if node.children and node.commas[-1] is None:
                raise self.fail(f"expected ',' or {close_char!r}", i)
            if kind == "object":
                if text[i] != '"':
                    raise self.fail("expected a property name in double quotes or '}'", i)
                key_end, key = self.string(i)
                colon = self.skip(key_end)
                if colon >= len(text) or text[colon] != ":":
                    raise self.fail(f"expected ':' after property name {key!r}", colon)
                child = self.value(self.skip(colon + 1), depth + 1)
                node.keys.append(key)
                node.key_starts.append(i)
                node.value[key] = child.value
            else:
                child = self.value(i, depth + 1)
                node.value.append(child.value)
            node.children.append(child)
            i = self.skip(child.end)
            if i < len(text) and text[i] == ",":
                node.commas.append(i)
                i = self.skip(i + 1)
            else:
                node.commas.append(None)


def parse(text: str) -> Node | None:
    """Parse JSONC text into nodes; ``None`` for a text with no value (empty or comments)."""
    return _Parser(text).document()


def dumps(value: Any, unit: str = "  ", indent: str = "", newline: str = "\n") -> str:
    """Format a value as the file would: objects one member a line, flat lists on one line."""
    if isinstance(value, dict) and value:
        inner = indent + unit
        members = [
            f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {dumps(v, unit, inner, newline)}"
            for k, v in value.items()
        ]
        return "{" + newline + ("," + newline).join(members) + newline + indent + "}"
    if isinstance(value, list) and any(isinstance(x, dict | list) and x for x in value):
        inner = indent + unit
        items = [inner + dumps(x, unit, inner, newline) for x in value]
        return "[" + newline + ("," + newline).join(items) + newline + indent + "]"
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


class Document:
    """A JSONC text and the edits made to it; ``text`` is the result."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.root = parse(text)
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.unit = _indent_unit(text)

    # -- reading ---------------------------------------------------------------------------

    def node(self, path: Sequence[PathPart]) -> Node | None:
        """Return the node at ``path`` (keys and indexes), or None if any step is missing."""
        node = self.root
        for part in path:
            if node is None:
                return None
            node = node.child(part)
        return node

    def get(self, path: Sequence[PathPart], default: Any = None) -> Any:
        """Return the Python value at ``path``, or ``default``."""
        node = self.node(path)
        return default if node is None else node.value

    # -- editing ---------------------------------------------------------------------------

    def set(self, path: Sequence[str], value: Any) -> bool:
        """Set the member at ``path``, creating missing objects; return whether text changed.

        Raises JsoncError if a step of the path exists but is not an object.
        """
        if not path:
            raise ValueError("set needs a non-empty path")
        if self.root is None:
            nested: Any = value
            for part in reversed(path):
                nested = {part: nested}
            self._append_root(nested)
            return True
        node = self.root
        for depth, part in enumerate(path):
            if node.kind != "object":
                where = ".".join(path[:depth]) or "the top level"
                raise JsoncError(
                    f"{where} must be an object to hold {part!r}", self.text, node.start
                )
            child = node.child(part)
            if child is None:
                nested = value
                for later in reversed(path[depth + 1 :]):
                    nested = {later: nested}
                self._insert_member(node, part, nested)
                return True
            node = child
        if node.value == value and type(node.value) is type(value):
            return False
        self._replace(node, value)
        return True

    def replace(self, path: Sequence[PathPart], value: Any) -> bool:
        """Replace the existing value at ``path``; return whether the text changed."""
        node = self.node(path)
        if node is None:
            raise KeyError(path)
        if node.value == value:
            return False
        self._replace(node, value)
        return True

    def append(self, path: Sequence[str], value: Any) -> None:
        """Append ``value`` to the array at ``path``, creating the array if it is missing."""
        node = self.node(path)
        if node is None:
            self.set(path, [value])
            return
        if node.kind != "array":
            raise JsoncError(f"{'.'.join(path)} must be an array", self.text, node.start)
        self._insert_item(node, value)

    # -- splicing --------------------------------------------------------------------------

    def _splice(self, edits: list[tuple[int, int, str]]) -> None:
        text = self.text
        # Last edit first, so earlier offsets stay valid; at one offset, the later-listed edit
        # goes in first and ends up after the earlier-listed one.
        ordered = sorted(enumerate(edits), key=lambda e: (e[1][0], e[0]), reverse=True)
        for _, (start, end, new) in ordered:
            text = text[:start] + new + text[end:]
        self.text = text
        self.root = parse(text)

    def _line_start(self, offset: int) -> int:
        return self.text.rfind("\n", 0, offset) + 1

    def _indent_of(self, offset: int) -> str:
        start = self._line_start(offset)
        line = self.text[start:offset]
        return line[: len(line) - len(line.lstrip(" \t"))]

    def _alone_on_line(self, offset: int) -> bool:
        return self.text[self._line_start(offset) : offset].strip(" \t\ufeff") == ""

    def _same_line_end(self, offset: int) -> tuple[int, bool]:
        """Return where the line after ``offset`` ends, past spaces and same-line comments.

        The flag is False when something else (a bracket, a multi-line comment) comes first; the
        offset is then where that begins.
        """
        text = self.text
        i = offset
        while i < len(text):
            if text[i] in " \t":
                i += 1
            elif text.startswith("//", i):
                newline = text.find("\n", i)
                end = len(text) if newline < 0 else newline
                return (end - 1 if end > i and text[end - 1] == "\r" else end), True
            elif text.startswith("/*", i):
                close = text.find("*/", i + 2)
                if close < 0 or "\n" in text[i:close]:
                    return i, False
                i = close + 2
            elif text[i] == "\r" or text[i] == "\n":
                return i, True
            else:
                return i, False
        return i, True

    def _insert_after_last(self, parent: Node, item_text_for: Any) -> None:
        """Insert a new child after the last one, in the layout the container already has."""
        nl = self.newline
        last = parent.children[-1]
        first_offset = parent.key_starts[-1] if parent.kind == "object" else last.start
        comma = parent.commas[-1]
        if self._alone_on_line(first_offset):
            indent = self._indent_of(first_offset)
            text = item_text_for(indent)
            edits: list[tuple[int, int, str]] = []
            if comma is None:
                edits.append((last.end, last.end, ","))
            at, clean = self._same_line_end(comma + 1 if comma is not None else last.end)
            tail = "," if comma is not None else ""
            if clean:
                edits.append((at, at, nl + indent + text + tail))
            elif at == parent.end - 1:  # the closing bracket shares the last line
                closing = self._indent_of(parent.start) if self._alone_on_line(parent.start) else ""
                edits.append((at, at, nl + indent + text + tail + nl + closing))
            else:
                edits.append((at, at, nl + indent + text + tail + nl + indent))
            self._splice(edits)
            return
        compact = item_text_for(None)
        if comma is None:
            self._splice([(last.end, last.end, ", " + compact)])
        else:
            self._splice([(comma + 1, comma + 1, " " + compact + ",")])

    def _insert_into_empty(self, parent: Node, item_text_for: Any) -> None:
        nl = self.newline
        outer = self._indent_of(parent.start)
        inner = outer + self.unit
        text = item_text_for(inner)
        close = parent.end - 1
        between = self.text[parent.start + 1 : close]
        if between.strip() == "":
            self._splice([(parent.start + 1, close, nl + inner + text + nl + outer)])
        elif self._alone_on_line(close):
            at = self._line_start(close)
            self._splice([(at, at, inner + text + nl)])
        else:
            self._splice([(close, close, nl + inner + text + nl + outer)])

    def _insert_member(self, parent: Node, key: str, value: Any) -> None:
        name = json.dumps(key, ensure_ascii=False)

        def text_for(indent: str | None) -> str:
            if indent is None:
                return f"{name}: {json.dumps(value, ensure_ascii=False, separators=(', ', ': '))}"
            return f"{name}: {dumps(value, self.unit, indent, self.newline)}"

        if parent.children:
            self._insert_after_last(parent, text_for)
        else:
            self._insert_into_empty(parent, text_for)

    def _insert_item(self, parent: Node, value: Any) -> None:
        def text_for(indent: str | None) -> str:
            if indent is None:
                return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
            return dumps(value, self.unit, indent, self.newline)

        if parent.children:
            self._insert_after_last(parent, text_for)
        else:
            self._insert_into_empty(parent, text_for)

    def _replace(self, node: Node, value: Any) -> None:
        if "\n" in self.text[node.start : node.end] or node.kind == "scalar":
            text = dumps(value, self.unit, self._indent_of(node.start), self.newline)
        else:
            text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        self._splice([(node.start, node.end, text)])

    def _append_root(self, value: Any) -> None:
        prefix = self.text
        if prefix and not prefix.endswith("\n"):
            prefix += self.newline
        self.text = prefix + dumps(value, self.unit, "", self.newline) + self.newline
        self.root = parse(self.text)


def _indent_unit(text: str) -> str:
    """Guess the file's indentation step: a tab, or the smallest run of leading spaces."""
    widths = []
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if not stripped or len(stripped) == len(line):
            continue
        lead = line[: len(line) - len(stripped)]
        if lead.startswith("\t"):
            return "\t"
        if stripped[0] in '"}]{[':
            widths.append(len(lead))
    return " " * min(widths) if widths else "  "
