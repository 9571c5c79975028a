"""Score ranking backends on the hand-labelled retrieval sets (memories.jsonl, queries.jsonl).

Run ``python benchmarks/retrieval/run.py`` (``make bench-retrieval``). Four sets, each scored on
its own in the same run: ``harbor`` (this folder: a shipping company's engineering memories),
``adr`` (``adr/``: real public ADRs turned into memories by engram's ADR indexer, with queries
written by hand before any ranking was looked at; ``adr/SOURCES.md``), ``agentlog``
(``agentlog/``: memories an agent saved after real work on two public projects, sqlite-utils and
click, as two projects in one store) and ``captured`` (``captured/``: the conversational turns
``capture`` and ``prompt`` save, titled by their first words, from work on starlette). The last
two were never used to choose a ranking parameter (issue 30; their SOURCES.md). ``--set`` picks
one. Every backend
answers every query with its top 10; the table gives, per backend and query kind, recall@1/5/10 (the
share of a query's relevant memories found in its top k, averaged over the queries), MRR (1 / the
rank of the first relevant hit, 0 when none is in the top 10), the top score's p50/p90, the share of
queries that returned any hit, and the p50 latency of one query. For negative queries (no memory
answers them) only the last three mean anything: a good backend returns nothing, or a top score well
under the answerable queries' top scores.

Backends, all in this one run over the same memories:

- ``bm25``: the plain baseline, written here and independent of engram's ranking: an in-memory
  SQLite FTS5 table (title, tags, content, files; ``porter unicode61`` tokenizer) and ``bm25()``
  with engram's field weights (title 6, tags 3, content 1, files 1.5); the query's words joined with
  OR. No kind, importance, status or freshness multipliers, no cut.
- ``engram <mode>``: ``Engram.recall(query, limit=10)`` on a scratch store built from
  memories.jsonl, with ``search.backend: tantivy`` (the default) and ``search.mode: <mode>`` set in
  its config.yaml through ``engram.config.set_value``; ``engram fts5 <mode>`` is the same on the
  FTS5 backend. ``engram hybrid`` is the configuration ``engram init`` writes.
- ``engram <mode> (no floor)``: the same with ``search.min_relevance: 0``, so that the table can say
  how many answerable queries the floor costs: ``lost`` counts the answerable queries whose relevant
  memory is in the unfloored top 10 and not in the floored one.
- ``engram semantic-minilm`` and ``engram hybrid-minilm``: those modes with ``search.model:
  minilm`` (the ``minilm`` extra: all-MiniLM-L6-v2), scored where that model is installed.

A mode is "not available" when engram does not know the setting (no ``search.mode`` in
``engram.config.DEFAULTS``; the keyword pass then runs with the default config), when opening or
searching the store with it raises, or when it has no effect (every ranked list the same as the
keyword pass's). The ADR set is rebuilt, not committed (``adr/SOURCES.md``): where its
memories.jsonl is missing, a plain run leaves that set out.

``--held-out`` leaves one set out: for each set, the relevance model and its floor
(``fit.py``), the ranking multipliers (``VARIANTS``) and each hybrid mode's fusion
(``search.semantic_weight`` and ``search.semantic_floor``, ``FUSION_WEIGHTS`` ×
``FUSION_FLOORS``) are chosen on the other sets only, and
the table gives, per set and backend, recall@1/5/10, MRR, paraphrase MRR, the answerable queries
the floor lost and the negatives answered with nothing, then each column's worst set.
A second table gives recall@1/5/10 and MRR per query kind for bm25 and each mode (floored).
``--rankings PATH`` keeps engram's rankings with their features in a file (written after
ranking, read instead of ranking when it exists; what it lacks is ranked and added), so a
change of the fit can be tried in seconds. ``--cosines`` prints each embedding model's cosine
quantiles over every query and memory, and the floors at the quantiles of wordllama's grid.

The scratch stores go to a temporary folder (removed afterwards), with ``ENGRAM_HOME`` pointing
inside it so no personal store is searched. ``--json PATH`` also writes every figure as JSON;
``--misses K`` lists, per backend, the answerable queries with nothing relevant in the top K.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fit  # this folder's relevance fit
from bench_core import align  # a sibling script: its plain-text table helper

from engram import config as config_mod
from engram.errors import EngramError
from engram.service import Engram

HERE: Final = Path(__file__).resolve().parent
MEMORIES: Final = HERE / "memories.jsonl"
QUERIES: Final = HERE / "queries.jsonl"
SETS: Final = {
    "harbor": HERE,
    "adr": HERE / "adr",
    "agentlog": HERE / "agentlog",
    "captured": HERE / "captured",
}
BACKENDS: Final = ("tantivy", "fts5")
# A mode with a suffix embeds with that model (``search.model``), the others with the default.
MODES: Final = ("keyword", "semantic", "hybrid", "semantic-minilm", "hybrid-minilm")
QUERY_KINDS: Final = ("keyword", "paraphrase", "question")
LIMIT: Final = 10
# The baseline's BM25 column weights, in the FTS5 table's column order (engram's defaults,
# README, written out here so the baseline does not depend on engram's code).
BASELINE_WEIGHTS: Final = (("title", 6.0), ("tags", 3.0), ("content", 1.0), ("files", 1.5))
_WORD: Final = re.compile(r"\w+", re.UNICODE)

# A backend answers a query with (memory id, score) pairs, best first.
Search = Callable[[str], list[tuple[str, float]]]


@dataclass
class Query:
    """One labelled query."""

    id: str
    kind: str
    text: str
    relevant: frozenset[str]


@dataclass
class Answer:
    """What a backend returned for one query, and how long it took (seconds, per round)."""

    ids: list[str]
    top_score: float | None
    seconds: list[float] = field(default_factory=list)


@dataclass
class Result:
    """One backend's answers to every query, or why it could not run."""

    name: str
    answers: dict[str, Answer] = field(default_factory=dict)
    unavailable: str = ""


