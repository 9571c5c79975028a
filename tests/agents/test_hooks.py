"""Hooks as the agents run them: the payloads their references document, through the exact
command `engram setup` wrote into the agent's settings, run with ``sh -c`` from the agent's
folder, and the JSON the agent reads back.

The payloads are in tests/fixtures/hooks/AGENT/*.json, written from each agent's hooks reference
(Claude Code, Codex, Gemini CLI), with ``$ROOT`` standing for the repository: absolute paths,
a subfolder as the working folder, a multi-file Codex patch, a notebook edit, a transcript.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket as pysocket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engram.agents import setup as agents
from engram.agents.payload import files_of, last_assistant_text, patch_files
from engram.agents.reply import LIMIT
from engram.daemon import protocol as rpc
from engram.hooks import main as hook_main
from engram.service import Engram
from tests.conftest import run_cli
from tests.helpers.places import FIXTURES
from tests.helpers.processes import daemons_of, modules_loaded, wait_for

FIXTURES = FIXTURES / "hooks"
VENV_BIN = Path(sys.executable).parent
SETTINGS = {
    "claude-code": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini-cli": ".gemini/settings.json",
}
CLAUDE_LIMIT = 10_000  # characters of hook context Claude Code keeps
CLI_ADVICE = re.compile(r"`engram [a-z]|(?<![\w-])--[a-z]")


def install(root: Path, agent: str) -> dict[str, str]:
    """Run `engram setup AGENT` as a process; return the command it wrote for each event."""
    done = run_cli("setup", agent, cwd=root)
    assert done.returncode == 0, done.stderr.decode()
    settings = json.loads((root / SETTINGS[agent]).read_text())
    commands: dict[str, str] = {}
    for spec in agents.HOOKS:
        if spec.agent != agent:
            continue
        groups = [g for g in settings["hooks"][spec.native] if spec.event in json.dumps(g)]
        (group,) = groups
        assert group.get("matcher") == agents.native_matcher(spec)
        commands[spec.event] = group["hooks"][0]["command"]
    return commands


def payload(agent: str, name: str, root: Path, *, session: str | None = None) -> bytes:
    """Return a fixture payload for ``root``; ``session`` replaces its session id ('' drops it)."""
    text = (FIXTURES / agent / f"{name}.json").read_text()
    data = text.replace("$ROOT", json.dumps(str(root))[1:-1]).encode()
    if session is None:
        return data
    loaded = json.loads(data)
    loaded.pop("session_id", None)
    if session:
        loaded["session_id"] = session
    return json.dumps(loaded).encode()


def replay(command: str, data: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run a hook's command as the agent does: ``sh -c`` in its folder, payload on stdin."""
    return subprocess.run(
        ["sh", "-c", command],
        cwd=cwd,
        input=data,
        capture_output=True,
        env={**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}/usr/bin{os.pathsep}/bin"},
        timeout=60,
        check=False,
    )


