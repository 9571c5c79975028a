"""Memory hygiene: find groups of memories to tidy, recommend an action, plan the exact writes.

Three pure steps that the service wires as preview → analysis → apply (issue 7):

- ``find_groups`` reads live records and returns candidate ``Group``\\ s: exact and near
  duplicates, superseded memories still active, pitfalls about deleted files, dangling links,
  memories whose anchored files changed a lot, and memories judged outdated or wrong.
- ``recommend`` turns each group into a ``Recommendation``: the group's proposed action by
  deterministic heuristics, or the decision of an LLM callable (``llm_command`` adapts a
  configured command) with a fallback to the heuristic whenever its answer is unusable.
- ``plan_changes`` returns the full new versions of the records to write. Nothing is lost: a
  merge writes one new memory that ``supersedes`` the others (their text untouched, status
  superseded), archive is a status, delete is a soft tombstone that keeps the text. Applying
  the same plan twice changes nothing.

This module does no store I/O and never writes files: the service reads the records, calls
these functions and writes what ``plan_changes`` returns through the store. It runs the one
configured LLM command as a subprocess (no shell) and nothing else.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import heapq
import json
import math
import re
import shlex
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from engram.errors import InvalidInput
from engram.model import change_time, check_id, is_tombstone, loads, normalize_content

GROUP_KINDS: Final = (
    "duplicate",
    "near_duplicate",
    "superseded_active",
    "deleted_file",
    "orphan",
    "stale",
    "outdated",
)
ACTIONS: Final = ("merge", "archive", "delete", "keep")
DECIDERS: Final = ("heuristic", "llm")
PLAN_VERSION: Final = 1

# Kinds that record events rather than knowledge: many alike are expected, never merged.
NO_DEDUPE_KINDS: Final = frozenset({"session", "prompt", "insight"})
# Kinds whose advice is about particular files, so a deleted file makes them moot.
FILE_BOUND_KINDS: Final = frozenset({"pitfall", "decision", "bugfix", "pattern"})
# Statuses of memories that still speak; superseded, archived and rejected ones are tidy already.
CURRENT_STATUSES: Final = frozenset({"active", "proposed"})
STALE_MIN_COMMITS: Final = 3
LLM_CONTENT_CHARS: Final = 2000
LLM_OUTPUT_BYTES: Final = 1_000_000
# Near-duplicate candidates share a rare word: prefix filtering over words ordered by rarity,
# sized so that texts sharing at least this share of their distinct words always meet.
_WORD_OVERLAP: Final = 0.9
_MIN_PREFIX: Final = 8
# A cheap check before the character comparison: near duplicates share most of their words.
_WORD_SHARE: Final = 0.5
_GLOB_CHARS: Final = frozenset("*?[")
_WORD_RE: Final = re.compile(r"\w+")
_ID_TOKEN_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*[A-Za-z0-9]|[A-Za-z0-9]")
_COMMITS_RE: Final = re.compile(r"changed in (?:at least )?(\d+) commits?")


def _fail(message: str) -> InvalidInput:
    return InvalidInput(message, hint="make a fresh plan with `engram consolidate`")


@dataclass
class Group:
    """Memories that belong together for one hygiene reason, with a proposed action."""

    kind: str
    ids: list[str]
    reason: str
    action: str
    keep: str | None = None
    score: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        """Return the group as JSON-ready data."""
        return {
            "kind": self.kind,
            "ids": list(self.ids),
            "reason": self.reason,
            "action": self.action,
            "keep": self.keep,
            "score": self.score,
        }

    @classmethod
    def from_dict(cls, raw: Any, *, where: str = "group") -> Group:
        """Build a group from JSON data, raising InvalidInput naming the bad field."""
        if not isinstance(raw, Mapping):
            raise _fail(f"{where} must be an object, got {type(raw).__name__}")
        kind = raw.get("kind")
        if kind not in GROUP_KINDS:
            raise _fail(f"{where}.kind must be one of {', '.join(GROUP_KINDS)}, got {kind!r}")
        ids = raw.get("ids")
        if not isinstance(ids, list) or not ids:
            raise _fail(f"{where}.ids must be a non-empty list of memory ids")
        for position, item in enumerate(ids):
            if not isinstance(item, str):
                raise _fail(f"{where}.ids[{position}] must be a memory id, got {item!r}")
            try:
                check_id(item)
            except InvalidInput as exc:
                raise _fail(f"{where}.ids[{position}]: {exc.message}") from exc
        if len(set(ids)) != len(ids):
            raise _fail(f"{where}.ids lists an id twice")
        reason = raw.get("reason")
        if not isinstance(reason, str):
            raise _fail(f"{where}.reason must be text")
        action = raw.get("action")
        if action not in ACTIONS:
            raise _fail(f"{where}.action must be one of {', '.join(ACTIONS)}, got {action!r}")
        keep = raw.get("keep")
        if keep is not None and keep not in ids:
            raise _fail(f"{where}.keep must be one of {where}.ids, got {keep!r}")
        score = raw.get("score", 1.0)
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
            raise _fail(f"{where}.score must be a number from 0 to 1, got {score!r}")
        return cls(
            kind=kind,
            ids=sorted(ids),
            reason=reason,
            action=action,
            keep=keep,
            score=float(score),
        )


@dataclass
class Recommendation:
    """The decision for one group: an action, the leading id of a merge, and why."""

    group: Group
    action: str
    target: str | None
    reasoning: str
    decided_by: str = field(default="heuristic")

    def to_dict(self) -> dict[str, Any]:
        """Return the recommendation as JSON-ready data."""
        return {
            "group": self.group.to_dict(),
            "action": self.action,
            "target": self.target,
            "reasoning": self.reasoning,
            "decided_by": self.decided_by,
        }

    @classmethod
    def from_dict(cls, raw: Any, *, where: str = "recommendation") -> Recommendation:
        """Build a recommendation from JSON data, raising InvalidInput naming the bad field."""
        if not isinstance(raw, Mapping):
            raise _fail(f"{where} must be an object, got {type(raw).__name__}")
        group = Group.from_dict(raw.get("group"), where=f"{where}.group")
        action = raw.get("action")
        if action not in ACTIONS:
            raise _fail(f"{where}.action must be one of {', '.join(ACTIONS)}, got {action!r}")
        target = raw.get("target")
        if action == "merge":
            if len(group.ids) < 2:
                raise _fail(f"{where}.action merge needs a group of two or more memories")
            if target not in group.ids:
                raise _fail(f"{where}.target must be one of the group's ids, got {target!r}")
        elif target is not None:
            raise _fail(f"{where}.target must be null unless the action is merge")
        reasoning = raw.get("reasoning")
        if not isinstance(reasoning, str):
            raise _fail(f"{where}.reasoning must be text")
        decided_by = raw.get("decided_by", "heuristic")
        if decided_by not in DECIDERS:
            raise _fail(f"{where}.decided_by must be heuristic or llm, got {decided_by!r}")
        return cls(
            group=group, action=action, target=target, reasoning=reasoning, decided_by=decided_by
        )


# --- finding groups -------------------------------------------------------------------------


def _status(record: Mapping[str, Any]) -> str:
    return str(record.get("status") or "active")


def _is_current(record: Mapping[str, Any]) -> bool:
    return _status(record) in CURRENT_STATUSES


def _links(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    links = record.get("links")
    if not isinstance(links, list):
        return []
    return [link for link in links if isinstance(link, Mapping) and isinstance(link.get("to"), str)]


def _text(record: Mapping[str, Any]) -> str:
    """Return a record's title and content as compared for duplicates."""
    return normalize_content(f"{record.get('title') or ''}\n{record.get('content') or ''}")


