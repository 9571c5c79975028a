"""`engram diff` and the git diff driver, on a real history made by the real command line.

The repository is real (tmp_path), every memory is written by `python -m engram` as a user
runs it, a second clone adds a memory and syncs through a bare remote, and `git diff`,
`git log -p` and `git show` are the real git binary, with engram off git's PATH too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engram.sync.gitdiff import split_range, textconv
from engram.sync.gitsetup import check_setup
from tests.conftest import run_cli

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="the git binary is not installed")
MEMORIES = ".engram/memories.jsonl"
IDENTITY = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.org",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.org",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(root: Path, *args: str, path: str | None = None) -> str:
    """Run the real git in root (PATH as given); return its stdout, failing on an error."""
    assert GIT is not None
    env = {**os.environ, **IDENTITY, "GIT_PAGER": "cat", "PAGER": "cat"}
    if path is not None:
        env["PATH"] = path
    done = subprocess.run(
        [GIT, "-c", "color.ui=never", *args],
        cwd=root,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout.decode("utf-8")


def engram(root: Path, *args: str, stdin: bytes | None = None) -> str:
    """Run the real engram in root; return its stdout, failing on a non-zero exit."""
    done = run_cli(*args, cwd=root, stdin=stdin, env=IDENTITY)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout.decode("utf-8")


def saved_id(output: str) -> str:
    return str(json.loads(output)["id"])


def diff_json(root: Path, *args: str) -> dict[str, Any]:
    return dict(json.loads(engram(root, "diff", *args, "--json")))


def summary(found: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(item["change"], item["id"], item["title"]) for item in found["changes"]]


@pytest.fixture
def history(tmp_path: Path) -> dict[str, Any]:
    """A repository whose five commits add, update, forget, take a clone's memory and sync.

    c1: two memories; c2: the first updated (title, tags, content); c3: the second forgotten;
    c4: a second clone's memory, its chunk synced and pushed, pulled here; c5: this clone's
    `engram sync` after the pull.
    """
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    root = tmp_path / "repo"
    git(tmp_path, "clone", "-q", str(remote), str(root))
    engram(root, "init", "--project", "demo")
    first = saved_id(
        engram(
            root,
            "remember",
            "Never divide amounts with /",
            "## What\nAmounts are integer cents.\n## Why\nfloat division lost a cent.",
            "--kind",
            "pitfall",
            "--tags",
            "money",
            "--json",
        )
    )
    second = saved_id(engram(root, "remember", "Old rates are frozen", "history", "--json"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "c1: two memories")
    engram(
        root,
        "update",
        first[:8],
        "--title",
        "Never divide money with /",
        "--tags",
        "money,refunds",
        "--content",
        "## What\nAmounts are integer cents.\n## Why\nfloat division lost a cent in refunds.",
    )
    git(root, "commit", "-q", "-am", "c2: update")
    engram(root, "forget", second[:8])
    git(root, "commit", "-q", "-am", "c3: forget")
    git(root, "push", "-q", "origin", "main")

    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    engram(other, "init")
    third = saved_id(
        engram(other, "remember", "Reports run nightly", "cron at 2am", "--kind", "fact", "--json")
    )
    engram(other, "sync")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "c4: the other clone's memory and its chunk")
    git(other, "push", "-q", "origin", "main")

    git(root, "pull", "-q", "--no-rebase", "origin", "main")
    engram(root, "sync")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "c5: sync")
    return {"root": root, "first": first, "second": second, "third": third}


def test_engram_diff_lists_added_changed_and_forgotten_memories(history: dict[str, Any]) -> None:
    root, first, second, third = (history[k] for k in ("root", "first", "second", "third"))
    assert diff_json(root)["changes"] == []  # the working tree is HEAD's
    assert "no memory changed" in engram(root, "diff")

    found = diff_json(root, "HEAD~4..HEAD~2")  # c1 to c3
    assert (found["old"], found["new"], found["path"]) == ("HEAD~4", "HEAD~2", MEMORIES)
    assert summary(found) == sorted(
        [
            ("changed", first, "Never divide money with /"),
            ("forgotten", second, "Old rates are frozen"),
        ],
        key=lambda item: item[1],
    )
    changed = next(item for item in found["changes"] if item["id"] == first)
    fields = {item["field"]: (item["old"], item["new"]) for item in changed["fields"]}
    assert fields["title"] == ("Never divide amounts with /", "Never divide money with /")
    assert fields["tags"] == (["money"], ["money", "refunds"])
    assert fields["rev"] == (1, 2)
    assert "content" in fields and "kind" not in fields
    gone = next(item for item in found["changes"] if item["id"] == second)
    assert (gone["how"], gone["kind"]) == ("tombstoned", "note")
    assert (found["added"], found["changed"], found["forgotten"]) == (0, 1, 1)

    found = diff_json(root, "HEAD~2..HEAD")  # c3 to c5: the other clone's memory arrived
    assert summary(found) == [("added", third, "Reports run nightly")]
    assert found["changes"][0]["kind"] == "fact"

    # the readable form: a line per memory, a line per field, content as a line diff
    text = engram(root, "diff", "HEAD~4..HEAD~2")
    assert "HEAD~4 → HEAD~2 (.engram/memories.jsonl): 0 added, 1 changed, 1 forgotten" in text
    assert f"~ {first[:8]}  pitfall      Never divide money with /" in text
    assert f"- {second[:8]}  note         Old rates are frozen (tombstoned)" in text
    assert "title: Never divide amounts with / → Never divide money with /" in text
    assert "tags: money → money, refunds" in text
    assert "-float division lost a cent." in text
    assert "+float division lost a cent in refunds." in text

    # A alone: A against the working tree, where an edit is not committed yet
    engram(root, "update", third[:8], "--importance", "5")
    found = diff_json(root)
    assert summary(found) == [("changed", third, "Reports run nightly")]
    fields = {item["field"]: (item["old"], item["new"]) for item in found["changes"][0]["fields"]}
    assert fields["importance"] == (3, 5)
    assert (found["old"], found["new"]) == ("HEAD", "working tree")
    found = diff_json(root, "HEAD~4")
    assert sorted(summary(found)) == sorted(
        [
            ("changed", first, "Never divide money with /"),
            ("forgotten", second, "Old rates are frozen"),
            ("added", third, "Reports run nightly"),
        ]
    )
    main = git(root, "rev-parse", "HEAD~4").strip()
    assert diff_json(root, f"{main[:10]}..main~2")["changed"] == 1  # ids, branches, steps

    # a memory whose line is removed from the file (not tombstoned) is forgotten too
    lines = (root / MEMORIES).read_bytes().splitlines(keepends=True)
    (root / MEMORIES).write_bytes(b"".join(line for line in lines if first.encode() not in line))
    removed = [item for item in diff_json(root)["changes"] if item["id"] == first]
    assert [(item["change"], item["how"]) for item in removed] == [("forgotten", "removed")]


def test_engram_diff_refuses_what_it_cannot_compare(
    history: dict[str, Any], tmp_path: Path
) -> None:
    root = history["root"]
    for spec in ("nope", "HEAD~40", "HEAD..nope", "HEAD^3", "a b"):
        done = run_cli("diff", spec, cwd=root)
        assert done.returncode == 1, spec
        assert b"unknown revision" in done.stderr and b"Traceback" not in done.stderr
    done = run_cli("diff", "HEAD...main", cwd=root)
    assert done.returncode == 1 and b"A...B" in done.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    engram(plain, "init")
    done = run_cli("diff", cwd=plain)
    assert done.returncode == 1 and b"not in a git repository" in done.stderr
    assert split_range(None) == split_range("") == ("HEAD", "working tree")
    assert split_range("a..") == ("a", "HEAD") and split_range("..b") == ("HEAD", "b")


def test_engram_diff_in_a_repository_without_commits(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    engram(root, "init")
    rid = saved_id(engram(root, "remember", "First of all", "x", "--json"))
    assert summary(diff_json(root)) == [("added", rid, "First of all")]


def test_engram_diff_of_the_personal_store(tmp_path: Path) -> None:
    home = Path(os.environ["ENGRAM_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    git(home, "init", "-q")
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    engram(root, "init")
    rid = saved_id(
        engram(root, "remember", "I prefer tabs", "mine", "--scope", "personal", "--json")
    )
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", "mine")
    engram(root, "forget", rid[:8])
    found = diff_json(root, "--personal")
    assert found["path"] == "memories.jsonl"
    assert summary(found) == [("forgotten", rid, "I prefer tabs")]
    assert diff_json(root)["changes"] == []  # the project store did not change


def test_bad_lines_are_named_by_revision_file_and_line(history: dict[str, Any]) -> None:
    root, third = history["root"], history["third"]
    data = (root / MEMORIES).read_bytes()
    (root / MEMORIES).write_bytes(data + b"this is not json\n<<<<<<< HEAD\n")
    git(root, "commit", "-q", "-am", "broken")
    engram_lines = len(data.splitlines())
    done = run_cli("diff", "HEAD~1..HEAD", "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["changes"] == []
    assert [(p["revision"], p["path"], p["line"]) for p in found["problems"]] == [
        ("HEAD", MEMORIES, engram_lines + 1),
        ("HEAD", MEMORIES, engram_lines + 2),
    ]
    stderr = done.stderr.decode()
    assert f"warning: skipped HEAD:{MEMORIES}:{engram_lines + 1}: not JSON" in stderr
    assert f"HEAD:{MEMORIES}:{engram_lines + 2}: git conflict marker" in stderr
    shown = git(root, "show", "HEAD")  # the driver prints the bad lines as they are
    assert "+!!! not a memory: memories.jsonl:" in shown
    assert "+    this is not json" in shown and "+    <<<<<<< HEAD" in shown
    assert f"=== {third[:8]} fact: Reports run nightly" in git(
        root, "show", "--textconv", "HEAD:" + MEMORIES
    )


def test_git_diff_log_and_show_print_memories_as_blocks(history: dict[str, Any]) -> None:
    root, first, second, third = (history[k] for k in ("root", "first", "second", "third"))
    setup = check_setup(root)
    assert setup.diff and setup.diff_attribute and setup.attributes and setup.driver
    assert "diff=engram" in (root / ".gitattributes").read_text()

    shown = git(root, "show", "HEAD~3")  # c2: the update
    assert "-title: Never divide amounts with /" in shown
    assert "+title: Never divide money with /" in shown
    assert "\n-tags: money\n" in shown and "\n+tags: money, refunds\n" in shown
    assert "+    float division lost a cent in refunds." in shown
    assert f"=== {first[:8]} pitfall: Never divide" in shown  # the block's header as context
    assert '{"' not in shown  # no raw JSON line

    shown = git(root, "show", "HEAD~2")  # c3: the forget
    assert f"+=== {second[:8]} forgotten: Old rates are frozen" in shown
    assert "+forgotten: 20" in shown

    log = git(root, "log", "-p", "--", MEMORIES)
    assert log.count("diff --git a/.engram/memories.jsonl") >= 4
    assert f"+=== {third[:8]} fact: Reports run nightly" in log
    assert "+    cron at 2am" in log
    assert f"+id: {first}" in log  # c1 added it

    engram(root, "update", third[:8], "--status", "archived")
    worktree = git(root, "diff")
    assert "\n-status: active\n" in worktree and "\n+status: archived\n" in worktree
    assert git(root, "diff", "--stat").count("memories.jsonl") == 1

    # the textconv output is the blocks in id order, one per memory
    blocks = git(root, "show", "HEAD:" + MEMORIES)  # not converted: git show of a blob is raw
    assert blocks.startswith("{")
    converted = git(root, "show", "--textconv", "HEAD:" + MEMORIES)
    headers = [line.split()[1] for line in converted.splitlines() if line.startswith("=== ")]
    assert headers == sorted([first[:8], second[:8], third[:8]])


def test_the_diff_driver_runs_when_engram_is_not_on_path(history: dict[str, Any]) -> None:
    """As the merge driver: the command init recorded is this installation's engram."""
    root, first = history["root"], history["first"]
    assert GIT is not None
    bare = os.pathsep.join(
        folder for folder in ("/usr/bin", "/bin", str(Path(GIT).parent)) if Path(folder).is_dir()
    )
    assert shutil.which("engram", path=bare) is None
    git(root, "update-ref", "-d", "refs/notes/textconv/engram")  # no cached rendering
    shown = git(root, "show", "HEAD~3", path=bare)
    assert "+title: Never divide money with /" in shown
    log = git(root, "log", "-p", "--", MEMORIES, path=bare)
    assert f"+id: {first}" in log


