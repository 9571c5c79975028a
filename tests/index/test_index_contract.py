"""The contract every full-text backend keeps (README), run against Tantivy and FTS5.

Real on-disk indexes in tmp_path and real subprocesses; no mocks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.errors import ConfigError
from engram.index.backend import (
    DEFAULT_FIELD_WEIGHTS,
    Doc,
    Filters,
    SearchIndex,
    tokenize_query,
)
from engram.index.factory import open_backend
from tests.helpers.backends import BACKENDS
from tests.helpers.places import ROOT


def make_doc(
    id: str,
    title: str = "",
    content: str = "",
    *,
    tags: tuple[str, ...] = (),
    files: tuple[str, ...] = (),
    kind: str = "decision",
    status: str = "active",
    scope: str = "project",
    project: str = "demo",
) -> Doc:
    """Build a Doc with harmless defaults."""
    return Doc(id, title, content, tags, files, kind, status, scope, project)


# Unrelated documents, so that the words under test are rare (FTS5's bm25 gives a near-zero idf
# to any word found in half the documents or more).
FILLER = [
    make_doc(f"filler-{i}", f"note {word}", f"an unrelated paragraph about {word} and more {word}")
    for i, word in enumerate(
        ["gardening", "violin", "astronomy", "pottery", "sailing", "chess", "baking", "hiking"]
    )
]

CORPUS = [
    *FILLER,
    make_doc(
        "m-cache",
        "Cache invalidation strategy",
        "We invalidate the response cache whenever a memory changes.",
        tags=("performance",),
        files=("engram/index/cache.py",),
        kind="decision",
    ),
    make_doc(
        "m-lock",
        "SQLite lock timeouts under load",
        "Writers wait for the store lock; readers never block.",
        tags=("sqlite", "concurrency"),
        files=("engram/store/lock.py",),
        kind="pitfall",
    ),
    make_doc(
        "m-auth",
        "Session tokens expire after an hour",
        "Refresh the token on the server side.",
        tags=("auth", "security"),
        files=("src/auth/session.py",),
        kind="principle",
        scope="global",
    ),
    make_doc(
        "m-merge",
        "Merge is commutative",
        "The merge function must not depend on the order of its inputs.",
        tags=("sync",),
        files=("engram/sync/merge.py",),
        kind="fact",
        status="superseded",
        project="other",
    ),
]

HOSTILE = [
    '"',
    "(",
    ")",
    "AND",
    "OR NOT",
    "a:b",
    "*",
    "title:",
    "\\",
    "''",
    "🔥🚀 cache 🔥",
    '"unterminated phrase',
    "NEAR(cache lock, 2)",
    "cache^3 lock~2 -merge +auth",
    "{title content}: cache",
    "x" * 10_000,
    ("cache (lock OR " * 700)[:10_240],
    "ﬁle naïve Ǆ İstanbul ß",
    "\x00\x01\t\n",
    "___",
    "",
]


def ids_of(hits: list[tuple[str, float]]) -> list[str]:
    """Return the ids of search hits, in order."""
    return [doc_id for doc_id, _ in hits]


@pytest.fixture
def index(backend: str, tmp_path: Path) -> Iterator[SearchIndex]:
    """An empty index of the backend under test, on disk."""
    ix = open_backend(backend, tmp_path / "index")
    yield ix
    ix.close()


@pytest.fixture(scope="module", params=BACKENDS)
def corpus_index(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SearchIndex]:
    """A read-only index holding CORPUS, shared by the tests of one module."""
    ix = open_backend(str(request.param), tmp_path_factory.mktemp("corpus"))
    ix.upsert(CORPUS)
    yield ix
    ix.close()


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a snippet in a fresh interpreter (a separate process with its own index objects)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# -- basics --------------------------------------------------------------------------------------


def test_empty_index(index: SearchIndex) -> None:
    assert index.count() == 0
    assert index.ids() == set()
    assert index.search("anything", limit=10) == []


def test_name(index: SearchIndex, backend: str) -> None:
    assert index.name == backend


def test_upsert_search_count_ids(index: SearchIndex) -> None:
    index.upsert(CORPUS)
    assert index.count() == len(CORPUS)
    assert index.ids() == {doc.id for doc in CORPUS}
    hits = index.search("invalidation", limit=10)
    assert ids_of(hits) == ["m-cache"]
    assert all(isinstance(score, float) and score > 0 for _, score in hits)


def test_results_best_first_and_limited(corpus_index: SearchIndex) -> None:
    hits = corpus_index.search("cache lock merge token", limit=10)
    assert len(hits) >= 4
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    assert corpus_index.search("cache lock merge token", limit=2) == hits[:2]


@pytest.mark.parametrize("limit", [0, -1])
def test_limit_zero_or_negative_returns_nothing(corpus_index: SearchIndex, limit: int) -> None:
    assert corpus_index.search("cache", limit=limit) == []


def test_huge_limit(corpus_index: SearchIndex) -> None:
    assert ids_of(corpus_index.search("invalidation", limit=10**9)) == ["m-cache"]


def test_upsert_replaces_by_id(index: SearchIndex) -> None:
    index.upsert([*FILLER, make_doc("m-1", "first version", "mentions zeppelin")])
    index.upsert([make_doc("m-1", "second version", "mentions dirigible")])
    assert index.count() == len(FILLER) + 1
    assert index.search("zeppelin", limit=10) == []
    assert ids_of(index.search("dirigible", limit=10)) == ["m-1"]


def test_upsert_same_id_twice_in_one_call_keeps_the_last(index: SearchIndex) -> None:
    index.upsert([make_doc("m-1", "alpha", "zeppelin"), make_doc("m-1", "beta", "dirigible")])
    assert index.count() == 1
    assert index.search("zeppelin", limit=10) == []
    assert ids_of(index.search("dirigible", limit=10)) == ["m-1"]


def test_upsert_replaces_filter_fields_and_tags(index: SearchIndex) -> None:
    index.upsert([make_doc("m-1", "zeppelin", tags=("old",), kind="fact")])
    index.upsert([make_doc("m-1", "zeppelin", tags=("new",), kind="pitfall")])
    assert index.search("zeppelin", limit=5, filters=Filters(tags=frozenset({"old"}))) == []
    assert index.search("zeppelin", limit=5, filters=Filters(kinds=frozenset({"fact"}))) == []
    assert ids_of(index.search("zeppelin", limit=5, filters=Filters(tags=frozenset({"new"})))) == [
        "m-1"
    ]


def test_delete(index: SearchIndex) -> None:
    index.upsert(CORPUS)
    index.delete(["m-cache", "no-such-id"])
    index.delete([])
    assert index.count() == len(CORPUS) - 1
    assert "m-cache" not in index.ids()
    assert index.search("invalidation", limit=10) == []
    index.delete(["m-cache"])  # already gone: a no-op
    assert index.count() == len(CORPUS) - 1


def test_clear(index: SearchIndex) -> None:
    index.upsert(CORPUS)
    index.clear()
    assert index.count() == 0
    assert index.ids() == set()
    assert index.search("cache", limit=10) == []
    index.upsert(CORPUS[:2])  # still usable after clear
    assert index.count() == 2


def test_reopen_after_close_persists(backend: str, tmp_path: Path) -> None:
    folder = tmp_path / "index"
    first = open_backend(backend, folder)
    first.upsert(CORPUS)
    first.delete(["m-merge"])
    first.close()
    first.close()  # closing twice is harmless
    second = open_backend(backend, folder)
    try:
        assert second.count() == len(CORPUS) - 1
        assert ids_of(second.search("invalidation", limit=5)) == ["m-cache"]
    finally:
        second.close()


# -- ranking -------------------------------------------------------------------------------------


def test_title_hit_beats_content_hit(index: SearchIndex) -> None:
    index.upsert(
        [
            *FILLER,
            make_doc("in-content", "a note", "the word zeppelin appears here in the body"),
            make_doc("in-title", "zeppelin", "the body is about something else entirely"),
        ]
    )
    assert ids_of(index.search("zeppelin", limit=5)) == ["in-title", "in-content"]


def test_tag_hit_beats_content_hit(index: SearchIndex) -> None:
    index.upsert(
        [
            *FILLER,
            make_doc("in-content", "a note", "the word zeppelin appears here in the body"),
            make_doc("in-tags", "a note", "the body is about something else", tags=("zeppelin",)),
        ]
    )
    assert ids_of(index.search("zeppelin", limit=5)) == ["in-tags", "in-content"]


def test_field_weights_are_configurable(backend: str, tmp_path: Path) -> None:
    weights = {**DEFAULT_FIELD_WEIGHTS, "title": 0.5, "content": 8.0}
    ix = open_backend(backend, tmp_path / "index", weights)
    try:
        ix.upsert(
            [
                *FILLER,
                make_doc("in-content", "a note", "zeppelin"),
                make_doc("in-title", "zeppelin", "the body is about something else"),
            ]
        )
        assert ids_of(ix.search("zeppelin", limit=5)) == ["in-content", "in-title"]
    finally:
        ix.close()


def test_files_are_searchable_as_words(corpus_index: SearchIndex) -> None:
    assert "m-auth" in ids_of(corpus_index.search("auth", limit=5))
    assert ids_of(corpus_index.search("session.py", limit=5))[0] == "m-auth"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("caching", "m-cache"),
        ("invalidating", "m-cache"),
        ("locks", "m-lock"),
        ("tokens", "m-auth"),
    ],
)
def test_english_stemming(corpus_index: SearchIndex, query: str, expected: str) -> None:
    assert ids_of(corpus_index.search(query, limit=5))[0] == expected


def test_case_and_diacritics_are_folded(index: SearchIndex) -> None:
    index.upsert([*FILLER, make_doc("m-1", "Naïve Café", "RÉSUMÉ of the CRÈME")])
    for query in ("naive cafe", "NAÏVE", "resume", "crème"):
        assert ids_of(index.search(query, limit=5)) == ["m-1"], query


def test_any_word_matches(corpus_index: SearchIndex) -> None:
    """Words are OR'ed: a query with one unknown word still finds the known one."""
    assert ids_of(corpus_index.search("qwxyzzy invalidation", limit=5)) == ["m-cache"]


