"""The records DB of the index: SQLite rows derived from memories.jsonl, and writing them.

``Records`` owns ``index/engram.db``: one row per memory (the columns filters and ranking read,
then the canonical JSON), its tags, files (each cited path with the memory's kind, status and
weight, so that a check pages through them in one index) and links, the unreadable lines the
last refresh found, a ``meta`` table (schema, the file signature and hash the rows match, the
backend fed), and the ``pending`` table: ids the full-text backend has not seen yet, queued in
the same transaction as the rows they name (``fulltext.py`` drains it).

Lines become rows two ways: ``diff`` compares a refreshed file with the rows by id and line
hash, so only changed records are parsed; ``stream`` parses every line once for a rebuild,
writing rows in batches while it yields the full-text documents. The lookups (``get``,
``resolve``, the file and tag filters, ``counts`` …) are its base class, ``RecordQueries`` in
``recordqueries.py``; they keep small per-process caches, valid until ``drop_caches``.

It is handed the file's bytes and never reads or writes memories.jsonl; it never touches the
full-text backend or the vectors, and it ranks nothing (``ranking.py`` does).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Generic, TypeVar, cast

from engram.errors import CorruptStore
from engram.fileio import ProcessLock
from engram.index.backend import Doc, ranked_title_of
from engram.index.dbfile import (
    chunks,
    compact,
    marks,
    open_derived,
    remove_files,
    statements,
    transaction,
)
from engram.index.ranking import epoch, judgement_score
from engram.index.recordqueries import RecordQueries
from engram.model import (
    DEFAULT_IMPORTANCE,
    DEFAULT_SCOPE,
    DEFAULT_STATUS,
    Record,
    dedupe_hash,
    dedupe_key,
    files_of,
    importance_of,
    kind_of,
    line_id,
    links_of,
    normalize_content,
    parse_line,
    status_of,
    tags_of,
)

# 8: the vectors moved to a database of their own (vectors.py). 9: the author column.
# 10: records_live is a partial index (a full one led the planner away from covering indexes).
# 11: files rows carry their record's kind, status and weight as check reads them (files_cite).
SCHEMA_VERSION: Final = 11
BATCH: Final = 2000
FILES: Final = ("engram.db", "engram.db-wal", "engram.db-shm")
Progress = Callable[[int, int], None]
Row = tuple[Record, str, bytes]  # a record, the hash of its canonical line, and the line
T = TypeVar("T")

_TABLES: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    id TEXT PRIMARY KEY,
    line_hash TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'active',
    scope TEXT NOT NULL DEFAULT 'project',
    project TEXT NOT NULL DEFAULT '',
    topic_key TEXT,
    dedupe_key TEXT,
    importance INTEGER NOT NULL DEFAULT 3,
    created_at TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL DEFAULT '',
    updated_epoch REAL NOT NULL DEFAULT 0,
    deleted INTEGER NOT NULL DEFAULT 0,
    session_id TEXT,
    judged REAL,  -- mean judgement score 0..1, NULL when unjudged
    author TEXT NOT NULL DEFAULT '',  -- case-folded, for the author filter
    json TEXT NOT NULL  -- last: ranking reads the columns above without touching it
);
CREATE TABLE IF NOT EXISTS tags (id TEXT NOT NULL, tag TEXT NOT NULL);
-- One row per cited path, with what check ranks the citing record by (``cite_columns``), so
-- that a check reads one index and no row of records.
CREATE TABLE IF NOT EXISTS files (
    id TEXT NOT NULL,
    path TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'note',
    status TEXT NOT NULL DEFAULT 'active',
    weight REAL NOT NULL DEFAULT 3
);
CREATE TABLE IF NOT EXISTS links (src TEXT NOT NULL, rel TEXT NOT NULL, dst TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pending (id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS problems (line INTEGER NOT NULL, message TEXT NOT NULL);
"""

