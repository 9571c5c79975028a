"""A recall after a killed ``engram index --rebuild`` finds what the store holds.

Real ``engram index --rebuild`` processes are killed with SIGKILL at each step of the rebuild
(the full-text backend emptied, half loaded, loaded, the records written but not committed,
the rebuild done and the git history being walked); each time the next ``engram recall`` must
find the known memory, answered once by a real daemon that was serving the store all along (it
must notice that another process changed the index under it, though memories.jsonl did not
change) and once by a process of its own. Keyword mode: an embedding model, where one is
installed, must not hide an empty full-text index.

To kill at a known step, the rebuild runs as ``engram``'s own ``main`` behind a few lines that
make one step say so on stdout and then wait; the test kills it there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram.daemon import protocol as rpc
from engram.service import Engram
from tests.conftest import run_cli
from tests.helpers.processes import wait_for

ON = {"ENGRAM_DAEMON": "on", "ENGRAM_DAEMON_IDLE": "120"}
OFF = {"ENGRAM_DAEMON": "off"}

# Make one step of the rebuild print its name and wait to be killed, then run the CLI's main.
HALT_AT = """
    import sys, time
    from engram.index import db, records, tantivy

    def halt(cls, name, *, before=False):
        original = getattr(cls, name)

        def stop(*args, **kwargs):
            if not before:
                original(*args, **kwargs)
            print("halted", flush=True)
            time.sleep(120)

        setattr(cls, name, stop)

    step = sys.argv.pop(1)
    if step == "cleared":
        halt(tantivy.TantivyIndex, "clear")
    elif step == "loading":
        halt(tantivy.TantivyIndex, "_add", before=True)
    elif step == "loaded":
        halt(tantivy.TantivyIndex, "bulk_load")
    elif step == "finished":
        halt(records.Records, "finish_rebuild")
    elif step == "rebuilt":
        from engram import service
        halt(service.Engram, "index_project", before=True)
    sys.argv[0] = "engram"
    from engram.__main__ import main
    main()
"""
STEPS = ("cleared", "loading", "loaded", "finished", "rebuilt")


@pytest.fixture
def store(project: Engram) -> Iterator[tuple[Path, str]]:
    """A keyword-mode store with a known memory among others; its root and the memory's id."""
    config = project.root / ".engram" / "config.yaml"
    text = config.read_text(encoding="utf-8")
    assert "  mode: hybrid\n" in text
    config.write_text(text.replace("  mode: hybrid\n", "  mode: keyword\n"), encoding="utf-8")
    known = project.remember("Zebra quorum flux capacitor", "The capacitor needs a quorum.")
    for n in range(8):
        project.remember(f"Unrelated note {n}", f"filler text number {n} about parsers")
    project.close()
    yield project.root, str(known.record["id"])


@pytest.fixture
def daemon(store: tuple[Path, str]) -> Iterator[Path]:
    """The store's daemon, started as the command line starts one; its socket."""
    root = store[0]
    process = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(root), "daemon", "--idle", "120"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    socket = rpc.socket_path(root / ".engram")
    try:
        assert wait_for(lambda: rpc.connectable(socket) or process.poll() is not None)
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        yield socket
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        if process.stderr:
            process.stderr.close()


def requests(socket: Path) -> int:
    """Return how many requests the daemon answered (this one included)."""
    with rpc.Client(socket) as client:
        count: int = client.call("daemon_status")["requests"]
    return count


def kill_rebuild_at(root: Path, step: str) -> None:
    """Run ``engram index --rebuild`` in ``root`` and SIGKILL it at ``step``."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HALT_AT), step, "index", "--rebuild"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **OFF},
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        _, err = child.communicate(timeout=60)
    assert line == b"halted\n", err.decode()
    assert child.returncode == -signal.SIGKILL


def recalled(root: Path, env: dict[str, str]) -> bytes:
    result = run_cli("recall", "zebra quorum", "--json", cwd=root, env=env)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


@pytest.mark.parametrize("step", STEPS)
def test_a_recall_after_a_killed_rebuild_finds_the_memory(
    store: tuple[Path, str], daemon: Path, step: str
) -> None:
    root, known = store
    assert known.encode() in recalled(root, ON)  # the daemon has read the index once
    before = requests(daemon)
    kill_rebuild_at(root, step)
    # The daemon answers (its count says so) from the index the killed rebuild left.
    assert known.encode() in recalled(root, ON)
    assert known.encode() in recalled(root, ON)  # and again: not answered empty later either
    assert requests(daemon) == before + 2 + 1
    # A process of its own, after another kill at the same step.
    kill_rebuild_at(root, step)
    assert known.encode() in recalled(root, OFF)
