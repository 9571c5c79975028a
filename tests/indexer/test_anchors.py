"""Tests for engram.indexer.anchors: recording cited files' blobs and counting changes since.

Repositories are real, built with dulwich in tmp_path (no git binary). Histories whose shape
matters (merges, missing parents) are written straight into the object store with fixed dates;
the end-to-end tests go through the work tree, the index and ``porcelain.commit``.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dulwich import porcelain
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo

from engram.indexer import anchors as anchors_module
from engram.indexer.anchorrecord import record_anchors
from engram.indexer.anchors import CACHE_FILE, AnchorChecker, Stale

BASE_TIME = 1_700_000_000  # 2023-11-14T22:13:20Z


def blob_id(data: bytes) -> str:
    """Return the git blob id dulwich computes for some bytes."""
    return Blob.from_string(data).id.decode("ascii")


class History:
    """A repository whose commits are written into the object store with chosen parents."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.repo = Repo.init(str(root))
        self.repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/main")
        self.files: dict[str, bytes] = {}
        self.clock = BASE_TIME
        self.head: str | None = None

    def close(self) -> None:
        self.repo.close()

    def _tree(self, node: dict[str, Any]) -> bytes:
        tree = Tree()
        for name, value in node.items():
            if isinstance(value, dict):
                tree.add(name.encode(), 0o040000, self._tree(value))
            else:
                blob = Blob.from_string(value)
                self.repo.object_store.add_object(blob)
                tree.add(name.encode(), 0o100644, blob.id)
        self.repo.object_store.add_object(tree)
        return tree.id

    def tree(self, files: dict[str, bytes]) -> bytes:
        nested: dict[str, Any] = {}
        for path, data in files.items():
            node = nested
            *folders, name = path.split("/")
            for folder in folders:
                node = node.setdefault(folder, {})
            node[name] = data
        return self._tree(nested)

    def commit(
        self,
        changes: dict[str, bytes | None] | None = None,
        *,
        parents: list[str] | None = None,
        files: dict[str, bytes] | None = None,
        move_head: bool = True,
    ) -> str:
        """Commit ``files`` (default: HEAD's files with ``changes``); return the sha."""
        base = dict(self.files if files is None else files)
        for path, data in (changes or {}).items():
            if data is None:
                base.pop(path, None)
            else:
                base[path] = data
        self.clock += 60
        commit = Commit()
        commit.tree = self.tree(base)
        if parents is None:
            parents = [self.head] if self.head else []
        commit.parents = [sha.encode() for sha in parents]
        commit.author = commit.committer = b"Ada Lovelace <ada@x.org>"
        commit.author_time = commit.commit_time = self.clock
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = b"change\n"
        self.repo.object_store.add_object(commit)
        sha = commit.id.decode()
        if move_head:
            self.repo.refs[b"refs/heads/main"] = commit.id
            self.head = sha
            self.files = base
        return sha

    def edit(self, path: str) -> str:
        """Commit a new version of one file."""
        return self.commit({path: self.files.get(path, b"") + b"one more line\n"})


@pytest.fixture
def history(tmp_path: Path) -> Iterator[History]:
    built = History(tmp_path / "repo")
    yield built
    built.close()


def anchor(path: str, data: bytes) -> dict[str, str]:
    return {"path": path, "blob": blob_id(data)}


