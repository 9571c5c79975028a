"""Finding the groups of memories worth tidying, each with a reason and a proposed action.

``find_groups`` reads records (tombstones included, to name a deleted link target) and returns
exact and near duplicates (same kind, scope and project; near ones judged by
``similarity.alike`` among the candidates ``candidates.candidate_pairs`` reads from the
index), superseded memories still active, file-bound memories about files that are gone,
dangling links, memories whose anchored files changed a lot, and memories last judged
outdated or wrong. Pure but for those index reads: the caller says which files exist and which
memories are stale, and hands in the index (or nothing, to compare every pair).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from engram.errors import InvalidInput
from engram.hygiene.consolidate.candidates import Item, Neighbours, candidate_pairs
from engram.hygiene.consolidate.shapes import (
    GROUP_KINDS,
    Group,
    Resolver,
    best_of,
    is_current,
    latest_judgement,
    links_of,
    status_of,
    tags_drown,
    text_of,
)
from engram.hygiene.consolidate.similarity import alike, words_of
from engram.model import is_tombstone, scope_of

__all__ = ["FILE_BOUND_KINDS", "NO_DEDUPE_KINDS", "STALE_MIN_COMMITS", "find_groups"]

# Kinds that record events rather than knowledge: many alike are expected, never merged.
NO_DEDUPE_KINDS: Final = frozenset({"session", "prompt", "insight"})
# Kinds whose advice is about particular files, so a deleted file makes them moot.
FILE_BOUND_KINDS: Final = frozenset({"pitfall", "decision", "bugfix", "pattern"})
STALE_MIN_COMMITS: Final = 3
_GLOB_CHARS: Final = frozenset("*?[")
_COMMITS_RE: Final = re.compile(r"changed in (?:at least )?(\d+) commits?")

Live = Mapping[str, Mapping[str, Any]]
Stale = Callable[[Mapping[str, Any]], list[str]]


def find_groups(
    records: Sequence[Mapping[str, Any]],
    *,
    exists: Callable[[str], bool],
    stale: Stale | None = None,
    near_threshold: float = 0.88,
    max_pairs: int = 2_000_000,
    neighbours: Neighbours | None = None,
) -> list[Group]:
    """Find the groups of live memories worth tidying, each with a reason and proposed action.

    Near-duplicate candidates are each memory's ``neighbours`` in the index (its nearest stored
    vectors, or its full-text neighbours); without an index, every pair of a block. At most
    ``max_pairs`` candidate pairs are judged.
    """
    if not 0 < near_threshold <= 1:
        raise InvalidInput(f"near_threshold must be in (0, 1], got {near_threshold}")
    live: dict[str, Mapping[str, Any]] = {}
    for record in records:
        memory_id = record.get("id")
        if isinstance(memory_id, str) and not is_tombstone(record):
            live[memory_id] = record
    resolver = Resolver(live)
    deleted_ids = {
        str(r.get("id")) for r in records if is_tombstone(r) and str(r.get("id")) not in live
    }
    groups = _duplicates(live, near_threshold, max_pairs, neighbours)
    superseded_by = _superseded_by(live, resolver)
    for memory_id in sorted(live):
        record = live[memory_id]
        current = is_current(record)
        found = [
            _superseded_active(memory_id, record, superseded_by),
            _deleted_file(memory_id, record, exists) if current else None,
            _orphan(memory_id, record, resolver, deleted_ids),
            _stale(memory_id, record, stale) if current and stale is not None else None,
            _outdated(memory_id, record) if current else None,
        ]
        groups += [group for group in found if group is not None]
    rank = {kind: n for n, kind in enumerate(GROUP_KINDS)}
    return sorted(groups, key=lambda g: (rank[g.kind], g.ids[0], g.ids))


# -- duplicates ---------------------------------------------------------------------------------


def _duplicates(
    live: Live, threshold: float, max_pairs: int, neighbours: Neighbours | None
) -> list[Group]:
    """Return the duplicate and near-duplicate groups: same kind, scope and project, current."""
    blocks: dict[tuple[str, str, str], list[str]] = {}
    for memory_id in sorted(live):
        record = live[memory_id]
        kind = str(record.get("kind") or "")
        if kind in NO_DEDUPE_KINDS or not is_current(record):
            continue
        key = (kind, scope_of(record), str(record.get("project") or ""))
        blocks.setdefault(key, []).append(memory_id)
    budget = [max_pairs]
    groups: list[Group] = []
    for (kind, _, _), ids in sorted(blocks.items()):
        same: dict[str, list[str]] = {}
        for memory_id in ids:
            same.setdefault(text_of(live[memory_id]), []).append(memory_id)
        rest: list[tuple[str, str]] = []
        for text, members in same.items():
            if len(members) == 1:
                rest.append((members[0], text))
                continue
            keep = best_of(members, live)
            reason = (
                f"{len(members)} {kind} memories have the same title and text (case "
                f"and spacing aside); merge them into one led by {keep}."
            )
            groups.append(Group("duplicate", sorted(members), reason, "merge", keep=keep))
        groups += _near_groups(kind, rest, live, threshold, budget, neighbours)
    return groups


def _near_groups(
    kind: str,
    rest: Sequence[tuple[str, str]],
    live: Live,
    threshold: float,
    budget: list[int],
    neighbours: Neighbours | None,
) -> list[Group]:
    """Return the near-duplicate groups among one block's remaining (id, text) pairs."""
    uf = _UnionFind()
    tagged = frozenset(memory_id for memory_id, _ in rest if tags_drown(live[memory_id]))
    pairs = _near_pairs(rest, threshold, budget, neighbours, tagged)
    for a, b, _ in pairs:
        uf.union(a, b)
    clusters: dict[str, list[str]] = {}
    for memory_id in sorted(uf.parent):
        clusters.setdefault(uf.find(memory_id), []).append(memory_id)
    weakest: dict[str, float] = {}
    for a, _, score in pairs:
        root = uf.find(a)
        weakest[root] = min(weakest.get(root, 1.0), score)
    groups: list[Group] = []
    for root, members in clusters.items():
        keep = best_of(members, live)
        score = weakest[root]
        titles = "; ".join(repr(str(live[m].get("title") or "")) for m in members[:4])
        reason = (
            f"{len(members)} {kind} memories say nearly the same thing (text "
            f"similarity at least {score:.0%}): {titles}; merge them into one led "
            f"by {keep}."
        )
        groups.append(
            Group("near_duplicate", sorted(members), reason, "merge", keep=keep, score=score)
        )
    return groups


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, item: str) -> str:
        root = self.parent.setdefault(item, item)
        while root != self.parent[root]:
            root = self.parent[root]
        while item != root:  # path compression
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _near_pairs(
    items: Sequence[tuple[str, str]],
    threshold: float,
    budget: list[int],
    neighbours: Neighbours | None,
    tagged: frozenset[str] = frozenset(),
) -> list[tuple[str, str, float]]:
    """Return (id, id, similarity) of the texts at least ``threshold`` alike.

    Only candidate pairs are judged (``candidate_pairs``: each memory's neighbours in the
    index), so the work grows with the memories, not with the pairs of them. ``tagged``: the
    ids whose tags drown their vectors (``shapes.tags_drown``). The texts judged never hold
    tags: memories that share many tags and say different things are not alike.
    """
    block = [Item(memory_id, text, memory_id in tagged) for memory_id, text in items]
    words: dict[int, frozenset[str]] = {}  # made for the memories of a candidate pair only
    pairs: list[tuple[str, str, float]] = []
    for a, b in candidate_pairs(block, neighbours, budget):
        one, other = block[a], block[b]
        if a not in words:
            words[a] = words_of(one.text)
        if b not in words:
            words[b] = words_of(other.text)
        score = alike(one.text, other.text, words[a], words[b], threshold)
        if score is not None:
            low, high = sorted((one.id, other.id))
            pairs.append((low, high, score))
    return sorted(pairs)


