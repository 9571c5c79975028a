"""Imports from other tools: turn their files into engram records, deterministically.

Three foreign formats are read (REFERENCE.md), besides engram's own export:

- ``go-engram-export``: the JSON file Go engram's ``engram export`` writes (``version``,
  ``exported_at``, ``sessions``, ``observations``, ``prompts``);
- ``go-engram-chunk``: one of its sync chunks (``chunks/<id>.jsonl.gz``: the same object,
  gzip'd, without ``exported_at``, maybe with a ``mutations`` journal);
- ``mcp-memory``: the knowledge-graph JSON Lines of the MCP reference "memory" server.

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

import base64
import hashlib
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from engram.errors import EngramError, InputTooLarge, InvalidInput
from engram.model import (
    MAX_DOCUMENT_DEPTH,
    Record,
    canonical_line,
    format_time,
    is_tombstone,
    loads,
    normalize_content,
    normalize_fields,
    normalize_kind,
    normalize_path,
    normalize_project,
    parse_line,
    parse_time,
)

MAX_DECOMPRESSED_BYTES: Final = 64 * 1024 * 1024
MAX_CONTENT_BYTES: Final = 1_048_576  # the default of store.max_content_bytes
TITLE_CHARS: Final = 120
# The time given to records whose source carries none (MCP memory files); pass ``stamp``.
EPOCH: Final = "1970-01-01T00:00:00.000Z"
GO_SOURCE: Final = "import:go-engram"
MCP_SOURCE: Final = "import:mcp-memory"
FORMATS: Final = ("engram", "go-engram-export", "go-engram-chunk", "mcp-memory")

_GZIP_MAGIC: Final = b"\x1f\x8b"
_GO_ARRAYS: Final = ("sessions", "observations", "prompts")
_GO_ENTITIES: Final = {"observation": "observations", "session": "sessions", "prompt": "prompts"}
_NO_SUMMARY: Final = "no summary"
_FILE_KEYS: Final = ("files", "file", "file_path", "path", "paths")
_EXPECTED: Final = (
    "expected an engram export ({'format': 'engram', 'memories': [...]}), a Go engram export or "
    "sync chunk ({'sessions', 'observations', 'prompts'}, maybe gzip'd), or an MCP memory "
    "JSONL file (lines of {'type': 'entity' | 'relation', ...})"
)


@dataclass
class Converted:
    """Records converted from one file, the items left out, and the format read."""

    records: list[Record]
    skipped: list[str] = field(default_factory=list)
    format: str = ""


# ── ids, times, text ─────────────────────────────────────────────────────────────────────────


def import_id(key: str) -> str:
    """Return the stable id (26 lowercase base32 characters) of the memory imported as ``key``."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()[:16]
    return base64.b32encode(digest).decode("ascii").rstrip("=").lower()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _time(value: Any) -> str:
    """Return a Go time (``YYYY-MM-DD HH:MM:SS`` UTC or RFC 3339) as engram's RFC 3339 UTC."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"not a time: {value!r}")
    moment: datetime = parse_time(value)
    return format_time(moment)


def _text(value: Any) -> str:
    """Return a Go string field as text (null and missing are empty)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int):
        return str(value)
    raise InvalidInput(f"expected text, got {type(value).__name__}")


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


_SECTION_WORDS: Final = frozenset(
    {"goal", "instructions", "discoveries", "accomplished", "next steps", "relevant files"}
)


_LABEL: Final = re.compile(
    r"^(?:\*\*|__)?([A-Za-z ]+?)\s*(?::\s*(?:\*\*|__)?|(?:\*\*|__)\s*:)\s*(.*)$"
)


def _summary_line(text: str) -> str:
    """Return a summary's first line of substance: markdown marks and bare headings left out."""
    for line in text.splitlines():
        words = re.sub(r"^\s*(?:#{1,6}\s*|[-*+•]\s+|\d+[.)]\s+)", "", line).strip()
        label = _LABEL.match(words)
        if label and label.group(1).strip().lower() in _SECTION_WORDS:
            words = label.group(2)  # "**Goal:** ship it" -> "ship it"
        elif label:
            words = f"{label.group(1).strip()}: {label.group(2)}"  # "**Note:** x" -> "Note: x"
        words = words.strip(" *_#`:")
        if words and words.lower() not in _SECTION_WORDS:
            return words
    return ""


