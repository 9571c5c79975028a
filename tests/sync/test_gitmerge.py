"""Tests for engram.sync.gitmerge: setup, the merge driver, resolve and a memory's log.

Repositories are real, in tmp_path: built with dulwich where git itself is not under test, and
with the real ``git`` binary (skipped when it is absent) to prove that git calls the driver and
that ``resolve`` leaves an index git accepts.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from dulwich import porcelain
from dulwich.index import ConflictedIndexEntry, IndexEntry
from dulwich.repo import Repo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.errors import InvalidInput
from engram.model import canonical_line, parse_line
from engram.sync.chunks import manifest_bytes
from engram.sync.gitlog import memory_log
from engram.sync.gitmerge import merge_driver
from engram.sync.gitresolve import resolve, split_markers
from engram.sync.gitsetup import ATTRIBUTES, Setup, check_setup, install, runs
from engram.sync.merge import merge3

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="the git binary is not installed")
MEMORIES = ".engram/memories.jsonl"
MANIFEST = ".engram/manifest.json"
BASE_TIME = 1_700_000_000  # 2023-11-14T22:13:20Z


def rec(rid: str, title: str, rev: int = 1, updated: str = "01", **extra: Any) -> dict[str, Any]:
    """Return a valid memory record; ``updated`` is the day of January 2026."""
    return {
        "id": rid,
        "kind": "fact",
        "title": title,
        "content": f"{title} body",
        "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": f"2026-01-{updated}T00:00:00.000Z",
        "rev": rev,
        **extra,
    }


def jsonl(*records: dict[str, Any]) -> bytes:
    return b"".join(canonical_line(r) for r in sorted(records, key=lambda r: r["id"]))


def parse(data: bytes) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, data.splitlines())}


def canonical(data: bytes) -> bool:
    return data == jsonl(*parse(data).values())


# --- install / check_setup -------------------------------------------------------------------


def test_no_repository(tmp_path: Path) -> None:
    assert check_setup(tmp_path) == Setup(attributes=False, driver=False, repo=False)
    assert install(tmp_path) == []
    assert list(tmp_path.iterdir()) == []
    assert memory_log(tmp_path, "abc") == []
    with pytest.raises(InvalidInput, match="not a git repository"):
        resolve(tmp_path)


def test_install_fresh_repo_twice(tmp_path: Path) -> None:
    Repo.init(str(tmp_path)).close()
    assert check_setup(tmp_path) == Setup(attributes=False, driver=False, repo=True)
    done = install(tmp_path / ".")
    assert len(done) == 3
    assert check_setup(tmp_path) == Setup(
        attributes=True, driver=True, repo=True, diff_attribute=True, diff=True
    )
    assert (tmp_path / ".gitattributes").read_text() == "".join(f"{a}\n" for a in ATTRIBUTES)
    with Repo(str(tmp_path)) as repo:
        config = repo.get_config()
        assert config.get((b"merge", b"engram"), b"driver") == b"engram merge-driver %O %A %B %P"
        assert config.get((b"merge", b"engram"), b"name") == b"engram memories"
        assert config.get((b"diff", b"engram"), b"textconv") == b"engram textconv"
        assert config.get((b"diff", b"engram"), b"cachetextconv") == b"true"
        assert config.get((b"core",), b"bare") == b"false"  # other settings survive
    assert install(tmp_path) == []  # idempotent
    assert (tmp_path / ".gitattributes").read_text().count("merge=engram") == 2
    assert (tmp_path / ".gitattributes").read_text().count("diff=engram") == 1


def test_install_keeps_existing_attributes_and_line_endings(tmp_path: Path) -> None:
    Repo.init(str(tmp_path)).close()
    (tmp_path / ".gitattributes").write_bytes(
        b"*.png binary\r\n.engram/manifest.json   merge=engram\r\n*.sh text eol=lf"
    )
    sub = tmp_path / "src"
    sub.mkdir()
    done = install(sub, command="/opt/engram")
    assert any("1 attribute line" in sentence for sentence in done)
    assert (tmp_path / ".gitattributes").read_bytes() == (
        b"*.png binary\r\n.engram/manifest.json   merge=engram\r\n*.sh text eol=lf\r\n"
        b".engram/memories.jsonl merge=engram diff=engram\r\n"
    )
    assert check_setup(sub).attributes
    assert install(sub, command="/opt/engram") == []
    assert install(sub, command="/usr/bin/engram") != []  # a changed command is updated
    with Repo(str(tmp_path)) as repo:
        driver = repo.get_config().get((b"merge", b"engram"), b"driver")
    assert driver == b"/usr/bin/engram merge-driver %O %A %B %P"


def test_git_file_pointing_elsewhere(tmp_path: Path) -> None:
    """Worktrees and submodules have a .git file; the config lives in the real git folder."""
    Repo.init(str(tmp_path / "store"), mkdir=True).close()
    (tmp_path / "store" / ".git").rename(tmp_path / "gitdir")
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").write_text("gitdir: ../gitdir\n")
    assert check_setup(work) == Setup(attributes=False, driver=False, repo=True)
    assert len(install(work)) == 3
    assert (work / ".gitattributes").exists()
    assert b'[merge "engram"]' in (tmp_path / "gitdir" / "config").read_bytes()
    assert check_setup(work) == Setup(
        attributes=True, driver=True, repo=True, diff_attribute=True, diff=True
    )


# --- merge_driver ----------------------------------------------------------------------------


def drive(
    tmp_path: Path, base: bytes | None, ours: bytes, theirs: bytes, name: str = MEMORIES
) -> tuple[int, bytes]:
    paths = [tmp_path / "O", tmp_path / "A", tmp_path / "B"]
    for path, data in zip(paths, (base, ours, theirs), strict=True):
        if data is not None:
            path.write_bytes(data)
    code = merge_driver(*paths, name)
    return code, paths[1].read_bytes()


A, B, C, D = (f"{letter}aaaaaaaaaaaaaaaaaaaaaaaaa" for letter in "abcd")


def test_driver_merges_different_additions(tmp_path: Path) -> None:
    base = jsonl(rec(B, "base"))
    code, out = drive(
        tmp_path, base, jsonl(rec(A, "ours"), rec(B, "base")), jsonl(rec(B, "base"), rec(C, "th"))
    )
    assert code == 0
    assert out == jsonl(rec(A, "ours"), rec(B, "base"), rec(C, "th"))


def test_driver_field_merge_and_conflicts_kept(tmp_path: Path) -> None:
    base = jsonl(rec(A, "t", tags=["x"]))
    ours = jsonl(rec(A, "t ours", rev=2, updated="02", tags=["x", "o"]))
    theirs = jsonl(rec(A, "t", rev=2, updated="03", tags=["x", "t"], importance=5))
    code, out = drive(tmp_path, base, ours, theirs)
    assert code == 0
    merged = parse(out)[A]
    assert (merged["title"], merged["importance"], merged["rev"]) == ("t ours", 5, 3)
    assert merged["tags"] == ["o", "t", "x"]
    assert "conflicts" not in merged
    # the same field changed differently: the losing text is kept in conflicts
    theirs = jsonl(rec(A, "t theirs", rev=2, updated="03"))
    code, out = drive(tmp_path, base, ours, theirs)
    assert code == 0
    merged = parse(out)[A]
    assert merged["title"] == "t theirs"  # later updated_at wins
    assert [c["title"] for c in merged["conflicts"]] == ["t ours"]
    assert canonical(out)


def test_driver_deletion_on_one_side(tmp_path: Path) -> None:
    base = jsonl(rec(A, "a"), rec(B, "b"))
    tomb = {"id": B, "rev": 2, "updated_at": "2026-01-05T00:00:00.000Z", "deleted_at": "x"}
    code, out = drive(tmp_path, base, jsonl(rec(A, "a")), jsonl(rec(A, "a"), rec(B, "b")))
    assert (code, out) == (0, jsonl(rec(A, "a")))  # line removed on one side: removed
    code, out = drive(tmp_path, base, jsonl(rec(A, "a"), rec(B, "b")), jsonl(rec(A, "a"), tomb))
    assert (code, out) == (0, jsonl(rec(A, "a"), tomb))  # tombstone travels


def test_driver_base_missing_and_output_canonical(tmp_path: Path) -> None:
    ours = b'{"title":"o","id":"' + A.encode() + b'","kind":"fact","created_at":"x",'
    ours += b'"updated_at":"2026-01-01T00:00:00.000Z","rev":1}\n\n'
    code, out = drive(tmp_path, None, ours, jsonl(rec(B, "b")))
    assert code == 0
    assert canonical(out)
    assert set(parse(out)) == {A, B}
    assert out.index(A.encode()) < out.index(B.encode())


@pytest.mark.parametrize("side", ["ours", "theirs"])
def test_driver_refuses_conflict_markers(
    tmp_path: Path, side: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = jsonl(rec(A, "a")) + b"<<<<<<< HEAD\n" + jsonl(rec(B, "b")) + b">>>>>>> x\n"
    ours = bad if side == "ours" else jsonl(rec(C, "c"))
    theirs = bad if side == "theirs" else jsonl(rec(C, "c"))
    code, out = drive(tmp_path, b"", ours, theirs)
    assert code == 1
    assert out == ours  # untouched
    err = capsys.readouterr().err
    assert f"{MEMORIES} ({side}):2" in err and "conflict marker" in err


def test_driver_refuses_unreadable_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ours = jsonl(rec(A, "a")) + b"{not json\n"
    code, out = drive(tmp_path, b"", ours, b"")
    assert (code, out) == (1, ours)
    assert "(ours):2" in capsys.readouterr().err


# --- the fast path against the reference merge -------------------------------------------------

IDS = [f"{letter}bbbbbbbbbbbbbbbbbbbbbbbbb" for letter in "abcdef"]
TITLES = ["t", "t2", "café ✓", 'say "hi"\tnow']


@st.composite
def version(draw: st.DrawFn, rid: str, base: dict[str, Any] | None) -> dict[str, Any] | None:
    """Return one side's version of a memory: the base's, dropped, edited, new or tombstoned."""
    action = draw(st.sampled_from(["same", "same", "drop", "edit", "new", "tomb"]))
    if action == "same" or (action == "edit" and base is None):
        return base if action == "same" else draw(version(rid, None))
    if action == "drop":
        return None
    if action == "tomb":
        return {
            "id": rid,
            "rev": draw(st.integers(1, 4)),
            "updated_at": "2026-01-09T00:00:00.000Z",
        } | {"deleted_at": "2026-01-09T00:00:00.000Z"}
    start = base or rec(rid, draw(st.sampled_from(TITLES)))
    edited = dict(start)
    edited["rev"] = start["rev"] + draw(st.integers(0, 2))
    edited["updated_at"] = f"2026-01-0{draw(st.integers(1, 4))}T00:00:00.000Z"
    for key, values in (("title", TITLES), ("content", ["c", "c2", "ç"])):
        if draw(st.booleans()):
            edited[key] = draw(st.sampled_from(values))
    if draw(st.booleans()):
        edited["tags"] = draw(st.lists(st.sampled_from(["x", "y", "z"]), unique=True))
    extra = draw(
        st.sampled_from([None, None, None, ("score", 1e16), ("big", 2**70), ("n", [{"id": "q"}])])
    )
    if extra is not None:
        edited[extra[0]] = extra[1]
    return edited


@st.composite
def render(draw: st.DrawFn, records: list[dict[str, Any]]) -> bytes:
    """Write a side's records, sometimes not canonically: unsorted, CRLF, spaced, twice."""
    lines = [canonical_line(r).rstrip(b"\n") for r in sorted(records, key=lambda r: r["id"])]
    if lines and draw(st.booleans()):
        at = draw(st.integers(0, len(lines) - 1))
        value = json.loads(lines[at])
        if draw(st.booleans()):
            lines[at] = json.dumps(value).encode()  # spaces, \u escapes
        elif "big" not in value:
            lines[at] = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)  # its own floats
    if records and draw(st.integers(0, 3)) == 0:  # an id twice: the same line or another
        record = draw(st.sampled_from(records))
        if draw(st.booleans()):
            record = record | {"title": "again", "rev": draw(st.integers(1, 5))}
        lines.append(canonical_line(record).rstrip(b"\n"))
    if draw(st.integers(0, 4)) == 0:
        lines.insert(draw(st.integers(0, len(lines))), b"  ")
    if draw(st.booleans()):
        lines = draw(st.permutations(lines))
    newline = draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))
    return newline.join(lines) + (newline if lines and draw(st.booleans()) else b"")


