"""The trainer's analysis: clusters of related memories, recurring problems, supersede chains.

Reads memories.jsonl (never writes it) and turns it into protocol events: ``Insight`` for each
cluster (similar text, or ≥2 shared files, or ≥2 shared tags), each file or tag with pitfalls
and bug fixes recurring over ≥2 weeks, and each supersede chain of ≥3 memories;
``Recommendation`` to merge near-identical memories and to archive superseded-but-active ones.
Output is deterministic for the same store (only the timing metrics vary) and insight ids are
stable, so re-training yields the same ids. Records are untrusted: a field of the wrong type is
read as empty, never raised on.

Cost stays near-linear: text similarity is only scored for pairs that share one of each
memory's rarest words, and shared-attribute groups are keyed by pairs of tags or files.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations, zip_longest
from pathlib import Path
from typing import Final

from engram.errors import CorruptStore, InvalidInput
from engram.model import Record, is_tombstone, normalize_content, parse_line, parse_time
from engram.store.jsonl import MEMORIES
from engram.trainer.protocol import (
    Complete,
    Event,
    Insight,
    InsightType,
    Metric,
    Progress,
    Recommendation,
    clip,
)

# Kinds that record activity or are themselves derived: never clustered.
SKIP_KINDS: Final = frozenset({"session", "prompt", "insight"})
PROBLEM_KINDS: Final = frozenset({"pitfall", "bugfix"})
DEAD_STATUSES: Final = frozenset({"superseded", "archived", "rejected"})
TEXT_THRESHOLD: Final = 70.0  # rapidfuzz token_set_ratio on title + content
NEAR_IDENTICAL: Final = 95.0  # rapidfuzz ratio on normalised title + content
MAX_GROUP: Final = 50  # a word, tag pair or file pair shared by more is background, not a theme
RARE_WORDS: Final = 3  # each memory is compared through its rarest few words
ATTR_ITEMS: Final = 8  # tags/files per memory considered for shared pairs
TEXT_CHARS: Final = 600  # of content compared (the title and opening say what it is about)
_WORD_RE: Final = re.compile(r"[0-9a-z][0-9a-z_]{2,}")
_STOPWORD_TEXT: Final = """
about above after again against also always because been before being below between both but
can cannot could did does doing done down during each either else every few for from further
had has have having here how into its itself just more most much must never not now off once
only other our out over own same should since some still such than that the their them then
there these they this those through too under until use used uses using very was were what
when where which while who why will with within without would you your and are all any new
one two get set see via per etc yes
"""
STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())
# Tags that name a kind restate the filter, not a theme.
GENERIC_TAGS: Final = frozenset({"bug", "bugfix", "fix", "pitfall", "gotcha", "problem"})


# -- reading -----------------------------------------------------------------------------------


@dataclass
class Loaded:
    """The readable records of a store and how many lines were not."""

    records: list[Record] = field(default_factory=list)
    bad_lines: int = 0


def load(engram_dir: Path) -> Loaded:
    """Read memories.jsonl read-only; skip (and count) lines that do not parse or repeat an id."""
    if not engram_dir.is_dir():
        raise InvalidInput(f"no engram store at {engram_dir}", hint="pass --store PATH/.engram")
    path = engram_dir / MEMORIES
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Loaded()
    out = Loaded()
    seen: set[str] = set()
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = parse_line(raw, path=str(path), lineno=lineno)
        except CorruptStore:
            out.bad_lines += 1
            continue
        if record["id"] in seen:
            out.bad_lines += 1
            continue
        seen.add(record["id"])
        out.records.append(record)
    return out


def _text(record: Record, name: str) -> str:
    value = record.get(name)
    return value if isinstance(value, str) else ""


def _strs(record: Record, name: str) -> list[str]:
    value = record.get(name)
    if not isinstance(value, list):
        return []
    return sorted({item.strip() for item in value if isinstance(item, str) and item.strip()})


def _tags(record: Record) -> list[str]:
    return sorted({tag.lower() for tag in _strs(record, "tags")})


def _created(record: Record) -> datetime | None:
    try:
        return parse_time(_text(record, "created_at"))
    except InvalidInput:
        return None


def _status(record: Record) -> str:
    return _text(record, "status").strip().lower() or "active"


def _kind(record: Record) -> str:
    return _text(record, "kind").strip().lower()


def _words(text: str) -> set[str]:
    return {word for word in _WORD_RE.findall(text.lower()) if word not in STOPWORDS}


def _body(record: Record) -> str:
    return f"{_text(record, 'title')}\n{_text(record, 'content')[:TEXT_CHARS]}"


def insight_id(insight_type: str, source_ids: Iterable[str]) -> str:
    """Return the stable id of an insight: a hash of its type and its sorted sources."""
    text = insight_type + "\n" + "\n".join(sorted(source_ids))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _titles(records: Sequence[Record], limit: int = 10) -> str:
    shown = [clip(_text(r, "title") or r["id"], 80) for r in records[:limit]]
    more = f"; and {len(records) - limit} more" if len(records) > limit else ""
    return "; ".join(shown) + more


def _listing(items: Sequence[str], limit: int = 3) -> str:
    more = f" and {len(items) - limit} more" if len(items) > limit > 3 else ""
    return ", ".join(items[:limit]) + more


def _top(counts: Counter[str], minimum: int, limit: int) -> list[str]:
    ranked = sorted(
        (item for item, n in counts.items() if n >= minimum), key=lambda k: (-counts[k], k)
    )
    return ranked[:limit]


# -- clusters ----------------------------------------------------------------------------------


class _UnionFind:
    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, item: int) -> int:
        root = item
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[item] != root:
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # The smaller index wins: components do not depend on the order of unions.
            self.parent[max(ra, rb)] = min(ra, rb)


def find_clusters(records: Sequence[Record], min_cluster: int) -> list[list[Record]]:
    """Group live memories that read alike or share ≥2 files or ≥2 tags; biggest first.

    Candidate groups are the memories holding one pair of files, one pair of tags, or reading
    like one centre memory (token_set_ratio ≥ TEXT_THRESHOLD). They are taken greedily, biggest
    first, each memory joining at most one cluster. Unlike connected components this never
    chains A~B~C~… into one giant cluster whose ends have nothing in common.
    """
    members = sorted(
        (
            r
            for r in records
            if not is_tombstone(r)
            and _kind(r) not in SKIP_KINDS
            and _status(r) not in DEAD_STATUSES
        ),
        key=lambda r: str(r["id"]),
    )
    candidates: list[tuple[int, str, list[int]]] = []
    # Shared attributes: the memories holding one pair of files (or tags).
    keyed: dict[tuple[int, str, str], list[int]] = defaultdict(list)
    for index, record in enumerate(members):
        for order, values in ((0, _strs(record, "files")), (1, _tags(record))):
            for a, b in combinations(values[:ATTR_ITEMS], 2):
                keyed[(order, a, b)].append(index)
    for (order, a, b), indexes in keyed.items():
        if min_cluster <= len(indexes) <= MAX_GROUP:
            candidates.append((order, f"{a}\x1f{b}", indexes))
    # Similar text: score only pairs sharing one of each memory's rarest words.
    from rapidfuzz import fuzz

    bodies = [_body(r).lower() for r in members]
    words = [_words(body) for body in bodies]
    freq: Counter[str] = Counter(word for bag in words for word in bag)
    postings: dict[str, list[int]] = defaultdict(list)
    for index, bag in enumerate(words):
        for word in bag:
            if 2 <= freq[word] <= MAX_GROUP:
                postings[word].append(index)
    rank = {word: n for n, word in enumerate(sorted(postings, key=lambda w: (freq[w], w)))}
    near: list[set[int]] = [set() for _ in members]
    for index, bag in enumerate(words):
        if len(bag) < 3:
            continue  # too short to say anything; token_set_ratio would match it to everything
        rare = sorted((w for w in bag if w in rank), key=rank.__getitem__)[:RARE_WORDS]
        for other in sorted({o for word in rare for o in postings[word] if o > index}):
            # Cheap filter first: token_set_ratio rewards shared words, so pairs sharing few
            # are not worth scoring (and long texts of look-alike tokens would pass by chance).
            shared = len(bag & words[other])
            if shared < 2 or shared * 4 < min(len(bag), len(words[other])):
                continue
            score = fuzz.token_set_ratio(bodies[index], bodies[other], score_cutoff=TEXT_THRESHOLD)
            if score >= TEXT_THRESHOLD:
                near[index].add(other)
                near[other].add(index)
    for index, hood in enumerate(near):
        if len(hood) + 1 >= min_cluster:
            candidates.append((2, str(members[index]["id"]), sorted({index, *hood})))
    candidates.sort(key=lambda c: (-len(c[2]), c[0], c[1]))
    taken: set[int] = set()
    found: list[list[Record]] = []
    for _, _, indexes in candidates:
        free = [index for index in indexes if index not in taken]
        if len(free) >= min_cluster:
            taken.update(free)
            found.append([members[index] for index in free])
    found.sort(key=lambda group: (-len(group), str(group[0]["id"])))
    return found


def cluster_insight(group: Sequence[Record]) -> Insight:
    """Describe one cluster: its shared tags, files and words, and its members' titles."""
    size = len(group)
    half = max(2, math.ceil(size / 2))
    # Shared means held by at least half the members: two of twenty is a coincidence.
    tags = _top(Counter(tag for r in group for tag in _tags(r)), half, 5)
    files = _top(Counter(path for r in group for path in _strs(r, "files")), half, 3)
    words = _top(Counter(w for r in group for w in _words(_text(r, "title"))), half, 3)
    if len(words) < 2:
        words = _top(Counter(w for r in group for w in _words(_body(r))), half, 3)
    label = _listing(tags) or _listing(files, 2) or _listing(words) or "one theme"
    shared = []
    if tags:
        shared.append(f"the tags {_listing(tags)}")
    if files:
        shared.append(f"the files {_listing(files)}")
    if words:
        shared.append(f"the words {_listing(words)}")
    ids = sorted(str(r["id"]) for r in group)
    return Insight(
        id=insight_id("cluster", ids),
        context=f"{size} memories about {label}",
        action=(
            f"Treat {label} as one theme: these memories share "
            f"{' and '.join(shared) or 'similar text'}; read them together and fold what "
            "they agree on into one principle or pattern."
        ),
        result=f"Titles: {_titles(group)}",
        insight_type="cluster",
        tags=tags,
        source_ids=ids,
    )


