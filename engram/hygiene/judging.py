"""Judgements of memories: who said a memory was useful, outdated or wrong, when and why.

It owns checking a verdict and a score, the heuristic score when neither is given (how much of
the query that surfaced the memory it covers, and how fresh it is), and appending the
judgement to the memory (rev+1, the last ``JUDGEMENTS_KEPT`` kept), which moves its ranking.
The write goes through ``Workspace.write`` under the store's lock. It must not import the
service or an adapter.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from engram import config as config_mod
from engram.errors import InvalidInput
from engram.model import Record, change_time, rev_of, tags_of

if TYPE_CHECKING:
    from engram.index.ranking import Weights
    from engram.project import Project

__all__ = ["JUDGEMENTS_KEPT", "judge"]

JUDGEMENTS_KEPT: Final = 50


def judge(
    here: Project,
    ref: str,
    *,
    score: float | None = None,
    verdict: str | None = None,
    reason: str = "",
    query: str = "",
    author: str | None = None,
) -> Record:
    """Record a judgement of a memory (who, when, why); it moves the memory's ranking.

    ``verdict``: useful, outdated or wrong. Without ``score``, the verdict's score is used;
    without either, a heuristic (``heuristic_score``): how much of ``query`` (what surfaced the
    memory) it covers, and how fresh it is. Returns the memory, rev+1, with the judgement
    appended (the last ``JUDGEMENTS_KEPT`` are kept).
    """
    from engram.index.ranking import VERDICT_SCORES

    if verdict is not None:
        verdict = str(verdict).strip().lower()
        if verdict not in VERDICT_SCORES:
            raise InvalidInput(
                f"unknown verdict {verdict!r}; use one of: {', '.join(VERDICT_SCORES)}"
            )
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise InvalidInput(f"score must be a number from 0 to 1, got {score!r}")
        if not 0.0 <= float(score) <= 1.0 or math.isnan(float(score)):
            raise InvalidInput(f"score must be from 0 to 1, got {score}")
    ws, current = here.locate(ref, changing="judge")
    if score is None and verdict is not None:
        score = VERDICT_SCORES[verdict]
    heuristic = score is None
    if score is None:
        score = heuristic_score(current, query, ws.index.weights)
    entry: dict[str, Any] = {
        "score": float(score),
        "by": author if author is not None else config_mod.git_user_name(here.root),
        "at": here.now(),
    }
    if verdict:
        entry["verdict"] = verdict
    if reason.strip():
        entry["reason"] = reason.strip()
    if query.strip():
        entry["query"] = query.strip()
    if heuristic:
        entry["heuristic"] = True
    fields = {"reason": entry.get("reason", "")}
    ws.scrub(fields)
    if fields["reason"]:
        entry["reason"] = fields["reason"]
    with ws.store.lock():
        latest = ws.index.get(current["id"]) or current
        judgements = list(latest.get("judgements") or [])
        judgements.append(entry)
        record = {
            **latest,
            "judgements": judgements[-JUDGEMENTS_KEPT:],
            "rev": rev_of(latest) + 1,
            "updated_at": change_time(latest.get("updated_at"), stamp=entry["at"]),
        }
        ws.write([record])
    return record


def heuristic_score(record: Record, query: str, weights: Weights) -> float:
    """Score a memory from 0 to 1: 0.6 × how much of ``query`` it covers + 0.4 × its freshness."""
    from engram.index.backend import tokenize_query
    from engram.index.ranking import epoch, freshness

    words = set(tokenize_query(query))
    text = " ".join(
        [str(record.get("title", "")), str(record.get("content", ""))]
        + [str(t) for t in tags_of(record)]
    )
    have = set(tokenize_query(text))
    overlap = len(words & have) / len(words) if words else 0.5
    fresh = freshness(epoch(record.get("updated_at")), datetime.now(UTC).timestamp(), weights)
    recency = (fresh - (1 - weights.freshness_max_loss)) / max(weights.freshness_max_loss, 1e-9)
    return round(0.6 * overlap + 0.4 * recency, 3)