def load_queries(path: Path = QUERIES) -> list[Query]:
    """Read queries.jsonl."""
    queries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            raw = json.loads(line)
            queries.append(Query(raw["id"], raw["kind"], raw["query"], frozenset(raw["relevant"])))
    return queries


# --- the plain BM25 baseline ------------------------------------------------------------------


def bm25_baseline(memories: Path = MEMORIES) -> Search:
    """Return a search over an in-memory FTS5 table of the memories, ranked by plain bm25()."""
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute(
        "CREATE VIRTUAL TABLE docs USING fts5(id UNINDEXED, title, tags, content, files,"
        " tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    rows = []
    for line in memories.read_bytes().splitlines():
        record = json.loads(line)
        if record.get("deleted_at"):
            continue
        rows.append(
            (
                record["id"],
                record.get("title") or "",
                " ".join(record.get("tags") or []),
                record.get("content") or "",
                " ".join(record.get("files") or []),
            )
        )
    db.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?)", rows)
    db.commit()
    # bm25()'s first weight is for the UNINDEXED id column, which never matches.
    weights = ", ".join(["0.0", *(str(weight) for _, weight in BASELINE_WEIGHTS)])
    sql = (
        f"SELECT id, bm25(docs, {weights}) AS rank FROM docs WHERE docs MATCH ?"
        " ORDER BY rank LIMIT ?"
    )

    def search(text: str) -> list[tuple[str, float]]:
        words = _WORD.findall(text.lower())
        if not words:
            return []
        expression = " OR ".join('"' + word.replace('"', '""') + '"' for word in words)
        return [(str(rid), -float(rank)) for rid, rank in db.execute(sql, (expression, LIMIT))]

    return search


# --- engram -----------------------------------------------------------------------------------


def mode_setting_known() -> bool:
    """Tell whether this engram has a ``search.mode`` setting."""
    search = config_mod.DEFAULTS.get("search")
    return isinstance(search, dict) and "mode" in search


def engram_store(
    scratch: Path, memories: Path, mode: str | None, settings: dict[str, object]
) -> Engram:
    """Build a project store holding ``memories``; set ``search.mode`` and other settings."""
    root = Path(tempfile.mkdtemp(prefix="store-", dir=scratch))
    engram, _ = Engram.init(root, project="bench")
    engram.close()
    engram_dir = root / config_mod.ENGRAM_DIR
    shutil.copyfile(memories, engram_dir / "memories.jsonl")
    if mode is not None:
        search_mode, _, model = mode.partition("-")
        config_mod.set_value(engram_dir, "search.mode", search_mode)
        if model:
            config_mod.set_value(engram_dir, "search.model", model)
    for key, value in settings.items():
        config_mod.set_value(engram_dir, key, value)
    return Engram(root)


def setting_known(key: str) -> bool:
    """Tell whether engram's config knows ``search.<name>``."""
    section, _, name = key.partition(".")
    values = config_mod.DEFAULTS.get(section)
    return isinstance(values, dict) and name in values


def engram_search(engram: Engram) -> Search:
    """Return a search through ``Engram.recall``."""

    def search(text: str) -> list[tuple[str, float]]:
        return [(hit.id, hit.score) for hit in engram.recall(text, limit=LIMIT)]

    return search


# --- running and scoring ----------------------------------------------------------------------


def run_backend(name: str, search: Search, queries: Sequence[Query], rounds: int) -> Result:
    """Ask every query once untimed (warm-up), then ``rounds`` timed times."""
    result = Result(name)
    for query in queries:
        hits = search(query.text)
        result.answers[query.id] = Answer([i for i, _ in hits], hits[0][1] if hits else None)
    for _ in range(rounds):
        for query in queries:
            started = time.perf_counter()
            search(query.text)
            result.answers[query.id].seconds.append(time.perf_counter() - started)
    return result


def run_engram(
    name: str,
    memories: Path,
    mode: str,
    settings: dict[str, object],
    scratch: Path,
    queries: Sequence[Query],
    rounds: int,
    known: bool,
) -> Result:
    """Score engram in one search mode and settings, or say why that is not available."""
    if not known and mode != "keyword":
        return Result(name, unavailable="engram has no search.mode setting")
    unknown = [key for key in settings if not setting_known(key)]
    if unknown:
        return Result(name, unavailable=f"engram has no {', '.join(unknown)} setting")
    engram: Engram | None = None
    try:
        engram = engram_store(scratch, memories, mode if known else None, settings)
        engram.recall("warm up the index and any model")  # builds the index, untimed
        return run_backend(name, engram_search(engram), queries, rounds)
    except EngramError as exc:
        return Result(name, unavailable=f"{type(exc).__name__}: {exc}")
    finally:
        if engram is not None:
            engram.close()


