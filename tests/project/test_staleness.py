"""Staleness anchors through the whole stack: saved with a memory, reported by every reader.

A real git repository is built with dulwich in tmp_path. Memories cite files; commits made
after them (dated after the memory, since the walk stops at the memory's creation time) change
or delete those files, and the service, the CLI (CliRunner) and one MCP stdio session must say
"may be stale" for the changed ones and nothing for the rest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from dulwich import porcelain
from dulwich.objects import Blob
from typer.testing import CliRunner

from engram.__main__ import app
from engram.config import set_value
from engram.service import Engram
from tests.mcp_server.test_mcp import connect, run

runner = CliRunner()

AUTH_V1 = b"def login(user):\n    return issue_token(user)\n"
DB_V1 = b"POOL_SIZE = 5\n"
LEGACY_V1 = b"def old_login():\n    pass\n"

AUTH_STALE = "src/auth.py changed in 3 commits since it was written"
LEGACY_GONE = "src/legacy.py was deleted since it was written"


def blob_id(data: bytes) -> str:
    return Blob.from_string(data).id.decode("ascii")


class GitRepo:
    """A dulwich repository whose commits are dated by a clock that only moves forward."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True)
        porcelain.init(str(root)).close()
        # Commits made after a memory must be dated after it: start the clock a little ahead.
        self.clock = int(time.time()) + 5

    def commit(self, message: str, files: dict[str, bytes], remove: tuple[str, ...] = ()) -> str:
        for name, data in files.items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        if files:
            porcelain.add(str(self.root), paths=[str(self.root / name) for name in files])
        if remove:
            porcelain.remove(str(self.root), paths=[str(self.root / name) for name in remove])
        self.clock = max(self.clock, int(time.time())) + 10
        sha = porcelain.commit(
            str(self.root),
            message=message.encode(),
            author=b"Dev One <dev@example.com>",
            committer=b"Dev One <dev@example.com>",
            author_timestamp=self.clock,
            commit_timestamp=self.clock,
            author_timezone=0,
            commit_timezone=0,
        )
        return sha.decode("ascii")


def new_repo(root: Path) -> GitRepo:
    repo = GitRepo(root)
    repo.commit(
        "Initial layout",
        {
            "src/auth.py": AUTH_V1,
            "src/db.py": DB_V1,
            "src/legacy.py": LEGACY_V1,
            "docs/notes.md": b"# Notes\n",
        },
    )
    return repo


def cli(root: Path, *args: str) -> str:
    result = runner.invoke(app, ["-C", str(root), *args])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


class Saved(NamedTuple):
    """The repository and the ids of the memories saved before its history moved on."""

    root: Path
    auth: str  # cites src/auth.py (then changed in 3 commits), src/*.py and missing.py
    db: str  # cites src/db.py, never changed
    legacy: str  # cites src/legacy.py, deleted since


@pytest.fixture
def moved(tmp_path: Path) -> Iterator[Saved]:
    """Memories citing auth.py (then changed 3 times), db.py (unchanged) and legacy.py (deleted).

    Function-scoped on purpose: a wider scope would run before the autouse HOME isolation.
    """
    root = tmp_path / "svc"
    repo = new_repo(root)
    engram, _ = Engram.init(root, "svc")
    with engram:
        auth = engram.remember(
            "Token rotation lives in login",
            "login() issues and rotates the session token.",
            kind="decision",
            files=["src/auth.py", "src/*.py", "missing.py"],
        ).record
        db = engram.remember(
            "Pool size is five connections",
            "The database pool keeps five connections open.",
            kind="pitfall",
            files=["src/db.py"],
        ).record
        legacy = engram.remember(
            "Old login path is kept for the mobile app",
            "old_login stays until the mobile app migrates.",
            kind="note",
            files=["src/legacy.py"],
        ).record
    assert auth["anchors"] == [{"path": "src/auth.py", "blob": blob_id(AUTH_V1)}]
    assert db["anchors"] == [{"path": "src/db.py", "blob": blob_id(DB_V1)}]
    for n in range(3):
        repo.commit(f"Auth change {n}", {"src/auth.py": AUTH_V1 + f"# change {n}\n".encode()})
    repo.commit("Notes", {"docs/notes.md": b"# Notes\n\nmore\n"})
    repo.commit("Drop the legacy login", {}, remove=("src/legacy.py",))
    yield Saved(root, auth["id"], db["id"], legacy["id"])


