"""engram's side of the project's git repository: the merge and diff drivers, a memory's log.

It owns how git runs engram's merge and diff drivers (``driver_command``: this installation,
quoted), reporting and installing .gitattributes and the drivers' config, rebuilding conflicted
.engram files after a merge, reading one memory's versions from the commits, and comparing two
versions of a store (``diff``). The git work lives in ``engram.sync``: ``gitsetup``,
``gitmerge``, ``gitresolve``, ``gitlog`` and ``gitdiff``; this module chooses the scrubber,
the paths and the ids. It must not import the service or an adapter.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram import config as config_mod
from engram.errors import EngramError, NotFound
from engram.model import check_id
from engram.workspace import make_scrubber

if TYPE_CHECKING:
    from engram.project import Project
    from engram.sync.gitdiff import MemoryDiff
    from engram.sync.gitlog import Version
    from engram.sync.gitresolve import Resolved

__all__ = ["GitSetup", "diff", "driver_command", "log", "merge_driver", "resolve", "setup"]


@dataclass
class GitSetup:
    """What of the git integration a repository has, and what ``install`` just wrote."""

    repo: bool  # a git work tree was found at or above the root
    attributes: bool  # .gitattributes has engram's lines
    driver: bool  # the repository's config names the merge driver
    installed: list[str] = field(default_factory=list)  # what this call wrote
    diff_attribute: bool = False  # .gitattributes has diff=engram on memories.jsonl
    diff: bool = False  # the repository's config names the diff driver (textconv)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return asdict(self)


def merge_driver(base: Path, ours: Path, theirs: Path, pathname: str = "") -> int:
    """git's merge driver for .engram files: merge %O %A %B into %A; 0 when clean."""
    from engram.sync.gitmerge import merge_driver as merge

    try:  # git runs the driver at the top of the work tree: its settings name extra patterns
        root = config_mod.find_root(Path.cwd())
        scrubber = make_scrubber(config_mod.load(root, root / config_mod.ENGRAM_DIR))
    except EngramError:
        scrubber = None  # the built-in rules still apply
    return merge(base, ours, theirs, pathname, scrubber=scrubber)


def setup(root: Path, *, install: bool = False, command: str | None = None) -> GitSetup:
    """Report (and with ``install`` write) .gitattributes and the merge and diff drivers' config.

    The drivers run ``engram merge-driver`` and ``engram textconv`` of this installation
    (``driver_command``). The repo's config is local to the clone, never committed.
    """
    from engram.sync.gitsetup import check_setup
    from engram.sync.gitsetup import install as install_driver

    if command is None:
        command = driver_command()
    done = install_driver(root, command) if install else []
    found = check_setup(root)
    return GitSetup(
        found.repo, found.attributes, found.driver, done, found.diff_attribute, found.diff
    )


def resolve(here: Project) -> list[Resolved]:
    """Rebuild conflicted .engram files from git's three stages (or their markers)."""
    from engram.sync.gitresolve import resolve as rebuild

    # Writes memories.jsonl under the store's lock, scrubbed like every write.
    return rebuild(here.root, scrubber=here.ws.store.scrubber)


def log(here: Project, ref: str, *, limit: int = 50) -> list[Version]:
    """Return the versions of one memory in the commits reachable from HEAD, newest first."""
    from engram.sync.gitlog import memory_log

    try:
        rid, known = here.locate(ref, include_deleted=True)[1]["id"], True
    except NotFound:
        rid, known = check_id(ref), False  # gone from the file now: its full id finds its past
    store = here.ws.store.path
    try:
        path = store.resolve().relative_to(_work_tree(here.root)).as_posix()
    except ValueError:
        path = f"{config_mod.ENGRAM_DIR}/memories.jsonl"
    versions = memory_log(here.root, rid, limit=limit, path=path)
    if not versions and not known:
        raise NotFound(f"no memory with id {ref}, in {path} or in its committed history")
    return versions


def diff(store_file: Path, spec: str | None = None) -> MemoryDiff:
    """Compare two versions of a store's memories.jsonl (``A..B``, ``A``, or HEAD to the file)."""
    from engram.sync.gitdiff import memory_diff

    return memory_diff(store_file, spec)


def driver_command() -> str:
    """Return how git should run this engram for its drivers, quoted for git's shell.

    This installation's own ``engram`` script when it has one (a virtualenv that is not active
    when git merges: the bare name would not be found), else the one on PATH, else this
    interpreter with ``-m engram``.
    """
    own = Path(sys.executable).parent / "engram"
    if own.is_file() and os.access(own, os.X_OK):
        return shlex.quote(str(own))
    found = shutil.which("engram")
    if found:
        return shlex.quote(found)
    return f"{shlex.quote(sys.executable)} -m engram"


def _work_tree(root: Path) -> Path:
    """Return the git work tree holding ``root`` (``root`` itself when none does)."""
    for folder in (root.resolve(), *root.resolve().parents):
        if (folder / ".git").exists():
            return folder
    return root.resolve()
