"""A committed link to ``/dev/zero``, or a FIFO, where engram keeps its own files freezes nothing.

git stores symbolic links: a repository can commit ``.engram/config.yaml -> /dev/zero``. Before
``fileio.read_own``, every command of a clone read that link until memory ran out (config.yaml,
memories.jsonl), and ``remember``, ``index`` and ``doctor`` did for ``.engram/.gitignore`` and
``.gitattributes``; a FIFO in their place was waited on forever. Real clones, links, FIFOs and
the real command line, each under run_cli's timeout, which an endless read would exceed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from engram.fileio import NotAFile, read_own
from tests.conftest import run_cli
from tests.helpers.gitrepo import git

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    assert run_cli("init", cwd=root).returncode == 0
    assert run_cli("remember", "-t", "Deploys drain the queue", "First.", cwd=root).returncode == 0
    return root


def replace(path: Path, kind: str) -> None:
    path.unlink(missing_ok=True)
    if kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    else:
        os.mkfifo(path)


def test_read_own_reads_a_file_and_refuses_anything_else(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_bytes(b"abc")
    data, info = read_own(plain)
    assert data == b"abc" and info.st_size == 3
    with pytest.raises(FileNotFoundError):
        read_own(tmp_path / "missing")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(NotAFile, match=r"pipe is a named pipe \(FIFO\), not a regular file"):
        read_own(pipe)  # at once: no writer is waited for
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    with pytest.raises(NotAFile, match="zero is a character device, not a regular file"):
        read_own(zero)
    with pytest.raises(NotAFile, match="is a folder"):
        read_own(tmp_path)


KINDS = ["link to /dev/zero", "fifo"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("name", "what"), [(".engram/config.yaml", "settings"), (".engram/memories.jsonl", "memories")]
)
def test_every_command_refuses_a_settings_or_memories_file_that_is_not_a_file(
    project: Path, kind: str, name: str, what: str
) -> None:
    path = project / name
    replace(path, kind)
    words = "a character device" if kind != "fifo" else "a named pipe (FIFO)"
    said = f"{path} is {words}, not a regular file: engram reads its {what} only from a regular"
    for args in (["recall", "deploys"], ["remember", "-t", "x", "y"], ["index"], ["doctor"]):
        done = run_cli(*args, cwd=project)
        assert done.returncode == 1 and said in done.stderr.decode(), (args, done.stderr)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", [".engram/.gitignore", ".gitattributes"])
def test_an_ignore_or_attributes_file_that_is_not_a_file_is_never_read(
    project: Path, kind: str, name: str
) -> None:
    path = project / name
    replace(path, kind)
    for args in (["recall", "deploys"], ["remember", "-t", "Second", "Body."], ["index"]):
        done = run_cli(*args, cwd=project)
        assert done.returncode == 0, (args, done.stderr)
    doctor = run_cli("doctor", cwd=project)
    assert doctor.returncode in (0, 1)
    if name == ".engram/.gitignore":
        assert "not a regular file; --fix writes a regular file in its place" in (
            doctor.stdout.decode()
        )
        fixed = run_cli("doctor", "--fix", cwd=project)
        assert fixed.returncode in (0, 1)
        info = path.lstat()
        assert stat.S_ISREG(info.st_mode) and not info.st_mode & 0o002  # not /dev/zero's 0666
        assert "state/" in path.read_text()


def test_a_clone_of_a_repository_that_commits_the_link_refuses_it(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    assert run_cli("init", cwd=origin).returncode == 0
    config = origin / ".engram" / "config.yaml"
    config.unlink()
    config.symlink_to("/dev/zero")
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "settings")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    assert (clone / ".engram" / "config.yaml").is_symlink()
    done = run_cli("recall", "anything", cwd=clone)
    assert done.returncode == 1
    assert "config.yaml is a character device, not a regular file" in done.stderr.decode()