@pytest.mark.parametrize(
    ("query", "top"),
    [
        ("cache invalidation", "m-cache"),
        ("sqlite lock", "m-lock"),
        ("session token expiry", "m-auth"),
        ("merge order", "m-merge"),
        ("security", "m-auth"),
    ],
)
def test_backends_agree_on_the_top_result(tmp_path: Path, query: str, top: str) -> None:
    tops = []
    for name in BACKENDS:
        ix = open_backend(name, tmp_path / name)
        try:
            ix.upsert(CORPUS)
            tops.append(ids_of(ix.search(query, limit=3))[0])
        finally:
            ix.close()
    assert tops == [top] * len(BACKENDS)


# -- filters -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (Filters(kinds=frozenset({"pitfall"})), {"m-lock"}),
        (Filters(kinds=frozenset({"pitfall", "fact"})), {"m-lock", "m-merge"}),
        (Filters(statuses=frozenset({"superseded"})), {"m-merge"}),
        (Filters(scopes=frozenset({"global"})), {"m-auth"}),
        (Filters(projects=frozenset({"other"})), {"m-merge"}),
        (Filters(tags=frozenset({"sqlite"})), {"m-lock"}),
        (Filters(tags=frozenset({"auth", "sync"})), {"m-auth", "m-merge"}),
        (Filters(tags=frozenset({"SQLite"})), {"m-lock"}),
        (Filters(tags=frozenset({"sql"})), set()),  # exact, never a substring
        (Filters(tags=frozenset({"lite"})), set()),
        (Filters(kinds=frozenset({"pitfall"}), tags=frozenset({"auth"})), set()),  # AND
        (Filters(kinds=frozenset({"principle"}), scopes=frozenset({"global"})), {"m-auth"}),
        (Filters(ids=frozenset({"m-cache", "m-merge"})), {"m-cache", "m-merge"}),
        (Filters(ids=frozenset({"m-cache", "no-such-id"})), {"m-cache"}),
        (Filters(ids=frozenset()), set()),
        (Filters(ids=None), {"m-cache", "m-lock", "m-auth", "m-merge"}),
        (Filters(kinds=frozenset({"no-such-kind"})), set()),
        (Filters(ids=frozenset({"m-lock"}), kinds=frozenset({"pitfall"})), {"m-lock"}),
    ],
)
def test_filters(corpus_index: SearchIndex, filters: Filters, expected: set[str]) -> None:
    query = "cache lock token merge"
    hits = corpus_index.search(query, limit=20, filters=filters)
    assert set(ids_of(hits)) == expected
    # a filter restricts the hits; it never changes a score
    unfiltered = dict(corpus_index.search(query, limit=20))
    for doc_id, score in hits:
        assert score == pytest.approx(unfiltered[doc_id])


