"""Sync a store through a git remote, with dulwich: fetch, merge, commit, push.

The store's committed files travel on their own branch (``engram-memories`` unless told
otherwise), whose commits hold only the store folder: never the code, never the user's index or
working branch. ``engram sync --remote NAME`` fetches that branch, lets the service merge the
remote's memories into the local store with the one merge function, commits the result on top
of both tips, and pushes it. A push is never forced: a remote that moved meanwhile is fetched
and merged again (a few times, then a clear error).

Network access goes through dulwich's clients; ssh runs non-interactively (``BatchMode``), and
no credential is ever asked for: a remote that needs one fails with a message saying what to
set up. Nothing here writes to stdout (the MCP server owns it). Whatever dulwich raises is
turned into a one-line ``SyncError`` here: no dulwich traceback reaches a user.

Crash safety. dulwich writes each ref, loose object and pack index through ``<file>.lock``
(created exclusively, renamed over the target); a process killed mid-write leaves the lock file
behind and every later write of that file fails. ``exclusive`` makes that recoverable:

- A sync holds ``engram-sync.lock`` in the repository's git folder (the common one, so that
  worktrees sharing objects and refs share it too) for its whole run. It is a kernel file lock:
  the system releases it when its holder dies, so holding it proves no other engram sync of
  this repository is alive. A second sync meanwhile is refused with one line naming the pid.
- While holding it, the sync writes ``engram-sync.run`` (its pid) and removes it when it ends,
  however it ends short of being killed. Finding that file on start means the previous sync
  was killed.
- Then a ``*.lock`` file under ``objects/`` is stale (git itself never names object files so;
  only dulwich does, and in engram only this sync writes objects), and so is a ``*.lock``
  under ``refs/heads/<branch>``, ``refs/remotes/<remote>/`` or ``packed-refs`` made no earlier
  than the killed sync's run file: that sync made it. Stale lock files are removed.
- Any other lock file may belong to a running ``git``: it is left alone, and a write that meets
  it fails with a ``SyncError`` naming it and saying to remove it if no git command is running
  (git's own rule).
- A remote on a local path (a bare repository on this machine or a shared disk) is written by
  dulwich itself, through the same lock files, by every clone that pushes there: a push holds
  that repository's sync lock and run file too, by the same rule (waiting a while for another
  clone's push instead of refusing).

What it must not do: import the service or an adapter; run ``git``; touch the working branch,
HEAD or the git index.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from engram import gitfiles
from engram.errors import EngramError, LockTimeout, SyncError
from engram.store.lock import ProcessLock
from engram.sync.gitsetup import open_repo

if TYPE_CHECKING:
    from dulwich.objects import ObjectID, Tree
    from dulwich.refs import Ref
    from dulwich.repo import Repo

DEFAULT_BRANCH: Final = "engram-memories"
SSH_COMMAND: Final = "ssh -o BatchMode=yes"
MAX_FILE_BYTES: Final = 256 * 1024 * 1024  # one file of the store read from a fetched tree
SYNC_LOCK: Final = "engram-sync.lock"  # in the git folder: held for a whole sync --remote
SYNC_RUN: Final = "engram-sync.run"  # in the git folder: there while a sync runs (or was killed)
_PUSH_WAIT: Final = 60.0  # seconds a push waits for another clone's push into a local remote


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

    try:
        return open_repo(repo_root, objects=True)
    except gitfiles.GitUnreadable as exc:
        raise SyncError(str(exc), hint=gitfiles.HINT) from exc
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
        with _git_errors(f"reading the git config of {repo_root}"):
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


def _locked(lock_file: bytes | str) -> SyncError:
    path = os.fsdecode(lock_file)
    return SyncError(
        f"{path} is locked: another git command may be writing the repository",
        hint=f"wait for it to finish; if no git or engram command is running, remove {path} "
        "and run engram sync --remote again",
    )


@contextlib.contextmanager
def _git_errors(action: str) -> Iterator[None]:
    """Turn whatever dulwich raises while doing ``action`` into a one-line SyncError."""
    from dulwich.file import FileLocked

    try:
        yield
    except EngramError:
        raise
    except FileLocked as exc:
        raise _locked(exc.lockfilename) from exc
    except Exception as exc:  # the boundary to dulwich: its errors have no common base class
        text = str(exc).strip() or type(exc).__name__
        raise SyncError(
            f"{action} failed: {text}",
            hint="run `git fsck` on the repository; nothing in .engram/ was lost",
        ) from exc


@dataclass
class Session:
    """One sync's hold on a repository: what it found a killed sync had left, and removed."""

    git_dir: Path
    killed_pid: int | None = None  # the pid of a previous sync that was killed, if one was
    cleared: list[str] = field(default_factory=list)  # stale lock files removed (git-relative)