def percentile(values: Sequence[float], share: float) -> float:
    """Return the ``share`` percentile (0-1) of values by linear interpolation."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = share * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def score(result: Result, queries: Sequence[Query]) -> dict[str, dict[str, float | None]]:
    """Return the figures per query kind (and ``all`` answerable ones) for one backend."""
    groups: dict[str, list[Query]] = {kind: [] for kind in (*QUERY_KINDS, "all", "negative")}
    for query in queries:
        groups[query.kind].append(query)
        if query.kind != "negative":
            groups["all"].append(query)
    out: dict[str, dict[str, float | None]] = {}
    for kind, members in groups.items():
        if not members:
            continue
        answers = [result.answers[query.id] for query in members]
        tops = [answer.top_score for answer in answers if answer.top_score is not None]
        seconds = [s for answer in answers for s in answer.seconds]
        figures: dict[str, float | None] = {
            "n": float(len(members)),
            "any_hit": sum(1 for answer in answers if answer.ids) / len(members),
            "top_p50": percentile(tops, 0.5) if tops else None,
            "top_p90": percentile(tops, 0.9) if tops else None,
            "p50_ms": statistics.median(seconds) * 1000 if seconds else None,
        }
        if kind != "negative":
            for k in (1, 5, 10):
                figures[f"r@{k}"] = statistics.fmean(
                    len(query.relevant & set(answer.ids[:k])) / len(query.relevant)
                    for query, answer in zip(members, answers, strict=True)
                )
            figures["mrr"] = statistics.fmean(
                _reciprocal_rank(query, answer)
                for query, answer in zip(members, answers, strict=True)
            )
        out[kind] = figures
    return out


def _reciprocal_rank(query: Query, answer: Answer) -> float:
    for rank, rid in enumerate(answer.ids[:LIMIT], start=1):
        if rid in query.relevant:
            return 1.0 / rank
    return 0.0


def misses(result: Result, queries: Sequence[Query], k: int) -> list[str]:
    """Return a line per answerable query with no relevant memory in the top ``k``."""
    lines = []
    for query in queries:
        if query.kind == "negative":
            continue
        ids = result.answers[query.id].ids
        ranks = [ids.index(rid) + 1 for rid in query.relevant if rid in ids]
        if not ranks or min(ranks) > k:
            found = f"rank {min(ranks)}" if ranks else f"not in the top {LIMIT}"
            lines.append(f"  {query.id} ({found}): {query.text}")
    return lines


def same_rankings(a: Result, b: Result) -> bool:
    """Tell whether two backends returned the same ranked ids for every query."""
    return all(a.answers[qid].ids == b.answers[qid].ids for qid in a.answers)


def lost_to_floor(floored: Result, unfloored: Result, queries: Sequence[Query]) -> dict[str, int]:
    """Count, per kind and ``all``, the answerable queries whose relevant memory the floor drops:
    in the unfloored top 10, not in the floored one."""
    lost: dict[str, int] = {kind: 0 for kind in (*QUERY_KINDS, "all")}
    for query in queries:
        if query.kind == "negative":
            continue
        before = query.relevant & set(unfloored.answers[query.id].ids)
        after = query.relevant & set(floored.answers[query.id].ids)
        if before and not after:
            lost[query.kind] += 1
            lost["all"] += 1
    return lost


def render(
    results: Sequence[Result], figures: dict[str, dict[str, dict[str, float | None]]]
) -> str:
    """Return the one table: a row per backend and query kind."""

    def cell(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    lines: list[Sequence[str]] = [
        (
            "backend",
            "queries",
            "n",
            "R@1",
            "R@5",
            "R@10",
            "MRR",
            "top p50",
            "top p90",
            "any hit",
            "lost",
            "p50 ms",
        )
    ]
    for result in results:
        if result.unavailable:
            lines.append((result.name, "not available", *["-"] * 10))
            continue
        for kind, row in figures[result.name].items():
            lines.append(
                (
                    result.name,
                    kind,
                    cell(row["n"], ".0f"),
                    cell(row.get("r@1"), ".3f"),
                    cell(row.get("r@5"), ".3f"),
                    cell(row.get("r@10"), ".3f"),
                    cell(row.get("mrr"), ".3f"),
                    cell(row["top_p50"], ".2f"),
                    cell(row["top_p90"], ".2f"),
                    cell(row["any_hit"], ".0%"),
                    cell(row.get("lost"), ".0f"),
                    cell(row["p50_ms"], ".2f"),
                )
            )
    table: str = align(lines, left=(0, 1))
    return table


def parse_modes(text: str) -> list[str]:
    """Parse ``keyword,hybrid`` into engram search modes."""
    modes = [part.strip() for part in text.split(",") if part.strip()]
    bad = [mode for mode in modes if mode not in MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(f"modes are {', '.join(MODES)}; got {text!r}")
    return modes


def run_set(
    name: str, folder: Path, modes: Sequence[str], backends: Sequence[str], rounds: int
) -> tuple[str, dict[str, object]]:
    """Score every backend on one labelled set; return the printed report and its figures."""
    memories, queries = folder / "memories.jsonl", load_queries(folder / "queries.jsonl")
    scratch = Path(tempfile.mkdtemp(prefix="engram-retrieval-"))
    os.environ["ENGRAM_HOME"] = str(scratch / "home" / ".engram")
    os.environ.setdefault("ENGRAM_AUTHOR", "Bench Author")
    os.environ.setdefault("ENGRAM_DAEMON", "off")
    known = mode_setting_known()
    started = time.monotonic()
    twins: dict[str, str] = {}  # floored backend -> its unfloored twin
    try:
        results = [run_backend("bm25 (fts5)", bm25_baseline(memories), queries, rounds)]
        for backend in backends:
            prefix = "engram" if backend == "tantivy" else f"engram {backend}"
            for mode in modes:
                settings: dict[str, object] = {"search.backend": backend}
                label = f"{prefix} {mode}"
                results.append(
                    run_engram(label, memories, mode, settings, scratch, queries, rounds, known)
                )
                if setting_known("search.min_relevance"):
                    twin = f"{label} (no floor)"
                    settings["search.min_relevance"] = 0.0
                    results.append(
                        run_engram(twin, memories, mode, settings, scratch, queries, rounds, known)
                    )
                    twins[label] = twin
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    by_name = {result.name: result for result in results}
    for result in results:
        keyword = by_name.get(re.sub(r"(semantic|hybrid)(-\w+)?", "keyword", result.name))
        if (
            keyword is not None
            and not keyword.unavailable
            and result is not keyword
            and result.name.startswith("engram")
            and "(no floor)" not in result.name
            and not result.unavailable
            and same_rankings(result, keyword)
        ):
            result.unavailable = "search.mode had no effect (same rankings as keyword)"
    figures = {r.name: score(r, queries) for r in results if not r.unavailable}
    for floored, twin in twins.items():
        if floored in figures and twin in figures:
            for kind, count in lost_to_floor(by_name[floored], by_name[twin], queries).items():
                if kind in figures[floored]:
                    figures[floored][kind]["lost"] = float(count)
    count = sum(1 for line in memories.read_bytes().splitlines() if line.strip())
    counts = {
        kind: sum(1 for q in queries if q.kind == kind) for kind in (*QUERY_KINDS, "negative")
    }
    lines = [
        f"set {name}: {count} memories, {len(queries)} queries ("
        + ", ".join(f"{n} {kind}" for kind, n in counts.items())
        + f"), top {LIMIT}, {rounds} timed rounds, {time.monotonic() - started:.0f} s",
        render(results, figures),
    ]
    lines += [f"{r.name}: not available: {r.unavailable}" for r in results if r.unavailable]
    payload: dict[str, object] = {
        "memories": count,
        "queries": counts,
        "figures": figures,
        "unavailable": {r.name: r.unavailable for r in results if r.unavailable},
    }
    report = "\n".join(lines)
    return report, payload | {"results": results, "queries_list": queries}


# --- leave one set out ------------------------------------------------------------------------

# Settings compared under --held-out besides the default ranking ("alternatives"): each is
# scored unfloored and with a floor fitted on the other sets, and one is chosen per set on the
# others. The multipliers issue 30 asks about: kind weights and the importance step (off by
# default since then, at the values they had before), status weights and freshness (on).
_SEARCH: Final = config_mod.DEFAULTS["search"]
OLD_KIND_WEIGHTS: Final = {
    "decision": 1.25,
    "pitfall": 1.25,
    "principle": 1.2,
    "architecture": 1.15,
    "bugfix": 1.1,
    "pattern": 1.1,
    "note": 0.9,
    "prompt": 0.8,
    "session": 0.8,
}
# Every status at 1.0: a mapping set in config.yaml is merged over the defaults, so an empty one
# would change nothing.
_NO_STATUS: Final[dict[str, object]] = {
    "search.status_weights": dict.fromkeys(_SEARCH["status_weights"], 1.0)
}
VARIANTS: Final[dict[str, dict[str, object]]] = {
    "": {},
    "kind weights": {"search.kind_weights": OLD_KIND_WEIGHTS},
    "importance": {"search.importance_step": 0.15},
    "kind weights and importance": {
        "search.kind_weights": OLD_KIND_WEIGHTS,
        "search.importance_step": 0.15,
    },
    "no status weights": _NO_STATUS,
    "no freshness": {"search.freshness_max_loss": 0.0},
}


def present_sets() -> list[str]:
    """Return the names of the sets whose memories and queries are on disk."""
    return [
        name
        for name, folder in SETS.items()
        if (folder / "queries.jsonl").exists() and (folder / "memories.jsonl").exists()
    ]


def _mode_works(mode: str) -> bool:
    """Tell whether engram ranks in this mode here (the semantic ones need their model)."""
    from engram.index import semantic

    _, _, model = mode.partition("-")
    return mode == "keyword" or semantic.available(model or semantic.DEFAULT_MODEL)


def collect_rankings(
    names: Sequence[str], modes: Sequence[str], settings: dict[str, object] | None = None
) -> dict[str, dict[str, list[fit.Ranked]]]:
    """Return, by set and mode, engram's unfloored top 10 of every query with its features."""
    out: dict[str, dict[str, list[fit.Ranked]]] = {}
    with scratch_home() as scratch:
        for name in names:
            folder = SETS[name]
            queries = load_queries(folder / "queries.jsonl")
            out[name] = {}
            for mode in modes:
                if not _mode_works(mode) or (settings and "-" in mode):
                    continue  # the multiplier variants are scored with the default model only
                wanted = {"search.min_relevance": 0.0, **(settings or {})}
                with engram_store(scratch, folder / "memories.jsonl", mode, wanted) as engram:
                    out[name][mode] = _ranked(engram, queries)
    return out


