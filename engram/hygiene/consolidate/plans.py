"""Consolidation plans: made, read back and turned into the exact records to write.

A ``Plan`` goes out as JSON a person can review and edit (``make_plan``; ``read_plan`` checks
it whole when it comes back); ``Applied`` says what applying one changed.
``plan_changes`` returns the full new versions of the records a plan changes. Nothing is lost:
a merge writes one new memory, with an id derived from its group (``merged_id``), that
``supersedes`` the others (their text untouched, status superseded); archive is a status;
delete is a soft tombstone that keeps the text; an orphan's dangling links are dropped.
Applying the same plan twice changes nothing. Pure: the caller writes what comes back.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from engram.hygiene.consolidate.shapes import (
    Recommendation,
    Resolver,
    best_of,
    fail,
    importance_of,
    links_of,
    status_of,
)
from engram.model import change_time, is_tombstone, loads

__all__ = ["PLAN_VERSION", "Applied", "Plan", "make_plan", "merged_id", "plan_changes", "read_plan"]

PLAN_VERSION: Final = 1
_ID_TOKEN_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*[A-Za-z0-9]|[A-Za-z0-9]")


@dataclass
class Plan:
    """The recommendations for the groups found, to review (and edit) and apply later."""

    created_at: str
    recommendations: list[Recommendation]
    version: int = PLAN_VERSION
    warnings: list[str] = field(default_factory=list)  # settings ignored while deciding

    def to_dict(self) -> dict[str, Any]:
        """Return the plan as JSON-ready data (``warnings`` only when there are some)."""
        out: dict[str, Any] = {
            "version": self.version,
            "created_at": self.created_at,
            "recommendations": [r.to_dict() for r in self.recommendations],
        }
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


@dataclass
class Applied:
    """What applying a plan changed (or, on a dry run, would change)."""

    dry_run: bool
    recommendations: int  # how many the plan held
    changes: list[dict[str, Any]]  # the full new versions of the records changed
    warnings: list[str] = field(default_factory=list)  # settings ignored making a fresh plan

    @property
    def changed(self) -> int:
        """How many records the plan changes."""
        return len(self.changes)

    def to_dict(self) -> dict[str, Any]:
        """Return the outcome as JSON-ready data (``warnings`` only when there are some)."""
        out: dict[str, Any] = {
            "dry_run": self.dry_run,
            "recommendations": self.recommendations,
            "changes": self.changes,
            "changed": self.changed,
        }
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def make_plan(recommendations: Iterable[Recommendation], *, created_at: str) -> Plan:
    """Return a plan of the recommendations, to review and apply later."""
    return Plan(created_at=created_at, recommendations=list(recommendations))


def read_plan(raw: Any) -> list[Recommendation]:
    """Validate a plan (a ``Plan``, an object, or its JSON text) and return its recommendations."""
    if isinstance(raw, Plan):
        raw = raw.to_dict()  # checked like any other: a plan's fields may have been changed
    if isinstance(raw, bytes | str):
        try:
            raw = loads(raw, what="the plan")
        except ValueError as exc:
            raise fail(f"the plan is not JSON: {exc}") from exc
    if not isinstance(raw, Mapping):
        raise fail(f"a plan must be an object, got {type(raw).__name__}")
    if raw.get("version") != PLAN_VERSION:
        raise fail(f"plan version must be {PLAN_VERSION}, got {raw.get('version')!r}")
    items = raw.get("recommendations")
    if not isinstance(items, list):
        raise fail("plan field 'recommendations' must be a list")
    return [
        Recommendation.from_dict(item, where=f"recommendations[{n}]")
        for n, item in enumerate(items)
    ]


def merged_id(ids: Iterable[str]) -> str:
    """Return the id of the memory that merges ``ids``: the same for the same group, always."""
    digest = hashlib.sha256(("consolidate:" + ",".join(sorted(ids))).encode("utf-8")).digest()
    return base64.b32encode(digest[:16]).decode("ascii").rstrip("=").lower()


def plan_changes(
    recommendations: Sequence[Recommendation],
    records: Mapping[str, Mapping[str, Any]],
    *,
    stamp: str,
    author: str,
) -> list[dict[str, Any]]:
    """Return the full new versions of the records a plan changes, sorted by id; [] if none.

    ``records`` holds at least every group member and every merged id (a merged memory written
    by an earlier run is recognised there); tombstones count as missing. An orphan's link is
    dropped only when the group's reason names its target, the sentence a person checked, and
    the target is still missing from ``records``: a link that came back to life since is kept,
    and ``records`` holding only the plan's own ids never costs a live link.
    """
    changes = _Changes(records, stamp=stamp, author=author)
    for rec in recommendations:
        if rec.action == "merge":
            changes.merge(rec)
        elif rec.action == "archive":
            changes.archive(rec.group.ids)
        elif rec.action == "delete":
            changes.delete(rec.group.ids)
        elif rec.action == "keep" and rec.group.kind == "orphan":
            changes.drop_dangling(rec.group.ids, rec.group.reason)
    return changes.out()


class _Changes:
    """The records a plan changes: copies of the ones it touches, and the merged ones it makes."""

    def __init__(self, records: Mapping[str, Mapping[str, Any]], *, stamp: str, author: str):
        self.records = records
        self.stamp = stamp
        self.author = author
        self.work: dict[str, dict[str, Any]] = {}
        self.created: dict[str, dict[str, Any]] = {}
        self.resolver = Resolver(k for k, r in records.items() if not is_tombstone(r))

    def current(self, memory_id: str) -> dict[str, Any] | None:
        """Return the working copy of a record (made on first use), or None if unknown."""
        if memory_id in self.work:
            return self.work[memory_id]
        record = self.records.get(memory_id)
        if record is None:
            return None
        self.work[memory_id] = json.loads(json.dumps(record))  # a deep copy of plain JSON data
        return self.work[memory_id]

    def live(self, memory_id: str) -> dict[str, Any] | None:
        """Return the working copy of a record unless it is unknown or a tombstone."""
        record = self.current(memory_id)
        return None if record is None or is_tombstone(record) else record

    def merge(self, rec: Recommendation) -> None:
        """Write one memory that supersedes the group's live members (once)."""
        ids = rec.group.ids
        new_id = merged_id(ids)
        if new_id in self.records or new_id in self.created:
            return  # applied before: the merged memory exists, nothing to redo
        members = [r for r in (self.live(m) for m in ids) if r is not None]
        if len(members) < 2:
            return  # the others were deleted since the plan was made: nothing to merge
        by_id = {str(r["id"]): r for r in members}
        leader = by_id.get(rec.target or "") or by_id[best_of(by_id, self.records)]
        others = [r for r in members if r is not leader]
        self.created[new_id] = _merged_record(
            ids, leader, others, stamp=self.stamp, author=self.author
        )
        for member in members:
            if status_of(member) != "superseded":
                member["status"] = "superseded"

    def archive(self, ids: Sequence[str]) -> None:
        """Set the live members' status to archived."""
        for memory_id in ids:
            record = self.live(memory_id)
            # Superseded is retired already (and says more), so a plan that both merges and
            # archives a memory ends the same whichever comes first, and applies once.
            if record is not None and status_of(record) not in ("archived", "superseded"):
                record["status"] = "archived"

    def delete(self, ids: Sequence[str]) -> None:
        """Make the live members soft tombstones (their text kept)."""
        for memory_id in ids:
            record = self.live(memory_id)
            if record is not None:
                record["deleted_at"] = self.stamp

    def drop_dangling(self, ids: Sequence[str], reason: str) -> None:
        """Drop the links the reason names that still point at no live memory."""
        named = set(_ID_TOKEN_RE.findall(reason))
        for memory_id in ids:
            record = self.live(memory_id)
            if record is None or not isinstance(record.get("links"), list):
                continue
            kept = [
                link
                for link in record["links"]
                if not (
                    isinstance(link, Mapping)
                    and isinstance(link.get("to"), str)
                    and link["to"] in named
                    and self.resolver.resolve(link["to"]) is None
                    and link["to"] not in self.created
                )
            ]
            if len(kept) != len(record["links"]):
                if kept:
                    record["links"] = kept
                else:
                    del record["links"]

    def out(self) -> list[dict[str, Any]]:
        """Return the merged records and every changed copy (rev+1, stamped), sorted by id."""
        out: list[dict[str, Any]] = list(self.created.values())
        for memory_id, record in self.work.items():
            original = self.records[memory_id]
            if record == original:
                continue
            record["rev"] = int(original.get("rev") or 0) + 1
            record["updated_at"] = change_time(original.get("updated_at"), stamp=self.stamp)
            out.append(record)
        return sorted(out, key=lambda record: str(record.get("id")))


