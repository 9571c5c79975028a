"""Checking staleness anchors: how far HEAD moved since the version of a file a memory cites.

``record_anchors`` (``engram.indexer.anchorrecord``) hashes the cited files when a memory is
saved (``{"path", "blob"}``, README). This module owns ``AnchorChecker``: ``check``
compares each anchor with HEAD and, for the files that differ, counts the commits that changed
them since, so that recall, get, why and check can say "may be stale: src/auth.py changed in 3
commits since"; ``edited`` tells the uncommitted edits.

What it must not do: run ``git`` in a subprocess; write anything but its cache file
(``state_dir/anchors.json``); or raise for a repository state a user can be in (no repository,
no commits, an unborn branch, a shallow clone, a damaged or missing object, an unreadable index):
what cannot be known is left out (``record_anchors``) or reported as a lower bound
(``Stale.capped``). dulwich is imported inside functions so that ``engram --help`` stays fast;
docs/architecture.md keeps dulwich in ``indexer/`` and ``sync/`` only.

Conventions (the facts a reader of a "may be stale" line relies on):

- An anchor's ``path`` is relative to the project root (which may be a folder inside the work
  tree), with ``/`` separators; its ``blob`` is the SHA-1 git blob id of the file's bytes as
  they were, hashed without filters (``git hash-object --no-filters``); a tracked symlink is
  hashed as git stores it, by its target.
- Fresh: HEAD's blob at the path equals the anchored blob. Fresh anchors are not reported.
- Otherwise the commits reachable from HEAD are walked newest committer time first (like ``git
  log -- path``). A non-merge commit counts when its blob at the path differs from its first
  parent's (a root commit counts when it has the file); a merge commit counts nothing, and both
  sides of a merge are walked. A commit holding the anchored blob is where the memory's version
  lives: it and its ancestors are not counted (like ``git log HEAD ^that-commit``). The walk
  also ends at the first commit older than ``since`` (the memory's creation time, rounded up to
  whole seconds as commit times are), and after ``max_walk`` commits walked, counted or not
  (``capped=True``: "at least N"). A shallow clone's boundary commit counts nothing.
- The cache is keyed by HEAD only: deepening a shallow clone without moving HEAD keeps the old
  answers until HEAD moves.
- Count 0 with a differing blob: when the walk ended at ``since``, no commit made after the
  memory was written touched the file (the anchored version was uncommitted work, still not
  committed or thrown away), and the anchor is treated as fresh. Otherwise (a shallow clone, a
  missing object, history rewritten, an "evil" merge) it is reported as ``commits=1,
  capped=True``: changed in at least one commit.
- ``deleted`` says the path is not a file in HEAD's tree.

Speed: results are cached per HEAD, in memory and in ``state_dir/anchors.json`` (written
atomically; a file that does not parse, has the wrong shape or names another HEAD is ignored
and rewritten). ``head()`` reads ``HEAD`` and one ref file (or ``packed-refs``, parsed once per
change), so a warm ``check()`` reads no git objects at all. Walks descend each commit's tree to
the one path (no tree diffs); the commits and trees read are remembered (bounded), so anchors
checked together, and later walks, read each object once.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import math
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar, cast

from engram.fileio import NotAFile, kind_of
from engram.gitfiles import check_object
from engram.indexer.anchorrecord import (
    blob_of_file,
    clean_path,
    file_stat,
    in_repo,
    is_file,
    objects_folder,
    open_repo,
    read_object,
    repo_errors,
)

if TYPE_CHECKING:
    from dulwich.repo import Repo

__all__ = ["CACHE_FILE", "AnchorChecker", "Stale"]

CACHE_FILE: Final = "anchors.json"
_WORKTREE_BYTES: Final = 16 * 1024 * 1024  # as record_anchors: bigger files are not anchored
_CACHE_VERSION: Final = 1
_HEX_SHA: Final = re.compile(r"[0-9a-f]{40}")
_HEX_REF: Final = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
# Refs that belong to one worktree; every other ref lives in the common git folder.
_PER_WORKTREE: Final = ("HEAD", "refs/bisect/", "refs/worktree/", "refs/rewritten/")
_MAX_SYMREF_DEPTH: Final = 5
_MAX_REF_BYTES: Final = 4096  # a ref file holds a sha or "ref: NAME"; more is not a ref
# Commits and results kept between walks: immutable, so only the size needs a bound.
_MAX_MEMO: Final = 50_000
_MAX_TREE_ENTRIES: Final = 200_000  # parsed tree entries kept (some 40 MB at worst)
# Uncounted commits (ancestors of the anchored version) a walk may still pop, per max_walk.
_EXCLUDED_FACTOR: Final = 4
_RETRY_DISCOVERY: Final = 1.0  # seconds between looks for a repository that was not there


class Stale(NamedTuple):
    """An anchor whose file differs at HEAD from the version the memory was written against."""

    path: str  # as in the anchor
    commits: int  # commits that changed the file since the anchored version (>= 1)
    deleted: bool  # the file is not in HEAD's tree any more
    capped: bool  # ``commits`` is a lower bound: "changed in at least N commits"


def _prefix(root: Path, work_tree: Path) -> str | None:
    """Return root relative to the work tree ('' at the top), None if it is outside."""
    try:
        relative = root.resolve().relative_to(work_tree.resolve())
    except (OSError, ValueError):
        return None
    text = relative.as_posix()
    return "" if text == "." else text


def _discover(root: Path) -> Repo | None:
    """Open the repository holding root (root or a folder above it), or None."""
    try:
        if not root.is_dir():
            return None
        return open_repo(root)  # GitUnreadable (an OSError): a FIFO where a file was
    except repo_errors():
        return None


class _Commit(NamedTuple):
    """What a walk needs from one commit."""

    time: int
    tree: bytes
    parents: tuple[bytes, ...]


class _Result(NamedTuple):
    """A cached answer for one (path, blob, since) at one HEAD; None in the cache means fresh."""

    commits: int
    deleted: bool
    capped: bool


_T = TypeVar("_T")
_Key = tuple[str, str, int | None]  # (repository path, anchored blob, since rounded up)
# A work-tree file as looked at: (removed, its blob id or None), or None when it says nothing.
_InTree = tuple[bool, str | None] | None


class AnchorChecker:
    """Checks anchors against HEAD; one per project root, long-lived in a server process."""

    def __init__(self, root: Path, state_dir: Path | None = None, *, max_walk: int = 500) -> None:
        self.root = Path(root)
        self.cache_path = state_dir / CACHE_FILE if state_dir is not None else None
        self.max_walk = max(1, max_walk)
        self._repo: Repo | None = None
        self._looked_at = -math.inf  # monotonic time of the last failed discovery
        self._gitdir: Path | None = None
        self._commondir: Path | None = None
        self._prefix = ""
        # Each ref file read (loose refs, packed-refs): its stat signature and what it says,
        # read again once the signature changes (``_kept``).
        self._files: dict[str, tuple[tuple[int, int, int, int, int], Any]] = {}
        self._memo_head: str | None = None
        self._memo: dict[_Key, _Result | None] = {}
        self._commits: dict[bytes, _Commit] = {}
        self._trees: dict[bytes, dict[bytes, tuple[int, bytes]]] = {}
        self._tree_entries = 0
        self._lock = threading.RLock()
        self._deferred = False  # inside look_many: save the cache once at the end
        self._dirty: str | None = None
        # Each anchor path as the repository names it, under ``_prefix`` (``_key``).
        self._git_paths: dict[str, str | None] = {}
        # Work-tree blobs by path, valid while the file's stat is unchanged (``edited``).
        self._worktree: dict[str, tuple[tuple[int, int, int, int, int], str | None]] = {}

    # --- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the repository (the checker opens it again when next asked)."""
        with self._lock:
            if self._repo is not None:
                self._repo.close()
                self._repo = None

    def __enter__(self) -> AnchorChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> Repo | None:
        """Return the open repository, discovering it once (and again a second after a miss)."""
        if self._repo is not None:
            return self._repo
        now = time.monotonic()
        if now - self._looked_at < _RETRY_DISCOVERY:
            return None
        repo = _discover(self.root)
        if repo is None:
            self._looked_at = now
            return None
        prefix = _prefix(self.root, Path(repo.path))
        try:
            gitdir, commondir = Path(repo.controldir()), Path(repo.commondir())
        except repo_errors():
            prefix = None
        if prefix is None:
            repo.close()
            self._looked_at = now
            return None
        if prefix != self._prefix:
            self._git_paths.clear()  # the paths a prefix resolved
        self._repo, self._prefix = repo, prefix
        self._gitdir, self._commondir = gitdir, commondir
        return repo

    # --- HEAD ---------------------------------------------------------------------------------

    def head(self) -> str | None:
        """Return HEAD's commit sha, or None (no repository, no commits); reads two small files."""
        with self._lock:
            return self._head()

    def _head(self) -> str | None:
        repo = self._open()
        if repo is None:
            return None
        try:
            found = self._read_ref("HEAD", 0)
        except NotAFile:
            return None  # nor would dulwich read it: it would wait on a FIFO forever
        if found is not None:
            return found
        # Odd layouts (reftable, a damaged ref) and unborn branches: ask dulwich.
        try:
            sha = repo.refs[cast(Any, b"HEAD")].decode("ascii")
        except repo_errors():
            return None
        return sha if _HEX_REF.fullmatch(sha) else None

    def _read_ref(self, name: str, depth: int) -> str | None:
        """Resolve a ref from loose files and packed-refs; None when it cannot be read here."""
        assert self._gitdir is not None and self._commondir is not None
        if depth > _MAX_SYMREF_DEPTH or name.startswith("/") or ".." in name.split("/"):
            return None
        folder = self._gitdir if name.startswith(_PER_WORKTREE) else self._commondir
        text = self._kept(os.path.join(folder, name), _MAX_REF_BYTES, str.strip) or ""
        if text.startswith("ref:"):
            return self._read_ref(text[4:].strip(), depth + 1)
        if _HEX_REF.fullmatch(text):
            return text
        if text:
            return None
        return self._packed_refs().get(name)

    def _kept(self, path: str, limit: int, parse: Callable[[str], _T]) -> _T | None:
        """Return ``parse`` of a git file's text (at most ``limit`` characters, -1: all), None
        when there is none or it cannot be read; raise NotAFile when something else than a
        file (a folder, a FIFO) stands at its path.

        Kept by the file's stat signature: git replaces a ref file (a new inode) or rewrites
        it, and either changes the signature; a stat costs a tenth of reading the file.
        """
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            self._files.pop(path, None)
            return None
        if not stat.S_ISREG(info.st_mode):  # a FIFO would hold the read forever
            raise NotAFile(path, kind_of(info.st_mode))
        signature = file_stat(info)
        known = self._files.get(path)
        if known is not None and known[0] == signature:
            return cast(_T, known[1])
        try:
            with open(path, encoding="utf-8") as handle:
                value = parse(handle.read(limit))
        except (OSError, UnicodeError, ValueError):
            return None
        if len(self._files) >= _MAX_MEMO:
            self._files.clear()
        self._files[path] = (signature, value)
        return value

    def _packed_refs(self) -> dict[str, str]:
        """Return packed-refs as {name: sha} (``_kept``)."""
        assert self._commondir is not None
        path = os.path.join(self._commondir, "packed-refs")
        return self._kept(path, -1, _parse_packed) or {}  # -1: the whole file

    # --- checking -----------------------------------------------------------------------------

    def check(
        self, anchors: Sequence[Mapping[str, Any]], *, since: float | None = None
    ) -> list[Stale]:
        """Return one Stale per anchor whose file differs at HEAD, in anchor order."""
        with self._lock:  # a server may ask from several threads; the memos are shared
            return self._check(anchors, since)

    def look_many(
        self,
        items: Sequence[tuple[Sequence[Mapping[str, Any]], float | None]],
        own: Collection[str] = (),
    ) -> list[tuple[list[Stale], list[tuple[str, bool]]]]:
        """Return ``check`` and ``edited`` of several memories' anchors, ``(anchors, since)``
        each, in one pass.

        HEAD is read and the work tree resolved once, each anchor's key is worked out once,
        and a file several memories anchor is looked at once; the cache is saved once.
        ``edited`` leaves out the files a commit changed (``check`` says them) and those in
        ``own`` (the asking session's own edits: its work in progress).
        """
        with self._lock:
            self._deferred = True
            try:
                head = self._head()
                tree = self._tree()
                seen: dict[str, _InTree] = {}
                out = []
                for anchors, since in items:
                    keyed: list[tuple[Mapping[str, Any], _Key]] = []
                    stale = self._check(anchors, since, head, keyed)
                    changed = {item.path for item in stale}
                    if own:
                        keyed = [pair for pair in keyed if pair[0]["path"] not in own]
                    out.append((stale, self._edits(keyed, changed, tree, seen)))
            finally:
                self._deferred = False
            if self._dirty is not None:
                self._save(self._dirty)
                self._dirty = None
            return out

    def _check(
        self,
        anchors: Sequence[Mapping[str, Any]],
        since: float | None,
        head: str | None = "",
        keyed: list[tuple[Mapping[str, Any], _Key]] | None = None,
    ) -> list[Stale]:
        """Return the anchors' Stale at HEAD; add each well-formed anchor with its key to
        ``keyed`` when given."""
        head = self._head() if head == "" else head
        bucket = _bucket(since)
        if head is None or not anchors or bucket is False:
            if keyed is not None:
                for anchor in anchors:
                    key = self._key(anchor, None)
                    if key is not None:
                        keyed.append((anchor, key))
            return []
        if head != self._memo_head:
            self._memo_head = head
            self._memo = self._load(head)
        stale: list[Stale] = []
        missed = False
        for anchor in anchors:
            key = self._key(anchor, bucket)
            if key is None:
                continue
            if keyed is not None:
                keyed.append((anchor, key))
            if key in self._memo:
                result = self._memo[key]
            else:
                result = self._compute(head, key)
                if len(self._memo) >= _MAX_MEMO:
                    self._memo.clear()
                self._memo[key] = result
                missed = True
            if result is not None:
                stale.append(Stale(anchor["path"], *result))
        if missed:
            if self._deferred:
                self._dirty = head
            else:
                self._save(head)
        return stale

    def edited(self, anchors: Sequence[Mapping[str, Any]]) -> list[tuple[str, bool]]:
        """Return ``(path, removed)`` for each anchored file the work tree holds differently.

        This is the change no commit shows yet: the file was edited (or removed) after the
        memory was written and the edit is not committed. One ``lstat`` per anchor; a file is
        hashed again only when its size, times or inode changed. Globs, malformed anchors,
        folders, files over 16 MiB and paths outside the work tree say nothing.
        """
        with self._lock:
            keyed = [(anchor, key) for anchor in anchors if (key := self._key(anchor, None))]
            return self._edits(keyed, set(), self._tree(), {})

    def _tree(self) -> tuple[str, Path] | None:
        """Return the work tree as text ending in a separator (its files' paths are joined to
        it) and resolved, or None without one; call under the lock."""
        repo = self._open()
        if repo is None:
            return None
        try:
            real_top = Path(repo.path).resolve()
        except OSError:
            return None
        return os.path.join(repo.path, ""), real_top

    def _edits(
        self,
        keyed: Sequence[tuple[Mapping[str, Any], _Key]],
        changed: Collection[str],
        tree: tuple[str, Path] | None,
        seen: dict[str, _InTree],
    ) -> list[tuple[str, bool]]:
        """Return ``edited`` of one memory's well-formed anchors but those in ``changed``;
        ``seen`` keeps each file's state for the next memory of the same question."""
        found: list[tuple[str, bool]] = []
        if tree is None:
            return found
        top, real_top = tree
        for anchor, (git_path, blob, _) in keyed:
            path = anchor["path"]
            if path in changed:
                continue
            if git_path not in seen:
                seen[git_path] = self._worktree_blob(top, real_top, git_path)
            state = seen[git_path]
            if state is None:
                continue
            removed, current = state
            if removed:
                found.append((str(path), True))
            elif current is not None and current != blob:
                found.append((str(path), False))
        return found

    def _worktree_blob(self, top: str, real_top: Path, git_path: str) -> _InTree:
        """Return (removed, the file's blob id or None) of a path in the work tree (``top``,
        ending in a separator), or None when it says nothing (unreadable, a folder, too big);
        call under the lock."""
        try:
            info = os.lstat(top + git_path)
        except FileNotFoundError:
            return True, None
        except (OSError, ValueError):
            return None
        signature = file_stat(info)
        known = self._worktree.get(git_path)
        if known is not None and known[0] == signature:
            return False, known[1]
        try:
            current = blob_of_file(Path(top), real_top, git_path, _WORKTREE_BYTES)
        except (OSError, UnicodeError, ValueError):
            return None
        if len(self._worktree) >= _MAX_MEMO:
            self._worktree.clear()
        self._worktree[git_path] = (signature, current)
        return False, current

    def _key(self, anchor: Mapping[str, Any], bucket: int | None) -> _Key | None:
        """Return the cache key of a well-formed anchor, None for a malformed one."""
        # A parsed record's anchor is a dict: the ABC check is for the rare other mapping.
        if type(anchor) is not dict and not isinstance(anchor, Mapping):
            return None
        path, blob = anchor.get("path"), anchor.get("blob")
        if not isinstance(blob, str) or not _HEX_SHA.fullmatch(blob):
            return None
        git_path: str | None
        if isinstance(path, str):  # the same few files are anchored again and again
            if path in self._git_paths:
                git_path = self._git_paths[path]
            else:
                if len(self._git_paths) >= _MAX_MEMO:
                    self._git_paths.clear()
                git_path = self._git_paths[path] = self._git_path(path)
        else:
            git_path = self._git_path(path)
        if git_path is None:
            return None
        return (git_path, blob, bucket)

    def _git_path(self, path: Any) -> str | None:
        """Return an anchor's path as the repository names it, None when it names none."""
        clean = clean_path(path)
        return in_repo(self._prefix, clean) if clean is not None else None

    def _compute(self, head: str, key: _Key) -> _Result | None:
        """Compare one anchor with HEAD and count the changes; None when it is fresh."""
        repo = self._repo
        if repo is None:
            return None
        git_path, blob, since = key
        try:
            parts = tuple(git_path.encode("utf-8").split(b"/"))
        except UnicodeError:
            return None
        errors = repo_errors()
        try:
            head_commit = self._commit(repo, head.encode("ascii"))
            if head_commit is None:
                return None  # HEAD names a missing object: nothing can be said
            at_head = self._blob_at(repo, head_commit.tree, parts)
        except errors:
            return None
        if at_head == blob.encode("ascii"):
            return None
        deleted = at_head is None
        # A version git holds bounds the walk itself (its commits and their ancestors are not
        # counted): the memory's time is needed only for work that was never committed. Commit
        # times are whole seconds, so with it a commit in the memory's own second would pass
        # for older, and the change it made would be missed.
        bound = None if self._known(repo, blob) else since
        try:
            commits, capped, ended_at_since = self._walk(repo, head, parts, blob, bound)
        except errors:
            commits, capped, ended_at_since = 0, True, False
        if commits == 0:
            if ended_at_since:
                return None  # uncommitted work when written; no commit touched it since
            return _Result(1, deleted, True)
        return _Result(commits, deleted, capped)

    def _known(self, repo: Repo, blob: str) -> bool:
        """Say whether the repository holds this blob (committed or staged at some time)."""
        try:
            check_object(objects_folder(repo), blob)
            return cast(Any, blob.encode("ascii")) in repo.object_store
        except repo_errors():
            return False

    def _walk(
        self, repo: Repo, head: str, parts: tuple[bytes, ...], blob: str, since: int | None
    ) -> tuple[int, bool, bool]:
        """Count commits changing the path since the anchored blob: (count, capped, at since)."""
        anchored = blob.encode("ascii")
        start = head.encode("ascii")
        first = self._commit(repo, start)
        if first is None:
            return 0, True, False
        # Time-ordered queue of (-time, order, sha); ``excluded`` marks the anchored version's
        # ancestors, which are popped only to pass the mark on (git's "uninteresting" commits).
        queue: list[tuple[int, int, bytes]] = [(-first.time, 0, start)]
        seen = {start}
        excluded: set[bytes] = set()
        included_queued = 1
        order = 1
        walked = pops = 0
        count = 0
        budget = self.max_walk * _EXCLUDED_FACTOR
        while queue and included_queued > 0:
            _, _, sha = heapq.heappop(queue)
            pops += 1
            if pops > budget:
                return count, True, False
            commit = self._commit(repo, sha)
            is_excluded = sha in excluded
            if not is_excluded:
                included_queued -= 1
            if commit is None:
                continue  # missing (shallow or partial clone): its history is unknown
            if not is_excluded:
                if since is not None and commit.time < since:
                    return count, False, True
                if walked >= self.max_walk:
                    return count, True, False
                walked += 1
                here = self._blob_at(repo, commit.tree, parts)
                if here == anchored:
                    is_excluded = True
                    excluded.add(sha)
                elif len(commit.parents) <= 1 and self._changed(repo, commit, parts, here):
                    count += 1
            for parent in commit.parents:
                if parent not in seen:
                    seen.add(parent)
                    parent_commit = self._commit(repo, parent)
                    if parent_commit is None:
                        continue
                    if is_excluded:
                        excluded.add(parent)
                    else:
                        included_queued += 1
                    heapq.heappush(queue, (-parent_commit.time, order, parent))
                    order += 1
                elif is_excluded and parent not in excluded:
                    # Reached by an included path first; still queued, it is excluded now.
                    excluded.add(parent)
                    if any(queued == parent for _, _, queued in queue):
                        included_queued -= 1
        return count, False, False

    def _changed(
        self, repo: Repo, commit: _Commit, parts: tuple[bytes, ...], here: bytes | None
    ) -> bool:
        """Say whether a non-merge commit changed the path (a root commit: whether it has it)."""
        if not commit.parents:
            return here is not None
        parent = self._commit(repo, commit.parents[0])
        if parent is None:
            return False  # a shallow boundary: what it changed is unknown
        return self._blob_at(repo, parent.tree, parts) != here

    def _commit(self, repo: Repo, sha: bytes) -> _Commit | None:
        """Return a commit's time, tree and parents (remembered), None when it is not here."""
        if sha in self._commits:
            return self._commits[sha]
        from dulwich.objects import Commit

        try:
            obj = read_object(repo, sha)
        except KeyError:
            obj = None
        found = (
            _Commit(obj.commit_time, obj.tree, tuple(obj.parents))
            if isinstance(obj, Commit)
            else None
        )
        if found is None:
            return None  # not remembered: a fetch or an unshallow may bring it
        if len(self._commits) >= _MAX_MEMO:
            self._commits.clear()
        self._commits[sha] = found
        return found

    def _blob_at(self, repo: Repo, tree_id: bytes, parts: tuple[bytes, ...]) -> bytes | None:
        """Return the blob sha of the file at parts under a tree, None when it is no file."""
        mode, sha = stat.S_IFDIR, tree_id
        for part in parts:
            if not stat.S_ISDIR(mode):
                return None
            entry = self._entries(repo, sha).get(part)
            if entry is None:
                return None
            mode, sha = entry
        return sha if is_file(mode) else None

    def _entries(self, repo: Repo, tree_id: bytes) -> dict[bytes, tuple[int, bytes]]:
        """Return a tree's entries {name: (mode, sha)}, read raw once and then remembered.

        Commits that did not touch a folder share its subtree, and every anchor walks the same
        root trees: remembering parsed trees reads each one once per process.
        """
        entries = self._trees.get(tree_id)
        if entries is not None:
            return entries
        from dulwich.objects import Tree, parse_tree

        check_object(objects_folder(repo), tree_id)
        type_num, raw = repo.object_store.get_raw(cast(Any, tree_id))
        if type_num != Tree.type_num:
            return {}  # not a tree: the path is not there
        entries = {name: (mode, sha) for name, mode, sha in parse_tree(raw, 20)}
        self._tree_entries += len(entries)
        if self._tree_entries > _MAX_TREE_ENTRIES:
            self._trees.clear()
            self._tree_entries = len(entries)
        self._trees[tree_id] = entries
        return entries

    # --- the cache file -----------------------------------------------------------------------

    def _load(self, head: str) -> dict[_Key, _Result | None]:
        """Return the cached results for this HEAD from anchors.json; {} when none are usable."""
        if self.cache_path is None:
            return {}
        try:
            raw = json.loads(self.cache_path.read_bytes())
        except (OSError, ValueError):
            return {}
        return _parse_cache(raw, head, self.max_walk) or {}

    def _save(self, head: str) -> None:
        """Write this HEAD's results to anchors.json atomically, merged with another writer's."""
        if self.cache_path is None:
            return
        entries = {**self._load(head), **self._memo}
        data = json.dumps(
            {
                "version": _CACHE_VERSION,
                "head": head,
                "max_walk": self.max_walk,
                "entries": [
                    [path, blob, since, None if result is None else list(result)]
                    for (path, blob, since), result in entries.items()
                ],
            },
            separators=(",", ":"),
        ).encode("utf-8")
        from engram.store.files import write_cache

        with contextlib.suppress(OSError):  # only a cache: the next check computes again
            write_cache(self.cache_path.parent, self.cache_path.name, data)


