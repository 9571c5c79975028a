"""Entry point of the trainer subprocess: ``python -m engram.trainer --store PATH``.

Prints one protocol event per line on stdout (flushed per line, so the core can show progress)
and nothing else there; errors go to stderr with a non-zero exit status. It reads the store
only; the core that ran it decides what to keep.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engram.errors import EngramError
from engram.trainer.insights import train
from engram.trainer.protocol import Event, encode_event


def _emit(event: Event) -> None:
    sys.stdout.write(encode_event(event) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, train over the store and return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m engram.trainer",
        description="Read an engram store and print insights as JSON Lines.",
    )
    parser.add_argument("--store", required=True, type=Path, help="the .engram/ folder to read")
    parser.add_argument("--min-cluster", type=int, default=3, help="smallest cluster (≥ 2)")
    parser.add_argument("--max-insights", type=int, default=50, help="most insights printed")
    args = parser.parse_args(argv)
    if args.min_cluster < 2 or args.max_insights < 0:
        parser.error("--min-cluster must be at least 2 and --max-insights at least 0")
    try:
        train(args.store, _emit, min_cluster=args.min_cluster, max_insights=args.max_insights)
    except EngramError as exc:
        print(f"engram trainer: {exc.message} ({exc.hint})", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 1  # the reader went away; nobody is left to tell
    return 0


if __name__ == "__main__":
    sys.exit(main())
