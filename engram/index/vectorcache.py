"""The saved matrix of the live embeddings under ``index/``: a base snapshot and a change log.

A new process memory-maps the vectors instead of reading every one out of SQLite. The cache
is a base, ``vectors-<base>.matrix.npy`` / ``.head.npy`` / ``.ids.json`` (the ids written last:
the others exist when it does) and, from ``ann.EXACT_BELOW`` rows on, ``.graph.usearch`` (the
nearest-neighbour graph of those rows, ``ann.py``), plus ``vectors-<base>.log``, to which every
change of the state is appended as one entry: the rows put, the ids dropped, and the key of the
state after it. So a write costs one small append, never a rewrite of the matrix or the graph;
the log is folded into a new base once it holds a quarter as many rows as the base
(``needs_compaction``). A graph too big to build while a search waits is built in the
background (``ann.Building``) and saved beside its base when it is done, if that base is still
there.

Keys name index states (``Vectors`` makes them from the records' file signature and the
vectors' generation). ``load(key)`` answers only when the base or one of its log entries ends
at exactly that key, so a cache from another state, an older format, another process's
interrupted write or a torn entry (each entry carries a hash of itself) is never served: the
caller builds the state from SQLite and ``save`` replaces every older file.

The files are derived and rebuilt at will, so nothing here is fsynced: a crash leaves an old
base, a shorter log or a torn tail, all found on read. An append happens only where the log is
exactly as this process last left it (``append`` checks its length), and callers append under
the index lock. This module knows no SQLite and no records.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from engram.fileio import temp_file
from engram.index import ann
from engram.index.matrix import VectorState

__all__ = ["PREFIX", "VectorCache"]

PREFIX: Final = "vectors-"
_MAGIC: Final = b"EVL1"
_FRAME: Final = struct.Struct("<4sII16s")  # magic, header bytes, payload bytes, blake2b-128
_COMPACT_MIN_ROWS: Final = 1024


@dataclass
class _Entry:
    key: str
    put: list[str]
    drop: list[str]
    payload: bytes
    end: int  # offset just past this entry in the log


@dataclass
class _Position:
    """Where this process left the log: its path, its length then, and the key it ends at."""

    log: Path
    offset: int
    key: str
    rows: int  # rows the log holds, for compaction


class VectorCache:
    """The saved matrix of one index folder (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._at: _Position | None = None

    def _paths(self, base: str) -> tuple[Path, Path, Path, Path]:
        stem = self.folder / f"{PREFIX}{base}"
        return (
            stem.with_name(stem.name + ".ids.json"),
            stem.with_name(stem.name + ".matrix.npy"),
            stem.with_name(stem.name + ".head.npy"),
            stem.with_name(stem.name + ".log"),
        )

    def graph_path(self, base: str) -> Path:
        """Return where the nearest-neighbour graph of the base ``base`` is saved."""
        return self.folder / f"{PREFIX}{base}.graph.usearch"

    def forget(self) -> None:
        """Stop appending: this process's state no longer follows the log."""
        self._at = None

    # -- reading -----------------------------------------------------------------------------

    def load(self, key: str, dim: int) -> VectorState | None:
        """Return the saved state at ``key`` (mapped, with its log applied), or None."""
        self._at = None
        for ids_path in sorted(self.folder.glob(f"{PREFIX}*.ids.json")):
            base = ids_path.name[len(PREFIX) : -len(".ids.json")]
            state = self._load_base(base, key, dim)
            if state is not None:
                return state
        return None

    def _load_base(self, base: str, key: str, dim: int) -> VectorState | None:
        import numpy as np

        ids_path, matrix_path, head_path, log = self._paths(base)
        try:
            data = log.read_bytes()
        except FileNotFoundError:
            data = b""  # a base saved by an older version has no log: it ends at its own key
        except OSError:
            return None
        entries = _entries(data, dim)
        if base == key:
            entries = []
        else:
            ends = [n for n, entry in enumerate(entries) if entry.key == key]
            if not ends:
                return None
            entries = entries[: ends[0] + 1]
        try:
            ids = [str(rid) for rid in json.loads(ids_path.read_text(encoding="utf-8"))]
            # Mapped, read-only, and seen as plain arrays: numpy's memmap class indexes
            # through Python (a recall slices and gathers rows several times).
            matrix = np.load(matrix_path, mmap_mode="r").view(np.ndarray)
            head = np.load(head_path, mmap_mode="r").view(np.ndarray)
        except (OSError, ValueError, TypeError):
            return None
        if (
            matrix.ndim != 2
            or head.ndim != 2
            or matrix.shape != (len(ids), dim)
            or head.shape[1] != len(ids)
            or len(set(ids)) != len(ids)
        ):
            return None
        state = VectorState(ids, matrix, head, self._graph(base, len(ids), dim))
        if state.graph is None:  # built from the base's rows (in the background if big)
            state.graph_for_search(functools.partial(self._graph_built, base))
        rows = 0
        for entry in entries:
            state.remove(entry.drop)
            vectors = np.frombuffer(entry.payload, dtype=np.float32).reshape(len(entry.put), dim)
            state.put([(rid, vectors[n], {}) for n, rid in enumerate(entry.put)])
            rows += len(entry.put) + len(entry.drop)
        # Appends go on only where this state ends the log (see ``append``).
        offset = entries[-1].end if entries else 0
        self._at = _Position(log, offset, key, rows)
        return state

    def _graph(self, base: str, rows: int, dim: int) -> ann.Graph | None:
        """Return the saved graph of a base of ``rows`` vectors, or None: under
        ``EXACT_BELOW`` rows there is none, and one that is missing or unreadable is said in
        the log and built again (``_load_base``)."""
        if rows < ann.EXACT_BELOW or not ann.available():
            return None
        path = self.graph_path(base)
        graph = ann.Graph.load(path, rows, dim)
        if graph is None and not path.exists():
            ann.log.warning("the nearest-neighbour graph %s is missing: rebuilding it", path)
        return graph

    # -- writing -----------------------------------------------------------------------------

    def save(self, key: str, state: VectorState) -> None:
        """Write ``state`` as the base at ``key`` with an empty log; remove every other file.

        Its nearest-neighbour graph is saved with it when the state has one; a state big
        enough to need one and without it has it built (``VectorState.graph_for_search``): a
        small graph first, a big one in the background, saved beside this base when it is done.
        """
        import numpy as np

        self._at = None
        ids_path, matrix_path, head_path, log = self._paths(key)
        graph = state.graph
        graph_path = self.graph_path(key)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            _replace(matrix_path, lambda out: np.save(out, state.matrix, allow_pickle=False))
            _replace(head_path, lambda out: np.save(out, state.head, allow_pickle=False))
            if graph is not None:
                _replace_by_name(graph_path, graph.save)
            _replace(log, lambda out: out.write(b""))
            _replace(ids_path, lambda out: out.write(json.dumps(state.ids).encode("utf-8")))
        except (OSError, RuntimeError):
            return  # a read-only index folder still works, only slower to start
        keep = {path.name for path in (ids_path, matrix_path, head_path, log, graph_path)}
        for old in self.folder.glob(f"{PREFIX}*"):
            if old.name not in keep and not old.name.startswith("."):
                with contextlib.suppress(OSError):
                    old.unlink()
        self._at = _Position(log, 0, key, 0)
        if graph is None:
            state.graph_for_search(functools.partial(self._graph_built, key))

    def _graph_built(self, base: str, graph: ann.Graph) -> None:
        """Save the graph just built of the rows of the base ``base``, beside it if it is still
        there (a later save may have replaced it; the file is derived, so a failure is
        only slower to start)."""
        if not self._paths(base)[0].exists():
            return
        with contextlib.suppress(OSError, RuntimeError):
            _replace_by_name(self.graph_path(base), graph.save)

    def append(
        self, before: str, after: str, put: Sequence[tuple[str, Any]], drop: Sequence[str]
    ) -> bool:
        """Log the change from the state at ``before`` to the one at ``after``; return whether
        it was logged (the log must be exactly where this process left it, at ``before``)."""
        import numpy as np

        at = self._at
        if at is None or at.key != before:
            self._at = None
            return False
        vectors = np.asarray([vector for _, vector in put], dtype=np.float32)
        header = json.dumps(
            {"key": after, "put": [rid for rid, _ in put], "drop": list(drop)}
        ).encode("utf-8")
        payload = vectors.tobytes() if put else b""
        digest = hashlib.blake2b(header + payload, digest_size=16).digest()
        entry = _FRAME.pack(_MAGIC, len(header), len(payload), digest) + header + payload
        try:
            fd = os.open(at.log, os.O_WRONLY | os.O_APPEND)  # never created here: base first
        except OSError:
            self._at = None
            return False
        try:
            if os.fstat(fd).st_size != at.offset:  # another process moved it: not ours now
                self._at = None
                return False
            os.write(fd, entry)
        except OSError:
            self._at = None
            return False
        finally:
            os.close(fd)
        self._at = _Position(at.log, at.offset + len(entry), after, at.rows + len(put) + len(drop))
        return True

    def needs_compaction(self, live: int) -> bool:
        """Tell whether the log holds enough rows to be folded into a new base."""
        at = self._at
        return at is not None and at.rows > max(_COMPACT_MIN_ROWS, live // 4)

    def wipe(self) -> None:
        """Delete every saved file."""
        self._at = None
        for old in self.folder.glob(f"{PREFIX}*"):
            with contextlib.suppress(OSError):
                old.unlink()


def _entries(data: bytes, dim: int) -> list[_Entry]:
    """Return the log's entries up to the first torn or unreadable one."""
    out: list[_Entry] = []
    offset = 0
    while offset + _FRAME.size <= len(data):
        entry = _entry_at(data, offset)
        if entry is None or len(entry.payload) != len(entry.put) * dim * 4:
            break
        out.append(entry)
        offset = entry.end
    return out


def _entry_at(data: bytes, offset: int) -> _Entry | None:
    magic, size, length, digest = _FRAME.unpack_from(data, offset)
    start = offset + _FRAME.size
    end = start + size + length
    if magic != _MAGIC or end > len(data):
        return None
    body = data[start:end]
    if hashlib.blake2b(body, digest_size=16).digest() != digest:
        return None
    try:
        header = json.loads(body[:size])
        key = str(header["key"])
        put = [str(rid) for rid in header["put"]]
        drop = [str(rid) for rid in header["drop"]]
    except (ValueError, KeyError, TypeError):
        return None
    return _Entry(key, put, drop, body[size:], end)


def _replace_by_name(path: Path, write: Callable[[Path], object]) -> None:
    """Replace ``path`` in one rename with what ``write`` writes to a file it is given by name."""
    fd, tmp = temp_file(path)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _replace(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Replace ``path`` in one rename, without an fsync (the cache is derived)."""
    fd, tmp = temp_file(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