def test_an_older_setup_gets_the_diff_driver_from_init_or_doctor(tmp_path: Path) -> None:
    root = tmp_path / "old"
    root.mkdir()
    git(root, "init", "-q")
    engram(root, "init")
    (root / ".gitattributes").write_text(
        "*.png binary\n.engram/memories.jsonl merge=engram\n.engram/manifest.json merge=engram\n"
    )
    git(root, "config", "--remove-section", "diff.engram")
    setup = check_setup(root)
    assert setup.attributes and setup.driver and not setup.diff and not setup.diff_attribute
    doctor = run_cli("doctor", "--json", cwd=root)
    findings = [f for f in json.loads(doctor.stdout) if f["check"] == "git"]
    assert [f["severity"] for f in findings] == ["warning"]
    assert "diff driver is not set up" in findings[0]["message"]
    assert "diff=engram in .gitattributes, textconv missing" in findings[0]["message"]
    engram(root, "init")
    assert (root / ".gitattributes").read_text() == (
        "*.png binary\n.engram/memories.jsonl merge=engram diff=engram\n"
        ".engram/manifest.json merge=engram\n"
    )
    assert check_setup(root).diff
    git(root, "config", "--remove-section", "diff.engram")
    fixed = [f for f in json.loads(run_cli("doctor", "--fix", "--json", cwd=root).stdout)]
    assert any(f["check"] == "git" and f["fixed"] for f in fixed)
    assert git(root, "config", "--get", "diff.engram.textconv").strip().endswith(" textconv")
    assert git(root, "config", "--get", "diff.engram.cachetextconv").strip() == "true"
    # a recorded program that is gone is reported, as for the merge driver
    git(root, "config", "diff.engram.textconv", "engram-gone-from-this-machine textconv")
    findings = [f for f in json.loads(run_cli("doctor", "--json", cwd=root).stdout)]
    (gone,) = [f for f in findings if f["check"] == "git"]
    assert "diff driver does not run here" in gone["message"]


