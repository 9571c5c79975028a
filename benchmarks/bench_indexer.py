"""Benchmark of the git history indexer, each figure a ratio against a same-run baseline.

Run ``python benchmarks/bench_indexer.py [--commits 500] [--files 3000] [--rounds 7]``. A
synthetic repository is generated with dulwich (no ``git`` binary): ``--files`` files in three
levels of folders, ``--commits`` non-merge commits changing 5-20 files each (hot files chosen
more often), with renames (exact and edited), deletions, additions, reverts, "fix … again"
commits and a merged side branch every 40 commits; all objects go into one pack, as after a
clone. The machine is shared and noisy, so every measurement is paired with a baseline run
interleaved with it (alternating which goes first) and the table reports the ratio of medians.

Figures:

1. cold ``scan_history(root, depth=N)`` (no cache file) vs the bare dulwich walk of the same
   commits that only collects changed paths: ``repo.get_walker()``, merges skipped,
   ``entry.changes()`` of each commit into a set (target <= 1.5);
2. the same cold scan vs a tighter hand-rolled baseline: ``Walker`` with plain
   ``commit.parents`` and ``tree_changes`` against the parent's tree (info, no target);
3. a re-index with no new commits (``unchanged=True``) vs its floor: open the repository, read
   HEAD, parse the cache file with orjson (info), and vs the cold scan (info);
4. a re-index after 3 new commits vs the cold scan (info).

This file must not assert on wall-clock times, and is not part of the test suite.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
from dulwich.diff_tree import tree_changes
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo
from dulwich.walk import Walker

from engram.indexer.git import CACHE_FILE, scan_history

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import align  # a sibling script, not a package

HERE: Final = Path(__file__).resolve().parent
SEED: Final = 20240611
BASE_TIME: Final = 1_700_000_000
AUTHORS: Final = (
    b"Ada Lovelace <ada@example.com>",
    b"Grace Hopper <grace@example.com>",
    b"Linus T <linus@example.com>",
    b"Barbara Liskov <barbara@example.com>",
)
TOPICS: Final = (
    "retry queue",
    "session cache",
    "billing webhook",
    "rate limiter",
    "search indexer",
    "token refresher",
    "upload handler",
    "audit log",
)


@dataclass
class History:
    """A synthetic history being built: the files now, and the objects written so far."""

    rng: random.Random
    files: dict[bytes, bytes] = field(default_factory=dict)  # path -> blob sha
    objects: dict[bytes, Any] = field(default_factory=dict)  # sha -> object
    folder_files: dict[bytes, dict[bytes, bytes]] = field(default_factory=dict)
    children: dict[bytes, set[bytes]] = field(default_factory=dict)  # folder -> subfolders
    trees: dict[bytes, bytes] = field(default_factory=dict)  # folder -> tree sha
    dirty: set[bytes] = field(default_factory=set)
    versions: int = 0
    clock: int = BASE_TIME

    def blob(self, path: bytes, extra: bytes = b"") -> bytes:
        """Write a new version of a file's content and return its sha."""
        self.versions += 1
        lines = [b"# %s" % path] + [
            b"line %d of %s" % (number, path) for number in range(self.rng.randint(5, 40))
        ]
        blob = Blob.from_string(b"\n".join([*lines, extra, b"v%d" % self.versions]) + b"\n")
        self.objects[blob.id] = blob
        return blob.id

    def set(self, path: bytes, sha: bytes | None) -> None:
        """Point a path at a blob (None deletes it), marking its folders for a new tree."""
        folder, _, name = path.rpartition(b"/")
        if sha is None:
            self.files.pop(path, None)
            self.folder_files.get(folder, {}).pop(name, None)
        else:
            self.files[path] = sha
            self.folder_files.setdefault(folder, {})[name] = sha
        while True:
            self.dirty.add(folder)
            if not folder:
                break
            parent, _, name = folder.rpartition(b"/")
            self.children.setdefault(parent, set()).add(name)
            folder = parent

    def tree(self) -> bytes:
        """Write the trees of the folders that changed, deepest first; return the root's."""
        for folder in sorted(self.dirty, key=lambda f: -(f.count(b"/") + 1 if f else 0)):
            tree = Tree()
            for name, sha in self.folder_files.get(folder, {}).items():
                tree.add(name, 0o100644, sha)
            for name in self.children.get(folder, set()):
                child = folder + b"/" + name if folder else name
                if child in self.trees:
                    tree.add(name, 0o040000, self.trees[child])
            if folder and not tree.items():
                self.trees.pop(folder, None)  # git has no empty folders
                continue
            self.objects[tree.id] = tree
            self.trees[folder] = tree.id
        self.dirty.clear()
        return self.trees[b""]

    def commit(self, message: str, parents: Sequence[bytes], tree: bytes | None = None) -> bytes:
        """Write a commit of the current files (or of ``tree``) and return its sha."""
        self.clock += self.rng.randint(600, 7200)
        commit = Commit()
        commit.tree = tree if tree is not None else self.tree()
        commit.parents = list(parents)
        commit.author = commit.committer = self.rng.choice(AUTHORS)
        commit.author_time = commit.commit_time = self.clock
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = message.encode("utf-8")
        self.objects[commit.id] = commit
        return commit.id


