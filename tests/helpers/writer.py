"""Subprocess helper for tests/store/test_concurrency.py: a writer or a reader racing on one store.

    python writer.py ROOT N [--tag TAG] [--barrier FILE] [--print-ids]
    python writer.py ROOT --reader --stop FILE [--barrier FILE] [--pause SECONDS]

A writer opens ``Engram.open(ROOT)`` once and calls ``remember`` N times with distinct titles
and content (N of 0: until killed). With ``--print-ids`` it prints each returned id, flushed,
only after the call returned, so a parent that kills it knows which saves completed.

A reader loops until the stop file appears: ``recall`` with words and without, plus a raw read
of memories.jsonl that must parse without a problem (a torn file would show here). It prints the
number of loops at the end; any exception ends it with a traceback and a non-zero exit.

Both do their slow one-time imports first, then wait for the barrier file, so that every process
starts racing at the same moment. Nothing else is printed.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

from engram.service import Engram
from engram.store import MemoryStore
from engram.store.redact import redact

WORDS = ("lantern", "harbor", "cobalt", "meadow", "quartz", "falcon", "ember", "willow")


def title_of(tag: str, number: int) -> str:
    """Return the title writer ``tag`` gives its entry ``number`` (the tests rebuild it)."""
    return f"{tag} note {number} {WORDS[number % len(WORDS)]}"


def wait_for(path: Path | None, timeout: float = 120.0) -> None:
    """Block until ``path`` exists (the start barrier)."""
    if path is None:
        return
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            sys.exit(f"barrier {path} never appeared")
        time.sleep(0.002)


def write(engram: Engram, count: int, tag: str, print_ids: bool) -> None:
    """Save ``count`` distinct memories (forever when ``count`` is 0)."""
    numbers = itertools.count() if count == 0 else range(count)
    for number in numbers:
        word = WORDS[number % len(WORDS)]
        result = engram.remember(
            title_of(tag, number),
            f"Writer {tag} saved entry {number} about the {word} subsystem.",
            tags=[tag],
        )
        if print_ids:
            sys.stdout.write(result.record["id"] + "\n")
            sys.stdout.flush()


def read(engram: Engram, stop: Path, pause: float) -> None:
    """Recall in a loop until ``stop`` exists; print how many loops ran."""
    store = MemoryStore(engram.project_ws.store.dir)
    loops = 0
    while not stop.exists():
        for hit in engram.recall(WORDS[loops % len(WORDS)], limit=5):
            assert hit.record["title"], hit
        engram.recall("", limit=3)
        scan = store.scan()
        if scan.problems:
            raise AssertionError(f"reader saw a torn file: {scan.problems[0].message}")
        if not scan.canonical:
            raise AssertionError("reader saw a file that is not canonical")
        loops += 1
        time.sleep(pause)
    sys.stdout.write(f"{loops}\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("count", type=int, nargs="?", default=0)
    parser.add_argument("--tag", default="w")
    parser.add_argument("--barrier", type=Path)
    parser.add_argument("--print-ids", action="store_true")
    parser.add_argument("--reader", action="store_true")
    parser.add_argument("--stop", type=Path)
    parser.add_argument("--pause", type=float, default=0.0)
    args = parser.parse_args()
    redact("warm up the secret rules before the race", [])
    with Engram.open(args.root) as engram:
        wait_for(args.barrier)
        if args.reader:
            if args.stop is None:
                parser.error("--reader needs --stop FILE")
            read(engram, args.stop, args.pause)
        else:
            write(engram, args.count, args.tag, args.print_ids)


if __name__ == "__main__":
    main()
