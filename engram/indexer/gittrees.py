"""What one commit changed in its trees: tree diffs read raw, and renames told from the rest.

This module owns ``Trees`` (trees read raw and parsed into sets of entries, so that two
versions of a folder differ by a set difference done in C and unchanged subfolders are never
opened: about 2-3x faster than dulwich's ``tree_changes``, which builds an object per entry;
see benchmarks/bench_indexer.py), ``RenameFinder`` and the errors that mean an object could not
be read. It walks no history, counts nothing, and imports dulwich inside functions only.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:
    from dulwich.object_store import BaseObjectStore

# Content rename detection reads blobs: only for commits that delete and add few files, and
# only blobs small enough to compare quickly (git gives up past a limit in the same way).
_MAX_RENAME_PAIRS: Final = 100
_MAX_RENAME_BLOB: Final = 256 * 1024
_RENAME_SIMILARITY: Final = 0.5
_EMPTY_BLOB: Final = b"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # the SHA-1 of b""
_S_IFMT: Final = 0o170000
_S_IFDIR: Final = 0o040000

TreeEntries = set[tuple[bytes, int, bytes]]  # (name, mode, hex sha) of one tree


class Trees:
    """Parsed trees by hex sha, keeping those of the last two commits diffed.

    Trees are read raw and parsed into sets of entries (no ShaFile objects, no entry objects
    for the unchanged entries), so that two trees differ by a set difference done in C.
    Walking newest first, the parent side of one diff is the child side of the next, so its
    trees are parsed once instead of twice; two generations bound the memory.
    """

    def __init__(self, store: BaseObjectStore, sha_len: int) -> None:
        from dulwich.objects import parse_tree

        self.get_raw = store.get_raw
        self.parse = parse_tree
        self.sha_len = sha_len
        self.current: dict[bytes, TreeEntries] = {}
        self.previous: dict[bytes, TreeEntries] = {}

    def __getitem__(self, sha: bytes) -> TreeEntries:
        entries = self.current.get(sha)
        if entries is None:
            entries = self.previous.get(sha)
            if entries is None:
                kind, data = self.get_raw(cast(Any, sha))
                if kind != 2:  # 2 is a tree
                    raise ValueError(f"object {sha.decode()} is not a tree")
                entries = set(self.parse(data, self.sha_len))
            self.current[sha] = entries
        return entries

    def next_commit(self) -> None:
        """Start the next diff: the trees of the diff before last are dropped."""
        self.previous = self.current
        self.current = {}

    def diff(
        self,
        old: bytes | None,
        new: bytes | None,
        prefix: bytes,
        touched: list[bytes],
        added: dict[bytes, bytes],
        deleted: dict[bytes, bytes],
    ) -> None:
        """Add the files that differ between two trees (None: empty) to the three outputs."""
        before = self[old] if old is not None else set()
        after = self[new] if new is not None else set()
        gone = {name: (mode, sha) for name, mode, sha in before - after}
        for name, mode, sha in after - before:
            path = prefix + name
            is_dir = mode & _S_IFMT == _S_IFDIR
            previous = gone.pop(name, None)
            if previous is None:
                if is_dir:
                    self.diff(None, sha, path + b"/", touched, added, deleted)
                else:
                    added[path] = sha
                continue
            old_mode, old_sha = previous
            was_dir = old_mode & _S_IFMT == _S_IFDIR
            if is_dir and was_dir:
                self.diff(old_sha, sha, path + b"/", touched, added, deleted)
            elif not is_dir and not was_dir:
                touched.append(path)  # content, mode or file <-> symlink changed
            elif was_dir:  # a folder replaced by a file
                self.diff(old_sha, None, path + b"/", touched, added, deleted)
                added[path] = sha
            else:  # a file replaced by a folder
                deleted[path] = old_sha
                self.diff(None, sha, path + b"/", touched, added, deleted)
        for name, (mode, sha) in gone.items():
            path = prefix + name
            if mode & _S_IFMT == _S_IFDIR:
                self.diff(sha, None, path + b"/", touched, added, deleted)
            else:
                deleted[path] = sha


def read_errors() -> tuple[type[BaseException], ...]:
    """Return the exceptions that mean an object could not be read (corrupt or missing)."""
    import zlib

    from dulwich.errors import ChecksumMismatch, FileFormatException, WrongObjectException

    return (
        KeyError,
        OSError,
        ValueError,
        zlib.error,
        ChecksumMismatch,
        FileFormatException,
        WrongObjectException,
    )


class RenameFinder:
    """Pairs the deleted and added paths of one commit that are the same file.

    Same blob first; then, when the commit deletes and adds only a few files, text files that
    share at least half of their lines (``_MAX_RENAME_PAIRS`` pairs of blobs under
    ``_MAX_RENAME_BLOB``: the only file contents the indexer reads).
    """

    def __init__(self, store: BaseObjectStore, errors: tuple[type[BaseException], ...]) -> None:
        self.store = store
        self.errors = errors

    def renames(self, added: dict[bytes, bytes], deleted: dict[bytes, bytes]) -> list[list[bytes]]:
        """Pair deleted with added paths that are the same file; remove the pairs from both."""
        pairs: list[list[bytes]] = []
        by_blob: dict[bytes, list[bytes]] = {}
        for path, blob in sorted(deleted.items()):
            by_blob.setdefault(blob, []).append(path)
        for path, blob in sorted(added.items()):
            olds = by_blob.get(blob)
            if olds and blob != _EMPTY_BLOB:  # two empty files are not the same file
                old = olds.pop(0)
                pairs.append([old, path])
                del deleted[old]
        for _, new in pairs:
            del added[new]
        if added and deleted and len(added) * len(deleted) <= _MAX_RENAME_PAIRS:
            pairs += self.similar(added, deleted)
        return pairs

    def similar(self, added: dict[bytes, bytes], deleted: dict[bytes, bytes]) -> list[list[bytes]]:
        """Pair the added and deleted files that share at least half of their lines."""
        lines: dict[bytes, Counter[bytes] | None] = {}
        for blob in {*added.values(), *deleted.values()}:
            lines[blob] = self.blob_lines(blob)
        scored: list[tuple[float, bytes, bytes]] = []
        for old, old_blob in deleted.items():
            before = lines[old_blob]
            if not before:
                continue
            for new, new_blob in added.items():
                after = lines[new_blob]
                if not after:
                    continue
                common = sum((before & after).values())
                score = 2 * common / (before.total() + after.total())
                if score >= _RENAME_SIMILARITY:
                    scored.append((-score, old, new))
        pairs: list[list[bytes]] = []
        for _, old, new in sorted(scored):
            if old in deleted and new in added:
                pairs.append([old, new])
                del deleted[old], added[new]
        return pairs

    def blob_lines(self, blob: bytes) -> Counter[bytes] | None:
        """Return a blob's lines as a multiset, or None if it is too large or unreadable."""
        try:
            kind, data = self.store.get_raw(cast(Any, blob))
        except self.errors:
            return None
        if kind != 3 or len(data) > _MAX_RENAME_BLOB or b"\0" in data[:8000]:
            return None  # 3 is a blob; binary files are compared by sha only
        return Counter(data.splitlines())