def porcelain_commit(root: Path, files: dict[str, bytes], when: int) -> str:
    """Write files into the work tree, stage and commit them; return the sha."""
    for name, data in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    porcelain.add(str(root), paths=[str(root / name) for name in files])
    sha = porcelain.commit(
        str(root),
        message=b"change",
        author=b"Dev One <dev@example.com>",
        committer=b"Dev One <dev@example.com>",
        author_timestamp=when,
        commit_timestamp=when,
        author_timezone=0,
        commit_timezone=0,
    )
    return sha.decode("ascii")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A repository with a work tree, an index and one commit of src/auth.py and README.md."""
    root = tmp_path / "work"
    root.mkdir()
    porcelain.init(str(root)).close()
    porcelain_commit(root, {"src/auth.py": b"def login(): ...\n", "README.md": b"hi\n"}, BASE_TIME)
    return root


# --- record_anchors ---------------------------------------------------------------------------


def test_record_gives_the_blob_git_stores(work: Path) -> None:
    found = record_anchors(work, ["src/auth.py", "README.md"])
    with Repo(str(work)) as repo:
        tree = repo[repo[b"HEAD"].tree]  # type: ignore[attr-defined]
        _, stored = tree.lookup_path(repo.object_store.__getitem__, b"src/auth.py")
    assert found == [
        {"path": "README.md", "blob": blob_id(b"hi\n")},
        {"path": "src/auth.py", "blob": stored.decode("ascii")},
    ]
    assert stored.decode("ascii") == blob_id(b"def login(): ...\n")


def test_record_hashes_the_current_work_tree_bytes(work: Path) -> None:
    (work / "src" / "auth.py").write_bytes(b"def login(user): ...\n")
    assert record_anchors(work, ["src/auth.py"]) == [
        anchor("src/auth.py", b"def login(user): ...\n")
    ]


def test_record_skips_what_git_does_not_track(work: Path, tmp_path: Path) -> None:
    (work / "notes.txt").write_bytes(b"untracked\n")
    (work / "src" / "big.py").write_bytes(b"x" * 100)
    porcelain.add(str(work), paths=[str(work / "src" / "big.py")])
    (tmp_path / "outside.py").write_bytes(b"outside\n")
    paths: list[Any] = [
        "notes.txt",  # untracked
        "missing.py",
        "src/*.py",
        "src/auth.py[",
        "src",
        "src/",
        "../outside.py",
        str(tmp_path / "outside.py"),
        ".git/HEAD",
        "",
        ".",
        42,
        None,
        "src/./auth.py",  # the same file as the next: one anchor
        "src/auth.py",
        "src/big.py",  # staged, not committed: tracked, but over max_bytes
    ]
    assert record_anchors(work, paths, max_bytes=99) == [
        anchor("src/auth.py", b"def login(): ...\n")
    ]


def test_record_keeps_staged_files(work: Path) -> None:
    (work / "src" / "new.py").write_bytes(b"new\n")
    porcelain.add(str(work), paths=[str(work / "src" / "new.py")])
    assert record_anchors(work, ["src/new.py"]) == [anchor("src/new.py", b"new\n")]


def test_record_keeps_committed_files_when_the_index_is_unreadable(work: Path) -> None:
    (work / ".git" / "index").write_bytes(b"garbage")
    assert record_anchors(work, ["src/auth.py"]) == [anchor("src/auth.py", b"def login(): ...\n")]


def test_record_outside_a_repository(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_bytes(b"a\n")
    assert record_anchors(tmp_path, ["a.py"]) == []
    assert record_anchors(tmp_path / "missing", ["a.py"]) == []


def test_record_from_a_subfolder_root(work: Path) -> None:
    sub = work / "src"
    assert record_anchors(sub, ["auth.py", "../README.md", "../../escape.py"]) == [
        anchor("../README.md", b"hi\n"),
        anchor("auth.py", b"def login(): ...\n"),
    ]


# --- check: counting --------------------------------------------------------------------------


def test_fresh_anchor_is_not_reported(history: History) -> None:
    history.commit({"src/auth.py": b"v1\n", "README.md": b"r\n"})
    with AnchorChecker(history.root) as checker:
        assert checker.head() == history.head
        assert checker.check([anchor("src/auth.py", b"v1\n")]) == []


def test_three_commits_changing_the_file_are_counted(history: History) -> None:
    history.commit({"src/auth.py": b"v1\n", "README.md": b"r\n"})
    for number in range(3):
        history.edit("src/auth.py")
        history.edit("README.md")  # other files do not count
        history.commit({"src/other.py": b"%d\n" % number})
    with AnchorChecker(history.root) as checker:
        assert checker.check([anchor("src/auth.py", b"v1\n"), anchor("README.md", b"r\n")]) == [
            Stale("src/auth.py", 3, False, False),
            Stale("README.md", 3, False, False),
        ]


def test_deleted_file(history: History) -> None:
    history.commit({"src/auth.py": b"v1\n"})
    history.edit("src/auth.py")
    history.commit({"src/auth.py": None, "src/login.py": b"moved\n"})
    with AnchorChecker(history.root) as checker:
        assert checker.check([anchor("src/auth.py", b"v1\n")]) == [
            Stale("src/auth.py", 2, True, False)
        ]


def test_file_replaced_by_a_folder_is_deleted(history: History) -> None:
    history.commit({"src/auth": b"v1\n"})
    history.commit({"src/auth": None, "src/auth/__init__.py": b"pkg\n"})
    with AnchorChecker(history.root) as checker:
        assert checker.check([anchor("src/auth", b"v1\n")]) == [Stale("src/auth", 1, True, False)]


def test_merge_counts_each_side_once_and_not_itself(history: History) -> None:
    base = history.commit({"app.py": b"base\n", "other.py": b"o\n"})
    left1 = history.commit({"app.py": b"left 1\n"})
    left2 = history.commit({"app.py": b"left 2\n"})
    base_files = {"app.py": b"base\n", "other.py": b"o\n"}
    right1 = history.commit({"app.py": b"right 1\n"}, parents=[base], files=base_files)
    right2 = history.commit(
        {"other.py": b"o2\n"}, parents=[right1], files={**base_files, "app.py": b"right 1\n"}
    )
    merge = history.commit({"app.py": b"merged\n", "other.py": b"o2\n"}, parents=[left2, right2])
    assert history.head == merge and left1
    with AnchorChecker(history.root) as checker:
        assert checker.check([anchor("app.py", b"base\n")]) == [Stale("app.py", 3, False, False)]
        # Anchored on the left side's version: left2 and right1 changed it since; left1 and
        # what came before it are the memory's past.
        assert checker.check([anchor("app.py", b"left 1\n")]) == [Stale("app.py", 2, False, False)]


def test_ancestors_of_the_anchored_version_are_not_counted(history: History) -> None:
    root = history.commit({"app.py": b"v0\n", "b.py": b"b\n"})
    history.commit({"app.py": b"anchored\n"})
    main = history.commit({"app.py": b"v2\n"})
    side = history.commit(
        {"b.py": b"b2\n"}, parents=[root], files={"app.py": b"v0\n", "b.py": b"b\n"}
    )
    history.commit({"app.py": b"v2\n", "b.py": b"b2\n"}, parents=[main, side])
    with AnchorChecker(history.root) as checker:
        # The root commit (which added app.py) is reached through the side branch too, but it
        # is older than the anchored version: only the commit to v2 counts.
        assert checker.check([anchor("app.py", b"anchored\n")]) == [
            Stale("app.py", 1, False, False)
        ]


def test_since_ends_the_walk_for_uncommitted_content(history: History) -> None:
    history.commit({"app.py": b"v1\n"})
    history.edit("app.py")
    history.edit("app.py")
    written = history.clock + 30  # the memory saw a work-tree version that was never committed
    uncommitted = anchor("app.py", b"work in progress\n")
    with AnchorChecker(history.root) as checker:
        # No commit since the memory was written: its version is still uncommitted work.
        assert checker.check([uncommitted], since=written) == []
        # Without since the walk goes back to the root commit.
        assert checker.check([uncommitted]) == [Stale("app.py", 3, False, False)]
    history.edit("app.py")
    history.edit("app.py")
    with AnchorChecker(history.root) as checker:
        assert checker.check([uncommitted], since=written) == [Stale("app.py", 2, False, False)]
        assert checker.check([uncommitted], since=written + 0.5) == [
            Stale("app.py", 2, False, False)
        ]
        assert checker.check([uncommitted], since=history.clock + 0.5) == []


def test_a_change_committed_in_the_memorys_second_is_seen(history: History) -> None:
    """Issue 17: remember --files, edit, commit, get: 5 of 6 memories were not flagged.

    Commit times are whole seconds, so a commit in the memory's own second looks older than
    it. HEAD's blob differs from the anchored one, which git holds: that is a change.
    """
    history.commit({"src/cache.py": b"v1\n"})
    anchored = anchor("src/cache.py", b"v1\n")  # committed: in the object store
    written = history.clock + 60 + 0.4  # the next commit lands in the memory's second
    history.commit({"src/cache.py": b"v2\n"})
    assert history.clock == int(written)
    with AnchorChecker(history.root) as checker:
        assert checker.check([anchored], since=written) == [Stale("src/cache.py", 1, False, False)]
    history.edit("src/cache.py")
    with AnchorChecker(history.root) as checker:
        assert checker.check([anchored], since=written) == [Stale("src/cache.py", 2, False, False)]
    # Work that was never committed and that no later commit touched is still fresh.
    wip = anchor("src/cache.py", b"work in progress\n")
    with AnchorChecker(history.root) as checker:
        assert checker.check([wip], since=history.clock + 0.5) == []


def test_the_loop_of_the_issue_through_the_work_tree(work: Path, tmp_path: Path) -> None:
    """remember --files src/auth.py, edit it, commit, get: each memory is flagged."""
    when = BASE_TIME + 100
    flagged = []
    for n in range(6):
        anchors = record_anchors(work, ["src/auth.py"])
        written = when + 0.25  # saved a quarter second into the second of the next commit
        porcelain_commit(work, {"src/auth.py": f"def login(): return {n}\n".encode()}, when)
        with AnchorChecker(work) as checker:
            flagged.append(bool(checker.check(anchors, since=written)))
        when += 1
    assert flagged == [True] * 6


def test_max_walk_caps_the_count(history: History) -> None:
    history.commit({"app.py": b"v1\n"})
    for _ in range(12):
        history.edit("app.py")
    with AnchorChecker(history.root, max_walk=5) as checker:
        assert checker.check([anchor("app.py", b"v1\n")]) == [Stale("app.py", 5, False, True)]
    with AnchorChecker(history.root, max_walk=13) as checker:
        assert checker.check([anchor("app.py", b"v1\n")]) == [Stale("app.py", 12, False, False)]


def test_unknown_history_is_at_least_one_commit(history: History) -> None:
    missing = "1" * 40  # a shallow clone's boundary: the parent is not here
    history.commit({"app.py": b"v2\n"}, parents=[missing])
    with AnchorChecker(history.root) as checker:
        assert checker.check([anchor("app.py", b"v1\n")]) == [Stale("app.py", 1, False, True)]


def test_malformed_anchors_are_skipped(history: History) -> None:
    history.commit({"app.py": b"v1\n"})
    history.edit("app.py")
    good = anchor("app.py", b"v1\n")
    bad: list[Any] = [
        {},
        {"path": "app.py"},
        {"blob": good["blob"]},
        {"path": 3, "blob": good["blob"]},
        {"path": "app.py", "blob": "not a sha"},
        {"path": "app.py", "blob": good["blob"][:39]},
        {"path": "app.py", "blob": good["blob"].upper()},
        {"path": "app.py", "blob": 7},
        {"path": "../../etc/passwd", "blob": good["blob"]},
        {"path": "*.py", "blob": good["blob"]},
        "app.py",
        None,
    ]
    with AnchorChecker(history.root) as checker:
        assert checker.check([*bad, good]) == [Stale("app.py", 1, False, False)]
        assert checker.check([good], since=float("nan")) == []


def test_subfolder_root_checks_repository_paths(history: History) -> None:
    history.commit({"src/auth.py": b"v1\n", "auth.py": b"top\n"})
    history.edit("src/auth.py")
    sub = history.root / "src"
    sub.mkdir()
    with AnchorChecker(sub) as checker:
        assert checker.check([anchor("auth.py", b"v1\n"), anchor("../auth.py", b"top\n")]) == [
            Stale("auth.py", 1, False, False)
        ]


def test_end_to_end_through_the_work_tree(work: Path) -> None:
    recorded = record_anchors(work, ["src/auth.py"])
    with AnchorChecker(work) as checker:
        assert checker.check(recorded) == []
        for number in range(3):
            porcelain_commit(work, {"src/auth.py": b"v%d\n" % number}, BASE_TIME + 60 * number)
        assert checker.check(recorded) == [Stale("src/auth.py", 3, False, False)]


# --- no repository, no commits, odd layouts ---------------------------------------------------


def test_no_repository(tmp_path: Path) -> None:
    with AnchorChecker(tmp_path, tmp_path / "state") as checker:
        assert checker.head() is None
        assert checker.check([anchor("a.py", b"a\n")]) == []
    assert not (tmp_path / "state" / CACHE_FILE).exists()


def test_no_commits_yet(history: History) -> None:
    with AnchorChecker(history.root) as checker:
        assert checker.head() is None
        assert checker.check([anchor("a.py", b"a\n")]) == []


def test_head_from_packed_refs_and_detached(history: History) -> None:
    first = history.commit({"a.py": b"1\n"})
    second = history.edit("a.py")
    history.repo.refs.pack_refs(all=True)
    assert not (history.root / ".git" / "refs" / "heads" / "main").exists()
    with AnchorChecker(history.root) as checker:
        assert checker.head() == second
        (history.root / ".git" / "HEAD").write_text(first + "\n")  # a detached HEAD
        assert checker.head() == first


def test_git_file_pointing_elsewhere(tmp_path: Path) -> None:
    """Worktrees and submodules have a .git *file* naming the real git folder."""
    built = History(tmp_path / "store")
    try:
        built.commit({"a.py": b"1\n"})
        head = built.edit("a.py")
    finally:
        built.close()
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "store" / ".git").rename(tmp_path / "gitdir")
    (work / ".git").write_text("gitdir: ../gitdir\n")
    with AnchorChecker(work) as checker:
        assert checker.head() == head
        assert checker.check([anchor("a.py", b"1\n")]) == [Stale("a.py", 1, False, False)]


# --- the cache --------------------------------------------------------------------------------


def refuse(*args: object, **kwargs: object) -> Any:
    raise AssertionError("the answer should have come from the cache")


def stale_history(history: History) -> list[dict[str, str]]:
    history.commit({"app.py": b"v1\n", "db.py": b"d1\n"})
    history.edit("app.py")
    history.edit("app.py")
    return [anchor("app.py", b"v1\n"), anchor("db.py", b"d1\n")]


def test_warm_cache_answers_without_reading_objects(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    anchors = stale_history(history)
    state = tmp_path / "state"
    with AnchorChecker(history.root, state) as checker:
        expected = checker.check(anchors)
        assert expected == [Stale("app.py", 2, False, False)]
        monkeypatch.setattr(AnchorChecker, "_compute", refuse)
        assert checker.check(anchors) == expected  # the in-process memo
    saved = json.loads((state / CACHE_FILE).read_text())
    assert saved["head"] == history.head
    monkeypatch.setattr(AnchorChecker, "_commit", refuse)
    monkeypatch.setattr(AnchorChecker, "_walk", refuse)
    with AnchorChecker(history.root, state) as fresh:  # another process: anchors.json
        assert fresh.check(anchors) == expected


def test_corrupt_cache_is_ignored_and_rewritten(history: History, tmp_path: Path) -> None:
    anchors = stale_history(history)
    state = tmp_path / "state"
    state.mkdir()
    for corrupt in (
        "{not json",
        "[]",
        json.dumps({"version": 1, "head": history.head, "max_walk": 500, "entries": [[1]]}),
        json.dumps(
            {
                "version": 1,
                "head": history.head,
                "max_walk": 500,
                "entries": [["app.py", anchors[0]["blob"], None, [0, False, False]]],
            }
        ),
    ):
        (state / CACHE_FILE).write_text(corrupt)
        with AnchorChecker(history.root, state) as checker:
            assert checker.check(anchors) == [Stale("app.py", 2, False, False)]
        saved = json.loads((state / CACHE_FILE).read_text())
        assert saved["head"] == history.head
        assert len(saved["entries"]) == 2
    assert [p.name for p in state.iterdir()] == [CACHE_FILE]  # no temp files left


def test_cache_written_for_another_head_is_not_used(history: History, tmp_path: Path) -> None:
    anchors = stale_history(history)
    state = tmp_path / "state"
    state.mkdir()
    lie = {
        "version": 1,
        "head": "0" * 40,
        "max_walk": 500,
        "entries": [["app.py", anchors[0]["blob"], None, None]],
    }
    (state / CACHE_FILE).write_text(json.dumps(lie))
    with AnchorChecker(history.root, state) as checker:
        assert checker.check(anchors) == [Stale("app.py", 2, False, False)]


def test_head_moving_invalidates(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    anchors = stale_history(history)
    state = tmp_path / "state"
    with AnchorChecker(history.root, state) as checker:
        assert checker.check(anchors) == [Stale("app.py", 2, False, False)]
        history.edit("db.py")
        assert checker.check(anchors) == [
            Stale("app.py", 2, False, False),
            Stale("db.py", 1, False, False),
        ]
        saved = json.loads((state / CACHE_FILE).read_text())
        assert saved["head"] == history.head
        assert all(entry[2] is None for entry in saved["entries"])
        history.edit("app.py")
        calls: list[object] = []
        walk = AnchorChecker._walk

        def counting(self: AnchorChecker, *args: Any) -> tuple[int, bool, bool]:
            calls.append(args)
            return walk(self, *args)

        monkeypatch.setattr(AnchorChecker, "_walk", counting)
        assert checker.check(anchors)[0] == Stale("app.py", 3, False, False)
        assert len(calls) == 2  # both anchors walked again at the new HEAD


def test_since_is_part_of_the_cache_key(history: History, tmp_path: Path) -> None:
    history.commit({"app.py": b"v1\n"})
    history.edit("app.py")
    history.edit("app.py")
    uncommitted = [anchor("app.py", b"wip\n")]
    with AnchorChecker(history.root, tmp_path / "state") as checker:
        assert checker.check(uncommitted, since=history.clock - 30) == [
            Stale("app.py", 1, False, False)
        ]
        assert checker.check(uncommitted, since=history.clock + 30) == []
        assert checker.check(uncommitted) == [Stale("app.py", 3, False, False)]


def test_cache_that_cannot_be_written_is_harmless(history: History, tmp_path: Path) -> None:
    anchors = stale_history(history)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with AnchorChecker(history.root, blocker / "state") as checker:
        assert checker.check(anchors) == [Stale("app.py", 2, False, False)]


def test_module_does_not_import_dulwich_at_import_time() -> None:
    source = Path(anchors_module.__file__).read_text(encoding="utf-8")
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert top_level and not any("dulwich" in line for line in top_level)


def test_record_hashes_a_symlink_as_git_stores_it(work: Path) -> None:
    (work / "link.py").symlink_to("src/auth.py")
    porcelain.add(str(work), paths=[str(work / "link.py")])
    found = record_anchors(work, ["link.py"])
    with Repo(str(work)) as repo:
        entry = repo.open_index()[b"link.py"]
    assert found == [{"path": "link.py", "blob": entry.sha.decode("ascii")}]  # type: ignore[union-attr]
    assert found[0]["blob"] == blob_id(b"src/auth.py")


def test_record_does_not_follow_a_symlinked_folder_out(work: Path, tmp_path: Path) -> None:
    (work / "ext").mkdir()
    (work / "ext" / "secret.py").write_bytes(b"tracked\n")
    porcelain.add(str(work), paths=[str(work / "ext" / "secret.py")])
    assert record_anchors(work, ["ext/secret.py"]) == [anchor("ext/secret.py", b"tracked\n")]
    # The folder becomes a symlink to a folder outside the work tree; the index still lists it.
    (work / "ext" / "secret.py").unlink()
    (work / "ext").rmdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_bytes(b"outside\n")
    (work / "ext").symlink_to(outside)
    assert record_anchors(work, ["ext/secret.py"]) == []


def test_linked_worktree_reads_its_own_head_and_the_common_refs(tmp_path: Path) -> None:
    """A `git worktree add` layout: HEAD in .git/worktrees/NAME, branches in the common folder."""
    built = History(tmp_path / "main")
    try:
        built.commit({"a.py": b"1\n"})
        main_head = built.edit("a.py")
        feature = built.commit({"a.py": b"feature\n"}, move_head=False)
        built.repo.refs[b"refs/heads/feature"] = feature.encode()
    finally:
        built.close()
    admin = tmp_path / "main" / ".git" / "worktrees" / "wt"
    admin.mkdir(parents=True)
    work = tmp_path / "wt"
    work.mkdir()
    (admin / "HEAD").write_text("ref: refs/heads/feature\n")
    (admin / "commondir").write_text("../..\n")
    (admin / "gitdir").write_text(f"{work / '.git'}\n")
    (work / ".git").write_text(f"gitdir: {admin}\n")
    with AnchorChecker(work) as checker:
        assert checker.head() == feature
        assert checker.check([anchor("a.py", b"1\n")]) == [Stale("a.py", 2, False, False)]
    with AnchorChecker(tmp_path / "main") as checker:
        assert checker.head() == main_head


def test_head_is_read_from_files_without_reopening_the_repository(
    history: History, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dulwich.refs import DiskRefsContainer

    history.commit({"a.py": b"1\n"})
    with AnchorChecker(history.root) as checker:
        assert checker.head() == history.head
        history.edit("a.py")
        moved = history.head
        history.repo.refs.pack_refs(all=True)
        monkeypatch.setattr(anchors_module, "_discover", refuse)
        monkeypatch.setattr(DiskRefsContainer, "__getitem__", refuse)
        assert checker.head() == moved
        history.edit("a.py")  # a loose ref again, newer than the packed one
        assert checker.head() == history.head != moved


def test_a_loose_ref_is_read_again_only_once_it_changes(
    history: History, monkeypatch: pytest.MonkeyPatch
) -> None:
    history.commit({"a.py": b"1\n"})
    reads: list[str] = []

    def counting_open(path: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(os.path.basename(path))
        return open(path, *args, **kwargs)

    monkeypatch.setattr(anchors_module, "open", counting_open, raising=False)
    with AnchorChecker(history.root) as checker:
        first = checker.head()
        assert first == history.head
        assert reads == ["HEAD", "main"]
        for _ in range(3):
            assert checker.head() == first
        assert reads == ["HEAD", "main"]  # a stat each time, no read
        history.edit("a.py")  # git writes the ref anew
        assert checker.head() == history.head != first
        assert reads == ["HEAD", "main", "main"]
        ref = history.root / ".git" / "refs" / "heads" / "main"
        ref.write_text(first + "\n\n")  # rewritten in place, as an editor might
        assert checker.head() == first


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("where", ["refs/heads/main", "packed-refs"])
def test_a_fifo_for_a_ref_says_nothing_and_does_not_block(history: History, where: str) -> None:
    history.commit({"a.py": b"1\n"})
    if where == "packed-refs":
        history.repo.refs.pack_refs(all=True)  # the loose ref goes: HEAD is read from there
    ref = history.root / ".git" / where
    ref.unlink()
    os.mkfifo(ref)
    answers: list[str | None] = []
    with AnchorChecker(history.root) as checker:
        asking = threading.Thread(target=lambda: answers.append(checker.head()), daemon=True)
        asking.start()
        asking.join(timeout=20)
        assert not asking.is_alive(), "head() blocked on a FIFO"
    assert answers == [None]


def test_look_many_is_check_then_edited_of_what_no_commit_changed(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    Repo.init(str(root)).close()
    v1 = {name: f"{name} one\n".encode() for name in ("a.py", "b.py", "c.py", "d.py")}
    porcelain_commit(root, v1, BASE_TIME)
    porcelain_commit(root, {"a.py": b"a.py two\n"}, BASE_TIME + 60)  # a commit changes a.py
    (root / "b.py").write_bytes(b"b.py edited, not committed\n")
    (root / "c.py").unlink()
    (root / "a.py").write_bytes(b"a.py three, not committed\n")
    anchors = {name: anchor(name, data) for name, data in v1.items()}
    items: list[tuple[list[Any], float | None]] = [
        ([anchors["a.py"], anchors["b.py"]], None),
        ([anchors["b.py"], anchors["c.py"], "not an anchor", {"path": "x.py"}], BASE_TIME - 5),
        ([anchors["d.py"], {"path": "src/*.py", "blob": blob_id(b"")}], None),
        ([anchor("a.py", b"a.py two\n")], BASE_TIME + 100),  # at HEAD, edited since
        ([anchors["a.py"]], float("nan")),  # a time no commit can be compared with
        ([], None),
    ]
    with AnchorChecker(root) as checker:
        for own in ((), ("b.py",)):
            looked = checker.look_many(items, own)
            composed = []
            for found, since in items:
                committed = checker.check(found, since=since)
                changed = {item.path for item in committed}
                rest = [
                    item
                    for item in found
                    if isinstance(item, dict)
                    and item.get("path") not in changed
                    and item.get("path") not in own
                ]
                composed.append((committed, checker.edited(rest)))
            assert looked == composed
        stale_a = Stale("a.py", 1, False, False)
        assert checker.look_many(items) == [
            ([stale_a], [("b.py", False)]),  # a.py's commit is said, not its later edit
            ([], [("b.py", False), ("c.py", True)]),
            ([], []),
            ([], [("a.py", False)]),
            ([], [("a.py", False)]),  # no commit count without a usable time: the edit still
            ([], []),
        ]
        assert checker.look_many(items, ("b.py",))[:2] == [
            ([stale_a], []),
            ([], [("c.py", True)]),
        ]


# --- record_anchors: the repositories it keeps open -------------------------------------------


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders record_anchors opens a repository at from here on (dulwich's porcelain,
    which imported Repo itself, is not counted)."""
    import dulwich.repo

    folders: list[str] = []

    class Counting(Repo):
        def __init__(self, root: str, *args: Any, **kwargs: Any) -> None:
            folders.append(str(root))
            super().__init__(root, *args, **kwargs)

    monkeypatch.setattr(dulwich.repo, "Repo", Counting)
    return folders