# Created after a bulk load rather than maintained row by row during it.
_INDEXES: Final = """
CREATE INDEX IF NOT EXISTS records_topic ON records (topic_key, project, scope)
    WHERE topic_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_dedupe ON records (dedupe_key);
CREATE INDEX IF NOT EXISTS records_kind_status ON records (kind, status, deleted);
-- The vectors' catch-up check: every live id and line hash, without the JSON. Partial, so
-- that it never leads with `deleted`: the planner, without statistics, took such an index for
-- every `deleted=0` query and lost the covering records_kind_status (counts 13x slower).
CREATE INDEX IF NOT EXISTS records_live ON records (id, line_hash) WHERE deleted=0;
CREATE INDEX IF NOT EXISTS records_session ON records (session_id, created_at)
    WHERE session_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS tags_id ON tags (id);
CREATE INDEX IF NOT EXISTS tags_tag ON tags (tag);
CREATE INDEX IF NOT EXISTS files_id ON files (id);
-- Covering for every lookup by path: the ids citing a path, and check's ranked pages of them.
CREATE INDEX IF NOT EXISTS files_cite ON files (path, status, kind, weight DESC, id);
CREATE INDEX IF NOT EXISTS links_src ON links (src);
CREATE INDEX IF NOT EXISTS links_dst ON links (dst);
"""

_RECORD_COLUMNS: Final = (
    "id, line_hash, kind, status, scope, project, topic_key, dedupe_key, importance, "
    "created_at, updated_at, updated_epoch, deleted, session_id, judged, author, json"
)


@dataclass
class Diff:
    """What a refresh found: changed lines as rows, ids gone from the file, unreadable lines."""

    changed: list[Row] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)
    lines: int = 0


def line_hash(line: bytes) -> str:
    """Hash one canonical line (identifies a record's exact version)."""
    return hashlib.blake2b(line, digest_size=16).hexdigest()


def cite_columns(record: Mapping[str, Any]) -> tuple[str, str, float]:
    """Return (kind, status, weight): what check ranks a record citing a file by.

    The kind and status as written, ``note`` and ``active`` when empty; the weight is the
    importance as a number, 3 when it is empty, zero or not a finite number.
    """
    importance = record.get("importance") or DEFAULT_IMPORTANCE
    try:
        weight = float(importance)
    except (TypeError, ValueError, OverflowError):
        weight = float(DEFAULT_IMPORTANCE)
    if not math.isfinite(weight):
        weight = float(DEFAULT_IMPORTANCE)
    return kind_of(record), status_of(record), weight


def to_doc(record: Mapping[str, Any]) -> Doc:
    """Return what the full-text backend indexes for a record."""
    get = record.get
    return Doc(
        str(record["id"]),
        str(get("title", "")),
        str(get("content", "")),
        tuple(map(str, tags_of(record))),
        tuple(map(str, files_of(record))),
        str(get("kind", "")),
        str(get("status") or DEFAULT_STATUS),  # status_of and scope_of, inline (a rebuild
        str(get("scope") or DEFAULT_SCOPE),  # calls this once per memory)
        str(get("project", "")),
    )


