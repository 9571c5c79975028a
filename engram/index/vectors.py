"""The index's embeddings: one vector per live record in ``index/vectors.db``, found by cosine.

Semantic recall (``search.mode`` hybrid or semantic, with the embedding model installed) reads
these. Each live record's embedding is stored keyed by a hash of the embedded text, so a record
whose title, tags and content did not change is never embedded again (a status change or a
rebuild reuses its vector). Vectors are written with the records (rebuild, refresh and this
process's own writes) and caught up by the first semantic search after writes made in keyword
mode or by a process without the model: a vector remembers the line hash of the record version
it was last checked against, and a search first embeds every live record whose hash differs.

``Vectors`` has a connection of its own to its own file (the records DB is ``records.py``) and
reads the records only through ``LiveRecords``. The live vectors are held as one matrix
(``matrix.VectorState``), loaded once per process and then changed in place by this process's
writes; the index's state is named by a key (the records' file signature and a generation that
every write of vectors.db renews), and the matrix is also kept in ``index/`` as a base and a
change log (``vectorcache.py``), so a new process memory-maps it instead of reading every vector
out of SQLite, and a write appends one entry instead of saving the matrix again. It never reads
memories.jsonl and ranks nothing: it finds candidates and their cosines (``ranking.fuse`` and
the multipliers are applied by the index).
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import shutil
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from engram.errors import IndexError_
from engram.fileio import ProcessLock
from engram.index import semantic
from engram.index.dbfile import (
    chunks,
    compact,
    marks,
    open_derived,
    remove_files,
    transaction,
)
from engram.index.matrix import COLUMNS, VectorState, head_of, nearest, nearest_among
from engram.index.query import Query
from engram.index.vectorcache import VectorCache
from engram.model import Record, is_tombstone

SCHEMA_VERSION: Final = 1
FILES: Final = ("vectors.db", "vectors.db-wal", "vectors.db-shm")
CATCH_UP_BATCH: Final = 2000
WRITTEN_KEPT: Final = 8  # a write embedding at most this many texts keeps their vectors
# How the saved matrices are named (vectorcache.py): 2 added the change log and the generation.
CACHE_FORMAT: Final = 2

_TABLES: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vectors (
    id TEXT PRIMARY KEY,
    hash TEXT NOT NULL,  -- semantic.text_hash of the embedded text: equal hash, same vector
    line_hash TEXT NOT NULL,  -- the record version last checked against ``hash``
    vec BLOB NOT NULL  -- float32, L2-normalised
);
-- Covers the catch-up check (every id and line hash) without reading the vectors.
CREATE INDEX IF NOT EXISTS vectors_line ON vectors (id, line_hash);
"""


class LiveRecords(Protocol):
    """What the vectors read of the records (``records.Records`` has it)."""

    def live_hashes(self) -> dict[str, str]:
        """Return id -> line hash of every live record."""
        ...

    def get_many(self, ids: Iterable[str], *, cache: bool = True) -> dict[str, Record]:
        """Return the records with these ids."""
        ...

    def meta(self, key: str) -> str | None:
        """Return one value of the records' meta table (``file_sig`` names their state)."""
        ...

    def column(self, name: str) -> dict[str, str]:
        """Return id -> value of one filter column of the live records."""
        ...