def _git_dir(repo_root: Path) -> Path:
    repo = _open(repo_root)
    try:
        return Path(repo.commondir())
    finally:
        repo.close()


@contextlib.contextmanager
def exclusive(repo_root: Path, remote: str, branch: str = DEFAULT_BRANCH) -> Iterator[Session]:
    """Hold the repository's sync lock for a whole sync, clearing what a killed sync left.

    Refuses (SyncError) while another engram sync of the same repository is running.
    """
    with _held(_git_dir(repo_root), _ref(branch), remote, timeout=0) as session:
        yield session


@contextlib.contextmanager
def _held(
    git_dir: Path, ref: Ref, remote: str, *, timeout: float, writable: bool = True
) -> Iterator[Session]:
    """Hold ``git_dir``'s sync lock and run file; clear the stale locks found on the way in.

    ``writable`` False (a remote we may only read): a folder we cannot write is not held, and
    the push that follows says why it failed.
    """
    lock = ProcessLock(git_dir / SYNC_LOCK, timeout=timeout, what=str(git_dir / SYNC_LOCK))
    run = git_dir / SYNC_RUN
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(lock.hold())
        except LockTimeout as exc:
            holder = _run_pid(run)
            who = f" (pid {holder})" if holder else ""
            raise SyncError(
                f"another engram sync --remote{who} is running on {git_dir}",
                hint="wait for it to finish, then run engram sync --remote again",
            ) from exc
        except OSError as exc:
            if not writable:
                yield Session(git_dir)
                return
            raise _unwritable(git_dir, exc) from exc
        session = Session(git_dir)
        since = _killed_run(run, session)
        _clear_stale_locks(session, ref, remote, since)
        try:
            # Written after the sweep: a lock file made from here on is this run's own.
            run.write_text(json.dumps({"pid": os.getpid()}) + "\n", encoding="utf-8")
        except OSError as exc:
            raise _unwritable(git_dir, exc) from exc
        try:
            yield session
        finally:
            with contextlib.suppress(OSError):
                run.unlink()


def _unwritable(git_dir: Path, exc: OSError) -> SyncError:
    return SyncError(
        f"cannot write {git_dir}: {exc.strerror or exc}",
        hint="engram sync --remote commits and fetches there: check the folder's owner and "
        "permissions",
    )


def _local_git_dir(url: str) -> Path | None:
    """Return the git folder of a remote on a local path (None for a network remote)."""
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    if url.startswith("file://"):
        url = url[len("file://") :]
    elif "://" in url:
        return None
    path = Path(url).expanduser()
    if not path.is_dir():
        return None  # host:path is ssh
    looks = gitfiles.looks_like_repo(str(path))
    problem = gitfiles.unreadable(str(path), objects=True) if looks else None
    if problem is not None:
        raise SyncError(f"cannot read the remote's repository: {problem}", hint=gitfiles.HINT)
    try:
        repo = Repo(str(path))
    except NotGitRepository:
        return None
    try:
        return Path(repo.commondir())
    finally:
        repo.close()


