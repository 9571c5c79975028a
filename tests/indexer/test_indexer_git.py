"""Tests for engram.indexer.git: hotspots and pitfall candidates from real git histories.

Every repository is built with dulwich in tmp_path (no git binary): trees and commits are
written straight into the object store with fixed authors and dates, so counts are exact.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo

from engram.errors import InvalidInput
from engram.indexer import git as indexer
from engram.indexer.git import CACHE_FILE, scan_history
from engram.indexer.githotspots import GitScan
from engram.indexer.gitreverts import Candidate, classify

BASE_TIME = 1_700_000_000  # 2023-11-14T22:13:20Z


class History:
    """A git repository built commit by commit through dulwich's object store."""

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

    def tree(self, files: dict[str, bytes]) -> bytes:
        """Write the trees (and blobs) of a file map; return the root tree's sha."""
        nested: dict[str, object] = {}
        for path, data in files.items():
            node = nested
            *folders, name = path.split("/")
            for folder in folders:
                node = node.setdefault(folder, {})  # type: ignore[assignment]
            node[name] = data
        return self._write(nested)

    def _write(self, node: dict[str, object]) -> bytes:
        tree = Tree()
        for name, value in node.items():
            if isinstance(value, dict):
                tree.add(name.encode(), 0o040000, self._write(value))
            else:
                assert isinstance(value, bytes)
                blob = Blob.from_string(value)
                self.repo.object_store.add_object(blob)
                tree.add(name.encode(), 0o100644, blob.id)
        self.repo.object_store.add_object(tree)
        return tree.id

    def commit(
        self,
        message: str,
        changes: dict[str, bytes | None] | None = None,
        *,
        parents: list[str] | None = None,
        author: str = "Ada Lovelace",
        move_head: bool = True,
    ) -> str:
        """Apply changes (None deletes a path), commit on top of HEAD; return the sha."""
        for path, data in (changes or {}).items():
            if data is None:
                del self.files[path]
            else:
                self.files[path] = data
        self.clock += 60
        commit = Commit()
        commit.tree = self.tree(self.files)
        if parents is None:
            parents = [self.head] if self.head else []
        commit.parents = [sha.encode() for sha in parents]
        commit.author = commit.committer = f"{author} <{author.split()[0].lower()}@x.org>".encode()
        commit.author_time = commit.commit_time = self.clock
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = message.encode()
        self.repo.object_store.add_object(commit)
        sha = commit.id.decode()
        if move_head:
            self.repo.refs[b"refs/heads/main"] = commit.id
            self.head = sha
        return sha

    def edit(self, path: str, message: str | None = None) -> str:
        """Commit a new version of one file."""
        version = self.files.get(path, b"") + b"one more line\n"
        return self.commit(message or f"Edit {path}", {path: version})


@pytest.fixture
def history(tmp_path: Path) -> Iterator[History]:
    built = History(tmp_path / "repo")
    yield built
    built.close()


def text(lines: int, seed: str) -> bytes:
    """Return a file body of distinct lines, so that similarity is measurable."""
    return "".join(f"{seed} line {number}\n" for number in range(lines)).encode()


def scan(history: History, **options: object) -> GitScan:
    return scan_history(history.root, **options)  # type: ignore[arg-type]


# --- counting --------------------------------------------------------------------------------


def build_counted(history: History) -> dict[str, int]:
    """A history whose change count per path is known; return those counts."""
    history.commit("Initial", {"README.md": b"hi\n", "src/app.py": b"a\n", "src/db.py": b"d\n"})
    expected = {"README.md": 1, "src/app.py": 1, "src/db.py": 1}
    plan = {"src/app.py": 10, "src/db.py": 7, "docs/guide.md": 8, "tests/test_app.py": 3}
    rounds = max(plan.values())
    for number in range(rounds):
        for path, times in plan.items():
            if number < times:
                history.edit(path)
                expected[path] = expected.get(path, 0) + 1
    history.commit("Touch two", {"src/app.py": b"x\n", "src/db.py": b"y\n"})
    expected["src/app.py"] += 1
    expected["src/db.py"] += 1
    return expected