def context_of(done: subprocess.CompletedProcess[bytes], native: str) -> str:
    """Return the additional context a hook's output gives the model (asserting its shape)."""
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b"", done.stderr.decode()
    out = json.loads(done.stdout)
    assert set(out) == {"hookSpecificOutput"}
    assert set(out["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert out["hookSpecificOutput"]["hookEventName"] == native
    text: str = out["hookSpecificOutput"]["additionalContext"]
    assert 0 < len(text) <= LIMIT < CLAUDE_LIMIT
    assert not CLI_ADVICE.search(text), text  # MCP tool names, never CLI commands
    return text


def denial_of(done: subprocess.CompletedProcess[bytes], agent: str, native: str) -> str:
    """Return the reason a hook denies a tool call with (asserting the agent's deny shape)."""
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b"", done.stderr.decode()
    out = json.loads(done.stdout)
    if agent == "gemini-cli":
        assert set(out) == {"decision", "reason"} and out["decision"] == "deny"
        reason: str = out["reason"]
    else:
        specific = out["hookSpecificOutput"]
        assert set(specific) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
        assert (specific["hookEventName"], specific["permissionDecision"]) == (native, "deny")
        reason = specific["permissionDecisionReason"]
    assert reason and not CLI_ADVICE.search(reason), reason
    return reason


def silent(done: subprocess.CompletedProcess[bytes]) -> None:
    assert (done.returncode, done.stdout) == (0, b""), done


def session_log(root: Path) -> dict[str, Any]:
    sessions: dict[str, Any] = json.loads((root / ".engram/state/sessions.json").read_text())
    return sessions["sessions"]


# -- Claude Code --------------------------------------------------------------------------------


def test_claude_code_pre_edit_reaches_the_model_for_absolute_paths_from_a_subfolder(
    ledger: Engram,
) -> None:
    root = ledger.root
    hooks = install(root, "claude-code")
    done = replay(hooks["pre-edit"], payload("claude-code", "pre-edit-edit", root), root / "ledger")
    text = context_of(done, "PreToolUse")
    assert text.startswith("# engram: before you edit ledger/money.py")
    assert "Never divide amounts with /" in text and "Money is stored in integer cents" in text
    assert text.index("Never divide") < text.index("Money is stored")  # pitfalls first
    assert "float division lost a cent" in text  # the content, not only the title
    assert "## What" not in text  # a plain-text snippet, as recall shows it
    pitfall = ledger.recall("divide amounts")[0].record["id"]
    assert pitfall[:8] in text and "`get`" in text  # an id to fetch more, with the MCP tool

    # Shown once per file per session: the same session's next edit of the file is silent.
    silent(replay(hooks["pre-edit"], payload("claude-code", "pre-edit-edit", root), root))
    for name in ("pre-edit-write", "pre-edit-multiedit"):
        data = payload("claude-code", name, root, session=f"other-{name}")
        text = context_of(replay(hooks["pre-edit"], data, root), "PreToolUse")
        assert "Money is stored in integer cents" in text, name
    notebook = replay(hooks["pre-edit"], payload("claude-code", "pre-edit-notebook", root), root)
    assert "The report notebook is generated" in context_of(notebook, "PreToolUse")


def test_claude_code_pre_edit_stays_silent_when_nothing_is_known(
    ledger: Engram, tmp_path: Path
) -> None:
    root = ledger.root
    hooks = install(root, "claude-code")
    for name in ("pre-edit-unknown-file", "pre-edit-outside"):
        silent(replay(hooks["pre-edit"], payload("claude-code", name, root), root))
    bare = tmp_path / "no-store"
    bare.mkdir()  # a folder without .engram/: nothing to say, no error
    done = replay(hooks["pre-edit"], payload("claude-code", "pre-edit-edit", bare), bare)
    silent(done)
    assert done.stderr == b""
    broken = replay(hooks["pre-edit"], b"{not json", root)
    silent(broken)
    assert b"not JSON" in broken.stderr  # said where the agent logs it, never to the model


def test_claude_code_session_start_and_compaction_inject_the_briefing(ledger: Engram) -> None:
    root = ledger.root
    hooks = install(root, "claude-code")
    for name in ("session-start", "session-start-compact"):
        text = context_of(
            replay(hooks["session-start"], payload("claude-code", name, root), root), "SessionStart"
        )
        assert text.startswith("# engram: project memory")
        assert "## Active decisions" in text and "Money is stored in integer cents" in text
        assert "## Active pitfalls" in text and "Never divide amounts with /" in text
    assert "2f9c0a7e-5b1d-4c8e-9a3f-1e2d3c4b5a69" in session_log(root)


def test_claude_code_stop_captures_learnings_and_session_end_closes_the_session(
    ledger: Engram,
) -> None:
    root = ledger.root
    hooks = install(root, "claude-code")
    sid = "2f9c0a7e-5b1d-4c8e-9a3f-1e2d3c4b5a69"
    replay(hooks["session-start"], payload("claude-code", "session-start", root), root)

    done = replay(hooks["stop"], payload("claude-code", "stop", root), root)
    assert done.returncode == 0, done.stderr.decode()
    notice = json.loads(done.stdout)
    assert set(notice) == {"systemMessage"}  # for the person; the model is not interrupted
    assert notice["systemMessage"].startswith(
        "engram proposed 1 memory for review (engram review): Refund totals"
    )
    (hit,) = ledger.recall("round half-even bank settles", limit=1)
    assert hit.record["kind"] == "discovery" and hit.record["session_id"] == sid
    assert (hit.record["source"], hit.record["status"]) == ("capture:claude-code", "proposed")
    silent(replay(hooks["stop"], payload("claude-code", "stop", root), root))  # already known

    # Without last_assistant_message (older versions), the transcript's last answer is read.
    (root / ".transcript.jsonl").write_bytes(
        (FIXTURES / "claude-code/transcript.jsonl").read_bytes()
    )
    done = replay(hooks["stop"], payload("claude-code", "stop-transcript", root), root)
    assert "Refund batches are settled per merchant" in json.loads(done.stdout)["systemMessage"]
    silent(replay(hooks["stop"], payload("claude-code", "stop-active", root), root))
    titles = [
        json.loads(line)["title"] for line in ledger.project_ws.store.path.read_text().splitlines()
    ]
    assert not [t for t in titles if t.startswith("Never saved")]  # stop_hook_active: skipped
    done = replay(hooks["subagent-stop"], payload("claude-code", "subagent-stop", root), root)
    assert "The ledger import job reads money.py" in json.loads(done.stdout)["systemMessage"]

    assert "ended_at" not in session_log(root)[sid]
    silent(replay(hooks["session-end"], payload("claude-code", "session-end", root), root))
    assert session_log(root)[sid]["ended_at"]


def test_claude_code_injection_stays_under_the_limit_with_ids_to_fetch_more(
    project: Engram,
) -> None:
    root = project.root
    for n in range(60):
        project.remember(
            f"Pitfall {n} of the hot file",
            f"Detail {n}: " + "the retry loop must back off exponentially; " * 30,
            kind="pitfall",
            files=["hot.py"],
        )
    hooks = install(root, "claude-code")
    data = json.dumps(
        {
            "cwd": str(root),
            "hook_event_name": "PreToolUse",
            "tool_name": "Edit",
            "tool_input": {"file_path": str(root / "hot.py")},
        }
    ).encode()
    text = context_of(replay(hooks["pre-edit"], data, root), "PreToolUse")
    assert "more left out for the token budget" in text and "`check`" in text
    start = replay(hooks["session-start"], payload("claude-code", "session-start", root), root)
    assert len(context_of(start, "SessionStart")) <= LIMIT


# -- Codex --------------------------------------------------------------------------------------


def test_codex_apply_patch_checks_every_file_of_the_patch(ledger: Engram) -> None:
    root = ledger.root
    hooks = install(root, "codex")
    done = replay(
        hooks["pre-edit"], payload("codex", "pre-edit-apply-patch", root), root / "ledger"
    )
    # Codex appends a PreToolUse hook's context after the patch is applied: the first write of
    # files whose memories were not shown is denied once, with them as the reason the model reads.
    text = denial_of(done, "codex", "PreToolUse")
    assert "ledger/money.py" in text and "ledger/old_rates.py" in text
    assert "Never divide amounts with /" in text and "Old rates are frozen" in text
    again = replay(
        hooks["pre-edit"], payload("codex", "pre-edit-apply-patch", root), root / "ledger"
    )
    assert b"deny" not in again.stdout and again.returncode == 0  # the retry goes through
    start = replay(hooks["session-start"], payload("codex", "session-start", root), root)
    assert "Money is stored in integer cents" in context_of(start, "SessionStart")
    done = replay(hooks["stop"], payload("codex", "stop", root), root)
    assert "Rates files are generated" in json.loads(done.stdout)["systemMessage"]


# -- Gemini CLI ---------------------------------------------------------------------------------


def test_gemini_cli_hooks(ledger: Engram) -> None:
    root = ledger.root
    hooks = install(root, "gemini-cli")
    start = replay(hooks["session-start"], payload("gemini-cli", "session-start", root), root)
    assert "Never divide amounts with /" in context_of(start, "SessionStart")
    # Gemini CLI's BeforeTool cannot add context: the check follows the edit, in AfterTool.
    after = replay(hooks["post-edit"], payload("gemini-cli", "post-edit-replace", root), root)
    text = context_of(after, "AfterTool")
    assert text.startswith("# engram: you just edited ledger/money.py")
    done = replay(hooks["stop"], payload("gemini-cli", "stop", root), root)
    assert "batched per merchant" in json.loads(done.stdout)["systemMessage"]
    silent(replay(hooks["session-end"], payload("gemini-cli", "session-end", root), root))
    assert session_log(root)["gem-5f1"]["ended_at"]


# -- the command itself ------------------------------------------------------------------------


def test_a_mistyped_hook_is_an_error_never_a_block() -> None:
    err = io.StringIO()
    assert hook_main(["claude-code", "nope"], stdin=io.BytesIO(b"{}"), stderr=err) == 1
    assert "usage: engram hook AGENT EVENT" in err.getvalue()
    done = run_cli("hook", "claude-code", "nope", stdin=b"{}")
    assert done.returncode == 1  # Claude Code blocks a tool call on 2 only
    assert run_cli("hook", "--help").returncode == 0


def test_hooks_can_be_turned_off(ledger: Engram) -> None:
    root = ledger.root
    data = payload("claude-code", "pre-edit-edit", root, session="")
    done = run_cli(
        "hook", "claude-code", "pre-edit", cwd=root, stdin=data, env={"ENGRAM_HOOKS": "off"}
    )
    silent(done)
    assert (
        b"Never divide" in run_cli("hook", "claude-code", "pre-edit", cwd=root, stdin=data).stdout
    )


def test_a_hook_imports_no_cli_framework_nor_other_adapter(ledger: Engram) -> None:
    data = payload("claude-code", "pre-edit-edit", ledger.root)
    code, out, loaded = modules_loaded(
        ["hook", "claude-code", "pre-edit"], cwd=ledger.root, stdin=data
    )
    assert code == 0 and b"Never divide" in out
    heavy = {"typer", "click", "rich", "mcp", "anyio", "asyncio", "pydantic", "fastapi"}
    assert [m for m in loaded if m.split(".")[0] in heavy] == []
    others = ("engram.cli", "engram.mcp_server", "engram.http_api", "engram.daemon", "engram.tui")
    assert [m for m in loaded if m.startswith(others)] == []


def test_payload_readers() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n"
        "*** Add File: c/d.md\n*** End Patch\n"
    )
    assert list(patch_files(patch)) == ["a.py", "b.py", "c/d.md"]
    assert files_of({"command": patch}) == ["a.py", "b.py", "c/d.md"]
    assert files_of({"command": "rm -rf build"}) == []  # a shell command names no edit
    assert files_of({"file_path": "/r/x.py", "content": '{"file_path": "/not/this"}'}) == [
        "/r/x.py"
    ]
    assert files_of({"notebook_path": "/r/n.ipynb"}) == ["/r/n.ipynb"]
    assert last_assistant_text(FIXTURES / "claude-code/transcript.jsonl").startswith("Fixed.")
    assert last_assistant_text(FIXTURES / "missing.jsonl") == ""


# -- answered by the store's daemon -------------------------------------------------------------


def hook(root: Path, data: bytes, **env: str) -> subprocess.CompletedProcess[bytes]:
    return run_cli("hook", "claude-code", "pre-edit", cwd=root, stdin=data, env=env)


def edit(root: Path) -> bytes:
    """An Edit payload without a session id: no ledger, so every call answers in full."""
    return payload("claude-code", "pre-edit-edit", root, session="")


@pytest.fixture
def daemons(ledger: Engram) -> Any:
    """Allow hooks to start daemons; stop whatever daemon of the store is left afterwards."""
    yield {"ENGRAM_DAEMON": "on", "ENGRAM_DAEMON_IDLE": "60"}
    for pid in daemons_of(ledger.root):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    assert wait_for(lambda: not daemons_of(ledger.root), 60)


def test_a_hook_starts_the_daemon_which_then_answers_it(ledger: Engram, daemons: Any) -> None:
    root = ledger.root
    data = edit(root)
    alone = hook(root, data)  # ENGRAM_DAEMON=off (the suite's default): in process
    first = hook(root, data, **daemons)  # no daemon yet: answered in process, one started
    assert first.stdout == alone.stdout and first.returncode == 0
    socket = rpc.socket_path(root / ".engram")
    assert wait_for(lambda: rpc.connectable(socket))
    with rpc.Client(socket) as client:
        before = client.call("daemon_status")["requests"]
        again = hook(root, data, **daemons)
        assert client.call("daemon_status")["requests"] == before + 2  # the hook, and this
    assert again.stdout == alone.stdout
    # The daemon sees what another process writes, as the in-process path does.
    done = run_cli(
        "remember",
        "Rates round at the edge",
        "--kind",
        "pitfall",
        "--files",
        "ledger/money.py",
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    assert b"Rates round at the edge" in hook(root, data, **daemons).stdout
    assert len(daemons_of(root)) == 1


def test_one_daemon_per_store_however_many_hooks_start_at_once(
    ledger: Engram, daemons: Any
) -> None:
    root = ledger.root
    data = edit(root)
    command = [sys.executable, "-m", "engram", "hook", "claude-code", "pre-edit"]
    racers = [
        subprocess.Popen(
            command,
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **daemons},
        )
        for _ in range(4)
    ]
    outs = [racer.communicate(data, timeout=60)[0] for racer in racers]
    assert all(b"Never divide amounts with /" in out for out in outs)
    assert wait_for(lambda: rpc.connectable(rpc.socket_path(root / ".engram")))
    time.sleep(1.0)  # the losers of the lock race have exited by now
    assert len(daemons_of(root)) == 1


def test_the_daemon_leaves_when_idle_and_when_its_store_is_gone(
    ledger: Engram, tmp_path: Path
) -> None:
    root = ledger.root
    data = edit(root)
    hook(root, data, ENGRAM_DAEMON="on", ENGRAM_DAEMON_IDLE="2")
    assert wait_for(lambda: daemons_of(root), 60)
    assert wait_for(lambda: not daemons_of(root), 90)  # idle for 2 s: gone
    assert not rpc.socket_path(root / ".engram").exists()

    other = tmp_path / "other"
    other.mkdir()
    assert run_cli("init", cwd=other).returncode == 0
    other_data = edit(other)
    hook(other, other_data, ENGRAM_DAEMON="on", ENGRAM_DAEMON_IDLE="600")
    assert wait_for(lambda: daemons_of(other), 60)
    # Once it serves (its index files written), the project is deleted under its daemon.
    assert wait_for(lambda: rpc.connectable(rpc.socket_path(other / ".engram")), 60)
    shutil.rmtree(other)
    assert wait_for(lambda: not daemons_of(other), 90)


def test_no_process_is_left_when_the_agent_dies(ledger: Engram) -> None:
    root = ledger.root
    data = edit(root)
    agent = subprocess.Popen(  # an agent: runs a hook, then is killed mid-session
        ["sh", "-c", f"{sys.executable} -m engram hook claude-code pre-edit; sleep 60"],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "ENGRAM_DAEMON": "on", "ENGRAM_DAEMON_IDLE": "3"},
        start_new_session=True,
    )
    assert agent.stdin is not None
    agent.stdin.write(data)
    agent.stdin.close()
    assert wait_for(lambda: daemons_of(root), 60)
    os.killpg(agent.pid, signal.SIGKILL)
    agent.wait(timeout=10)
    assert len(daemons_of(root)) == 1  # the one daemon of the store, in its own session
    assert wait_for(lambda: not daemons_of(root), 90)  # and it leaves once idle


