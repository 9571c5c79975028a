"""The derived index of one store: SQLite records and filters, a full-text backend, freshness.

``Index`` keeps ``.engram/index/engram.db`` (records, tags, files, links, a queue of ids the
full-text backend has not seen yet) in step with memories.jsonl. Every read first calls
``refresh``: a stat signature tells in microseconds whether the file changed; if it did, lines
are compared by id and content hash and only changed records are parsed and re-indexed. A
write from this process is applied directly (``apply``), so the next read finds nothing to do.
Full-text updates are queued and flushed in one batch by the next search, which keeps
``remember`` close to the cost of writing the file.

Semantic recall (``search.mode`` hybrid or semantic, with the embedding model installed): each
live record's embedding is stored in ``vectors``, keyed by a hash of the embedded text, so a
record whose title, tags and content did not change is never embedded again (a status change
or a rebuild reuses its vector). Vectors are written with the records (rebuild, refresh and
this process's own writes) and caught up by the first semantic search after writes made in
keyword mode. Search fuses BM25 and cosine scores (``ranking.fuse``), then applies the same
multipliers and 20% cut as keyword search.

The index is disposable: a schema change drops and rebuilds it. This module reads the store but
never writes it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Final

from engram.errors import AmbiguousId, CorruptStore, IndexError_, NotFound
from engram.index import semantic
from engram.index.backend import Doc, Filters, SearchIndex, open_backend, tokenize_query
from engram.index.ranking import Weights, cut, freshness, fuse, judgement_score, static_factor
from engram.model import (
    Record,
    check_id,
    dedupe_key,
    is_tombstone,
    loads,
    parse_line,
    parse_time,
)
from engram.store import MemoryStore, line_id
from engram.store.lock import ProcessLock

SCHEMA_VERSION: Final = 7
CACHE_LIMIT: Final = 200_000
# Semantic candidates are found on the leading dimensions of the vectors (see ``_nearest``).
HEAD_DIMS: Final = 128
HEAD_MARGIN: Final = 0.1
HEAD_POOL: Final = 8
Progress = Callable[[int, int], None]

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
    json TEXT NOT NULL  -- last: ranking reads the columns above without touching it
);
CREATE TABLE IF NOT EXISTS tags (id TEXT NOT NULL, tag TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (id TEXT NOT NULL, path TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS links (src TEXT NOT NULL, rel TEXT NOT NULL, dst TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pending (id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS problems (line INTEGER NOT NULL, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vectors (
    id TEXT PRIMARY KEY,
    hash TEXT NOT NULL,  -- semantic.text_hash of the embedded text: equal hash, same vector
    line_hash TEXT NOT NULL,  -- the record version last checked against ``hash``
    vec BLOB NOT NULL  -- float32, L2-normalised
);
"""

# Created after a bulk load rather than maintained row by row during it.
_INDEXES: Final = """
CREATE INDEX IF NOT EXISTS records_topic ON records (topic_key, project, scope)
    WHERE topic_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_dedupe ON records (dedupe_key);
CREATE INDEX IF NOT EXISTS records_kind_status ON records (kind, status, deleted);
CREATE INDEX IF NOT EXISTS records_session ON records (session_id, created_at)
    WHERE session_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS tags_id ON tags (id);
CREATE INDEX IF NOT EXISTS tags_tag ON tags (tag);
CREATE INDEX IF NOT EXISTS files_id ON files (id);
CREATE INDEX IF NOT EXISTS files_path ON files (path);
CREATE INDEX IF NOT EXISTS links_src ON links (src);
CREATE INDEX IF NOT EXISTS links_dst ON links (dst);
"""

_RECORD_COLUMNS: Final = (
    "id, line_hash, kind, status, scope, project, topic_key, dedupe_key, importance, "
    "created_at, updated_at, updated_epoch, deleted, session_id, judged, json"
)


@dataclass(frozen=True)
class Query:
    """What a recall asks for: words plus filters (all optional)."""

    text: str = ""
    kinds: frozenset[str] = frozenset()
    statuses: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()
    projects: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    files: tuple[str, ...] = ()
    limit: int = 10
    offset: int = 0


@dataclass(eq=False)
class Hit:
    """One ranked result: the record, its final score and the parts of it."""

    id: str
    score: float
    bm25: float
    record: Record
    tokens: tuple[str, ...] = ()
    cosine: float = 0.0  # similarity of the query's and the memory's embeddings (semantic modes)

    @functools.cached_property
    def matched(self) -> list[str]:
        """Name the fields the query's words appear in (worked out only when asked)."""
        return _matched(self.record, self.tokens)


def line_hash(line: bytes) -> str:
    """Hash one canonical line (identifies a record's exact version)."""
    return hashlib.blake2b(line, digest_size=16).hexdigest()


def epoch(value: Any) -> float:
    """Return seconds since the epoch for an RFC 3339 string (0 when unreadable)."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return parse_time(value).timestamp()
    except Exception:
        return 0.0


def to_doc(record: Mapping[str, Any]) -> Doc:
    """Return what the full-text backend indexes for a record."""
    return Doc(
        id=str(record["id"]),
        title=str(record.get("title", "")),
        content=str(record.get("content", "")),
        tags=tuple(str(tag) for tag in record.get("tags", []) or []),
        files=tuple(str(path) for path in record.get("files", []) or []),
        kind=str(record.get("kind", "")),
        status=str(record.get("status", "active")),
        scope=str(record.get("scope", "project")),
        project=str(record.get("project", "")),
    )


def file_matches(memory_path: str, wanted: str) -> bool:
    """Tell whether a memory's file entry bears on a wanted path (exact, directory or glob)."""
    memory_path, wanted = memory_path.strip("/"), wanted.strip("/")
    if memory_path == wanted:
        return True
    if wanted.startswith(memory_path + "/") or memory_path.startswith(wanted + "/"):
        return True
    return fnmatchcase(wanted, memory_path) or fnmatchcase(memory_path, wanted)