def test_hotspots_counted_exactly(history: History) -> None:
    expected = build_counted(history)
    result = scan(history)
    assert result.problems == []
    assert result.head == history.head
    assert result.commits_walked == 1 + 10 + 7 + 8 + 3 + 1
    assert result.changes == expected
    assert result.hotspots == [("src/app.py", 12), ("src/db.py", 9), ("docs/guide.md", 8)]
    assert result.candidates == []
    assert result.unchanged is False


def test_threshold_and_depth(history: History) -> None:
    build_counted(history)
    low = scan(history, threshold=2)
    assert [path for path, _ in low.hotspots] == [
        "src/app.py",
        "src/db.py",
        "docs/guide.md",
        "tests/test_app.py",
    ]
    assert scan(history, threshold=100).hotspots == []
    # The last 4 commits, newest first: "Touch two" (app, db), rounds 9 and 8 (app only: db
    # stops after 7 edits, guide after 8), and guide's edit in round 7.
    recent = scan(history, depth=4)
    assert recent.commits_walked == 4
    assert recent.changes == {"src/app.py": 3, "src/db.py": 1, "docs/guide.md": 1}
    assert scan(history, depth=1).changes == {"src/app.py": 1, "src/db.py": 1}
    with pytest.raises(InvalidInput):
        scan(history, depth=0)
    with pytest.raises(InvalidInput):
        scan(history, threshold=0)


def test_merges_skipped_and_both_sides_walked(history: History) -> None:
    base = history.commit("Initial", {"a.py": b"1\n", "b.py": b"1\n"})
    side = history.commit("Side work", {"b.py": b"2\n"}, move_head=False)
    history.files["b.py"] = b"1\n"  # main does not have the side change yet
    main = history.commit("Main work", {"a.py": b"2\n"})
    # The merge takes both sides and resolves a.py by hand: the merge itself counts nothing.
    history.files.update({"b.py": b"2\n", "a.py": b"3\n"})
    merge = history.commit("Merge branch 'side'", parents=[main, side])
    result = scan(history)
    assert result.commits_walked == 3  # initial, side, main
    assert result.changes == {"a.py": 2, "b.py": 2}
    assert merge != base


def test_rename_counts_on_the_new_path_and_follows_history(history: History) -> None:
    history.commit("Initial", {"old/name.py": text(20, "n"), "keep.py": b"k\n"})
    for number in range(3):
        history.commit(f"Edit {number}", {"old/name.py": text(20 + number + 1, "n")})
    content = history.files["old/name.py"]
    history.commit("Move it", {"old/name.py": None, "new/name.py": content})  # exact rename
    history.commit("Edit after", {"new/name.py": content + b"more\n"})
    result = scan(history, threshold=6)
    assert result.changes == {"new/name.py": 6, "keep.py": 1}
    assert result.hotspots == [("new/name.py", 6)]


def test_rename_with_edits_is_detected_and_a_rewrite_is_not(history: History) -> None:
    history.commit("Initial", {"a.py": text(30, "a"), "b.py": text(30, "b")})
    # a.py moves and changes 3 of 30 lines: a rename. b.py is replaced by unrelated text.
    moved = text(27, "a") + b"x\ny\nz\n"
    history.commit(
        "Move and rewrite", {"a.py": None, "c.py": moved, "b.py": None, "d.py": text(30, "d")}
    )
    result = scan(history)
    assert result.changes == {"c.py": 2, "b.py": 2, "d.py": 1}
    # b.py was deleted (its newest change): never a hotspot, though its changes count.
    assert scan(history, threshold=2).hotspots == [("c.py", 2)]


def test_empty_files_are_not_renames_and_folders_can_become_files(history: History) -> None:
    history.commit("Initial", {"a.txt": b"", "lib/x.py": b"x\n", "lib/y.py": b"y\n"})
    history.commit("Swap empty files", {"a.txt": None, "b.txt": b""})
    history.commit("Folder to file", {"lib/x.py": None, "lib/y.py": None, "lib": b"one file\n"})
    history.commit("File to folder", {"lib": None, "lib/z.py": b"z\n"})
    result = scan(history, threshold=1)
    assert result.changes == {
        "a.txt": 2,
        "b.txt": 1,
        "lib/x.py": 2,
        "lib/y.py": 2,
        "lib": 2,
        "lib/z.py": 1,
    }
    assert dict(result.hotspots) == {"b.txt": 1, "lib/z.py": 1}


