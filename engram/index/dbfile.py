"""Open one of the index's own SQLite files, and the small helpers every user of them shares.

``open_derived`` opens a database in WAL mode with a busy timeout and checks its schema version
in its ``meta`` table: a file with an unknown, old or broken schema is derived, so it is wiped
(with whatever the caller says depends on it) and created afresh, under the index lock. The
records DB (``records.py``) and the vectors DB (``vectors.py``) each open their own file this
way, on a connection of their own. This module knows no table but ``meta``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from engram.errors import IndexError_
from engram.fileio import ProcessLock


def _connect(path: Path, timeout: float) -> sqlite3.Connection:
    # One caller at a time, but not always the same thread (the MCP server runs a tool in a
    # worker thread when it may ask the client's model): the connection may move.
    return sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)


def _configure(conn: sqlite3.Connection, timeout: float) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")


def open_derived(
    path: Path,
    *,
    version: int,
    script: str,
    timeout: float,
    lock: ProcessLock,
    wipe: Callable[[], None],
) -> sqlite3.Connection:
    """Open ``path`` at schema ``version``; otherwise ``wipe()`` and create it from ``script``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = _connect(path, timeout)
    try:
        _configure(conn, timeout)
        row = None
        with contextlib.suppress(sqlite3.DatabaseError):
            row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row is not None and row[0] == str(version):
            return conn
        conn.close()
    except sqlite3.DatabaseError as exc:
        conn.close()
        if "malformed" not in str(exc) and "not a database" not in str(exc):
            raise IndexError_(f"cannot open {path}: {exc}") from exc
    # Unknown, old or broken schema: the file is derived, so start it afresh.
    with lock.hold():
        wipe()
        conn = _connect(path, timeout)
        _configure(conn, timeout)
        conn.executescript(script)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(version),))
    return conn


def compact(conn: sqlite3.Connection) -> bool:
    """Rewrite the database without its free pages and empty its WAL; False if a reader held it.

    A deleted or replaced row stays readable in a free page and in the write-ahead log until
    both are rewritten: what a repair removed (a secret) must not.
    """
    conn.execute("VACUUM")
    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return not busy


def remove_files(folder: Path, names: Sequence[str]) -> None:
    """Delete these files of ``folder`` (a database and its -wal and -shm files); keep going."""
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            (folder / name).unlink()


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the body in one write transaction (taken at once), rolled back if it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def statements(script: str) -> list[str]:
    """Split a schema script into single statements (they hold no semicolons inside)."""
    return [part.strip() for part in script.split(";") if part.strip()]


def chunks(items: Sequence[str], size: int = 500) -> Iterator[list[str]]:
    """Yield ``items`` in lists of at most ``size`` (SQLite caps the parameters of a query)."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def marks(count: int) -> str:
    """Return ``count`` comma-separated SQL parameter marks."""
    return ",".join("?" * count)
