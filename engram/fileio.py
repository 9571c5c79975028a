"""Files every writer needs: atomic replacement and the cross-process lock (a leaf).

``atomic_write``: a reader never sees a torn file. The bytes go to a unique temp file in the
same folder, are fsynced, and replace the target with ``os.replace``; the folder is fsynced
after, so the rename survives a crash. A failed write leaves the target as it was and removes
its temp file.

Modes follow the user, as ``open()`` would: a file that exists keeps its mode, a new one gets
``0o666 & ~umask`` (``mkstemp`` alone would make it 0600). The umask is read from
``/proc/self/status`` where there is one, because ``os.umask`` can only be read by setting it,
and setting it is process-global: a thread creating a file meanwhile would get the wrong mode.
Elsewhere it is read that way once, under a lock, and remembered.

Temp files: every atomic write names its temp file ``.<target>.engram-<pid>-<random>.tmp``
next to its target (``temp_file``), so that one pattern, ``TEMP_PATTERN``, tells them from the
store's files (``.engram/.gitignore`` ignores it, readers and a sync skip it), and the pid says
whether its writer still runs. A SIGKILL or a power cut between the temp file and the rename
leaves it behind; ``stale_temps`` finds those (writer gone from this machine, or older than
``STALE_SECONDS``: never a live writer's) and ``remove_stale_temps`` deletes them.

``ProcessLock``: ``flock`` on a lock file, opened at the outermost hold and closed after it (no
file until first use), re-entrant within a thread and exclusive between the threads of a process,
polling every 5 ms so that a waiting writer is not starved by a busy reader, and raising
LockTimeout with a message that names what could not be locked. The flock itself is a few
microseconds, where the filelock library takes over a hundred for the same open, lock and close
(three locks are held for every write of a memory); where there is no ``fcntl`` (Windows),
filelock does it.

``read_own``: the files a repository holds for engram (memories.jsonl, config.yaml, the
``.gitignore`` and ``.gitattributes`` it keeps) are read the same way, whole: a committed link to
``/dev/zero`` or a named pipe is refused (``NotAFile``), never read forever.

``read_regular``: a file whose path came from outside (an import, a folder of notes, a hook
payload's transcript, an ADR in the repository) is opened without blocking, checked on the open
descriptor to be a regular file (a named pipe would block forever, ``/dev/zero`` never ends)
and read up to a limit; refusals name the path. ``gunzip`` inflates gzip'd bytes from outside (a
chunk, an import, a quarantined file) in bounded steps: a gzip bomb is refused after ``limit``
bytes of output, never inflated.

``Closing``: the one base of what holds a connection, a file or an index open (the daemon's
client, the full-text indexes): ``close`` it, or use it in a ``with`` statement.

Both the store (memories.jsonl and its companions) and the index (its own derived files under
index/) use them. This module writes bytes and takes locks where it is told; it knows nothing
of what the files mean and imports nothing from engram but ``errors``.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import threading
import time
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

from engram.errors import InputTooLarge, InvalidInput, LockTimeout

try:
    import fcntl
except ImportError:  # Windows: filelock locks instead
    fcntl = None  # type: ignore[assignment]

POLL_SECONDS: Final = 0.005
TEMP_SUFFIX: Final = ".tmp"
TEMP_PATTERN: Final = ".*.tmp"  # as .gitignore writes it: every temp file, at any depth
STALE_SECONDS: Final = 3600.0  # a temp file this old is a leftover, whoever wrote it
_TEMP_WRITER: Final = re.compile(r"\.engram-(\d+)-[^.]*\.tmp\Z")
_UMASK_LOCK = threading.Lock()
_umask_cache: int | None = None


def current_umask() -> int:
    """Return the process's umask without changing it (where the platform allows)."""
    global _umask_cache
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass  # no procfs (macOS, Windows, a sandbox): read it the racy way, once
    with _UMASK_LOCK:
        if _umask_cache is None:
            _umask_cache = os.umask(0o022)
            os.umask(_umask_cache)
        return _umask_cache


def new_file_mode() -> int:
    """Return the mode a new file gets: 0o666 less the umask, as open() would make it."""
    return 0o666 & ~current_umask()


