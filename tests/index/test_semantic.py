"""Semantic recall: the offline embedder, vectors in the index, hybrid and semantic search.

Real model files (the wordllama package's bundled weights), real on-disk indexes in tmp_path and
real subprocesses where imports or the network are the point.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from engram.config import DEFAULTS
from engram.errors import ConfigError, IndexError_
from engram.index import semantic
from engram.index.db import Index
from engram.index.query import Hit, Query
from engram.index.ranking import Weights, fuse
from engram.index.records import SCHEMA_VERSION
from engram.index.vectors import Vectors
from engram.model import new_id
from engram.store import MemoryStore

pytestmark = pytest.mark.skipif(not semantic.available(), reason="wordllama is not installed")

STAMP = "2026-01-10T09:00:00.000Z"
PARAPHRASE = "why not keep login state in redis"
NEGATIVES = (
    "how do I bake sourdough bread",
    "best hiking trails in the alps",
    "who painted the mona lisa",
)

# (title, content, kind, tags, files): a small, realistic project memory.
CORPUS: tuple[tuple[str, str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "Store sessions in Postgres",
        "Session data for signed-in users lives in Postgres rather than an in-memory key-value "
        "store: restarting the cache no longer logs everybody out.",
        "decision",
        ("auth", "sessions"),
        ("app/auth/session.py",),
    ),
    (
        "Retry webhook deliveries with exponential backoff",
        "Failed deliveries are retried 8 times, doubling from 30 seconds, then parked for review.",
        "pattern",
        ("webhooks",),
        ("app/webhooks/deliver.py",),
    ),
    (
        "Pin the Stripe API version in code",
        "Set stripe.api_version explicitly; upgrading the dashboard default broke refunds once.",
        "pitfall",
        ("billing", "stripe"),
        ("app/billing/stripe_client.py",),
    ),
    (
        "Migrations must be backward compatible with the running release",
        "Add columns nullable first, backfill, then tighten. Never rename in one deploy.",
        "principle",
        ("database", "migrations"),
        ("migrations/",),
    ),
    (
        "Celery soft time limit 120 s, hard 150 s",
        "Workers kill tasks past the hard limit; long exports are chunked into subtasks.",
        "config",
        ("celery", "workers"),
        ("app/worker.py",),
    ),
    (
        "Fixed double charge when the payment form was submitted twice",
        "The checkout button now disables itself and the charge carries an idempotency key.",
        "bugfix",
        ("billing", "checkout"),
        ("app/billing/checkout.py",),
    ),
    (
        "Use structlog with JSON output in production",
        "Plain text logs locally, JSON in production so the log pipeline can index fields.",
        "decision",
        ("logging",),
        ("app/logging.py",),
    ),
    (
        "Feature flags are evaluated when the task runs, not when it is queued",
        "A flag flipped between enqueue and run must apply to the run.",
        "pattern",
        ("flags", "celery"),
        ("app/flags.py",),
    ),
    (
        "Public API rate limiting uses a sliding window per token",
        "100 requests per minute per API token; 429 responses carry Retry-After.",
        "architecture",
        ("api", "ratelimit"),
        ("app/api/limits.py",),
    ),
    (
        "Image uploads go straight to object storage with presigned URLs",
        "The browser uploads to S3 with a presigned POST; the app server never proxies bytes.",
        "architecture",
        ("uploads", "s3"),
        ("app/uploads.py",),
    ),
    (
        "Timezone bugs: store UTC, convert at the edge",
        "All timestamps are UTC in the database; the UI converts using the user's profile zone.",
        "principle",
        ("time",),
        ("app/util/time.py",),
    ),
    (
        "Session: upgraded Django to 5.1",
        "Dropped the deprecated USE_L10N setting and fixed two template tags.",
        "session",
        ("django", "upgrade"),
        ("requirements.txt",),
    ),
)


def record(
    title: str,
    content: str = "",
    kind: str = "note",
    tags: Sequence[str] = (),
    files: Sequence[str] = (),
    **extra: Any,
) -> dict[str, Any]:
    """Return a memory with every required field."""
    out: dict[str, Any] = {
        "id": new_id(),
        "kind": kind,
        "title": title,
        "content": content,
        "tags": list(tags),
        "files": list(files),
        "importance": 3,
        "status": "active",
        "scope": "project",
        "project": "demo",
        "created_at": STAMP,
        "updated_at": STAMP,
        "rev": 1,
    }
    out.update(extra)
    return out


def open_index(store: MemoryStore, mode: str, **settings: Any) -> Index:
    search = {**DEFAULTS["search"], "mode": mode, **settings}
    index = Index(store, backend="fts5", weights=Weights.from_settings(search))
    index.refresh()  # as every reader does first
    return index


@pytest.fixture
def corpus() -> list[dict[str, Any]]:
    return [record(*item) for item in CORPUS]


@pytest.fixture
def store(tmp_path: Path, corpus: list[dict[str, Any]]) -> MemoryStore:
    folder = tmp_path / ".engram"
    folder.mkdir()
    memories = MemoryStore(folder)
    memories.rewrite(corpus)
    return memories


@pytest.fixture
def hybrid(store: MemoryStore) -> Iterator[Index]:
    index = open_index(store, "hybrid")
    index.refresh()
    yield index
    index.close()


class Counter:
    """Counts the texts handed to Embedder.embed (wraps the real method)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts: list[str] = []
        real = semantic.Embedder.embed

        def counting(embedder: semantic.Embedder, texts: Sequence[str]) -> Any:
            self.texts.extend(texts)
            return real(embedder, texts)

        monkeypatch.setattr(semantic.Embedder, "embed", counting)


