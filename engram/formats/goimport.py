"""Go engram rows into engram records, under identities that survive edits and upgrades.

Converts a Go engram export or sync chunk (already parsed: ``sessions``, ``observations``,
``prompts``, maybe a ``mutations`` journal) into engram records. ``engram.formats.convert`` detects
the format and calls ``convert_go``; ``engram.formats.goexport`` writes records back in Go's shape.

What a record keeps of its Go row (docs/decisions.md, "Go engram both ways"): the fields
engram has its own place for (title, content, type as written next to the kind it ranks as,
scope, topic_key, tool_name, session_id, times, soft delete), and in ``go`` every other field
as written: ``id`` (Go's integer), ``sync_id``, ``revision_count``, ``duplicate_count``,
``last_seen_at``, ``review_after``, ``pinned``, a project spelled otherwise, unknown keys, and
``session``: the row of its session when that session has no summary (so it is no memory of
its own). Nulls are left out. Rows without a project keep none (nothing takes the importing
folder's name); the conversion says how many.

Which record a row is (first found wins):

1. ``sync_id`` ``obs-<32 hex>``: one of engram's own memories carried through Go (the id's 128
   bits); a row about a memory that exists (``known``) changes only its title, content, type,
   scope and topic key, and only when the row is newer and differs, so Go's row never erases
   engram's richer fields.
   A row without such a sync_id (Go engram 1.7 drops it and renumbers rows) is one of
   engram's own memories come back when ``engram.formats.goknown.own_keys`` find it (creation
   second and session, or creation second and text); a forgotten one stays forgotten.
2. A record ``known`` already (the stores' records, passed in by the service): by the row's
   ``sync_id``, its Go row (session, creation time and Go id), its topic key (project, scope,
   topic_key), its session and creation time or its session, creation time and content (when
   only one record has them), or the content hash older engram versions derived ids from. So a
   Go upgrade that fills in random sync_ids, and an upgrade of engram, duplicate nothing.
3. Else an id derived from what does not change on an edit: the sync_id; else the topic key;
   else project, session, creation time and Go id.

Rows of one record in one document collapse into its newest version (the notes say so). Pure:
no I/O and no clock; ``known`` learns the records converted, so the next chunk finds them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from engram.errors import InvalidInput
from engram.formats.common import (
    MAX_CONTENT_BYTES,
    Converted,
    clip_title,
    count_of,
    files_of,
    finish_record,
    first_line,
    import_id,
    sha_hex,
    summary_line,
    text_of,
    time_of,
)
from engram.formats.goknown import (
    GO_SOURCE,
    GoKnown,
    carried_id,
    go_fields,
    go_session_of,
    identity_keys,
    own_keys,
    own_memory,
    row_keys,
    sync_id_of,
)
from engram.model import (
    Record,
    check_unicode,
    format_time,
    id_hex,
    is_tombstone,
    kind_and_type,
    loads,
    normalize_content,
    normalize_project,
    parse_time,
    rev_of,
    scope_of,
    type_of,
)

__all__ = [
    "GoKnown",
    "carried_id",
    "convert_go",
    "go_session_of",
    "id_hex",
    "identity_keys",
    "own_keys",
    "sync_id_of",
]

_GO_ENTITIES: Final = {"observation": "observations", "session": "sessions", "prompt": "prompts"}
# Row keys a record holds in its own fields; every other key of a row goes into ``go``.
_OBS_OWN: Final = frozenset(
    {"title", "content", "type", "scope", "topic_key", "tool_name", "session_id"}
    | {"created_at", "updated_at", "deleted_at", "deleted", "hard_delete"}
)
_PROMPT_OWN: Final = frozenset(
    {"content", "session_id", "created_at", "updated_at", "deleted_at", "deleted", "hard_delete"}
)
_SESSION_OWN: Final = frozenset(
    {"id", "summary", "directory", "started_at", "ended_at", "updated_at", "deleted_at"}
    | {"deleted", "hard_delete"}
)


# ── rows ─────────────────────────────────────────────────────────────────────────────────────


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
    carried: bool


def _legacy_key(entity: str, row: Mapping[str, Any], project: str) -> str:
    """Return the content-hash key engram derived ids from before stable identities."""
    sync_id = text_of(row.get("sync_id")).strip()
    name = "obs" if entity == "observation" else "prompt"
    if sync_id:
        return f"go-engram:{name}:{sync_id}"
    parts = [
        normalize_project(text_of(row.get("project"))) or project,
        text_of(row.get("session_id")),
    ]
    parts[1] = parts[1].strip()
    if entity == "observation":
        parts += [
            text_of(row.get("type")).strip().lower(),
            " ".join(text_of(row.get("title")).split()),
        ]
    parts.append(sha_hex(normalize_content(text_of(row.get("content")))))
    return f"go-engram:{name}:" + sha_hex("\x1f".join(parts))


def _file_key(entity: str, row: Mapping[str, Any], project: str) -> str:
    """Return the key that chains one entity's rows and mutations inside one document."""
    if entity == "session":
        sid = text_of(row.get("id")).strip()
        if not sid:
            raise InvalidInput("no session id")
        return f"session:{sid}"
    return _legacy_key(entity, row, project)


