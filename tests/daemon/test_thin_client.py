"""The thin client: ``engram recall|search|check|context`` answered by the store's daemon.

Each command runs as a real ``python -m engram`` process, once with ``ENGRAM_DAEMON=off`` (the
command in process, as it always ran) and once through a real daemon (``engram -C ROOT daemon``,
as the command line starts one on first use); standard output, standard error and the exit
status must be the same, byte for byte, and the daemon's request count says it answered.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram.daemon import protocol as rpc
from engram.service import Engram
from tests.conftest import run_cli
from tests.helpers.processes import daemons_of, modules_loaded, wait_for

ON = {"ENGRAM_DAEMON": "on", "ENGRAM_DAEMON_IDLE": "120"}


@pytest.fixture
def served(ledger: Engram) -> Iterator[Path]:
    """The ledger's daemon, started as the command line starts one; stopped afterwards."""
    root = ledger.root
    daemon = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(root), "daemon", "--idle", "120"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    socket = rpc.socket_path(root / ".engram")
    try:
        assert wait_for(lambda: rpc.connectable(socket) or daemon.poll() is not None)
        assert daemon.poll() is None, daemon.stderr.read() if daemon.stderr else ""
        yield socket
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
        if daemon.stderr:
            daemon.stderr.close()


def requests(socket: Path) -> int:
    """Return how many requests the daemon answered (this one included)."""
    with rpc.Client(socket) as client:
        count: int = client.call("daemon_status")["requests"]
    return count


def both(cwd: Path, *args: str, **env: str) -> tuple[Any, Any]:
    """Run one command line in process and through the daemon; return both results."""
    alone = run_cli(*args, cwd=cwd, env={"ENGRAM_DAEMON": "off", **env})
    forwarded = run_cli(*args, cwd=cwd, env={**ON, **env})
    return alone, forwarded


def same(alone: Any, forwarded: Any) -> None:
    assert forwarded.stdout == alone.stdout
    assert forwarded.stderr == alone.stderr
    assert forwarded.returncode == alone.returncode


def test_the_daemon_answers_every_plain_read_as_the_process_would(
    ledger: Engram, served: Path
) -> None:
    root = ledger.root
    sub = root / "ledger"
    lines: list[tuple[Path, tuple[str, ...]]] = [
        (sub, ("check", "--files", "money.py")),  # relative to the subfolder
        (sub, ("check", "--files", str(sub / "money.py"), "--json")),  # absolute, as agents send
        (root, ("check", "-f", "ledger/money.py,ledger/rates.py", "--budget", "200")),
        (sub, ("check", "--files", "../../elsewhere.py")),  # outside the repository: the error
        (root, ("recall", "cents")),
        (sub, ("search", "integer", "--kind", "decision", "--json")),
        (root, ("recall", "nothing-is-called-this")),  # the note on stderr
        (root, ("recall", "--limit", "1", "--offset", "1", "money")),
        (root, ("recall", "--tag", "x,y", "money")),
        (root, ("context", "--budget", "300")),
        (root, ("context", "--json")),
        (sub, ("-C", "..", "recall", "frozen")),
        (root, ("-C", "ledger", "check", "--files", "ledger/money.py")),
    ]
    before = requests(served)
    for cwd, args in lines:
        alone, forwarded = both(cwd, *args)
        same(alone, forwarded)
    assert requests(served) == before + len(lines) + 1  # each line once, and this status
    answered = run_cli("check", "--files", "money.py", cwd=sub, env=ON)
    assert b"Never divide amounts with /" in answered.stdout
    refused = run_cli("check", "--files", "../../elsewhere.py", cwd=sub, env=ON)
    assert refused.returncode == 1 and str(root.resolve()).encode() in refused.stderr


