"""The composed index (engram.index.db.Index) against both backends: reads refresh themselves.

Real stores and on-disk indexes in tmp_path; another writer is a second MemoryStore on the same
folder, which writes memories.jsonl without telling the index.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram.errors import AmbiguousId, NotFound
from engram.index.db import Index
from engram.index.query import Query
from engram.index.ranking import Weights
from engram.store import MemoryStore
from tests.helpers.places import ROOT
from tests.helpers.records import record

INDEX_PACKAGE = ROOT / "engram" / "index"


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    folder = tmp_path / ".engram"
    folder.mkdir()
    memories = MemoryStore(folder)
    memories.rewrite(
        [
            record("01aaa", "Pin the stripe api version", tags=["billing"], files=["app/pay.py"]),
            record("01bbb", "Sessions live in postgres", topic_key="auth/sessions"),
        ]
    )
    return memories


@pytest.fixture
def index(store: MemoryStore, backend: str) -> Iterator[Index]:
    opened = Index(store, backend=backend, weights=Weights(mode="keyword"))
    yield opened
    opened.close()


def other_writer(store: MemoryStore) -> MemoryStore:
    """A second writer of the same file (another process, a git pull): the index is not told."""
    return MemoryStore(store.dir)


def test_every_read_sees_another_writers_change_without_a_refresh(
    store: MemoryStore, index: Index
) -> None:
    assert index.get("01aaa") is not None  # the first read builds the index
    link = {"rel": "relates", "to": "01aaa"}
    other_writer(store).put(
        [
            record(
                "01ccc",
                "Zeppelin deliveries retry hourly",
                tags=["webhooks"],
                files=["app/hooks.py"],
                links=[link],
                topic_key="hooks/retry",
                session_id="s-1",
                source="adr:0007",
            )
        ]
    )
    assert index.get("01ccc") is not None
    assert [hit.id for hit in index.search(Query(text="zeppelin"))] == ["01ccc"]
    assert index.resolve("01c") == "01ccc"
    assert set(index.get_many(["01aaa", "01ccc"])) == {"01aaa", "01ccc"}
    assert index.counts()["memories"] == 3
    assert index.ids_for_tags(["webhooks"]) == {"01ccc"}
    assert index.ids_for_files(["app/hooks.py"]) == {"01ccc"}
    assert index.linked_to("01aaa") == [("01ccc", "relates")]
    assert index.find_topic("hooks/retry", "", "project") is not None
    assert [r["id"] for r in index.session_records("s-1")] == ["01ccc"]
    assert set(index.by_source_prefix("adr:")) == {"01ccc"}
    assert [r["id"] for r in index.all_records()] == ["01aaa", "01bbb", "01ccc"]


def test_reads_see_a_removal_and_a_bad_line_without_a_refresh(
    store: MemoryStore, index: Index
) -> None:
    assert index.counts()["memories"] == 2
    kept = [r for r in store.read_all() if r["id"] != "01bbb"]
    other_writer(store).rewrite(kept)
    assert index.get("01bbb") is None
    assert index.search(Query(text="postgres")) == []
    with store.path.open("ab") as handle:
        handle.write(b"{not json\n")
    assert [line for line, _ in index.stored_problems()] == [2]


def test_a_read_after_this_process_applied_its_write_does_not_sync_again(
    store: MemoryStore, index: Index
) -> None:
    index.refresh()
    fresh = record("01ddd", "Zeppelin written here")
    index.apply([fresh], store.put([fresh]))
    assert index.refresh() == 0  # the signature given to apply is the file's
    assert [hit.id for hit in index.search(Query(text="zeppelin"))] == ["01ddd"]


def test_resolve_answers_again_after_writes_here_and_elsewhere(
    store: MemoryStore, index: Index
) -> None:
    # resolve keeps what each prefix named; every kind of write must make it ask again.
    assert index.resolve("01a") == "01aaa"
    with pytest.raises(NotFound, match="no memory with id 01c"):
        index.resolve(" 01c")
    with pytest.raises(NotFound, match="no memory with id 01c"):
        index.resolve(" 01c")  # the kept answer says it in the same words
    other_writer(store).put([record("01ccc", "Written by another process")])
    assert index.resolve(" 01c") == "01ccc"
    mine = record("01aab", "Written here")
    index.apply([mine], store.put([mine]))
    with pytest.raises(AmbiguousId, match=r"01aaa.*01aab"):
        index.resolve("01a")
    assert index.resolve("01aab") == "01aab"
    kept = [r for r in store.read_all() if r["id"] != "01aab"]
    other_writer(store).rewrite(kept)  # a hard delete elsewhere: the prefix is one id again
    assert index.resolve("01a") == "01aaa"
    with pytest.raises(NotFound):
        index.resolve("01aab")
    index.rebuild()
    assert index.resolve("01c") == "01ccc"


def test_rebuild_of_an_index_never_opened(store: MemoryStore, backend: str) -> None:
    index = Index(store, backend=backend, weights=Weights(mode="keyword"))
    try:
        assert index.rebuild() == 2
        assert [hit.id for hit in index.search(Query(text="stripe"))] == ["01aaa"]
        assert index.counts()["indexed"] == 2
    finally:
        index.close()


def test_switching_backends_feeds_the_new_one(store: MemoryStore, backend: str) -> None:
    other = "fts5" if backend == "tantivy" else "tantivy"
    first = Index(store, backend=other, weights=Weights(mode="keyword"))
    assert [hit.id for hit in first.search(Query(text="stripe"))] == ["01aaa"]
    first.close()
    second = Index(store, backend=backend, weights=Weights(mode="keyword"))
    try:
        assert [hit.id for hit in second.search(Query(text="stripe"))] == ["01aaa"]
        assert second.meta("backend") == backend
    finally:
        second.close()


def test_keyword_mode_keeps_no_vectors_file(store: MemoryStore, index: Index) -> None:
    index.search(Query(text="stripe"))
    fresh = record("01eee", "Forgotten soon")
    index.apply([fresh], store.put([fresh]))
    index.rebuild()
    assert index.vectors.ids() == set()
    assert not (store.dir / "index" / "vectors.db").exists()


def _index_imports() -> dict[str, set[str]]:
    """Return each engram.index module's engram imports, at any depth of the file."""
    graph: dict[str, set[str]] = {}
    for path in sorted(INDEX_PACKAGE.glob("*.py")):
        name = "engram.index" if path.stem == "__init__" else f"engram.index.{path.stem}"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {dep for dep in found if dep.startswith("engram")}
    return graph