class _Resolver:
    """Resolve link targets as engram does: a full id or a unique prefix of a live id."""

    def __init__(self, ids: Iterable[str]) -> None:
        self.ids = sorted(ids)
        self.known = set(self.ids)

    def resolve(self, target: str) -> str | None:
        """Return the live id a link points at, or None when it points at nothing."""
        if target in self.known:
            return target
        start = bisect.bisect_left(self.ids, target)
        if start < len(self.ids) and self.ids[start].startswith(target):
            return self.ids[start]  # an ambiguous prefix still points somewhere: not dangling
        return None


def _useful_count(record: Mapping[str, Any]) -> int:
    judgements = record.get("judgements")
    if not isinstance(judgements, list):
        return 0
    return sum(1 for j in judgements if isinstance(j, Mapping) and j.get("verdict") == "useful")


def _importance(record: Mapping[str, Any]) -> int:
    value = record.get("importance", 3)
    return value if isinstance(value, int) and not isinstance(value, bool) else 3


def best_of(ids: Iterable[str], records: Mapping[str, Mapping[str, Any]]) -> str:
    """Return the id that should lead a merge: most important, most judged useful, newest."""

    def rank(memory_id: str) -> tuple[int, int, str, str, str]:
        record = records.get(memory_id, {})
        return (
            _importance(record),
            _useful_count(record),
            str(record.get("updated_at") or ""),
            str(record.get("created_at") or ""),
            memory_id,
        )

    return max(ids, key=rank)


