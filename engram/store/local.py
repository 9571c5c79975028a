"""The local folders of a store, ``state/`` and ``index/``: refused when they are symlinks.

Both are per-clone and never committed, but a hostile repository can commit them anyway: a
``.engram/state`` that links elsewhere would have engram write its locks, caches, journal and
sockets wherever the link points, an ``index/`` link its databases. Before anything is written
there, ``refuse_links`` looks at the two folders and their entries, two levels deep, with
``lstat`` (never following a link) and raises ``UnsafePath`` naming the first link; what to do
is remove it, and engram makes a real folder or file again. The store folder itself may be a
link (a user's own choice, e.g. a dotfiles checkout).

A commit can also carry files into them (``git add -f``): a lock naming another socket, a clone
id or a sync cursor that is a teammate's, not this clone's. ``tracked_local`` names them (git
is asked); the daemon refuses to serve over them and ``engram doctor`` reports them.

This module only looks; it creates, removes and follows nothing.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Final

from engram import gitfiles
from engram.errors import UnsafePath

LOCAL: Final = ("state", "index")


def refuse_links(engram_dir: Path) -> None:
    """Raise UnsafePath when state/ or index/ (or an entry in them) is a symbolic link."""
    for name in LOCAL:
        folder = engram_dir / name
        try:
            info = folder.lstat()
        except FileNotFoundError:
            continue
        except OSError:
            continue  # unreadable: the write that follows fails and says why
        if stat.S_ISLNK(info.st_mode):
            _refuse(folder)
        if not stat.S_ISDIR(info.st_mode):
            continue
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                _refuse(Path(entry.path))
            if entry.is_dir(follow_symlinks=False):
                try:
                    inner = list(os.scandir(entry.path))
                except OSError:
                    continue
                for item in inner:
                    if item.is_symlink():
                        _refuse(Path(item.path))


def _refuse(path: Path) -> None:
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    raise UnsafePath(
        f"{path} is a symbolic link{target}: engram keeps local state there and will not "
        "write through a link",
        hint=f"remove the link (rm {path}) and run the command again: engram makes a real "
        "folder or file in its place; if the repository commits it, remove it from git too",
    )


def tracked_local(engram_dir: Path) -> list[str]:
    """Return the files under state/ and index/ that git tracks, relative to the repository.

    [] when ``engram_dir`` is in no git work tree (a personal store) or git cannot be run,
    or could not read the repository without waiting forever (``gitfiles.problem_at``).
    """
    if gitfiles.problem_at(engram_dir) is not None:
        return []
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--full-name", "--", *LOCAL],
            cwd=engram_dir,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    return sorted(os.fsdecode(name) for name in done.stdout.split(b"\0") if name)


def untrack_local(engram_dir: Path) -> None:
    """Remove the files git tracks under state/ and index/ from git and from this clone.

    They came from a commit, so they are someone else's local state: engram makes its own
    again (a clone id, the chunks to apply, which merging again leaves as they are, the index).
    Files git does not track stay. The removal is for the user to commit.
    """
    problem = gitfiles.problem_at(engram_dir)
    if problem is not None:
        raise UnsafePath(f"git cannot read the repository holding {engram_dir}: {problem}")
    done = subprocess.run(
        ["git", "rm", "-r", "-q", "--ignore-unmatch", "--", *LOCAL],
        cwd=engram_dir,
        capture_output=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise UnsafePath(f"git rm failed in {engram_dir}: {message}")
