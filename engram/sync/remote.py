"""Sync a store through a git remote, with dulwich: fetch, merge, commit, push (DESIGN.md §5).

The store's committed files travel on their own branch (``engram-memories`` unless told
otherwise), whose commits hold only the store folder: never the code, never the user's index or
working branch. ``engram sync --remote NAME`` fetches that branch, lets the service merge the
remote's memories into the local store with the one merge function, commits the result on top
of both tips, and pushes it. A push is never forced: a remote that moved meanwhile is fetched
and merged again (a few times, then a clear error).

Network access goes through dulwich's clients; ssh runs non-interactively (``BatchMode``), and
no credential is ever asked for: a remote that needs one fails with a message saying what to
set up. Nothing here writes to stdout (the MCP server owns it).

What it must not do: import the service or an adapter; run ``git``; touch the working branch,
HEAD or the git index.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from engram.errors import SyncError

if TYPE_CHECKING:
    from dulwich.objects import ObjectID, Tree
    from dulwich.refs import Ref
    from dulwich.repo import Repo

DEFAULT_BRANCH: Final = "engram-memories"
SSH_COMMAND: Final = "ssh -o BatchMode=yes"
MAX_FILE_BYTES: Final = 256 * 1024 * 1024  # one file of the store read from a fetched tree


@dataclass
class Fetched:
    """The remote branch as fetched: its tip and the store's files in it."""

    url: str
    tip: str | None  # None: the branch does not exist on the remote yet
    local_tip: str | None  # this clone's own branch tip, before the sync
    files: dict[str, bytes] = field(default_factory=dict)  # store-relative path -> bytes
    # The store's files at the merge base of the two tips (the common ancestor's version),
    # for a three-way merge; empty when the tips share no history.
    base: dict[str, bytes] = field(default_factory=dict)


def _open(repo_root: Path) -> Repo:
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    try:
        return Repo.discover(str(repo_root))
    except NotGitRepository as exc:
        raise SyncError(
            f"{repo_root} is not in a git repository",
            hint="engram sync --remote works on the git repository holding the store; "
            "for the personal store, make ENGRAM_HOME a git repository (git init) with a remote",
        ) from exc


def _ref(branch: str) -> Ref:
    from dulwich.refs import Ref, check_ref_format

    name = Ref(f"refs/heads/{branch}".encode())
    if not branch or not check_ref_format(name):
        raise SyncError(f"invalid branch name {branch!r}")
    return name


def _tip(repo: Repo, ref: Ref) -> ObjectID | None:
    try:
        return repo.refs[ref]
    except KeyError:
        return None


def remote_url(repo_root: Path, remote: str) -> str:
    """Return the URL of a remote named in the repository's config (or a URL/path given)."""
    repo = _open(repo_root)
    try:
        config = repo.get_config()
        try:
            url = config.get((b"remote", remote.encode()), b"url")
        except KeyError:
            url = None
    finally:
        repo.close()
    if url:
        return url.decode("utf-8", "replace")
    if "://" in remote or remote.startswith("/") or Path(remote).expanduser().exists():
        return remote
    raise SyncError(
        f"no remote named {remote!r} in this repository",
        hint=f"add one (git remote add {remote} URL) or pass a URL",
    )


def _prefix_of(repo: Repo, store_dir: Path) -> str:
    top = Path(repo.path).resolve()
    try:
        rel = store_dir.resolve().relative_to(top)
    except ValueError as exc:
        raise SyncError(f"{store_dir} is not inside the git work tree {top}") from exc
    return "" if str(rel) == "." else rel.as_posix()


def _env_ssh() -> str:
    return os.environ.get("GIT_SSH_COMMAND") or os.environ.get("GIT_SSH") or SSH_COMMAND


def _network(action: str, url: str, exc: BaseException) -> SyncError:
    text = str(exc).strip() or type(exc).__name__
    hint = (
        "check the remote's URL and your access to it (an ssh key in your agent, or a "
        "credential helper for https); engram never asks for a password"
    )
    return SyncError(f"{action} {url} failed: {text}", hint=hint)


def fetch(repo_root: Path, store_dir: Path, remote: str, branch: str = DEFAULT_BRANCH) -> Fetched:
    """Fetch ``branch`` from ``remote`` and return the store's files at its tip."""
    from dulwich import porcelain

    ref = _ref(branch)
    url = remote_url(repo_root, remote)
    repo = _open(repo_root)
    try:
        prefix = _prefix_of(repo, store_dir)
        try:
            result = porcelain.fetch(
                repo,
                url,
                outstream=io.StringIO(),
                errstream=io.BytesIO(),
                ssh_command=_env_ssh(),
                quiet=True,
            )
        except Exception as exc:  # dulwich raises many kinds for network and auth failures
            raise _network("fetching from", url, exc) from exc
        tip = (result.refs or {}).get(ref)
        local = _tip(repo, ref)
        fetched = Fetched(
            url=url,
            tip=tip.decode("ascii") if tip else None,
            local_tip=local.decode("ascii") if local else None,
        )
        if tip:
            fetched.files = dict(_files_at(repo, tip, prefix))
            if local and local != tip:
                from dulwich.graph import find_merge_base

                bases = find_merge_base(repo, [local, tip])
                if bases:
                    fetched.base = dict(_files_at(repo, bases[0], prefix))
        return fetched
    finally:
        repo.close()


