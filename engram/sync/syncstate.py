"""This clone's own sync state, ``.engram/state/sync.json``: its id, the chunks it applied.

Never committed; written atomically by the store under ``state/sync.lock``; a file that does
not parse is set aside and the state starts afresh (applying a chunk again changes nothing).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from engram.errors import InvalidInput
from engram.model import loads, new_id
from engram.store import files as store_files
from engram.store.lock import ProcessLock
from engram.sync.manifest import dumps_value
from engram.sync.syncfiles import (
    LOCK_TIMEOUT,
    MAX_MANIFEST_BYTES,
    STATE,
    SYNC_STATE,
    ChunkError,
    read_limited,
)


class SyncState:
    """Per-clone sync state in ``state/sync.json``: clone id, applied chunks, service values.

    The file is ``{"version": 1, "clone_id", "applied": [ids], "values": {key: value}}``,
    written atomically under ``state/sync.lock``. ``save`` re-reads the file first and merges:
    applied ids are a union (a chunk applied by another process stays applied) and values this
    instance set win. A file that does not parse or has the wrong shape is set aside as
    ``sync.json.corrupt`` (never deleted), the state starts afresh (a new clone id; applying a
    chunk again changes nothing) and ``problems`` says so.
    """

    def __init__(self, engram_dir: Path) -> None:
        self.path = engram_dir / STATE / SYNC_STATE
        self.problems: list[str] = []
        self._lock = ProcessLock(
            engram_dir / STATE / "sync.lock", timeout=LOCK_TIMEOUT, what=str(self.path)
        )
        self._clone_id = ""
        self._applied: set[str] = set()
        self._values: dict[str, Any] = {}
        self._dirty: set[str] = set()
        with self._lock.hold():
            self._load(self._read())

    def _read(self) -> dict[str, Any]:
        name = f"{STATE}/{SYNC_STATE}"
        try:
            data = read_limited(self.path, name=name, limit=MAX_MANIFEST_BYTES)
            if data is None:
                return {}
            value = loads(data, what=name)
            if not isinstance(value, dict):
                raise ValueError(f"expected a JSON object, got {type(value).__name__}")
            clone, applied, values = (
                value.get("clone_id"),
                value.get("applied"),
                value.get("values"),
            )
            if not isinstance(clone, str) or not clone:
                raise ValueError("no clone_id")
            if not isinstance(applied, list) or not all(isinstance(i, str) for i in applied):
                raise ValueError('"applied" is not a list of chunk ids')
            if not isinstance(values, dict):
                raise ValueError('"values" is not an object')
            return value
        except (ChunkError, ValueError) as exc:
            aside = SYNC_STATE + ".corrupt"
            store_files.set_aside_state(self.path.parent, SYNC_STATE, aside)
            reason = exc.message if isinstance(exc, ChunkError) else str(exc)
            self.problems.append(
                f"{name} was unreadable ({reason}); set aside as {aside} and started afresh"
            )
            return {}

    def _load(self, value: Mapping[str, Any]) -> None:
        self._clone_id = str(value.get("clone_id") or self._clone_id)
        self._applied |= set(value.get("applied") or ())
        ours = {key: self._values[key] for key in self._dirty}
        self._values = {**(value.get("values") or {}), **ours}

    def _write(self) -> None:
        body = {
            "version": 1,
            "clone_id": self._clone_id,
            "applied": sorted(self._applied),
            "values": self._values,
        }
        text = json.dumps(body, sort_keys=True, indent=1, ensure_ascii=False)
        store_files.write_state(self.path.parent, SYNC_STATE, (text + "\n").encode("utf-8"))

    @property
    def clone_id(self) -> str:
        """This clone's random id, made and saved on first use."""
        if not self._clone_id:
            with self._lock.hold():
                self._load(self._read())
                if not self._clone_id:
                    self._clone_id = new_id()
                    self._write()
        return self._clone_id

    @property
    def applied(self) -> frozenset[str]:
        """The ids of the chunks this clone has applied."""
        return frozenset(self._applied)

    def mark_applied(self, ids: Iterable[str]) -> None:
        """Record chunks as applied (kept in memory until ``save``)."""
        self._applied.update(str(i) for i in ids)

    def get(self, key: str) -> Any:
        """Return a value the service stored (None when unset)."""
        return self._values.get(key)

    def set(self, key: str, value: Any) -> None:
        """Store a small JSON value (kept in memory until ``save``)."""
        try:
            dumps_value(value)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"sync state value for {key!r} is not JSON: {exc}") from exc
        self._values[str(key)] = value
        self._dirty.add(str(key))

    def save(self) -> None:
        """Write the state atomically, merged with what other processes saved meanwhile."""
        with self._lock.hold():
            self._load(self._read())
            if not self._clone_id:
                self._clone_id = new_id()
            self._write()
            self._dirty.clear()