def test_hostile_memories_print_safely(history: dict[str, Any]) -> None:
    root = history["root"]
    huge = "\n".join(f"line {n} of a long runbook" for n in range(20_000))
    hostile = saved_id(
        engram(
            root,
            "remember",
            "Title \x1b]0;pwned\x07 \x1b[2J and \x9b31m",
            "-",
            "--json",
            stdin=b"before\r\x1b[1Afaked\n<<<<<<< HEAD\n=======\n>>>>>>> other\nafter",
        )
    )
    big = saved_id(engram(root, "remember", "A huge runbook", "-", "--json", stdin=huge.encode()))
    for output in (engram(root, "diff"), git(root, "diff"), engram(root, "diff", "--json")):
        assert "\x1b" not in output and "\x07" not in output and "\x9b" not in output
        assert "\r" not in output
    text = engram(root, "diff")
    assert f"+ {hostile[:8]}" in text and "\\x1b]0;pwned\\x07" in text
    assert f"+ {big[:8]}" in text
    assert len(text) < 2_000  # a huge content is not printed by engram diff
    converted = git(root, "diff")
    assert "+    <<<<<<< HEAD" in converted  # content indented: never a marker line
    assert not any(
        line.startswith(("<<<<<<<", "=======", ">>>>>>>")) for line in converted.splitlines()
    )
    assert "+    line 19999 of a long runbook" in converted  # textconv is faithful
    git(root, "commit", "-q", "-am", "hostile")
    edited = huge.replace("line 7 of", "line seven of").encode()
    engram(root, "update", big[:8], "--content", "-", stdin=edited)
    text = engram(root, "diff")
    assert "-line 7 of a long runbook" in text and "+line seven of a long runbook" in text
    assert len(text) < 2_000  # a compact line diff of the long text


