"""The nearest-neighbour graph of the embeddings (``engram.index.ann``) and how search uses it.

Real model files, real stores in tmp_path built from the labelled sets' real memories
(benchmarks/retrieval: harbor, agentlog, captured), real saved files. The graph is used from
``ann.EXACT_BELOW`` rows on (16k in use); these stores hold a few hundred memories, so the
threshold is lowered for them (a setting of the code under test, not a stand-in for it). What
must hold: the graph has one node per row of the matrix, keyed by that row, through adds,
replacements, removals and rebuilds; what a search finds through it agrees with an exact scan
of every vector; a graph file that is missing or damaged is built again and said so in the log.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engram.index import ann, semantic
from engram.index.db import Index
from engram.index.matrix import VectorState, head_of, nearest, scan_candidates
from engram.index.query import Query
from engram.model import canonical_line
from engram.store import MemoryStore
from tests.helpers.places import ROOT
from tests.index.test_semantic import STAMP, open_index, record

pytestmark = [
    pytest.mark.skipif(not semantic.available(), reason="wordllama is not installed"),
    pytest.mark.skipif(not ann.available(), reason="usearch is not installed"),
]

SETS = ROOT / "benchmarks" / "retrieval"
SMALL: int = 64  # the threshold these stores use (see the module docstring)


def set_files(name: str) -> Path:
    return SETS if name == "harbor" else SETS / name


def real_memories() -> list[dict[str, Any]]:
    """Every memory of three labelled sets, as their memories.jsonl hold them."""
    out: list[dict[str, Any]] = []
    for name in ("harbor", "agentlog", "captured"):
        lines = (set_files(name) / "memories.jsonl").read_text(encoding="utf-8").splitlines()
        out.extend(json.loads(line) for line in lines if line.strip())
    return out


def real_queries() -> list[str]:
    out: list[str] = []
    for name in ("harbor", "agentlog", "captured"):
        lines = (set_files(name) / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        out.extend(str(json.loads(line)["query"]) for line in lines if line.strip())
    return out


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ann, "EXACT_BELOW", SMALL)
    # Built on every core, a graph of a hundred rows can leave a few rows no walk reaches (up
    # to 6 of 100 in 600 builds here; 1 in 3,000 at 20,000 rows): on one thread these tests'
    # small graphs are the same on every run, and each row is found.
    monkeypatch.setattr(ann, "BUILD_THREADS", 1)


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    folder = tmp_path / ".engram"
    folder.mkdir()
    path = folder / "memories.jsonl"
    records = sorted(real_memories(), key=lambda r: str(r["id"]))
    path.write_bytes(b"".join(canonical_line(r) for r in records))
    return MemoryStore(folder)


def unit_rows(count: int, dim: int = 32, seed: int = 7) -> Any:
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def assert_graph_follows_rows(state: VectorState) -> None:
    """One node per row, keyed by the row, holding that row's vector, and found by it.

    The node's vector is the row's as int8 keeps it (a cosine near 1); the walk is approximate,
    so a row's own vector finds it (or a row with the same vector) for nearly every row.
    """
    graph = state.graph
    assert graph is not None
    rows = len(state.ids)
    assert graph.keys() == list(range(rows))
    for row in range(rows):
        held = graph.vector(row)
        assert held is not None
        cosine = float(held @ state.matrix[row]) / float(np.linalg.norm(held))
        assert cosine > 0.99, (row, cosine)
    found = 0
    for row in range(rows):
        nearest = int(graph.search(state.matrix[row], 1)[0])
        if nearest == row or float(state.matrix[nearest] @ state.matrix[row]) > 0.9999:
            found += 1
    assert found >= 0.97 * rows, f"{found} of {rows} rows found themselves"


def exact_nearest(state: VectorState, probe: Any, floor: float, pool: int) -> set[int]:
    cosines = state.matrix @ probe
    rows = np.flatnonzero(cosines >= floor)
    order = rows[np.argsort(-cosines[rows], kind="stable")]
    return set(order[:pool].tolist())


# -- the graph and the matrix it follows -----------------------------------------------------


def test_the_graph_follows_adds_replacements_and_removals(small_threshold: None) -> None:
    vectors = unit_rows(200)
    state = VectorState([f"m{n}" for n in range(100)], vectors[:100].copy(), head_of(vectors[:100]))
    assert state.graph is None
    assert state.graph_for_search() is not None  # 100 rows, over the threshold: built
    assert_graph_follows_rows(state)
    state.put([(f"m{n}", vectors[n], {}) for n in range(100, 150)])  # new rows
    state.put([(f"m{n}", vectors[n + 150], {}) for n in range(0, 50, 10)])  # new vectors
    assert_graph_follows_rows(state)
    state.remove(["m3", "m149", "m0", "m77", "nobody"])  # the last row moves into each hole
    assert "m149" not in state.rows and len(state.ids) == 146
    assert_graph_follows_rows(state)
    for rid, row in state.rows.items():
        number = int(rid[1:])
        expected = vectors[number + 150] if number % 10 == 0 and number < 50 else vectors[number]
        assert np.allclose(state.matrix[row], expected)


def test_a_small_state_builds_no_graph_and_scans() -> None:
    vectors = unit_rows(50)
    state = VectorState([f"m{n}" for n in range(50)], vectors.copy(), head_of(vectors))
    assert state.graph_for_search() is None  # under ann.EXACT_BELOW
    rows, cosines = nearest(vectors[4], state, None, 0.0, 5)
    assert 4 in rows.tolist() and float(cosines.max()) == pytest.approx(1.0)
    assert state.graph is None


def test_nearest_answers_a_probe_again_from_what_it_found_until_the_rows_change() -> None:
    vectors = unit_rows(60)
    state = VectorState([f"m{n}" for n in range(50)], vectors[:50].copy(), head_of(vectors[:50]))
    probe = vectors[55]
    rows, cosines = nearest(probe, state, None, -1.0, 5)
    assert np.allclose(cosines, state.matrix[rows] @ probe)
    again, _ = nearest(probe, state, None, -1.0, 5)
    assert again.tolist() == rows.tolist() and not again.flags.writeable
    state.put([("new", probe, {})])  # a row equal to the probe: the nearest now
    rows_after, cosines_after = nearest(probe, state, None, -1.0, 5)
    assert state.rows["new"] in rows_after.tolist()
    assert float(cosines_after.max()) == pytest.approx(1.0)
    state.remove(["new"])
    assert sorted(nearest(probe, state, None, -1.0, 5)[0].tolist()) == sorted(rows.tolist())
    # What a search found while a write changed the rows (another thread) is not kept.
    version = state.version
    found = nearest(vectors[57], state, None, -1.0, 5)
    state.put([("later", vectors[58], {})])
    key = (vectors[56].tobytes(), -1.0, 5)
    state.keep_found(key, found, version)
    assert state.found(key) is None
    state.keep_found(key, found, state.version)
    assert state.found(key) is found
    # A filtered search is never answered from what an unfiltered one found.
    mask = np.zeros(len(state.ids), dtype=bool)
    mask[[3, 4]] = True
    assert sorted(nearest(probe, state, mask, -1.0, 5)[0].tolist()) == [3, 4]


def test_search_through_the_graph_agrees_with_an_exact_scan(
    store: MemoryStore, small_threshold: None
) -> None:
    index = open_index(store, "hybrid")
    try:
        index.search(Query(text="warm up"))
        state = index.vectors.state()
        assert state is not None and len(state.ids) > 400
        assert state.graph is not None and len(state.graph) == len(state.ids)
        floor, pool = 0.4, 20
        overlaps: list[float] = []
        scanned: list[float] = []
        for text in real_queries():
            probe = semantic.embed_query(text)
            truth = exact_nearest(state, probe, floor, pool)
            if not truth:
                continue
            rows, cosines = nearest(probe, state, None, floor, pool)
            assert np.allclose(cosines, state.matrix[rows] @ probe)  # scores are exact
            overlaps.append(len(truth & set(rows.tolist())) / len(truth))
            by_scan = scan_candidates(probe, state, None, floor, pool)
            top = by_scan[np.argsort(-(state.matrix[by_scan] @ probe))][:pool]
            scanned.append(len(truth & set(top.tolist())) / len(truth))
        assert len(overlaps) > 100
        assert float(np.mean(overlaps)) >= 0.98
        assert float(np.mean(overlaps)) >= float(np.mean(scanned)) - 0.01
    finally:
        index.close()


def test_a_filtered_search_through_the_graph_keeps_to_the_filter(
    store: MemoryStore, small_threshold: None
) -> None:
    index = open_index(store, "hybrid")
    try:
        kinds = frozenset({"pitfall"})
        hits = index.search(Query(text="a migration that locked the table", kinds=kinds, limit=20))
        assert hits and all(hit.record["kind"] == "pitfall" for hit in hits)
        wanted = {str(r["id"]) for r in index.all_records() if r.get("kind") == "pitfall"}
        state = index.vectors.state()
        assert state is not None
        mask = np.array([rid in wanted for rid in state.ids])
        probe = semantic.embed_query("a migration that locked the table")
        for floor in (0.1, 0.3):
            rows, _ = nearest(probe, state, mask, floor, 10)
            assert rows.size and all(state.ids[row] in wanted for row in rows.tolist())
            cosines = np.where(mask, state.matrix @ probe, -np.inf)
            best = {row for row in np.argsort(-cosines)[:10].tolist() if cosines[row] >= floor}
            assert len(best & set(rows.tolist())) >= len(best) - 1 and len(rows) <= 10
    finally:
        index.close()


def test_writes_change_the_graph_and_a_new_process_maps_it(
    store: MemoryStore, small_threshold: None
) -> None:
    index = open_index(store, "hybrid")
    try:
        index.search(Query(text="warm up"))
        folder = store.dir / "index"
        saved = sorted(path.name for path in folder.glob("vectors-*.graph.usearch"))
        assert len(saved) == 1
        fresh = record(
            "Background jobs park poison messages in a dead letter queue",
            "After three failed attempts a job's message is moved aside for a person to read.",
        )
        index.apply([fresh], store.put([fresh]))
        gone = [r for r in index.all_records() if r["id"] != fresh["id"]][5]
        tomb = {"id": gone["id"], "rev": 9, "updated_at": STAMP, "deleted_at": STAMP}
        index.apply([tomb], store.put([tomb]))
        state = index.vectors.state()
        assert state is not None and fresh["id"] in state.rows and gone["id"] not in state.rows
        assert_graph_follows_rows(state)
        hits = index.search(Query(text="where do failing job messages end up", limit=3))
        assert fresh["id"] in [hit.id for hit in hits]
        # The graph file is not rewritten by a write: a new process maps it and replays the log.
        assert sorted(path.name for path in folder.glob("vectors-*.graph.usearch")) == saved
        other = open_index(store, "hybrid")
        try:
            mapped = other.vectors.state()
            assert mapped is not None and mapped.graph is not None
            assert mapped.ids == state.ids
            assert_graph_follows_rows(mapped)
            query = Query(text="where do failing job messages end up")
            assert [h.id for h in other.search(query)] == [h.id for h in index.search(query)]
        finally:
            other.close()
    finally:
        index.close()


def test_a_rebuild_makes_a_graph_of_the_rebuilt_vectors(
    store: MemoryStore, small_threshold: None
) -> None:
    index = open_index(store, "hybrid")
    try:
        before = index.search(Query(text="deploys that lost connections"))
        index.rebuild()
        after = index.search(Query(text="deploys that lost connections"))
        assert [h.id for h in after] == [h.id for h in before]
        state = index.vectors.state()
        assert state is not None
        assert_graph_follows_rows(state)
        graphs = list((store.dir / "index").glob("vectors-*.graph.usearch"))
        assert len(graphs) == 1  # the old base's graph went with it
    finally:
        index.close()


@pytest.mark.parametrize("damage", ["missing", "garbled", "another size"])
def test_a_missing_or_damaged_graph_file_is_built_again_and_said(
    store: MemoryStore,
    small_threshold: None,
    damage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    index = open_index(store, "hybrid")
    try:
        expected = [h.id for h in index.search(Query(text="deploys that lost connections"))]
    finally:
        index.close()
    (path,) = (store.dir / "index").glob("vectors-*.graph.usearch")
    if damage == "missing":
        path.unlink()
    elif damage == "garbled":
        path.write_bytes(b"\x00garbage" * 64)
    else:
        ann.Graph.build(unit_rows(70, dim=256)).save(path)
    with caplog.at_level(logging.WARNING, logger="engram.index"):
        other = open_index(store, "hybrid")
        try:
            got = [h.id for h in other.search(Query(text="deploys that lost connections"))]
            state = other.vectors.state()
            assert state is not None
            assert_graph_follows_rows(state)
        finally:
            other.close()
    assert got == expected
    said = [r.getMessage() for r in caplog.records if "nearest-neighbour graph" in r.getMessage()]
    assert said and str(path) in said[0] and "rebuilding it" in said[0]
    # ... and saved again: the next process maps it without a word.
    assert ann.Graph.load(path, len(state.ids), state.dim) is not None
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="engram.index"):
        third: Index = open_index(store, "hybrid")
        try:
            assert [h.id for h in third.search(Query(text="deploys that lost connections"))] == got
        finally:
            third.close()
    assert not [r for r in caplog.records if "nearest-neighbour graph" in r.getMessage()]


# -- a big graph is built in the background ---------------------------------------------------

QUERIES_DURING_BUILD = (
    "deploys that lost connections",
    "where do failing job messages end up",
    "a migration that locked the table",
)


class GatedBuild:
    """``ann.Graph.build`` held until the test lets it go: the real build, started when the
    code under test starts it, finishing when the test says (so a search can be made while it
    runs). Nothing is stubbed: the graph built is the library's."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, fail: bool = False) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.calls = 0
        real = ann.Graph.build.__func__  # type: ignore[attr-defined]

        def build(cls: type[ann.Graph], matrix: Any) -> ann.Graph:
            self.calls += 1
            self.started.set()
            assert self.go.wait(60), "the test never let the build go"
            if fail:
                raise RuntimeError("no memory for the graph")
            graph: ann.Graph = real(cls, matrix)
            return graph

        monkeypatch.setattr(ann.Graph, "build", classmethod(build))


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., GatedBuild]]:
    """Makes ``GatedBuild``s, and lets each one's build go when the test ends: a test that
    fails before it lets go leaves no thread waiting to fail the next test on its worker."""
    made: list[GatedBuild] = []

    def make(*, fail: bool = False) -> GatedBuild:
        gate = GatedBuild(monkeypatch, fail=fail)
        made.append(gate)
        return gate

    yield make
    for gate in made:
        gate.go.set()


