"""The socket daemon and its protocol: real daemon processes on real stores, real clients."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram.daemon import protocol as rpc
from engram.daemon.protocol import Client, RpcError
from engram.errors import (
    AmbiguousId,
    ConfigError,
    CorruptStore,
    IndexError_,
    InvalidInput,
    LockTimeout,
    NotFound,
    SyncError,
)
from engram.model import canonical_line, parse_line
from engram.service import Engram

START_SECONDS = 60.0  # generous: a cold interpreter on a busy 2-core machine


# -- helpers ----------------------------------------------------------------------------------


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(HOME=str(home), ENGRAM_HOME=str(home / ".engram"), ENGRAM_AUTHOR="Test Author")
    return env


class Daemon:
    """A daemon subprocess serving one store."""

    def __init__(self, root: Path, home: Path, socket_path: Path | None = None) -> None:
        self.root = root
        argv = [sys.executable, "-m", "engram.daemon", str(root)]
        if socket_path is not None:
            argv.append(str(socket_path))
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(home)
        )
        self.path = self._wait_ready()

    def _wait_ready(self) -> Path:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline().decode()
                if line.startswith("ready "):
                    return Path(line.split(" ", 1)[1].strip())
                if not line:
                    break
        self.stop(signal.SIGKILL)
        err = self.proc.stderr.read().decode() if self.proc.stderr else ""
        raise AssertionError(f"daemon did not start: {err}")

    def client(self, timeout: float = 30.0) -> Client:
        return Client(self.path, timeout=timeout)

    def stop(self, signum: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        code = self.proc.wait(timeout=30)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return code


def _make_store(root: Path) -> None:
    root.mkdir(parents=True)
    Engram.init(root, "demo")[0].close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One daemon shared by the protocol tests (starting one costs an interpreter)."""
    base = tmp_path_factory.mktemp("daemon")
    home = base / "home"
    home.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for key, value in _env(home).items():
            mp.setenv(key, value)
        _make_store(base / "repo")
    daemon = Daemon(base / "repo", home)
    yield daemon
    assert daemon.stop() == 0
    assert not daemon.path.exists(), "a clean shutdown removes the socket"


