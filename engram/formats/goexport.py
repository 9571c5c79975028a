"""engram records out as the JSON file Go engram's ``engram import`` reads.

``engram export --format go-engram`` writes ``{"version": "0.1.0", "exported_at", "sessions",
"observations", "prompts"}`` as Go's own export does: ``version`` a string (Go refuses a
number), times as ``YYYY-MM-DD HH:MM:SS`` UTC, integer ids, and a session row for every session
an observation or prompt names (Go's tables have a foreign key on it). A record imported from Go
goes back with the type and every field it came with (``engram.formats.goimport`` keeps them in
``go``); engram's own memories go out as observations whose ``sync_id`` is ``obs-`` + the 32
hex digits of their id, so that Go's next export brings them back onto the same memory.

Pure: records in, a JSON-ready document out; no I/O and no clock (the caller stamps the time).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from engram.errors import InvalidInput
from engram.formats.goknown import GO_SOURCE, go_session_of, sync_id_of
from engram.model import (
    Record,
    go_id_of,
    is_tombstone,
    normalize_project,
    parse_time,
    rev_of,
    scope_of,
    type_of,
)

__all__ = [
    "GO_EXPORT_VERSION",
    "GoExport",
    "GoName",
    "go_chunk_rows",
    "go_document",
    "go_observation",
    "go_prompt",
    "go_time",
]

GO_EXPORT_VERSION: Final = "0.1.0"
_GO_TIME: Final = "%Y-%m-%d %H:%M:%S"
# Set from the record itself; the rest of ``go`` follows them as it was imported.
_OBS_FIELDS: Final = (
    "id",
    "sync_id",
    "session_id",
    "type",
    "title",
    "content",
    "tool_name",
    "project",
    "scope",
    "topic_key",
    "revision_count",
    "duplicate_count",
    "last_seen_at",
    "review_after",
    "created_at",
    "updated_at",
    "deleted_at",
)


@dataclass(frozen=True)
class GoName:
    """This project as engram names it and as Go engram does (the folder's base name)."""

    project: str
    go: str

    def applied(self, records: Iterable[Record]) -> list[Record]:
        """Return records with Go's name for this project on engram's own memories of it.

        Go lists a project's memories by the name it computes from the folder; engram's name
        may come from config.yaml or the git remote. The name goes in ``go.project``, which
        the rows take as the project written; records that came from Go keep theirs.
        """
        own = normalize_project(self.project)
        if not self.go.strip() or normalize_project(self.go) == own:
            return list(records)
        out: list[Record] = []
        for record in records:
            go = record.get("go")
            spelled = isinstance(go, Mapping) and isinstance(go.get("project"), str)
            if record.get("source") == GO_SOURCE or spelled or record.get("project") != own:
                out.append(record)
            else:
                out.append(
                    {
                        **record,
                        "go": {**(go if isinstance(go, Mapping) else {}), "project": self.go},
                    }
                )
        return out


@dataclass
class GoExport:
    """A store's memories as Go engram's export document."""

    document: dict[str, Any]

    @property
    def count(self) -> int:
        """How many rows the document holds (sessions, observations and prompts)."""
        return sum(len(self.document[key]) for key in ("sessions", "observations", "prompts"))

    def to_dict(self) -> dict[str, Any]:
        """Return the document as JSON-ready data."""
        return self.document


def go_time(value: Any) -> str | None:
    """Return a time as Go writes it (``YYYY-MM-DD HH:MM:SS`` UTC), or None when there is none."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return parse_time(value).strftime(_GO_TIME)
    except (InvalidInput, ValueError):
        return None


def _go(record: Mapping[str, Any]) -> dict[str, Any]:
    go = record.get("go")
    return dict(go) if isinstance(go, Mapping) else {}


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _number(rows: list[tuple[Record, dict[str, Any]]]) -> None:
    """Give each row an integer id: the one Go's names show for it when free, else the next.

    ``model.go_id_of``: the Go id a record was imported with, else the one derived from its id,
    the number Go's MCP names (``--compat go-engram``) accept for it too.
    """
    used: set[int] = set()
    wanting: list[dict[str, Any]] = []
    for record, row in sorted(
        rows, key=lambda item: (item[0].get("created_at", ""), item[0]["id"])
    ):
        wanted = go_id_of(record)
        if wanted not in used:
            used.add(wanted)
            row["id"] = wanted
        else:
            wanting.append(row)
    next_id = max(used, default=0) + 1
    for row in wanting:
        row["id"] = next_id
        next_id += 1


def _project(record: Mapping[str, Any], go: Mapping[str, Any]) -> str | None:
    spelled = go.get("project")
    if isinstance(spelled, str):
        return spelled
    project = record.get("project")
    return project if isinstance(project, str) and project else None


def _observation(record: Record) -> dict[str, Any]:
    go = _go(record)
    go.pop("session", None)
    row: dict[str, Any] = {
        "id": 0,
        "sync_id": sync_id_of(record),
        "session_id": go_session_of(record),
        "type": type_of(record),
        "title": record.get("title", ""),
        "content": record.get("content", ""),
        "tool_name": record.get("tool_name"),
        "project": _project(record, go),
        "scope": scope_of(record),
        "topic_key": record.get("topic_key"),
        "revision_count": _int(go.get("revision_count")) or rev_of(record),
        "duplicate_count": _int(go.get("duplicate_count"))
        or int(record.get("duplicate_count", 0) or 0) + 1,
        # Go sets it on every save; engram's last save of the memory is its updated_at.
        "last_seen_at": go.get("last_seen_at") or go_time(record.get("updated_at")),
        "review_after": go.get("review_after"),
        "created_at": go_time(record.get("created_at")),
        "updated_at": go_time(record.get("updated_at")),
        "deleted_at": go_time(record.get("deleted_at")),
    }
    row = {key: value for key, value in row.items() if value is not None}
    row.update({key: value for key, value in go.items() if key not in _OBS_FIELDS})
    return row


def _prompt(record: Record) -> dict[str, Any]:
    go = _go(record)
    row: dict[str, Any] = {
        "id": 0,
        "sync_id": sync_id_of(record),
        "session_id": go_session_of(record),
        "content": record.get("content", ""),
        "project": _project(record, go) or "",
        "created_at": go_time(record.get("created_at")),
    }
    row.update({key: value for key, value in go.items() if key not in row})
    return row


def _session(record: Record) -> dict[str, Any]:
    go = _go(record)
    info = record.get("session")
    info = info if isinstance(info, Mapping) else {}
    row: dict[str, Any] = {
        "id": record.get("session_id", ""),
        "project": _project(record, go) or "",
        "directory": info.get("directory") or "",
        "started_at": go_time(info.get("started_at")) or go_time(record.get("created_at")),
        "ended_at": go_time(info.get("ended_at")),
        "summary": record.get("content", ""),
    }
    row = {key: value for key, value in row.items() if value is not None}
    row.update({key: value for key, value in go.items() if key not in row})
    return row


def go_observation(record: Record) -> dict[str, Any]:
    """Return one memory as Go's observation row, numbered by its own Go id (``go_id_of``)."""
    return {**_observation(record), "id": go_id_of(record)}


def go_prompt(record: Record) -> dict[str, Any]:
    """Return one prompt memory as Go's prompt row, numbered by its own Go id."""
    return {**_prompt(record), "id": go_id_of(record)}


def _bare_session(sid: str, members: list[tuple[Record, dict[str, Any]]]) -> dict[str, Any]:
    """Return a session row for a session engram has no memory of: as Go had it, else made up."""
    for record, _row in members:
        kept = _go(record).get("session")
        if isinstance(kept, Mapping):
            row = {"project": "", "directory": "", **kept, "id": sid}
            row.setdefault("started_at", go_time(record.get("created_at")))
            return row
    first = min(members, key=lambda item: str(item[0].get("created_at", "")))[0]
    return {
        "id": sid,
        "project": _project(first, _go(first)) or "",
        "directory": "",
        "started_at": go_time(first.get("created_at")),
    }


def go_document(
    records: Iterable[Record], *, exported_at: str, name: GoName | None = None
) -> GoExport:
    """Return records as Go engram's export document (hard-deleted ones are left out).

    ``name``: engram's own memories of this project go out under Go's name for it.
    """
    if name is not None:
        records = name.applied(records)
    sessions: dict[str, dict[str, Any]] = {}
    observations: list[tuple[Record, dict[str, Any]]] = []
    prompts: list[tuple[Record, dict[str, Any]]] = []
    for record in sorted(records, key=lambda r: str(r.get("id", ""))):
        if "title" not in record and "content" not in record:
            continue  # a hard delete: nothing left to write
        if record.get("kind") == "prompt":
            if not is_tombstone(record):  # Go's prompts have no soft delete
                prompts.append((record, _prompt(record)))
        elif record.get("kind") == "session" and isinstance(record.get("session"), Mapping):
            if not is_tombstone(record) and record.get("session_id"):
                sessions[str(record["session_id"])] = _session(record)
        else:
            observations.append((record, _observation(record)))
    _number(observations)
    _number(prompts)
    members: dict[str, list[tuple[Record, dict[str, Any]]]] = {}
    for record, row in observations + prompts:
        members.setdefault(row["session_id"], []).append((record, row))
    for sid, belonging in members.items():
        if sid not in sessions:
            sessions[sid] = _bare_session(sid, belonging)
    document = {
        "version": GO_EXPORT_VERSION,
        "exported_at": go_time(exported_at),
        "sessions": sorted(sessions.values(), key=lambda s: (str(s.get("started_at")), s["id"])),
        "observations": sorted((row for _r, row in observations), key=lambda row: row["id"]),
        "prompts": sorted((row for _r, row in prompts), key=lambda row: row["id"]),
    }
    return GoExport(document)


def _for_go(record: Mapping[str, Any]) -> bool:
    """Tell whether a sync chunk's Go view carries a record (see ``go_chunk_rows``)."""
    if record.get("source") != GO_SOURCE:
        return True
    if record.get("kind") in ("session", "prompt"):
        return False
    own = _go(record).get("sync_id")
    return isinstance(own, str) and bool(own.strip())


def go_chunk_rows(
    records: Iterable[Record],
    *,
    name: GoName | None = None,
    go_has: Collection[str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Return records as the ``sessions``, ``observations`` and ``prompts`` of a Go sync chunk.

    Go engram's view of the records a sync chunk holds, which Go reads while ignoring engram's
    own copy next to it (``engram.sync.chunkform``). Rows as ``go_document`` writes them, with
    three differences. A tombstone (hard ones too, with empty title and content) is an
    observation row with ``deleted_at``: Go soft-deletes the row it has under that ``sync_id``
    and creates nothing when it has none. Records that came from Go are not repeated, except
    observations whose Go ``sync_id`` is known: they go out under it, and Go updates its own row
    (a record Go knows by no ``sync_id``, a Go session or prompt, would make a copy there). A
    session row is written for each session a live row names; one made up for engram's
    memories, never one Go had and engram kept no row of (Go's import would overwrite its
    directory; its own chunks carry it). ``name``: as for ``go_document``.

    ``go_has``: the ids an earlier chunk of this repository carried already (the exporting
    sync knows them). A change of such a memory, and of a Go observation with its ``sync_id``,
    is a change of a row Go has: it goes out in the ``mutations`` journal only (an upsert or a
    delete keyed by the ``sync_id``), which Go engram versions with sync_ids apply, and not as
    a row, which Go engram 1.7 (no sync_id; every row it imports is a new one) would add as a
    second copy. A ``mutations`` key is there only when it has entries.
    """
    if name is not None:
        records = name.applied(records)
    observations: list[tuple[Record, dict[str, Any]]] = []
    prompts: list[tuple[Record, dict[str, Any]]] = []
    changes: list[tuple[Record, dict[str, Any]]] = []
    for record in sorted(records, key=lambda r: str(r.get("id", ""))):
        if not _for_go(record):
            continue
        if record.get("kind") == "prompt":
            if not is_tombstone(record):  # Go's prompts have no soft delete
                prompts.append((record, _prompt(record)))
            continue
        if go_has is not None and (
            record.get("source") == GO_SOURCE or str(record.get("id")) in go_has
        ):
            changes.append((record, _observation(record)))
            continue
        observations.append((record, _observation(record)))
    _number(observations + changes)
    _number(prompts)
    members: dict[str, list[tuple[Record, dict[str, Any]]]] = {}
    for record, row in observations + prompts + changes:
        if is_tombstone(record):
            continue  # a delete names no session Go must have
        kept = _go(record).get("session")
        if record.get("source") == GO_SOURCE and not isinstance(kept, Mapping):
            continue  # Go's own session: in Go's store and its chunks already
        members.setdefault(row["session_id"], []).append((record, row))
    sessions = [_bare_session(sid, belonging) for sid, belonging in members.items()]
    out = {
        "sessions": sorted(sessions, key=lambda s: (str(s.get("started_at")), s["id"])),
        "observations": sorted((row for _r, row in observations), key=lambda row: row["id"]),
        "prompts": sorted((row for _r, row in prompts), key=lambda row: row["id"]),
    }
    if changes:
        out["mutations"] = [
            _mutation(seq, record, row) for seq, (record, row) in enumerate(changes, start=1)
        ]
    return out


# The fields of Go's observation sync payload (``syncObservationPayload``), in its order.
_PAYLOAD: Final = (
    "sync_id",
    "session_id",
    "type",
    "title",
    "content",
    "tool_name",
    "project",
    "scope",
    "topic_key",
    "revision_count",
    "duplicate_count",
    "last_seen_at",
    "created_at",
    "updated_at",
)


def _mutation(seq: int, record: Record, row: Mapping[str, Any]) -> dict[str, Any]:
    """Return a change of an observation Go has as an entry of Go's ``mutations`` journal."""
    deleted = is_tombstone(record)
    payload: dict[str, Any] = {key: row[key] for key in _PAYLOAD if row.get(key) is not None}
    if deleted:
        payload["deleted"] = True
        payload["deleted_at"] = row.get("deleted_at")
        payload["hard_delete"] = "title" not in record and "content" not in record
    return {
        "seq": seq,
        "entity": "observation",
        "entity_key": row["sync_id"],
        "op": "delete" if deleted else "upsert",
        "payload": json.dumps(payload, ensure_ascii=False, separators=(",", ":")),
        "project": row.get("project") or "",
        "occurred_at": go_time(record.get("deleted_at") if deleted else record.get("updated_at"))
        or "",
    }
