"""Real OS processes racing on one store: no write lost, no torn file, crash safety (README).

Writers and readers are separate Python processes (tests/helpers/writer.py) that do their
imports first and then wait for a barrier file, so that they all start at the same moment.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

import pytest

from engram.errors import CorruptStore
from engram.model import is_tombstone
from engram.service import Engram
from engram.store import MemoryStore
from tests.helpers.places import HELPERS

HELPER = HELPERS / "writer.py"


@functools.cache
def _helper() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engram_test_writer", HELPER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def title_of(tag: str, number: int) -> str:
    """Return the title the helper gives writer ``tag``'s entry ``number``."""
    return str(_helper().title_of(tag, number))


pytestmark = pytest.mark.slow


_RUNNING: list[subprocess.Popen[bytes]] = []


def spawn(root: Path, *args: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, str(HELPER), str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _RUNNING.append(process)
    return process


@pytest.fixture(autouse=True)
def _no_helper_outlives_its_test() -> Iterator[None]:
    """Kill the helpers this test started if it failed before they ended (no orphans)."""
    yield
    while _RUNNING:
        process = _RUNNING.pop()
        if process.poll() is None:
            process.kill()
        process.communicate()


def finish(process: subprocess.Popen[bytes], timeout: float = 120) -> bytes:
    """Wait for a helper; fail with its stderr if it did not exit cleanly and silently."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"helper {process.args!r} timed out; stderr:\n{err.decode(errors='replace')}")
    assert process.returncode == 0, err.decode(errors="replace")
    assert err == b"", err.decode(errors="replace")
    return out


def release(barrier: Path, processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """Start the race once every helper is ready (or has died, which finish() reports)."""
    time.sleep(0.2)
    for process in processes:
        assert process.poll() is None, f"helper died before the start: {process.args!r}"
    barrier.touch()


def check_file(store: MemoryStore) -> list[dict[str, object]]:
    """Assert memories.jsonl is canonical, sorted and without problems; return its records."""
    scan = store.scan()
    assert not scan.problems, scan.problems[0].message
    assert scan.canonical
    ids = [str(record["id"]) for record in scan.records]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    return scan.records


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    engram, _ = Engram.init(folder, "race")
    engram.close()
    return folder


def test_eight_writer_processes_lose_no_write(root: Path) -> None:
    writers, count = 8, 250
    barrier = root / "go"
    processes = [
        spawn(root, str(count), "--tag", f"w{n}", "--barrier", str(barrier)) for n in range(writers)
    ]
    release(barrier, processes)
    for process in processes:
        assert finish(process) == b""

    store = MemoryStore(root / ".engram")
    records = check_file(store)
    assert len(records) == writers * count
    assert not any(is_tombstone(record) for record in records)
    expected = {title_of(f"w{n}", i) for n in range(writers) for i in range(count)}
    assert {record["title"] for record in records} == expected
    assert store.path.read_bytes().count(b"\n") == writers * count

    with Engram.open(root) as engram:
        stats = engram.stats().stores[0]
        assert stats.memories == writers * count
        assert stats.indexed == writers * count
        assert stats.tombstones == 0
        rng = random.Random(7)
        for _ in range(12):
            title = title_of(f"w{rng.randrange(writers)}", rng.randrange(count))
            hits = engram.recall(title, limit=10)
            assert title in [hit.record["title"] for hit in hits], title
        by_tag = engram.recall("", tags=["w5"], limit=1000)
        assert len(by_tag) == count


def test_readers_never_fail_while_writers_write(root: Path) -> None:
    # Fewer writes than above: a looping reader slows writers down a lot (see the report),
    # and this test is about what readers see, not about volume.
    writers, count, readers = 3, 30, 2
    barrier, stop = root / "go", root / "stop"
    with Engram.open(root) as engram:
        engram.remember("seed memory about the lantern", "So readers find something at once.")
    writing = [
        spawn(root, str(count), "--tag", f"w{n}", "--barrier", str(barrier)) for n in range(writers)
    ]
    reading = [
        spawn(root, "--reader", "--barrier", str(barrier), "--stop", str(stop), "--pause", "0.05")
        for _ in range(readers)
    ]
    release(barrier, [*writing, *reading])
    try:
        for process in writing:
            assert finish(process) == b""
    finally:
        stop.touch()
    for process in reading:
        loops = int(finish(process))
        assert loops > 0

    records = check_file(MemoryStore(root / ".engram"))
    assert len(records) == writers * count + 1
    with Engram.open(root) as engram:
        assert engram.stats().stores[0].memories == writers * count + 1
        assert engram.problems() == []


def test_sigkill_at_random_moments_loses_nothing_acknowledged(root: Path) -> None:
    rng = random.Random(1234)
    rounds = 15
    store = MemoryStore(root / ".engram")
    # A leftover from an earlier crash, as a killed writer would leave it.
    stale = store.dir / ".memories.crashed.tmp"
    stale.write_bytes(b'{"id":"half-written","kind":"no')
    acknowledged: list[str] = []

    def start(number: int) -> subprocess.Popen[bytes]:
        barrier = root / f"go-{number}"
        return spawn(root, "0", "--tag", f"r{number}", "--print-ids", "--barrier", str(barrier))

    writers = [start(0)]
    for number in range(rounds):
        writer = writers[number]
        if number + 1 < rounds:
            # Start the next writer now: its imports overlap with this round.
            writers.append(start(number + 1))
        (root / f"go-{number}").touch()
        assert writer.stdout is not None
        first = writer.stdout.readline()
        if not first.endswith(b"\n"):
            writer.wait()
            pytest.fail(
                f"writer {number} died: {writer.stderr.read().decode() if writer.stderr else ''}"
            )
        time.sleep(rng.uniform(0.05, 0.3))
        writer.send_signal(signal.SIGKILL)
        rest, _ = writer.communicate()
        assert writer.returncode == -signal.SIGKILL
        printed = (first + rest).split(b"\n")
        # Only complete lines: an id is printed whole after its remember returned.
        ids = [line.decode() for line in printed[:-1]]
        acknowledged.extend(ids)

        records = check_file(store)
        present = {str(record["id"]) for record in records}
        missing = [rid for rid in acknowledged if rid not in present]
        assert not missing, f"round {number}: {len(missing)} acknowledged ids lost"
        assert not stale.exists()

    assert len(acknowledged) >= rounds
    assert len(set(acknowledged)) == len(acknowledged)
    # Whatever the kills left behind (temp files, locks, a lagging index), the next write works
    # and the index catches up with the file.
    with Engram.open(root) as engram:
        engram.remember("after the crashes", "The store still takes writes.")
        assert not list(store.dir.glob(".memories.*.tmp"))
        records = check_file(store)
        assert engram.stats().stores[0].memories == len(records)
        findings = engram.doctor()
        assert [f for f in findings if f.severity == "error"] == []
        hits = engram.recall("after the crashes", limit=3)
        assert hits[0].record["title"] == "after the crashes"


def test_killed_writer_never_leaves_a_torn_file_for_readers(root: Path) -> None:
    """Between kills, every read of memories.jsonl sees a whole file (atomic replace)."""
    store = MemoryStore(root / ".engram")
    writer = spawn(root, "0", "--tag", "torn", "--print-ids")
    deadline = time.monotonic() + 60
    assert writer.stdout is not None
    writer.stdout.readline()
    reads = 0
    try:
        while reads < 200 and time.monotonic() < deadline:
            try:
                store.read_all()
            except CorruptStore as exc:  # pragma: no cover - this is the failure
                pytest.fail(f"read a torn file: {exc.message}")
            reads += 1
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.communicate()
    assert reads == 200
    check_file(store)
    assert os.path.getsize(store.path) > 0
