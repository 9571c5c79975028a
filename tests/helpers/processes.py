"""Finding the daemons a test's hooks and commands started, from /proc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def modules_loaded(
    argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, stdin: bytes = b""
) -> tuple[int, bytes, list[str]]:
    """Run ``engram ARGV`` (the console script's ``main``) in a fresh interpreter.

    Return its exit status, its standard output and every module it had loaded at the end.
    """
    program = (
        "import json, sys\n"
        f"sys.argv = ['engram', *{argv!r}]\n"
        "from engram.__main__ import main\n"
        "code = 0\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit_:\n"
        "    code = exit_.code or 0\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )
    report = json.loads(done.stderr.decode().strip().splitlines()[-1])
    return int(report["code"]), done.stdout, list(report["modules"])