def test_filters_apply_before_the_limit(index: SearchIndex) -> None:
    docs = [make_doc(f"m-{i}", "zeppelin " * (i + 1), kind="fact") for i in range(30)]
    docs.append(make_doc("m-rare", "zeppelin", kind="pitfall"))
    index.upsert([*FILLER, *docs])
    hits = index.search("zeppelin", limit=3, filters=Filters(kinds=frozenset({"pitfall"})))
    assert ids_of(hits) == ["m-rare"]


# -- hostile queries -----------------------------------------------------------------------------


@pytest.mark.parametrize("query", HOSTILE, ids=lambda q: repr(q[:20]))
def test_hostile_queries_never_raise(corpus_index: SearchIndex, query: str) -> None:
    hits = corpus_index.search(query, limit=10)
    assert isinstance(hits, list)
    assert all(score > 0 for _, score in hits)


def test_operators_are_plain_words(index: SearchIndex) -> None:
    index.upsert([*FILLER, make_doc("m-1", "this and that", "not or near")])
    assert ids_of(index.search("AND", limit=5))[0] == "m-1"  # a title hit; fillers say "and"
    assert ids_of(index.search("NOT", limit=5)) == ["m-1"]
    assert ids_of(index.search("title:that", limit=5)) == ["m-1"]


