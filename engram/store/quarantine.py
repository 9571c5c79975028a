"""``.engram/quarantine/``: where repairs put what they cannot read, in the committed store.

``engram doctor --fix`` never deletes a line of memories.jsonl or a chunk it cannot repair: it
moves it here. The folder is committed (it is not under ``index/`` or ``state/``), so what was
set aside stays in the team's store, shows up in ``git status`` and the pull request, and can
be repaired by hand and moved back. Nothing reads this folder: it is never imported, indexed or
synced as memories. Writes are atomic (``engram.store.atomic``), a redacted file replaced in
place too (``rewrite_kept``); this module decides nothing
about what is unreadable. The folder is committed, so lines are scrubbed of secrets before they
are written (their undecodable bytes kept as they were).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from engram.errors import UnsafePath
from engram.store.atomic import atomic_write, fsync_dir

QUARANTINE: Final = "quarantine"


def quarantine_dir(engram_dir: Path) -> Path:
    """Return the quarantine folder of a store (it may not exist yet)."""
    return engram_dir / QUARANTINE


def keep_lines(
    engram_dir: Path,
    lines: Sequence[bytes],
    *,
    stamp: str,
    scrub: Callable[[str], tuple[str, int]],
) -> Path:
    """Write raw lines, scrubbed, to ``quarantine/memories-<stamp>.jsonl`` (appended if it exists).

    ``scrub`` redacts text (the store's scrubber); bytes that are not UTF-8 pass through it as
    surrogate escapes and come out as the same bytes.
    """
    folder = quarantine_dir(engram_dir)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"memories-{stamp}.jsonl"
    before = target.read_bytes() if target.exists() else b""
    kept = [_scrubbed(line, scrub) for line in lines]
    body = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in kept)
    atomic_write(target, before + body)
    return target


def _scrubbed(line: bytes, scrub: Callable[[str], tuple[str, int]]) -> bytes:
    text = line.decode("utf-8", "surrogateescape")
    return scrub(text)[0].encode("utf-8", "surrogateescape")


def move_aside(engram_dir: Path, path: Path, *, folder: str) -> Path:
    """Move a file into ``quarantine/<folder>/`` under its name (numbered if the name is taken)."""
    target_dir = quarantine_dir(engram_dir) / folder
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / path.name
    number = 1
    while target.exists():
        number += 1
        target = target_dir / f"{path.name}.{number}"
    os.replace(path, target)
    fsync_dir(path.parent)
    fsync_dir(target_dir)
    return target


def rewrite_kept(engram_dir: Path, path: Path, data: bytes) -> None:
    """Replace a file kept in quarantine/ (redacted by a repair) atomically.

    Refuses a path outside the store's quarantine folder or reached through a symbolic link.
    """
    folder = quarantine_dir(engram_dir).resolve()
    if path.is_symlink() or not path.resolve().is_relative_to(folder):
        raise UnsafePath(
            f"{path}: not a file in {folder}; refused",
            hint="only files doctor set aside in .engram/quarantine/ are rewritten",
        )
    atomic_write(path, data)