@st.composite
def three_sides(draw: st.DrawFn) -> tuple[bytes, bytes, bytes]:
    base = {
        rid: draw(version(rid, None)) for rid in draw(st.lists(st.sampled_from(IDS), unique=True))
    }
    sides = [[r for r in base.values() if r is not None]]
    for _ in range(2):
        side = [draw(version(rid, base.get(rid))) for rid in IDS]
        sides.append([r for r in side if r is not None])
    base_bytes, ours, theirs = (draw(render(side)) for side in sides)
    return base_bytes, ours, theirs


def reference_merge(*sides: bytes) -> bytes:
    """The merge by definition: every line parsed, ``merge3``, every record serialised."""
    parsed = [
        [parse_line(line, path="x", lineno=0) for line in data.splitlines() if line.strip()]
        for data in sides
    ]
    return b"".join(canonical_line(record) for record in merge3(*parsed))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sides=three_sides())
def test_driver_fast_path_equals_the_reference_merge(
    tmp_path: Path, sides: tuple[bytes, bytes, bytes]
) -> None:
    code, out = drive(tmp_path, *sides)
    assert code == 0
    assert out == reference_merge(*sides)


def test_driver_takes_a_line_with_a_settled_conflict_as_merge3_does(tmp_path: Path) -> None:
    """A side changed on one branch only, whose conflicts entry is its own text again."""
    base = {
        "id": A, "kind": "note", "title": "alpha", "content": "one", "rev": 2,
        "created_at": "2024-05-01T00:00:00.000Z", "updated_at": "2024-05-03T00:00:00.000Z",
        "conflicts": [{"rev": 2, "updated_at": "2024-05-02T00:00:00.000Z", "author": "r0",
                       "title": "alpha", "content": "two"}],
    }  # fmt: skip
    theirs = {**base, "content": "two", "rev": 3, "updated_at": "2024-05-04T00:00:00.000Z"}
    sides = (canonical_line(base), canonical_line(base), canonical_line(theirs))
    code, out = drive(tmp_path, *sides)
    assert code == 0
    assert out == reference_merge(*sides)
    assert b"conflicts" not in out  # the text it holds again is no divergence


