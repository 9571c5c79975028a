"""Measure re-ranking features that read the query and each hit together (issue 30, negatives).

No cross-encoder ships its weights in a package this project can install (docs/decisions.md,
"Re-ranking for the negatives"), so this tries what the installed bi-encoder, MiniLM (the
``minilm`` extra), gives by reading query and memory at the level of their tokens
(``TOKEN``), and a few signals that need no model (``LEXICAL``):

- ``maxsim``: late interaction (ColBERT's MaxSim) on MiniLM's last-layer token vectors: for
  each informative query token the highest cosine to any token of the memory, averaged with
  the token's idf in the store as its weight;
- ``worst``: the lowest of those per-token best cosines (the query word the memory explains
  worst: a negative asks about a feature the memory lacks);
- ``soft``: the idf-weighted share of informative query tokens whose best cosine clears
  ``SOFT_MATCH``, a coverage that counts a paraphrased word as held;
- ``absent``: the idf-weighted share of the query's informative words that no memory of the
  store holds (a property of the query, not the hit);
- ``code``: 1 when the query holds a word written as code (snake_case, dotted, ``--flag``,
  ``key=value``) that no memory's text holds;
- ``cos_margin``, ``str_margin``: the hit's cosine and strength less the median of the top 10;
- ``rare``: the share of the query's ``RARE_WORDS`` rarest words the memory holds.

The picked ones (``COMBINATIONS``) are appended to engram's own features of a hit
(``engram/index/relevance.py``) and the relevance model and floor are fitted leave-one-set-out
as ``run.py --held-out`` does (``fit.py``): for each set, fitted on the other sets only,
reported on it. The table gives, per set and feature set, recall@5 and MRR after the floor,
the answerable queries the floor lost, the negatives it emptied, the floor, and ``ceiling``:
the negatives a floor chosen on that set itself would empty at the same 1% loss (an in-sample
bound on what the features can separate); then the worst set. ``(re-ranked)`` rows order the
top 10 by a model fitted on every hit of the other sets. Costs: milliseconds to embed a query
and its top 10 token by token, and this process's peak resident memory.

``python benchmarks/retrieval/rerank.py [--rankings PATH] [--extras PATH] [--mode MODE]
[--lexical]``: ``--rankings`` keeps engram's unfloored rankings in a file, ``--extras`` the
token features (each written once, read after); ``--lexical`` leaves MiniLM out and measures
the features that need no model in any mode. Without ``--lexical`` it needs the ``minilm``
extra.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import resource
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fit  # this folder's relevance fit
import run  # this folder's benchmark: sets, queries, rankings
from bench_core import align

from engram.index import relevance, semantic
from engram.index.backend import QUERY_STOP_WORDS, idf, informative, tokenize_query

SOFT_MATCH: Final = 0.6  # a query token's best cosine at or above this counts as held
TOKEN: Final = ("maxsim", "worst", "soft")
LEXICAL: Final = ("absent", "code", "cos_margin", "str_margin", "rare")
EXTRA: Final = TOKEN + LEXICAL
RARE_WORDS: Final = 2  # ``rare``: the share of the query's rarest words the memory holds
COMBINATIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "engram features": (),
    "+ maxsim": ("maxsim",),
    "+ worst": ("worst",),
    "+ soft": ("soft",),
    "+ absent": ("absent",),
    "+ maxsim, worst, soft": ("maxsim", "worst", "soft"),
    "+ maxsim, worst, soft, absent": ("maxsim", "worst", "soft", "absent"),
    "+ code": ("code",),
    "+ margins": ("cos_margin", "str_margin"),
    "+ code, margins": ("code", "cos_margin", "str_margin"),
    "+ code, margins, maxsim, soft": ("code", "cos_margin", "str_margin", "maxsim", "soft"),
    "+ rare": ("rare",),
    "+ rare, soft": ("rare", "soft"),
    "+ rare, code, soft": ("rare", "code", "soft"),
    "+ absent, code": ("absent", "code"),
    "+ absent, code, maxsim, worst, soft": ("absent", "code", "maxsim", "worst", "soft"),
    "+ all eight": EXTRA,
}
# A word of a query written as code: snake_case, dotted (click.clear), a --flag or key=value.
_CODE: Final = re.compile(r"--?[A-Za-z][\w-]*|\w+(?:[._]\w+)+|\w+=\w+")
_WORD: Final = re.compile(r"\w+")


class TokenVectors:
    """MiniLM's last-layer vectors of each token of a text, L2-normalised, with its pieces."""

    def __init__(self) -> None:
        self.model = semantic.MiniLM(fetch=False)

    def __call__(self, text: str) -> tuple[list[str], np.ndarray]:
        encoding = self.model.tokenizer.encode(text[: semantic.MAX_CHARS])
        ids = encoding.ids
        tokens = np.asarray([ids], dtype=np.int64)
        feed = {"input_ids": tokens, "attention_mask": np.ones_like(tokens)}
        if "token_type_ids" in self.model.inputs:
            feed["token_type_ids"] = np.zeros_like(tokens)
        hidden = self.model.session.run(None, feed)[0][0][1:-1]  # no [CLS], [SEP]
        hidden = hidden / np.maximum(np.linalg.norm(hidden, axis=1, keepdims=True), 1e-9)
        return list(encoding.tokens[1:-1]), hidden.astype(np.float32)


