"""Records from elsewhere into a workspace, and its records out: ``engram import`` and ``export``.

``merge_in`` is the one way records made elsewhere enter a store: an ``engram import`` (an
export document, another tool's file or store folder) and the sync chunks of other clones
(``engram.sync.exchange``) all go through it, record by record through the one merge function
(``engram.sync.merge``). ``merge3_in`` does the same three-way, against a common base, for a
branch fetched from a git remote. Both write through ``Workspace.write``, so the index takes
what the store wrote, and journal as this clone's change only what the merge made beyond the
incoming version.

Everything merged in is untrusted (README): each item is checked like a line of
memories.jsonl (an item that fails is skipped, with its reason, naming file and line) and
redacted before it is compared or stored. This module must not import the service or an
adapter, and writes nothing but through the workspace.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from engram.errors import EngramError, InvalidInput
from engram.model import (
    Record,
    format_time,
    is_tombstone,
    normalize_fields,
    now,
    parse_time,
)
from engram.workspace import Workspace

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ExportDocument",
    "ImportResult",
    "Progress",
    "export",
    "import_document",
    "merge3_in",
    "merge_in",
]

EXPORT_FORMAT: Final = "engram"
EXPORT_VERSION: Final = 1
Progress = Callable[[int, int], None]


@dataclass
class ImportResult:
    """Counts of an import: added, updated, unchanged, and per-item errors."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    errors: list[str] = field(default_factory=list)  # items skipped, each with its reason
    format: str = "engram"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        return {
            "format": self.format,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "skipped": len(self.errors),
            "errors": self.errors,
        }


@dataclass
class ExportDocument:
    """Every memory and tombstone of a store, as ``import`` reads them back."""

    exported_at: str
    project: str
    memories: list[Record]
    format: str = EXPORT_FORMAT
    version: int = EXPORT_VERSION

    @property
    def count(self) -> int:
        """How many records the document holds."""
        return len(self.memories)

    def to_dict(self) -> dict[str, Any]:
        """Return engram's export document as JSON-ready data."""
        return {
            "format": self.format,
            "version": self.version,
            "exported_at": self.exported_at,
            "project": self.project,
            "count": self.count,
            "memories": self.memories,
        }


# -- export / import ------------------------------------------------------------------------


def export(ws: Workspace) -> ExportDocument:
    """Return every memory and tombstone of a store as engram's export document."""
    records = ws.store.read_all()
    return ExportDocument(exported_at=now(), project=ws.config.project, memories=records)


def import_document(
    ws: Workspace, document: Any, *, progress: Progress | None = None
) -> ImportResult:
    """Merge an export document into the store through the one merge function."""
    if not isinstance(document, Mapping):
        raise InvalidInput("import expects a JSON object with a 'memories' list")
    if document.get("format", EXPORT_FORMAT) != EXPORT_FORMAT:
        raise InvalidInput(f"unknown import format {document.get('format')!r}")
    version = document.get("version", EXPORT_VERSION)
    if version != EXPORT_VERSION:
        raise InvalidInput(f"import version {version!r} is not supported (expected 1)")
    items = document.get("memories")
    if not isinstance(items, list):
        raise InvalidInput("import document has no 'memories' list")
    return merge_in(ws, items, progress=progress)


def _same_but_times(current: Record, incoming: Record) -> bool:
    """Say whether two versions of a memory differ in their created and updated times only."""
    times = ("created_at", "updated_at")
    return {k: v for k, v in current.items() if k not in times} == {
        k: v for k, v in incoming.items() if k not in times
    }


# -- merging in -----------------------------------------------------------------------------


def merge_in(
    ws: Workspace,
    items: Sequence[Any],
    *,
    label: str = "memories",
    from_clone: bool = False,
    progress: Progress | None = None,
    where: Sequence[tuple[str, int]] | None = None,
) -> ImportResult:
    """Merge records from elsewhere into a store through the one merge function.

    Each item is checked like a line of memories.jsonl (an item that fails is skipped with
    its reason) and redacted. ``from_clone``: the items are another clone's changes (a sync
    chunk), so only what the merge changed beyond them is journalled as this clone's.
    ``where`` names the file and line of each item, for the messages of those skipped.
    """
    from engram.sync.merge import merge_record

    result = ImportResult()
    max_bytes = int(ws.config.number("store.max_content_bytes"))
    incoming: dict[str, Record] = {}
    for position, item in enumerate(items):
        try:
            path, lineno = where[position] if where is not None else (label, position + 1)
            record = _checked(ws, item, path=path, lineno=lineno, max_bytes=max_bytes)
        except (EngramError, TypeError, ValueError) as exc:
            result.errors.append(_skipped(exc, position, label=label, where=where))
            continue
        rid = record["id"]
        incoming[rid] = merge_record(incoming[rid], record) if rid in incoming else record
    with ws.store.lock():
        # Read under the lock: the index takes in first what git or another process wrote.
        known = ws.index.get_many(sorted(incoming))
        changed: list[Record] = []
        ours: list[str] = []
        for number, (rid, record) in enumerate(sorted(incoming.items()), start=1):
            if progress is not None:
                progress(number, len(incoming))
            current = known.get(rid)
            if current is None:
                changed.append(record)
                result.added += 1
                continue
            merged = merge_record(current, record)
            if merged == current or _same_but_times(current, record):
                # Only its times differ (a file without times, touched since): nothing new.
                result.unchanged += 1
                continue
            changed.append(merged)
            result.updated += 1
            if merged != record:
                ours.append(rid)
        if changed:
            ws.write(changed, journal=not from_clone)
            if from_clone and ours:
                ws.journal(ours)
    return result