@settings(max_examples=150, deadline=None)
@given(query=st.text())
def test_any_text_is_a_valid_query(corpus_index: SearchIndex, query: str) -> None:
    hits = corpus_index.search(query, limit=5)
    assert isinstance(hits, list)
    assert all(isinstance(doc_id, str) and score > 0 for doc_id, score in hits)


def test_query_without_word_tokens_returns_nothing(corpus_index: SearchIndex) -> None:
    for query in ("", "   ", "!!! ??? ...", "(*)", '""'):
        assert corpus_index.search(query, limit=5) == []


# -- bulk ----------------------------------------------------------------------------------------


def test_bulk_load_then_search(index: SearchIndex) -> None:
    docs = (
        make_doc(f"m-{i:05d}", f"title {i} word{i % 50}", f"content number {i}")
        for i in range(3000)
    )
    assert index.bulk_load(docs) == 3000
    assert index.count() == 3000
    assert len(index.ids()) == 3000
    hits = index.search("word7", limit=100)
    assert len(hits) == 60
    assert {doc_id for doc_id, _ in hits} == {f"m-{i:05d}" for i in range(7, 3000, 50)}


def test_bulk_load_never_duplicates(index: SearchIndex) -> None:
    index.upsert([make_doc("m-1", "zeppelin old")])
    n = index.bulk_load(
        [make_doc("m-1", "zeppelin new"), make_doc("m-2", "other"), make_doc("m-2", "again")]
    )
    assert n == 3
    assert index.count() == 2
    assert index.search("old", limit=5) == []
    assert ids_of(index.search("again", limit=5)) == ["m-2"]


