"""Core benchmarks of engram, each figure a ratio against a baseline measured in the same run.

Run ``python benchmarks/bench_core.py [--sizes 10000,100000] [--quick]`` (``make bench``). The
machine this runs on is shared and noisy, so no figure is an absolute time: every measurement is
paired with a baseline that does the irreducible part of the same job, the two are interleaved
(alternating which goes first), and the table reports the ratio of their medians next to the
absolute medians in milliseconds and the target.

Figures (see benchmarks/README.md for what each baseline stands for):

1. warm ``Engram.recall`` p50 in-process vs a bare Tantivy index of the same docs queried with
   ``parse_query`` over the four text fields (target <= 3), per size, in the default search
   mode (hybrid when the semantic model is installed) and keyword only (a copy of the store);
   the same 50 queries are asked round after round, so a process's per-query state answers
   them: each is also measured on queries the process was never asked, each asked once after
   it answered others (an agent's prompts are new every time);
2. cold ``engram -C DIR recall WORDS`` process vs ``python -c "import typer, tantivy, sqlite3"``
   on the first size (target <= 2);
3. ``Engram.reindex(rebuild=True)`` vs orjson-parsing memories.jsonl and bulk-loading the same
   docs into a bare Tantivy index with one writer and one commit (target <= 2), per size, after
   one untimed first build (which embeds every memory once), then the first recall after it
   (reported, no target);
4. ``Engram.remember`` p50 vs the floor of one atomic rewrite of memories.jsonl (read, temp copy
   in the same folder, fsync, rename) (target <= 2), per size, plus the first recall after those
   remembers (it flushes the queued full-text updates) vs a warm recall (reported, no target).

Stores are synthetic but realistic-looking (about 500 bytes of engineering prose per memory,
varied kinds, tags, files, importance, status and age) and deterministic for a given seed. They
are written straight to ``memories.jsonl`` with ``engram.model.canonical_line``, sorted by id,
under ``benchmarks/.data/`` (gitignored), which is removed afterwards unless ``--keep``.

This file must not assert on wall-clock times, and is not part of the test suite.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import gc
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import orjson
import tantivy

from engram import config as config_mod
from engram.index.backend import DEFAULT_FIELD_WEIGHTS, TEXT_FIELDS
from engram.model import Record, canonical_line, format_time
from engram.service import Engram
from engram.store import init_layout

HERE: Final = Path(__file__).resolve().parent
DEFAULT_DATA: Final = HERE / ".data"
SEED: Final = 20240611
PROJECT: Final = "bench"
# The same writer settings engram's Tantivy backend uses, so that the rebuild baseline differs
# from engram only in what engram adds (records DB, parsing twice, Python per-doc work).
WRITER_HEAP_BYTES: Final = 50_000_000
WRITER_THREADS: Final = 1

# --- a synthetic but realistic-looking corpus -------------------------------------------------


def _phrases(text: str) -> tuple[str, ...]:
    """Split a ``|``-separated word list (kept compact here, one phrase per cell)."""
    return tuple(part.strip() for part in text.split("|") if part.strip())


COMPONENTS: Final = _phrases(
    """
    auth middleware | payment webhook | retry queue | session cache | billing service |
    search indexer | rate limiter | job scheduler | feature flag client | audit log |
    migration runner | api gateway | token refresher | email worker | upload handler |
    graphql resolver | metrics exporter | config loader | health check | connection pool |
    event bus | invoice generator | ledger writer | notification fanout | oauth callback |
    csv importer | pdf renderer | websocket hub | cron trigger | tenant router |
    permission checker | cache warmer | dead letter queue | schema validator | s3 syncer |
    deploy pipeline | canary analyzer | log shipper | trace sampler | secret rotator
"""
)
TECH: Final = _phrases(
    """
    postgres | redis | kafka | sqlite | celery | fastapi | django | react | nginx | docker |
    kubernetes | terraform | grpc | protobuf | pydantic | sqlalchemy | alembic | pytest |
    mypy | tantivy | elasticsearch | rabbitmq | stripe | sentry | prometheus | grafana |
    opentelemetry | asyncio | uvicorn | gunicorn | httpx | boto3 | typescript | webpack |
    vite | graphql | jwt | openssl | systemd | github actions
"""
)
PROBLEMS: Final = _phrases(
    """
    race condition | deadlock | memory leak | timeout | null pointer | off-by-one error |
    stale read | duplicate delivery | lost update | connection reset | clock skew |
    unicode normalization bug | n+1 query | thundering herd | retry storm | slow query |
    lock contention | cache stampede | integer overflow | timezone mismatch | partial write |
    silent truncation | flaky test | oom kill | file descriptor leak | missing index |
    wrong isolation level | unbounded queue | double charge | zombie process