def test_driver_reference_on_a_larger_store(tmp_path: Path) -> None:
    """Most lines equal, some changed on one side, some on both, some added, some deleted."""
    base = [rec(f"m{n:04d}xxxxxxxxxxxxxxxxxxxxx", f"title {n}", tags=["x"]) for n in range(300)]
    ours, theirs = [dict(r) for r in base], [dict(r) for r in base]
    for n in range(0, 300, 7):
        ours[n].update(title=f"ours {n}", rev=2, updated="02")
    for n in range(0, 300, 5):
        theirs[n].update(tags=["x", "t"], rev=2, updated="03")
    for n in range(0, 300, 11):
        theirs[n].update(title=f"theirs {n}", rev=2, updated="03")
    theirs[3] = {"id": base[3]["id"], "rev": 2, "updated_at": "x", "deleted_at": "x"}
    del ours[6]
    ours.append(rec("zzzzzzzzzzzzzzzzzzzzzzzzzz", "new"))
    sides = (jsonl(*base), jsonl(*ours), jsonl(*theirs))
    code, out = drive(tmp_path, *sides)
    assert code == 0
    assert out == reference_merge(*sides)
    merged = parse(out)
    assert merged[base[0]["id"]]["conflicts"]  # changed title on both sides
    assert merged[base[7]["id"]]["title"] == "ours 7"
    assert merged[base[10]["id"]]["tags"] == ["x", "t"]  # changed on their side only
    assert base[6]["id"] not in merged  # removed on one side, unchanged on the other