class Vectors:
    """The embeddings of one index, in a database of their own."""

    def __init__(
        self,
        folder: Path,
        records: LiveRecords,
        *,
        mode: str,
        lock: ProcessLock,
        lock_timeout: float,
        model: str = semantic.DEFAULT_MODEL,
    ) -> None:
        self.index_folder = folder
        self.records = records
        self.configured_mode = mode
        self.configured_model = model
        # The model in effect: the configured one, or the zero-download default when that
        # cannot be had (``model_note`` says why). Each model's vectors live apart (the default
        # model's in the index folder, another's in ``vectors-<model>/``), keyed by text hash
        # and model, so switching models back and forth embeds nothing twice.
        self.model = model
        self.model_note: str | None = None
        if model != semantic.DEFAULT_MODEL and not semantic.available(model):
            self._fall_back(f"the {model} model is not installed")
        self.folder = self._folder_of(self.model)
        self.lock_timeout = lock_timeout
        self._lock = lock
        self._conn: sqlite3.Connection | None = None
        self._state: VectorState | None = None  # loaded once, then follows the writes
        self._state_key: str | None = None  # the index state it is, when known
        self._changes = _Changes()  # what it took since the last ``settle``
        self._cache = VectorCache(self.folder)
        self._embedder: semantic.AnyEmbedder | None = None
        self._semantic_off: str | None = None  # why semantic recall is unavailable, once known
        # Id -> (text hash, line hash) of every stored vector, within ``bulk``.
        self._known: dict[str, tuple[str, str]] | None = None
        # Text hash -> vector of a small write's embeddings: a save's near-duplicate check asks
        # ``similar`` for the text it just embedded (the same text, the same vector).
        self._written: dict[str, Any] = {}

    # -- the model ---------------------------------------------------------------------------

    def _folder_of(self, model: str) -> Path:
        if model == semantic.DEFAULT_MODEL:
            return self.index_folder
        return self.index_folder / f"vectors-{model}"

    def _fall_back(self, why: str) -> None:
        """Use the default model instead of the configured one (which cannot be had)."""
        default = semantic.DEFAULT_MODEL
        self.model_note = (
            f"{why}: semantic recall uses {default} (pip install"
            f" 'engram-git[{self.configured_model}]', or set search.model: {default})"
        )
        self.model = semantic.DEFAULT_MODEL

    @property
    def mode(self) -> str:
        """Return the search mode in effect: the configured one, keyword without the model."""
        if self.configured_mode == "keyword" or self._semantic_off is not None:
            return "keyword"
        if not semantic.available(self.model):
            self._semantic_off = "the wordllama package (or its bundled weights) is not installed"
            return "keyword"
        return self.configured_mode

    def embedder(self) -> semantic.AnyEmbedder | None:
        """Return the embedding model when the mode uses it (loaded once per process)."""
        if self.mode == "keyword":
            return None
        if self._embedder is None and self.model != semantic.DEFAULT_MODEL:
            try:
                self._embedder = semantic.get_embedder(self.model)
            except IndexError_ as exc:
                # The optional model cannot be had (offline, a failed download): the default.
                self.close()
                self.forget()
                self._fall_back(exc.message)
                self.folder = self._folder_of(self.model)
                self._cache = VectorCache(self.folder)
                if self.mode == "keyword":
                    return None
        if self._embedder is None:
            try:
                self._embedder = semantic.get_embedder(self.model)
            except IndexError_ as exc:
                # Fail closed: no model, no semantic recall; keyword search still answers.
                self._semantic_off = exc.message
                return None
        return self._embedder

    def has_model(self) -> bool:
        """Tell whether this index has loaded the model already."""
        return self._embedder is not None

    # -- the database ------------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        """The connection to vectors.db (opened, and created if needed, on first use)."""
        if self._conn is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._conn = open_derived(
                self.folder / FILES[0],
                version=SCHEMA_VERSION,
                script=_TABLES,
                timeout=self.lock_timeout,
                lock=self._lock,
                wipe=self._remove_files,
            )
        return self._conn

    def _stored(self) -> sqlite3.Connection | None:
        """Return the connection if the file exists: keyword mode never creates it."""
        if self._conn is None and not (self.folder / FILES[0]).exists():
            return None
        return self.db

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Skip fsync for the body, as the records DB does in a rebuild (both are derived).

        With the model, every stored vector's hashes are read once for the body, which writes
        every record (``write`` would look them up batch by batch).
        """
        conn = self.db if self.embedder() is not None else self._stored()
        if conn is None:
            yield
            return
        conn.execute("PRAGMA synchronous=OFF")
        if self.embedder() is not None:
            rows = conn.execute("SELECT id, hash, line_hash FROM vectors")
            self._known = {rid: (key, seen) for rid, key, seen in rows}
        try:
            yield
        finally:
            self._known = None
            conn.execute("PRAGMA synchronous=NORMAL")

    def close(self) -> None:
        """Release the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def compact(self) -> bool:
        """Vacuum vectors.db and truncate its WAL, if the file exists (``dbfile.compact``)."""
        conn = self._stored()
        return True if conn is None else compact(conn)

    def forget(self) -> None:
        """Drop the loaded matrix (the records changed in ways this process did not follow)."""
        self._state = None
        self._state_key = None
        self._changes = _Changes()
        self._cache.forget()

    def wipe(self) -> None:
        """Delete vectors.db and the saved matrices of every model (they are derived)."""
        self.close()
        self._remove_files()
        for other in self.index_folder.glob("vectors-*"):
            if other.is_dir() and other != self.folder:
                shutil.rmtree(other, ignore_errors=True)

    def _remove_files(self) -> None:
        self.forget()
        remove_files(self.folder, FILES)
        self._cache.wipe()

    def ids(self) -> set[str]:
        """Return the ids that have a stored vector."""
        conn = self._stored()
        return (
            set()
            if conn is None
            else {str(row[0]) for row in conn.execute("SELECT id FROM vectors")}
        )

    # -- writing -----------------------------------------------------------------------------

    def write(self, rows: Sequence[tuple[Record, str]]) -> None:
        """Embed the live ones of (record, line hash) rows whose text changed; drop tombstones.

        A loaded matrix follows (call ``settle`` once the records are written too).
        """
        model = self.embedder()
        if model is None or not rows:
            return
        live = [(record, digest) for record, digest in rows if not is_tombstone(record)]
        conn = self.db
        stored = self._known  # a bulk write's, read once (``bulk``)
        if stored is None:
            stored = {}
            for chunk in chunks([str(record["id"]) for record, _ in live]):
                query = f"SELECT id, hash, line_hash FROM vectors WHERE id IN ({marks(len(chunk))})"
                stored.update((rid, (key, seen)) for rid, key, seen in conn.execute(query, chunk))
        # A vector checked against this very version of its record, under this model's id,
        # holds this text's hash: nothing to hash again (a rebuild's every unchanged record).
        trusted = self._checked_model(conn) == semantic.model_id(self.model)
        keep: list[tuple[str, str]] = []  # same text: the vector stays, checked at this version
        todo: list[tuple[Record, str, str, str]] = []
        for record, digest in live:
            rid = str(record["id"])
            known = stored.get(rid)
            if trusted and known is not None and known[1] == digest:
                continue
            text = semantic.record_text(record)
            key = semantic.text_hash(text, self.model)
            if known is None or known[0] != key:
                todo.append((record, key, digest, text))
            elif known[1] != digest:
                keep.append((digest, rid))
        gone = [str(record["id"]) for record, _ in rows if is_tombstone(record)]
        # Embedded before the write transaction, which then only stores the results.
        matrix = model.embed([text for _, _, _, text in todo]) if todo else None
        self._written = {}
        if matrix is not None and len(todo) <= WRITTEN_KEPT:
            matrix.setflags(write=False)
            self._written = {key: matrix[n] for n, (_, key, _, _) in enumerate(todo)}
        if not (gone or keep or todo):
            return
        with transaction(conn):
            conn.executemany("DELETE FROM vectors WHERE id=?", [(rid,) for rid in gone])
            conn.executemany("UPDATE vectors SET line_hash=? WHERE id=?", keep)
            if matrix is not None:
                conn.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                    [
                        (str(record["id"]), key, digest, matrix[n].tobytes())
                        for n, (record, key, digest, _) in enumerate(todo)
                    ],
                )
            _renew_generation(conn)
        if self._known is not None:  # what the stored hashes are now
            for rid in gone:
                self._known.pop(rid, None)
            for digest, rid in keep:
                self._known[rid] = (self._known[rid][0], digest)
            for record, key, digest, _ in todo:
                self._known[str(record["id"])] = (key, digest)
        embedded = [] if matrix is None else [(t[0], matrix[n]) for n, t in enumerate(todo)]
        self._follow(live, gone, embedded)

    def _follow(
        self,
        live: Sequence[tuple[Record, str]],
        gone: Sequence[str],
        embedded: Sequence[tuple[Record, Any]],
    ) -> None:
        """Change the loaded matrix as ``write`` changed vectors.db (or drop it if it cannot)."""
        state = self._state
        if state is None:
            return
        new = {str(record["id"]) for record, _ in embedded}
        others = [record for record, _ in live if str(record["id"]) not in new]
        if any(str(record["id"]) not in state.rows for record in others):
            self.forget()  # a live record this matrix lacks: load it afresh when next needed
            return
        state.remove(gone)
        state.relabel([(str(record["id"]), _labels(record)) for record in others])
        state.put([(str(record["id"]), vector, _labels(record)) for record, vector in embedded])
        self._changes.drop.update(gone)
        for record, vector in embedded:
            self._changes.drop.discard(str(record["id"]))
            self._changes.put[str(record["id"])] = vector
        for rid in gone:
            self._changes.put.pop(rid, None)

    def drop(self, ids: Sequence[str]) -> None:
        """Delete the vectors of these ids (records gone or forgotten)."""
        conn = self._stored()
        if conn is None or not ids:
            return
        with transaction(conn):
            for chunk in chunks(ids):
                conn.execute(f"DELETE FROM vectors WHERE id IN ({marks(len(chunk))})", chunk)
            _renew_generation(conn)
        self._follow([], list(ids), [])

    def _checked_model(self, conn: sqlite3.Connection) -> str | None:
        """Return the model id every stored vector's text hash was last checked under."""
        row = conn.execute("SELECT value FROM meta WHERE key='checked_model'").fetchone()
        return None if row is None else str(row[0])

    def checked_all(self) -> None:
        """Note that every live record's vector was just checked against its text's hash
        under this model's id (a rebuild's ``write`` of every record, then ``retain``).

        Until the model's id changes (an engram that embeds differently), a later ``write``
        trusts a vector checked against the same version of its record.
        """
        if self.embedder() is None:
            return
        conn = self.db
        if self._checked_model(conn) != semantic.model_id(self.model):
            with transaction(conn):
                conn.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('checked_model', ?)",
                    (semantic.model_id(self.model),),
                )

    def retain(self, live: Collection[str]) -> None:
        """Delete every vector whose id is not among the ``live`` ids."""
        conn = self._stored()
        if conn is None:
            return
        self.drop(
            [str(row[0]) for row in conn.execute("SELECT id FROM vectors") if row[0] not in live]
        )

    def settle(self) -> None:
        """Note that the records and vectors written since the last call are all written: the
        loaded matrix is now the index's state, and the saved cache's log learns the change.

        Call under the index lock, after ``write`` or ``drop`` and the records' own write.
        """
        state, before, changes = self._state, self._state_key, self._changes
        self._changes = _Changes()
        if state is None or before is None:
            return
        after = self._key(state.dim)
        self._state_key = after
        if after is None:
            self._cache.forget()
            return
        if after == before and not (changes.put or changes.drop):
            return
        self._cache.append(before, after, list(changes.put.items()), sorted(changes.drop))
        if self._cache.needs_compaction(len(state.ids)):
            self._cache.save(after, state)

    def _stale(self, live: dict[str, str]) -> list[str]:
        known = dict(self.db.execute("SELECT id, line_hash FROM vectors"))
        return [rid for rid, digest in live.items() if known.get(rid) != digest]

    def _catch_up(self) -> dict[str, str]:
        """Embed live records whose vector is missing or was checked against another version.

        Returns id -> line hash of the live records the vectors now match.
        """
        live = self.records.live_hashes()
        if not self._stale(live):
            return live
        with self._lock.hold():
            live = self.records.live_hashes()
            stale = self._stale(live)
            found = self.records.get_many(stale, cache=False)
            rows = [(found[rid], live[rid]) for rid in stale if rid in found]
            for start in range(0, len(rows), CATCH_UP_BATCH):
                self.write(rows[start : start + CATCH_UP_BATCH])
            self.retain(live)
        return live

    # -- the matrix --------------------------------------------------------------------------

    def state(self) -> VectorState | None:
        """Return the live vectors as one matrix (loaded once per process), or None.

        The saved cache at the index's key is mapped when there is one: it was complete when
        saved, so the catch-up check (which reads every id) is skipped. Otherwise the vectors
        are caught up, read from SQLite and saved.
        """
        if self._state is not None:
            return self._state
        model = self.embedder()
        if model is None:
            return None
        key = self._key(model.dim)
        state = None if key is None else self._cache.load(key, model.dim)
        if state is None:
            live = self._catch_up()
            key = self._key(model.dim)
            state = None if key is None else self._cache.load(key, model.dim)
            if state is None:
                state = self._read(live, model.dim)
                if key is not None and self._key(model.dim) == key:
                    self._cache.save(key, state)
                else:
                    key = None  # changed while it was read: neither saved nor logged
        self._state, self._state_key, self._changes = state, key, _Changes()
        return state

    def _read(self, live: Collection[str], dim: int) -> VectorState:
        """Return the live vectors read out of vectors.db."""
        import numpy as np

        rows = [
            (str(rid), vec)
            for rid, vec in self.db.execute("SELECT id, vec FROM vectors")
            if rid in live
        ]
        ids = [rid for rid, _ in rows]
        blob = b"".join(vec for _, vec in rows)
        matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), dim).copy()
        return VectorState(ids, matrix, head_of(matrix))

    def _key(self, dim: int) -> str | None:
        """Return the name of the index's current state, or None when it has none (the file
        the records match is not known)."""
        file_sig = self.records.meta("file_sig")
        if not file_sig:
            return None
        row = self.db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
        generation = "" if row is None else str(row[0])
        key = f"{CACHE_FORMAT}:{SCHEMA_VERSION}:{dim}:{file_sig}:{generation}"
        return hashlib.blake2b(key.encode("utf-8"), digest_size=10).hexdigest()

    # -- finding -----------------------------------------------------------------------------

    def similar(
        self, text: str, like: str | None, limit: int, floor: float
    ) -> list[tuple[str, float]]:
        """Return (id, cosine >= floor) nearest ``text`` or the memory ``like``, best first."""
        state = self.state()
        if state is None or limit <= 0 or not state.ids:
            return []
        if like is not None:
            at = state.rows.get(like)
            if at is None:
                return []
            probe = state.matrix[at]
        else:
            probe = (
                self._written.get(semantic.text_hash(text, self.model)) if self._written else None
            )
            if probe is None:
                probe = semantic.embed_query(text, self.model)
        rows, cosines = nearest(probe, state, None, floor, limit + 1)
        found = sorted(
            ((state.ids[n], c) for n, c in zip(rows.tolist(), cosines.tolist(), strict=True)),
            key=lambda pair: (-pair[1], pair[0]),
        )
        return [(rid, round(c, 4)) for rid, c in found if rid != like and c >= floor][:limit]

    def similar_among(
        self, ids: Sequence[str], limit: int, floor: float
    ) -> dict[str, list[tuple[str, float]]]:
        """Return, by id of ``ids`` with a vector, up to ``limit`` (id, cosine >= floor) of the
        others among ``ids`` nearest it, best first; {} without vectors."""
        state = self.state()
        if state is None:
            return {}
        rows = state.rows
        known = [rid for rid in dict.fromkeys(ids) if rid in rows]
        found = nearest_among(state, [rows[rid] for rid in known], limit, floor)
        names = state.ids
        return {
            rid: [(names[at], round(c, 4)) for at, c in near]
            for rid, near in zip(known, found, strict=True)
        }

    def vectors_for(self, ids: Iterable[str]) -> dict[str, Any]:
        """Return the stored embeddings (numpy float32, unit length) of these live memories."""
        state = self.state()
        if state is None:
            return {}
        matrix, rows = state.matrix, state.rows
        return {rid: matrix[rows[rid]].copy() for rid in ids if rid in rows}

    def candidates(
        self,
        state: VectorState,
        text: str,
        mask: Any,
        floor: float,
        pool: int,
        found: Sequence[tuple[str, float]],
    ) -> dict[str, tuple[float, float]]:
        """Return id -> (bm25, cosine): the ``pool`` nearest ``text`` over ``floor`` in ``mask``,
        plus the keyword backend's ``found`` (id, bm25) pairs with their exact cosines."""
        probe = semantic.embed_query(text, self.model)
        rows, cosines = nearest(probe, state, mask, floor, pool)
        out: dict[str, tuple[float, float]] = {
            state.ids[n]: (0.0, c) for n, c in zip(rows.tolist(), cosines.tolist(), strict=True)
        }
        placed = [(rid, bm25, state.rows.get(rid)) for rid, bm25 in found]
        known = [at for _, _, at in placed if at is not None]
        exact = iter((state.matrix[known] @ probe).tolist() if known else [])
        for rid, bm25, at in placed:
            out[rid] = (bm25, next(exact) if at is not None else 0.0)
        return out

    def mask(self, state: VectorState, query: Query, allowed: Sequence[frozenset[str]]) -> Any:
        """Return a boolean row mask for the query's column filters and the ``allowed`` id sets,
        or None when nothing is filtered."""
        import numpy as np

        mask = None
        for name, values in (
            ("kind", query.kinds),
            ("status", query.statuses),
            ("scope", query.scopes),
            ("project", query.projects),
        ):
            if values:
                codes, column = self._column(state, name)
                wanted = [codes[value] for value in values if value in codes]
                part = np.isin(column, np.array(wanted, dtype=np.int32))
                mask = part if mask is None else mask & part
        for ids in allowed:
            part = np.zeros(len(state.ids), dtype=bool)
            rows = [state.rows[rid] for rid in ids if rid in state.rows]
            part[np.array(rows, dtype=np.intp)] = True
            mask = part if mask is None else mask & part
        return mask

    def _column(self, state: VectorState, name: str) -> tuple[dict[str, int], Any]:
        """Return (value -> code, int32 code per vector row) of a filter column, made once."""
        if name in state.columns:
            return state.columns[name]
        return state.column(name, self.records.column(name))


@dataclass
class _Changes:
    """Rows put into and ids dropped from the loaded matrix since the last ``settle``."""

    put: dict[str, Any] = field(default_factory=dict)
    drop: set[str] = field(default_factory=set)


def _labels(record: Record) -> dict[str, str]:
    """Return a record's filter column values as the records DB stores them."""
    defaults = {"kind": "", "status": "active", "scope": "project", "project": ""}
    return {name: str(record.get(name, defaults[name])) for name in COLUMNS}


def _renew_generation(conn: sqlite3.Connection) -> None:
    """Give vectors.db a new generation (in the write's transaction): its state has a new name."""
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (secrets.token_hex(8),))
