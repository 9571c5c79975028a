"""Hostile input lines: what refusing one costs, as a ratio to parsing a valid line of that size.

Every line of memories.jsonl, every chunk record and every daemon, HTTP or MCP request goes
through ``engram.model.parse_line`` / ``loads`` or the depth scan ``json_depth_exceeded``
before anything else sees it. A scan that is not linear lets one line hold every command
hostage (issue 28: a 64 KB line of escaped quotes took 12 to 55 s, 1 MB about an hour).

For each hostile shape of ``--kib`` KiB (default 1024) this prints the median time to refuse
it through ``parse_line`` (what every read of memories.jsonl does) and through the bare depth
scan (what the daemon, HTTP and MCP servers run first), each as a ratio to the baseline: a
plain ``json.loads`` of a valid line of the same size (a memory whose content is that many
bytes of ordinary prose), measured in the same run, interleaved. Target for the attacker's
line through ``parse_line``: at most 2x. Figures only; nothing here asserts on time.

    .venv/bin/python benchmarks/bench_input.py [--kib 1024] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable

from engram.errors import CorruptStore
from engram.model import MAX_JSON_DEPTH, json_depth_exceeded, parse_line

_OVER = MAX_JSON_DEPTH + 6


def shapes(size: int) -> dict[str, bytes]:
    """Return the hostile lines, each about ``size`` bytes."""
    half = size // 2
    return {
        # The attacker's line: a string left open, every quote in it escaped, then brackets.
        "escaped quotes, string left open": b'"' + b'\\"' * half + b"[" * _OVER,
        # The same string closed, then nested too deep: refused for depth, with an offset.
        "escaped quotes, then too deep": b'"' + b'\\"' * half + b'"' + b"[" * _OVER,
        # Backslash pairs: an escape that is not a quote, so the quotes are real.
        "backslash pairs, string left open": b'"' + b"\\\\" * half + b"[" * _OVER,
        # Many shallow containers, then too deep: every bracket counts, none nests far.
        "empty lists, then too deep": b"[]" * half + b"[" * _OVER,
        # Many short strings holding brackets, then too deep.
        "short strings of brackets": b'["[[",' * (size // 6) + b"[" * _OVER,
        # Deep nesting everywhere, exactly at the limit, repeated: the most scan passes.
        "nested to the limit, repeated": (
            (b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH + b",") * (size // 129)
        )[:-1]
        + b"[" * _OVER,
    }


def valid_line(size: int) -> bytes:
    """Return a valid memory line with ``size`` bytes of ordinary text as its content."""
    words = b"the index is rebuilt from the canonical file whenever it changes. "
    content = (words * (size // len(words) + 1))[:size].decode()
    record = {"id": "baseline", "kind": "note", "title": "valid", "content": content}
    return json.dumps(record, separators=(",", ":")).encode()


def _median_ms(
    work: Callable[[], object], baseline: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """Return the median ms of ``work`` and of ``baseline``, run interleaved."""
    measured: list[float] = []
    base: list[float] = []
    for round_ in range(repeat):
        order = [(work, measured), (baseline, base)]
        for call, into in order if round_ % 2 == 0 else reversed(order):
            start = time.perf_counter()
            call()
            into.append((time.perf_counter() - start) * 1000)
    return statistics.median(measured), statistics.median(base)


def _refuse(line: bytes) -> Callable[[], object]:
    def run() -> object:
        try:
            parse_line(line, path="memories.jsonl", lineno=2)
        except CorruptStore as exc:
            return exc.message
        raise SystemExit(f"not refused: {line[:40]!r}")

    return run


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kib", type=int, default=1024, help="size of each line in KiB")
    parser.add_argument("--repeat", type=int, default=7, help="interleaved runs per figure")
    args = parser.parse_args()
    size = args.kib * 1024
    valid = valid_line(size)
    baseline = lambda: json.loads(valid)  # noqa: E731
    load = os.getloadavg()[0]
    print(f"hostile lines of {args.kib} KiB; baseline: json.loads of a valid {len(valid):,}-byte")
    print(f"memory line (ordinary prose); load average {load:.2f}; medians of {args.repeat}")
    print()
    print(f"{'shape':36} {'parse_line ms':>13} {'ratio':>7} {'scan ms':>9} {'ratio':>7}")
    for name, line in shapes(size).items():
        refused, base = _median_ms(_refuse(line), baseline, args.repeat)
        scanned, base2 = _median_ms(lambda line=line: json_depth_exceeded(line), baseline, 3)
        print(
            f"{name:36} {refused:13.1f} {refused / base:6.1f}x {scanned:9.1f} "
            f"{scanned / base2:6.1f}x"
        )
    # The attacker's line against its valid twin: the same escaped quotes, the string closed.
    hostile = shapes(size)["escaped quotes, string left open"]
    twin = b'"' + b'\\"' * (size // 2) + b'"'
    refused, base_twin = _median_ms(_refuse(hostile), lambda: json.loads(twin), args.repeat)
    print()
    print(f"x plain parse: baseline median {base:.2f} ms (prose line).")
    print(
        f"escaped quotes, string left open, via parse_line: {refused:.1f} ms = "
        f"{refused / base:.1f}x a plain parse of the prose line, {refused / base_twin:.1f}x "
        f"json.loads of its valid twin (the string closed: {base_twin:.1f} ms). Target: at most 2x."
    )


if __name__ == "__main__":
    main()
