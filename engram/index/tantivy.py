"""The Tantivy full-text backend of the search index (one folder of tantivy segment files).

It owns that folder: the schema, the analyzer, writer sessions and reader freshness. It stores
only the memory id (records live in the SQLite records DB), builds every query from
``tokenize_query`` tokens (never through the query-string parser, so no user text can be a
syntax error), and must not import ``tantivy`` at import time: ``engram --help`` starts fast.

Ranking is over one ``body`` field that holds every text field as many times as its weight
(title 6, tags 3, content 1, files 2): one document frequency and one length per memory, as
BM25F and FTS5's ``bm25()`` have. Per-field statistics, as before, let a word that is rare among
titles ("why", "chosen") outweigh the words that matter. ``engram-layout.json`` records the
copies and the analyzer; an index written with others is recreated empty and refilled.

Locking: the caller serialises writes across processes with its own file lock. Tantivy's writer
lock is an OS file lock, so a killed process never leaves it held; we hold it only for the length
of one write call, so a long-lived process (an MCP server) never blocks a CLI writer.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from engram.errors import IndexError_
from engram.fileio import Closing
from engram.index.backend import (
    NO_FILTERS,
    TEXT_FIELDS,
    Doc,
    Filters,
    QueryWeight,
    idf,
    informative,
    names,
    resolve_field_weights,
    tokenize_query,
)

# The analyzer name is part of the on-disk schema: change it whenever the analyzer changes, and
# an old index is detected as incompatible and recreated empty (the caller then rebuilds it).
ANALYZER: Final = "engram_en_v2"
WRITER_HEAP_BYTES: Final = 50_000_000
WRITER_THREADS: Final = 1
LOCK_WAIT_SECONDS: Final = 10.0

# keyword fields: raw (untokenized) terms used only for exact filtering
_FILTER_FIELDS: Final = (
    ("kind", "kinds"),
    ("status", "statuses"),
    ("scope", "scopes"),
    ("project", "projects"),
)


def _tantivy() -> Any:
    import tantivy

    return tantivy


def _build_schema() -> Any:
    tantivy = _tantivy()
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    for field in ("kind", "status", "scope", "project", "tag"):
        builder.add_text_field(field, tokenizer_name="raw", index_option="basic")
    # "body" is what is ranked: every text field, each as many times as its weight, so that
    # one set of statistics (document frequency, length) covers the whole memory, as BM25F
    # and FTS5's bm25() do. "title" is kept alone to reward an exact title phrase.
    builder.add_text_field("body", tokenizer_name=ANALYZER, index_option="position")
    builder.add_text_field("title", tokenizer_name=ANALYZER, index_option="position")
    return builder.build()


# An exact phrase of two or more query words in a title adds this share of what the words
# score in the body.
TITLE_PHRASE_BOOST: Final = 0.5
# ... for queries of at most this many words: titles are short, and the phrase query cost a
# third of a search of eight words (consolidation asks thousands of those).
TITLE_PHRASE_WORDS: Final = 6
LAYOUT_FILE: Final = "engram-layout.json"
# Analysed tokens and query weights kept per process (see ``_groups``, ``query_weight``).
TOKENS_KEPT: Final = 50_000
WEIGHTS_KEPT: Final = 512  # query weights, and ranked queries by their tokens
IDS_KEPT: Final = 200_000  # ids by document address
# Memories whose title holds a query's phrase that are scored apart from the others (``_top``).
PHRASE_APART: Final = 64
# How a title is ranked (``backend.ranked_title``): part of the layout, so that an index
# written under another rule is rebuilt.
TITLE_RULE: Final = "not-the-content-prefix"


def copies_of(weights: Mapping[str, float]) -> dict[str, int]:
    """Return how many times each text field is written into the ranked body field.

    A weight is rounded to a whole number of copies; a positive weight under one still gets
    one copy, and 0 leaves the field out of ranking.
    """
    return {
        field: 0 if weights[field] <= 0 else max(1, round(weights[field])) for field in TEXT_FIELDS
    }


def _build_analyzer() -> Any:
    # tantivy's en_stem (simple, remove_long 40, lowercase, English stemmer) plus ASCII folding,
    # so that "cafe" finds "café" as with FTS5's remove_diacritics.
    tantivy = _tantivy()
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _is_lock_busy(exc: Exception) -> bool:
    return "LockBusy" in str(exc)


class TantivyIndex(Closing):
    """Full-text search over memories with Tantivy, stored in one folder."""

    name: str = "tantivy"

    def __init__(self, path: Path, field_weights: Mapping[str, float] | None = None) -> None:
        self.path = Path(path)
        self.weights = resolve_field_weights(field_weights)
        self.copies = copies_of(self.weights)
        self._title_copies = self.copies["title"]
        self._tags_copies = self.copies["tags"]
        self._content_copies = self.copies["content"]
        self._files_copies = self.copies["files"]
        self._lock = threading.RLock()
        self._meta_signature: tuple[int, int, int] | None = None
        # stat'ed before every search: a str, not a Path joined each time
        self._meta_file = str(self.path / "meta.json")
        # The analyzer's terms of a token never change; a query's weight changes with the
        # documents, so those are dropped whenever the reader reloads.
        self._terms: dict[str, tuple[str, ...]] = {}
        self._weights: dict[str, QueryWeight] = {}
        # Each body term's document frequency, as the reader has it: queries share their words,
        # and a new query asked each of them of tantivy.
        self._frequencies: dict[str, int] = {}
        # The ranked query built for a query's tokens (the schema and the copies are fixed),
        # and the id stored at each document address the reader has (dropped when it reloads:
        # a commit renumbers them). Reading a stored document cost a few microseconds per hit.
        self._queries: dict[tuple[str, ...], _Ranked | None] = {}
        self._ids: dict[tuple[int, int], str] = {}
        self._closed = False
        self._schema = _build_schema()
        self._analyzer = _build_analyzer()
        # "\x00" is never produced by the analyzer, so no query term can match it.
        self._placeholder = _tantivy().PreTokenizedString("", [_tantivy().Token("\x00", 0, 0, 0)])
        self._index = self._open_or_create()

    # -- lifecycle ---------------------------------------------------------------------------

    def _layout(self) -> str:
        """Return what the documents on disk depend on besides the schema: analyzer, copies."""
        layout = {"analyzer": ANALYZER, "copies": self.copies, "title": TITLE_RULE}
        return json.dumps(layout, sort_keys=True)

    def _open_or_create(self) -> Any:
        tantivy = _tantivy()
        layout = self.path / LAYOUT_FILE
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            if (self.path / "meta.json").exists() and _read_text(layout) != self._layout():
                # Written with other field weights or another analyzer: the documents would
                # be scored as they were. Start empty; the caller rebuilds.
                self._wipe()
            try:
                index = tantivy.Index(self._schema, str(self.path), reuse=True)
            except ValueError as exc:
                if "schema does not match" not in str(exc) and "ncompatible" not in str(exc):
                    raise
                # A derived index from an older engram: start empty, the caller rebuilds.
                self._wipe()
                index = tantivy.Index(self._schema, str(self.path), reuse=True)
            if _read_text(layout) != self._layout():
                layout.write_text(self._layout(), encoding="utf-8")
            index.register_tokenizer(ANALYZER, self._analyzer)
            # Manual reloads: we reload when meta.json changes, which also covers commits made
            # by other processes, without a file-watcher thread.
            index.config_reader("manual")
        except (OSError, ValueError) as exc:
            raise IndexError_(
                f"cannot open the tantivy index at {self.path}: {exc}",
                hint=f"the index is derived: delete {self.path}, then run `engram index --rebuild`",
            ) from exc
        return index

    def _wipe(self) -> None:
        shutil.rmtree(self.path)
        self.path.mkdir(parents=True)

    def close(self) -> None:
        """Release the index; safe to call twice."""
        with self._lock:
            self._closed = True
            self._index = None

    def _live_index(self) -> Any:
        if self._closed or self._index is None:
            raise IndexError_(f"the tantivy index at {self.path} is closed")
        return self._index

    # -- writing -----------------------------------------------------------------------------

    @contextmanager
    def _writer(self) -> Iterator[Any]:
        """Yield a writer; commit, merge and release the writer lock when the block ends."""
        index = self._live_index()
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                writer = index.writer(WRITER_HEAP_BYTES, WRITER_THREADS)
                break
            except ValueError as exc:
                busy = _is_lock_busy(exc)
                if not busy or time.monotonic() > deadline:
                    raise IndexError_(
                        f"cannot write the tantivy index at {self.path}: {exc}",
                        hint="another process is writing the index; retry" if busy else None,
                    ) from exc
                time.sleep(0.05)
        try:
            yield writer
            writer.commit()
        except BaseException:
            writer.rollback()
            raise
        finally:
            # Waits for merges and drops the writer, which releases the lock file.
            writer.wait_merging_threads()
        self._reload(force=True)

    def _add(self, writer: Any, doc: Doc) -> None:
        title = doc.ranked_title()
        body: list[str] = []
        for text, copies in (
            (title, self._title_copies),
            (" ".join(doc.tags), self._tags_copies),
            (doc.content, self._content_copies),
            (" ".join(doc.files), self._files_copies),
        ):
            if text and copies:
                body += [text] * copies
        fields = {
            "id": doc.id,
            "kind": doc.kind,
            "status": doc.status,
            "scope": doc.scope,
            "project": doc.project,
            "tag": [tag.lower() for tag in doc.tags],
            "title": title,
            "body": body,
        }
        if body:
            # As JSON: Tantivy reads it into the same document (each list one value per item,
            # in order) in half the time of building a Document object field by field.
            with contextlib.suppress(orjson.JSONEncodeError):  # text no JSON can hold
                writer.add_json(orjson.dumps(fields).decode())
                return
        document = _tantivy().Document(**fields)
        if not body:
            # Tantivy averages lengths over every document: an unmatchable token keeps a
            # memory without text from making the others look long.
            document.add_pre_tokenized_text("body", self._placeholder)
        writer.add_document(document)

    def upsert(self, docs: Sequence[Doc]) -> None:
        """Insert or replace documents by id in one commit; durable when it returns."""
        if not docs:
            return
        with self._lock, self._writing("upsert"), self._writer() as writer:
            for doc in docs:
                writer.delete_documents_by_term("id", doc.id)
                self._add(writer, doc)

    def bulk_load(self, docs: Iterable[Doc]) -> int:
        """Add many documents in one writer session and one commit; return how many."""
        count = 0
        with self._lock, self._writing("bulk load"):
            replace = self.count() > 0  # not empty after all: keep replace semantics
            seen: set[str] = set()
            with self._writer() as writer:
                for doc in docs:
                    if replace or doc.id in seen:
                        writer.delete_documents_by_term("id", doc.id)
                    else:
                        seen.add(doc.id)
                    self._add(writer, doc)
                    count += 1
        return count

    def delete(self, ids: Sequence[str]) -> None:
        """Remove documents by id in one commit; missing ids are ignored."""
        if not ids:
            return
        with self._lock, self._writing("delete"), self._writer() as writer:
            for doc_id in ids:
                writer.delete_documents_by_term("id", doc_id)

    def clear(self) -> None:
        """Remove every document in one commit."""
        with self._lock, self._writing("clear"), self._writer() as writer:
            writer.delete_all_documents()

    @contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        try:
            yield
        except (OSError, ValueError) as exc:
            raise IndexError_(f"tantivy {what} failed at {self.path}: {exc}") from exc

    # -- reading -----------------------------------------------------------------------------

    def _reload(self, *, force: bool = False) -> None:
        """Reload the reader if meta.json changed (a commit here or in another process)."""
        try:
            stat = os.stat(self._meta_file)
        except FileNotFoundError:
            return
        signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if force or signature != self._meta_signature:
            self._live_index().reload()
            self._meta_signature = signature
            self._weights.clear()
            self._frequencies.clear()
            self._ids.clear()

    def _searcher(self) -> Any:
        self._reload()
        return self._live_index().searcher()

    def _groups(self, tokens: Sequence[str]) -> list[tuple[str, ...]]:
        """Return the analyzer's terms of each token, once each, in order (empty ones left out)."""
        groups: list[tuple[str, ...]] = []
        seen: set[tuple[str, ...]] = set()
        for token in tokens:
            terms = self._analysed(token)
            if terms and terms not in seen:
                seen.add(terms)
                groups.append(terms)
        return groups

    def _analysed(self, token: str) -> tuple[str, ...]:
        """Return the analyzer's terms of one token (kept: the analyzer is fixed)."""
        terms = self._terms.get(token)
        if terms is None:
            if len(self._terms) >= TOKENS_KEPT:
                self._terms.clear()
            terms = self._terms[token] = tuple(self._analyzer.analyze(token))
        return terms

    def query_weight(self, query: str) -> QueryWeight:
        """Return the query's informative words' body idf, the documents, and whether a word
        of it written as a name is in none of them (``QueryWeight``).

        Kept per query text until the reader next reloads (the documents changed): a recall
        asks it once per query, and a warm process asks the same queries again.
        """
        with self._lock:
            try:
                searcher = self._searcher()
                known = self._weights.get(query)
                if known is not None:
                    return known
                weight = self._weigh(searcher, query)
            except (OSError, ValueError) as exc:
                raise IndexError_(f"cannot read the tantivy index at {self.path}: {exc}") from exc
            if len(self._weights) >= WEIGHTS_KEPT:
                self._weights.clear()
            self._weights[query] = weight
            return weight

    def _weigh(self, searcher: Any, query: str) -> QueryWeight:
        tokens = informative(tokenize_query(query))
        groups = self._groups(tokens)
        total = int(searcher.num_docs)
        if not groups:
            return QueryWeight(0.0, total, False, 0)
        named = self._groups(sorted(names(query) & set(tokens)))
        known = self._frequencies
        if len(known) >= TOKENS_KEPT:
            known.clear()
        found: dict[str, int] = {}
        for terms in groups:
            for term in terms:
                count = known.get(term)
                if count is None:
                    count = known[term] = int(searcher.doc_freq("body", term))
                found[term] = count
        weight = sum(idf(total, max(count, 1)) for count in found.values())
        unseen = any(found.get(t, 0) == 0 for terms in named for t in terms)
        return QueryWeight(
            weight, total, unseen, len(groups), self._term_idfs(tokens, found, total)
        )

    def _term_idfs(
        self, tokens: Sequence[str], found: Mapping[str, int], total: int
    ) -> tuple[tuple[str, float], ...]:
        """Return each token with the idf of its terms, a term counted for its first token."""
        out: list[tuple[str, float]] = []
        counted: set[str] = set()
        for token in tokens:
            terms = [t for t in self._analysed(token) if t in found and t not in counted]
            if terms:
                counted.update(terms)
                out.append((token, sum(idf(total, max(found[t], 1)) for t in terms)))
        return tuple(out)

    def _ranked_query(self, tokens: list[str]) -> _Ranked | None:
        """Return the ranked queries of the tokens (``_text_queries``), built once per process
        for the same tokens."""
        key = tuple(tokens)
        if key in self._queries:
            return self._queries[key]
        ranked = self._text_queries(tokens)
        if len(self._queries) >= WEIGHTS_KEPT:
            self._queries.clear()
        self._queries[key] = ranked
        return ranked

    def _top(self, searcher: Any, ranked: _Ranked, limit: int) -> list[tuple[float, Any]]:
        """Return the best ``limit`` (score, address) of the ranked query, best first.

        With a title phrase, the one query scores every memory holding any word, because a
        phrase clause keeps Tantivy from skipping blocks that cannot reach the top (block-max
        WAND). So the memories whose title holds the phrase are scored apart (all of them, when
        they are at most ``PHRASE_APART``), and the others come from the words alone, which
        skips: the same scores, the same order (ties by address, as Tantivy breaks them).
        """
        if ranked.phrased is None or ranked.words is None:
            return list(searcher.search(ranked.full, limit, count=False).hits)
        phrased = searcher.search(ranked.phrased, PHRASE_APART + 1, count=False).hits
        if len(phrased) > PHRASE_APART:
            return list(searcher.search(ranked.full, limit, count=False).hits)
        held = {(address.segment_ord, address.doc) for _, address in phrased}
        rest = searcher.search(ranked.words, limit + len(phrased), count=False).hits
        merged = list(phrased) + [
            (score, address)
            for score, address in rest
            if (address.segment_ord, address.doc) not in held
        ]
        merged.sort(key=lambda hit: (-hit[0], hit[1].segment_ord, hit[1].doc))
        return merged[:limit]

    def _id_at(self, searcher: Any, address: Any) -> str:
        """Return the id stored at a document address of the reader as it is (call under the
        lock, with ``searcher`` from ``_searcher``)."""
        key = (int(address.segment_ord), int(address.doc))
        rid = self._ids.get(key)
        if rid is None:
            rid = str(searcher.doc(address).get_first("id"))
            if len(self._ids) >= IDS_KEPT:
                self._ids.clear()
            self._ids[key] = rid
        return rid

    def _text_queries(self, tokens: list[str]) -> _Ranked | None:
        """Build the ranked query: an OR of the words over the body, plus the title phrase.

        Each \\w+ token is one term, or a phrase when the analyzer splits it ("foo_bar"), as
        FTS5 does for a quoted string. Every word counts, common ones too: the body's shared
        statistics give a word found in most memories almost no weight. Two to
        ``TITLE_PHRASE_WORDS`` words found in that order in a title add ``TITLE_PHRASE_BOOST``
        of their body score.
        """
        tantivy = _tantivy()
        groups = self._groups(tokens)
        clauses = []
        for terms in groups:
            if len(terms) == 1:
                query = tantivy.Query.term_query(self._schema, "body", terms[0])
            else:  # phrase_query panics on fewer than two terms
                query = tantivy.Query.phrase_query(self._schema, "body", list(terms))
            clauses.append((tantivy.Occur.Should, query))
        words = [term for terms in groups for term in terms]
        if not clauses or not any(self.copies.values()):
            return None
        if not (1 < len(words) <= TITLE_PHRASE_WORDS and self.copies["title"]):
            return _Ranked(tantivy.Query.boolean_query(clauses))
        phrase = tantivy.Query.boost_query(
            tantivy.Query.phrase_query(self._schema, "title", words), TITLE_PHRASE_BOOST
        )
        return _Ranked(
            full=tantivy.Query.boolean_query([*clauses, (tantivy.Occur.Should, phrase)]),
            words=tantivy.Query.boolean_query(clauses),
            phrased=tantivy.Query.boolean_query([(tantivy.Occur.Must, phrase), *clauses]),
        )

    def _filter_clauses(self, filters: Filters) -> list[tuple[Any, Any]]:
        tantivy = _tantivy()
        wanted: list[tuple[str, frozenset[str]]] = [
            (field, getattr(filters, attr)) for field, attr in _FILTER_FIELDS
        ]
        wanted.append(("tag", frozenset(tag.lower() for tag in filters.tags)))
        if filters.ids is not None:
            wanted.append(("id", filters.ids))
        clauses = []
        for field, values in wanted:
            if values:
                term_set = tantivy.Query.term_set_query(self._schema, field, sorted(values))
                # score 0: filters restrict, they must not change the bm25 score
                clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(term_set, 0.0)))
        return clauses

    def search(
        self, query: str, *, limit: int, filters: Filters = NO_FILTERS
    ) -> list[tuple[str, float]]:
        """Return up to ``limit`` (id, weighted bm25 score > 0) pairs, best first."""
        if limit <= 0 or filters.excludes_everything():
            return []
        tokens = tokenize_query(query)
        if not tokens:
            return []
        tantivy = _tantivy()
        with self._lock:
            ranked = self._ranked_query(tokens)
            if ranked is None:
                return []
            filter_clauses = [] if filters == NO_FILTERS else self._filter_clauses(filters)
            if filter_clauses:
                ranked = _Ranked(
                    tantivy.Query.boolean_query(
                        [(tantivy.Occur.Must, ranked.full), *filter_clauses]
                    )
                )
            try:
                searcher = self._searcher()
                # tantivy sizes its top-k heap by limit: never ask for more than exists
                limit = min(limit, searcher.num_docs)
                if limit == 0:
                    return []
                hits = self._top(searcher, ranked, limit)
                known = self._ids
                results = []
                for score, address in hits:
                    if score > 0:
                        rid = known.get((address.segment_ord, address.doc))
                        if rid is None:
                            rid = self._id_at(searcher, address)
                        results.append((rid, float(score)))
            except (OSError, ValueError) as exc:
                raise IndexError_(f"tantivy search failed at {self.path}: {exc}") from exc
        return results

    def ids(self) -> set[str]:
        """Return every indexed id."""
        tantivy = _tantivy()
        with self._lock:
            try:
                searcher = self._searcher()
                total = searcher.num_docs
                if total == 0:
                    return set()
                hits = searcher.search(tantivy.Query.all_query(), total, count=False).hits
                return {str(searcher.doc(address).get_first("id")) for _, address in hits}
            except (OSError, ValueError) as exc:
                raise IndexError_(f"cannot read the tantivy index at {self.path}: {exc}") from exc

    def count(self) -> int:
        """Return the number of indexed documents."""
        with self._lock:
            try:
                return int(self._searcher().num_docs)
            except (OSError, ValueError) as exc:
                raise IndexError_(f"cannot read the tantivy index at {self.path}: {exc}") from exc


@dataclass(frozen=True)
class _Ranked:
    """The ranked query of a recall's words (``full``), and, when it has a title phrase, its
    two halves: the words alone (``words``) and the memories whose title holds the phrase,
    scored as ``full`` scores them (``phrased``)."""

    full: Any
    words: Any = None
    phrased: Any = None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