def _parse_packed(text: str) -> dict[str, str]:
    """Return packed-refs' {name: sha} (peeled lines and comments are left out)."""
    refs: dict[str, str] = {}
    for line in text.splitlines():
        sha, _, name = line.partition(" ")
        if _HEX_REF.fullmatch(sha) and name:
            refs[name.strip()] = sha
    return refs


def _bucket(since: float | None) -> int | bool | None:
    """Return since rounded up to whole seconds (commit times are whole); False if unusable."""
    if since is None:
        return None
    if isinstance(since, bool) or not isinstance(since, (int, float)) or not math.isfinite(since):
        return False
    # A commit at whole second t is older than since exactly when t < ceil(since).
    return math.ceil(since)


def _parse_cache(raw: object, head: str, max_walk: int) -> dict[_Key, _Result | None] | None:
    """Return the entries of a cache document for this HEAD, None when its shape is wrong."""
    if not isinstance(raw, dict) or raw.get("version") != _CACHE_VERSION:
        return None
    if raw.get("head") != head or raw.get("max_walk") != max_walk:
        return None
    rows = raw.get("entries")
    if not isinstance(rows, list):
        return None
    entries: dict[_Key, _Result | None] = {}
    for row in rows:
        if not isinstance(row, list) or len(row) != 4:
            return None
        path, blob, since, result = row
        if not isinstance(path, str) or not isinstance(blob, str):
            return None
        if since is not None and (isinstance(since, bool) or not isinstance(since, int)):
            return None
        if result is None:
            entries[(path, blob, since)] = None
            continue
        if (
            not isinstance(result, list)
            or len(result) != 3
            or isinstance(result[0], bool)
            or not isinstance(result[0], int)
            or result[0] < 1
            or not isinstance(result[1], bool)
            or not isinstance(result[2], bool)
        ):
            return None
        entries[(path, blob, since)] = _Result(result[0], result[1], result[2])
    return entries
