"""The files a git repository is opened from, checked before dulwich or git opens them (a leaf).

Opening a named pipe (FIFO) waits for a writer, forever if none comes. dulwich opens HEAD, the
ref HEAD names, packed-refs, the config and the index with a plain ``open()``, and git's own
commands do the same: one FIFO (or device) where git keeps such a file froze every engram
command that reads the repository (``engram index``, ``remember --files``, ``diff``, ``doctor``,
``sync``). git never commits a FIFO, so none arrives with a clone; but a clone's ``.git`` is
anybody's to make, and a command must not hang on it.

``unreadable(folder)`` looks at the files opening a repository at ``folder`` reads and names
the first that is there but is not a regular file. It stats them; the few it must read to find
the others (a ``.git`` file, ``commondir``, HEAD and the refs it leads to) are opened without
blocking and checked on the open descriptor (``fileio.read_regular``). ``locate(root)`` walks up
from root as dulwich's ``Repo.discover`` does and returns the repository's folder for the caller
to open with dulwich, or raises ``GitUnreadable``, an OSError naming the file, which the callers'
handling of an unreadable repository already covers. ``problem_at(root)`` says the same before
git itself is run there.

Checked: the ``.git`` file of a linked work tree, ``commondir``, ``HEAD`` and every ref it leads
to, ``packed-refs``, ``config`` and ``config.worktree``, ``index``, ``shallow``,
``info/grafts``, ``objects/info/alternates`` and the pack files; the loose objects only for a
reader of history (``objects=True``: the 256 object folders listed, some milliseconds for
thousands of objects). The anchoring of a save and the staleness check of a hook run often and
read few objects: they stat each before they read it (``check_object``). Files are checked when
the repository is opened; one made a FIFO after that is not seen, and neither are the object
folders ``alternates`` names.

What it must not do: import dulwich (only the indexer and sync do; they open what ``locate``
returns), run git, or open anything but a regular file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from engram.errors import InvalidInput
from engram.fileio import kind_of, read_regular

__all__ = [
    "HINT",
    "GitUnreadable",
    "check_object",
    "control_folders",
    "locate",
    "looks_like_repo",
    "problem_at",
    "unreadable",
    "work_tree_folders",
]

# What to do about it, said with every refusal.
HINT: Final = (
    "remove that file, or put back the one git made (`git status` says whether git can read "
    "the repository), then run the command again"
)

# A symbolic ref leads to another at most this many times (git's own limit is 5).
MAX_SYMREF_DEPTH: Final = 5
# HEAD, a loose ref, a .git file or commondir: a line of text; more is not git's.
SMALL_FILE: Final = 4096

# The files opening a repository (or reading HEAD, the index and objects) reads, beside HEAD and
# the refs it leads to: in the control folder, and in the common folder.
_CONTROL_FILES: Final = ("index", "config.worktree", "shallow")
_COMMON_FILES: Final = (
    "config",
    "packed-refs",
    "shallow",
    "info/grafts",
    "objects/info/alternates",
)


class GitUnreadable(OSError):
    """A file git keeps is there but is not a regular file: reading it could wait forever."""

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem  # what ``unreadable`` said

    def __str__(self) -> str:
        return str(self.args[0])


def _kind(path: str) -> str | None:
    """Return what ``path`` is when it is there and not a regular file (links followed)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # not there (or not reachable): git's own reading says what that means
    if stat.S_ISREG(mode):
        return None
    return kind_of(mode)


def _small(path: str) -> str | None:
    """Return a small regular file's text (None: not there, or not a regular file)."""
    try:
        return read_regular(path, limit=SMALL_FILE).decode("utf-8", "replace")
    except (InvalidInput, OSError):
        return None


def looks_like_repo(folder: str) -> bool:
    """Say whether dulwich's ``Repo(folder)`` would take folder for a repository: a ``.git``
    file, a ``.git`` folder with ``objects``, or a bare repository's ``objects`` and ``refs``."""
    hidden = os.path.join(folder, ".git")
    if os.path.isfile(hidden) or os.path.isdir(os.path.join(hidden, "objects")):
        return True
    return os.path.isdir(os.path.join(folder, "objects")) and os.path.isdir(
        os.path.join(folder, "refs")
    )


def work_tree_folders(folder: str) -> tuple[str, str] | None:
    """Return (the control folder, the common folder) of the work tree at ``folder``: its
    ``.git`` folder, or the folder its ``.git`` file names (``gitdir: ...``, a linked work
    tree); None when folder has neither."""
    hidden = os.path.join(folder, ".git")
    if os.path.isdir(hidden):
        return _with_common(hidden)
    text = _small(hidden) if os.path.isfile(hidden) else None
    if text is None or not text.startswith("gitdir:"):
        return None
    return _with_common(os.path.join(folder, text[len("gitdir:") :].strip()))