def _meta(row: Mapping[str, Any], own: frozenset[str], record: Mapping[str, Any]) -> dict[str, Any]:
    """Return a row's fields the record has no place for, as written (nulls left out)."""
    meta = {key: value for key, value in row.items() if key not in own and value is not None}
    raw = meta.pop("project", None)
    if isinstance(raw, str) and raw and raw != record.get("project"):
        meta["project"] = raw  # spelled otherwise ("Demo App"): written back as it was
    return meta


def _deleted_at(row: Mapping[str, Any]) -> str | None:
    value = row.get("deleted_at")
    if value in (None, ""):
        return None
    return time_of(value)


def _times(row: Mapping[str, Any], created_key: str, *updated_keys: str) -> tuple[str, str]:
    created_raw = row.get(created_key)
    updated_raw = next((row[key] for key in updated_keys if row.get(key)), None)
    if not created_raw and not updated_raw:
        raise InvalidInput(f"no {created_key}")
    created = time_of(created_raw) if created_raw else time_of(updated_raw)
    updated = time_of(updated_raw) if updated_raw else created
    return created, max(created, updated)


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
        return {
            "id": record["id"],
            "rev": base_rev + 1,
            "updated_at": updated_at,
            "deleted_at": deleted_at,
        }
    return {**record, "rev": base_rev + 1, "updated_at": updated_at, "deleted_at": deleted_at}


def _observation(row: Mapping[str, Any]) -> tuple[Record, int]:
    """Return an observation row as a live record without an id, and its rev."""
    base_rev = max(count_of(row.get("revision_count")) or 1, 1)
    created, updated = _times(row, "created_at", "updated_at")
    content = text_of(row.get("content"))
    title = " ".join(text_of(row.get("title")).split()) or clip_title(first_line(content))
    kind, written = kind_and_type(text_of(row.get("type")))
    record: Record = {
        "kind": kind,
        "title": title,
        "content": content,
        "scope": "personal"
        if text_of(row.get("scope")).strip().lower() == "personal"
        else "project",
        "source": GO_SOURCE,
        "created_at": created,
        "updated_at": updated,
        "rev": base_rev,
    }
    if written is not None:
        record["type"] = written
    project = normalize_project(text_of(row.get("project")))
    if project:
        record["project"] = project
    for key in ("topic_key", "session_id", "tool_name"):
        text = text_of(row.get(key)).strip()
        if text:
            record[key] = text
    duplicates = count_of(row.get("duplicate_count"))
    if duplicates is not None and duplicates > 1:
        # Go counts the first save (a fresh row has 1); engram counts only the re-saves.
        record["duplicate_count"] = duplicates - 1
    files = files_of(row)
    if files:
        record["files"] = files
    meta = _meta(row, _OBS_OWN, record)
    if meta:
        record["go"] = meta
    return record, base_rev


def _prompt(row: Mapping[str, Any]) -> tuple[Record, int]:
    content = text_of(row.get("content"))
    created, updated = _times(row, "created_at", "updated_at")
    record: Record = {
        "kind": "prompt",
        "title": clip_title(first_line(content)) or "Prompt",
        "content": content,
        "scope": "project",
        "source": GO_SOURCE,
        "created_at": created,
        "updated_at": updated,
        "rev": 1,
    }
    project = normalize_project(text_of(row.get("project")))
    if project:
        record["project"] = project
    session_id = text_of(row.get("session_id")).strip()
    if session_id:
        record["session_id"] = session_id
    meta = _meta(row, _PROMPT_OWN, record)
    if meta:
        record["go"] = meta
    return record, 1


