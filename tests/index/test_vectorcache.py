"""The saved matrix of embeddings (base + change log) and the matrix a process keeps in step.

Real model files, real indexes in tmp_path, real processes killed with SIGKILL. What must hold:
a saved matrix is served only for the exact index state it names (a cache left by an older
version, a torn or garbled log, a writer killed at any moment are never served, and the index
works on), every write of a process that has loaded the matrix changes it in place and
appends one entry to the log, and whatever is served equals the embeddings of the memories as
memories.jsonl holds them.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from engram.index import semantic
from engram.index.db import Index
from engram.index.matrix import VectorState, head_of
from engram.index.query import Query
from engram.index.vectors import Vectors
from engram.model import is_tombstone
from engram.service import Engram
from engram.store import MemoryStore
from tests.index.test_semantic import CORPUS, STAMP, open_index, record

pytestmark = pytest.mark.skipif(not semantic.available(), reason="wordllama is not installed")

QUERY = "why not keep login state in redis"


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    folder = tmp_path / ".engram"
    folder.mkdir()
    memories = MemoryStore(folder)
    memories.rewrite([record(*item) for item in CORPUS])
    return memories


def cache_files(store: MemoryStore) -> list[str]:
    return sorted(path.name for path in (store.dir / "index").glob("vectors-*"))


def answers(index: Index, text: str = QUERY) -> list[tuple[str, float]]:
    return [(hit.id, hit.score) for hit in index.search(Query(text=text))]


def assert_served_matrix_is_exact(index: Index) -> None:
    """The matrix a search uses holds exactly the live memories, each with its own embedding."""
    live = {str(r["id"]): r for r in index.all_records()}
    state = index.vectors.state()
    assert state is not None
    assert sorted(state.ids) == sorted(live)
    model = index.embedder()
    assert model is not None
    expected = model.embed([semantic.record_text(live[rid]) for rid in state.ids])
    assert float(abs(state.matrix - expected).max()) < 1e-5
    assert float(abs(state.head - head_of(expected)).max()) < 1e-5
    for name, (codes, column) in state.columns.items():  # the filter columns made so far
        values = {code: value for value, code in codes.items()}
        stored = index.records.column(name)
        assert [values[int(code)] for code in column] == [stored[rid] for rid in state.ids]


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the times the vectors are read out of SQLite (the real method still runs)."""
    reads: list[int] = []
    real = Vectors._read

    def counting(self: Vectors, live: Any, dim: int) -> VectorState:
        reads.append(1)
        return real(self, live, dim)

    monkeypatch.setattr(Vectors, "_read", counting)
    return reads