def test_textconv_is_stable_light_and_never_raises(tmp_path: Path) -> None:
    good = {
        "id": "bbbbbbbbbbbbbbbbbbbbbbbbbb",
        "kind": "pitfall",
        "title": "Two\nlines",
        "content": "x",
        "tags": ["a"],
        "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:00.000Z",
        "rev": 1,
        "links": [{"rel": "relates", "to": "c" * 26}],
    }
    tomb = {"id": "a" * 26, "rev": 2, "updated_at": "2026-01-02T00:00:00.000Z"}
    tomb["deleted_at"] = tomb["updated_at"]
    lines = [json.dumps(good), "{not json", json.dumps(tomb), json.dumps(good), "\ud800", "[1]"]
    data = "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n\xff\xfe\n"
    text = textconv(data)
    assert text.splitlines()[:4] == [
        "=== aaaaaaaa forgotten:",
        f"id: {'a' * 26}",
        "forgotten: 2026-01-02T00:00:00.000Z",
        "rev: 2",
    ]
    assert "=== bbbbbbbb pitfall: Two\\nlines\n" in text
    assert "=== bbbbbbbb pitfall: Two\\nlines (duplicate line 4)" in text
    assert 'links: [{"rel":"relates","to":"' + "c" * 26 + '"}]' in text
    assert text.count("!!! not a memory: memories.jsonl:") == 4
    assert textconv(b"") == ""
    assert textconv(data) == text  # the same bytes give the same text
    file = tmp_path / "memories.jsonl"
    file.write_bytes(data)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "engram", "textconv", str(file)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == text
    imported = done.stderr.decode()
    for heavy in ("typer", "click", "dulwich", "rich", "tantivy"):
        assert f" {heavy}\n" not in imported and f" {heavy}." not in imported, heavy
    done = subprocess.run(
        [sys.executable, "-m", "engram", "textconv", str(tmp_path / "gone")],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (
        done.returncode == 1 and b"cannot read" in done.stderr and b"Traceback" not in done.stderr
    )


def test_a_fresh_clone_is_told_to_install_both_drivers(tmp_path: Path) -> None:
    """git config is not cloned: a teammate's clone has the attributes, not the drivers."""
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q")
    engram(origin, "init")
    engram(origin, "remember", "Use SQLite", "Embedded, no server.")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "engram")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    said = run_cli("remember", "Pin deps", "Lock files.", cwd=clone, env=IDENTITY)
    hint = said.stderr.decode()
    assert "the merge driver (git merges of .engram/)" in hint, hint
    assert "nor the diff driver (readable memories in git diff, log -p and show)" in hint, hint
    assert "engram doctor --fix" in hint
    engram(clone, "doctor", "--fix")
    again = run_cli("remember", "Cap retries", "Three at most.", cwd=clone, env=IDENTITY)
    assert b"hint:" not in again.stderr, again.stderr
    assert "+title: Use SQLite" in git(clone, "show", "HEAD", "--", MEMORIES)  # via textconv
