"""``engram resolve``: conflicted ``.engram/`` files merged, written through the store, staged.

This module owns ``resolve``, which turns a conflicted ``.engram/`` (git's three index stages,
or conflict markers committed by a hosted merge or a rebase made without the driver) into a
clean, canonical, staged file, and reading conflict markers (``has_markers``,
``split_markers``). A stage (or a side of a committed file) that itself holds conflict markers
is split too; a deleted side (modify/delete) is an empty file. Every file is merged before any
is written, so a file that cannot be merged changes nothing.

What it must not do: run ``git`` in a subprocess (dulwich only, imported inside functions), or
write ``memories.jsonl`` or ``manifest.json`` other than through the store (``MemoryStore``,
``engram.store.files``).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.errors import CorruptStore, InvalidInput
from engram.store import files as store_files
from engram.store.jsonl import MemoryStore
from engram.store.redact import Scrubber
from engram.sync.gitmerge import (
    MANIFEST_PATH,
    MARKERS,
    MEMORIES_PATH,
    is_manifest,
    merge_bytes,
    parse_memories,
    read_file,
)
from engram.sync.gitsetup import discover

if TYPE_CHECKING:
    from dulwich.index import ConflictedIndexEntry, IndexEntry
    from dulwich.repo import Repo

__all__ = ["Resolved", "has_markers", "resolve", "split_markers"]

_FILE_MODE: Final = 0o100644


@dataclass
class Resolved:
    """One conflicted file that ``resolve`` merged, wrote and staged."""

    path: str  # repo-relative path
    records: int  # memories (or manifest chunks) in the result
    conflicts: int  # memories that now carry ``conflicts`` entries

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return asdict(self)


def has_markers(data: bytes) -> bool:
    """Tell whether a file holds a line that starts with a git conflict marker."""
    return any(line.startswith(MARKERS) for line in data.splitlines())


def split_markers(data: bytes, name: str = MEMORIES_PATH) -> tuple[bytes, bytes, bytes]:
    """Split a file with git conflict markers into its (base, ours, theirs) versions.

    Lines outside the hunks belong to every side; a hunk without a diff3 ``|||||||`` section
    gives the base nothing. Raises CorruptStore naming the line of a malformed hunk.
    """
    sides: dict[str, list[bytes]] = {"base": [], "ours": [], "theirs": []}
    state = "outside"
    opened = 0
    for lineno, line in enumerate(data.splitlines(keepends=True), start=1):
        if line.startswith(b"<<<<<<<") and state == "outside":
            state, opened = "ours", lineno
        elif line.startswith(b"|||||||") and state == "ours":
            state = "base"
        elif line.startswith(b"=======") and state in ("ours", "base"):
            state = "theirs"
        elif line.startswith(b">>>>>>>") and state == "theirs":
            state = "outside"
        elif line.startswith(MARKERS):
            raise CorruptStore(
                f"{name}:{lineno}: unexpected conflict marker "
                f"{line[:7].decode('ascii', 'replace')!r}",
                path=name,
                line=lineno,
            )
        elif state == "outside":
            for lines in sides.values():
                lines.append(line)
        else:
            sides[state].append(line)
    if state != "outside":
        raise CorruptStore(
            f"{name}:{opened}: conflict hunk opened here is never closed", path=name, line=opened
        )
    return b"".join(sides["base"]), b"".join(sides["ours"]), b"".join(sides["theirs"])


def _merge_with_markers(
    base: bytes, ours: bytes, theirs: bytes, name: str
) -> tuple[bytes, int, int]:
    """Merge three versions, first splitting any that itself holds conflict markers."""

    def flat(data: bytes, side: str) -> bytes:
        if not has_markers(data):
            return data
        parts = split_markers(data, f"{name} ({side})")
        return merge_bytes(*parts, name)[0]

    return merge_bytes(flat(base, "base"), flat(ours, "ours"), flat(theirs, "theirs"), name)


def _is_engram_file(path: str) -> bool:
    return any(
        path == suffix or path.endswith("/" + suffix) for suffix in (MEMORIES_PATH, MANIFEST_PATH)
    )


def _blob(repo: Repo, entry: IndexEntry | None, path: str) -> bytes:
    if entry is None:
        return b""
    try:
        return bytes(repo.object_store[entry.sha].as_raw_string())
    except (KeyError, ValueError) as exc:
        raise InvalidInput(
            f"cannot read the git object {entry.sha.decode('ascii', 'replace')} of {path}: {exc}",
            hint="run `git fsck`; the repository is missing objects",
        ) from exc


def _stage(
    repo: Repo, index: Any, path: str, data: bytes, mode: int, scrubber: Scrubber | None
) -> None:
    """Write data to the work tree file and stage it as a normal entry (like ``git add``)."""
    from dulwich.index import index_entry_from_stat
    from dulwich.objects import Blob

    target = Path(repo.path, *path.split("/"))
    if is_manifest(path):
        store_files.write_manifest(target.parent, data)
    else:
        MemoryStore(target.parent, scrubber=scrubber).rewrite(
            parse_memories(data, path)  # canonical bytes: the parse cannot fail
        )
    written = target.read_bytes()
    blob = Blob.from_string(written)
    repo.object_store.add_object(blob)
    index[path.encode("utf-8", "surrogateescape")] = index_entry_from_stat(
        os.stat(target), blob.id, mode=mode
    )


def resolve(root: Path, *, scrubber: Scrubber | None = None) -> list[Resolved]:
    """Merge conflicted .engram files (index stages or committed markers); write and stage them."""
    from dulwich.errors import NoIndexPresent
    from dulwich.index import ConflictedIndexEntry

    repo = discover(Path(root), objects=True, strict=True)
    if repo is None:
        raise InvalidInput(
            f"not a git repository: {root} (nor any folder above it)",
            hint="run `engram resolve` inside the repository whose merge left conflicts",
        )
    done: list[Resolved] = []
    with contextlib.closing(repo):
        try:
            index = repo.open_index()
        except NoIndexPresent as exc:
            raise InvalidInput(f"no git index (a bare repository?) at {repo.path}") from exc
        except (OSError, ValueError, AssertionError) as exc:
            raise InvalidInput(f"cannot read the git index of {repo.path}: {exc}") from exc
        items: list[tuple[str, IndexEntry | ConflictedIndexEntry]] = [
            (key.decode("utf-8", "surrogateescape"), value) for key, value in index.items()
        ]
        merged: list[tuple[str, bytes, int]] = []
        for path, entry in sorted(items):
            if not _is_engram_file(path):
                continue
            try:
                if isinstance(entry, ConflictedIndexEntry):
                    result = _merge_with_markers(
                        _blob(repo, entry.ancestor, path),
                        _blob(repo, entry.this, path),
                        _blob(repo, entry.other, path),
                        path,
                    )
                    chosen = entry.this or entry.other or entry.ancestor
                    mode = chosen.mode if chosen is not None else _FILE_MODE
                else:
                    current = read_file(Path(repo.path, *path.split("/")))
                    if not has_markers(current):
                        continue
                    result = merge_bytes(*split_markers(current, path), path)
                    mode = entry.mode
            except CorruptStore as exc:
                raise InvalidInput(
                    f"cannot resolve {path}: {exc.message}",
                    hint=f"fix that line of {path} by hand, then run `engram resolve` again",
                ) from exc
            data, records, conflicts = result
            merged.append((path, data, mode))
            done.append(Resolved(path=path, records=records, conflicts=conflicts))
        # Every file merged before any is written: a file that cannot be merged changes nothing.
        for path, data, mode in merged:
            _stage(repo, index, path, data, mode, scrubber)
        if merged:
            index.write()
    return done
