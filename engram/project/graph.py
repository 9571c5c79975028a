"""The memory graph: lineage (``why``), neighbours (``related``) and ``timeline`` of one memory.

It owns walking the supersede chain in both directions (cycles reported, not followed twice),
collecting links in and out by any relation, reporting links whose target is missing, the
provenance, judgements and history count of a memory, ranking a memory's neighbours by links,
shared files and shared tags, and what happened before and after a memory. ``lineage`` and
``related`` are pure: records come in as values or through small reader callables; ``why``,
``neighbours`` and ``timeline`` read them from an opened ``Project``'s index. It must not
import typer, rich, mcp or dulwich, open files, or raise on a broken graph (a dangling link or
a cycle is a finding).

Results are dataclasses (``Lineage``, ``Neighbour``, ``Timeline`` and their parts); each
``to_dict`` returns the JSON every adapter sends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from engram.errors import InvalidInput
from engram.model import Record, files_of, is_tombstone, links_of, status_of, tags_of

if TYPE_CHECKING:
    from engram.project import Project

Reader = Callable[[str], Record | None]
Incoming = Callable[[str], list[tuple[str, str]]]

SUPERSEDES: Final = "supersedes"
LINK_WEIGHT: Final = 3.0
FILE_WEIGHT: Final = 1.5
FOLDER_WEIGHT: Final = 1.0
TAG_WEIGHT: Final = 0.5
SIMILAR_WEIGHT: Final = 0.4  # × cosine: similar meaning ranks after links, files and tags


@dataclass(frozen=True)
class Summary:
    """The short view of a memory: id, kind, status (or forgotten) and title."""

    id: str
    kind: str
    status: str
    title: str

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        return {"id": self.id, "kind": self.kind, "status": self.status, "title": self.title}


@dataclass(frozen=True)
class ChainEntry(Summary):
    """A memory on a supersede chain: its steps from the memory asked about, and whence."""

    depth: int
    via: str  # the memory it was reached from

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        return {**super().to_dict(), "depth": self.depth, "via": self.via}


@dataclass(frozen=True)
class LinkedMemory(Summary):
    """A memory at the other end of a link, with the link's relation."""

    rel: str

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        return {"rel": self.rel, **super().to_dict()}


@dataclass(frozen=True)
class DanglingLink:
    """A link whose target no memory has."""

    source: str  # the id of the memory holding the link
    rel: str
    to: str

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        return {"from": self.source, "rel": self.rel, "to": self.to}


@dataclass
class Lineage:
    """Why a memory exists: supersede chains, links in and out, provenance, history."""

    memory: Summary
    supersedes: list[ChainEntry]
    superseded_by: list[ChainEntry]
    links_out: list[LinkedMemory]
    links_in: list[LinkedMemory]
    provenance: dict[str, Any]  # the provenance view: keys without a value are left out
    judgements: list[Any]
    history: int  # earlier revisions kept
    dangling: list[DanglingLink] = field(default_factory=list)
    cycles: list[list[str]] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # why its files may have moved on

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        return {
            "memory": self.memory.to_dict(),
            "supersedes": [item.to_dict() for item in self.supersedes],
            "superseded_by": [item.to_dict() for item in self.superseded_by],
            "links_out": [item.to_dict() for item in self.links_out],
            "links_in": [item.to_dict() for item in self.links_in],
            "provenance": self.provenance,
            "judgements": self.judgements,
            "history": self.history,
            "dangling": [note.to_dict() for note in self.dangling],
            "cycles": self.cycles,
            "stale": self.stale,
        }


@dataclass(frozen=True)
class Neighbour(Summary):
    """A memory near another, with why it is related and a score (higher is nearer)."""

    reason: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        return {**super().to_dict(), "reason": self.reason, "score": self.score}


