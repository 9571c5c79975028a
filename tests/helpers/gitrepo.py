"""The real git, run on a test's repository with a fixed identity (no user config needed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
}


def git(root: Path, *args: str) -> str:
    """Run ``git -C root ARGS`` and return its output; fail the test if git fails."""
    done = subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        check=True,
        env={**os.environ, **IDENTITY},
        timeout=60,
    )
    return done.stdout.decode()
