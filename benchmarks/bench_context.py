"""Context packer benchmarks of engram: ``context`` as a ratio to a plain ``recall``, same store.

Run ``python benchmarks/bench_context.py [--quick] [--size 100000]``. Like ``bench_core.py``
(whose synthetic stores this reuses), every figure is paired with a baseline measured in the
same run, the two sides interleaved (alternating which goes first), and the table reports the
ratio of their medians next to both medians.

1. ``Engram.context()`` p50 (default budget, 2,000 tokens) vs ``Engram.recall(q)`` p50, on the
   same open store (aim <= 3);
2. ``Engram.context(query=q)`` p50 (adds the query section) vs the same recall (aim <= 3);
3. ``context()`` right after the store changed (its per-state cache of the query-free sections
   dropped: the scans of the records table are paid again) vs the same recall (reported);
4. ``engram context`` as a new process (the session-start hook) vs ``engram recall WORDS`` as
   a new process (reported).

Scratch stores go under ``benchmarks/.data/`` (gitignored) and are removed unless ``--keep``.
This file must not assert on wall-clock times, and is not part of the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (  # a sibling script
    Corpus,
    Figure,
    build_store,
    paired,
    process_env,
    render,
    say,
)

from engram.service import Engram

HERE: Final = Path(__file__).resolve().parent
DEFAULT_DATA: Final = HERE / ".data"
SEED: Final = 20240611
LEGEND: Final = """\
ratio = median engram / median baseline; pairs p25-p75 = quartiles of the per-pair ratios.
baseline (same run, interleaved): Engram.recall(q, limit=10) on the same open store, the same
queries; for the process figure, `engram recall WORDS` as a new process.
cached = the query-free sections are reused while no store file changed (stat signature)."""


def row(
    name: str, size: int, ours: Sequence[float], base: Sequence[float], target: float | None
) -> Figure:
    """Return one table row from paired samples."""
    return Figure.from_samples(name, size, ours, base, target=target)


def main(argv: Sequence[str] | None = None) -> int:
    """Build the store, run every figure and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories in the store")
    parser.add_argument("--quick", action="store_true", help="a 20k store, fewer repeats")
    parser.add_argument("--seed", type=int, default=SEED, help="corpus seed")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="scratch parent")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder afterwards")
    args = parser.parse_args(argv)
    size = 20_000 if args.quick and args.size == 100_000 else args.size
    rounds, uncached_rounds, processes = (40, 6, 3) if args.quick else (100, 15, 6)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="context-", dir=args.data_dir))
    os.environ["ENGRAM_HOME"] = str(data / "home" / ".engram")
    os.environ["ENGRAM_AUTHOR"] = "Bench Author"
    queries = Corpus(args.seed + 1).queries(50)
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    rows: list[Figure] = []
    try:
        root = data / f"store-{size}"
        say(f"building a {size:,}-memory store")
        build_store(root, size, args.seed)
        with Engram.open(root) as engram:
            engram.reindex()
            for query in queries[:5]:  # warm: the full-text searcher, caches
                engram.recall(query)
                engram.context(query=query)

            def recall(number: int) -> None:
                engram.recall(queries[number % len(queries)], limit=10)

            def context(number: int) -> None:
                engram.context()

            def context_query(number: int) -> None:
                engram.context(query=queries[number % len(queries)])

            def drop_cache(number: int) -> None:
                engram._context_cache = None  # what a change of the store file does

            say("context vs recall")
            ours, base = paired(context, recall, rounds)
            rows.append(row("context p50 (cached)", size, ours, base, 3.0))
            ours, base = paired(context_query, recall, rounds)
            rows.append(row("context --query p50 (cached)", size, ours, base, 3.0))
            say("context after a store change")
            ours, base = paired(context, recall, uncached_rounds, prepare_measured=drop_cache)
            rows.append(row("context p50 (store changed)", size, ours, base, None))
        say("new processes")
        env = process_env(data / "pycache")
        command = [sys.executable, "-m", "engram", "-C", str(root)]

        def cli_context(number: int) -> None:
            subprocess.run([*command, "context"], env=env, check=True, capture_output=True)

        def cli_recall(number: int) -> None:
            words = queries[number % len(queries)]
            subprocess.run([*command, "recall", words], env=env, check=True, capture_output=True)

        cli_context(0)  # fills the bytecode cache
        cli_recall(0)
        ours, base = paired(cli_context, cli_recall, processes)
        rows.append(row("engram context process", size, ours, base, None))
    finally:
        if args.keep:
            say(f"kept {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)
            with contextlib.suppress(OSError):
                args.data_dir.rmdir()  # only if nothing else is in it
    print(
        f"engram context benchmarks: {'quick' if args.quick else 'full'} run, "
        f"{time.monotonic() - started:.0f} s, {os.cpu_count()} cpus, python "
        f"{sys.version.split()[0]}, load average {load_before:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at end"
    )
    print(render(rows))
    print(LEGEND)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
