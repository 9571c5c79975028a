"""Relevance: the probability that a hit answers its query, and the floor on it.

Every hit of a worded recall carries ``relevance``, a number in 0..1 that means the same on
every store: of the best hits that get this estimate, about that share answer their query. It
is a logistic model over features of the hit that do not depend on the store's size or on how
its memories were written (``features``):

- ``strength``: log(1 + BM25 / the query's own weight), the weight being the sum of the idf of
  its informative words (what a memory holding each once scores): how much of the query the
  memory holds, on one scale for every query;
- ``coverage``: the idf-weighted share of the query's informative words the memory holds;
- ``cosine``: the similarity of the embeddings (0 in keyword mode);
- ``gap``: how far the next hit's score falls below this one's, as a share of this one's;
- ``unseen``: 1 when the query names something (``backend.names``) that no memory holds.

The model is fitted on the best hit of every labelled query (was it one of the query's
relevant memories?), where a caller most needs the estimate; applied to a lower hit it says
how likely a memory matching the query as that one does answers it. The floor
(``search.min_relevance``) is on the best hit: a query none of whose hits clears it comes back
empty (``answered``). The coefficients (``MODELS``, one per search mode) and the floors
(``FLOORS``) come from ``benchmarks/retrieval/fit.py`` over the four labelled sets of
``benchmarks/retrieval``; docs/decisions.md ("A relevance estimate with a meaning") has the
derivation and the held-out figures. Pure functions over numbers: no I/O, no backend.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

FEATURES: Final = ("strength", "coverage", "cosine", "gap", "unseen")
# Under this many memories word statistics say little of which words are rare (in five
# memories about sessions, "sessions" weighs nothing): the floor is not applied.
FLOOR_MIN_DOCS: Final = 50
TEXTS_KEPT: Final = 20_000  # memories whose searchable text a process keeps (``Texts``)

# Fitted by ``python benchmarks/retrieval/fit.py`` (logistic regression by Newton's method, L2
# 0.01, every set weighted equally, the coefficients of strength, coverage and cosine kept >= 0)
# on the best hit of every query of the four labelled sets of benchmarks/retrieval (harbor,
# adr, agentlog, captured). Intercept first, then one coefficient per FEATURES entry.
MODELS: Final[Mapping[str, tuple[float, ...]]] = {
    "keyword": (-2.1617, 1.6245, 2.1046, 0.0, 1.3758, -0.9746),
    "semantic": (-1.8635, 0.0, 3.3237, 0.3731, 0.6398, -0.3588),
    "hybrid": (-2.1148, 1.5982, 1.9463, 0.7408, 1.0733, -0.9959),
    "semantic-minilm": (-1.4533, 0.0, 2.8512, 0.4894, 0.8808, -0.6628),
    "hybrid-minilm": (-2.0362, 1.5023, 1.8594, 0.9591, 1.1969, -0.9612),
}
# The floor of each mode (search.min_relevance: auto), by the same script: the highest that
# keeps the answer of 99% of the answerable queries of each of those sets. A mode with a model
# suffix is that mode with ``search.model`` set to it (``key``): its cosines mean other things.
FLOORS: Final[Mapping[str, float]] = {
    "keyword": 0.245,
    "semantic": 0.34,
    "hybrid": 0.23,
    "semantic-minilm": 0.435,
    "hybrid-minilm": 0.29,
}

Model = tuple[float, ...]  # the intercept, then one coefficient per FEATURES entry
Features = tuple[float, ...]  # one value per FEATURES entry


def key(mode: str, model: str) -> str:
    """Return the ``MODELS``/``FLOORS`` key of a search mode with an embedding model: the
    cosine means something else for each model (wordllama's keys are the bare modes)."""
    if mode == "keyword" or model == "wordllama":
        return mode
    return f"{mode}-{model}"


def stem_of(token: str) -> str:
    """Return the stem coverage looks for: the word less up to three final letters.

    "retries" -> "retr", as ``query.Hit.matched`` reads it: backend-neutral, and close to both
    backends' stemmers.
    """
    return token[: max(4, len(token) - 3)] if len(token) > 4 else token


class QueryWords:
    """A query's words as coverage reads them: their stems and idf weights.

    A stem counts where it starts a word: no letter or digit before it (``starts_a_word``).
    """

    def __init__(self, terms: Sequence[tuple[str, float]]) -> None:
        weights: dict[str, float] = {}
        for term, weight in terms:
            stem = stem_of(term)
            weights[stem] = weights.get(stem, 0.0) + weight
        self.total = sum(weight for _, weight in terms)
        self.weights = weights


def searchable(record: Mapping[str, Any]) -> str:
    """Return a memory's text as coverage reads it: title, tags, files, content, lowercased."""
    return " ".join(
        (
            str(record.get("title", "") or ""),
            " ".join(str(tag) for tag in record.get("tags", []) or []),
            " ".join(str(path) for path in record.get("files", []) or []),
            str(record.get("content", "") or ""),
        )
    ).lower()


class Texts:
    """Each memory's ``searchable`` text, kept while its record does not change.

    The owner forgets the ids it writes and clears the rest when the records change behind it
    (as ``ranking.RankRows``); a hit's text is then built once, not on every recall.
    """

    def __init__(self, limit: int = TEXTS_KEPT) -> None:
        self.limit = limit
        self._texts: dict[str, str] = {}

    def get(self, rid: str, record: Mapping[str, Any]) -> str:
        """Return the text of the memory ``rid`` whose record is ``record``."""
        text = self._texts.get(rid)
        if text is None:
            text = searchable(record)
            if len(self._texts) < self.limit:
                self._texts[rid] = text
        return text

    def forget(self, ids: Iterable[str]) -> None:
        """Forget the texts of these memories (they were written)."""
        for rid in ids:
            self._texts.pop(rid, None)

    def clear(self) -> None:
        """Forget every text (the records changed)."""
        self._texts.clear()


def starts_a_word(text: str, stem: str) -> bool:
    """Tell whether ``stem`` occurs in ``text`` where a word starts: at the start, or after a
    character that is not a letter or a digit (an underscore separates, as ``[^\\W_]`` says).

    ``str.find`` in C, then one look at the character before each place it finds: a few
    microseconds on a memory's text, where one regular expression over every place of the
    text cost 15-30.
    """
    find = text.find
    at = find(stem)
    while at > 0 and text[at - 1].isalnum():
        at = find(stem, at + 1)
    return at >= 0


def coverage(text: str, words: QueryWords) -> float:
    """Return the idf-weighted share of the query's words found in ``text``."""
    if words.total <= 0:
        return 0.0
    held = 0.0
    find = text.find
    for stem, weight in words.weights.items():
        # ``starts_a_word``, written out: a hit's page asks it of every word of the query
        at = find(stem)
        while at > 0 and text[at - 1].isalnum():
            at = find(stem, at + 1)
        if at >= 0:
            held += weight
    return held / words.total


def features(
    *,
    bm25: float,
    query_weight: float,
    coverage: float,
    cosine: float,
    gap: float,
    unseen: bool,
) -> Features:
    """Return a hit's features, in FEATURES order (see the module)."""
    strength = math.log1p(bm25 / query_weight) if query_weight > 0 and bm25 > 0 else 0.0
    return (
        strength,
        unit_clamp(coverage),
        unit_clamp(cosine),
        unit_clamp(gap),
        1.0 if unseen else 0.0,
    )


def unit_clamp(value: float) -> float:
    """Return ``min(max(value, 0.0), 1.0)`` by comparisons (the same value, NaN and -0.0
    included), at a fraction of the two calls' cost: a recall rates every hit of its page."""
    if value < 0.0:
        return 0.0
    return 1.0 if value > 1.0 else value


def probability(values: Features, model: Model) -> float:
    """Return the model's probability (0..1) for a hit's features."""
    if len(model) != len(values) + 1:
        raise ValueError(f"a model of {len(model) - 1} features for {len(values)} values")
    z = model[0] + sum(map(operator.mul, model[1:], values))
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def floor(mode: str, setting: float | None, docs: int) -> float:
    """Return the relevance the best hit needs: ``search.min_relevance`` (None: the mode's
    ``FLOORS``), or 0 under ``FLOOR_MIN_DOCS`` memories."""
    if docs < FLOOR_MIN_DOCS:
        return 0.0
    return FLOORS[mode] if setting is None else setting


def gaps(scores: Sequence[float]) -> list[float]:
    """Return, for each of scores ordered best first, how far the next falls below it (a share
    of it; 1 for the last)."""
    out = []
    for i, value in enumerate(scores):
        following = scores[i + 1] if i + 1 < len(scores) else 0.0
        out.append((value - following) / value if value > 0 else 0.0)
    return out


def answered(chances: Sequence[float], needed: float) -> bool:
    """Tell whether a query's hits, by relevance, answer it: the best clears the floor.

    The floor is on the best hit, not on each: the answer of a query is often a weaker hit
    below a strong one (a paraphrase), and a per-hit floor high enough to empty the queries
    nothing answers dropped those (docs/decisions.md). A caller offering memory unasked may
    hold each hit to a floor of its own.
    """
    return bool(chances) and max(chances) >= needed
