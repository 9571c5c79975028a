"""The indexer that mines git history for hotspots and pitfall candidates.

``scan_history`` walks the last ``depth`` non-merge commits reachable from HEAD (every parent of
a merge, newest committer date first, like ``git log --no-merges -n DEPTH``), lists the paths
each one changed, counts them into hotspots, and turns reverts and "fix … again" commits into
pitfall *candidates*. It returns values only: the service decides which memories to write.
This module owns the walk, its cache and ``scan_history``; the tree diffs and renames are in
``gittrees``, the counting and the ``GitScan`` in ``githotspots``, reading a commit's message
and writing its candidate in ``gitreverts``.

What it must not do: run ``git`` in a subprocess; read file contents (blobs are read only to
tell a renamed-and-edited file from a delete plus an add, in commits that both delete and add
files, a few small text files at most: see ``gittrees``); write anything but its cache file in
``state_dir`` (through ``engram.store.files``); or raise for a repository state a user can be
in (no repository, no commits, a shallow or partial clone, a damaged object): those come back
as sentences in ``GitScan.problems``. dulwich is imported inside functions so that
``engram --help`` stays fast; docs/architecture.md keeps dulwich in ``indexer/`` and ``sync/`` only.

Conventions (the facts a reader of the hotspot memory relies on):

- ``changes[path]`` is the number of non-merge commits in the window that touched the file now
  at ``path``. Renames are followed: a commit that renames ``a`` to ``b`` counts once, on
  ``b``, and the older changes to ``a`` count on ``b`` too. A rename is an ``a`` deleted and a
  ``b`` added in the same commit with the same blob, or, when the commit deletes and adds only
  a few files, with at least half of their lines in common; else it is a delete plus an add.
- A deletion counts on the deleted path, so ``changes`` holds paths that no longer exist;
  ``hotspots`` leaves out the paths whose newest change in the window deleted them.
- Merge commits count nothing (what they bring in is counted on the branch's own commits). The
  root commit counts every file it adds. A shallow clone's boundary commit (listed in
  ``.git/shallow``) is walked but its changes are unknown, so it counts nothing.
- Paths are repository-relative (also when ``root`` is a folder inside the work tree), with
  ``/`` separators, decoded as UTF-8 (undecodable bytes replaced).
- Candidates come from the window's non-merge commits only; what makes one, and its text, is
  drawn in ``engram.indexer.gitreverts``.

The cache (``state_dir/git-history.json``) keeps, per commit sha, what the walk learned (date,
tree, parents, changed paths, candidate), plus the counts over the last window. A sha names
immutable content, so an entry never goes stale; only the commits of the last window are kept.
With HEAD unchanged a re-index reads HEAD and that one file and returns the stored result
(``unchanged=True``); after k new commits only those k are read and diffed. A cache that does
not parse or has the wrong shape is ignored and rewritten.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from engram import gitfiles
from engram.errors import InvalidInput
from engram.indexer.anchorrecord import open_repo
from engram.indexer.githotspots import (
    Changeset,
    GitScan,
    assemble,
    count_changes,
    shallow_problem,
)
from engram.indexer.gitreverts import (
    Candidate,
    classify,
    decode_message,
    make_candidate,
    parse_revert,
    subject_key,
)
from engram.indexer.gittrees import RenameFinder, Trees, read_errors
from engram.model import MAX_ITEM_CHARS
from engram.store.files import write_cache

if TYPE_CHECKING:
    from dulwich.objects import Commit
    from dulwich.repo import Repo

__all__ = ["scan_history"]

CACHE_FILE: Final = "git-history.json"
_CACHE_VERSION: Final = 4  # 3: reverts resolved by subject ("u"); 4: also a body line's absent sha
_PROGRESS_CALLS: Final = 100


@dataclass
class _Node:
    """One commit as the walk needs it; read from the object store or from the cache."""

    time: int
    tree: str
    parents: list[str]
    changes: Changeset | None = None
    candidate: Candidate | None = None
    pending: str | None = None  # a revert without its body line: the subject it reverts
    boundary: bool = False  # listed in .git/shallow: its parents are not here
    commit: Commit | None = field(default=None, repr=False)  # only for commits read this run

    def to_json(self, intern: Callable[[str], int]) -> dict[str, Any]:
        """Return the cache entry of this commit, paths as indexes into the cache's table."""
        out: dict[str, Any] = {"t": self.time, "tree": self.tree, "p": self.parents}
        if self.changes is not None:
            touched, deleted, renamed = self.changes
            out["ch"] = [
                [intern(path) for path in touched],
                [intern(path) for path in deleted],
                [[intern(old), intern(new)] for old, new in renamed],
            ]
        if self.candidate is not None:
            out["c"] = asdict(self.candidate)
        if self.pending is not None:
            out["u"] = self.pending
        if self.boundary:
            out["b"] = True
        return out

    @classmethod
    def from_json(cls, raw: Any, paths: list[str]) -> _Node:
        """Rebuild a node from its cache entry; a malformed one raises (see _CACHE_ERRORS)."""
        time, tree, parents = raw["t"], raw["tree"], raw["p"]
        if not (isinstance(time, int) and isinstance(tree, str) and _str_list(parents)):
            raise ValueError("cache entry has bad fields")
        changes: Changeset | None = None
        if "ch" in raw:
            touched, deleted, renamed = raw["ch"]
            changes = (
                [paths[index] for index in touched],
                [paths[index] for index in deleted],
                [[paths[old], paths[new]] for old, new in renamed],
            )
        candidate = _candidate_from_json(raw["c"]) if "c" in raw else None
        pending = raw.get("u")
        if pending is not None and not isinstance(pending, str):
            raise ValueError("cache entry has a bad pending revert")
        return cls(time, tree, list(parents), changes, candidate, pending, raw.get("b") is True)