"""
)
VERBS: Final = _phrases(
    """
    drops | retries | serializes | caches | validates | rejects | batches | locks | streams |
    buffers | rewrites | hashes | signs | throttles | replays | compacts | shards | migrates |
    prefetches | invalidates
"""
)
OBJECTS: Final = _phrases(
    """
    the request body | every row | the whole batch | expired tokens | the session id |
    idempotency keys | webhook payloads | the cursor | pending jobs | the tenant header |
    large uploads | the trace context | partial results | the etag | stale entries |
    foreign keys | the retry budget | utf-8 filenames | the config snapshot | audit events
"""
)
CONDITIONS: Final = _phrases(
    """
    the network flaps | two workers race | the cache is cold | a deploy is in flight |
    the clock jumps | the queue backs up | a tenant has no plan | the payload exceeds 1 MiB |
    the replica lags | a migration is half applied | the token expires mid-request |
    the disk is nearly full | the client retries too fast | the feature flag flips
"""
)
REASONS: Final = _phrases(
    """
    it keeps writes idempotent | the ops team already runs it | it halves p99 latency |
    the old path lost updates | it survives a restart | it is easier to test |
    the vendor deprecated the v1 api | it removes a network hop | it keeps the schema honest |
    it fails loudly instead of silently | it bounds memory use | reviews get simpler
"""
)
PATTERNS: Final = _phrases(
    """
    the outbox pattern | optimistic locking | exponential backoff with jitter |
    a circuit breaker | copy-on-write snapshots | a single writer | content hashing |
    a bounded worker pool | two-phase commit | write-ahead logging | a saga | bulkheads
"""
)
ENVS: Final = _phrases(
    """
    staging | production | the ci runners | a laptop | the load test cluster
"""
)
EVENTS: Final = _phrases(
    """
    the 2.3 release | the postgres upgrade | the region failover | a schema migration |
    the black friday load test | the dependency bump | a config rollout | the incident drill
"""
)
ERRORS: Final = _phrases(
    """
    ECONNRESET | HTTP 502 | HTTP 429 | deadlock detected | SSL: CERTIFICATE_VERIFY_FAILED |
    too many open files | serialization failure | KeyError: 'tenant_id' | context deadline |
    OperationalError: database is locked | ValueError: naive datetime | exit code 137
"""
)
TAGS: Final = _phrases(
    """
    auth | billing | payments | search | infra | ci | database | cache | queue | security |
    performance | testing | api | frontend | observability | deploy | migrations |
    concurrency | reliability | config | data-model | webhooks | email | storage |
    networking | logging | tenancy | compliance | dx | docs | ledger | oncall | incident |
    refactor | dependencies | python | typescript | sql | k8s
"""
)
PACKAGES: Final = _phrases(
    """
    api | core | billing | auth | workers | search | ledger | web | infra | shared
"""
)
MODULES: Final = _phrases(
    """
    views | models | tasks | client | handlers | schema | service | cache | utils | routes |
    settings | webhooks | queue | retry | locks | migrations | serializers
"""
)
AUTHORS: Final = _phrases("Ada Lovelace | Grace Hopper | Linus T | Barbara Liskov | Ken Thompson")
# kind (status) and how often it turns up in a working store
KIND_WEIGHTS: Final = _phrases(
    """
    decision 12 | pitfall 12 | bugfix 14 | pattern 8 | architecture 6 | fact 10 |
    discovery 10 | config 6 | principle 3 | preference 3 | insight 5 | session 6 | prompt 1 |
    note 4