def test_a_dead_daemons_socket_costs_nothing(ledger: Engram) -> None:
    root = ledger.root
    data = edit(root)
    socket = rpc.socket_path(root / ".engram")
    socket.parent.mkdir(parents=True, exist_ok=True)
    stale = pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM)
    stale.bind(os.fspath(socket))  # bound, never listening: a daemon that crashed
    stale.close()
    done = hook(root, data, ENGRAM_DAEMON="on", ENGRAM_DAEMON_IDLE="3")
    assert b"Never divide amounts with /" in done.stdout and done.returncode == 0
    assert wait_for(lambda: daemons_of(root), 60)  # a new daemon replaced the stale socket
    assert wait_for(lambda: not daemons_of(root), 90)


def test_the_hook_finds_the_daemon_socket_where_the_daemon_listens(tmp_path: Path) -> None:
    from engram.reach import find_store, socket_of

    short = tmp_path / "p"
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    for root in (short, deep):
        (root / ".engram").mkdir(parents=True)
        (root / "src").mkdir()
        assert socket_of(str(root)) == str(rpc.socket_path(root / ".engram"))
        assert find_store(str(root / "src")) == str(root.resolve())
    assert find_store(str(tmp_path)) is None


def test_a_daemon_that_accepts_but_never_answers_costs_a_bounded_wait(ledger: Engram) -> None:
    root = ledger.root
    data = edit(root)
    path = rpc.socket_path(root / ".engram")
    path.parent.mkdir(parents=True, exist_ok=True)
    with pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM) as hung:
        hung.bind(os.fspath(path))
        hung.listen(8)  # the kernel accepts; nobody reads or answers
        done = hook(root, data, ENGRAM_DAEMON="on", ENGRAM_DAEMON_IDLE="3")
    assert done.returncode == 0
    assert b"Never divide amounts with /" in done.stdout  # answered from the files
    assert wait_for(lambda: not daemons_of(root), 90)  # the daemon it started found the socket


def test_a_mistyped_idle_setting_still_starts_the_daemon(ledger: Engram, daemons: Any) -> None:
    root = ledger.root
    data = edit(root)
    done = hook(root, data, ENGRAM_DAEMON="on", ENGRAM_DAEMON_IDLE="soon")
    assert b"Never divide amounts with /" in done.stdout
    assert wait_for(lambda: rpc.connectable(rpc.socket_path(root / ".engram")))
    with rpc.Client(rpc.socket_path(root / ".engram")) as client:
        assert client.call("daemon_status")["idle"] == 900  # the default, not a failed start