def build_repo(root: Path, *, commits: int, files: int, seed: int) -> bytes:
    """Generate a repository at root with ``commits`` non-merge commits; return HEAD."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    rng = random.Random(seed)
    history = History(rng)
    per_folder = 30
    folders = max(1, files // per_folder)
    paths = [
        b"src/pkg%02d/mod%02d/file%03d.py" % (number // 10, number % 10, index)
        for number in range(folders)
        for index in range(per_folder)
    ][:files]
    for path in paths:
        history.set(path, history.blob(path))
    head = history.commit("Initial import", [])
    weights = [1.0 / (rank + 1) ** 0.8 for rank in range(len(paths))]
    rng.shuffle(weights)
    made = 1
    side: list[bytes] = []
    recent: list[tuple[bytes, str, dict[bytes, bytes | None]]] = []
    while made < commits:
        roll = rng.random()
        topic = rng.choice(TOPICS)
        changed: dict[bytes, bytes | None] = {}  # path -> blob before the change
        live = list(history.files)
        if roll < 0.03 and recent:
            target_sha, target_subject, before = rng.choice(recent)
            for path, old in before.items():
                changed[path] = history.files.get(path)
                history.set(path, old)
            message = f'Revert "{target_subject}"\n\nThis reverts commit {target_sha.decode()}.\n'
        else:
            count = rng.randint(5, 20)
            chosen = set(rng.choices(range(len(paths)), weights=weights, k=count))
            for index in chosen:
                path = paths[index]
                if path in history.files:
                    changed[path] = history.files[path]
                    history.set(path, history.blob(path))
            if roll < 0.08:  # rename, exact or with an edit
                old = rng.choice(live)
                new = old.replace(b".py", b"_%d.py" % made)
                if old in history.files and new not in history.files:
                    changed[old] = history.files[old]
                    changed[new] = None
                    blob = history.files[old] if rng.random() < 0.5 else history.blob(old, b"x")
                    history.set(old, None)
                    history.set(new, blob)
                    paths[paths.index(old)] = new
            elif roll < 0.12:  # delete one file
                old = rng.choice(live)
                if old in history.files:
                    changed[old] = history.files[old]
                    history.set(old, None)
            elif roll < 0.16:  # add one file
                new = rng.choice(live).replace(b".py", b"_new%d.py" % made)
                changed[new] = None
                history.set(new, history.blob(new))
                paths.append(new)
                weights.append(rng.choice(weights))
            if roll > 0.97:
                message = f"Fix the {topic} again"
            else:
                message = f"{rng.choice(('Fix', 'Improve', 'Refactor', 'Speed up'))} {topic}"
                message += f" ({made})\n\nDetails about the {topic} change.\n"
        if not changed:
            continue
        tree = history.tree()
        if made % 40 == 20:  # the next commits go on a side branch, merged at made % 40 == 23
            side = [head]
        parent = side[-1] if side else head
        sha = history.commit(message, [parent], tree)
        made += 1
        recent = [*recent[-30:], (sha, message.split("\n")[0], changed)]
        if side:
            side.append(sha)
            if made % 40 == 23:
                head = history.commit(f"Merge branch 'topic-{made}'", [head, sha], tree)
                side = []
        else:
            head = sha
    if side:
        head = history.commit("Merge branch 'last'", [head, side[-1]], history.tree())
    with Repo.init(str(root)) as repo:
        repo.object_store.add_objects([(obj, None) for obj in history.objects.values()])
        repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/main")
        repo.refs[b"refs/heads/main"] = head
    return head


def add_commits(root: Path, count: int, seed: int) -> None:
    """Add ``count`` commits on top of HEAD (each changes a few files), as loose objects."""
    rng = random.Random(seed)
    with Repo(str(root)) as repo:
        head = repo.head()
        parent = repo[head]
        assert isinstance(parent, Commit)
        for number in range(count):
            tree = repo[parent.tree]
            assert isinstance(tree, Tree)
            blob = Blob.from_string(b"extra %d %d\n" % (number, rng.getrandbits(32)))
            repo.object_store.add_object(blob)
            top = Tree()
            for item in tree.items():
                top.add(item.path, item.mode, item.sha)
            top.add(b"EXTRA-%d.txt" % number, 0o100644, blob.id)
            repo.object_store.add_object(top)
            commit = Commit()
            commit.tree = top.id
            commit.parents = [parent.id]
            commit.author = commit.committer = AUTHORS[0]
            commit.author_time = commit.commit_time = parent.commit_time + 60
            commit.author_timezone = commit.commit_timezone = 0
            commit.message = b"Extra commit %d\n" % number
            repo.object_store.add_object(commit)
            repo.refs[b"refs/heads/main"] = commit.id
            parent = commit


# --- baselines ----------------------------------------------------------------------------


def bare_walk(root: Path, depth: int) -> int:
    """Walk ``depth`` non-merge commits with repo.get_walker(); collect changed paths."""
    paths: set[bytes] = set()
    walked = 0
    with Repo(str(root)) as repo:
        for entry in repo.get_walker():
            if len(entry.commit.parents) > 1:
                continue
            for change in entry.changes():
                assert not isinstance(change, list)
                paths.add((change.new or change.old).path)  # type: ignore[union-attr]
            walked += 1
            if walked == depth:
                break
    return len(paths)


def tight_walk(root: Path, depth: int) -> int:
    """Walk with Walker and plain parents, diffing against the parent's tree."""
    paths: set[bytes] = set()
    walked = 0
    with Repo(str(root)) as repo:
        store = repo.object_store
        for entry in Walker(store, [repo.head()]):
            commit = entry.commit
            if len(commit.parents) > 1:
                continue
            parent_tree = store[commit.parents[0]].tree if commit.parents else None
            for change in tree_changes(store, parent_tree, commit.tree):
                paths.add((change.new or change.old).path)  # type: ignore[union-attr]
            walked += 1
            if walked == depth:
                break
    return len(paths)


