"""Validate the retrieval evaluation sets: memories.jsonl and queries.jsonl of each set.

Four sets: ``harbor`` (this folder; hand-written memories about one fictional codebase),
``adr`` (``adr/``; real public ADRs turned into memories by engram's ADR indexer, see
adr/build.py), ``agentlog`` (``agentlog/``; memories an agent would save after real work on two
public projects, one ``project`` each) and ``captured`` (``captured/``; conversational turns as
``capture`` and ``prompt`` save them, titled by their first words). Run
``python benchmarks/retrieval/check_data.py`` to check them all, or name one set (or a folder,
checked with harbor's rules); it prints the counts and every problem found, and exits 1 when
there is any. It checks that every memory line parses with
``engram.model.parse_line`` and is canonical (sorted by id, the bytes ``canonical_line`` writes),
that ids are 26 lowercase base32 characters, kinds and statuses are engram's, the text fields are
filled (tags too, except in ``captured``, where a turn may have none; there a title must be the
content's opening words), links and ``supersedes`` point at memories that exist (a hand-written
superseded memory is named by a later one; an ADR may be deprecated without a successor), that a
memory's project is its set's (``agentlog`` holds two), and that every query has
a known kind, a unique id, and relevant ids that exist and are live (not deleted, not archived;
none for a negative query). An ADR memory's id must be the one the indexer derives from its
path, so the labels survive a rebuild. The ADR set's memories.jsonl is built, not committed (the
ADRs are other projects' text): when it is missing, its queries are checked on their own and a
note says how to build it. It reads only; it never rewrites the files.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from engram.errors import CorruptStore, InvalidInput
from engram.indexer.plan import adr_id
from engram.model import KINDS, STATUSES, canonical_line, is_tombstone, parse_line, parse_time

HERE: Final = Path(__file__).resolve().parent
QUERY_KINDS: Final = ("keyword", "paraphrase", "question", "negative")
# The aim of the set (issue 9): at least this many of each query kind, and this many memories.
MIN_QUERIES: Final = {"keyword": 35, "paraphrase": 40, "question": 40, "negative": 20}
MEMORY_RANGE: Final = (150, 300)
_ID: Final = re.compile(r"^[a-z2-7]{26}$")


@dataclass(frozen=True)
class DataSet:
    """One labelled set: its folder and what its memories and queries must satisfy."""

    name: str
    folder: Path
    project: str | tuple[str, ...]  # the project every memory names, or one of these
    memory_range: tuple[int, int]
    min_queries: Mapping[str, int]
    from_adrs: bool = False  # made by engram's ADR indexer (adr/build.py), not by hand
    needs_tags: bool = True  # every memory has at least one tag
    titles_open_content: bool = False  # a title is the content's first words (captured turns)

    @property
    def projects(self) -> tuple[str, ...]:
        """Return the project names a memory of this set may carry."""
        return (self.project,) if isinstance(self.project, str) else self.project


SETS: Final = (
    DataSet("harbor", HERE, "harbor", MEMORY_RANGE, MIN_QUERIES),
    # The aim of the ADR set (issue 16): 80-150 real ADRs, and this many queries of each kind.
    DataSet(
        "adr",
        HERE / "adr",
        "adr-set",
        (80, 150),
        {"keyword": 40, "paraphrase": 40, "question": 40, "negative": 30},
        from_adrs=True,
    ),
    # Issue 30: sets of other shapes, never used to choose a ranking parameter.
    DataSet(
        "agentlog",
        HERE / "agentlog",
        ("sqlite-utils", "click"),
        (140, 200),
        {"keyword": 35, "paraphrase": 45, "question": 30, "negative": 20},
    ),
    DataSet(
        "captured",
        HERE / "captured",
        "starlette",
        (130, 180),
        {"keyword": 25, "paraphrase": 35, "question": 25, "negative": 15},
        needs_tags=False,
        titles_open_content=True,
    ),
)
HARBOR: Final = SETS[0]


def _opens(title: object, content: object) -> bool:
    """Tell whether ``title`` is the first words of ``content`` (a trailing "…" allowed)."""
    words = str(title or "").removesuffix("…").split()
    return bool(words) and str(content or "").split()[: len(words)] == words


def check_memories(
    path: Path, dataset: DataSet = HARBOR
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Return the memories by id and the problems found in ``path``."""
    problems: list[str] = []
    records: dict[str, dict[str, Any]] = {}
    previous = ""
    for lineno, line in enumerate(path.read_bytes().splitlines(keepends=True), start=1):
        where = f"{path.name}:{lineno}"
        try:
            record = parse_line(line, path=path.name, lineno=lineno)
        except CorruptStore as exc:
            problems.append(str(exc))
            continue
        rid = record["id"]
        if canonical_line(record) != line:
            problems.append(f"{where}: not canonical (rewrite with engram.model.canonical_line)")
        if rid in records:
            problems.append(f"{where}: duplicate id {rid}")
        if rid <= previous:
            problems.append(f"{where}: ids not sorted ({rid} after {previous})")
        previous = rid
        if not _ID.match(rid):
            problems.append(f"{where}: id {rid!r} is not 26 lowercase base32 characters")
        if record.get("kind") not in KINDS:
            problems.append(f"{where}: kind {record.get('kind')!r} is not one of engram's")
        if record.get("status") not in STATUSES:
            problems.append(f"{where}: status {record.get('status')!r} is not one of engram's")
        if record.get("scope") != "project" or record.get("project") not in dataset.projects:
            names = " or ".join(dataset.projects)
            problems.append(f"{where}: expected scope project, project {names}")
        if dataset.from_adrs:
            source = str(record.get("source", ""))
            if not source.startswith("adr:") or rid != adr_id(source.removeprefix("adr:")):
                problems.append(f"{where}: id {rid} is not the indexer's id for {source!r}")
        for field in ("title", "content"):
            if not str(record.get(field) or "").strip():
                problems.append(f"{where}: empty {field}")
        if not isinstance(record.get("importance"), int) or not 1 <= record["importance"] <= 5:
            problems.append(f"{where}: importance must be 1-5")
        if dataset.needs_tags and not record.get("tags"):
            problems.append(f"{where}: no tags")
        if dataset.titles_open_content and not _opens(record.get("title"), record.get("content")):
            problems.append(f"{where}: the title is not the content's opening words")
        try:
            if parse_time(record["updated_at"]) < parse_time(record["created_at"]):
                problems.append(f"{where}: updated_at before created_at")
        except (InvalidInput, KeyError, TypeError, AttributeError) as exc:
            problems.append(f"{where}: bad time: {exc}")
        records[rid] = record
    superseded_by: Counter[str] = Counter()
    for rid, record in records.items():
        for link in record.get("links") or []:
            target = link.get("to")
            if target not in records:
                problems.append(f"memory {rid}: link {link.get('rel')} to unknown id {target}")
            elif link.get("rel") == "supersedes":
                superseded_by[target] += 1
                if records[target]["created_at"] >= record["created_at"]:
                    problems.append(f"memory {rid} supersedes the later memory {target}")
    for rid, record in records.items():
        # An ADR can be deprecated without a successor ("Deprecated (no superseding ADR)").
        orphan = record.get("status") == "superseded" and not superseded_by[rid]
        if orphan and not dataset.from_adrs:
            problems.append(f"memory {rid} is superseded but no memory supersedes it")
        if superseded_by[rid] and record.get("status") != "superseded":
            problems.append(f"memory {rid} is superseded by a link but has status active")
    low, high = dataset.memory_range
    if not low <= len(records) <= high:
        problems.append(f"{len(records)} memories; the set should hold {low}-{high}")
    return records, problems


