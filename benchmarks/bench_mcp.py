"""MCP server benchmarks of engram, each figure a ratio against a baseline measured in the same run.

Run ``python benchmarks/bench_mcp.py [--quick] [--size 10000] [--rss-size 100000]``. Like
``bench_core.py`` (whose synthetic stores this reuses), every figure is paired with a baseline
that does the irreducible part of the same job, measured and baseline runs are interleaved, and
the table reports the ratio of their medians next to the absolute medians.

1. ``recall`` round trip through a real stdio session (the SDK's client, an ``engram mcp``
   process) p50, vs the same recall through the facade in-process (``Engram.recall``, the
   limit the tool asks for), on a 10k store (target <= 2);
2. server start-up to the first answered ``tools/list`` (spawn, imports, the initialize
   handshake, on raw pipes as an agent speaks), and the server's exit after SIGINT and after
   end of input (timed after a tool call: the SDK serving, the store open), each vs a
   ``python -c pass`` process, spawn to exit (reported; the aims are about 300 ms and 100 ms;
   ``--only-start`` runs these alone);
3. peak RSS (``VmHWM`` in /proc/PID/status) of the server process after it served recalls, stats
   and a get on a 100k store, vs a bare ``python -c "import mcp"`` process (reported);
4. tokens per recall hit, from the answers of figure 1 (reported; the aim is about 100);
5. a ``ping`` round trip in the same session vs the same facade recall (reported): the SDK's
   own floor for any request, which figure 1 cannot go below;
6. ``remember`` round trip p50 through a stdio session whose server has searched once (the
   model loaded: every save is embedded and checked for near-duplicates, as in a working
   session) vs one atomic rewrite of the same memories.jsonl (``bench_core.floor_rewrite``),
   interleaved, on 1k and 10k stores (``--remember-sizes``; target <= 2).

Scratch stores go under ``benchmarks/.data/`` (gitignored) and are removed unless ``--keep``.
This file must not assert on wall-clock times, and is not part of the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (  # a sibling script, not a package
    Corpus,
    align,
    build_store,
    floor_rewrite,
    remove_scratch,
    run_header,
    say,
)

from engram.mcp_server import RECALL_LIMIT
from engram.service import Engram

HERE: Final = Path(__file__).resolve().parent
DEFAULT_DATA: Final = HERE / ".data"
SEED: Final = 20240611
RSS_PROBE: Final = (
    "import mcp, re; "
    "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"
)


@dataclass
class Figure:
    """One row of the table: medians of the paired samples, their ratio and the target."""

    name: str
    size: int
    unit: str
    ours: float
    base: float
    runs: int
    target: float | None = None

    @classmethod
    def of(
        cls,
        name: str,
        size: int,
        unit: str,
        ours: Sequence[float],
        base: Sequence[float],
        target: float | None = None,
    ) -> Figure:
        """Summarise paired samples by their medians."""
        return cls(
            name, size, unit, statistics.median(ours), statistics.median(base), len(ours), target
        )

    @property
    def ratio(self) -> float:
        return self.ours / self.base if self.base else float("inf")

    def verdict(self) -> str:
        """Return PASS or FAIL against the target, or ``info`` when there is none."""
        if self.target is None:
            return "info"
        return "PASS" if self.ratio <= self.target else "FAIL"


def render(rows: Sequence[Figure]) -> str:
    """Return the result table as aligned plain text."""
    header = ("figure", "size", "engram", "baseline", "ratio", "target", "result", "runs")
    lines = [header]
    for row in rows:
        lines.append(
            (
                row.name,
                f"{row.size // 1000}k" if row.size % 1000 == 0 else str(row.size),
                f"{row.ours:.2f} {row.unit}",
                f"{row.base:.2f} {row.unit}",
                f"{row.ratio:.2f}",
                "-" if row.target is None else f"<= {row.target:g}",
                row.verdict(),
                str(row.runs),
            )
        )
    return align(lines)


LEGEND: Final = """\
ratio = median engram / median baseline (figures 1-3 interleave the two sides).
baselines (same run):
  recall round trip  Engram.recall(q, limit=6) in-process on the same store, same queries
  ping round trip    the same facade recall: what the SDK's stdio round trip alone costs
  remember           one atomic rewrite of memories.jsonl: read, temp copy in its folder, fsync,
                     rename (the floor of any save that keeps the file canonical)
  start-up, exits    python -c "pass", spawn to exit (a warm bytecode cache); start-up is spawn
                     to the first tools/list answer, the exits from SIGINT or closed stdin
                     to the process's end, after a tool call
  peak RSS           VmHWM of python -c "import mcp"
  tokens per hit     ceil(chars / 4) of one compact hit; the baseline column is the aim (100)"""


def server_env(pycache: Path) -> dict[str, str]:
    """Return what a spawned process gets on top of the SDK's default environment.

    As in bench_core: a private bytecode cache even where PYTHONDONTWRITEBYTECODE is set, since
    an installed engram has its .pyc files; the personal store and author stay in the run.
    """
    return {
        "PYTHONPYCACHEPREFIX": str(pycache),
        "ENGRAM_HOME": os.environ["ENGRAM_HOME"],
        "ENGRAM_AUTHOR": os.environ["ENGRAM_AUTHOR"],
    }


@asynccontextmanager
async def session(root: Path, env: dict[str, str], errlog: IO[str]) -> AsyncIterator[ClientSession]:
    """Start ``engram -C ROOT mcp`` and yield an initialised client session to it."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engram", "-C", str(root), "mcp"], env=env
    )
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write, read_timeout_seconds=300) as client,
    ):
        await client.initialize()
        yield client


