"""Guardrails in git: what the memory knows about a commit before it lands, and about a range.

``engram setup git-hooks`` installs a pre-commit hook that runs ``engram check --staged``. That
prints what the memory knows about the staged files (the same findings as ``engram check``) and
fails the commit for two things only:

- a **blocking pitfall**: a pinned, active pitfall tagged ``blocking`` that cites a staged file
  (a person marks it so: ``engram pin ID`` and the tag ``blocking``);
- **a revert brought back**: the staged lines of a file bring back at least ``MIN_BACK`` (and at
  least half) of the lines a commit added to it that a later commit reverted, as the git
  indexer's revert pitfalls record (``- reverted: <sha>``).

``git commit --no-verify`` passes anyway, as for every pre-commit hook. The hook chains an
existing pre-commit hook (moved aside to ``pre-commit.before-engram`` and run first), honours
``core.hooksPath`` and a worktree's common git folder, and says one line, exiting 0, when
engram is not on PATH. ``review_range`` gives ``engram review-pr BASE..HEAD`` the memory
changes of a range and the files it changes.

Reading git is dulwich's: the index against HEAD's tree, blobs, commits and their parents.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from engram import gitfiles
from engram.errors import EngramError, InvalidInput
from engram.fileio import atomic_write
from engram.model import files_of, is_pinned, is_tombstone, status_of, tags_of
from engram.sync.gitsetup import open_repo

if TYPE_CHECKING:
    from dulwich.objects import ObjectID
    from dulwich.repo import Repo

__all__ = [
    "HOOK_MARKER",
    "Blocker",
    "HookInstall",
    "blocking_pitfalls",
    "hook_script",
    "install_hook",
    "range_files",
    "reverts_back",
    "staged_files",
]

HOOK_MARKER: Final = "# engram pre-commit guard"
CHAINED: Final = "pre-commit.before-engram"
BLOCKING_TAG: Final = "blocking"
MIN_BACK: Final = 2  # lines of a reverted change that must come back to block
MIN_LINE_CHARS: Final = 8  # shorter lines (braces, `else:`, blank) never count
MAX_BLOB_BYTES: Final = 2 * 1024 * 1024  # larger files are not compared line by line
_REVERTED_RE: Final = re.compile(r"^- reverted: ([0-9a-f]{40}|[0-9a-f]{64})\b", re.MULTILINE)


@dataclass(frozen=True)
class Blocker:
    """Why a commit is refused: a blocking pitfall or a reverted change coming back."""

    reason: str  # "blocking-pitfall" | "revert-back"
    file: str
    id: str
    title: str
    text: str  # the sentence the person reads

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "file": self.file,
            "id": self.id,
            "title": self.title,
            "text": self.text,
        }


@dataclass
class HookInstall:
    """What ``engram setup git-hooks`` found and did."""

    path: str  # the hook file
    changed: bool
    chained: str | None = None  # the existing hook now run first, moved aside
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "changed": self.changed,
            "chained": self.chained,
            "notes": self.notes,
        }


# -- reading git ------------------------------------------------------------------------------


def _repo(root: Path) -> Repo:
    from dulwich.errors import NotGitRepository

    try:
        return open_repo(root, objects=True)  # commits and trees are read
    except NotGitRepository:
        raise InvalidInput(
            f"{root}: not in a git repository", hint="run `git init` first"
        ) from None
    except gitfiles.GitUnreadable as exc:
        raise InvalidInput(str(exc), hint=gitfiles.HINT) from None


def _head_tree(repo: Repo) -> ObjectID | None:
    try:
        commit = repo[repo.head()]
    except KeyError:
        return None  # a repository without commits: everything staged is new
    tree: ObjectID = commit.tree  # type: ignore[attr-defined]
    return tree


def staged_files(root: Path) -> dict[str, tuple[bytes | None, bytes | None]]:
    """Return the staged paths (repository-relative) with their HEAD and index blob ids.

    A deleted file has no index blob; a new one no HEAD blob.
    """
    repo = _repo(root)
    try:
        index = repo.open_index()
        out: dict[str, tuple[bytes | None, bytes | None]] = {}
        for (old, new), _modes, (old_sha, new_sha) in index.changes_from_tree(
            repo.object_store, _head_tree(repo)
        ):
            name = (new or old or b"").decode("utf-8", "surrogateescape")
            if name:
                out[name] = (old_sha, new_sha)
        return out
    finally:
        repo.close()


def _lines(repo: Repo, sha: bytes | None) -> list[str]:
    if sha is None:
        return []
    blob = repo.object_store[cast("ObjectID", sha)]
    data: bytes = blob.as_raw_string()
    if len(data) > MAX_BLOB_BYTES or b"\0" in data[:8192]:
        return []  # binary or huge: not compared
    return data.decode("utf-8", "replace").splitlines()


def _added(old: list[str], new: list[str]) -> list[str]:
    """Return the lines ``new`` adds to ``old`` (difflib's inserted and replacing lines)."""
    added: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("insert", "replace"):
            added.extend(new[j1:j2])
    return added


def _meaningful(lines: Iterable[str]) -> set[str]:
    return {line.strip() for line in lines if len(line.strip()) >= MIN_LINE_CHARS}


def _commit_added(repo: Repo, sha: str, path: str) -> set[str]:
    """Return the meaningful lines commit ``sha`` added to ``path`` (against its first parent)."""
    from dulwich.object_store import tree_lookup_path

    try:
        commit = repo[sha.encode("ascii")]
    except (KeyError, ValueError):
        return set()  # a revert of a commit this clone does not have

    def blob(tree: bytes) -> bytes | None:
        try:
            _mode, found = tree_lookup_path(
                repo.object_store.__getitem__, cast("ObjectID", tree), path.encode()
            )
        except KeyError:
            return None
        return found

    parents = commit.parents  # type: ignore[attr-defined]
    before = blob(repo[parents[0]].tree) if parents else None  # type: ignore[attr-defined]
    after = blob(commit.tree)  # type: ignore[attr-defined]
    return _meaningful(_added(_lines(repo, before), _lines(repo, after)))


# -- the two reasons to refuse a commit -------------------------------------------------------


def _cites(record: Mapping[str, Any], path: str) -> bool:
    from fnmatch import fnmatchcase

    for cited in files_of(record):
        if not isinstance(cited, str):
            continue
        if cited == path or fnmatchcase(path, cited) or path.startswith(cited.rstrip("/") + "/"):
            return True
    return False


def blocking_pitfalls(records: Iterable[Mapping[str, Any]], files: Iterable[str]) -> list[Blocker]:
    """Return a Blocker per staged file cited by a pinned, active pitfall tagged ``blocking``."""
    marked = [
        r
        for r in records
        if not is_tombstone(r)
        and r.get("kind") == "pitfall"
        and status_of(r) == "active"
        and is_pinned(r)
        and BLOCKING_TAG in (tags_of(r))
    ]
    out: list[Blocker] = []
    for path in sorted(files):
        for record in marked:
            if _cites(record, path):
                content = " ".join(str(record.get("content", "")).split())
                out.append(
                    Blocker(
                        "blocking-pitfall",
                        path,
                        str(record["id"]),
                        str(record.get("title", "")),
                        f"{path}: blocking pitfall {record.get('title', '')!r}: {content}",
                    )
                )
    return out


def reverts_back(
    root: Path,
    records: Iterable[Mapping[str, Any]],
    staged: Mapping[str, tuple[bytes | None, bytes | None]],
) -> list[Blocker]:
    """Return a Blocker per staged file that brings back the lines of a reverted commit."""
    candidates: list[tuple[Mapping[str, Any], str]] = []
    for record in records:
        # the git indexer proposes its revert pitfalls; a rejected or archived one is dropped
        if is_tombstone(record) or status_of(record) not in ("active", "proposed"):
            continue
        match = _REVERTED_RE.search(str(record.get("content", "")))
        if match:
            candidates.append((record, match.group(1)))
    if not candidates or not staged:
        return []
    repo = _repo(root)
    out: list[Blocker] = []
    try:
        for path, (head_sha, index_sha) in sorted(staged.items()):
            if index_sha is None:
                continue
            cited = [(r, sha) for r, sha in candidates if not r.get("files") or _cites(r, path)]
            if not cited:
                continue
            now_added = _meaningful(_added(_lines(repo, head_sha), _lines(repo, index_sha)))
            if len(now_added) < MIN_BACK:
                continue
            for record, sha in cited:
                undone = _commit_added(repo, sha, path)
                back = undone & now_added
                if len(back) >= MIN_BACK and 2 * len(back) >= len(undone):
                    sample = sorted(back)[0]
                    out.append(
                        Blocker(
                            "revert-back",
                            path,
                            str(record["id"]),
                            str(record.get("title", "")),
                            f"{path}: {len(back)} of the {len(undone)} lines commit "
                            f"{sha[:12]} added come back, and that commit was reverted "
                            f"({record.get('title', '')}); e.g. {sample!r}",
                        )
                    )
    finally:
        repo.close()
    return out


# -- the hook file ----------------------------------------------------------------------------


def hook_script(command: str) -> str:
    """Return the pre-commit hook: run the chained hook, then ``engram check --staged``."""
    return f"""#!/bin/sh
{HOOK_MARKER} (engram setup git-hooks writes this file; `git commit --no-verify` skips it)
hooks=$(dirname "$0")
if [ -x "$hooks/{CHAINED}" ]; then
  "$hooks/{CHAINED}" "$@" || exit $?
fi
if ! command -v {command.split()[0]} >/dev/null 2>&1; then
  echo "engram: not on PATH; the memory's pre-commit check was skipped" >&2
  exit 0
fi
exec {command} check --staged
"""


def _hooks_dir(root: Path) -> Path:
    repo = _repo(root)
    try:
        config = repo.get_config_stack()
        try:
            custom = config.get((b"core",), b"hooksPath")
        except KeyError:
            custom = None
        work = Path(repo.path)
        common = Path(repo.commondir())
    finally:
        repo.close()
    if custom:
        folder = Path(os.path.expanduser(custom.decode("utf-8", "surrogateescape")))
        return folder if folder.is_absolute() else work / folder
    return common / "hooks"


def _read_hook(path: Path) -> str | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        raise InvalidInput(
            f"{path}: is not a regular file (a link or a pipe?); engram leaves it alone",
            hint="remove or replace it by hand, then run engram setup git-hooks again",
        )
    try:
        return path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise EngramError(f"{path}: cannot be read: {exc.strerror or exc}") from exc


def install_hook(root: Path, command: str, *, dry_run: bool = False) -> HookInstall:
    """Install (or refresh) the pre-commit hook; an existing hook of another is chained."""
    folder = _hooks_dir(root)
    hook = folder / "pre-commit"
    script = hook_script(command)
    old = _read_hook(hook)
    if old == script:
        return HookInstall(str(hook), changed=False)
    chained: str | None = None
    notes: list[str] = []
    if old is not None and HOOK_MARKER not in old:
        aside = folder / CHAINED
        if _read_hook(aside) is not None:
            raise InvalidInput(
                f"{aside}: already exists, and {hook} is not engram's",
                hint="merge the two hooks by hand, then run engram setup git-hooks again",
            )
        chained = str(aside)
        notes.append(f"the existing hook now runs first, from {aside}")
        if not dry_run:
            os.replace(hook, aside)
    if not dry_run:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(hook, script.encode("utf-8"), mode=0o755)
    return HookInstall(str(hook), changed=True, chained=chained, notes=notes)


# -- a range of commits -----------------------------------------------------------------------


def range_files(root: Path, spec: str) -> list[str]:
    """Return the files (repository-relative) that differ between the range's two commits."""
    from dulwich.objectspec import parse_commit

    old, sep, new = spec.partition("..")
    if not sep or not old or not new or new.startswith("."):
        raise InvalidInput(f"{spec!r}: give a range BASE..HEAD", hint="e.g. origin/main..HEAD")
    repo = _repo(root)
    try:
        trees = []
        for name in (old, new):
            try:
                trees.append(parse_commit(repo, name.encode()).tree)
            except (KeyError, ValueError):
                raise InvalidInput(f"{name!r}: no such commit in {root}") from None
        changed: set[str] = set()
        for change in repo.object_store.tree_changes(trees[0], trees[1]):
            (old_path, new_path), _modes, _shas = change
            for raw in (old_path, new_path):
                if raw:
                    changed.add(raw.decode("utf-8", "surrogateescape"))
        return sorted(changed)
    finally:
        repo.close()