def test_lines_a_daemon_cannot_answer_alike_run_in_process(ledger: Engram, served: Path) -> None:
    root = ledger.root
    before = requests(served)
    for args in (("recall", "--help"), ("check", "--help"), ("recall", "-x", "money")):
        same(*both(root, *args))
    # --help is never sent; a line the fast path leaves to typer is refused, then run here.
    assert requests(served) == before + 1 + 1
    # Another author or personal store: the daemon's answer could differ, so the process answers.
    elsewhere = root.parent / "elsewhere-home"
    same(*both(root, "recall", "cents", ENGRAM_HOME=str(elsewhere)))
    assert daemons_of(root) and len(daemons_of(root)) == 1  # none started beside it


def test_the_daemon_answers_with_what_other_processes_wrote(ledger: Engram, served: Path) -> None:
    root = ledger.root
    saved = run_cli(
        "remember",
        "Refunds round half to even",
        "--kind",
        "pitfall",
        "--files",
        "ledger/money.py",
        cwd=root,
    )
    assert saved.returncode == 0, saved.stderr
    memory_id = saved.stdout.decode().strip()
    alone, forwarded = both(root / "ledger", "check", "--files", "money.py")
    same(alone, forwarded)
    assert b"Refunds round half to even" in forwarded.stdout
    assert run_cli("forget", memory_id, cwd=root).returncode == 0
    alone, forwarded = both(root, "recall", "refunds", "--json")
    same(alone, forwarded)
    assert memory_id not in json.dumps(json.loads(forwarded.stdout))
    # A hand edit (or a git pull) of memories.jsonl is seen at the next call.
    jsonl = root / ".engram" / "memories.jsonl"
    jsonl.write_text(jsonl.read_text().replace("Old rates are frozen", "Old rates are archived"))
    alone, forwarded = both(root, "recall", "archived")
    same(alone, forwarded)
    assert b"Old rates are archived" in forwarded.stdout


def test_a_forwarded_command_imports_only_the_standard_library(
    ledger: Engram, served: Path
) -> None:
    code, out, loaded = modules_loaded(
        ["check", "--files", "ledger/money.py"], cwd=ledger.root, env=ON
    )
    assert code == 0 and b"Never divide amounts with /" in out
    names = [name for name in loaded if name.split(".")[0] in ("engram", "typer", "click")]
    assert names == ["engram", "engram.__main__", "engram.reach"]