def _merged_record(
    group_ids: Sequence[str],
    leader: Mapping[str, Any],
    others: Sequence[Mapping[str, Any]],
    *,
    stamp: str,
    author: str,
) -> dict[str, Any]:
    """Return the memory that merges a group: the leader's text, then each other's."""
    everyone = [leader, *others]

    def union(name: str) -> list[str]:
        values = {str(v) for r in everyone for v in (r.get(name) or []) if isinstance(v, str)}
        return sorted(values)

    record: dict[str, Any] = {
        "id": merged_id(group_ids),
        "kind": leader.get("kind"),
        "title": leader.get("title"),
        "content": _merged_content(leader, others),
        "importance": max(importance_of(r) for r in everyone),
        "status": "active",
        "links": _merged_links(everyone),
        "source": "consolidate",
        "created_at": stamp,
        "updated_at": stamp,
        "rev": 1,
    }
    for name in ("tags", "files"):
        values = union(name)
        if values:
            record[name] = values
    for name in ("scope", "project"):
        if leader.get(name):
            record[name] = leader[name]
    if author:
        record["author"] = author
    return record


def _merged_content(leader: Mapping[str, Any], others: Sequence[Mapping[str, Any]]) -> str:
    """Return the leader's content, then a "Merged from" section per other text (once each)."""
    content = str(leader.get("content") or "").rstrip()
    sections: list[str] = []
    seen = {(str(leader.get("title") or ""), str(leader.get("content") or ""))}
    same: list[str] = []
    for other in others:
        text = (str(other.get("title") or ""), str(other.get("content") or ""))
        if text in seen:  # byte-identical copies: named, not repeated
            same.append(str(other["id"]))
            continue
        seen.add(text)
        sections.append(f"### {text[0]}\n\n(from {other['id']})\n\n{text[1].strip()}")
    if same:
        sections.append(f"Same title and text as above in: {', '.join(same)}.")
    return f"{content}\n\n## Merged from\n\n" + "\n\n".join(sections) if sections else content


def _merged_links(members: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return a merged memory's links: it supersedes each member and keeps their other links."""
    inside = {str(r["id"]) for r in members}
    links = {("supersedes", member): {"rel": "supersedes", "to": member} for member in inside}
    for record in members:
        for link in links_of(record):
            rel, target = str(link.get("rel")), str(link["to"])
            if not any(member.startswith(target) for member in inside):  # full id or prefix
                links.setdefault((rel, target), {**link, "rel": rel, "to": target})
    return [links[key] for key in sorted(links)]
