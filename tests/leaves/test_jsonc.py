"""The JSONC splicing editor: parse errors with line and column, edits that touch nothing else."""

from __future__ import annotations

import difflib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.jsonc import Document, JsoncError, dumps, parse

ENTRY = {"command": "engram", "args": ["mcp"]}
FRESH = (
    '{\n  "s": {\n    "engram": {\n      "command": "engram",\n      "args": ["mcp"]\n'
    "    }\n  }\n}\n"
)


def only_insertions(old: str, new: str) -> list[str]:
    """Return the inserted chunks, failing if any byte of ``old`` was changed or removed."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    inserted = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        assert tag in ("equal", "insert"), f"{tag} {old[i1:i2]!r} -> {new[j1:j2]!r}"
        if tag == "insert":
            inserted.append(new[j1:j2])
    return inserted


@pytest.mark.parametrize(
    ("text", "line", "column", "reason"),
    [
        ('{"a": 1 "b": 2}', 1, 9, "expected ',' or '}'"),
        ('{\n  "a": [1, 2\n}', 3, 1, "expected ',' or ']'"),
        ('{\n  "a": tru\n}', 2, 8, "unexpected 'tru'"),
        ('{\n  "a": "x\n"}', 2, 10, "unterminated string"),
        ('{"a": 1}}', 1, 9, "unexpected text after"),
        ("{\n/* never closed", 2, 1, "unterminated /* comment"),
        ('{"a": 01}', 1, 7, "invalid number"),
        ("{'a': 1}", 1, 2, "property name in double quotes"),
        ('{"a" 1}', 1, 6, "expected ':'"),
        ('{"a": "\\q"}', 1, 7, "invalid escape"),
        ('{"a": ', 1, 7, "unexpected end of file"),
        ("{,}", 1, 2, "property name"),
        ("[1,,2]", 1, 4, "expected a value"),
    ],
)
def test_errors_name_line_and_column(text: str, line: int, column: int, reason: str) -> None:
    with pytest.raises(JsoncError) as caught:
        parse(text)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert reason in caught.value.reason


def test_jsonc_syntax_parses() -> None:
    text = '\ufeff// head\n{\n  /* a */ "a": [1, 2,], // tail\n  "b": {"c": null,},\n}\n'
    root = parse(text)
    assert root is not None and root.value == {"a": [1, 2], "b": {"c": None}}
    assert parse("  // nothing\n/* at all */\n") is None
    assert parse('{"a": 1, "a": 2}').value == {"a": 2}  # type: ignore[union-attr]
    assert parse('"x\\u00e9"').value == "xé"  # type: ignore[union-attr]
    with pytest.raises(JsoncError, match="nested deeper"):
        parse("[" * 300 + "]" * 300)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "",
            FRESH,
        ),
        (
            "{}\n",
            FRESH,
        ),
        (
            '{\n    "a": 1, // one\n    /* two */\n    "b": [1,],\n}\n',
            '{\n    "a": 1, // one\n    /* two */\n    "b": [1,],\n    "s": {\n'
            '        "engram": {\n            "command": "engram",\n'
            '            "args": ["mcp"]\n        }\n    },\n}\n',
        ),
        (
            '{\n  "s": {\n    "x": {"command": "x"} // theirs\n  }\n}\n',
            '{\n  "s": {\n    "x": {"command": "x"}, // theirs\n    "engram": {\n'
            '      "command": "engram",\n      "args": ["mcp"]\n    }\n  }\n}\n',
        ),
        (
            '{\n  "s": {\n    // empty for now\n  }\n}',
            '{\n  "s": {\n    // empty for now\n    "engram": {\n      "command": "engram",\n'
            '      "args": ["mcp"]\n    }\n  }\n}',
        ),
        ('{"a": 1}', '{"a": 1, "s": {"engram": {"command": "engram", "args": ["mcp"]}}}'),
        ('{"a": 1,}', '{"a": 1, "s": {"engram": {"command": "engram", "args": ["mcp"]}},}'),
        (
            '{\r\n\t"a": 1\r\n}\r\n',
            '{\r\n\t"a": 1,\r\n\t"s": {\r\n\t\t"engram": {\r\n\t\t\t"command": "engram",\r\n'
            '\t\t\t"args": ["mcp"]\r\n\t\t}\r\n\t}\r\n}\r\n',
        ),
        (
            '{\n  "a": 1}',
            '{\n  "a": 1,\n  "s": {\n    "engram": {\n      "command": "engram",\n'
            '      "args": ["mcp"]\n    }\n  }\n}',
        ),
        (
            "// only a comment\n",
            '// only a comment\n{\n  "s": {\n    "engram": {\n      "command": "engram",\n'
            '      "args": ["mcp"]\n    }\n  }\n}\n',
        ),
    ],
)
def test_set_inserts_in_the_files_own_layout(before: str, after: str) -> None:
    doc = Document(before)
    assert doc.set(["s", "engram"], ENTRY)
    assert doc.text == after
    only_insertions(before, after)
    again = Document(after)
    assert not again.set(["s", "engram"], ENTRY)
    assert again.text == after


def test_set_replaces_only_the_value() -> None:
    before = (
        '{\n  "s": {\n    "engram": {"command": "old", "env": {"A": "1"}}, // mine\n'
        '    "x": 1\n  }\n}\n'
    )
    doc = Document(before)
    assert doc.set(["s", "engram", "command"], "engram")
    assert doc.set(["s", "engram", "args"], ["mcp"])
    assert doc.text == (
        '{\n  "s": {\n    "engram": {"command": "engram", "env": {"A": "1"}, "args": ["mcp"]},'
        ' // mine\n    "x": 1\n  }\n}\n'
    )
    assert doc.replace(["s", "x"], 2) and doc.get(["s", "x"]) == 2
    assert not doc.replace(["s", "x"], 2)


def test_append_to_arrays() -> None:
    group = {"matcher": "Edit", "hooks": [{"type": "command", "command": "c"}]}
    before = '{\n  "h": [\n    {"matcher": "Bash"}, // keep\n  ],\n}\n'
    doc = Document(before)
    doc.append(["h"], group)
    assert doc.get(["h"]) == [{"matcher": "Bash"}, group]
    assert "// keep" in doc.text and doc.text.rstrip().endswith("],\n}")
    only_insertions(before, doc.text)
    doc = Document('{"h": []}')
    doc.append(["h"], 1)
    assert doc.text == '{"h": [\n  1\n]}'
    doc = Document('{"h": [1]}')
    doc.append(["h"], 2)
    assert doc.text == '{"h": [1, 2]}'
    doc = Document("{}")
    doc.append(["h", "k"], 1)
    assert doc.get([]) == {"h": {"k": [1]}}


def test_wrong_shapes_are_errors_not_overwrites() -> None:
    with pytest.raises(JsoncError, match="s must be an object") as caught:
        Document('{\n  "s": [1]\n}').set(["s", "engram"], ENTRY)
    assert (caught.value.line, caught.value.column) == (2, 8)
    with pytest.raises(JsoncError, match="top level must be an object"):
        Document("[1]").set(["s"], 1)
    with pytest.raises(JsoncError, match="must be an array"):
        Document('{"h": {}}').append(["h"], 1)


def test_dumps_layout() -> None:
    assert dumps({"a": [1, 2], "b": {}}) == '{\n  "a": [1, 2],\n  "b": {}\n}'
    assert dumps([{"a": 1}], "\t") == '[\n\t{\n\t\t"a": 1\n\t}\n]'
    assert dumps("é") == '"é"'


# -- properties --------------------------------------------------------------------------------

keys = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=10)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=12,
)


def decorate(value: Any, indent: int, comments: bool, trailing: bool) -> str:
    """Render a value as hand-written JSONC: chosen indentation, comments, trailing commas."""
    text = json.dumps(value, indent=indent or None, ensure_ascii=False)
    if comments:
        text = "// settings\n" + text.replace("{\n", "{ // open\n").replace("[\n", "[ /* o */\n")
    if trailing:
        text = text.replace("\n}", ",\n}", 1)  # a trailing comma after the first member list
    return text + "\n"


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(keys, values, max_size=5),
    st.sampled_from([0, 2, 4]),
    st.booleans(),
    st.booleans(),
    st.sampled_from([["mcpServers", "engram"], ["engram"], ["a", "b", "engram"]]),
)
def test_set_keeps_every_other_byte(
    data: dict[str, Any], indent: int, comments: bool, trailing: bool, path: list[str]
) -> None:
    before = decorate(data, indent, comments, trailing)
    try:
        doc = Document(before)
    except JsoncError:
        return  # the decoration made it invalid (e.g. a comma after an empty object)
    try:
        changed = doc.set(path, ENTRY)
    except JsoncError:
        return  # a step of the path holds a non-object: refused, as it should be
    expected = json.loads(json.dumps(data))
    node = expected
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = ENTRY
    root = parse(doc.text)
    assert root is not None and root.value == expected
    if changed and Document(before).node(path) is None:
        only_insertions(before, doc.text)  # a new member: not one byte of the file changed
    again = Document(doc.text)
    assert not again.set(path, ENTRY)
