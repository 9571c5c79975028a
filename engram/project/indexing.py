"""Keeping what is derived up to date: the search index, and the memories of ADRs and git history.

``index_project`` runs the indexers (``engram.indexer``: ADR folders, git history) and writes
the memories their plans return through the project's workspace, under the store's lock, never
journalled (every clone derives them from the same files and history); ``reindex`` brings the
search index up to date or rebuilds it; ``stats`` reports what the stores and indexes hold. It
must not import the service or an adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engram.model import Record, normalize_fields
from engram.project.memories import revise

if TYPE_CHECKING:
    from engram.indexer.adr import Skipped
    from engram.project import Project

__all__ = [
    "AdrSummary",
    "HistorySummary",
    "Hotspot",
    "IndexReport",
    "IndexSummary",
    "Stats",
    "StoreStats",
    "index_project",
    "reindex",
    "stats",
]

Progress = Callable[[int, int], None]
Revise = Callable[[Record, Mapping[str, Any]], Record]


@dataclass
class IndexReport:
    """What ``reindex`` did to the search index: rebuilt it, or brought it up to date."""

    rebuilt: bool
    changed: int  # records (re)indexed
    records: int = 0  # records in the rebuilt index (a rebuild only)
    flushed: int = 0  # pending writes flushed (an update only)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: a rebuild's records, or an update's flushed."""
        if self.rebuilt:
            return {"rebuilt": True, "records": self.records, "changed": self.changed}
        return {"rebuilt": False, "changed": self.changed, "flushed": self.flushed}


@dataclass
class AdrSummary:
    """What the ADR indexer found in the ADR folders and planned for their memories."""

    dirs: list[str]
    found: int
    created: int
    updated: int
    archived: int
    unchanged: int
    skipped: list[Skipped] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above; each skipped file as path, reason)."""
        return {
            "dirs": self.dirs,
            "found": self.found,
            "created": self.created,
            "updated": self.updated,
            "archived": self.archived,
            "unchanged": self.unchanged,
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
        }


@dataclass
class Hotspot:
    """A path changed in many commits of the walked history."""

    path: str
    changes: int


@dataclass
class HistorySummary:
    """What the git indexer walked and found: hotspots and pitfall candidates."""

    head: str | None  # the commit walked from (None: no history to mine)
    commits: int
    unchanged: bool  # no new commit since the last walk
    hotspots: list[Hotspot]
    candidates_found: int
    candidates_new: int
    problems: list[str]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return {
            "head": self.head,
            "commits": self.commits,
            "unchanged": self.unchanged,
            "hotspots": [{"path": h.path, "changes": h.changes} for h in self.hotspots],
            "candidates_found": self.candidates_found,
            "candidates_new": self.candidates_new,
            "problems": self.problems,
        }


@dataclass
class IndexSummary:
    """What ``index_project`` did: the ADR and git summaries (those run) and the writes."""

    dry_run: bool
    adr: AdrSummary | None = None
    git: HistorySummary | None = None
    writes: int = 0  # memories written (with ``dry_run``: that would be)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form; ``adr`` and ``git`` only for the indexers that ran."""
        out: dict[str, Any] = {"dry_run": self.dry_run}
        if self.adr is not None:
            out["adr"] = self.adr.to_dict()
        if self.git is not None:
            out["git"] = self.git.to_dict()
        out["writes"] = self.writes
        return out


def reindex(
    here: Project, *, rebuild: bool = False, progress: Progress | None = None
) -> IndexReport:
    """Bring the project's index up to date (or rebuild it from scratch); return counts."""
    index = here.ws.index
    if rebuild:
        total = index.rebuild(progress)
        return IndexReport(rebuilt=True, changed=total, records=total)
    changed = index.refresh(progress)
    flushed = index.flush()
    return IndexReport(rebuilt=False, changed=changed, flushed=flushed)


@dataclass
class StoreStats:
    """What one store (project or personal) and its index hold; counts are of live memories."""

    memories: int
    tombstones: int
    links: int
    by_kind: dict[str, int]
    by_status: dict[str, int]
    by_scope: dict[str, int]
    by_project: dict[str, int]
    top_tags: dict[str, int]  # the ten most used tags
    indexed: int  # documents in the full-text index
    pending: int  # writes queued for the full-text index
    scope: str
    path: str  # the store's memories.jsonl
    file_bytes: int
    backend: str  # the full-text backend

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return {
            "memories": self.memories,
            "tombstones": self.tombstones,
            "links": self.links,
            "by_kind": self.by_kind,
            "by_status": self.by_status,
            "by_scope": self.by_scope,
            "by_project": self.by_project,
            "top_tags": self.top_tags,
            "indexed": self.indexed,
            "pending": self.pending,
            "scope": self.scope,
            "path": self.path,
            "file_bytes": self.file_bytes,
            "backend": self.backend,
        }


@dataclass
class Stats:
    """What the project's stores hold: one ``StoreStats`` each, the project's store first."""

    project: str
    root: str
    stores: list[StoreStats]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "project": self.project,
            "root": self.root,
            "stores": [store.to_dict() for store in self.stores],
        }


