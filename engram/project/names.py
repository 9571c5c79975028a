"""Projects over memory records: summaries, variant names, and the records a rename writes.

Pure functions for ``engram projects list|consolidate|merge`` (issue 8):

- ``summarize`` counts each project's live memories and sessions and its last activity.
- ``variant_groups`` finds names that are spellings of one another: equal after case folding
  and removing separators, or a small edit distance apart (rapidfuzz) when long enough.
- ``pick_target`` chooses the name a group merges into; ``rename_changes`` returns the full
  new versions of the memories a merge moves.

These are pure. Over an opened ``Project``, ``listing``, ``merge``, ``variants`` and ``prune``
read the records of both stores, ask them, and write what ``rename_changes`` returns through
each store's workspace (under its lock).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Final

from engram.errors import InvalidInput
from engram.model import change_time, is_tombstone, normalize_project, scope_of
from engram.project import as_list

if TYPE_CHECKING:
    from engram.project import Project

# Characters people use interchangeably between the words of a project name.
_SEPARATORS_RE: Final = re.compile(r"[\s\-_.]+")
_DIGITS_RE: Final = re.compile(r"\d+")
# Below this length (after removing separators) an edit distance says little: api / app.
MIN_FUZZY_LENGTH: Final = 5


@dataclass
class ProjectInfo:
    """One project as ``projects list`` shows it."""

    name: str
    memories: int
    sessions: int
    last_activity: str
    scopes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return asdict(self)


def summarize(records: Iterable[Mapping[str, Any]]) -> list[ProjectInfo]:
    """Count live memories, live sessions and the last update per project, sorted by name.

    Names are compared normalised (``normalize_project``); memories without a project are
    counted under ``""``. ``scopes`` lists the scopes the project's memories are saved in.
    """
    found: dict[str, ProjectInfo] = {}
    scopes: dict[str, set[str]] = {}
    for record in records:
        if is_tombstone(record):
            continue
        name = normalize_project(str(record.get("project") or ""))
        info = found.get(name)
        if info is None:
            info = found[name] = ProjectInfo(name, 0, 0, "")
            scopes[name] = set()
        info.memories += 1
        if record.get("kind") == "session":
            info.sessions += 1
        updated = str(record.get("updated_at") or "")
        # RFC 3339 UTC strings of one format compare in time order.
        info.last_activity = max(info.last_activity, updated)
        scopes[name].add(scope_of(record))
    for name, info in found.items():
        info.scopes = sorted(scopes[name])
    return [found[name] for name in sorted(found)]


def _squash(name: str) -> str:
    """Return a name case-folded with its separators removed: ``Ledger-API`` → ``ledgerapi``."""
    return _SEPARATORS_RE.sub("", name.casefold())


def _close(a: str, b: str, max_distance: int) -> bool:
    """Tell whether two squashed names are a small edit apart (and not numbered siblings)."""
    from rapidfuzz.distance import Levenshtein

    if min(len(a), len(b)) < MIN_FUZZY_LENGTH:
        return False
    # service-1 and service-2 are two projects on purpose, not a typo of one another.
    if _DIGITS_RE.findall(a) != _DIGITS_RE.findall(b):
        return False
    return Levenshtein.distance(a, b, score_cutoff=max_distance) <= max_distance


def variant_groups(names: Iterable[str], *, max_distance: int = 2) -> list[list[str]]:
    """Group names that are variants of one another; groups of two or more, sorted.

    Two names are variants when they are equal after case folding and removing the separators
    ``- _ .`` and spaces, or when those squashed forms are at most ``max_distance`` edits apart
    (Levenshtein) and both are at least five characters long, so ``api`` and ``app`` stay
    apart. Names whose numbers differ (``worker-1``, ``worker-2``) are never joined by edit
    distance. Variance is transitive (a chain of close names forms one group). Each group is
    sorted alphabetically (case-insensitive), the groups by their first name. Empty names are
    ignored.
    """
    unique = sorted({name for name in names if _squash(name)})
    parent = list(range(len(unique)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        a, b = find(i), find(j)
        if a != b:
            parent[max(a, b)] = min(a, b)

    squashed = [_squash(name) for name in unique]
    by_key: dict[str, int] = {}
    for i, key in enumerate(squashed):
        if key in by_key:
            union(by_key[key], i)
        else:
            by_key[key] = i
    keys = sorted(by_key)
    for x, a in enumerate(keys):
        for b in keys[x + 1 :]:
            if abs(len(a) - len(b)) <= max_distance and _close(a, b, max_distance):
                union(by_key[a], by_key[b])
    groups: dict[int, list[str]] = {}
    for i, name in enumerate(unique):
        groups.setdefault(find(i), []).append(name)
    found = [sorted(g, key=_alphabetical) for g in groups.values() if len(g) > 1]
    return sorted(found, key=lambda g: _alphabetical(g[0]))


def _alphabetical(name: str) -> tuple[str, str]:
    """Sort key: case-insensitive, ties broken by the exact spelling."""
    return (name.casefold(), name)


def pick_target(group: Sequence[str], counts: Mapping[str, int]) -> str:
    """Return the name a group merges into: most memories, then the shortest, then A–Z."""
    if not group:
        raise ValueError("pick_target needs at least one name")
    return min(group, key=lambda name: (-int(counts.get(name, 0)), len(name), name))


def rename_changes(
    records: Iterable[Mapping[str, Any]], sources: Iterable[str], target: str, *, stamp: str
) -> list[dict[str, Any]]:
    """Return new versions of the live memories of ``sources`` moved to ``target``, by id.

    Sources match normalised (``normalize_project``). Each version keeps every other field,
    with ``project`` = target, ``rev`` + 1 and ``updated_at`` = stamp. Memories already named
    exactly ``target`` and tombstones are left alone; ``[]`` when nothing moves.
    """
    wanted = {normalize_project(name) for name in sources}
    changes: list[dict[str, Any]] = []
    for record in records:
        if is_tombstone(record):
            continue
        project = record.get("project")
        if project is None or normalize_project(str(project)) not in wanted:
            continue
        if project == target:
            continue
        new = dict(record)
        new["project"] = target
        new["rev"] = int(record.get("rev") or 0) + 1
        new["updated_at"] = change_time(record.get("updated_at"), stamp=stamp)
        changes.append(new)
    return sorted(changes, key=lambda r: str(r.get("id", "")))


# -- over an opened project ---------------------------------------------------------------------


@dataclass
class ProjectMerge:
    """What ``projects merge`` moved (or with ``dry_run`` would move), per store scope."""

    sources: list[str]  # the normalised names merged ("from" in the JSON form)
    into: str
    dry_run: bool
    moved: dict[str, int] = field(default_factory=dict)  # scope -> memories moved

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: from, into, dry_run, moved."""
        return {
            "from": list(self.sources),
            "into": self.into,
            "dry_run": self.dry_run,
            "moved": dict(self.moved),
        }


