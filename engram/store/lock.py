"""ProcessLock: the cross-process file lock every writer of .engram/ holds.

A thin layer over filelock: created lazily (no file until first use), re-entrant within a
process, polling every 5 ms so that a waiting writer is not starved by a busy reader, and
raising LockTimeout with a message that names what could not be locked. It knows nothing of
what it protects.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from engram.errors import LockTimeout

POLL_SECONDS: Final = 0.005


class ProcessLock:
    """A re-entrant lock on ``path`` shared by every process that opens the same file."""

    def __init__(self, path: Path, *, timeout: float, what: str) -> None:
        self.path = path
        self.timeout = timeout
        self.what = what
        self.depth = 0
        self._lock: Any = None

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the lock for the body of a ``with`` block (nested holds are free)."""
        from filelock import FileLock, Timeout

        if self._lock is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = FileLock(str(self.path), timeout=self.timeout)
        try:
            self._lock.acquire(poll_interval=POLL_SECONDS)
        except Timeout as exc:
            raise LockTimeout(f"could not lock {self.what} within {self.timeout:g}s") from exc
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            self._lock.release()
