"""Daemon benchmarks of engram, each figure a ratio against a baseline measured in the same run.

Run ``python benchmarks/bench_daemon.py [--quick] [--size 10000]``. Like ``bench_core.py``
(whose synthetic stores, pairing and table this reuses), every figure is paired with a baseline,
the two sides are interleaved (alternating which goes first), and the table reports the ratio of
their medians next to the absolute medians in milliseconds.

The daemon is a real ``python -m engram.daemon ROOT SOCKET`` process on a built 10k store, its
socket in the scratch folder (not the store's default path, so the cold CLI never finds it).

1. ``memory_search`` (limit 10) through the socket, one persistent
   ``engram.daemon.protocol.Client``, p50, vs ``Engram.recall(q, limit=10)`` in-process on the same
   store (target <= 1.5);
2. the same call on a fresh connection per request (connect, call, close) vs the same recall
   (reported), and the daemon's own ``dispatch`` of the request in this process (parameter
   checks, the engram-rs-shaped answer, JSON encoding; no socket) vs the same recall (reported):
   what of figure 1's overhead is the method and what is the transport;
3. a new short-lived client process (``python -c``: import engram.daemon.protocol, connect, call) vs
   a cold CLI recall process (``python -m engram -C ROOT recall WORDS``) (reported), and the
   persistent socket call vs the cold CLI recall (target <= 0.1: the daemon should win by a wide
   margin);
4. ``Engram.consolidate_preview()`` on the same store vs one full parse of memories.jsonl
   (``MemoryStore.scan()``) (reported). The store gets planted duplicates and near duplicates.

Scratch stores go under ``benchmarks/.data/`` (gitignored) and are removed unless ``--keep``.
This file must not assert on wall-clock times, and is not part of the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (  # a sibling script, not a package
    Corpus,
    Figure,
    build_store,
    paired,
    process_env,
    remove_scratch,
    render,
    run_header,
    run_quiet,
    say,
)

from engram.daemon.protocol import Client, Request
from engram.daemon.server import dispatch
from engram.model import canonical_line
from engram.service import Engram
from engram.store.jsonl import MemoryStore

HERE: Final = Path(__file__).resolve().parent
DEFAULT_DATA: Final = HERE / ".data"
SEED: Final = 20240611
LIMIT: Final = 10
READY_TIMEOUT: Final = 120.0  # seconds for the daemon to print "ready"
STOP_TIMEOUT: Final = 30.0  # seconds for it to exit after SIGTERM, then SIGKILL
# One package's files are left out of the work tree: memories citing them cite deleted files.
DELETED_PACKAGE: Final = "src/ledger/"
CLIENT_SCRIPT: Final = (
    "import sys; from engram.daemon.protocol import Client; "
    "c = Client(sys.argv[1]); c.call('memory_search', {'query': sys.argv[2], 'limit': 10}); "
    "c.close()"
)


@dataclass(frozen=True)
class Plan:
    """How many repeats each figure gets."""

    queries: int
    rounds: int  # passes over the queries for figures 1 and 2
    processes: int  # pairs of processes for figure 3
    previews: int  # pairs for figure 4
    planted: int  # duplicates and near duplicates added to the store


FULL: Final = Plan(queries=50, rounds=4, processes=10, previews=5, planted=300)
QUICK: Final = Plan(queries=40, rounds=1, processes=4, previews=1, planted=300)


def plant_duplicates(jsonl: Path, count: int, seed: int) -> None:
    """Add ``count`` copies of random memories (every other one slightly edited) to the store.

    Each copy gets a new id; the file stays sorted by id and canonical.
    """
    records = [orjson.loads(line) for line in jsonl.read_bytes().splitlines()]
    rng = random.Random(seed)
    ids = Corpus(seed)
    extra = []
    for number, source in enumerate(rng.sample(records, min(count, len(records)))):
        copy = {**source, "id": ids.new_id()}
        if number % 2:  # a near duplicate: the same memory written again with a remark
            copy["content"] = f"{source['content']} Seen again on {rng.choice(('ci', 'staging'))}."
        extra.append(copy)
    records += extra
    records.sort(key=lambda record: record["id"])
    jsonl.write_bytes(b"".join(canonical_line(record) for record in records))


def write_tree(root: Path, seed: int) -> int:
    """Create the files the memories cite (empty), except DELETED_PACKAGE's; return how many."""
    made = 0
    for name in Corpus(seed).files:
        if "*" in name or name.startswith(DELETED_PACKAGE):
            continue
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        made += 1
    return made