class Index:
    """SQLite records plus a full-text backend, derived from one store's memories.jsonl."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        backend: str = "tantivy",
        field_weights: Mapping[str, float] | None = None,
        weights: Weights | None = None,
        lock_timeout: float = 60.0,
    ) -> None:
        self.store = store
        self.folder = store.dir / "index"
        self.backend_name = backend
        self.field_weights = field_weights
        self.weights = weights or Weights()
        self.lock_timeout = lock_timeout
        self._conn: sqlite3.Connection | None = None
        self._backend: SearchIndex | None = None
        self._lock = ProcessLock(
            self.folder / "index.lock", timeout=lock_timeout, what=f"the index in {self.folder}"
        )
        self._ft_lock = ProcessLock(
            self.folder / "fulltext.lock",
            timeout=lock_timeout,
            what=f"the full-text index in {self.folder}",
        )
        # Per-process caches, valid while memories.jsonl keeps the stat signature
        # ``_synced_sig``: they save SQLite round trips on every recall of a long-lived process.
        self._synced_sig: str | None = None
        self._flushed_sig: str | None = None
        self._rank_cache: dict[str, tuple[float, float] | None] = {}
        self._record_cache: dict[str, Record] = {}
        # The files table's distinct paths (key ""), and those matching each list of wanted
        # paths (key: the paths joined by NUL); dropped by any write.
        self._paths_cache: dict[str, list[str]] | None = None
        # Live vectors as one matrix with their ids and filter columns; dropped by any write.
        self._vectors: _Vectors | None = None
        self._embedder: semantic.Embedder | None = None
        self._semantic_off: str | None = None  # why semantic recall is unavailable, once known
        self.problems: list[tuple[int, str]] = []

    # -- plumbing ----------------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _connect(self) -> sqlite3.Connection:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / "engram.db"
        # One caller at a time, but not always the same thread (the MCP server runs a tool in a
        # worker thread when it may ask the client's model): the connection may move.
        conn = sqlite3.connect(
            path, timeout=self.lock_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(self.lock_timeout * 1000)}")
            row = None
            with contextlib.suppress(sqlite3.DatabaseError):
                row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is not None and row[0] == str(SCHEMA_VERSION):
                return conn
            conn.close()
        except sqlite3.DatabaseError as exc:
            conn.close()
            if "malformed" not in str(exc) and "not a database" not in str(exc):
                raise IndexError_(f"cannot open {path}: {exc}") from exc
        # Unknown, old or broken schema: the index is derived, so start it afresh.
        with self.lock():
            self._wipe_files()
            conn = sqlite3.connect(
                path, timeout=self.lock_timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(self.lock_timeout * 1000)}")
            conn.executescript(_TABLES + _INDEXES)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        return conn

    def _wipe_files(self) -> None:
        for name in ("engram.db", "engram.db-wal", "engram.db-shm"):
            with contextlib.suppress(FileNotFoundError):
                (self.folder / name).unlink()
        self._wipe_fulltext()

    def _wipe_fulltext(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None
        for name in ("tantivy", "fts.db", "fts.db-wal", "fts.db-shm"):
            target = self.folder / name
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    target.unlink()

    @property
    def backend(self) -> SearchIndex:
        if self._backend is None:
            try:
                self._backend = open_backend(self.backend_name, self.folder, self.field_weights)
            except IndexError_:
                # Unreadable full-text files: they are derived, so start them afresh and queue
                # every live record for the next flush.
                with self.lock(), self.fulltext_lock():
                    self._wipe_fulltext()
                    self._backend = open_backend(self.backend_name, self.folder, self.field_weights)
                    self._queue_all()
            if self._backend.count() == 0 and self._has_live_records():
                # The backend came up empty (new, or recreated after an incompatible change)
                # while the records say otherwise: re-queue everything.
                with self.lock():
                    self._queue_all()
        return self._backend

    def _has_live_records(self) -> bool:
        return (
            self.db.execute("SELECT 1 FROM records WHERE deleted=0 LIMIT 1").fetchone() is not None
        )

    def _queue_all(self) -> None:
        with self._tx() as conn:
            conn.execute("INSERT OR REPLACE INTO pending SELECT id FROM records WHERE deleted=0")

    def close(self) -> None:
        """Release the database connection and the backend."""
        if self._backend is not None:
            self._backend.close()
            self._backend = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the cross-process lock for index writes (re-entrant in one process)."""
        return self._lock.hold()

    def fulltext_lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the cross-process lock for writes to the full-text backend."""
        return self._ft_lock.hold()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self.db
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def meta(self, key: str) -> str | None:
        """Return one value of the meta table."""
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    # -- keeping up with the file ------------------------------------------------------------

    def refresh(self, progress: Progress | None = None) -> int:
        """Bring the index up to date with memories.jsonl; return how many records changed."""
        signature = self.store.signature()
        if signature == self._synced_sig:
            return 0  # this process saw the index match exactly this file
        if self.meta("file_sig") == signature and self.meta("backend") == self.backend_name:
            self._synced(signature)
            return 0
        with self.lock():
            data, signature = self.store.read_bytes()
            if self.meta("backend") != self.backend_name:
                with self._tx() as conn:
                    conn.execute("DELETE FROM pending")
                    conn.execute("INSERT INTO pending SELECT id FROM records WHERE deleted=0")
                    conn.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('backend', ?)", (self.backend_name,)
                    )
                with self.fulltext_lock():
                    self.backend.clear()
            if self.meta("file_sig") == signature:
                self._synced(signature)
                return 0
            if data and self.db.execute("SELECT 1 FROM records LIMIT 1").fetchone() is None:
                # A new or wiped index: one bulk pass beats record-by-record updates.
                changed = self.rebuild(progress)
            else:
                changed = self._sync(data, signature, progress)
            self._synced(signature)
            return changed

    def _synced(self, signature: str) -> None:
        """Note that the index matches the file at ``signature``; drop per-process caches."""
        if signature != self._synced_sig:
            self._drop_caches()
        self._synced_sig = signature

    def _drop_caches(self) -> None:
        self._synced_sig = None
        self._flushed_sig = None
        self._rank_cache.clear()
        self._record_cache.clear()
        self._paths_cache = None
        self._vectors = None

    def _sync(self, data: bytes, signature: str, progress: Progress | None) -> int:
        known = dict(self.db.execute("SELECT id, line_hash FROM records").fetchall())
        seen: set[str] = set()
        changed: list[tuple[Record, str, bytes]] = []
        problems: list[tuple[int, str]] = []
        name = str(self.store.path)
        lines = data.splitlines()
        total = len(lines)
        for lineno, raw in enumerate(lines, start=1):
            if progress is not None and lineno % 5000 == 0:
                progress(lineno, total)
            if not raw.strip():
                continue
            digest = line_hash(raw)
            try:
                rid = line_id(raw, path=name, lineno=lineno)
            except CorruptStore as exc:
                problems.append((lineno, exc.message))
                continue
            if rid in seen:
                problems.append((lineno, f"{name}:{lineno}: duplicate id {rid}"))
                continue
            seen.add(rid)
            if known.get(rid) == digest:
                continue
            try:
                record = parse_line(raw, path=name, lineno=lineno)
            except CorruptStore as exc:
                problems.append((lineno, exc.message))
                seen.discard(rid)
                continue
            changed.append((record, digest, raw))
        removed = [rid for rid in known if rid not in seen]
        if changed:
            self.embedder()  # load the model before taking the write transaction
        with self._tx() as conn:
            self._write_rows(conn, changed)
            for chunk in _chunks(removed, 500):
                marks = ",".join("?" * len(chunk))
                for table, column in (
                    ("records", "id"),
                    ("tags", "id"),
                    ("files", "id"),
                    ("links", "src"),
                    ("vectors", "id"),
                ):
                    conn.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", chunk)
                conn.executemany("INSERT OR REPLACE INTO pending VALUES (?)", [(r,) for r in chunk])
            conn.execute("DELETE FROM problems")
            conn.executemany("INSERT INTO problems VALUES (?, ?)", problems)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('file_sig', ?)", (signature,))
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES ('file_hash', ?)",
                (hashlib.sha256(data).hexdigest(),),
            )
        self.problems = problems
        if progress is not None:
            progress(total, total)
        return len(changed) + len(removed)

    def _write_rows(
        self,
        conn: sqlite3.Connection,
        rows: Sequence[tuple[Record, str, bytes]],
        *,
        fresh: bool = False,
        queue: bool = True,
        embed: bool = True,
    ) -> None:
        """Write records (with their line hash and canonical line) and their side tables.

        ``fresh``: the tables hold none of these ids yet (a rebuild), so skip the deletes.
        ``queue``: add the ids to the full-text queue.
        ``embed``: embed them now (semantic modes); else the next semantic search catches up.
        """
        if not rows:
            return
        self._paths_cache = None
        ids = [(str(record["id"]),) for record, _, _ in rows]
        if not fresh:
            conn.executemany("DELETE FROM tags WHERE id=?", ids)
            conn.executemany("DELETE FROM files WHERE id=?", ids)
            conn.executemany("DELETE FROM links WHERE src=?", ids)
        conn.executemany(
            f"INSERT OR REPLACE INTO records ({_RECORD_COLUMNS}) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [_row(record, digest, line) for record, digest, line in rows],
        )
        live = [record for record, _, _ in rows if not is_tombstone(record)]
        conn.executemany(
            "INSERT INTO tags VALUES (?, ?)",
            [(r["id"], str(tag)) for r in live for tag in r.get("tags", []) or []],
        )
        conn.executemany(
            "INSERT INTO files VALUES (?, ?)",
            [(r["id"], str(path)) for r in live for path in r.get("files", []) or []],
        )
        conn.executemany(
            "INSERT INTO links VALUES (?, ?, ?)",
            [
                (r["id"], str(link.get("rel", "")), str(link.get("to", "")))
                for r in live
                for link in r.get("links", []) or []
                if isinstance(link, Mapping)
            ],
        )
        if queue:
            conn.executemany("INSERT OR REPLACE INTO pending VALUES (?)", ids)
        if embed:
            self._write_vectors(conn, rows)
        else:
            self._vectors = None
            conn.executemany(
                "DELETE FROM vectors WHERE id=?",
                [(str(r["id"]),) for r, _, _ in rows if is_tombstone(r)],
            )

    # -- semantic vectors --------------------------------------------------------------------

    @property
    def mode(self) -> str:
        """Return the search mode in effect: the configured one, keyword without the model."""
        if self.weights.mode == "keyword" or self._semantic_off is not None:
            return "keyword"
        if not semantic.available():
            self._semantic_off = "the wordllama package (or its bundled weights) is not installed"
            return "keyword"
        return self.weights.mode

    def embedder(self) -> semantic.Embedder | None:
        """Return the embedding model when the mode uses it (loaded once per process)."""
        if self.mode == "keyword":
            return None
        if self._embedder is None:
            try:
                self._embedder = semantic.get_embedder()
            except IndexError_ as exc:
                # Fail closed: no model, no semantic recall; keyword search still answers.
                self._semantic_off = exc.message
                return None
        return self._embedder

    def _write_vectors(
        self, conn: sqlite3.Connection, rows: Sequence[tuple[Record, str, bytes]]
    ) -> None:
        """Embed the live records among ``rows`` whose text changed; drop tombstones' vectors."""
        model = self.embedder()
        if model is None or not rows:
            return
        self._vectors = None
        conn.executemany(
            "DELETE FROM vectors WHERE id=?",
            [(str(record["id"]),) for record, _, _ in rows if is_tombstone(record)],
        )
        live = [
            (str(record["id"]), semantic.record_text(record), digest)
            for record, digest, _ in rows
            if not is_tombstone(record)
        ]
        stored: dict[str, str] = {}
        for chunk in _chunks([rid for rid, _, _ in live], 500):
            marks = ",".join("?" * len(chunk))
            stored.update(
                conn.execute(f"SELECT id, hash FROM vectors WHERE id IN ({marks})", chunk)
            )
        keep: list[tuple[str, str]] = []
        todo: list[tuple[str, str, str, str]] = []
        for rid, text, digest in live:
            key = semantic.text_hash(text)
            if stored.get(rid) == key:
                keep.append((digest, rid))
            else:
                todo.append((rid, key, digest, text))
        conn.executemany("UPDATE vectors SET line_hash=? WHERE id=?", keep)
        if todo:
            matrix = model.embed([text for _, _, _, text in todo])
            conn.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                [
                    (rid, key, digest, matrix[n].tobytes())
                    for n, (rid, key, digest, _) in enumerate(todo)
                ],
            )

    def _catch_up_vectors(self) -> None:
        """Embed live records whose vector is missing or was checked against another version."""
        stale = "FROM records LEFT JOIN vectors USING (id) WHERE records.deleted=0 AND " + (
            "(vectors.line_hash IS NULL OR vectors.line_hash != records.line_hash)"
        )
        if self.db.execute(f"SELECT 1 {stale} LIMIT 1").fetchone() is None:
            return
        with self.lock():
            found = self.db.execute(
                f"SELECT records.id, records.line_hash, records.json {stale}"
            ).fetchall()
            rows = [(_loads(text), str(digest), b"") for _, digest, text in found]
            with self._tx() as conn:
                for start in range(0, len(rows), 2000):
                    self._write_vectors(conn, rows[start : start + 2000])
                conn.execute(
                    "DELETE FROM vectors WHERE id NOT IN (SELECT id FROM records WHERE deleted=0)"
                )

    def _vector_state(self) -> _Vectors | None:
        """Return the live vectors as one matrix (loaded once per index state), or None."""
        if self._vectors is not None:
            return self._vectors
        model = self.embedder()
        if model is None:
            return None
        import numpy as np

        self._catch_up_vectors()
        key = self._vector_key(model.dim)
        cached = self._load_vector_cache(key)
        if cached is not None:
            ids, matrix, head_t = cached
        else:
            rows = self.db.execute(
                "SELECT vectors.id, vectors.vec FROM vectors JOIN records USING (id) "
                "WHERE records.deleted=0"
            ).fetchall()
            ids = [str(row[0]) for row in rows]
            blob = b"".join(row[1] for row in rows)
            matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), model.dim).copy()
            # The model is trained so that leading dimensions carry most of the meaning: a scan
            # over the first HEAD_DIMS (re-normalised, transposed for the fastest gemv) finds
            # the candidates, whose exact cosines are then computed on all dimensions.
            head = matrix[:, :HEAD_DIMS]
            norms = np.linalg.norm(head, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            head_t = np.ascontiguousarray((head / norms).T)
            self._save_vector_cache(key, ids, matrix, head_t)
        self._vectors = _Vectors(
            ids=ids,
            rows={rid: n for n, rid in enumerate(ids)},
            matrix=matrix,
            head=head_t,
            columns={},
        )
        return self._vectors

    # The matrix is also kept in index/ as .npy files named by what they were built from (so
    # they never change once written), memory-mapped by the next process: a new process needs
    # no read of every vector out of SQLite.

    def _vector_key(self, dim: int) -> str:
        count, top = self.db.execute("SELECT count(*), max(rowid) FROM vectors").fetchone()
        live = self.db.execute("SELECT count(*) FROM records WHERE deleted=0").fetchone()[0]
        key = f"{SCHEMA_VERSION}:{dim}:{self.meta('file_sig')}:{count}:{top}:{live}"
        return hashlib.blake2b(key.encode("utf-8"), digest_size=10).hexdigest()

    def _vector_paths(self, key: str) -> tuple[Path, Path, Path]:
        return (
            self.folder / f"vectors-{key}.ids.json",
            self.folder / f"vectors-{key}.matrix.npy",
            self.folder / f"vectors-{key}.head.npy",
        )

    def _load_vector_cache(self, key: str) -> tuple[list[str], Any, Any] | None:
        import numpy as np

        ids_path, matrix_path, head_path = self._vector_paths(key)
        try:
            raw = json.loads(ids_path.read_text(encoding="utf-8"))
            ids = [str(rid) for rid in raw]
            matrix = np.load(matrix_path, mmap_mode="r")
            head = np.load(head_path, mmap_mode="r")
        except (OSError, ValueError, TypeError):
            return None
        if matrix.shape[0] != len(ids) or head.shape[1] != len(ids):
            return None
        return ids, matrix, head

    def _save_vector_cache(self, key: str, ids: list[str], matrix: Any, head: Any) -> None:
        import numpy as np

        from engram.store.atomic import atomic_write

        ids_path, matrix_path, head_path = self._vector_paths(key)
        try:
            for path, array in ((matrix_path, matrix), (head_path, head)):
                buffer = io.BytesIO()
                np.save(buffer, array, allow_pickle=False)
                atomic_write(path, buffer.getvalue())
            atomic_write(ids_path, json.dumps(ids).encode("utf-8"))  # last: the others exist
            for old in self.folder.glob("vectors-*"):
                if old.name.split(".")[0] != f"vectors-{key}":
                    with contextlib.suppress(OSError):
                        old.unlink()
        except OSError:
            pass  # a read-only index folder still works, only slower to start

    def apply(self, records: Sequence[Record], signature: str) -> None:
        """Record this process's own write (the store is already at ``signature``)."""
        from engram.model import canonical_line

        rows = []
        for record in records:
            line = canonical_line(record)[:-1]
            rows.append((record, line_hash(line), line))
        # A process that has the model embeds its writes now (servers, a recall before). A
        # one-shot `engram remember` does not load it for one memory: like the full-text
        # queue, the next semantic search catches up.
        embed = self._embedder is not None or semantic.loaded()
        if rows and embed:
            self.embedder()  # load before taking the write transaction
        with self.lock(), self._tx() as conn:
            self._write_rows(conn, rows, embed=embed)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('file_sig', ?)", (signature,))
            # The file hash is known only after a full read; refresh records it again.
            conn.execute("DELETE FROM meta WHERE key='file_hash'")

    def flush(self) -> int:
        """Push queued changes to the full-text backend; return how many were pushed.

        Runs under its own lock, not the index lock, so that a slow full-text commit never
        holds up writers. A queue entry is removed by rowid: an id queued again while this
        flush ran gets a new rowid and stays queued for the next flush.
        """
        if self._synced_sig is not None and self._flushed_sig == self._synced_sig:
            return 0  # nothing was queued since this process last emptied the queue
        if self.db.execute("SELECT 1 FROM pending LIMIT 1").fetchone() is None:
            self._flushed_sig = self._synced_sig
            return 0
        with self.fulltext_lock():
            queued = self.db.execute("SELECT rowid, id FROM pending").fetchall()
            if not queued:
                return 0
            ids = [str(rid) for _, rid in queued]
            live: list[Doc] = []
            gone: list[str] = []
            for chunk in _chunks(ids, 500):
                marks = ",".join("?" * len(chunk))
                found = {
                    row[0]: row
                    for row in self.db.execute(
                        f"SELECT id, json, deleted FROM records WHERE id IN ({marks})", chunk
                    )
                }
                for rid in chunk:
                    row = found.get(rid)
                    if row is None or row[2]:
                        gone.append(rid)
                    else:
                        live.append(to_doc(json.loads(row[1])))
            if gone:
                self.backend.delete(gone)
            if live:
                self.backend.upsert(live)
            rowids = [str(rowid) for rowid, _ in queued]
            with self._tx() as conn:
                for chunk in _chunks(rowids, 500):
                    marks = ",".join("?" * len(chunk))
                    conn.execute(f"DELETE FROM pending WHERE rowid IN ({marks})", chunk)
            return len(ids)

    def rebuild(self, progress: Progress | None = None) -> int:
        """Drop everything and index memories.jsonl from scratch; return the record count.

        One pass over the file: each line is parsed once, written to SQLite in batches and
        handed to the full-text backend's bulk load in the same loop. Secondary indexes are
        created after the load, and the database skips fsync meanwhile (it is derived).
        """
        self.embedder()  # load the model before taking the locks
        with self.lock(), self.fulltext_lock():
            self._drop_caches()
            data, signature = self.store.read_bytes()
            conn = self.db
            conn.execute("PRAGMA synchronous=OFF")
            try:
                with self._tx():
                    for name in ("records", "tags", "files", "links", "pending", "problems"):
                        conn.execute(f"DROP TABLE IF EXISTS {name}")
                    conn.execute("DELETE FROM meta WHERE key IN ('file_sig', 'file_hash')")
                    for statement in _statements(_TABLES):
                        conn.execute(statement)
                self.backend.clear()
                problems: list[tuple[int, str]] = []
                conn.execute("BEGIN IMMEDIATE")
                try:
                    self.backend.bulk_load(self._stream(conn, data, problems, progress))
                    conn.executemany("INSERT INTO problems VALUES (?, ?)", problems)
                    # Vectors outlive a rebuild (keyed by their text's hash); drop the dead.
                    conn.execute(
                        "DELETE FROM vectors WHERE id NOT IN "
                        "(SELECT id FROM records WHERE deleted=0)"
                    )
                    conn.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('backend', ?)", (self.backend_name,)
                    )
                    conn.execute("INSERT OR REPLACE INTO meta VALUES ('file_sig', ?)", (signature,))
                    conn.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('file_hash', ?)",
                        (hashlib.sha256(data).hexdigest(),),
                    )
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                for statement in _statements(_INDEXES):
                    conn.execute(statement)
            finally:
                conn.execute("PRAGMA synchronous=NORMAL")
            self.problems = problems
            self._synced(signature)
            return int(conn.execute("SELECT count(*) FROM records").fetchone()[0])

    def _stream(
        self,
        conn: sqlite3.Connection,
        data: bytes,
        problems: list[tuple[int, str]],
        progress: Progress | None,
    ) -> Iterator[Doc]:
        """Parse each line once: write SQLite rows in batches, yield full-text docs."""
        name = str(self.store.path)
        lines = data.splitlines()
        total = len(lines)
        seen: set[str] = set()
        batch: list[tuple[Record, str, bytes]] = []
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
            batch.append((record, line_hash(raw), raw))
            if len(batch) >= 2000:
                self._write_rows(conn, batch, fresh=True, queue=False)
                batch.clear()
            if not is_tombstone(record):
                yield to_doc(record)
        self._write_rows(conn, batch, fresh=True, queue=False)
        if progress is not None:
            progress(total, total)

    # -- lookups -----------------------------------------------------------------------------

    def resolve(self, prefix: str) -> str:
        """Return the one id starting with ``prefix`` (tombstones included)."""
        prefix = check_id(prefix)
        rows = self.db.execute(
            "SELECT id, kind, coalesce(json_extract(json, '$.title'), ''),"
            " json_extract(json, '$.deleted_at') IS NOT NULL"
            " FROM records WHERE id >= ? AND id < ? ORDER BY id LIMIT 6",
            (prefix, prefix + "\U0010ffff"),
        ).fetchall()
        if not rows:
            raise NotFound(f"no memory with id {prefix}")
        exact = [row[0] for row in rows if row[0] == prefix]
        if exact:
            return str(exact[0])
        if len(rows) > 1:
            # Each candidate with its kind and title, so the caller can pick the one meant.
            shown = "; ".join(
                f"{rid} ({'forgotten ' if gone else ''}{kind}) {str(title)[:60]!r}"
                for rid, kind, title, gone in rows[:5]
            )
            more = ", and more" if len(rows) > 5 else ""
            raise AmbiguousId(f"id prefix {prefix!r} matches several memories: {shown}{more}")
        return str(rows[0][0])

    def get(self, rid: str) -> Record | None:
        """Return the record with exactly this id, or None."""
        row = self.db.execute("SELECT json FROM records WHERE id=?", (rid,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def get_many(self, ids: Iterable[str]) -> dict[str, Record]:
        """Return the records with these ids (missing ones left out)."""
        out: dict[str, Record] = {}
        missing = []
        for rid in ids:
            cached = self._record_cache.get(rid)
            if cached is None:
                missing.append(rid)
            else:
                out[rid] = dict(cached)
        for chunk in _chunks(missing, 500):
            marks = ",".join("?" * len(chunk))
            for rid, text in self.db.execute(
                f"SELECT id, json FROM records WHERE id IN ({marks})", chunk
            ):
                record = _loads(text)
                if len(self._record_cache) < CACHE_LIMIT:
                    self._record_cache[rid] = record
                out[rid] = dict(record)
        return out

    def by_source_prefix(self, prefix: str) -> dict[str, Record]:
        """Return every record (tombstones included) whose ``source`` starts with ``prefix``."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return {
            str(rid): _loads(text)
            for rid, text in self.db.execute(
                "SELECT id, json FROM records WHERE json_extract(json, '$.source') LIKE ? "
                "ESCAPE '\\'",
                (escaped + "%",),
            )
        }

    def find_duplicate(self, key: str, since: str) -> Record | None:
        """Return a live record with this dedupe key updated at or after ``since``."""
        row = self.db.execute(
            "SELECT json FROM records WHERE dedupe_key=? AND deleted=0 AND updated_at>=? "
            "ORDER BY updated_at DESC LIMIT 1",
            (key, since),
        ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def find_topic(self, topic_key: str, project: str, scope: str) -> Record | None:
        """Return the live record holding this topic key in this project and scope."""
        row = self.db.execute(
            "SELECT json FROM records WHERE topic_key=? AND project=? AND scope=? AND deleted=0 "
            "ORDER BY updated_at DESC LIMIT 1",
            (topic_key, project, scope),
        ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def session_records(self, session_id: str) -> list[Record]:
        """Return the live memories written in a session, oldest first (then by id)."""
        rows = self.db.execute(
            "SELECT json FROM records WHERE session_id=? AND deleted=0 ORDER BY created_at, id",
            (session_id,),
        ).fetchall()
        return [_loads(row[0]) for row in rows]

    def neighbours_in_time(self, created_at: str, project: str, count: int) -> list[Record]:
        """Return up to ``count`` live memories of ``project`` on each side of ``created_at``."""
        before = self.db.execute(
            "SELECT json FROM records WHERE deleted=0 AND project=? AND created_at<=? "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (project, created_at, count + 1),
        ).fetchall()
        after = self.db.execute(
            "SELECT json FROM records WHERE deleted=0 AND project=? AND created_at>? "
            "ORDER BY created_at, id LIMIT ?",
            (project, created_at, count),
        ).fetchall()
        out = [_loads(row[0]) for row in reversed(before)] + [_loads(row[0]) for row in after]
        return out

    def linked_to(self, rid: str) -> list[tuple[str, str]]:
        """Return (source id, relation) of live records that link to ``rid``."""
        return [
            (str(src), str(rel))
            for src, rel in self.db.execute(
                "SELECT links.src, links.rel FROM links JOIN records ON records.id = links.src "
                "WHERE links.dst=? AND records.deleted=0 ORDER BY links.src",
                (rid,),
            )
        ]

    def ids_for_files(self, wanted: Sequence[str]) -> frozenset[str]:
        """Return ids of live records whose files bear on any wanted path."""
        if self._paths_cache is None:
            rows = self.db.execute("SELECT DISTINCT path FROM files").fetchall()
            self._paths_cache = {"": [str(row[0]) for row in rows]}
        key = "\0".join(wanted)
        hits = self._paths_cache.get(key)
        if hits is None:
            if len(self._paths_cache) > 256:
                self._paths_cache = {"": self._paths_cache[""]}
            paths = self._paths_cache[""]
            hits = [p for p in paths if any(file_matches(p, w) for w in wanted)]
            self._paths_cache[key] = hits
        out: set[str] = set()
        for chunk in _chunks(hits, 500):
            marks = ",".join("?" * len(chunk))
            out.update(
                row[0]
                for row in self.db.execute(f"SELECT id FROM files WHERE path IN ({marks})", chunk)
            )
        return frozenset(out)

    def ids_for_tags(self, wanted: Sequence[str]) -> frozenset[str]:
        """Return ids of records carrying any of these tags."""
        out: set[str] = set()
        for chunk in _chunks(list(wanted), 500):
            marks = ",".join("?" * len(chunk))
            out.update(
                row[0]
                for row in self.db.execute(f"SELECT id FROM tags WHERE tag IN ({marks})", chunk)
            )
        return frozenset(out)

    def all_records(self, *, include_deleted: bool = False) -> list[Record]:
        """Return every record in id order."""
        where = "" if include_deleted else " WHERE deleted=0"
        return [
            dict(json.loads(row[0]))
            for row in self.db.execute(f"SELECT json FROM records{where} ORDER BY id")
        ]

    def stored_problems(self) -> list[tuple[int, str]]:
        """Return the unreadable lines noted by the last refresh."""
        return [(int(a), str(b)) for a, b in self.db.execute("SELECT line, message FROM problems")]

    def counts(self) -> dict[str, Any]:
        """Return counts by kind, status, scope and project, plus totals."""
        db = self.db
        out: dict[str, Any] = {
            "memories": db.execute("SELECT count(*) FROM records WHERE deleted=0").fetchone()[0],
            "tombstones": db.execute("SELECT count(*) FROM records WHERE deleted=1").fetchone()[0],
            "links": db.execute("SELECT count(*) FROM links").fetchone()[0],
        }
        for column in ("kind", "status", "scope", "project"):
            out[f"by_{column}"] = {
                str(key): int(n)
                for key, n in db.execute(
                    f"SELECT {column}, count(*) FROM records WHERE deleted=0 "
                    f"GROUP BY {column} ORDER BY count(*) DESC, {column}"
                )
            }
        out["top_tags"] = {
            str(tag): int(n)
            for tag, n in db.execute(
                "SELECT tag, count(*) FROM tags GROUP BY tag ORDER BY count(*) DESC, tag LIMIT 10"
            )
        }
        out["indexed"] = self.backend.count()
        out["pending"] = db.execute("SELECT count(*) FROM pending").fetchone()[0]
        return out

    # -- similarity --------------------------------------------------------------------------

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
        vectors = self._vector_state()
        if vectors is None or limit <= 0 or not vectors.ids:
            return []
        if like is not None:
            at = vectors.rows.get(like)
            if at is None:
                return []
            probe = vectors.matrix[at]
        else:
            probe = semantic.embed_query(text)
        floor = self.weights.semantic_floor if min_cosine is None else min_cosine
        nearest, cosines = _nearest(probe, vectors, None, floor, limit + 1)
        found = sorted(
            ((vectors.ids[n], c) for n, c in zip(nearest.tolist(), cosines.tolist(), strict=True)),
            key=lambda pair: (-pair[1], pair[0]),
        )
        return [(rid, round(c, 4)) for rid, c in found if rid != like and c >= floor][:limit]

    def vectors_for(self, ids: Iterable[str]) -> dict[str, Any]:
        """Return the stored embeddings (numpy float32, unit length) of these live memories."""
        vectors = self._vector_state()
        if vectors is None:
            return {}
        matrix, rows = vectors.matrix, vectors.rows
        return {rid: matrix[rows[rid]].copy() for rid in ids if rid in rows}

    # -- search ------------------------------------------------------------------------------

    def search(self, query: Query, *, now_epoch: float | None = None) -> list[Hit]:
        """Rank live memories for a query: relevance × multipliers, 20% cut, filters.

        Relevance is weighted BM25 in keyword mode, else BM25 fused with the cosine similarity
        of embeddings (``ranking.fuse``). Candidates are ranked from the records table's
        columns; only the page that is returned is read as JSON.
        """
        if query.limit <= 0:
            return []
        now_epoch = time.time() if now_epoch is None else now_epoch
        ids: frozenset[str] | None = None
        if query.files:
            ids = self.ids_for_files(query.files)
            if not ids:
                return []
        tokens = tokenize_query(query.text)
        want = query.limit + max(query.offset, 0)
        scored: list[tuple[float, str, float]]
        cosines: dict[str, float] = {}
        vectors = self._vector_state() if tokens else None
        if not tokens:
            scored = self._browse(query, ids, now_epoch)
        elif vectors is not None:
            scored, cosines = self._search_semantic(query, ids, vectors, want, now_epoch)
        else:
            backend = self.backend  # opening it may queue records (a recreated index)
            self.flush()
            filters = Filters(
                kinds=query.kinds,
                statuses=query.statuses,
                scopes=query.scopes,
                projects=query.projects,
                tags=frozenset(tag.lower() for tag in query.tags),
                ids=ids,
            )
            raw = backend.search(query.text, limit=max(want * 2, 20), filters=filters)
            columns = self._rank_columns([rid for rid, _ in raw])
            scored = []
            for rid, bm25 in raw:
                row = columns.get(rid)
                if row is None:
                    continue  # deleted since the full-text index saw it
                scored.append((bm25 * self._row_multiplier(row, now_epoch), rid, bm25))
            kept = {
                rid for _, rid in cut([(s, r) for s, r, _ in scored], self.weights.min_score_ratio)
            }
            scored = [item for item in scored if item[1] in kept]
        # The same order the caller sees (scores rounded as in Hit, then id), so that pages of
        # tied memories neither repeat nor skip one.
        scored.sort(key=lambda item: (-round(item[0], 4), item[1]))
        page = scored[max(query.offset, 0) : want]
        records = self.get_many(rid for _, rid, _ in page)
        return [
            Hit(
                id=rid,
                score=round(score, 4),
                bm25=round(bm25, 4),
                record=records[rid],
                tokens=tuple(tokens),
                cosine=round(cosines.get(rid, 0.0), 4),
            )
            for score, rid, bm25 in page
            if rid in records
        ]

    def _search_semantic(
        self,
        query: Query,
        ids: frozenset[str] | None,
        vectors: _Vectors,
        want: int,
        now_epoch: float,
    ) -> tuple[list[tuple[float, str, float]], dict[str, float]]:
        """Rank by fused BM25 and cosine (hybrid) or cosine alone (semantic), then cut.

        Candidates: the keyword backend's best (hybrid) plus the nearest vectors at or above
        ``semantic_floor`` among those passing the filters. Returns (score, id, bm25) triples
        and each candidate's cosine.
        """

        pool = max(want * 2, 20)
        raw: list[tuple[str, float]] = []
        if self.weights.mode == "hybrid":
            backend = self.backend
            self.flush()
            filters = Filters(
                kinds=query.kinds,
                statuses=query.statuses,
                scopes=query.scopes,
                projects=query.projects,
                tags=frozenset(tag.lower() for tag in query.tags),
                ids=ids,
            )
            raw = backend.search(query.text, limit=pool, filters=filters)
        probe = semantic.embed_query(query.text)
        mask = self._vector_mask(query, ids, vectors)
        nearest, cosines = _nearest(probe, vectors, mask, self.weights.semantic_floor, pool)
        candidates: dict[str, tuple[float, float]] = {
            vectors.ids[n]: (0.0, c)
            for n, c in zip(nearest.tolist(), cosines.tolist(), strict=True)
        }
        found = [(rid, bm25, vectors.rows.get(rid)) for rid, bm25 in raw]
        known = [at for _, _, at in found if at is not None]
        exact = iter((vectors.matrix[known] @ probe).tolist() if known else [])
        for rid, bm25, at in found:
            candidates[rid] = (bm25, next(exact) if at is not None else 0.0)
        best_bm25 = max((bm25 for bm25, _ in candidates.values()), default=0.0)
        best_cosine = max((cosine for _, cosine in candidates.values()), default=0.0)
        columns = self._rank_columns(list(candidates))
        scored: list[tuple[float, str, float]] = []
        for rid, (bm25, cosine) in candidates.items():
            row = columns.get(rid)
            if row is None:
                continue  # deleted since the full-text index saw it
            relevance = fuse(bm25, best_bm25, cosine, best_cosine, self.weights)
            if relevance > 0:
                scored.append((relevance * self._row_multiplier(row, now_epoch), rid, bm25))
        kept = {rid for _, rid in cut([(s, r) for s, r, _ in scored], self.weights.min_score_ratio)}
        return (
            [item for item in scored if item[1] in kept],
            {rid: cosine for rid, (_, cosine) in candidates.items()},
        )

    def _vector_column(self, vectors: _Vectors, name: str) -> tuple[dict[str, int], Any]:
        """Return (value -> code, int32 code per vector row) of a filter column, made once."""
        if name not in vectors.columns:
            import numpy as np

            values = dict(
                self.db.execute(f"SELECT id, {name} FROM records WHERE deleted=0").fetchall()
            )
            codes: dict[str, int] = {}
            column = np.fromiter(
                (codes.setdefault(str(values.get(rid, "")), len(codes)) for rid in vectors.ids),
                dtype=np.int32,
                count=len(vectors.ids),
            )
            vectors.columns[name] = (codes, column)
        return vectors.columns[name]

    def _vector_mask(self, query: Query, ids: frozenset[str] | None, vectors: _Vectors) -> Any:
        """Return a boolean row mask for the query's filters, or None when nothing is filtered."""
        import numpy as np

        mask = None
        for name, values in (
            ("kind", query.kinds),
            ("status", query.statuses),
            ("scope", query.scopes),
            ("project", query.projects),
        ):
            if values:
                codes, column = self._vector_column(vectors, name)
                wanted = [codes[value] for value in values if value in codes]
                part = np.isin(column, np.array(wanted, dtype=np.int32))
                mask = part if mask is None else mask & part
        for allowed in (
            self.ids_for_tags([tag.lower() for tag in query.tags]) if query.tags else None,
            ids,
        ):
            if allowed is None:
                continue
            part = np.zeros(len(vectors.ids), dtype=bool)
            rows = [vectors.rows[rid] for rid in allowed if rid in vectors.rows]
            part[np.array(rows, dtype=np.intp)] = True
            mask = part if mask is None else mask & part
        return mask

    def _rank_columns(self, ids: Sequence[str]) -> dict[str, tuple[float, float]]:
        """Return (kind × importance × status factor, updated_epoch) of live records in ``ids``."""
        out: dict[str, tuple[float, float]] = {}
        missing = []
        for rid in ids:
            if rid in self._rank_cache:
                row = self._rank_cache[rid]
                if row is not None:
                    out[rid] = row
            else:
                missing.append(rid)
        for chunk in _chunks(missing, 500):
            marks = ",".join("?" * len(chunk))
            found = {
                rid: (static_factor(kind, status, importance, self.weights, judged), updated)
                for rid, kind, status, importance, updated, judged in self.db.execute(
                    "SELECT id, kind, status, importance, updated_epoch, judged FROM records "
                    f"WHERE deleted=0 AND id IN ({marks})",
                    chunk,
                )
            }
            for rid in chunk:
                row = found.get(rid)
                if len(self._rank_cache) < CACHE_LIMIT:
                    self._rank_cache[rid] = row
                if row is not None:
                    out[rid] = row
        return out

    def _row_multiplier(self, row: tuple[float, float], now_epoch: float) -> float:
        factor, updated = row
        return factor * freshness(updated, now_epoch, self.weights)

    def _browse(
        self, query: Query, ids: frozenset[str] | None, now_epoch: float
    ) -> list[tuple[float, str, float]]:
        """Rank by multipliers alone (no words given): the most relevant recent memories."""
        clauses = ["deleted=0"]
        params: list[Any] = []
        for column, values in (
            ("kind", query.kinds),
            ("status", query.statuses),
            ("scope", query.scopes),
            ("project", query.projects),
        ):
            if values:
                clauses.append(f"{column} IN ({','.join('?' * len(values))})")
                params.extend(sorted(values))
        if query.tags:
            clauses.append(
                f"id IN (SELECT id FROM tags WHERE tag IN ({','.join('?' * len(query.tags))}))"
            )
            params.extend(sorted(tag.lower() for tag in query.tags))
        rows = self.db.execute(
            "SELECT id, kind, status, importance, updated_epoch, judged FROM records "
            f"WHERE {' AND '.join(clauses)}",
            params,
        ).fetchall()
        return [
            (
                self._row_multiplier(
                    (static_factor(kind, status, importance, self.weights, judged), updated),
                    now_epoch,
                ),
                rid,
                0.0,
            )
            for rid, kind, status, importance, updated, judged in rows
            if ids is None or rid in ids
        ]


@dataclass(frozen=True)
class _Vectors:
    """The live records' embeddings: one row each, with codes of the filter columns."""

    ids: list[str]
    rows: dict[str, int]
    matrix: Any  # numpy float32 (len(ids), dim): one unit row per record
    head: Any  # numpy float32 (HEAD_DIMS, len(ids)): leading dimensions, re-normalised
    # Filter columns, made on first use: name -> (value -> code, int32 code per row).
    columns: dict[str, tuple[dict[str, int], Any]]


def _nearest(probe: Any, vectors: _Vectors, mask: Any, floor: float, pool: int) -> tuple[Any, Any]:
    """Return (rows, exact cosines) of up to ``pool`` vectors nearest ``probe``, over ``floor``.

    Candidates come from the cheap scan over the leading dimensions, with ``HEAD_MARGIN`` of
    slack (on the benchmark set no pair over the floor lost more than 0.07 there); ``mask``
    (booleans per row, or None) keeps only the rows the filters allow.
    """
    import numpy as np

    head = probe[:HEAD_DIMS]
    norm = float(np.linalg.norm(head))
    if norm == 0 or not vectors.ids:
        return np.array([], dtype=np.intp), np.array([], dtype=np.float32)
    rough = (head / norm) @ vectors.head
    if mask is not None:
        rough = np.where(mask, rough, -np.inf)
    rows = np.flatnonzero(rough >= floor - HEAD_MARGIN)
    if len(rows) > pool * HEAD_POOL:
        rows = rows[np.argpartition(-rough[rows], pool * HEAD_POOL - 1)[: pool * HEAD_POOL]]
    exact = vectors.matrix[rows] @ probe
    keep = exact >= floor
    rows, exact = rows[keep], exact[keep]
    if len(rows) > pool:
        best = np.argpartition(-exact, pool - 1)[:pool]
        rows, exact = rows[best], exact[best]
    return rows, exact


def _row(record: Mapping[str, Any], digest: str, line: bytes) -> tuple[Any, ...]:
    """Return the records-table row of a record whose canonical line is ``line``."""
    tomb = is_tombstone(record)
    importance = record.get("importance", 3)
    return (
        str(record["id"]),
        digest,
        str(record.get("kind", "")),
        str(record.get("status", "active")),
        str(record.get("scope", "project")),
        str(record.get("project", "")),
        record.get("topic_key") if isinstance(record.get("topic_key"), str) else None,
        None if tomb else dedupe_key(record),
        importance if isinstance(importance, int) else 3,
        str(record.get("created_at", "")),
        str(record.get("updated_at", "")),
        epoch(record.get("updated_at")),
        1 if tomb else 0,
        record.get("session_id") if isinstance(record.get("session_id"), str) else None,
        judgement_score(record.get("judgements")),
        line.decode("utf-8"),
    )


def _matched(record: Mapping[str, Any], tokens: Sequence[str]) -> list[str]:
    """Name the fields in which the query's words (or their stems) appear."""
    if not tokens:
        return []
    fields = {
        "title": str(record.get("title", "")).lower(),
        "tags": " ".join(record.get("tags", []) or []).lower(),
        "files": " ".join(record.get("files", []) or []).lower(),
        "content": str(record.get("content", "")).lower(),
    }
    stems = [token[: max(4, len(token) - 3)] if len(token) > 4 else token for token in tokens]
    return [name for name, text in fields.items() if any(stem in text for stem in stems)]


def _loads(text: str) -> Record:
    """Parse a stored record (canonical JSON written by engram itself)."""
    return dict(loads(text))


def _statements(script: str) -> list[str]:
    """Split a schema script into single statements (they hold no semicolons inside)."""
    return [part.strip() for part in script.split(";") if part.strip()]


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