"""
)
STATUS_WEIGHTS: Final = _phrases("active 88 | proposed 3 | rejected 2 | superseded 5 | archived 2")

SENTENCES: Final = (
    "The {component} {verb} {obj} when {condition}.",
    "We chose {tech} over {tech2} for the {component} because {reason}.",
    "Root cause: a {problem} in `{file}` that showed up after {event}.",
    "Fix: the {component} now {verb} {obj} and uses {pattern}; see `{file}`.",
    "Watch out: {tech} hits a {problem} under load on {env} when {condition}.",
    "Use {pattern} in the {component}; {reason}.",
    "Measured {number} ms p99 for the {component} on {env} after switching to {tech}.",
    "The error `{error}` in the {component} logs means {obj} was dropped by {tech}.",
    "Do not let the {component} touch {obj} directly: it causes a {problem}.",
    "Tests for the {component} must cover the case where {condition}.",
)
TITLES: Final = (
    "{problem} in {component} when {condition}",
    "Use {pattern} for the {component}",
    "{tech} {verb} {obj} in {component}",
    "Why we chose {tech} over {tech2} for {component}",
    "{component}: {error} after {event}",
    "Fix {problem} in {component}",
    "{component} {verb} {obj}",
)


def _zipf(items: Sequence[str], exponent: float = 0.9) -> tuple[Sequence[str], list[float]]:
    """Return items with cumulative Zipf weights, so some terms are common and most are rare."""
    cumulative: list[float] = []
    total = 0.0
    for rank in range(len(items)):
        total += 1.0 / (rank + 1) ** exponent
        cumulative.append(total)
    return items, cumulative


def _weighted(rng: random.Random, table: Sequence[str]) -> str:
    """Pick a name from ``("name weight", ...)`` in proportion to its weight."""
    names = [cell.split()[0] for cell in table]
    weights = [float(cell.split()[1]) for cell in table]
    return rng.choices(names, weights=weights)[0]


class Corpus:
    """Deterministic generator of memories and queries that look like an engineering store."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.pools = {
            "component": _zipf(COMPONENTS),
            "tech": _zipf(TECH),
            "tech2": _zipf(TECH[::-1]),
            "problem": _zipf(PROBLEMS),
            "verb": _zipf(VERBS),
            "obj": _zipf(OBJECTS),
            "condition": _zipf(CONDITIONS),
            "reason": _zipf(REASONS),
            "pattern": _zipf(PATTERNS),
            "env": _zipf(ENVS),
            "event": _zipf(EVENTS),
            "error": _zipf(ERRORS),
        }
        self.files = (
            [f"src/{package}/{module}.py" for package in PACKAGES for module in MODULES]
            + [f"web/src/{module}.ts" for module in MODULES]
            + ["migrations/*.sql", "deploy/*.yaml"]
        )
        self.now = datetime(2025, 6, 1, tzinfo=UTC)

    def _pick(self, pool: str) -> str:
        items, cumulative = self.pools[pool]
        return self.rng.choices(items, cum_weights=cumulative)[0]

    def _fill(self, template: str, files: Sequence[str]) -> str:
        values = {name: self._pick(name) for name in self.pools if "{" + name + "}" in template}
        if "{file}" in template:
            values["file"] = self.rng.choice(files) if files else self.rng.choice(self.files)
        if "{number}" in template:
            values["number"] = str(self.rng.randint(3, 2500))
        return template.format(**values)

    def new_id(self) -> str:
        """Return a 26-character lowercase base32 id, like engram.model.new_id, but seeded."""
        raw = self.rng.getrandbits(128).to_bytes(16, "big")
        return base64.b32encode(raw).decode("ascii").rstrip("=").lower()

    def fields(self) -> dict[str, Any]:
        """Return the user-facing fields of one memory (what a remember call passes)."""
        rng = self.rng
        files = sorted(set(rng.sample(self.files, rng.choice((0, 1, 1, 2, 2, 3)))))
        title = self._fill(rng.choice(TITLES), files)
        title = title[0].upper() + title[1:]
        target = rng.randint(380, 540)
        sentences: list[str] = []
        while sum(len(s) + 1 for s in sentences) < target:
            sentences.append(self._fill(rng.choice(SENTENCES), files))
        return {
            "kind": _weighted(rng, KIND_WEIGHTS),
            "title": title,
            "content": " ".join(sentences),
            "tags": sorted(set(rng.sample(TAGS, rng.randint(1, 4)))),
            "files": files,
            "importance": rng.choices((1, 2, 3, 4, 5), weights=(3, 10, 55, 22, 10))[0],
            "status": _weighted(rng, STATUS_WEIGHTS),
        }

    def record(self) -> Record:
        """Return one complete stored record (fields plus id, times, rev, provenance)."""
        rng = self.rng
        fields = self.fields()
        created = self.now - timedelta(seconds=rng.randint(0, 400 * 86400))
        updated = created + timedelta(seconds=rng.choice((0, 0, 0, rng.randint(60, 90 * 86400))))
        record: Record = {
            **{key: value for key, value in fields.items() if value != []},
            "id": self.new_id(),
            "scope": "project",
            "project": PROJECT,
            "source": rng.choice(("agent", "agent", "cli", "capture")),
            "author": rng.choice(AUTHORS),
            "session_id": f"s-{rng.getrandbits(32):08x}",
            "created_at": format_time(created),
            "updated_at": format_time(min(updated, self.now)),
            "rev": 1 if updated == created else rng.randint(2, 4),
        }
        return record

    def queries(self, count: int) -> list[str]:
        """Return ``count`` distinct queries of 1-3 words drawn from the corpus vocabulary."""
        words = sorted(
            {
                word
                for pool in ("component", "tech", "problem", "pattern", "error", "obj")
                for phrase in self.pools[pool][0]
                for word in phrase.replace("`", " ").replace(":", " ").split()
                if len(word) > 3 and word.isalpha()
            }
            | set(TAGS)
        )
        out: list[str] = []
        while len(out) < count:
            query = " ".join(self.rng.sample(words, self.rng.randint(1, 3)))
            if query not in out:
                out.append(query)
        return out


