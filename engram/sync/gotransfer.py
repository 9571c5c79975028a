"""Go engram's files into the project and personal stores, and the stores out in Go's shape.

``import_go_file`` is ``engram import`` for a Go engram export or sync chunk, or a folder of
chunks (engram's, Go engram's or both): it converts with what both stores already hold
(``GoKnown``: so a row lands on the memory it is, whatever its sync_id became), sends
``scope: personal`` rows to the personal store (ENGRAM_HOME) and the rest to the project's,
merges each through ``engram.sync.transfer.merge_in`` (the one merge function) and reports every
row left out and every note of the conversion. A memory already in one store stays in it.
``merge_chunks`` does the same for the chunks an ``engram sync`` applies (``GoRoute``: one view
of the stores per sync). ``export_go`` is ``engram export --format go-engram``. ``import_path``
imports any other file or folder (an engram export, an MCP memory file, a store folder) into one
store.

This module reads records and writes only through the workspaces; it imports no service or
adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from engram import config as config_mod
from engram.errors import EngramError, InvalidInput
from engram.fileio import read_regular
from engram.formats.goexport import GoExport, GoName, go_document
from engram.formats.goknown import GoKnown
from engram.model import Record, format_time, now, scope_of
from engram.sync.transfer import ImportResult, Progress, merge_in
from engram.workspace import Workspace

__all__ = [
    "GO_FORMATS",
    "GoImportResult",
    "GoRoute",
    "export_go",
    "import_folder",
    "import_go_data",
    "import_go_file",
    "import_path",
    "known_of",
    "merge_chunks",
    "merge_go",
]

GO_FORMATS: Final = ("go-engram-export", "go-engram-chunk")


@dataclass
class GoImportResult(ImportResult):
    """An import's counts, plus what the conversion noted and how many went to personal."""

    notes: list[str] = field(default_factory=list)
    personal: int = 0  # memories added or updated in the personal store

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        return {**super().to_dict(), "personal": self.personal, "notes": self.notes}

    def add(self, part: ImportResult) -> None:
        """Count another merge's result in this one."""
        self.added += part.added
        self.updated += part.updated
        self.unchanged += part.unchanged
        self.errors += part.errors
        if isinstance(part, GoImportResult):
            self.personal += part.personal
            self.notes += part.notes


@dataclass
class GoRoute:
    """Where the Go rows of one import or sync land, and what the stores hold as Go rows see it.

    ``stores`` returns the workspaces that exist (project, personal); they are read once, when
    the first Go row is converted. ``personal`` opens the personal store for ``scope: personal``
    rows; None keeps every row in the store merged into (a sync of the personal store itself).
    """

    stores: Callable[[], Iterable[Workspace]]
    personal: Callable[[], Workspace] | None = None
    _known: tuple[GoKnown, dict[str, str]] | None = field(default=None, init=False, repr=False)

    def known(self) -> tuple[GoKnown, dict[str, str]]:
        """Return what the stores hold (read on the first call) and which store holds each id."""
        if self._known is None:
            self._known = known_of(self.stores())
        return self._known


def known_of(workspaces: Iterable[Workspace]) -> tuple[GoKnown, dict[str, str]]:
    """Return what the stores hold, as Go rows find it, and which store holds each id."""
    records: list[Record] = []
    where: dict[str, str] = {}
    for ws in workspaces:
        for record in ws.store.read_all():
            records.append(record)
            where.setdefault(str(record.get("id")), ws.scope)
    records.sort(key=lambda record: str(record.get("id")))
    return GoKnown(records), where


