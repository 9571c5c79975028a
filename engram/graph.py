"""The memory graph: lineage (``why``), neighbours (``related``) and ``timeline`` of one memory.

It owns walking the supersede chain in both directions (cycles reported, not followed twice),
collecting links in and out by any relation, reporting links whose target is missing, the
provenance, judgements and history count of a memory, ranking a memory's neighbours by links,
shared files and shared tags, and what happened before and after a memory. ``lineage`` and
``related`` are pure: records come in as values or through small reader callables; ``why``,
``neighbours`` and ``timeline`` read them from an opened ``Project``'s index. It must not
import typer, rich, mcp or dulwich, open files, or raise on a broken graph (a dangling link or
a cycle is a finding).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from engram.errors import InvalidInput
from engram.model import Record, is_tombstone

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


def summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """Return the short view of a memory: id, kind, status and title."""
    status = "forgotten" if is_tombstone(record) else str(record.get("status") or "active")
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
    for link in record.get("links", []) or []:
        if isinstance(link, Mapping) and link.get("to"):
            out.append((str(link.get("rel") or "relates"), str(link["to"])))
    return out


def _chain(
    start: Mapping[str, Any],
    step: Callable[[Mapping[str, Any]], list[str]],
    read: Reader,
    dangling: list[dict[str, str]],
    cycles: list[list[str]],
) -> list[dict[str, Any]]:
    """Walk ``step`` breadth-first from ``start``; return the memories reached with depth."""
    out: list[dict[str, Any]] = []
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
                    note = {"from": here, "rel": SUPERSEDES, "to": target}
                    if note not in dangling:
                        dangling.append(note)
                    continue
                paths[target] = [*paths[here], target]
                out.append({**summary(found), "depth": depth, "via": here})
                following.append(found)
        frontier = following
    return out


def lineage(record: Mapping[str, Any], read: Reader, incoming: Incoming) -> dict[str, Any]:
    """Return why a memory exists: supersede chains, links in and out, provenance, history.

    ``read(id)`` returns a record (tombstones included) or None; ``incoming(id)`` returns
    (source id, relation) of the live records linking to ``id``.
    """
    rid = str(record["id"])
    dangling: list[dict[str, str]] = []
    cycles: list[list[str]] = []

    def older(current: Mapping[str, Any]) -> list[str]:
        return [to for rel, to in _outgoing(current) if rel == SUPERSEDES]

    def newer(current: Mapping[str, Any]) -> list[str]:
        return sorted(src for src, rel in incoming(str(current["id"])) if rel == SUPERSEDES)

    supersedes = _chain(record, older, read, dangling, cycles)
    superseded_by = _chain(record, newer, read, dangling, cycles)
    links_out: list[dict[str, Any]] = []
    for rel, to in _outgoing(record):
        target = read(to)
        if target is None:
            note = {"from": rid, "rel": rel, "to": to}
            if note not in dangling:
                dangling.append(note)
            continue
        links_out.append({"rel": rel, **summary(target)})
    links_in: list[dict[str, Any]] = []
    for src, rel in incoming(rid):
        source = read(src)
        if source is not None:
            links_in.append({"rel": rel, **summary(source)})
    judgements = record.get("judgements") or []
    return {
        "memory": summary(record),
        "supersedes": supersedes,
        "superseded_by": superseded_by,
        "links_out": links_out,
        "links_in": links_in,
        "provenance": provenance(record),
        "judgements": list(judgements) if isinstance(judgements, list) else [judgements],
        "history": len(record.get("history") or []),
        "dangling": dangling,
        "cycles": cycles,
    }


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
) -> list[dict[str, Any]]:
    """Rank a memory's neighbours among ``candidates`` by links, shared files, shared tags and,
    with ``similar`` (id → cosine of the stored embeddings), similar meaning."""
    rid = str(record["id"])
    rels: dict[str, list[str]] = {}
    for rel, to in _outgoing(record):
        rels.setdefault(to, []).append(rel)
    for src, rel in incoming:
        rels.setdefault(src, []).append(f"{rel} (in)")
    files = [str(f) for f in record.get("files", []) or []]
    tags = {str(t) for t in record.get("tags", []) or []}
    out: list[dict[str, Any]] = []
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
        for theirs in [str(f) for f in other.get("files", []) or []]:
            weight = max((_file_relation(mine, theirs) for mine in files), default=0.0)
            if weight:
                score += weight
                shared_files.append(theirs)
        if shared_files:
            reasons.append("files: " + ", ".join(sorted(shared_files)))
        shared_tags = sorted(tags & {str(t) for t in other.get("tags", []) or []})
        if shared_tags:
            score += TAG_WEIGHT * len(shared_tags)
            reasons.append("tags: " + ", ".join(shared_tags))
        cosine = (similar or {}).get(oid)
        if cosine is not None:
            score += SIMILAR_WEIGHT * cosine
            reasons.append(f"similar text (cosine {cosine:.2f})")
        if score > 0:
            out.append({**summary(other), "reason": "; ".join(reasons), "score": score})
    out.sort(key=lambda item: (-item["score"], item["id"]))
    return out[: max(0, limit)]


# -- over an opened project ---------------------------------------------------------------------


def why(here: Project, ref: str) -> dict[str, Any]:
    """Return the lineage of a memory: supersede chains, links, provenance, judgements."""
    ws, record = here.locate(ref)
    out = lineage(record, ws.index.get, ws.index.linked_to)
    out["stale"] = here.stale(record)
    return out


def neighbours(here: Project, ref: str, *, limit: int = 10) -> list[dict[str, Any]]:
    """Return a memory's neighbours by links, shared files and shared tags, best first."""
    if limit < 0:
        raise InvalidInput(f"limit must not be negative, got {limit}")
    ws, record = here.locate(ref)
    incoming = ws.index.linked_to(record["id"])
    ids = {str(link.get("to")) for link in record.get("links", []) or []}
    ids.update(src for src, _ in incoming)
    files = [str(path) for path in record.get("files", []) or []]
    if files:
        ids.update(ws.index.ids_for_files(files))
    tags = [str(tag) for tag in record.get("tags", []) or []]
    if tags:
        ids.update(ws.index.ids_for_tags(tags))
    # Similar meaning, from the stored embeddings (empty when semantic search is off).
    similar = dict(ws.index.similar(like=record["id"], limit=max(limit, 10), min_cosine=0.6))
    ids.update(similar)
    ids.discard(record["id"])
    candidates = ws.index.get_many(sorted(ids)).values()
    return related(record, candidates, incoming, limit=limit, similar=similar)


def timeline(here: Project, ref: str, *, before: int = 5, after: int = 5) -> dict[str, Any]:
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
    out: dict[str, Any] = {
        "memory": _entry(record),
        "scope": scope,
        "session_id": sid if scope == "session" else None,
        "before": [_entry(r) for r in around[start:at]],
        "after": [_entry(r) for r in around[at + 1 : at + 1 + after]],
        "earlier": start,
        "later": max(0, len(around) - (at + 1 + after)),
    }
    if scope == "session":
        logged = here.sessions.get(str(sid))
        if logged:
            out["session"] = logged
    return out


def _entry(record: Mapping[str, Any]) -> dict[str, Any]:
    """Return the compact timeline view of a memory."""
    return {
        "id": record["id"],
        "kind": record.get("kind", ""),
        "title": record.get("title", ""),
        "created_at": record.get("created_at", ""),
        "status": record.get("status", "active"),
    }