def memory_text(record: Mapping[str, Any]) -> str:
    """Return the text of a memory that is read against the query: title, tags, content."""
    return ". ".join(
        part
        for part in (
            str(record.get("title", "") or ""),
            " ".join(str(tag) for tag in record.get("tags", []) or []),
            str(record.get("content", "") or ""),
        )
        if part
    )


class SetReader:
    """One set's memories, their token vectors (embedded on first use) and word statistics."""

    def __init__(self, folder: Path, vectors: TokenVectors | None) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        with open(folder / "memories.jsonl", encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    record = json.loads(line)
                    self.records[record["id"]] = record
        self.vectors = vectors
        self.cache: dict[str, tuple[list[str], np.ndarray]] = {}
        self.total = len(self.records)
        words: dict[str, int] = {}
        pieces: dict[str, int] = {}
        for record in self.records.values():
            text = memory_text(record).lower()
            for word in set(_WORD.findall(text)):
                words[word] = words.get(word, 0) + 1
            if vectors is not None:
                for piece in set(vectors.model.tokenizer.encode(text).tokens[1:-1]):
                    pieces[piece] = pieces.get(piece, 0) + 1
        self.word_df = words
        self.piece_df = pieces
        self.texts = {rid: relevance.searchable(record) for rid, record in self.records.items()}

    def text(self, rid: str) -> str:
        return self.texts[rid]

    def rarest(self, query: str) -> list[str]:
        """Return the query's ``RARE_WORDS`` informative words found in fewest memories."""
        words = informative(tokenize_query(query))
        return sorted(words, key=lambda word: (self.word_df.get(word, 0), words.index(word)))[
            :RARE_WORDS
        ]

    def code_unseen(self, query: str) -> float:
        """1 when the query holds a word written as code that no memory's text holds."""
        for match in _CODE.finditer(query):
            word = match.group().lower()
            if not any(word in text for text in self.texts.values()):
                return 1.0
        return 0.0

    def memory(self, rid: str) -> tuple[list[str], np.ndarray]:
        known = self.cache.get(rid)
        if known is None:
            assert self.vectors is not None, "token features need MiniLM (not --lexical)"
            known = self.cache[rid] = self.vectors(memory_text(self.records[rid]))
        return known

    def piece_weight(self, piece: str) -> float:
        return idf(self.total, max(self.piece_df.get(piece, 0), 1))

    def absent(self, query: str) -> float:
        words = informative(tokenize_query(query))
        weights = [(w, idf(self.total, max(self.word_df.get(w, 0), 1))) for w in words]
        total = sum(weight for _, weight in weights)
        missing = sum(weight for word, weight in weights if word not in self.word_df)
        return missing / total if total > 0 else 0.0


def query_pieces(tokens: list[str]) -> list[int]:
    """Return the indexes of the informative pieces of a query (no stop word, no punctuation).

    A word split in pieces keeps them all ("##s" belongs to its word): its first piece
    decides, by the word it starts.
    """
    keep: list[int] = []
    word_ok = False
    for index, piece in enumerate(tokens):
        if not piece.startswith("##"):
            word_ok = piece.isalnum() and piece not in QUERY_STOP_WORDS
        if word_ok:
            keep.append(index)
    return keep or list(range(len(tokens)))


def token_features(
    reader: SetReader, ranked: fit.Ranked, qvec: tuple[list[str], np.ndarray]
) -> dict[str, tuple[float, ...]]:
    """Return each hit's TOKEN features (late interaction on MiniLM's token vectors)."""
    tokens, vectors = qvec
    keep = query_pieces(tokens)
    weights = np.asarray([reader.piece_weight(tokens[i]) for i in keep], dtype=np.float64)
    weights = weights / weights.sum()
    out: dict[str, tuple[float, ...]] = {}
    for rid, _ in ranked.hits:
        _, memory = reader.memory(rid)
        best = (vectors[keep] @ memory.T).max(axis=1).astype(np.float64)
        out[rid] = (
            float(weights @ best),
            float(best.min()),
            float(weights @ (best >= SOFT_MATCH)),
        )
    return out


def lexical_features(
    reader: SetReader, query: str, ranked: fit.Ranked
) -> dict[str, tuple[float, ...]]:
    """Return each hit's LEXICAL features (words and engram's own features, no model)."""
    strength = relevance.FEATURES.index("strength")
    cosine = relevance.FEATURES.index("cosine")
    cosines = [values[cosine] for _, values in ranked.hits]
    strengths = [values[strength] for _, values in ranked.hits]
    cos_mid = statistics.median(cosines) if cosines else 0.0
    str_mid = statistics.median(strengths) if strengths else 0.0
    code = reader.code_unseen(query)
    absent = reader.absent(query)
    rare = reader.rarest(query)
    out: dict[str, tuple[float, ...]] = {}
    for rid, values in ranked.hits:
        text = reader.text(rid)
        held = sum(1 for word in rare if relevance.starts_a_word(text, relevance.stem_of(word)))
        out[rid] = (
            absent,
            code,
            values[cosine] - cos_mid,
            values[strength] - str_mid,
            held / len(rare) if rare else 1.0,
        )
    return out


def extended(
    rankings: Sequence[fit.Ranked],
    extras: Sequence[Mapping[str, tuple[float, ...]]],
    names: tuple[str, ...],
) -> list[fit.Ranked]:
    """Return the rankings with the named EXTRA features appended to every hit's features."""
    picks = [EXTRA.index(name) for name in names]
    return [
        fit.Ranked(
            ranked.kind,
            ranked.relevant,
            tuple((rid, (*values, *(extra[rid][i] for i in picks))) for rid, values in ranked.hits),
        )
        for ranked, extra in zip(rankings, extras, strict=True)
    ]


def fit_all_hits(sets: Sequence[Sequence[fit.Ranked]]) -> tuple[float, ...]:
    """Return a model fitted on every hit of the top 10 (a hit-level relevance, for ordering)."""
    rows: list[tuple[float, ...]] = []
    labels: list[float] = []
    weights: list[float] = []
    for rankings in sets:
        start = len(rows)
        for ranked in rankings:
            for rid, values in ranked.hits:
                rows.append(values)
                labels.append(1.0 if rid in ranked.relevant else 0.0)
        count = len(rows) - start
        weights += [1.0 / max(count, 1)] * count
    x = np.column_stack([np.ones(len(rows)), np.asarray(rows, dtype=float)])
    w = np.asarray(weights) * len(rows) / len(sets)
    beta = fit._newton(x, np.asarray(labels), w, fit.L2)
    return tuple(float(value) for value in beta)


def figures(
    rankings: Sequence[fit.Ranked],
    queries: Sequence[run.Query],
    model: Sequence[float],
    floor: float,
    order: Sequence[float] | None,
) -> dict[str, float]:
    """Return R@5, MRR, answerable lost and negatives empty of one set under a model and floor
    (``order``: a hit-level model to sort the top 10 by, else engram's order)."""
    kept: list[list[str]] = []
    plain: list[list[str]] = []
    for ranked in rankings:
        hits = list(ranked.hits)
        if order is not None:
            hits.sort(key=lambda hit: -relevance.probability(hit[1], order))
        ids = [rid for rid, _ in hits]
        plain.append(ids)
        chances = [relevance.probability(values, model) for _, values in hits]
        kept.append(ids if chances and max(chances) >= floor else [])
    return run.figures_of(kept, queries, plain)


def ceiling(rankings: Sequence[fit.Ranked], model: Sequence[float]) -> int:
    """Return the negatives a floor chosen on this very set would empty, losing at most
    ``fit.MAX_LOST`` of its answerable queries: what the features could do if a floor carried
    over from the other sets perfectly (in-sample: a bound, never a result)."""
    answerable: list[float] = []
    negatives: list[float] = []
    for ranked in rankings:
        if not ranked.hits:
            if ranked.kind == "negative":
                negatives.append(0.0)
            continue
        best = max(relevance.probability(values, model) for _, values in ranked.hits)
        if ranked.kind == "negative":
            negatives.append(best)
        elif ranked.relevant & {rid for rid, _ in ranked.hits}:
            answerable.append(best)
    allowed = int(fit.MAX_LOST * len(answerable))
    floor = sorted(answerable)[allowed] if answerable else 1.0  # the lowest answer kept
    return sum(1 for chance in negatives if chance < floor)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rankings", type=Path, help="engram's rankings, kept in this file")
    parser.add_argument("--mode", default="hybrid-minilm", help="engram's search mode")
    parser.add_argument("--extras", type=Path, help="the hits' token features, kept in this file")
    parser.add_argument(
        "--lexical", action="store_true", help="only the features that need no model (any mode)"
    )
    args = parser.parse_args(argv)
    names = run.present_sets()
    if args.rankings is not None and args.rankings.exists():
        rankings = run._load_rankings(args.rankings)[""]
    else:
        rankings = run.collect_rankings(names, [args.mode])
        if args.rankings is not None:
            run._save_rankings(args.rankings, {"": rankings})
    queries = {name: run.load_queries(run.SETS[name] / "queries.jsonl") for name in names}
    tokens: dict[str, list[dict[str, list[float]]]] = {}
    per_query: list[float] = []
    if args.extras is not None and args.extras.exists():
        tokens = json.loads(args.extras.read_text(encoding="utf-8"))
    vectors = None if args.lexical else TokenVectors()
    extras: dict[str, list[dict[str, tuple[float, ...]]]] = {}
    for name in names:
        reader = SetReader(run.SETS[name], vectors)
        if vectors is None:  # no token features: zeros, never picked (``combinations``)
            tokens[name] = [
                {rid: [0.0] * len(TOKEN) for rid, _ in ranked.hits}
                for ranked in rankings[name][args.mode]
            ]
        elif name not in tokens:
            tokens[name] = []
            for query, ranked in zip(queries[name], rankings[name][args.mode], strict=True):
                started = time.perf_counter()
                reader.cache.clear()  # a recall embeds its top 10: nothing kept between queries
                found = token_features(reader, ranked, vectors(query.text))
                tokens[name].append({rid: list(values) for rid, values in found.items()})
                per_query.append(time.perf_counter() - started)
        extras[name] = [
            {
                rid: (*tokens[name][index][rid], *values)
                for rid, values in lexical_features(reader, query.text, ranked).items()
            }
            for index, (query, ranked) in enumerate(
                zip(queries[name], rankings[name][args.mode], strict=True)
            )
        ]
    if args.extras is not None and vectors is not None:
        args.extras.write_text(json.dumps(tokens), encoding="utf-8")
    rows: list[Sequence[str]] = [
        ("set", "features", "R@5", "MRR", "lost", "neg empty", "floor", "ceiling")
    ]
    worst: dict[str, list[tuple[float, float, float, float, float]]] = {}
    coefficients: list[str] = []
    combinations = {
        label: picked
        for label, picked in COMBINATIONS.items()
        if vectors is not None or not set(picked) & set(TOKEN)
    }
    for label, picked in combinations.items():
        for reorder in (False, True):
            if reorder and not picked:
                continue
            tag = f"{label} (re-ranked)" if reorder else label
            for name in names:
                data = {
                    other: extended(rankings[other][args.mode], extras[other], picked)
                    for other in names
                }
                training = [data[other] for other in names if other != name]
                model = fit.fit(training)
                floor = fit.choose_floor(training, model)
                order = fit_all_hits(training) if reorder else None
                row = figures(data[name], queries[name], model, floor, order)
                rows.append(
                    (
                        name,
                        tag,
                        f"{row['R@5']:.3f}",
                        f"{row['MRR']:.3f}",
                        f"{row['lost']:.0f}/{row['answerable']:.0f}",
                        f"{row['neg empty']:.0f}/{row['negatives']:.0f}",
                        f"{floor}",
                        f"{ceiling(data[name], model)}/{row['negatives']:.0f}",
                    )
                )
                worst.setdefault(tag, []).append(
                    (
                        row["R@5"],
                        row["MRR"],
                        row["lost"] / row["answerable"],
                        row["neg empty"] / row["negatives"],
                        ceiling(data[name], model) / row["negatives"],
                    )
                )
                if not reorder:
                    coefficients.append(f"{name}, {tag}: model {model}")
    for tag, values in worst.items():
        rows.append(
            (
                "worst set",
                tag,
                f"{min(v[0] for v in values):.3f}",
                f"{min(v[1] for v in values):.3f}",
                f"{max(v[2] for v in values):.1%}",
                f"{min(v[3] for v in values):.0%}",
                "",
                f"{min(v[4] for v in values):.0%}",
            )
        )
    print(f"engram {args.mode}, leave one set out (fit.py on the other sets, reported here)")
    print(align(rows, left=(0, 1)))
    ms = sorted(1000 * s for s in per_query)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if ms:
        print(
            f"token vectors of a query and its top {run.LIMIT}: p50 {statistics.median(ms):.0f}"
            f" ms, p90 {ms[int(0.9 * (len(ms) - 1))]:.0f} ms per query over {len(ms)} queries;"
            f" peak RSS {rss:.0f} MB"
        )
    else:
        source = "none: --lexical" if vectors is None else f"read from {args.extras}"
        print(f"token vectors {source} (not timed); peak RSS {rss:.0f} MB")
    for line in coefficients:
        print(line)
    return 0 if not math.isnan(sum(v[0] for values in worst.values() for v in values)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
