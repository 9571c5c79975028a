"""A remote sync that is killed at any moment leaves nothing a later sync cannot recover from.

Real processes (``python -m engram sync --remote``) killed with SIGKILL, a real bare remote in
tmp_path, and real ``git fsck`` where git is installed. A lock file a killed dulwich write left
is cleared only while no engram sync holds the repository's sync lock; one that may belong to a
running git is named in a one-line error instead.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo

from engram.errors import SyncError
from engram.service import Engram
from engram.store import MemoryStore
from engram.sync import chunks as chunks_mod
from engram.sync import remote as remote_mod
from tests.conftest import run_cli
from tests.helpers.places import ROOT
from tests.helpers.records import clone

GIT = shutil.which("git")
BRANCH = b"refs/heads/" + remote_mod.DEFAULT_BRANCH.encode()


def _clone(tmp_path: Path, name: str) -> tuple[Engram, Path]:
    remote = tmp_path / "remote.git"
    if not remote.exists():
        Repo.init_bare(str(remote), mkdir=True).close()
    return clone(tmp_path, name, remote), remote


def _sync(root: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "engram", "sync", "--remote", "origin", *extra],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _remote_files(remote: Path) -> dict[str, bytes]:
    """The store's files at the tip of the remote's branch."""
    repo = Repo(str(remote))
    try:
        commit = repo[repo.refs[BRANCH]]
        assert isinstance(commit, Commit)
        tree = repo[commit.tree]
        assert isinstance(tree, Tree)
        out: dict[str, bytes] = {}
        stack = [("", tree)]
        while stack:
            base, node = stack.pop()
            for entry in node.iteritems():
                obj = repo[entry.sha]
                path = base + entry.path.decode()
                if isinstance(obj, Tree):
                    stack.append((path + "/", obj))
                else:
                    assert isinstance(obj, Blob)
                    out[path] = obj.as_raw_string()
        return {k.removeprefix(".engram/"): v for k, v in out.items()}
    finally:
        repo.close()


def _assert_consistent(remote: Path, expected_ids: set[str]) -> None:
    """Every chunk hashes to its name, the manifest parses, no memory is missing."""
    files = _remote_files(remote)
    chunks = {p: b for p, b in files.items() if p.startswith("chunks/")}
    assert chunks
    for path, raw in chunks.items():
        ident = path.removeprefix("chunks/").removesuffix(chunks_mod.SUFFIX)
        assert chunks_mod.chunk_id(gzip.decompress(raw)) == ident, path
    manifest = chunks_mod.parse_manifest(files["manifest.json"])
    assert {e["id"] for e in manifest["chunks"]} <= {
        p.removeprefix("chunks/").removesuffix(chunks_mod.SUFFIX) for p in chunks
    }
    scan = MemoryStore(remote / "scratch").scan(files["memories.jsonl"])
    assert not scan.problems
    assert expected_ids <= {str(r["id"]) for r in scan.records}
    if GIT:
        fsck = subprocess.run(["git", "-C", str(remote), "fsck"], capture_output=True, check=False)
        assert fsck.returncode == 0, fsck.stderr.decode()


@pytest.mark.slow
def test_sync_killed_at_random_points_recovers_and_the_remote_stays_consistent(
    tmp_path: Path,
) -> None:
    engram, remote = _clone(tmp_path, "a")
    rng = random.Random(1913)
    ids: set[str] = set()
    with engram:
        for n in range(5):
            ids.add(engram.remember(f"first {n}", f"before any sync, number {n}").record["id"])
        start = time.monotonic()
        first = _sync(engram.root)
        _, err = first.communicate(timeout=120)
        assert first.returncode == 0, err.decode()
        span = time.monotonic() - start  # how long one whole sync takes here, start-up included
        killed = 0
        for round_ in range(10):
            for n in range(3):
                text = f"round {round_} memory {n}"
                ids.add(engram.remember(text, f"{text}, written between kills").record["id"])
            victim = _sync(engram.root)
            time.sleep(rng.uniform(0.1, 0.8) * span)
            victim.send_signal(signal.SIGKILL)
            killed += victim.wait(timeout=120) == -signal.SIGKILL
            for stream in (victim.stdout, victim.stderr):
                assert stream is not None
                stream.close()
        assert killed >= 5  # most rounds were really cut short
        done = run_cli("sync", "--remote", "origin", cwd=engram.root)
        assert done.returncode == 0, done.stderr.decode()
        assert b"Traceback" not in done.stderr
        # The local store is whole too, and nothing written between kills was lost.
        assert ids <= {str(r["id"]) for r in engram.project_ws.store.read_all()}
    _assert_consistent(remote, ids)
    if GIT:  # the clone's own repository is whole too (dangling objects of a kill are fine)
        fsck = subprocess.run(["git", "-C", str(engram.root), "fsck"], capture_output=True)
        assert fsck.returncode == 0, fsck.stderr.decode()


def _plant(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"half an object")
    return path


def test_locks_a_killed_sync_left_are_cleared_and_foreign_ones_named(tmp_path: Path) -> None:
    engram, remote = _clone(tmp_path, "a")
    git = engram.root / ".git"
    with engram:
        mine = engram.remember("Kept through a crash", "the sync after it pushes me").record
        # A loose object lock: only dulwich names object files so, and no sync is running.
        stale_object = _plant(git / "objects" / "ab" / ("c" * 38 + ".lock"))
        # A ref lock made after a sync started that was then killed (its run file stays).
        (git / remote_mod.SYNC_RUN).write_text(json.dumps({"pid": 999_999}) + "\n")
        stale_ref = _plant(git / (BRANCH.decode() + ".lock"))
        report = engram.sync(remote="origin").to_dict()
        assert report["remote"]["pushed"]
        assert sorted(report["remote"]["cleared_locks"]) == sorted(
            p.relative_to(git).as_posix() for p in (stale_object, stale_ref)
        )
        assert not stale_object.exists() and not stale_ref.exists()
        assert not (git / remote_mod.SYNC_RUN).exists()  # a finished sync removes it
        # The CLI says what it removed.
        (git / remote_mod.SYNC_RUN).write_text(json.dumps({"pid": 999_999}) + "\n")
        again = _plant(git / (BRANCH.decode() + ".lock"))
        said = run_cli("sync", "--remote", "origin", cwd=engram.root)
        assert said.returncode == 0, said.stderr.decode()
        assert f"removed stale lock file {BRANCH.decode()}.lock" in said.stderr.decode()
        assert not again.exists()
        _assert_consistent(remote, {str(mine["id"])})

        # The same ref lock with no killed sync behind it may be a running git's: named, kept.
        foreign = _plant(git / (BRANCH.decode() + ".lock"))
        engram.remember("Waits for git", "pushed once the lock is gone")
        done = run_cli("sync", "--remote", "origin", cwd=engram.root)
        assert done.returncode == 1
        lines = done.stderr.decode().strip().splitlines()
        assert lines[0].startswith("error: ") and str(foreign) in lines[0], lines
        assert len(lines) == 2 and lines[1].startswith("hint: ") and "remove" in lines[1]
        assert foreign.exists()
        foreign.unlink()
        assert engram.sync(remote="origin").to_dict()["remote"]["pushed"]


HOLDER = """
import sys
from pathlib import Path
from engram.sync import remote
with remote.exclusive(Path(sys.argv[1]), "origin"):
    print("holding", flush=True)
    sys.stdin.read()