@pytest.fixture
def background(monkeypatch: pytest.MonkeyPatch) -> None:
    """These stores' graphs are built as a big store's is: in the background."""
    monkeypatch.setattr(ann, "EXACT_BELOW", SMALL)
    monkeypatch.setattr(ann, "BACKGROUND_FROM", SMALL)


def scanned_answers(store: MemoryStore) -> dict[str, list[tuple[str, float]]]:
    """The hits (id, score) each query gets from a scan of every vector (no graph at all)."""
    index = open_index(store, "hybrid")
    try:
        state = index.vectors.state()
        assert state is not None and state.graph_for_search() is None  # 16k rows in use
        return {
            text: [(h.id, h.score) for h in index.search(Query(text=text))]
            for text in QUERIES_DURING_BUILD
        }
    finally:
        index.close()


def test_a_recall_during_the_background_build_scans_and_the_graph_comes_after(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, gated: Callable[..., GatedBuild]
) -> None:
    expected = scanned_answers(store)
    for path in (store.dir / "index").glob("vectors-*"):
        path.unlink()  # the first opening below saves the matrix afresh, as after a rebuild
    monkeypatch.setattr(ann, "EXACT_BELOW", SMALL)
    monkeypatch.setattr(ann, "BACKGROUND_FROM", SMALL)
    gate = gated()
    index = open_index(store, "hybrid")
    try:
        got = {
            text: [(h.id, h.score) for h in index.search(Query(text=text))]
            for text in QUERIES_DURING_BUILD
        }
        assert gate.started.wait(60)  # the build is under way, and no recall waited for it
        state = index.vectors.state()
        assert state is not None and state.graph is None
        assert got == expected  # answered by the exact scan, as a store under the threshold
        assert not list((store.dir / "index").glob("vectors-*.graph.usearch"))
        gate.go.set()
        assert state.graph_built(timeout=120) is not None
        assert gate.calls == 1  # one build, however many searches asked meanwhile
        assert_graph_follows_rows(state)
        # Saved beside its matrix: a new process maps it and builds nothing.
        assert len(list((store.dir / "index").glob("vectors-*.graph.usearch"))) == 1
        other = open_index(store, "hybrid")
        try:
            mapped = other.vectors.state()
            assert mapped is not None and mapped.graph is not None
            assert gate.calls == 1
            for text in QUERIES_DURING_BUILD:
                hits = [h.id for h in other.search(Query(text=text))]
                assert hits == [h.id for h in index.search(Query(text=text))]
        finally:
            other.close()
    finally:
        index.close()