def read_floor(root: Path, cache: Path) -> int:
    """Do what no re-index can skip: open the repository, read HEAD, parse the cache file."""
    with Repo.discover(str(root)) as repo:
        repo.head()
        return len(orjson.loads(cache.read_bytes())["commits"])


# --- measuring ----------------------------------------------------------------------------


def timed(call: Callable[[], object]) -> float:
    """Return the wall-clock milliseconds of one call."""
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def paired(
    measured: Callable[[], object],
    baseline: Callable[[], object],
    rounds: int,
    prepare: Callable[[], object] = lambda: None,
) -> tuple[list[float], list[float]]:
    """Run both ``rounds`` times, alternating which goes first; return both timing lists."""
    ours: list[float] = []
    base: list[float] = []
    for number in range(rounds):
        order = (0, 1) if number % 2 == 0 else (1, 0)
        for side in order:
            prepare()
            gc.collect()
            if side == 0:
                ours.append(timed(measured))
            else:
                base.append(timed(baseline))
    return ours, base


@dataclass(frozen=True)
class Figure:
    """One row of the table."""

    name: str
    ours: list[float]
    base: list[float]
    target: float | None
    baseline_name: str
    paired: bool = True

    @property
    def ours_ms(self) -> float:
        return statistics.median(self.ours)

    @property
    def base_ms(self) -> float:
        return statistics.median(self.base)

    @property
    def ratio(self) -> float:
        return self.ours_ms / self.base_ms if self.base_ms > 0 else float("inf")

    def spread(self) -> str:
        """Return the quartiles of the per-pair ratios."""
        if not self.paired:
            return "-"
        ratios = sorted(a / b for a, b in zip(self.ours, self.base, strict=True) if b > 0)
        if len(ratios) < 2:
            return "-"
        quartiles = statistics.quantiles(ratios, n=4)
        return f"{quartiles[0]:.2f}-{quartiles[2]:.2f}"

    def verdict(self) -> str:
        """Return PASS or FAIL against the target, or ``info`` when there is none."""
        if self.target is None:
            return "info"
        return "PASS" if self.ratio <= self.target else "FAIL"


def render(rows: Sequence[Figure]) -> str:
    """Return the result table as aligned plain text."""
    header = ("figure", "engram ms", "baseline", "baseline ms", "ratio", "pairs p25-p75")
    header += ("target", "result", "runs")
    lines = [header]
    for row in rows:
        lines.append(
            (
                row.name,
                f"{row.ours_ms:.2f}",
                row.baseline_name,
                f"{row.base_ms:.2f}",
                f"{row.ratio:.3f}" if row.ratio < 0.1 else f"{row.ratio:.2f}",
                row.spread(),
                "-" if row.target is None else f"<= {row.target:g}",
                row.verdict(),
                str(len(row.ours)),
            )
        )
    return align(lines, left=(0, 2))