# -- one memory at a time -----------------------------------------------------------------------


def _superseded_by(live: Live, resolver: Resolver) -> dict[str, list[str]]:
    """Return, by id, the live memories (not rejected) that supersede it."""
    superseded_by: dict[str, list[str]] = {}
    for other_id, other in live.items():
        if status_of(other) == "rejected":
            continue
        for link in links_of(other):
            if link.get("rel") != "supersedes":
                continue
            target = resolver.resolve(link["to"])
            if target is not None and target != other_id:
                superseded_by.setdefault(target, []).append(other_id)
    return superseded_by


def _superseded_active(
    memory_id: str, record: Mapping[str, Any], superseded_by: Mapping[str, list[str]]
) -> Group | None:
    """An active memory that another live memory supersedes: archive it."""
    if status_of(record) != "active" or memory_id not in superseded_by:
        return None
    names = ", ".join(sorted(set(superseded_by[memory_id])))
    reason = (
        f"{memory_id} is still active although {names} supersedes it; archive "
        "it so that only the newer memory speaks."
    )
    return Group("superseded_active", [memory_id], reason, "archive")


def _deleted_file(
    memory_id: str, record: Mapping[str, Any], exists: Callable[[str], bool]
) -> Group | None:
    """A file-bound memory none of whose (plain) files exists any more: archive it."""
    files = record.get("files")
    if not (
        str(record.get("kind") or "") in FILE_BOUND_KINDS
        and isinstance(files, list)
        and files
        and all(isinstance(p, str) and p and not (_GLOB_CHARS & set(p)) for p in files)
        and not any(exists(p) for p in files)
    ):
        return None
    reason = (
        f"{record.get('kind')} {memory_id} is about "
        f"{', '.join(sorted(files))}, which no longer "
        f"{'exists' if len(files) == 1 else 'exist'} in the repository; "
        "archive it."
    )
    return Group("deleted_file", [memory_id], reason, "archive")