# -- service ------------------------------------------------------------------------------------


def test_only_tracked_literal_paths_are_anchored(tmp_path: Path) -> None:
    root = tmp_path / "svc"
    new_repo(root)
    (root / "src/scratch.py").write_bytes(b"print('not added to git')\n")
    engram, _ = Engram.init(root, "svc")
    with engram:
        record = engram.remember(
            "Auth and scratch",
            "cites a tracked, an untracked, a glob and a missing path",
            files=["src/auth.py", "src/scratch.py", "src/*.py", "missing.py"],
        ).record
        assert record["anchors"] == [{"path": "src/auth.py", "blob": blob_id(AUTH_V1)}]
        assert record["files"] == ["missing.py", "src/*.py", "src/auth.py", "src/scratch.py"]
        untracked = engram.remember(
            "Scratch only", "just the untracked file", files="src/scratch.py"
        )
        assert "anchors" not in untracked.record
        assert engram.stale(record) == [] and engram.stale(untracked.record) == []
        stored = engram.get(record["id"])
        assert stored["anchors"] == record["anchors"]


def test_service_reports_changed_deleted_and_fresh(moved: Saved) -> None:
    with Engram.open(moved.root) as engram:
        auth, db, legacy = (engram.get(rid) for rid in (moved.auth, moved.db, moved.legacy))
        assert engram.stale(auth) == [AUTH_STALE]
        assert engram.stale(db) == []
        assert engram.stale(legacy) == [LEGACY_GONE]
        assert engram.why(moved.auth).stale == [AUTH_STALE]
        assert engram.why(moved.db).stale == []
        finding = next(f for f in engram.check(["src/auth.py"]).findings if f.id == moved.auth)
        assert finding.stale == [AUTH_STALE]
        assert f"may be stale: {AUTH_STALE}" in finding.note
        # src/db.py is cited by the db memory and, through src/*.py, by the stale auth one.
        db_findings = {f.id: f for f in engram.check(["src/db.py"]).findings}
        assert "stale" not in db_findings[moved.db].to_dict()
        assert "may be stale" not in db_findings[moved.db].note
        assert db_findings[moved.auth].stale == [AUTH_STALE]


def test_update_re_anchors_and_clears_the_flag(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "svc")
    engram, _ = Engram.init(repo.root, "svc")
    with engram:
        rid = engram.remember("Login rotates tokens", "v1", files="src/auth.py").record["id"]
        for n in range(3):
            repo.commit(f"Auth change {n}", {"src/auth.py": AUTH_V1 + f"# {n}\n".encode()})
        assert engram.stale(engram.get(rid)) == [AUTH_STALE]
        unchanged = engram.update(rid, importance=4)
        assert unchanged["anchors"] == [{"path": "src/auth.py", "blob": blob_id(AUTH_V1)}]
        assert engram.stale(unchanged) == [AUTH_STALE]
        updated = engram.update(rid, content="login() rotates tokens on every refresh now.")
        current = (repo.root / "src/auth.py").read_bytes()
        assert updated["anchors"] == [{"path": "src/auth.py", "blob": blob_id(current)}]
        assert engram.stale(updated) == [] and engram.why(rid).stale == []
        repo.commit("Auth change 3", {"src/auth.py": current + b"# again\n"})
        assert engram.stale(engram.get(rid)) == [
            "src/auth.py changed in 1 commit since it was written"
        ]


def test_update_of_files_anchors_the_new_files(tmp_path: Path) -> None:
    new_repo(tmp_path / "svc")
    engram, _ = Engram.init(tmp_path / "svc", "svc")
    with engram:
        rid = engram.remember("No files yet", "about the pool").record["id"]
        assert "anchors" not in engram.get(rid)
        record = engram.update(rid, files=["src/db.py"])
        assert record["anchors"] == [{"path": "src/db.py", "blob": blob_id(DB_V1)}]
        cleared = engram.update(rid, files=["missing.py"])
        assert "anchors" not in cleared


