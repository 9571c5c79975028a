"""What a sync chunk holds: engram's records and Go engram's view of them, in ONE JSON object.

Gentleman-Programming's Go engram reads every chunk the shared manifest lists as one JSON
object ``{sessions, observations, prompts[, mutations]}`` and ignores keys it does not know;
it fails the whole import on a chunk that is not one object. So engram writes (docs/decisions.md,
"Sync chunks Go engram reads")::

    {"engram": {"records": [<full records, tombstones included, sorted by id>], "version": 1},
     "observations": [...], "prompts": [...], "sessions": [...]}

``engram.records`` is what engram reads back, every field as stored; ``sessions``,
``observations`` and ``prompts`` are the same memories as Go's rows
(``engram.formats.goexport.go_chunk_rows``), which engram never reads from its own chunks. The
bytes are canonical (sorted keys, compact, raw UTF-8, one line and a newline), so the same
records give the same bytes and the chunk id (a hash of them) on every clone. Older engram
chunks (gzip'd JSON Lines of records, "legacy") stay readable; ``engram sync`` and
``doctor --fix`` rewrite them in this form (``engram.sync.audit.rewrite_legacy``).

Pure: records in, bytes out, and the shape of bytes read; no I/O. ``engram.sync.chunks`` reads,
verifies and writes the files.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from engram.errors import CorruptStore, InvalidInput
from engram.model import Record, canonical_line, parse_line
from engram.store.redact import Scrubber

if TYPE_CHECKING:
    from engram.formats.goexport import GoName

__all__ = ["FORM_KEY", "FORM_VERSION", "Rendered", "is_engram_object", "records_of", "render"]

FORM_KEY: Final = "engram"
FORM_VERSION: Final = 1
# How the canonical object starts: "engram" sorts before every key Go engram reads, and a
# record's line starts with a key that sorts before it ("created_at" is required).
PREFIX: Final = b'{"engram":{'
GO_PREFIX: Final = b'{"sessions":'  # Go engram marshals its struct in field order


@dataclass(frozen=True)
class Rendered:
    """A chunk's bytes (uncompressed) and what it holds, for its manifest entry."""

    data: bytes
    memories: int  # engram records
    sessions: int  # Go's view: rows of each array
    observations: int
    prompts: int


def _dumps(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def render(
    records: Sequence[Mapping[str, Any]],
    scrubber: Scrubber,
    go_name: GoName | None = None,
    go_has: Collection[str] | None = None,
) -> Rendered:
    """Return records as a chunk's canonical bytes: engram's records and Go's view of them.

    Every record is scrubbed of secrets (chunks are committed) and checked as a line of
    memories.jsonl would be (a reader must never refuse what is written: InvalidInput). Two
    versions of one id are both kept (the merge function reconciles them on import); identical
    ones once. Go's view shows each id once, in its latest version, engram's own memories of
    this project under ``go_name`` (Go's name for it) when given; the changes of memories Go
    has (``go_has``: ids earlier chunks carried) in its ``mutations`` journal only.
    """
    from engram.formats.goexport import go_chunk_rows

    lines: dict[tuple[str, bytes], Record] = {}
    for record in records:
        if not isinstance(record.get("id"), str):
            raise InvalidInput(f"cannot export a record without a string id: {record!r:.200}")
        clean = scrubber.record(record)[0]
        line = canonical_line(clean)
        try:
            parsed = parse_line(line, path="export", lineno=0)
        except CorruptStore as exc:
            raise InvalidInput(f"cannot export record {record['id']!r}: {exc.message}") from exc
        lines[(record["id"], line)] = parsed
    ordered = [lines[key] for key in sorted(lines)]
    latest: dict[str, Record] = {}
    for record in ordered:
        known = latest.get(record["id"])
        if known is None or str(record.get("updated_at", "")) >= str(known.get("updated_at", "")):
            latest[record["id"]] = record
    rows = go_chunk_rows(latest.values(), name=go_name, go_has=go_has)
    document = {FORM_KEY: {"records": ordered, "version": FORM_VERSION}, **rows}
    data = (_dumps(document) + "\n").encode("utf-8")
    return Rendered(
        data=data,
        memories=len(ordered),
        sessions=len(rows["sessions"]),
        observations=len(rows["observations"]),
        prompts=len(rows["prompts"]),
    )


def is_engram_object(value: Any) -> bool:
    """Tell whether a parsed chunk object is engram's (its records under ``engram``)."""
    return isinstance(value, Mapping) and "id" not in value and FORM_KEY in value


def records_of(value: Mapping[str, Any], *, name: str) -> list[Any]:
    """Return the raw records of engram's chunk object; raise InvalidInput on a wrong shape."""
    body = value.get(FORM_KEY)
    if not isinstance(body, Mapping):
        raise InvalidInput(f'{name}: "{FORM_KEY}" must be an object, got {type(body).__name__}')
    version = body.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidInput(f'{name}: "{FORM_KEY}.version" must be a positive integer')
    items = body.get("records")
    if not isinstance(items, list):
        raise InvalidInput(f'{name}: "{FORM_KEY}.records" must be a list')
    return items


def record_line(item: Any) -> bytes:
    """Return one raw record of a chunk object as a line, for ``model.parse_line`` to check."""
    try:
        text = _dumps(item)
    except (TypeError, ValueError):
        return b"\x00"  # parse_line refuses it, naming the chunk and the record's number
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, so that parse_line names it
        return (json.dumps(item, sort_keys=True, separators=(",", ":")) + "\n").encode()