@contextlib.contextmanager
def daemon(root: Path, socket: Path, env: dict[str, str], log: Path) -> Iterator[int]:
    """Run ``python -m engram.daemon ROOT SOCKET`` until the block ends; yield its pid.

    The process is stopped with SIGTERM (SIGKILL after STOP_TIMEOUT) however the block ends.
    """
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "engram.daemon", str(root), str(socket)],
            stdout=subprocess.PIPE,
            stderr=errors,
            env=env,
        )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            if not selector.select(READY_TIMEOUT):
                raise RuntimeError(f"the daemon did not start in {READY_TIMEOUT:g} s")
        line = process.stdout.readline().decode("utf-8", "replace")
        if not line.startswith("ready "):
            process.wait(STOP_TIMEOUT)
            raise RuntimeError(
                f"the daemon exited ({process.returncode}): {line!r} "
                + log.read_text(encoding="utf-8", errors="replace")
            )
        yield process.pid
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()


def rotated(queries: Sequence[str], rounds: int) -> list[str]:
    """Return ``rounds`` passes over ``queries``, odd passes rotated by one.

    paired() alternates which side goes first by the position's parity, so the rotation makes
    each query go first on one side in one pass and on the other side in the next.
    """
    return [
        query
        for number in range(rounds)
        for query in list(queries[number % 2 :]) + list(queries[: number % 2])
    ]


def search(client: Client, query: str) -> Any:
    """Call ``memory_search`` on an open client."""
    return client.call("memory_search", {"query": query, "limit": LIMIT})


def fresh_search(socket: Path, query: str) -> Any:
    """Connect, call ``memory_search`` once and close."""
    with Client(socket) as client:
        return search(client, query)


def socket_figures(
    engram: Engram, socket: Path, queries: Sequence[str], plan: Plan, size: int
) -> list[Figure]:
    """Figures 1 and 2: the socket (persistent, then fresh connections) vs in-process recall."""
    order = rotated(queries, plan.rounds)
    with Client(socket, timeout=60.0) as client:
        for query in queries:  # warm both sides: page cache, searchers, lazily built state
            search(client, query)
            fresh_search(socket, query)
            engram.recall(query, limit=LIMIT)
        # The same hits either way, or the ratio compares different work.
        for query in queries[:5]:
            over_socket = [hit["id"] for hit in search(client, query)["memories"]]
            in_process = [hit.id for hit in engram.recall(query, limit=LIMIT)]
            if over_socket != in_process:
                say(f"warning: {query!r}: socket and in-process hits differ")
        say(f"[{size:,}] socket search vs recall: {len(order)} pairs ...")
        ours, base = paired(
            lambda n: search(client, order[n]),
            lambda n: engram.recall(order[n], limit=LIMIT),
            len(order),
        )
    persistent = Figure.from_samples(
        "memory_search p50 (socket)", size, ours, base, target=1.5, key="socket"
    )
    say(f"[{size:,}] fresh connection per search vs recall: {len(order)} pairs ...")
    ours, base = paired(
        lambda n: fresh_search(socket, order[n]),
        lambda n: engram.recall(order[n], limit=LIMIT),
        len(order),
    )
    fresh = Figure.from_samples(
        "memory_search p50 (new connection)", size, ours, base, target=None, key="fresh"
    )
    say(f"[{size:,}] memory_search handler in-process vs recall: {len(order)} pairs ...")
    ours, base = paired(
        lambda n: dispatch(
            engram, Request(n, "memory_search", {"query": order[n], "limit": LIMIT})
        ),
        lambda n: engram.recall(order[n], limit=LIMIT),
        len(order),
    )
    handler = Figure.from_samples(
        "memory_search handler p50 (no socket)", size, ours, base, target=None, key="handler"
    )
    return [persistent, fresh, handler]