def _candidate_from_json(raw: Any) -> Candidate:
    fields = dict(raw)
    fields["files"] = tuple(fields["files"])
    candidate = Candidate(**fields)
    if not all(isinstance(value, str) for value in (*candidate.files, candidate.sha)):
        raise ValueError("cache entry has a bad candidate")
    return candidate


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


# What a cache written by hand or torn by a crash can raise while it is read.
_CACHE_ERRORS: Final = (KeyError, TypeError, ValueError, IndexError, AttributeError)


@dataclass
class _Cache:
    """The cache file: the last HEAD indexed, its window's counts, and what each commit changed.

    Paths are stored once, in a table, and referred to by index; the counts over the whole
    window are stored too, so that a re-index with HEAD unchanged does no counting at all.
    """

    head: str
    depth: int
    complete: bool  # the walk ran out of history before reaching depth
    shallow: list[str]
    window: list[str]
    commits: dict[str, Any]  # sha -> raw entry, decoded on demand by node()
    paths: list[str]
    counts: list[int]  # per path over the whole window, aligned with paths
    gone: list[int]  # indexes of the paths whose newest change deleted them

    @classmethod
    def load(cls, path: Path) -> _Cache | None:
        """Read the cache, or return None when it is missing, unreadable or malformed."""
        import orjson

        try:
            raw = orjson.loads(path.read_bytes())
            if raw.get("version") != _CACHE_VERSION:
                return None
            cache = cls(
                head=raw["head"],
                depth=raw["depth"],
                complete=raw["complete"],
                shallow=raw["shallow"],
                window=raw["window"],
                commits=raw["commits"],
                paths=raw["paths"],
                counts=raw["counts"],
                gone=raw["gone"],
            )
            commits = cache.commits
            if not (
                isinstance(cache.head, str)
                and isinstance(cache.depth, int)
                and isinstance(cache.complete, bool)
                and _str_list(cache.shallow)
                and _str_list(cache.window)
                and isinstance(commits, dict)
                and all(isinstance(commits.get(sha), dict) for sha in cache.window)
                and _str_list(cache.paths)
                and isinstance(cache.counts, list)
                and len(cache.counts) == len(cache.paths)
                and all(type(count) is int for count in cache.counts)
                and isinstance(cache.gone, list)
            ):
                return None
        except (OSError, *_CACHE_ERRORS):
            return None
        return cache

    def node(self, sha: str) -> _Node | None:
        """Return a cached commit, or None if it is not cached (or its entry is malformed)."""
        raw = self.commits.get(sha)
        if raw is None:
            return None
        try:
            return _Node.from_json(raw, self.paths)
        except _CACHE_ERRORS:
            return None

    @staticmethod
    def save(
        path: Path,
        *,
        head: str,
        depth: int,
        complete: bool,
        shallow: list[str],
        window: list[str],
        nodes: dict[str, _Node],
        counts: dict[str, int],
        gone: set[str],
    ) -> str | None:
        """Write the cache atomically; return a problem sentence if it could not be written."""
        import orjson

        index: dict[str, int] = {}

        def intern(name: str) -> int:
            number = index.get(name)
            if number is None:
                number = index[name] = len(index)
            return number

        commits = {sha: node.to_json(intern) for sha, node in nodes.items()}
        for name in counts:
            intern(name)
        data = orjson.dumps(
            {
                "version": _CACHE_VERSION,
                "head": head,
                "depth": depth,
                "complete": complete,
                "shallow": shallow,
                "window": window,
                "paths": list(index),
                "counts": [counts.get(name, 0) for name in index],
                "gone": sorted(index[name] for name in gone),
                "commits": commits,
            }
        )
        try:
            # No fsync: a torn cache is detected on read and rebuilt, at the cost of one walk.
            write_cache(path.parent, path.name, data)
        except OSError as exc:
            return (
                f"could not save the history cache {path}: {exc.strerror or exc}; "
                "the next index walks the whole window again"
            )
        return None

    def scan(self, head: str, depth: int, threshold: int) -> GitScan | None:
        """Answer from the cache alone when HEAD is the one indexed; else return None."""
        if head != self.head:
            return None
        window = self.window
        try:
            if depth < len(window):
                window = window[:depth]
                nodes = [self.node(sha) for sha in window]
                changesets = [node.changes for node in nodes if node is not None]
                if len(changesets) < len(window) or None in changesets:
                    return None
                counts, gone = count_changes(cast(list[Changeset], changesets))
            elif depth <= self.depth or self.complete:
                paths = self.paths
                counts = {
                    name: count for name, count in zip(paths, self.counts, strict=True) if count
                }
                gone = {paths[number] for number in self.gone}
            else:
                return None  # a deeper window than the one indexed
            entries = [self.commits[sha] for sha in window]
            candidates = [_candidate_from_json(entry["c"]) for entry in entries if "c" in entry]
            pairs = zip(window, entries, strict=True)
            unresolved = [(sha, entry["u"]) for sha, entry in pairs if "u" in entry]
            boundary = any(entry.get("b") for entry in entries)
        except _CACHE_ERRORS:
            return None
        problems = [shallow_problem(len(window))] if boundary else []
        return assemble(
            head, window, counts, gone, candidates, threshold, problems, True, unresolved
        )