def stats(here: Project) -> Stats:
    """Return counts by kind, status, scope and project, and the sizes of the files."""
    stores: list[StoreStats] = []
    for ws in here.workspaces():
        ws.index.flush()
        counts = ws.index.counts()
        stores.append(
            StoreStats(
                memories=int(counts["memories"]),
                tombstones=int(counts["tombstones"]),
                links=int(counts["links"]),
                by_kind=dict(counts["by_kind"]),
                by_status=dict(counts["by_status"]),
                by_scope=dict(counts["by_scope"]),
                by_project=dict(counts["by_project"]),
                top_tags=dict(counts["top_tags"]),
                indexed=int(counts["indexed"]),
                pending=int(counts["pending"]),
                scope=ws.scope,
                path=str(ws.store.path),
                file_bytes=ws.store.path.stat().st_size if ws.store.exists() else 0,
                backend=ws.index.backend_name,
            )
        )
    return Stats(project=here.name, root=str(here.root), stores=stores)


def index_project(
    here: Project,
    *,
    adr: bool = True,
    git: bool = True,
    dry_run: bool = False,
    rebuild: bool = False,
    progress: Progress | None = None,
) -> IndexSummary:
    """Create and refresh memories from the project's ADRs and git history; summarise.

    Idempotent: ids are derived from ADR paths and commit shas, unchanged input writes
    nothing, an edited ADR revises its memory (rev+1) and a deleted one is archived.
    ``dry_run`` plans without writing (not even the history cache); ``rebuild`` forgets the
    history cache and walks the whole window again.
    """
    ws = here.ws
    stamp = here.now()
    summary = IndexSummary(dry_run)
    writes: list[Record] = []

    def changed(current: Record, changes: Mapping[str, Any]) -> Record:
        return revise(ws, current, changes, stamp)

    with ws.store.lock():
        if adr:
            summary.adr = _adrs(here, writes, stamp, changed)
        if git:
            summary.git = _history(here, writes, stamp, changed, dry_run, rebuild, progress)
        max_bytes = int(ws.config.number("store.max_content_bytes"))
        cleaned: list[Record] = []
        for record in writes:
            fields = normalize_fields(record, max_content_bytes=max_bytes)
            ws.scrub(fields)
            cleaned.append(fields)
        summary.writes = len(cleaned)
        if cleaned and not dry_run:
            # Every clone derives these from the same files and history: not exported.
            ws.write(cleaned, journal=False)
    return summary


def _adrs(here: Project, writes: list[Record], stamp: str, changed: Revise) -> AdrSummary:
    """Plan the memories of the project's ADRs onto ``writes``; return the ADR summary."""
    from engram.indexer import plan as planner
    from engram.indexer.adr import scan_adrs

    cfg = here.config
    dirs = cfg.get("indexer.adr_dirs")
    configured = [str(d) for d in dirs] if isinstance(dirs, list) else None
    scan = scan_adrs(here.root, configured)
    existing = here.ws.index.by_source_prefix("adr:")
    adr_plan = planner.plan_adrs(
        scan.adrs, existing, project=cfg.project, stamp=stamp, revise=changed
    )
    writes += adr_plan.writes
    return AdrSummary(
        dirs=scan.dirs,
        found=len(scan.adrs),
        created=len(adr_plan.created),
        updated=len(adr_plan.updated),
        archived=len(adr_plan.archived),
        unchanged=len(adr_plan.unchanged),
        skipped=list(scan.skipped),
    )


def _history(
    here: Project,
    writes: list[Record],
    stamp: str,
    changed: Revise,
    dry_run: bool,
    rebuild: bool,
    progress: Progress | None,
) -> HistorySummary:
    """Plan the hotspot and pitfall-candidate memories of git history onto ``writes``."""
    from engram.indexer import plan as planner
    from engram.indexer.git import CACHE_FILE, scan_history
    from engram.store.files import remove_state

    ws, cfg = here.ws, here.config
    if rebuild and not dry_run:
        remove_state(ws.store.state_dir, CACHE_FILE)
    depth = int(cfg.number("indexer.git_depth"))
    threshold = int(cfg.number("indexer.hotspot_threshold"))
    history = scan_history(
        here.root,
        depth=depth,
        threshold=threshold,
        state_dir=None if dry_run else ws.store.state_dir,  # a dry run writes nothing
        progress=progress,
    )
    ids = [planner.hotspots_id(cfg.project)]
    ids += [planner.candidate_id(c.sha) for c in history.candidates]
    git_plan = planner.plan_git(
        history,
        ws.index.get_many(ids),
        project=cfg.project,
        depth=depth,
        threshold=threshold,
        stamp=stamp,
        revise=changed,
    )
    writes += git_plan.writes
    return HistorySummary(
        head=history.head,
        commits=history.commits_walked,
        unchanged=history.unchanged,
        hotspots=[Hotspot(p, n) for p, n in history.hotspots],
        candidates_found=len(history.candidates),
        candidates_new=len([rid for rid in git_plan.created if rid != ids[0]]),
        problems=history.problems,
    )
