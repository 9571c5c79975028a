"""`engram mcp` leaves once asked (SIGINT, the end of its input), whatever it still runs.

Real server processes over real pipes and a real terminal (a pty). Two things kept a server
from leaving:

- standard input on a terminal: the SDK reads it in a worker thread that a SIGINT cannot stop,
  so the server stayed until the next line came (for ever, for a person who pressed Ctrl-C);
- a nearest-neighbour graph being built in the background (``ann.Building``, a thread that is
  not a daemon, so that a one-shot ``engram recall`` saves the graph before it exits): any way
  out through the interpreter's own exit (a client gone mid-write) waited for the build, half a
  minute at 100k memories on a busy machine.

The graph here is the real one of a real store, built by the real library; the server is
engram's own entry point, with the graph's thresholds lowered to these few hundred memories
(settings of the code under test, as tests/index/test_ann.py lowers them) and the build held
until the test would let it go, which it never does: a server that waits for it never leaves,
and the timeout is the failure signal. No wall-clock asserts.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from engram.index import ann, semantic
from engram.model import canonical_line
from engram.service import Engram
from tests.helpers.places import ROOT
from tests.index.test_ann import real_memories
from tests.mcp_server.test_mcp_start import INITIALIZED, answer, initialize

WAIT = 60  # seconds a server has to leave before the test calls it a hang (it takes ms)

# engram's entry point, with the graph built from 64 rows on and in the background, and the
# build held: it starts (the file named by ENGRAM_TEST_BUILDING appears) and never finishes.
HELD_BUILD = """
import os, sys, threading
from pathlib import Path
from engram.index import ann
ann.EXACT_BELOW = ann.BACKGROUND_FROM = 64
held = threading.Event()  # never set: the build runs for as long as the process lives
real = ann.Graph.build.__func__
def build(cls, matrix):
    Path(os.environ["ENGRAM_TEST_BUILDING"]).touch()
    held.wait()
    return real(cls, matrix)
ann.Graph.build = classmethod(build)
sys.argv = ["engram", "-C", sys.argv[1], "mcp"]
from engram.__main__ import main
main()
"""

INITIALIZE = initialize(1, "2025-06-18")
RECALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "recall", "arguments": {"query": "deploys that lost connections"}},
}


def line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


def left(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the server to leave (a hang fails here) and return its exit status."""
    try:
        return proc.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"the server did not leave within {WAIT} s")


@pytest.fixture
def big(tmp_path: Path) -> Path:
    """A project whose memories are more than the lowered threshold: recall builds a graph."""
    if not (semantic.available() and ann.available()):
        pytest.skip("the graph needs wordllama and usearch (the semantic extra)")
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    engram, _ = Engram.init(root, "demo")
    engram.close()
    records = sorted(real_memories(), key=lambda r: str(r["id"]))
    assert len(records) > 64
    (root / ".engram" / "memories.jsonl").write_bytes(b"".join(map(canonical_line, records)))
    return root


def building_server(root: Path, tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """Start the server, answer a recall, and return once the graph's build has started."""
    building = tmp_path / "building"
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD_BUILD, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the log says the graph is being built: not read here
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "ENGRAM_TEST_BUILDING": str(building)},
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line(INITIALIZE))
    proc.stdin.flush()
    answer(proc.stdout, 1)
    proc.stdin.write(line(INITIALIZED) + line(RECALL))
    proc.stdin.flush()
    recalled = answer(proc.stdout, 2)["result"]
    assert not recalled["isError"] and json.loads(recalled["content"][0]["text"])["hits"]
    deadline = time.monotonic() + WAIT
    while not building.exists():  # the build starts in its own thread, as the recall ends
        assert time.monotonic() < deadline, "the recall started no graph build"
        time.sleep(0.01)
    return proc, root


def graphs(root: Path) -> list[Path]:
    return sorted((root / ".engram" / "index").glob("*.graph.usearch"))


@pytest.mark.parametrize("way", ["sigint", "end of input", "client gone"])
def test_a_server_leaves_while_its_graph_is_being_built(
    big: Path, tmp_path: Path, way: str
) -> None:
    proc, root = building_server(big, tmp_path)
    assert proc.stdin is not None and proc.stdout is not None
    if way == "sigint":
        proc.send_signal(signal.SIGINT)
    elif way == "end of input":
        proc.stdin.close()
    else:  # the client stops reading and the server's next answer finds no one
        proc.stdout.close()
        proc.stdin.write(line({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        proc.stdin.flush()
    status = left(proc)
    for stream in (proc.stdin, proc.stdout):
        with contextlib.suppress(BrokenPipeError):  # the server is gone: nothing more to send
            stream.close()
    assert status == {"sigint": 130, "end of input": 0, "client gone": 1}[way]
    assert graphs(root) == []  # the build was abandoned, not finished and saved on the way out


def terminal_server(repo: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start the server with standard input on a terminal (a pty, echo off), initialized."""
    main, tty = pty.openpty()
    attrs = termios.tcgetattr(tty)
    attrs[3] &= ~termios.ECHO  # lflag: no echo (canonical lines and Ctrl-D stay)
    termios.tcsetattr(tty, termios.TCSANOW, attrs)
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(repo), "mcp"],
        stdin=tty,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(tty)
    assert proc.stdout is not None
    os.write(main, line(INITIALIZE))
    assert answer(proc.stdout, 1)["result"]["serverInfo"]["name"] == "engram"
    return proc, main


@pytest.mark.parametrize("way", ["sigint", "end of input"])
def test_a_server_reading_a_terminal_leaves(repo: Path, way: str) -> None:
    """A person who starts ``engram mcp`` in a terminal ends it with Ctrl-C or Ctrl-D."""
    proc, main = terminal_server(repo)
    try:
        if way == "sigint":
            proc.send_signal(signal.SIGINT)
        else:
            os.write(main, termios.tcgetattr(main)[6][termios.VEOF])  # Ctrl-D at a line start
        status = left(proc)
    finally:
        os.close(main)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert status == (130 if way == "sigint" else 0), err
    assert b"Traceback" not in err
