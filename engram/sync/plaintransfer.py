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
import re
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

__all__ = ["MAX_NOTE_BYTES", "import_plain", "import_platform", "is_notes_folder", "read_notes"]

MAX_NOTE_BYTES: Final = 16 * 1024 * 1024
MAX_NOTES: Final = 100_000
_FRONT_MATTER_RE: Final = re.compile(r"\A---\r?\n.*?\r?\n---\r?\n", re.DOTALL)


def _stamp(path: Path) -> str:
    return format_time(datetime.fromtimestamp(path.stat().st_mtime, UTC))


def is_notes_folder(path: Path) -> bool:
    """Tell whether a folder is one of notes, not a store (manifest.json, chunks/, .engram/)."""
    store = ("manifest.json", "chunks", config_mod.ENGRAM_DIR)
    return path.is_dir() and not any((path / name).exists() for name in store)


def _walk(root: Path, suffixes: tuple[str, ...]) -> Iterator[Path]:
    """Yield the notes below ``root`` in a stable order, hidden folders left out."""
    for folder, dirs, files in os.walk(root):  # symlinked folders are not followed
        dirs[:] = sorted(name for name in dirs if not name.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and name.lower().endswith(suffixes):
                yield Path(folder) / name


def read_notes(
    root: Path, *, skipped: list[str], suffixes: tuple[str, ...] = (".md",)
) -> list[Note]:
    """Read a folder's notes; each one that cannot be read is named in ``skipped``."""
    top = root.resolve()
    notes: list[Note] = []
    for path in _walk(root, suffixes):
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


def import_platform(
    ws: Workspace,
    personal: Callable[[], Workspace],
    name: str,
    *,
    root: Path,
    home: Path,
    folder: Path | None = None,
    project: str,
    progress: Progress | None = None,
) -> GoImportResult:
    """Import another agent's memory files (``engram.formats.platforms``) as proposed memories.

    ``folder`` overrides where they are. engram's own export block is cut out of each file
    first; a file that held only that block is left out.
    """
    from engram.formats.instructions import strip_block
    from engram.formats.plain import convert_markdown
    from engram.formats.platforms import PLATFORMS, folder_of

    if name not in PLATFORMS:
        raise InvalidInput(f"unknown platform {name!r}", hint="use one of: " + ", ".join(PLATFORMS))
    platform = PLATFORMS[name]
    where = folder if folder is not None else folder_of(name, root, home)
    if where is None or not where.is_dir():
        raise InvalidInput(
            f"{where or platform.about}: no {platform.about} here",
            hint="give the folder with --path" if folder is None else "",
        )
    skipped: list[str] = []
    notes: list[Note] = []
    own = 0
    for note in read_notes(where, skipped=skipped, suffixes=platform.suffixes):
        try:
            text = note.data.decode("utf-8-sig")
        except UnicodeDecodeError:
            notes.append(note)  # the converter names the byte
            continue
        kept = strip_block(text)
        if kept != text:
            if not _FRONT_MATTER_RE.sub("", kept).strip():
                own += 1
                continue
            note = Note(note.path, kept.encode("utf-8"), note.stamp)
        notes.append(note)
    max_bytes = int(ws.config.number("store.max_content_bytes"))
    converted = convert_markdown(
        notes,
        name=str(where),
        project=project,
        fmt=name,
        max_content_bytes=max_bytes,
        origin=platform.origin,
    )
    held = ws.index.get_many(sorted(str(record["id"]) for record in converted.records))
    result = merge_go(
        ws,
        personal,
        converted.records,
        where={rid: "project" for rid in held},
        label=str(where),
        progress=progress,
    )
    result.errors = skipped + list(converted.skipped) + result.errors
    result.notes = list(converted.notes) + result.notes
    if own:
        result.notes.append(
            f"{own} file(s) holding only engram's own export block left out: their memories "
            "are this store's"
        )
    result.format = name
    return result
