"""JSON depth and size are bounded on every input (README): files, chunks, imports, daemon,
HTTP and MCP. A line nested 1,100 deep (a 2 KB line that used to raise RecursionError from every
command) is a bad line like any other: named with file and line, skipped by reads, refused by
writes; a bad record in a chunk or an import is skipped while the rest applies; every server
answers a deep request with an error and keeps the connection.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import anyio
import pytest

from engram.errors import CorruptStore, InputTooLarge, InvalidInput
from engram.model import (
    MAX_JSON_DEPTH,
    canonical_line,
    check_json_limits,
    dumps,
    json_depth_exceeded,
    loads,
    parse_line,
    value_too_deep,
)
from engram.service import Engram
from engram.store import MemoryStore
from engram.sync.chunks import CHUNKS, SUFFIX, chunk_id, read_chunk, write_chunk
from tests.conftest import run_cli
from tests.helpers.records import STAMP, record

DEEP = 1100  # past orjson's limit (1,024) and Python's recursion limit (1,000)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_line(rid: str, depth: int = DEEP) -> bytes:
    """A record line whose unknown field nests ``depth`` lists (the record itself adds one)."""
    head = canonical_line(record(rid, "deep one", x=0))[:-1]
    return head.replace(b'"x":0', b'"x":' + nested(depth).encode()) + b"\n"


def text(output: bytes) -> str:
    return output.decode("utf-8", errors="replace")


# -- the one depth check -------------------------------------------------------------------------


def test_depth_scan_counts_containers_outside_strings_only() -> None:
    limit = MAX_JSON_DEPTH
    assert json_depth_exceeded(nested(limit)) is None
    assert json_depth_exceeded(nested(limit + 1)) == limit
    assert json_depth_exceeded("{" * (limit + 1)) == limit  # unbalanced still counts
    # Brackets inside strings, escaped quotes included, are text, not nesting.
    quoted = json.dumps({"a": "[" * 500 + '\\"' + "{" * 500})
    assert json_depth_exceeded(quoted) is None
    assert loads(quoted) == json.loads(quoted)
    tricky = '{"a":"\\"[[[","b":' + nested(limit) + "}"
    assert json_depth_exceeded(tricky) == tricky.index("[", tricky.index("b")) + limit - 1
    # The parsed-value walk agrees with the byte scan at the limit.
    assert not value_too_deep(json.loads(nested(limit)))
    assert value_too_deep(json.loads(nested(limit + 1)))


def test_loads_refuses_deep_and_huge_input_before_any_parser_runs() -> None:
    with pytest.raises(InputTooLarge, match="nested deeper than 64 levels") as info:
        loads(nested(DEEP), what="manifest.json")
    assert "manifest.json" in info.value.message
    assert isinstance(info.value, ValueError)  # callers' `except ValueError` keeps working
    with pytest.raises(InputTooLarge, match="over the limit of 10"):
        check_json_limits(b'"' + b"a" * 20 + b'"', what="x", max_bytes=10)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 100, 1024, DEEP])
def test_a_deep_line_is_a_corrupt_line(depth: int) -> None:
    """Both paths: found on orjson's result (up to 1,024) and by the scan before json runs."""
    line = deep_line("zzzzdeep", depth)[:-1]
    with pytest.raises(CorruptStore) as info:
        parse_line(line, path="m.jsonl", lineno=7)
    offset = json_depth_exceeded(line)
    assert offset is not None
    assert info.value.message == (
        f"m.jsonl:7: JSON nested deeper than 64 levels (at byte {offset}); refused"
    )
    assert info.value.line == 7
    with pytest.raises(InputTooLarge, match=f"at byte {offset}"):
        loads(line)


def test_a_deep_record_is_never_written() -> None:
    # Just under the limit is a record like any other.
    ok = deep_line("zzzzfine", MAX_JSON_DEPTH - 1)
    assert parse_line(ok[:-1], path="m", lineno=1)["id"] == "zzzzfine"
    # A record built in Python: refused on the way in, so no reader ever meets its line.
    value: list[Any] = []
    for _ in range(MAX_JSON_DEPTH):
        value = [value]
    with pytest.raises(InputTooLarge, match="record zzzz"):
        canonical_line(record("zzzzbuilt", "built", x=value))
    for _ in range(DEEP):
        value = [value]
    with pytest.raises(InputTooLarge, match="nests deeper"):
        dumps(record("zzzzbuilt", "built", x=value))