def _files_at(repo: Repo, commit_id: bytes, prefix: str) -> Iterator[tuple[str, bytes]]:
    """Yield (store-relative path, bytes) of every regular file under ``prefix`` in a commit."""
    from dulwich.objects import Blob, Commit, Tree

    commit = repo[commit_id]
    if not isinstance(commit, Commit):
        raise SyncError(f"{commit_id.decode()} is not a commit")
    tree = repo[commit.tree]
    assert isinstance(tree, Tree)
    for part in [p for p in prefix.split("/") if p]:
        try:
            mode, sha = tree[part.encode()]
        except KeyError:
            return
        sub = repo[sha]
        if not stat.S_ISDIR(mode) or not isinstance(sub, Tree):
            return
        tree = sub
    stack: list[tuple[str, Tree]] = [("", tree)]
    while stack:
        base, node = stack.pop()
        for entry in node.iteritems():
            name = entry.path.decode("utf-8", "replace")
            if name in ("", ".", "..") or "/" in name or "\\" in name:
                continue  # a hostile tree entry never names a path outside the store
            path = f"{base}{name}"
            obj = repo[entry.sha]
            if stat.S_ISDIR(entry.mode) and isinstance(obj, Tree):
                stack.append((path + "/", obj))
            elif stat.S_ISREG(entry.mode) and isinstance(obj, Blob):
                if obj.raw_length() > MAX_FILE_BYTES:
                    raise SyncError(f"{path} on the remote branch is larger than 256 MiB")
                yield path, obj.as_raw_string()


def _tree_of(repo: Repo, files: Mapping[str, bytes], prefix: str) -> ObjectID:
    """Store blobs and trees for ``files`` under ``prefix``; return the root tree id."""
    from dulwich.objects import Blob, Tree

    root: dict[str, Any] = {}
    for path, data in files.items():
        parts = [p for p in (prefix.split("/") if prefix else []) + path.split("/") if p]
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = data

    def build(node: Mapping[str, Any]) -> ObjectID:
        tree = Tree()
        for name, value in node.items():
            if isinstance(value, dict):
                tree.add(name.encode(), stat.S_IFDIR, build(value))
            else:
                blob = Blob.from_string(value)
                repo.object_store.add_object(blob)
                tree.add(name.encode(), 0o100644, blob.id)
        repo.object_store.add_object(tree)
        return tree.id

    return build(root)


def commit(
    repo_root: Path,
    store_dir: Path,
    files: Mapping[str, bytes],
    *,
    parents: list[str],
    message: str,
    author: str,
    branch: str = DEFAULT_BRANCH,
) -> str:
    """Commit ``files`` (store-relative) as the whole tree of ``branch``; return the commit id.

    When the tree equals the only parent's, no commit is made and the parent is returned.
    """
    import time

    from dulwich.graph import can_fast_forward
    from dulwich.objects import Commit

    ref = _ref(branch)
    repo = _open(repo_root)
    try:
        prefix = _prefix_of(repo, store_dir)
        tree = _tree_of(repo, files, prefix)
        unique = list(dict.fromkeys(p for p in parents if p))
        # Nothing new on top of a parent that already holds the other ones: fast-forward to it.
        for candidate in reversed(unique):
            parent = repo[cast("ObjectID", candidate.encode())]
            if not isinstance(parent, Commit) or parent.tree != tree:
                continue
            others = [cast("ObjectID", p.encode()) for p in unique if p != candidate]
            if all(can_fast_forward(repo, other, parent.id) for other in others):
                repo.refs.set_if_equals(ref, _tip(repo, ref), parent.id)
                return candidate
        made = Commit()
        made.tree = tree
        made.parents = [cast("ObjectID", p.encode()) for p in unique]
        who = (author or "engram <engram@localhost>").encode("utf-8")
        made.author = made.committer = who
        made.author_time = made.commit_time = int(time.time())
        made.author_timezone = made.commit_timezone = 0
        made.encoding = b"UTF-8"
        made.message = message.encode("utf-8")
        repo.object_store.add_object(made)
        old = _tip(repo, ref)
        repo.refs.set_if_equals(ref, old, made.id)
        return made.id.decode("ascii")
    finally:
        repo.close()


def push(repo_root: Path, remote: str, branch: str = DEFAULT_BRANCH) -> bool:
    """Push ``branch`` to ``remote`` without force; False when the remote moved (fetch again)."""
    from dulwich import porcelain

    ref = _ref(branch).decode()
    url = remote_url(repo_root, remote)
    repo = _open(repo_root)
    try:
        porcelain.push(
            repo,
            url,
            f"{ref}:{ref}",
            outstream=io.BytesIO(),
            errstream=io.BytesIO(),
            force=False,
            ssh_command=_env_ssh(),
        )
    except porcelain.DivergedBranches:
        return False
    except Exception as exc:
        text = str(exc)
        if "non-fast-forward" in text or "fetch first" in text or "rejected" in text:
            return False
        raise _network("pushing to", url, exc) from exc
    finally:
        repo.close()
    return True


def author_of(repo_root: Path) -> str:
    """Return ``Name <email>`` from the repository's git config (user.name, user.email)."""
    repo = _open(repo_root)
    try:
        stack = repo.get_config_stack()

        def value(key: bytes) -> str:
            try:
                return stack.get((b"user",), key).decode("utf-8", "replace").strip()
            except KeyError:
                return ""

        name = os.environ.get("GIT_AUTHOR_NAME") or value(b"name") or "engram"
        email = os.environ.get("GIT_AUTHOR_EMAIL") or value(b"email") or "engram@localhost"
        return f"{name} <{email}>"
    finally:
        repo.close()
