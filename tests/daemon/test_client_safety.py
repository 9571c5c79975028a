"""The thin client talks only to its own store's daemon, whatever a repository commits.

Each attack is played as it was found: a lock file committed into ``.engram/state/`` (cloned
with ``git clone``) naming a stranger's socket or the daemon of another of the user's own
stores; a short-path socket folder another user made first; a socket file of ours whose
accepting process runs as another user. The stranger is a real process (``tests/helpers/
listener.py``) that records every byte it is sent and answers every line with a lie, run as
another uid (``nobody``) where the suite runs as root, as the same user elsewhere (those tests
that need a second uid say why they skip). The commands are real ``python -m engram``
processes with the daemon allowed; what the stranger received must be nothing, and the
commands must answer as without a daemon.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram import reach
from engram.daemon import protocol as rpc
from engram.service import Engram
from tests.conftest import run_cli
from tests.helpers.places import FIXTURES, HELPERS
from tests.helpers.processes import daemons_of, wait_for

LISTENER = HELPERS / "listener.py"
FIXTURES = FIXTURES / "hooks" / "claude-code"
NOBODY = 65534
ON = {"ENGRAM_DAEMON": "on", "ENGRAM_DAEMON_IDLE": "30"}
ROOT_ONLY = pytest.mark.skipif(
    os.geteuid() != 0, reason="a second uid needs root here (setuid to nobody)"
)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder every user may enter and write (the stranger's socket and its log live there)."""
    folder = Path(tempfile.mkdtemp(prefix="engram-attack-"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Stranger:
    """A listener that records what it is sent (``received``) and answers with lies."""

    def __init__(
        self,
        socket: Path,
        log: Path,
        store: Path,
        *,
        uid: int | None = None,
        as_uid: int | None = None,
    ) -> None:
        self.socket, self.log = socket, log
        log.touch()
        log.chmod(0o666)
        # Another uid cannot run this suite's interpreter (it may live in root's home): it runs
        # the system's, on a copy of the listener in the open folder.
        python, script = sys.executable, LISTENER
        if uid is not None:
            python = shutil.which("python3", path="/usr/bin:/bin") or ""
            if not python:
                pytest.skip("no system python3 that another uid can run")
            script = Path(shutil.copy(LISTENER, log.parent / "listener.py"))
            script.chmod(0o755)
        argv = [python, str(script), str(socket), str(log), str(store)]
        if as_uid is not None:
            argv += ["--as-uid", str(as_uid)]
        self.process = subprocess.Popen(
            argv,
            cwd="/",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            user=uid,
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        assert ready == b"ready\n", self.process.stderr.read() if self.process.stderr else b""

    def received(self) -> bytes:
        return self.log.read_bytes()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(30)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def payload(name: str, root: Path) -> bytes:
    text = (FIXTURES / f"{name}.json").read_text()
    return text.replace("$ROOT", json.dumps(str(root))[1:-1]).encode()


def stop_daemons(*roots: Path) -> None:
    for root in roots:
        for pid in daemons_of(root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    for root in roots:
        assert wait_for(lambda root=root: not daemons_of(root), 60)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True, timeout=60)
    return done.stdout.decode()


def commit_lock(ledger: Engram, target: Path, tmp_path: Path) -> Path:
    """Commit ``state/daemon.lock`` naming ``target`` (``git add -f``); return a fresh clone."""
    root = ledger.root
    lock = root / ".engram" / "state" / "daemon.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(f"1 {target}\n")
    git(root, "add", "-A")
    git(root, "add", "-f", ".engram/state/daemon.lock")
    git(root, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "planted")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    assert (clone / ".engram" / "state" / "daemon.lock").read_text() == f"1 {target}\n"
    return clone


def hook(root: Path, event: str, data: bytes, **env: str) -> subprocess.CompletedProcess[bytes]:
    return run_cli("hook", "claude-code", event, cwd=root, stdin=data, env={**ON, **env})


@pytest.mark.parametrize("mode", [0o644, 0o600], ids=["as-cloned", "umask-077"])
def test_a_committed_lock_sends_nothing_to_a_strangers_socket(
    ledger: Engram, tmp_path: Path, open_dir: Path, mode: int
) -> None:
    evil = open_dir / "evil.sock"
    clone = commit_lock(ledger, evil, tmp_path)
    (clone / ".engram" / "state" / "daemon.lock").chmod(mode)  # 0600: a umask-077 checkout
    stranger = Stranger(evil, open_dir / "log", clone, uid=NOBODY if os.geteuid() == 0 else None)
    try:
        saved = run_cli(
            "remember",
            "Retry the ledger export",
            "token ghp_" + "a" * 36,
            cwd=clone,
            env=ON,
        )
        assert saved.returncode == 0, saved.stderr.decode()
        found = run_cli("recall", "ledger export", cwd=clone, env=ON)
        briefing = hook(clone, "session-start", payload("session-start", clone))
        for _ in range(3):  # a daemon started by the first calls must not change the answer
            again = run_cli("recall", "ledger export", cwd=clone, env=ON)
            assert again.stdout == found.stdout
    finally:
        stranger.stop()
        stop_daemons(clone)
    assert stranger.received() == b""  # not a byte: no request, no environment, no text
    assert b"Retry the ledger export" in found.stdout and b"planted" not in found.stdout
    assert b"Never divide amounts" in briefing.stdout and b"planted" not in briefing.stdout
    stored = (clone / ".engram" / "memories.jsonl").read_text()
    assert "Retry the ledger export" in stored  # remember stored it, here


def test_doctor_names_tracked_local_state_and_the_daemon_refuses_it(
    ledger: Engram, tmp_path: Path
) -> None:
    clone = commit_lock(ledger, tmp_path / "elsewhere.sock", tmp_path)
    daemon = run_cli("daemon", "--idle", "5", cwd=clone)
    assert daemon.returncode != 0
    assert b".engram/state/daemon.lock" in daemon.stderr and b"doctor --fix" in daemon.stderr
    report = run_cli("doctor", cwd=clone)
    assert report.returncode != 0
    assert b"git tracks local state: .engram/state/daemon.lock" in report.stdout
    fixed = run_cli("doctor", "--fix", cwd=clone)
    assert b"removed them from git and from this clone" in fixed.stdout, fixed.stdout.decode()
    assert git(clone, "ls-files", ".engram/state") == ""
    assert not (clone / ".engram" / "state" / "daemon.lock").exists()
    assert "D  .engram/state/daemon.lock" in git(clone, "status", "--porcelain")
    assert b"git tracks local state" not in run_cli("doctor", cwd=clone).stdout


@pytest.fixture
def other_store(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Another store of the same user, with a private memory and its daemon running."""
    root = tmp_path / "private"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    with Engram.init(root, "private")[0] as engram:
        engram.remember("Payroll bank PIN rotation", "Private to the payroll repository.")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(root), "daemon", "--idle", "120"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    socket = rpc.socket_path(root / ".engram")
    try:
        assert wait_for(lambda: rpc.connectable(socket) or daemon.poll() is not None)
        assert daemon.poll() is None
        yield root, socket
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)


def requests(socket: Path) -> int:
    with rpc.Client(socket) as client:
        count: int = client.call("daemon_status")["requests"]
    return count


def test_a_lock_naming_another_own_store_reaches_neither_its_memories_nor_its_file(
    ledger: Engram, other_store: tuple[Path, Path]
) -> None:
    other, socket = other_store
    root = ledger.root
    lock = root / ".engram" / "state" / "daemon.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # as a daemon writes it
    os.write(fd, f"1 {socket}\n".encode())
    os.close(fd)
    assert reach.socket_of(str(root)) == str(socket)  # the lock is taken: the hello decides
    before = requests(socket)
    try:
        briefing = hook(root, "session-start", payload("session-start", root))
        stopped = hook(root, "stop", payload("stop", root))
        found = run_cli("recall", "bank PIN", "--json", cwd=root, env=ON)
    finally:
        stop_daemons(root)
    assert briefing.returncode == 0 and stopped.returncode == 0
    assert b"Payroll bank PIN" not in briefing.stdout
    assert b"Never divide amounts" in briefing.stdout  # this store's briefing
    assert requests(socket) == before + 1  # only this status: the hooks sent it nothing
    assert "round half-even" in (root / ".engram" / "memories.jsonl").read_text()
    assert "round half-even" not in (other / ".engram" / "memories.jsonl").read_text()
    assert b"Payroll" not in found.stdout


def test_a_daemon_answers_no_hook_of_another_store(
    ledger: Engram, other_store: tuple[Path, Path]
) -> None:
    _, socket = other_store
    data = json.loads(payload("session-start", ledger.root))
    with rpc.Client(socket) as client, pytest.raises(rpc.RpcError) as refused:
        client.call(
            "engram_hook",
            {"agent": "claude-code", "event": "session-start", "payload": data, "cwd": ""},
        )
    assert refused.value.code == rpc.INVALID_INPUT
    assert "not in the store this daemon serves" in refused.value.message


def deep_store(tmp_path: Path) -> Path:
    """A store whose socket path is too long for a Unix socket: the short fallback is used."""
    root = tmp_path / ("d" * 60) / ("e" * 60)
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    with Engram.init(root, "deep")[0] as engram:
        engram.remember("Deep store memory about invoices", "Invoices are numbered per year.")
    return root


def short_socket(root: Path, folder: Path) -> Path:
    digest = hashlib.sha256(os.fsencode(os.path.realpath(root / ".engram"))).hexdigest()[:20]
    return folder / f"{digest}.sock"


def test_a_short_socket_folder_another_user_made_first_is_never_used(
    tmp_path: Path, open_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = deep_store(tmp_path)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(open_dir))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    folder = open_dir / f"engram-{os.getuid()}"  # made first by someone else, mode 777
    folder.mkdir()
    folder.chmod(0o777)
    stranger_uid = NOBODY if os.geteuid() == 0 else None
    if stranger_uid is not None:
        os.chown(folder, NOBODY, NOBODY)
    path = short_socket(root, folder)
    assert reach.socket_path(str(root / ".engram")) == str(path)
    stranger = Stranger(path, open_dir / "log", root, uid=stranger_uid)
    try:
        found = run_cli("recall", "invoices", cwd=root, env=ON)
        again = run_cli("recall", "invoices", cwd=root, env=ON)
        daemon = run_cli("daemon", "--idle", "5", cwd=root)
    finally:
        stranger.stop()
        stop_daemons(root)
    assert stranger.received() == b""
    assert b"Deep store memory about invoices" in found.stdout and again.stdout == found.stdout
    assert daemon.returncode != 0
    assert b"a private folder of this user" in daemon.stderr, daemon.stderr.decode()


@ROOT_ONLY
def test_a_socket_of_ours_accepted_by_another_uid_gets_nothing(
    ledger: Engram, open_dir: Path
) -> None:
    root = ledger.root
    path = rpc.socket_path(root / ".engram")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o777)  # so that nobody can write its log... and accept on our file
    log_dir = open_dir
    stranger = Stranger(path, log_dir / "log", root, as_uid=NOBODY)  # bound by us, nobody listens
    path.parent.chmod(0o700)
    assert path.lstat().st_uid == os.getuid()  # the file checks pass: the peer's uid decides
    try:
        briefing = hook(root, "session-start", payload("session-start", root))
        found = run_cli("recall", "divide", cwd=root, env=ON)
    finally:
        stranger.stop()
        stop_daemons(root)
    assert stranger.received() == b""
    assert b"Never divide amounts" in briefing.stdout and b"planted" not in briefing.stdout
    assert b"Never divide amounts" in found.stdout


def test_the_short_folder_is_the_private_runtime_folder_when_there_is_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engram_dir = str(tmp_path / ("d" * 60) / ("e" * 60) / ".engram")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert reach.socket_path(engram_dir).startswith(str(runtime / "engram") + os.sep)
    runtime.chmod(0o777)  # a runtime folder others may write is no better than /tmp
    assert not reach.socket_path(engram_dir).startswith(str(runtime))
    monkeypatch.setenv("XDG_RUNTIME_DIR", "relative/run")
    assert reach.socket_path(engram_dir).startswith(tempfile.gettempdir())


def test_only_the_variables_engram_reads_decide_and_travel(
    ledger: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = ledger.root
    daemon = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(root), "daemon", "--idle", "120"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    socket = rpc.socket_path(root / ".engram")
    try:
        assert wait_for(lambda: rpc.connectable(socket) or daemon.poll() is not None)
        before = requests(socket)
        other_tool = {"ENGRAM_DATA_DIR": str(root / "go-data"), "ENGRAM_HTTP_TOKEN": "s3cret"}
        found = run_cli("recall", "divide", cwd=root, env={**ON, **other_tool})
        assert b"Never divide amounts" in found.stdout
        assert requests(socket) == before + 2  # the daemon answered it (and this status)
        moved = run_cli("recall", "divide", cwd=root, env={**ON, "ENGRAM_AUTHOR": "Someone"})
        assert moved.stdout == found.stdout
        # Another author changes the answer: the daemon refuses the line (counted), the
        # process answers it.
        assert requests(socket) == before + 4
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
    monkeypatch.setenv("ENGRAM_HTTP_TOKEN", "s3cret")
    monkeypatch.setenv("ENGRAM_DATA_DIR", "/elsewhere")
    assert "s3cret" not in json.dumps(reach.environment())
    assert "ENGRAM_DATA_DIR" not in reach.environment()


def test_every_engram_variable_is_placed_as_deciding_a_forwarded_answer_or_not() -> None:
    package = Path(reach.__file__).parent
    named: set[str] = set()
    for source in package.rglob("*.py"):
        named |= set(re.findall(r"[\"'](ENGRAM_[A-Z_]+)[\"']", source.read_text()))
    placed = {*reach.ANSWER_VARIABLES, *reach.SWITCHES, *reach.SERVER_ONLY}
    assert named - placed == set()  # a new variable must be placed in engram.reach
    assert "ENGRAM_HOME" in named and "ENGRAM_AUTHOR" in named


def test_the_hello_proves_the_store_before_a_request_is_sent(
    ledger: Engram, other_store: tuple[Path, Path]
) -> None:
    other, socket = other_store
    opened = reach.open_daemon(str(other), 1.0)
    assert opened is not None  # its own store: proven
    for part in opened:
        part.close()
    lock = ledger.root / ".engram" / "state" / "daemon.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, f"1 {socket}\n".encode())
    os.close(fd)
    before = requests(socket)
    assert reach.open_daemon(str(ledger.root), 1.0) is None  # another store's daemon: refused
    assert reach.call(str(ledger.root), "memory_status", {}, connect=1.0, answer=1.0) is None
    assert requests(socket) == before + 1  # only this status was answered


def test_sync_takes_no_local_state_from_a_commit(ledger: Engram, tmp_path: Path) -> None:
    root = ledger.root
    assert run_cli("sync", cwd=root).returncode == 0  # a real clone id and applied list here
    state = root / ".engram" / "state" / "sync.json"
    assert "clone_id" in state.read_text()
    git(root, "add", "-A")
    git(root, "add", "-f", ".engram/state/sync.json")
    git(root, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "planted")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    refused = run_cli("sync", cwd=clone)
    assert refused.returncode == 1
    assert b".engram/state/sync.json" in refused.stderr and b"doctor --fix" in refused.stderr
    assert run_cli("doctor", "--fix", cwd=clone).returncode == 0
    done = run_cli("sync", cwd=clone)
    assert done.returncode == 0, done.stderr.decode()
    mine = json.loads((clone / ".engram" / "state" / "sync.json").read_text())
    theirs = json.loads(state.read_text())
    assert mine["clone_id"] != theirs["clone_id"]  # its own clone id, not the committed one
