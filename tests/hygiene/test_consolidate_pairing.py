"""Near duplicates paired through the index: reworded pairs are proposed, look-alikes are not.

Each test runs in keyword mode (full-text neighbours) and, where the embedding model is
installed, in hybrid mode (the stored vectors). At a scale where every pair cannot be compared,
the pairing through the index still finds every pair that the former pairing (prefix filtering
over rare words, kept below as ``blocking_pairs``) found on the same store.
"""

from __future__ import annotations

import heapq
import math
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from rapidfuzz import fuzz, process

from engram.config import set_value
from engram.hygiene.consolidate import NO_DEDUPE_KINDS, Group
from engram.hygiene.consolidate.shapes import is_current, text_of
from engram.hygiene.consolidate.similarity import alike, stem, words_of
from engram.index import semantic
from engram.model import Record, canonical_line
from engram.service import Engram

MODES = [
    "keyword",
    pytest.param(
        "hybrid",
        marks=pytest.mark.skipif(not semantic.available(), reason="wordllama is not installed"),
    ),
]
STAMP = "2026-03-01T09:00:00.000Z"


def reopen(root: Path, mode: str) -> Engram:
    """Open the project with ``search.mode`` set to ``mode``."""
    set_value(root / ".engram", "search.mode", mode)
    return Engram.open(root)


def near_groups(engram: Engram) -> list[list[str]]:
    """Return the ids of each near-duplicate group of the preview."""
    return [g.ids for g in engram.consolidate_preview() if g.kind == "near_duplicate"]


UTC_A = ("Use UTC everywhere", "Store timestamps in UTC; convert at the edge")
UTC_B = ("Use UTC for all timestamps", "Timestamps are stored in UTC and converted at the edge")
LOOK_ALIKES = [  # each shares words with the pair above or with one another, says another thing
    ("Use UTF-8 everywhere", "Store files in UTF-8; decode at the edge"),
    ("Log lines use local time", "Operators read timestamps in the time zone of the office"),
    ("Use Redis, not Memcached", "Sessions are kept in the cache for a day"),
    ("Use Memcached, not Redis", "Sessions are kept in the cache for a day"),
    ("Convert currencies at the edge", "Amounts are stored in cents and converted for display"),
    ("Do not use eval", "Parse the expression with the ast module"),
    ("Use eval", "Parse the expression with the ast module"),
]
FILLER = [
    ("Deploys run from main", "Every merge to main deploys to staging, then to production"),
    ("Retries use backoff", "HTTP calls retry three times with exponential backoff"),
    ("Migrations are reviewed", "A schema change needs a second reviewer and a rollback plan"),
    ("Feature flags expire", "A flag older than a quarter is removed or made permanent"),
    ("Errors go to Sentry", "Unhandled exceptions are reported with the release tag"),
    ("Tests use real databases", "The suite starts Postgres in a container, no mocks"),
]


def test_the_words_of_a_text_are_stemmed_and_negations_kept() -> None:
    assert words_of(text_of({"title": UTC_A[0], "content": UTC_A[1]})) == {
        "use",
        "utc",
        "everywher",
        "stor",
        "timestamp",
        "convert",
        "edg",
    }
    assert {stem(w) for w in ("retries", "retried", "retry")} == {"retry"}
    assert {stem(w) for w in ("stopped", "stopping", "stop")} == {"stop"}
    assert stem("status") == "status" and stem("redis") == "redis" and stem("need") == "need"
    assert words_of("don't use eval") == words_of("do not use eval") == {"not use", "eval"}
    # The same words in another order: a negation bound to other words is another thing said.
    one, other = "use redis, not memcached", "use memcached, not redis"
    assert alike(one, other, words_of(one), words_of(other), 0.5) is None


@pytest.mark.parametrize("mode", MODES)
def test_a_reworded_pair_is_proposed_and_look_alikes_are_not(project: Engram, mode: str) -> None:
    root = project.root
    with reopen(root, mode) as engram:
        saved = [engram.remember(t, c, kind="decision") for t, c in [UTC_A, UTC_B, *LOOK_ALIKES]]
        for title, content in FILLER:
            engram.remember(title, content, kind="decision")
        engram.remember(UTC_A[0], UTC_A[1], kind="pitfall")  # another kind: never merged
        assert engram.here.ws.index.mode == mode
        groups = near_groups(engram)
    assert groups == [sorted(result.record["id"] for result in saved[:2])]


# -- at scale: every pair the former pairing found ----------------------------------------------


def blocking_pairs(records: Sequence[Mapping[str, Any]], threshold: float) -> set[tuple[str, str]]:
    """Return the near-duplicate pairs as consolidation found them before pairing through the
    index: per block, texts sharing a word among their rarest, compared by character ratio."""
    blocks: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    for record in sorted(records, key=lambda r: r["id"]):
        if record["kind"] in NO_DEDUPE_KINDS or not is_current(record):
            continue
        key = (record["kind"], record.get("scope", "project"), record.get("project", ""))
        blocks.setdefault(key, {}).setdefault(text_of(record), []).append(record["id"])
    pairs: set[tuple[str, str]] = set()
    for same in blocks.values():
        items = [(members[0], text) for text, members in same.items() if len(members) == 1]
        pairs |= _prefix_filtered(items, threshold)
    return pairs