def check_queries(
    path: Path,
    memories: dict[str, dict[str, Any]] | None,
    min_queries: Mapping[str, int] = MIN_QUERIES,
) -> tuple[Counter[str], list[str]]:
    """Return the query count per kind and the problems found in ``path``.

    ``memories`` None (the set's memories are not built) checks only that relevant ids look
    like ids.
    """
    problems: list[str] = []
    counts: Counter[str] = Counter()
    seen_ids: set[str] = set()
    seen_text: set[str] = set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        where = f"{path.name}:{lineno}"
        try:
            query = json.loads(line)
        except ValueError as exc:
            problems.append(f"{where}: not JSON: {exc}")
            continue
        if not isinstance(query, dict) or set(query) != {"id", "kind", "query", "relevant"}:
            problems.append(f"{where}: expected exactly the keys id, kind, query, relevant")
            continue
        qid, kind, text, relevant = query["id"], query["kind"], query["query"], query["relevant"]
        if qid in seen_ids:
            problems.append(f"{where}: duplicate query id {qid}")
        seen_ids.add(qid)
        if kind not in QUERY_KINDS:
            problems.append(f"{where}: kind {kind!r} is not one of {', '.join(QUERY_KINDS)}")
        if not isinstance(text, str) or not text.strip():
            problems.append(f"{where}: empty query")
        elif text.strip().lower() in seen_text:
            problems.append(f"{where}: the same query text appears twice")
        else:
            seen_text.add(text.strip().lower())
        if not isinstance(relevant, list):
            problems.append(f"{where}: relevant must be a list")
            continue
        if kind == "negative" and relevant:
            problems.append(f"{where}: a negative query lists relevant memories")
        if kind != "negative" and not relevant:
            problems.append(f"{where}: a {kind} query lists no relevant memory")
        if len(set(relevant)) != len(relevant):
            problems.append(f"{where}: relevant ids repeat")
        for rid in relevant:
            if memories is None:
                if not isinstance(rid, str) or not _ID.match(rid):
                    problems.append(f"{where}: relevant id {rid!r} is not a memory id")
            elif rid not in memories:
                problems.append(f"{where}: unknown memory id {rid}")
            elif is_tombstone(memories[rid]) or memories[rid].get("status") == "archived":
                problems.append(f"{where}: relevant memory {rid} is deleted or archived")
        counts[kind] += 1
    for kind, least in min_queries.items():
        if counts[kind] < least:
            problems.append(f"only {counts[kind]} {kind} queries; aim for at least {least}")
    return counts, problems