def _orphan(
    memory_id: str, record: Mapping[str, Any], resolver: Resolver, deleted_ids: set[str]
) -> Group | None:
    """A memory linking to what is not a live memory: keep it, drop the dangling links."""
    dangling = sorted(
        {str(link["to"]) for link in links_of(record) if resolver.resolve(link["to"]) is None}
    )
    if not dangling:
        return None
    named = ", ".join(f"{d} (deleted)" if d in deleted_ids else d for d in dangling)
    reason = (
        f"{memory_id} links to {named}, which "
        f"{'is' if len(dangling) == 1 else 'are'} not a live memory; keep the "
        "memory and drop the dangling "
        f"{'link' if len(dangling) == 1 else 'links'}."
    )
    return Group("orphan", [memory_id], reason, "keep")


def _stale(memory_id: str, record: Mapping[str, Any], stale: Stale) -> Group | None:
    """A memory whose anchored files changed a lot (or are gone): check it, or archive it."""
    sentences = [str(s) for s in stale(record) or []]
    most, deleted = _stale_counts(sentences)
    if not sentences or (most < STALE_MIN_COMMITS and not deleted):
        return None
    anchored = {
        str(a.get("path"))
        for a in record.get("anchors") or []
        if isinstance(a, Mapping) and a.get("path")
    }
    gone = bool(deleted) and (
        anchored <= set(deleted) if anchored else len(deleted) == len(sentences)
    )
    advice = (
        "archive it: everything it is anchored to is gone."
        if gone
        else "keep it, but check it against the code."
    )
    return Group(
        kind="stale",
        ids=[memory_id],
        reason=f"{memory_id} may be stale: {'; '.join(sentences)}; {advice}",
        action="archive" if gone else "keep",
        score=1.0 if gone else min(1.0, most / 10),
    )


def _stale_counts(sentences: Sequence[str]) -> tuple[int, list[str]]:
    """Return the most commits any file changed in, and the paths said to be deleted."""
    most, deleted = 0, []
    for sentence in sentences:
        if sentence.endswith("was deleted since it was written") or " was deleted" in sentence:
            deleted.append(sentence.split(" was deleted", 1)[0])
            continue
        match = _COMMITS_RE.search(sentence)
        if match:
            most = max(most, int(match.group(1)))
    return most, deleted


def _outdated(memory_id: str, record: Mapping[str, Any]) -> Group | None:
    """A memory last judged outdated (archive it) or wrong (delete it)."""
    latest = latest_judgement(record)
    verdict = latest.get("verdict") if latest is not None else None
    if latest is None or verdict not in ("outdated", "wrong"):
        return None
    by = f" by {latest['by']}" if latest.get("by") else ""
    why = f" ({latest['reason']})" if latest.get("reason") else ""
    reason = (
        f"{memory_id} was last judged {verdict}{by}{why}; "
        f"{'archive' if verdict == 'outdated' else 'delete'} it."
    )
    return Group("outdated", [memory_id], reason, "archive" if verdict == "outdated" else "delete")