def test_own_writes_change_the_matrix_in_place_and_append_to_the_log(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_index(store, "hybrid")
    try:
        answers(index)
        reads = count_reads(monkeypatch)
        saved = cache_files(store)
        log = store.dir / "index" / next(name for name in saved if name.endswith(".log"))
        fresh = record("Background jobs use a dead letter queue", "Poison messages are parked.")
        index.apply([fresh], store.put([fresh]))
        size = log.stat().st_size
        assert size > 0
        corpus = {str(r["title"]): r for r in index.all_records()}
        gone = dict(corpus[CORPUS[1][0]])
        tomb = {"id": gone["id"], "rev": 2, "updated_at": STAMP, "deleted_at": STAMP}
        index.apply([tomb], store.put([tomb]))
        assert log.stat().st_size > size
        # A filtered search makes the status column; a status change relabels its row.
        assert index.search(Query(text=QUERY, statuses=frozenset({"active"})))
        status = {**corpus[CORPUS[2][0]], "status": "archived", "rev": 5}
        index.apply([status], store.put([status]))
        hits = index.search(Query(text="where do failing queue messages end up", limit=3))
        assert fresh["id"] in [hit.id for hit in hits]
        assert gone["id"] not in [hit.id for hit in index.search(Query(text=gone["title"]))]
        archived = index.search(Query(text=str(status["title"]), statuses=frozenset({"archived"})))
        assert [hit.id for hit in archived] == [status["id"]]
        assert_served_matrix_is_exact(index)
        assert cache_files(store) == saved  # nothing rewritten, only appended
        assert reads == []
        other = open_index(store, "hybrid")
        try:
            assert answers(other) == answers(index)
            assert_served_matrix_is_exact(other)
            assert reads == []  # mapped and replayed, not read out of SQLite
        finally:
            other.close()
    finally:
        index.close()


def test_a_cache_of_the_previous_format_is_discarded_and_rebuilt(store: MemoryStore) -> None:
    index = open_index(store, "hybrid")
    first = answers(index)
    index.close()
    folder = store.dir / "index"
    for name in cache_files(store):
        (folder / name).unlink()
    # What the previous version saved: three files named by a key of its own, no log, here
    # with the rows in the wrong order, so that serving them would give wrong answers.
    import numpy as np

    ids = [str(r["id"]) for r in store.read_all()]
    matrix = np.eye(len(ids), 256, dtype=np.float32)
    old = folder / "vectors-0123456789abcdef0123"
    np.save(f"{old}.matrix.npy", matrix)
    np.save(f"{old}.head.npy", head_of(matrix))
    Path(f"{old}.ids.json").write_text(json.dumps(ids[::-1]), encoding="utf-8")
    again = open_index(store, "hybrid")
    try:
        assert answers(again) == first
        assert_served_matrix_is_exact(again)
        names = cache_files(store)
        assert len(names) == 4 and not any(name.startswith(old.name) for name in names)
    finally:
        again.close()


@pytest.mark.parametrize("damage", ["torn", "garbled", "foreign"])
def test_a_damaged_log_is_never_served(
    store: MemoryStore, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_index(store, "hybrid")
    answers(index)
    for n in range(3):
        fresh = record(f"Queue consumer {n} acknowledges after the write", f"Detail {n}.")
        index.apply([fresh], store.put([fresh]))
    expected = answers(index, "when does the consumer acknowledge")
    index.close()
    folder = store.dir / "index"
    [log] = [folder / name for name in cache_files(store) if name.endswith(".log")]
    data = bytearray(log.read_bytes())
    if damage == "torn":  # a writer killed mid-append: the last entry is cut short
        del data[-100:]
    elif damage == "garbled":  # blocks of zeros where a crash left the last entry unwritten
        data[-600:-500] = bytes(100)
    else:  # bytes that were never a log entry
        data[:8] = b"not mine"
    log.write_bytes(bytes(data))
    reads = count_reads(monkeypatch)
    again = open_index(store, "hybrid")
    try:
        assert answers(again, "when does the consumer acknowledge") == expected
        assert_served_matrix_is_exact(again)
        assert reads == [1]  # rebuilt from SQLite, then saved afresh
        assert all(path.stat().st_size == 0 for path in folder.glob("vectors-*.log"))
    finally:
        again.close()


WRITER = """
    import sys
    from pathlib import Path

    from engram.index import vectorcache
    from engram.service import Engram

    # Fold the log into a new base every few writes, so that kills land in a save too.
    vectorcache._COMPACT_MIN_ROWS = 1
    with Engram.open(Path(sys.argv[1])) as engram:
        engram.recall("warm up")  # loads the model: every write now embeds and logs
        n = int(sys.argv[2])
        while True:
            saved = engram.remember(
                f"Killed writer note {n}: the ledger flushes batch {n} before exit",
                f"Batch {n} of the ledger is flushed before the worker exits.",
                kind="fact",
                tags=["ledger"],
            )
            if n % 3 == 2:
                engram.forget(saved.record["id"])
            print(saved.record["id"], flush=True)
            n += 1
"""


def test_a_writer_killed_at_any_moment_leaves_a_usable_index(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    engram, _ = Engram.init(root, "demo")
    with engram:
        for item in CORPUS:
            engram.remember(item[0], item[1], kind=item[2], tags=list(item[3]))
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(WRITER), encoding="utf-8")
    rng = random.Random(15)
    written: list[str] = []
    for _ in range(4):
        with subprocess.Popen(
            [sys.executable, str(script), str(root), str(len(written))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as child:
            assert child.stdout is not None and child.stderr is not None
            for _ in range(rng.randint(3, 9)):
                line = child.stdout.readline()
                assert line, child.stderr.read()
                written.append(line.strip())
            time.sleep(rng.uniform(0, 0.03))  # somewhere inside the next write
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
    with Engram.open(root) as after:
        index = after.project_ws.index
        live = {str(r["id"]): r for r in after.project_ws.store.read_all() if not is_tombstone(r)}
        assert set(written) <= {str(r["id"]) for r in after.project_ws.store.read_all()}
        for rid in written:
            if rid in live:
                hits = after.recall(str(live[rid]["title"]), limit=3)
                assert rid in [hit.id for hit in hits]
        assert_served_matrix_is_exact(index)
        assert sorted(index.vectors.state().ids) == sorted(live)  # type: ignore[union-attr]