@dataclass
class VariantGroup:
    """Project names that look like one project spelled differently, and the name to keep."""

    names: list[str]
    into: str

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return asdict(self)


@dataclass
class ProjectPrune:
    """The projects ``projects prune`` forgot (or with ``dry_run`` would forget)."""

    pruned: list[str]
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return asdict(self)


def listing(here: Project) -> list[ProjectInfo]:
    """Return every project named in the project and personal stores, with its counts."""
    return summarize(here.live_records())


def merge(
    here: Project, sources: Iterable[str], into: str, *, dry_run: bool = False
) -> ProjectMerge:
    """Move the memories of ``sources`` to project ``into`` (rev+1 each), in both stores."""
    target = normalize_project(into)
    names = [normalize_project(name) for name in as_list(sources)]
    names = [name for name in names if name and name != target]
    if not target or not names:
        raise InvalidInput("give the projects to merge and a different project to merge them into")
    result = ProjectMerge(names, target, dry_run)
    stamp = here.now()
    for ws in here.workspaces():
        with ws.store.lock():
            changes = rename_changes(ws.index.all_records(), names, target, stamp=stamp)
            if changes:
                result.moved[ws.scope] = len(changes)
            if changes and not dry_run:
                ws.write(changes)
    return result


def variants(here: Project) -> list[VariantGroup]:
    """Return groups of project names that look like one project spelled differently."""
    counts = {info.name: info.memories for info in listing(here)}
    return [VariantGroup(group, pick_target(group, counts)) for group in variant_groups(counts)]


def prune(here: Project, *, dry_run: bool = False) -> ProjectPrune:
    """Forget projects that have no live memory left: their entries in the session log."""
    live = {info.name for info in listing(here)}
    logged = here.sessions.projects()
    gone = sorted(name for name in logged if name not in live and name != here.name)
    if gone and not dry_run:
        here.sessions.drop_projects(gone)
    return ProjectPrune(gone, dry_run)