def _latest_judgement(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    judgements = record.get("judgements")
    if not isinstance(judgements, list):
        return None
    found = [
        (str(j.get("at") or ""), n, j) for n, j in enumerate(judgements) if isinstance(j, Mapping)
    ]
    return max(found, key=lambda item: (item[0], item[1]))[2] if found else None


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
    items: Sequence[tuple[str, str]], *, threshold: float, budget: list[int]
) -> list[tuple[str, str, float]]:
    """Return (id, id, similarity) of the texts at least ``threshold`` alike (rapidfuzz ratio).

    Comparing every pair is quadratic (10k memories of one kind are 50M comparisons), so
    candidates come from prefix filtering: each text's distinct words are ordered rarest first
    (rarity within the block), and two texts are compared only when they share a word among
    the front of both lists (the rarest tenth; for short texts, enough words that any two
    sharing half of their words meet, up to ``_MIN_PREFIX``), share at least half of their
    words, and have lengths that allow the threshold (a ratio of ``t`` needs the shorter text
    to be at least ``t / (2 - t)`` of the longer). This is blocking, not a bound:
    near duplicates whose rare words all differ are missed. ``budget`` caps the candidates
    examined, so a pathological store still ends in bounded time (later texts go unpaired).
    """
    from rapidfuzz import fuzz, process

    words = [frozenset(_WORD_RE.findall(text)) for _, text in items]
    lengths = [len(text) for _, text in items]
    frequency: dict[str, int] = {}
    for tokens in words:
        for token in tokens:
            frequency[token] = frequency.get(token, 0) + 1
    rank = {token: n for n, token in enumerate(sorted(frequency, key=lambda t: (frequency[t], t)))}
    order = sorted(range(len(items)), key=lambda n: (lengths[n], items[n][0]))
    postings: dict[str, list[int]] = {}
    cutoff = threshold * 100
    shortest = threshold / (2 - threshold)
    pairs: list[tuple[str, str, float]] = []
    for n in order:
        own = words[n]
        if not own or budget[0] <= 0:
            continue
        # Short texts change a large share of their words with a few edits, so they get a
        # prefix long enough for the half-shared-words rule; long ones their rarest tenth.
        half = len(own) - math.ceil(_WORD_SHARE * len(own)) + 1
        size = max(len(own) - math.ceil(_WORD_OVERLAP * len(own)) + 1, min(half, _MIN_PREFIX))
        prefix = heapq.nsmallest(size, own, key=rank.__getitem__)
        floor = lengths[n] * shortest
        candidates: set[int] = set()
        for token in prefix:
            candidates.update(postings.get(token, ()))
        budget[0] -= len(candidates)
        choices = {
            m: items[m][1]
            for m in candidates
            if lengths[m] >= floor
            and len(own & words[m]) >= _WORD_SHARE * min(len(own), len(words[m]))
        }
        if choices:
            memory_id, text = items[n]
            for _, score, m in process.extract(
                text, choices, scorer=fuzz.ratio, score_cutoff=cutoff, limit=None
            ):
                a, b = sorted((memory_id, items[m][0]))
                pairs.append((a, b, round(score / 100, 4)))
        for token in prefix:
            postings.setdefault(token, []).append(n)
    return sorted(pairs)


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