def test_the_first_command_starts_one_daemon_that_leaves_when_idle(ledger: Engram) -> None:
    root = ledger.root
    alone = run_cli("check", "--files", "ledger/money.py", cwd=root)
    env = {**os.environ, "ENGRAM_DAEMON": "on", "ENGRAM_DAEMON_IDLE": "3"}
    racing = [
        subprocess.Popen(
            [sys.executable, "-m", "engram", "check", "--files", "ledger/money.py"],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    try:
        for process in racing:  # no daemon yet: each answers in process, and starts one
            out, err = process.communicate(timeout=120)
            assert (out, err, process.returncode) == (alone.stdout, alone.stderr, 0)
        socket = rpc.socket_path(root / ".engram")
        assert wait_for(lambda: rpc.connectable(socket))
        assert wait_for(lambda: len(daemons_of(root)) == 1, 30)  # the lock turned the rest away
        before = requests(socket)
        same(alone, run_cli("check", "--files", "ledger/money.py", cwd=root, env=env))
        assert requests(socket) == before + 2
        assert wait_for(lambda: not daemons_of(root), 90)  # idle for 3 s: it left
        assert not socket.exists()
    finally:
        for pid in daemons_of(root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def test_text_reaches_the_terminal_as_the_cli_prints_it(ledger: Engram, served: Path) -> None:
    ledger.remember("Caf\u00e9 prices are na\u00efve \u2014 \U0001f389", "Tabs\tand \x01 bells.")
    for encoding in ("utf-8", "ascii"):  # click prints UTF-8 to a stream set to ASCII
        alone, forwarded = both(ledger.root, "recall", "prices", PYTHONIOENCODING=encoding)
        same(alone, forwarded)
        assert "Caf\u00e9 prices".encode() in forwarded.stdout
        assert b"\\x01" in forwarded.stdout  # control characters shown, never obeyed


def test_reads_by_id_are_answered_alike(ledger: Engram, served: Path) -> None:
    root = ledger.root
    memory_id = ledger.recall("divide amounts")[0].id
    lines = [
        ("get", memory_id),
        ("show", memory_id[:6], "--json"),
        ("why", memory_id),
        ("why", memory_id, "--json"),
        ("related", memory_id),
        ("get", "zzzzzzzz"),  # not found: the CLI's error and exit status
    ]
    before = requests(served)
    for args in lines:
        same(*both(root / "ledger", *args))
    assert requests(served) == before + len(lines) + 1


def saved(root: Path, memory_id: str) -> dict[str, Any]:
    done = run_cli("get", memory_id, "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    record: dict[str, Any] = json.loads(done.stdout)
    return record


def test_remember_through_the_daemon_saves_what_the_process_would(
    ledger: Engram, served: Path
) -> None:
    root = ledger.root
    sub = root / "ledger"
    args = ("--kind", "bugfix", "--files", "money.py", "--tags", "money,rounding")
    before = requests(served)
    here = run_cli("remember", "Rounding in process", "Half to even.", *args, cwd=sub)
    there = run_cli("remember", "Rounding by the daemon", "Half to even.", *args, cwd=sub, env=ON)
    assert requests(served) == before + 1 + 1  # the daemon saved the second, and this status
    assert here.returncode == there.returncode == 0 and here.stderr == there.stderr
    mine, its = (
        saved(root, here.stdout.decode().strip()),
        saved(root, there.stdout.decode().strip()),
    )
    assert its["title"] == "Rounding by the daemon" and its["files"] == ["ledger/money.py"]
    volatile = {"id", "title", "created_at", "updated_at"}
    assert {k: v for k, v in its.items() if k not in volatile} == {
        k: v for k, v in mine.items() if k not in volatile
    }
    # The same save again only counts, as in process.
    again = run_cli("remember", "Rounding by the daemon", "Half to even.", *args, cwd=sub, env=ON)
    assert again.stdout == there.stdout
    assert b"already saved: duplicate_count is now 1" in again.stderr


def test_a_save_that_reads_standard_input_runs_in_process(ledger: Engram, served: Path) -> None:
    root = ledger.root
    before = requests(served)
    piped = run_cli(
        "remember", "Piped in", "--kind", "fact", cwd=root, stdin=b"From a pipe.\n", env=ON
    )
    dashed = run_cli("remember", "Dashed in", "-", cwd=root, stdin=b"From a dash.", env=ON)
    # Each was refused before anything changed, then saved in process, once.
    assert requests(served) == before + 2 + 1
    assert saved(root, piped.stdout.decode().strip())["content"] == "From a pipe."
    assert saved(root, dashed.stdout.decode().strip())["content"] == "From a dash."
    titles = [hit.record["title"] for hit in ledger.recall("", limit=50)]
    assert titles.count("Piped in") == 1 and titles.count("Dashed in") == 1


def test_the_client_and_the_daemon_forward_the_same_commands() -> None:
    from engram import __main__ as composition
    from engram.cli import forwarded

    assert (*composition.FORWARDED, *composition.WRITES) == forwarded.FORWARDED
    assert composition.WRITES == forwarded.WRITES


def test_the_setting_daemon_auto_false_keeps_daemons_from_starting(ledger: Engram) -> None:
    from engram.config import set_value

    root = ledger.root
    engram_dir = root / ".engram"
    marker = engram_dir / "state" / "daemon.off"
    socket = rpc.socket_path(engram_dir)
    env = {"ENGRAM_DAEMON": "on", "ENGRAM_DAEMON_IDLE": "60"}
    alone = run_cli("check", "--files", "ledger/money.py", cwd=root)
    set_value(engram_dir, "daemon.auto", False)
    try:
        same(alone, run_cli("check", "--files", "ledger/money.py", cwd=root, env=env))
        # The daemon that call started read the setting, left the marker, and went.
        assert wait_for(marker.exists)
        assert wait_for(lambda: not daemons_of(root))
        seen = marker.stat().st_mtime_ns
        same(alone, run_cli("check", "--files", "ledger/money.py", cwd=root, env=env))
        assert not wait_for(lambda: daemons_of(root) or marker.stat().st_mtime_ns != seen, 3)
        # Turned on again: the next call starts one, which serves.
        set_value(engram_dir, "daemon.auto", True)
        same(alone, run_cli("check", "--files", "ledger/money.py", cwd=root, env=env))
        assert wait_for(lambda: rpc.connectable(socket))
        assert not marker.exists()
        # Turned off while it serves: it leaves.
        set_value(engram_dir, "daemon.auto", False)
        assert wait_for(lambda: not daemons_of(root), 30) and marker.exists()
        # The person's own settings count too.
        set_value(engram_dir, "daemon.auto", True)
        seen = marker.stat().st_mtime_ns
        personal = Path(os.environ["ENGRAM_HOME"])
        personal.mkdir(parents=True, exist_ok=True)
        (personal / "config.yaml").write_text("daemon:\n  auto: false\n")
        same(alone, run_cli("check", "--files", "ledger/money.py", cwd=root, env=env))
        assert wait_for(lambda: marker.exists() and marker.stat().st_mtime_ns != seen)
        assert wait_for(lambda: not daemons_of(root))
        assert str(personal.resolve() / "config.yaml") in json.loads(marker.read_text())["files"]
    finally:
        for pid in daemons_of(root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def test_a_daemon_leaves_when_engrams_code_changes_on_disk(ledger: Engram, tmp_path: Path) -> None:
    import shutil

    import engram

    code = tmp_path / "code"  # a copy of engram's code, as an install the daemon runs from
    shutil.copytree(
        Path(engram.__file__).parent, code / "engram", ignore=shutil.ignore_patterns("__pycache__")
    )
    root = ledger.root
    env = {**os.environ, "PYTHONPATH": str(code)}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(root), "daemon", "--idle", "120"],
        cwd=tmp_path,  # python -m puts its folder first on the path: not this checkout's
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        socket = rpc.socket_path(root / ".engram")
        assert wait_for(lambda: rpc.connectable(socket) or daemon.poll() is not None)
        assert daemon.poll() is None
        time.sleep(1.5)  # a few of its checks: unchanged code keeps it
        assert daemon.poll() is None
        upgraded = code / "engram" / "agents/check.py"
        upgraded.write_text(upgraded.read_text() + "\n# upgraded\n")
        daemon.wait(timeout=30)  # it left on its own
        assert not socket.exists()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(10)
        if daemon.stderr:
            daemon.stderr.close()


def test_no_process_is_left_when_the_terminal_dies(ledger: Engram) -> None:
    root = ledger.root
    command = f"{sys.executable} -m engram check --files ledger/money.py; sleep 60"
    terminal = subprocess.Popen(  # a shell that runs a command, then is killed with its group
        ["sh", "-c", command],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "ENGRAM_DAEMON": "on", "ENGRAM_DAEMON_IDLE": "3"},
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: daemons_of(root), 60)
        os.killpg(terminal.pid, signal.SIGKILL)
        terminal.wait(timeout=10)
        assert len(daemons_of(root)) == 1  # the store's one daemon, in its own session
        assert wait_for(lambda: not daemons_of(root), 90)  # and it leaves once idle
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(terminal.pid, signal.SIGKILL)
        for pid in daemons_of(root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def test_commands_find_a_daemon_listening_on_another_socket(ledger: Engram, tmp_path: Path) -> None:
    root = ledger.root
    custom = tmp_path / "elsewhere.sock"
    daemon = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(root), "daemon", "--socket", str(custom)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(lambda: rpc.connectable(custom) or daemon.poll() is not None)
        before = requests(custom)
        same(*both(root, "check", "--files", "ledger/money.py"))
        assert requests(custom) == before + 2  # answered there (its lock file names it)
        assert daemons_of(root) == [daemon.pid]  # and no other daemon was started
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