LEGEND: Final = """\
ratio = median engram ms / median baseline ms; pairs p25-p75 = quartiles of the ratios of the
interleaved pairs (a wide range means the machine was noisy during that figure).
baselines (same run, interleaved):
  bare walk   repo.get_walker(), merges skipped, entry.changes() paths into a set, N commits
  tight walk  Walker(store, [HEAD]) with commit.parents, tree_changes vs the parent's tree
  head+cache  Repo.discover, repo.head(), orjson parse of the cache file (no counting)
  cold scan   scan_history with no cache file (the measured side of the first two rows; not
              interleaved with these rows, so no pair quartiles)"""


def say(message: str) -> None:
    """Report progress on stderr, so that stdout holds only the table."""
    print(message, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Build the repository, run every figure and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=500, help="non-merge commits (500)")
    parser.add_argument("--files", type=int, default=3000, help="files in the first tree (3000)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved pairs per figure (7)")
    parser.add_argument("--seed", type=int, default=SEED, help="history seed")
    parser.add_argument("--keep", action="store_true", help="keep the generated repository")
    args = parser.parse_args(argv)
    data = Path(tempfile.mkdtemp(prefix="bench-indexer-"))
    root = data / "repo"
    state = data / "state"
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    try:
        say(f"generating {args.commits} commits over {args.files} files ...")
        build_repo(root, commits=args.commits, files=args.files, seed=args.seed)
        depth = args.commits
        first = scan_history(root, depth=depth, state_dir=state)
        say(
            f"scan: {first.commits_walked} commits, {len(first.changes)} paths, "
            f"{len(first.hotspots)} hotspots, {len(first.candidates)} candidates, "
            f"problems {first.problems}; bare walk paths {bare_walk(root, depth)}"
        )
        tight_walk(root, depth)

        def cold() -> None:
            scan_history(root, depth=depth, state_dir=state)

        def forget() -> None:
            (state / CACHE_FILE).unlink(missing_ok=True)

        rows = []
        say(f"cold scan vs bare walk x{args.rounds} ...")
        ours, base = paired(cold, lambda: bare_walk(root, depth), args.rounds, forget)
        rows.append(Figure("cold scan", ours, base, 1.5, "bare walk"))
        cold_runs = list(ours)
        say(f"cold scan vs tight walk x{args.rounds} ...")
        ours, base = paired(cold, lambda: tight_walk(root, depth), args.rounds, forget)
        rows.append(Figure("cold scan", ours, base, None, "tight walk"))
        cold_runs += ours

        scan_history(root, depth=depth, state_dir=state)  # leave the cache in place
        assert scan_history(root, depth=depth, state_dir=state).unchanged
        rounds = args.rounds * 3
        say(f"re-index, no new commits x{rounds} vs the floor ...")
        unchanged, floor = paired(
            lambda: scan_history(root, depth=depth, state_dir=state),
            lambda: read_floor(root, state / CACHE_FILE),
            rounds,
        )
        rows.append(Figure("re-index, no new commits", unchanged, floor, None, "head+cache"))
        rows.append(
            Figure("re-index, no new commits", unchanged, cold_runs, None, "cold scan", False)
        )

        say(f"re-index after 3 new commits x{args.rounds} ...")
        copy = data / "copy"
        incremental: list[float] = []
        for number in range(args.rounds):
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(root, copy)
            shutil.copy2(state / CACHE_FILE, data / "cache.json")
            add_commits(copy, 3, args.seed + number)
            shutil.copy2(data / "cache.json", state / CACHE_FILE)
            gc.collect()
            incremental.append(timed(lambda: scan_history(copy, depth=depth, state_dir=state)))
        rows.append(
            Figure("re-index after 3 commits", incremental, cold_runs, None, "cold scan", False)
        )
    finally:
        if args.keep:
            say(f"kept {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)
    import dulwich

    print(
        f"engram indexer benchmark: {args.commits} commits, {args.files} files, "
        f"{time.monotonic() - started:.0f} s, {os.cpu_count()} cpus, python "
        f"{sys.version.split()[0]}, dulwich {'.'.join(map(str, dulwich.__version__))}, "
        f"load average {load_before:.1f} at start, {os.getloadavg()[0]:.1f} at end"
    )
    print(render(rows))
    print(LEGEND)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