def test_anchors_off_in_config_records_none(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "svc")
    Engram.init(repo.root, "svc")[0].close()
    set_value(repo.root / ".engram", "store.anchors", False)
    with Engram.open(repo.root) as engram:
        record = engram.remember("Auth without anchors", "x", files="src/auth.py").record
        assert "anchors" not in record
        repo.commit("Auth change", {"src/auth.py": AUTH_V1 + b"# x\n"})
        assert engram.stale(engram.get(record["id"])) == []
        assert "anchors" not in engram.update(record["id"], content="y")
    raw = (repo.root / ".engram/memories.jsonl").read_text(encoding="utf-8")
    assert '"anchors"' not in raw


def test_outside_git_no_anchors_and_no_error(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "src").mkdir(parents=True)
    (root / "src/auth.py").write_bytes(AUTH_V1)
    engram, _ = Engram.init(root, "plain")
    with engram:
        record = engram.remember("Plain folder", "no git here", files="src/auth.py").record
        assert "anchors" not in record
        assert engram.stale(record) == [] and engram.why(record["id"]).stale == []
        assert not any("stale" in f.to_dict() for f in engram.check(["src/auth.py"]).findings)


# -- CLI ----------------------------------------------------------------------------------------


def test_cli_get_recall_why_check_show_the_flag(moved: Saved) -> None:
    root = moved.root
    shown = cli(root, "get", moved.auth).splitlines()
    assert shown[1] == f"may be stale: {AUTH_STALE}"
    assert "may be stale" not in cli(root, "get", moved.db)
    assert f"may be stale: {LEGACY_GONE}" in cli(root, "get", moved.legacy)
    assert json.loads(cli(root, "get", moved.auth, "--json"))["stale"] == [AUTH_STALE]
    assert "stale" not in json.loads(cli(root, "get", moved.db, "--json"))

    lines = cli(root, "recall", "token rotation login").splitlines()
    hit = next(n for n, line in enumerate(lines) if moved.auth[:8] in line)
    block = []
    for line in lines[hit + 1 :]:
        if not line.startswith("    "):
            break
        block.append(line)
    assert block[-1] == f"    may be stale: {AUTH_STALE}"
    pool = cli(root, "recall", "database pool connections").splitlines()
    assert any(moved.db[:8] in line for line in pool)
    assert not any("may be stale" in line for line in pool)
    hits = json.loads(cli(root, "recall", "token rotation login", "--json"))["hits"]
    by_id = {h["id"]: h for h in hits}
    assert by_id[moved.auth]["stale"] == [AUTH_STALE]
    pool_hits = json.loads(cli(root, "recall", "database pool", "--json"))["hits"]
    assert moved.db in [h["id"] for h in pool_hits]
    assert not any("stale" in h for h in pool_hits)

    assert f"may be stale: {AUTH_STALE}" in cli(root, "why", moved.auth).splitlines()[1]
    assert "may be stale" not in cli(root, "why", moved.db)
    assert json.loads(cli(root, "why", moved.auth, "--json"))["stale"] == [AUTH_STALE]

    assert f"may be stale: {AUTH_STALE}" in cli(root, "check", "--files", "src/auth.py")
    db_text = cli(root, "check", "--files", "src/db.py").splitlines()
    db_line = next(line for line in db_text if "Pool size is five connections" in line)
    assert "may be stale" not in db_line
    auth_line = next(line for line in db_text if "Token rotation lives in login" in line)
    assert f"may be stale: {AUTH_STALE}" in auth_line
    data = json.loads(cli(root, "check", "--files", "src/auth.py", "--json"))
    finding = next(f for f in data["findings"] if f["id"] == moved.auth)
    assert finding["stale"] == [AUTH_STALE] and AUTH_STALE in finding["note"]


# -- MCP ----------------------------------------------------------------------------------------