class Records(RecordQueries):
    """The SQLite records of one index, on a connection of their own; lookups are inherited."""

    def __init__(
        self,
        folder: Path,
        *,
        lock: ProcessLock,
        lock_timeout: float,
        wipe_others: Callable[[], None],
    ) -> None:
        self.folder = folder
        self.lock_timeout = lock_timeout
        self._lock = lock
        # A new schema wipes every derived file: what the other parts hold came from these rows.
        self._wipe_others = wipe_others
        self._conn: sqlite3.Connection | None = None
        self._record_cache: dict[str, Record] = {}
        # The files table's distinct paths (key ""), and those matching each list of wanted
        # paths (key: the paths joined by NUL); dropped by any write.
        self._paths_cache: dict[str, list[str]] | None = None
        # What each id prefix asked of ``resolve`` named: its one id, or None for no memory
        # (a prefix several ids share is not kept); dropped by any write, since a new id can
        # make a prefix ambiguous.
        self._resolved: dict[str, str | None] = {}
        # SQLite's count of commits by other connections, as ``moved`` last read it.
        self._data_version: int | None = None
        # A job a rebuild runs on the connection in a thread of its own (``rebuilding``).
        self._behind: _Job[None] | None = None

    # -- the database ------------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        """The connection to engram.db (opened, and created or migrated, on first use)."""
        if self._conn is None:
            self._conn = open_derived(
                self.folder / "engram.db",
                version=SCHEMA_VERSION,
                script=_TABLES + _INDEXES,
                timeout=self.lock_timeout,
                lock=self._lock,
                wipe=self._wipe,
            )
        return self._conn

    def open(self) -> sqlite3.Connection:
        """Open engram.db now, if it is not open yet (creating, or wiping and recreating, it)."""
        return self.db

    def _wipe(self) -> None:
        remove_files(self.folder, FILES)
        self._wipe_others()

    def tx(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """Run the body in one write transaction of engram.db."""
        return transaction(self.db)

    def close(self) -> None:
        """Release the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._data_version = None  # counted per connection

    def compact(self) -> bool:
        """Vacuum engram.db and truncate its WAL (``dbfile.compact``)."""
        return compact(self.db)

    def drop_caches(self) -> None:
        """Forget what this process cached of the rows (the file changed)."""
        self._record_cache.clear()
        self._paths_cache = None
        self._resolved.clear()

    def forget_ids(self, ids: Iterable[str]) -> None:
        """Forget what this process cached of these rows (they were written)."""
        for rid in ids:
            self._record_cache.pop(rid, None)
        self._paths_cache = None
        self._resolved.clear()

    def moved(self) -> bool:
        """Tell whether another connection committed to engram.db since the last call.

        The first call on a connection answers True. Costs one ``PRAGMA data_version``: no read
        of the file, so a long-lived process can ask before every read.
        """
        version = int(self.db.execute("PRAGMA data_version").fetchone()[0])
        moved, self._data_version = version != self._data_version, version
        return moved

    def meta(self, key: str) -> str | None:
        """Return one value of the meta table."""
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def is_empty(self) -> bool:
        """Tell whether no row is held, not even a tombstone (a new or wiped index)."""
        return self.db.execute("SELECT 1 FROM records LIMIT 1").fetchone() is None

    def has_live(self) -> bool:
        """Tell whether any live (not forgotten) record is held."""
        return (
            self.db.execute("SELECT 1 FROM records WHERE deleted=0 LIMIT 1").fetchone() is not None
        )

    # -- writing rows ------------------------------------------------------------------------

    def write_rows(
        self,
        conn: sqlite3.Connection,
        rows: Sequence[Row],
        *,
        fresh: bool = False,
        queue: bool = True,
    ) -> None:
        """Write records (with their line hash and canonical line) and their side tables.

        ``fresh``: the tables hold none of these ids yet (a rebuild), so skip the deletes.
        ``queue``: add the ids to the full-text queue.
        """
        if not rows:
            return
        self._paths_cache = None
        self._resolved.clear()
        ids = [(str(record["id"]),) for record, _, _ in rows]
        if not fresh:
            conn.executemany("DELETE FROM tags WHERE id=?", ids)
            conn.executemany("DELETE FROM files WHERE id=?", ids)
            conn.executemany("DELETE FROM links WHERE src=?", ids)
        tables = _Tables()
        for record, digest, line in rows:
            tables.add(record, digest, line)
        tables.insert(conn)
        if queue:
            conn.executemany("INSERT OR REPLACE INTO pending VALUES (?)", ids)

    def apply(self, rows: Sequence[Row], signature: str) -> None:
        """Write this process's own records; the file is at ``signature`` ("" when unknown)."""
        with self.tx() as conn:
            self.write_rows(conn, rows)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('file_sig', ?)", (signature,))
            # The file hash is known only after a full read; refresh records it again.
            conn.execute("DELETE FROM meta WHERE key='file_hash'")

    def diff(self, data: bytes, name: str, progress: Progress | None = None) -> Diff:
        """Compare the file's bytes with the rows: parse only lines whose hash changed."""
        known = dict(self.db.execute("SELECT id, line_hash FROM records").fetchall())
        seen: set[str] = set()
        out = Diff()
        lines = data.splitlines()
        out.lines = len(lines)
        for lineno, raw in enumerate(lines, start=1):
            if progress is not None and lineno % 5000 == 0:
                progress(lineno, out.lines)
            if not raw.strip():
                continue
            digest = line_hash(raw)
            try:
                rid = line_id(raw, path=name, lineno=lineno)
            except CorruptStore as exc:
                out.problems.append((lineno, exc.message))
                continue
            if rid in seen:
                out.problems.append((lineno, f"{name}:{lineno}: duplicate id {rid}"))
                continue
            seen.add(rid)
            if known.get(rid) == digest:
                continue
            try:
                record = parse_line(raw, path=name, lineno=lineno)
            except CorruptStore as exc:
                out.problems.append((lineno, exc.message))
                seen.discard(rid)
                continue
            out.changed.append((record, digest, raw))
        out.removed = [rid for rid in known if rid not in seen]
        return out

    def write_diff(self, diff: Diff, data: bytes, signature: str) -> None:
        """Write what ``diff`` found in ``data``, which the file held at ``signature``."""
        with self.tx() as conn:
            self.write_rows(conn, diff.changed)
            for chunk in chunks(diff.removed):
                where = f"IN ({marks(len(chunk))})"
                conn.execute(f"DELETE FROM records WHERE id {where}", chunk)
                conn.execute(f"DELETE FROM tags WHERE id {where}", chunk)
                conn.execute(f"DELETE FROM files WHERE id {where}", chunk)
                conn.execute(f"DELETE FROM links WHERE src {where}", chunk)
                conn.executemany("INSERT OR REPLACE INTO pending VALUES (?)", [(r,) for r in chunk])
            conn.execute("DELETE FROM problems")
            conn.executemany("INSERT INTO problems VALUES (?, ?)", diff.problems)
            _set_file(conn, data, signature)

    @contextlib.contextmanager
    def rebuilding(self) -> Iterator[sqlite3.Connection]:
        """Empty every table but meta, then hold one transaction for the bulk load.

        The tables are emptied (dropped and created again, committed) in a thread of its own,
        which then opens the bulk load's transaction: SQLite frees the old pages, the GIL
        released, while the caller empties the full-text backend and parses the first lines;
        ``stream`` waits for it before it writes a row. Secondary indexes are created once
        the rows are written (``stream`` starts that too, in the same way), and the database
        skips fsync meanwhile (it is derived). The transaction commits when the body returns
        and rolls back if it raises, each once every job on the connection is done.
        """
        conn = self.db
        conn.execute("PRAGMA synchronous=OFF")
        try:
            self._behind = _Job(lambda: self._empty(conn))
            try:
                yield conn
                self._settle()
                _create_indexes(conn)  # a no-op when ``stream`` ran to its end
            except BaseException:
                with contextlib.suppress(Exception):  # the body's error is the one to raise
                    self._settle()
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            with contextlib.suppress(Exception):
                self._settle()
            conn.execute("PRAGMA synchronous=NORMAL")

    def _empty(self, conn: sqlite3.Connection) -> None:
        """Drop and create every table but meta in one transaction, then begin the load's."""
        with transaction(conn):
            for name in ("records", "tags", "files", "links", "pending", "problems"):
                conn.execute(f"DROP TABLE IF EXISTS {name}")
            conn.execute("DELETE FROM meta WHERE key IN ('file_sig', 'file_hash')")
            for statement in statements(_TABLES):
                conn.execute(statement)
        conn.execute("BEGIN IMMEDIATE")

    def _settle(self) -> None:
        """Wait for the job running on the rebuild's connection, if any; raise its error."""
        job, self._behind = self._behind, None
        if job is not None:
            job.wait()

    def stream(
        self,
        conn: sqlite3.Connection,
        data: bytes,
        name: str,
        problems: list[tuple[int, str]],
        *,
        progress: Progress | None = None,
        written: Callable[[Sequence[Row]], None] | None = None,
        live: set[str] | None = None,
    ) -> Iterator[Doc]:
        """Parse each line once: write rows in batches (each handed to ``written``), yield docs.

        ``live`` is given the id of every live record written.

        Once the lines are exhausted, the secondary indexes are created in the caller's
        transaction, in a thread of its own: SQLite builds them (the GIL released) while the
        full-text backend commits what it was handed. ``finish_rebuild`` waits for them.
        """
        lines = data.splitlines()
        total = len(lines)
        seen: set[str] = set()
        batch: list[Row] = []
        tables = _Tables()
        for lineno, raw in enumerate(lines, start=1):
            if progress is not None and lineno % 5000 == 0:
                progress(lineno, total)
            if not raw.strip():
                continue
            try:
                record = parse_line(raw, path=name, lineno=lineno)
            except CorruptStore as exc:
                problems.append((lineno, exc.message))
                continue
            rid = record["id"]
            if rid in seen:
                problems.append((lineno, f"{name}:{lineno}: duplicate id {rid}"))
                continue
            seen.add(rid)
            row = (record, line_hash(raw), raw)
            batch.append(row)
            if record.get("deleted_at"):  # a tombstone: a row, no document
                tables.add(*row)
                doc = None
            else:
                doc, key = _doc_and_key(record)
                tables.add(*row, key=key)
                if live is not None:
                    live.add(rid)
            if len(batch) >= BATCH:
                self._write_batch(conn, batch, tables, written)
                batch, tables = [], _Tables()
            if doc is not None:
                yield doc
        self._write_batch(conn, batch, tables, written)
        self._behind = _Job(lambda: _create_indexes(conn))
        if progress is not None:
            progress(total, total)

    def _write_batch(
        self,
        conn: sqlite3.Connection,
        batch: list[Row],
        tables: _Tables,
        written: Callable[[Sequence[Row]], None] | None,
    ) -> None:
        self._settle()  # the tables emptied (``rebuilding``)
        if batch:
            self._paths_cache = None
            self._resolved.clear()
            tables.insert(conn)
            if written is not None:
                written(batch)

    def finish_rebuild(
        self,
        conn: sqlite3.Connection,
        problems: Sequence[tuple[int, str]],
        backend: str,
        data: bytes,
        signature: str,
        hashed: _Job[str] | None = None,
    ) -> None:
        """Record, in the rebuild's transaction, what it found and which file and backend.

        ``hashed``: the file's hash being worked out (``file_hash``), else it is done here.
        """
        self._settle()  # the secondary indexes (``stream``)
        conn.executemany("INSERT INTO problems VALUES (?, ?)", problems)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('backend', ?)", (backend,))
        _set_file(conn, data, signature, None if hashed is None else hashed.wait())


class _Job(Generic[T]):
    """One job run in a thread of its own while the caller goes on; ``wait`` for its result.

    SQLite releases the GIL for the whole of a statement (and hashlib while it hashes a
    large buffer), so a long one (dropping a table, creating an index) runs beside the
    caller's Python and Tantivy's commit. A job on the rebuild's connection is the only user
    of that connection until ``wait`` returns.
    """

    def __init__(self, job: Callable[[], T], name: str = "engram-index-rebuild") -> None:
        self._result: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(job,), name=name, daemon=True)
        self._thread.start()

    def _run(self, job: Callable[[], T]) -> None:
        try:
            self._result = job()
        except BaseException as exc:  # handed to the thread that waits
            self._error = exc

    def wait(self) -> T:
        """Wait for the job to end; return what it returned, or raise what it raised."""
        self._thread.join()
        error, self._error = self._error, None
        if error is not None:
            raise error
        return cast(T, self._result)