def _raw(path: Path, payload: bytes, answers: int) -> list[dict[str, Any]]:
    """Send raw bytes on a fresh connection and read ``answers`` response lines."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        sock.sendall(payload)
        reader = sock.makefile("rb")
        return [json.loads(reader.readline()) for _ in range(answers)]


def _store(n: int | str, **extra: Any) -> tuple[str, dict[str, Any]]:
    params = {
        "memory_type": "decision",
        "context": f"context number {n} about the payment gateway",
        "action": f"decided thing {n}",
        "result": "it worked",
        **extra,
    }
    return "memory_store", params


# -- the wire format, in process ----------------------------------------------------------------


def test_decode_request_shapes() -> None:
    request = rpc.decode_request(b'{"id": 3, "method": "memory_status"}')
    assert request == rpc.Request(3, "memory_status", {})
    bad = rpc.decode_request(b"{nope")
    assert isinstance(bad, RpcError) and bad.code == rpc.MALFORMED_JSON and bad.id is None
    bad = rpc.decode_request(b"\xff\xfe")
    assert isinstance(bad, RpcError) and bad.code == rpc.MALFORMED_JSON
    bad = rpc.decode_request(b"[1, 2]")
    assert isinstance(bad, RpcError) and bad.code == rpc.MALFORMED_JSON
    bad = rpc.decode_request(b'{"id": "a", "params": {}}')
    assert isinstance(bad, RpcError) and bad.code == rpc.MALFORMED_JSON and bad.id == "a"
    bad = rpc.decode_request(b'{"id": 1, "method": "m", "params": [1]}')
    assert isinstance(bad, RpcError) and bad.code == rpc.INVALID_PARAMS and bad.id == 1
    assert rpc.encode({"a": "é", "b": [1]}) == '{"a":"é","b":[1]}\n'.encode()


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (InvalidInput("bad"), rpc.INVALID_INPUT),
        (InvalidInput("[6010] import version mismatch"), rpc.VERSION_MISMATCH),
        (NotFound("x"), rpc.NOT_FOUND),
        (AmbiguousId("x"), rpc.AMBIGUOUS_ID),
        (CorruptStore("x"), rpc.STORE_ERROR),
        (LockTimeout("x"), rpc.STORE_ERROR),
        (IndexError_("x"), rpc.STORE_ERROR),
        (ConfigError("x"), rpc.CONFIG_ERROR),
        (SyncError("x"), rpc.SYNC_ERROR),
        (KeyError("x"), rpc.INTERNAL_ERROR),
    ],
)
def test_error_codes(exc: Exception, code: int) -> None:
    assert rpc.error_code(exc) == code
    error = rpc.to_rpc_error(exc, id=9)
    assert error.code == code and error.id == 9
    assert not error.message.startswith("[")  # the code prefix is not repeated in the text


def test_socket_path_short_and_long(tmp_path: Path) -> None:
    short = tmp_path / ".engram"
    assert rpc.socket_path(short) == short / "state" / "engram.sock"
    deep = tmp_path / ("d" * 60) / ("e" * 60) / ".engram"
    fallback = rpc.socket_path(deep)
    assert len(os.fsencode(fallback)) <= rpc.SUN_PATH_MAX
    assert fallback == rpc.socket_path(deep), "every process computes the same path"
    assert fallback != rpc.socket_path(tmp_path / ("f" * 60) / ("e" * 60) / ".engram")
    assert rpc.running(short) is None


# -- the daemon ---------------------------------------------------------------------------------


def test_store_then_search_matches_in_process(served: Daemon) -> None:
    with served.client() as client:
        first = client.call(*_store("alpha", tags="payments,gateway"))
        assert first["indexed"] is True and first["deduplicated"] is False
        again = client.call(*_store("alpha", tags="payments,gateway"))
        assert again == {**first, "deduplicated": True}
        client.call(*_store("beta", memory_type="antipattern", tags=["payments", "gateway"]))
        found = client.call("memory_search", {"query": "payment gateway", "limit": 5})
    with Engram.open(served.root) as engram:
        hits = engram.recall("payment gateway", limit=5)
        record = engram.get(first["id"])
    assert [m["id"] for m in found["memories"]] == [hit.id for hit in hits]
    assert found["count"] == len(hits) >= 2
    assert [m["score"] for m in found["memories"]] == [round(hit.score, 3) for hit in hits]
    assert record["kind"] == "decision" and record["tags"] == ["gateway", "payments"]
    assert "**Action:** decided thing alpha" in record["content"]
    kinds = {m["id"]: m["memory_type"] for m in found["memories"]}
    assert "antipattern" in kinds.values(), "engram-rs names come back"


def test_concurrent_pipelined_clients(served: Daemon) -> None:
    stored: list[str] = []
    failures: list[str] = []
    lock = threading.Lock()

    def work(worker: int) -> None:
        calls: list[tuple[str, dict[str, Any] | None]] = []
        for i in range(20):
            if i % 3 == 0:
                calls.append(_store(f"w{worker}-{i}"))
            elif i % 3 == 1:
                calls.append(("memory_search", {"query": f"thing w{worker}", "limit": 3}))
            else:
                calls.append(("memory_status", None))
        try:
            with served.client() as client:
                responses = client.pipeline(calls)
        except Exception as exc:  # collected: a thread's failure must fail the test
            with lock:
                failures.append(repr(exc))
            return
        with lock:
            for (method, _), response in zip(calls, responses, strict=True):
                if not response["ok"]:
                    failures.append(str(response))
                elif method == "memory_store":
                    stored.append(response["data"]["id"])
                elif method == "memory_status" and "memory_count" not in response["data"]:
                    failures.append(f"status without memory_count: {response}")
                elif method == "memory_search" and "memories" not in response["data"]:
                    failures.append(f"search without memories: {response}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(set(stored)) == 16 * 7
    path = served.root / ".engram" / "memories.jsonl"
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    records = [parse_line(line, path=str(path), lineno=n) for n, line in enumerate(lines, 1)]
    assert set(stored) <= {r["id"] for r in records}
    assert b"".join(canonical_line(r) for r in sorted(records, key=lambda r: r["id"])) == data


def test_responses_keep_request_order_and_ids(served: Daemon) -> None:
    payload = b"".join(
        rpc.encode({"id": rid, "method": "memory_status"}) for rid in ("x", 7, None, 2.5)
    )
    answers = _raw(served.path, payload, 4)
    assert [a["id"] for a in answers] == ["x", 7, None, 2.5]
    assert all(a["ok"] and a["error"] is None for a in answers)


def test_malformed_line_and_blank_lines(served: Daemon) -> None:
    payload = b"{not json\n\n  \n" + rpc.encode({"id": 1, "method": "memory_status"})
    bad, good = _raw(served.path, payload, 2)
    assert bad["id"] is None and bad["ok"] is False and bad["data"] is None
    assert bad["error"]["code"] == rpc.MALFORMED_JSON
    assert good["id"] == 1 and good["ok"] is True


def test_unknown_method(served: Daemon) -> None:
    with served.client() as client, pytest.raises(RpcError) as caught:
        client.call("memory_fly", {})
    assert caught.value.code == rpc.UNKNOWN_METHOD and "memory_fly" in caught.value.message


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("memory_search", {"query": "x", "limit": "ten"}, "limit"),
        ("memory_search", {"limit": 3}, "query"),
        ("memory_search", {"query": "x", "limit": 0}, "limit"),
        ("memory_store", {"memory_type": "decision", "context": "c"}, "action"),
        ("memory_store", {"memory_type": "bogus", "context": "c", "action": "a"}, "memory_type"),
        ("memory_store", {"memory_type": "decision", "context": 5, "action": "a"}, "context"),
        ("memory_judge", {"memory_id": "x", "score": 3}, "score"),
        ("memory_import", {"version": 1, "memories": "all"}, "memories"),
        ("memory_config", {}, "action"),
    ],
)
def test_invalid_params_name_the_field(
    served: Daemon, method: str, params: dict[str, Any], field: str
) -> None:
    with served.client() as client, pytest.raises(RpcError) as caught:
        client.call(method, params)
    assert caught.value.code == rpc.INVALID_PARAMS
    assert f"'{field}'" in caught.value.message


def test_search_limit_is_clamped_and_not_found(served: Daemon) -> None:
    with served.client() as client:
        found = client.call("memory_search", {"query": "", "limit": 500})
        assert found["count"] <= 50
        with pytest.raises(RpcError) as caught:
            client.call("memory_judge", {"memory_id": "zzzzzzzzzz", "score": 0.5})
    assert caught.value.code in (rpc.NOT_FOUND, rpc.UNKNOWN_METHOD)


def test_oversized_line_is_refused_and_the_connection_closed(served: Daemon) -> None:
    first = rpc.encode({"id": 1, "method": "memory_status"})
    huge = b'{"id": 2, "method": "memory_status", "params": {"pad": "' + b"a" * rpc.MAX_LINE
    payload = first + huge + b'"}}\n' + rpc.encode({"id": 3, "method": "memory_status"})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(60)
        sock.connect(str(served.path))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(payload)  # the daemon may stop reading before the end
        reader = sock.makefile("rb")
        answers = [json.loads(line) for line in reader]  # up to the daemon's close
    assert [a["id"] for a in answers] == [1, None]
    assert answers[1]["error"]["code"] == rpc.REQUEST_TOO_LARGE
    assert "closed" in answers[1]["error"]["message"]
    with served.client() as client:  # the daemon itself goes on
        assert client.call("memory_status")


def test_a_pipelining_client_is_held_back_not_buffered(served: Daemon) -> None:
    """5,000 pipelined requests, answers unread: the daemon stops reading, holds a few, goes on."""
    count = 5000
    pad = "p" * 1000  # 5 MB in all: far more than the socket buffers hold
    payload = b"".join(
        rpc.encode({"id": n, "method": "no_such_method", "params": {"pad": pad}})
        for n in range(count)
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(120)
        sock.connect(str(served.path))
        sender = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
        sender.start()
        with served.client() as watcher:
            deadline = time.monotonic() + 60  # a bound for the wait, not a measured time
            while True:
                stats = watcher.call("daemon_status")
                busy = [c for c in stats["connections"] if c["reading_paused"]]
                if busy or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        assert busy, stats
        (held,) = busy
        depth = stats["pipeline_depth"]
        assert held["queued"] <= depth and held["buffered_bytes"] <= 256 * 1024
        assert held["answered"] < count and sender.is_alive()  # the client waits, not the daemon
        reader = sock.makefile("rb")
        ids = []
        for _ in range(count):
            answer = json.loads(reader.readline())
            assert answer["error"]["code"] == rpc.UNKNOWN_METHOD
            ids.append(answer["id"])
        sender.join(timeout=60)
    assert ids == list(range(count))  # every answer, in order
    assert not sender.is_alive()


def test_status_config_export_import(served: Daemon) -> None:
    with served.client() as client:
        status = client.call("memory_status")
        exported = client.call("memory_export")
        config = client.call("memory_config", {"action": "get"})
        with pytest.raises(RpcError) as read_only:
            client.call("memory_config", {"action": "set", "key": "a", "value": "b"})
        with pytest.raises(RpcError) as version:
            client.call("memory_import", {"version": 2, "memories": []})
        imported = client.call(
            "memory_import",
            {
                "version": 1,
                "memories": [
                    {"memory_type": "pattern", "context": "imported ctx", "action": "imported act"}
                ],
            },
        )
        again = client.call("memory_import", {"version": 1, "memories": exported["memories"]})
        after = client.call("memory_status")
    assert status["memory_count"] == exported["count"] == len(exported["memories"]) > 0
    assert exported["version"] == 1 and exported["exported_at"]
    assert config["project"] == "demo" and "search" in config["config"]
    assert read_only.value.code == rpc.READ_ONLY
    assert version.value.code == rpc.VERSION_MISMATCH and "version" in version.value.message
    assert imported == {"imported": 1, "skipped": 0}
    assert again == {"imported": 0, "skipped": exported["count"]}, "unchanged ones are skipped"
    assert after["memory_count"] == status["memory_count"] + 1


def test_socket_is_private(served: Daemon) -> None:
    mode = served.path.stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert rpc.running(served.root / ".engram") == served.path


def test_killed_client_does_not_hurt_others(served: Daemon) -> None:
    script = (
        "import socket, sys, time\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.connect(sys.argv[1])\n"
        's.sendall(b\'{"id": 1, "method": "memory_export"}\\n\' * 50)\n'
        's.sendall(b\'{"id": 2, "method": "memory_st\')\n'
        "print('sent', flush=True)\n"
        "time.sleep(60)\n"
    )
    victim = subprocess.Popen(
        [sys.executable, "-c", script, str(served.path)], stdout=subprocess.PIPE
    )
    assert victim.stdout is not None
    assert victim.stdout.readline() == b"sent\n"
    victim.kill()
    victim.wait()
    victim.stdout.close()
    with served.client() as client:
        responses = client.pipeline([("memory_status", None)] * 5)
        stored = client.call(*_store("after the killed client"))
    assert all(r["ok"] for r in responses) and stored["id"]


def test_second_daemon_fails_while_first_runs(served: Daemon, tmp_path: Path) -> None:
    other = tmp_path / "other.sock"
    proc = subprocess.run(
        [sys.executable, "-m", "engram.daemon", str(served.root), str(other)],
        capture_output=True,
        env=_env(tmp_path),
        timeout=60,
    )
    assert proc.returncode == 1
    assert b"already serves" in proc.stderr and str(served.proc.pid).encode() in proc.stderr
    assert not other.exists()
    with served.client() as client:
        assert client.call("memory_status")["memory_count"] > 0


def test_a_second_daemon_with_its_own_socket_is_told_one_serves_the_store(
    tmp_path: Path,
) -> None:
    """``engram daemon --socket X`` beside a first-use daemon: named, with how to stop it."""
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "repo"
    _make_store(root)
    env = {**_env(home), "ENGRAM_DAEMON": "off"}
    engram = [sys.executable, "-m", "engram", "-C", str(root), "daemon"]
    first = subprocess.Popen(  # as the command line starts one on first use
        [*engram, "--idle", "120", "--on-first-use"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    default = rpc.socket_path(root / ".engram")
    other = tmp_path / "other.sock"
    try:
        deadline = time.monotonic() + START_SECONDS
        while not rpc.connectable(default) and first.poll() is None:
            assert time.monotonic() < deadline, "the first daemon did not start"
            time.sleep(0.05)
        refused = subprocess.run(
            [*engram, "--socket", str(other)], capture_output=True, env=env, timeout=60
        )
        err = refused.stderr.decode()
        assert refused.returncode == 1, err
        assert f"(pid {first.pid}, socket {default})" in err, err
        assert "a store has one daemon, whatever --socket says" in err
        assert f"`kill {first.pid}`" in err and "another --socket" not in err
        assert not other.exists() and first.poll() is None
        # The advice works: once that daemon is stopped, the same line serves on its socket.
        os.kill(first.pid, signal.SIGTERM)
        assert first.wait(timeout=60) == 0
        second = subprocess.Popen(
            [*engram, "--socket", str(other), "--idle", "120"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            while not rpc.connectable(other):
                assert second.poll() is None, second.stderr.read() if second.stderr else b""
                assert time.monotonic() < deadline + START_SECONDS
                time.sleep(0.05)
        finally:
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
        first.wait(timeout=60)


def test_stale_socket_is_replaced_and_sigterm_cleans_up(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _make_store(tmp_path / "repo")
    first = Daemon(tmp_path / "repo", home)
    with first.client() as client:
        saved = client.call(*_store("survives a crash"))["id"]
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    assert first.path.exists(), "a crashed daemon leaves its socket behind"
    assert rpc.running(tmp_path / "repo" / ".engram") is None
    second = Daemon(tmp_path / "repo", home)
    assert second.path == first.path
    with second.client() as client:
        found = client.call("memory_search", {"query": "survives crash"})
    assert saved in [m["id"] for m in found["memories"]]
    assert stat.S_IMODE(second.path.stat().st_mode) == 0o600
    # A client that sends much and reads nothing does not hold up the shutdown.
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.connect(str(second.path))
    stuck.sendall(rpc.encode({"id": 1, "method": "memory_export"}) * 200)
    try:
        assert second.stop(signal.SIGTERM) == 0
    finally:
        stuck.close()
    assert not second.path.exists()


def test_refuses_a_path_that_is_not_a_socket(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _make_store(tmp_path / "repo")
    squatter = tmp_path / "file.sock"
    squatter.write_text("keep me")
    proc = subprocess.run(
        [sys.executable, "-m", "engram.daemon", str(tmp_path / "repo"), str(squatter)],
        capture_output=True,
        env=_env(home),
        timeout=60,
    )
    assert proc.returncode == 1 and b"not a socket" in proc.stderr
    assert squatter.read_text() == "keep me"


def test_deep_store_uses_the_short_socket(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / ("deep" * 15) / ("er" * 20) / "repo"
    _make_store(root)
    daemon = Daemon(root, home)
    try:
        assert daemon.path == rpc.socket_path(root / ".engram")
        assert daemon.path.parent.parent == Path(tempfile.gettempdir())
        assert rpc.running(root / ".engram") == daemon.path
        assert stat.S_IMODE(daemon.path.parent.stat().st_mode) == 0o700
        with daemon.client() as client:
            assert client.call("memory_status")["memory_count"] == 0
    finally:
        assert daemon.stop() == 0
    assert not daemon.path.exists()


def test_serve_needs_a_store(tmp_path: Path) -> None:
    from engram.daemon.server import serve
    from engram.errors import NotInitialized

    with pytest.raises(NotInitialized):
        serve(tmp_path)


# -- the methods, in process: params checked by their shared declarations -----------------------


def _answer(engram: Engram, method: str, params: dict[str, Any]) -> dict[str, Any]:
    from engram.daemon.server import dispatch

    answer: dict[str, Any] = json.loads(dispatch(engram, rpc.Request(1, method, params)))
    return answer


def test_memory_search_takes_every_declared_recall_filter(tmp_path: Path) -> None:
    from engram.daemon.server import METHODS
    from engram.operations.memory import RECALL_FILTERS

    names = [param.name for param in METHODS["memory_search"].params]
    assert names == ["query", "limit", *(param.name for param in RECALL_FILTERS)]
    _make_store(tmp_path / "repo")
    with Engram.open(tmp_path / "repo") as engram:
        pit = engram.remember("Lock before the write", "or lose it", kind="pitfall", tags=["io"])
        engram.remember("Write with a lock", "always", kind="decision", tags=["io", "disk"])
        engram.remember("Mine alone", "personal note", kind="pitfall", scope="personal")

        def ids(**params: Any) -> list[str]:
            answer = _answer(engram, "memory_search", {"query": "", "limit": 50, **params})
            assert answer["ok"], answer
            return [hit["id"] for hit in answer["data"]["memories"]]

        assert ids(kind=["pitfall"], scope="project") == [pit.record["id"]]
        assert len(ids(tags="io,disk")) == 2  # engram-rs sends tags comma-separated
        assert ids(tags="disk", project="demo") != [] and ids(project="elsewhere") == []
        assert ids(status="archived") == [] and len(ids(scope=["personal"])) == 1
        hits = _answer(engram, "memory_search", {"query": "lock", "scope": "personal"})
        refused = _answer(engram, "memory_search", {"query": "x", "kind": "banana"})
    assert hits["ok"] and hits["data"]["memories"] == []
    assert (
        refused["error"]["code"] == rpc.INVALID_PARAMS and "'kind'" in refused["error"]["message"]
    )


def test_memory_search_hits_keep_their_shape(tmp_path: Path) -> None:
    """The shared hit view in its compact shape: no matched, no scope, as engram-rs reads it."""
    from engram.operations.views import provenance

    _make_store(tmp_path / "repo")
    with Engram.open(tmp_path / "repo") as engram:
        saved = engram.remember("Kafka lag alarm " + "x" * 300, "Page when lag > 10k", kind="fact")
        answer = _answer(engram, "memory_search", {"query": "kafka lag"})
        (hit,) = engram.recall("kafka lag", limit=5)
    (item,) = answer["data"]["memories"]
    record = saved.record
    assert set(item) == {
        *("id", "kind", "status", "title", "snippet", "score", "from", "memory_type", "relevance")
    }
    assert item["id"] == record["id"] and item["score"] == round(hit.score, 3)
    assert len(item["title"]) == 160 and item["title"].endswith("…")
    assert item["snippet"] == "Page when lag > 10k" and item["from"] == provenance(record)


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("memory_search", {"limit": 3}, "memory_search: param 'query': missing required"),
        ("memory_search", {"query": "x", "limit": 0}, "param 'limit': limit must be at least 1"),
        ("memory_search", {"query": "x", "limit": 2.5}, "'limit' must be an integer, got number"),
        ("memory_judge", {"memory_id": "x", "score": 3}, "score must be at most 1, got 3"),
        ("memory_store", {"memory_type": "fact", "context": "c", "action": ["a"]}, "a string"),
        ("memory_train_generate", {"timeout": True}, "'timeout' must be a number, got boolean"),
    ],
)
def test_params_are_checked_by_the_shared_param(
    tmp_path: Path, method: str, params: dict[str, Any], message: str
) -> None:
    _make_store(tmp_path / "repo")
    with Engram.open(tmp_path / "repo") as engram:
        answer = _answer(engram, method, params)
    assert answer["error"]["code"] == rpc.INVALID_PARAMS
    assert message in answer["error"]["message"]


def test_unknown_params_are_ignored_and_limits_clamped(tmp_path: Path) -> None:
    from engram.daemon.server import METHODS, check_params

    params = METHODS["memory_search"].params
    checked = check_params("memory_search", params, {"query": "q", "limit": 500, "extra": 1})
    assert checked["limit"] == 50 and "extra" not in checked
    assert checked["tags"] is None and checked["kind"] is None  # every param has a value
    assert (
        check_params("memory_search", params, {"query": "q", "tags": ["a", "b"]})["tags"] == "a,b"
    )


def test_params_not_sent_or_null_get_what_the_shared_check_gives_them() -> None:
    # check_params skips the check of a param not sent: the answer must be the check's.
    from engram.daemon.server import METHODS, check_params
    from engram.operations.spec import check_arguments

    for name, method in METHODS.items():
        optional = [param for param in method.params if not param.required]
        given = {"integer": 1, "array": [], "object": {}}
        sent = {p.name: given.get(p.type, "x") for p in method.params if p.required}
        for raw in (sent, {**sent, **dict.fromkeys(p.name for p in optional)}):
            checked = check_params(name, method.params, raw)
            assert list(checked) == [param.name for param in method.params], name
            for param in optional:
                wanted = check_arguments(name, (param,), {param.name: None})
                assert checked[param.name] == wanted.get(param.name), (name, param.name)
        for param in method.params:
            if param.required:
                with pytest.raises(RpcError, match=f"param '{param.name}'"):
                    check_params(name, method.params, {**sent, param.name: None})


# -- the hygiene methods (they arrive with the service's judge, consolidate and train) ----------


@pytest.mark.skipif(not hasattr(Engram, "judge"), reason="Engram.judge not in this build yet")
def test_judge(served: Daemon) -> None:
    with served.client() as client:
        stored = client.call(*_store("to be judged"))
        judged = client.call(
            "memory_judge",
            {"memory_id": stored["id"], "score": 0.9, "query": "judged", "reason": "helped"},
        )
        again = client.call("memory_judge", {"memory_id": stored["id"], "verdict": "useful"})
        with pytest.raises(RpcError) as caught:
            client.call("memory_judge", {"memory_id": stored["id"], "verdict": "meh"})
        with pytest.raises(RpcError) as short:  # a change needs 4+ characters of the id
            client.call("memory_judge", {"memory_id": stored["id"][:2], "verdict": "useful"})
    assert short.value.code == rpc.INVALID_INPUT and "too short to judge" in short.value.message
    assert judged == {"memory_id": stored["id"], "judgements": 1, "score": 0.9}
    assert again["judgements"] == 2
    assert caught.value.code == rpc.INVALID_INPUT
    with Engram.open(served.root) as engram:
        assert engram.get(stored["id"])["judgements"][0]["reason"] == "helped"


@pytest.mark.skipif(
    not hasattr(Engram, "consolidate_preview")
    or importlib.util.find_spec("engram.hygiene.consolidate") is None,
    reason="consolidation not in this build yet",
)
def test_consolidate_preview_and_dry_run(served: Daemon) -> None:
    with served.client(timeout=120) as client:
        before = client.call("memory_export")["count"]
        preview = client.call("memory_consolidate_preview")
        plan = client.call("memory_consolidate")
        dry = client.call("memory_consolidate_apply", {"plan": plan, "dry_run": True})
        after = client.call("memory_export")["count"]
    assert isinstance(preview["groups"], list)
    assert isinstance(plan, dict)
    assert dry["dry_run"] is True and before == after


@pytest.mark.skipif(not hasattr(Engram, "insights"), reason="insights not in this build yet")
def test_train_list_and_delete_refuses_non_insight(served: Daemon) -> None:
    with served.client() as client:
        listed = client.call("memory_train_list")
        stored = client.call(*_store("not an insight"))
        with pytest.raises(RpcError) as caught:
            client.call("memory_train_delete", {"id": stored["id"]})
    assert isinstance(listed["insights"], list)
    assert all(item["kind"] == "insight" for item in listed["insights"])
    assert caught.value.code == rpc.INVALID_INPUT