def prepare(root: Path, size: int, seed: int) -> None:
    """Build a synthetic store and its index, so that no figure pays for indexing."""
    say(f"building a {size:,}-memory store")
    build_store(root, size, seed)
    started = time.monotonic()
    with Engram.open(root) as engram:
        engram.reindex()
        engram.recall("warm up the index")
    say(f"indexed in {time.monotonic() - started:.0f} s")


async def recall_figures(
    root: Path, size: int, queries: Sequence[str], rounds: int, env: dict[str, str], log: IO[str]
) -> list[Figure]:
    """Time recall through a stdio session against the facade in-process, interleaved."""
    ours: list[float] = []
    base: list[float] = []
    pings: list[float] = []
    hit_tokens: list[int] = []
    with Engram.open(root) as engram:
        async with session(root, env, log) as client:
            for query in queries[:5]:  # warm both sides: caches, the full-text searcher
                await client.call_tool("recall", {"query": query})
                engram.recall(query, limit=RECALL_LIMIT + 1)
            for number in range(rounds * len(queries)):
                query = queries[number % len(queries)]
                sides = ("mcp", "facade", "ping") if number % 2 == 0 else ("ping", "facade", "mcp")
                for side in sides:
                    start = time.perf_counter()
                    if side == "ping":
                        await client.send_ping()
                        pings.append((time.perf_counter() - start) * 1000)
                    elif side == "mcp":
                        result = await client.call_tool("recall", {"query": query})
                        elapsed = time.perf_counter() - start
                        assert not result.is_error, result
                        text = result.content[0].text  # type: ignore[union-attr]
                        hit_tokens += [
                            -(-len(json.dumps(hit, ensure_ascii=False, separators=(",", ":"))) // 4)
                            for hit in json.loads(text)["hits"]
                        ]
                        ours.append(elapsed * 1000)
                    else:
                        engram.recall(query, limit=RECALL_LIMIT + 1)
                        base.append((time.perf_counter() - start) * 1000)
    return [
        Figure.of("recall round trip p50 (stdio)", size, "ms", ours, base, target=2.0),
        Figure.of("ping round trip p50 (SDK floor)", size, "ms", pings, base),
        Figure.of(
            "tokens per recall hit (mean)", size, "tok", [statistics.mean(hit_tokens)], [100.0]
        ),
    ]


async def remember_figure(
    root: Path, size: int, count: int, seed: int, env: dict[str, str], log: IO[str]
) -> Figure:
    """Time ``remember`` through a stdio session against one rewrite of the file, interleaved."""
    jsonl = root / ".engram" / "memories.jsonl"
    writer = Corpus(seed + 2)
    payloads = [writer.fields() for _ in range(count + 1)]
    ours: list[float] = []
    base: list[float] = []
    async with session(root, env, log) as client:
        # A server that has searched holds the model: its saves embed and report near-duplicates.
        await client.call_tool("recall", {"query": "warm up the model"})
        # The first write checks the whole file once (untimed, as in bench_core).
        first = await client.call_tool("remember", payloads[-1])
        assert not first.is_error, first
        floor_rewrite(jsonl)
        for number in range(count):
            for side in ("mcp", "floor") if number % 2 == 0 else ("floor", "mcp"):
                start = time.perf_counter()
                if side == "mcp":
                    result = await client.call_tool("remember", payloads[number])
                    elapsed = time.perf_counter() - start
                    assert not result.is_error, result
                    ours.append(elapsed * 1000)
                else:
                    floor_rewrite(jsonl)
                    base.append((time.perf_counter() - start) * 1000)
    (jsonl.parent / "floor.jsonl").unlink(missing_ok=True)
    return Figure.of("remember round trip p50 (stdio)", size, "ms", ours, base, target=2.0)


def _raw_server(root: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``engram -C ROOT mcp`` on plain pipes, as an agent does (no client library)."""
    return subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(root), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=get_default_environment() | env,
    )


def _ask(proc: subprocess.Popen[bytes], message: dict[str, object]) -> dict[str, object]:
    """Send one request on the raw pipes and return its answer."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        assert line, "the server closed its output"
        answer: dict[str, object] = json.loads(line)
        if answer.get("id") == message.get("id"):
            return answer


HANDSHAKE: Final = (
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
)


def _first_list(root: Path, env: dict[str, str]) -> tuple[float, subprocess.Popen[bytes]]:
    """Return the ms from spawn to the first tools/list answer, and the running server."""
    start = time.perf_counter()
    proc = _raw_server(root, env)
    _ask(proc, HANDSHAKE[0])
    assert proc.stdin is not None
    proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    answer = _ask(proc, HANDSHAKE[1])
    elapsed = (time.perf_counter() - start) * 1000
    assert "result" in answer, answer
    return elapsed, proc


def _pass(env: dict[str, str]) -> float:
    """Return the ms of a ``python -c pass`` process, spawn to exit."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=get_default_environment() | env, check=True)
    return (time.perf_counter() - start) * 1000


def start_exit_figures(root: Path, size: int, runs: int, env: dict[str, str]) -> list[Figure]:
    """Time spawn-to-first-tools/list, SIGINT-to-exit and end-of-input-to-exit of the server.

    Each against a ``python -c pass`` process (spawn to exit), interleaved. The exits are
    timed after a tool call, when the SDK serves the connection and the store is open: the
    slowest state to leave.
    """
    starts: list[float] = []
    sigint: list[float] = []
    eof: list[float] = []
    base: list[float] = []
    for number in range(runs + 1):  # the first round is untimed: it fills the bytecode cache
        for way in ("sigint", "eof"):
            base_ms = _pass(env)
            listed, proc = _first_list(root, env)
            call = {"name": "recall", "arguments": {"query": "warm"}}
            _ask(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
            start = time.perf_counter()
            if way == "sigint":
                proc.send_signal(signal.SIGINT)
            else:
                assert proc.stdin is not None
                proc.stdin.close()
            proc.wait(timeout=60)
            left = (time.perf_counter() - start) * 1000
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
            if number:
                base.append(base_ms)
                starts.append(listed)
                (sigint if way == "sigint" else eof).append(left)
    return [
        Figure.of("start-up to 1st tools/list", size, "ms", starts, base),
        Figure.of("SIGINT to exit", size, "ms", sigint, base),
        Figure.of("end of input to exit", size, "ms", eof, base),
    ]


def _children(parent: int) -> list[int]:
    """Return the ids of the processes whose parent is ``parent``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent:
                out.append(int(entry.name))
    return out


def _peak_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+)", status)
    assert match, f"no VmHWM for process {pid}"
    return int(match.group(1))


async def rss_figure(
    root: Path, size: int, queries: Sequence[str], runs: int, env: dict[str, str], log: IO[str]
) -> Figure:
    """Measure the server's peak RSS after real work on a big store, against ``import mcp``."""
    ours: list[float] = []
    base: list[float] = []
    for _ in range(runs):
        before = set(_children(os.getpid()))
        async with session(root, env, log) as client:
            await client.list_tools()
            for query in queries:
                result = await client.call_tool("recall", {"query": query, "limit": 10})
                assert not result.is_error, result
            hits = json.loads(result.content[0].text)["hits"]  # type: ignore[union-attr]
            if hits:
                await client.call_tool("get", {"id": hits[0]["id"]})
            await client.call_tool("stats", {})
            [pid] = [p for p in _children(os.getpid()) if p not in before]
            ours.append(_peak_kb(pid) / 1024)
        probe = subprocess.run(
            [sys.executable, "-c", RSS_PROBE],
            env=get_default_environment() | env,
            capture_output=True,
            text=True,
            check=True,
        )
        base.append(int(probe.stdout.strip()) / 1024)
    return Figure.of("server peak RSS (VmHWM)", size, "MB", ours, base)


def main(argv: Sequence[str] | None = None) -> int:
    """Build the stores, run every figure and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="store for figures 1, 2, 4")
    parser.add_argument("--rss-size", type=int, default=100_000, help="store for figure 3")
    parser.add_argument(
        "--remember-sizes",
        default="1000,10000",
        help="stores for the remember figure (comma-separated; the --size store is reused)",
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats, a 20k RSS store")
    parser.add_argument("--seed", type=int, default=SEED, help="corpus seed")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="scratch parent")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder afterwards")
    parser.add_argument(
        "--only-start", action="store_true", help="only the start-up and exit figures (2)"
    )
    args = parser.parse_args(argv)
    rss_size = 20_000 if args.quick and args.rss_size == 100_000 else args.rss_size
    rounds, startups, rss_runs = (1, 4, 1) if args.quick else (3, 9, 2)
    remembers = 15 if args.quick else 30
    remember_sizes = [int(part) for part in str(args.remember_sizes).split(",") if part.strip()]
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="mcp-", dir=args.data_dir))
    os.environ["ENGRAM_HOME"] = str(data / "home" / ".engram")
    os.environ["ENGRAM_AUTHOR"] = "Bench Author"
    env = server_env(data / "pycache")
    queries = Corpus(args.seed + 1).queries(40)
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    rows: list[Figure] = []
    try:
        with (data / "server-stderr.log").open("w", encoding="utf-8") as log:
            small = data / f"store-{args.size}"
            prepare(small, args.size, args.seed)
            say("start-up and exit")
            rows += start_exit_figures(small, args.size, startups, env)
            if args.only_start:
                remember_sizes = []
            else:
                say("recall round trips")
                rows += anyio.run(recall_figures, small, args.size, queries, rounds, env, log)
            for size in remember_sizes:
                store = small
                if size != args.size:
                    store = data / f"store-{size}"
                    prepare(store, size, args.seed)
                say(f"remember round trips on {size:,}")
                rows.append(anyio.run(remember_figure, store, size, remembers, args.seed, env, log))
            if not args.only_start:
                big = data / f"store-{rss_size}"
                prepare(big, rss_size, args.seed)
                say("peak RSS")
                rows.append(anyio.run(rss_figure, big, rss_size, queries[:20], rss_runs, env, log))
        errors = (data / "server-stderr.log").read_text(encoding="utf-8").strip()
        if errors:
            say(f"the servers wrote to stderr:\n{errors}")
    finally:
        remove_scratch(data, args.data_dir, keep=args.keep)
    print(run_header("MCP", quick=args.quick, started=started, load_before=load_before))
    print(render(rows))
    print(LEGEND)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
