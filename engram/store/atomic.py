"""Atomic file writes, shared by every writer of files under .engram/.

A reader never sees a torn file: the bytes go to a unique temp file in the same folder, are
fsynced, and replace the target with ``os.replace``; the folder is fsynced after, so the rename
survives a crash. A failed write leaves the target as it was and removes its temp file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries to disk (where the platform allows; errors are ignored)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a folder; the rename itself has happened
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int | None = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically; ``mode`` None keeps the existing file's mode."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None:
            try:
                mode = path.stat().st_mode & 0o777
            except FileNotFoundError:
                mode = 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