def build_store(root: Path, size: int, seed: int) -> Path:
    """Create a project at ``root`` whose memories.jsonl holds ``size`` records; return it."""
    shutil.rmtree(root, ignore_errors=True)
    engram_dir = root / ".engram"
    init_layout(engram_dir, PROJECT)
    corpus = Corpus(seed)
    records = sorted((corpus.record() for _ in range(size)), key=lambda r: r["id"])
    path = engram_dir / "memories.jsonl"
    with path.open("wb") as handle:
        for record in records:
            handle.write(canonical_line(record))
    return path


# --- bare Tantivy baselines -------------------------------------------------------------------


def _raw_schema() -> Any:
    """Return a schema with the fields engram indexes, built-in ``en_stem`` for text."""
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    for name in ("kind", "status", "scope", "project", "tag"):
        builder.add_text_field(name, tokenizer_name="raw", index_option="basic")
    for name in TEXT_FIELDS:
        builder.add_text_field(name, tokenizer_name="en_stem", index_option="position")
    return builder.build()


def raw_bulk_index(jsonl: Path, folder: Path) -> int:
    """Parse memories.jsonl with orjson and bulk-load it into a new bare Tantivy index."""
    index = tantivy.Index(_raw_schema(), str(folder))
    writer = index.writer(WRITER_HEAP_BYTES, WRITER_THREADS)
    count = 0
    with jsonl.open("rb") as handle:
        for line in handle:
            record = orjson.loads(line)
            if record.get("deleted_at"):
                continue
            tags = record.get("tags", [])
            writer.add_document(
                tantivy.Document(
                    id=record["id"],
                    kind=record.get("kind", ""),
                    status=record.get("status", "active"),
                    scope=record.get("scope", "project"),
                    project=record.get("project", ""),
                    tag=[tag.lower() for tag in tags],
                    title=record.get("title", ""),
                    tags=tags,
                    content=record.get("content", ""),
                    files=record.get("files", []),
                )
            )
            count += 1
    writer.commit()
    writer.wait_merging_threads()
    return count


class RawSearch:
    """A bare Tantivy index queried with one multi-field ``parse_query`` (the recall floor)."""

    def __init__(self, folder: Path) -> None:
        self.index = tantivy.Index(_raw_schema(), str(folder), reuse=True)
        self.index.reload()
        self.fields = list(TEXT_FIELDS)
        self.boosts = dict(DEFAULT_FIELD_WEIGHTS)

    def search(self, text: str, limit: int = 10) -> list[str]:
        """Return the ids of the best ``limit`` docs for the words of ``text``."""
        query = self.index.parse_query(text, self.fields, field_boosts=self.boosts)
        searcher = self.index.searcher()
        hits = searcher.search(query, limit).hits
        return [str(searcher.doc(address).get_first("id")) for _, address in hits]


# --- measuring --------------------------------------------------------------------------------

Action = Callable[[int], object]


def _untimed(_: int) -> None:
    return None


def timed(action: Callable[[], object]) -> float:
    """Return how long ``action`` takes, in milliseconds."""
    start = time.perf_counter_ns()
    action()
    return (time.perf_counter_ns() - start) / 1e6


def paired(
    measured: Action,
    baseline: Action,
    rounds: int,
    *,
    prepare_measured: Action = _untimed,
    prepare_baseline: Action = _untimed,
) -> tuple[list[float], list[float]]:
    """Time both ``rounds`` times, interleaved, alternating which goes first.

    Each is called with the round number; its ``prepare_*`` step runs just before it, untimed.
    """
    ours: list[float] = []
    base: list[float] = []
    for number in range(rounds):
        steps = [
            (prepare_measured, measured, ours),
            (prepare_baseline, baseline, base),
        ]
        for prepare, action, times in steps if number % 2 == 0 else steps[::-1]:
            prepare(number)
            times.append(timed(functools.partial(action, number)))
    return ours, base


