"""Fit engram's relevance model and floor (``engram/index/relevance.py``) on the labelled sets.

``python benchmarks/retrieval/fit.py`` ranks every query of every set present with engram
(``search.min_relevance: 0``, so every hit of the top 10 is seen, each with its features), fits
one logistic model per search mode on all of them, chooses the floor, and prints the
``MODELS`` and ``FLOORS`` constants to put in relevance.py. ``run.py --held-out`` uses the same
functions, fitting on every set but the one it reports.

The fit: on the best hit of every query that has one, a positive when it is one of its
query's relevant memories, else a negative (the best hit of a negative query is one). Lower
hits are left out: within one query they mostly teach the model the ranking, and the estimate
matters where the floor reads it, on the best hit. Logistic regression by Newton's method
with an L2 penalty of ``L2`` on the coefficients (not the intercept), every set weighted
equally whatever its size, and the coefficients of strength, coverage and cosine kept at 0 or
above (a coefficient the fit would make negative is fixed at 0 and the rest refitted), so the
estimate never falls when a memory holds more of the query.

The floor: the highest threshold on the grid ``FLOOR_GRID`` that drops the answer (every
relevant memory of the top 10) of at most ``MAX_LOST`` of the answerable queries of *each* set
it is chosen on. Plain numpy; no other dependency.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from engram.index import relevance

L2: Final = 0.01
MAX_LOST: Final = 0.01
FLOOR_GRID: Final = tuple(round(0.005 * i, 3) for i in range(0, 181))  # 0 .. 0.9
NONNEGATIVE: Final = ("strength", "coverage", "cosine")


@dataclass(frozen=True)
class Ranked:
    """One query's unfloored top 10 from engram: (id, features) best first, and its labels."""

    kind: str
    relevant: frozenset[str]
    hits: tuple[tuple[str, tuple[float, ...]], ...]


SetRankings = Sequence[Ranked]


def fit(sets: Sequence[SetRankings], l2: float = L2) -> tuple[float, ...]:
    """Return the model (intercept first) fitted on the best hits of the queries of ``sets``,
    each set weighted equally."""
    rows: list[tuple[float, ...]] = []
    labels: list[float] = []
    weights: list[float] = []
    for rankings in sets:
        start = len(rows)
        for ranked in rankings:
            for rid, values in ranked.hits[:1]:
                rows.append(values)
                labels.append(1.0 if rid in ranked.relevant else 0.0)
        count = len(rows) - start
        weights += [1.0 / max(count, 1)] * count
    x = np.column_stack([np.ones(len(rows)), np.asarray(rows, dtype=float)])
    y = np.asarray(labels)
    w = np.asarray(weights) * len(rows) / len(sets)  # each set sums to the mean share
    fixed: set[int] = set()
    bounded = {1 + relevance.FEATURES.index(name) for name in NONNEGATIVE}
    while True:
        free = [i for i in range(x.shape[1]) if i not in fixed]
        beta = _newton(x[:, free], y, w, l2)
        full = np.zeros(x.shape[1])
        full[free] = beta
        negative = [i for i in bounded - fixed if full[i] < 0]
        if not negative:
            return tuple(round(float(value), 4) for value in full)
        fixed.add(min(negative, key=lambda i: full[i]))


def _newton(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float) -> np.ndarray:
    """Return penalised logistic regression coefficients by Newton's method (column 0 free)."""
    beta = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2 * w.sum())
    penalty[0] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(x @ beta)))
        gradient = x.T @ (w * (p - y)) + penalty * beta
        hessian = (
            (x * (w * p * (1 - p))[:, None]).T @ x + np.diag(penalty) + 1e-9 * np.eye(len(beta))
        )
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return beta


def floored(ranked: Ranked, model: Sequence[float], floor: float) -> list[str]:
    """Return the ids of a query's hits when the best relevance under ``model`` clears
    ``floor``, else none (``relevance.answered``)."""
    chances = [relevance.probability(values, model) for _, values in ranked.hits]
    return [rid for rid, _ in ranked.hits] if chances and max(chances) >= floor else []


def lost_and_empty(
    rankings: SetRankings, model: Sequence[float], floor: float
) -> tuple[int, int, int, int]:
    """Return (answerable lost, answerable with an answer unfloored, negatives empty, negatives)."""
    lost = answered = empty = negatives = 0
    for ranked in rankings:
        kept = floored(ranked, model, floor)
        if ranked.kind == "negative":
            negatives += 1
            empty += not kept
        elif ranked.relevant & {rid for rid, _ in ranked.hits}:
            answered += 1
            lost += not (ranked.relevant & set(kept))
    return lost, answered, empty, negatives


def choose_floor(sets: Sequence[SetRankings], model: Sequence[float]) -> float:
    """Return the highest floor of ``FLOOR_GRID`` that loses at most ``MAX_LOST`` of the
    answerable queries of every one of ``sets``.

    Each answerable query with its answer in the top 10 is lost exactly when its best hit's
    relevance is under the floor, so the best relevances are computed once per set.
    """
    bests: list[tuple[list[float], int]] = []
    for rankings in sets:
        answerable = [
            max(relevance.probability(values, model) for _, values in ranked.hits)
            for ranked in rankings
            if ranked.kind != "negative" and ranked.relevant & {rid for rid, _ in ranked.hits}
        ]
        bests.append((answerable, len(answerable)))
    best = 0.0
    for floor in FLOOR_GRID:
        if any(
            sum(1 for chance in chances if chance < floor) > MAX_LOST * max(count, 1)
            for chances, count in bests
        ):
            break
        best = floor
    return best


def constants(models: Mapping[str, tuple[float, ...]], floors: Mapping[str, float]) -> str:
    """Return the MODELS and FLOORS constants as relevance.py writes them."""
    lines = ["MODELS: Final[Mapping[str, tuple[float, ...]]] = {"]
    lines += [f'    "{mode}": {tuple(model)!r},' for mode, model in models.items()]
    lines.append("}")
    lines.append(
        "FLOORS: Final[Mapping[str, float]] = {"
        + ", ".join(f'"{mode}": {floor}' for mode, floor in floors.items())
        + "}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Rank every set with engram, fit a model and a floor per mode on all of them, print them.

    ``--rankings PATH``: the rankings ``run.py --held-out --rankings PATH`` saved (the default
    multipliers' ones), instead of ranking again.
    """
    import argparse

    import run  # the sibling script: it builds the stores and collects the rankings

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rankings", type=Path, help="saved rankings to fit on")
    args = parser.parse_args(argv)
    if args.rankings is not None:
        rankings = run._load_rankings(args.rankings)[""]
    else:
        rankings = run.collect_rankings(list(run.present_sets()), list(run.MODES))
    models: dict[str, tuple[float, ...]] = {}
    floors: dict[str, float] = {}
    for mode in run.MODES:
        sets = [by_mode[mode] for by_mode in rankings.values() if mode in by_mode]
        if not sets:
            continue
        models[mode] = fit(sets)
        floors[mode] = choose_floor(sets, models[mode])
        for name, by_mode in rankings.items():
            if mode in by_mode:
                lost, answered, empty, negatives = lost_and_empty(
                    by_mode[mode], models[mode], floors[mode]
                )
                print(
                    f"{mode} on {name}: {lost}/{answered} answerable lost,"
                    f" {empty}/{negatives} negatives empty"
                )
    print(constants(models, floors))
    return 0 if not math.isnan(sum(floors.values())) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main(sys.argv[1:]))