def merge_recommendations(group: Sequence[Record]) -> list[Recommendation]:
    """Recommend merging near-identical members of a cluster into the oldest of them."""
    from rapidfuzz import fuzz

    ordered = sorted(group, key=lambda r: (_text(r, "created_at"), str(r["id"])))
    texts = [normalize_content(_body(r)) for r in ordered]
    same = _UnionFind(len(ordered))
    for a, b in combinations(range(len(ordered)), 2) if len(ordered) <= 200 else ():
        if fuzz.ratio(texts[a], texts[b], score_cutoff=NEAR_IDENTICAL) >= NEAR_IDENTICAL:
            same.union(a, b)
    copies: dict[int, list[int]] = defaultdict(list)
    for index in range(len(ordered)):
        copies[same.find(index)].append(index)
    out = []
    for root, indexes in sorted(copies.items()):
        if len(indexes) < 2:
            continue
        oldest = ordered[root]  # the smallest index of a group is its oldest member
        others = [str(ordered[i]["id"]) for i in indexes if i != root]
        out.append(
            Recommendation(
                target_id=str(oldest["id"]),
                action="merge",
                reasoning=(
                    f"{len(others)} near-identical cop{'y' if len(others) == 1 else 'ies'} "
                    f"({', '.join(sorted(others))}) of {clip(_text(oldest, 'title'), 80)!r}: "
                    "merge them into this one, the oldest"
                ),
            )
        )
    return out


