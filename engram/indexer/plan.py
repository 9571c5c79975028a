"""Turn what the indexers found (ADRs, git history) into memory records to write.

Pure functions: given the scan results and the records the store already holds, return the
records to create or revise. Ids are derived from what a memory is about (``adr:<path>``,
``git:<sha>``, the project's hotspot list), so re-running changes nothing that did not change,
and two clones that index the same history produce the same ids, which merge as one memory.
This module does no I/O and never decides on its own to drop what a person changed: a pitfall
candidate that was confirmed, rejected or forgotten is left alone.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from engram.model import Record, change_time, is_tombstone

if TYPE_CHECKING:
    from engram.indexer.adrparse import ParsedAdr
    from engram.indexer.githotspots import GitScan
    from engram.indexer.gitreverts import Candidate

ADR_IMPORTANCE: Final = 4
CANDIDATE_IMPORTANCE: Final = 2
HOTSPOT_TOPIC: Final = "git/hotspots"
MAX_HOTSPOTS_LISTED: Final = 50

# Fields the indexer owns on the memories it creates; a re-index compares and rewrites these.
ADR_FIELDS: Final = ("kind", "title", "content", "status", "tags", "files", "links", "deciders")


def derived_id(key: str) -> str:
    """Return a stable 26-character base32 id for a memory about ``key``."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()[:16]
    return base64.b32encode(digest).decode("ascii").rstrip("=").lower()


def adr_id(path: str) -> str:
    """Return the id of the decision memory for the ADR at ``path``."""
    return derived_id(f"adr:{path}")


def candidate_id(sha: str) -> str:
    """Return the id of the pitfall candidate mined from commit ``sha``."""
    return derived_id(f"git:{sha}")


def hotspots_id(project: str) -> str:
    """Return the id of a project's "Code hotspots" memory."""
    return derived_id(f"git-hotspots:{project}")


@dataclass
class Plan:
    """Records to write, and what each step decided (for the summary)."""

    writes: list[Record] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


Revise = Callable[[Record, Mapping[str, Any]], Record]


def plan_adrs(
    adrs: Sequence[ParsedAdr],
    existing: Mapping[str, Record],
    *,
    project: str,
    stamp: str,
    revise: Revise,
) -> Plan:
    """Plan the decision memories for the ADRs found, archiving those whose ADR is gone.

    ``existing`` maps id to record for every memory whose source starts with ``adr:``;
    ``revise`` applies changed fields to a record (rev+1, earlier text kept).
    """
    plan = Plan()
    by_path = {adr.path: adr for adr in adrs}
    extra_links, superseded = _adr_graph(adrs, by_path)
    for adr in adrs:
        rid = adr_id(adr.path)
        fields = _adr_fields(adr, by_path, extra_links.get(adr.path, set()), superseded)
        current = existing.get(rid)
        if current is not None and is_tombstone(current):
            plan.unchanged.append(rid)  # forgotten on purpose: the delete stands
            continue
        if current is None:
            record: Record = {
                **fields,
                "id": rid,
                "importance": ADR_IMPORTANCE,
                "scope": "project",
                "project": project,
                "source": f"adr:{adr.path}",
                "created_at": adr.date or stamp,
                "updated_at": stamp,
                "rev": 1,
            }
            plan.writes.append(record)
            plan.created.append(rid)
            continue
        wanted = {name: fields.get(name) for name in ADR_FIELDS}
        have = {name: current.get(name) for name in ADR_FIELDS}
        if wanted == have:
            plan.unchanged.append(rid)
            continue
        changes = {name: value for name, value in wanted.items() if value != have[name]}
        revised = revise(current, changes)
        for name, value in wanted.items():
            if value is None:
                revised.pop(name, None)
        plan.writes.append(revised)
        plan.updated.append(rid)
    _archive_gone(plan, adrs, existing, revise)
    return plan


def _adr_graph(
    adrs: Sequence[ParsedAdr], by_path: Mapping[str, ParsedAdr]
) -> tuple[dict[str, set[tuple[str, str]]], set[str]]:
    """Return the links each ADR gains from the others, and the paths of superseded ADRs."""
    # "Superseded by X" in A is recorded as a supersedes link on X.
    extra_links: dict[str, set[tuple[str, str]]] = {}
    for adr in adrs:
        for target in getattr(adr, "superseded_by", ()):
            if target in by_path:
                extra_links.setdefault(target, set()).add(("supersedes", adr.path))
    # An ADR that another one supersedes is superseded, whatever its own Status says.
    superseded = {
        target
        for adr in adrs
        for rel, target in (*adr.links, *extra_links.get(adr.path, set()))
        if rel == "supersedes" and target in by_path and target != adr.path
    }
    return extra_links, superseded


def _adr_fields(
    adr: ParsedAdr,
    by_path: Mapping[str, ParsedAdr],
    extra: set[tuple[str, str]],
    superseded: set[str],
) -> Record:
    """Return the fields this indexer owns on an ADR's memory (empty lists left out)."""
    pairs = {(rel, target) for rel, target in adr.links if target in by_path}
    pairs |= extra
    links = [
        {"rel": rel, "to": adr_id(target)}
        for rel, target in sorted(pairs, key=lambda pair: (pair[0], adr_id(pair[1])))
        if target != adr.path
    ]
    title = f"ADR-{adr.number:04d}: {adr.title}" if adr.number is not None else adr.title
    fields: Record = {
        "kind": "decision",
        "title": title[:500],
        "content": _without_title(adr.content),
        "status": "superseded"
        if adr.path in superseded and adr.status in ("active", "proposed")
        else adr.status,
        "tags": sorted({"adr", *adr.tags}),
        "files": sorted(set(adr.files)),
        "links": links,
        "deciders": list(adr.deciders),
    }
    for name in ("files", "links", "deciders"):
        if not fields[name]:
            del fields[name]
    return fields


