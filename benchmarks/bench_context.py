"""Context and check benchmarks of engram: each a ratio to a plain ``recall`` on the same store.

Run ``python benchmarks/bench_context.py [--quick] [--size 100000] [--only check]`` (``--only``
picks groups of rows: context, check, stale, process). Like ``bench_core.py`` (whose synthetic
stores this reuses), every figure is paired with a baseline measured in the same run, the two
sides interleaved (alternating which goes first), and the table reports the ratio of their
medians next to both medians.

The store is ``bench_core.build_store``'s, with every memory's ``files`` redrawn (1-3 paths from
a tree of some 360 source files) and the project made a small git repository (dulwich, three
commits) holding those files; about 60% of the memories carry ``anchors`` (git blob ids of their
files: some HEAD's, some an older version's, so part of them read as stale).

1. ``Engram.context()`` p50 (default budget, 2,000 tokens) vs ``Engram.recall(q)`` p50, on the
   same open store (aim <= 3);
2. ``Engram.context(query=q)`` p50 (adds the query section) vs the same recall (aim <= 3);
3. ``context()`` right after the store changed (its per-state cache of the query-free sections
   dropped: the scans of the records table are paid again) vs the same recall (reported);
4. ``Engram.check(files)`` p50 for one file, a folder, a narrow glob (``src/**/models.py``)
   and one file with ``text=q``, vs the same recall (aim <= 3), and for a broad glob
   (``src/**/*.py``, most of the store: reported);
5. ``recall`` plus ``Engram.stale(hit.record)`` for each hit (what the CLI and MCP do), the
   anchor cache warm, vs the same recall without the stale calls (reported);
6. the same, first call after HEAD moved (a new commit: the per-HEAD cache starts empty), vs a
   warm recall (reported);
7. ``engram context`` as a new process (the session-start hook) vs ``engram recall WORDS`` as
   a new process (reported).

Scratch stores go under ``benchmarks/.data/`` (gitignored) and are removed unless ``--keep``.
This file must not assert on wall-clock times, and is not part of the test suite.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (  # a sibling script
    MODULES,
    PACKAGES,
    Corpus,
    Figure,
    build_store,
    paired,
    process_env,
    remove_scratch,
    render,
    run_header,
    say,
    timed,
)

from engram.index.query import file_matches
from engram.model import canonical_line
from engram.service import Engram

HERE: Final = Path(__file__).resolve().parent
DEFAULT_DATA: Final = HERE / ".data"
SEED: Final = 20240611
# Commits are made after every synthetic memory was written (bench_core's "now" is 2025-06-01),
# so a changed anchored file counts its commits instead of ending the walk at ``since``.
FIRST_COMMIT: Final = 1_748_822_400  # 2025-06-02T00:00:00Z
IDENTITY: Final = b"Bench Author <bench@example.invalid>"
ANCHORED_SHARE: Final = 0.6  # memories carrying anchors (the rest predate them, or no git)
CHECK_FILE: Final = "src/billing/models.py"
CHECK_FOLDER: Final = "src/billing"
CHECK_GLOB: Final = "src/**/models.py"
CHECK_TREE: Final = "src/**/*.py"  # half the tree: most memories cite a match
SECTIONS: Final = ("context", "check", "stale", "process")  # the groups of rows --only picks
LEGEND: Final = """\
ratio = median engram / median baseline; pairs p25-p75 = quartiles of the per-pair ratios.
baseline (same run, interleaved): Engram.recall(q, limit=10) on the same open store, the same
queries; for the process figure, `engram recall WORDS` as a new process.
cached = the query-free sections are reused while no store file changed (stat signature).
check (N) = N memories cite a matching path; check budget is config's check.budget (800).
+ stale = recall, then Engram.stale(hit.record) for every hit, as the CLI and MCP do; warm =
the anchor cache holds this HEAD's answers; HEAD moved = first call after a new commit."""


def row(
    name: str, size: int, ours: Sequence[float], base: Sequence[float], target: float | None
) -> Figure:
    """Return one table row from paired samples."""
    return Figure.from_samples(name, size, ours, base, target=target)


# --- the source tree, its git history and the memories' files ----------------------------------


def source_tree() -> list[str]:
    """Return the project's source files: sources and tests per package, plus a web app."""
    return (
        [f"src/{package}/{module}.py" for package in PACKAGES for module in MODULES]
        + [f"tests/{package}/test_{module}.py" for package in PACKAGES for module in MODULES]
        + [f"web/src/{module}.ts" for module in MODULES]
    )


