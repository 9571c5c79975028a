"""Ranking: the multipliers (README) applied to a full-text score; the 20% cut.

score = relevance × kind weight × importance × status × freshness × judgements. Pure functions
over numbers and settings; no I/O, no SQL, no backend knowledge: the index fetches candidates and
their columns, this module scores, fuses, cuts and orders them.

The match strength says how much of the query a memory holds, on the same scale for every
query and store: about 1 when it holds every informative word of the query prominently (in its
title, or repeatedly), about 0.5 when it holds half of the query's weight, or each word once in
its text; strong matches go over 1. It is BM25 over the query's own weight
(``keyword_relevance``), blended in the semantic modes with the cosine similarity (``fuse``);
it orders hits. Whether a hit answers the query at all is ``relevance.py``'s estimate, and the
floor (``search.min_relevance``) is a threshold on that, applied by the index.

Judgements (``engram judge``) move a memory by up to ± ``judgement_span`` / 2: the mean score of
its last ``JUDGEMENTS_COUNTED`` judgements (a verdict counts as useful 1, outdated 0.3, wrong 0),
where 0.5 is neutral: factor = 1 + span × (mean − 0.5). Unjudged memories get 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from engram.errors import ConfigError
from engram.model import parse_time

SECONDS_PER_DAY: Final = 86_400.0
VERDICT_SCORES: Final = {"useful": 1.0, "outdated": 0.3, "wrong": 0.0}
JUDGEMENTS_COUNTED: Final = 5
MODES: Final = ("keyword", "semantic", "hybrid")
EMBEDDING_MODELS: Final = ("wordllama", "minilm")  # semantic.DEFAULT_MODEL, semantic.MINILM
CACHE_LIMIT: Final = 200_000
# Calibration of the match strength (see keyword_relevance, semantic_relevance): measured on
# the labelled sets of benchmarks/retrieval, for BM25 (k1 1.2, b 0.75) and wordllama's model.
KEYWORD_FULL: Final = 1.5
COSINE_FULL: Final = 0.8

Scored = tuple[float, str, float]  # (score, id, bm25): one ranked candidate
RankRow = tuple[float, float]  # (static factor, updated epoch): what ranking reads of a record
# (id, kind, status, importance, updated epoch, judged): the records table's ranking columns
RankColumns = tuple[str, str, str, int, float, float | None]


@dataclass(frozen=True)
class Weights:
    """The ranking settings (``search.*`` in config.yaml)."""

    kind: Mapping[str, float] = field(default_factory=dict)
    status: Mapping[str, float] = field(default_factory=dict)
    importance_step: float = 0.0
    freshness_max_loss: float = 0.3
    freshness_days: float = 365.0
    min_score_ratio: float = 0.2
    judgement_span: float = 0.6
    # keyword: BM25 only; semantic: embeddings only; hybrid: both fused. Modes that need the
    # embedding model fall back to keyword when it is not installed.
    mode: str = "hybrid"
    # The embedding model (``semantic.MODELS``): wordllama, or minilm where installed.
    model: str = "wordllama"
    semantic_weight: float = 0.5
    semantic_floor: float = 0.4
    # A hit whose relevance (``relevance.py``: the probability that it answers the query) is
    # under this is not returned; None is the floor fitted for the mode (``relevance.FLOORS``).
    min_relevance: float | None = None

    @classmethod
    def from_settings(cls, search: Mapping[str, Any]) -> Weights:
        """Build weights from the ``search`` section of the config."""
        return cls(
            kind={str(k): float(v) for k, v in dict(search.get("kind_weights", {})).items()},
            status={str(k): float(v) for k, v in dict(search.get("status_weights", {})).items()},
            importance_step=float(search.get("importance_step", 0.0)),
            freshness_max_loss=float(search.get("freshness_max_loss", 0.3)),
            freshness_days=max(float(search.get("freshness_days", 365)), 1.0),
            min_score_ratio=float(search.get("min_score_ratio", 0.2)),
            judgement_span=float(search.get("judgement_span", 0.6)),
            mode=_mode(search.get("mode", "hybrid")),
            model=_model(search.get("model", "wordllama")),
            semantic_weight=min(max(float(search.get("semantic_weight", 0.5)), 0.0), 1.0),
            semantic_floor=min(max(float(search.get("semantic_floor", 0.4)), -1.0), 0.99),
            min_relevance=_floor(search.get("min_relevance", "auto")),
        )


def _floor(value: Any) -> float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    try:
        floor = float(value)
    except (TypeError, ValueError):
        floor = math.nan
    if isinstance(value, bool) or not math.isfinite(floor):
        raise ConfigError(f"search.min_relevance must be auto or a number, got {value!r}")
    return min(max(floor, 0.0), 1.0)


def _model(value: Any) -> str:
    model = str(value).strip().lower()
    if model not in EMBEDDING_MODELS:
        raise ConfigError(f"search.model must be wordllama or minilm, got {value!r}")
    return model


def _mode(value: Any) -> str:
    mode = str(value).strip().lower()
    if mode not in MODES:
        raise ConfigError(f"search.mode must be keyword, semantic or hybrid, got {value!r}")
    return mode


def keyword_relevance(bm25: float, query_weight: float) -> float:
    """Return how much of the query a memory's BM25 score says it answers (see the module).

    ``query_weight`` is the sum of the idf of the query's informative words
    (``SearchIndex.query_weight``): about what a memory holding each once scores. A memory
    scoring ``KEYWORD_FULL`` times that (the words in its title, or repeated) gets 1. Linear,
    not capped: among strong matches the BM25 order stays, and the multipliers only nudge it.
    """
    if query_weight <= 0 or bm25 <= 0:
        return 0.0
    return bm25 / (KEYWORD_FULL * query_weight)


def semantic_relevance(cosine: float, weights: Weights) -> float:
    """Return the cosine similarity mapped linearly onto 0..1: from half the semantic floor
    (about what an off-topic text scores with the model) to ``COSINE_FULL``."""
    zero = weights.semantic_floor / 2
    return min(max((cosine - zero) / (COSINE_FULL - zero), 0.0), 1.0)


def fuse(keyword: float, cosine: float, weights: Weights) -> float:
    """Return the relevance of a hit from its keyword relevance and its cosine.

    Both parts are absolute, never relative to the best candidate, so that a query nothing
    answers scores low everywhere and ``min_relevance`` can drop it: hybrid blends them by
    ``semantic_weight``. The semantic floor decides which memories may enter by meaning alone
    (see ``Index.search``); below it a cosine still reorders what BM25 found.
    """
    if weights.mode == "keyword":
        return keyword
    semantic = semantic_relevance(cosine, weights)
    if weights.mode == "semantic":
        return semantic
    return (1.0 - weights.semantic_weight) * keyword + weights.semantic_weight * semantic


def epoch(value: Any) -> float:
    """Return seconds since the epoch for an RFC 3339 string (0 when unreadable)."""
    if not isinstance(value, str) or not value:
        return 0.0
    if value[-1] == "Z":
        # How engram writes times (format_time): read at once, the same instant parse_time
        # finds (an aware time's timestamp does not depend on its zone).
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            pass  # parse_time says what it makes of it
    try:
        return parse_time(value).timestamp()
    except Exception:
        return 0.0


def freshness(updated_epoch: float, now_epoch: float, weights: Weights) -> float:
    """Return the freshness factor: 1 when just updated, down to 1 - max_loss after the span."""
    age_days = max(now_epoch - updated_epoch, 0.0) / SECONDS_PER_DAY
    return 1.0 - weights.freshness_max_loss * min(age_days / weights.freshness_days, 1.0)


def judgement_score(judgements: Any) -> float | None:
    """Return the mean score (0..1) of a memory's last judgements, or None when unjudged."""
    if not isinstance(judgements, list):
        return None
    scores: list[float] = []
    for item in judgements:
        if not isinstance(item, Mapping):
            continue
        value = item.get("score")
        if isinstance(value, int | float) and not isinstance(value, bool):
            scores.append(min(max(float(value), 0.0), 1.0))
        elif item.get("verdict") in VERDICT_SCORES:
            scores.append(VERDICT_SCORES[str(item["verdict"])])
    recent = scores[-JUDGEMENTS_COUNTED:]
    return sum(recent) / len(recent) if recent else None


