"""Recording staleness anchors: the git blob of each file a memory cites, when it is saved.

``record_anchors`` hashes the cited files as they are in the work tree (``{"path", "blob"}``,
README) and keeps the ones git tracks. This module owns that, the repositories it keeps
open between saves (``_Opened``), and what an anchor is made of, which ``engram.indexer.anchors``
(the checker) uses too: a cited path made repository-relative, a work-tree file's blob id, the
errors a damaged repository raises. An anchor's ``path`` is relative to the project root (which
may be a folder inside the work tree), with ``/`` separators; its ``blob`` is the SHA-1 git
blob id of the file's bytes, hashed without filters (``git hash-object --no-filters``); a
tracked symlink is hashed as git stores it, by its target.

What it must not do: run ``git`` in a subprocess, write anything, or raise for a repository
state a user can be in (what cannot be known is left out). dulwich is imported inside
functions so that ``engram --help`` stays fast. Each save still walks up from the root, and
reads the index and HEAD afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import stat
import struct
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from engram.gitfiles import check_object, control_folders, locate, looks_like_repo, unreadable

if TYPE_CHECKING:
    from dulwich.index import Index
    from dulwich.repo import Repo

__all__ = ["record_anchors"]

_GLOB_CHARS: Final = frozenset("*?[")


def repo_errors() -> tuple[type[BaseException], ...]:
    """Return the exceptions a damaged or odd repository can raise from dulwich."""
    from dulwich.errors import (
        ChecksumMismatch,
        FileFormatException,
        NotGitRepository,
        ObjectMissing,
        WrongObjectException,
    )

    return (
        OSError,
        ValueError,
        KeyError,
        IndexError,
        AssertionError,
        UnicodeError,
        zlib.error,
        struct.error,
        ChecksumMismatch,
        FileFormatException,
        NotGitRepository,
        ObjectMissing,
        WrongObjectException,
    )


def _git_blob_id(data: bytes) -> str:
    """Return the git blob id (SHA-1) of some bytes, as ``git hash-object --no-filters``."""
    digest = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    digest.update(data)
    return digest.hexdigest()


def clean_path(path: object) -> str | None:
    """Return a cited path normalised (``a/./b`` -> ``a/b``), or None when it cannot be a file."""
    if not isinstance(path, str) or not path or "\0" in path:
        return None
    if _GLOB_CHARS.intersection(path) or path.startswith("/") or path.endswith("/"):
        return None
    clean = posixpath.normpath(path)
    if clean in (".", "..") or clean.startswith("/"):
        return None
    return clean


def in_repo(prefix: str, path: str) -> str | None:
    """Return the repository-relative path of a root-relative one, None if it leaves the tree."""
    joined = posixpath.normpath(posixpath.join(prefix, path)) if prefix else path
    if joined in (".", "..") or joined.startswith(("../", "/")) or joined == ".git":
        return None
    if joined.startswith(".git/"):
        return None
    return joined


def _tree_entry(repo: Repo, tree_id: bytes, parts: Sequence[bytes]) -> tuple[int, bytes] | None:
    """Return (mode, sha) at parts under a tree, None when absent; raises on damaged objects."""
    from dulwich.objects import Tree

    mode, sha = stat.S_IFDIR, tree_id
    for part in parts:
        if not stat.S_ISDIR(mode):
            return None
        tree = read_object(repo, sha)
        if not isinstance(tree, Tree):
            return None
        try:
            mode, sha = tree[part]
        except KeyError:
            return None
    return mode, sha


class _Tracked:
    """Says whether git tracks a path: in the index, or else in HEAD's tree (each read once)."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.errors = repo_errors()
        self._index: Index | None = None
        self._tree: bytes | None = None
        self._loaded = False

    def _load(self) -> None:
        self._loaded = True
        with contextlib.suppress(*self.errors):  # no or unreadable index: HEAD's tree tells
            self._index = self.repo.open_index()
        try:
            tree_id = getattr(read_object(self.repo, self.repo.head()), "tree", None)
        except self.errors:
            return  # no commits yet, or a damaged HEAD
        self._tree = tree_id if isinstance(tree_id, bytes) else None

    def __contains__(self, git_path: bytes) -> bool:
        if not self._loaded:
            self._load()
        if self._index is not None and git_path in self._index:
            return True
        if self._tree is None:
            return False
        try:
            entry = _tree_entry(self.repo, self._tree, git_path.split(b"/"))
        except self.errors:
            return False
        return entry is not None and is_file(entry[0])


def is_file(mode: int) -> bool:
    """Say whether a tree entry is a file git stores as a blob (not a folder or submodule)."""
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def record_anchors(
    root: Path, paths: Sequence[str], *, max_bytes: int = 16 * 1024 * 1024
) -> list[dict[str, str]]:
    """Return anchors ``{"path", "blob"}`` for the cited files that git tracks, sorted by path.

    Globs, folders, missing and untracked files, paths leaving the work tree and files over
    ``max_bytes`` are skipped; outside a repository the answer is ``[]``. Never raises for a
    repository state.
    """
    wanted = sorted({clean for path in paths if (clean := clean_path(path)) is not None})
    if not wanted:
        return []
    with _OPENED.lock:  # one thread at a time on a kept repository
        found = _OPENED.discover(Path(root))
        if found is None:
            return []
        repo, real_root = found
        work_tree = Path(repo.path)
        try:
            real_top = work_tree.resolve()
            relative = real_root.relative_to(real_top).as_posix()
        except (OSError, ValueError):
            return []
        prefix = "" if relative == "." else relative
        anchors: list[dict[str, str]] = []
        tracked = _Tracked(repo)
        for path in wanted:
            git_path = in_repo(prefix, path)
            if git_path is None:
                continue
            try:
                blob = blob_of_file(work_tree, real_top, git_path, max_bytes)
                if blob is None or git_path.encode("utf-8") not in tracked:
                    continue
            except (OSError, UnicodeError):
                continue
            anchors.append({"path": path, "blob": blob})
    return anchors