def find_groups(
    records: Sequence[Mapping[str, Any]],
    *,
    exists: Callable[[str], bool],
    stale: Callable[[Mapping[str, Any]], list[str]] | None = None,
    near_threshold: float = 0.88,
    max_pairs: int = 2_000_000,
) -> list[Group]:
    """Find the groups of live memories worth tidying, each with a reason and proposed action."""
    if not 0 < near_threshold <= 1:
        raise InvalidInput(f"near_threshold must be in (0, 1], got {near_threshold}")
    live: dict[str, Mapping[str, Any]] = {}
    for record in records:
        memory_id = record.get("id")
        if isinstance(memory_id, str) and not is_tombstone(record):
            live[memory_id] = record
    resolver = _Resolver(live)
    deleted_ids = {
        str(r.get("id")) for r in records if is_tombstone(r) and str(r.get("id")) not in live
    }
    groups: list[Group] = []

    # Duplicates and near duplicates: same kind, scope and project, current memories only.
    blocks: dict[tuple[str, str, str], list[str]] = {}
    for memory_id in sorted(live):
        record = live[memory_id]
        kind = str(record.get("kind") or "")
        if kind in NO_DEDUPE_KINDS or not _is_current(record):
            continue
        key = (kind, str(record.get("scope") or "project"), str(record.get("project") or ""))
        blocks.setdefault(key, []).append(memory_id)
    budget = [max_pairs]
    for (kind, _, _), ids in sorted(blocks.items()):
        same: dict[str, list[str]] = {}
        for memory_id in ids:
            same.setdefault(_text(live[memory_id]), []).append(memory_id)
        rest: list[tuple[str, str]] = []
        for text, members in same.items():
            if len(members) == 1:
                rest.append((members[0], text))
                continue
            keep = best_of(members, live)
            groups.append(
                Group(
                    kind="duplicate",
                    ids=sorted(members),
                    reason=(
                        f"{len(members)} {kind} memories have the same title and text (case "
                        f"and spacing aside); merge them into one led by {keep}."
                    ),
                    action="merge",
                    keep=keep,
                )
            )
        uf = _UnionFind()
        pairs = _near_pairs(rest, threshold=near_threshold, budget=budget)
        for a, b, _ in pairs:
            uf.union(a, b)
        clusters: dict[str, list[str]] = {}
        for memory_id in sorted(uf.parent):
            clusters.setdefault(uf.find(memory_id), []).append(memory_id)
        weakest: dict[str, float] = {}
        for a, _, score in pairs:
            root = uf.find(a)
            weakest[root] = min(weakest.get(root, 1.0), score)
        for root, members in clusters.items():
            keep = best_of(members, live)
            score = weakest[root]
            titles = "; ".join(repr(str(live[m].get("title") or "")) for m in members[:4])
            groups.append(
                Group(
                    kind="near_duplicate",
                    ids=sorted(members),
                    reason=(
                        f"{len(members)} {kind} memories say nearly the same thing (text "
                        f"similarity at least {score:.0%}): {titles}; merge them into one led "
                        f"by {keep}."
                    ),
                    action="merge",
                    keep=keep,
                    score=score,
                )
            )

    # Superseded but still active: another live memory (not rejected) supersedes it.
    superseded_by: dict[str, list[str]] = {}
    for other_id, other in live.items():
        if _status(other) == "rejected":
            continue
        for link in _links(other):
            if link.get("rel") != "supersedes":
                continue
            target = resolver.resolve(link["to"])
            if target is not None and target != other_id:
                superseded_by.setdefault(target, []).append(other_id)

    for memory_id in sorted(live):
        record = live[memory_id]
        current = _is_current(record)
        if _status(record) == "active" and memory_id in superseded_by:
            names = ", ".join(sorted(set(superseded_by[memory_id])))
            groups.append(
                Group(
                    kind="superseded_active",
                    ids=[memory_id],
                    reason=(
                        f"{memory_id} is still active although {names} supersedes it; archive "
                        "it so that only the newer memory speaks."
                    ),
                    action="archive",
                )
            )

        files = record.get("files")
        if (
            current
            and str(record.get("kind") or "") in FILE_BOUND_KINDS
            and isinstance(files, list)
            and files
            and all(isinstance(p, str) and p and not (_GLOB_CHARS & set(p)) for p in files)
            and not any(exists(p) for p in files)
        ):
            groups.append(
                Group(
                    kind="deleted_file",
                    ids=[memory_id],
                    reason=(
                        f"{record.get('kind')} {memory_id} is about "
                        f"{', '.join(sorted(files))}, which no longer "
                        f"{'exists' if len(files) == 1 else 'exist'} in the repository; "
                        "archive it."
                    ),
                    action="archive",
                )
            )

        dangling = sorted(
            {str(link["to"]) for link in _links(record) if resolver.resolve(link["to"]) is None}
        )
        if dangling:
            named = ", ".join(f"{d} (deleted)" if d in deleted_ids else d for d in dangling)
            groups.append(
                Group(
                    kind="orphan",
                    ids=[memory_id],
                    reason=(
                        f"{memory_id} links to {named}, which "
                        f"{'is' if len(dangling) == 1 else 'are'} not a live memory; keep the "
                        "memory and drop the dangling "
                        f"{'link' if len(dangling) == 1 else 'links'}."
                    ),
                    action="keep",
                )
            )

        if current and stale is not None:
            sentences = [str(s) for s in stale(record) or []]
            most, deleted = _stale_counts(sentences)
            if sentences and (most >= STALE_MIN_COMMITS or deleted):
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
                groups.append(
                    Group(
                        kind="stale",
                        ids=[memory_id],
                        reason=f"{memory_id} may be stale: {'; '.join(sentences)}; {advice}",
                        action="archive" if gone else "keep",
                        score=1.0 if gone else min(1.0, most / 10),
                    )
                )

        latest = _latest_judgement(record) if current else None
        verdict = latest.get("verdict") if latest is not None else None
        if latest is not None and verdict in ("outdated", "wrong"):
            by = f" by {latest['by']}" if latest.get("by") else ""
            why = f" ({latest['reason']})" if latest.get("reason") else ""
            groups.append(
                Group(
                    kind="outdated",
                    ids=[memory_id],
                    reason=(
                        f"{memory_id} was last judged {verdict}{by}{why}; "
                        f"{'archive' if verdict == 'outdated' else 'delete'} it."
                    ),
                    action="archive" if verdict == "outdated" else "delete",
                )
            )

    rank = {kind: n for n, kind in enumerate(GROUP_KINDS)}
    return sorted(groups, key=lambda g: (rank[g.kind], g.ids[0], g.ids))


