"""Plain rows and folders of Markdown notes into the project and personal stores.

``import_plain`` is ``engram import`` for the shapes ``engram.formats.plain`` converts: a file of
plain rows (JSON Lines, a JSON array, ``{"memories": [...]}``) or a folder of ``.md`` notes (a
basic-memory folder, an Obsidian vault) that is not a store folder (``manifest.json``,
``chunks/``, ``.engram/``: those go to the chunk import). It reads the files (hidden folders,
``.obsidian/`` and files other than ``.md`` left out; each note stamped with its modification
time, so importing the same folder again changes nothing), converts them and merges the records
through ``engram.sync.gotransfer.merge_go`` (the one merge function; ``scope: personal`` rows to
the personal store). It returns None for anything else, which the other imports read.

This module reads files and writes only through the workspaces; it imports no service or
adapter.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from engram import config as config_mod
from engram.errors import InputTooLarge, InvalidInput
from engram.fileio import read_regular
from engram.formats.common import Converted
from engram.formats.plain import Note
from engram.model import format_time
from engram.sync.gotransfer import GoImportResult, merge_go
from engram.sync.transfer import Progress
from engram.workspace import Workspace

__all__ = ["MAX_NOTE_BYTES", "import_plain", "is_notes_folder", "read_notes"]

MAX_NOTE_BYTES: Final = 16 * 1024 * 1024
MAX_NOTES: Final = 100_000


def _stamp(path: Path) -> str:
    return format_time(datetime.fromtimestamp(path.stat().st_mtime, UTC))


def is_notes_folder(path: Path) -> bool:
    """Tell whether a folder is one of notes, not a store (manifest.json, chunks/, .engram/)."""
    store = ("manifest.json", "chunks", config_mod.ENGRAM_DIR)
    return path.is_dir() and not any((path / name).exists() for name in store)


def _walk(root: Path) -> Iterator[Path]:
    """Yield the ``.md`` files below ``root`` in a stable order, hidden folders left out."""
    for folder, dirs, files in os.walk(root):  # symlinked folders are not followed
        dirs[:] = sorted(name for name in dirs if not name.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and name.lower().endswith(".md"):
                yield Path(folder) / name


def read_notes(root: Path, *, skipped: list[str]) -> list[Note]:
    """Read a folder's notes; each one that cannot be read is named in ``skipped``."""
    top = root.resolve()
    notes: list[Note] = []
    for path in _walk(root):
        rel = path.relative_to(root).as_posix()
        where = f"{root}/{rel}"
        try:
            if path.is_symlink() and not path.resolve().is_relative_to(top):
                skipped.append(f"{where}: a link to outside the folder; left out")
                continue
            data = read_regular(path, limit=MAX_NOTE_BYTES, what=where)
            notes.append(Note(rel, data, _stamp(path)))
        except InputTooLarge:
            skipped.append(f"{where}: over {MAX_NOTE_BYTES:,} bytes; such notes are left out")
        except InvalidInput as exc:  # a named pipe, a device, unreadable: named, never waited on
            skipped.append(exc.message)
        except OSError as exc:
            skipped.append(f"{where}: cannot read: {exc.strerror or exc}")
        if len(notes) > MAX_NOTES:
            raise InvalidInput(
                f"{root}: more than {MAX_NOTES} notes; refusing to import them at once",
                hint="import its folders one by one",
            )
    return notes


def _convert(path: Path, *, project: str, max_bytes: int) -> Converted | None:
    from engram.formats import plain
    from engram.formats.convert import convert, detect

    if path.is_dir():
        if not is_notes_folder(path):
            return None
        skipped: list[str] = []
        notes = read_notes(path, skipped=skipped)
        if not notes and not skipped:
            raise InvalidInput(
                f"{path}: no .md notes, manifest.json or chunks/ to import",
                hint="give a file (an export), a folder of Markdown notes, or a store folder",
            )
        fmt = "obsidian" if (path / ".obsidian").is_dir() else "markdown"
        converted = plain.convert_markdown(
            notes,
            name=str(path),
            project=project,
            fmt=fmt,
            max_content_bytes=max_bytes,
        )
        converted.skipped = skipped + converted.skipped
        return converted
    try:
        data = read_regular(path)
        if detect(data, str(path)) != plain.PLAIN_FORMAT:
            return None
        stamp = _stamp(path)  # rows without times take the file's: the same records again
    except (OSError, InvalidInput):
        return None  # the general import reports it
    return convert(data, name=str(path), project=project, stamp=stamp, max_content_bytes=max_bytes)


def import_plain(
    ws: Workspace,
    personal: Callable[[], Workspace],
    path: Path,
    *,
    project: str,
    progress: Progress | None = None,
) -> GoImportResult | None:
    """Import a file of plain rows or a folder of Markdown notes; None for anything else."""
    max_bytes = int(ws.config.number("store.max_content_bytes"))
    converted = _convert(path, project=project, max_bytes=max_bytes)
    if converted is None:
        return None
    # A memory already in the project store stays there; the rest goes where its scope says.
    held = ws.index.get_many(sorted(str(record["id"]) for record in converted.records))
    where = {rid: "project" for rid in held}
    result = merge_go(
        ws, personal, converted.records, where=where, label=str(path), progress=progress
    )
    result.errors = list(converted.skipped) + result.errors
    result.notes = list(converted.notes) + result.notes
    result.format = converted.format
    return result