# -- memories.jsonl, through the real CLI ---------------------------------------------------------


def teammate_chunk(engram_dir: Path, lines: list[bytes]) -> str:
    """Write a chunk as a teammate's engram (or a hostile one) would: JSONL, named by its hash."""
    data = b"".join(sorted(lines))
    ident = chunk_id(data)
    folder = engram_dir / CHUNKS
    folder.mkdir(exist_ok=True)
    (folder / f"{ident}{SUFFIX}").write_bytes(zlib.compress(data, 9, 16 + zlib.MAX_WBITS))
    return ident


def test_a_1100_deep_line_leaves_every_command_working(project: Engram) -> None:
    project.remember("Payment retries", "Retries use idempotency keys.", kind="decision")
    path = project.project_ws.store.path
    good = path.read_bytes()
    path.write_bytes(good + deep_line("zzzzdeep"))
    data = path.read_bytes()
    root = project.root
    where = f"{path}:2: JSON nested deeper than 64 levels"
    # A teammate's chunk waits to be applied, so sync has to write memories.jsonl.
    teammate_chunk(path.parent, [canonical_line(record("tttt" + "a" * 22, "From a teammate"))])

    found = run_cli("recall", "idempotency", cwd=root)
    assert found.returncode == 0, text(found.stderr)
    assert "Payment retries" in text(found.stdout)
    assert where in text(found.stderr)

    saved = run_cli("remember", "Another", "Refused while the file is damaged.", cwd=root)
    assert saved.returncode == 1
    assert where in text(saved.stderr) and "engram doctor" in text(saved.stderr)

    synced = run_cli("sync", cwd=root)
    assert synced.returncode == 1, text(synced.stdout + synced.stderr)
    assert where in text(synced.stderr) and "engram doctor" in text(synced.stderr)

    checked = run_cli("doctor", cwd=root)
    assert checked.returncode == 1
    assert where in text(checked.stdout)
    for result in (found, saved, synced, checked):
        assert "Traceback" not in text(result.stderr + result.stdout)
    assert path.read_bytes() == data  # nothing was written over

    fixed = run_cli("doctor", "--fix", cwd=root)
    assert fixed.returncode == 0, text(fixed.stdout + fixed.stderr)
    assert "Traceback" not in text(fixed.stderr + fixed.stdout)
    assert path.read_bytes() == good
    # Set aside in the committed store (not git-ignored state/), byte for byte, and named.
    (kept,) = (path.parent / "quarantine").glob("memories-*.jsonl")
    assert kept.read_bytes() == deep_line("zzzzdeep")
    assert str(kept) in text(fixed.stdout)
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(kept)], cwd=root, check=False
    ).returncode
    assert ignored == 1  # git does not ignore it: it shows in `git status`

    synced = run_cli("sync", cwd=root)
    assert synced.returncode == 0, text(synced.stdout + synced.stderr)
    assert [h.record["title"] for h in project.recall("teammate")] == ["From a teammate"]


