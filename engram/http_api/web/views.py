"""What each web page shows, read through the facade: dashboard, search, a memory, a session.

Each function takes the open ``Engram`` and returns plain data for a template; the routes run
it in the facade's worker thread, one call at a time. Ranking, lineage, neighbours, timeline,
versions and staleness are the facade's (``recall``, ``why``, ``related``, ``timeline``,
``log``, ``stale``): this module only picks what a page shows. It renders no HTML and knows
nothing of HTTP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from engram.errors import EngramError
from engram.model import is_pinned, status_of
from engram.operations.views import HitView, is_candidate, provenance

if TYPE_CHECKING:
    from engram.service import Engram, Lineage

CANDIDATES: Final = 50
SESSIONS: Final = 8
HOTSPOTS: Final = 10
RELATED: Final = 10
AROUND: Final = 5
VERSIONS: Final = 20
SESSION_AROUND: Final = 200


@dataclass
class Row:
    """A memory in a list: a label (relation, score, date), its id, kind, status and title."""

    label: str
    id: str
    kind: str
    status: str
    title: str
    note: str = ""

    @classmethod
    def of(cls, label: str, item: Mapping[str, Any], note: str = "") -> Row:
        """Return the row of a memory summary or record."""
        return cls(
            label=label,
            id=str(item.get("id", "")),
            kind=str(item.get("kind") or ""),
            status=status_of(item),
            title=str(item.get("title") or ""),
            note=note,
        )


@dataclass
class Counts:
    """The dashboard's counts over every store."""

    project: str
    total: int
    stores: list[tuple[str, int]]
    by_kind: list[tuple[str, int]]
    by_status: list[tuple[str, int]]
    top_tags: list[tuple[str, int]]


