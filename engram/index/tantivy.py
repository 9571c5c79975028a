"""The Tantivy full-text backend of the search index (one folder of tantivy segment files).

It owns that folder: the schema, the analyzer, writer sessions and reader freshness. It stores
only the memory id (records live in the SQLite records DB), builds every query from
``tokenize_query`` tokens (never through the query-string parser, so no user text can be a
syntax error), and must not import ``tantivy`` at import time: ``engram --help`` starts fast.

Locking: the caller serialises writes across processes with its own file lock. Tantivy's writer
lock is an OS file lock, so a killed process never leaves it held; we hold it only for the length
of one write call, so a long-lived process (an MCP server) never blocks a CLI writer.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from engram.errors import IndexError_
from engram.index.backend import (
    NO_FILTERS,
    TEXT_FIELDS,
    Doc,
    Filters,
    resolve_field_weights,
    tokenize_query,
)

# The analyzer name is part of the on-disk schema: change it whenever the analyzer changes, and
# an old index is detected as incompatible and recreated empty (the caller then rebuilds it).
ANALYZER: Final = "engram_en_v1"
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
    for field in TEXT_FIELDS:
        builder.add_text_field(field, tokenizer_name=ANALYZER, index_option="position")
    return builder.build()


COMMON_SHARE: Final = 0.25  # a query word in more of the contents than this is noise
COMMON_MIN_DOCS: Final = 20  # ... once there are enough memories to tell


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


class TantivyIndex:
    """Full-text search over memories with Tantivy, stored in one folder."""

    name: str = "tantivy"

    def __init__(self, path: Path, field_weights: Mapping[str, float] | None = None) -> None:
        self.path = Path(path)
        self.weights = resolve_field_weights(field_weights)
        self._lock = threading.RLock()
        self._meta_signature: tuple[int, int, int] | None = None
        self._closed = False
        self._schema = _build_schema()
        self._analyzer = _build_analyzer()
        # "\x00" is never produced by the analyzer, so no query term can match it.
        self._placeholder = _tantivy().PreTokenizedString("", [_tantivy().Token("\x00", 0, 0, 0)])
        self._index = self._open_or_create()

    # -- lifecycle ---------------------------------------------------------------------------

    def _open_or_create(self) -> Any:
        tantivy = _tantivy()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            try:
                index = tantivy.Index(self._schema, str(self.path), reuse=True)
            except ValueError as exc:
                if "schema does not match" not in str(exc) and "ncompatible" not in str(exc):
                    raise
                # A derived index from an older engram: start empty, the caller rebuilds.
                shutil.rmtree(self.path)
                self.path.mkdir(parents=True)
                index = tantivy.Index(self._schema, str(self.path), reuse=True)
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

    def close(self) -> None:
        """Release the index; safe to call twice."""
        with self._lock:
            self._closed = True
            self._index = None

    def __enter__(self) -> TantivyIndex:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

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
        tantivy = _tantivy()
        document = tantivy.Document(
            id=doc.id,
            kind=doc.kind,
            status=doc.status,
            scope=doc.scope,
            project=doc.project,
            tag=[tag.lower() for tag in doc.tags],
            title=doc.title,
            tags=list(doc.tags),
            content=doc.content,
            files=list(doc.files),
        )
        # Tantivy averages a field's length over all documents, empty ones included, so in an
        # index where few memories have tags (or files) a one-tag hit looks "long" and loses to
        # a content hit. One unmatchable token in each empty field keeps the average honest.
        for field, empty in (
            ("title", not doc.title),
            ("tags", not doc.tags),
            ("content", not doc.content),
            ("files", not doc.files),
        ):
            if empty:
                document.add_pre_tokenized_text(field, self._placeholder)
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
            stat = (self.path / "meta.json").stat()
        except FileNotFoundError:
            return
        signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if force or signature != self._meta_signature:
            self._live_index().reload()
            self._meta_signature = signature

    def _searcher(self) -> Any:
        self._reload()
        return self._live_index().searcher()

    def _text_query(self, tokens: list[str], searcher: Any = None) -> Any:
        """Build an OR of weighted per-field term (or phrase) queries; None when nothing to ask.

        tantivy weighs a term by its rarity in each field: a word in most memories ("the",
        "why") is rare among short titles and would outweigh the words that matter. A one-term
        group found in more than ``COMMON_SHARE`` of the memories' contents is left out
        (unless every group is that common), as FTS5's whole-row IDF all but ignores it.
        """
        tantivy = _tantivy()
        groups: list[tuple[str, ...]] = []
        seen: set[tuple[str, ...]] = set()
        for token in tokens:
            # A \w+ token may still be several analyzer terms ("foo_bar"): ask for the phrase,
            # as FTS5 does for a quoted string.
            terms = tuple(self._analyzer.analyze(token))
            if terms and terms not in seen:
                seen.add(terms)
                groups.append(terms)
        if searcher is not None and len(groups) > 1:
            total = max(int(searcher.num_docs), 1)

            def common(terms: tuple[str, ...]) -> bool:
                if len(terms) != 1 or total < COMMON_MIN_DOCS:
                    return False
                return bool(searcher.doc_freq("content", terms[0]) > COMMON_SHARE * total)

            kept = [terms for terms in groups if not common(terms)]
            groups = kept or groups
        clauses = []
        for field in TEXT_FIELDS:
            weight = self.weights[field]
            if weight <= 0:
                continue
            for terms in groups:
                if len(terms) == 1:
                    query = tantivy.Query.term_query(self._schema, field, terms[0])
                else:  # phrase_query panics on fewer than two terms
                    query = tantivy.Query.phrase_query(self._schema, field, list(terms))
                if weight != 1.0:
                    query = tantivy.Query.boost_query(query, weight)
                clauses.append((tantivy.Occur.Should, query))
        if not clauses:
            return None
        return tantivy.Query.boolean_query(clauses)

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
            text_query = self._text_query(tokens, self._searcher())
            if text_query is None:
                return []
            filter_clauses = self._filter_clauses(filters)
            if filter_clauses:
                text_query = tantivy.Query.boolean_query(
                    [(tantivy.Occur.Must, text_query), *filter_clauses]
                )
            try:
                searcher = self._searcher()
                # tantivy sizes its top-k heap by limit: never ask for more than exists
                limit = min(limit, searcher.num_docs)
                if limit == 0:
                    return []
                hits = searcher.search(text_query, limit, count=False).hits
                results = [
                    (str(searcher.doc(address).get_first("id")), float(score))
                    for score, address in hits
                    if score > 0
                ]
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