def test_writes_during_the_background_build_reach_the_graph(
    store: MemoryStore, background: None, gated: Callable[..., GatedBuild]
) -> None:
    for path in (store.dir / "index").glob("vectors-*"):
        path.unlink()
    gate = gated()
    index = open_index(store, "hybrid")
    try:
        index.search(Query(text="warm up"))
        assert gate.started.wait(60)
        fresh = record(
            "Background jobs park poison messages in a dead letter queue",
            "After three failed attempts a job's message is moved aside for a person to read.",
        )
        index.apply([fresh], store.put([fresh]))
        # Three others (ids are random: the fresh record may sort anywhere among them).
        others = [r for r in index.all_records() if r["id"] != fresh["id"]]
        for gone in others[3:6]:
            tomb = {"id": gone["id"], "rev": 9, "updated_at": STAMP, "deleted_at": STAMP}
            index.apply([tomb], store.put([tomb]))
        state = index.vectors.state()
        assert state is not None and state.graph is None and fresh["id"] in state.rows
        hits = index.search(Query(text="where do failing job messages end up", limit=3))
        assert fresh["id"] in [hit.id for hit in hits]  # the scan sees the write
        gate.go.set()
        graph = state.graph_built(timeout=120)
        assert graph is not None
        assert_graph_follows_rows(state)  # the snapshot's graph, with the writes replayed
        row = state.rows[fresh["id"]]
        assert row in graph.search(state.matrix[row], 5).tolist()
        hits = index.search(Query(text="where do failing job messages end up", limit=3))
        assert fresh["id"] in [hit.id for hit in hits]
    finally:
        index.close()


