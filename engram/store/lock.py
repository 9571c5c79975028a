"""ProcessLock: the cross-process file lock every writer of .engram/ holds (from ``engram.fileio``).

The store's callers import it from here; the code lives in the leaf ``engram.fileio`` so that
the index, which must not import the store, locks its own rebuilds with the same lock. This
module adds nothing of its own.
"""

from __future__ import annotations

from engram.fileio import POLL_SECONDS, ProcessLock

__all__ = ["POLL_SECONDS", "ProcessLock"]