def blob_id(data: bytes) -> str:
    """Return the git blob id of some bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def file_text(path: str, version: int) -> bytes:
    """Return the bytes of one version of a source file."""
    body = "".join(f"# line {n} of {path}, version {version}\n" for n in range(20))
    return f"# {path}\n{body}".encode()


@dataclass
class Repo:
    """The project's git repository and the blob ids the memories can anchor to."""

    root: Path
    first: dict[str, str]  # path -> blob in the first commit
    head: dict[str, str]  # path -> blob at HEAD
    commits: int = 0

    def commit(self, changes: dict[str, int]) -> None:
        """Write these files at these versions and commit them (HEAD moves)."""
        from dulwich.repo import Repo as GitRepo

        for path, version in changes.items():
            data = file_text(path, version)
            (self.root / path).parent.mkdir(parents=True, exist_ok=True)
            (self.root / path).write_bytes(data)
            self.head[path] = blob_id(data)
        when = FIRST_COMMIT + 3600 * self.commits
        with GitRepo(str(self.root)) as repo:
            worktree = repo.get_worktree()
            worktree.stage(sorted(changes))
            worktree.commit(
                message=f"bench commit {self.commits}".encode(),
                committer=IDENTITY,
                author=IDENTITY,
                commit_timestamp=when,
                author_timestamp=when,
                commit_timezone=0,
                author_timezone=0,
                no_verify=True,
            )
        self.commits += 1


def make_repo(root: Path, paths: Sequence[str], rng: random.Random) -> Repo:
    """Make root a git repository: every file, then two commits changing a third each."""
    from dulwich.repo import Repo as GitRepo

    GitRepo.init(str(root)).close()
    repo = Repo(root, {}, {})
    repo.commit(dict.fromkeys(paths, 0))
    repo.first = dict(repo.head)
    order = list(paths)
    rng.shuffle(order)
    third = len(order) // 3
    repo.commit(dict.fromkeys(order[:third], 1))
    repo.commit(dict.fromkeys(order[third : 2 * third], 1))
    return repo


def redraw_files(jsonl: Path, repo: Repo, paths: Sequence[str], rng: random.Random) -> int:
    """Give every memory 1-3 files of the tree, and most of them anchors; return the anchored."""
    anchored = 0
    lines = jsonl.read_bytes().splitlines()
    with jsonl.open("wb") as handle:
        for line in lines:
            record: dict[str, Any] = orjson.loads(line)
            files = sorted(rng.sample(paths, rng.choices((1, 2, 3), weights=(5, 3, 2))[0]))
            record["files"] = files
            if rng.random() < ANCHORED_SHARE:
                anchored += 1
                record["anchors"] = [
                    {"path": path, "blob": (repo.head if rng.random() < 0.5 else repo.first)[path]}
                    for path in files
                ]
            handle.write(canonical_line(record))
    return anchored


def citing(jsonl: Path, wanted: str) -> int:
    """Return how many memories cite a path bearing on ``wanted`` (as check matches them)."""
    count = 0
    with jsonl.open("rb") as handle:
        for line in handle:
            files = orjson.loads(line).get("files", [])
            count += any(file_matches(path, wanted) for path in files)
    return count


# --- measuring --------------------------------------------------------------------------------


def fitted(
    measured: Callable[[int], object],
    baseline: Callable[[int], object],
    rounds: int,
    seconds: float,
    pace: float,
) -> tuple[list[float], list[float]]:
    """Pair them ``rounds`` times, fewer (at least 3) when a measured call (``pace`` ms) is slow."""
    fit = max(3, min(rounds, int(seconds * 1000 / max(pace, 1e-3))))
    return paired(measured, baseline, fit)