def _session(row: Mapping[str, Any]) -> tuple[Record, int]:
    sid = text_of(row.get("id")).strip()
    summary = text_of(row.get("summary"))
    created, updated = _times(row, "started_at", "updated_at", "ended_at")
    session = {
        key: time_of(row[key]) if key.endswith("_at") else text_of(row[key]).strip()
        for key in ("started_at", "ended_at", "directory")
        if row.get(key) not in (None, "")
    }
    record: Record = {
        "kind": "session",
        "title": clip_title(f"Session: {summary_line(summary) or sid}"),
        "content": summary,
        "scope": "project",
        "source": GO_SOURCE,
        "session_id": sid,
        "session": {key: value for key, value in session.items() if value},
        "created_at": created,
        "updated_at": updated,
        "rev": 1,
    }
    project = normalize_project(text_of(row.get("project")))
    if project:
        record["project"] = project
    meta = _meta(row, _SESSION_OWN, record)
    if meta:
        record["go"] = meta
    return record, 1


_CONVERTERS: Final[dict[str, Callable[[Mapping[str, Any]], tuple[Record, int]]]] = {
    "observation": _observation,
    "session": _session,
    "prompt": _prompt,
}


def _sort_time(row: Mapping[str, Any], *keys: str) -> str:
    """Return a row's newest time for last-writer-wins ordering ('' when none parses)."""
    for key in keys:
        try:
            return time_of(row.get(key))
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
        if not isinstance(mutation, Mapping):
            skipped.append(f"mutations[{position}]: not a JSON object")
            continue
        seq = count_of(mutation.get("seq"))
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
            check_unicode(mutation)
            occurred = time_of(mutation.get("occurred_at"))
            entity_key = text_of(mutation.get("entity_key")).strip()
            key_field = "id" if entity == "session" else "sync_id"
            if entity_key and not payload.get(key_field):
                payload[key_field] = entity_key
            key = _file_key(entity, payload, project)
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
                row["revision_count"] = max(count_of(prior.get("revision_count")) or 1, 1) + 1
        latest[key] = row
        rows.append((key, _Row(entity, where, row)))
    return rows


def _rows(obj: Mapping[str, Any], project: str, skipped: list[str]) -> list[_Row]:
    """Return every row version of a document: its arrays, then its mutation journal."""
    keyed: list[tuple[str, _Row]] = []
    for entity, array in _GO_ENTITIES.items():
        items = obj.get(array)
        if items is None:
            continue
        if not isinstance(items, list):
            skipped.append(f"{array}: not a list")
            continue
        for position, item in enumerate(items):
            where = f"{array}[{position}]"
            if not isinstance(item, dict):
                skipped.append(f"{where}: not a JSON object")
                continue
            try:
                check_unicode(item)
                keyed.append((_file_key(entity, item, project), _Row(entity, where, item)))
            except InvalidInput as exc:
                skipped.append(f"{where}: {exc.message}")
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
        keyed += _mutation_rows(mutations, latest, project, skipped)
    elif mutations is not None and not isinstance(mutations, list):
        skipped.append("mutations: not a list")
    return [row for _key, row in keyed]


# ── which record a row is ────────────────────────────────────────────────────────────────────


def _resolve(
    row: _Row, live: Record, seen: GoKnown, known: GoKnown | None, default_project: str
) -> tuple[str, bool]:
    """Return the id of the record a row is, and whether it is engram's own memory carried back.

    ``default_project`` is the importing project's: older engram versions filed rows without a
    project under it, so it is part of the content hash they derived ids from.
    """
    project = str(live.get("project") or "")
    entity = "prompt" if row.entity == "prompt" else "obs"
    sync_id = text_of(row.data.get("sync_id")).strip()
    carried = carried_id(sync_id) if sync_id else None
    stores = [seen] if known is None else [seen, known]
    if carried is not None:
        for store in stores:
            found = store.find([f"sync:{sync_id}"])
            if found is not None:
                return found, True
        return carried, True
    if known is not None and not sync_id:
        own = own_memory(entity, live, known)
        if own is not None:
            return own, True
    legacy = import_id(_legacy_key(row.entity, row.data, default_project))
    keys = ([f"sync:{sync_id}"] if sync_id else []) + row_keys(entity, live) + [f"id:{legacy}"]
    go_id = go_fields(live).get("id")
    for store in stores:

        def same_row(key: str, record: Record, store: GoKnown = store) -> bool:
            # Two sync_ids are two rows (an upgrade fills one in only where there was none),
            # and so are two Go ids of one document: a natural key never joins them.
            if key.startswith(("sync:", "obs:topic:")):
                return True
            theirs = go_fields(record)
            kept = theirs.get("sync_id")
            their_sync = kept.strip() if isinstance(kept, str) else ""
            if sync_id and their_sync and their_sync != sync_id:
                return False
            return not (store is seen and go_id is not None and theirs.get("id") != go_id)

        found = store.find(keys, same_row)
        if found is not None:
            return found, False
    if sync_id:
        return import_id(f"go-engram:{entity}:{sync_id}"), False
    topic = live.get("topic_key")
    scope = scope_of(live)
    if entity == "obs" and topic:
        return import_id(f"go-engram:obs:topic:{project}\x1f{scope}\x1f{topic}"), False
    session, created = live.get("session_id"), live.get("created_at")
    go_id = go_fields(live).get("id")
    if entity == "obs" and session and created and go_id is not None:
        return import_id(f"go-engram:obs:row:{project}\x1f{session}\x1f{created}\x1f{go_id}"), False
    return legacy, False