# -- recurring problems ------------------------------------------------------------------------


def _week(moment: datetime) -> str:
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def temporal_insights(records: Sequence[Record]) -> list[Insight]:
    """Find files (then tags) with ≥3 pitfalls or bug fixes created in ≥2 distinct weeks."""
    problems = [
        r
        for r in records
        if not is_tombstone(r)
        and _kind(r) in PROBLEM_KINDS
        and _status(r) not in {"rejected", "archived"}
        and _created(r) is not None
    ]
    by_key: dict[tuple[int, str], list[Record]] = defaultdict(list)
    for record in problems:
        for path in _strs(record, "files"):
            by_key[(0, path)].append(record)
        for tag in _tags(record):
            if tag not in GENERIC_TAGS:
                by_key[(1, tag)].append(record)
    out: list[Insight] = []
    seen: set[str] = set()
    for (order, key), group in sorted(by_key.items()):
        if len(group) < 3 or (order == 1 and len(group) > MAX_GROUP):
            continue  # a tag on that many problems is a category, not a hotspot
        group = sorted(group, key=lambda r: (_text(r, "created_at"), str(r["id"])))
        moments = [m for m in (_created(r) for r in group) if m is not None]
        weeks = sorted({_week(m) for m in moments})
        if len(weeks) < 2:
            continue
        ids = sorted(str(r["id"]) for r in group)
        iid = insight_id("temporal", ids)
        if iid in seen:
            continue  # the same memories already explained by a file (or another tag)
        seen.add(iid)
        where = key if order == 0 else f"#{key}"
        dates = sorted({m.date().isoformat() for m in moments})
        out.append(
            Insight(
                id=iid,
                context=f"recurring problems in {where}",
                action=(
                    f"{len(group)} pitfalls and bug fixes about {where} were recorded in "
                    f"{len(weeks)} different weeks ({dates[0]} to {dates[-1]}): review it "
                    "before changing it, and add a test or check that stops them coming back."
                ),
                result=f"Dates: {_listing(dates, 12)}. Titles: {_titles(group)}",
                insight_type="temporal",
                tags=_top(Counter(t for r in group for t in _tags(r)), 2, 5),
                source_ids=ids,
            )
        )
    return out