def _archive_gone(
    plan: Plan, adrs: Sequence[ParsedAdr], existing: Mapping[str, Record], revise: Revise
) -> None:
    """Plan the archiving of the memories this indexer wrote for ADRs that are gone."""
    found = {adr_id(adr.path) for adr in adrs}
    for rid, current in sorted(existing.items()):
        if rid in found or is_tombstone(current) or current.get("status") == "archived":
            continue
        source = str(current.get("source", ""))
        if rid != adr_id(source.removeprefix("adr:")):
            continue  # written by a person or another tool, not by this indexer: leave it
        plan.writes.append(revise(current, {"status": "archived"}))
        plan.archived.append(rid)


def plan_git(
    scan: GitScan,
    existing: Mapping[str, Record],
    *,
    project: str,
    depth: int,
    threshold: int,
    stamp: str,
    revise: Revise,
) -> Plan:
    """Plan the "Code hotspots" fact and one proposed pitfall per new candidate.

    ``existing`` maps id to record for the ids this plan may touch (hotspot memory and
    candidates, tombstones included): a candidate already known in any state is left alone.
    """
    plan = Plan()
    if scan.head is not None:
        _plan_hotspots(
            scan,
            existing,
            plan,
            project=project,
            depth=depth,
            threshold=threshold,
            stamp=stamp,
            revise=revise,
        )
    for candidate in scan.candidates:
        rid = candidate_id(candidate.sha)
        if rid in existing:
            plan.unchanged.append(rid)
            continue
        plan.writes.append(_candidate_record(candidate, rid, project=project, stamp=stamp))
        plan.created.append(rid)
    return plan


def _plan_hotspots(
    scan: GitScan,
    existing: Mapping[str, Record],
    plan: Plan,
    *,
    project: str,
    depth: int,
    threshold: int,
    stamp: str,
    revise: Revise,
) -> None:
    rid = hotspots_id(project)
    listed = scan.hotspots[:MAX_HOTSPOTS_LISTED]
    lines = [
        f"Files changed at least {threshold} times in the last {scan.commits_walked} "
        f"non-merge commits (window {depth}), most changed first. Edit them with care: "
        "churn often means unclear ownership, missing tests or a design under strain.",
        "",
    ]
    lines += [f"- `{path}`: {count} changes" for path, count in listed]
    if len(scan.hotspots) > len(listed):
        lines.append(f"- … and {len(scan.hotspots) - len(listed)} more")
    if not scan.hotspots:
        lines.append("No file reached the threshold.")
    fields: Record = {
        "kind": "fact",
        "title": "Code hotspots",
        "content": "\n".join(lines),
        "files": sorted(path for path, _ in listed),
        "tags": ["git", "hotspots"],
        "hotspots": [{"path": path, "changes": count} for path, count in scan.hotspots],
        "topic_key": HOTSPOT_TOPIC,
    }
    if not fields["files"]:
        del fields["files"]
    current = existing.get(rid)
    if current is None or is_tombstone(current):
        if not scan.hotspots and current is None:
            return  # nothing to say yet; do not create an empty memory
        plan.writes.append(
            {
                **fields,
                "id": rid,
                "importance": 3,
                "status": "active",
                "scope": "project",
                "project": project,
                "source": f"git:{scan.head}",
                "created_at": stamp,
                "updated_at": change_time(current.get("updated_at"), stamp=stamp)
                if current
                else stamp,
                "rev": int(current.get("rev", 0) or 0) + 1 if current else 1,
            }
        )
        plan.created.append(rid)
        return
    changes = {name: value for name, value in fields.items() if current.get(name) != value}
    if "files" not in fields and "files" in current:
        changes["files"] = []
    if not changes:
        plan.unchanged.append(rid)
        return
    changes["source"] = f"git:{scan.head}"
    revised = revise(current, changes)
    if not revised.get("files"):
        revised.pop("files", None)
    plan.writes.append(revised)
    plan.updated.append(rid)


def _without_title(content: str) -> str:
    """Drop a leading ``# Title`` line: the memory's title already says it."""
    lines = content.lstrip("\n").split("\n")
    if lines and lines[0].startswith("# "):
        return "\n".join(lines[1:]).strip("\n")
    return content


def _candidate_record(candidate: Candidate, rid: str, *, project: str, stamp: str) -> Record:
    record: Record = {
        "id": rid,
        "kind": "pitfall",
        "title": candidate.title[:500],
        "content": candidate.content,
        "status": "proposed",
        "importance": CANDIDATE_IMPORTANCE,
        "tags": sorted({"git", candidate.kind, *_candidate_tags(candidate)}),
        "scope": "project",
        "project": project,
        "source": f"git:{candidate.sha}",
        "created_at": candidate.date or stamp,
        "updated_at": stamp,
        "rev": 1,
    }
    if candidate.files:
        record["files"] = sorted(set(candidate.files))
    if candidate.author:
        record["author"] = candidate.author
    if candidate.reverted_sha:
        record["reverted_sha"] = candidate.reverted_sha
    if candidate.inferred:
        record["reverted_inferred"] = True
    if candidate.reapplied_by:
        record["reapplied_by"] = candidate.reapplied_by
    return record


def _candidate_tags(candidate: Candidate) -> list[str]:
    """Return the tags that say how a revert candidate was found and what became of it."""
    tags = ["inferred"] if candidate.inferred else []
    return [*tags, "reapplied"] if candidate.reapplied_by else tags