def test_bulk_load_after_clear(index: SearchIndex) -> None:
    index.upsert(CORPUS)
    index.clear()
    assert index.bulk_load(iter(CORPUS[:5])) == 5
    assert index.ids() == {doc.id for doc in CORPUS[:5]}


# -- processes -----------------------------------------------------------------------------------

WRITE_ONE = """
    import sys
    from pathlib import Path
    from engram.index.backend import Doc
    from engram.index.factory import open_backend
    ix = open_backend(sys.argv[1], Path(sys.argv[2]))
    ix.upsert([Doc(sys.argv[3], sys.argv[4], "", (), (), "fact", "active", "project", "demo")])
    ix.close()
"""

DELETE_ONE = """
    import sys
    from pathlib import Path
    from engram.index.factory import open_backend
    ix = open_backend(sys.argv[1], Path(sys.argv[2]))
    ix.delete([sys.argv[3]])
    ix.close()
"""


def test_another_process_sees_committed_writes(backend: str, tmp_path: Path) -> None:
    folder = tmp_path / "index"
    parent = open_backend(backend, folder)
    try:
        parent.upsert(FILLER)
        assert parent.search("zeppelin", limit=5) == []  # the reader is open and warm
        done = run_python(WRITE_ONE, backend, str(folder), "m-child", "zeppelin from a child")
        assert done.returncode == 0, done.stderr
        assert ids_of(parent.search("zeppelin", limit=5)) == ["m-child"]
        assert parent.count() == len(FILLER) + 1
        assert "m-child" in parent.ids()
        done = run_python(DELETE_ONE, backend, str(folder), "m-child")
        assert done.returncode == 0, done.stderr
        assert parent.search("zeppelin", limit=5) == []
        assert parent.count() == len(FILLER)
        parent.upsert([make_doc("m-parent", "dirigible")])  # and the parent can still write
        assert ids_of(parent.search("dirigible", limit=5)) == ["m-parent"]
    finally:
        parent.close()


RELOAD_SWAPPED = """
    import sys
    from pathlib import Path
    from engram.index.backend import Doc
    from engram.index.factory import open_backend
    ix = open_backend(sys.argv[1], Path(sys.argv[2]))
    ix.clear()
    ix.bulk_load([
        Doc("m-b", "zeppelin", "", (), (), "fact", "active", "project", "demo"),
        Doc("m-a", "dirigible", "", (), (), "fact", "active", "project", "demo"),
    ])
    ix.close()
"""


def test_hits_name_the_documents_after_a_reload_renumbers_them(
    backend: str, tmp_path: Path
) -> None:
    """The same words, asked again after the documents were written anew in another order
    (here, then by another process), name the memories that hold them now: nothing read of an
    earlier reader (Tantivy's document addresses) names a hit."""
    folder = tmp_path / "index"
    ix = open_backend(backend, folder)
    try:
        ix.bulk_load([make_doc("m-a", "zeppelin"), make_doc("m-b", "dirigible")])
        assert ids_of(ix.search("zeppelin", limit=5)) == ["m-a"]
        assert ids_of(ix.search("dirigible", limit=5)) == ["m-b"]
        ix.clear()
        ix.bulk_load([make_doc("m-b", "zeppelin"), make_doc("m-a", "dirigible")])
        assert ids_of(ix.search("zeppelin", limit=5)) == ["m-b"]
        assert ids_of(ix.search("dirigible", limit=5)) == ["m-a"]
        done = run_python(
            RELOAD_SWAPPED.replace('"m-b", "zeppelin"', '"m-c", "zeppelin"'), backend, str(folder)
        )
        assert done.returncode == 0, done.stderr
        assert ids_of(ix.search("zeppelin", limit=5)) == ["m-c"]
        assert ids_of(ix.search("dirigible", limit=5)) == ["m-a"]
    finally:
        ix.close()