def _clip(text: str, limit: int = TITLE_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] or text[: limit - 1]
    return cut.rstrip() + "…"


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _finish(record: Record, max_content_bytes: int) -> Record:
    """Validate a converted record as the store would read it; raise InvalidInput if it fails."""
    from engram.store.redact import scrub_record

    # Scrubbed before normalising (which lower-cases tags and could hide a key from the rules);
    # the store scrubs again with the user's extra patterns on the way in.
    record, _ = scrub_record(record)
    out = normalize_fields(record, max_content_bytes=max_content_bytes)
    try:
        parse_line(canonical_line(out), path="import", lineno=1)
    except EngramError as exc:
        raise InvalidInput(exc.message.removeprefix("import:1: ")) from exc
    return out


# ── reading and detecting ────────────────────────────────────────────────────────────────────


def _gunzip(data: bytes, name: str) -> bytes:
    """Decompress gzip'd bytes, refusing more than MAX_DECOMPRESSED_BYTES of output."""
    out = bytearray()
    rest = data
    try:
        # A gzip file may hold several members; each is read with a bounded output.
        while rest[:2] == _GZIP_MAGIC:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            chunk = inflater.decompress(rest, MAX_DECOMPRESSED_BYTES + 1 - len(out))
            out += chunk
            if len(out) > MAX_DECOMPRESSED_BYTES or inflater.unconsumed_tail:
                raise InvalidInput(
                    f"{name or 'input'}: decompresses to more than "
                    f"{MAX_DECOMPRESSED_BYTES // (1024 * 1024)} MiB; refusing to read it",
                    hint="split the export into smaller files",
                )
            if not inflater.eof:
                raise InvalidInput(f"{name or 'input'}: truncated gzip data")
            rest = inflater.unused_data
    except zlib.error as exc:
        raise InvalidInput(f"{name or 'input'}: not valid gzip data: {exc}") from exc
    return bytes(out)


def _json_object(payload: bytes, name: str) -> dict[str, Any] | None:
    try:
        text = payload.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    try:
        value = loads(text, what=name or "input", max_depth=MAX_DOCUMENT_DEPTH)
    except InputTooLarge as exc:
        if _looks_mcp(payload):
            return None  # JSON Lines: each line is parsed, and bounded, on its own
        raise InvalidInput(exc.message, hint=exc.hint) from exc
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


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


def _sniff(data: bytes, name: str) -> tuple[str, bytes, dict[str, Any] | None]:
    """Return (format, the decompressed bytes, the parsed object when the file is one)."""
    payload = _gunzip(data, name) if data[:2] == _GZIP_MAGIC else data
    obj = _json_object(payload, name)
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
    elif _looks_mcp(payload):
        return "mcp-memory", payload, None
    raise InvalidInput(
        f"{name or 'input'}: not a file engram can import; {_EXPECTED}",
        hint="pass an engram, Go engram or MCP memory export file",
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
) -> Converted:
    """Detect a file's format and convert it into engram records."""
    fmt, payload, obj = _sniff(data, name)
    if fmt == "mcp-memory":
        return convert_mcp_memory(
            payload, project=project, stamp=stamp, max_content_bytes=max_content_bytes
        )
    assert obj is not None  # every other format is one JSON object
    if fmt == "engram":
        records: list[Record] = []
        skipped: list[str] = []
        for position, item in enumerate(obj.get("memories") or []):
            if isinstance(item, dict):
                records.append(item)
            else:
                skipped.append(f"memories[{position}]: not a JSON object")
        return Converted(records, skipped, "engram")
    return convert_go(obj, project=project, fmt=fmt, max_content_bytes=max_content_bytes)


# ── Go engram ────────────────────────────────────────────────────────────────────────────────


@dataclass
class _Row:
    """One version of a Go entity: a row of an array or a row rebuilt from a mutation."""

    entity: str  # observation | session | prompt
    where: str
    data: dict[str, Any]


@dataclass
class _Candidate:
    record: Record
    base_rev: int  # the live version's rev (a tombstone's rev is one more)
    position: int
    where: str


def _observation_key(row: Mapping[str, Any], project: str) -> str:
    sync_id = _text(row.get("sync_id")).strip()
    if sync_id:
        return f"go-engram:obs:{sync_id}"
    parts = [
        normalize_project(_text(row.get("project"))) or project,
        _text(row.get("session_id")).strip(),
        _text(row.get("type")).strip().lower(),
        " ".join(_text(row.get("title")).split()),
        _sha(normalize_content(_text(row.get("content")))),
    ]
    return "go-engram:obs:" + _sha("\x1f".join(parts))