# -- supersede chains --------------------------------------------------------------------------


def _supersede_edges(records: Sequence[Record]) -> tuple[dict[str, Record], dict[str, list[str]]]:
    """Return live records by id and, for each, the ids it supersedes (present ones only)."""
    by_id = {str(r["id"]): r for r in records if not is_tombstone(r)}
    edges: dict[str, list[str]] = {}
    for rid, record in by_id.items():
        links = record.get("links")
        targets = sorted(
            {
                str(link["to"])
                for link in (links if isinstance(links, list) else [])
                if isinstance(link, dict)
                and link.get("rel") == "supersedes"
                and isinstance(link.get("to"), str)
                and link["to"] in by_id
                and link["to"] != rid
            }
        )
        if targets:
            edges[rid] = targets
    return by_id, edges


def lineage_insights(records: Sequence[Record]) -> list[Insight]:
    """Find supersede chains of ≥3 memories, each followed from its newest end."""
    by_id, edges = _supersede_edges(records)
    superseded = {target for targets in edges.values() for target in targets}
    longest: dict[str, list[str]] = {}

    def chain(start: str, stack: frozenset[str]) -> list[str]:
        if start in longest:
            return longest[start]
        best: list[str] = []
        for target in edges.get(start, []):
            if target in stack:
                continue  # a cycle of supersedes: stop rather than loop
            path = chain(target, stack | {target})
            if len(path) > len(best):
                best = path
        longest[start] = [start, *best]
        return longest[start]

    out = []
    for head in sorted(set(edges) - superseded):
        path = chain(head, frozenset({head}))  # newest first
        if len(path) < 3:
            continue
        newest = by_id[head]
        kind = _kind(newest) or "memory"
        subject = clip(_text(newest, "title") or head, 80)
        steps = []
        for rid in reversed(path):
            moment = _created(by_id[rid])
            steps.append(f"{rid} ({moment.date().isoformat()})" if moment else rid)
        out.append(
            Insight(
                id=insight_id("lineage", path),
                context=f"{kind} about {subject} revised {len(path) - 1} times",
                action=(
                    f"Follow the latest version ({head}); before revising it again, read why "
                    f"each of the {len(path) - 1} earlier versions was replaced."
                ),
                result=f"Chain, oldest first: {' → '.join(steps)}",
                insight_type="lineage",
                tags=_tags(newest),
                source_ids=sorted(path),
            )
        )
    return out