HANG_IN_WRITE = """
    import sys, time
    from pathlib import Path
    from engram.index.backend import Doc
    from engram.index.factory import open_backend
    ix = open_backend(sys.argv[1], Path(sys.argv[2]))

    def docs():
        yield Doc("m-half", "zeppelin half written", "", (), (), "fact", "active", "p", "demo")
        print("writing", flush=True)
        time.sleep(60)
        yield Doc("m-never", "never", "", (), (), "fact", "active", "p", "demo")

    ix.bulk_load(docs())
"""


def test_a_killed_writer_does_not_wedge_the_index(backend: str, tmp_path: Path) -> None:
    folder = tmp_path / "index"
    open_backend(backend, folder).close()
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HANG_IN_WRITE), backend, str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "writing"  # it holds the write lock now
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=30)
    ix = open_backend(backend, folder)
    try:
        assert ix.search("zeppelin", limit=5) == []  # the uncommitted write is gone
        ix.upsert([make_doc("m-after", "zeppelin after the crash")])
        assert ids_of(ix.search("zeppelin", limit=5)) == ["m-after"]
    finally:
        ix.close()


# -- shared pieces -------------------------------------------------------------------------------


def test_tokenize_query() -> None:
    assert tokenize_query('Cache "AND" cache (lock:OR) naïve_x') == [
        "cache",
        "and",
        "lock",
        "or",
        "naïve_x",
    ]
    assert tokenize_query("") == []
    assert tokenize_query("a" * 41 + " ok " + "b" * 40) == ["ok", "b" * 40]
    many = tokenize_query(" ".join(f"w{i}" for i in range(200)))
    assert many == [f"w{i}" for i in range(64)]


def test_unknown_backend_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        open_backend("elasticsearch", tmp_path)


@pytest.mark.parametrize("weights", [{"summary": 2.0}, {"title": -1.0}, {"title": float("nan")}])
def test_bad_field_weights_are_a_config_error(
    backend: str, tmp_path: Path, weights: dict[str, float]
) -> None:
    with pytest.raises(ConfigError):
        open_backend(backend, tmp_path, weights)


# -- scoring over the whole memory (issue 16) ----------------------------------------------------


def _common_word_corpus() -> list[Doc]:
    """25 memories that all mention "cache"; one of them also mentions redis."""
    docs = [
        make_doc(f"cache-{i}", f"Cache note {i}", f"the {word} cache is warmed at start-up")
        for i, word in enumerate(f"place{n}" for n in range(24))
    ]
    docs.append(make_doc("redis", "Redis for sessions", "the session cache lives in redis"))
    return docs


def test_a_word_in_every_memory_still_counts(index: SearchIndex) -> None:
    index.upsert(_common_word_corpus())
    assert len(index.search("cache", limit=50)) == 25
    found = ids_of(index.search("cache redis", limit=50))
    assert found[0] == "redis"
    assert len(found) == 25  # the common word still finds the others, ranked below
    # A word nothing has does not empty the answer of a word that many have.
    assert len(index.search("cache xyzzy", limit=50)) == 25


@pytest.mark.parametrize("query", ["C", "R", "plan B", "x"])
def test_single_letters_are_words(index: SearchIndex, query: str) -> None:
    index.upsert(
        [
            *FILLER,
            make_doc("lang-c", "Use C for the parser", "We write the parser in C."),
            make_doc("lang-r", "R scripts for stats", "Statistics run in R."),
            make_doc("plan-b", "Fallback plan B", "If the vendor fails we switch to plan B."),
            make_doc("axis-x", "Label the x axis", "Every chart names its x axis."),
        ]
    )
    expected = {"C": "lang-c", "R": "lang-r", "plan B": "plan-b", "x": "axis-x"}[query]
    assert ids_of(index.search(query, limit=5))[0] == expected


def test_an_exact_title_phrase_comes_first(index: SearchIndex) -> None:
    docs = [make_doc(f"a-{i}", f"From A {i}", f"note {i} from the other side") for i in range(20)]
    docs += [make_doc(f"b-{i}", f"From B {i}", f"note {i} of the second kind") for i in range(20)]
    index.upsert(docs)
    top = ids_of(index.search("From B", limit=10))
    assert all(rid.startswith("b-") for rid in top), top
    assert ids_of(index.search("From B 7", limit=1)) == ["b-7"]