def test_deleted_and_recreated_file_is_a_hotspot_again(history: History) -> None:
    history.commit("Initial", {"x.py": b"1\n", "y.py": b"1\n"})
    history.commit("Drop x", {"x.py": None})
    history.commit("Bring x back", {"x.py": b"new\n"})
    result = scan(history, threshold=1)
    assert result.changes == {"x.py": 3, "y.py": 1}
    assert dict(result.hotspots) == {"x.py": 3, "y.py": 1}


def test_subfolder_root_finds_the_repository(history: History) -> None:
    build_counted(history)
    sub = history.root / "src" / "deep"
    sub.mkdir(parents=True)
    result = scan_history(sub)
    assert result.problems == []
    assert result.changes["src/app.py"] == 12  # paths stay relative to the repository


def test_git_file_pointing_elsewhere(tmp_path: Path) -> None:
    """Worktrees and submodules have a .git *file* naming the real git folder."""
    built = History(tmp_path / "store")
    try:
        built.commit("Initial", {"a.py": b"1\n"})
        built.edit("a.py")
    finally:
        built.close()
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "store" / ".git").rename(tmp_path / "gitdir")
    (work / ".git").write_text("gitdir: ../gitdir\n")
    result = scan_history(work)
    assert result.problems == []
    assert result.changes == {"a.py": 2}


# --- candidates ------------------------------------------------------------------------------


def test_revert_found_with_its_target(history: History) -> None:
    history.commit("Initial", {"worker.py": b"1\n", "pool.py": b"1\n"})
    target = history.commit(
        "Use connection pooling in worker", {"worker.py": b"2\n", "pool.py": b"2\n"}
    )
    revert = history.commit(
        f'Revert "Use connection pooling in worker"\n\nThis reverts commit {target}.\n\n'
        "Pooling leaked connections under load.\n",
        {"worker.py": b"1\n", "pool.py": b"1\n"},
        author="Grace Hopper",
    )
    result = scan(history)
    assert len(result.candidates) == 1
    found = result.candidates[0]
    assert found.kind == "revert"
    assert found.sha == revert
    assert found.reverted_sha == target
    assert found.title == 'Reverted: "Use connection pooling in worker"'
    assert found.files == ("pool.py", "worker.py")
    assert found.author == "Grace Hopper"
    assert found.date == "2023-11-14T22:16:20.000Z"
    assert target in found.content and revert in found.content
    assert "Pooling leaked connections under load." in found.content
    assert "Grace Hopper" in found.content


def test_revert_with_a_short_sha_is_resolved(history: History) -> None:
    history.commit("Initial", {"a.py": b"1\n"})
    target = history.commit("Cache tokens", {"a.py": b"2\n"})
    history.commit(
        f'Revert "Cache tokens"\n\nThis reverts commit {target[:9]}.\n', {"a.py": b"1\n"}
    )
    history.commit(
        'Revert "Something older"\n\nThis reverts commit 0123456789abc.\n', {"b.py": b"1\n"}
    )
    first, second = scan(history).candidates
    assert first.reverted_sha == target
    assert second.reverted_sha == "0123456789abc"  # not here: kept as written
    assert second.title == 'Reverted: "Something older"'


def test_fake_reverts_are_not_candidates(history: History) -> None:
    history.commit("Initial", {"docs/adr/0014.md": b"1\n"})
    history.commit("Revert ADR-0014 wording", {"docs/adr/0014.md": b"2\n"})
    history.commit('Revert "Use tabs"\n\nWe changed our mind.\n', {"docs/adr/0014.md": b"3\n"})
    history.commit("Reverted the flag default in docs", {"docs/adr/0014.md": b"4\n"})
    assert scan(history).candidates == []


