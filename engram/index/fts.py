"""The SQLite FTS5 full-text backend of the search index (one database file of its own).

It owns that file: an FTS5 table over title, tags, content and files (porter stemming, diacritics
removed); a ``docs`` table mapping each memory id to its FTS rowid with the filter fields (kind,
status, scope, project); and a ``doc_tags`` table for exact tag filters. The filter fields live in
``docs`` rather than as UNINDEXED FTS columns because reading a small ``docs`` row is much cheaper
than reading an FTS content row for every match. It must not hold memory records (the records DB
does) and must never pass user text to MATCH unquoted: queries are built only from
``tokenize_query`` tokens, each a double-quoted string, OR'ed together.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from engram.errors import IndexError_
from engram.fileio import Closing
from engram.index.backend import (
    NO_FILTERS,
    TEXT_FIELDS,
    Doc,
    Filters,
    QueryWeight,
    informative,
    names,
    resolve_field_weights,
    tokenize_query,
)

SCHEMA_VERSION: Final = 2  # 2: a title that is the content's first words is not ranked
BUSY_TIMEOUT_MS: Final = 10_000
BULK_CHUNK: Final = 2_000

_TABLES: Final = ("fts", "doc_tags", "docs")
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS docs (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,"
    " kind TEXT NOT NULL, status TEXT NOT NULL, scope TEXT NOT NULL, project TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS doc_tags (tag TEXT NOT NULL, rid INTEGER NOT NULL,"
    " PRIMARY KEY (tag, rid)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS doc_tags_by_rid ON doc_tags (rid)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(title, tags, content, files,"
    " tokenize = 'porter unicode61 remove_diacritics 2')",
)
_INSERT_DOC: Final = (
    "INSERT INTO docs (rid, id, kind, status, scope, project) VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_FTS: Final = "INSERT INTO fts (rowid, title, tags, content, files) VALUES (?, ?, ?, ?, ?)"
_INSERT_TAG: Final = "INSERT OR IGNORE INTO doc_tags (tag, rid) VALUES (?, ?)"
_FILTER_COLUMNS: Final = (
    ("kind", "kinds"),
    ("status", "statuses"),
    ("scope", "scopes"),
    ("project", "projects"),
)


def match_expression(tokens: Sequence[str]) -> str:
    """Return an FTS5 MATCH string that ORs the tokens, each as a quoted string."""
    return " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)


def _doc_row(rid: int, doc: Doc) -> tuple[int, str, str, str, str, str]:
    return (rid, doc.id, doc.kind, doc.status, doc.scope, doc.project)


def _fts_row(rid: int, doc: Doc) -> tuple[int, str, str, str, str]:
    title = doc.ranked_title()
    return (rid, title, " ".join(doc.tags), doc.content, "\n".join(doc.files))


def _tag_rows(rid: int, doc: Doc) -> list[tuple[str, int]]:
    return [(tag.lower(), rid) for tag in doc.tags]


class FtsIndex(Closing):
    """Full-text search over memories with SQLite FTS5, stored in one database file."""

    name: str = "fts5"

    def __init__(self, path: Path, field_weights: Mapping[str, float] | None = None) -> None:
        self.path = Path(path)
        self.weights = resolve_field_weights(field_weights)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        # Document counts of query words, kept while no connection writes (``data_version``
        # for the others' commits, ``_forget_counts`` for ours).
        self._counts: dict[str, int] = {}
        self._counts_version: int | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise IndexError_(f"cannot open the FTS5 index at {self.path}: {exc}") from exc
        self._conn = conn
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            self._migrate(conn)
        except (sqlite3.Error, IndexError_) as exc:
            self.close()
            raise IndexError_(
                f"cannot open the FTS5 index at {self.path}: {exc}",
                hint=f"the index is derived: delete {self.path}, then run `engram index --rebuild`",
            ) from exc

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        with self._transaction() as cur:
            version = cur.execute("PRAGMA user_version").fetchone()[0]
            if version == SCHEMA_VERSION:  # another process got here first
                return
            # a derived index from another engram version: start empty, the caller rebuilds
            for table in _TABLES:
                cur.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in _SCHEMA:
                cur.execute(statement)
            cur.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the database connection; safe to call twice."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _live(self) -> sqlite3.Connection:
        if self._conn is None:
            raise IndexError_(f"the FTS5 index at {self.path} is closed")
        return self._conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """Run the block in one write transaction: all of it is durable, or none of it."""
        with self._lock:
            conn = self._live()
            cur = conn.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                try:
                    yield cur
                except BaseException:
                    cur.execute("ROLLBACK")
                    raise
                cur.execute("COMMIT")
                self._counts_version = None  # our own commit: data_version does not tell
            except sqlite3.Error as exc:
                raise IndexError_(f"cannot write the FTS5 index at {self.path}: {exc}") from exc
            finally:
                cur.close()

    # -- writing -----------------------------------------------------------------------------

    def _remove(self, cur: sqlite3.Cursor, rid: int) -> None:
        cur.execute("DELETE FROM fts WHERE rowid = ?", (rid,))
        cur.execute("DELETE FROM doc_tags WHERE rid = ?", (rid,))

    def _replace(self, cur: sqlite3.Cursor, doc: Doc) -> None:
        row = cur.execute("SELECT rid FROM docs WHERE id = ?", (doc.id,)).fetchone()
        if row is None:
            cur.execute(_INSERT_DOC, (None, doc.id, doc.kind, doc.status, doc.scope, doc.project))
            rid = cur.lastrowid
            assert rid is not None  # an INSERT into a rowid table always sets it
        else:
            rid = int(row[0])
            self._remove(cur, rid)
            cur.execute(
                "UPDATE docs SET kind = ?, status = ?, scope = ?, project = ? WHERE rid = ?",
                (doc.kind, doc.status, doc.scope, doc.project, rid),
            )
        cur.execute(_INSERT_FTS, _fts_row(rid, doc))
        cur.executemany(_INSERT_TAG, _tag_rows(rid, doc))

    def upsert(self, docs: Sequence[Doc]) -> None:
        """Insert or replace documents by id in one transaction; durable when it returns."""
        if not docs:
            return
        with self._transaction() as cur:
            for doc in docs:
                self._replace(cur, doc)

    def bulk_load(self, docs: Iterable[Doc]) -> int:
        """Add many documents in one transaction, in batches; return how many."""
        count = 0
        with self._transaction() as cur:
            replace = cur.execute("SELECT EXISTS (SELECT 1 FROM docs)").fetchone()[0] == 1
            next_rid = 1
            seen: set[str] = set()
            pending: list[tuple[int, Doc]] = []

            def flush() -> None:
                cur.executemany(_INSERT_DOC, [_doc_row(r, d) for r, d in pending])
                cur.executemany(_INSERT_FTS, [_fts_row(r, d) for r, d in pending])
                cur.executemany(_INSERT_TAG, [row for r, d in pending for row in _tag_rows(r, d)])
                pending.clear()

            for doc in docs:
                count += 1
                if replace or doc.id in seen:
                    flush()  # an earlier copy of this id must be written before it is replaced
                    self._replace(cur, doc)
                    continue
                seen.add(doc.id)
                pending.append((next_rid, doc))
                next_rid += 1
                if len(pending) >= BULK_CHUNK:
                    flush()
            flush()
        return count

    def delete(self, ids: Sequence[str]) -> None:
        """Remove documents by id in one transaction; missing ids are ignored."""
        if not ids:
            return
        with self._transaction() as cur:
            for doc_id in ids:
                row = cur.execute("SELECT rid FROM docs WHERE id = ?", (doc_id,)).fetchone()
                if row is not None:
                    self._remove(cur, int(row[0]))
                    cur.execute("DELETE FROM docs WHERE rid = ?", (row[0],))

    def clear(self) -> None:
        """Remove every document in one transaction (drops and recreates the tables)."""
        with self._transaction() as cur:
            for table in _TABLES:
                cur.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in _SCHEMA:
                cur.execute(statement)

    # -- reading -----------------------------------------------------------------------------

    def search(
        self, query: str, *, limit: int, filters: Filters = NO_FILTERS
    ) -> list[tuple[str, float]]:
        """Return up to ``limit`` (id, weighted bm25 score > 0) pairs, best first."""
        if limit <= 0 or filters.excludes_everything():
            return []
        tokens = tokenize_query(query)
        if not tokens:
            return []
        # bm25() is lower-is-better; its column weights follow the table's column order.
        params: list[object] = [self.weights[field] for field in TEXT_FIELDS]
        joins = ""
        where = ["fts MATCH ?"]
        params.append(match_expression(tokens))
        for column, attr in _FILTER_COLUMNS:
            values: frozenset[str] = getattr(filters, attr)
            if values:
                joins = " JOIN docs AS f ON f.rid = fts.rowid"
                where.append(f"f.{column} IN (SELECT value FROM json_each(?))")
                params.append(json.dumps(sorted(values)))
        # "+rowid": keep SQLite from handing the rowid set to FTS5, which would then run the
        # whole MATCH once per rowid (seconds instead of milliseconds on a big index).
        if filters.tags:
            where.append(
                "+fts.rowid IN (SELECT rid FROM doc_tags"
                " WHERE tag IN (SELECT value FROM json_each(?)))"
            )
            params.append(json.dumps(sorted(tag.lower() for tag in filters.tags)))
        if filters.ids is not None:
            where.append(
                "+fts.rowid IN (SELECT rid FROM docs WHERE id IN (SELECT value FROM json_each(?)))"
            )
            params.append(json.dumps(sorted(filters.ids)))
        params.append(limit)
        # Rank on rowids first, then read ids for the top hits only.
        sql = (
            "SELECT d.id, m.score FROM ("
            f"SELECT fts.rowid AS rid, bm25(fts, ?, ?, ?, ?) AS score FROM fts{joins}"
            f" WHERE {' AND '.join(where)} ORDER BY score LIMIT ?"
            ") AS m JOIN docs AS d ON d.rid = m.rid ORDER BY m.score, d.id"
        )
        rows = self._read(sql, params)
        return [(str(doc_id), -float(score)) for doc_id, score in rows if -score > 0]

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._live().execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise IndexError_(f"cannot read the FTS5 index at {self.path}: {exc}") from exc

    def query_weight(self, query: str) -> QueryWeight:
        """Return the query's informative words' idf as FTS5's bm25() has it, the documents,
        and whether a word of it written as a name is in none of them (``QueryWeight``).

        FTS5's idf is log((N - n + 0.5) / (n + 0.5)), at least 1e-6; n is read with one MATCH
        per word, and N once, kept until the index changes.
        """
        tokens = informative(tokenize_query(query))
        named = names(query)
        with self._lock:
            version = int(self._read("PRAGMA data_version")[0][0])
            if version != self._counts_version:
                self._counts.clear()
                self._counts_version = version
            total = self._counts.get("", -1)  # "" is never a token: it keys the count
            if total < 0:
                total = self._counts[""] = self.count()
            weight = 0.0
            unseen = False
            terms: list[tuple[str, float]] = []
            for token in tokens:
                found = self._counts.get(token)
                if found is None:
                    rows = self._read(
                        "SELECT count(*) FROM fts WHERE fts MATCH ?", (match_expression([token]),)
                    )
                    found = self._counts[token] = int(rows[0][0])
                unseen = unseen or (found == 0 and token in named)
                found = max(found, 1)
                term = max(math.log((total - found + 0.5) / (found + 0.5)), 1e-6)
                terms.append((token, term))
                weight += term
            return QueryWeight(weight if tokens else 0.0, total, unseen, len(tokens), tuple(terms))

    def ids(self) -> set[str]:
        """Return every indexed id."""
        return {str(row[0]) for row in self._read("SELECT id FROM docs")}

    def count(self) -> int:
        """Return the number of indexed documents."""
        return int(self._read("SELECT count(*) FROM docs")[0][0])
