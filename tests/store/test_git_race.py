"""A save racing a real ``git checkout`` loses neither what git brought nor what was saved.

git does not take engram's lock: it may replace memories.jsonl between a writer's read and its
rename. The store checks the file's identity right before the rename and splices its lines
again onto the new bytes (engram/store/jsonl.py). Real git, real writer processes.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engram.model import new_id
from engram.service import Engram
from engram.store import MemoryStore
from tests.helpers.places import ROOT

GIT = shutil.which("git")
pytestmark = [pytest.mark.skipif(GIT is None, reason="needs the git binary"), pytest.mark.slow]

STAMP = "2024-05-01T12:00:00.000Z"

# A writer: opens the store and waits; on "warm" reads it (the index catches up with the
# checkout before the race, and the secret rules compile); on "go" saves one memory.
WRITER = """
import sys
from pathlib import Path
from engram.service import Engram
from tests.helpers.places import ROOT
with Engram.open(Path(sys.argv[1])) as engram:
    print("started", flush=True)
    sys.stdin.readline()
    engram.recall("warm up")
    engram.project_ws.store.scrubber.record({"title": "warm up", "content": "the rules"})
    print("ready", flush=True)
    sys.stdin.readline()
    print(engram.remember(sys.argv[2], "saved while git checked out").record["id"], flush=True)
"""


def _records(count: int, tag: str) -> list[dict[str, object]]:
    return [
        {
            "id": new_id(),
            "kind": "fact",
            "title": f"{tag} memory {n}",
            "content": f"{tag} content number {n}, long enough to make the file a real size",
            "created_at": STAMP,
            "updated_at": STAMP,
            "rev": 1,
        }
        for n in range(count)
    ]


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        check=False,
    )


def _ids(path: Path) -> set[str]:
    scan = MemoryStore(path.parent).scan(path.read_bytes())
    assert not scan.problems, scan.problems[0].message
    return {str(r["id"]) for r in scan.records}


def test_saves_racing_git_checkout_lose_neither_side(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    assert _git(root, "init", "-q", "-b", "work").returncode == 0
    Engram.init(root, "demo")[0].close()
    config = root / ".engram" / "config.yaml"  # SQLite's full text: the quicker catch-up
    config.write_text(config.read_text().replace("backend: tantivy", "backend: fts5"))
    store = MemoryStore(root / ".engram")
    base = _records(300, "base")
    store.put(base)
    assert _git(root, "add", ".engram").returncode == 0
    assert _git(root, "commit", "-q", "-m", "base").returncode == 0
    assert _git(root, "checkout", "-q", "-b", "upstream").returncode == 0
    pulled = _records(50, "pulled")
    store.put(pulled)
    assert _git(root, "commit", "-q", "-am", "50 more").returncode == 0
    upstream_bytes = store.path.read_bytes()
    assert _git(root, "checkout", "-q", "work").returncode == 0
    pulled_ids = {str(r["id"]) for r in pulled}

    rng = random.Random(20)
    lag = 0.015
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    switched = 0
    rounds, most = 12, 36  # more rounds only where a busy machine kept git from landing
    batch = 4  # writers start (slow imports) a few at a time, ahead of their round
    for first in range(0, most, batch):
        if first >= rounds and switched >= rounds // 4:
            break
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, str(root), f"round {n}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
            for n in range(first, first + batch)
        ]
        try:
            for writer in writers:
                # How long git waits after the save starts: adapted so that git lands near the
                # save's own write (refused: too late, wait less; switched: wait a bit more).
                delay = lag * rng.uniform(0.5, 1.5)
                won = _race(root, writer, delay, store.path, upstream_bytes, pulled_ids)
                switched += won
                lag = min(0.1, lag * 1.3 + 0.002) if won else lag * 0.6
        finally:
            for writer in writers:
                if writer.poll() is None:
                    writer.kill()
                writer.wait(timeout=60)
                for stream in (writer.stdin, writer.stdout, writer.stderr):
                    if stream is not None and not stream.closed:
                        stream.close()
    assert switched >= rounds // 4  # the race really ran, not only refusals


def _race(
    root: Path,
    writer: subprocess.Popen[bytes],
    delay: float,
    path: Path,
    upstream_bytes: bytes,
    pulled_ids: set[str],
) -> int:
    """Run one save against one checkout; return 1 when git switched the branch, else 0."""
    assert writer.stdin is not None and writer.stdout is not None
    assert writer.stdout.readline() == b"started\n"
    # A clean tree at the base commit (the last round's save is thrown away).
    assert _git(root, "checkout", "-q", "-f", "work").returncode == 0
    before = _ids(path)
    writer.stdin.write(b"warm\n")
    writer.stdin.flush()
    assert writer.stdout.readline() == b"ready\n"
    writer.stdin.write(b"go\n")
    writer.stdin.flush()
    # git starts a little after the save did, so that its write lands inside the save
    # (between the store's read of the file and its own rename).
    time.sleep(delay)
    checkout = subprocess.Popen(
        ["git", "checkout", "-q", "upstream"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    saved = writer.stdout.readline().decode().strip()
    assert writer.stderr is not None
    assert writer.wait(timeout=60) == 0 and saved, writer.stderr.read().decode()
    checkout.wait(timeout=60)
    now = _ids(path)
    if checkout.returncode != 0:  # the save came first and git refused to overwrite it
        assert saved in now and before <= now
        return 0
    # git switched: the 50 pulled memories are on disk, and so is the save, unless git's own
    # write came after the save had ended (git checked the file, the save renamed, git wrote:
    # git's window, not ours; the file is then git's version byte for byte).
    assert pulled_ids <= now, f"{len(pulled_ids - now)} pulled memories lost"
    assert saved in now or path.read_bytes() == upstream_bytes
    return 1
