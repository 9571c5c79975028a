"""Which engram record a Go engram row is: the keys rows and records are found by.

``engram.formats.goimport`` converts Go rows and asks ``GoKnown`` (what the stores hold) which
record each is; ``engram.formats.goexport`` names records as Go knows them (``sync_id_of``,
``go_session_of``). The keys (docs/decisions.md, "Go engram both ways" and "A mixed team"):

- ``id:`` and ``sync:``: a record's id and the sync_ids Go may know it by (Go's own, else
  ``obs-`` + the id's 32 hex digits).
- For records that came from Go (``row_keys``): its Go row (session, creation time and Go id),
  its session and creation time, its session, time and content, its topic key.
- For engram's own memories (``own_keys``): its creation second and the session its Go row
  names, its creation second and text; Go engram 1.7 drops our sync_id and renumbers rows, but
  keeps those.

Keys marked unique-only name a record only while one record has them. Pure: no I/O.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from engram.errors import InvalidInput
from engram.model import (
    Record,
    format_time,
    id_hex,
    is_tombstone,
    normalize_content,
    parse_time,
    scope_of,
)

__all__ = [
    "GO_SOURCE",
    "GoKnown",
    "carried_id",
    "entity_of",
    "go_fields",
    "go_session_of",
    "identity_keys",
    "own_keys",
    "own_memory",
    "row_keys",
    "second_of",
    "sync_id_of",
    "text_hash",
]

GO_SOURCE: Final = "import:go-engram"  # the source of a record imported from Go engram
_CARRIED: Final = re.compile(r"^(obs|prompt)-([0-9a-f]{32})$")
# Keys that name a record only while one record has them (two saves in one second).
_UNIQUE_ONLY: Final = (":at:", ":same:", ":ownat:", ":owntitle:", ":owncontent:", ":ownsame:")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entity_of(record: Mapping[str, Any]) -> str:
    """Return which of Go's entities a record is to Go: ``prompt``, ``session`` or ``obs``."""
    if record.get("kind") == "prompt":
        return "prompt"
    if record.get("kind") == "session" and isinstance(record.get("session"), Mapping):
        return "session"  # a Go session row: known by its session id
    return "obs"