def static_factor(
    kind: str, status: str, importance: int, weights: Weights, judged: float | None = None
) -> float:
    """Return the kind × importance × status × judgement factor (the part that does not age)."""
    factor = (
        weights.kind.get(kind, 1.0)
        * (1.0 + weights.importance_step * (importance - 3))
        * weights.status.get(status, 1.0)
    )
    if judged is not None:
        factor *= 1.0 + weights.judgement_span * (judged - 0.5)
    return factor


def multiplier(
    *,
    kind: str,
    status: str,
    importance: int,
    updated_epoch: float,
    now_epoch: float,
    weights: Weights,
) -> float:
    """Return the product of the kind, importance, status and freshness factors."""
    return static_factor(kind, status, importance, weights) * freshness(
        updated_epoch, now_epoch, weights
    )


def cut(scored: list[tuple[float, str]], ratio: float) -> list[tuple[float, str]]:
    """Sort (score, id) pairs best first and drop those under ``ratio`` × the best score."""
    ordered = sorted(scored, key=lambda pair: (-pair[0], pair[1]))
    if not ordered:
        return []
    floor = ordered[0][0] * ratio
    return [pair for pair in ordered if pair[0] >= floor]


def row_multiplier(row: RankRow, now_epoch: float, weights: Weights) -> float:
    """Return the multiplier of a record's ranking row: its static factor × freshness."""
    factor, updated = row
    return factor * freshness(updated, now_epoch, weights)