def _ordered(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def counts(engram: Engram) -> Counts:
    """Return memories by store, kind, status and tag (``stats``)."""
    stats = engram.stats()
    by_kind: dict[str, int] = {}
    by_status: dict[str, int] = {}
    tags: dict[str, int] = {}
    for store in stats.stores:
        for target, source in ((by_kind, store.by_kind), (by_status, store.by_status)):
            for key, value in source.items():
                target[key] = target.get(key, 0) + value
        for key, value in store.top_tags.items():
            tags[key] = tags.get(key, 0) + value
    return Counts(
        project=stats.project,
        total=sum(store.memories for store in stats.stores),
        stores=[(store.scope, store.memories) for store in stats.stores],
        by_kind=_ordered(by_kind),
        by_status=_ordered(by_status),
        top_tags=_ordered(tags)[:10],
    )


def hotspots(engram: Engram) -> list[tuple[str, str]]:
    """Return the code hotspots the git indexer found (path, changes), most changed first."""
    record = engram.hotspots()
    if record is None:
        return []
    spots = [s for s in record.get("hotspots") or [] if isinstance(s, Mapping)]
    return [(str(s.get("path", "")), str(s.get("changes", "?"))) for s in spots[:HOTSPOTS]]


def dashboard(engram: Engram) -> dict[str, Any]:
    """Return the dashboard: counts, hotspots, pitfall candidates and recent sessions."""
    found = engram.recall("", kinds=["pitfall"], statuses=["proposed"], limit=CANDIDATES)
    candidates = [
        Row.of(str(hit.record.get("source", "")), hit.record, provenance(hit.record))
        for hit in found
        if is_candidate(hit.record)
    ]
    sessions = [hit.record for hit in engram.recall("", kinds=["session"], limit=SESSIONS * 2)]
    sessions.sort(key=lambda r: str(r.get("created_at") or ""), reverse=True)
    return {
        "counts": counts(engram),
        "hotspots": hotspots(engram),
        "candidates": candidates,
        "sessions": [
            Row.of(str(r.get("created_at", ""))[:16].replace("T", " "), r)
            for r in sessions[:SESSIONS]
        ],
    }


def search(engram: Engram, arguments: Mapping[str, Any]) -> list[HitView]:
    """Return the facade's finished views of recall's hits for a search form's arguments."""
    return engram.recall_views(**arguments)


def why_rows(lineage: Lineage) -> list[Row]:
    """Return the memories a lineage names: supersede chains first, then other links."""
    rows: list[Row] = []
    for entry in lineage.supersedes:
        label = "supersedes" if entry.depth == 1 else f"supersedes (×{entry.depth})"
        rows.append(Row.of(label, entry.to_dict()))
    for entry in lineage.superseded_by:
        label = "superseded by" if entry.depth == 1 else f"superseded by (×{entry.depth})"
        rows.append(Row.of(label, entry.to_dict()))
    for link in lineage.links_out:
        if link.rel != "supersedes":  # already in the chain above
            rows.append(Row.of(link.rel, link.to_dict()))
    for link in lineage.links_in:
        if link.rel != "supersedes":
            rows.append(Row.of(f"{link.rel} (in)", link.to_dict()))
    return rows


@dataclass
class VersionRow:
    """One version of a memory in git: the commit, who, when, what changed."""

    commit: str
    author: str
    date: str
    message: str
    change: str
    title: str
    rev: str


@dataclass
class Section:
    """A part of a page that may be unavailable (say, versions outside a git repository)."""

    rows: list[Any] = field(default_factory=list)
    error: str = ""


def _section(read: Any) -> Section:
    try:
        return Section(list(read()))
    except EngramError as exc:
        return Section(error=f"{exc.message} ({exc.hint})" if exc.hint else exc.message)


def memory(engram: Engram, ref: str) -> dict[str, Any]:
    """Return a memory's page: the record, why chain, related, timeline, versions, staleness."""
    record = dict(engram.get(ref))
    rid = str(record["id"])
    lineage = engram.why(rid)
    timeline = engram.timeline(rid, before=AROUND, after=AROUND)
    around = [Row.of(f"before · {_day(e.created_at)}", e.to_dict()) for e in timeline.before]
    around.append(Row.of(f"this · {_day(timeline.memory.created_at)}", timeline.memory.to_dict()))
    around += [Row.of(f"after · {_day(e.created_at)}", e.to_dict()) for e in timeline.after]

    def versions() -> Iterable[VersionRow]:
        for version in engram.log(rid, limit=VERSIONS):
            line = version.record or {}
            yield VersionRow(
                commit=version.commit[:10],
                author=version.author,
                date=_day(version.date),
                message=version.message,
                change=version.change,
                title=str(line.get("title") or ""),
                rev=str(line.get("rev") or ""),
            )

    return {
        "memory": record,
        "pinned": is_pinned(record),
        "candidate": is_candidate(record),
        "stale": engram.stale(record),
        "provenance": lineage.provenance,
        "judgements": lineage.judgements,
        "history": [h for h in record.get("history") or [] if isinstance(h, Mapping)],
        "why": why_rows(lineage),
        "dangling": [note.to_dict() for note in lineage.dangling],
        "related": [
            Row.of(item.reason or "related", item.to_dict())
            for item in engram.related(rid, limit=RELATED)
        ],
        "timeline": around,
        "timeline_scope": timeline.scope,
        "session_id": timeline.session_id,
        "versions": _section(versions),
    }


def session(engram: Engram, ref: str) -> dict[str, Any]:
    """Return the session a memory belongs to: its log entry, summary and memories in order."""
    record = dict(engram.get(ref))
    timeline = engram.timeline(str(record["id"]), before=SESSION_AROUND, after=SESSION_AROUND)
    entries = [*timeline.before, timeline.memory, *timeline.after]
    summary: Mapping[str, Any] | None = record if record.get("kind") == "session" else None
    if summary is None and timeline.scope == "session":
        first = next((e for e in entries if e.kind == "session"), None)
        summary = engram.get(first.id) if first is not None else None
    return {
        "memory": record,
        "scope": timeline.scope,
        "session_id": timeline.session_id,
        "logged": dict(timeline.session or {}),
        "summary": summary,
        "entries": [Row.of(_day(e.created_at), e.to_dict()) for e in entries],
        "earlier": timeline.earlier,
        "later": timeline.later,
    }


def _day(stamp: object, *, minutes: bool = True) -> str:
    """Return an RFC 3339 time as ``2026-01-31 14:05`` (its date alone without minutes)."""
    text = str(stamp or "")
    return text[:16].replace("T", " ") if minutes else text[:10]


def review(engram: Engram) -> dict[str, Any]:
    """Return the review inbox: the proposed memories, oldest first, with their provenance."""
    items = []
    for record in engram.review().items:
        capture = record.get("capture") if isinstance(record.get("capture"), Mapping) else {}
        where = f"{capture.get('agent')} line {capture.get('line')}" if capture else ""
        items.append(
            {
                "row": Row.of(str(record.get("source") or ""), record, "proposed, not reviewed"),
                "content": str(record.get("content") or ""),
                "files": [str(path) for path in record.get("files") or []],
                "where": where,
            }
        )
    return {"items": items}