def _shown(path: Path) -> str:
    """Return a path relative to the repository when it is inside it."""
    root = HERE.parent.parent
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def check_set(dataset: DataSet) -> list[str]:
    """Check one set's two files, print its counts, and return the problems found."""
    memories_path = dataset.folder / "memories.jsonl"
    memories: dict[str, dict[str, Any]] | None = None
    problems: list[str] = []
    if memories_path.exists() or not dataset.from_adrs:
        memories, problems = check_memories(memories_path, dataset)
        kinds = Counter(record["kind"] for record in memories.values())
        statuses = Counter(record["status"] for record in memories.values())
        print(f"{len(memories)} memories: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
        print("statuses: " + ", ".join(f"{k} {n}" for k, n in statuses.most_common()))
    else:
        print(f"memories.jsonl not built: run python {_shown(dataset.folder / 'build.py')} --help")
    counts, query_problems = check_queries(
        dataset.folder / "queries.jsonl", memories, dataset.min_queries
    )
    problems += query_problems
    print(f"{sum(counts.values())} queries: " + ", ".join(f"{k} {counts[k]}" for k in QUERY_KINDS))
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Check every set (or the one named), print counts and problems, return the exit status."""
    by_name = {dataset.name: dataset for dataset in SETS}
    if not argv:
        chosen = list(SETS)
    elif argv[0] in by_name:
        chosen = [by_name[argv[0]]]
    else:  # a folder, checked with harbor's rules
        chosen = [DataSet("harbor", Path(argv[0]), "harbor", MEMORY_RANGE, MIN_QUERIES)]
    problems: list[str] = []
    for dataset in chosen:
        if len(chosen) > 1:
            print(f"== {dataset.name} ({_shown(dataset.folder)})")
        found = check_set(dataset)
        problems += [
            f"{dataset.name}: {problem}" if len(chosen) > 1 else problem for problem in found
        ]
    for problem in problems:
        print(f"problem: {problem}")
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
