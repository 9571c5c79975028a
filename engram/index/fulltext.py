"""The full-text side of the index: the backend in use and the queue of ids it has not seen.

A write queues the ids it touched in the records DB's ``pending`` table, in the same
transaction as the rows (``Records.write_rows``), so ``remember`` costs about one write of the
file; the next keyword search calls ``flush``, which pushes every queued record to the backend
in one batch, under a lock of its own (never the index lock: a slow full-text commit must not
hold up writers). ``FullText`` also opens the backend (``factory.open_backend``) and recovers
from unreadable backend files: they are derived, so they are wiped and every live record is
queued again.

It reads rows through ``Records`` and never reads memories.jsonl; it ranks nothing.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from engram.errors import IndexError_
from engram.fileio import ProcessLock
from engram.index.backend import Doc, SearchIndex
from engram.index.dbfile import chunks, marks
from engram.index.factory import open_backend
from engram.index.records import Records, to_doc

FILES: Final = ("tantivy", "fts.db", "fts.db-wal", "fts.db-shm")


class FullText:
    """The full-text backend of one index, fed from the records DB's queue."""

    def __init__(
        self,
        folder: Path,
        records: Records,
        *,
        backend: str,
        field_weights: Mapping[str, float] | None,
        index_lock: ProcessLock,
        lock_timeout: float,
    ) -> None:
        self.folder = folder
        self.name = backend
        self.field_weights = field_weights
        self.records = records
        self._index_lock = index_lock
        self._lock = ProcessLock(
            folder / "fulltext.lock",
            timeout=lock_timeout,
            what=f"the full-text index in {folder}",
        )
        self._backend: SearchIndex | None = None
        # The file signature at which this process last found the queue empty.
        self._flushed_sig: str | None = None

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the cross-process lock for writes to the full-text backend."""
        return self._lock.hold()

    @property
    def backend(self) -> SearchIndex:
        """The backend, opened on first use (and recreated if its files are unreadable)."""
        if self._backend is None:
            # The records DB first: a new records schema wipes these files, so it must not
            # happen under an open backend.
            self.records.open()
            try:
                self._backend = open_backend(self.name, self.folder, self.field_weights)
            except IndexError_:
                # Unreadable full-text files: they are derived, so start them afresh and queue
                # every live record for the next flush.
                with self._index_lock.hold(), self.lock():
                    self.wipe()
                    self._backend = open_backend(self.name, self.folder, self.field_weights)
                    self.queue_all()
            if self._backend.count() == 0 and self.records.has_live():
                # The backend came up empty (new, or recreated after an incompatible change)
                # while the records say otherwise: re-queue everything.
                with self._index_lock.hold():
                    self.queue_all()
        return self._backend

    def queue_all(self) -> None:
        """Queue every live record."""
        with self.records.tx() as conn:
            conn.execute("INSERT OR REPLACE INTO pending SELECT id FROM records WHERE deleted=0")

    def restart(self) -> None:
        """Feed a backend the records have not fed yet: empty it, queue every live record."""
        with self.records.tx() as conn:
            conn.execute("DELETE FROM pending")
            conn.execute("INSERT INTO pending SELECT id FROM records WHERE deleted=0")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('backend', ?)", (self.name,))
        with self.lock():
            self.backend.clear()

    def pending(self) -> int:
        """Return how many ids wait for the next flush."""
        return int(self.records.db.execute("SELECT count(*) FROM pending").fetchone()[0])

    def forget(self) -> None:
        """Forget that the queue was found empty (the file changed)."""
        self._flushed_sig = None

    def flush(self, synced_sig: str | None) -> int:
        """Push queued changes to the backend; return how many were pushed.

        ``synced_sig`` is the file signature the records match in this process (None when not
        known). A queue entry is removed by rowid: an id queued again while this flush ran gets
        a new rowid and stays queued for the next flush.
        """
        if synced_sig is not None and self._flushed_sig == synced_sig:
            return 0  # nothing was queued since this process last emptied the queue
        db = self.records.db
        if db.execute("SELECT 1 FROM pending LIMIT 1").fetchone() is None:
            self._flushed_sig = synced_sig
            return 0
        with self.lock():
            queued = db.execute("SELECT rowid, id FROM pending").fetchall()
            if not queued:
                return 0
            ids = [str(rid) for _, rid in queued]
            live: list[Doc] = []
            gone: list[str] = []
            for chunk in chunks(ids):
                found = {
                    row[0]: row
                    for row in db.execute(
                        f"SELECT id, json, deleted FROM records WHERE id IN ({marks(len(chunk))})",
                        chunk,
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
            with self.records.tx() as conn:
                for chunk in chunks(rowids):
                    conn.execute(f"DELETE FROM pending WHERE rowid IN ({marks(len(chunk))})", chunk)
            return len(ids)

    def close(self) -> None:
        """Release the backend's files, connections and locks."""
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def wipe(self) -> None:
        """Close the backend and delete its files (they are derived)."""
        self.close()
        for name in FILES:
            target = self.folder / name
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    target.unlink()