def test_fix_again_candidates(history: History) -> None:
    history.commit("Initial", {"login.py": b"1\n"})
    history.commit("Fix flaky login test", {"login.py": b"2\n"})
    again = history.commit("Fix flaky login test again", {"login.py": b"3\n"})
    history.commit("Fix the build so CI passes again", {"login.py": b"4\n"})
    refix = history.commit("Re-fix login race\n\nThe lock was released too early.", {"x": b"1\n"})
    result = scan(history)
    assert [(found.sha, found.kind) for found in result.candidates] == [
        (again, "fix-again"),
        (refix, "fix-again"),
    ]
    first, second = result.candidates
    assert first.title == "Fixed again: flaky login test"
    assert first.reverted_sha is None
    assert first.files == ("login.py",)
    assert second.title == "Fixed again: login race"
    assert "The lock was released too early." in second.content


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("Fix flaky login test again", "fix-again"),
        ("fixes the cache again", "fix-again"),
        ("auth: fixed token refresh AGAIN (#412)", "fix-again"),
        ("Refix the retry loop", "fix-again"),
        ("re-fix: off-by-one in pager", "fix-again"),
        ("Fix typo", None),
        ("Make the tests pass again", None),
        ("Fix import so the app starts again", None),
        ("Prefix keys with the tenant again", None),
        ("Use the fixture again", None),
        ("Revert ADR-0014", None),
        ('Revert "Fix cache again"', "revert"),  # no body line: resolved by its subject
        ('Revert "Fix cache again" (#12)', "revert"),
        ('Reapply "Fix cache"', "reapply"),
        ('Revert "Revert "Fix cache""', "reapply"),
    ],
)
def test_classify_subjects(subject: str, expected: str | None) -> None:
    found = classify(subject, "")
    assert (found[0] if found else None) == expected


def test_classify_revert_takes_its_target_from_the_body_line() -> None:
    body = "\nThis reverts commit 1234567890abcdef1234567890abcdef12345678.\n"
    assert classify('Revert "Add cache"', body) == (
        "revert",
        "1234567890abcdef1234567890abcdef12345678",
    )
    # Without the line the target is found later, by subject, among the earlier commits.
    assert classify('Revert "Add cache"', "\nThis reverts the cache.\n") == ("revert", None)
    assert classify("Revert ADR-0014", body) is None


def test_candidate_sizes_are_bounded(history: History) -> None:
    history.commit("Initial", {"a.py": b"1\n"})
    huge_title = "Use a connection pool " * 20
    target = history.commit(huge_title.strip(), {"a.py": b"2\n"})
    body = "Details. " * 2000 + "\u00e9" * 500
    many = {f"pkg/{'deep/' * 5}file{number:03d}.py": b"x\n" for number in range(300)}
    history.commit(
        f'Revert "{huge_title.strip()}"\n\nThis reverts commit {target}.\n\n{body}', many
    )
    (found,) = scan(history).candidates
    assert len(found.title) < 120
    assert len(found.content.encode("utf-8")) <= 2000
    assert found.reverted_sha == target
    assert len(found.files) == 200
    assert found.files == tuple(sorted(found.files))


# --- incremental re-index ---------------------------------------------------------------------