def test_mcp_recall_get_why_flag_stale_memories(moved: Saved) -> None:
    async def scenario() -> None:
        async with connect(moved.root) as client:
            found: dict[str, Any] = await client.ok("recall", {"query": "token rotation login"})
            hit = next(h for h in found["hits"] if moved.auth.startswith(h["id"]))
            assert hit["may_be_stale"] == AUTH_STALE
            pool = await client.ok("recall", {"query": "database pool connections"})
            assert any(moved.db.startswith(h["id"]) for h in pool["hits"])
            assert not any("may_be_stale" in h for h in pool["hits"])

            got = await client.ok("get", {"id": moved.auth})
            assert f"It may be stale: {AUTH_STALE}." in got["note"]
            fresh = await client.ok("get", {"id": moved.db})
            assert "may be stale" not in fresh["note"]
            gone = await client.ok("get", {"id": moved.legacy})
            assert LEGACY_GONE in gone["note"]

            why = await client.ok("why", {"id": moved.auth})
            assert why["may_be_stale"] == [AUTH_STALE]
            assert "may_be_stale" not in await client.ok("why", {"id": moved.db})

            check = await client.ok("check", {"files": ["src/auth.py"]})
            assert AUTH_STALE in check["text"]

    run(scenario)


def test_an_edit_not_yet_committed_is_said_and_goes_once_committed(tmp_path: Path) -> None:
    """The issue's loop without the commit: remember, edit the file, ask — before any commit."""
    repo = new_repo(tmp_path / "svc")
    engram, _ = Engram.init(repo.root, "svc")
    edited = "src/auth.py has uncommitted changes since it was written"
    with engram:
        rid = engram.remember("Login rotates tokens", "v1", files="src/auth.py").record["id"]
        assert engram.stale(engram.get(rid)) == []
        auth = repo.root / "src/auth.py"
        auth.write_bytes(AUTH_V1 + b"# work in progress\n")
        assert engram.stale(engram.get(rid)) == [edited]
        assert engram.why(rid).stale == [edited]
        auth.write_bytes(AUTH_V1)  # the edit undone: the file is the anchored version again
        assert engram.stale(engram.get(rid)) == []
        auth.write_bytes(AUTH_V1 + b"# work in progress\n")
        repo.commit("Auth change", {"src/auth.py": AUTH_V1 + b"# work in progress\n"})
        # Committed now: the commit is counted, and the work tree says nothing more.
        assert engram.stale(engram.get(rid)) == [
            "src/auth.py changed in 1 commit since it was written"
        ]
        db = engram.remember("Pool size", "five", files="src/db.py").record["id"]
        (repo.root / "src/db.py").unlink()
        assert engram.stale(engram.get(db)) == [
            "src/db.py was removed from the work tree (not committed)"
        ]


def test_memories_sharing_an_edited_file_each_say_so_in_one_question(tmp_path: Path) -> None:
    # stale_many looks at a file several memories anchor once, and says it of each of them;
    # a memory whose file is unchanged, or was removed, says its own.
    repo = new_repo(tmp_path / "svc")
    engram, _ = Engram.init(repo.root, "svc")
    edited = "src/auth.py has uncommitted changes since it was written"
    with engram:
        first = engram.remember("Login rotates tokens", "v1", files="src/auth.py").record
        second = engram.remember("Tokens expire", "an hour", files="src/auth.py").record
        pool = engram.remember("Pool size", "five", files="src/db.py").record
        (repo.root / "src/auth.py").write_bytes(AUTH_V1 + b"# work in progress\n")
        records = [engram.get(first["id"]), engram.get(second["id"]), engram.get(pool["id"])]
        assert engram.here.stale_many(records) == {first["id"]: [edited], second["id"]: [edited]}
        (repo.root / "src/db.py").unlink()
        said = engram.here.stale_many(records)
        assert said[pool["id"]] == ["src/db.py was removed from the work tree (not committed)"]
        assert said[first["id"]] == said[second["id"]] == [edited]
        # The session's own edit is its work in progress: not said of either memory.
        assert engram.here.stale_many(records[:2], own={"src/auth.py"}) == {}
