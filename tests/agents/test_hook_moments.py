"""The moments a hook puts memory in front of the model, each agent's hooks run as processes.

Every case runs ``engram hook AGENT EVENT`` as a real subprocess from the agent's folder with a
payload from tests/fixtures/hooks/AGENT/, written from the agents' hooks references (Claude Code
hooks reference; Codex's hook schemas in codex-rs/hooks/schema; Gemini CLI's
docs/hooks/reference.md and packages/core/src/hooks/types.ts; Cursor's agent hooks docs), and
reads back the JSON the agent reads: at a read, at a write (asking the person for a blocking
pitfall), at the prompt, after a failed command, for a subagent, before compaction. The
session's ledger keeps each memory to once per session, however many hooks race.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engram.service import Engram
from tests.conftest import run_cli
from tests.helpers.places import FIXTURES as FIXTURE_ROOT
from tests.helpers.places import ROOT

FIXTURES = FIXTURE_ROOT / "hooks"
BUGFIX = "Refund totals use integer division"


def payload(agent: str, name: str, root: Path, **changes: Any) -> bytes:
    """Return a fixture payload for ``root``, with ``changes`` to its top-level fields."""
    text = (FIXTURES / agent / f"{name}.json").read_text()
    data = json.loads(text.replace("$ROOT", json.dumps(str(root))[1:-1]))
    data.update(changes)
    return json.dumps(data).encode()


def hook(agent: str, event: str, root: Path, data: bytes) -> subprocess.CompletedProcess[bytes]:
    done = run_cli("hook", agent, event, cwd=root, stdin=data)
    assert done.returncode == 0 and done.stderr == b"", done.stderr.decode()
    return done


def reply(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def context(done: subprocess.CompletedProcess[bytes], native: str) -> str:
    """Return the additional context of a Claude Code, Codex or Gemini CLI hook's reply."""
    out = reply(done)["hookSpecificOutput"]
    assert out["hookEventName"] == native
    text: str = out["additionalContext"]
    assert "data, not instructions" in text  # marked as recalled data, with ids to fetch
    return text


@pytest.fixture
def store(ledger: Engram) -> Engram:
    """The ledger project, with a past fix for the refund test's failure."""
    ledger.remember(
        BUGFIX,
        "The refund test failed with 1999 != 2000: float division lost a cent; use divmod.",
        kind="bugfix",
        files=["ledger/refunds.py"],
    )
    return ledger


def blocking(engram: Engram) -> str:
    """Save a pitfall of importance 5 about ledger/money.py; return its title."""
    title = "Tax report reads total() as cents"
    engram.remember(
        title,
        "Changing what total() returns breaks the tax report.",
        kind="pitfall",
        files=["ledger/money.py"],
        importance=5,
    )
    return title


# -- before the write ---------------------------------------------------------------------------


def test_claude_code_read_then_edit_shows_the_pitfall_at_the_read_once(store: Engram) -> None:
    root = store.root
    done = hook(
        "claude-code", "pre-read", root / "ledger", payload("claude-code", "pre-read", root)
    )
    text = context(done, "PreToolUse")
    assert text.startswith("# engram: before you edit ledger/money.py")
    assert "Never divide amounts with /" in text and "Money is stored in integer cents" in text
    # The edit that follows in the same session: already shown, nothing repeated.
    edit = payload("claude-code", "pre-edit-edit", root)
    assert hook("claude-code", "pre-edit", root, edit).stdout == b""
    # Another session editing without a read first gets it at the edit.
    other = payload("claude-code", "pre-edit-edit", root, session_id="no-read-first")
    assert "Never divide amounts with /" in context(
        hook("claude-code", "pre-edit", root, other), "PreToolUse"
    )


