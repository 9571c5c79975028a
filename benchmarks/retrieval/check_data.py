"""Validate the retrieval evaluation set: memories.jsonl and queries.jsonl in this folder.

Run ``python benchmarks/retrieval/check_data.py``; it prints the counts and every problem found,
and exits 1 when there is any. It checks that every memory line parses with
``engram.model.parse_line`` and is canonical (sorted by id, the bytes ``canonical_line`` writes),
that ids are 26 lowercase base32 characters, kinds and statuses are engram's, the text fields are
filled, links and ``supersedes`` point at memories that exist (a superseded memory is named by a
later one), and that every query has a known kind, a unique id, and relevant ids that exist
(none for a negative query). It reads only; it never rewrites the files.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from engram.errors import CorruptStore, InvalidInput
from engram.model import KINDS, STATUSES, canonical_line, parse_line, parse_time

HERE: Final = Path(__file__).resolve().parent
QUERY_KINDS: Final = ("keyword", "paraphrase", "question", "negative")
# The aim of the set (issue 9): at least this many of each query kind, and this many memories.
MIN_QUERIES: Final = {"keyword": 35, "paraphrase": 40, "question": 40, "negative": 20}
MEMORY_RANGE: Final = (150, 300)
_ID: Final = re.compile(r"^[a-z2-7]{26}$")


def check_memories(path: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
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
        if record.get("scope") != "project" or record.get("project") != "harbor":
            problems.append(f"{where}: expected scope project, project harbor")
        for field in ("title", "content"):
            if not str(record.get(field) or "").strip():
                problems.append(f"{where}: empty {field}")
        if not isinstance(record.get("importance"), int) or not 1 <= record["importance"] <= 5:
            problems.append(f"{where}: importance must be 1-5")
        if not record.get("tags"):
            problems.append(f"{where}: no tags")
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
        if record.get("status") == "superseded" and not superseded_by[rid]:
            problems.append(f"memory {rid} is superseded but no memory supersedes it")
        if superseded_by[rid] and record.get("status") != "superseded":
            problems.append(f"memory {rid} is superseded by a link but has status active")
    low, high = MEMORY_RANGE
    if not low <= len(records) <= high:
        problems.append(f"{len(records)} memories; the set should hold {low}-{high}")
    return records, problems


def check_queries(
    path: Path, memories: dict[str, dict[str, Any]]
) -> tuple[Counter[str], list[str]]:
    """Return the query count per kind and the problems found in ``path``."""
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
        problems += [f"{where}: unknown memory id {rid}" for rid in relevant if rid not in memories]
        counts[kind] += 1
    for kind, least in MIN_QUERIES.items():
        if counts[kind] < least:
            problems.append(f"only {counts[kind]} {kind} queries; aim for at least {least}")
    return counts, problems


def main(argv: Sequence[str] | None = None) -> int:
    """Check both files, print counts and problems, return the exit status."""
    folder = Path(argv[0]) if argv else HERE
    memories, problems = check_memories(folder / "memories.jsonl")
    counts, query_problems = check_queries(folder / "queries.jsonl", memories)
    problems += query_problems
    kinds = Counter(record["kind"] for record in memories.values())
    statuses = Counter(record["status"] for record in memories.values())
    print(f"{len(memories)} memories: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    print("statuses: " + ", ".join(f"{k} {n}" for k, n in statuses.most_common()))
    print(f"{sum(counts.values())} queries: " + ", ".join(f"{k} {counts[k]}" for k in QUERY_KINDS))
    for problem in problems:
        print(f"problem: {problem}")
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