def archive_recommendations(records: Sequence[Record]) -> list[Recommendation]:
    """Recommend archiving memories that a live memory supersedes but that are still active."""
    by_id, edges = _supersede_edges(records)
    out: dict[str, Recommendation] = {}
    for rid in sorted(edges):
        if _status(by_id[rid]) in {"rejected", "archived"}:
            continue
        for target in edges[rid]:
            if target in out or _status(by_id[target]) not in {"active", "proposed"}:
                continue
            out[target] = Recommendation(
                target_id=target,
                action="archive",
                reasoning=(
                    f"superseded by {rid} ({clip(_text(by_id[rid], 'title'), 80)!r}) "
                    "but still active"
                ),
            )
    return [out[key] for key in sorted(out)]


# -- the run -----------------------------------------------------------------------------------

_TYPE_ORDER: Final[tuple[InsightType, ...]] = ("lineage", "temporal", "cluster")


def train(
    engram_dir: Path,
    emit: Callable[[Event], None],
    *,
    min_cluster: int = 3,
    max_insights: int = 50,
) -> int:
    """Analyse a store and emit progress, insights, recommendations, metrics and complete."""
    started = time.monotonic()
    timings: dict[str, float] = {}
    clock = started

    def lap(stage: str) -> None:
        nonlocal clock
        current = time.monotonic()
        timings[stage] = current - clock
        clock = current

    emit(Progress("load", 0))
    loaded = load(engram_dir)
    lap("load")
    emit(Progress("cluster", 20))
    clusters = find_clusters(loaded.records, min_cluster)
    found: list[Insight] = [cluster_insight(group) for group in clusters]
    recommendations = [rec for group in clusters for rec in merge_recommendations(group)]
    lap("cluster")
    emit(Progress("temporal", 60))
    found += temporal_insights(loaded.records)
    lap("temporal")
    emit(Progress("lineage", 80))
    found += lineage_insights(loaded.records)
    recommendations += archive_recommendations(loaded.records)
    lap("lineage")
    # Each type ranked strongest first (most sources, then id), then the types taken in turn
    # (lineage, temporal, cluster), so that many clusters cannot crowd out the rarer kinds.
    unique = {insight.id: insight for insight in found}
    per_type = [
        sorted(
            (i for i in unique.values() if i.insight_type == kind),
            key=lambda i: (-len(i.source_ids), i.id),
        )
        for kind in _TYPE_ORDER
    ]
    turns = [i for row in zip_longest(*per_type) for i in row if i is not None]
    ranked = turns[: max(max_insights, 0)]
    for insight in ranked:
        emit(insight)
    recommendations.sort(key=lambda r: (r.action, r.target_id))
    for recommendation in recommendations:
        emit(recommendation)
    counts: dict[str, float] = {
        "memories_read": len(loaded.records),
        "bad_lines": loaded.bad_lines,
        "clusters": len(clusters),
        "insights_found": len(unique),
        "recommendations": len(recommendations),
    }
    for name, value in counts.items():
        emit(Metric(name, value))
    for stage, seconds in timings.items():
        emit(Metric(f"seconds_{stage}", round(seconds, 6)))
    emit(Progress("done", 100))
    emit(Complete(len(ranked), round(time.monotonic() - started, 6)))
    return len(ranked)
