"""The shapes consolidation passes along, and the readers of records its steps share.

``Group`` (memories that belong together for one hygiene reason, with a proposed action) and
``Recommendation`` (the decision for a group) go out as JSON and come back in a plan a person
may have edited: ``from_dict`` checks every field and names the bad one. The readers take a
record's status, links, text, importance and latest judgement as consolidation compares them,
reading a field of the wrong type as empty, never raising on it. Pure: no I/O.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from engram.errors import InvalidInput
from engram.model import check_id, importance_of, normalize_content, status_of
from engram.operations import advice

__all__ = [
    "ACTIONS",
    "CURRENT_STATUSES",
    "DECIDERS",
    "GROUP_KINDS",
    "Group",
    "Recommendation",
    "Resolver",
    "best_of",
    "fail",
    "importance_of",
    "is_current",
    "latest_judgement",
    "links_of",
    "status_of",
    "text_of",
]

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
# Statuses of memories that still speak; superseded, archived and rejected ones are tidy already.
CURRENT_STATUSES: Final = frozenset({"active", "proposed"})


def fail(message: str) -> InvalidInput:
    """Return the error of a plan or group that does not hold together."""
    return InvalidInput(message, hint=f"make a fresh plan with {advice.cmd('consolidate')}")


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
            raise fail(f"{where} must be an object, got {type(raw).__name__}")
        kind = raw.get("kind")
        if kind not in GROUP_KINDS:
            raise fail(f"{where}.kind must be one of {', '.join(GROUP_KINDS)}, got {kind!r}")
        ids = raw.get("ids")
        if not isinstance(ids, list) or not ids:
            raise fail(f"{where}.ids must be a non-empty list of memory ids")
        for position, item in enumerate(ids):
            if not isinstance(item, str):
                raise fail(f"{where}.ids[{position}] must be a memory id, got {item!r}")
            try:
                check_id(item)
            except InvalidInput as exc:
                raise fail(f"{where}.ids[{position}]: {exc.message}") from exc
        if len(set(ids)) != len(ids):
            raise fail(f"{where}.ids lists an id twice")
        reason = raw.get("reason")
        if not isinstance(reason, str):
            raise fail(f"{where}.reason must be text")
        action = raw.get("action")
        if action not in ACTIONS:
            raise fail(f"{where}.action must be one of {', '.join(ACTIONS)}, got {action!r}")
        keep = raw.get("keep")
        if keep is not None and keep not in ids:
            raise fail(f"{where}.keep must be one of {where}.ids, got {keep!r}")
        score = raw.get("score", 1.0)
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
            raise fail(f"{where}.score must be a number from 0 to 1, got {score!r}")
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
            raise fail(f"{where} must be an object, got {type(raw).__name__}")
        group = Group.from_dict(raw.get("group"), where=f"{where}.group")
        action = raw.get("action")
        if action not in ACTIONS:
            raise fail(f"{where}.action must be one of {', '.join(ACTIONS)}, got {action!r}")
        target = raw.get("target")
        if action == "merge":
            if len(group.ids) < 2:
                raise fail(f"{where}.action merge needs a group of two or more memories")
            if target not in group.ids:
                raise fail(f"{where}.target must be one of the group's ids, got {target!r}")
        elif target is not None:
            raise fail(f"{where}.target must be null unless the action is merge")
        reasoning = raw.get("reasoning")
        if not isinstance(reasoning, str):
            raise fail(f"{where}.reasoning must be text")
        decided_by = raw.get("decided_by", "heuristic")
        if decided_by not in DECIDERS:
            raise fail(f"{where}.decided_by must be heuristic or llm, got {decided_by!r}")
        return cls(
            group=group, action=action, target=target, reasoning=reasoning, decided_by=decided_by
        )


# -- reading records ----------------------------------------------------------------------------


def is_current(record: Mapping[str, Any]) -> bool:
    """Say whether a record still speaks (active or proposed)."""
    return status_of(record) in CURRENT_STATUSES


def links_of(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Return a record's well-formed links (objects whose ``to`` is text)."""
    links = record.get("links")
    if not isinstance(links, list):
        return []
    return [link for link in links if isinstance(link, Mapping) and isinstance(link.get("to"), str)]


def text_of(record: Mapping[str, Any]) -> str:
    """Return a record's title and content as compared for duplicates."""
    return normalize_content(f"{record.get('title') or ''}\n{record.get('content') or ''}")


# Tags at least this share of the title and content (a third of what the vector is made of):
# the vector says more about the tags than about the text.
TAGS_DROWN: Final = 0.5


def tags_drown(record: Mapping[str, Any]) -> bool:
    """Tell whether a record's tags outweigh its text in its stored vector (title, tags, text).

    Such a vector is far from a reworded copy of the same text without those tags, and near
    any memory with the same tags: its text must find its neighbours by its words instead.
    """
    tags = record.get("tags")
    if not isinstance(tags, list) or not tags:
        return False
    tagged = len(" ".join(str(tag) for tag in tags))
    return tagged >= TAGS_DROWN * len(f"{record.get('title') or ''}\n{record.get('content') or ''}")


class Resolver:
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


def best_of(ids: Iterable[str], records: Mapping[str, Mapping[str, Any]]) -> str:
    """Return the id that should lead a merge: most important, most judged useful, newest."""

    def rank(memory_id: str) -> tuple[int, int, str, str, str]:
        record = records.get(memory_id, {})
        return (
            importance_of(record),
            _useful_count(record),
            str(record.get("updated_at") or ""),
            str(record.get("created_at") or ""),
            memory_id,
        )

    return max(ids, key=rank)


def latest_judgement(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Return the judgement of a record made last (by time, then by position), if any."""
    judgements = record.get("judgements")
    if not isinstance(judgements, list):
        return None
    found = [
        (str(j.get("at") or ""), n, j) for n, j in enumerate(judgements) if isinstance(j, Mapping)
    ]
    return max(found, key=lambda item: (item[0], item[1]))[2] if found else None
