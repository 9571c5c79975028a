"""The CLI's small courtesies: placeholders, hints, plurals, exit codes, pipes, init, import."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import typer
from typer.testing import CliRunner

import engram
from engram import errors
from engram.__main__ import app

runner = CliRunner()
ENGRAM = Path(engram.__file__).resolve().parent


def _commands(group: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(getattr(group, "commands", {}).items()):
        yield (*path, name)
        yield from _commands(command, (*path, name))


def test_every_help_names_values_by_placeholders() -> None:
    """No `<list[str]>`, `<int range>`, `<str>` and no `{ID}` in any command's --help."""
    paths = list(_commands(typer.main.get_command(app)))
    assert ("session", "start") in paths and ("recall",) in paths
    for path in [(), *paths]:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        text = result.stdout
        assert not re.search(r"<[a-z][^>]*>", text), (path, text)
        assert not re.search(r"\{[\w.-]+(\.\.\.)?\}", text), (path, text)
    recall = runner.invoke(app, ["recall", "--help"]).stdout
    assert "[WORDS]" in recall and "--file FILE " in recall and "--limit N " in recall
    get = runner.invoke(app, ["get", "--help"]).stdout
    assert "get [OPTIONS] ID" in get and re.search(r"^  ID  ", get, re.MULTILINE)
    remember = runner.invoke(app, ["remember", "--help"]).stdout
    assert "TITLE [CONTENT]" in remember and "--files FILES " in remember


def _declared_hints() -> list[str]:
    """Every hint engram declares: the error tree's defaults and each `hint=` text in engram/."""
    found: list[str] = []
    stack: list[type] = [errors.EngramError]
    while stack:
        cls = stack.pop()
        found.append(cls.hint)
        stack.extend(cls.__subclasses__())
    for source in ENGRAM.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            values: list[ast.expr] = []
            if isinstance(node, ast.keyword) and node.arg == "hint":
                values.append(node.value)
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and "hint" in t.id.lower() for t in node.targets
            ):
                values.append(node.value)
            for value in values:
                found.extend(
                    part.value
                    for part in ast.walk(value)
                    if isinstance(part, ast.Constant) and isinstance(part.value, str)
                )
    return found


def test_no_hint_says_command() -> None:
    hints = _declared_hints()
    assert len(hints) > 30 and any("engram doctor --fix" in hint for hint in hints)
    assert [hint for hint in hints if re.search(r"\bCOMMAND\b", hint)] == []


def test_a_wrong_input_points_at_its_own_help(tmp_path: Path) -> None:
    runner.invoke(app, ["-C", str(tmp_path), "init", "--project", "shop"])
    result = runner.invoke(app, ["-C", str(tmp_path), "remember", "t", "c", "--scope", "nowhere"])
    assert result.exit_code == 1
    assert "hint: see `engram remember --help`" in result.stderr