@dataclass(frozen=True)
class TimelineEntry:
    """The compact timeline view of a memory, its fields as stored."""

    id: str
    kind: str
    title: str
    created_at: str
    status: str

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> TimelineEntry:
        """Return the timeline view of a record."""
        return cls(
            id=record["id"],
            kind=record.get("kind", ""),
            title=record.get("title", ""),
            created_at=record.get("created_at", ""),
            status=status_of(record),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        return {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "created_at": self.created_at,
            "status": self.status,
        }


@dataclass
class Timeline:
    """What happened before and after a memory, oldest first, in its session or project."""

    memory: TimelineEntry
    scope: str  # session, or project when the memory has no session
    session_id: str | None
    before: list[TimelineEntry]
    after: list[TimelineEntry]
    earlier: int  # memories before those shown
    later: int  # memories after those shown
    session: dict[str, Any] | None = None  # the logged session, when there is one

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping (``session`` only when the session is logged)."""
        out: dict[str, Any] = {
            "memory": self.memory.to_dict(),
            "scope": self.scope,
            "session_id": self.session_id,
            "before": [item.to_dict() for item in self.before],
            "after": [item.to_dict() for item in self.after],
            "earlier": self.earlier,
            "later": self.later,
        }
        if self.session:
            out["session"] = self.session
        return out


def summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """Return the short view of a memory: id, kind, status and title."""
    status = "forgotten" if is_tombstone(record) else status_of(record)
    return {
        "id": str(record["id"]),
        "kind": str(record.get("kind") or ""),
        "status": status,
        "title": str(record.get("title") or ""),
    }


def provenance(record: Mapping[str, Any]) -> dict[str, Any]:
    """Return where a memory came from: source (ADR path, commit), session, author, times."""
    source = str(record.get("source") or "")
    out: dict[str, Any] = {"source": source}
    if source.startswith("adr:"):
        out["adr"] = source[len("adr:") :]
    if source.startswith("git:"):
        out["commit"] = source[len("git:") :]
    for key in ("session_id", "author", "created_at", "updated_at", "rev"):
        if record.get(key) not in (None, ""):
            out[key] = record[key]
    return out


def _outgoing(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Return (relation, target id) of a record's links, in stored order."""
    out: list[tuple[str, str]] = []
    for link in links_of(record):
        if isinstance(link, Mapping) and link.get("to"):
            out.append((str(link.get("rel") or "relates"), str(link["to"])))
    return out


def _chain(
    start: Mapping[str, Any],
    step: Callable[[Mapping[str, Any]], list[str]],
    read: Reader,
    dangling: list[DanglingLink],
    cycles: list[list[str]],
) -> list[ChainEntry]:
    """Walk ``step`` breadth-first from ``start``; return the memories reached with depth."""
    out: list[ChainEntry] = []
    paths: dict[str, list[str]] = {str(start["id"]): [str(start["id"])]}
    frontier: list[Mapping[str, Any]] = [start]
    depth = 0
    while frontier:
        depth += 1
        following: list[Mapping[str, Any]] = []
        for record in frontier:
            here = str(record["id"])
            for target in step(record):
                if target in paths:
                    cycle = [*paths[here], target]
                    if target in paths[here] and cycle not in cycles:
                        cycles.append(cycle)
                    continue
                found = read(target)
                if found is None:
                    note = DanglingLink(here, SUPERSEDES, target)
                    if note not in dangling:
                        dangling.append(note)
                    continue
                paths[target] = [*paths[here], target]
                out.append(ChainEntry(**summary(found), depth=depth, via=here))
                following.append(found)
        frontier = following
    return out


def lineage(record: Mapping[str, Any], read: Reader, incoming: Incoming) -> Lineage:
    """Return why a memory exists: supersede chains, links in and out, provenance, history.

    ``read(id)`` returns a record (tombstones included) or None; ``incoming(id)`` returns
    (source id, relation) of the live records linking to ``id``.
    """
    rid = str(record["id"])
    dangling: list[DanglingLink] = []
    cycles: list[list[str]] = []

    def older(current: Mapping[str, Any]) -> list[str]:
        return [to for rel, to in _outgoing(current) if rel == SUPERSEDES]

    def newer(current: Mapping[str, Any]) -> list[str]:
        return sorted(src for src, rel in incoming(str(current["id"])) if rel == SUPERSEDES)

    supersedes = _chain(record, older, read, dangling, cycles)
    superseded_by = _chain(record, newer, read, dangling, cycles)
    links_out: list[LinkedMemory] = []
    for rel, to in _outgoing(record):
        target = read(to)
        if target is None:
            note = DanglingLink(rid, rel, to)
            if note not in dangling:
                dangling.append(note)
            continue
        links_out.append(LinkedMemory(**summary(target), rel=rel))
    links_in: list[LinkedMemory] = []
    for src, rel in incoming(rid):
        source = read(src)
        if source is not None:
            links_in.append(LinkedMemory(**summary(source), rel=rel))
    judgements = record.get("judgements") or []
    return Lineage(
        memory=Summary(**summary(record)),
        supersedes=supersedes,
        superseded_by=superseded_by,
        links_out=links_out,
        links_in=links_in,
        provenance=provenance(record),
        judgements=list(judgements) if isinstance(judgements, list) else [judgements],
        history=len(record.get("history") or []),
        dangling=dangling,
        cycles=cycles,
    )


def _file_relation(mine: str, theirs: str) -> float:
    """Return how strongly two file entries overlap: exact, one a folder of the other, or not."""
    mine, theirs = mine.strip("/"), theirs.strip("/")
    if not mine or not theirs:
        return 0.0
    if mine == theirs:
        return FILE_WEIGHT
    if mine.startswith(theirs + "/") or theirs.startswith(mine + "/"):
        return FOLDER_WEIGHT
    return 0.0


def related(
    record: Mapping[str, Any],
    candidates: Iterable[Mapping[str, Any]],
    incoming: Iterable[tuple[str, str]],
    *,
    limit: int = 10,
    similar: Mapping[str, float] | None = None,
) -> list[Neighbour]:
    """Rank a memory's neighbours among ``candidates`` by links, shared files, shared tags and,
    with ``similar`` (id → cosine of the stored embeddings), similar meaning."""
    rid = str(record["id"])
    rels: dict[str, list[str]] = {}
    for rel, to in _outgoing(record):
        rels.setdefault(to, []).append(rel)
    for src, rel in incoming:
        rels.setdefault(src, []).append(f"{rel} (in)")
    files = [str(f) for f in files_of(record)]
    tags = {str(t) for t in tags_of(record)}
    out: list[Neighbour] = []
    seen: set[str] = set()
    for other in candidates:
        oid = str(other.get("id") or "")
        if not oid or oid == rid or oid in seen or is_tombstone(other):
            continue
        seen.add(oid)
        score, reasons = 0.0, []
        links = sorted(set(rels.get(oid, [])))
        if links:
            score += LINK_WEIGHT * len(links)
            reasons.append("link: " + ", ".join(links))
        shared_files: list[str] = []
        for theirs in [str(f) for f in files_of(other)]:
            weight = max((_file_relation(mine, theirs) for mine in files), default=0.0)
            if weight:
                score += weight
                shared_files.append(theirs)
        if shared_files:
            reasons.append("files: " + ", ".join(sorted(shared_files)))
        shared_tags = sorted(tags & {str(t) for t in tags_of(other)})
        if shared_tags:
            score += TAG_WEIGHT * len(shared_tags)
            reasons.append("tags: " + ", ".join(shared_tags))
        cosine = (similar or {}).get(oid)
        if cosine is not None:
            score += SIMILAR_WEIGHT * cosine
            reasons.append(f"similar text (cosine {cosine:.2f})")
        if score > 0:
            out.append(Neighbour(**summary(other), reason="; ".join(reasons), score=score))
    out.sort(key=lambda item: (-item.score, item.id))
    return out[: max(0, limit)]


# -- over an opened project ---------------------------------------------------------------------


def why(here: Project, ref: str) -> Lineage:
    """Return the lineage of a memory: supersede chains, links, provenance, judgements."""
    ws, record = here.locate(ref)
    out = lineage(record, ws.index.get, ws.index.linked_to)
    out.stale = here.stale(record)
    return out


def neighbours(here: Project, ref: str, *, limit: int = 10) -> list[Neighbour]:
    """Return a memory's neighbours by links, shared files and shared tags, best first."""
    if limit < 0:
        raise InvalidInput(f"limit must not be negative, got {limit}")
    ws, record = here.locate(ref)
    incoming = ws.index.linked_to(record["id"])
    ids = {str(link.get("to")) for link in links_of(record)}
    ids.update(src for src, _ in incoming)
    files = [str(path) for path in files_of(record)]
    if files:
        ids.update(ws.index.ids_for_files(files))
    tags = [str(tag) for tag in tags_of(record)]
    if tags:
        ids.update(ws.index.ids_for_tags(tags))
    # Similar meaning, from the stored embeddings (empty when semantic search is off).
    similar = dict(ws.index.similar(like=record["id"], limit=max(limit, 10), min_cosine=0.6))
    ids.update(similar)
    ids.discard(record["id"])
    candidates = ws.index.get_many(sorted(ids)).values()
    return related(record, candidates, incoming, limit=limit, similar=similar)


def timeline(here: Project, ref: str, *, before: int = 5, after: int = 5) -> Timeline:
    """Return what happened before and after a memory, oldest first.

    Within its session when it has a ``session_id``, else among its project's memories by
    creation time. ``before`` and ``after`` count memories on each side.
    """
    if before < 0 or after < 0:
        raise InvalidInput("before and after must not be negative")
    ws, record = here.locate(ref)
    sid = record.get("session_id")
    if isinstance(sid, str) and sid:
        around = ws.index.session_records(sid)
        scope = "session"
    else:
        count = max(before, after)
        around = ws.index.neighbours_in_time(
            str(record.get("created_at", "")), str(record.get("project", "")), count
        )
        scope = "project"
    ids = [str(r["id"]) for r in around]
    at = ids.index(record["id"]) if record["id"] in ids else len(ids)
    if at == len(ids):
        around.append(record)
    start = max(0, at - before)
    return Timeline(
        memory=TimelineEntry.of(record),
        scope=scope,
        session_id=sid if scope == "session" else None,
        before=[TimelineEntry.of(r) for r in around[start:at]],
        after=[TimelineEntry.of(r) for r in around[at + 1 : at + 1 + after]],
        earlier=start,
        later=max(0, len(around) - (at + 1 + after)),
        session=here.sessions.get(str(sid)) if scope == "session" else None,
    )