def _prefix_filtered(items: Sequence[tuple[str, str]], threshold: float) -> set[tuple[str, str]]:
    """The former ``consolidate.groups._near_pairs``, budget left out."""
    words = [frozenset(re.findall(r"\w+", text)) for _, text in items]
    lengths = [len(text) for _, text in items]
    frequency: dict[str, int] = {}
    for tokens in words:
        for token in tokens:
            frequency[token] = frequency.get(token, 0) + 1
    rank = {token: n for n, token in enumerate(sorted(frequency, key=lambda t: (frequency[t], t)))}
    postings: dict[str, list[int]] = {}
    shortest = threshold / (2 - threshold)
    pairs: set[tuple[str, str]] = set()
    for n in sorted(range(len(items)), key=lambda n: (lengths[n], items[n][0])):
        own = words[n]
        if not own:
            continue
        half = len(own) - math.ceil(0.5 * len(own)) + 1
        size = max(len(own) - math.ceil(0.9 * len(own)) + 1, min(half, 8))
        prefix = heapq.nsmallest(size, own, key=rank.__getitem__)
        candidates: set[int] = set()
        for token in prefix:
            candidates.update(postings.get(token, ()))
        choices = {
            m: items[m][1]
            for m in candidates
            if lengths[m] >= lengths[n] * shortest
            and len(own & words[m]) >= 0.5 * min(len(own), len(words[m]))
        }
        for _, _, m in process.extract(
            items[n][1], choices, scorer=fuzz.ratio, score_cutoff=threshold * 100, limit=None
        ):
            a, b = sorted((items[n][0], items[m][0]))
            pairs.add((a, b))
        for token in prefix:
            postings.setdefault(token, []).append(n)
    return pairs


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(syllables, k=rng.choice((2, 2, 3, 3, 4)))))
    return sorted(words)


def _sentence(rng: random.Random, words: Sequence[str], weights: Sequence[float]) -> str:
    chosen = rng.choices(words, weights=weights, k=rng.randint(6, 14))
    return " ".join(chosen).capitalize() + rng.choice((".", ".", ";", "!"))


def _plural(text: str, rng: random.Random) -> str:
    """The same text with about a third of its longer words in the plural."""
    return re.sub(
        r"\b([a-z]{4,})\b",
        lambda m: m.group(1) + "s" if rng.random() < 0.35 and m.group(1)[-1] != "s" else m.group(1),
        text,
    )


EDITS = ("remark", "word", "plural", "reorder", "punctuation")
VOCABULARY = 300