def _checked(ws: Workspace, item: Any, *, path: str, lineno: int, max_bytes: int) -> Record:
    """Return one incoming item as a checked, normalised and redacted record (or raise)."""
    from engram.model import check_unicode, parse_line

    check_unicode(item)
    record = parse_line(
        json.dumps(item, ensure_ascii=False).encode("utf-8"), path=path, lineno=lineno
    )
    _check_stamps(record)
    # Tombstones too: one whose id is a secret is skipped here, with its reason.
    # Before normalising as well: lower-casing a tag must not hide a key.
    ws.scrub(record)
    if not is_tombstone(record):
        record = normalize_fields(record, max_content_bytes=max_bytes)
        ws.scrub(record)
    return record


def _check_stamps(record: Record) -> None:
    """Refuse a record whose rev or times the merge cannot order; write its times canonically.

    The one merge function compares ``rev`` as a number and the times as instants: a ``rev``
    of ``"a"`` or an ``updated_at`` of ``"nope"`` would enter the store and break the merge of
    every clone that meets it. A time in another RFC 3339 spelling is written as engram writes
    its own (UTC, milliseconds, ``Z``).
    """
    rev = record.get("rev")
    if isinstance(rev, bool) or not isinstance(rev, int) or rev < 1:
        raise InvalidInput(f"field 'rev': {str(rev)[:40]!r} is not a positive integer")
    for key in ("created_at", "updated_at", "deleted_at"):
        value = record.get(key)
        if value is None and key != "updated_at":
            continue
        if not isinstance(value, str):
            raise InvalidInput(f"field {key!r}: {str(value)[:40]!r} is not a time")
        try:
            record[key] = format_time(parse_time(value))
        except (InvalidInput, OverflowError, ValueError):
            raise InvalidInput(f"field {key!r}: {value[:40]!r} is not an RFC 3339 time") from None


def _skipped(
    exc: Exception, position: int, *, label: str, where: Sequence[tuple[str, int]] | None
) -> str:
    """Return the sentence that reports a skipped item, naming where it came from."""
    message = getattr(exc, "message", str(exc))
    if where is None:
        # The check names the item as line position+1 of label (see merge_in): an index it is.
        message = message.removeprefix(f"{label}:{position + 1}: ")
        return f"{label}[{position}]: {message}"
    path, lineno = where[position]
    if not message.startswith(f"{path}:"):  # name the chunk file and line
        return f"{path}:{lineno}: {message}"
    return str(message)


def merge3_in(ws: Workspace, base: Sequence[Record], theirs: Sequence[Record]) -> ImportResult:
    """Merge another branch's memories into the store three-way, against their common base.

    A memory the other side removed from its file (without a tombstone) stays here: only
    tombstones delete. What the merge made beyond their version is journalled as ours.
    """
    from engram.sync.merge import merge3_record, merge_sets

    result = ImportResult()
    base_by_id, theirs_by_id = merge_sets(base), merge_sets(theirs)
    with ws.store.lock():
        ours_by_id = ws.index.get_many(sorted(theirs_by_id))
        changed: list[Record] = []
        ours: list[str] = []
        for rid, their in sorted(theirs_by_id.items()):
            mine = ours_by_id.get(rid)
            merged = merge3_record(base_by_id.get(rid), mine, their)
            if merged is not None and merged != mine:
                try:  # scrubbed here, as the store would, so a redacted repeat is no change
                    merged = ws.store.scrubber.record(merged)[0]
                except InvalidInput as exc:  # an id that is a secret: that memory only
                    result.errors.append(f"remote memory {rid[:4]}…: {exc.message}")
                    continue
            if merged is None or merged == mine:
                result.unchanged += 1
                continue
            changed.append(merged)
            if mine is None:
                result.added += 1
            else:
                result.updated += 1
            if merged != their:
                ours.append(rid)
        if changed:
            ws.write(changed, journal=False)
            if ours:
                ws.journal(ours)
    return result