def test_no_index_module_imports_the_store() -> None:
    for name, deps in _index_imports().items():
        assert not [d for d in deps if d == "engram.store" or d.startswith("engram.store.")], name


def test_no_import_circle_in_the_index() -> None:
    graph = _index_imports()
    edges = {name: {d for d in deps if d in graph and d != name} for name, deps in graph.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in edges[start]:
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    assert [name for name in edges if reaches(name, name, {name})] == []


# The queries that run over every live record: the context's counts, a browse by kind, the
# vectors' catch-up, and the index each must use. No statistics are gathered (no ANALYZE), so
# the planner chooses by the indexes' shape alone, as it does on a store of any size.
LIVE_QUERIES = {
    "SELECT kind, status, count(*) FROM records WHERE deleted=0 GROUP BY kind, status": (
        "COVERING INDEX records_kind_status"
    ),
    "SELECT id, kind, status, importance, updated_epoch, judged FROM records "
    "WHERE deleted=0 AND kind IN ('session')": "INDEX records_kind_status",
    "SELECT id, line_hash FROM records WHERE deleted=0": "INDEX records_live",
}


@pytest.mark.parametrize("sql", sorted(LIVE_QUERIES))
def test_queries_over_live_records_keep_their_index(index: Index, sql: str) -> None:
    assert index.get("01aaa") is not None  # builds the index and its indexes
    plan = " | ".join(str(row[3]) for row in index.db.execute("EXPLAIN QUERY PLAN " + sql))
    assert LIVE_QUERIES[sql] in plan, plan