def test_record_keeps_the_repository_open_and_reads_the_index_afresh(
    work: Path, opened: list[str]
) -> None:
    assert record_anchors(work, ["src/auth.py"]) == [anchor("src/auth.py", b"def login(): ...\n")]
    (work / "src" / "new.py").write_bytes(b"new\n")
    assert record_anchors(work, ["src/new.py"]) == []  # not tracked yet
    porcelain.add(str(work), paths=[str(work / "src" / "new.py")])
    assert record_anchors(work, ["src/new.py"]) == [anchor("src/new.py", b"new\n")]
    assert opened == [str(work.resolve())]


def test_record_sees_a_repository_made_after_a_save_outside_one(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.py").write_bytes(b"a\n")
    assert record_anchors(plain, ["a.py"]) == []
    porcelain.init(str(plain)).close()
    porcelain.add(str(plain), paths=[str(plain / "a.py")])
    assert record_anchors(plain, ["a.py"]) == [anchor("a.py", b"a\n")]


def test_record_sees_a_nearer_repository_and_a_removed_one(work: Path) -> None:
    sub = work / "src"
    assert record_anchors(sub, ["auth.py"]) == [anchor("auth.py", b"def login(): ...\n")]
    porcelain.init(str(sub)).close()  # tracks nothing yet
    assert record_anchors(sub, ["auth.py"]) == []
    assert record_anchors(work, ["src/auth.py"]) == [anchor("src/auth.py", b"def login(): ...\n")]
    shutil.rmtree(work / ".git")
    assert record_anchors(work, ["src/auth.py"]) == []


def test_record_opens_the_repository_again_when_its_config_changes(
    work: Path, tmp_path: Path, opened: list[str]
) -> None:
    assert record_anchors(work, ["README.md"]) == [anchor("README.md", b"hi\n")]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = work / ".git" / "config"
    with Repo(str(work)) as repo:
        settings = repo.get_config()
        settings.set((b"core",), b"worktree", str(elsewhere).encode())
        settings.write_to_path()
    assert record_anchors(work, ["README.md"]) == []  # the root is outside the work tree now
    assert len(opened) == 2
    config.write_bytes(config.read_bytes().replace(b"worktree", b"#worktree", 1))
    assert record_anchors(work, ["README.md"]) == [anchor("README.md", b"hi\n")]
    assert len(opened) == 3


def test_record_follows_a_git_file_pointed_at_another_folder(tmp_path: Path) -> None:
    tracking, empty = tmp_path / "tracking", tmp_path / "empty"
    for folder in (tracking, empty):
        folder.mkdir()
        porcelain.init(str(folder)).close()
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.py").write_bytes(b"a\n")
    (work / ".git").write_text(f"gitdir: {tracking / '.git'}\n")
    with Repo(str(work)) as repo:
        repo.get_worktree().stage(["a.py"])
    assert record_anchors(work, ["a.py"]) == [anchor("a.py", b"a\n")]
    (work / ".git").write_text(f"gitdir: {empty / '.git'}\n")
    assert record_anchors(work, ["a.py"]) == []
