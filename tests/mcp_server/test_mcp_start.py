"""`engram mcp` starts and leaves as a client needs: real server processes over real pipes.

The first answers (initialize, tools/list) come from engram's declarations before the mcp SDK
is loaded (engram.mcp_server.prelude); they must equal what the SDK itself answers, which a
server that sees a `ping` before `initialize` does (the prelude hands such a connection to the
SDK at once). No wall-clock asserts: benchmarks/bench_mcp.py measures the times.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

from engram.mcp_server import prelude

VERSIONS = ["2025-06-18", "2025-11-25", "2099-01-01"]


def start(repo: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(repo), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def answer(out: IO[bytes], rid: int) -> dict[str, Any]:
    """Read messages until the answer to request ``rid``."""
    while True:
        line = out.readline()
        assert line, "the server closed its output before answering"
        message: dict[str, Any] = json.loads(line)
        if message.get("id") == rid:
            return message


def initialize(rid: int, version: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


LISTS = ("prompts/list", "resources/list", "resources/templates/list")


def handshake(repo: Path, version: str, *, sdk_first: bool) -> tuple[dict[str, Any], ...]:
    """Return the answers to initialize, tools/list and a tools/call, then end the server."""
    proc = start(repo)
    assert proc.stdout is not None
    try:
        if sdk_first:  # a ping before initialize: the SDK answers everything
            send(proc, {"jsonrpc": "2.0", "id": 0, "method": "ping"})
            assert answer(proc.stdout, 0)["result"] == {}
        send(proc, initialize(1, version))
        init = answer(proc.stdout, 1)
        send(proc, INITIALIZED)
        send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = answer(proc.stdout, 2)
        listed = []  # what Claude Code lists before it offers a server's tools
        for rid, method in enumerate(LISTS, start=5):
            send(proc, {"jsonrpc": "2.0", "id": rid, "method": method})
            listed.append(answer(proc.stdout, rid))
        call = {"name": "recall", "arguments": {"query": "money cents"}}
        send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
        recalled = answer(proc.stdout, 3)
        send(proc, {"jsonrpc": "2.0", "id": 4, "method": "ping"})
        pong = answer(proc.stdout, 4)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
        assert proc.stderr is not None
        proc.stderr.close()
    assert proc.returncode == 0
    return init, tools, recalled, pong, *listed


@pytest.mark.parametrize("version", VERSIONS)
def test_first_answers_equal_the_sdks_and_the_sdk_takes_over(repo: Path, version: str) -> None:
    fast = handshake(repo, version, sdk_first=False)
    sdk = handshake(repo, version, sdk_first=True)
    assert fast[0] == sdk[0]  # initialize: version, capabilities, server info, instructions
    assert fast[1] == sdk[1]  # every tool, schema and annotation
    assert fast[4:] == sdk[4:]  # prompts, resources and the template, as the SDK lists them
    assert [len(next(iter(a["result"].values()))) for a in fast[4:]] == [4, 2, 1]
    assert fast[0]["result"]["protocolVersion"] == (
        version if version in prelude.HANDSHAKE_VERSIONS else prelude.HANDSHAKE_VERSIONS[-1]
    )
    # The SDK answered the tool call after the prelude, in the session the prelude opened.
    hits = json.loads(fast[2]["result"]["content"][0]["text"])["hits"]
    assert [hit["title"] for hit in hits] == ["Money is integer cents"]
    assert fast[2] == sdk[2] and fast[3] == sdk[3] == {"jsonrpc": "2.0", "id": 4, "result": {}}


def test_handshake_versions_are_the_sdks() -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    assert tuple(HANDSHAKE_PROTOCOL_VERSIONS) == prelude.HANDSHAKE_VERSIONS


@pytest.mark.parametrize("stage", ["prelude", "sdk"])
def test_end_of_input_ends_the_server_cleanly(repo: Path, stage: str) -> None:
    proc = start(repo)
    assert proc.stdout is not None
    send(proc, initialize(1, "2025-06-18"))
    answer(proc.stdout, 1)
    if stage == "sdk":  # resources/read is the SDK's: the connection is handed over first
        send(proc, INITIALIZED)
        read = {"uri": "engram://stats"}
        send(proc, {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": read})
        assert "contents" in answer(proc.stdout, 2)["result"]
    out, err = proc.communicate(b"", timeout=60)
    assert proc.returncode == 0
    assert out == b"" and b"Traceback" not in err


@pytest.mark.parametrize("stage", ["prelude", "sdk"])
def test_sigint_ends_the_server_with_130_and_no_traceback(repo: Path, stage: str) -> None:
    proc = start(repo)
    assert proc.stdout is not None
    send(proc, initialize(1, "2025-06-18"))
    answer(proc.stdout, 1)
    if stage == "sdk":
        send(proc, INITIALIZED)
        get = {"name": "memory-protocol"}
        send(proc, {"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": get})
        assert "messages" in answer(proc.stdout, 2)["result"]
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    assert proc.stderr is not None
    err = proc.stderr.read()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        assert stream is not None
        stream.close()
    assert proc.returncode == 130, err
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err


def test_a_file_on_stdin_is_served_by_the_sdk_alone(repo: Path, tmp_path: Path) -> None:
    """Standard input that is not a pipe gets no prelude: the SDK reads it all."""
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps(initialize(1, "2025-06-18")) + "\n" + json.dumps(INITIALIZED))
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "engram", "-C", str(repo), "mcp"],
            stdin=stdin,
            capture_output=True,
            timeout=120,
            env={**os.environ},
            check=False,
        )
    assert done.returncode == 0 and b"Traceback" not in done.stderr
    (line,) = done.stdout.splitlines()
    assert json.loads(line)["result"]["serverInfo"]["name"] == "engram"