def test_a_failed_background_build_is_said_and_searches_go_on_scanning(
    store: MemoryStore,
    background: None,
    gated: Callable[..., GatedBuild],
    caplog: pytest.LogCaptureFixture,
) -> None:
    for path in (store.dir / "index").glob("vectors-*"):
        path.unlink()
    gate = gated(fail=True)
    with caplog.at_level(logging.WARNING, logger="engram.index"):
        index = open_index(store, "hybrid")
        try:
            first = [h.id for h in index.search(Query(text="deploys that lost connections"))]
            gate.go.set()
            state = index.vectors.state()
            assert state is not None and state.graph_built(timeout=120) is None
            again = [h.id for h in index.search(Query(text="deploys that lost connections"))]
            assert again == first and state.graph is None
            assert gate.calls == 1  # not tried again on every search
        finally:
            index.close()
    said = [r.getMessage() for r in caplog.records if "nearest-neighbour graph" in r.getMessage()]
    assert said and "no memory for the graph" in said[0]
    assert not list((store.dir / "index").glob("vectors-*.graph.usearch"))


ONE_SHOT = """
import sys
from pathlib import Path
import threading
from engram.index import ann
ann.EXACT_BELOW = ann.BACKGROUND_FROM = 64  # as the fixture ``background`` sets them
answered = threading.Event()  # the real build, started only once the answer is out
real = ann.Graph.build.__func__
ann.Graph.build = classmethod(lambda cls, matrix: answered.wait() and real(cls, matrix))
from engram.index.query import Query
from engram.store import MemoryStore
from tests.index.test_semantic import open_index
index = open_index(MemoryStore(Path(sys.argv[1])), "hybrid")
hits = index.search(Query(text="deploys that lost connections"))
state = index.vectors.state()
print(len(hits), state.graph is None, flush=True)
answered.set()  # and the process exits here
"""


def test_a_one_shot_process_answers_then_finishes_the_graph_before_it_exits(
    store: MemoryStore,
) -> None:
    for path in (store.dir / "index").glob("vectors-*"):
        path.unlink()
    done = subprocess.run(
        [sys.executable, "-c", ONE_SHOT, str(store.dir)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    count, scanned = done.stdout.split()
    assert int(count) > 0
    assert scanned == "True"  # it answered before the graph was there (a build of its own)
    (path,) = (store.dir / "index").glob("vectors-*.graph.usearch")  # ... and saved it
    (ids,) = (store.dir / "index").glob("vectors-*.ids.json")
    rows = len(json.loads(ids.read_text(encoding="utf-8")))
    assert ann.Graph.load(path, rows, 256) is not None