def mode_for(path: Path) -> int:
    """Return the mode a replacement of ``path`` gets: its own if it is a regular file (a
    link's target's), else a new file's (a link to ``/dev/zero`` does not lend its 0666)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return new_file_mode()
    return info.st_mode & 0o777 if stat.S_ISREG(info.st_mode) else new_file_mode()


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries to disk (where the platform allows; errors are ignored)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a folder; the rename itself has happened
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically (``mode`` None: keep its mode, or the umask's)."""
    fd, tmp = temp_file(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode_for(path) if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def temp_file(path: Path) -> tuple[int, str]:
    """Create the temp file of a write of ``path`` next to it; return its descriptor and path.

    Named ``.<name>.engram-<pid>-<random>.tmp`` (``TEMP_PATTERN``), opened 0600 by mkstemp.
    """
    prefix = f".{path.name}.engram-{os.getpid()}-"
    return tempfile.mkstemp(prefix=prefix, suffix=TEMP_SUFFIX, dir=path.parent)


def is_temp(name: str) -> bool:
    """Tell whether a file name is an atomic write's temp file (``TEMP_PATTERN``).

    Older engram versions named them ``.<name>.<random>.tmp``: the same pattern, no pid.
    """
    return name.startswith(".") and name.endswith(TEMP_SUFFIX) and len(name) > 5


def temp_writer(name: str) -> int | None:
    """Return the pid of the process that made a temp file, if its name says (else None)."""
    found = _TEMP_WRITER.search(name)
    return int(found.group(1)) if found else None


def running(pid: int) -> bool:
    """Tell whether a process with this pid runs on this machine (someone else's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # EPERM: it runs, as another user
    return True


def stale_temps(folder: Path, *, max_age: float = STALE_SECONDS) -> list[Path]:
    """Return the temp files in ``folder`` (not below) that no running write will rename.

    One whose writer's pid no longer runs here, or (no pid in its name, or a pid that may
    have been reused) one last changed over ``max_age`` seconds ago. A temp file of a write
    in progress is never returned: its writer runs, and it is younger than ``max_age``.
    """
    found: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found  # no such folder (yet), or not readable: nothing to clean
    now = time.time()
    for entry in entries:
        if not is_temp(entry.name):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue  # renamed or removed meanwhile: its write finished
        pid = temp_writer(entry.name)
        gone = pid is not None and pid != os.getpid() and not running(pid)
        if gone or age > max_age:
            found.append(Path(entry.path))
    return sorted(found)


def remove_stale_temps(folders: Iterable[Path]) -> list[Path]:
    """Delete the stale temp files in these folders (``stale_temps``); return those deleted."""
    removed: list[Path] = []
    for folder in folders:
        for path in stale_temps(folder):
            try:
                path.unlink()
            except OSError:
                continue  # gone meanwhile, or not ours to delete: left for doctor to name
            removed.append(path)
    return removed


# A file named from outside (an import, a hook payload's transcript): what is read of it, at
# most. An engram export of 100,000 memories is about 100 MB.
MAX_INPUT_BYTES: Final = 256 * 1024 * 1024

_KINDS: Final = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """Say what a file of this ``st_mode`` is, in words, when it is not a regular file."""
    return next((words for test, words in _KINDS if test(mode)), "not a file")


class NotAFile(OSError):
    """A path engram reads is there but is not a regular file (a FIFO, a device, a folder)."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(f"{os.fspath(path)} is {kind}, not a regular file")
        self.kind = kind  # what it is instead (``kind_of``)