def merge_go(
    ws: Workspace,
    personal: Callable[[], Workspace] | None,
    records: Iterable[Record],
    *,
    where: dict[str, str],
    label: str,
    from_clone: bool = False,
    progress: Progress | None = None,
) -> GoImportResult:
    """Merge converted Go records: each into the store that holds it, else by its scope.

    ``personal`` None (or ``ws`` the personal store): every record goes into ``ws``.
    ``from_clone``: the records are another clone's changes (a sync chunk), not this clone's.
    """
    ours: list[Record] = []
    theirs: list[Record] = []
    for record in records:
        home = where.get(str(record.get("id"))) or scope_of(record)
        mine = personal is None or ws.scope == "personal" or home != "personal"
        (ours if mine else theirs).append(record)
    result = GoImportResult()
    result.add(merge_in(ws, ours, label=label, from_clone=from_clone, progress=progress))
    if theirs and personal is not None:
        moved = merge_in(personal(), theirs, label=label, from_clone=from_clone)
        result.add(moved)
        result.personal = moved.added + moved.updated
        result.notes.append(
            f"{len(theirs)} {'row' if len(theirs) == 1 else 'rows'} of scope personal went to "
            "the personal store (ENGRAM_HOME), not the project's"
        )
    return result


def merge_chunks(
    ws: Workspace,
    records: Sequence[Any],
    go_chunks: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    route: GoRoute,
    project: str,
    label: str,
    where: Sequence[tuple[str, int]] | None = None,
    from_clone: bool = False,
    progress: Progress | None = None,
    go_names: Sequence[str] = (),
) -> GoImportResult:
    """Merge the records of engram chunks, then convert and merge the Go chunks among them.

    ``go_chunks``: (file name, parsed object) of each Go engram chunk, in the manifest's order.
    engram's records go in first, so Go rows that are engram memories carried back find them;
    every Go chunk is converted against the same view of the stores (which learns each chunk's
    rows, so a later chunk's edit lands on an earlier chunk's row). Rows the conversion left
    out are counted as skipped, with their chunk and reason; its notes are kept. ``go_names``:
    Go's names for this project (``convert_go``).
    """
    from engram.formats.goimport import convert_go

    result = GoImportResult(format="chunks")
    if records:
        result.add(
            merge_in(
                ws, records, label=label, from_clone=from_clone, where=where, progress=progress
            )
        )
    if not go_chunks:
        return result
    known, homes = route.known()
    max_bytes = int(ws.config.number("store.max_content_bytes"))
    converted: list[Record] = []
    for name, chunk in go_chunks:
        found = convert_go(
            chunk,
            project=project,
            fmt="go-engram-chunk",
            max_content_bytes=max_bytes,
            known=known,
            go_names=go_names,
        )
        result.errors += [f"{name}: {why}" for why in found.skipped]
        result.notes += [f"{name}: {note}" for note in found.notes]
        converted += found.records
    result.add(
        merge_go(
            ws,
            route.personal,
            converted,
            where=homes,
            label=label,
            from_clone=from_clone,
            progress=progress,
        )
    )
    return result


def import_folder(
    ws: Workspace,
    path: Path,
    *,
    project: str,
    route: GoRoute,
    progress: Progress | None = None,
    go_names: Sequence[str] = (),
) -> GoImportResult:
    """Import every chunk of a store folder (engram's, Go engram's or both) in one merge."""
    from engram.sync import chunks as chunks_mod
    from engram.sync import syncfiles

    folder = path / config_mod.ENGRAM_DIR if (path / config_mod.ENGRAM_DIR).is_dir() else path
    entries, problems = chunks_mod.list_chunks(folder)
    if not entries and not problems:
        raise InvalidInput(
            f"{path}: no manifest.json or chunks/ to import",
            hint="give a file (an export) or a folder holding manifest.json and chunks/",
        )
    records: list[Any] = []
    go_chunks: list[tuple[str, Mapping[str, Any]]] = []
    skipped = list(problems)
    for entry in entries:
        try:
            found = chunks_mod.read_chunk(folder, entry.id, problems=skipped)
        except EngramError as exc:
            skipped.append(exc.message)
            continue
        if isinstance(found, list):
            records += found
        else:
            go_chunks.append((f"chunks/{entry.id}{syncfiles.SUFFIX}", found))
    result = merge_chunks(
        ws,
        records,
        go_chunks,
        route=route,
        project=project,
        label=str(path),
        progress=progress,
        go_names=go_names,
    )
    result.errors = skipped + result.errors
    result.format = "chunks"
    return result