def file_hash(data: bytes) -> _Job[str]:
    """Start hashing the file's bytes as ``meta`` records them; ``finish_rebuild`` takes it."""
    return _Job(lambda: hashlib.sha256(data).hexdigest(), "engram-file-hash")


def _create_indexes(conn: sqlite3.Connection) -> None:
    """Create the secondary indexes that a bulk load leaves out (each only if missing)."""
    for statement in statements(_INDEXES):
        conn.execute(statement)


def _set_file(
    conn: sqlite3.Connection, data: bytes, signature: str, digest: str | None = None
) -> None:
    """Note in meta that the rows match the file ``data`` (SHA-256 ``digest``, when the caller
    has it), at ``signature``."""
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('file_sig', ?)", (signature,))
    digest = hashlib.sha256(data).hexdigest() if digest is None else digest
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('file_hash', ?)", (digest,))


def _doc_and_key(record: Mapping[str, Any]) -> tuple[Doc, str]:
    """Return the full-text document of a live record and its dedupe key.

    Both read the title and content collapsed and case-folded: done once for the two (a
    rebuild calls this once per memory), the document with its ranked title settled.
    """
    get = record.get
    title = str(get("title", ""))
    content = str(get("content", ""))
    kind = str(get("kind", ""))
    scope = str(get("scope") or DEFAULT_SCOPE)
    project = str(get("project", ""))
    folded_title = normalize_content(title)
    folded_content = normalize_content(content)
    doc = Doc(
        str(record["id"]),
        title,
        content,
        tuple(map(str, tags_of(record))),
        tuple(map(str, files_of(record))),
        kind,
        str(get("status") or DEFAULT_STATUS),
        scope,
        project,
        ranked_title_of(title, content, folded_title, folded_content),
    )
    return doc, dedupe_hash(kind, folded_title, folded_content, project, scope)


