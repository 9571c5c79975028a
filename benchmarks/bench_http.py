"""HTTP API benchmarks of engram: search over HTTP as ratios to in-process recall, same run.

Run ``python benchmarks/bench_http.py [--quick] [--size 10000] [--seconds 10]``. Like
``bench_core.py`` (whose synthetic stores, figures and table this reuses), nothing here is an
absolute time: each HTTP window is paired with an in-process window on the same store and the
same queries, the two alternate which goes first, and the table shows the ratio of medians.

The server is a real ``python -m engram.http_api`` process (uvicorn) on a free loopback port.

1. throughput: 8 client threads, each with its own keep-alive ``httpx.Client``, send
   ``GET /search?q=…&limit=10`` for the whole window, vs a single-threaded in-process loop of
   ``Engram.recall(q, limit=10)`` for a window as long. Shown as ms per request (1/throughput),
   so the ratio is in-process req/s over HTTP req/s; the req/s are printed under the table;
2. p95 latency of those HTTP requests (8 in flight: queueing behind the server's one-at-a-time
   lock included) vs the p95 of the in-process calls;
3. p95 latency with one HTTP client (no queueing: the protocol's own cost) vs the same in-process
   p95.

``--quick``: 3-second windows on a 2,000-memory store. Scratch stores go under
``benchmarks/.data/`` (gitignored) and are removed unless ``--keep``. This file must not assert on
wall-clock times, and is not part of the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (  # a sibling script
    Corpus,
    Figure,
    build_store,
    process_env,
    remove_scratch,
    render,
    run_header,
    say,
)

from engram.service import Engram

HERE: Final = Path(__file__).resolve().parent
DEFAULT_DATA: Final = HERE / ".data"
SEED: Final = 20240611
LIMIT: Final = 10
CLIENTS: Final = 8
READY_TIMEOUT: Final = 120.0  # seconds for the server to answer /health
STOP_TIMEOUT: Final = 30.0


@dataclass(frozen=True)
class Plan:
    """The store size, window length and rounds of one run."""

    size: int
    seconds: float
    rounds: int  # pairs of windows (HTTP, in-process), alternating which goes first
    queries: int


FULL: Final = Plan(size=10_000, seconds=10.0, rounds=2, queries=60)
QUICK: Final = Plan(size=2_000, seconds=3.0, rounds=1, queries=40)


@dataclass
class Window:
    """What one timed window did: requests done, its length and each request's latency."""

    requests: int
    seconds: float
    latencies_ms: list[float]

    @property
    def ms_per_request(self) -> float:
        return 1000.0 * self.seconds / max(self.requests, 1)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def p95(self) -> float:
        return p95(self.latencies_ms)


def p95(samples: Sequence[float]) -> float:
    """Return the 95th percentile of ``samples`` (inclusive method)."""
    if len(samples) < 2:
        return samples[0] if samples else 0.0
    return statistics.quantiles(samples, n=20, method="inclusive")[18]


