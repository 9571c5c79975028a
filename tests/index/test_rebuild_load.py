"""A full index rebuild (``Index.rebuild``): hostile lines, a failure half way, vectors kept.

Real stores and on-disk indexes in tmp_path, against both full-text backends. A full-text
backend that fails in the middle of a load cannot be had on demand here, so one test replaces
the backend's ``bulk_load`` with one that reads a few documents and then raises (and says so).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.errors import IndexError_
from engram.index import semantic
from engram.index.backend import Doc, ranked_title, ranked_title_of
from engram.index.db import Index
from engram.index.query import Query
from engram.index.ranking import Weights, epoch
from engram.model import normalize_content, parse_time
from engram.store import MemoryStore
from tests.helpers.records import record

WIDE = 2**70  # wider than 64 bits: orjson would read it as a float
NEGATIVE_WIDE = -(10**19)  # 20 characters, below the smallest 64-bit integer


def line(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"n": value}
    return value


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    folder = tmp_path / ".engram"
    folder.mkdir()
    return MemoryStore(folder)


@pytest.fixture
def index(store: MemoryStore, backend: str) -> Iterator[Index]:
    opened = Index(store, backend=backend, weights=Weights(mode="keyword"))
    yield opened
    opened.close()


def test_a_rebuild_names_every_hostile_line_and_keeps_numbers_exact(
    store: MemoryStore, index: Index
) -> None:
    deep = record("01ddd", "Deeply nested")
    deep["extra"] = nested(70)  # 71 levels with the record itself
    store.path.write_bytes(
        b"".join(
            [
                line(record("01aaa", "Zeppelin hangar doors")),
                line(record("01bbb", "Wide counter", counter=WIDE, low=NEGATIVE_WIDE)),
                line(record("01ccc", "Measured ratio", ratio=0.1)),
                line(deep),
                b"{not json\n",
                line(record("01aaa", "Zeppelin again")),
                line({**record("01eee", "Forgotten zeppelin"), "deleted_at": "2024-06-01"}),
                b"<<<<<<< HEAD\n",
                b"\n",
            ]
        )
    )
    assert index.rebuild() == 4  # three memories and a tombstone
    problems = dict(index.problems)
    assert sorted(problems) == [4, 5, 6, 8]
    assert all(message.startswith(f"{store.path}:{n}: ") for n, message in problems.items())
    assert "nested deeper than 64 levels" in problems[4]
    assert "not JSON" in problems[5]
    assert "duplicate id 01aaa" in problems[6]
    assert "conflict marker" in problems[8]
    assert index.stored_problems() == index.problems
    wide = index.get("01bbb")
    assert wide is not None
    assert (wide["counter"], wide["low"]) == (WIDE, NEGATIVE_WIDE)
    assert type(wide["counter"]) is int and type(wide["low"]) is int
    measured = index.get("01ccc")
    assert measured is not None and measured["ratio"] == 0.1
    assert [hit.id for hit in index.search(Query(text="zeppelin"))] == ["01aaa"]
    assert index.get("01aaa") == record("01aaa", "Zeppelin hangar doors")
    assert index.counts()["memories"] == 3


def _rebuild_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "engram-index-rebuild"]


@pytest.mark.parametrize("read", [0, 2, None], ids=["none", "some", "all"])
def test_a_rebuild_failing_half_way_leaves_an_index_the_next_read_rebuilds(
    store: MemoryStore, index: Index, monkeypatch: pytest.MonkeyPatch, read: int | None
) -> None:
    store.rewrite([record(f"01a{n:02d}", f"Zeppelin note {n}") for n in range(5)])
    assert len(index.search(Query(text="zeppelin"))) == 5

    def failing(docs: Iterable[Doc]) -> int:
        # Stands in for a backend that fails mid-load (a full disk): reads ``read`` documents
        # (all of them: the rows are written and their indexes being built), then raises.
        for _ in docs if read is None else itertools.islice(docs, read):
            pass
        raise IndexError_("the full-text backend failed half way")

    monkeypatch.setattr(index.backend, "bulk_load", failing)
    with pytest.raises(IndexError_, match="failed half way"):
        index.rebuild()
    assert _rebuild_threads() == []  # every job on the connection is done
    assert not index.db.in_transaction  # rolled back
    assert index.meta("file_sig") is None  # so the next read rebuilds
    monkeypatch.undo()
    index.close()
    again = Index(store, backend=index.backend_name, weights=Weights(mode="keyword"))
    try:
        assert len(again.search(Query(text="zeppelin"))) == 5
        assert again.meta("file_sig") == store.signature()
    finally:
        again.close()


@pytest.mark.skipif(not semantic.available(), reason="wordllama is not installed")
def test_a_rebuild_hashes_again_only_what_it_has_not_checked_under_this_model(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.rewrite([record(f"01a{n:02d}", f"Zeppelin note {n}") for n in range(4)])
    index = Index(store, backend="tantivy", weights=Weights(mode="hybrid"))
    try:
        index.rebuild()
        vectors = index.vectors.db
        checked = "SELECT value FROM meta WHERE key='checked_model'"
        assert vectors.execute(checked).fetchone() == (semantic.model_id(),)
        hashed: list[str] = []
        real = semantic.text_hash

        def counting(text: str, model: str = semantic.DEFAULT_MODEL) -> str:
            hashed.append(text)
            return real(text, model)

        monkeypatch.setattr(semantic, "text_hash", counting)
        index.rebuild()  # every vector was checked against these very lines, by this model
        assert hashed == []
        # Vectors last checked by another model id (an engram that embedded otherwise): each
        # is checked again, and a wrong one embedded again.
        with vectors:
            vectors.execute("UPDATE meta SET value='another-model' WHERE key='checked_model'")
            vectors.execute("UPDATE vectors SET hash='stale' WHERE id='01a02'")
        index.rebuild()
        assert len(hashed) == 4
        row = vectors.execute("SELECT hash FROM vectors WHERE id='01a02'").fetchone()
        found = index.get("01a02")
        assert found is not None
        assert row == (real(semantic.record_text(found)),)
        assert vectors.execute(checked).fetchone() == (semantic.model_id(),)
        # A memory changed in the file since: only it is hashed and embedded again.
        hashed.clear()
        changed = [record(f"01a{n:02d}", f"Zeppelin note {n}") for n in range(4)]
        changed[1]["content"] = "The hangar doors open eastward now"
        store.rewrite(changed)
        index.rebuild()
        assert hashed == [semantic.record_text(changed[1])]
        row = vectors.execute("SELECT hash FROM vectors WHERE id='01a01'").fetchone()
        assert row == (real(semantic.record_text(changed[1])),)
    finally:
        index.close()


WORDS = st.text(alphabet=st.sampled_from("ab AB\t\n\u00a0\u00df\u0130\u2026.S\u03a3"), max_size=30)


@settings(max_examples=3000)
@given(WORDS, WORDS, st.text(alphabet=" \t\n", max_size=200), st.booleans())
def test_the_ranked_title_from_folded_text_is_the_ranked_title(
    title: str, rest: str, spaces: str, starts: bool
) -> None:
    # Often a content that starts with the title, as written or respaced, as capture writes;
    # spaces enough to push it past the cut ranked_title compares.
    content = (spaces + title.upper() + rest) if starts else rest
    folded = normalize_content(title), normalize_content(content)
    assert ranked_title_of(title, content, *folded) == ranked_title(title, content)
    doc = Doc("d", title, content, (), (), "note", "active", "project", "")
    assert doc.ranked_title() == ranked_title(title, content)
    assert doc._replace(ranked="x").ranked_title() == "x"


def test_a_title_past_the_cut_of_the_content_is_ranked() -> None:
    title, content = "Retry the webhook", " " * 200 + "Retry the webhook twice"
    folded = normalize_content(title), normalize_content(content)
    assert folded[1].startswith(folded[0])
    assert ranked_title_of(title, content, *folded) == ranked_title(title, content) == title
    assert ranked_title_of(title, content.strip(), *folded) == ""


def _epoch_by_parse_time(value: str) -> float:
    try:
        return parse_time(value).timestamp()
    except Exception:
        return 0.0


@given(
    st.one_of(
        st.datetimes().map(lambda moment: moment.isoformat(timespec="milliseconds") + "Z"),
        st.datetimes().map(lambda moment: moment.isoformat(sep=" ") + "Z"),
        st.text(alphabet=st.sampled_from("0123456789-:T.+Z zW,"), max_size=30).map(
            lambda text: text + "Z"
        ),
    )
)
def test_epoch_reads_a_z_time_as_parse_time_does(value: str) -> None:
    assert epoch(value) == _epoch_by_parse_time(value)