def _kept(scored: list[Scored], ratio: float) -> list[Scored]:
    """Return the candidates the 20% cut keeps, in their given order (``cut``'s floor is the
    best score × ``ratio``: no sort needed to find it)."""
    if not scored:
        return []
    floor = max(score for score, _, _ in scored) * ratio
    return [item for item in scored if item[0] >= floor]


def score_keyword(
    found: Sequence[tuple[str, float]],
    query_weight: float,
    rows: Mapping[str, RankRow],
    now_epoch: float,
    weights: Weights,
) -> list[Scored]:
    """Score (id, bm25) pairs by match strength × multipliers and cut; ids without a row are
    left out."""
    pairs = ((rid, (bm25, 0.0)) for rid, bm25 in found)
    return _scored(pairs, query_weight, rows, now_epoch, weights, 0.0)


def score_fused(
    candidates: Mapping[str, tuple[float, float]],
    query_weight: float,
    rows: Mapping[str, RankRow],
    now_epoch: float,
    weights: Weights,
) -> list[Scored]:
    """Score id -> (bm25, cosine) candidates by fused strength × multipliers, then cut."""
    # ``fuse``'s modes as shares of the semantic part: keyword alone none of it; semantic
    # alone all of it, the keyword part never counted (no query weight: 0.0, exactly)
    if weights.mode == "semantic":
        return _scored(candidates.items(), 0.0, rows, now_epoch, weights, 1.0)
    share = weights.semantic_weight if weights.mode == "hybrid" else 0.0
    return _scored(candidates.items(), query_weight, rows, now_epoch, weights, share)


