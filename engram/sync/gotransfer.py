"""Go engram's files into the project and personal stores, and the stores out in Go's shape.

``import_go_file`` is ``engram import`` for a Go engram export or sync chunk: it converts with
what both stores already hold (``GoKnown``: so a row lands on the memory it is, whatever its
sync_id became), sends ``scope: personal`` rows to the personal store (ENGRAM_HOME) and the rest
to the project's, merges each through ``engram.sync.transfer.merge_in`` (the one merge
function) and reports every row left out and every note of the conversion. A memory already in
one store stays in it. ``export_go`` is ``engram export --format go-engram``.

This module reads records and writes only through the workspaces; it imports no service or
adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from engram.errors import InvalidInput
from engram.model import Record, now
from engram.sync.goexport import GoExport, go_document
from engram.sync.goimport import GoKnown
from engram.sync.transfer import ImportResult, Progress, merge_in
from engram.workspace import Workspace

__all__ = ["GO_FORMATS", "GoImportResult", "export_go", "import_go_file", "known_of", "merge_go"]

GO_FORMATS: Final = ("go-engram-export", "go-engram-chunk")


@dataclass
class GoImportResult(ImportResult):
    """An import's counts, plus what the conversion noted and how many went to personal."""

    notes: list[str] = field(default_factory=list)
    personal: int = 0  # memories added or updated in the personal store

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        return {**super().to_dict(), "personal": self.personal, "notes": self.notes}


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
    personal: Callable[[], Workspace],
    records: Iterable[Record],
    *,
    where: dict[str, str],
    label: str,
    progress: Progress | None = None,
) -> GoImportResult:
    """Merge converted Go records: each into the store that holds it, else by its scope."""
    ours: list[Record] = []
    theirs: list[Record] = []
    for record in records:
        home = where.get(str(record.get("id"))) or str(record.get("scope") or "project")
        (theirs if home == "personal" else ours).append(record)
    result = GoImportResult()
    parts: list[ImportResult] = [merge_in(ws, ours, label=label, progress=progress)]
    if theirs:
        mine = merge_in(personal(), theirs, label=label)
        result.personal = mine.added + mine.updated
        parts.append(mine)
        result.notes.append(
            f"{len(theirs)} {'row' if len(theirs) == 1 else 'rows'} of scope personal went to "
            "the personal store (ENGRAM_HOME), not the project's"
        )
    for part in parts:
        result.added += part.added
        result.updated += part.updated
        result.unchanged += part.unchanged
        result.errors += part.errors
    return result


def import_go_file(
    ws: Workspace,
    personal: Callable[[], Workspace],
    path: Path,
    *,
    project: str,
    stores: Iterable[Workspace],
    progress: Progress | None = None,
) -> GoImportResult | None:
    """Import a Go engram export or chunk file; None when the file is something else.

    ``stores``: the workspaces that exist (project, personal), whose records rows may land on.
    """
    from engram.sync.imports import convert, detect

    if path.is_dir():
        return None
    try:
        data = path.read_bytes()
        fmt = detect(data, str(path))
    except (OSError, InvalidInput):
        return None  # the general import reports it
    if fmt not in GO_FORMATS:
        return None
    known, where = known_of(stores)
    max_bytes = int(ws.config.number("store.max_content_bytes"))
    converted = convert(
        data, name=str(path), project=project, max_content_bytes=max_bytes, known=known
    )
    result = merge_go(
        ws, personal, converted.records, where=where, label=str(path), progress=progress
    )
    result.errors = list(converted.skipped) + result.errors
    result.notes = list(converted.notes) + result.notes
    result.format = converted.format
    return result


def export_go(ws: Workspace) -> GoExport:
    """Return every memory of a store as the JSON file Go engram's ``engram import`` reads."""
    return go_document(ws.store.read_all(), exported_at=now())