def _carry(existing: Record, incoming: Record) -> Record:
    """Apply a Go row to engram's own memory: its core fields, only when newer and different."""
    if is_tombstone(existing) or incoming["updated_at"] <= str(existing.get("updated_at", "")):
        return existing
    rev = rev_of(existing) + 1
    if is_tombstone(incoming):
        return {
            **existing,
            "rev": rev,
            "updated_at": incoming["updated_at"],
            "deleted_at": incoming["deleted_at"],
        }
    changes: dict[str, Any] = {
        key: incoming.get(key)
        for key in ("title", "content", "scope", "topic_key")
        if incoming.get(key) != existing.get(key)
    }
    if type_of(incoming) != type_of(existing):
        changes["kind"], changes["type"] = incoming["kind"], incoming.get("type")
    if not changes:
        return existing
    out = {**existing, **changes, "rev": rev, "updated_at": incoming["updated_at"]}
    return {key: value for key, value in out.items() if value is not None}


def _learn_sync_id(existing: Record, incoming: Record) -> Record:
    """Give a known record the sync_id Go gave its row since (an upgrade), not a newer text.

    The row is otherwise what the record holds, at the same time, so the merge could keep
    either; one millisecond after the record's own time makes the record with the sync_id win,
    and the next import finds nothing to change.
    """
    learned = go_fields(incoming).get("sync_id")
    if not learned or go_fields(existing).get("sync_id") == learned or is_tombstone(existing):
        return incoming
    if incoming["updated_at"] > str(existing.get("updated_at", "")):
        return incoming  # a newer row wins the merge anyway
    stamp = parse_time(str(existing["updated_at"])) + timedelta(milliseconds=1)
    go = {**go_fields(existing), "sync_id": learned}
    return {**existing, "go": go, "updated_at": format_time(stamp)}


# ── the conversion ───────────────────────────────────────────────────────────────────────────


def _bare_sessions(rows: list[_Row]) -> dict[str, tuple[dict[str, Any], list[str]]]:
    """Return the sessions no version of which has a summary: their row and where each was."""
    summarised: set[str] = set()
    bare: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for row in rows:
        if row.entity != "session":
            continue
        try:
            sid = text_of(row.data.get("id")).strip()
            summary = text_of(row.data.get("summary")).strip()
        except InvalidInput:
            continue  # not text: the row's own conversion reports it as skipped
        if summary or row.data.get("deleted_at"):
            summarised.add(sid)
            continue
        kept = {
            key: value
            for key, value in row.data.items()
            if key not in ("summary", "deleted_at") and value is not None
        }
        bare[sid] = (kept, [*bare.get(sid, ({}, []))[1], row.where])
    return {sid: found for sid, found in bare.items() if sid not in summarised}


def _session_record(sid: str, known: GoKnown | None) -> tuple[str, bool]:
    """Return the id of the record a Go session row is, and whether it is engram's own.

    engram's summary of that session when the stores hold one (so a session exported with
    ``export --format go-engram`` comes back onto its summary), else the id its session id gives.
    """
    found = known.find([f"session:{sid}"]) if known is not None and sid else None
    if found is not None and known is not None:
        return found, (known.get(found) or {}).get("source") != GO_SOURCE
    return import_id(f"go-engram:session:{sid}"), False


def _quiet_session(
    row: _Row, bare: Mapping[str, object], quiet: dict[str, list[str]], known: GoKnown | None
) -> bool:
    """Say whether a session row makes no record: summary-less (noted in ``quiet``) or bare.

    A row whose id or summary is not text makes a record attempt, whose conversion skips it.
    """
    try:
        sid = text_of(row.data.get("id")).strip()
        summary = text_of(row.data.get("summary")).strip()
    except InvalidInput:
        return False
    if sid in bare:
        return True
    if not summary and not row.data.get("deleted_at"):
        quiet.setdefault(_session_record(sid, known)[0], []).append(row.where)
        return True
    return False


