"""Atomic file writes for every writer of files under .engram/ (defined in ``engram.fileio``).

The store's callers (sync, quarantine, sessions, the Obsidian export) import them from here;
the code lives in the leaf ``engram.fileio`` so that the index, which must not import the
store, writes its own derived files the same way. This module adds nothing of its own.
"""

from __future__ import annotations

from engram.fileio import atomic_write, current_umask, fsync_dir, mode_for, new_file_mode

__all__ = ["atomic_write", "current_umask", "fsync_dir", "mode_for", "new_file_mode"]