def manifest(*chunks: dict[str, Any]) -> bytes:
    return json.dumps({"version": 2, "chunks": list(chunks)}).encode()


def chunk(cid: str, memories: int = 1) -> dict[str, Any]:
    """A manifest entry; ``cid`` like "c1" becomes a valid (hex) chunk id, "c1c1c1c1"."""
    return {
        "id": cid * 4,
        "created_by": "m",
        "created_at": "2026-01-01T00:00:00Z",
        "memories": memories,
    }


def test_driver_manifest_union(tmp_path: Path) -> None:
    base = manifest(chunk("c1"))
    ours = manifest(chunk("c3"), chunk("c1"), chunk("c2", 1))
    theirs = manifest(chunk("c1"), chunk("c2", 4), chunk("c0"))
    code, out = drive(tmp_path, base, ours, theirs, name=MANIFEST)
    assert code == 0
    value = json.loads(out)
    # Our side's order stays; their new entry comes after ours (Go imports in this order).
    assert [c["id"] for c in value["chunks"]] == [chunk(c)["id"] for c in ("c3", "c1", "c2", "c0")]
    assert value["chunks"][2]["memories"] == 4  # the greater canonical JSON
    assert value["version"] == 2
    assert out != manifest_bytes(value)  # our layout, not the canonical one
    code, out = drive(tmp_path, None, b"", manifest(chunk("c9")), name="sub/.engram/manifest.json")
    assert code == 0 and [c["id"] for c in json.loads(out)["chunks"]] == [chunk("c9")["id"]]
    # An entry whose id is no chunk id (a hostile "../x") is dropped, as every reader drops it.
    hostile = manifest(chunk("c1"), {**chunk("c2"), "id": "../x"})
    code, out = drive(tmp_path, None, b"", hostile, name=MANIFEST)
    assert code == 0 and [c["id"] for c in json.loads(out)["chunks"]] == [chunk("c1")["id"]]
    code, _ = drive(tmp_path, None, b"[1, 2]", manifest(), name=MANIFEST)
    assert code == 1