def open_repo(root: Path, *, objects: bool = False) -> Repo:
    """Open the repository holding ``root`` (root or a folder above it), as dulwich's
    ``Repo.discover`` does, once ``gitfiles.locate`` found the files it reads regular.

    Raises NotGitRepository when there is none, ``gitfiles.GitUnreadable`` (an OSError) when a
    file opening it reads is a FIFO or a device (reading it could wait forever). ``objects``:
    the loose objects are checked too (a reader of history; some milliseconds).
    """
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    folder = locate(root, objects=objects)
    if folder is None:
        raise NotGitRepository(f"no git repository at or above {root}")
    return Repo(folder)


def objects_folder(repo: Repo) -> str:
    """Return the folder of the repository's loose objects ("" for a store that has none)."""
    return str(getattr(repo.object_store, "path", "") or "")


def read_object(repo: Repo, sha: bytes) -> Any:
    """Return the object ``sha`` (hex), as ``repo.object_store[sha]``, once its loose file is
    known not to be a FIFO (``check_object``: an OSError, as the callers expect of git)."""
    check_object(objects_folder(repo), sha)
    return repo.object_store[cast(Any, sha)]


_Signature = tuple[object, ...]


class _Opened:
    """Repositories ``record_anchors`` found, kept open between saves (a server saves often).

    Opening one with dulwich (its config, refs and object store) cost some 0.8 ms per save.
    Each call still walks up from the root as ``Repo.discover`` does, so a repository made or
    removed at or above the root is seen at once; a kept one is used only while its ``.git``
    (the same folder, or a ``.git`` file unchanged), ``commondir``, ``config.worktree`` and
    config files are the ones it was opened from (inode, size and times, taken before it was
    opened), and opened afresh otherwise. Files the config includes are not watched. Nothing
    else is read from the kept object: HEAD, the refs and the index are read afresh by each
    call, and dulwich's object store looks for new packs when an object is not in those it
    knows.
    """

    def __init__(self, size: int = 8) -> None:
        self.lock = threading.Lock()
        self.size = size
        self._kept: dict[str, tuple[_Signature, Repo]] = {}

    def discover(self, root: Path) -> tuple[Repo, Path] | None:
        """Return the repository holding root (as ``Repo.discover``) and root's real path."""
        from dulwich.errors import NotGitRepository

        try:
            if not root.is_dir():
                return None
        except OSError:
            return None
        real = folder = os.path.realpath(root)
        while True:
            if looks_like_repo(folder):
                if unreadable(folder) is not None:
                    return None  # a FIFO where git keeps a file: reading it would wait forever
                try:
                    return self._open(folder), Path(real)
                except NotGitRepository:
                    pass  # as Repo.discover: look further up
                except repo_errors():
                    return None
            parent = os.path.dirname(folder)
            if parent == folder:
                return None
            folder = parent

    def _open(self, folder: str) -> Repo:
        from dulwich.repo import Repo

        signature = _signature(folder)
        kept = self._kept.pop(folder, None)
        if kept is not None:
            if kept[0] == signature:
                self._kept[folder] = kept  # the most recently used last
                return kept[1]
            kept[1].close()
        repo = Repo(folder)
        if len(self._kept) >= self.size:
            self._kept.pop(next(iter(self._kept)))[1].close()
        self._kept[folder] = (signature, repo)
        return repo


def _signature(folder: str) -> _Signature:
    """Return what names the files dulwich opens a repository at folder from."""
    hidden = os.path.join(folder, ".git")
    parts: list[object] = []
    try:
        info = os.stat(hidden)
    except OSError:
        parts.append(None)  # a bare repository
    else:
        if stat.S_ISDIR(info.st_mode):  # a folder: its identity (its entries change often)
            parts.append((info.st_dev, info.st_ino))
        else:
            parts.append(file_stat(info))
    control, common = control_folders(folder)
    parts.append(_stat_of(os.path.join(control, "commondir")))
    for name in (os.path.join(control, "config.worktree"), os.path.join(common, "config")):
        parts.append(_stat_of(name))
    return (control, common, *parts)


def _stat_of(path: str) -> tuple[int, int, int, int, int] | None:
    """Return the stat fields that tell one version of a file from another, None if absent."""
    try:
        return file_stat(os.stat(path))
    except OSError:
        return None


def file_stat(info: os.stat_result) -> tuple[int, int, int, int, int]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


_OPENED: Final = _Opened()


def blob_of_file(work_tree: Path, real_top: Path, git_path: str, max_bytes: int) -> str | None:
    """Return the blob id of a work-tree file, None for folders, big files and odd paths."""
    file = work_tree / git_path
    # A folder that is a symlink could lead out of the work tree; git never tracks past one.
    if not file.parent.resolve().is_relative_to(real_top):
        return None
    info = file.lstat()
    if stat.S_ISLNK(info.st_mode):
        return _git_blob_id(os.fsencode(os.readlink(file)))
    if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
        return None
    data = file.read_bytes()
    if len(data) > max_bytes:  # grew between the stat and the read
        return None
    return _git_blob_id(data)