def import_go_file(
    ws: Workspace,
    personal: Callable[[], Workspace],
    path: Path,
    *,
    project: str,
    stores: Iterable[Workspace],
    progress: Progress | None = None,
    go_names: Sequence[str] = (),
) -> GoImportResult | None:
    """Import a Go engram export or chunk file, or a store folder; None for any other file.

    ``stores``: the workspaces that exist (project, personal), whose records rows may land on.
    ``go_names``: Go's names for this project (the folder's base name).
    """
    if path.is_dir():
        route = GoRoute(lambda: stores, personal)
        return import_folder(
            ws, path, project=project, route=route, progress=progress, go_names=go_names
        )
    try:
        data = read_regular(path)
    except InvalidInput:
        return None  # the general import reports it
    return import_go_data(
        ws,
        personal,
        data,
        str(path),
        project=project,
        stores=stores,
        progress=progress,
        go_names=go_names,
    )


def import_go_data(
    ws: Workspace,
    personal: Callable[[], Workspace],
    data: bytes,
    name: str,
    *,
    project: str,
    stores: Iterable[Workspace],
    progress: Progress | None = None,
    go_names: Sequence[str] = (),
) -> GoImportResult | None:
    """Import the bytes of a Go engram export or chunk (``name`` in messages); None otherwise.

    What ``import_go_file`` does with a file's bytes: the HTTP route ``POST /import`` of
    ``engram serve --compat go-engram`` sends its request body here.
    """
    from engram.formats.convert import convert, detect

    try:
        fmt = detect(data, name)
    except InvalidInput:
        return None  # the general import reports it
    if fmt not in GO_FORMATS:
        return None
    known, where = known_of(stores)
    max_bytes = int(ws.config.number("store.max_content_bytes"))
    converted = convert(
        data,
        name=name,
        project=project,
        max_content_bytes=max_bytes,
        known=known,
        go_names=go_names,
    )
    result = merge_go(ws, personal, converted.records, where=where, label=name, progress=progress)
    result.errors = list(converted.skipped) + result.errors
    result.notes = list(converted.notes) + result.notes
    result.format = converted.format
    return result


def export_go(ws: Workspace, name: GoName | None = None) -> GoExport:
    """Return every memory of a store as the JSON file Go engram's ``engram import`` reads.

    ``name``: engram's own memories of this project go out under Go's name for it.
    """
    return go_document(ws.store.read_all(), exported_at=now(), name=name)


def import_path(
    ws: Workspace, path: Path, *, project: str, progress: Progress | None = None
) -> ImportResult:
    """Import a file or folder of another memory tool (format detected) or of engram.

    Files: an engram export, a Go engram export or chunk, an MCP memory server's JSONL.
    Folders: a store with ``manifest.json`` and ``chunks/`` (engram's or Go engram's; its
    ``.engram/`` inside is found too). Re-importing the same thing changes nothing. ``project``
    names the project converted records belong to.
    """
    from engram.formats.convert import convert

    if path.is_dir():
        route = GoRoute(lambda: [ws])  # no personal store given: every row stays in this one
        return import_folder(ws, path, project=project, route=route, progress=progress)
    max_bytes = int(ws.config.number("store.max_content_bytes"))
    data = read_regular(path)  # a named pipe or a device is refused, never waited on
    try:
        # Formats without times take the file's: importing it again gives the same records.
        stamp = format_time(datetime.fromtimestamp(path.stat().st_mtime, UTC))
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read: {exc.strerror or exc}") from exc
    converted = convert(
        data, name=str(path), project=project, stamp=stamp, max_content_bytes=max_bytes
    )
    # A JSON document has no line per item (it may be one line): name items by index.
    label = f"{path}: memories" if converted.format == "engram" else str(path)
    result = merge_in(ws, converted.records, label=label, progress=progress)
    result.errors = list(converted.skipped) + result.errors
    result.format = converted.format
    return result