def control_folders(folder: str) -> tuple[str, str]:
    """Return (the control folder, the common folder) of the repository at ``folder``.

    The control folder holds HEAD and the index: ``.git``, the folder a ``.git`` file names (a
    linked work tree), or folder itself (bare). The common folder holds the objects, refs and
    config: the one ``commondir`` names, or the control folder.
    """
    return work_tree_folders(folder) or _with_common(folder)


def _with_common(control: str) -> tuple[str, str]:
    common = control
    named = _small(os.path.join(control, "commondir"))
    if named is not None and named.strip():
        common = os.path.normpath(os.path.join(control, named.strip()))
    return control, common


def _refs_from_head(control: str, common: str) -> list[str]:
    """Return the files of HEAD and of each ref it leads to: where a linked work tree keeps its
    own (the control folder), and where every work tree's are (the common folder)."""
    out: list[str] = []
    name = "HEAD"
    for _ in range(MAX_SYMREF_DEPTH):
        places = list(dict.fromkeys(f"{base}/{name}" for base in (control, common)))
        out += places
        text = next((t for t in map(_small, places) if t is not None), "")
        if not text.startswith("ref:"):
            break
        name = text[len("ref:") :].strip()
        if not name or name.startswith("/") or ".." in name.split("/"):
            break
    return out


def unreadable(folder: str, *, objects: bool = False) -> str | None:
    """Name the first file opening the repository at ``folder`` reads that is there but is not
    a regular file, with what it is (``".git/HEAD is a named pipe (FIFO)"``); None if none.

    ``objects``: the loose objects too, for a reader of history (a listing of each of the 256
    object folders: some milliseconds for thousands of objects).
    """
    control, common = control_folders(folder)
    # Joined as text (a path in git's own layout, "/" on every system git runs on): this runs
    # on every save that anchors files.
    paths = [f"{control}/commondir", *_refs_from_head(control, common)]
    paths += [f"{control}/{name}" for name in _CONTROL_FILES]
    paths += [f"{common}/{name}" for name in _COMMON_FILES]
    for path in dict.fromkeys(paths):
        kind = _kind(path)
        if kind is not None:
            return f"{path} is {kind}, not a regular file"
    odd = _odd_entry(f"{common}/objects/pack", (".pack", ".idx"))
    if odd is not None or not objects:
        return odd
    try:
        with os.scandir(f"{common}/objects") as entries:
            fans = sorted(e.path for e in entries if len(e.name) == 2 and e.is_dir())
    except OSError:
        return None
    return next((odd for fan in fans if (odd := _odd_entry(fan)) is not None), None)


def _odd_entry(folder: str, endings: tuple[str, ...] = ("",)) -> str | None:
    """Name the first file of folder whose name has one of these ``endings`` (default: every
    file) that is not a regular file.

    The folder's listing says each entry's type (no stat per file); a link is followed.
    """
    try:
        with os.scandir(folder) as entries:
            found = [e for e in entries if e.name.endswith(endings)]
    except OSError:
        return None
    for entry in sorted(found, key=lambda e: e.name):
        try:
            if entry.is_file():
                continue
        except OSError:
            continue
        kind = _kind(entry.path)
        if kind is not None:  # None: a dangling link (opening it fails at once)
            return f"{entry.path} is {kind}, not a regular file"
    return None


def check_object(objects: str, sha: str | bytes) -> None:
    """Raise GitUnreadable when the loose object file of ``sha`` (hex) in the ``objects`` folder
    is there but is not a regular file: for a reader of a few objects, before it reads one (a
    stat: where ``locate(objects=True)`` would list every object)."""
    hexsha = sha.decode("ascii", "replace") if isinstance(sha, bytes) else sha
    if len(hexsha) < 3 or not objects:
        return
    path = f"{objects}/{hexsha[:2]}/{hexsha[2:]}"
    kind = _kind(path)
    if kind is not None:
        problem = f"{path} is {kind}, not a regular file"
        raise GitUnreadable(f"cannot read a git object: {problem}", problem)


def locate(root: Path | str, *, objects: bool = False) -> str | None:
    """Return the folder of the repository holding ``root`` (root or the first folder above it
    that looks like one, as dulwich's ``Repo.discover`` looks), for ``Repo(folder)`` to open;
    None when there is none.

    Raises GitUnreadable when ``unreadable`` names a file in it: opening it could wait forever.
    ``objects``: check the loose objects too (see ``unreadable``).
    """
    folder = os.path.abspath(os.fspath(root))
    while not looks_like_repo(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    problem = unreadable(folder, objects=objects)
    if problem is not None:
        raise GitUnreadable(f"cannot read the git repository at {folder}: {problem}", problem)
    return folder


def problem_at(root: Path | str) -> str | None:
    """Say what ``unreadable`` names in the repository holding ``root``, before git itself is
    run there; None if nothing (or no repository)."""
    try:
        locate(root)
    except GitUnreadable as exc:
        return exc.problem
    return None