def test_a_rare_title_word_does_not_outweigh_the_whole_memory(index: SearchIndex) -> None:
    # "why" is in one title only: per-field statistics made it the query's rarest word.
    docs = [*FILLER, make_doc("why-title", "Why we log", "logging is configured per module")]
    docs += [
        make_doc(f"retry-{i}", f"Retry note {i}", f"we retry {word} calls with backoff")
        for i, word in enumerate(["payment", "email", "upload"])
    ]
    docs.append(
        make_doc(
            "answer",
            "Exponential backoff for webhooks",
            "Webhook deliveries retry with exponential backoff and jitter, capped at an hour.",
        )
    )
    index.upsert(docs)
    assert ids_of(index.search("why do webhook deliveries retry with backoff", limit=3))[0] == (
        "answer"
    )


def test_tantivy_index_is_rebuilt_when_the_field_weights_change(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    ix = open_backend("tantivy", folder)
    ix.upsert([*FILLER, make_doc("in-title", "zeppelin", "something else")])
    assert ix.count() == len(FILLER) + 1
    ix.close()
    same = open_backend("tantivy", folder)
    assert same.count() == len(FILLER) + 1  # same weights: the documents are kept
    same.close()
    other = open_backend("tantivy", folder, {**DEFAULT_FIELD_WEIGHTS, "title": 1.0})
    try:
        # Scored with the old copies the documents would be wrong: it starts empty, and the
        # index above it refills it from the records.
        assert other.count() == 0
    finally:
        other.close()


# -- Tantivy: a title phrase scored apart ---------------------------------------------------------


def _real_docs() -> list[Doc]:
    """The labelled sets' real memories (harbor, agentlog, captured) as documents."""
    import json

    from engram.index.records import to_doc

    sets = ROOT / "benchmarks" / "retrieval"
    docs: list[Doc] = []
    for folder in (sets, sets / "agentlog", sets / "captured"):
        for line in (folder / "memories.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                docs.append(to_doc(json.loads(line)))
    return docs


def _real_queries() -> list[str]:
    import json

    sets = ROOT / "benchmarks" / "retrieval"
    out: list[str] = []
    for folder in (sets, sets / "agentlog", sets / "captured"):
        for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.append(str(json.loads(line)["query"]))
    return out


@pytest.mark.parametrize("apart", [64, 2])
def test_a_title_phrase_scored_apart_ranks_as_the_one_query_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, apart: int
) -> None:
    """The memories whose title holds the query's phrase are scored apart from the rest
    (``tantivy._top``): every query gets the same hits, scores and order as the one query
    that holds both; with a low ``PHRASE_APART`` most queries take the one query instead."""
    from engram.index import tantivy as backend_module

    monkeypatch.setattr(backend_module, "PHRASE_APART", apart)
    ix = open_backend("tantivy", tmp_path / "index")
    assert isinstance(ix, backend_module.TantivyIndex)
    try:
        docs = _real_docs()
        ix.bulk_load(docs)
        # Two-to-six-word runs of real titles, so that many queries find their phrase there,
        # and the labelled sets' queries.
        titles = [doc.title.split() for doc in docs[::7] if len(doc.title.split()) >= 3]
        queries = [" ".join(words[1:4]) for words in titles] + _real_queries()
        apart_used = 0
        for text in queries:
            ranked = ix._ranked_query(tokenize_query(text))
            if ranked is None:
                continue
            searcher = ix._searcher()
            for limit in (5, 20):
                whole = [
                    (ix._id_at(searcher, address), float(score))
                    for score, address in searcher.search(ranked.full, limit, count=False).hits
                    if score > 0
                ]
                assert ix.search(text, limit=limit) == whole, text
            if ranked.phrased is not None:
                held = searcher.search(ranked.phrased, apart + 1, count=False).hits
                apart_used += 0 < len(held) <= apart
        assert apart_used >= (20 if apart == 64 else 1)
    finally:
        ix.close()