def count_diffs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the commits that scan_history reads and diffs (the rest come from the cache)."""
    diffed: list[str] = []
    original = indexer._Walk.diff

    def recording(self: indexer._Walk, sha: str, node: indexer._Node) -> indexer.Changeset:
        diffed.append(sha)
        return original(self, sha, node)

    monkeypatch.setattr(indexer._Walk, "diff", recording)
    return diffed


def test_rerun_without_new_commits_is_unchanged(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_counted(history)
    history.commit('Revert "x"\n\nThis reverts commit abcdef1.\n', {"src/app.py": b"r\n"})
    state = tmp_path / "state"
    first = scan(history, state_dir=state)
    assert first.unchanged is False
    assert (state / CACHE_FILE).is_file()
    cold_five = scan(history, depth=5)  # no state: walks on its own
    diffed = count_diffs(monkeypatch)
    second = scan(history, state_dir=state)
    assert second.unchanged is True
    assert diffed == []
    assert (second.changes, second.hotspots, second.candidates, second.commits_walked) == (
        first.changes,
        first.hotspots,
        first.candidates,
        first.commits_walked,
    )
    # A smaller window is served from the same cache; a different threshold too.
    smaller = scan(history, state_dir=state, depth=5, threshold=2)
    assert smaller.unchanged is True
    assert smaller.commits_walked == 5
    assert smaller.changes == cold_five.changes
    assert diffed == []


def test_new_commits_are_the_only_ones_diffed(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_counted(history)
    state = tmp_path / "state"
    scan(history, state_dir=state, depth=20)
    new = [history.edit("src/app.py"), history.edit("docs/guide.md"), history.edit("new.py")]
    diffed = count_diffs(monkeypatch)
    again = scan(history, state_dir=state, depth=20)
    assert sorted(diffed) == sorted(new)
    assert again.unchanged is False
    cold = scan(history, depth=20)  # no cache at all
    assert (again.changes, again.hotspots, again.commits_walked) == (
        cold.changes,
        cold.hotspots,
        cold.commits_walked,
    )
    # The cache holds the window only (plus nothing older than its edge).
    cached = json.loads((state / CACHE_FILE).read_text())
    assert cached["head"] == history.head
    assert len(cached["window"]) == 20
    assert len(cached["commits"]) == 20


def test_deeper_window_walks_again(history: History, tmp_path: Path) -> None:
    expected = build_counted(history)
    state = tmp_path / "state"
    assert scan(history, state_dir=state, depth=3).commits_walked == 3
    deeper = scan(history, state_dir=state, depth=500)
    assert deeper.unchanged is False
    assert deeper.changes == expected
    assert scan(history, state_dir=state, depth=800).unchanged is True  # history is complete


V = str(indexer._CACHE_VERSION).encode()


@pytest.mark.parametrize(
    "garbage",
    [
        b"{not json",
        b"",
        b"[]",
        b'{"version": ' + V + b', "head": 5}',
        b'{"version": ' + V + b', "head": "x", "depth": 1, "complete": true, "shallow": [], '
        b'"window": ["a"], "commits": {"a": {"t": "late"}}, "paths": [], "counts": [], '
        b'"gone": []}',
        b'{"version": ' + V + b', "head": "x", "depth": 1, "complete": true, "shallow": [], '
        b'"window": [], "commits": {}, "paths": ["a"], "counts": ["many"], "gone": []}',
        b'{"version": 99}',
    ],
)
def test_corrupt_cache_is_ignored_and_rebuilt(
    history: History, tmp_path: Path, garbage: bytes
) -> None:
    expected = build_counted(history)
    state = tmp_path / "state"
    state.mkdir()
    (state / CACHE_FILE).write_bytes(garbage)
    result = scan(history, state_dir=state)
    assert result.problems == []
    assert result.unchanged is False
    assert result.changes == expected
    assert scan(history, state_dir=state).unchanged is True


def test_damaged_cache_entries_are_read_again(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = build_counted(history)
    state = tmp_path / "state"
    scan(history, state_dir=state)
    cached = json.loads((state / CACHE_FILE).read_text())
    window = cached["window"]
    cached["commits"][window[3]]["ch"] = "garbage"
    cached["commits"][window[5]]["ch"][0] = [10**6]  # no such path
    cached["head"] = "0" * 40  # as if HEAD had moved: the walk goes through the cache
    (state / CACHE_FILE).write_text(json.dumps(cached))
    diffed = count_diffs(monkeypatch)
    result = scan(history, state_dir=state)
    assert sorted(diffed) == sorted([window[3], window[5]])
    assert result.changes == expected


def test_cache_that_cannot_be_written_is_a_problem(history: History, tmp_path: Path) -> None:
    history.commit("Initial", {"a.py": b"1\n"})
    blocker = tmp_path / "state"
    blocker.write_text("a file where the folder should be")
    result = scan(history, state_dir=blocker)
    assert result.changes == {"a.py": 1}
    assert len(result.problems) == 1
    assert "could not save the history cache" in result.problems[0]


def test_progress_reports_and_finishes(history: History) -> None:
    build_counted(history)
    calls: list[tuple[int, int]] = []
    result = scan(history, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (result.commits_walked, result.commits_walked)
    assert all(done <= total for done, total in calls)


# --- repositories that are not (fully) there ----------------------------------------------------


def test_not_a_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    result = scan_history(plain, state_dir=plain / ".engram" / "state")
    assert result == GitScan(None, 0, {}, [], [], result.problems, unchanged=False)
    assert len(result.problems) == 1
    assert result.problems[0].startswith("not a git repository:")
    assert str(plain) in result.problems[0]
    assert not (plain / ".engram").exists()
    missing = scan_history(tmp_path / "nowhere")
    assert missing.problems[0].startswith("not a git repository:")


def test_empty_repository(history: History, tmp_path: Path) -> None:
    result = scan(history, state_dir=tmp_path / "state")
    assert result.head is None
    assert result.commits_walked == 0
    assert result.problems == ["the repository has no commits yet; git history was not indexed"]


def test_shallow_clone_is_reported_and_counts_what_is_here(
    history: History, tmp_path: Path
) -> None:
    history.commit("Initial", {"a.py": b"1\n", "b.py": b"1\n"})
    history.edit("a.py")
    boundary = history.edit("b.py")
    history.edit("a.py")
    history.edit("a.py")
    (history.root / ".git" / "shallow").write_text(boundary + "\n")
    state = tmp_path / "state"
    result = scan(history, state_dir=state)
    assert result.commits_walked == 3  # the two after the boundary, and the boundary itself
    assert result.changes == {"a.py": 2}  # the boundary's own changes are unknown
    assert len(result.problems) == 1
    assert result.problems[0].startswith("shallow clone: history stops at 3 commits")
    again = scan(history, state_dir=state)
    assert again.unchanged is True
    assert again.problems == result.problems
    # Deepening (the shallow file goes away) invalidates the cache: the full history counts.
    (history.root / ".git" / "shallow").unlink()
    full = scan(history, state_dir=state)
    assert full.unchanged is False
    assert full.changes == {"a.py": 4, "b.py": 2}
    assert full.problems == []


def test_missing_parent_object_is_reported(history: History, tmp_path: Path) -> None:
    history.commit("Initial", {"a.py": b"1\n"})
    orphan_parent = "1" * 40
    history.commit("Child of nothing here", {"a.py": b"2\n"}, parents=[orphan_parent])
    history.edit("a.py")
    state = tmp_path / "state"
    result = scan(history, state_dir=state)
    assert result.commits_walked == 2
    assert result.changes == {"a.py": 1}
    assert any("history is incomplete" in problem for problem in result.problems)
    assert scan(history, state_dir=state).unchanged is False  # never cached as complete


def test_candidate_is_a_frozen_value() -> None:
    found = Candidate("s", "revert", "t", "c", ("a",), None, "2024-01-01T00:00:00.000Z", "A")
    with pytest.raises(AttributeError):
        found.title = "x"  # type: ignore[misc]


# --- reverts as GitHub's squash merge writes them ---------------------------------------------


def squash_history(history: History) -> dict[str, str]:
    """A squash-merged history: ``Subject (#N)`` commits, reverts with and without body line."""
    shas: dict[str, str] = {}
    history.commit("Initial", {"upload.py": b"1\n", "dns.py": b"1\n"})
    shas["budget"] = history.commit(
        "Add a retry budget to the uploader (#101)\n\n* add the budget\n* cover it in tests\n",
        {"upload.py": b"2\n"},
    )
    shas["dns"] = history.commit(
        "Cache resolver lookups (#102)\n\nCo-authored-by: Grace Hopper <grace@x.org>\n",
        {"dns.py": b"2\n"},
    )
    shas["budget-revert"] = history.commit(
        'Revert "Add a retry budget to the uploader (#101)" (#103)\n\n'
        f"This reverts commit {shas['budget']}.\n",
        {"upload.py": b"1\n"},
    )
    # GitHub's "Revert" button on a pull request: the body names the pull request, no sha.
    shas["dns-revert"] = history.commit(
        'Revert "Cache resolver lookups (#102)" (#104)\n\nReverts acme/shop#102\n\n'
        "Lookups went stale after a failover.\n",
        {"dns.py": b"1\n"},
    )
    return shas


def test_squash_merged_revert_with_its_body_line(history: History) -> None:
    shas = squash_history(history)
    found = {candidate.sha: candidate for candidate in scan(history).candidates}
    budget = found[shas["budget-revert"]]
    assert budget.kind == "revert"
    assert budget.reverted_sha == shas["budget"]
    assert budget.inferred is False
    assert budget.title == 'Reverted: "Add a retry budget to the uploader (#101)"'
    assert "inferred" not in budget.content


def test_squash_merged_revert_without_body_line_is_resolved_by_subject(
    history: History,
) -> None:
    shas = squash_history(history)
    result = scan(history)
    found = {candidate.sha: candidate for candidate in result.candidates}
    dns = found[shas["dns-revert"]]
    assert dns.kind == "revert"
    assert dns.reverted_sha == shas["dns"]
    assert dns.inferred is True
    assert dns.title == 'Reverted: "Cache resolver lookups (#102)"'
    assert dns.files == ("dns.py",)
    assert "- inferred:" in dns.content
    assert f"- reverted: {shas['dns']}" in dns.content
    assert "Lookups went stale after a failover." in dns.content
    assert result.unresolved == []
    assert result.problems == []


def test_revert_quoting_the_subject_without_its_pull_request(history: History) -> None:
    history.commit("Initial", {"a.py": b"1\n"})
    target = history.commit("Stream large responses (#201)", {"a.py": b"2\n"})
    revert = history.commit('Revert "Stream large responses" (#202)', {"a.py": b"1\n"})
    (found,) = scan(history).candidates
    assert (found.sha, found.reverted_sha, found.inferred) == (revert, target, True)


def test_the_nearest_earlier_commit_of_the_subject_wins(history: History) -> None:
    history.commit("Initial", {"pool.py": b"1\n"})
    history.commit("Tune the pool size (#131)", {"pool.py": b"2\n"})
    nearest = history.commit("Tune the pool size (#135)", {"pool.py": b"3\n"})
    history.commit("Tune the pool size", {"pool.py": b"4\n"}, move_head=False)  # another branch
    revert = history.commit('Revert "Tune the pool size" (#136)', {"pool.py": b"2\n"})
    history.commit("Tune the pool size (#140)", {"pool.py": b"5\n"})  # later: never the target
    (found,) = scan(history).candidates
    assert (found.sha, found.reverted_sha) == (revert, nearest)


def test_a_quoted_subject_with_quotes_in_it(history: History) -> None:
    history.commit("Initial", {"http.py": b"1\n"})
    target = history.commit('Send "Content-Length: 0" for empty bodies (#140)', {"http.py": b"2\n"})
    revert = history.commit(
        'Revert "Send "Content-Length: 0" for empty bodies (#140)" (#141)', {"http.py": b"1\n"}
    )
    (found,) = scan(history).candidates
    assert (found.sha, found.reverted_sha, found.inferred) == (revert, target, True)
    assert found.title == 'Reverted: "Send "Content-Length: 0" for empty bodies (#140)"'


def test_a_revert_naming_no_earlier_commit_is_skipped_and_reported(history: History) -> None:
    history.commit("Initial", {"config.py": b"1\n"})
    revert = history.commit(
        'Revert "Drop the legacy config loader" (#150)\n\nIt is still needed by the CLI.\n',
        {"config.py": b"2\n"},
    )
    history.commit("Drop the legacy config loader", {"config.py": b"3\n"})  # newer: not it
    result = scan(history)
    assert result.candidates == []
    assert result.unresolved == [(revert, "Drop the legacy config loader")]
    (problem,) = result.problems
    assert revert[:12] in problem and "Drop the legacy config loader" in problem


def test_reapply_marks_the_revert_it_undid_and_makes_no_candidate(history: History) -> None:
    shas = squash_history(history)
    reapply = history.commit(
        'Reapply "Cache resolver lookups (#102)" (#110)\n\nNow with a TTL.\n',
        {"dns.py": b"3\n"},
    )
    result = scan(history)
    assert [candidate.kind for candidate in result.candidates] == ["revert", "revert"]
    found = {candidate.sha: candidate for candidate in result.candidates}
    assert reapply not in found
    dns = found[shas["dns-revert"]]
    assert dns.reapplied_by == reapply
    assert f"- re-applied by: {reapply}" in dns.content
    assert found[shas["budget-revert"]].reapplied_by is None


def test_reapply_of_a_squash_merged_revert_squash_merged_again(history: History) -> None:
    shas = squash_history(history)
    # git turns 'Revert "X (#102)" (#104)' into 'Reapply "X (#102)" (#104)'; the squash merge
    # of that pull request appends its own number.
    reapply = history.commit(
        'Reapply "Cache resolver lookups (#102)" (#104) (#112)', {"dns.py": b"3\n"}
    )
    (dns,) = [c for c in scan(history).candidates if c.sha == shas["dns-revert"]]
    assert dns.reapplied_by == reapply


def test_revert_of_a_revert_is_a_reapply(history: History) -> None:
    shas = squash_history(history)
    again = history.commit(
        'Revert "Revert "Add a retry budget to the uploader (#101)" (#103)" (#111)\n\n'
        f"This reverts commit {shas['budget-revert']}.\n",
        {"upload.py": b"2\n"},
    )
    # Three layers: the change is undone once more, a revert of the reapply.
    third = history.commit(
        'Revert "Revert "Revert "Add a retry budget to the uploader (#101)" (#103)" (#111)"\n\n'
        f"This reverts commit {again}.\n",
        {"upload.py": b"1\n"},
    )
    result = scan(history)
    found = {candidate.sha: candidate for candidate in result.candidates}
    assert again not in found
    assert found[shas["budget-revert"]].reapplied_by == again
    assert found[third].kind == "revert"
    assert found[third].reverted_sha == again
    assert found[third].title == 'Reverted: "Add a retry budget to the uploader (#101)"'


def test_inferred_reverts_survive_the_cache(history: History, tmp_path: Path) -> None:
    state = tmp_path / "state"
    shas = squash_history(history)
    history.commit('Revert "Nothing like this"', {"x.py": b"1\n"})
    first = scan(history, state_dir=state)
    again = scan(history, state_dir=state)
    assert again.unchanged is True
    assert again.candidates == first.candidates
    assert again.unresolved == first.unresolved and len(again.unresolved) == 1
    assert again.problems == first.problems
    # A new revert resolved against commits that are only in the cache now.
    later = history.commit('Revert "Add a retry budget to the uploader (#101)"', {"u": b"1\n"})
    third = scan(history, state_dir=state)
    assert third.unchanged is False
    found = {candidate.sha: candidate for candidate in third.candidates}
    assert found[later].reverted_sha == shas["budget"] and found[later].inferred
    assert found[shas["dns-revert"]] == {c.sha: c for c in first.candidates}[shas["dns-revert"]]
    assert len(third.unresolved) == 1


def test_candidate_records_say_inferred_and_reapplied(history: History) -> None:
    from engram.indexer.plan import candidate_id, plan_git

    shas = squash_history(history)
    reapply = history.commit('Reapply "Cache resolver lookups (#102)"', {"dns.py": b"3\n"})
    result = scan(history)
    plan = plan_git(
        result,
        {},
        project="shop",
        depth=500,
        threshold=8,
        stamp="2024-01-01T00:00:00.000Z",
        revise=lambda record, changes: {**record, **changes},
    )
    records = {record["id"]: record for record in plan.writes}
    budget = records[candidate_id(shas["budget-revert"])]
    assert budget["tags"] == ["git", "revert"]
    assert "reverted_inferred" not in budget and "reapplied_by" not in budget
    dns = records[candidate_id(shas["dns-revert"])]
    assert dns["tags"] == ["git", "inferred", "reapplied", "revert"]
    assert dns["reverted_inferred"] is True
    assert dns["reverted_sha"] == shas["dns"]
    assert dns["reapplied_by"] == reapply
    assert candidate_id(reapply) not in records


def test_a_body_line_naming_a_commit_this_clone_lacks_falls_back_to_the_subject(
    history: History,
) -> None:
    # A revert made on the pull request's branch names that branch's commit; the squash
    # merge that landed is another commit, and the branch commit is not in the clone.
    history.commit("Initial", {"wheel.py": b"1\n"})
    landed = history.commit("Cache downloaded wheels (#5089)", {"wheel.py": b"2\n"})
    gone = "7d92915f3dec3e7e76fa4c5ec5af7c17e3ca176c"
    revert = history.commit(
        f'Revert "Cache downloaded wheels" (#6470)\n\nThis reverts commit {gone}.\n',
        {"wheel.py": b"1\n"},
    )
    lone = history.commit(
        f'Revert "Something never here" (#6471)\n\nThis reverts commit {gone[:-1]}0.\n',
        {"wheel.py": b"3\n"},
    )
    found = {candidate.sha: candidate for candidate in scan(history).candidates}
    assert (found[revert].reverted_sha, found[revert].inferred) == (landed, True)
    assert f"names {gone[:12]}, which this clone does not have" in found[revert].content
    # No subject matches either: the line's commit is kept as named, not inferred.
    assert (found[lone].reverted_sha, found[lone].inferred) == (f"{gone[:-1]}0", False)
