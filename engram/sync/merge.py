"""The one merge function: reconcile two versions of memories, keyed by id.

Pure and deterministic: no I/O, no clock. For one id, the winner is the version with the
higher ``rev``, then the later ``updated_at``, then a tombstone over a live version, then the
larger content hash; so merging is commutative, associative and idempotent. Content never
disappears silently: when the loser's title or content differs from the winner's, the loser's
text is kept in the winner's ``history`` (sorted, without repeats), where ``engram get`` shows
it and a user can restore it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from engram.model import Record, dumps, is_tombstone


def _rank(record: Mapping[str, Any]) -> tuple[int, str, int, str]:
    rev = record.get("rev", 0)
    return (
        rev if isinstance(rev, int) else 0,
        str(record.get("updated_at", "")),
        1 if is_tombstone(record) else 0,
        hashlib.sha256(
            dumps({k: v for k, v in record.items() if k != "history"}).encode("utf-8")
        ).hexdigest(),
    )


def _entry(record: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "rev": record.get("rev", 0),
        "title": record.get("title", ""),
        "content": record.get("content", ""),
        "updated_at": record.get("updated_at", ""),
    }


def merge_record(a: Mapping[str, Any], b: Mapping[str, Any]) -> Record:
    """Return the merged version of two versions of the same memory."""
    if a.get("id") != b.get("id"):
        raise ValueError("merge_record needs two versions of the same id")
    winner, loser = (a, b) if _rank(a) >= _rank(b) else (b, a)
    merged: Record = dict(winner)
    history = [dict(item) for item in winner.get("history", []) or [] if isinstance(item, dict)]
    history += [dict(item) for item in loser.get("history", []) or [] if isinstance(item, dict)]
    if (
        not is_tombstone(loser)
        and not is_tombstone(winner)
        and (
            loser.get("title") != winner.get("title")
            or loser.get("content") != winner.get("content")
        )
    ):
        history.append(_entry(loser))
    unique: dict[str, dict[str, Any]] = {dumps(item): item for item in history}
    if unique:
        merged["history"] = [
            unique[key]
            for key in sorted(
                unique,
                key=lambda k: (
                    unique[k].get("rev", 0) if isinstance(unique[k].get("rev", 0), int) else 0,
                    str(unique[k].get("updated_at", "")),
                    k,
                ),
            )
        ]
    elif "history" in merged:
        del merged["history"]
    return merged


def merge_sets(*sides: Iterable[Mapping[str, Any]]) -> dict[str, Record]:
    """Merge several collections of records into one mapping id -> merged record."""
    out: dict[str, Record] = {}
    for side in sides:
        for record in side:
            rid = str(record["id"])
            out[rid] = merge_record(out[rid], record) if rid in out else dict(record)
    return out
