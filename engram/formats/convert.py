"""Imports from other tools: turn their files into engram records, deterministically.

Three foreign formats are read, besides engram's own export:

- ``go-engram-export``: the JSON file Go engram's ``engram export`` writes (``version``,
  ``exported_at``, ``sessions``, ``observations``, ``prompts``);
- ``go-engram-chunk``: one of its sync chunks (``chunks/<id>.jsonl.gz``: the same object,
  gzip'd, without ``exported_at``, maybe with a ``mutations`` journal);
- ``mcp-memory``: the knowledge-graph JSON Lines of the MCP reference "memory" server;
- ``plain``: rows of ``{title, content, ...}`` as JSON Lines, a JSON array or
  ``{"memories": [...]}`` (``engram.formats.plain``, which also reads folders of Markdown notes).

Every id is derived from what the item is (Go's ``sync_id``, else a natural key; an MCP
entity's name), never drawn at random, and no time is read from the clock: converting the same
bytes twice gives the same records, so a re-import merges as "unchanged" instead of adding
copies. One record per id leaves this module (several rows of one id: the last writer by
``updated_at`` wins). An item that cannot be converted is named in ``skipped`` and the rest is
converted.

This module only converts: it does no I/O, redacts nothing and writes nothing; the service runs
the records through redaction and the one merge function (``engram.sync.merge``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from engram.errors import InputTooLarge, InvalidInput
from engram.fileio import gunzip
from engram.formats.common import MAX_CONTENT_BYTES, Converted, finish_record, import_id, time_of
from engram.formats.goimport import convert_go
from engram.model import (
    MAX_DOCUMENT_DEPTH,
    Record,
    check_unicode,
    loads,
    normalize_kind,
    normalize_project,
)

if TYPE_CHECKING:
    from engram.formats.goknown import GoKnown

MAX_DECOMPRESSED_BYTES: Final = 64 * 1024 * 1024
# The time given to records whose source carries none (MCP memory files); pass ``stamp``.
EPOCH: Final = "1970-01-01T00:00:00.000Z"
MCP_SOURCE: Final = "import:mcp-memory"
FORMATS: Final = ("engram", "go-engram-export", "go-engram-chunk", "mcp-memory", "plain")

_GZIP_MAGIC: Final = b"\x1f\x8b"
_SPLIT_HINT: Final = "split the export into smaller files"
_GO_ARRAYS: Final = ("sessions", "observations", "prompts")
_EXPECTED: Final = (
    "expected an engram export ({'format': 'engram', 'memories': [...]}), a Go engram export or "
    "sync chunk ({'sessions', 'observations', 'prompts'}, maybe gzip'd), or an MCP memory "
    "JSONL file (lines of {'type': 'entity' | 'relation', ...}), or plain rows of "
    "{'title', 'content', ...} (JSON Lines, a JSON array, or {'memories': [...]})"
)


# ── reading and detecting ────────────────────────────────────────────────────────────────────


_NOT_JSON: Final = object()


def _json_value(payload: bytes, name: str) -> Any:
    """Return the one JSON value the bytes hold, or ``_NOT_JSON``."""
    try:
        text = payload.decode("utf-8-sig")
    except UnicodeDecodeError:
        return _NOT_JSON
    try:
        value = loads(text, what=name or "input", max_depth=MAX_DOCUMENT_DEPTH)
    except InputTooLarge as exc:
        if _looks_mcp(payload) or _looks_plain(payload):
            return _NOT_JSON  # JSON Lines: each line is parsed, and bounded, on its own
        raise InvalidInput(exc.message, hint=exc.hint) from exc
    except ValueError:
        return _NOT_JSON
    return value


def _looks_plain(payload: bytes) -> bool:
    from engram.formats.plain import looks_plain_lines

    return looks_plain_lines(payload)


def _looks_mcp(payload: bytes) -> bool:
    """Tell whether some early line is an MCP memory entity or relation."""
    try:
        text = payload.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    for number, line in enumerate(text.splitlines()):
        if number >= 50:
            break
        try:
            value = loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and value.get("type") in ("entity", "relation"):
            return True
    return False


def _sniff(data: bytes, name: str) -> tuple[str, bytes, Any]:
    """Return (format, the decompressed bytes, the parsed value when the file is one)."""
    from engram.formats.plain import plain_rows

    payload = (
        gunzip(data, name=name or "input", limit=MAX_DECOMPRESSED_BYTES, hint=_SPLIT_HINT)
        if data[:2] == _GZIP_MAGIC
        else data
    )
    value = _json_value(payload, name)
    obj = value if isinstance(value, dict) else None
    if obj is not None:
        if obj.get("format") == "engram" or (
            obj.get("version") == 1 and isinstance(obj.get("memories"), list)
        ):
            return "engram", payload, obj
        if any(key in obj for key in _GO_ARRAYS) or "mutations" in obj:
            # An export is stamped (version, exported_at); a chunk is the bare object, usually
            # gzip'd, and only a chunk carries a mutation journal.
            export = "mutations" not in obj and ("exported_at" in obj or "version" in obj)
            return ("go-engram-export" if export else "go-engram-chunk"), payload, obj
    elif value is _NOT_JSON and _looks_mcp(payload):
        return "mcp-memory", payload, None
    if value is not _NOT_JSON and plain_rows(value) is not None:
        return "plain", payload, value  # a JSON array, {"memories": [...]}, {"records": [...]}
    if _looks_plain(payload):
        return "plain", payload, None  # JSON Lines of rows (one line is one JSON object too)
    raise InvalidInput(
        f"{name or 'input'}: not a file engram can import; {_EXPECTED}",
        hint="pass an engram, Go engram or MCP memory export file, or plain rows of notes",
    )


def detect(data: bytes, name: str = "") -> str:
    """Name the format of a file's bytes (gzip'd or not); raise InvalidInput if unknown."""
    return _sniff(data, name)[0]


def convert(
    data: bytes,
    *,
    name: str,
    project: str,
    stamp: str = EPOCH,
    max_content_bytes: int = MAX_CONTENT_BYTES,
    known: GoKnown | None = None,
    go_names: Sequence[str] = (),
) -> Converted:
    """Detect a file's format and convert it into engram records (``go_names``: Go's)."""
    fmt, payload, obj = _sniff(data, name)
    if fmt == "mcp-memory":
        return convert_mcp_memory(
            payload, project=project, stamp=stamp, max_content_bytes=max_content_bytes
        )
    if fmt == "plain":
        from engram.formats.plain import convert_plain

        return convert_plain(
            payload,
            obj,
            name=name,
            project=project,
            stamp=stamp,
            max_content_bytes=max_content_bytes,
        )
    assert isinstance(obj, dict)  # every other format is one JSON object
    if fmt == "engram":
        # Every item, objects or not: the merge names each one it skips by its index.
        return Converted(list(obj.get("memories") or []), [], "engram")
    return convert_go(
        obj,
        project=project,
        fmt=fmt,
        max_content_bytes=max_content_bytes,
        known=known,
        go_names=go_names,
    )


# ── MCP memory ───────────────────────────────────────────────────────────────────────────────


def mcp_entity_id(name: str) -> str:
    """Return the id of the memory imported from the MCP memory entity ``name``."""
    return import_id(f"mcp-memory:{name}")


def _mcp_kind(entity_type: str) -> str:
    try:
        return normalize_kind(entity_type) if entity_type.strip() else "fact"
    except InvalidInput:
        return "fact"  # entity types are free words (person, project, …): facts about them


def convert_mcp_memory(
    data: bytes,
    *,
    project: str,
    stamp: str = EPOCH,
    max_content_bytes: int = MAX_CONTENT_BYTES,
) -> Converted:
    """Convert an MCP memory server's knowledge-graph JSONL into engram records.

    Each entity becomes one memory (content: its observations as a bullet list). Each relation
    adds a ``relates`` link to its ``from`` entity's memory and a line ``- <relationType> →
    <to>`` under "Relations:" in its content, so the relation's own word is not lost. The file
    holds no times: every record gets ``stamp`` (pass the file's modification time so that an
    edited file's records win over an older import; default the epoch) and rev 1.
    """
    default_project = normalize_project(project)
    created = time_of(stamp)
    skipped: list[str] = []
    text = data.decode("utf-8-sig", errors="replace")
    entities: dict[str, dict[str, Any]] = {}
    relations: list[tuple[str, str, str, str]] = []  # where, from, to, relationType
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"line {number}"
        if not line.strip():
            continue
        try:
            item = loads(line, what=where)
        except InputTooLarge as exc:
            skipped.append(exc.message)
            continue
        except ValueError as exc:
            skipped.append(f"{where}: not JSON ({exc})")
            continue
        if not isinstance(item, dict):
            skipped.append(f"{where}: not a JSON object")
            continue
        try:
            check_unicode(item)
        except InvalidInput as exc:
            skipped.append(f"{where}: {exc.message}")
            continue
        kind = item.get("type")
        if kind == "entity":
            name = item.get("name")
            if not isinstance(name, str) or not name.strip():
                skipped.append(f"{where}: entity without a name")
                continue
            observations = item.get("observations") or []
            if not isinstance(observations, list):
                observations = [observations]
            entry = entities.setdefault(name, {"where": where, "type": "", "observations": []})
            entity_type = item.get("entityType")
            if isinstance(entity_type, str) and entity_type.strip():
                entry["type"] = entity_type.strip()
            for observation in observations:
                note = observation.strip() if isinstance(observation, str) else ""
                if note and note not in entry["observations"]:
                    entry["observations"].append(note)
        elif kind == "relation":
            ends = [item.get(key) for key in ("from", "to", "relationType")]
            if not all(isinstance(end, str) and end.strip() for end in ends):
                skipped.append(f"{where}: relation needs from, to and relationType")
                continue
            relations.append((where, str(ends[0]), str(ends[1]), str(ends[2]).strip()))
        else:
            skipped.append(f"{where}: unknown type {kind!r} (expected entity or relation)")

    outgoing: dict[str, list[tuple[str, str]]] = {}
    for where, source, target, rel in relations:
        missing = [end for end in (source, target) if end not in entities]
        if missing:
            skipped.append(
                f"{where}: relation {source!r} {rel} {target!r}: no entity named "
                + " or ".join(repr(end) for end in missing)
            )
            continue
        pair = (rel, target)
        if pair not in outgoing.setdefault(source, []):
            outgoing[source].append(pair)

    records: list[Record] = []
    for name, entry in entities.items():
        lines = [f"- {observation}" for observation in entry["observations"]]
        links = outgoing.get(name, [])
        if links:
            if lines:
                lines.append("")
            lines.append("Relations:")
            lines += [f"- {rel} → {target}" for rel, target in links]
        entity_type = str(entry["type"])
        record: Record = {
            "id": mcp_entity_id(name),
            "kind": _mcp_kind(entity_type),
            "title": name,
            "content": "\n".join(lines),
            "tags": [entity_type.lower()] if entity_type else [],
            "links": [{"rel": "relates", "to": mcp_entity_id(target)} for _rel, target in links],
            "project": default_project,
            "scope": "project",
            "source": MCP_SOURCE,
            "created_at": created,
            "updated_at": created,
            "rev": 1,
        }
        if not record["project"]:
            del record["project"]
        try:
            records.append(finish_record(record, max_content_bytes))
        except InvalidInput as exc:
            skipped.append(f"{entry['where']}: entity {name!r}: {exc.message}")
    records.sort(key=lambda record: str(record["id"]))
    return Converted(records, skipped, "mcp-memory")


__all__ = [
    "EPOCH",
    "FORMATS",
    "MAX_DECOMPRESSED_BYTES",
    "convert",
    "convert_go",
    "convert_mcp_memory",
    "detect",
    "mcp_entity_id",
]