@contextlib.contextmanager
def scratch_home() -> Iterator[Path]:
    """Yield a scratch folder for the sets' stores, with ENGRAM_HOME in it, the author set and
    no daemon; removed afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix="engram-retrieval-"))
    os.environ["ENGRAM_HOME"] = str(scratch / "home" / ".engram")
    os.environ.setdefault("ENGRAM_AUTHOR", "Bench Author")
    os.environ.setdefault("ENGRAM_DAEMON", "off")
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _ranked(engram: Engram, queries: Sequence[Query]) -> list[fit.Ranked]:
    """Return engram's top 10 of every query with its features."""
    return [
        fit.Ranked(
            query.kind,
            query.relevant,
            tuple((hit.id, hit.features) for hit in engram.recall(query.text, limit=LIMIT)),
        )
        for query in queries
    ]


# The fusion settings compared under --held-out (issue 30): (search.semantic_weight,
# search.semantic_floor) per hybrid mode, i.e. per embedding model. The floors of wordllama's
# grid sit at the 90.2, 94.5, 96.9, 98.2 and 99.0% quantiles of the cosines of every query with
# every memory of the four sets; MiniLM's floors are its cosines at the same quantiles (its
# distribution, not its results: ``--cosines``; docs/decisions.md, "Fusion, held out").
FUSION_WEIGHTS: Final = (0.3, 0.4, 0.5, 0.6, 0.7)
FUSION_FLOORS: Final = {
    "hybrid": (0.25, 0.3, 0.35, 0.4, 0.45),
    "hybrid-minilm": (0.27, 0.32, 0.37, 0.42, 0.47),
}