def _open_file(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """Open ``path`` to read without blocking (a named pipe never waits for a writer) and check
    the open descriptor: NotAFile unless it is a regular file. The caller closes the fd."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotAFile(path, kind_of(info.st_mode))
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_own(path: str | os.PathLike[str]) -> tuple[bytes, os.stat_result]:
    """Read one of the files a repository holds for engram (memories.jsonl, config.yaml,
    .gitignore, .gitattributes) whole, with its stat taken on the open file.

    As ``open(path, "rb").read()``, but opened without blocking and refused unless it is a
    regular file: a committed symbolic link to ``/dev/zero`` would be read until memory runs
    out, one to a named pipe waited on forever. FileNotFoundError as ``open``; anything else is
    NotAFile, an OSError naming the path and what it is.
    """
    fd, info = _open_file(path)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(), info


def read_regular(
    path: str | os.PathLike[str],
    *,
    limit: int = MAX_INPUT_BYTES,
    tail: int | None = None,
    what: str | None = None,
) -> bytes:
    """Read a regular file named from outside, bounded: never blocks, never reads past ``limit``.

    Opened with ``O_NONBLOCK`` (opening a named pipe never waits for a writer), then the open
    descriptor is checked: anything but a regular file (a pipe, ``/dev/zero``, a folder) is
    refused, and so is a file over ``limit`` bytes; at most ``limit`` bytes are read even if
    it grows meanwhile. ``tail``: read only the last ``tail`` bytes. Every refusal is an
    InvalidInput naming ``what`` (default: the path): InputTooLarge for the size.
    """
    name = what or os.fspath(path)
    try:
        fd, info = _open_file(path)
    except NotAFile as exc:
        raise InvalidInput(f"{name}: is {exc.kind}, not a regular file; refused") from exc
    except OSError as exc:
        raise InvalidInput(f"{name}: cannot be read: {exc.strerror or exc}") from exc
    try:
        if info.st_size > limit:
            raise InputTooLarge(
                f"{name}: {info.st_size:,} bytes is over the limit of {limit:,} bytes; refused"
            )
        want = limit if tail is None else min(tail, limit)
        if tail is not None and info.st_size > tail:
            os.lseek(fd, info.st_size - tail, os.SEEK_SET)
        chunks: list[bytes] = []
        got = 0
        while got <= want:
            chunk = os.read(fd, min(1024 * 1024, want + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise InvalidInput(f"{name}: cannot be read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if got > want and tail is None:  # it grew while it was read
        raise InputTooLarge(f"{name}: over the limit of {limit:,} bytes; refused")
    return b"".join(chunks)[:want]


_INFLATE_PIECE: Final = 256 * 1024


def gunzip(raw: bytes, *, name: str, limit: int, hint: str | None = None) -> bytes:
    """Decompress gzip data from outside, refusing more than ``limit`` bytes of output.

    Inflated in pieces, each call bounded (``max_length``) by what is left of ``limit``: a gzip
    bomb is refused after ``limit`` + 1 bytes, never inflated whole. Every member of a file of
    several is read; anything after the last one is refused, as are empty, truncated or corrupt
    data. Raises InputTooLarge over the limit and InvalidInput otherwise, each naming ``name``
    (``hint``: the next thing to try, on the one over the limit).
    """
    if not raw:
        raise InvalidInput(f"{name}: empty file, not gzip data")
    out = bytearray()
    pending = memoryview(raw)
    while True:  # one pass per gzip member
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while pending and not inflater.eof:
            piece = pending[:_INFLATE_PIECE]
            pending = pending[len(piece) :]
            while piece:
                try:
                    out += inflater.decompress(piece, limit - len(out) + 1)
                except zlib.error as exc:
                    raise InvalidInput(f"{name}: not valid gzip data: {exc}") from exc
                if len(out) > limit:
                    raise InputTooLarge(
                        f"{name}: decompresses to more than {limit / 2**20:.3g} MiB (more than "
                        f"the limit of {limit} bytes); refused as a possible gzip bomb",
                        hint=hint,
                    )
                piece = memoryview(inflater.unconsumed_tail)
                if inflater.eof:
                    break
        if not inflater.eof:
            raise InvalidInput(f"{name}: truncated gzip data")
        rest = inflater.unused_data + bytes(pending)
        if not rest:
            return bytes(out)
        pending = memoryview(rest)


class Closing(ABC):
    """What holds a connection, a file or an index open: ``close`` it, or use ``with``.

    ``__enter__`` returns the object itself and ``__exit__`` closes it, whatever happened.
    """

    @abstractmethod
    def close(self) -> None:
        """Release what the object holds; safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ProcessLock:
    """A re-entrant lock on ``path`` shared by every process that opens the same file."""

    def __init__(self, path: Path, *, timeout: float, what: str) -> None:
        self.path = path
        self.timeout = timeout  # seconds; negative: wait for ever
        self.what = what
        self.depth = 0  # holds of the thread holding it, nested
        self._threads = threading.RLock()  # flock cannot tell this process's threads apart
        self._fd: int | None = None
        self._fallback: Any = None  # filelock's lock, where there is no fcntl

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the lock for the body of a ``with`` block (nested holds are free)."""
        deadline = time.monotonic() + self.timeout
        if not self._threads.acquire(timeout=-1 if self.timeout < 0 else self.timeout):
            raise self._timed_out()
        try:
            if self.depth == 0:
                self._take(deadline)
            self.depth += 1
            try:
                yield
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self._give()
        finally:
            self._threads.release()

    def _take(self, deadline: float) -> None:
        if fcntl is None:
            self._take_fallback(deadline)
            return
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o644)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, flags, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if self.timeout >= 0 and time.monotonic() >= deadline:
                        raise self._timed_out() from None
                    time.sleep(POLL_SECONDS)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _give(self) -> None:
        if self._fallback is not None:
            self._fallback.release()
            return
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor of the open file releases the flock

    def _take_fallback(self, deadline: float) -> None:
        from filelock import FileLock, Timeout

        if self._fallback is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fallback = FileLock(str(self.path), timeout=self.timeout)
        left = -1.0 if self.timeout < 0 else max(0.0, deadline - time.monotonic())
        try:
            self._fallback.acquire(timeout=left, poll_interval=POLL_SECONDS)
        except Timeout as exc:
            raise self._timed_out() from exc

    def _timed_out(self) -> LockTimeout:
        return LockTimeout(f"could not lock {self.what} within {self.timeout:g}s")
