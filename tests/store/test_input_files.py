"""Paths that come from outside are read as regular files within a limit (issue 28).

A hook payload's ``transcript_path`` naming a named pipe blocked the hook (and the daemon
answering it) forever, ``/dev/zero`` was read without end, and ``mkfifo notes/pipe.md; engram
import notes/`` hung. ``engram.fileio.read_regular`` opens without blocking, checks the open
descriptor and reads at most its limit; every reader of such a path uses it, and a refusal
names the path. Real named pipes (``os.mkfifo``), real devices and real processes throughout,
each under a timeout that a blocked read would exceed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram.daemon import protocol as rpc
from engram.errors import InputTooLarge, InvalidInput
from engram.fileio import read_regular
from engram.service import Engram
from engram.sync.plaintransfer import MAX_NOTE_BYTES
from tests.conftest import run_cli
from tests.helpers.processes import wait_for

# A refused path answers at once; a blocked open or an endless read never does.
PROMPT = 60
ON = {"ENGRAM_DAEMON": "on", "ENGRAM_DAEMON_IDLE": "120"}


def test_read_regular_refuses_pipes_devices_folders_and_oversize_files(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(InvalidInput, match=r"pipe: is a named pipe \(FIFO\), not a regular file"):
        read_regular(pipe)  # returns at once: no writer is waited for
    with pytest.raises(InvalidInput, match="/dev/zero: is a character device, not a regular"):
        read_regular("/dev/zero")
    with pytest.raises(InvalidInput, match="is a folder, not a regular file"):
        read_regular(tmp_path)
    with pytest.raises(InvalidInput, match="missing: cannot be read: No such file"):
        read_regular(tmp_path / "missing")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(InputTooLarge, match="big: 101 bytes is over the limit of 100 bytes"):
        read_regular(big, limit=100)
    assert read_regular(big, limit=101) == b"x" * 101
    big.write_bytes(b"a" * 50 + b"b" * 51)
    assert read_regular(big, tail=51) == b"b" * 51  # only the end is read
    link = tmp_path / "link"
    link.symlink_to(pipe)  # a link to a pipe is refused as the pipe
    with pytest.raises(InvalidInput, match="is a named pipe"):
        read_regular(link, what="the note")


def _stop_payload(root: Path, transcript: str) -> bytes:
    return json.dumps(
        {
            "session_id": "s-1",
            "transcript_path": transcript,
            "cwd": str(root),
            "hook_event_name": "Stop",
            "stop_hook_active": False,
        }
    ).encode()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    engram, _ = Engram.init(tmp_path / "p", "ledger")
    engram.close()
    yield engram.root


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_stop_hook_refuses_a_transcript_that_is_no_regular_file(store: Path, kind: str) -> None:
    transcript = str(store / "pipe.jsonl") if kind == "fifo" else kind
    if kind == "fifo":
        os.mkfifo(transcript)
    done = subprocess.run(
        [sys.executable, "-m", "engram", "hook", "claude-code", "stop"],
        cwd=store,
        input=_stop_payload(store, transcript),
        capture_output=True,
        timeout=PROMPT,
        env={**os.environ, "ENGRAM_DAEMON": "off"},
    )
    said = done.stderr.decode()
    assert done.returncode == 0  # a hook never breaks the agent's loop
    kind_words = "a named pipe (FIFO)" if kind == "fifo" else "a character device"
    assert f"transcript_path {transcript}: is {kind_words}, not a regular file; refused" in said
    assert "gave up" not in said  # answered, not ended by the hook's own watchdog


def test_a_daemon_answering_a_stop_hook_never_opens_a_pipe_and_keeps_serving(
    store: Path,
) -> None:
    pipe = store / "pipe.jsonl"
    os.mkfifo(pipe)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(store), "daemon", "--idle", "120"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    socket = rpc.socket_path(store / ".engram")
    try:
        assert wait_for(lambda: rpc.connectable(socket) or daemon.poll() is not None)
        assert daemon.poll() is None
        params = {
            "agent": "claude-code",
            "event": "stop",
            "payload": json.loads(_stop_payload(store, str(pipe))),
            "cwd": str(store),
        }
        with rpc.Client(socket, timeout=PROMPT) as client:
            with pytest.raises(rpc.RpcError) as info:
                client.call("engram_hook", params)
            assert f"transcript_path {pipe}: is a named pipe (FIFO)" in str(info.value)
            assert client.call("daemon_status")["requests"] >= 1  # and it still answers
        # The hook as the agent runs it, through this daemon.
        done = run_cli(
            "hook", "claude-code", "stop", cwd=store, stdin=_stop_payload(store, str(pipe)), env=ON
        )
        assert done.returncode == 0
        assert f"transcript_path {pipe}: is a named pipe (FIFO)" in done.stderr.decode()
        assert "gave up" not in done.stderr.decode()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
        if daemon.stderr:
            daemon.stderr.close()


def test_import_of_a_folder_names_a_pipe_and_a_huge_note_and_imports_the_rest(
    store: Path, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    os.mkfifo(notes / "pipe.md")
    with (notes / "huge.md").open("wb") as handle:  # sparse: no disk is used
        handle.truncate(MAX_NOTE_BYTES + 1)
    (notes / "fine.md").write_text("---\ntitle: A fine note\n---\nIts body.\n")
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(store), "import", str(notes)],
        capture_output=True,
        text=True,
        timeout=PROMPT,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert f"skipped {notes}/pipe.md: is a named pipe (FIFO), not a regular file; refused" in said
    assert f"skipped {notes}/huge.md: over {MAX_NOTE_BYTES:,} bytes" in said
    with Engram.open(store) as engram:
        assert [r["title"] for r in engram.project_ws.store.read_all()] == ["A fine note"]


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_import_of_a_pipe_or_a_device_is_refused_naming_it(
    store: Path, tmp_path: Path, kind: str
) -> None:
    source = str(tmp_path / "export.json") if kind == "fifo" else kind
    if kind == "fifo":
        os.mkfifo(source)
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(store), "import", source],
        capture_output=True,
        text=True,
        timeout=PROMPT,
    )
    assert done.returncode != 0
    assert f"{source}: is a " in done.stderr and "not a regular file; refused" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_adr_that_is_a_pipe_or_a_link_to_a_device_is_skipped(store: Path) -> None:
    adr = store / "docs" / "adr"
    adr.mkdir(parents=True)
    os.mkfifo(adr / "0001-pipe.md")
    (adr / "0003-zero.md").symlink_to("/dev/zero")
    (adr / "0002-cents.md").write_text("# 2. Amounts are integer cents\n\nStatus: accepted\n")
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(store), "index", "--adr"],
        capture_output=True,
        text=True,
        timeout=PROMPT,
    )
    said = done.stdout + done.stderr
    assert "Traceback" not in said
    with Engram.open(store) as engram:
        titles = [r["title"] for r in engram.project_ws.store.read_all()]
    assert any("integer cents" in title for title in titles), said


def test_capture_of_a_pipe_is_refused_naming_it(store: Path, tmp_path: Path) -> None:
    pipe = tmp_path / "output.txt"
    os.mkfifo(pipe)
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(store), "capture", str(pipe)],
        capture_output=True,
        text=True,
        timeout=PROMPT,
    )
    assert done.returncode != 0
    assert f"{pipe}: is a named pipe (FIFO), not a regular file; refused" in done.stderr


def test_the_mcp_import_tool_refuses_a_pipe_the_agent_names(store: Path, tmp_path: Path) -> None:
    """An agent's path over MCP: answered with an error at once, the server keeps serving."""
    from tests.mcp_server.test_mcp import connect, run

    pipe = tmp_path / "export.json"
    os.mkfifo(pipe)

    async def scenario() -> None:
        async with connect(store, "--tools", "admin") as client:
            error = await client.error("import", {"path": str(pipe)})
            assert error["message"] == (
                f"{pipe}: is a named pipe (FIFO), not a regular file; refused"
            )
            assert (await client.ok("doctor"))["error"] == 0

    run(scenario)