@dataclass
class Figure:
    """One row of the result table: medians of paired samples and the target ratio."""

    key: str
    name: str
    size: int
    ours_ms: float
    base_ms: float
    runs: int
    target: float | None = None
    spread: tuple[float, float] | None = None

    @classmethod
    def of(
        cls,
        key: str,
        size: int,
        ours: Sequence[float],
        base: Sequence[float],
        *,
        name: str | None = None,
    ) -> Figure:
        """Summarise paired samples of a figure named in FIGURES."""
        name = name or FIGURES[key][0]
        return cls.from_samples(name, size, ours, base, target=FIGURES[key][1], key=key)

    @classmethod
    def from_samples(
        cls,
        name: str,
        size: int,
        ours: Sequence[float],
        base: Sequence[float],
        *,
        target: float | None,
        key: str = "",
    ) -> Figure:
        """Summarise paired samples by their medians (and the quartiles of per-pair ratios)."""
        spread = None
        if len(ours) == len(base) and len(ours) >= 2:
            ratios = [a / b for a, b in zip(ours, base, strict=True) if b > 0]
            quartiles = statistics.quantiles(ratios, n=4, method="inclusive")
            spread = (quartiles[0], quartiles[2])
        return cls(
            key=key or name,
            name=name,
            size=size,
            ours_ms=statistics.median(ours),
            base_ms=statistics.median(base),
            runs=len(ours),
            target=target,
            spread=spread,
        )

    @property
    def ratio(self) -> float:
        return self.ours_ms / self.base_ms if self.base_ms > 0 else float("inf")

    def verdict(self) -> str:
        """Return PASS or FAIL against the target, or ``info`` when there is none."""
        if self.target is None:
            return "info"
        return "PASS" if self.ratio <= self.target else "FAIL"


# key: (label, target ratio or None); the table lists figures in this order
FIGURES: Final[dict[str, tuple[str, float | None]]] = {
    "recall": ("warm recall p50 (in-process)", 3.0),
    "recall_keyword": ("warm recall p50, keyword only", 3.0),
    "fresh": ("warm recall p50, each query new", 3.0),
    "fresh_keyword": ("warm recall p50, each query new, keyword", 3.0),
    "cli": ("cold CLI recall (process)", 2.0),
    "rebuild": ("full index rebuild", 2.0),
    "after_rebuild": ("1st recall after a rebuild", None),
    "graph_ready": ("graph built after a rebuild (background)", None),
    "remember": ("remember p50", 2.0),
    "flush": ("1st recall after remembers", None),
}


@dataclass(frozen=True)
class Plan:
    """How many repeats each figure gets."""

    recall_queries: int
    recall_rounds: int
    cli_runs: int
    rebuild_rounds: int
    remembers: int
    fresh_warm: int = 1000
    fresh_queries: int = 300

    def rebuilds(self, size: int) -> int:
        """Return the rebuild rounds for a store of ``size`` (fewer for big ones in --quick)."""
        if self is QUICK and size > 20_000:
            return 2
        return self.rebuild_rounds


FULL: Final = Plan(recall_queries=50, recall_rounds=5, cli_runs=10, rebuild_rounds=5, remembers=30)
# bigger stores get fewer rebuild rounds in --quick only: a 100k rebuild takes half a minute
QUICK: Final = Plan(
    recall_queries=50,
    recall_rounds=2,
    cli_runs=6,
    rebuild_rounds=3,
    remembers=15,
    fresh_warm=400,
    fresh_queries=150,
)


def remove_scratch(data: Path, parent: Path, *, keep: bool) -> None:
    """Remove a run's scratch folder (and its parent when empty), or say where it was kept."""
    if keep:
        say(f"kept {data}")
        return
    shutil.rmtree(data, ignore_errors=True)
    with contextlib.suppress(OSError):
        parent.rmdir()  # only if nothing else is in it


def run_header(name: str, *, quick: bool, started: float, load_before: float) -> str:
    """Return the line above a table: which run, how long, the machine and its load."""
    return (
        f"engram {name} benchmarks: {'quick' if quick else 'full'} run, "
        f"{time.monotonic() - started:.0f} s, {os.cpu_count()} cpus, python "
        f"{sys.version.split()[0]}, load average {load_before:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at end"
    )


def say(message: str) -> None:
    """Report progress on stderr, so that stdout holds only the table."""
    print(message, file=sys.stderr, flush=True)


def run_quiet(command: Sequence[str], env: dict[str, str]) -> None:
    """Run a process to completion, output discarded; fail loudly if it fails."""
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True, env=env)