def process_figures(
    root: Path, socket: Path, queries: Sequence[str], plan: Plan, env: dict[str, str], size: int
) -> list[Figure]:
    """Figure 3: a short-lived client process, and the socket call, vs a cold CLI recall."""
    cli = [sys.executable, "-m", "engram", "-C", str(root), "recall"]
    client = [sys.executable, "-c", CLIENT_SCRIPT, str(socket)]
    for _ in range(2):  # fill the bytecode cache, warm the OS page cache
        run_quiet([*cli, queries[0]], env)
        run_quiet([*client, queries[0]], env)
    runs = plan.processes
    say(f"[{size:,}] client process vs cold CLI recall x{runs} ...")
    ours, base = paired(
        lambda n: run_quiet([*client, queries[n % len(queries)]], env),
        lambda n: run_quiet([*cli, queries[n % len(queries)]], env),
        runs,
    )
    rows = [
        Figure.from_samples(
            "client process (socket) vs cold CLI", size, ours, base, target=None, key="process"
        )
    ]
    say(f"[{size:,}] socket search vs cold CLI recall x{runs} ...")
    with Client(socket, timeout=60.0) as open_client:
        search(open_client, queries[0])
        ours, base = paired(
            lambda n: search(open_client, queries[n % len(queries)]),
            lambda n: run_quiet([*cli, queries[n % len(queries)]], env),
            runs,
        )
    rows.append(
        Figure.from_samples(
            "memory_search (socket) vs cold CLI", size, ours, base, target=0.1, key="vs-cli"
        )
    )
    return rows


def preview_figure(engram: Engram, store: MemoryStore, plan: Plan, size: int) -> Figure:
    """Figure 4: consolidate_preview vs one full parse of memories.jsonl."""
    runs = plan.previews
    say(f"[{size:,}] consolidation preview vs a full scan x{runs} ...")
    store.scan()
    ours, base = paired(lambda _: engram.consolidate_preview(), lambda _: store.scan(), runs)
    return Figure.from_samples("consolidate preview", size, ours, base, target=None, key="preview")


LEGEND: Final = """\
ratio = median engram ms / median baseline ms; pairs p25-p75 = quartiles of the ratios of
the interleaved pairs (a wide range means the machine was noisy during that figure).
baselines (same run, interleaved with the engram runs):
  memory_search    Engram.recall(q, limit=10) in-process on the same store, same queries; the
                   socket side is a persistent engram.daemon.protocol.Client, or connect + call +
                   close; "no socket" is engram.daemon.server.dispatch(engram, request) in this
                   process
  client process   python -m engram -C STORE recall WORDS as a new process (the cold CLI), vs
                   python -c "from engram.daemon.protocol import Client; ..." calling memory_search
  socket vs CLI    the persistent socket call vs the same cold CLI recall process
  preview          MemoryStore.scan(): read and parse every line of memories.jsonl once"""


def main(argv: Sequence[str] | None = None) -> int:
    """Build the store, start the daemon, run every figure and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories in the store")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (~half a minute)")
    parser.add_argument("--seed", type=int, default=SEED, help="corpus seed")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="scratch parent")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder afterwards")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    size: int = args.size
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="daemon-", dir=args.data_dir))
    # Keep the personal store and the user's git identity out of the measurements.
    os.environ["ENGRAM_HOME"] = str(data / "home" / ".engram")
    os.environ["ENGRAM_AUTHOR"] = "Bench Author"
    env = process_env(data / "pycache")
    queries = Corpus(args.seed + 1).queries(plan.queries)
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    rows: list[Figure] = []
    note = ""
    try:
        root = data / f"store-{size}"
        say(f"[{size:,}] writing the synthetic store ...")
        jsonl = build_store(root, size, args.seed)
        plant_duplicates(jsonl, plan.planted, args.seed + 3)
        files = write_tree(root, args.seed)
        say(f"[{size:,}] memories.jsonl: {jsonl.stat().st_size / 1e6:.1f} MB, {files} files")
        with Engram.open(root) as engram:
            engram.reindex()
            engram.recall(queries[0], limit=LIMIT)
            socket = data / "engram.sock"
            with daemon(root, socket, env, data / "daemon-stderr.log"):
                rows += socket_figures(engram, socket, queries, plan, size)
                rows += process_figures(root, socket, queries, plan, env, size)
            groups = engram.consolidate_preview()  # warm, and the group counts for the note
            rows.append(preview_figure(engram, MemoryStore(jsonl.parent), plan, size))
        kinds = Counter(group.kind for group in groups)
        note = (
            f"store: {size:,} memories + {plan.planted} planted copies (half edited); "
            f"preview groups: "
            + ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
        )
        errors = (data / "daemon-stderr.log").read_text(encoding="utf-8").strip()
        if errors:
            say(f"the daemon wrote to stderr:\n{errors}")
    finally:
        remove_scratch(data, args.data_dir, keep=args.keep)
    print(run_header("daemon", quick=args.quick, started=started, load_before=load_before))
    print(render(rows))
    print(note)
    print(LEGEND)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