def go_fields(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return the Go row fields a record keeps in ``go`` (empty when it has none)."""
    go = record.get("go")
    return go if isinstance(go, Mapping) else {}


def sync_id_of(record: Mapping[str, Any]) -> str:
    """Return the sync_id Go engram knows a memory by: Go's own, else ``obs-`` + its 32 hex."""
    own = go_fields(record).get("sync_id")
    if isinstance(own, str) and own.strip():
        return own.strip()
    prefix = "prompt" if record.get("kind") == "prompt" else "obs"
    return f"{prefix}-{id_hex(str(record.get('id', '')))}"


def carried_id(sync_id: str) -> str | None:
    """Return the engram id a sync_id ``obs-<32 hex>`` names (engram's memory carried by Go)."""
    match = _CARRIED.match(sync_id.strip())
    if match is None:
        return None
    return base64.b32encode(bytes.fromhex(match.group(2))).decode("ascii").rstrip("=").lower()


def row_keys(entity: str, record: Mapping[str, Any]) -> list[str]:
    """Return the keys a Go row finds this record by, besides its id and sync_id."""
    keys: list[str] = []
    session = str(record.get("session_id") or "")
    created = str(record.get("created_at") or "")
    go_id = go_fields(record).get("id")
    if session and created:
        if isinstance(go_id, int) and not isinstance(go_id, bool):
            keys.append(f"{entity}:row:{session}|{created}|{go_id}")
        keys.append(f"{entity}:at:{session}|{created}")
        content = record.get("content")
        if isinstance(content, str) and content.strip():
            keys.append(f"{entity}:same:{session}|{created}|{_sha(normalize_content(content))}")
    topic = record.get("topic_key")
    if entity == "obs" and topic and not is_tombstone(record):
        project, scope = record.get("project") or "", scope_of(record)
        keys.append(f"obs:topic:{project}|{scope}|{topic}")
    return keys


def identity_keys(record: Mapping[str, Any]) -> list[str]:
    """Return every key a Go row may find this record by (its id, sync ids, natural keys)."""
    record_id = str(record.get("id", ""))
    keys = [f"id:{record_id}"]
    entity = entity_of(record)
    if entity == "session":
        session = record.get("session_id")
        if isinstance(session, str) and session.strip():
            keys.append(f"session:{session.strip()}")  # Go's row of it, whoever wrote it
        return keys
    prefix = "prompt" if entity == "prompt" else "obs"
    for sync_id in (sync_id_of(record), f"{prefix}-{id_hex(record_id)}"):
        if f"sync:{sync_id}" not in keys:
            keys.append(f"sync:{sync_id}")
    if record.get("source") == GO_SOURCE:
        # Natural keys only for what came from Go: a new Go row never lands on a memory that
        # engram wrote itself unless it names it by sync_id, or is it come back (below).
        keys += row_keys(entity, record)
    else:
        keys += own_keys(entity, record)
    return keys


def second_of(value: object) -> str:
    """Return a time to the second, as a Go row keeps it (``YYYY-MM-DDTHH:MM:SS``), or ""."""
    text = str(value or "")
    try:
        return format_time(parse_time(text))[:19] if text else ""
    except (InvalidInput, ValueError):
        return ""


def text_hash(entity: str, record: Mapping[str, Any]) -> str:
    """Return the hash of what a Go row keeps of a memory's text (a prompt: only its content)."""
    title = "" if entity == "prompt" else " ".join(str(record.get("title") or "").split())
    return _sha(title + "\x1f" + normalize_content(str(record.get("content") or "")))


def go_session_of(record: Mapping[str, Any]) -> str:
    """Return the session a memory's Go row names: its own, else one made up for its project."""
    sid = record.get("session_id")
    if isinstance(sid, str) and sid.strip():
        return sid
    project = record.get("project")
    return f"engram-{project}" if project else "engram"  # Go needs one; engram may have none


def own_keys(entity: str, record: Mapping[str, Any]) -> list[str]:
    """Return the keys engram's own memory is found by when it comes back through Go v1.7.

    Go engram 1.7 keeps no ``sync_id`` and gives every row it imports a new id, but keeps its
    creation time (to the second), session, title and content as written. So a row without an
    engram ``sync_id`` is one of engram's memories come back when it has the memory's creation
    second and session, and, while more than one memory has those (saved in one second), its
    title (an edit in Go changed the content) or its content (it changed the title), or its
    creation second and whole text. Each key names a memory only while one memory has it.
    Sessions are not memories Go writes back: no key.
    """
    if entity == "session":
        return []
    created = second_of(record.get("created_at"))
    if not created:
        return []
    at = f"{created}|{go_session_of(record).strip()}"
    keys = [f"{entity}:ownat:{at}"]
    if "title" in record or "content" in record:
        if entity != "prompt":  # a prompt's title is made from its content
            title = " ".join(str(record.get("title") or "").split())
            keys.append(f"{entity}:owntitle:{at}|{_sha(title)}")
        content = normalize_content(str(record.get("content") or ""))
        keys.append(f"{entity}:owncontent:{at}|{_sha(content)}")
        keys.append(f"{entity}:ownsame:{created}|{text_hash(entity, record)}")
    return keys


class GoKnown:
    """What the stores already hold, as Go rows find it: records by id and by Go identity.

    Built by the service from the project and personal stores' records; ``convert_go`` adds
    what it converted, so the chunks of one sync find each other's rows.
    """

    def __init__(self, records: Iterable[Mapping[str, Any]] = ()) -> None:
        self.records: dict[str, Record] = {}
        self._keys: dict[str, str] = {}
        self._shared: set[str] = set()
        self.add(records)

    def add(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Learn records (a later version of an id replaces the earlier one)."""
        for record in records:
            record_id = record.get("id")
            if not isinstance(record_id, str):
                continue
            self.records[record_id] = dict(record)
            for key in identity_keys(record):
                self._put(key, record_id)

    def _put(self, key: str, record_id: str) -> None:
        if key in self._shared:
            return
        prior = self._keys.setdefault(key, record_id)
        if prior != record_id and any(mark in key for mark in _UNIQUE_ONLY):
            del self._keys[key]
            self._shared.add(key)

    def find(
        self, keys: Iterable[str], accept: Callable[[str, Record], bool] | None = None
    ) -> str | None:
        """Return the id of the first key known (whose record ``accept(key, record)``), or None."""
        for key in keys:
            found = self._keys.get(key)
            if found is None:
                continue
            if accept is None or accept(key, self.records.get(found, {})):
                return found
        return None

    def get(self, record_id: str) -> Record | None:
        """Return the record known by this id, or None."""
        return self.records.get(record_id)


def own_memory(entity: str, live: Record, known: GoKnown) -> str | None:
    """Return the id of engram's own memory a Go row without sync_id is, come back, or None.

    Found by ``own_keys`` (the row's converted record has what the memory's Go row had). A
    forgotten memory counts too, so its live copy in Go does not come back to life here.
    """

    def ours(_key: str, record: Record) -> bool:
        return record.get("source") != GO_SOURCE

    return known.find(own_keys(entity, live), ours)