def test_split_markers_diff3_and_several_hunks() -> None:
    data = (
        b"top\n<<<<<<< ours\no1\n||||||| base\nb1\n=======\nt1\n>>>>>>> theirs\n"
        b"mid\n<<<<<<< ours\no2\n=======\n>>>>>>> theirs\nend\n"
    )
    assert split_markers(data) == (
        b"top\nb1\nmid\nend\n",
        b"top\no1\nmid\no2\nend\n",
        b"top\nt1\nmid\nend\n",
    )


# --- with the real git binary ----------------------------------------------------------------


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@x.org",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@x.org",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    assert GIT is not None
    return subprocess.run(
        [GIT, "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=check,
        timeout=60,
    )


def two_branches(
    root: Path, ours: bytes, theirs: bytes, base: bytes, manifests: tuple[bytes, ...] = ()
) -> None:
    """Commit base on main, ours on main and theirs on a branch `other` made from base.

    ``manifests`` (base, ours, theirs) adds manifest.json versions to the same commits.
    """
    git(root, "init", "-q")
    (root / ".engram").mkdir()

    def write(memories: bytes, side: int) -> None:
        (root / MEMORIES).write_bytes(memories)
        if manifests:
            (root / MANIFEST).write_bytes(manifests[side])

    write(base, 0)
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "base")
    git(root, "checkout", "-q", "-b", "other")
    write(theirs, 2)
    git(root, "commit", "-q", "-am", "theirs")
    git(root, "checkout", "-q", "main")
    write(ours, 1)
    git(root, "commit", "-q", "-am", "ours")


def edited_sides() -> tuple[bytes, bytes, bytes]:
    base = [rec(A, "a"), rec(B, "b"), rec(C, "c")]
    ours = [rec(A, "a ours", 2, "02"), rec(B, "b ours", 2, "02"), rec(C, "c"), rec("a1" * 13, "n")]
    theirs = [rec(A, "a"), rec(B, "b theirs", 2, "03"), rec(C, "c theirs", 2, "03"), rec(D, "d")]
    return jsonl(*base), jsonl(*ours), jsonl(*theirs)