# --- recommendations ------------------------------------------------------------------------


def _heuristic(group: Group, note: str = "") -> Recommendation:
    reasoning = group.reason if not note else f"{group.reason} ({note})"
    target = group.keep if group.action == "merge" else None
    if group.action == "merge" and target is None:
        target = group.ids[0]
    return Recommendation(
        group=group,
        action=group.action,
        target=target,
        reasoning=reasoning,
        decided_by="heuristic",
    )


def _llm_request(group: Group, records: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    memories = []
    for memory_id in group.ids:
        record = records.get(memory_id)
        if record is None:
            continue
        content = str(record.get("content") or "")
        memories.append(
            {
                "id": memory_id,
                "kind": record.get("kind"),
                "title": record.get("title"),
                "content": content[:LLM_CONTENT_CHARS],
                "status": _status(record),
                "importance": _importance(record),
                "judgements": list(record.get("judgements") or []),
            }
        )
    return {"group": group.to_dict(), "memories": memories, "actions": list(ACTIONS)}


def _llm_decision(group: Group, answer: Any) -> Recommendation:
    """Check an LLM answer against the group; raise InvalidInput saying what is wrong."""
    if not isinstance(answer, Mapping):
        raise InvalidInput(f"the answer is not an object but {type(answer).__name__}")
    action = answer.get("action")
    if action not in ACTIONS:
        raise InvalidInput(f"unknown action {action!r}")
    target = answer.get("target")
    if target is not None and target not in group.ids:
        raise InvalidInput(f"target {target!r} is not in the group")
    if action == "merge":
        if len(group.ids) < 2:
            raise InvalidInput("merge needs two or more memories")
        target = target or group.keep or group.ids[0]
    else:
        target = None
    reasoning = answer.get("reasoning")
    if not isinstance(reasoning, str) or not reasoning.strip():
        raise InvalidInput("reasoning is missing")
    return Recommendation(
        group=group, action=action, target=target, reasoning=reasoning.strip(), decided_by="llm"
    )


def recommend(
    groups: Sequence[Group],
    records: Mapping[str, Mapping[str, Any]],
    *,
    llm: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> list[Recommendation]:
    """Decide each group: the LLM's answer when usable, else the group's proposed action."""
    out: list[Recommendation] = []
    for group in groups:
        if llm is None:
            out.append(_heuristic(group))
            continue
        try:
            out.append(_llm_decision(group, llm(_llm_request(group, records))))
        except Exception as exc:  # any failure of the LLM falls back; never crash consolidation
            message = exc.message if isinstance(exc, InvalidInput) else f"{type(exc).__name__}"
            detail = message if isinstance(exc, InvalidInput) else f"{message}: {exc}"
            out.append(_heuristic(group, f"heuristic: the LLM answer was unusable: {detail}"))
    return out


def llm_command(
    command: str, *, timeout: float = 60.0
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Return a callable that asks ``command`` (JSON request on stdin, one JSON object out)."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise InvalidInput(f"consolidate.llm_command {command!r} does not parse: {exc}") from exc
    if not argv:
        raise InvalidInput("consolidate.llm_command is empty")

    def ask(request: dict[str, Any]) -> dict[str, Any]:
        hint = (
            "fix consolidate.llm_command in $ENGRAM_HOME/config.yaml or "
            "$ENGRAM_CONSOLIDATE_LLM_COMMAND; heuristics are used meanwhile"
        )
        try:
            done = subprocess.run(
                argv,
                input=json.dumps(request, ensure_ascii=False).encode("utf-8"),
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise InvalidInput(
                f"LLM command {command!r} did not answer within {timeout:g} s", hint=hint
            ) from exc
        except OSError as exc:
            raise InvalidInput(
                f"LLM command {command!r} could not start: {exc.strerror or exc}", hint=hint
            ) from exc
        if done.returncode != 0:
            tail = done.stderr.decode("utf-8", "replace").strip()[-300:]
            raise InvalidInput(
                f"LLM command {command!r} exited with status {done.returncode}"
                + (f": {tail}" if tail else ""),
                hint=hint,
            )
        if len(done.stdout) > LLM_OUTPUT_BYTES:
            raise InvalidInput(f"LLM command {command!r} printed more than 1 MB", hint=hint)
        text = done.stdout.decode("utf-8", "replace").strip()
        try:
            answer = loads(text, what=f"LLM command {command!r}")
        except ValueError as exc:
            raise InvalidInput(
                f"LLM command {command!r} did not print one JSON object: {exc}; "
                f"it printed {text[:120]!r}",
                hint=hint,
            ) from exc
        if not isinstance(answer, dict):
            raise InvalidInput(
                f"LLM command {command!r} printed JSON {type(answer).__name__}, not an object",
                hint=hint,
            )
        return answer

    return ask


# --- plans ----------------------------------------------------------------------------------


def make_plan(recommendations: Iterable[Recommendation], *, created_at: str) -> dict[str, Any]:
    """Return a plan: the recommendations as JSON-ready data, to review and apply later."""
    return {
        "version": PLAN_VERSION,
        "created_at": created_at,
        "recommendations": [r.to_dict() for r in recommendations],
    }


def read_plan(raw: Any) -> list[Recommendation]:
    """Validate a plan (an object, or its JSON text) and return its recommendations."""
    if isinstance(raw, bytes | str):
        try:
            raw = loads(raw, what="the plan")
        except ValueError as exc:
            raise _fail(f"the plan is not JSON: {exc}") from exc
    if not isinstance(raw, Mapping):
        raise _fail(f"a plan must be an object, got {type(raw).__name__}")
    if raw.get("version") != PLAN_VERSION:
        raise _fail(f"plan version must be {PLAN_VERSION}, got {raw.get('version')!r}")
    items = raw.get("recommendations")
    if not isinstance(items, list):
        raise _fail("plan field 'recommendations' must be a list")
    return [
        Recommendation.from_dict(item, where=f"recommendations[{n}]")
        for n, item in enumerate(items)
    ]


def merged_id(ids: Iterable[str]) -> str:
    """Return the id of the memory that merges ``ids``: the same for the same group, always."""
    digest = hashlib.sha256(("consolidate:" + ",".join(sorted(ids))).encode("utf-8")).digest()
    return base64.b32encode(digest[:16]).decode("ascii").rstrip("=").lower()


def _merged_record(
    group_ids: Sequence[str],
    leader: Mapping[str, Any],
    others: Sequence[Mapping[str, Any]],
    *,
    stamp: str,
    author: str,
) -> dict[str, Any]:
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
    content = f"{content}\n\n## Merged from\n\n" + "\n\n".join(sections) if sections else content
    everyone = [leader, *others]

    def union(name: str) -> list[str]:
        values = {str(v) for r in everyone for v in (r.get(name) or []) if isinstance(v, str)}
        return sorted(values)

    record: dict[str, Any] = {
        "id": merged_id(group_ids),
        "kind": leader.get("kind"),
        "title": leader.get("title"),
        "content": content,
        "importance": max(_importance(r) for r in everyone),
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


def _merged_links(members: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return a merged memory's links: it supersedes each member and keeps their other links."""
    inside = {str(r["id"]) for r in members}
    links = {("supersedes", member): {"rel": "supersedes", "to": member} for member in inside}
    for record in members:
        for link in _links(record):
            rel, target = str(link.get("rel")), str(link["to"])
            if not any(member.startswith(target) for member in inside):  # full id or prefix
                links.setdefault((rel, target), {**link, "rel": rel, "to": target})
    return [links[key] for key in sorted(links)]


def _id(record: Mapping[str, Any]) -> str:
    return str(record.get("id"))


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
    work: dict[str, dict[str, Any]] = {}
    created: dict[str, dict[str, Any]] = {}

    def current(memory_id: str) -> dict[str, Any] | None:
        if memory_id in work:
            return work[memory_id]
        record = records.get(memory_id)
        if record is None:
            return None
        work[memory_id] = json.loads(json.dumps(record))  # a deep copy of plain JSON data
        return work[memory_id]

    def live(memory_id: str) -> dict[str, Any] | None:
        record = current(memory_id)
        return None if record is None or is_tombstone(record) else record

    live_ids = [k for k, r in records.items() if not is_tombstone(r)]
    resolver = _Resolver(live_ids)

    for rec in recommendations:
        ids = rec.group.ids
        if rec.action == "merge":
            new_id = merged_id(ids)
            if new_id in records or new_id in created:
                continue  # applied before: the merged memory exists, nothing to redo
            members = [r for r in (live(m) for m in ids) if r is not None]
            if len(members) < 2:
                continue  # the others were deleted since the plan was made: nothing to merge
            by_id = {str(r["id"]): r for r in members}
            leader = by_id.get(rec.target or "") or by_id[best_of(by_id, records)]
            others = [r for r in members if r is not leader]
            created[new_id] = _merged_record(ids, leader, others, stamp=stamp, author=author)
            for member in members:
                if _status(member) != "superseded":
                    member["status"] = "superseded"
        elif rec.action == "archive":
            for memory_id in ids:
                record = live(memory_id)
                # Superseded is retired already (and says more), so a plan that both merges and
                # archives a memory ends the same whichever comes first, and applies once.
                if record is not None and _status(record) not in ("archived", "superseded"):
                    record["status"] = "archived"
        elif rec.action == "delete":
            for memory_id in ids:
                record = live(memory_id)
                if record is not None:
                    record["deleted_at"] = stamp
        elif rec.action == "keep" and rec.group.kind == "orphan":
            for memory_id in ids:
                record = live(memory_id)
                if record is None or not isinstance(record.get("links"), list):
                    continue
                named = set(_ID_TOKEN_RE.findall(rec.group.reason))
                kept = [
                    link
                    for link in record["links"]
                    if not (
                        isinstance(link, Mapping)
                        and isinstance(link.get("to"), str)
                        and link["to"] in named
                        and resolver.resolve(link["to"]) is None
                        and link["to"] not in created
                    )
                ]
                if len(kept) != len(record["links"]):
                    if kept:
                        record["links"] = kept
                    else:
                        del record["links"]

    out: list[dict[str, Any]] = list(created.values())
    for memory_id, record in work.items():
        original = records[memory_id]
        if record == original:
            continue
        record["rev"] = int(original.get("rev") or 0) + 1
        record["updated_at"] = change_time(original.get("updated_at"), stamp=stamp)
        out.append(record)
    return sorted(out, key=_id)