"""


def test_a_sync_refuses_in_one_line_while_another_holds_the_sync_lock(tmp_path: Path) -> None:
    engram, _ = _clone(tmp_path, "a")
    with engram:
        engram.remember("Second in line", "waits for the first sync")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(engram.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"holding\n"
        stale_object = _plant(engram.root / ".git" / "objects" / "cd" / ("e" * 38 + ".lock"))
        refused = run_cli("sync", "--remote", "origin", cwd=engram.root)
        assert refused.returncode == 1
        lines = refused.stderr.decode().strip().splitlines()
        assert lines[0].startswith(f"error: another engram sync --remote (pid {holder.pid})")
        assert len(lines) == 2 and lines[1].startswith("hint: ")
        assert stale_object.exists()  # the live holder might be writing it: left alone
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
        assert holder.stdout is not None
        holder.stdout.close()
    done = run_cli("sync", "--remote", "origin", cwd=engram.root)
    assert done.returncode == 0, done.stderr.decode()
    assert not stale_object.exists()


def test_bad_chunks_and_a_torn_manifest_are_never_written_or_pushed(tmp_path: Path) -> None:
    a, remote = _clone(tmp_path, "a")
    b, _ = _clone(tmp_path, "b")
    with a, b:
        kept = a.remember("Good memory", "travels").record
        assert a.sync(remote="origin").to_dict()["remote"]["pushed"]
        # Someone pushes a chunk whose content does not hash to its name.
        forged = "f" * 32
        files = _remote_files(remote)
        files[f"chunks/{forged}{chunks_mod.SUFFIX}"] = gzip.compress(b'{"id":"forged"}\n')
        repo = Repo(str(remote))
        tip = repo.refs[BRANCH].decode()
        repo.close()
        store = remote / ".engram"  # the same folder in the remote's tree as in a clone's
        remote_mod.commit(remote, store, files, parents=[tip], message="forged", author="x <x@y>")
        got = b.sync(remote="origin")
        assert any(forged in p and "hashes to" in p for p in got.problems), got.problems
        assert not (b.root / ".engram" / "chunks" / f"{forged}{chunks_mod.SUFFIX}").exists()
        assert kept["id"] in {r["id"] for r in b.project_ws.store.read_all()}

        # A torn manifest and a truncated new chunk on b: rebuilt, and left out, not pushed.
        b.remember("Only on b", "in a chunk about to be torn")
        b.sync()
        folder = b.root / ".engram"
        on_remote = _remote_files(remote)
        torn = next(p for p in (folder / "chunks").iterdir() if f"chunks/{p.name}" not in on_remote)
        torn.write_bytes(torn.read_bytes()[:20])
        (folder / "manifest.json").write_bytes(b'{"version": 2, "chunks": [{"id": "')
        report = b.sync(remote="origin").to_dict()
        assert report["remote"]["pushed"]
        text = " ".join(report["problems"])
        assert "manifest.json" in text and "rebuilt" in text and torn.name in text
        chunks_mod.parse_manifest((folder / "manifest.json").read_bytes())
        pushed = _remote_files(remote)
        assert f"chunks/{torn.name}" not in pushed
        assert f"chunks/{forged}{chunks_mod.SUFFIX}" not in pushed
        chunks_mod.parse_manifest(pushed["manifest.json"])


def test_the_temp_files_of_killed_writes_are_never_committed_or_pushed(tmp_path: Path) -> None:
    a, remote = _clone(tmp_path, "a")
    with a:
        a.remember("Good memory", "travels")
        a.sync()
        folder = a.root / ".engram"
        chunk = next((folder / "chunks").iterdir())
        # What a sync killed inside an atomic write leaves next to its target.
        (folder / "chunks" / f".{chunk.name}.k1ll3d.tmp").write_bytes(chunk.read_bytes()[:9])
        (folder / ".manifest.json.k1ll3d.tmp").write_bytes(b'{"version": 2, "chu')
        assert a.sync(remote="origin").to_dict()["remote"]["pushed"]
    pushed = _remote_files(remote)
    assert f"chunks/{chunk.name}" in pushed
    assert not [path for path in pushed if path.endswith(".tmp")], sorted(pushed)


def test_dulwich_errors_reach_the_user_as_one_sync_error(tmp_path: Path) -> None:
    engram, _ = _clone(tmp_path, "a")
    with engram:
        ref_lock = _plant(engram.root / ".git" / (BRANCH.decode() + ".lock"))
        with pytest.raises(SyncError) as caught:
            remote_mod.commit(
                engram.root,
                engram.root / ".engram",
                {"memories.jsonl": b""},
                parents=[],
                message="m",
                author="a <a@b>",
            )
        assert str(ref_lock) in caught.value.message and "\n" not in caught.value.message
        assert "remove" in caught.value.hint