def _scored(
    pairs: Iterable[tuple[str, tuple[float, float]]],
    query_weight: float,
    rows: Mapping[str, RankRow],
    now_epoch: float,
    weights: Weights,
    share: float,
) -> list[Scored]:
    """Score (id, (bm25, cosine)) pairs by ``share`` of semantic and the rest of keyword
    relevance, × the row's multiplier, then cut.

    ``keyword_relevance``, ``fuse`` (hybrid: ``share`` is the semantic weight; keyword: 0,
    the keyword relevance alone) and ``row_multiplier`` written out in one loop, min and max
    as comparisons: the same arithmetic in the same order, so the same scores (NaN and -0.0
    included: each keeps its first argument unless the other is strictly beyond it). A
    recall scores a few dozen candidates, and the calls were most of the time it took.
    """
    scored: list[Scored] = []
    keyword_full = KEYWORD_FULL * query_weight
    weighted = query_weight > 0
    zero = weights.semantic_floor / 2
    span = COSINE_FULL - zero
    rest = 1.0 - share
    now, loss, days = now_epoch, weights.freshness_max_loss, weights.freshness_days
    row_of = rows.get
    for rid, (bm25, cosine) in pairs:
        row = row_of(rid)
        if row is None:
            continue  # deleted since the full-text index saw it
        keyword = bm25 / keyword_full if weighted and bm25 > 0 else 0.0
        if share:
            semantic = (cosine - zero) / span
            if semantic < 0.0:
                semantic = 0.0
            if semantic > 1.0:
                semantic = 1.0
            relevance = rest * keyword + share * semantic
        else:
            relevance = keyword
        if relevance > 0:
            factor, updated = row
            elapsed = now - updated
            if elapsed < 0.0:
                elapsed = 0.0
            aged = elapsed / SECONDS_PER_DAY / days
            if aged > 1.0:
                aged = 1.0
            scored.append((relevance * (factor * (1.0 - loss * aged)), rid, bm25))
    return _kept(scored, weights.min_score_ratio)


def score_browse(
    columns: Iterable[RankColumns],
    ids: frozenset[str] | None,
    now_epoch: float,
    weights: Weights,
) -> list[Scored]:
    """Score records by multipliers alone (no words given); ``ids`` None keeps every one."""
    return [
        (
            row_multiplier(
                (static_factor(kind, status, importance, weights, judged), updated),
                now_epoch,
                weights,
            ),
            rid,
            0.0,
        )
        for rid, kind, status, importance, updated, judged in columns
        if ids is None or rid in ids
    ]


def page(scored: list[Scored], offset: int, want: int) -> list[Scored]:
    """Order candidates as the caller sees them and return ``scored[offset:want]``.

    The order is the scores rounded as in a hit, then the id, so that pages of tied memories
    neither repeat nor skip one.
    """
    scored.sort(key=lambda item: (-round(item[0], 4), item[1]))
    return scored[max(offset, 0) : want]


class RankRows:
    """Each record's ranking row, cached while the index does not change (``clear``)."""

    def __init__(self, weights: Weights) -> None:
        self.weights = weights
        self._cache: dict[str, RankRow | None] = {}

    def clear(self) -> None:
        """Forget every cached row (the records changed)."""
        self._cache.clear()

    def forget(self, ids: Iterable[str]) -> None:
        """Forget the cached rows of these records (they were written)."""
        for rid in ids:
            self._cache.pop(rid, None)

    def get(
        self, ids: Sequence[str], fetch: Callable[[list[str]], Iterable[RankColumns]]
    ) -> dict[str, RankRow]:
        """Return the rows of the live records among ``ids``; ``fetch`` reads the missing ones."""
        out: dict[str, RankRow] = {}
        missing = []
        for rid in ids:
            if rid in self._cache:
                row = self._cache[rid]
                if row is not None:
                    out[rid] = row
            else:
                missing.append(rid)
        if not missing:
            return out
        found = {
            rid: (static_factor(kind, status, importance, self.weights, judged), updated)
            for rid, kind, status, importance, updated, judged in fetch(missing)
        }
        for rid in missing:
            fetched = found.get(rid)
            if len(self._cache) < CACHE_LIMIT:
                self._cache[rid] = fetched
            if fetched is not None:
                out[rid] = fetched
        return out
