"""Finding the daemons a test's hooks and commands started, from /proc."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def daemons_of(root: Path) -> list[int]:
    """Return the pids of engram daemons serving ``root``, however they were started.

    ``engram -C ROOT daemon`` (as hooks and the command line start one on first use) and
    ``python -m engram.daemon ROOT``.
    """
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        started = b"engram.daemon" in argv or (b"engram" in argv and b"daemon" in argv)
        if started and os.fsencode(root) in argv:
            found.append(int(entry.name))
    return found


def wait_for(condition: Any, seconds: float = 60.0) -> bool:
    """Wait until ``condition()`` holds (True) or ``seconds`` pass (its last value)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return bool(condition())
