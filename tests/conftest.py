"""Shared fixtures: every test runs outside the real home folder and ENGRAM_* settings."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from engram.service import Engram

# Property tests draw the same examples on every run (a test's own seed), so a run of the suite
# that passed passes again on a fresh clone; `make fuzz` draws new ones, ten times as many.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("fuzz", max_examples=1000, derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(autouse=True)
def _isolate_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path_factory.mktemp("home")
    for name in list(os.environ):
        if name.startswith("ENGRAM_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ENGRAM_HOME", str(home / ".engram"))
    monkeypatch.setenv("ENGRAM_AUTHOR", "Test Author")
    monkeypatch.setenv("ENGRAM_DAEMON", "off")  # hooks start daemons only where a test says so
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Engram]:
    """An initialised, empty project in a real git repository."""
    root = tmp_path / "repo"
    root.mkdir()
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    engram, _ = Engram.init(root, "demo")
    with engram:
        yield engram


@pytest.fixture
def ledger(project: Engram) -> Engram:
    """A project whose memory knows about ledger/money.py and the report notebook."""
    root = project.root
    (root / "ledger").mkdir()
    (root / "ledger" / "money.py").write_text("def total(x):\n    return x / 100\n")
    (root / "notebooks").mkdir()
    project.remember(
        "Never divide amounts with /",
        "## What\nAmounts are integer cents.\n## Why\nfloat division lost a cent in refunds.",
        kind="pitfall",
        files=["ledger/money.py"],
    )
    project.remember(
        "Money is stored in integer cents",
        "Every amount is an int of cents; format only at the edges.",
        kind="decision",
        files=["ledger/**"],
    )
    project.remember(
        "The report notebook is generated",
        "Edit report.py; notebooks/report.ipynb is rebuilt nightly.",
        kind="pitfall",
        files=["notebooks/report.ipynb"],
    )
    project.remember(
        "Old rates are frozen", "old_rates.py is history.", files=["ledger/old_rates.py"]
    )
    return project


@pytest.fixture
def example(tmp_path: Path) -> Iterator[Engram]:
    """A copy of the example store in examples/ (never the committed files themselves)."""
    root = tmp_path / "example"
    shutil.copytree(
        EXAMPLES / ".engram", root / ".engram", ignore=shutil.ignore_patterns("index", "state")
    )
    with Engram.open(root) as engram:
        yield engram


def run_cli(
    *args: str,
    cwd: Path | None = None,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m engram`` as a real process."""
    return subprocess.run(
        [sys.executable, "-m", "engram", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )


# Whole files that `make test-fast` leaves out with the stress tests (marked slow): each spends
# most of a minute or more of the suite's time (pytest --durations on the full suite).
SLOW_FILES = {
    "tui/test_tui_keys.py": "presses every key of the real terminal UI",
    "formats/test_go_team.py": "a mixed team of clones syncing through a real remote",
    "sync/test_diff.py": "a real history made by the real command line, commit by commit",
    "service/test_secrets_channels.py": "a secret sent through every channel, git commits checked",
    "daemon/test_thin_client.py": "real daemons answering every forwarded command",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).resolve().parent
    missing = sorted(name for name in SLOW_FILES if not (tests / name).is_file())
    if missing:  # a file moved or renamed: its tests would silently join make test-fast
        raise pytest.UsageError(f"tests/conftest.py SLOW_FILES names no file: {missing}")
    for item in items:
        relative = Path(str(item.fspath)).resolve().relative_to(tests).as_posix()
        if relative in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
