"""The companions of memories.jsonl under .engram/: sync chunks, manifest.json, state/ files.

Only the store writes .engram/ (docs/architecture.md). What a chunk, the manifest or a state
file holds is decided elsewhere (``engram.sync.chunks`` renders and checks them, the indexer its
caches, doctor the repairs); this module puts the bytes in place:

- ``chunks/<name>``, ``manifest.json`` and ``state/<name>`` are replaced atomically
  (``engram.fileio.atomic_write``: a reader never sees a torn file, a crash leaves the old
  bytes or the new ones). Caches (``write_cache``) skip the fsync: a torn cache is found on
  read and rebuilt.
- Every path is built here from a plain file name (no folder part, no ``..``, not hidden), so a
  name from a teammate's manifest or chunk cannot reach outside its folder; ``chunks/`` and
  ``state/`` are refused when they are symbolic links.
- A file set aside (an unreadable state file) is renamed next to itself, never deleted.
- Temp files (``engram.fileio.TEMP_PATTERN``) that a killed write left in ``.engram/``,
  ``chunks/``, ``state/`` or ``index/`` are found (``leftover_temps``) and removed
  (``remove_leftover_temps``) only when their writer no longer runs or they are old, and
  ``.gitignore`` lists the pattern (``IGNORED``), so ``git add -A`` never takes one.

Callers hold the lock that the writers of a file share (the manifest lock of
``engram.sync.chunks``, the sync state's lock, the store lock); this module takes none, reads
nothing back and knows nothing of what the files mean.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

from engram.errors import UnsafePath
from engram.fileio import (
    TEMP_PATTERN,
    atomic_write,
    fsync_dir,
    is_temp,
    read_own,
    remove_stale_temps,
    stale_temps,
    temp_file,
)

__all__ = [
    "CHUNKS",
    "GITIGNORE",
    "GITIGNORE_FILE",
    "IGNORED",
    "MANIFEST",
    "STATE",
    "chunk_file",
    "ignore_temps",
    "is_leftover",
    "leftover_temps",
    "missing_ignores",
    "remove_chunk",
    "remove_leftover_temps",
    "remove_state",
    "set_aside_state",
    "write_cache",
    "write_chunk",
    "write_gitignore",
    "write_manifest",
    "write_state",
]

CHUNKS: Final = "chunks"
MANIFEST: Final = "manifest.json"
STATE: Final = "state"
GITIGNORE_FILE: Final = ".gitignore"
INDEX: Final = "index"
# What .engram/.gitignore must list: the derived index, per-clone state, and the temp files of
# writes cut short (the pattern has no slash, so it matches in every folder below .engram/).
IGNORED: Final = ("index/", "state/", TEMP_PATTERN)
_TEMPS_NOTE: Final = "# Temp files of writes cut short (engram removes them)."
GITIGNORE: Final = (
    "# Local, rebuildable or per-clone: never committed.\nindex/\nstate/\n"
    f"{_TEMPS_NOTE}\n{TEMP_PATTERN}\n"
)


def is_leftover(name: str) -> bool:
    """Tell whether a file name is the temp file of an atomic write (a killed one leaves it).

    Every atomic write names them ``.<target>.engram-<pid>-<random>.tmp`` next to their target
    (``engram.fileio.temp_file``); such a file is never part of the store (readers skip it, a
    sync never commits it).
    """
    return is_temp(name)


def _temp_folders(engram_dir: Path) -> list[Path]:
    return [engram_dir, engram_dir / CHUNKS, engram_dir / STATE, engram_dir / INDEX]


def leftover_temps(engram_dir: Path) -> list[Path]:
    """Return the temp files killed writes left in the store (never a running write's)."""
    return [path for folder in _temp_folders(engram_dir) for path in stale_temps(folder)]


def remove_leftover_temps(engram_dir: Path) -> list[Path]:
    """Delete the temp files killed writes left in the store; return those deleted."""
    return remove_stale_temps(_temp_folders(engram_dir))


def missing_ignores(text: str) -> list[str]:
    """Return the entries of ``IGNORED`` that the text of a .gitignore lacks."""
    lines = {line.strip() for line in text.splitlines()}
    return [entry for entry in IGNORED if entry not in lines]


def ignore_temps(engram_dir: Path) -> bool:
    """Add the temp-file pattern to an existing .gitignore that lacks it; return whether added.

    A store made before temp files were ignored gets the line on its next write. A missing
    .gitignore is left for ``engram doctor --fix`` (which writes the whole file) to report.
    """
    path = engram_dir / GITIGNORE_FILE
    try:
        text = read_own(path)[0].decode("utf-8")
    except (OSError, UnicodeDecodeError):  # NotAFile too: left for doctor to name
        return False
    if TEMP_PATTERN not in missing_ignores(text):
        return False
    body = text if not text or text.endswith("\n") else text + "\n"
    write_gitignore(engram_dir, f"{body}{_TEMPS_NOTE}\n{TEMP_PATTERN}\n")
    return True


def _plain(name: str, folder: Path) -> str:
    """Return ``name`` if it is one plain file name in ``folder``; raise UnsafePath if not."""
    if not name or name.startswith(".") or any(c in name for c in "/\\\0"):
        raise UnsafePath(
            f"{folder / name!s}: not a plain file name in {folder.name}/; refused",
            hint="a chunk or state file is named by its id alone",
        )
    return name


def _folder(path: Path) -> Path:
    """Create ``path`` as a folder (refusing a symbolic link in its place) and return it."""
    if path.is_symlink():
        raise UnsafePath(
            f"{path} is a symbolic link: engram will not write through a link",
            hint=f"remove the link (rm {path}) and run the command again",
        )
    path.mkdir(parents=True, exist_ok=True)
    return path


# -- chunks/ and manifest.json --------------------------------------------------------------


def chunk_file(engram_dir: Path, name: str) -> Path:
    """Return the path of the chunk file ``name`` (e.g. ``<id>.jsonl.gz``) in ``chunks/``."""
    folder = engram_dir / CHUNKS
    return folder / _plain(name, folder)


def write_chunk(engram_dir: Path, name: str, data: bytes) -> Path:
    """Write a chunk file atomically (creating ``chunks/``); return its path."""
    path = chunk_file(engram_dir, name)
    _folder(path.parent)
    atomic_write(path, data)
    return path


def remove_chunk(engram_dir: Path, name: str) -> bool:
    """Remove a chunk file; return whether there was one."""
    path = chunk_file(engram_dir, name)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True


def write_manifest(engram_dir: Path, data: bytes) -> Path:
    """Replace ``manifest.json`` atomically with rendered bytes; return its path."""
    path = engram_dir / MANIFEST
    engram_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
    return path


def write_gitignore(engram_dir: Path, text: str) -> Path:
    """Replace ``.gitignore`` of the store atomically; return its path."""
    path = engram_dir / GITIGNORE_FILE
    atomic_write(path, text.encode("utf-8"))
    return path


# -- state/ ---------------------------------------------------------------------------------


def _state_file(state_dir: Path, name: str) -> Path:
    return state_dir / _plain(name, state_dir)


def write_state(state_dir: Path, name: str, data: bytes) -> Path:
    """Write a per-clone state file atomically (creating ``state/``); return its path."""
    path = _state_file(state_dir, name)
    _folder(state_dir)
    atomic_write(path, data)
    return path


def write_cache(state_dir: Path, name: str, data: bytes) -> Path:
    """Replace a cache file in ``state/`` in one rename, without an fsync; return its path.

    For derived files that are cheap to lose: a crash may leave a torn cache (its reader finds
    it unreadable and computes again), never a half-written one under its name while running.
    Raises OSError when the folder is not writable (a cache's caller carries on without it).
    """
    path = _state_file(state_dir, name)
    _folder(state_dir)
    fd, tmp = temp_file(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def set_aside_state(state_dir: Path, name: str, aside: str) -> Path | None:
    """Rename the state file ``name`` to ``aside`` next to it (kept, not deleted).

    Returns the new path, or None when there was nothing to move or it could not be moved.
    """
    path, target = _state_file(state_dir, name), _state_file(state_dir, aside)
    try:
        os.replace(path, target)
    except OSError:
        return None
    fsync_dir(state_dir)
    return target


def remove_state(state_dir: Path, name: str) -> bool:
    """Remove a state file (a cache that must be rebuilt); return whether there was one."""
    try:
        _state_file(state_dir, name).unlink()
    except FileNotFoundError:
        return False
    return True