def main(argv: Sequence[str] | None = None) -> int:
    """Build the store, run every figure and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories in the store")
    parser.add_argument("--quick", action="store_true", help="a 10k store, fewer repeats")
    parser.add_argument("--seed", type=int, default=SEED, help="corpus seed")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="scratch parent")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder afterwards")
    parser.add_argument(
        "--only",
        choices=SECTIONS,
        action="append",
        help="run only these rows (repeatable): context, check, stale, process",
    )
    args = parser.parse_args(argv)
    only = frozenset(args.only or SECTIONS)
    size = 10_000 if args.quick and args.size == 100_000 else args.size
    rounds, uncached_rounds, processes, head_moves, seconds = (
        (30, 5, 3, 5, 3.0) if args.quick else (100, 15, 6, 10, 20.0)
    )
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="context-", dir=args.data_dir))
    os.environ["ENGRAM_HOME"] = str(data / "home" / ".engram")
    os.environ["ENGRAM_AUTHOR"] = "Bench Author"
    queries = Corpus(args.seed + 1).queries(50)
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    rows: list[Figure] = []
    notes: list[str] = []
    try:
        root = data / f"store-{size}"
        say(f"building a {size:,}-memory store")
        jsonl = build_store(root, size, args.seed)
        rng = random.Random(args.seed + 3)
        paths = source_tree()
        say(f"git repository of {len(paths)} files, 3 commits; redrawing files and anchors")
        repo = make_repo(root, paths, rng)
        anchored = redraw_files(jsonl, repo, paths, rng)
        cites = {
            wanted: citing(jsonl, wanted)
            for wanted in (CHECK_FILE, CHECK_FOLDER, CHECK_GLOB, CHECK_TREE)
        }
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

            if "context" in only:
                say("context vs recall")
                ours, base = paired(context, recall, rounds)
                rows.append(row("context p50 (cached)", size, ours, base, 3.0))
                ours, base = paired(context_query, recall, rounds)
                rows.append(row("context --query p50 (cached)", size, ours, base, 3.0))
                say("context after a store change")
                ours, base = paired(context, recall, uncached_rounds, prepare_measured=drop_cache)
                rows.append(row("context p50 (store changed)", size, ours, base, None))

            hits = stale = 0
            for query in queries:  # warm the anchor cache for this HEAD; count what it holds
                for hit in engram.recall(query, limit=10):
                    hits += bool(hit.record.get("anchors"))
                    stale += bool(engram.stale(hit.record))
            notes.append(
                f"store: {anchored:,} of {size:,} memories anchored; a recall returns "
                f"{hits / len(queries):.1f} anchored hits on average, {stale / len(queries):.1f} "
                f"of them stale"
            )
            # (name, call, target): the broad glob, most of the store, is reported only.
            checks: list[tuple[str, Callable[[int], object], float | None]] = [
                (
                    f"check 1 file p50 ({cites[CHECK_FILE]:,})",
                    lambda n: engram.check([CHECK_FILE]),
                    3.0,
                ),
                (
                    f"check src/billing p50 ({cites[CHECK_FOLDER]:,})",
                    lambda n: engram.check([CHECK_FOLDER]),
                    3.0,
                ),
                (
                    f"check src/**/models.py p50 ({cites[CHECK_GLOB]:,})",
                    lambda n: engram.check([CHECK_GLOB]),
                    3.0,
                ),
                (
                    f"check src/**/*.py p50 ({cites[CHECK_TREE]:,})",
                    lambda n: engram.check([CHECK_TREE]),
                    None,
                ),
                (
                    f"check file + text p50 ({cites[CHECK_FILE]:,})",
                    lambda n: engram.check([CHECK_FILE], text=queries[n % len(queries)]),
                    3.0,
                ),
            ]
            if "check" not in only:
                checks = []
            # Warm the anchor cache for every memory the checks find. The checker rewrites
            # anchors.json after each memory with a miss, so a cold check of thousands of
            # memories is quadratic in them: fill it in memory only (the file is not timed here).
            checker = engram.here.anchor_checker
            assert checker is not None  # made by the stale calls above
            cache_path, checker.cache_path = checker.cache_path, None
            say("warming the anchor cache for the checks")
            paces = [timed(functools.partial(action, 0)) for _, action, _ in checks]
            checker.cache_path = cache_path
            for (name, action, target), pace in zip(checks, paces, strict=True):
                say(f"{name} vs recall")
                ours, base = fitted(action, recall, rounds, seconds, pace)
                rows.append(row(name, size, ours, base, target))

            if "stale" in only:

                def recall_stale(number: int) -> None:
                    for hit in engram.recall(queries[number % len(queries)], limit=10):
                        engram.stale(hit.record)

                say("recall + stale vs recall")
                ours, base = paired(recall_stale, recall, rounds)
                rows.append(row("recall + stale p50 (warm)", size, ours, base, None))

                def move_head(number: int) -> None:
                    repo.commit(
                        {paths[(number * 7 + k) % len(paths)]: 2 + number for k in range(3)}
                    )

                say(f"recall + stale after HEAD moved x{head_moves}")
                ours, base = paired(recall_stale, recall, head_moves, prepare_measured=move_head)
                rows.append(row("recall + stale (HEAD moved)", size, ours, base, None))
        if "process" in only:
            say("new processes")
            env = process_env(data / "pycache")
            command = [sys.executable, "-m", "engram", "-C", str(root)]

            def cli_context(number: int) -> None:
                subprocess.run([*command, "context"], env=env, check=True, capture_output=True)

            def cli_recall(number: int) -> None:
                words = queries[number % len(queries)]
                subprocess.run(
                    [*command, "recall", words], env=env, check=True, capture_output=True
                )

            cli_context(0)  # fills the bytecode cache
            cli_recall(0)
            ours, base = paired(cli_context, cli_recall, processes)
            rows.append(row("engram context process", size, ours, base, None))
    finally:
        remove_scratch(data, args.data_dir, keep=args.keep)
    print(run_header("context", quick=args.quick, started=started, load_before=load_before))
    print(render(rows))
    print(LEGEND)
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
