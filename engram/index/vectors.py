"""The index's embeddings: one vector per live record in ``index/vectors.db``, found by cosine.

Semantic recall (``search.mode`` hybrid or semantic, with the embedding model installed) reads
these. Each live record's embedding is stored keyed by a hash of the embedded text, so a record
whose title, tags and content did not change is never embedded again (a status change or a
rebuild reuses its vector). Vectors are written with the records (rebuild, refresh and this
process's own writes) and caught up by the first semantic search after writes made in keyword
mode or by a process without the model: a vector remembers the line hash of the record version
it was last checked against, and a search first embeds every live record whose hash differs.

``Vectors`` has a connection of its own to its own file (the records DB is ``records.py``) and
reads the records only through ``LiveRecords``. The live vectors are loaded as one matrix per
index state and also kept in ``index/`` as .npy files named by what they were built from, so a
new process memory-maps them instead of reading every vector out of SQLite. It never reads
memories.jsonl and ranks nothing: it finds candidates and their cosines (``ranking.fuse`` and
the multipliers are applied by the index).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from engram.errors import IndexError_
from engram.fileio import ProcessLock, atomic_write
from engram.index import semantic
from engram.index.dbfile import chunks, marks, open_derived, remove_files, transaction
from engram.index.query import Query
from engram.model import Record, is_tombstone

SCHEMA_VERSION: Final = 1
FILES: Final = ("vectors.db", "vectors.db-wal", "vectors.db-shm")
# Semantic candidates are found on the leading dimensions of the vectors (see ``nearest``).
HEAD_DIMS: Final = 128
HEAD_MARGIN: Final = 0.1
HEAD_POOL: Final = 8
CATCH_UP_BATCH: Final = 2000

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


@dataclass(frozen=True)
class VectorState:
    """The live records' embeddings: one row each, with codes of the filter columns."""

    ids: list[str]
    rows: dict[str, int]
    matrix: Any  # numpy float32 (len(ids), dim): one unit row per record
    head: Any  # numpy float32 (HEAD_DIMS, len(ids)): leading dimensions, re-normalised
    # Filter columns, made on first use: name -> (value -> code, int32 code per row).
    columns: dict[str, tuple[dict[str, int], Any]]


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
    ) -> None:
        self.folder = folder
        self.records = records
        self.configured_mode = mode
        self.lock_timeout = lock_timeout
        self._lock = lock
        self._conn: sqlite3.Connection | None = None
        self._state: VectorState | None = None  # dropped by any write
        self._embedder: semantic.Embedder | None = None
        self._semantic_off: str | None = None  # why semantic recall is unavailable, once known

    # -- the model ---------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        """Return the search mode in effect: the configured one, keyword without the model."""
        if self.configured_mode == "keyword" or self._semantic_off is not None:
            return "keyword"
        if not semantic.available():
            self._semantic_off = "the wordllama package (or its bundled weights) is not installed"
            return "keyword"
        return self.configured_mode

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

    def has_model(self) -> bool:
        """Tell whether this index has loaded the model already."""
        return self._embedder is not None

    # -- the database ------------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        """The connection to vectors.db (opened, and created if needed, on first use)."""
        if self._conn is None:
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
        """Skip fsync for the body, as the records DB does in a rebuild (both are derived)."""
        conn = self.db if self.embedder() is not None else self._stored()
        if conn is None:
            yield
            return
        conn.execute("PRAGMA synchronous=OFF")
        try:
            yield
        finally:
            conn.execute("PRAGMA synchronous=NORMAL")

    def close(self) -> None:
        """Release the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def forget(self) -> None:
        """Drop the loaded matrix (the records changed)."""
        self._state = None

    def wipe(self) -> None:
        """Delete vectors.db and the saved matrices (they are derived)."""
        self.close()
        self._remove_files()

    def _remove_files(self) -> None:
        self._state = None
        remove_files(self.folder, FILES)
        remove_files(self.folder, [path.name for path in self.folder.glob("vectors-*")])

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
        """Embed the live ones of (record, line hash) rows whose text changed; drop tombstones."""
        model = self.embedder()
        if model is None or not rows:
            return
        self._state = None
        live = [
            (str(record["id"]), semantic.record_text(record), digest)
            for record, digest in rows
            if not is_tombstone(record)
        ]
        conn = self.db
        stored: dict[str, tuple[str, str]] = {}
        for chunk in chunks([rid for rid, _, _ in live]):
            query = f"SELECT id, hash, line_hash FROM vectors WHERE id IN ({marks(len(chunk))})"
            stored.update((rid, (key, seen)) for rid, key, seen in conn.execute(query, chunk))
        keep: list[tuple[str, str]] = []  # same text: the vector stays, checked at this version
        todo: list[tuple[str, str, str, str]] = []
        for rid, text, digest in live:
            key = semantic.text_hash(text)
            known = stored.get(rid)
            if known is None or known[0] != key:
                todo.append((rid, key, digest, text))
            elif known[1] != digest:
                keep.append((digest, rid))
        # Embedded before the write transaction, which then only stores the results.
        matrix = model.embed([text for _, _, _, text in todo]) if todo else None
        with transaction(conn):
            conn.executemany(
                "DELETE FROM vectors WHERE id=?",
                [(str(record["id"]),) for record, _ in rows if is_tombstone(record)],
            )
            conn.executemany("UPDATE vectors SET line_hash=? WHERE id=?", keep)
            if matrix is not None:
                conn.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                    [
                        (rid, key, digest, matrix[n].tobytes())
                        for n, (rid, key, digest, _) in enumerate(todo)
                    ],
                )

    def drop(self, ids: Sequence[str]) -> None:
        """Delete the vectors of these ids (records gone or forgotten)."""
        self._state = None
        conn = self._stored()
        if conn is None or not ids:
            return
        with transaction(conn):
            for chunk in chunks(ids):
                conn.execute(f"DELETE FROM vectors WHERE id IN ({marks(len(chunk))})", chunk)

    def retain(self, live: Collection[str]) -> None:
        """Delete every vector whose id is not among the ``live`` ids."""
        conn = self._stored()
        if conn is None:
            return
        self.drop(
            [str(row[0]) for row in conn.execute("SELECT id FROM vectors") if row[0] not in live]
        )

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
        """Return the live vectors as one matrix (loaded once per index state), or None."""
        if self._state is not None:
            return self._state
        model = self.embedder()
        if model is None:
            return None
        import numpy as np

        live = self._catch_up()
        key = self._key(model.dim, len(live))
        cached = self._load_cache(key)
        if cached is not None:
            ids, matrix, head_t = cached
        else:
            rows = [
                (str(rid), vec)
                for rid, vec in self.db.execute("SELECT id, vec FROM vectors")
                if rid in live
            ]
            ids = [rid for rid, _ in rows]
            blob = b"".join(vec for _, vec in rows)
            matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), model.dim).copy()
            # The model is trained so that leading dimensions carry most of the meaning: a scan
            # over the first HEAD_DIMS (re-normalised, transposed for the fastest gemv) finds
            # the candidates, whose exact cosines are then computed on all dimensions.
            head = matrix[:, :HEAD_DIMS]
            norms = np.linalg.norm(head, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            head_t = np.ascontiguousarray((head / norms).T)
            self._save_cache(key, ids, matrix, head_t)
        self._state = VectorState(
            ids=ids,
            rows={rid: n for n, rid in enumerate(ids)},
            matrix=matrix,
            head=head_t,
            columns={},
        )
        return self._state

    # The saved matrices are named by what they were built from, so they never change once
    # written: a process that finds the file of the current state maps it.

    def _key(self, dim: int, live: int) -> str:
        count, top = self.db.execute("SELECT count(*), max(rowid) FROM vectors").fetchone()
        key = f"{SCHEMA_VERSION}:{dim}:{self.records.meta('file_sig')}:{count}:{top}:{live}"
        return hashlib.blake2b(key.encode("utf-8"), digest_size=10).hexdigest()

    def _cache_paths(self, key: str) -> tuple[Path, Path, Path]:
        return (
            self.folder / f"vectors-{key}.ids.json",
            self.folder / f"vectors-{key}.matrix.npy",
            self.folder / f"vectors-{key}.head.npy",
        )

    def _load_cache(self, key: str) -> tuple[list[str], Any, Any] | None:
        import numpy as np

        ids_path, matrix_path, head_path = self._cache_paths(key)
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

    def _save_cache(self, key: str, ids: list[str], matrix: Any, head: Any) -> None:
        import numpy as np

        ids_path, matrix_path, head_path = self._cache_paths(key)
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
            probe = semantic.embed_query(text)
        rows, cosines = nearest(probe, state, None, floor, limit + 1)
        found = sorted(
            ((state.ids[n], c) for n, c in zip(rows.tolist(), cosines.tolist(), strict=True)),
            key=lambda pair: (-pair[1], pair[0]),
        )
        return [(rid, round(c, 4)) for rid, c in found if rid != like and c >= floor][:limit]

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
        probe = semantic.embed_query(text)
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
        if name not in state.columns:
            import numpy as np

            values = self.records.column(name)
            codes: dict[str, int] = {}
            column = np.fromiter(
                (codes.setdefault(str(values.get(rid, "")), len(codes)) for rid in state.ids),
                dtype=np.int32,
                count=len(state.ids),
            )
            state.columns[name] = (codes, column)
        return state.columns[name]


def nearest(probe: Any, state: VectorState, mask: Any, floor: float, pool: int) -> tuple[Any, Any]:
    """Return (rows, exact cosines) of up to ``pool`` vectors nearest ``probe``, over ``floor``.

    Candidates come from the cheap scan over the leading dimensions, with ``HEAD_MARGIN`` of
    slack (on the benchmark set no pair over the floor lost more than 0.07 there); ``mask``
    (booleans per row, or None) keeps only the rows the filters allow.
    """
    import numpy as np

    head = probe[:HEAD_DIMS]
    norm = float(np.linalg.norm(head))
    if norm == 0 or not state.ids:
        return np.array([], dtype=np.intp), np.array([], dtype=np.float32)
    rough = (head / norm) @ state.head
    if mask is not None:
        rough = np.where(mask, rough, -np.inf)
    rows = np.flatnonzero(rough >= floor - HEAD_MARGIN)
    if len(rows) > pool * HEAD_POOL:
        rows = rows[np.argpartition(-rough[rows], pool * HEAD_POOL - 1)[: pool * HEAD_POOL]]
    exact = state.matrix[rows] @ probe
    keep = exact >= floor
    rows, exact = rows[keep], exact[keep]
    if len(rows) > pool:
        best = np.argpartition(-exact, pool - 1)[:pool]
        rows, exact = rows[best], exact[best]
    return rows, exact
