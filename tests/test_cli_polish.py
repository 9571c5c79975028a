"""The CLI's small courtesies: placeholders, hints, plurals, exit codes, pipes, init, import."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import typer
from typer.testing import CliRunner

import engram
from engram import errors, rpc
from engram.__main__ import app
from tests.conftest import run_cli
from tests.helpers.processes import wait_for

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


def _git_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_log_of_an_unknown_id_is_an_error(tmp_path: Path) -> None:
    root = _git_repo(tmp_path / "repo")
    assert run_cli("init", "--project", "shop", cwd=root).returncode == 0
    result = run_cli("log", "zzzzzz", cwd=root)
    assert result.returncode == 1
    assert "error: no memory with id zzzzzz" in result.stderr.decode()
    saved = run_cli("remember", "kept title", "kept body", cwd=root)
    assert saved.returncode == 0
    known = run_cli("log", saved.stdout.decode().split()[-1][:8], cwd=root)
    assert known.returncode == 0 and "no committed version" in known.stdout.decode()


def test_check_without_files_is_a_usage_error(tmp_path: Path) -> None:
    root = _git_repo(tmp_path / "repo")
    assert run_cli("init", "--project", "shop", cwd=root).returncode == 0
    for args in (["check"], ["check", "--budget", "100"], ["check", "--json"]):
        result = run_cli(*args, cwd=root)
        assert result.returncode == 2, args
        err = result.stderr.decode()
        assert err.startswith("Usage: ") and "check [OPTIONS]" in err, err
        assert "--files" in err and "--text" in err and "Traceback" not in err
        assert result.stdout == b""
    assert run_cli("check", "--text", "change the cart", cwd=root).returncode == 0
    assert run_cli("check", "src/cart.py", cwd=root).returncode != 0  # not an argument
    assert run_cli("check", "-f", "src/cart.py", cwd=root).returncode == 0


def test_stats_in_a_pipe_keeps_each_line_whole(tmp_path: Path) -> None:
    root = _git_repo(tmp_path / "a-folder-with-a-rather-long-name-for-the-store-path-to-pass-80")
    assert run_cli("init", "--project", "shop", cwd=root).returncode == 0
    tags = ",".join(f"a-fairly-long-topic-tag-{n}" for n in range(8))
    assert run_cli("remember", "t", "c", "--tags", tags, cwd=root).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    for columns in (None, "80"):
        extra = {"COLUMNS": columns} if columns else {}
        result = subprocess.run(
            [sys.executable, "-m", "engram", "stats"],
            cwd=root,
            env={**env, **extra},
            capture_output=True,  # stdout a pipe, as `engram stats | less` has it
            check=False,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        lines = result.stdout.decode().splitlines()
        tagline = [line for line in lines if line.startswith("  top tags: ")]
        assert len(tagline) == 1 and all(f"tag-{n} (1)" in tagline[0] for n in range(8))
        store = [line for line in lines if line.startswith("project store ")]
        assert len(store) == 1 and store[0].endswith(")") and str(root.name) in store[0]
        assert "\x1b[" not in result.stdout.decode()


def test_check_without_files_through_a_daemon_is_the_same_usage_error(tmp_path: Path) -> None:
    root = _git_repo(tmp_path / "repo")
    assert run_cli("init", "--project", "shop", cwd=root).returncode == 0
    daemon = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(root), "daemon", "--idle", "60"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        socket = rpc.socket_path(root / ".engram")
        assert wait_for(lambda: rpc.connectable(socket) or daemon.poll() is not None)
        alone = run_cli("check", cwd=root, env={"ENGRAM_DAEMON": "off"})
        forwarded = run_cli("check", cwd=root, env={"ENGRAM_DAEMON": "on"})
        assert alone.returncode == forwarded.returncode == 2
        assert alone.stderr == forwarded.stderr and b"--files" in alone.stderr
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