def free_port() -> int:
    """Return a TCP port free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def http_server(root: Path, env: dict[str, str], log: Path) -> Iterator[str]:
    """Run ``python -m engram.http_api`` on ``root`` until the block ends; yield its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "engram.http_api", "--port", str(port), "-C", str(root)],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        with httpx.Client(base_url=url, timeout=5.0) as client:
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"the server exited: {log.read_text(errors='replace')}")
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass  # not listening yet: ask again until the deadline
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not answer in {READY_TIMEOUT:g} s")
                time.sleep(0.1)
        yield url
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run_window(
    clients: int, seconds: float, queries: Sequence[str], call: Callable[[int, str], None]
) -> Window:
    """Run ``call(client, query)`` from ``clients`` threads in a loop for ``seconds``."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    start_gate = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def worker(number: int) -> None:
        mine = latencies[number]
        position = number * 7  # clients start at different queries
        start_gate.wait()
        while True:
            begin = time.perf_counter()
            if begin >= stop_at[0]:
                return
            call(number, queries[position % len(queries)])
            mine.append((time.perf_counter() - begin) * 1000.0)
            position += 1

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    stop_at[0] = began + seconds
    start_gate.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    merged = [value for part in latencies for value in part]
    return Window(requests=len(merged), seconds=elapsed, latencies_ms=merged)


def http_window(url: str, clients: int, seconds: float, queries: Sequence[str]) -> Window:
    """Search over HTTP from ``clients`` threads, one keep-alive client each."""
    sessions = [httpx.Client(base_url=url, timeout=60.0) for _ in range(clients)]
    try:
        for session in sessions:  # open the connections before the clock starts
            session.get("/health").raise_for_status()

        def call(client: int, query: str) -> None:
            response = sessions[client].get("/search", params={"q": query, "limit": LIMIT})
            response.raise_for_status()

        return run_window(clients, seconds, queries, call)
    finally:
        for session in sessions:
            session.close()


def inprocess_window(engram: Engram, seconds: float, queries: Sequence[str]) -> Window:
    """Call ``Engram.recall`` in a single-threaded loop."""
    return run_window(1, seconds, queries, lambda _, query: engram.recall(query, limit=LIMIT))


def measure(
    engram: Engram, url: str, queries: Sequence[str], plan: Plan, clients: int
) -> tuple[list[Window], list[Window]]:
    """Return paired windows (HTTP with ``clients`` threads, in-process), alternating order."""
    ours: list[Window] = []
    base: list[Window] = []
    for number in range(plan.rounds):
        steps: list[tuple[Callable[[], Window], list[Window]]] = [
            (lambda: http_window(url, clients, plan.seconds, queries), ours),
            (lambda: inprocess_window(engram, plan.seconds, queries), base),
        ]
        for action, into in steps if number % 2 == 0 else steps[::-1]:
            into.append(action())
    return ours, base


LEGEND: Final = f"""\
ratio = median engram (HTTP) figure / median in-process figure; pairs p25-p75 = quartiles of
the per-window ratios. HTTP: python -m engram.http_api (uvicorn, one process, facade calls one at
a time), clients are threads in this process with keep-alive httpx.Client sessions sending
GET /search?q=WORDS&limit={LIMIT}. In-process: Engram.recall(WORDS, limit={LIMIT}) in a
single-threaded loop on the same store, same queries.
  throughput   ms per request = window length / requests done (1/throughput); the ratio is
               in-process req/s over HTTP req/s
  p95          95th percentile of per-request latency; with {CLIENTS} clients it includes waiting
               for the requests ahead (the server runs one facade call at a time)"""


def main(argv: Sequence[str] | None = None) -> int:
    """Build the store, start the server, run the windows and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 s windows on a 2k store")
    parser.add_argument("--size", type=int, default=None, help="memories in the store")
    parser.add_argument("--seconds", type=float, default=None, help="length of each window")
    parser.add_argument("--seed", type=int, default=SEED, help="corpus seed")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="scratch parent")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder afterwards")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    plan = Plan(
        size=args.size or plan.size,
        seconds=args.seconds or plan.seconds,
        rounds=plan.rounds,
        queries=plan.queries,
    )
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="http-", dir=args.data_dir))
    # Keep the personal store and the user's git identity out of the measurements.
    os.environ["ENGRAM_HOME"] = str(data / "home" / ".engram")
    os.environ["ENGRAM_AUTHOR"] = "Bench Author"
    os.environ.pop("ENGRAM_HTTP_TOKEN", None)
    env = process_env(data / "pycache")
    queries = Corpus(args.seed + 1).queries(plan.queries)
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    size = plan.size
    rows: list[Figure] = []
    rates = ""
    try:
        root = data / f"store-{size}"
        say(f"[{size:,}] writing the synthetic store ...")
        build_store(root, size, args.seed)
        with Engram.open(root) as engram:
            say(f"[{size:,}] building the index ...")
            engram.reindex()
            with http_server(root, env, data / "server.log") as url:
                with httpx.Client(base_url=url, timeout=60.0) as client:
                    for query in queries:  # warm both sides; the same hits either way
                        over_http = client.get("/search", params={"q": query, "limit": LIMIT})
                        in_process = [hit.id for hit in engram.recall(query, limit=LIMIT)]
                        if [hit["id"] for hit in over_http.json()["hits"]] != in_process:
                            say(f"warning: {query!r}: HTTP and in-process hits differ")
                say(
                    f"[{size:,}] {CLIENTS} HTTP clients vs in-process recall: "
                    f"{plan.rounds} x 2 windows of {plan.seconds:g} s ..."
                )
                many, alone = measure(engram, url, queries, plan, CLIENTS)
                say(f"[{size:,}] 1 HTTP client vs in-process recall ...")
                one, alone_too = measure(engram, url, queries, plan, 1)
        rows.append(
            Figure.from_samples(
                f"search throughput, {CLIENTS} clients (ms/request)",
                size,
                [w.ms_per_request for w in many],
                [w.ms_per_request for w in alone],
                target=None,
            )
        )
        rows.append(
            Figure.from_samples(
                f"search p95, {CLIENTS} clients",
                size,
                [w.p95 for w in many],
                [w.p95 for w in alone],
                target=None,
            )
        )
        rows.append(
            Figure.from_samples(
                "search p95, 1 client",
                size,
                [w.p95 for w in one],
                [w.p95 for w in alone_too],
                target=None,
            )
        )
        http_rps = statistics.median(w.rps for w in many)
        local_rps = statistics.median(w.rps for w in alone)
        rates = (
            f"throughput: HTTP {http_rps:.0f} req/s with {CLIENTS} clients "
            f"({sum(w.requests for w in many):,} requests), in-process {local_rps:.0f} req/s "
            f"single-threaded; HTTP / in-process = {http_rps / local_rps:.2f}; "
            f"1 HTTP client {statistics.median(w.rps for w in one):.0f} req/s"
        )
        log = (data / "server.log").read_text(encoding="utf-8", errors="replace").strip()
        if log:
            say(f"the server wrote:\n{log}")
    finally:
        remove_scratch(data, args.data_dir, keep=args.keep)
    print(run_header("HTTP", quick=args.quick, started=started, load_before=load_before))
    print(render(rows))
    print(rates)
    print(LEGEND)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
