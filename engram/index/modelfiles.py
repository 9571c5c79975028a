"""The files of an optional embedding model: from a package, the user's cache, or one download.

A model file is found, in this order, in an installed package that ships it (read in place,
never imported), in the user's model cache (``ENGRAM_MODEL_CACHE``, default
``$XDG_CACHE_HOME/engram/models`` or ``~/.cache/engram/models``), or downloaded once into that
cache from its source (``ENGRAM_MODEL_URL`` replaces the source's folder, for a mirror), with a
progress bar on stderr. Every file is checked against its pinned SHA-256 and size before it is
used, wherever it came from: a file that fails the check is never loaded, and a partial download
never lands under the final name. With ``ENGRAM_OFFLINE`` (or ``HF_HUB_OFFLINE``) set, nothing is
downloaded; a missing file is then an error that names it, and semantic recall falls back to the
zero-download default model (``semantic.py``). Standard library only.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from engram.errors import IndexError_

CHUNK: Final = 1 << 16
TIMEOUT: Final = 30.0  # seconds without a byte before a download gives up
OFFLINE_VARIABLES: Final = ("ENGRAM_OFFLINE", "HF_HUB_OFFLINE")


@dataclass(frozen=True)
class ModelFile:
    """One file of a model: where a package ships it, its source, its checksum and size."""

    name: str  # the file's name in the model's cache folder
    sha256: str
    size: int
    packaged: tuple[tuple[str, str], ...] = ()  # (top-level package, path inside it)
    url: str = ""  # where it is downloaded from; "" when only a package or a mirror has it


def cache_root() -> Path:
    """Return the folder holding downloaded models (one sub-folder per model)."""
    explicit = os.environ.get("ENGRAM_MODEL_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "engram" / "models"


def offline() -> bool:
    """Tell whether downloads are forbidden (``ENGRAM_OFFLINE`` or ``HF_HUB_OFFLINE`` set)."""
    return any(os.environ.get(name, "").strip() not in ("", "0") for name in OFFLINE_VARIABLES)


def packaged_path(package: str, inner: str) -> Path | None:
    """Return ``inner`` inside the installed package ``package`` (not imported), or None."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / inner
        if path.is_file():
            return path
    return None


@functools.lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    """Return a file's SHA-256 (cached per process for one size and modification time)."""
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            hasher.update(block)
    return hasher.hexdigest()


def verified(path: Path, spec: ModelFile) -> bool:
    """Tell whether ``path`` is ``spec``'s file: its size and SHA-256 are the pinned ones."""
    try:
        stat = path.stat()
    except OSError:
        return False
    if stat.st_size != spec.size:
        return False
    return _digest(str(path), stat.st_size, stat.st_mtime_ns) == spec.sha256


def source_url(spec: ModelFile) -> str:
    """Return where ``spec`` is downloaded from: ``ENGRAM_MODEL_URL``/name, or its own URL."""
    mirror = os.environ.get("ENGRAM_MODEL_URL", "").strip()
    if mirror:
        return f"{mirror.rstrip('/')}/{spec.name}"
    return spec.url


class Progress:
    """A one-line progress bar on a terminal stream (a line per quarter when not a terminal)."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = max(total, 1)
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown = -1
        self.last = 0.0

    def update(self, done: int) -> None:
        """Show ``done`` of ``total`` bytes (throttled: a terminal ten times a second)."""
        share = min(done / self.total, 1.0)
        now = time.monotonic()
        if self.tty:
            if share < 1.0 and now - self.last < 0.1:
                return
            width = 30
            filled = int(share * width)
            bar = "#" * filled + "-" * (width - filled)
            self.stream.write(
                f"\r{self.label} [{bar}] {share:4.0%} {done / 1e6:.1f}/{self.total / 1e6:.1f} MB"
            )
            if share >= 1.0:
                self.stream.write("\n")
        else:
            quarter = int(share * 4)
            if quarter <= self.shown:
                return
            self.stream.write(f"{self.label}: {share:.0%} of {self.total / 1e6:.1f} MB\n")
            self.shown = quarter
        self.last = now
        self.stream.flush()


def download(
    spec: ModelFile,
    target: Path,
    *,
    progress: Callable[[str, int], Progress] | None = None,
) -> Path:
    """Download ``spec`` to ``target``, checked, atomically; return ``target``.

    Raises ``IndexError_`` naming the file and the source when it cannot be had (offline, no
    source, a network error, a size or checksum that differs).
    """
    url = source_url(spec)
    if offline():
        raise IndexError_(
            f"model file {spec.name} is not installed and downloads are off (ENGRAM_OFFLINE)",
            hint="install the model's package, or unset ENGRAM_OFFLINE to download it once",
        )
    if not url:
        raise IndexError_(
            f"model file {spec.name} is not installed and has no download source",
            hint="install the model's package, or set ENGRAM_MODEL_URL to a folder holding it",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    make = progress or (lambda label, total: Progress(label, total))
    bar = make(f"engram: downloading {spec.name}", spec.size)
    import tempfile
    import urllib.request  # only a download needs them: every recall imports this module

    hasher = hashlib.sha256()
    done = 0
    handle, partial = tempfile.mkstemp(prefix=f".{spec.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
                    while True:
                        block = response.read(CHUNK)
                        if not block:
                            break
                        done += len(block)
                        if done > spec.size:
                            raise IndexError_(
                                f"model file {spec.name} from {url} is larger than the"
                                f" pinned {spec.size} bytes",
                                hint="the source changed: use a mirror holding the pinned file",
                            )
                        hasher.update(block)
                        out.write(block)
                        bar.update(done)
            except (OSError, ValueError) as exc:  # urllib's URLError is an OSError
                raise IndexError_(
                    f"cannot download model file {spec.name} from {url}: {exc}",
                    hint="check the network, or install the model's package"
                    " (set ENGRAM_OFFLINE=1 to stop trying)",
                ) from exc
        if done != spec.size or hasher.hexdigest() != spec.sha256:
            raise IndexError_(
                f"model file {spec.name} from {url} failed its check: {done} bytes,"
                f" sha256 {hasher.hexdigest()} (pinned: {spec.size} bytes, {spec.sha256})",
                hint="the source changed or the download was damaged; nothing was kept",
            )
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def locate(
    model: str,
    spec: ModelFile,
    *,
    fetch: bool = True,
    progress: Callable[[str, int], Progress] | None = None,
) -> Path:
    """Return a checked copy of ``spec``: packaged, cached, or (``fetch``) downloaded once."""
    for package, inner in spec.packaged:
        path = packaged_path(package, inner)
        if path is not None and verified(path, spec):
            return path
    cached = cache_root() / model / spec.name
    if verified(cached, spec):
        return cached
    if not fetch:
        raise IndexError_(f"model file {spec.name} of {model} is not installed")
    return download(spec, cached, progress=progress)


def present(model: str, spec: ModelFile) -> bool:
    """Tell whether ``spec`` is installed or cached (by size: no hashing, no network)."""
    for package, inner in spec.packaged:
        path = packaged_path(package, inner)
        if path is not None and path.stat().st_size == spec.size:
            return True
    cached = cache_root() / model / spec.name
    return cached.is_file() and cached.stat().st_size == spec.size