def synthetic(size: int, seed: int) -> tuple[list[Record], dict[str, str]]:
    """Return ``size`` memories of pseudo-words plus planted copies, and each copy's source.

    The copies are edited one of five ways (``EDITS``): a remark appended, a word changed,
    words put in the plural, sentences reordered, punctuation changed; some memories are
    copied four times. Some memories share a title and nothing else.
    """
    rng = random.Random(seed)
    words = _vocabulary(rng, VOCABULARY)
    weights = [1 / (n + 2) for n in range(len(words))]  # a few common words, many rare ones
    kinds = ["decision", "pitfall", "pattern", "fact", "bugfix", "session"]
    records: list[Record] = []
    for n in range(size):
        sentences = [_sentence(rng, words, weights) for _ in range(rng.randint(1, 6))]
        title = _sentence(rng, words, weights).rstrip(".;!")[:60]
        if n % 40 == 0 and n >= len(kinds):  # the title of a memory of its kind, other words
            title = str(records[n - len(kinds)]["title"])
        records.append(
            {
                "id": f"m{n:05d}",
                "kind": kinds[n % len(kinds)],
                "title": title,
                "content": " ".join(sentences),
                "status": "active" if n % 9 else "superseded",
                "scope": "project",
                "project": "demo",
                "importance": 3,
                "created_at": STAMP,
                "updated_at": STAMP,
                "rev": 1,
            }
        )
    sources: dict[str, str] = {}
    copies = 0
    for number, source in enumerate(rng.sample(records[:size], size // 20)):
        # Every fifth memory copied is copied four times over: its copies are near each other.
        for _ in range(4 if number % 5 == 0 else 1):
            copy = dict(source, id=f"t{copies:05d}")
            copy["content"] = _edited(
                str(source["content"]), EDITS[copies % len(EDITS)], rng, words
            )
            records.append(copy)
            sources[copy["id"]] = str(source["id"])
            copies += 1
    return records, sources


def _edited(content: str, edit: str, rng: random.Random, words: Sequence[str]) -> str:
    """Return ``content`` edited one of the ``EDITS`` ways."""
    if edit == "remark":
        return content + rng.choice((" Seen again on staging.", " Seen again on ci."))
    if edit == "word":
        parts = content.split(" ")
        parts[rng.randrange(len(parts))] = rng.choice(words)
        return " ".join(parts)
    if edit == "plural":
        return _plural(content, rng)
    if edit == "reorder":
        parts = re.split(r"(?<=[.;!]) ", content)
        return " ".join(parts[1:] + parts[:1])
    return content.replace(".", ";").replace("!", ".")


def write_store(root: Path, records: Sequence[Record]) -> None:
    """Write ``records`` as the project's memories.jsonl, as a hand edit or a pull would."""
    lines = [canonical_line(r) for r in sorted(records, key=lambda r: r["id"])]
    (root / ".engram" / "memories.jsonl").write_bytes(b"".join(lines))


def grouped(groups: Sequence[Group]) -> dict[str, int]:
    """Return the number of the (near) duplicate group each grouped id is in."""
    merged = [g for g in groups if g.kind in ("duplicate", "near_duplicate")]
    return {memory_id: n for n, group in enumerate(merged) for memory_id in group.ids}


@pytest.mark.parametrize("mode", MODES)
def test_pairing_through_the_index_finds_every_pair_the_blocking_found(
    project: Engram, mode: str
) -> None:
    records, sources = synthetic(2000, seed=16)
    write_store(project.root, records)
    before = blocking_pairs(records, 0.88)
    with reopen(project.root, mode) as engram:
        groups = engram.consolidate_preview()
    group_of = grouped(groups)
    assert len(before) > 50  # the former pairing found pairs of several edits
    missed = [
        (a, b) for a, b in sorted(before) if a not in group_of or group_of[a] != group_of.get(b)
    ]
    assert missed == []
    # Each planted copy that the judging calls alike its source (and that may be merged) is
    # grouped with it, the reworded ones too (words in the plural, sentences in another
    # order), which the blocking missed; and nothing else is grouped.
    by_id = {str(r["id"]): r for r in records}
    texts = Counter(text_of(r) for r in records)  # the members of an exact group join no other
    alike_pairs = {
        copy: source
        for copy, source in sources.items()
        if by_id[source]["kind"] not in NO_DEDUPE_KINDS
        and is_current(by_id[source])
        and texts[text_of(by_id[copy])] == texts[text_of(by_id[source])] == 1
        and _alike(by_id[copy], by_id[source])
    }
    assert len(alike_pairs) > 80
    lost = [c for c, s in sorted(alike_pairs.items()) if group_of.get(c) != group_of.get(s, -1)]
    assert lost == []
    planted = set(sources) | set(sources.values())
    assert sorted(set(group_of) - planted) == []
    found_later = {c for c, s in alike_pairs.items() if tuple(sorted((c, s))) not in before}
    assert len(found_later) > 10  # the blocking missed the reworded copies


def _alike(one: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    a, b = text_of(one), text_of(other)
    return a == b or alike(a, b, words_of(a), words_of(b), 0.88) is not None


@pytest.mark.skipif(not semantic.available(), reason="numpy comes with the embedding model")
@pytest.mark.parametrize(("limit", "floor"), [(3, 0.2), (6, -1.0), (50, 0.0), (1, 0.9)])
def test_nearest_among_is_every_pair_sorted_and_cut(limit: int, floor: float) -> None:
    """The nearest others of each row among the rows asked, as sorting every pair would say:
    nearest first, ties by row, none under the floor, never the row itself, whether few
    pairs pass the floor (sorted as found) or most do (each row's best picked first)."""
    import numpy as np

    from engram.index.matrix import NEAREST_SLICE, VectorState, head_of, nearest_among

    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(NEAREST_SLICE + 300, 32)).astype(np.float32)
    vectors[10] = vectors[11] = vectors[12]  # ties
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    state = VectorState([f"r{n}" for n in range(len(vectors))], vectors, head_of(vectors))
    rows = [n for n in range(len(vectors)) if n % 7]  # some rows are not asked about
    cosines = vectors[rows] @ vectors[rows].T
    expected = []
    for i, row in enumerate(rows):
        others = [(-float(cosines[i, j]), other) for j, other in enumerate(rows) if other != row]
        kept = sorted(pair for pair in others if -pair[0] >= floor)[:limit]
        expected.append([other for _, other in kept])
    found = nearest_among(state, rows, limit, floor)
    assert [[at for at, _ in near] for near in found] == expected
    assert all(c >= floor for near in found for _, c in near)


MANY_TAGS = [f"{area}-{part}" for area in ("billing", "storage", "api") for part in range(12)]


@pytest.mark.parametrize("mode", MODES)
def test_many_tags_neither_hide_a_reworded_pair_nor_make_one(project: Engram, mode: str) -> None:
    root = project.root
    with reopen(root, mode) as engram:
        saved = [engram.remember(t, c, kind="decision") for t, c in [UTC_A, UTC_B, *LOOK_ALIKES]]
        fillers = [engram.remember(t, c, kind="decision") for t, c in FILLER]
        # One of the reworded pair is saved again with many tags; two unrelated memories
        # carry the same many tags.
        engram.update(saved[1].record["id"], tags=MANY_TAGS)
        for result in fillers[:2]:
            engram.update(result.record["id"], tags=MANY_TAGS)
        assert engram.here.ws.index.mode == mode
        groups = near_groups(engram)
    assert groups == [sorted(result.record["id"] for result in saved[:2])]