def _alias(live: Record, row: Mapping[str, Any], project: str, aliases: frozenset[str]) -> None:
    """File a row Go named after the folder under this project; its spelling stays in ``go``."""
    if project and live.get("project") in aliases:
        live["project"] = project
        live.setdefault("go", {})["project"] = text_of(row.get("project"))


def convert_go(
    obj: Mapping[str, Any],
    *,
    project: str,
    fmt: str = "go-engram-export",
    max_content_bytes: int = MAX_CONTENT_BYTES,
    known: GoKnown | None = None,
    go_names: Iterable[str] = (),
) -> Converted:
    """Convert a Go engram export or sync chunk (already parsed) into engram records.

    ``known``: the records the stores hold (the service builds it); rows land on them (see the
    module's docstring) and it learns the records converted here. ``project`` is only named in
    the note about rows without a project: they keep none. ``go_names``: what Go engram calls
    this project (the folder's base name, which Go names projects by): rows of those projects
    are this project's (the name Go gave them kept in ``go``, for the way back).
    """
    skipped: list[str] = []
    notes: list[str] = []
    default_project = normalize_project(project)
    aliases = frozenset(normalize_project(n) for n in go_names if n.strip()) - {default_project}
    rows = _rows(obj, default_project, skipped)
    bare = _bare_sessions(rows)
    attached: dict[str, int] = {}
    seen = GoKnown()
    groups: dict[str, list[_Candidate]] = {}
    unprojected = 0
    quiet: dict[str, list[str]] = {}  # summary-less versions of a session summarised elsewhere
    for position, row in enumerate(rows):
        if row.entity == "session" and _quiet_session(row, bare, quiet, known):
            continue
        try:
            live, base_rev = _CONVERTERS[row.entity](row.data)
            _alias(live, row.data, default_project, aliases)
            if row.entity == "session":
                record_id, carried = _session_record(str(live["session_id"]), known)
            else:
                record_id, carried = _resolve(row, live, seen, known, default_project)
            live["id"] = record_id
            sid = str(live.get("session_id") or "")
            if row.entity != "session" and sid in bare:
                live.setdefault("go", {})["session"] = bare[sid][0]
                attached[sid] = attached.get(sid, 0) + 1
            record = _live_or_tombstone(live, row.data, base_rev, bool(live["content"].strip()))
            record = finish_record(record, max_content_bytes)
        except InvalidInput as exc:
            skipped.append(f"{row.where}: {exc.message}")
            continue
        if not is_tombstone(record) and not record.get("project"):
            unprojected += 1
        seen.add([{**live, "id": record_id}])
        candidate = _Candidate(record, base_rev, position, row.where, carried)
        groups.setdefault(record_id, []).append(candidate)

    for sid, (_info, wheres) in sorted(bare.items()):
        count = attached.get(sid, 0)
        reason = (
            f"session {sid!r} has no summary, so it is no memory; its row is kept on its "
            f"{count} observations and prompts here for export --format go-engram"
            if count
            else f"session {sid!r} has no summary and nothing here belongs to it"
        )
        skipped += [f"{where}: {reason}" for where in wheres]
    if unprojected:
        rows_have = "1 row has" if unprojected == 1 else f"{unprojected} rows have"
        notes.append(
            f"{rows_have} no project: kept without one, not filed under this project "
            f"({default_project!r}); recall in this store still finds them"
        )

    records: list[Record] = []
    collapsed: list[str] = []
    folded = 0
    for record_id in sorted(groups):
        versions = groups[record_id]
        # Last writer wins by updated_at (a later row of the document on a tie).
        winner = max(versions, key=lambda c: (c.record["updated_at"], c.position))
        record = dict(winner.record)
        top = max(c.base_rev for c in versions)
        # The winner outranks every other row of its id; a tombstone outranks the live ones.
        record["rev"] = max(record["rev"], top + (1 if is_tombstone(record) else 0))
        existing = known.get(record_id) if known is not None else None
        if winner.carried and existing is not None:
            record = _carry(existing, record)
        elif existing is not None:
            record = _learn_sync_id(existing, record)
        records.append(record)
        wheres = [c.where for c in sorted(versions, key=lambda c: c.position)]
        wheres += quiet.get(record_id, [])
        if len(wheres) > 1:
            folded += len(wheres)
            collapsed.append("+".join(wheres))
    if collapsed:
        shown = "; ".join(collapsed[:10]) + (" …" if len(collapsed) > 10 else "")
        notes.append(
            f"collapsed {folded} rows into {len(collapsed)} "
            f"{'memory' if len(collapsed) == 1 else 'memories'} (rows of one Go identity; "
            f"the newest kept): {shown}"
        )
    if known is not None:
        known.add(records)
    return Converted(records, skipped, fmt, notes)