def _prompt_key(row: Mapping[str, Any], project: str) -> str:
    sync_id = _text(row.get("sync_id")).strip()
    if sync_id:
        return f"go-engram:prompt:{sync_id}"
    parts = [
        normalize_project(_text(row.get("project"))) or project,
        _text(row.get("session_id")).strip(),
        _sha(normalize_content(_text(row.get("content")))),
    ]
    return "go-engram:prompt:" + _sha("\x1f".join(parts))


def _session_key(row: Mapping[str, Any], project: str) -> str:
    sid = _text(row.get("id")).strip()
    if not sid:
        raise InvalidInput("no session id")
    return f"go-engram:session:{sid}"


_KEYS: Final[dict[str, Callable[[Mapping[str, Any], str], str]]] = {
    "observation": _observation_key,
    "prompt": _prompt_key,
    "session": _session_key,
}


def _kind(go_type: str) -> str:
    try:
        return normalize_kind(go_type) if go_type.strip() else "note"
    except InvalidInput:
        return "note"  # a type engram has no kind for (Go lets users invent types)


def _files(row: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    for key in _FILE_KEYS:
        value = row.get(key)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if not isinstance(item, str) or not item.strip():
                continue
            try:
                path = normalize_path(item)
            except InvalidInput:
                continue  # absolute or escaping paths say nothing about this repository
            if path and path not in found:
                found.append(path)
    return found


def _tombstone_only(record_id: str, rev: int, updated_at: str, deleted_at: str) -> Record:
    return {"id": record_id, "rev": rev, "updated_at": updated_at, "deleted_at": deleted_at}


def _deleted_at(row: Mapping[str, Any]) -> str | None:
    value = row.get("deleted_at")
    if value in (None, ""):
        return None
    return _time(value)


def _live_or_tombstone(
    record: Record, row: Mapping[str, Any], base_rev: int, has_text: bool
) -> Record:
    """Turn a converted live record into a tombstone if its row was deleted."""
    deleted_at = _deleted_at(row)
    if deleted_at is None:
        if not has_text:
            raise InvalidInput("no content")
        return record
    updated_at = max(record["updated_at"], deleted_at)
    if row.get("hard_delete") or not has_text:
        return _tombstone_only(record["id"], base_rev + 1, updated_at, deleted_at)
    return {**record, "rev": base_rev + 1, "updated_at": updated_at, "deleted_at": deleted_at}


def _times(row: Mapping[str, Any], created_key: str, *updated_keys: str) -> tuple[str, str]:
    created_raw = row.get(created_key)
    updated_raw = next((row[key] for key in updated_keys if row.get(key)), None)
    if not created_raw and not updated_raw:
        raise InvalidInput(f"no {created_key}")
    created = _time(created_raw) if created_raw else _time(updated_raw)
    updated = _time(updated_raw) if updated_raw else created
    return created, max(created, updated)


def _convert_observation(
    row: Mapping[str, Any], record_id: str, project: str
) -> tuple[Record, int]:
    base_rev = max(_count(row.get("revision_count")) or 1, 1)
    created, updated = _times(row, "created_at", "updated_at")
    content = _text(row.get("content"))
    title = " ".join(_text(row.get("title")).split()) or _clip(_first_line(content))
    scope = "personal" if _text(row.get("scope")).strip().lower() == "personal" else "project"
    record: Record = {
        "id": record_id,
        "kind": _kind(_text(row.get("type"))),
        "title": title,
        "content": content,
        "project": normalize_project(_text(row.get("project"))) or project,
        "scope": scope,
        "source": GO_SOURCE,
        "created_at": created,
        "updated_at": updated,
        "rev": base_rev,
    }
    for key in ("topic_key", "session_id"):
        text = _text(row.get(key)).strip()
        if text:
            record[key] = text
    tool_name = _text(row.get("tool_name")).strip()
    if tool_name:
        record["tool_name"] = tool_name
    duplicates = _count(row.get("duplicate_count"))
    if duplicates is not None and duplicates > 1:
        # Go counts the first save (a fresh row has 1); engram counts only the re-saves.
        record["duplicate_count"] = duplicates - 1
    files = _files(row)
    if files:
        record["files"] = files
    has_text = bool(content.strip())
    return _live_or_tombstone(record, row, base_rev, has_text), base_rev


def _convert_session(row: Mapping[str, Any], record_id: str, project: str) -> tuple[Record, int]:
    sid = _text(row.get("id")).strip()
    summary = _text(row.get("summary"))
    if not summary.strip() and _deleted_at(row) is None:
        raise InvalidInput(_NO_SUMMARY)
    created, updated = _times(row, "started_at", "updated_at", "ended_at")
    session = {
        key: _time(row[key]) if key.endswith("_at") else _text(row[key]).strip()
        for key in ("started_at", "ended_at", "directory")
        if row.get(key) not in (None, "")
    }
    session = {key: value for key, value in session.items() if value}
    record: Record = {
        "id": record_id,
        "kind": "session",
        "title": _clip(f"Session: {_summary_line(summary) or sid}"),
        "content": summary,
        "project": normalize_project(_text(row.get("project"))) or project,
        "scope": "project",
        "source": GO_SOURCE,
        "session_id": sid,
        "created_at": created,
        "updated_at": updated,
        "rev": 1,
    }
    if session:
        record["session"] = session
    return _live_or_tombstone(record, row, 1, bool(summary.strip())), 1


def _convert_prompt(row: Mapping[str, Any], record_id: str, project: str) -> tuple[Record, int]:
    content = _text(row.get("content"))
    created, updated = _times(row, "created_at", "updated_at")
    record: Record = {
        "id": record_id,
        "kind": "prompt",
        "title": _clip(_first_line(content)) or "Prompt",
        "content": content,
        "project": normalize_project(_text(row.get("project"))) or project,
        "scope": "project",
        "source": GO_SOURCE,
        "created_at": created,
        "updated_at": updated,
        "rev": 1,
    }
    session_id = _text(row.get("session_id")).strip()
    if session_id:
        record["session_id"] = session_id
    return _live_or_tombstone(record, row, 1, bool(content.strip())), 1


_CONVERTERS: Final[dict[str, Callable[[Mapping[str, Any], str, str], tuple[Record, int]]]] = {
    "observation": _convert_observation,
    "session": _convert_session,
    "prompt": _convert_prompt,
}


def _sort_time(row: Mapping[str, Any], *keys: str) -> str:
    """Return a row's newest time for last-writer-wins ordering ('' when none parses)."""
    for key in keys:
        try:
            return _time(row.get(key))
        except InvalidInput:
            continue
    return ""


def _payload(mutation: Mapping[str, Any]) -> dict[str, Any]:
    raw = mutation.get("payload")
    if raw in (None, ""):
        return {}
    if isinstance(raw, str):
        try:
            raw = loads(raw, what="payload")
        except ValueError as exc:
            raise InvalidInput(f"payload is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise InvalidInput("payload is not a JSON object")
    return raw


def _mutation_rows(
    mutations: list[Any], latest: dict[str, dict[str, Any]], project: str, skipped: list[str]
) -> list[tuple[str, _Row]]:
    """Rebuild the row versions a chunk's mutation journal describes, in ``seq`` order."""
    ordered: list[tuple[int, int, Mapping[str, Any]]] = []
    for position, mutation in enumerate(mutations):
        where = f"mutations[{position}]"
        if not isinstance(mutation, Mapping):
            skipped.append(f"{where}: not a JSON object")
            continue
        seq = _count(mutation.get("seq"))
        ordered.append((seq if seq is not None else position, position, mutation))
    rows: list[tuple[str, _Row]] = []
    for _seq, position, mutation in sorted(ordered, key=lambda item: (item[0], item[1])):
        where = f"mutations[{position}]"
        entity = str(mutation.get("entity") or "").strip().lower()
        op = str(mutation.get("op") or "").strip().lower()
        if entity not in _GO_ENTITIES:
            skipped.append(f"{where}: {entity or 'unnamed'} mutations are not imported")
            continue
        if op not in ("upsert", "delete"):
            skipped.append(f"{where}: unknown op {op!r} (expected upsert or delete)")
            continue
        try:
            payload = _payload(mutation)
            occurred = _time(mutation.get("occurred_at"))
        except InvalidInput as exc:
            skipped.append(f"{where}: {exc.message}")
            continue
        key_field = "id" if entity == "session" else "sync_id"
        try:
            entity_key = _text(mutation.get("entity_key")).strip()
            if entity_key and not payload.get(key_field):
                payload[key_field] = entity_key
            key = _KEYS[entity](payload, project)
        except InvalidInput as exc:
            skipped.append(f"{where}: {exc.message}")
            continue
        prior = latest.get(key)
        created_key = "started_at" if entity == "session" else "created_at"
        row: dict[str, Any] = {**(prior or {}), **payload, "updated_at": occurred}
        row[created_key] = (prior or {}).get(created_key) or payload.get(created_key) or occurred
        if op == "delete":
            row["deleted_at"] = payload.get("deleted_at") or occurred
        else:
            row["deleted_at"] = None
            if prior is not None and entity == "observation" and "revision_count" not in payload:
                row["revision_count"] = max(_count(prior.get("revision_count")) or 1, 1) + 1
        latest[key] = row
        rows.append((key, _Row(entity, where, row)))
    return rows


def convert_go(
    obj: Mapping[str, Any],
    *,
    project: str,
    fmt: str = "go-engram-export",
    max_content_bytes: int = MAX_CONTENT_BYTES,
) -> Converted:
    """Convert a Go engram export or sync chunk (already parsed) into engram records."""
    default_project = normalize_project(project)
    skipped: list[str] = []
    rows: list[_Row] = []
    for entity, array in _GO_ENTITIES.items():
        items = obj.get(array)
        if items is None:
            continue
        if not isinstance(items, list):
            skipped.append(f"{array}: not a list")
            continue
        for position, item in enumerate(items):
            if isinstance(item, dict):
                rows.append(_Row(entity, f"{array}[{position}]", item))
            else:
                skipped.append(f"{array}[{position}]: not a JSON object")

    keyed: list[tuple[str, _Row]] = []
    for row in rows:
        try:
            keyed.append((_KEYS[row.entity](row.data, default_project), row))
        except InvalidInput as exc:
            skipped.append(f"{row.where}: {exc.message}")

    mutations = obj.get("mutations")
    if isinstance(mutations, list) and mutations:
        # The newest array row of each key is what a mutation's partial payload builds on.
        latest: dict[str, dict[str, Any]] = {}
        newest: dict[str, tuple[str, int]] = {}
        for position, (key, row) in enumerate(keyed):
            order = (_sort_time(row.data, "updated_at", "ended_at", "created_at"), position)
            if key not in newest or order >= newest[key]:
                newest[key] = order
                latest[key] = row.data
        keyed += _mutation_rows(mutations, latest, default_project, skipped)
    elif mutations is not None and not isinstance(mutations, list):
        skipped.append("mutations: not a list")

    groups: dict[str, list[_Candidate]] = {}
    unsummarised: dict[str, list[str]] = {}
    for position, (key, row) in enumerate(keyed):
        record_id = import_id(key)
        try:
            record, base_rev = _CONVERTERS[row.entity](row.data, record_id, default_project)
            if not record.get("project", True):
                del record["project"]
            record = _finish(record, max_content_bytes)
        except InvalidInput as exc:
            if exc.message == _NO_SUMMARY:
                unsummarised.setdefault(record_id, []).append(f"{row.where}: {exc.message}")
            else:
                skipped.append(f"{row.where}: {exc.message}")
            continue
        groups.setdefault(record_id, []).append(_Candidate(record, base_rev, position, row.where))
    # A session is reported as having no summary only when no version of it had one.
    for record_id, reasons in unsummarised.items():
        if record_id not in groups:
            skipped += reasons

    records: list[Record] = []
    for record_id in sorted(groups):
        versions = groups[record_id]
        # Last writer wins by updated_at (a later row of the file on a tie).
        winner = max(versions, key=lambda c: (c.record["updated_at"], c.position))
        record = dict(winner.record)
        top = max(c.base_rev for c in versions)
        # The winner outranks every other row of its id; a tombstone outranks the live ones.
        record["rev"] = max(record["rev"], top + (1 if is_tombstone(record) else 0))
        records.append(record)
    return Converted(records, skipped, fmt)


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
    created = _time(stamp)
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
            records.append(_finish(record, max_content_bytes))
        except InvalidInput as exc:
            skipped.append(f"{entry['where']}: entity {name!r}: {exc.message}")
    records.sort(key=lambda record: str(record["id"]))
    return Converted(records, skipped, "mcp-memory")


__all__ = [
    "EPOCH",
    "FORMATS",
    "MAX_DECOMPRESSED_BYTES",
    "Converted",
    "convert",
    "convert_go",
    "convert_mcp_memory",
    "detect",
    "import_id",
    "mcp_entity_id",
]