def process_env(pycache: Path) -> dict[str, str]:
    """Return the environment for timed processes: bytecode cached, as in a normal install.

    Sandboxes often set PYTHONDONTWRITEBYTECODE, which makes an editable install recompile
    engram's modules on every start; a user's install has its .pyc files. The cache goes to a
    private prefix (measured and baseline processes alike), so nothing is written into the tree.
    Commands run in their own process (``ENGRAM_DAEMON=off``): without it the first would start
    the store's daemon and the rest would be its answers, which ``bench_hooks.py`` measures.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env["ENGRAM_DAEMON"] = "off"
    return env


def floor_rewrite(path: Path) -> None:
    """Rewrite a copy of ``path`` atomically: read, temp file in the same folder, fsync, rename."""
    data = path.read_bytes()
    fd, tmp = tempfile.mkstemp(prefix=".floor.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path.parent / "floor.jsonl")


@dataclass
class Bench:
    """One synthetic store, its engram instance, its bare Tantivy twin and the plan."""

    size: int
    root: Path
    jsonl: Path
    raw_folder: Path
    engram: Engram
    plan: Plan
    queries: list[str]
    seed: int

    def rebuild(self) -> Figure:
        """Figure 3; its last round leaves both indexes built for the figures that follow."""

        def clear_raw(_: int) -> None:
            shutil.rmtree(self.raw_folder, ignore_errors=True)
            self.raw_folder.mkdir(parents=True)
            gc.collect()

        rounds = self.plan.rebuilds(self.size)
        # The store's first build embeds every memory (semantic extra); later rebuilds reuse
        # the vectors by their text's hash, as a user's do. That first build is not a rebuild:
        # it is left out of the timed rounds (it made --quick's two rounds at 100k a mean).
        say(f"[{self.size:,}] first build (untimed) ...")
        self.engram.reindex(rebuild=True)
        say(f"[{self.size:,}] rebuild x{rounds}: engram vs orjson + bare tantivy bulk load ...")
        ours, base = paired(
            lambda _: self.engram.reindex(rebuild=True),
            lambda _: raw_bulk_index(self.jsonl, self.raw_folder),
            rounds,
            prepare_measured=lambda _: gc.collect(),
            prepare_baseline=clear_raw,
        )
        return Figure.of("rebuild", self.size, ours, base)

    def first_recall_after_rebuild(self) -> list[Figure]:
        """The recall right after the last rebuild: it loads the embeddings afresh and saves
        them (the nearest-neighbour graph, from ``ann.EXACT_BELOW`` memories on, is built in
        the background meanwhile: this recall scans) vs one warm recall; no target, a one-off
        cost. Then the time from that recall until the graph is there (a big store only),
        also vs a warm recall; the figures after this one are measured with the graph."""
        started = time.perf_counter_ns()
        first = timed(lambda: self.engram.recall(self.queries[0]))
        state = self.engram.here.ws.index.vectors.state()
        graph = None if state is None else state.graph_built()
        ready = (time.perf_counter_ns() - started) / 1e6
        warm = [timed(functools.partial(self.engram.recall, q)) for q in self.queries[:30]]
        rows = [Figure.of("after_rebuild", self.size, [first], warm)]
        if graph is not None:
            rows.append(Figure.of("graph_ready", self.size, [ready], warm))
        return rows

    def warm_recall(self, engram: Engram | None = None, key: str = "recall") -> Figure:
        """Figure 1: in-process recall vs the same words asked of the bare Tantivy index.

        ``engram`` is another opening of a copy of the store (keyword only, figure 1b)."""
        engram = engram or self.engram
        raw = RawSearch(self.raw_folder)
        for query in self.queries:  # warm both: page cache, readers, lazily built state
            engram.recall(query)
            raw.search(query)
        rounds = self.plan.recall_rounds
        say(f"[{self.size:,}] {FIGURES[key][0]}: {len(self.queries)} queries x{rounds} ...")
        # Odd rounds rotate the list by one, so that each query alternates which side goes
        # first from one round to the next (paired() alternates on the position's parity).
        queries = [
            query
            for number in range(rounds)
            for query in self.queries[number % 2 :] + self.queries[: number % 2]
        ]
        ours, base = paired(
            lambda n: engram.recall(queries[n]),
            lambda n: raw.search(queries[n]),
            len(queries),
        )
        return Figure.of(key, self.size, ours, base)

    def fresh_recall(self, engram: Engram | None = None, key: str = "fresh") -> Figure:
        """Figure 1c: in-process recall of queries the process has never been asked, each once.

        Figure 1 asks the same 50 queries round after round, so whatever a process keeps per
        query (its vector search, its weights) answers them. An agent's prompts are new every
        time: here the process first answers ``fresh_warm`` other queries (its per-memory
        caches fill as a long-lived server's do), then each measured query is asked once,
        paired with the same words asked of the bare Tantivy index.
        """
        engram = engram or self.engram
        raw = RawSearch(self.raw_folder)
        asked = set(self.queries)
        plan = self.plan
        pool = Corpus(self.seed + 3).queries(plan.fresh_warm + plan.fresh_queries + len(asked))
        new = [query for query in pool if query not in asked]
        warm, measured = new[: plan.fresh_warm], new[plan.fresh_warm :][: plan.fresh_queries]
        for query in warm:
            engram.recall(query)
            raw.search(query)
        say(f"[{self.size:,}] {FIGURES[key][0]}: {len(measured)} queries, each once ...")
        ours, base = paired(
            lambda n: engram.recall(measured[n]),
            lambda n: raw.search(measured[n]),
            len(measured),
        )
        return Figure.of(key, self.size, ours, base)

    def warm_recall_keyword(self) -> list[Figure]:
        """Figures 1b and 1c on a copy of the store set to ``search.mode: keyword``."""
        copy = self.root.parent / f"{self.root.name}-keyword"
        shutil.rmtree(copy, ignore_errors=True)
        init_layout(copy / ".engram", PROJECT)
        shutil.copyfile(self.jsonl, copy / ".engram" / "memories.jsonl")
        config_mod.set_value(copy / ".engram", "search.mode", "keyword")
        try:
            with Engram.open(copy) as engram:
                engram.reindex(rebuild=True)
                return [
                    self.warm_recall(engram, "recall_keyword"),
                    self.fresh_recall(engram, "fresh_keyword"),
                ]
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    def cold_cli(self, pycache: Path) -> Figure:
        """Figure 2: a new ``engram recall`` process vs importing what it cannot avoid."""
        runs = self.plan.cli_runs
        say(f"[{self.size:,}] cold CLI recall x{runs} ...")
        command = [sys.executable, "-m", "engram", "-C", str(self.root), "recall"]
        imports = [sys.executable, "-c", "import typer, tantivy, sqlite3"]
        env = process_env(pycache)
        for _ in range(2):  # fill the bytecode cache, warm the OS page cache
            run_quiet([*command, self.queries[0]], env)
            run_quiet(imports, env)
        ours, base = paired(
            lambda n: run_quiet([*command, self.queries[n % len(self.queries)]], env),
            lambda _: run_quiet(imports, env),
            runs,
        )
        return Figure.of("cli", self.size, ours, base)

    def remember(self) -> list[Figure]:
        """Figure 4: remember vs one atomic rewrite, then the recall that flushes them."""
        count = self.plan.remembers
        writer = Corpus(self.seed + 2)
        payloads = [writer.fields() for _ in range(count + 1)]
        self.engram.remember(**payloads[-1])  # the first write checks the whole file once
        self.engram.recall(self.queries[0])  # start from an empty full-text queue
        floor_rewrite(self.jsonl)
        say(f"[{self.size:,}] remember x{count} vs the atomic rewrite floor ...")
        ours, base = paired(
            lambda n: self.engram.remember(**payloads[n]),
            lambda _: floor_rewrite(self.jsonl),
            count,
        )
        (self.jsonl.parent / "floor.jsonl").unlink(missing_ok=True)
        first = timed(lambda: self.engram.recall(self.queries[0]))
        warm = [timed(functools.partial(self.engram.recall, q)) for q in self.queries[:30]]
        return [
            Figure.of("remember", self.size, ours, base),
            Figure.of(
                "flush",
                self.size,
                [first],
                warm,
                name=f"1st recall after {count} remembers",
            ),
        ]


def bench_size(
    size: int, data: Path, plan: Plan, *, cli: bool, seed: int, keep: bool
) -> list[Figure]:
    """Run every figure on one store of ``size`` memories; return the rows."""
    root = data / f"store-{size}"
    say(f"[{size:,}] writing the synthetic store ...")
    jsonl = build_store(root, size, seed)
    say(f"[{size:,}] memories.jsonl: {jsonl.stat().st_size / 1e6:.1f} MB")
    with Engram.open(root) as engram:
        bench = Bench(
            size=size,
            root=root,
            jsonl=jsonl,
            raw_folder=data / f"raw-{size}",
            engram=engram,
            plan=plan,
            queries=Corpus(seed + 1).queries(plan.recall_queries),
            seed=seed,
        )
        rows = [bench.rebuild(), *bench.first_recall_after_rebuild()]
        rows += [bench.warm_recall(), bench.fresh_recall(), *bench.warm_recall_keyword()]
        if cli:
            rows.append(bench.cold_cli(data / "pycache"))
        rows += bench.remember()
    if not keep:  # free the disk before the next size (100k: ~0.3 GB with both indexes)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(bench.raw_folder, ignore_errors=True)
    return rows


def align(lines: Sequence[Sequence[str]], left: Sequence[int] = (0,)) -> str:
    """Return rows of cells (the first is the header) as an aligned plain-text table."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for number, line in enumerate(lines):
        cells = [
            cell.ljust(width) if column in left else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
        if number == 0:
            out.append("  ".join("-" * width for width in widths))
    return "\n".join(out)


def render(rows: Sequence[Figure]) -> str:
    """Return the result table as aligned plain text."""
    header = (
        "figure",
        "size",
        "engram ms",
        "baseline ms",
        "ratio",
        "pairs p25-p75",
        "target",
        "result",
        "runs",
    )
    lines = [header]
    for row in rows:
        lines.append(
            (
                row.name,
                f"{row.size // 1000}k" if row.size % 1000 == 0 else str(row.size),
                f"{row.ours_ms:.2f}",
                f"{row.base_ms:.2f}",
                f"{row.ratio:.2f}",
                "-" if row.spread is None else f"{row.spread[0]:.2f}-{row.spread[1]:.2f}",
                "-" if row.target is None else f"<= {row.target:g}",
                row.verdict(),
                str(row.runs),
            )
        )
    return align(lines)


LEGEND: Final = """\
ratio = median engram ms / median baseline ms; pairs p25-p75 = quartiles of the ratios of
the interleaved pairs (a wide range means the machine was noisy during that figure).
baselines (same run, interleaved with the engram runs):
  warm recall  bare tantivy index of the same docs: parse_query over title/tags/content/files
               with engram's field boosts, top 10, ids read back (the first row in the default
               search.mode, hybrid when the model is installed; "keyword only" on a copy of the
               store set to search.mode: keyword)
  cold CLI     python -c "import typer, tantivy, sqlite3" (both with a warm bytecode cache)
  rebuild      orjson parse of memories.jsonl + bare tantivy bulk load of the same fields,
               one writer (engram's heap and thread count), one commit
  remember     one atomic rewrite of memories.jsonl: read, temp copy in its folder, fsync, rename
  1st recall   after remembers: the recall that flushes the queued full-text updates; after a
               rebuild: the recall that loads the embeddings (the nearest-neighbour graph of a
               big store is built in the background meanwhile); each vs a warm recall p50
  graph built  from that first recall until the background graph is there (100k), vs the same"""


def parse_sizes(text: str) -> list[int]:
    """Parse ``10000,100000`` (``10k`` works too) into sizes."""
    sizes: list[int] = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        try:
            value = float(part[:-1]) * 1000 if part.endswith("k") else float(part)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not a size: {part!r}") from exc
        if value < 1:
            raise argparse.ArgumentTypeError(f"size must be at least 1, got {part!r}")
        sizes.append(int(value))
    if not sizes:
        raise argparse.ArgumentTypeError("give at least one size")
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    """Build the stores, run every figure and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=parse_sizes, default=None, help="store sizes (default 10000,100000)"
    )
    parser.add_argument("--quick", action="store_true", help="10k only, fewer repeats (~1 min)")
    parser.add_argument("--seed", type=int, default=SEED, help="corpus seed")
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA, help="parent folder of the scratch stores"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder afterwards")
    args = parser.parse_args(argv)
    sizes: list[int] = args.sizes or ([10_000] if args.quick else [10_000, 100_000])
    plan = QUICK if args.quick else FULL
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="run-", dir=args.data_dir))
    # Keep the personal store and the user's git identity out of the measurements.
    os.environ["ENGRAM_HOME"] = str(data / "home" / ".engram")
    os.environ["ENGRAM_AUTHOR"] = "Bench Author"
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    rows: list[Figure] = []
    try:
        for number, size in enumerate(sizes):
            rows += bench_size(size, data, plan, cli=number == 0, seed=args.seed, keep=args.keep)
    finally:
        if args.keep:
            say(f"kept {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)
            with contextlib.suppress(OSError):
                args.data_dir.rmdir()  # only if nothing else is in it
    order = list(FIGURES)
    rows.sort(key=lambda row: (order.index(row.key), row.size))
    print(
        f"engram core benchmarks: {'quick' if args.quick else 'full'} run, "
        f"{time.monotonic() - started:.0f} s, {os.cpu_count()} cpus, python "
        f"{sys.version.split()[0]}, tantivy {_version('tantivy')}, load average "
        f"{load_before:.1f} at start, {os.getloadavg()[0]:.1f} at end"
    )
    print(render(rows))
    print(LEGEND)
    return 0


def _version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    raise SystemExit(main())