def _run_pid(run: Path) -> int | None:
    try:
        value = json.loads(run.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    pid = value.get("pid") if isinstance(value, dict) else None
    return pid if isinstance(pid, int) else None


def _killed_run(run: Path, session: Session) -> int | None:
    """Return the mtime (ns) of a killed sync's run file, or None when the last sync ended."""
    try:
        since = run.stat().st_mtime_ns
    except FileNotFoundError:
        return None
    session.killed_pid = _run_pid(run) or 0
    return since


def _clear_stale_locks(session: Session, ref: bytes, remote: str, since: int | None) -> None:
    """Remove the lock files no live process holds (the rule is in the module docstring)."""
    git_dir = session.git_dir
    stale: list[Path] = []
    objects = git_dir / "objects"
    with contextlib.suppress(OSError):
        for folder in os.scandir(objects):
            if folder.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    stale += [
                        Path(e.path) for e in os.scandir(folder.path) if e.name.endswith(".lock")
                    ]
    if since is not None:
        candidates = [git_dir / (os.fsdecode(ref) + ".lock"), git_dir / "packed-refs.lock"]
        tracking = git_dir / "refs" / "remotes" / remote
        if "/" not in remote and remote not in ("", ".", ".."):
            candidates += list(tracking.rglob("*.lock")) if tracking.is_dir() else []
        for path in candidates:
            try:
                made = path.lstat().st_mtime_ns
            except OSError:
                continue
            if made >= since:
                stale.append(path)
    for path in stale:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise _locked(str(path)) from exc
        session.cleared.append(path.relative_to(git_dir).as_posix())


def fetch(repo_root: Path, store_dir: Path, remote: str, branch: str = DEFAULT_BRANCH) -> Fetched:
    """Fetch ``branch`` from ``remote`` and return the store's files at its tip."""
    from dulwich import porcelain
    from dulwich.file import FileLocked

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
        except FileLocked as exc:
            raise _locked(exc.lockfilename) from exc
        except Exception as exc:  # dulwich raises many kinds for network and auth failures
            raise _network("fetching from", url, exc) from exc
        with _git_errors(f"reading branch {branch} fetched from {url}"):
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
    ref = _ref(branch)
    repo = _open(repo_root)
    try:
        with _git_errors(f"committing the store on branch {branch}"):
            return _commit(repo, ref, store_dir, files, parents, message, author)
    finally:
        repo.close()


def _commit(
    repo: Repo,
    ref: Ref,
    store_dir: Path,
    files: Mapping[str, bytes],
    parents: list[str],
    message: str,
    author: str,
) -> str:
    import time

    from dulwich.graph import can_fast_forward
    from dulwich.objects import Commit

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


def push(
    repo_root: Path, remote: str, branch: str = DEFAULT_BRANCH, *, cleared: list[str] | None = None
) -> bool:
    """Push ``branch`` to ``remote`` without force; False when the remote moved (fetch again).

    A remote on a local path is held like the local repository (see ``exclusive``) while the
    push writes it; the stale lock files removed there are added to ``cleared``.
    """
    ref = _ref(branch).decode()
    url = remote_url(repo_root, remote)
    target = _local_git_dir(url)
    with contextlib.ExitStack() as stack:
        if target is not None:
            # dulwich writes a remote on a local path itself, through the same lock files: a
            # push killed there leaves them in the remote, and other clones push there too.
            held = stack.enter_context(
                _held(target, _ref(branch), "", timeout=_PUSH_WAIT, writable=False)
            )
            if cleared is not None:
                cleared += [f"{url}: {path}" for path in held.cleared]
        return _push(repo_root, url, ref)


def _push(repo_root: Path, url: str, ref: str) -> bool:
    from dulwich import porcelain
    from dulwich.file import FileLocked

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
    except FileLocked as exc:
        raise _locked(exc.lockfilename) from exc
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
        with _git_errors(f"reading the git config of {repo_root}"):
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