def test_a_deep_record_in_a_chunk_is_skipped_and_the_rest_applies(project: Engram) -> None:
    engram_dir = project.project_ws.store.dir
    good = [record("aaaa" + "a" * 22, "First good one"), record("cccc" + "c" * 22, "Second")]
    wrong = canonical_line(record("zzzz" + "z" * 22, "zz wrong importance", importance=9))
    lines = [*map(canonical_line, good), deep_line("bbbbdeep"), wrong]
    ident = teammate_chunk(engram_dir, lines)
    at = sorted(lines).index(deep_line("bbbbdeep")) + 1  # the line it has in the chunk
    wrong_at = sorted(lines).index(wrong) + 1
    assert wrong_at > at  # named by its own line, not by its place among the records read
    problems: list[str] = []
    assert [r["id"] for r in read_chunk(engram_dir, ident, problems=problems)] == [
        r["id"] for r in good
    ] + ["zzzz" + "z" * 22]
    (problem,) = problems
    assert problem.startswith(f"{CHUNKS}/{ident}{SUFFIX}:{at}: JSON nested deeper than 64")
    with pytest.raises(CorruptStore, match=f":{at}: JSON nested deeper"):
        read_chunk(engram_dir, ident)  # strict readers still refuse the chunk

    synced = run_cli("sync", "--json", cwd=project.root)
    assert synced.returncode == 0, text(synced.stdout + synced.stderr)
    report = json.loads(synced.stdout)
    assert ident in report["imported_chunks"]
    assert any(f"{ident}{SUFFIX}:{at}: JSON nested deeper" in p for p in report["problems"])
    name = f"{CHUNKS}/{ident}{SUFFIX}:{wrong_at}: importance must be 1–5, got 9"
    assert name in json.dumps(report, ensure_ascii=False), report
    titles = {r["title"] for r in MemoryStore(engram_dir).read_all()}
    assert titles == {"First good one", "Second"}
    # Applied once: the next sync neither repeats the work nor the complaint.
    again = json.loads(run_cli("sync", "--json", cwd=project.root).stdout)
    assert again["imported_chunks"] == [] and not any(ident in p for p in again["problems"])


def test_write_chunk_never_writes_a_record_readers_would_refuse(tmp_path: Path) -> None:
    value: list[Any] = []
    for _ in range(MAX_JSON_DEPTH):
        value = [value]
    with pytest.raises(InvalidInput, match="nested deeper"):
        deep = record("dddd" + "d" * 22, "deep", x=value)
        write_chunk(tmp_path, [deep], created_by="t", created_at=STAMP)
    assert not (tmp_path / CHUNKS).exists() or not list((tmp_path / CHUNKS).iterdir())


# -- imports --------------------------------------------------------------------------------------


def test_imports_skip_a_deep_record_and_keep_the_rest(project: Engram, tmp_path: Path) -> None:
    mcp = tmp_path / "memory.jsonl"
    entity = {
        "type": "entity",
        "name": "Ledger",
        "entityType": "concept",
        "observations": ["Rounds half to even"],
    }
    deep = '{"type":"entity","name":"Deep","entityType":"x","observations":' + nested(DEEP) + "}"
    mcp.write_text(json.dumps(entity) + "\n" + deep + "\n", encoding="utf-8")
    result = project.import_path(mcp)
    assert result.added == 1
    assert any(e.startswith("line 2: JSON nested deeper than 64") for e in result.errors)

    export = tmp_path / "export.json"
    body = {"format": "engram", "version": 1, "memories": [record("eeee" + "e" * 22, "Kept")]}
    text_ = json.dumps(body)
    hostile = text_.replace('"memories": [', '"memories": [{"id":"ffff","x":' + nested(100) + "}, ")
    export.write_text(hostile, encoding="utf-8")
    result = project.import_path(export)
    assert result.added == 1
    assert any("nested deeper than 64" in e for e in result.errors), result.errors

    export.write_text(text_.replace('"Kept"', '"Kept", "x": ' + nested(DEEP)), encoding="utf-8")
    refused = run_cli("import", str(export), cwd=project.root)
    assert refused.returncode == 1
    assert f"{export}: JSON nested deeper than 256 levels" in text(refused.stderr)
    assert "Traceback" not in text(refused.stderr)


# -- the daemon -----------------------------------------------------------------------------------


def test_daemon_answers_a_deep_request_and_the_connection_goes_on(tmp_path: Path) -> None:
    from tests.daemon.test_daemon import Daemon, _make_store

    root = tmp_path / "repo"
    _make_store(root)
    daemon = Daemon(root, tmp_path / "home")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(daemon.path))
            reader = sock.makefile("rb")
            for rid, depth in (("shallow-ish", 70), ("deep", DEEP)):
                params = '{"query":"x","extra":' + nested(depth) + "}"
                line = f'{{"id":"{rid}","method":"memory_search","params":{params}}}\n'
                sock.sendall(line.encode())
                answer = json.loads(reader.readline())
                assert answer["id"] == rid and answer["ok"] is False
                assert answer["error"]["code"] == 7002
                assert "memory_search" in answer["error"]["message"]
                assert "nested deeper than 64 levels" in answer["error"]["message"]
            sock.sendall(b'{"id":3,"method":"memory_search","params":{"query":"lock"}}\n')
            answer = json.loads(reader.readline())
            assert answer["id"] == 3 and answer["ok"] is True
    finally:
        daemon.stop()