def fusion_label(weight: float, floor: float) -> str:
    """Return the rankings' label of one fusion setting."""
    return f"fusion {weight}/{floor}"


def cosine_quantiles(names: Sequence[str]) -> str:
    """Return each hybrid mode's cosines of every query with every memory of ``names`` (their
    quantiles, for pairs that answer and pairs that do not), and the floors of every other
    model at the quantiles where wordllama's ``FUSION_FLOORS`` sit: how the grids were read."""
    import numpy as np

    pooled: dict[str, list[float]] = {}
    lines = ["cosine p10 / p25 / p50 / p75 / p90 / p99 of every query with every memory"]
    scratch = Path(tempfile.mkdtemp(prefix="engram-retrieval-"))
    os.environ["ENGRAM_HOME"] = str(scratch / "home" / ".engram")
    os.environ.setdefault("ENGRAM_AUTHOR", "Bench Author")
    os.environ.setdefault("ENGRAM_DAEMON", "off")
    try:
        for mode in FUSION_FLOORS:
            if not _mode_works(mode):
                lines.append(f"{mode}: not available")
                continue
            answers: list[float] = []
            others: list[float] = []
            for name in names:
                folder = SETS[name]
                wanted: dict[str, object] = {"search.min_relevance": 0.0}
                with engram_store(scratch, folder / "memories.jsonl", mode, wanted) as engram:
                    engram.recall("warm up the index and the model")
                    index = engram.here.ws.index
                    count = index.counts()["indexed"]
                    for query in load_queries(folder / "queries.jsonl"):
                        for rid, cosine in index.similar(query.text, limit=count, min_cosine=-1.0):
                            (answers if rid in query.relevant else others).append(cosine)
            pooled[mode] = answers + others
            for label, values in (("answer", answers), ("do not answer", others)):
                cells = " / ".join(
                    format(float(np.quantile(values, share)), ".3f")
                    for share in (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
                )
                lines.append(f"{mode}, {len(values)} pairs that {label}: {cells}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if "hybrid" in pooled:
        base = np.asarray(pooled["hybrid"])
        for floor in FUSION_FLOORS["hybrid"]:
            share = float((base < floor).mean())
            cells = ", ".join(
                f"{mode} {float(np.quantile(values, share)):.3f}"
                for mode, values in pooled.items()
                if mode != "hybrid"
            )
            lines.append(f"wordllama floor {floor}: quantile {share:.1%}; {cells}")
    return "\n".join(lines)


def fusion_grid(mode: str) -> list[tuple[float, float]]:
    """Return the (semantic_weight, semantic_floor) settings compared for a hybrid mode."""
    return [(weight, floor) for weight in FUSION_WEIGHTS for floor in FUSION_FLOORS[mode]]


def collect_fusion(
    names: Sequence[str], mode: str, points: Sequence[tuple[float, float]]
) -> dict[str, dict[str, dict[str, list[fit.Ranked]]]]:
    """Return, by fusion label and set, ``mode``'s unfloored rankings at each setting.

    One store per set: each setting is written to its config.yaml and the store opened
    again, so the memories are embedded once per set (vectors are kept by text hash) and
    each query once per process (``semantic.embed_query``'s cache).
    """
    out: dict[str, dict[str, dict[str, list[fit.Ranked]]]] = {
        fusion_label(*point): {} for point in points
    }
    if not _mode_works(mode):
        return out
    with scratch_home() as scratch:
        for name in names:
            folder = SETS[name]
            queries = load_queries(folder / "queries.jsonl")
            wanted: dict[str, object] = {"search.min_relevance": 0.0}
            with engram_store(scratch, folder / "memories.jsonl", mode, wanted) as engram:
                root = engram.here.root
                engram.recall("warm up the index and the model")  # embeds the memories
            for weight, floor in points:
                engram_dir = root / config_mod.ENGRAM_DIR
                config_mod.set_value(engram_dir, "search.semantic_weight", weight)
                config_mod.set_value(engram_dir, "search.semantic_floor", floor)
                with Engram(root) as engram:
                    ranked = _ranked(engram, queries)
                out[fusion_label(weight, floor)][name] = {mode: ranked}
    return out


HELD_OUT_COLUMNS: Final = ("R@1", "R@5", "R@10", "MRR", "para MRR", "lost", "neg empty")


def figures_of(
    answers: Sequence[list[str]], queries: Sequence[Query], unfloored: Sequence[list[str]] | None
) -> dict[str, float]:
    """Return the held-out table's figures of one backend's ranked ids, query by query."""
    answerable = [(q, a) for q, a in zip(queries, answers, strict=True) if q.kind != "negative"]
    paraphrase = [(q, a) for q, a in answerable if q.kind == "paraphrase"]
    negatives = [a for q, a in zip(queries, answers, strict=True) if q.kind == "negative"]
    out = {
        f"R@{k}": statistics.fmean(
            len(q.relevant & set(a[:k])) / len(q.relevant) for q, a in answerable
        )
        for k in (1, 5, 10)
    }
    out["MRR"] = statistics.fmean(_rr(q, a) for q, a in answerable)
    out["para MRR"] = statistics.fmean(_rr(q, a) for q, a in paraphrase) if paraphrase else math.nan
    lost = 0
    if unfloored is not None:
        for query, kept, before in zip(queries, answers, unfloored, strict=True):
            if (
                query.kind != "negative"
                and query.relevant & set(before)
                and not query.relevant & set(kept)
            ):
                lost += 1
    out["lost"] = float(lost)
    out["answerable"] = float(len(answerable))
    out["neg empty"] = float(sum(1 for a in negatives if not a))
    out["negatives"] = float(len(negatives))
    return out


def kind_figures(answers: Sequence[list[str]], queries: Sequence[Query]) -> dict[str, list[float]]:
    """Return, per query kind, recall@1/5/10 and MRR of ranked ids, query by query."""
    out: dict[str, list[float]] = {}
    for kind in QUERY_KINDS:
        picked = [(q, a) for q, a in zip(queries, answers, strict=True) if q.kind == kind]
        if picked:
            out[kind] = [
                *(
                    statistics.fmean(
                        len(q.relevant & set(a[:k])) / len(q.relevant) for q, a in picked
                    )
                    for k in (1, 5, 10)
                ),
                statistics.fmean(_rr(q, a) for q, a in picked),
            ]
    return out


def _merit(rankings: Sequence[fit.Ranked], queries: Sequence[Query]) -> float:
    """Return the mean of MRR and recall@5 of unfloored rankings (how variants are chosen)."""
    row = figures_of([[rid for rid, _ in r.hits] for r in rankings], queries, None)
    return (row["MRR"] + row["R@5"]) / 2


def _rr(query: Query, ids: Sequence[str]) -> float:
    for rank, rid in enumerate(ids[:LIMIT], start=1):
        if rid in query.relevant:
            return 1.0 / rank
    return 0.0


def held_out(
    names: Sequence[str], modes: Sequence[str], saved: Path | None = None
) -> tuple[str, dict[str, object]]:
    """Score every set with every parameter fitted on the other sets only; return the report.

    ``saved``: a file of engram's rankings with their features; read when it exists (to try a
    fit or a floor without ranking again), else written after ranking.
    """
    queries = {name: load_queries(SETS[name] / "queries.jsonl") for name in names}
    rankings: Rankings = _load_rankings(saved) if saved is not None and saved.exists() else {}
    missing = [label for label in VARIANTS if label not in rankings]
    for label in missing:
        rankings[label] = collect_rankings(names, modes, VARIANTS[label])
    fusion_modes = [mode for mode in FUSION_FLOORS if mode in modes and _mode_works(mode)]
    for mode in fusion_modes:
        points = [
            point
            for point in fusion_grid(mode)
            if any(
                mode not in rankings.get(fusion_label(*point), {}).get(name, {}) for name in names
            )
        ]
        if points:
            missing.append(mode)
            for label, got in collect_fusion(names, mode, points).items():
                for name, ranked in got.items():
                    rankings.setdefault(label, {}).setdefault(name, {}).update(ranked)
    if saved is not None and missing:
        _save_rankings(saved, rankings)
    fusion = _held_out_fusion(names, fusion_modes, rankings, queries)
    everything, rankings = rankings, {label: rankings[label] for label in VARIANTS}
    table: dict[str, dict[str, dict[str, float]]] = {}  # set -> backend -> figures
    kinds: dict[str, dict[str, dict[str, list[float]]]] = {}  # set -> backend -> kind -> figures
    chosen: dict[str, dict[str, dict[str, Any]]] = {}
    for name in names:
        rows: dict[str, dict[str, float]] = {}
        search = bm25_baseline(SETS[name] / "memories.jsonl")
        baseline = [[rid for rid, _ in search(q.text)] for q in queries[name]]
        rows["bm25 (fts5)"] = figures_of(baseline, queries[name], None)
        kinds[name] = {"bm25 (fts5)": kind_figures(baseline, queries[name])}
        others = [other for other in names if other != name]
        for label, by_set in rankings.items():
            suffix = f" ({label})" if label else ""
            for mode in modes:
                if mode not in by_set[name]:
                    continue
                training = [by_set[other][mode] for other in others if mode in by_set[other]]
                model = fit.fit(training)
                floor = fit.choose_floor(training, model)
                plain = [[rid for rid, _ in r.hits] for r in by_set[name][mode]]
                kept = [fit.floored(r, model, floor) for r in by_set[name][mode]]
                rows[f"engram {mode}{suffix}"] = figures_of(kept, queries[name], plain)
                rows[f"engram {mode}{suffix} (no floor)"] = figures_of(plain, queries[name], None)
                if not label:
                    chosen.setdefault(name, {})[mode] = {"model": model, "floor": floor}
                    kinds[name][f"engram {mode}"] = kind_figures(kept, queries[name])
        for mode in modes:
            if "-" in mode:
                continue

            # The multipliers chosen on the other sets alone: the variant with the best mean
            # of MRR and recall@5 there, unfloored, scored here with a floor fitted there.
            def merit(label: str, mode: str = mode, others: list[str] = others) -> float:
                by_set = rankings[label]
                return statistics.fmean(
                    _merit(by_set[other][mode], queries[other])
                    for other in others
                    if mode in by_set[other]
                )

            if any(mode not in rankings[label][name] for label in rankings):
                continue
            label = max(rankings, key=merit)
            by_set = rankings[label]
            training = [by_set[other][mode] for other in others if mode in by_set[other]]
            model = fit.fit(training)
            floor = fit.choose_floor(training, model)
            plain = [[rid for rid, _ in r.hits] for r in by_set[name][mode]]
            kept = [fit.floored(r, model, floor) for r in by_set[name][mode]]
            rows[f"engram {mode} (multipliers chosen on the others)"] = figures_of(
                kept, queries[name], plain
            )
            chosen.setdefault(name, {})[f"{mode} multipliers"] = {
                "variant": label or "all kept",
                "floor": floor,
            }
        for mode, (row, picked) in fusion.get(name, {}).items():
            rows[f"engram {mode} (fusion chosen on the others)"] = row
            chosen.setdefault(name, {})[f"{mode} fusion"] = picked
        table[name] = rows
    lines = [
        "leave one set out: for each set, the relevance model and its floor are fitted on the"
        " other sets only (benchmarks/retrieval/fit.py); nothing is chosen on the set reported."
    ]
    header = ("set", "backend", *HELD_OUT_COLUMNS)
    body: list[Sequence[str]] = [header]
    for name, rows in table.items():
        for backend, row in rows.items():
            body.append((name, backend, *_cells(row)))
    backends = list(next(iter(table.values())))
    for backend in backends:
        present = [rows[backend] for rows in table.values() if backend in rows]
        worst = {
            key: (max if key == "lost" else min)(
                (
                    row[key] / row["answerable"]
                    if key == "lost"
                    else row[key] / row["negatives"]
                    if key == "neg empty"
                    else row[key]
                )
                for row in present
            )
            for key in HELD_OUT_COLUMNS
        }
        body.append(("worst set", backend, *_cells(worst, shares=True)))
    lines.append(align(body, left=(0, 1)))
    lines.append(
        "lost = answerable queries whose relevant memory the floor dropped from the unfloored top"
        " 10; neg empty = negative queries answered with nothing (worst set: as shares)."
    )
    for name, by_mode in chosen.items():
        for mode, picked in by_mode.items():
            variant = f" ({picked['variant']})" if "variant" in picked else ""
            if "setting" in picked:
                weight, floor = picked["setting"]
                variant = f" (semantic_weight {weight}, semantic_floor {floor})"
            lines.append(f"{name}, {mode}{variant}: floor {picked['floor']} fitted on the others")
    for mode in fusion_modes:
        weight, floor = _best_fusion(mode, names, everything, queries)
        lines.append(
            f"all sets, {mode} fusion: semantic_weight {weight}, semantic_floor {floor} has the"
            " best mean of MRR and R@5 (unfloored) over every set"
        )
    lines.append(
        "\nPer query kind (engram: the default multipliers, floor fitted on the other sets):"
    )
    per_kind: list[Sequence[str]] = [("set", "backend", "kind", "R@1", "R@5", "R@10", "MRR")]
    for name, by_backend in kinds.items():
        for backend, by_kind in by_backend.items():
            for kind, values in by_kind.items():
                per_kind.append((name, backend, kind, *(format(v, ".3f") for v in values)))
    lines.append(align(per_kind, left=(0, 1, 2)))
    return "\n".join(lines), {"table": table, "kinds": kinds, "chosen": chosen}


Rankings = dict[str, dict[str, dict[str, list[fit.Ranked]]]]  # variant -> set -> mode -> queries


def _best_fusion(
    mode: str, sets: Sequence[str], rankings: Rankings, queries: Mapping[str, Sequence[Query]]
) -> tuple[float, float]:
    """Return the fusion setting of ``mode`` whose mean over ``sets`` of the mean of MRR and
    recall@5, unfloored (``_merit``), is the best; the first of the grid on a tie."""

    def merit(point: tuple[float, float]) -> float:
        by_set = rankings[fusion_label(*point)]
        return statistics.fmean(_merit(by_set[name][mode], queries[name]) for name in sets)

    return max(fusion_grid(mode), key=merit)


def _held_out_fusion(
    names: Sequence[str],
    modes: Sequence[str],
    rankings: Rankings,
    queries: Mapping[str, Sequence[Query]],
) -> dict[str, dict[str, tuple[dict[str, float], dict[str, Any]]]]:
    """Return, by set and hybrid mode, the held-out figures of the fusion setting chosen on the
    other sets (as the multipliers are: ``_best_fusion``), with a relevance model and floor
    fitted on the other sets' rankings at that setting, and what was chosen."""
    out: dict[str, dict[str, tuple[dict[str, float], dict[str, Any]]]] = {}
    for name in names:
        others = [other for other in names if other != name]
        for mode in modes:
            point = _best_fusion(mode, others, rankings, queries)
            by_set = rankings[fusion_label(*point)]
            training = [by_set[other][mode] for other in others]
            model = fit.fit(training)
            floor = fit.choose_floor(training, model)
            plain = [[rid for rid, _ in r.hits] for r in by_set[name][mode]]
            kept = [fit.floored(r, model, floor) for r in by_set[name][mode]]
            out.setdefault(name, {})[mode] = (
                figures_of(kept, queries[name], plain),
                {"setting": point, "floor": floor},
            )
    return out


def _save_rankings(path: Path, rankings: Rankings) -> None:
    plain = {
        label: {
            name: {
                mode: [[r.kind, sorted(r.relevant), [list(hit) for hit in r.hits]] for r in ranked]
                for mode, ranked in by_mode.items()
            }
            for name, by_mode in by_set.items()
        }
        for label, by_set in rankings.items()
    }
    path.write_text(json.dumps(plain), encoding="utf-8")


def _load_rankings(path: Path) -> Rankings:
    plain = json.loads(path.read_text(encoding="utf-8"))
    return {
        label: {
            name: {
                mode: [
                    fit.Ranked(kind, frozenset(relevant), tuple((rid, tuple(v)) for rid, v in hits))
                    for kind, relevant, hits in ranked
                ]
                for mode, ranked in by_mode.items()
            }
            for name, by_mode in by_set.items()
        }
        for label, by_set in plain.items()
    }


def _cells(row: Mapping[str, float], *, shares: bool = False) -> list[str]:
    cells = [format(row[key], ".3f") for key in ("R@1", "R@5", "R@10", "MRR", "para MRR")]
    if shares:
        cells += [format(row["lost"], ".1%"), format(row["neg empty"], ".0%")]
    else:
        cells += [
            f"{row['lost']:.0f}/{row['answerable']:.0f}",
            f"{row['neg empty']:.0f}/{row['negatives']:.0f}",
        ]
    return cells


def main(argv: Sequence[str] | None = None) -> int:
    """Run every backend over each set and print a table per set."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--mode",
        type=parse_modes,
        action="extend",
        help="engram search modes to score: keyword, semantic, hybrid (repeat or comma-separate;"
        " default all three)",
    )
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        choices=sorted(SETS),
        help="the labelled sets to score (repeat; default every set that is present)",
    )
    parser.add_argument(
        "--backend",
        dest="backends",
        action="append",
        choices=BACKENDS,
        help="engram's full-text backends to score (repeat; default both)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds over the queries")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument(
        "--misses",
        type=int,
        metavar="K",
        help="also list, per backend, the answerable queries with no relevant memory in the top K",
    )
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="leave one set out: fit the relevance model and floor on the other sets, report on"
        " each, then the worst set",
    )
    parser.add_argument(
        "--rankings",
        type=Path,
        help="with --held-out: read engram's rankings from this file if it exists (no ranking"
        " again), else write them there",
    )
    parser.add_argument(
        "--cosines",
        action="store_true",
        help="print each embedding model's cosine quantiles on the sets and the semantic floors"
        " at the quantiles of wordllama's grid (how --held-out's fusion grids were read)",
    )
    args = parser.parse_args(argv)
    if args.cosines:
        print(cosine_quantiles(args.sets or present_sets()))
        return 0
    if args.held_out:
        report, payload = held_out(
            args.sets or present_sets(), list(dict.fromkeys(args.mode or MODES)), args.rankings
        )
        print(report)
        if args.json:
            args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        return 0
    modes: list[str] = list(dict.fromkeys(args.mode or MODES))
    backends: list[str] = list(dict.fromkeys(args.backends or BACKENDS))
    names = args.sets or present_sets()
    payloads: dict[str, object] = {}
    for name in names:
        report, payload = run_set(name, SETS[name], modes, backends, args.rounds)
        print(report + "\n")
        results = payload.pop("results")
        queries = payload.pop("queries_list")
        assert isinstance(results, list) and isinstance(queries, list)
        if args.misses:
            for result in results:
                if not result.unavailable:
                    lines = misses(result, queries, args.misses)
                    print(
                        f"{name}, {result.name}: {len(lines)} queries with nothing relevant in the"
                        f" top {args.misses}"
                    )
                    print("\n".join(lines))
            print()
        payloads[name] = payload
    print(
        "R@k = share of a query's relevant memories in its top k; MRR over the top 10; "
        "top p50/p90 = the best hit's score\n(bm25: raw weighted bm25; engram: after its "
        "multipliers); any hit = share of queries with at least one hit; lost = answerable\n"
        "queries whose relevant memory the score floor (search.min_relevance) dropped from "
        "the top 10."
    )
    if args.json:
        args.json.write_text(json.dumps(payloads, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