@needs_git
def test_git_merge_calls_the_driver(tmp_path: Path) -> None:
    base, ours, theirs = edited_sides()
    two_branches(tmp_path, ours, theirs, base)
    script = (
        "import sys; from pathlib import Path; from engram.sync.gitmerge import merge_driver; "
        "sys.exit(merge_driver(*map(Path, sys.argv[2:5]), sys.argv[5]))"
    )
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}"
    assert install(tmp_path, command=command)
    # dulwich leaves a value with ";" unquoted (git would cut it there): install quotes it
    driver = git(tmp_path, "config", "--get", "merge.engram.driver").stdout
    assert driver == f"{command} merge-driver %O %A %B %P\n"
    # without the attributes committed, git still reads them from the work tree
    result = git(tmp_path, "merge", "--no-edit", "other", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(tmp_path, "status", "--porcelain", "--", MEMORIES).stdout == ""
    out = (tmp_path / MEMORIES).read_bytes()
    assert canonical(out)
    merged = parse(out)
    assert set(merged) == {A, B, C, D, "a1" * 13}
    assert (merged[A]["title"], merged[C]["title"]) == ("a ours", "c theirs")
    assert merged[B]["title"] == "b theirs"
    assert [c["title"] for c in merged[B]["conflicts"]] == ["b ours"]


@needs_git
def test_resolve_a_conflicted_index(tmp_path: Path) -> None:
    base, ours, theirs = edited_sides()
    manifests = tuple(
        json.dumps({"version": 2, "chunks": chunks}, indent=2, sort_keys=True).encode()
        for chunks in ([chunk("c1")], [chunk("c1"), chunk("c2")], [chunk("c1"), chunk("c3")])
    )
    two_branches(tmp_path, ours, theirs, base, manifests)
    result = git(tmp_path, "merge", "--no-edit", "other", check=False)
    assert result.returncode != 0  # no driver: git's line merge conflicts
    status = git(tmp_path, "status", "--porcelain").stdout
    assert f"UU {MEMORIES}" in status and f"UU {MANIFEST}" in status
    with Repo(str(tmp_path)) as repo:
        assert isinstance(repo.open_index()[MEMORIES.encode()], ConflictedIndexEntry)
    done = resolve(tmp_path)
    assert [(r.path, r.records, r.conflicts) for r in done] == [
        (MANIFEST, 3, 0),
        (MEMORIES, 5, 1),
    ]
    # Our side's indented layout and order stay; theirs comes after ours.
    assert [c["id"] for c in json.loads((tmp_path / MANIFEST).read_text())["chunks"]] == [
        chunk(c)["id"] for c in ("c1", "c2", "c3")
    ]
    out = (tmp_path / MEMORIES).read_bytes()
    assert canonical(out)
    merged = parse(out)
    assert (merged[A]["title"], merged[C]["title"], merged[B]["title"]) == (
        "a ours",
        "c theirs",
        "b theirs",
    )
    status = git(tmp_path, "status", "--porcelain").stdout
    assert "UU" not in status and "M  .engram/memories.jsonl" in status
    assert "M  .engram/manifest.json" in status
    assert git(tmp_path, "diff", "--name-only").stdout == ""  # staged = work tree
    git(tmp_path, "commit", "-q", "--no-edit")
    assert git(tmp_path, "show", f"HEAD:{MEMORIES}").stdout.encode() == out
    assert resolve(tmp_path) == []


# --- resolve without git ---------------------------------------------------------------------


def dulwich_commit(root: Path, files: dict[str, bytes | None], message: str, when: int) -> str:
    for name, data in files.items():
        path = root / name
        if data is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    with Repo(str(root)) as repo:
        porcelain.add(repo, paths=[str(root / name) for name in files if files[name] is not None])
        removed = [name for name, data in files.items() if data is None]
        if removed:
            porcelain.rm(repo, paths=[str(root / name) for name in removed], cached=True)
        author = message.split(":", 1)[0].encode() + b" <a@x.org>"
        sha = porcelain.commit(
            repo,
            message=message.encode(),
            author=author,
            committer=author,
            author_timestamp=when,
            commit_timestamp=when,
            author_timezone=0,
            commit_timezone=0,
        )
    return sha.decode()


def test_resolve_committed_markers(tmp_path: Path) -> None:
    Repo.init(str(tmp_path)).close()
    marked = (
        jsonl(rec(A, "a"))
        + b"<<<<<<< HEAD\n"
        + jsonl(rec(B, "b ours", 2, "02"))
        + b"||||||| base\n"
        + jsonl(rec(B, "b"))
        + b"=======\n"
        + jsonl(rec(B, "b theirs", 2, "03"), rec(C, "c"))
        + b">>>>>>> other\n"
        + jsonl(rec(D, "d"))
    )
    dulwich_commit(tmp_path, {MEMORIES: marked, MANIFEST: manifest(chunk("c1"))}, "Ada: x", 1)
    done = resolve(tmp_path)
    assert [(r.path, r.records, r.conflicts) for r in done] == [(MEMORIES, 4, 1)]
    out = (tmp_path / MEMORIES).read_bytes()
    assert canonical(out)
    merged = parse(out)
    assert set(merged) == {A, B, C, D}
    assert merged[B]["title"] == "b theirs"
    assert [c["title"] for c in merged[B]["conflicts"]] == ["b ours"]
    with Repo(str(tmp_path)) as repo:
        entry = repo.open_index()[MEMORIES.encode()]
        assert isinstance(entry, IndexEntry)
        assert repo.object_store[entry.sha].as_raw_string() == out
    assert resolve(tmp_path) == []
    if GIT:
        status = git(tmp_path, "status", "--porcelain").stdout
        assert "M  .engram/memories.jsonl" in status
        assert git(tmp_path, "diff", "--name-only", "--", MEMORIES).stdout == ""


def test_resolve_unreadable_line_is_invalid_input(tmp_path: Path) -> None:
    Repo.init(str(tmp_path)).close()
    marked = b"<<<<<<< HEAD\n{oops\n=======\n>>>>>>> x\n"
    marked_manifest = b"<<<<<<< HEAD\n" + manifest(chunk("c1")) + b"\n=======\n"
    marked_manifest += manifest(chunk("c2")) + b"\n>>>>>>> x\n"
    dulwich_commit(tmp_path, {MEMORIES: marked, MANIFEST: marked_manifest}, "Ada: x", 1)
    with pytest.raises(InvalidInput, match=r"memories.jsonl \(ours\):1"):
        resolve(tmp_path)
    # nothing written, not even the manifest that could be merged
    assert (tmp_path / MEMORIES).read_bytes() == marked
    assert (tmp_path / MANIFEST).read_bytes() == marked_manifest
    (tmp_path / MEMORIES).write_bytes(b"<<<<<<< HEAD\n=======\n")
    with pytest.raises(InvalidInput, match="never closed"):
        resolve(tmp_path)


# --- memory_log ------------------------------------------------------------------------------


def test_memory_log(tmp_path: Path) -> None:
    Repo.init(str(tmp_path)).close()
    other = rec(B, "other")
    shas = [
        dulwich_commit(tmp_path, {"README": b"hi\n"}, "Ada: readme", BASE_TIME),
        dulwich_commit(tmp_path, {MEMORIES: jsonl(rec(A, "v1"))}, "Ada: add", BASE_TIME + 60),
        dulwich_commit(tmp_path, {MEMORIES: jsonl(rec(A, "v1"), other)}, "Bob: b", BASE_TIME + 120),
        dulwich_commit(
            tmp_path, {MEMORIES: jsonl(rec(A, "v2", 2), other)}, "Cy: edit\n\nbody", BASE_TIME + 180
        ),
    ]
    tomb = {"id": A, "rev": 3, "updated_at": "2026-01-09T00:00:00.000Z", "deleted_at": "x"}
    shas.append(
        dulwich_commit(tmp_path, {MEMORIES: jsonl(tomb, other)}, "Dee: del", BASE_TIME + 240)
    )
    shas.append(dulwich_commit(tmp_path, {MEMORIES: jsonl(other)}, "Eve: purge", BASE_TIME + 300))
    log = memory_log(tmp_path, A)
    assert [(v.commit, v.change, v.author) for v in log] == [
        (shas[5], "removed", "Eve"),
        (shas[4], "deleted", "Dee"),
        (shas[3], "changed", "Cy"),
        (shas[1], "added", "Ada"),
    ]
    assert log[0].record is None and log[1].record == tomb
    assert log[2].record == rec(A, "v2", 2) and log[2].message == "Cy: edit"
    assert log[3].date == "2023-11-14T22:14:20.000Z"
    assert [v.change for v in memory_log(tmp_path, A, limit=2)] == ["removed", "deleted"]
    assert memory_log(tmp_path, "zzzz") == []


@pytest.mark.parametrize("field_merge", [False, True])
def test_memory_log_merges(tmp_path: Path, field_merge: bool) -> None:
    """A merge that took one side's version is not a change; a field merge is."""
    Repo.init(str(tmp_path)).close()
    base = dulwich_commit(tmp_path, {MEMORIES: jsonl(rec(A, "v1"))}, "Ada: add", BASE_TIME)
    side = dulwich_commit(tmp_path, {MEMORIES: jsonl(rec(A, "v2", 2))}, "Bob: edit", BASE_TIME + 60)
    with Repo(str(tmp_path)) as repo:
        repo.refs[b"refs/heads/master"] = base.encode()
        repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/master")
    porcelain.reset(str(tmp_path), "hard", base)
    main = dulwich_commit(
        tmp_path, {MEMORIES: jsonl(rec(A, "v1"), rec(B, "b"))}, "Cy: b", BASE_TIME + 120
    )
    merged_a = rec(A, "v2", 3, tags=["m"]) if field_merge else rec(A, "v2", 2)
    merged = jsonl(merged_a, rec(B, "b"))
    (tmp_path / MEMORIES).write_bytes(merged)
    with Repo(str(tmp_path)) as repo:
        porcelain.add(repo, paths=[str(tmp_path / MEMORIES)])
        merge_sha = repo.get_worktree().commit(
            message=b"Dee: merge",
            author=b"Dee <d@x.org>",
            committer=b"Dee <d@x.org>",
            commit_timestamp=BASE_TIME + 180,
            commit_timezone=0,
            author_timestamp=BASE_TIME + 180,
            author_timezone=0,
            merge_heads=[side.encode()],
        )
    log = memory_log(tmp_path, A)
    expected = [(side, "changed", "Bob"), (base, "added", "Ada")]
    if field_merge:
        expected.insert(0, (merge_sha.decode(), "changed", "Dee"))
    assert [(v.commit, v.change, v.author) for v in log] == expected
    assert main not in [v.commit for v in log]
    assert log[0].record == merged_a


@needs_git
def test_linked_worktree_shares_the_config(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    git(main, "init", "-q")
    git(main, "commit", "-q", "--allow-empty", "-m", "root")
    git(main, "worktree", "add", "-q", str(tmp_path / "wt"))
    done = install(tmp_path / "wt")
    assert len(done) == 3
    assert (tmp_path / "wt" / ".gitattributes").exists()  # the linked work tree's root
    assert not (main / ".gitattributes").exists()
    assert check_setup(main) == Setup(attributes=False, driver=True, repo=True, diff=True)
    assert git(main, "config", "--get", "merge.engram.name").stdout == "engram memories\n"


def test_driver_rewrites_lines_only_orjson_calls_canonical(tmp_path: Path) -> None:
    """A float or a wide integer in an unchanged line: the output is still canonical JSON."""
    odd = [rec(A, "a", score=1e-5), rec(B, "b", big=2**70), rec(C, "c", n=[{"id": "q"}])]
    lines = [orjson.dumps(odd[0], option=orjson.OPT_SORT_KEYS), canonical_line(odd[1])]
    lines.append(json.dumps(odd[2], ensure_ascii=False).encode())
    data = b"\r\n".join(lines[::-1])
    code, out = drive(tmp_path, data, data, data)
    assert code == 0
    assert out == jsonl(*odd) == reference_merge(data, data, data)
    assert b'"score":1e-05' in out


@needs_git
def test_the_driver_runs_when_engram_is_not_on_path(tmp_path: Path) -> None:
    """Issue 17: with engram in a virtualenv that is not active, `engram: not found` on every
    merge. The command recorded runs this installation, whatever PATH git has."""
    from engram.project.git import driver_command

    base, ours, theirs = edited_sides()
    two_branches(tmp_path, ours, theirs, base)
    command = driver_command()
    assert runs(command)
    assert install(tmp_path, command=command)
    assert GIT is not None
    bare_path = os.pathsep.join(
        folder for folder in ("/usr/bin", "/bin", str(Path(GIT).parent)) if Path(folder).is_dir()
    )
    assert shutil.which("engram", path=bare_path) is None  # no engram for git's shell
    env = {**os.environ, "PATH": bare_path, "GIT_CONFIG_NOSYSTEM": "1"}
    env.update(GIT_AUTHOR_NAME="Ada", GIT_AUTHOR_EMAIL="ada@x.org")
    env.update(GIT_COMMITTER_NAME="Ada", GIT_COMMITTER_EMAIL="ada@x.org")
    result = subprocess.run(
        [GIT, "merge", "--no-edit", "other"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    merged = parse((tmp_path / MEMORIES).read_bytes())
    assert set(merged) == {A, B, C, D, "a1" * 13}


def test_runs_tells_whether_a_driver_command_can_start(tmp_path: Path) -> None:
    script = tmp_path / "my engram"
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)
    assert runs(f"{shlex.quote(str(script))} merge-driver %O %A %B %P")
    assert runs(f"{shlex.quote(sys.executable)} -m engram merge-driver %O %A %B %P")
    assert not runs(f"{shlex.quote(str(tmp_path / 'gone'))} merge-driver %O %A %B %P")
    assert not runs("engram-not-installed-anywhere merge-driver %O %A %B %P")
    assert not runs("")
    assert not runs("'unterminated")
