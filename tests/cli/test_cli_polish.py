"""The CLI's small courtesies: placeholders, hints, plurals, exit codes, pipes, init, import."""

from __future__ import annotations

import ast
import json
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
from engram import errors
from engram.__main__ import app
from engram.daemon import protocol as rpc
from engram.plural import counted
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


def test_counted_makes_the_noun_agree() -> None:
    assert [counted(n, "finding") for n in (0, 1, 2)] == ["0 findings", "1 finding", "2 findings"]
    assert counted(1, "memory") == "1 memory" and counted(3, "memory") == "3 memories"
    assert counted(2, "match") == "2 matches" and counted(2, "key") == "2 keys"
    assert counted(2, "memory version") == "2 memory versions"
    assert counted(2, "changed memory", "changed memories") == "2 changed memories"


def test_the_counts_users_see_most_are_in_the_singular_for_one(tmp_path: Path) -> None:
    root = _git_repo(tmp_path / "repo")
    assert run_cli("init", "--project", "shop", cwd=root).returncode == 0
    saved = run_cli("remember", "Never round cents", "-k", "pitfall", "-f", "cart.py", cwd=root)
    assert saved.returncode == 0, saved.stderr

    def out(*args: str) -> str:
        result = run_cli(*args, cwd=root)
        assert result.returncode == 0, (args, result.stderr)
        return result.stdout.decode()

    assert ": 1 memory, canonical," in out("doctor")
    assert out("check", "-f", "cart.py").splitlines()[0].endswith(": 1 finding.")
    assert "  1 memory, 0 tombstones, 0 links," in out("stats")
    assert "1 changed memory to export" in out("sync", "--status")
    synced = out("sync")
    assert "imported 0 chunks (" in synced and "exported 1 memory as chunk" in synced
    assert "(1 memory version)" in out("sync", "--status")
    other = run_cli("remember", "Prices are in cents", "-f", "cart.py", cwd=root)
    assert other.returncode == 0
    assert out("check", "-f", "cart.py").splitlines()[0].endswith(": 2 findings.")


def _skipped_lines(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode().splitlines() if line.startswith("skipped ")]


def test_an_import_with_many_bad_lines_counts_them_and_names_the_first(tmp_path: Path) -> None:
    root = _git_repo(tmp_path / "repo")
    assert run_cli("init", "--project", "shop", cwd=root).returncode == 0
    rows = []
    for number in range(1, 31):
        if number % 6 == 1:  # lines 1, 7, 13, 19, 25: good
            rows.append(json.dumps({"title": f"good {number}", "content": f"body {number}"}))
        elif number % 2:
            rows.append(json.dumps({"kind": "note"}))  # neither title nor content
        else:
            rows.append("{not json")
    source = tmp_path / "notes.jsonl"
    source.write_text("\n".join(rows) + "\n", encoding="utf-8")
    result = run_cli("import", str(source), cwd=root)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip().endswith("added 5, updated 0, unchanged 0, skipped 25")
    lines = _skipped_lines(result.stderr)
    assert lines[0] == "skipped 25 items; the first 10:"
    named = [int(re.findall(r"notes\.jsonl:(\d+): ", line)[0]) for line in lines[1:]]
    assert named == [2, 3, 4, 5, 6, 8, 9, 10, 11, 12]  # the real lines, in order
    assert "skipped notes.jsonl:3: missing title and content" in [
        line.replace(str(tmp_path) + "/", "") for line in lines
    ]
    assert "… and 15 more (--json lists every one)" in result.stderr.decode()
    listed = json.loads(run_cli("import", str(source), "--json", cwd=root).stdout)
    assert listed["skipped"] == 25 and len(listed["errors"]) == 25 and listed["unchanged"] == 5


def test_a_one_line_json_document_names_bad_records_by_index(tmp_path: Path) -> None:
    root = _git_repo(tmp_path / "repo")
    assert run_cli("init", "--project", "shop", cwd=root).returncode == 0
    rows: list[object] = [{"title": "first", "content": "kept"}]
    rows += [{"kind": "note"}] * 12 + [{"title": "last", "content": "kept too"}]
    array = tmp_path / "rows.json"
    array.write_text(json.dumps(rows), encoding="utf-8")  # one line
    result = run_cli("import", str(array), cwd=root)
    assert result.returncode == 0, result.stderr
    lines = _skipped_lines(result.stderr)
    assert lines[0] == "skipped 12 items; the first 10:"
    assert [re.findall(r"records\[(\d+)\]", line)[0] for line in lines[1:]] == [
        str(n) for n in range(1, 11)
    ]
    assert not any(re.search(r"rows\.json:\d", line) for line in lines)
    # engram's own export, on one line, with bad records: by index in memories, not a line.
    exported = run_cli("export", cwd=root)
    document = json.loads(exported.stdout)
    good = document["memories"][0]
    document["memories"] = [7, good, {**good, "id": ""}, {"title": "no id"}]
    broken = tmp_path / "export.json"
    broken.write_text(json.dumps(document), encoding="utf-8")
    again = run_cli("import", str(broken), cwd=root)
    assert again.returncode == 0, again.stderr
    assert again.stdout.decode().strip().endswith("skipped 3")
    named = [line.replace(str(tmp_path) + "/", "") for line in _skipped_lines(again.stderr)]
    assert [line.split(": ")[1] for line in named] == ["memories[0]", "memories[2]", "memories[3]"]
    assert all(line.startswith("skipped export.json: memories[") for line in named)
    assert not any(re.search(r"export\.json:\d", line) for line in named)


def test_init_says_what_it_changed_in_git_and_warns_outside_git(tmp_path: Path) -> None:
    root = _git_repo(tmp_path / "repo")
    first = run_cli("init", "--project", "shop", cwd=root)
    assert first.returncode == 0, first.stderr
    out = first.stdout.decode().splitlines()
    attributes = [line for line in out if ".gitattributes" in line]
    assert attributes == [
        f"added 2 attribute lines to {root.resolve() / '.gitattributes'}: "
        ".engram/memories.jsonl merge=engram diff=engram; .engram/manifest.json merge=engram"
    ]
    config = [line for line in out if str(Path(".git") / "config") in line]
    assert [line.split(" [")[0] for line in config] == [
        "registered the git merge driver",
        "registered the git diff driver",
    ]
    text = (root / ".git" / "config").read_text(encoding="utf-8")
    assert '[merge "engram"]' in text and '[diff "engram"]' in text
    assert b"warning" not in first.stderr
    # Run again: nothing changes, so nothing is said about git's files.
    again = run_cli("init", cwd=root)
    assert again.returncode == 0 and b".gitattributes" not in again.stdout
    assert b".git/config" not in again.stdout
    # A hand-removed driver is put back, and said so.
    (root / ".git" / "config").write_text(text.split('[merge "engram"]')[0], encoding="utf-8")
    repaired = run_cli("init", cwd=root).stdout.decode()
    assert "registered the git merge driver" in repaired and ".gitattributes" not in repaired
    data = json.loads(run_cli("init", "--json", cwd=root).stdout)
    assert data["git"]["repo"] and data["git"]["driver"] and data["git"]["installed"] == []

    outside = tmp_path / "plain"
    outside.mkdir()
    alone = run_cli("init", "--project", "solo", cwd=outside)  # tmp_path is in no repo
    assert alone.returncode == 0
    err = alone.stderr.decode()
    assert f"warning: {outside.resolve()} is not inside a git repository" in err
    assert "hint: run `git init` here, then `engram init` again" in err
    assert not (outside / ".gitattributes").exists()
