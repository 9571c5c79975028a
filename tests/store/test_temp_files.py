"""Temp files of killed writes: never committed, named by doctor, removed by the next run.

A real ``engram sync`` is killed with SIGKILL while it writes a chunk of a large store (the test
watches the store's folders and kills it the moment a temp file appears, for a bounded number
of rounds); ``git add -A`` must not take the temp file it left, and the next command that takes
the store lock removes it. Then the rule that decides what is a leftover: the temp file of a
writer that still runs is kept (real processes: one alive, one killed), an old one is not, and
``doctor`` names leftovers without touching them until ``--fix``. A store whose .gitignore
predates the temp-file pattern gets it on its next write.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from engram.fileio import TEMP_PATTERN, is_temp, temp_writer
from engram.service import Engram
from tests.conftest import run_cli

GIT = subprocess.run(["git", "--version"], capture_output=True, check=False).returncode == 0
pytestmark = pytest.mark.skipif(not GIT, reason="needs the git command line")


def temps(engram_dir: Path) -> list[Path]:
    """Every temp file in .engram/ and the folders below it."""
    return sorted(path for path in engram_dir.rglob("*") if is_temp(path.name))


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True)
    return done.stdout.decode()


# The engram command line, halted inside the atomic write of the file whose name ends with
# argv[1]: its temp file is written (and fsynced) but not yet renamed; the test kills it there.
HALT_IN_WRITE = """
    import os, sys, time
    ending = sys.argv.pop(1)
    replace = os.replace

    def halting(src, dst, *args, **kwargs):
        if os.path.basename(src).endswith(".tmp") and str(dst).endswith(ending):
            print(src, flush=True)
            time.sleep(120)
        return replace(src, dst, *args, **kwargs)

    os.replace = halting
    sys.argv[0] = "engram"
    from engram.__main__ import main
    main()
"""
WRITES = [
    ("sync", ".jsonl.gz"),  # a chunk
    ("sync", "manifest.json"),
    ("sync", "state/sync.json"),  # the sync cursor
    ("remember", "memories.jsonl"),
]


def kill_mid_write(root: Path, command: str, ending: str) -> Path:
    """Run ``engram COMMAND`` and SIGKILL it inside the write of ``ending``; return its temp."""
    args = [command] if command == "sync" else [command, "Cut short", "killed while written"]
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HALT_IN_WRITE), ending, *args],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().decode().strip()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        _, err = child.communicate(timeout=60)
    assert line, err.decode()
    assert child.returncode == -signal.SIGKILL
    leftover = Path(line)
    assert leftover.exists() and temp_writer(leftover.name) == child.pid
    return leftover


@pytest.mark.parametrize(("command", "ending"), WRITES)
def test_a_write_killed_half_way_leaves_nothing_git_takes(
    project: Engram, command: str, ending: str
) -> None:
    root = project.root
    for n in range(3):
        project.remember(f"Memory {n}", f"journalled for the next export, number {n}")
    project.close()
    leftover = kill_mid_write(root, command, ending)
    assert leftover.stat().st_size > 0  # the bytes were written, only the rename was not
    git(root, "add", "-A")
    status = git(root, "status", "--porcelain", "--untracked-files=all")
    assert ".engram/memories.jsonl" in status  # git did take the store's files
    assert ".tmp" not in status, status
    # The next run that takes the store lock (a write) removes it; nothing else is lost.
    saved = run_cli("remember", "After the kill", "the store takes writes", cwd=root)
    assert saved.returncode == 0, saved.stderr.decode()
    assert not leftover.exists()
    assert temps(root / ".engram") == []
    synced = run_cli("sync", "--json", cwd=root)
    assert synced.returncode == 0, synced.stderr.decode()
    with Engram.open(root) as engram:
        titles = {hit.record["title"] for hit in engram.recall("memory", limit=10)}
        assert {"Memory 0", "Memory 1", "Memory 2"} <= titles
    assert temps(root / ".engram") == []


# A writer that makes its temp file as every engram write does, says so, and waits.
WRITER = """
    import sys, time
    from pathlib import Path
    from engram.fileio import temp_file
    fd, name = temp_file(Path(sys.argv[1]))
    print(name, flush=True)
    time.sleep(120)
"""


def start_writer(target: Path) -> tuple[subprocess.Popen[bytes], Path]:
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(WRITER), str(target)],
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None
    return child, Path(child.stdout.readline().decode().strip())


def test_only_leftovers_are_named_by_doctor_and_removed(project: Engram) -> None:
    root = project.root
    folder = root / ".engram"
    project.remember("Kept", "a memory the store holds")
    project.close()
    (folder / "chunks").mkdir()
    live, live_temp = start_writer(folder / "chunks" / "abc.jsonl.gz")
    dead, dead_temp = start_writer(folder / "manifest.json")
    try:
        os.kill(dead.pid, signal.SIGKILL)
        dead.communicate(timeout=60)
        old = folder / "state" / ".sync.json.k1ll3d.tmp"  # an older engram's name: no pid
        old.write_bytes(b'{"half')
        hours_ago = time.time() - 2 * 3600
        os.utime(old, (hours_ago, hours_ago))
        young = folder / ".manifest.json.a1b2c3.tmp"  # no pid, just written: may be a write
        young.write_bytes(b"{")
        everything = {live_temp, dead_temp, old, young}
        assert set(temps(folder)) == everything

        report = run_cli("doctor", cwd=root)
        out = report.stdout.decode()
        assert f"warning  temp files: {dead_temp}" in out, out
        assert f"warning  temp files: {old}" in out, out
        assert str(live_temp) not in out and str(young) not in out
        assert set(temps(folder)) == everything  # doctor without --fix removed nothing

        fixed = run_cli("doctor", "--fix", cwd=root)
        out = fixed.stdout.decode()
        assert f"fixed    temp files: {dead_temp}" in out, out
        assert f"fixed    temp files: {old}" in out, out
        assert set(temps(folder)) == {live_temp, young}  # the running write's file stays
        saved = run_cli("remember", "Another", "written beside a running writer", cwd=root)
        assert saved.returncode == 0, saved.stderr.decode()
        assert live_temp.exists()
    finally:
        os.kill(live.pid, signal.SIGKILL)
        live.communicate(timeout=60)
    # Its writer gone, the next write removes it too.
    saved = run_cli("remember", "Third", "after the writer was killed", cwd=root)
    assert saved.returncode == 0, saved.stderr.decode()
    assert set(temps(folder)) == {young}


def test_an_older_gitignore_learns_the_pattern_on_the_next_write(project: Engram) -> None:
    root = project.root
    ignore = root / ".engram" / ".gitignore"
    project.close()
    ignore.write_text("index/\nstate/\n", encoding="utf-8")
    report = run_cli("doctor", "--json", cwd=root)
    assert b'"check": "gitignore"' in report.stdout and TEMP_PATTERN.encode() in report.stdout
    assert ignore.read_text(encoding="utf-8") == "index/\nstate/\n"  # doctor alone: unchanged
    saved = run_cli("remember", "A write", "adds the line", cwd=root)
    assert saved.returncode == 0, saved.stderr.decode()
    lines = ignore.read_text(encoding="utf-8").splitlines()
    assert lines[:2] == ["index/", "state/"] and lines[-1] == TEMP_PATTERN
    # git agrees: a temp file anywhere below .engram/ is ignored.
    for where in (".engram", ".engram/chunks", ".engram/state"):
        probe = root / where / ".x.engram-1-abc.tmp"
        probe.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        checked = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "-q", str(probe)], check=False
        )
        assert checked.returncode == 0, probe
