"""A memory's history in git: the versions of one memory across the commits from HEAD.

This module owns ``memory_log`` and its ``Version`` values. It reports a commit when the
memory's line differs from its line in every parent (so a merge that took one side's version
is not a change; the side's commit is); a shallow or damaged clone ends the walk early.

What it must not do: run ``git`` in a subprocess (dulwich only, imported inside functions),
write anything, or raise for a repository state a user can be in (no repository, no commits:
``[]``). A repository it could read only by waiting forever (a FIFO where git keeps a file) is
an InvalidInput naming the file.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.errors import CorruptStore
from engram.model import Record, dumps, format_time, parse_line
from engram.sync.gitmerge import MEMORIES_PATH
from engram.sync.gitsetup import discover

if TYPE_CHECKING:
    from dulwich.objects import ObjectID
    from dulwich.repo import Repo

__all__ = ["Version", "memory_log"]


@dataclass
class Version:
    """One version of a memory in the git history, as a commit left it."""

    commit: str
    author: str  # the commit author's name
    date: str  # RFC 3339 UTC of the commit (committer time)
    message: str  # first line
    record: dict[str, Any] | None  # the memory's line at that commit (None: line gone)
    change: str  # "added" | "changed" | "deleted" (tombstoned) | "removed" (line gone)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above; the record as its line was)."""
        return asdict(self)


def _find_line(data: bytes, memory_id: str) -> Record | None:
    """Return the record with this id in a memories.jsonl version (None: absent)."""
    needle = b'"id":' + json.dumps(memory_id).encode("utf-8")
    start = 0
    while True:
        found = data.find(needle, start)
        if found < 0:
            return None
        begin = data.rfind(b"\n", 0, found) + 1
        end = data.find(b"\n", found)
        end = len(data) if end < 0 else end
        start = end
        try:
            record = parse_line(data[begin:end], path=MEMORIES_PATH, lineno=0)
        except CorruptStore:
            continue
        if record.get("id") == memory_id:
            return record


class _Reader:
    """Reads the memory's record at a commit, remembering blobs (a sha names immutable data)."""

    def __init__(self, repo: Repo, path: bytes, memory_id: str) -> None:
        self.repo = repo
        self.path = path
        self.memory_id = memory_id
        self.blobs: dict[bytes, Record | None] = {}

    def at(self, sha: ObjectID) -> Record | None:
        """Return the record at a commit (None: absent); KeyError: the commit is not here."""
        from dulwich.object_store import tree_lookup_path
        from dulwich.objects import Commit

        commit = self.repo.object_store[sha]
        if not isinstance(commit, Commit):
            raise KeyError(sha)
        try:
            _, blob = tree_lookup_path(self.repo.object_store.__getitem__, commit.tree, self.path)
        except (KeyError, NotADirectoryError):
            return None
        if blob not in self.blobs:
            data = self.repo.object_store[blob].as_raw_string()
            self.blobs[blob] = _find_line(bytes(data), self.memory_id)
        return self.blobs[blob]


def _change(record: Record | None, before: Record | None) -> str:
    if record is None:
        return "removed"
    if record.get("deleted_at") and not (before or {}).get("deleted_at"):
        return "deleted"
    return "added" if before is None else "changed"


def _author_name(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    return text.split(" <", 1)[0].strip() if " <" in text else text.strip()


def memory_log(
    root: Path, memory_id: str, *, limit: int = 50, path: str = MEMORIES_PATH
) -> list[Version]:
    """List the versions of one memory in the commits reachable from HEAD, newest first."""
    repo = discover(Path(root), objects=True, strict=True)
    if repo is None or limit < 1:
        return []
    with contextlib.closing(repo):
        try:
            head = repo.head()
        except KeyError:
            return []  # no commits yet
        return list(_walk_versions(repo, head, memory_id, limit, path.encode("utf-8")))[:limit]


def _walk_versions(
    repo: Repo, head: ObjectID, memory_id: str, limit: int, path: bytes
) -> Iterator[Version]:
    from dulwich.walk import Walker

    reader = _Reader(repo, path, memory_id)
    emitted = 0
    try:
        walker = Walker(repo.object_store, [head], paths=[path])
        for entry in walker:
            commit = entry.commit
            try:
                record = reader.at(commit.id)
                before = [reader.at(parent) for parent in commit.parents]
            except KeyError:
                continue  # a parent missing (shallow clone): its change is unknown
            if record is None and not before:
                continue
            if before and any(_same(record, other) for other in before):
                continue
            yield Version(
                commit=commit.id.decode("ascii"),
                author=_author_name(commit.author),
                date=format_time(datetime.fromtimestamp(commit.commit_time, UTC)),
                message=commit.message.decode("utf-8", "replace").split("\n", 1)[0].strip(),
                record=record,
                change=_change(record, before[0] if before else None),
            )
            emitted += 1
            if emitted >= limit:
                return
    except KeyError:
        return  # a missing commit object ends the walk (shallow or damaged clone)


def _same(a: Record | None, b: Record | None) -> bool:
    if a is None or b is None:
        return a is b
    return dumps(a) == dumps(b)
