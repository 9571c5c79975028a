"""The derived index of one store: ``Index`` keeps its parts in step with memories.jsonl.

``Index`` composes the records DB (``records.py``), the full-text backend and its queue
(``fulltext.py``), the embeddings (``vectors.py``) and ranking (``ranking.py``). Every public
read first calls ``refresh``: a stat signature tells in microseconds whether the file changed;
if it did, lines are compared by id and content hash and only changed records are parsed and
re-indexed, so no caller needs to refresh by hand. A write from this process is applied
directly (``apply``), so the next read finds nothing to do; the per-process caches (records,
ranking rows, the loaded matrix of embeddings) follow that write, and a refresh's diff, id by
id instead of being dropped, so no write costs work in proportion to the store. Full-text
updates are queued and flushed in one batch by the next search, which keeps ``remember`` close
to the cost of writing the file. Search fuses BM25 and cosine scores in the semantic modes
(``ranking.fuse``), then applies the multipliers and the 20% cut.

The index is disposable: a schema change drops and rebuilds it. It reads memories.jsonl
through a ``MemorySource`` (the store is one) and never writes it; it writes only its own
files under ``index/``, under its own locks.
"""

from __future__ import annotations

import contextlib
import gc
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from engram.fileio import ProcessLock
from engram.index import ranking, relevance, semantic
from engram.index.backend import QueryWeight, SearchIndex, tokenize_query
from engram.index.fulltext import FullText
from engram.index.matrix import VectorState
from engram.index.query import Hit, Query
from engram.index.ranking import Scored, Weights
from engram.index.records import Diff, Progress, Records, Row, file_hash, line_hash
from engram.index.relevance import Features
from engram.index.source import MemorySource
from engram.index.vectors import Vectors
from engram.model import Record, canonical_line, is_tombstone


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Hold off Python's cycle collector for the body (a bulk load): it would walk every
    object again and again while a rebuild allocates a dict per memory, which holds no cycle."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Index:
    """SQLite records plus a full-text backend and vectors, derived from one memories file."""

    def __init__(
        self,
        source: MemorySource,
        *,
        backend: str = "tantivy",
        field_weights: Mapping[str, float] | None = None,
        weights: Weights | None = None,
        lock_timeout: float = 60.0,
    ) -> None:
        self.source = source
        self.folder = source.dir / "index"
        self.backend_name = backend
        self.weights = weights or Weights()
        self._lock = ProcessLock(
            self.folder / "index.lock", timeout=lock_timeout, what=f"the index in {self.folder}"
        )
        self.records = Records(
            self.folder, lock=self._lock, lock_timeout=lock_timeout, wipe_others=self._wipe_others
        )
        self.fulltext = FullText(
            self.folder,
            self.records,
            backend=backend,
            field_weights=field_weights,
            index_lock=self._lock,
            lock_timeout=lock_timeout,
        )
        self.vectors = Vectors(
            self.folder,
            self.records,
            mode=self.weights.mode,
            lock=self._lock,
            lock_timeout=lock_timeout,
            model=self.weights.model,
        )
        # Per-process caches, valid while memories.jsonl keeps the stat signature
        # ``_synced_sig``: they save SQLite round trips on every recall of a long-lived process.
        self._synced_sig: str | None = None
        self._ranks = ranking.RankRows(self.weights)
        self._texts = relevance.Texts()
        self.problems: list[tuple[int, str]] = []

    # -- plumbing ----------------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        """The records DB's connection."""
        return self.records.db

    @property
    def backend(self) -> SearchIndex:
        """The full-text backend (opened on first use)."""
        return self.fulltext.backend

    @property
    def mode(self) -> str:
        """Return the search mode in effect: the configured one, keyword without the model."""
        return self.vectors.mode

    def embedder(self) -> semantic.AnyEmbedder | None:
        """Return the embedding model when the mode uses it (loaded once per process)."""
        return self.vectors.embedder()

    def _wipe_others(self) -> None:
        """Delete what was derived from the records (a new records schema starts afresh)."""
        self.fulltext.wipe()
        self.vectors.wipe()

    def close(self) -> None:
        """Release the database connections and the backend."""
        self.fulltext.close()
        self.vectors.close()
        self.records.close()

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the cross-process lock for index writes (re-entrant in one process)."""
        return self._lock.hold()

    def fulltext_lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the cross-process lock for writes to the full-text backend."""
        return self.fulltext.lock()

    def meta(self, key: str) -> str | None:
        """Return one value of the records' meta table (as it is: no refresh first)."""
        return self.records.meta(key)

    # -- keeping up with the file ------------------------------------------------------------

    def refresh(self, progress: Progress | None = None) -> int:
        """Bring the index up to date with memories.jsonl; return how many records changed."""
        signature = self.source.signature()
        if signature == self._synced_sig:
            if not self.records.moved():
                return 0  # this process saw the index match exactly this file
            # Another process wrote the index while the file stayed as it was: a rebuild, maybe
            # killed after it emptied the tables or the full-text backend. Look at what it left
            # instead of trusting this process's caches (a daemon would answer from an empty
            # backend until the file next changed).
            self.fulltext.forget()
        if self.meta("file_sig") == signature and self.meta("backend") == self.backend_name:
            self._synced(signature)
            return 0
        with self.lock():
            data, signature = self.source.read_bytes()
            if self.meta("backend") != self.backend_name:
                self.fulltext.restart()
            if self.meta("file_sig") == signature:
                self._synced(signature)
                return 0
            if data and self.records.is_empty():
                # A new or wiped index: one bulk pass beats record-by-record updates.
                changed = self.rebuild(progress)
                self._synced(signature)
                return changed
            # This process's caches matched the rows: they follow the diff instead of being
            # dropped (a long-lived process keeps its matrix through other processes' writes).
            carry = self._follows()
            if not carry:
                self._drop_caches()
            diff = self._sync(data, signature, progress)
            if carry:
                self._advanced(signature, [r["id"] for r, _, _ in diff.changed] + diff.removed)
            else:
                self._synced(signature)
            return len(diff.changed) + len(diff.removed)

    def _follows(self) -> bool:
        """Tell whether this process's caches match the rows as they are (call under the lock)."""
        return self._synced_sig is not None and self._synced_sig == self.meta("file_sig")

    def _advanced(self, signature: str, ids: Iterable[str]) -> None:
        """Carry the caches over a write of ``ids`` that left the rows at ``signature``."""
        ids = [str(rid) for rid in ids]
        self.records.forget_ids(ids)
        self._ranks.forget(ids)
        self._texts.forget(ids)
        self.fulltext.forget()
        self.vectors.settle()
        self._synced_sig = signature

    def _synced(self, signature: str) -> None:
        """Note that the index matches the file at ``signature``; drop per-process caches."""
        if signature != self._synced_sig:
            self._drop_caches()
        self._synced_sig = signature

    def _drop_caches(self) -> None:
        self._synced_sig = None
        self.fulltext.forget()
        self._ranks.clear()
        self._texts.clear()
        self.records.drop_caches()
        self.vectors.forget()

    def _sync(self, data: bytes, signature: str, progress: Progress | None) -> Diff:
        diff = self.records.diff(data, str(self.source.path), progress)
        self.records.write_diff(diff, data, signature)
        self.vectors.write([(record, digest) for record, digest, _ in diff.changed])
        self.vectors.drop(diff.removed)
        self.problems = diff.problems
        if progress is not None:
            progress(diff.lines, diff.lines)
        return diff

    def apply(self, records: Sequence[Record], signature: str) -> None:
        """Record this process's own write (the store is already at ``signature``)."""
        rows: list[Row] = []
        for record in records:
            line = canonical_line(record)[:-1]
            rows.append((record, line_hash(line), line))
        # A process that has the model embeds its writes now (servers, a recall before). A
        # one-shot `engram remember` does not load it for one memory: like the full-text
        # queue, the next semantic search catches up.
        embed = self.vectors.has_model() or semantic.loaded(self.vectors.model)
        if rows and embed:
            self.embedder()  # load before taking the lock
        with self.lock():
            # Caches that matched the rows before follow this write ("": the file changed
            # behind the store's back, so the next refresh reads it and they start afresh).
            carry = bool(signature) and self._follows()
            if not carry:
                self._drop_caches()
            self.records.apply(rows, signature)
            if embed:
                self.vectors.write([(record, digest) for record, digest, _ in rows])
            else:
                self.vectors.drop([str(r["id"]) for r, _, _ in rows if is_tombstone(r)])
            if carry:
                self._advanced(signature, [r["id"] for r, _, _ in rows])

    def flush(self) -> int:
        """Push queued changes to the full-text backend; return how many were pushed.

        Runs under its own lock, not the index lock, so that a slow full-text commit never
        holds up writers.
        """
        self.refresh()
        return self.fulltext.flush(self._synced_sig)

    def rebuild(self, progress: Progress | None = None) -> int:
        """Drop everything and index memories.jsonl from scratch; return the record count.

        One pass over the file: each line is parsed once, written to SQLite in batches (their
        vectors with them) and handed to the full-text backend's bulk load in the same loop.
        Vectors outlive a rebuild (keyed by their text's hash); only the dead are dropped.
        """
        self.embedder()  # load the model before taking the locks
        with self.lock(), self.fulltext_lock():
            self._drop_caches()
            data, signature = self.source.read_bytes()
            hashed = file_hash(data)  # in a thread of its own meanwhile
            problems: list[tuple[int, str]] = []
            live: set[str] = set()
            backend = self.backend  # opened outside the bulk transaction: opening may queue
            with _no_cycle_collection(), self.records.rebuilding() as conn, self.vectors.bulk():
                backend.clear()
                docs = self.records.stream(
                    conn,
                    data,
                    str(self.source.path),
                    problems,
                    progress=progress,
                    written=lambda rows: self.vectors.write([(r, d) for r, d, _ in rows]),
                    live=live,
                )
                backend.bulk_load(docs)
                self.records.finish_rebuild(
                    conn, problems, self.backend_name, data, signature, hashed
                )
            self.vectors.retain(live)
            self.vectors.checked_all()
            self.problems = problems
            self._synced(signature)
            return self.records.count()

    def purge(self, progress: Progress | None = None) -> bool:
        """Rebuild, keeping no trace of text memories.jsonl no longer holds (a redacted secret).

        A plain rebuild leaves it behind: Tantivy keeps a deleted document's terms in its
        segment until a merge, and SQLite keeps a replaced row in free pages and in its WAL. So
        the full-text files are deleted first, and every SQLite file is vacuumed and its WAL
        truncated after. Return False when a reader in another process kept a WAL from being
        emptied (its next checkpoint does it).
        """
        with self.lock(), self.fulltext_lock():
            self.fulltext.wipe()
            self.rebuild(progress)
            return all([self.records.compact(), self.vectors.compact()])

    # -- reads: each brings the index up to date first ---------------------------------------

    def resolve(self, prefix: str) -> str:
        """Return the one id starting with ``prefix`` (tombstones included)."""
        self.refresh()
        return self.records.resolve(prefix)

    def resolver(self) -> Callable[[str], str]:
        """Return ``resolve`` over the index as it is now: refreshed once for many prefixes."""
        self.refresh()
        return self.records.resolve

    def get(self, rid: str) -> Record | None:
        """Return the record with exactly this id, or None."""
        self.refresh()
        return self.records.get(rid)

    def get_many(self, ids: Iterable[str]) -> dict[str, Record]:
        """Return the records with these ids (missing ones left out)."""
        self.refresh()
        return self.records.get_many(ids)

    def by_source_prefix(self, prefix: str) -> dict[str, Record]:
        """Return every record (tombstones included) whose ``source`` starts with ``prefix``."""
        self.refresh()
        return self.records.by_source_prefix(prefix)

    def find_duplicate(self, key: str, since: str) -> Record | None:
        """Return a live record with this dedupe key updated at or after ``since``."""
        self.refresh()
        return self.records.find_duplicate(key, since)

    def find_topic(self, topic_key: str, project: str, scope: str) -> Record | None:
        """Return the live record holding this topic key in this project and scope."""
        self.refresh()
        return self.records.find_topic(topic_key, project, scope)

    def session_records(self, session_id: str) -> list[Record]:
        """Return the live memories written in a session, oldest first (then by id)."""
        self.refresh()
        return self.records.session_records(session_id)

    def neighbours_in_time(self, created_at: str, project: str, count: int) -> list[Record]:
        """Return up to ``count`` live memories of ``project`` on each side of ``created_at``."""
        self.refresh()
        return self.records.neighbours_in_time(created_at, project, count)

    def linked_to(self, rid: str) -> list[tuple[str, str]]:
        """Return (source id, relation) of live records that link to ``rid``."""
        self.refresh()
        return self.records.linked_to(rid)

    def ids_for_files(self, wanted: Sequence[str]) -> frozenset[str]:
        """Return ids of live records whose files bear on any wanted path."""
        self.refresh()
        return self.records.ids_for_files(wanted)

    def ids_for_tags(self, wanted: Sequence[str]) -> frozenset[str]:
        """Return ids of records carrying any of these tags."""
        self.refresh()
        return self.records.ids_for_tags(wanted)

    def all_records(self, *, include_deleted: bool = False) -> list[Record]:
        """Return every record in id order."""
        self.refresh()
        return self.records.all_records(include_deleted=include_deleted)

    def stored_problems(self) -> list[tuple[int, str]]:
        """Return the unreadable lines noted by the last refresh."""
        self.refresh()
        return self.records.stored_problems()

    def counts(self) -> dict[str, Any]:
        """Return counts by kind, status, scope and project, plus totals."""
        self.refresh()
        out = self.records.counts()
        out["indexed"] = self.backend.count()
        out["pending"] = self.fulltext.pending()
        return out

    def similar(
        self,
        text: str = "",
        *,
        like: str | None = None,
        limit: int = 10,
        min_cosine: float | None = None,
    ) -> list[tuple[str, float]]:
        """Return (id, cosine) of the live memories nearest in meaning, best first.

        Compares with ``text``, or with the stored vector of the memory ``like`` (left out of
        the answer). ``min_cosine`` defaults to ``search.semantic_floor``. Returns [] when the
        mode is keyword or the model is not installed: callers fall back to text similarity.
        """
        self.refresh()
        floor = self.weights.semantic_floor if min_cosine is None else min_cosine
        return self.vectors.similar(text, like, limit, floor)

    def similar_among(
        self, ids: Sequence[str], *, limit: int, min_cosine: float
    ) -> dict[str, list[tuple[str, float]]]:
        """Return, by id, the (id, cosine) of the others among ``ids`` nearest in meaning.

        Up to ``limit`` each, best first, from the stored vectors; an id without one is left
        out. Returns {} when the mode is keyword or the model is not installed.
        """
        self.refresh()
        return self.vectors.similar_among(ids, limit, min_cosine)

    def text_neighbours(self, texts: Sequence[str], *, limit: int) -> list[list[str]]:
        """Return, for each text, the ids of the live memories that match it best in full text.

        Best first by the backend's relevance alone (no multipliers, no cut, no filters): who
        is nearest, for a caller that pairs memories and judges each pair itself.
        """
        self.refresh()
        if limit <= 0:
            return [[] for _ in texts]
        backend = self.backend  # opening it may queue records (a recreated index)
        self.fulltext.flush(self._synced_sig)
        return [[rid for rid, _ in backend.search(text, limit=limit)] for text in texts]

    def vectors_for(self, ids: Iterable[str]) -> dict[str, Any]:
        """Return the stored embeddings (numpy float32, unit length) of these live memories."""
        self.refresh()
        return self.vectors.vectors_for(ids)

    # -- search ------------------------------------------------------------------------------

    def search(self, query: Query, *, now_epoch: float | None = None) -> list[Hit]:
        """Rank live memories for a query: relevance × multipliers, 20% cut, filters.

        Relevance is weighted BM25 in keyword mode, else BM25 fused with the cosine similarity
        of embeddings (``ranking.fuse``). Candidates are ranked from the records table's
        columns; only the page that is returned is read as JSON.
        """
        self.refresh()
        if query.limit <= 0:
            return []
        now_epoch = time.time() if now_epoch is None else now_epoch
        ids: frozenset[str] | None = None
        if query.files:
            ids = self.records.ids_for_files(query.files)
            if not ids:
                return []
        if query.since is not None or query.until is not None or query.authors:
            changed = self.records.ids_changed(query.since, query.until, query.authors)
            ids = changed if ids is None else ids & changed
            if not ids:
                return []
        tokens = tokenize_query(query.text)
        want = query.limit + max(query.offset, 0)
        scored: list[Scored]
        cosines: dict[str, float] = {}
        stats: QueryWeight | None = None
        state = self.vectors.state() if tokens else None
        if not tokens:
            columns = self.records.browse_columns(query)
            scored = ranking.score_browse(columns, ids, now_epoch, self.weights)
        elif state is not None:
            scored, cosines, stats = self._search_semantic(query, ids, state, want, now_epoch)
        else:
            found, stats = self._keyword(query, ids, max(want * 2, 20))
            rows = self._ranks.get([rid for rid, _ in found], self.records.rank_columns)
            scored = ranking.score_keyword(found, stats.weight, rows, now_epoch, self.weights)
        page = ranking.page(scored, query.offset, want)  # ``scored`` is ordered now
        records = self.records.get_many(rid for _, rid, _ in page)
        rated: dict[str, tuple[float, Features]] = {}
        if stats is not None:
            mode = (
                relevance.key(self.weights.mode, self.vectors.model)
                if state is not None
                else "keyword"
            )
            if query.offset > 0:  # the floor is on the best hit: read it too
                records = {**self.records.get_many([scored[0][1]]), **records}
            rated = self._rate(scored[: want + 1], records, cosines, stats, mode)
            needed = relevance.floor(mode, self.weights.min_relevance, stats.docs)
            if not relevance.answered([chance for chance, _ in rated.values()], needed):
                page = []
        return [
            Hit(
                id=rid,
                score=round(score, 4),
                bm25=round(bm25, 4),
                record=records[rid],
                tokens=tuple(tokens),
                cosine=round(cosines.get(rid, 0.0), 4),
                relevance=round(rated[rid][0], 4) if rid in rated else None,
                features=rated[rid][1] if rid in rated else (),
            )
            for score, rid, bm25 in page
            if rid in records
        ]

    def _rate(
        self,
        ordered: Sequence[Scored],
        records: Mapping[str, Record],
        cosines: Mapping[str, float],
        stats: QueryWeight,
        mode: str,
    ) -> dict[str, tuple[float, Features]]:
        """Return, by id, the relevance and features of the hits in ``records``
        (``relevance.py``); ``ordered`` is the ranked candidates, best first, to one past the
        page."""
        gaps = relevance.gaps([score for score, _, _ in ordered])
        words = relevance.QueryWords(stats.terms)
        model = relevance.MODELS[mode]
        out: dict[str, tuple[float, Features]] = {}
        for position, (_, rid, bm25) in enumerate(ordered):
            record = records.get(rid)
            if record is None:
                continue
            values = relevance.features(
                bm25=bm25,
                query_weight=stats.weight,
                coverage=relevance.coverage(self._texts.get(rid, record), words),
                cosine=cosines.get(rid, 0.0),
                gap=gaps[position],
                unseen=stats.unseen,
            )
            out[rid] = (relevance.probability(values, model), values)
        return out

    def _keyword(
        self, query: Query, ids: frozenset[str] | None, limit: int
    ) -> tuple[list[tuple[str, float]], QueryWeight]:
        """Return the full-text backend's (id, bm25) best matches, its queue flushed first,
        and what relevance needs of the query there (``SearchIndex.query_weight``)."""
        backend = self.backend  # opening it may queue records (a recreated index)
        self.fulltext.flush(self._synced_sig)
        found = backend.search(query.text, limit=limit, filters=query.filters(ids))
        return found, backend.query_weight(query.text)

    def _search_semantic(
        self,
        query: Query,
        ids: frozenset[str] | None,
        state: VectorState,
        want: int,
        now_epoch: float,
    ) -> tuple[list[Scored], dict[str, float], QueryWeight]:
        """Rank by fused BM25 and cosine (hybrid) or cosine alone (semantic), then cut.

        Candidates: the keyword backend's best (hybrid) plus the nearest vectors at or above
        ``semantic_floor`` among those passing the filters. Returns (score, id, bm25) triples,
        each candidate's cosine and the query's weight.
        """
        pool = max(want * 2, 20)
        if self.weights.mode == "hybrid":
            found, stats = self._keyword(query, ids, pool)
        else:
            found, stats = [], self.backend.query_weight(query.text)
        allowed = [] if ids is None else [ids]
        if query.tags:
            allowed.insert(0, self.records.ids_for_tags([tag.lower() for tag in query.tags]))
        mask = self.vectors.mask(state, query, allowed)
        gate = self.weights.semantic_floor
        candidates = self.vectors.candidates(state, query.text, mask, gate, pool, found)
        rows = self._ranks.get(list(candidates), self.records.rank_columns)
        weight = stats.weight if found else 0.0
        scored = ranking.score_fused(candidates, weight, rows, now_epoch, self.weights)
        return scored, {rid: cosine for rid, (_, cosine) in candidates.items()}, stats
