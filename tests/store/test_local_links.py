"""A hostile repository's symlinked .engram/state or index/ is refused, never written through.

Real repositories: a teammate commits ``.engram/state`` (or ``index/``, or a lock file in
state/) as a symbolic link to a folder outside the clone; a real ``git clone`` recreates it;
real ``python -m engram`` processes run in the clone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from engram.errors import UnsafePath
from engram.service import Engram
from engram.store import MemoryStore
from tests.conftest import run_cli

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="needs the git binary")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _hostile_clone(tmp_path: Path, link: str, target: Path) -> Path:
    """A repository whose committed .engram/<link> points at ``target``; return a clone."""
    origin = tmp_path / "origin"
    origin.mkdir()
    _git(origin, "init", "-q")
    Engram.init(origin, "victim")[0].close()
    for name in ("state", "index"):
        shutil.rmtree(origin / ".engram" / name, ignore_errors=True)
    where = origin / ".engram" / link
    where.parent.mkdir(parents=True, exist_ok=True)
    where.symlink_to(target)
    _git(origin, "add", "-f", ".engram")
    _git(origin, "commit", "-q", "-m", "a store with a trap")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(origin), str(clone))
    assert (clone / ".engram" / link).is_symlink()
    return clone


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b""
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize("link", ["state", "index", "state/store.lock"])
def test_a_committed_symlink_in_the_store_is_refused_and_nothing_goes_through_it(
    tmp_path: Path, link: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("the user's own file\n")
    target = outside / "precious.txt" if link.endswith(".lock") else outside
    clone = _hostile_clone(tmp_path, link, target)
    before = _snapshot(outside)
    for args in (("remember", "A note", "some text"), ("recall", "note"), ("sync",), ("daemon",)):
        done = run_cli(*args, cwd=clone)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        lines = done.stderr.decode().strip().splitlines()
        shown = clone / ".engram" / link
        assert lines[0].startswith(f"error: {shown} is a symbolic link"), lines
        assert len(lines) == 2 and f"rm {shown}" in lines[1]
        assert b"Traceback" not in done.stderr
    assert _snapshot(outside) == before  # not one file written, changed or created there
    # The way out the message gives: remove the link, and engram works again.
    os.unlink(clone / ".engram" / link)
    assert run_cli("remember", "A note", "some text", cwd=clone).returncode == 0
    assert _snapshot(outside) == before


def test_the_store_refuses_a_state_link_before_taking_its_lock(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    folder = tmp_path / ".engram"
    folder.mkdir()
    (folder / "state").symlink_to(outside)
    store = MemoryStore(folder)
    with pytest.raises(UnsafePath) as caught:
        store.put(
            [
                {
                    "id": "a" * 26,
                    "kind": "note",
                    "title": "t",
                    "created_at": "2024-05-01T12:00:00.000Z",
                    "updated_at": "2024-05-01T12:00:00.000Z",
                    "rev": 1,
                }
            ]
        )
    assert str(folder / "state") in caught.value.message
    assert list(outside.iterdir()) == [] and not store.path.exists()
