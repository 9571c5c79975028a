"""What the index needs from the file it is derived from: ``MemorySource``, a Protocol.

The index reads memories.jsonl and never writes it, and it must not import the store: it names
here the few things it reads, and ``engram.store.MemoryStore`` has them all (a structural
match, no inheritance). Nothing in this module does I/O.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class MemorySource(Protocol):
    """The canonical memories file an index is derived from (``MemoryStore`` is one)."""

    @property
    def dir(self) -> Path:
        """The .engram/ folder; the index keeps its own files in its ``index/`` folder."""
        ...

    @property
    def path(self) -> Path:
        """The memories file itself (named in problems found on its lines)."""
        ...

    def signature(self) -> str:
        """Return the file's stat signature: equal signatures, unchanged file."""
        ...

    def read_bytes(self) -> tuple[bytes, str]:
        """Return the file's bytes and the signature of exactly those bytes."""
        ...
