"""Guardrails in git: the pre-commit hook of `engram setup git-hooks` in a real repository.

Real `git commit` runs the installed hook, which runs the real `engram check --staged`: a
staged change to a file with a blocking pitfall fails with the pitfall's text, a change that
brings back a reverted commit's lines (mined by the real git indexer) fails, anything else
passes; an existing hook is chained, never clobbered; `engram review-pr BASE..HEAD` prints the
memory changes and the pitfalls about the files of a range.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engram.service import Engram
from engram.sync.gitguard import CHAINED, HOOK_MARKER
from tests.conftest import run_cli
from tests.helpers.places import ROOT

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="needs the git binary")
BIN = Path(sys.executable).parent  # holds the `engram` entry point of this installation

BILLING_V1 = "def charge(amount):\n    return amount\n"


def _env(path: str | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GIT_AUTHOR_NAME": "Dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "Dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
    }
    env["PATH"] = path if path is not None else f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def git(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env=env or _env(),
        timeout=120,
        check=False,
    )


def commit_all(root: Path, message: str) -> str:
    assert git(root, "add", "-A").returncode == 0
    done = git(root, "commit", "-q", "--no-verify", "-m", message)
    assert done.returncode == 0, done.stderr
    return git(root, "rev-parse", "HEAD").stdout.strip()


@pytest.fixture
def repo(project: Engram) -> Engram:
    root = project.root
    (root / "src").mkdir()
    (root / "src" / "billing.py").write_text(BILLING_V1)
    (root / "README.md").write_text("# demo\n")
    commit_all(root, "start")
    return project


def _block_billing(project: Engram) -> str:
    saved = project.remember(
        "Never call the payment API twice",
        "charge() must stay idempotent: the gateway bills every call.",
        kind="pitfall",
        files=["src/billing.py"],
        tags=["blocking"],
    )
    project.pin(saved.record["id"])
    return str(saved.record["id"])


def test_setup_installs_once_and_a_blocking_pitfall_fails_the_commit(repo: Engram) -> None:
    root = repo.root
    _block_billing(repo)
    repo.remember(
        "README is rendered on PyPI", "Keep it plain Markdown.", kind="pitfall", files=["README.md"]
    )
    first = run_cli("-C", str(root), "setup", "git-hooks")
    assert first.returncode == 0, first.stderr
    hook = root / ".git" / "hooks" / "pre-commit"
    assert f"wrote {hook}" in first.stdout.decode()
    assert HOOK_MARKER in hook.read_text() and os.access(hook, os.X_OK)
    again = run_cli("-C", str(root), "setup", "git-hooks")
    assert "unchanged:" in again.stdout.decode()

    (root / "src" / "billing.py").write_text(BILLING_V1 + "\ndef refund(x):\n    return -x\n")
    git(root, "add", "src/billing.py")
    refused = git(root, "commit", "-m", "refunds")
    assert refused.returncode == 1
    assert "engram: commit refused: src/billing.py: blocking pitfall" in refused.stderr
    assert "the gateway bills every call" in refused.stderr
    assert "git commit --no-verify" in refused.stderr
    assert git(root, "rev-list", "--count", "HEAD").stdout.strip() == "1"

    git(root, "reset", "-q")
    (root / "README.md").write_text("# demo\n\nMore words.\n")
    git(root, "add", "README.md")
    passed = git(root, "commit", "-m", "docs")
    assert passed.returncode == 0, passed.stderr
    assert "README is rendered on PyPI" in passed.stderr  # git shows a hook's output there
    # The staged change is the commit's own: it does not make the memory look stale.
    assert "uncommitted changes" not in passed.stderr and "may be stale" not in passed.stderr
    assert git(root, "rev-list", "--count", "HEAD").stdout.strip() == "2"


def test_a_pitfall_that_is_not_pinned_and_blocking_never_fails_a_commit(repo: Engram) -> None:
    root = repo.root
    repo.remember(
        "Careful with charge()",
        "It bills.",
        kind="pitfall",
        files=["src/billing.py"],
        tags=["blocking"],
    )  # tagged, not pinned
    assert run_cli("-C", str(root), "setup", "git-hooks").returncode == 0
    (root / "src" / "billing.py").write_text(BILLING_V1 + "# note\n")
    git(root, "add", "-A")
    done = git(root, "commit", "-m", "note")
    assert done.returncode == 0, done.stderr
    assert "Careful with charge()" in done.stderr


def test_bringing_back_a_reverted_change_fails_the_commit(repo: Engram) -> None:
    root = repo.root
    risky = (
        "import threading\n"
        "_cache_lock = threading.Lock()\n"
        "def charge(amount):\n"
        "    with _cache_lock:\n"
        "        return amount * RATE_FROM_CACHE\n"
    )
    (root / "src" / "billing.py").write_text(risky)
    bad = commit_all(root, "Cache the exchange rate")
    reverted = git(root, "revert", "--no-edit", bad)
    assert reverted.returncode == 0, reverted.stderr
    mined = run_cli("-C", str(root), "index", "--git")
    assert mined.returncode == 0, mined.stderr
    memories = [
        json.loads(line) for line in (root / ".engram" / "memories.jsonl").read_text().splitlines()
    ]
    assert any(f"- reverted: {bad}" in m.get("content", "") for m in memories)
    commit_all(root, "memories")
    assert run_cli("-C", str(root), "setup", "git-hooks").returncode == 0

    (root / "src" / "billing.py").write_text(risky + "# again\n")
    git(root, "add", "src/billing.py")
    refused = git(root, "commit", "-m", "try the cache again")
    assert refused.returncode == 1, refused.stdout
    assert "engram: commit refused: src/billing.py:" in refused.stderr
    assert f"commit {bad[:12]} added come back, and that commit was reverted" in refused.stderr

    git(root, "reset", "-q", "--hard")
    (root / "src" / "billing.py").write_text(BILLING_V1 + "def total(xs):\n    return sum(xs)\n")
    git(root, "add", "src/billing.py")
    assert git(root, "commit", "-m", "a different change").returncode == 0


def test_an_existing_hook_is_chained_and_runs_first(repo: Engram) -> None:
    root = repo.root
    hooks = root / ".git" / "hooks"
    theirs = '#!/bin/sh\necho ran > "$(git rev-parse --show-toplevel)/.theirs"\nexit 0\n'
    (hooks / "pre-commit").write_text(theirs)
    (hooks / "pre-commit").chmod(0o755)
    done = run_cli("-C", str(root), "setup", "git-hooks")
    assert done.returncode == 0, done.stderr
    assert "the existing hook now runs first" in done.stdout.decode()
    assert (hooks / CHAINED).read_text() == theirs
    (root / "README.md").write_text("# changed\n")
    git(root, "add", "README.md")
    assert git(root, "commit", "-m", "x").returncode == 0
    assert (root / ".theirs").read_text() == "ran\n"
    # their hook failing still fails the commit
    (hooks / CHAINED).write_text("#!/bin/sh\necho theirs said no >&2\nexit 3\n")
    (root / "README.md").write_text("# changed again\n")
    git(root, "add", "README.md")
    failed = git(root, "commit", "-m", "y")
    assert failed.returncode != 0 and "theirs said no" in failed.stderr
    # a rerun keeps the chain as it is
    assert "unchanged:" in run_cli("-C", str(root), "setup", "git-hooks").stdout.decode()


def test_core_hookspath_is_honoured(repo: Engram) -> None:
    root = repo.root
    assert git(root, "config", "core.hooksPath", "githooks").returncode == 0
    done = run_cli("-C", str(root), "setup", "git-hooks", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["path"] == str(root / "githooks" / "pre-commit")
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    _block_billing(repo)
    (root / "src" / "billing.py").write_text(BILLING_V1 + "# x\n")
    git(root, "add", "src/billing.py")
    assert git(root, "commit", "-m", "x").returncode == 1


def test_without_engram_on_path_the_hook_says_so_and_lets_the_commit_through(
    repo: Engram,
) -> None:
    root = repo.root
    _block_billing(repo)
    assert run_cli("-C", str(root), "setup", "git-hooks").returncode == 0
    (root / "src" / "billing.py").write_text(BILLING_V1 + "# y\n")
    git(root, "add", "src/billing.py")
    git_dir = str(Path(GIT or "git").parent)
    done = git(root, "commit", "-m", "y", env=_env(path=f"{git_dir}{os.pathsep}/bin"))
    assert done.returncode == 0, done.stderr
    assert "engram: not on PATH; the memory's pre-commit check was skipped" in done.stderr


def test_a_linked_hook_is_left_alone(repo: Engram, tmp_path: Path) -> None:
    root = repo.root
    target = tmp_path / "elsewhere.sh"
    target.write_text("#!/bin/sh\n")
    (root / ".git" / "hooks" / "pre-commit").symlink_to(target)
    done = run_cli("-C", str(root), "setup", "git-hooks")
    assert done.returncode != 0
    assert "is not a regular file" in done.stderr.decode()
    assert target.read_text() == "#!/bin/sh\n"


def test_review_pr_prints_memory_changes_and_pitfalls_of_the_range(repo: Engram) -> None:
    root = repo.root
    base = git(root, "rev-parse", "HEAD").stdout.strip()
    repo.remember(
        "Refunds go through the ledger",
        "Never refund by calling charge() with a negative amount.",
        kind="pitfall",
        files=["src/billing.py"],
    )
    (root / "src" / "billing.py").write_text(BILLING_V1 + "def refund(x):\n    return x\n")
    commit_all(root, "refunds")
    done = run_cli("-C", str(root), "review-pr", f"{base}..HEAD")
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert text.startswith(f"### engram: the memory on `{base}..HEAD`")
    assert "**Memory changes** (1 added, 0 changed, 0 forgotten):" in text
    assert "| added | pitfall | Refunds go through the ledger" in text
    assert "- **Pitfall**: Refunds go through the ledger" in text
    as_json = json.loads(run_cli("-C", str(root), "review-pr", f"{base}..HEAD", "--json").stdout)
    assert as_json["files"] == ["src/billing.py"]
    wrong = run_cli("-C", str(root), "review-pr", "HEAD")
    assert wrong.returncode != 0 and "give a range BASE..HEAD" in wrong.stderr.decode()
    missing = run_cli("-C", str(root), "review-pr", "nope..HEAD")
    assert missing.returncode != 0 and "'nope': no such commit" in missing.stderr.decode()