def titles(hits: Sequence[Hit]) -> list[str]:
    return [str(hit.record["title"]) for hit in hits]


def vector_ids(index: Index) -> set[str]:
    return index.vectors.ids()


def run_python(code: str, tmp_path: Path, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Run code in a fresh interpreter with HOME in tmp_path; return the JSON it prints last."""
    env = {
        **(os.environ if environ is None else environ),
        "HOME": str(tmp_path / "home"),
        "ENGRAM_HOME": str(tmp_path / "eh"),
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# -- the embedder ---------------------------------------------------------------------------


def test_model_loads_offline_without_any_connection_or_download(tmp_path: Path) -> None:
    out = run_python(
        """
        import json, socket, sys
        attempts = []
        def refuse(self, *args, **kwargs):
            attempts.append(args)
            raise OSError("network disabled in this test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        from engram.index import semantic
        vectors = semantic.Embedder().embed(["Store sessions in Postgres", ""])
        print(json.dumps({
            "attempts": len(attempts),
            "shape": list(vectors.shape),
            "dtype": str(vectors.dtype),
            "norms": [float((row * row).sum()) for row in vectors],
            "modules": sorted(m for m in ("wordllama", "requests", "huggingface_hub")
                              if m in sys.modules),
        }))
        """,
        tmp_path,
    )
    assert out["attempts"] == 0
    assert out["shape"] == [2, 256] and out["dtype"] == "float32"
    assert out["norms"][0] == pytest.approx(1.0, abs=1e-5)
    assert out["norms"][1] == 0.0  # no tokens, no direction
    assert out["modules"] == []  # wordllama (which can download) is never imported
    home = tmp_path / "home"
    assert not (home / ".cache").exists()  # nothing fetched or cached


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("setting", [None, "true"])
def test_tokenizer_threads_stay_off_unless_the_environment_asks(
    tmp_path: Path, setting: str | None
) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "TOKENIZERS_PARALLELISM"}
    if setting is not None:
        environ["TOKENIZERS_PARALLELISM"] = setting
    out = run_python(
        """
        import json, os
        from engram.index import semantic
        before = len(os.listdir("/proc/self/task"))
        semantic.Embedder().embed(["a save with new words", "and another with more"])
        print(json.dumps({
            "setting": os.environ.get("TOKENIZERS_PARALLELISM"),
            "threads": len(os.listdir("/proc/self/task")) - before,
        }))
        """,
        tmp_path,
        environ,
    )
    if setting is None:  # a save's tiny batch wakes no worker threads to spin after it
        assert out == {"setting": "false", "threads": 0}
    else:
        assert out["setting"] == "true"


def test_missing_model_files_fail_closed(tmp_path: Path) -> None:
    with pytest.raises(IndexError_, match="cannot load the embedding model"):
        semantic.Embedder(tmp_path)


def test_vectors_match_wordllama_embed() -> None:
    wordllama = pytest.importorskip("wordllama")
    folder = semantic.model_dir()
    assert folder is not None
    reference = wordllama.WordLlama.load(cache_dir=folder, disable_download=True)
    texts = [
        "Store sessions in Postgres",
        PARAPHRASE,
        "def refresh(self):\n    return  self._sync()   # two  spaces\n\tand a tab",
        "  leading spaces and trailing  ",
        "\nstarts with a newline",
        "ünïcödé, 日本語 and emoji 🚀 in a memory",
        semantic.record_text(record(*CORPUS[0])),
    ]
    mine = semantic.Embedder().embed(texts)
    theirs = reference.embed(texts, norm=True)
    for row, text in enumerate(texts):
        cosine = float(mine[row] @ theirs[row])
        assert cosine >= 0.999, text


def test_query_embeddings_are_cached_and_read_only() -> None:
    first = semantic.embed_query("a query asked twice")
    assert semantic.embed_query("a query asked twice") is first
    assert not first.flags.writeable


def test_keyword_recall_imports_no_numpy_or_model(tmp_path: Path) -> None:
    out = run_python(
        f"""
        import json, sys
        from pathlib import Path
        from engram.config import DEFAULTS
        from engram.index.db import Index
        from engram.index.query import Query
        from engram.index.ranking import Weights
        from engram.store import MemoryStore
        folder = Path(".engram"); folder.mkdir()
        store = MemoryStore(folder)
        store.rewrite([{json.dumps(record("Store sessions in Postgres"))}])
        search = dict(DEFAULTS["search"], mode="keyword")
        index = Index(store, backend="fts5", weights=Weights.from_settings(search))
        hits = index.search(Query(text="sessions postgres")) if index.refresh() else []
        print(json.dumps({{
            "hits": len(hits),
            "numpy": "numpy" in sys.modules,
            "tokenizers": "tokenizers" in sys.modules,
        }}))
        """,
        tmp_path,
    )
    assert out == {"hits": 1, "numpy": False, "tokenizers": False}


# -- search -----------------------------------------------------------------------------------


def test_paraphrase_found_in_hybrid_mode(store: MemoryStore, hybrid: Index) -> None:
    hits = hybrid.search(Query(text=PARAPHRASE, limit=3))
    assert "Store sessions in Postgres" in titles(hits)
    keyword = open_index(store, "keyword")
    keyword.refresh()
    by_keyword = titles(keyword.search(Query(text=PARAPHRASE, limit=3)))
    # Keyword ranking misses it or ranks it lower: the words differ.
    assert "Store sessions in Postgres" not in by_keyword or by_keyword.index(
        "Store sessions in Postgres"
    ) >= titles(hits).index("Store sessions in Postgres")


def test_semantic_mode_finds_paraphrase_by_meaning_alone(store: MemoryStore) -> None:
    index = open_index(store, "semantic")
    hits = index.search(Query(text=PARAPHRASE, limit=3))
    assert titles(hits)[0] == "Store sessions in Postgres"
    assert all(hit.bm25 == 0 for hit in hits)
    assert hits[0].cosine >= index.weights.semantic_floor


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("stripe api version", "Pin the Stripe API version in code"),
        ("structlog", "Use structlog with JSON output in production"),
        ("presigned", "Image uploads go straight to object storage with presigned URLs"),
        ("celery time limit", "Celery soft time limit 120 s, hard 150 s"),
        ("double charge", "Fixed double charge when the payment form was submitted twice"),
    ],
)
def test_keyword_queries_keep_their_exact_match_first(
    hybrid: Index, query: str, expected: str
) -> None:
    assert titles(hybrid.search(Query(text=query, limit=5)))[0] == expected


@pytest.mark.parametrize("query", NEGATIVES)
def test_negative_queries_come_back_empty_or_below_the_floor(hybrid: Index, query: str) -> None:
    hits = hybrid.search(Query(text=query, limit=10))
    assert all(hit.cosine < hybrid.weights.semantic_floor for hit in hits)


@pytest.mark.parametrize("query", NEGATIVES)
def test_negative_queries_are_empty_in_semantic_mode(store: MemoryStore, query: str) -> None:
    assert open_index(store, "semantic").search(Query(text=query)) == []


def test_filters_apply_to_semantic_candidates(store: MemoryStore) -> None:
    index = open_index(store, "semantic")
    target = "Store sessions in Postgres"
    assert target in titles(index.search(Query(text=PARAPHRASE)))
    for query in (
        Query(text=PARAPHRASE, kinds=frozenset({"pattern"})),
        Query(text=PARAPHRASE, tags=frozenset({"billing"})),
        Query(text=PARAPHRASE, files=("app/billing/checkout.py",)),
        Query(text=PARAPHRASE, projects=frozenset({"elsewhere"})),
        Query(text=PARAPHRASE, statuses=frozenset({"archived"})),
        Query(text=PARAPHRASE, scopes=frozenset({"personal"})),
    ):
        hits = index.search(query)
        assert target not in titles(hits), query
    kept = index.search(Query(text=PARAPHRASE, kinds=frozenset({"decision"}), tags=("auth",)))
    assert titles(kept) == [target]
    assert all(
        hit.record["kind"] == "pattern"
        for hit in index.search(Query(text="retry later", kinds=frozenset({"pattern"})))
    )


def test_multipliers_and_cut_apply_to_fused_scores(store: MemoryStore) -> None:
    index = open_index(store, "hybrid")
    first = index.search(Query(text=PARAPHRASE))[0]
    assert first.record["title"] == "Store sessions in Postgres"
    data = [dict(item) for item in store.read_all()]
    for item in data:
        if item["title"] == "Store sessions in Postgres":
            item["status"] = "archived"
    store.rewrite(data)
    index.refresh()
    demoted = index.search(Query(text=PARAPHRASE))
    moved = [hit for hit in demoted if hit.id == first.id]
    assert not moved or moved[0].score < first.score  # status x0.4, maybe cut at 20%
    best = demoted[0].score
    assert all(hit.score >= best * index.weights.min_score_ratio for hit in demoted)


def test_fuse_blends_absolute_parts() -> None:
    weights = Weights(mode="hybrid", semantic_weight=0.5, semantic_floor=0.4)
    assert fuse(1.0, 0.8, weights) == pytest.approx(1.0)
    assert fuse(0.5, 0.1, weights) == pytest.approx(0.25)  # off-topic cosine: 0
    assert fuse(0.0, 0.5, weights) == pytest.approx(0.25)  # (0.5-0.2)/(0.8-0.2)/2
    # The cosine is not stretched by the best candidate's: a query whose best cosine is weak
    # scores low, so that the relevance floor can drop it.
    assert fuse(0.0, 0.22, weights) == pytest.approx(0.5 * 0.02 / 0.6)
    semantic_only = Weights(mode="semantic", semantic_floor=0.4)
    assert fuse(1.0, 0.5, semantic_only) == pytest.approx(0.5)
    assert fuse(1.0, 0.5, Weights(mode="keyword")) == pytest.approx(1.0)


def test_min_relevance_setting() -> None:
    assert Weights.from_settings({}).min_relevance is None  # auto: the mode's floor
    assert Weights.from_settings({"min_relevance": "auto"}).min_relevance is None
    assert Weights.from_settings({"min_relevance": 0}).min_relevance == 0.0
    for bad in ("high", float("nan"), float("inf"), True, [0.3]):
        with pytest.raises(ConfigError, match=r"search\.min_relevance"):
            Weights.from_settings({"min_relevance": bad})


def test_unknown_mode_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"search\.mode"):
        Weights.from_settings({"mode": "vector"})


# -- vectors in the index -------------------------------------------------------------------


def test_keyword_mode_never_loads_the_model(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    monkeypatch.setattr(semantic, "get_embedder", lambda: built.append("x") or semantic.Embedder())
    index = open_index(store, "keyword")
    index.rebuild()
    store.put([record("Another memory about sessions")])
    index.refresh()
    index.apply([record("Written by this process")], store.signature())
    assert index.search(Query(text="sessions"))
    assert built == []
    assert index.embedder() is None and index.mode == "keyword"
    assert vector_ids(index) == set()


def test_hybrid_falls_back_to_keyword_without_the_model(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic, "available", lambda model="wordllama": False)
    index = open_index(store, "hybrid")
    assert index.mode == "keyword"
    keyword = open_index(store, "keyword")
    query = Query(text="stripe refunds")
    assert [h.id for h in index.search(query)] == [h.id for h in keyword.search(query)]
    assert vector_ids(index) == set()


def test_unchanged_memories_are_not_embedded_again(
    store: MemoryStore, corpus: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = Counter(monkeypatch)
    index = open_index(store, "hybrid")
    index.refresh()
    assert len(counter.texts) == len(corpus)
    assert vector_ids(index) == {item["id"] for item in corpus}
    counter.texts.clear()
    # A status change and a judgement change the line, not the embedded text.
    changed = [dict(item) for item in corpus]
    changed[1]["status"] = "superseded"
    changed[2]["importance"] = 5
    added = record("Cache rate quotes for 15 minutes", "Quotes older than that are refetched.")
    store.rewrite([*changed, added])
    index.refresh()
    assert counter.texts == [semantic.record_text(added)]
    counter.texts.clear()
    index.rebuild()  # vectors outlive a rebuild: keyed by their text
    assert counter.texts == []
    assert index.search(Query(text="quotes refetched"))


@pytest.mark.parametrize("field", ["title", "content", "tags"])
def test_changed_text_is_embedded_again(
    store: MemoryStore,
    corpus: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    field: str,
) -> None:
    index = open_index(store, "hybrid")
    index.refresh()
    vectors = index.vectors.db
    before = vectors.execute("SELECT vec FROM vectors WHERE id=?", (corpus[0]["id"],)).fetchone()
    counter = Counter(monkeypatch)
    changed = [dict(item) for item in corpus]
    changed[0][field] = ["redis"] if field == "tags" else "Login state moved to a Redis cluster"
    store.rewrite(changed)
    index.refresh()
    assert counter.texts == [semantic.record_text(changed[0])]
    after = vectors.execute("SELECT vec FROM vectors WHERE id=?", (corpus[0]["id"],)).fetchone()
    assert after != before


def test_own_writes_are_embedded_and_searchable(hybrid: Index, store: MemoryStore) -> None:
    fresh = record("Background jobs use a dead letter queue", "Poison messages are parked.")
    signature = store.put([fresh])
    hybrid.apply([fresh], signature)
    assert fresh["id"] in vector_ids(hybrid)
    hits = hybrid.search(Query(text="where do failing queue messages end up", limit=3))
    assert fresh["id"] in [hit.id for hit in hits]


def test_similar_reuses_the_vector_a_write_just_embedded(
    hybrid: Index, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save's near-duplicate check asks for the text it wrote: embedded once, same answer."""
    fresh = record("Sessions are kept in Postgres", "Session rows live in Postgres, not Redis.")
    text = semantic.record_text(fresh)
    hybrid.apply([fresh], store.put([fresh]))
    counter = Counter(monkeypatch)
    found = hybrid.similar(text, limit=4, min_cosine=0.9)
    assert counter.texts == []
    assert found[0] == (fresh["id"], 1.0)
    other = record("Release notes are Markdown", "One file per version.")
    hybrid.apply([other], store.put([other]))
    assert counter.texts == [semantic.record_text(other)]
    assert hybrid.similar(text, limit=4, min_cosine=0.9) == found  # not the last write's text
    assert counter.texts == [semantic.record_text(other), text]  # so embedded as a query


def test_a_text_embedded_in_a_batch_has_the_vector_it_has_alone() -> None:
    texts = [semantic.record_text(record(*item)) for item in CORPUS]
    together = semantic.get_embedder().embed(texts)
    for row, text in enumerate(texts):
        assert together[row].tobytes() == semantic.get_embedder().embed([text])[0].tobytes()


def test_a_query_converts_only_its_rows_and_gets_the_same_vector() -> None:
    # The weights are stored as float16 and summed as float32: a query's few rows are
    # converted as they are looked up, the whole table only once a process has looked up as
    # many rows as it has; both ways give the same bytes.
    texts = [semantic.record_text(record(*item)) for item in CORPUS] + [PARAPHRASE, "", "x"]
    fresh = semantic.Embedder()
    one_by_one = [fresh.embed([text])[0].tobytes() for text in texts]
    assert fresh._table32 is None  # a handful of queries never converts the table
    bulk = semantic.Embedder()
    bulk._rows_for(len(bulk._stored))  # as after a bulk embedding: the table converted
    assert bulk._table32 is not None and bulk._table32.dtype.name == "float32"
    assert [bulk.embed([text])[0].tobytes() for text in texts] == one_by_one
    assert fresh.dim == bulk.dim == bulk._table32.shape[1]


def test_tombstones_leave_the_vectors(
    store: MemoryStore, hybrid: Index, corpus: list[dict[str, Any]]
) -> None:
    gone, removed = corpus[0], corpus[1]
    tomb = {"id": gone["id"], "rev": 2, "updated_at": STAMP, "deleted_at": STAMP}
    store.rewrite([tomb, *corpus[2:]])
    hybrid.refresh()
    assert gone["id"] not in vector_ids(hybrid)
    assert removed["id"] not in vector_ids(hybrid)
    assert gone["id"] not in [h.id for h in hybrid.search(Query(text=PARAPHRASE))]
    # This process's own delete too.
    other = corpus[2]
    tomb = {"id": other["id"], "rev": 2, "updated_at": STAMP, "deleted_at": STAMP}
    hybrid.apply([tomb], store.put([tomb]))
    assert other["id"] not in vector_ids(hybrid)


def test_vectors_caught_up_after_keyword_mode_writes(
    store: MemoryStore, corpus: list[dict[str, Any]]
) -> None:
    keyword = open_index(store, "keyword")
    keyword.refresh()
    keyword.close()
    index = open_index(store, "hybrid")
    assert vector_ids(index) == set()
    assert "Store sessions in Postgres" in titles(index.search(Query(text=PARAPHRASE, limit=3)))
    assert vector_ids(index) == {item["id"] for item in corpus}


def test_schema_bump_rebuilds_with_vectors(
    store: MemoryStore, corpus: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    open_index(store, "hybrid").close()
    folder = store.dir / "index"
    conn = sqlite3.connect(folder / "engram.db")
    with conn:
        conn.execute("UPDATE meta SET value=? WHERE key='schema'", (str(SCHEMA_VERSION - 1),))
    conn.close()
    conn = sqlite3.connect(folder / "vectors.db")
    with conn:
        conn.execute("INSERT INTO vectors VALUES ('stale', 'x', 'y', x'00')")
    conn.close()
    counter = Counter(monkeypatch)
    index = open_index(store, "hybrid")
    assert index.meta("schema") == str(SCHEMA_VERSION)
    assert vector_ids(index) == {item["id"] for item in corpus}  # 'stale' wiped with the rest
    assert len(counter.texts) == len(corpus)  # embedded afresh
    assert index.search(Query(text=PARAPHRASE, limit=3))


def test_similar_finds_neighbours_by_text_or_memory(
    hybrid: Index, corpus: list[dict[str, Any]], store: MemoryStore
) -> None:
    target = corpus[0]["id"]
    found = hybrid.similar(PARAPHRASE, limit=3)
    assert found[0][0] == target
    assert all(cosine >= hybrid.weights.semantic_floor for _, cosine in found)
    assert hybrid.similar(NEGATIVES[0]) == []
    twin = record("Keep sessions in Postgres", CORPUS[0][1], "decision", ("auth", "sessions"))
    hybrid.apply([twin], store.put([twin]))
    near = hybrid.similar(like=twin["id"], limit=2)
    assert near[0][0] == target and near[0][1] > 0.9
    assert twin["id"] not in [rid for rid, _ in near]
    vectors = hybrid.vectors_for([target, twin["id"], "missing"])
    assert set(vectors) == {target, twin["id"]}
    assert float(vectors[target] @ vectors[twin["id"]]) == pytest.approx(near[0][1], abs=1e-3)
    assert open_index(store, "keyword").similar(PARAPHRASE) == []


def test_own_write_without_the_model_loaded_is_embedded_by_the_next_search(
    hybrid: Index, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As in a one-shot `engram remember`: the process never loaded the model.
    monkeypatch.setattr(semantic, "_embedders", {})
    hybrid.vectors._embedder = None
    fresh = record("Background jobs use a dead letter queue", "Poison messages are parked.")
    hybrid.apply([fresh], store.put([fresh]))
    assert not semantic.loaded()
    assert fresh["id"] not in vector_ids(hybrid)
    hits = hybrid.search(Query(text="where do failing queue messages end up", limit=3))
    assert fresh["id"] in [hit.id for hit in hits]
    assert fresh["id"] in vector_ids(hybrid)


def from_disk(array: Any) -> bool:
    """Tell whether a numpy array's memory is a file mapped from disk (a view of a memmap)."""
    import numpy as np

    while array is not None:
        if isinstance(array, np.memmap):
            return True
        array = getattr(array, "base", None)
    return False


def test_a_new_process_maps_the_vectors_from_disk_instead_of_reading_sqlite(
    store: MemoryStore, hybrid: Index, corpus: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The matrix is saved once and memory-mapped by the next reader; a change is appended to
    its log, and the reader after that maps the base and replays the log."""
    query = "why not keep login state in redis"
    first = [(hit.id, hit.score) for hit in hybrid.search(Query(text=query))]
    folder = store.dir / "index"
    saved = sorted(path.name for path in folder.glob("vectors-*"))
    # ids, the matrix, its leading dimensions, the change log
    assert [name.split(".", 1)[1] for name in saved] == [
        "head.npy",
        "ids.json",
        "log",
        "matrix.npy",
    ]
    log = folder / saved[2]
    assert log.stat().st_size == 0
    reads: list[int] = []
    real_read = Vectors._read
    monkeypatch.setattr(Vectors, "_read", lambda self, *a: reads.append(1) or real_read(self, *a))
    again = open_index(store, "hybrid")
    third = None
    try:
        assert [(hit.id, hit.score) for hit in again.search(Query(text=query))] == first
        state = again.vectors.state()
        assert state is not None and from_disk(state.matrix) and from_disk(state.head)
        assert not state.matrix.flags.writeable
        # Another process changes the store: this one follows (one entry logged, no rewrite).
        changed = {**corpus[0], "content": "something else entirely", "rev": 2}
        store.put([changed])
        again.refresh()
        after = [(hit.id, hit.score) for hit in again.search(Query(text=query))]
        assert after != first
        assert sorted(path.name for path in folder.glob("vectors-*")) == saved
        assert log.stat().st_size > 0
        third = open_index(store, "hybrid")
        assert [(hit.id, hit.score) for hit in third.search(Query(text=query))] == after
        target = corpus[0]["id"]
        mapped, followed = third.vectors_for([target]), again.vectors_for([target])
        assert float(mapped[target] @ followed[target]) == pytest.approx(1.0, abs=1e-6)
        assert reads == []  # neither reader read the vectors out of SQLite
    finally:
        again.close()
        if third is not None:
            third.close()
