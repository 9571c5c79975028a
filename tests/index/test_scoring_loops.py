"""The written-out scoring loops give exactly what the functions they stand for give.

``ranking.score_fused`` and ``score_keyword`` inline ``keyword_relevance``, ``fuse`` and
``row_multiplier`` (min and max as comparisons), and ``relevance.features`` clamps by
comparisons: a recall scores dozens of candidates, and the calls were most of its time. These
tests hold the loops to the plain functions, value for value (``==``, not approximately), on
random candidates, including the edges where a clamp decides (negative, zero, over one).
"""

from __future__ import annotations

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engram.index import ranking, relevance
from engram.index.ranking import Weights, fuse, keyword_relevance, row_multiplier

NOW = 1_800_000_000.0

edgy = st.one_of(
    st.floats(min_value=-2.0, max_value=3.0, allow_nan=False),
    st.sampled_from([0.0, -0.0, 1.0, 0.2, 0.4, 1e-12, -1e-12]),
)
bm25s = st.one_of(st.floats(min_value=0.0, max_value=80.0, allow_nan=False), st.just(0.0))
updated = st.one_of(
    st.floats(min_value=NOW - 400 * 86400, max_value=NOW + 86400, allow_nan=False),
    st.just(0.0),
)
candidates = st.dictionaries(
    st.text("abcdef", min_size=1, max_size=4),
    st.tuples(bm25s, edgy),
    max_size=30,
)
rows = st.tuples(st.floats(min_value=0.05, max_value=3.0), updated)


def _reference(
    pairs: dict[str, tuple[float, float]],
    query_weight: float,
    table: dict[str, tuple[float, float]],
    weights: Weights,
) -> list[tuple[float, str, float]]:
    scored = []
    for rid, (bm25, cosine) in pairs.items():
        row = table.get(rid)
        if row is None:
            continue
        value = fuse(keyword_relevance(bm25, query_weight), cosine, weights)
        if value > 0:
            scored.append((value * row_multiplier(row, NOW, weights), rid, bm25))
    if not scored:
        return []
    floor = max(score for score, _, _ in scored) * weights.min_score_ratio
    return [item for item in scored if item[0] >= floor]


@settings(max_examples=400, deadline=None)
@given(
    candidates,
    st.floats(min_value=0.0, max_value=30.0),
    st.dictionaries(st.text("abcdef", min_size=1, max_size=4), rows, max_size=30),
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=0.0, max_value=0.9),
    st.sampled_from(["hybrid", "semantic", "keyword"]),
)
# a query weight so small that the keyword part overflows: semantic mode never counts it
@example({"a": (1.0, 1.0)}, 5e-324, {"a": (1.4, 0.0)}, 0.0, 0.0, "semantic")
def test_fused_scores_are_fuse_times_the_multiplier(
    pairs: dict[str, tuple[float, float]],
    query_weight: float,
    table: dict[str, tuple[float, float]],
    share: float,
    floor: float,
    mode: str,
) -> None:
    weights = Weights(mode=mode, semantic_weight=share, semantic_floor=floor)
    got = ranking.score_fused(pairs, query_weight, table, NOW, weights)
    assert got == _reference(pairs, query_weight, table, weights)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text("abcdef", min_size=1, max_size=4), bm25s, max_size=30),
    st.floats(min_value=0.0, max_value=30.0),
    st.dictionaries(st.text("abcdef", min_size=1, max_size=4), rows, max_size=30),
)
def test_keyword_scores_are_keyword_relevance_times_the_multiplier(
    found: dict[str, float], query_weight: float, table: dict[str, tuple[float, float]]
) -> None:
    weights = Weights(mode="keyword")
    got = ranking.score_keyword(list(found.items()), query_weight, table, NOW, weights)
    expected = _reference(
        {rid: (bm25, 0.0) for rid, bm25 in found.items()}, query_weight, table, weights
    )
    assert got == expected


def test_a_semantic_floor_at_the_full_cosine_does_not_divide_by_zero_in_keyword_mode() -> None:
    weights = Weights(mode="keyword", semantic_floor=2 * ranking.COSINE_FULL)
    scored = ranking.score_keyword([("a", 4.0)], 2.0, {"a": (1.0, NOW)}, NOW, weights)
    assert [rid for _, rid, _ in scored] == ["a"]


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_the_clamp_is_min_of_max(value: float) -> None:
    expected = min(max(value, 0.0), 1.0)
    got = relevance.unit_clamp(value)
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected
        assert math.copysign(1.0, got) == math.copysign(1.0, expected)  # -0.0 stays -0.0