class _Missing(Exception):
    """A commit the walk needs is not in the object store (shallow, partial or broken)."""


class _Walk:
    """One scan: the date-ordered walk, the diffs, and the candidates."""

    def __init__(
        self,
        repo: Repo,
        cache: _Cache | None,
        depth: int,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        self.repo = repo
        self.store = repo.object_store
        self.trees = Trees(repo.object_store, repo.object_format.oid_length)
        self.cache = cache
        self.depth = depth
        self.progress = progress
        self.nodes: dict[str, _Node] = {}
        self.shallow = {sha.decode("ascii") for sha in repo.get_shallow()}
        self.problems: list[str] = []
        self.missing: set[str] = set()
        self.errors = read_errors()
        self.rename_finder = RenameFinder(repo.object_store, self.errors)
        self.popped: list[str] = []  # commits taken off the queue: the ones worth caching

    def node(self, sha: str) -> _Node:
        """Return the walk's view of a commit, from the cache or else the object store."""
        node = self.nodes.get(sha)
        if node is not None:
            return node
        node = self.cache.node(sha) if self.cache is not None else None
        if node is None:
            from dulwich.objects import Commit

            try:
                commit = self.store[cast(Any, sha.encode("ascii"))]
            except self.errors as exc:
                raise _Missing(sha) from exc
            if not isinstance(commit, Commit):
                raise _Missing(sha)
            node = _Node(
                time=commit.commit_time,
                tree=commit.tree.decode("ascii"),
                parents=[parent.decode("ascii") for parent in commit.parents],
                commit=commit,
            )
        if sha in self.shallow:
            node.parents = []
            node.boundary = True
        self.nodes[sha] = node
        return node

    def walk(self, head: str) -> tuple[list[str], bool]:
        """Walk newest first from head; return the window (non-merge shas) and completeness."""
        heap: list[tuple[int, str]] = []
        queued: set[str] = set()
        try:
            heap.append((-self.node(head).time, head))
        except _Missing:
            self.problems.append(
                f"cannot read HEAD commit {head[:12]}: the object is missing or corrupt "
                "(run `git fsck`); git history was not indexed"
            )
            return [], True
        queued.add(head)
        window: list[str] = []
        depth = self.depth
        every = max(1, depth // _PROGRESS_CALLS)
        while heap and len(window) < depth:
            _, sha = heapq.heappop(heap)
            node = self.nodes[sha]
            self.popped.append(sha)
            lost: str | None = None
            for parent in node.parents:
                if parent in queued:
                    continue
                try:
                    heapq.heappush(heap, (-self.node(parent).time, parent))
                except _Missing:
                    lost = parent
                    continue
                queued.add(parent)
            if lost is not None:
                self.missing.add(sha)
                self.problems.append(
                    f"history is incomplete: the parent {lost[:12]} of commit {sha[:12]} is "
                    "missing from the object store (a partial or damaged clone); hotspots "
                    "count only the commits before it"
                )
            if len(node.parents) > 1:
                continue  # merges are not walked into the window, their parents are
            if lost is not None:
                node.boundary = True
            if node.changes is None:
                node.changes = self.diff(sha, node)
            if node.commit is not None and node.candidate is None:
                node.candidate, node.pending = _candidate(self, sha, node, node.commit)
            window.append(sha)
            if self.progress is not None and len(window) % every == 0:
                self.progress(len(window), depth)
        complete = not heap
        if self.progress is not None:
            total = len(window) if complete else depth
            self.progress(len(window), total)
        return window, complete

    def diff(self, sha: str, node: _Node) -> Changeset:
        """List the paths a non-merge commit changed against its parent (none for a boundary)."""
        if node.boundary:
            return ([], [], [])
        parent_tree = self.nodes[node.parents[0]].tree.encode() if node.parents else None
        touched: list[bytes] = []
        added: dict[bytes, bytes] = {}  # path -> hex blob sha
        deleted: dict[bytes, bytes] = {}
        self.trees.next_commit()
        try:
            self.trees.diff(parent_tree, node.tree.encode(), b"", touched, added, deleted)
        except self.errors as exc:
            self.problems.append(
                f"cannot read the trees of commit {sha[:12]} ({type(exc).__name__}); "
                "its changes are not counted (run `git fsck`)"
            )
            return ([], [], [])
        renames: list[list[bytes]] = []
        if added and deleted:
            renames = self.rename_finder.renames(added, deleted)
        decode = _decode_path
        return (
            sorted(decode(path) for path in [*touched, *added]),
            sorted(decode(path) for path in deleted),
            sorted([decode(old), decode(new)] for old, new in renames),
        )

    def resolve(self, prefix: str) -> str:
        """Return the full sha a revert names: itself if full, else the one commit it prefixes."""
        prefix = prefix.lower()
        if len(prefix) in (40, 64):
            return prefix
        cached = self.cache.commits if self.cache is not None else {}
        known = [sha for sha in (*self.nodes, *cached) if sha.startswith(prefix)]
        if len(set(known)) == 1:
            return known[0]
        # Some object stores (e.g. a bare in-memory one) do not implement iter_prefix: then the
        # prefix is kept as written, which only means a revert of an unknown commit.
        errors: tuple[type[BaseException], ...] = (*self.errors, NotImplementedError)
        found: list[str] = []
        try:
            for sha in self.store.iter_prefix(prefix.encode("ascii")):
                found.append(sha.decode("ascii"))
                if len(found) > 1:
                    break
        except errors:
            return prefix
        return found[0] if len(found) == 1 else prefix

    def resolve_pending(self, window: Sequence[str]) -> None:
        """Give each revert read this run without its body line the commit its subject names.

        The reverted commit is the nearest earlier one in the window (older, so later in it)
        whose subject is the quoted one, with or without a squash merge's ``(#N)``. A revert
        matched nowhere keeps its ``pending`` subject and is reported; a cached one is not
        tried again (its earlier commits do not change), until ``index --rebuild``.
        """
        nodes = self.nodes
        waiting = [
            at
            for at, sha in enumerate(window)
            if nodes[sha].pending is not None and nodes[sha].commit is not None
        ]
        if not waiting:
            return
        nearest: dict[str, str] = {}  # subject (and without its "(#N)") -> nearest older sha
        for at in range(len(window) - 1, waiting[0] - 1, -1):
            sha = window[at]
            node = nodes[sha]
            if node.pending is not None and node.commit is not None:
                target = nearest.get(node.pending)
                if target is not None:
                    node.candidate, node.pending = _candidate(
                        self, sha, node, node.commit, inferred=target
                    )
            subject = self.window_subject(sha, node)
            if subject is not None:
                nearest[subject] = nearest[subject_key(subject)] = sha
        for at in waiting:  # no subject matched: a body line's commit is still the best guess
            node = nodes[window[at]]
            if node.pending is not None and node.commit is not None:
                found, pending = _candidate(self, window[at], node, node.commit, absent_ok=True)
                if found is not None:
                    node.candidate, node.pending = found, pending

    def has_commit(self, sha: str) -> bool:
        """Tell whether a commit is in this clone: read by the walk, or in the object store."""
        from dulwich.objects import Commit

        if sha in self.nodes:
            return True
        if len(sha) not in (40, 64):
            return False  # a prefix that resolved to no one commit here
        errors: tuple[type[BaseException], ...] = (*self.errors, ValueError, AssertionError)
        try:
            return isinstance(self.store[cast(Any, sha.encode("ascii"))], Commit)
        except errors:  # dulwich asserts on a name that is no sha
            return False

    def window_subject(self, sha: str, node: _Node) -> str | None:
        """Return the subject of a commit of the window, read again if it came from the cache."""
        if node.commit is not None:
            return decode_message(node.commit).partition("\n")[0].strip()
        return self.subject_of(sha)

    def subject_of(self, sha: str) -> str | None:
        """Return the subject line of a commit, or None if it is not here."""
        from dulwich.objects import Commit

        try:
            commit = self.store[cast(Any, sha.encode("ascii"))]
        except self.errors:
            return None
        if not isinstance(commit, Commit):
            return None
        return decode_message(commit).partition("\n")[0].strip()


def _decode_path(path: bytes) -> str:
    return path.decode("utf-8", "replace")


def _candidate(
    walk: _Walk,
    sha: str,
    node: _Node,
    commit: Commit,
    inferred: str | None = None,
    *,
    absent_ok: bool = False,
) -> tuple[Candidate | None, str | None]:
    """Build the candidate a commit stands for, if it is a revert, reapply or fix-again.

    Returns (candidate, None), or (None, sought subject) for a revert without a ``This reverts
    commit`` line, or whose line names a commit this clone does not have (a pull request's
    branch commit, when the squash-merged one landed): ``_Walk.resolve_pending`` finds the
    commit of that subject and calls back with it as ``inferred``, or, when none has it, with
    ``absent_ok`` (the line's commit is taken as named).
    """
    message = commit.message
    first = message.split(b"\n", 1)[0]
    # Cheap byte test first: almost no commit is either, and most never need decoding.
    lowered = first.lower()
    if not (first.startswith((b"Revert", b"Reapply")) or b"again" in lowered or b"fix" in lowered):
        return None, None
    # The message is untrusted, and titles are cut from it: scrubbed before anything is taken.
    from engram.store.redact import default_scrubber

    text = default_scrubber().text(decode_message(commit))[0]
    subject, _, body = text.partition("\n")
    subject = subject.strip()
    found = classify(subject, body)
    if found is None:
        return None, None
    kind, target = found
    parsed = parse_revert(subject) if kind in ("revert", "reapply") else None
    named = target  # what the body line says, if it has one
    if parsed is not None:
        if inferred is not None:
            target = inferred
        elif target is None or not (absent_ok or walk.has_commit(walk.resolve(target))):
            return None, parsed[2]
    assert node.changes is not None
    touched, deleted, renamed = node.changes
    files = sorted({*touched, *deleted, *(path for pair in renamed for path in pair)})
    files = [path for path in files if len(path) <= MAX_ITEM_CHARS]
    reverted_sha = walk.resolve(target) if target is not None else None
    known = None
    if parsed is not None and reverted_sha is not None and len(reverted_sha) in (40, 64):
        known = walk.subject_of(reverted_sha)
    candidate = make_candidate(
        sha,
        commit,
        files,
        text,
        subject,
        kind=kind,
        parsed=parsed,
        reverted_sha=reverted_sha,
        known=known,
        inferred=inferred,
        named=named,
    )
    return candidate, None


def _empty(problem: str, head: str | None = None) -> GitScan:
    return GitScan(head, 0, {}, [], [], [problem], unchanged=False, unresolved=[])


def _open_repo(root: Path) -> Repo | str:
    """Open the repository holding root (root or a folder above it); else say why not."""
    from dulwich.errors import NotGitRepository

    if not root.is_dir():
        return f"not a git repository: {root} is not a folder; git history was not indexed"
    try:
        return open_repo(root, objects=True)  # history is walked
    except gitfiles.GitUnreadable as exc:
        return f"{exc}; git history was not indexed ({gitfiles.HINT})"
    except NotGitRepository:
        return (
            f"not a git repository: {root} (nor any folder above it); "
            "git history was not indexed (run `git init` to start one)"
        )
    except (OSError, ValueError, KeyError) as exc:
        return f"cannot open the git repository at {root}: {exc}; git history was not indexed"


def scan_history(
    root: Path,
    *,
    depth: int = 500,
    threshold: int = 8,
    state_dir: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> GitScan:
    """Walk the last ``depth`` non-merge commits from HEAD; count hotspots, find candidates."""
    if depth < 1:
        raise InvalidInput(f"git depth must be at least 1, got {depth}")
    if threshold < 1:
        raise InvalidInput(f"hotspot threshold must be at least 1, got {threshold}")
    opened = _open_repo(Path(root))
    if isinstance(opened, str):
        return _empty(opened)
    with opened as repo:
        try:
            head = repo.head().decode("ascii")
        except KeyError:
            return _empty("the repository has no commits yet; git history was not indexed")
        cache_path = state_dir / CACHE_FILE if state_dir is not None else None
        cache = _Cache.load(cache_path) if cache_path is not None else None
        shallow = sorted(sha.decode("ascii") for sha in repo.get_shallow())
        if cache is not None and cache.shallow != shallow:
            cache = None  # deepened or made shallower: boundary commits changed meaning
        if cache is not None:
            known = cache.scan(head, depth, threshold)
            if known is not None:
                if progress is not None:
                    progress(known.commits_walked, known.commits_walked)
                return known
        walk = _Walk(repo, cache, depth, progress)
        window, complete = walk.walk(head)
        walk.resolve_pending(window)
        nodes = walk.nodes
        counts, gone = count_changes(cast(list[Changeset], [nodes[sha].changes for sha in window]))
        candidates = [found for sha in window if (found := nodes[sha].candidate) is not None]
        unresolved = [(sha, sought) for sha in window if (sought := nodes[sha].pending)]
        problems = walk.problems
        if any(nodes[sha].boundary and sha not in walk.missing for sha in window):
            problems.append(shallow_problem(len(window)))
        if cache_path is not None and window:
            problem = _Cache.save(
                cache_path,
                # Never "unchanged" while history is known to be missing: no head, no window.
                head="" if walk.missing else head,
                depth=depth,
                complete=complete,
                shallow=shallow,
                window=[] if walk.missing else window,
                # Commits only queued are left out: they are read again (a few, one per
                # branch tip at the window's edge) so that every cached commit has changes.
                nodes={sha: nodes[sha] for sha in walk.popped if sha not in walk.missing},
                counts={} if walk.missing else counts,
                gone=set() if walk.missing else gone,
            )
            if problem is not None:
                problems.append(problem)
        return assemble(
            head, window, counts, gone, candidates, threshold, problems, False, unresolved
        )