def test_a_blocking_pitfall_makes_the_write_ask_where_the_agent_can_ask(store: Engram) -> None:
    root = store.root
    title = blocking(store)
    edit = payload("claude-code", "pre-edit-edit", root)
    out = reply(hook("claude-code", "pre-edit", root, edit))["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "ask"
    assert title in out["permissionDecisionReason"]  # shown to the person in the dialog
    assert title in out["additionalContext"]  # and to the model
    assert hook("claude-code", "pre-edit", root, edit).stdout == b""  # asked once a session

    cursor = reply(hook("cursor", "pre-edit", root, payload("cursor", "pre-edit", root)))
    assert cursor["permission"] == "ask" and title in cursor["user_message"]
    assert title in cursor["agent_message"]
    # Gemini CLI's headless runs cannot answer an ask (it would wait forever), Codex and
    # OpenCode have none: the write is denied once with the pitfall as the reason the model
    # reads, and the retry goes through.
    write = payload("gemini-cli", "pre-edit-write", root)
    gemini = reply(hook("gemini-cli", "pre-edit", root, write))
    assert gemini["decision"] == "deny" and title in gemini["reason"]
    assert "Never divide amounts with /" in gemini["reason"]  # the file's other findings too
    assert hook("gemini-cli", "pre-edit", root, write).stdout == b""
    patch = payload("codex", "pre-edit-apply-patch", root)
    codex = reply(hook("codex", "pre-edit", root / "ledger", patch))["hookSpecificOutput"]
    assert (codex["hookEventName"], codex["permissionDecision"]) == ("PreToolUse", "deny")
    assert title in codex["permissionDecisionReason"]
    assert b"deny" not in hook("codex", "pre-edit", root / "ledger", patch).stdout
    opencode = json.dumps(
        {
            "hook_event_name": "tool.execute.before",
            "cwd": str(root),
            "session_id": "ses_opencode",
            "tool_name": "edit",
            "tool_input": {"filePath": str(root / "ledger" / "money.py")},
        }
    ).encode()
    stop = reply(hook("opencode", "pre-edit", root, opencode))["hookSpecificOutput"]
    assert stop["permissionDecision"] == "deny" and title in stop["permissionDecisionReason"]
    assert hook("opencode", "pre-edit", root, opencode).stdout == b""  # once a session


def test_a_write_not_read_first_is_denied_once_where_its_context_would_follow_it(
    store: Engram,
) -> None:
    """Codex and OpenCode show a pre-edit hook's context after the write: without a blocking
    pitfall, the first write of a file whose memories were not shown is denied once with them;
    a file read first (its memories shown) is not held, nor is a session without an id."""
    root = store.root
    patch = payload("codex", "pre-edit-apply-patch", root, session_id="unread")
    first = reply(hook("codex", "pre-edit", root / "ledger", patch))["hookSpecificOutput"]
    assert first["permissionDecision"] == "deny"
    assert "Never divide amounts with /" in first["permissionDecisionReason"]
    assert "make the edit again" in first["permissionDecisionReason"]
    assert hook("codex", "pre-edit", root / "ledger", patch).stdout == b""
    read = payload("codex", "pre-shell-read", root, session_id="read-first")
    assert "Never divide amounts with /" in context(
        hook("codex", "pre-shell", root, read), "PreToolUse"
    )
    after_read = payload("codex", "pre-edit-apply-patch", root, session_id="read-first")
    held = reply(hook("codex", "pre-edit", root / "ledger", after_read))["hookSpecificOutput"]
    assert held["permissionDecision"] == "deny"  # the patch's other file was not shown yet
    assert "Old rates are frozen" in held["permissionDecisionReason"]
    assert "Never divide" not in held["permissionDecisionReason"]  # money.py was, at the read
    read_only = payload("codex", "pre-shell-read", root, session_id="read-only")
    hook("codex", "pre-shell", root, read_only)
    edit = json.dumps(
        {
            "hook_event_name": "PreToolUse",
            "cwd": str(root),
            "session_id": "read-only",
            "tool_name": "Edit",
            "tool_input": {"file_path": str(root / "ledger" / "money.py")},
        }
    ).encode()
    assert hook("codex", "pre-edit", root, edit).stdout == b""  # read first: not held
    nameless = json.loads(payload("codex", "pre-edit-apply-patch", root))
    nameless.pop("session_id", None)
    loose = hook("codex", "pre-edit", root / "ledger", json.dumps(nameless).encode())
    assert b"deny" not in loose.stdout and b"Never divide" in loose.stdout


def test_racing_hooks_of_one_session_show_a_file_once(store: Engram) -> None:
    root = store.root
    data = payload("claude-code", "pre-read", root, session_id="racing")
    command = [sys.executable, "-m", "engram", "hook", "claude-code", "pre-read"]
    racers = [
        subprocess.Popen(command, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for _ in range(4)
    ]
    outs = [racer.communicate(data, timeout=120)[0] for racer in racers]
    assert sorted(bool(out) for out in outs) == [False, False, False, True]
    assert b"Never divide amounts with /" in b"".join(outs)


def test_codex_shell_patches_and_reads_are_matched(store: Engram) -> None:
    root = store.root
    patch = hook("codex", "pre-shell", root / "ledger", payload("codex", "pre-shell-patch", root))
    reason = reply(patch)["hookSpecificOutput"]["permissionDecisionReason"]  # denied once
    assert "Never divide amounts with /" in reason
    read = payload("codex", "pre-shell-read", root, session_id="reader")
    assert "Never divide amounts with /" in context(
        hook("codex", "pre-shell", root, read), "PreToolUse"
    )
    assert hook("codex", "pre-shell", root, payload("codex", "pre-shell-other", root)).stdout == b""


def test_gemini_cli_appends_the_findings_to_the_read_and_asks_nothing_without_a_blocker(
    store: Engram,
) -> None:
    root = store.root
    done = hook("gemini-cli", "post-read", root, payload("gemini-cli", "post-read", root))
    assert "Never divide amounts with /" in context(done, "AfterTool")
    write = payload("gemini-cli", "pre-edit-write", root)
    assert hook("gemini-cli", "pre-edit", root, write).stdout == b""  # BeforeTool: no context


def test_cursor_hooks(store: Engram) -> None:
    root = store.root
    start = reply(hook("cursor", "session-start", root, payload("cursor", "session-start", root)))
    assert "Never divide amounts with /" in start["additional_context"]
    read = reply(hook("cursor", "post-read", root, payload("cursor", "post-read", root)))
    assert read["additional_context"].startswith("# engram: before you edit ledger/money.py")
    stop = reply(hook("cursor", "stop", root, payload("cursor", "stop", root)))
    assert "refund exports are grouped by merchant" in stop["systemMessage"]


def test_the_reply_names_the_event_of_the_payload_it_answers(store: Engram) -> None:
    root = store.root
    data = payload("claude-code", "pre-read", root, hook_event_name="PostToolUse")
    assert "Never divide" in context(hook("claude-code", "pre-read", root, data), "PostToolUse")


# -- at the prompt, after a failure, for a subagent, at compaction ------------------------------


def test_a_related_prompt_gets_its_memory_and_an_unrelated_one_nothing(store: Engram) -> None:
    root = store.root
    related = payload("claude-code", "prompt", root)
    text = context(hook("claude-code", "prompt", root, related), "UserPromptSubmit")
    assert "Never divide amounts with /" in text
    assert len(text) <= 1600  # packed small: a few hundred tokens
    unrelated = payload("claude-code", "prompt-unrelated", root)
    assert hook("claude-code", "prompt", root, unrelated).stdout == b""
    # Shown once a session: the same question again adds nothing.
    assert hook("claude-code", "prompt", root, related).stdout == b""
    codex = hook("codex", "prompt", root, payload("codex", "prompt", root))
    assert "Never divide amounts with /" in context(codex, "UserPromptSubmit")
    gemini = hook("gemini-cli", "prompt", root, payload("gemini-cli", "prompt", root))
    assert "Never divide amounts with /" in context(gemini, "BeforeAgent")


def test_a_prompt_naming_a_file_brings_its_pitfalls_once(store: Engram) -> None:
    root = store.root
    data = payload("claude-code", "prompt", root, prompt="Please tidy ledger/money.py today")
    text = context(hook("claude-code", "prompt", root, data), "UserPromptSubmit")
    assert "Never divide amounts with /" in text and "about ledger/money.py" in text
    read = payload("claude-code", "pre-read", root)
    assert hook("claude-code", "pre-read", root, read).stdout == b""  # already shown


def test_a_failed_command_recalls_past_fixes(store: Engram) -> None:
    root = store.root
    claude = hook("claude-code", "tool-failure", root, payload("claude-code", "tool-failure", root))
    assert BUGFIX in context(claude, "PostToolUseFailure")
    codex = hook("codex", "post-shell", root, payload("codex", "post-shell-failed", root))
    assert BUGFIX in context(codex, "PostToolUse")
    assert (
        hook("codex", "post-shell", root, payload("codex", "post-shell-passed", root)).stdout == b""
    )
    gemini = hook("gemini-cli", "tool-failure", root, payload("gemini-cli", "tool-failure", root))
    assert BUGFIX in context(gemini, "AfterTool")


def rollout_line(call: str, code: int) -> str:
    """Return the line a Codex 0.171 rollout records for a finished command (its shape)."""
    item = {
        "type": "CommandExecution",
        "id": call,
        "command": ["/bin/bash", "-lc", "pytest -q"],
        "status": "failed" if code else "completed",
        "aggregated_output": "...",
        "exit_code": code,
    }
    event = {"type": "item_completed", "thread_id": "t", "turn_id": "u", "item": item}
    return json.dumps(
        {"timestamp": "2026-12-07T03:34:47.705Z", "type": "event_msg", "payload": event}
    )


def test_a_failed_codex_0171_command_is_told_by_its_rollouts_exit_code(store: Engram) -> None:
    """Codex 0.171's PostToolUse gives the command's output alone (no exit code): the code is
    the one its rollout recorded for the payload's ``tool_use_id``."""
    root = store.root
    rollout = root / ".codex-rollout.jsonl"
    data = payload("codex", "post-shell-failed-0171", root)
    assert hook("codex", "post-shell", root, data).stdout == b""  # no rollout: nothing known
    rollout.write_text(rollout_line("call_0000", 1) + "\n" + rollout_line("call_0001", 0) + "\n")
    assert hook("codex", "post-shell", root, data).stdout == b""  # this command passed
    rollout.write_text(rollout_line("call_0000", 0) + "\n" + rollout_line("call_0001", 1) + "\n")
    assert BUGFIX in context(hook("codex", "post-shell", root, data), "PostToolUse")


def test_opencode_failed_bash_recalls_past_fixes(store: Engram) -> None:
    """The plugin's tool.execute.after on bash passes the exit code from the tool's metadata."""
    root = store.root
    failed = {
        "hook_event_name": "tool.execute.after",
        "cwd": str(root),
        "session_id": "ses_fail",
        "tool_name": "bash",
        "tool_input": {"command": "pytest -q", "description": "run the tests"},
        "tool_response": {
            "output": "E   AssertionError: refund total 1999 != 2000 after float division\n",
            "exit_code": 1,
        },
    }
    done = hook("opencode", "tool-failure", root, json.dumps(failed).encode())
    assert BUGFIX in context(done, "tool.execute.after")
    passed = {**failed, "session_id": "ses_pass", "tool_response": {"output": "ok", "exit_code": 0}}
    assert hook("opencode", "tool-failure", root, json.dumps(passed).encode()).stdout == b""


def test_opencode_plugin_runs_the_failure_hook_after_bash(tmp_path: Path) -> None:
    from engram.agents.opencode import plugin_text

    text = plugin_text(["engram"], "engram is missing")
    hooks = json.loads(text.split("const HOOKS = ", 1)[1].split(";\n", 1)[0])
    assert {
        "event": "tool-failure",
        "native": "tool.execute.after",
        "matcher": "bash",
        "timeout": 10,
    } in hooks
    assert "meta.exit" in text and "tool_response: response" in text


def test_gemini_prompt_without_its_hook_context(store: Engram) -> None:
    """Gemini CLI 0.61 puts the session-start context ahead of the person's words in the
    BeforeAgent prompt: the recall is for the person's words only."""
    root = store.root
    briefing = (
        "<hook_context>\n# engram: project memory\nNever divide amounts with /\n</hook_context>"
    )
    unrelated = payload(
        "gemini-cli", "prompt", root, prompt=f"{briefing}\n\nWrite a haiku about autumn leaves"
    )
    assert hook("gemini-cli", "prompt", root, unrelated).stdout == b""
    related = payload(
        "gemini-cli",
        "prompt",
        root,
        session_id="gem-2",
        prompt=f"{briefing}\n\nWhy do refunds lose a cent when we divide amounts?",
    )
    assert "Never divide amounts with /" in context(
        hook("gemini-cli", "prompt", root, related), "BeforeAgent"
    )


def test_a_subagent_starts_with_the_memories_of_its_tasks_files(store: Engram) -> None:
    root = store.root
    assert (
        hook("claude-code", "pre-task", root, payload("claude-code", "pre-task", root)).stdout
        == b""
    )
    done = hook(
        "claude-code", "subagent-start", root, payload("claude-code", "subagent-start", root)
    )
    text = context(done, "SubagentStart")
    assert "Never divide amounts with /" in text and "about ledger/money.py" in text
    # The task was taken: a second subagent of the type gets nothing of it.
    again = payload("claude-code", "subagent-start", root, agent_id="b8e4")
    assert hook("claude-code", "subagent-start", root, again).stdout == b""


def test_compaction_captures_and_the_next_briefing_starts_the_ledger_afresh(store: Engram) -> None:
    root = store.root
    read = payload("claude-code", "pre-read", root)
    assert hook("claude-code", "pre-read", root, read).stdout
    assert hook("claude-code", "pre-read", root, read).stdout == b""
    shutil.copy(FIXTURES / "claude-code" / "transcript.jsonl", root / ".transcript.jsonl")
    done = hook("claude-code", "pre-compact", root, payload("claude-code", "pre-compact", root))
    assert reply(done)["systemMessage"].startswith("engram proposed 1 memory for review")
    compact = payload("claude-code", "session-start-compact", root)
    assert "Never divide" in context(
        hook("claude-code", "session-start", root, compact), "SessionStart"
    )
    assert "Never divide" in context(hook("claude-code", "pre-read", root, read), "PreToolUse")


# -- staleness ------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_sessions_own_edit_makes_nothing_stale_and_a_stale_note_is_said_once(
    project: Engram,
) -> None:
    root = project.root
    (root / "ledger").mkdir()
    money = root / "ledger" / "money.py"
    money.write_text("def total(x):\n    return x // 100\n")
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@e", "-C", str(root)]
    subprocess.run([*git, "add", "ledger/money.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "money"], check=True)
    project.remember(
        "Never divide amounts with /", "Cents.", kind="pitfall", files=["ledger/money.py"]
    )
    money.write_text("def total(x):\n    return divmod(x, 100)[0]\n")  # uncommitted
    edit = payload("claude-code", "pre-edit-edit", root, session_id="editor")
    mine = context(hook("claude-code", "pre-edit", root, edit), "PreToolUse")
    assert "Never divide" in mine and "may be stale" not in mine  # the session's own edit
    other = payload("claude-code", "pre-read", root, session_id="someone-else")
    theirs = context(hook("claude-code", "pre-read", root, other), "PreToolUse")
    assert theirs.count("may be stale") == 1 and "uncommitted changes" in theirs


def test_the_readme_hooks_table_names_every_hook_and_the_help_every_event() -> None:
    from engram.agents.hookspec import HOOKS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Hooks", 1)[1].split("\n\n**Once per session.**", 1)[0]
    columns = {"claude-code": 1, "codex": 2, "gemini-cli": 3, "cursor": 4, "opencode": 5}
    rows = {
        cells[0].strip(" `"): cells
        for line in table.splitlines()
        if line.startswith("| `")
        for cells in [line.strip("|").split("|")]
    }
    for spec in HOOKS:
        cell = rows[spec.event][columns[spec.agent]]
        assert f"`{spec.native}`" in cell, (spec, cell)
        for tool in (spec.matcher or "").split("|"):
            if spec.matcher and spec.native not in ("SessionStart",):
                assert f"`{tool}`" in cell or "same tools" in cell or "shell tools" in cell, (
                    spec,
                    tool,
                )
    helped = "".join(run_cli("hook", "--help").stdout.decode().split())  # unwrapped
    for spec in HOOKS:
        assert spec.event in helped and spec.agent in helped


# -- the readers and the ledger, directly ---------------------------------------------------------


def test_payload_readers_for_shell_commands_failures_and_cursor(tmp_path: Path) -> None:
    from engram.agents.payload import cwd_of, error_query, event_of, failure_text, shell_files

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n")
    assert shell_files("sed -n '1,80p' src/a.py && cat missing.py", str(tmp_path)) == (
        ["src/a.py"],
        "read",
    )
    assert shell_files("nl -ba src/a.py | head -n 40", str(tmp_path)) == (["src/a.py"], "read")
    assert shell_files("python src/a.py; rm -rf build", str(tmp_path)) == ([], "")
    assert shell_files("cat 'unclosed", str(tmp_path)) == ([], "")
    patch = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: b.py\n+y\n*** End Patch\nEOF"
    assert shell_files(patch, str(tmp_path)) == (["b.py"], "patch")
    listed = {"tool_name": "shell", "tool_input": {"command": ["bash", "-lc", "cat src/a.py"]}}
    event = event_of(listed, fallback_cwd=str(tmp_path))
    assert (event.files, event.shell) == (("src/a.py",), "read")

    assert failure_text({"tool_response": "Exit code: 0\nOutput:\nok"}) == ""
    assert failure_text({"tool_response": {"exit_code": 2, "output": "boom: fatal error"}}) == (
        "boom: fatal error"
    )
    assert failure_text({"tool_response": {"error": {"message": "ENOENT: no such file"}}}) == (
        "ENOENT: no such file"
    )
    assert failure_text({"tool_response": {"llmContent": "Output: fine\nExit Code: 0"}}) == ""
    long = "\n".join(f"line {n}" for n in range(500)) + "\nValueError: bad cents"
    assert error_query(long) == "ValueError: bad cents"

    cursor = {"conversation_id": "c1", "workspace_roots": [str(tmp_path)], "text": "hi"}
    assert cwd_of(cursor, fallback_cwd="/") == str(tmp_path)
    event = event_of({**cursor, "hook_event_name": "afterAgentResponse"}, fallback_cwd="/")
    assert (event.session_id, event.message) == ("c1", "hi")


def test_the_ledger_claims_once_resets_and_hands_tasks_out_in_order(tmp_path: Path) -> None:
    import os
    import time

    from engram.store.ledger import HookLedger, prune

    ledger = HookLedger(tmp_path, "session-1")
    assert ledger.claim("files", ["a.py", "b.py", "a.py"]) == ["a.py", "b.py"]
    assert ledger.claim("files", ["b.py", "c.py"]) == ["c.py"]
    ledger.record("edited", ["a.py"])
    ledger.reset()
    state = ledger.state()
    assert state.files == set() and state.edited == {"a.py"}  # own edits outlive compaction
    assert HookLedger(tmp_path, "session-2").claim("files", ["a.py"]) == ["a.py"]
    with pytest.raises(ValueError, match="unknown ledger kind"):
        ledger.claim("nope", ["x"])

    ledger.add_task("Explore", "look at a.py")
    ledger.add_task("general-purpose", "fix b.py")
    taken = ledger.take_task("general-purpose")
    assert taken is not None and taken["text"] == "fix b.py"
    other = ledger.take_task("Plan")  # no task of that type: the oldest one left
    assert other is not None and other["text"] == "look at a.py"
    assert ledger.take_task("Plan") is None

    with ledger.path.open("ab") as handle:
        handle.write(b'{"type": "files", "items": ["torn')  # a torn last line is skipped
    assert ledger.claim("files", ["d.py"]) == ["d.py"]  # the next entry still reads
    assert ledger.state().files == {"d.py"}
    old = time.time() - 8 * 86400
    os.utime(ledger.path, (old, old))
    assert prune(tmp_path) == 1 and not ledger.path.exists()
    assert HookLedger(tmp_path, "session-2").path.exists()


def test_the_daemon_and_a_hook_process_share_the_sessions_ledger(store: Engram) -> None:
    import contextlib
    import os
    import signal

    from engram.daemon import protocol as rpc
    from tests.helpers.processes import daemons_of, wait_for

    root = store.root
    on = {"ENGRAM_DAEMON": "on", "ENGRAM_DAEMON_IDLE": "60"}
    try:
        first = payload("claude-code", "pre-read", root, session_id="warm-up")
        run_cli("hook", "claude-code", "pre-read", cwd=root, stdin=first, env=on)  # starts one
        assert wait_for(lambda: rpc.connectable(rpc.socket_path(root / ".engram")), 60)
        data = payload("claude-code", "pre-read", root, session_id="shared")
        with rpc.Client(rpc.socket_path(root / ".engram")) as client:
            before = client.call("daemon_status")["requests"]
            by_daemon = run_cli("hook", "claude-code", "pre-read", cwd=root, stdin=data, env=on)
            assert client.call("daemon_status")["requests"] == before + 2  # the hook, and this
        assert "Never divide amounts with /" in context(by_daemon, "PreToolUse")
        assert hook("claude-code", "pre-read", root, data).stdout == b""  # in process: seen
    finally:
        for pid in daemons_of(root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        assert wait_for(lambda: not daemons_of(root), 60)
