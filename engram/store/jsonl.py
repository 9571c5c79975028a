"""memories.jsonl: the canonical file, its cross-process lock and its spliced atomic writes.

The file is the source of truth (README): one canonical line per record, sorted by id.
Random ids land anywhere, so a write finds its place by binary search over the raw bytes and
splices the new line in: the cost of a write is one streaming copy of the file, never a parse
and dump of every record. Every write is atomic (temp file in the same folder, fsync,
``os.replace``, fsync of the folder) and happens under a file lock after reading the current
file.

The fast path trusts the file only while its stat signature equals the one this store recorded
after its last write or check (``state/store.sig``); a file changed behind our back (hand edit,
``git pull``, checkout) is read and checked in full before the next write, and rewritten
canonically if it parses but is out of order. A file with a bad line, a duplicate id or conflict
markers is never written: the error names file and line, and nothing in it is lost.

git does not take our lock: a ``git pull`` or checkout may replace the file between our read
and our ``os.replace``, which would put the old bytes back and lose what git brought. So the
file's identity (size, mtime, inode) is checked again right before the replace: ``put`` splices
its lines again onto the new bytes (a few times, then ``StoreChanged``); ``rewrite``, whose
records were built from an earlier read, raises ``StoreChanged`` for its caller to read again
(``expect`` also catches a change before the lock was taken). git writes files in place, so a
put may read half of git's new bytes: a file that reads as broken is only broken if it stays as
read for a moment; otherwise it is read again. A changed file that parses (git may have just
truncated it) is spliced onto only once it stayed as read for that moment too. What remains is
the moment between that last check and the rename (microseconds), and a replacement the stat
cannot tell from the original (same size and inode within one tick of the file system's clock).

Every record ``put`` or ``rewrite`` writes is scrubbed of secrets first (``store.redact``): the
one write path every adapter, import, sync, merge driver and indexer goes through, so no field
and no caller can skip it.

This module owns the bytes of memories.jsonl; it knows nothing of the index or the service.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from engram.errors import CorruptStore, InvalidInput, StoreChanged, UnsafePath
from engram.fileio import NotAFile, ProcessLock, fsync_dir, mode_for, read_own, temp_file
from engram.model import (
    REQUIRED,
    Record,
    canonical_line,
    is_conflict_marker,
    is_tombstone,
    line_id,
    parse_line,
)
from engram.store import files as store_files
from engram.store.local import refuse_links
from engram.store.redact_lazy import LazyScrubber

if TYPE_CHECKING:
    from engram.store.redact import Scrubber

MEMORIES: Final = "memories.jsonl"
_TMP_GLOB: Final = ".memories.*.tmp"  # this file's temp files, as every version named them
_PUT_ATTEMPTS: Final = 20  # splices redone onto a file git keeps replacing, then StoreChanged
_SETTLE_SECONDS: Final = 0.02  # how long a file that reads as broken must stay so to be broken


@dataclass
class Problem:
    """One defect found in memories.jsonl, with the line it is on.

    ``kind`` is ``conflict`` (a git conflict marker), ``duplicate`` (a valid record whose id
    was seen earlier: ``record`` holds it) or ``unreadable`` (anything else).
    """

    line: int
    message: str
    raw: bytes = b""
    kind: str = "unreadable"
    record: Record | None = None


@dataclass
class Scan:
    """Everything readable in memories.jsonl, and every defect found on the way."""

    records: list[Record] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    canonical: bool = True


class MemoryStore:
    """The canonical files of one .engram/ folder; the only writer of memories.jsonl."""

    def __init__(
        self,
        engram_dir: Path,
        *,
        lock_timeout: float = 60.0,
        scrubber: Scrubber | Callable[[], Scrubber] | None = None,
    ) -> None:
        self.dir = engram_dir
        self._scrubber = LazyScrubber(scrubber)
        self.path = engram_dir / MEMORIES
        self._path_str = str(self.path)  # stat'ed before every read of the index
        self.state_dir = engram_dir / "state"
        self.lock_timeout = lock_timeout
        self._lock = ProcessLock(
            self.state_dir / "store.lock", timeout=lock_timeout, what=str(self.path)
        )
        self._last_trusted = ""  # the signature this process last wrote to store.sig
        # Remove what killed writes left, at the first lock hold of this process (doctor turns
        # it off to report them instead), and memories.jsonl's own temp files at every hold.
        self.tidy = True
        self._tidied = False

    # -- locking -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the cross-process write lock of this store (re-entrant in one process)."""
        if self._lock.depth == 0:
            refuse_links(self.dir)  # the lock file itself is in state/
        with self._lock.hold():
            if self._lock.depth == 1:
                self._remove_stale_temp_files()
            yield

    def _remove_stale_temp_files(self) -> None:
        if not self.tidy:
            return
        # Under the lock no other writer of memories.jsonl is mid-write: its temp files are
        # leftovers of a crash, whatever their age or pid.
        for leftover in self.dir.glob(_TMP_GLOB):
            with contextlib.suppress(OSError):
                leftover.unlink()
        if self._tidied:
            return
        self._tidied = True
        # Chunks, the manifest and state files have writers under other locks: only the temp
        # files of writers that no longer run (or old ones) go. .gitignore learns the pattern.
        store_files.remove_leftover_temps(self.dir)
        with contextlib.suppress(OSError):
            store_files.ignore_temps(self.dir)

    # -- reading -----------------------------------------------------------------------------

    def exists(self) -> bool:
        """Tell whether memories.jsonl exists."""
        return self.path.exists()

    def signature(self) -> str:
        """Return the file's stat signature (size, mtime, inode): cheap change detection."""
        try:
            st = os.stat(self._path_str)
        except FileNotFoundError:
            return "missing"
        return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"

    def read_bytes(self) -> tuple[bytes, str]:
        """Return the file's bytes and the signature of exactly those bytes."""
        try:
            data, st = read_own(self.path)
        except FileNotFoundError:
            return b"", "missing"
        except NotAFile as exc:  # a committed link to /dev/zero would be read forever
            raise UnsafePath(
                f"{exc}: engram reads its memories only from a regular file",
                hint=f"remove it (rm {self.path}; if the repository commits a link there, "
                "remove it from git too) and put back the memories file",
            ) from exc
        return data, f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"

    def scan(self, data: bytes | None = None) -> Scan:
        """Parse every line, collecting defects instead of stopping at the first."""
        if data is None:
            data, _ = self.read_bytes()
        result = Scan()
        seen: dict[str, int] = {}
        previous = ""
        name = str(self.path)
        for lineno, raw in enumerate(data.splitlines(keepends=True), start=1):
            body = raw.rstrip(b"\r\n")
            if not body.strip():
                result.canonical = False
                continue
            try:
                record = parse_line(body, path=name, lineno=lineno)
            except CorruptStore as exc:
                kind = "conflict" if is_conflict_marker(body) else "unreadable"
                result.problems.append(Problem(lineno, exc.message, raw, kind))
                result.canonical = False
                continue
            rid = record["id"]
            if rid in seen:
                message = f"{name}:{lineno}: duplicate id {rid} (first on line {seen[rid]})"
                result.problems.append(Problem(lineno, message, raw, "duplicate", record))
                result.canonical = False
                continue
            seen[rid] = lineno
            # Compare with the raw line, ending included: a missing final newline or a CRLF
            # ending is not canonical, and a splice after it would glue two records together.
            if rid < previous or canonical_line(record) != raw:
                result.canonical = False
            previous = max(previous, rid)
            result.records.append(record)
        return result

    def read_all(self) -> list[Record]:
        """Return every record (tombstones included); raise CorruptStore on any defect."""
        scan = self.scan()
        if scan.problems:
            first = scan.problems[0]
            more = f" (and {len(scan.problems) - 1} more)" if len(scan.problems) > 1 else ""
            raise CorruptStore(first.message + more, path=str(self.path), line=first.line)
        return scan.records

    # -- writing -----------------------------------------------------------------------------

    def _sig_path(self) -> Path:
        return self.state_dir / "store.sig"

    def _trusted(self, signature: str) -> bool:
        if signature == self._last_trusted:
            return True  # the file this process last wrote or checked: store.sig says so too
        try:
            return self._sig_path().read_text(encoding="ascii") == signature
        except OSError:
            return False

    def _trust(self, signature: str) -> None:
        """Record ``signature`` in store.sig (under the lock, as every reader of it).

        Written over in place, then cut to length: truncating a file to nothing first (what
        ``write_text`` does) makes ext4 flush it on close, a quarter of a millisecond per write.
        A torn store.sig only costs the next write a full check of the file.
        """
        data = signature.encode("ascii")
        try:
            fd = os.open(self._sig_path(), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except FileNotFoundError:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._sig_path(), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        self._last_trusted = signature

    def _checked(self, data: bytes, signature: str) -> tuple[bytes, str]:
        """Return the bytes read, verified canonical (rewritten if they only need sorting).

        The signature returned is that of exactly these bytes, on disk now.
        """
        if signature == "missing" or self._trusted(signature):
            return data, signature
        scan = self.scan(data)
        if scan.problems:
            first = scan.problems[0]
            more = f" (and {len(scan.problems) - 1} more)" if len(scan.problems) > 1 else ""
            raise CorruptStore(
                f"refusing to write: {first.message}{more}",
                path=str(self.path),
                line=first.line,
            )
        if not scan.canonical:
            data = b"".join(
                canonical_line(record) for record in sorted(scan.records, key=lambda r: r["id"])
            )
            return data, self._replace(data, expect=signature)
        self._trust(signature)
        return data, signature

    def put(self, records: Sequence[Record]) -> str:
        """Insert or replace records by id in one atomic write; return the new signature.

        Each record is scrubbed of secrets first, in place: what the caller keeps (and indexes)
        is what was written. A record whose id is a secret raises InvalidInput.
        """
        return self.put_onto(records)[1]

    def put_onto(self, records: Sequence[Record]) -> tuple[str, str]:
        """Do what ``put`` does; return the signatures of the file before and after the write.

        The first is that of the bytes the records were spliced onto: a caller that knew
        another one (an index) learns that the file changed behind its back (git).
        """
        lines: dict[str, bytes] = {}
        for record in records:
            self._scrub(record)
            missing = [key for key in REQUIRED if key not in record]
            if is_tombstone(record):
                missing = [key for key in ("id", "rev", "updated_at") if key not in record]
            if missing:
                raise InvalidInput(
                    f"record {record.get('id', '?')} lacks required field(s) {', '.join(missing)}"
                )
            lines[str(record["id"])] = canonical_line(record)
        with self.lock():
            for _ in range(_PUT_ATTEMPTS):
                data, signature = self.read_bytes()
                changed = signature != "missing" and not self._trusted(signature)
                try:
                    data, base = self._checked(data, signature)
                except CorruptStore:
                    # git writes the file in place: what we read may be half of its new bytes.
                    # Broken only if it stays as read; if it is still changing, read it again.
                    time.sleep(_SETTLE_SECONDS)
                    if self.signature() == signature:
                        raise
                    continue
                if changed:
                    # Changed behind our back, and it parses: but git may have just truncated
                    # it (an empty file parses) or written it up to a line's end. Splice onto
                    # it only once it stayed as read for a moment.
                    time.sleep(_SETTLE_SECONDS)
                    if self.signature() != base:
                        continue
                try:
                    return base, self._replace_pieces(_splice(data, lines), expect=base)
                except StoreChanged:
                    continue  # git replaced the file meanwhile: splice onto its new bytes
        raise StoreChanged(
            f"{self.path} kept changing while engram wrote it ({_PUT_ATTEMPTS} times)",
            hint="a git command is rewriting .engram/ in a loop? wait for it, then retry",
        )

    def rewrite(
        self, records: Sequence[Record], *, scrub_all: bool = False, expect: str | None = None
    ) -> str:
        """Replace the whole file with these records, canonical and sorted (repairs, imports).

        Records are scrubbed of secrets in place, as by ``put``. ``expect``: the signature of
        the file the records were built from. A file other than that one (or, without it, one
        replaced while this write ran) raises StoreChanged: read again and rebuild.
        """
        ids = [str(record["id"]) for record in records]
        if len(set(ids)) != len(ids):
            raise InvalidInput("rewrite got the same id twice")
        with self.lock():
            # A line already in the file byte for byte was scrubbed when it was written (or is
            # doctor's to find): only new or changed records pay for a scan. ``scrub_all``
            # (doctor --fix) scans every one.
            current, base = self.read_bytes()
            if expect is not None and base != expect:
                raise _changed(self.path)
            known = set() if scrub_all else set(current.splitlines(keepends=True))
            lines = []
            for record in sorted(records, key=lambda r: r["id"]):
                line = canonical_line(record)
                if line not in known and self._scrub(record):
                    line = canonical_line(record)
                lines.append(line)
            return self._replace(b"".join(lines), expect=base)

    @property
    def scrubber(self) -> Scrubber:
        """Every record written goes through it (README): the one choke point for secrets.

        Made on first use: its rules cost ~15 ms to load, which a hook that only reads (the
        pre-edit check, prompt recall) never pays.
        """
        return self._scrubber.get()

    def _scrub(self, record: Record) -> int:
        """Redact secrets in every field of record, in place; return how many were found."""
        clean, count = self.scrubber.record(record)
        if count:
            record.clear()
            record.update(clean)
        return count

    def _replace(self, data: bytes, *, expect: str) -> str:
        return self._replace_pieces([memoryview(data)], expect=expect)

    def _replace_pieces(self, pieces: Sequence[memoryview | bytes], *, expect: str) -> str:
        """Write pieces as the new file, unless it is no longer the one at ``expect``."""
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = temp_file(self.path)
        try:
            with os.fdopen(fd, "wb") as handle:
                for piece in pieces:
                    handle.write(piece)
                handle.flush()
                os.fsync(handle.fileno())
            # Keep the mode of the file the user has, or honour the umask (mkstemp makes 0600).
            os.chmod(tmp, mode_for(self.path))
            # Last look before the rename: git may have replaced the file since we read it.
            if self.signature() != expect:
                raise _changed(self.path)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        fsync_dir(self.dir)
        signature = self.signature()
        self._trust(signature)
        return signature


def _changed(path: Path) -> StoreChanged:
    return StoreChanged(
        f"{path} changed while engram wrote it (a git pull or checkout?); nothing was written",
        hint="run the command again: it reads the new file first",
    )


def scrub_lines(data: bytes, scrubber: Scrubber, *, known: set[bytes] | frozenset[bytes]) -> bytes:
    """Return memories.jsonl bytes with every line not in ``known`` scrubbed of secrets.

    For writers of a file other than the store's own (the merge driver's %A): ``known`` holds
    lines (newline stripped) already scrubbed. A scrubbed line is written canonically again;
    its id (never redacted) keeps its place in the order.
    """
    out: list[bytes] = []
    for lineno, raw in enumerate(data.splitlines(keepends=True), start=1):
        body = raw.rstrip(b"\r\n")
        if body in known or not body.strip():
            out.append(raw)
            continue
        record = parse_line(body, path=MEMORIES, lineno=lineno)
        clean, count = scrubber.record(record)
        out.append(canonical_line(clean) if count else raw)
    return b"".join(out)


def _find(data: bytes, target: str, lo: int) -> tuple[int, int]:
    """Binary-search the sorted lines from offset ``lo``: (start, end) of the first id >= target.

    ``end`` is the end of that line when its id equals ``target``, else ``start``.
    """
    key = target
    hi = len(data)
    while lo < hi:
        mid = (lo + hi) // 2
        start = data.rfind(b"\n", 0, mid) + 1
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        if line_id(data[start:end]) < key:
            lo = end
        else:
            hi = start
    if lo < len(data):
        end = data.find(b"\n", lo)
        end = len(data) if end < 0 else end + 1
        if line_id(data[lo:end]) == key:
            return lo, end
    return lo, lo


def _splice(data: bytes, lines: dict[str, bytes]) -> list[memoryview | bytes]:
    """Return the pieces of the new file: old bytes around new or replaced lines."""
    view = memoryview(data)
    pieces: list[memoryview | bytes] = []
    cursor = 0
    for rid in sorted(lines):
        if is_conflict_marker(lines[rid]):
            raise InvalidInput(f"record {rid} would start with a git conflict marker")
        start, end = _find(data, rid, cursor)
        pieces.append(view[cursor:start])
        pieces.append(lines[rid])
        cursor = end
    pieces.append(view[cursor:])
    return pieces
