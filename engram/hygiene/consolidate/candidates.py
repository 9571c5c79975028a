"""Where near-duplicate candidates come from: each memory's neighbours in the index.

``candidate_pairs`` takes one block of memories (same kind, scope and project, each with its
text) and returns the pairs worth judging: each memory with its nearest stored vectors among
the block, when the index has vectors; a memory without one, or whose vector its many tags
made (``Item.tagged``), with its full-text neighbours, what the index's keyword search finds
for its rarest words (by their share of the block). Only ranks are used, never a score's
size: the judging is ``similarity.alike``'s.
Without an index (``source`` None) every pair of the block is a candidate, which suits a
handful of memories and tests. It reads through ``Neighbours`` (``engram.index.Index`` is
one) and writes nothing.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, NamedTuple, Protocol

from engram.hygiene.consolidate.similarity import spellings

__all__ = [
    "MIN_COSINE",
    "NEIGHBOURS",
    "QUERY_WORDS",
    "Item",
    "Neighbours",
    "candidate_pairs",
    "query_of",
]

NEIGHBOURS: Final = 6  # nearest stored vectors asked for per memory
TEXT_HITS: Final = 16  # full-text hits asked for per memory (some are of other blocks)
QUERY_WORDS: Final = 8  # the rarest words of a memory that make its full-text query
# Memories further apart in meaning than this are not near duplicates: it saves judging pairs
# that could not pass (the reworded near duplicates measured were at 0.85 and above; on the
# benchmark store, 0.75 lets eight times as many pairs through as 0.8).
MIN_COSINE: Final = 0.8


class Item(NamedTuple):
    """One memory of a block: its id, its text as compared, and whether tags drown its vector.

    ``tagged``: its tags outweigh its text in its stored vector (``shapes.tags_drown``), so its
    nearest vectors are those of memories with the same tags; its full-text neighbours (found
    by the words of its text) are candidates too.
    """

    id: str
    text: str
    tagged: bool = False


class Neighbours(Protocol):
    """What candidates are read from: the index's vectors and its full-text search."""

    def similar_among(
        self, ids: Sequence[str], *, limit: int, min_cosine: float
    ) -> Mapping[str, Sequence[tuple[str, float]]]:
        """Return, by id with a stored vector, the others among ``ids`` nearest it."""
        ...

    def text_neighbours(self, texts: Sequence[str], *, limit: int) -> Sequence[Sequence[str]]:
        """Return, for each text, the ids of the memories that match it best, best first."""
        ...


def candidate_pairs(
    items: Sequence[Item], source: Neighbours | None, budget: list[int]
) -> list[tuple[int, int]]:
    """Return the (position, position) pairs of ``items`` to judge, each once, in order.

    ``budget`` caps how many pairs are returned over all blocks (it is decreased), so that a
    pathological store still ends in bounded time.
    """
    if len(items) < 2 or budget[0] <= 0:
        return []
    if source is None:
        pairs = [(a, b) for a in range(len(items)) for b in range(a + 1, len(items))]
        return _spend(pairs, budget)
    at = {item.id: n for n, item in enumerate(items)}
    found: set[tuple[int, int]] = set()
    near = source.similar_among(list(at), limit=NEIGHBOURS, min_cosine=MIN_COSINE)
    for memory_id, others in near.items():
        _add(found, at.get(memory_id), (at.get(other) for other, _ in others))
    unplaced = [n for n, item in enumerate(items) if item.tagged or item.id not in near]
    if unplaced:
        spelled = [spellings(item.text) for item in items]
        rarity = Counter(itertools.chain.from_iterable(spelled))
        queries = [query_of(spelled[n], rarity) for n in unplaced]
        hits = source.text_neighbours(queries, limit=TEXT_HITS)
        for n, ids in zip(unplaced, hits, strict=True):
            _add(found, n, (at.get(other) for other in ids))
    return _spend(sorted(found), budget)


def query_of(spelled: Mapping[str, str], rarity: Mapping[str, int]) -> str:
    """Return a memory's full-text query: its ``QUERY_WORDS`` rarest words, as spelled.

    ``spelled`` is ``similarity.spellings`` of its text; ``rarity`` how many memories of the
    block hold each stem.
    """
    counted = sorted(zip(map(rarity.__getitem__, spelled), spelled, strict=True))
    return " ".join(spelled[word] for _, word in counted[:QUERY_WORDS])


def _add(found: set[tuple[int, int]], n: int | None, others: Iterable[int | None]) -> None:
    if n is None:
        return
    for other in others:
        if other is not None and other != n:
            found.add((n, other) if n < other else (other, n))


def _spend(pairs: list[tuple[int, int]], budget: list[int]) -> list[tuple[int, int]]:
    kept = pairs[: max(budget[0], 0)]
    budget[0] -= len(kept)
    return kept
