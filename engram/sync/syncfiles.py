"""The files of ``engram sync`` under .engram/, read as untrusted: their names and ChunkError.

Chunks, the manifest and the sync state come from teammates and other tools (README: sync), so
every read of them goes through ``read_limited``: never through a symlink, only a regular file,
at most ``limit`` bytes; a chunk's gzip is inflated within a limit by ``inflate`` (the one
bounded gunzip, ``engram.fileio.gunzip``). A failure raises ``ChunkError`` naming the file.
Chunk ids are checked (``is_chunk_id``) before any path is built from them.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any, Final

from engram.errors import CorruptStore, InvalidInput
from engram.fileio import gunzip

MANIFEST: Final = "manifest.json"
CHUNKS: Final = "chunks"
SUFFIX: Final = ".jsonl.gz"
MAX_MANIFEST_BYTES: Final = 64 * 1024 * 1024
STATE: Final = "state"
SYNC_STATE: Final = "sync.json"
LOCK_TIMEOUT: Final = 60.0

# Hex only: engram ids are 32 hex, Go engram's are 8 hex, a full sha256 is 64.
_CHUNK_ID_RE: Final = re.compile(r"^[0-9a-f]{8,64}$")


class ChunkError(CorruptStore):
    """A chunk file, the manifest or the sync state is unreadable, hostile or inconsistent."""

    code = "corrupt_chunk"
    hint = (
        "nothing was changed; run `engram doctor` to list every problem (a chunk another "
        "clone wrote can be exported again by running `engram sync` there)"
    )


def is_chunk_id(value: Any) -> bool:
    """Tell whether a value is a safe chunk id (lowercase hex, 8 to 64 characters)."""
    return isinstance(value, str) and _CHUNK_ID_RE.match(value) is not None


def read_limited(path: Path, *, name: str, limit: int) -> bytes | None:
    """Read a regular file without following a symlink, refusing more than ``limit`` bytes.

    Returns None when the file does not exist.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if path.is_symlink():
            raise ChunkError(
                f"{name}: is a symbolic link; refused (it could point outside .engram/)",
                path=name,
            ) from exc
        raise ChunkError(f"{name}: cannot be read: {exc.strerror or exc}", path=name) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ChunkError(f"{name}: is not a regular file; refused", path=name)
        if info.st_size > limit:
            raise ChunkError(
                f"{name}: {info.st_size} bytes is over the limit of {limit} bytes; refused",
                path=name,
            )
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while we looked
        raise ChunkError(f"{name}: over the limit of {limit} bytes; refused", path=name)
    return data


def inflate(raw: bytes, *, name: str, limit: int) -> bytes:
    """Decompress a chunk file's gzip within ``limit`` bytes of output (gzip bombs), or raise."""
    try:
        return gunzip(raw, name=name, limit=limit)
    except InvalidInput as exc:
        raise ChunkError(exc.message, path=name) from exc
