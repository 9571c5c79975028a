"""A named pipe where git keeps a file freezes no command (``engram.gitfiles``).

dulwich and git open HEAD, refs, packed-refs, the config and the index with a plain ``open()``,
which waits for a writer when the path is a FIFO. Before this, ``engram index``, ``remember
--files``, ``diff``, ``doctor`` and ``sync`` hung on one (HEAD, the config or the index) and
``doctor`` and ``sync`` waited out git's 30 s. Real repositories made by git, real FIFOs, and
the real command line, each under a timeout a blocked open would exceed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dulwich.errors import NotGitRepository

from engram import gitfiles
from engram.sync.gitsetup import open_repo
from tests.conftest import run_cli
from tests.helpers.gitrepo import git

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A work tree with two commits of src/a.py and a pack (so every kind of file is there)."""
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "src" / "a.py").write_text("x = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    git(root, "repack", "-qad")
    (root / "src" / "a.py").write_text("x = 2\n")
    git(root, "commit", "-qam", "two")
    assert run_cli("init", cwd=root).returncode == 0
    return root


def fifo_at(root: Path, where: str) -> Path:
    """Put a FIFO where git keeps ``where`` (under .git), as git would find it."""
    path = root / ".git" / where
    if where == "packed-refs":
        git(root, "pack-refs", "--all")  # the loose ref goes: HEAD is read from there
    if where.endswith(".pack"):
        path = next((root / ".git" / "objects" / "pack").glob("*.pack"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


PLACES = [
    "HEAD",
    "refs/heads/main",
    "packed-refs",
    "config",
    "index",
    "objects/pack/the.pack",
    "objects/info/alternates",
    "shallow",
]


@pytest.mark.parametrize("where", PLACES)
def test_a_fifo_where_git_keeps_a_file_is_named_and_nothing_opens_it(
    repo: Path, where: str
) -> None:
    assert gitfiles.unreadable(str(repo)) is None
    assert gitfiles.locate(repo / "src") == str(repo)  # walks up, as Repo.discover does
    with open_repo(repo / "src") as opened:
        assert Path(opened.path) == repo
    fifo = fifo_at(repo, where)
    said = f"{fifo} is a named pipe (FIFO), not a regular file"
    assert gitfiles.unreadable(str(repo)) == said
    assert gitfiles.problem_at(repo / ".engram") == said
    with pytest.raises(gitfiles.GitUnreadable, match=r"is a named pipe \(FIFO\)") as raised:
        open_repo(repo / "src")  # nothing opened: dulwich's open() would wait forever
    assert str(raised.value) == f"cannot read the git repository at {repo}: {said}"
    assert raised.value.problem == said
    assert isinstance(raised.value, OSError)  # what callers already take as "cannot open it"


def loose_head_commit(root: Path) -> Path:
    """The file of HEAD's commit (the fixture's second commit is loose, the first packed)."""
    sha = git(root, "rev-parse", "HEAD").strip()
    path = root / ".git" / "objects" / sha[:2] / sha[2:]
    assert path.is_file()
    return path


def test_a_fifo_for_a_loose_object_is_found_by_readers_of_history_and_before_a_read(
    repo: Path,
) -> None:
    first = git(repo, "rev-parse", "HEAD~1").strip()  # packed: no loose file at all
    fifo = loose_head_commit(repo)
    fifo.unlink()
    os.mkfifo(fifo)  # git itself would now wait on it forever
    said = f"{fifo} is a named pipe (FIFO), not a regular file"
    assert gitfiles.unreadable(str(repo)) is None  # objects are not listed unless asked
    assert gitfiles.unreadable(str(repo), objects=True) == said
    with pytest.raises(gitfiles.GitUnreadable) as raised:
        gitfiles.locate(repo, objects=True)
    assert raised.value.problem == said
    objects = str(repo / ".git" / "objects")
    with pytest.raises(gitfiles.GitUnreadable, match="cannot read a git object: "):
        gitfiles.check_object(objects, fifo.parent.name + fifo.name)
    gitfiles.check_object(objects, first.encode("ascii"))


def test_a_linked_work_tree_is_checked_in_its_own_folder_and_the_common_one(
    repo: Path, tmp_path: Path
) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    control = repo / ".git" / "worktrees" / "linked"
    assert gitfiles.work_tree_folders(str(linked)) == (str(control), str(repo / ".git"))
    assert gitfiles.unreadable(str(linked)) is None
    head = control / "HEAD"
    head.unlink()
    os.mkfifo(head)
    assert gitfiles.unreadable(str(linked)) == f"{head} is a named pipe (FIFO), not a regular file"
    assert gitfiles.unreadable(str(repo)) is None  # the main work tree's own HEAD is a file
    head.unlink()
    git(repo, "worktree", "repair", str(linked))
    (control / "HEAD").write_text("ref: refs/heads/side\n")
    side = repo / ".git" / "refs" / "heads" / "side"  # where the linked tree's branch is kept
    side.unlink()
    os.mkfifo(side)
    assert gitfiles.unreadable(str(linked)) == f"{side} is a named pipe (FIFO), not a regular file"
    side.unlink()
    commondir = control / "commondir"
    commondir.unlink()
    os.mkfifo(commondir)
    said = gitfiles.unreadable(str(linked))
    assert said == f"{commondir} is a named pipe (FIFO), not a regular file"


def test_a_device_or_a_link_to_one_is_named_as_what_it_is(repo: Path) -> None:
    config = repo / ".git" / "config"
    config.unlink()
    config.symlink_to("/dev/zero")  # a config that never ends
    said = gitfiles.unreadable(str(repo))
    assert said == f"{config} is a character device, not a regular file"


def test_outside_any_repository_there_is_nothing_to_open(tmp_path: Path) -> None:
    plain = tmp_path / "plain" / "deeper"
    plain.mkdir(parents=True)
    assert gitfiles.locate(plain) is None and gitfiles.problem_at(plain) is None
    with pytest.raises(NotGitRepository):
        open_repo(plain)


@pytest.mark.parametrize("where", ["HEAD", "config", "index", "packed-refs"])
def test_no_command_waits_on_a_fifo_in_the_repository(repo: Path, where: str) -> None:
    fifo = fifo_at(repo, where)
    said = f"{fifo} is a named pipe (FIFO), not a regular file"
    # Each finishes within run_cli's timeout (a blocked open never would) and says why.
    doctor = run_cli("doctor", cwd=repo)
    assert doctor.returncode == 1
    assert f"git cannot read the repository holding the store: {said}" in doctor.stdout.decode()
    diff = run_cli("diff", cwd=repo)
    assert diff.returncode == 1 and said in diff.stderr.decode()
    index = run_cli("index", cwd=repo)
    assert index.returncode == 0, index.stderr.decode()
    assert f"{said}; git history was not indexed" in index.stdout.decode()
    saved = run_cli("remember", "-t", "Keep x at 1", "--files", "src/a.py", "It breaks.", cwd=repo)
    assert saved.returncode == 0, saved.stderr.decode()
    shown = run_cli("check", "--files", "src/a.py", cwd=repo)
    assert shown.returncode == 0 and "It breaks. — about src/a.py" in shown.stdout.decode()
    synced = run_cli("sync", cwd=repo)
    assert synced.returncode == 0, synced.stderr.decode()
    staged = run_cli("check", "--staged", cwd=repo)
    assert staged.returncode == 1 and said in staged.stderr.decode()
    # The readers of history refuse, naming the file (not "no history", not "no repository").
    memory = saved.stdout.decode().split()[0]
    for args in (["log", memory], ["resolve"], ["review-pr", "main..HEAD"]):
        refused = run_cli(*args, cwd=repo)
        assert refused.returncode == 1 and said in refused.stderr.decode(), args


def test_no_command_waits_on_a_fifo_for_a_loose_object(repo: Path) -> None:
    saved = run_cli("remember", "-t", "Keep x at 2", "--files", "src/a.py", "It breaks.", cwd=repo)
    assert saved.returncode == 0, saved.stderr.decode()
    fifo = loose_head_commit(repo)
    fifo.unlink()
    os.mkfifo(fifo)
    said = f"{fifo} is a named pipe (FIFO), not a regular file"
    # The staleness check reads HEAD's commit: it says nothing of staleness, and answers.
    shown = run_cli("check", "--files", "src/a.py", cwd=repo)
    assert shown.returncode == 0 and "It breaks. — about src/a.py" in shown.stdout.decode()
    again = run_cli("remember", "-t", "Also", "--files", "src/a.py", "More.", cwd=repo)
    assert again.returncode == 0, again.stderr.decode()
    index = run_cli("index", cwd=repo)
    assert index.returncode == 0 and f"{said}; git history was not indexed" in index.stdout.decode()
    diff = run_cli("diff", cwd=repo)
    assert diff.returncode == 1 and said in diff.stderr.decode()