def _row(
    record: Mapping[str, Any], digest: str, line: bytes, key: str | None = None
) -> tuple[Any, ...]:
    """Return the records-table row of a record whose canonical line is ``line``.

    ``key``: its dedupe key, when the caller has it. Each field is read once, the accessors'
    defaults inline (``status_of``, ``scope_of``, ``is_tombstone``): a rebuild calls this
    once per memory.
    """
    get = record.get
    tomb = bool(get("deleted_at"))
    topic = get("topic_key")
    session = get("session_id")
    updated = get("updated_at")
    judgements = get("judgements")
    return (
        str(record["id"]),
        digest,
        str(get("kind", "")),
        str(get("status") or DEFAULT_STATUS),
        str(get("scope") or DEFAULT_SCOPE),
        str(get("project", "")),
        topic if isinstance(topic, str) else None,
        None if tomb else key or dedupe_key(record),
        importance_of(record),
        str(get("created_at", "")),
        str(get("updated_at", "")),
        epoch(updated),
        1 if tomb else 0,
        session if isinstance(session, str) else None,
        None if judgements is None else judgement_score(judgements),
        str(get("author") or "").casefold(),
        line.decode("utf-8"),
    )


class _Tables:
    """The rows of every table for a batch of records, built in one pass over them."""

    __slots__ = ("files", "links", "records", "tags")

    def __init__(self) -> None:
        self.records: list[tuple[Any, ...]] = []
        self.tags: list[tuple[str, str]] = []
        self.files: list[tuple[str, str, str, str, float]] = []
        self.links: list[tuple[str, str, str]] = []

    def add(
        self, record: Mapping[str, Any], digest: str, line: bytes, key: str | None = None
    ) -> None:
        """Add one record's rows: its records row, and, when it is live, its side tables'.

        ``key``: its dedupe key, when the caller has it.
        """
        self.records.append(_row(record, digest, line, key))
        if record.get("deleted_at"):
            return  # a tombstone has no tags, files or links rows
        rid = record["id"]
        tags = tags_of(record)
        if tags:
            self.tags += [(rid, str(tag)) for tag in tags]
        files = files_of(record)
        if files:
            cite = cite_columns(record)
            self.files += [(rid, str(path), *cite) for path in files]
        links = links_of(record)
        if links:
            self.links += [
                (rid, str(link.get("rel", "")), str(link.get("to", "")))
                for link in links
                if isinstance(link, Mapping)
            ]

    def insert(self, conn: sqlite3.Connection) -> None:
        """Insert every row (the records replace any row of the same id)."""
        conn.executemany(
            f"INSERT OR REPLACE INTO records ({_RECORD_COLUMNS}) VALUES ({marks(17)})",
            self.records,
        )
        conn.executemany("INSERT INTO tags VALUES (?, ?)", self.tags)
        conn.executemany("INSERT INTO files VALUES (?, ?, ?, ?, ?)", self.files)
        conn.executemany("INSERT INTO links VALUES (?, ?, ?)", self.links)
