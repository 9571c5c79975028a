"""The clone's change journal: ids of the memories this clone wrote, for `engram sync` to export.

README (sync) asks that an export carry "every change this clone made since its last export",
tracked by the clone's own cursor, never by comparing wall-clock times. Every write of the
service appends the ids it wrote to ``state/changes.log`` (one id per line, appended under the
store lock); an export reads the ids after its cursor (a byte offset kept in the sync state),
writes the memories' current versions into a chunk, and moves the cursor to the end. Changes
that arrived from elsewhere (a chunk import that changed nothing of ours, a ``git pull``) are
not journalled, so they are not exported again.

The journal is per-clone state (``state/`` is never committed). When every id in it has been
exported, the next export starts a fresh file (``compact``) so that it never grows without bound.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final

JOURNAL: Final = "changes.log"


class ChangeJournal:
    """Append-only ids of changed memories, read from a byte offset."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / JOURNAL

    def append(self, ids: Iterable[str]) -> None:
        """Record that these memories changed here (call under the store lock)."""
        data = "".join(f"{rid}\n" for rid in ids).encode("ascii", "replace")
        if not data:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def size(self) -> int:
        """Return the journal's length in bytes (the offset an export moves its cursor to)."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def since(self, offset: int) -> tuple[list[str], int]:
        """Return the distinct ids journalled after ``offset`` (in first-seen order), and the end.

        An offset past the end (the journal was compacted or removed) reads from the start.
        """
        try:
            with self.path.open("rb") as handle:
                handle.seek(0, os.SEEK_END)
                end = handle.tell()
                start = offset if 0 <= offset <= end else 0
                handle.seek(start)
                data = handle.read(end - start)
        except FileNotFoundError:
            return [], 0
        # A torn last line (a crash mid-append) is left for the next read.
        usable = data[: data.rfind(b"\n") + 1]
        ids = [line.decode("ascii", "replace").strip() for line in usable.splitlines()]
        return list(dict.fromkeys(rid for rid in ids if rid)), start + len(usable)

    def compact(self, offset: int) -> int:
        """Drop the ids before ``offset`` once exported; return the new offset of that point."""
        with contextlib.suppress(FileNotFoundError):
            if self.path.stat().st_size == offset:
                self.path.unlink()
                return 0
        return offset