# -- HTTP -----------------------------------------------------------------------------------------


def test_http_refuses_a_deep_body_with_422_and_serves_on(tmp_path: Path) -> None:
    from tests.http_api.test_http import Server, _make_project

    root = _make_project(tmp_path / "repo")
    server = Server(root, tmp_path / "home")
    try:
        for depth in (70, DEEP):
            body = '{"title":"t","content":"c","x":' + nested(depth) + "}"
            response = server.client.post(
                "/memories", content=body, headers={"content-type": "application/json"}
            )
            assert response.status_code == 422, response.text
            error = response.json()["error"]
            assert error["code"] == "input_too_large"
            assert "POST /memories" in error["message"] and "deeper than 64" in error["message"]
        too_big = server.client.post("/memories", content=b"[" + b" " * (9 << 20) + b"]")
        assert too_big.status_code == 413
        saved = server.client.post("/memories", json={"title": "Still serving", "content": "ok"})
        assert saved.status_code == 201, saved.text
    finally:
        log = server.stop()
    assert "Traceback" not in log, log


# -- MCP ------------------------------------------------------------------------------------------


def test_mcp_deep_arguments_are_an_error_result_and_the_session_goes_on(tmp_path: Path) -> None:
    from tests.mcp_server.test_mcp import connect, make_project

    root = make_project(tmp_path / "repo")
    deep: Any = []
    for _ in range(100):
        deep = [deep]

    async def scenario() -> None:
        async with connect(root) as client:
            error = await client.error("remember", {"title": "t", "content": "c", "x": deep})
            assert error["code"] == "input_too_large"
            assert "remember: arguments nest deeper than 64" in error["message"]
            saved = await client.ok("remember", {"title": "Still here", "content": "ok"})
            assert saved

    anyio.run(scenario)


def test_mcp_a_message_too_deep_to_parse_gets_a_json_rpc_error(tmp_path: Path) -> None:
    """Raw lines on a pipe: the SDK would drop such a message and leave the client waiting."""
    from tests.mcp_server.test_mcp import make_project

    root = make_project(tmp_path / "repo")
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(root), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(line: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(line.encode() + b"\n")
        proc.stdin.flush()

    def answer() -> dict[str, Any]:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no answer"
        return dict(json.loads(proc.stdout.readline()))

    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))
        assert "result" in answer()
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        args = '{"title":"t","content":"c","x":' + nested(DEEP) + "}"
        send(
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remember",'
            f'"arguments":{args}}}}}'
        )
        refused = answer()
        assert refused["id"] == 2
        assert "tools/call: nested deeper than 128 levels" in refused["error"]["message"]
        send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
        listed = answer()
        assert listed["id"] == 3 and listed["result"]["tools"]
    finally:
        proc.kill()
        proc.wait(timeout=30)
        assert proc.stderr is not None
        log = proc.stderr.read().decode("utf-8", "replace")
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    assert "Traceback" not in log, log


# -- committed config -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["config.yaml", "config.json"])
def test_a_deep_committed_config_is_a_config_error_naming_the_file(
    project: Engram, name: str
) -> None:
    engram_dir = project.project_ws.store.dir
    (engram_dir / "config.yaml").unlink()
    body = nested(DEEP)
    document = f"extra: {body}\n" if name == "config.yaml" else f'{{"extra": {body}}}'
    (engram_dir / name).write_text(document, encoding="utf-8")
    found = run_cli("recall", "anything", cwd=project.root)
    assert found.returncode == 1
    assert f"error: {engram_dir / name}: " in text(found.stderr)
    assert "deep" in text(found.stderr) and "Traceback" not in text(found.stderr)
