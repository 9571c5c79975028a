"""Sync benchmarks of engram: the merge driver, importing chunks, a sync with nothing to do.

Run ``python benchmarks/bench_sync.py [--quick] [--size 100000]``. Like ``bench_core.py`` (whose
synthetic stores and table this reuses), every figure is paired with a baseline measured in the
same run, the two sides interleaved (alternating which goes first), and the table reports the
ratio of their medians next to both medians.

1. ``engram.sync.gitmerge.merge_driver(O, A, B, P)`` on real files: a base store and two sides
   with ``size / 100`` changes each (1,000 on 100k: mostly edits of existing memories, some
   additions, a few tombstones; a fifth of the ids changed on both sides, half of those in the
   same text field, so field-level merges and conflicts happen), vs reading the three files and
   ``engram.model.parse_line`` over every line of them (aim <= 2). ``A`` is copied fresh before
   each run (the driver overwrites it), untimed. The reference merge (every record parsed,
   ``merge3``, every record serialised: what the driver did before its fast path) is reported
   against the same baseline.
2. the same as a process: ``python -m engram merge-driver O A B P`` (what git runs) vs
   ``python -c "import typer, engram.model"`` plus the same parse (aim <= 2).
3. ``Engram.sync()`` with nothing to import or export on the store, vs ``Engram.recall(q)``
   (reported), and ``engram -C STORE sync`` as a process vs ``engram -C STORE recall WORDS``
   (reported: the issue asks it be near start-up time).
4. ``Engram.sync()`` importing ``size / 10`` new memories (10k on 100k) from another clone's
   chunks (10 chunks, written with ``engram.sync.chunks.write_chunk``, untimed) into the open
   store, vs ``Engram.import_`` of an export document holding as many other new memories
   (reported). Both add to the same store, so it grows by ``size / 5`` a round.

Scratch stores go under ``benchmarks/.data/`` (gitignored) and are removed unless ``--keep``.
This file must not assert on wall-clock times, and is not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (  # a sibling script
    Corpus,
    Figure,
    build_store,
    paired,
    process_env,
    remove_scratch,
    render,
    run_header,
    say,
)

from engram.model import Record, canonical_line, format_time, parse_line
from engram.service import Engram
from engram.sync import gitmerge
from engram.sync.chunks import write_chunk

HERE: Final = Path(__file__).resolve().parent
DEFAULT_DATA: Final = HERE / ".data"
SEED: Final = 20240611
MEMORIES: Final = ".engram/memories.jsonl"
CHUNKS_PER_IMPORT: Final = 10
OTHER_CLONE: Final = "Other Clone"
LEGEND: Final = """\
ratio = median engram / median baseline; pairs p25-p75 = quartiles of the per-pair ratios.
baselines (same run, interleaved):
  merge driver   read base, ours and theirs and engram.model.parse_line every line (the least
                 any merge of the three files must do); reference = parse all + merge3 + dump all
  process        python -c "import typer, engram.model" + the same parse, as a new process
  sync (no-op)   Engram.recall(q) on the same open store / `engram recall WORDS` as a process
  sync (import)  Engram.import_ of an export document with as many other new memories"""


def row(
    name: str, size: int, ours: Sequence[float], base: Sequence[float], target: float | None
) -> Figure:
    """Return one table row from paired samples."""
    return Figure.from_samples(name, size, ours, base, target=target)


# --- the two sides of a merge ---------------------------------------------------------------------


def read_records(path: Path) -> list[Record]:
    """Return the records of a canonical memories.jsonl (orjson: the file is engram's own)."""
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def write_records(path: Path, records: Sequence[Record]) -> None:
    """Write records as canonical memories.jsonl, sorted by id."""
    ordered = sorted(records, key=lambda r: r["id"])
    path.write_bytes(b"".join(canonical_line(record) for record in ordered))


def edit(record: Record, corpus: Corpus, field: str, when: str) -> Record:
    """Return a new version of a memory with one field changed."""
    fields = corpus.fields()
    changed = {**record, "rev": int(record["rev"]) + 1, "updated_at": when}
    if field == "tags":
        changed["tags"] = sorted(set(record.get("tags", [])) ^ {fields["tags"][0]}) or ["misc"]
    elif field == "importance":
        changed["importance"] = 1 + int(record.get("importance", 3)) % 5
    else:
        changed[field] = fields[field]
    return changed


def make_sides(base: list[Record], changes: int, seed: int) -> tuple[list[Record], list[Record]]:
    """Return (ours, theirs): ``changes`` changes each on the base, a fifth on the same ids.

    Of each side's changes about 85% are edits of existing memories, 10% additions and 5%
    tombstones. The shared ids are edited in the same text field on both sides for half of them
    (a conflict: the losing text is kept) and in different fields for the other half.
    """
    rng = random.Random(seed)
    shared_count = changes // 5
    picked = rng.sample(range(len(base)), 2 * changes)
    shared = picked[:shared_count]
    only = {
        "ours": picked[shared_count:changes],
        "theirs": picked[changes : 2 * changes - shared_count],
    }
    sides: list[list[Record]] = []
    for number, side in enumerate(("ours", "theirs")):
        corpus = Corpus(seed + 10 + number)
        when = format_time(corpus.now + timedelta(days=1 + number))
        by_id = {record["id"]: record for record in base}
        for position, index in enumerate(shared):
            record = base[index]
            # even: the same text field on both sides (a conflict); odd: different fields
            field = ("title" if side == "ours" else "tags") if position % 2 else "content"
            by_id[record["id"]] = edit(record, corpus, field, when)
        for index in only[side]:
            record = base[index]
            roll = rng.random()
            if roll < 0.10:
                new = corpus.record()
                by_id[new["id"]] = new
            elif roll < 0.15:
                by_id[record["id"]] = {
                    **record,
                    "rev": int(record["rev"]) + 1,
                    "updated_at": when,
                    "deleted_at": when,
                }
            else:
                field = rng.choice(("content", "title", "tags", "importance"))
                by_id[record["id"]] = edit(record, corpus, field, when)
        sides.append(list(by_id.values()))
    return sides[0], sides[1]


def parse_files(*paths: Path) -> int:
    """The merge baseline: read each file and parse every line; return how many."""
    count = 0
    for path in paths:
        name = str(path)
        for lineno, line in enumerate(path.read_bytes().splitlines(), start=1):
            if line.strip():
                parse_line(line, path=name, lineno=lineno)
                count += 1
    return count


PARSE_SCRIPT: Final = """\
import sys, typer
from engram.model import parse_line
for name in sys.argv[1:]:
    with open(name, "rb") as handle:
        for n, line in enumerate(handle.read().splitlines(), start=1):
            if line.strip():
                parse_line(line, path=name, lineno=n)
"""


def merge_figures(
    data: Path, jsonl: Path, size: int, seed: int, rounds: int, processes: int
) -> list[Figure]:
    """Figures 1 and 2: the merge driver in-process and as a process, vs parsing the files."""
    changes = max(10, size // 100)
    folder = data / "merge"
    folder.mkdir()
    base_path, ours_path, theirs_path = folder / "O", folder / "ours", folder / "B"
    work = folder / "A"
    shutil.copyfile(jsonl, base_path)
    base = read_records(base_path)
    ours, theirs = make_sides(base, changes, seed + 4)
    write_records(ours_path, ours)
    write_records(theirs_path, theirs)

    def fresh(_: int) -> None:
        shutil.copyfile(ours_path, work)

    def drive(_: int) -> None:
        code = gitmerge.merge_driver(base_path, work, theirs_path, MEMORIES)
        if code != 0:
            raise SystemExit(f"the merge driver failed ({code})")

    def parse(_: int) -> None:
        parse_files(base_path, ours_path, theirs_path)

    fresh(0)
    drive(0)  # warm the page cache and the imports, and check it merges
    merged = read_records(work)
    conflicts = sum(1 for record in merged if record.get("conflicts"))
    say(
        f"merge: {changes:,} changes a side, {len(merged):,} memories merged, "
        f"{conflicts:,} with conflicts; driver x{rounds} vs parsing the three files"
    )
    rows = []
    ours_ms, base_ms = paired(drive, parse, rounds, prepare_measured=fresh)
    rows.append(row(f"merge driver ({changes:,} changes a side)", size, ours_ms, base_ms, 2.0))

    def reference(_: int) -> None:
        gitmerge._merge_memories_full(
            base_path.read_bytes(), ours_path.read_bytes(), theirs_path.read_bytes(), MEMORIES
        )

    say("merge: the reference merge (parse all, merge3, dump all) vs parsing")
    ref_rounds = max(2, rounds // 3)
    ours_ms, base_ms = paired(reference, parse, ref_rounds)
    rows.append(row("reference merge (parse+merge3+dump)", size, ours_ms, base_ms, None))

    env = process_env(data / "pycache")
    command = [sys.executable, "-m", "engram", "merge-driver"]
    command += [str(base_path), str(work), str(theirs_path), MEMORIES]
    baseline = [sys.executable, "-c", PARSE_SCRIPT, str(base_path), str(ours_path)]
    baseline.append(str(theirs_path))

    def drive_process(_: int) -> None:
        subprocess.run(command, env=env, check=True, capture_output=True)

    def parse_process(_: int) -> None:
        subprocess.run(baseline, env=env, check=True, capture_output=True)

    fresh(0)
    drive_process(0)  # fills the bytecode cache
    parse_process(0)
    say(f"merge: engram merge-driver process x{processes}")
    ours_ms, base_ms = paired(drive_process, parse_process, processes, prepare_measured=fresh)
    rows.append(row("merge-driver process", size, ours_ms, base_ms, 2.0))
    shutil.rmtree(folder, ignore_errors=True)
    return rows


# --- sync -------------------------------------------------------------------------------------


def new_records(corpus: Corpus, count: int) -> list[Record]:
    """Return ``count`` new memories from another clone."""
    return [corpus.record() for _ in range(count)]


def sync_figures(
    data: Path, root: Path, size: int, seed: int, rounds: int, imports: int, processes: int
) -> list[Figure]:
    """Figures 3 and 4: a sync with nothing to do, and one importing chunks."""
    rows: list[Figure] = []
    queries = Corpus(seed + 1).queries(50)
    engram_dir = root / ".engram"
    count = max(CHUNKS_PER_IMPORT, size // 10)
    with Engram.open(root) as engram:
        say(f"sync: indexing the {size:,}-memory store")
        engram.reindex()
        engram.sync()  # the first sync makes the clone's state
        for query in queries[:5]:
            engram.recall(query)

        def recall(number: int) -> None:
            engram.recall(queries[number % len(queries)], limit=10)

        def sync(_: int) -> None:
            engram.sync()

        say(f"sync: nothing to do x{rounds} vs recall")
        ours, base = paired(sync, recall, rounds)
        rows.append(row("sync, nothing to do (in-process)", size, ours, base, None))

        env = process_env(data / "pycache")
        command = [sys.executable, "-m", "engram", "-C", str(root)]

        def cli_sync(_: int) -> None:
            subprocess.run([*command, "sync"], env=env, check=True, capture_output=True)

        def cli_recall(number: int) -> None:
            words = queries[number % len(queries)]
            subprocess.run([*command, "recall", words], env=env, check=True, capture_output=True)

        cli_sync(0)  # fills the bytecode cache
        cli_recall(0)
        say(f"sync: engram sync process x{processes} vs engram recall process")
        ours, base = paired(cli_sync, cli_recall, processes)
        rows.append(row("sync process, nothing to do", size, ours, base, None))

        corpus = Corpus(seed + 20)
        per_chunk = count // CHUNKS_PER_IMPORT

        def write_chunks(_: int) -> None:
            engram.sync()  # exports what the last import_ journalled, untimed
            when = format_time(corpus.now)
            for _chunk in range(CHUNKS_PER_IMPORT):
                records = new_records(corpus, per_chunk)
                write_chunk(engram_dir, records, created_by=OTHER_CLONE, created_at=when)

        document: dict[str, Any] = {}

        def make_document(_: int) -> None:
            document.clear()
            document["memories"] = new_records(corpus, count)  # engram's export format

        def import_chunks(_: int) -> None:
            report = engram.sync()
            if report.imported.added != count:
                imported = report.imported.to_dict()
                raise SystemExit(f"sync imported {imported}, expected {count} added")

        def import_document(_: int) -> None:
            engram.import_(document)

        say(f"sync: importing {count:,} memories in {CHUNKS_PER_IMPORT} chunks x{imports}")
        ours, base = paired(
            import_chunks,
            import_document,
            imports,
            prepare_measured=write_chunks,
            prepare_baseline=make_document,
        )
        rows.append(row(f"sync importing {count:,} (chunks)", size, ours, base, None))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Build the store, run every figure and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories in the store")
    parser.add_argument("--quick", action="store_true", help="a 10k store, fewer repeats")
    parser.add_argument("--seed", type=int, default=SEED, help="corpus seed")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="scratch parent")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder afterwards")
    args = parser.parse_args(argv)
    size = 10_000 if args.quick and args.size == 100_000 else args.size
    rounds, processes, imports = (10, 4, 2) if args.quick else (10, 6, 3)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="sync-", dir=args.data_dir))
    os.environ["ENGRAM_HOME"] = str(data / "home" / ".engram")
    os.environ["ENGRAM_AUTHOR"] = "Bench Author"
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    rows: list[Figure] = []
    try:
        root = data / f"store-{size}"
        say(f"building a {size:,}-memory store")
        jsonl = build_store(root, size, args.seed)
        rows += merge_figures(data, jsonl, size, args.seed, rounds, processes)
        rows += sync_figures(data, root, size, args.seed, rounds, imports, processes)
    finally:
        remove_scratch(data, args.data_dir, keep=args.keep)
    print(run_header("sync", quick=args.quick, started=started, load_before=load_before))
    print(render(rows))
    print(LEGEND)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
