"""Offline capture from an agent's own transcript, the review inbox, and the nudge (issue 32).

The transcripts are the labelled set's (benchmarks/capture/transcripts: each scripted session in
Claude Code's, Codex's, Gemini CLI's and OpenCode's format) and small ones written here; the stores
are real, in git repositories under tmp_path; the CLI, the hooks and the MCP server run as real
processes.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest

from engram.agents import inbox
from engram.agents.payload import Event
from engram.agents.proposals import propose
from engram.agents.transcript import parse_transcript, read_transcript
from engram.errors import InvalidInput
from engram.service import Engram
from tests.conftest import run_cli
from tests.helpers.places import FIXTURES

SET = Path(__file__).resolve().parents[2] / "benchmarks" / "capture" / "transcripts"
AGENTS = ("claude-code", "codex", "gemini-cli", "opencode")
CWD = "/home/dev/work/app"  # where the scripted sessions ran


def claude_line(kind: str, content: Any, **more: Any) -> str:
    role = "assistant" if kind == "assistant" else "user"
    entry = {
        "type": kind,
        "sessionId": "s-1",
        "cwd": CWD,
        "message": {"role": role, "content": content},
    }
    return json.dumps({**entry, **more})


def bash(call: str, command: str) -> str:
    block = {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": command}}
    return claude_line("assistant", [block])


def result(call: str, text: str, error: bool = False) -> str:
    block = {"type": "tool_result", "tool_use_id": call, "content": text, "is_error": error}
    return claude_line("user", [block])


def edit(call: str, path: str, old: str, new: str) -> str:
    block = {
        "type": "tool_use",
        "id": call,
        "name": "Edit",
        "input": {"file_path": f"{CWD}/{path}", "old_string": old, "new_string": new},
    }
    return claude_line("assistant", [block])


@pytest.mark.parametrize("agent", AGENTS)
def test_each_agents_format_reads_into_the_same_steps(agent: str) -> None:
    transcript = read_transcript(SET / agent / "mixed-bugfix-and-correction.jsonl")
    assert transcript.agent == agent and transcript.session_id and not transcript.notes
    kinds = [step.kind for step in transcript.steps]
    assert kinds == ["user", "run", "edit", "say", "user", "edit", "run", "say"]
    failed, passed = transcript.steps[1], transcript.steps[6]
    assert (failed.code, passed.code) == (1, 0)
    assert failed.text == passed.text == "python -m pytest -q tests/test_price.py"
    assert "InvalidOperation" in failed.output
    assert transcript.steps[2].path.endswith("src/price.py")
    assert "except Exception" in transcript.steps[5].old


@pytest.mark.parametrize("agent", AGENTS)
def test_the_rules_propose_what_happened(agent: str) -> None:
    def kinds(name: str) -> list[tuple[str, list[str]]]:
        transcript = read_transcript(SET / agent / f"{name}.jsonl")
        return [(p.kind, p.files) for p in propose(transcript, CWD)]

    assert kinds("bugfix-config-timeout") == [
        ("bugfix", ["config/config.go", "config/defaults.go"])
    ]
    # The fix that only undid an edit is the edit's pitfall, not a bugfix.
    assert kinds("revert-loader-cache") == [("pitfall", ["src/loader.py"])]
    assert kinds("correction-print-logging") == [("preference", ["src/sync.py"])]
    assert kinds("lesson-csv-bom") == [("discovery", [])]
    # A rerun that passes with no edit, a package installed, "no, that's all": nothing.
    for quiet in ("quiet-flaky-rerun", "quiet-missing-module", "quiet-lint-missing"):
        assert kinds(quiet) == [], quiet


def test_a_bugfix_names_the_error_the_files_and_what_changed() -> None:
    transcript = read_transcript(SET / "codex" / "bugfix-isoformat.jsonl")
    (fix,) = propose(transcript, CWD)
    assert fix.title.startswith("Fix: ValueError: Invalid isoformat string")
    assert "`python -m pytest -q tests/test_dates.py` failed with" in fix.content
    assert '+ return datetime.fromisoformat(text.replace("Z", "+00:00"))' in fix.content
    assert fix.line == 5  # the failed run's line in the rollout


def test_bad_lines_are_skipped_and_named_and_nothing_else_is_lost() -> None:
    lines = [
        claude_line("user", "make the tests pass"),
        "{not json",
        bash("t1", "pytest -q"),
        json.dumps([1, 2]),
        result("t1", "Exit code 1\nE   KeyError: 'rate'", error=True),
        edit("t2", "rates.py", "rates[name]", "rates.get(name, 0)"),
        bash("t3", "pytest -q"),
        result("t3", "5 passed"),
    ]
    transcript = parse_transcript("\n".join(lines), path="t.jsonl")
    assert transcript.notes == ["t.jsonl: 2 unreadable line(s) skipped: 2, 4"]
    (fix,) = propose(transcript, CWD)
    assert fix.kind == "bugfix" and fix.files == ["rates.py"] and "KeyError" in fix.title


def test_lines_and_tool_outputs_nested_too_deep_are_skipped_not_a_crash() -> None:
    """A transcript is untrusted: JSON nested past the limits is a bad line, never a crash."""
    deep = "[" * 5000 + "]" * 5000
    lines = [
        claude_line("user", "make the tests pass"),
        '{"type": "user", "x": ' + deep + "}",  # the line itself
        bash("t1", "pytest -q"),
        result("t1", "{" + '"output": ' + deep + "}", error=True),  # a tool's output
        bash("t2", "pytest -q"),
        result("t2", "5 passed"),
    ]
    transcript = parse_transcript("\n".join(lines), path="t.jsonl")
    assert transcript.notes == ["t.jsonl: 1 unreadable line(s) skipped: 2"]
    assert propose(transcript, CWD) == []  # the deep output is text, not a failure to learn from


def test_a_long_transcript_is_read_from_its_tail_and_a_pipe_is_refused(tmp_path: Path) -> None:
    from engram.agents import transcript as module

    path = tmp_path / "long.jsonl"
    filler = claude_line("user", "x" * 1000) + "\n"
    path.write_text(filler * (module.MAX_BYTES // len(filler) + 50) + bash("t", "ls") + "\n")
    read = read_transcript(path)
    assert read.notes and "only the last" in read.notes[0]
    assert read.steps[-1].text == "ls"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match=r"not a regular file|cannot be read"):
        read_transcript(fifo)  # refused at once, never waiting for a writer


def test_proposals_are_saved_proposed_with_provenance_once_and_rejections_stay(
    project: Engram,
) -> None:
    path = str(SET / "codex" / "mixed-bugfix-and-correction.jsonl")
    first = inbox.capture_transcript(project.here, path, cwd=CWD)
    assert [item.kind for item in first.proposed] == ["bugfix", "preference"]
    fix = project.get(first.proposed[0].id)
    assert (fix["status"], fix["source"], fix["files"]) == (
        "proposed",
        "capture:codex",
        ["src/price.py"],
    )
    assert fix["capture"]["agent"] == "codex" and fix["capture"]["line"] == 5
    assert fix["capture"]["session"] == read_transcript(path).session_id

    again = inbox.capture_transcript(project.here, path, cwd=CWD)
    assert not again.proposed and len(again.known) == 2  # a later stop reads it all again

    project.review("reject", [first.proposed[1].id])
    assert not inbox.capture_transcript(project.here, path, cwd=CWD).proposed
    assert project.get(first.proposed[1].id)["status"] == "rejected"
    # The same session in another agent's format is recognised too (same command and error).
    other = inbox.capture_transcript(
        project.here, str(SET / "claude-code" / "mixed-bugfix-and-correction.jsonl"), cwd=CWD
    )
    assert not other.proposed


def test_secrets_in_a_transcript_are_scrubbed_before_they_are_stored(project: Engram) -> None:
    key = "sk-ant-api03-" + "Q" * 80
    lines = [
        claude_line("user", "deploy is broken"),
        bash("t1", "make deploy"),
        result("t1", f"Exit code 2\nError: 401 Unauthorized with key {key}", error=True),
        edit("t2", "deploy.sh", "curl $URL", "curl -H @auth $URL"),
        bash("t3", "make deploy"),
        result("t3", "deployed"),
    ]
    path = project.root / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (item,) = inbox.capture_transcript(project.here, str(path)).proposed
    stored = project.project_ws.store.path.read_text()
    assert key not in stored and "Unauthorized" in stored
    assert project.get(item.id)["files"] == ["deploy.sh"]


def test_review_from_the_command_line(project: Engram) -> None:
    root = project.root
    for name in ("bugfix-isoformat", "revert-loader-cache", "correction-never-main"):
        inbox.capture_transcript(project.here, str(SET / "gemini-cli" / f"{name}.jsonl"), cwd=CWD)
    done = run_cli("review", "--json", cwd=root)
    assert done.returncode == 0, done.stderr.decode()
    listed = json.loads(done.stdout)
    assert [item["kind"] for item in listed["items"]] == ["bugfix", "pitfall", "preference"]
    assert all(item["label"] == "proposed, not reviewed" for item in listed["items"])
    fix, pitfall, preference = (item["id"] for item in listed["items"])

    text = run_cli("review", cwd=root).stdout.decode()
    assert "(proposed, not reviewed)" in text and "3 waiting" in text

    done = run_cli("review", "accept", fix[:10], "--title", "fromisoformat and Z", cwd=root)
    assert done.returncode == 0, done.stderr.decode()
    assert "accepted" in done.stdout.decode() and "2 still waiting" in done.stdout.decode()
    accepted = project.get(fix)
    assert (accepted["status"], accepted["title"]) == ("active", "fromisoformat and Z")
    assert accepted["reviewed"]["at"]

    target = project.remember("Deploys go through pull requests", kind="decision").record
    done = run_cli("review", "merge", preference, "--into", target["id"], cwd=root)
    assert done.returncode == 0, done.stderr.decode()
    assert project.get(preference)["status"] == "superseded"
    assert "push straight to main" in project.get(target["id"])["content"]

    refused = run_cli("review", "accept", fix, cwd=root)  # no longer proposed
    assert refused.returncode != 0 and "not proposed" in refused.stderr.decode()
    done = run_cli("review", "reject", "--all", cwd=root)
    assert done.returncode == 0 and project.get(pitfall)["status"] == "rejected"
    assert json.loads(run_cli("review", "--json", cwd=root).stdout)["items"] == []


def test_the_mcp_review_tool_over_stdio(project: Engram) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    inbox.capture_transcript(
        project.here, str(SET / "claude-code" / "revert-makefile-xdist.jsonl"), cwd=CWD
    )
    env = {k: v for k, v in os.environ.items() if k.startswith("ENGRAM_") or k == "PYTHONPATH"}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engram", "-C", str(project.root), "mcp"], env=env
    )

    async def scenario() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = await session.call_tool("review", {})
            data = json.loads(listed.content[0].text)
            (item,) = data["items"]
            assert item["label"] == "proposed, not reviewed" and item["files"] == ["Makefile"]
            done = await session.call_tool("review", {"action": "accept", "ids": [item["id"]]})
            assert not done.is_error and json.loads(done.content[0].text)["left"] == 0
            bad = await session.call_tool("review", {"action": "accept"})
            assert bad.is_error and "name the proposed memories" in bad.content[0].text

    anyio.run(scenario)
    assert project.recall("xdist", limit=1)[0].record["status"] == "active"


def test_the_stop_hook_finds_a_codex_rollout_by_its_session(
    project: Engram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = SET / "codex" / "bugfix-cart-undefined.jsonl"
    sid = read_transcript(source).session_id
    day = tmp_path / "codex-home" / "sessions" / "2026" / "11" / "02"
    day.mkdir(parents=True)
    (day / f"rollout-2026-11-02T09-00-00-{sid}.jsonl").write_bytes(source.read_bytes())
    payload = {
        "session_id": sid,
        "transcript_path": None,
        "cwd": str(project.root),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": "All 12 tests pass.",
    }
    done = run_cli(
        "hook",
        "codex",
        "stop",
        cwd=project.root,
        stdin=json.dumps(payload).encode(),
        env={"CODEX_HOME": str(tmp_path / "codex-home")},
    )
    # The hook ran from the repository; the rollout's cwd is elsewhere, so paths come relative
    # to the rollout's own folder.
    assert done.returncode == 0, done.stderr.decode()
    notice = json.loads(done.stdout)["systemMessage"]
    assert notice.startswith("engram proposed 1 memory for review (engram review): Fix: TypeError")
    (hit,) = project.recall("Cannot read properties of undefined", limit=1)
    assert (hit.record["status"], hit.record["files"]) == ("proposed", ["src/cart.js"])


def test_a_polish_command_from_the_persons_settings_rewrites_proposals(
    project: Engram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "polish.py"
    script.write_text(
        "import json, sys\nd = json.load(sys.stdin)\n"
        "print(json.dumps({'title': 'Polished: ' + d['kind'], 'content': d['content']}))\n"
    )
    # A committed config naming a command is ignored: it never runs.
    (project.root / ".engram" / "config.yaml").write_text(
        "capture:\n  polish_command: touch /nonexistent/pwned\n", encoding="utf-8"
    )
    path = str(SET / "codex" / "lesson-csv-bom.jsonl")
    plain = Engram(project.root)
    with plain:
        (item,) = inbox.capture_transcript(plain.here, path, cwd=CWD).proposed
        assert item.title.startswith("Excel reads a CSV")
        plain.forget(item.id, hard=True)
    monkeypatch.setenv("ENGRAM_CAPTURE_POLISH", f"{sys.executable} {script}")
    with Engram(project.root) as polished:
        captured = inbox.capture_transcript(
            polished.here, str(SET / "codex" / "bugfix-isoformat.jsonl"), cwd=CWD
        )
        assert [item.title for item in captured.proposed] == ["Polished: bugfix"]


def test_the_nudge_comes_once_per_window_and_never_after_a_save(project: Engram) -> None:
    lines = [claude_line("user", "refactor the report module")]
    lines += [edit(f"t{n}", f"report{n}.py", "a", "b") for n in range(6)]
    path = project.root / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    few = project.root / "few.jsonl"
    few.write_text("\n".join(lines[:3]) + "\n")
    assert inbox.nudge(project.here, str(few), "s-few") == ""  # two edits: not yet
    assert inbox.nudge(project.here, str(path), "s-1") == inbox.NUDGE
    assert inbox.nudge(project.here, str(path), "s-1") == ""  # once per window
    project.remember("Report totals are cents", session_id="s-2")
    assert inbox.nudge(project.here, str(path), "s-2") == ""  # this session saved something


def test_a_stop_without_a_transcript_still_proposes_the_last_answers_lessons(
    project: Engram,
) -> None:
    event = Event(
        str(project.root),
        session_id="s-9",
        message="Done.\n\n## Key Learnings\n- The nightly export must run after the ledger "
        "close, or it reads half a day.",
    )
    notice = inbox.capture_hook(project.here, "gemini-cli", event)
    assert notice.startswith("engram proposed 1 memory for review")
    (hit,) = project.recall("nightly export ledger close", limit=1)
    assert (hit.record["kind"], hit.record["status"]) == ("discovery", "proposed")
    assert inbox.capture_hook(project.here, "gemini-cli", event) == ""  # known now


def test_go_engrams_mem_review_lists_and_accepts_proposals(project: Engram) -> None:
    from engram.mcp_server import EngramMCP

    inbox.capture_transcript(
        project.here, str(SET / "codex" / "correction-no-db-mocks.jsonl"), cwd=CWD
    )
    (proposal,) = project.review().items
    with EngramMCP(project.root, compat=("go-engram",)) as core:
        listed, is_error = core.call("mem_review", {"action": "list"})
        assert not is_error and "proposed, not reviewed" in listed
        assert "Don't mock the database in tests" in listed
        done, is_error = core.call("mem_review", {"action": "mark_reviewed", "id": proposal["id"]})
        assert not is_error and done.startswith("Accepted:"), done
    assert project.get(proposal["id"])["status"] == "active"
    assert project.review().items == []


def test_the_http_api_and_the_web_inbox(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from engram.http_api import create_app

    root = tmp_path / "repo"
    root.mkdir()
    Engram.init(root, "web")[0].close()
    app = create_app(root)
    engram = app.state.engram
    for name in ("bugfix-cart-undefined", "correction-print-logging"):
        inbox.capture_transcript(engram.here, str(SET / "claude-code" / f"{name}.jsonl"), cwd=CWD)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        listed = client.get("/review").json()
        assert [item["kind"] for item in listed["items"]] == ["bugfix", "preference"]
        fix, preference = (item["id"] for item in listed["items"])

        page = client.get("/ui/review")
        assert page.status_code == 200 and page.text.count('<tr class="proposal">') == 2
        assert '<span class="muted">proposed, not reviewed</span>' in page.text
        assert "Cannot read properties of undefined" in page.text
        key = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        forged = client.post(f"/ui/review/{fix}/accept", data={"csrf": "guess"})
        assert forged.status_code == 403 and engram.get(fix)["status"] == "proposed"
        crossed = client.post(
            f"/ui/review/{fix}/accept",
            data={"csrf": key},
            headers={"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
        )
        assert crossed.status_code == 403 and engram.get(fix)["status"] == "proposed"
        done = client.post(f"/ui/review/{fix}/accept", data={"csrf": key}, follow_redirects=False)
        assert done.status_code == 303 and done.headers["location"] == "/ui/review?done=accepted"
        assert engram.get(fix)["status"] == "active"

        rejected = client.post("/review", json={"action": "reject", "ids": [preference]})
        assert rejected.status_code == 200, rejected.text
        assert rejected.json()["left"] == 0 and engram.get(preference)["status"] == "rejected"
        assert "Nothing to review" in client.get("/ui/review").text


def test_the_tui_inbox_accepts_and_rejects_with_keys(project: Engram) -> None:
    pytest.importorskip("textual")
    from textual.widgets import DataTable

    from engram.tui.app import EngramApp, ReviewScreen

    for name in ("bugfix-isoformat", "revert-loader-cache"):
        inbox.capture_transcript(project.here, str(SET / "codex" / f"{name}.jsonl"), cwd=CWD)
    fix, pitfall = (record["id"] for record in project.review().items)
    app = EngramApp(project)

    async def main() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("v")
            await pilot.pause()
            assert isinstance(app.screen, ReviewScreen)
            table = app.screen.query_one("#inbox", DataTable)
            assert table.row_count == 2
            assert [str(table.get_row_at(n)[3]) for n in range(2)] == ["proposed"] * 2
            await pilot.press("y")  # the first row: the bugfix
            await pilot.pause()
            assert table.row_count == 1
            await pilot.press("x")
            await pilot.pause()
            assert table.row_count == 0

    anyio.run(main)
    assert (project.get(fix)["status"], project.get(pitfall)["status"]) == ("active", "rejected")


def test_an_unreviewed_proposal_is_never_offered_unasked_and_always_labelled(
    project: Engram,
) -> None:
    from engram.operations.views import HitView

    inbox.capture_transcript(
        project.here, str(SET / "claude-code" / "bugfix-isoformat.jsonl"), cwd=CWD
    )
    (hit,) = project.recall("fromisoformat trailing Z isoformat", limit=1)
    view = HitView.of(hit)
    assert view.status == "proposed" and view.provenance.endswith("proposed, not reviewed")
    briefing = project.context(query="fromisoformat isoformat string")
    assert hit.id not in [item.id for item in briefing.items]  # asked for words: not offered
    project.review("accept", [hit.id])
    briefing = project.context(query="fromisoformat isoformat string")
    assert hit.id in [item.id for item in briefing.items]
    (after,) = project.recall("fromisoformat trailing Z isoformat", limit=1)
    assert "not reviewed" not in HitView.of(after).provenance


def test_the_prompt_hook_answers_with_the_nudge_once(project: Engram) -> None:
    from engram.agents.answer import answer
    from engram.agents.briefing import StandingCache
    from engram.agents.hookspec import HookSpec

    lines = [claude_line("user", "refactor the report module")]
    lines += [edit(f"t{n}", f"report{n}.py", "a", "b") for n in range(6)]
    path = project.root / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    spec = HookSpec("claude-code", "prompt", "UserPromptSubmit", None, 15, "prompt")
    event = Event(str(project.root), session_id="s-7", transcript=str(path))
    out = json.loads(answer(project.here, StandingCache(), spec, event))
    assert out["hookSpecificOutput"] == {
        "hookEventName": "UserPromptSubmit",
        "additionalContext": inbox.NUDGE,
    }
    assert answer(project.here, StandingCache(), spec, event) == ""


@pytest.mark.parametrize("agent", AGENTS)
def test_transcripts_the_real_programs_wrote(agent: str) -> None:
    """r-bugfix: the real agent ran a failing check, edited src/billing.py, ran it again."""
    transcript = read_transcript(SET / agent / "r-bugfix.jsonl")
    assert transcript.agent == agent and not transcript.notes
    people = [step.text for step in transcript.steps if step.kind == "user"]
    # Gemini CLI's session and hook context are not the person's words.
    assert people == ["Fix the refund rounding bug in src/billing.py"]
    runs = [step for step in transcript.steps if step.kind == "run" and "refund" in step.text]
    assert [run.code for run in runs] == [1, 0]
    assert "gave 52, want 53" in runs[0].output and "untrusted_context" not in runs[0].output
    (edit,) = [step for step in transcript.steps if step.kind == "edit"]
    assert edit.path.endswith("src/billing.py") and "+ 50) // 100" in edit.new
    (fix,) = propose(transcript, CWD)  # the folder it ran in is CWD's placeholder
    assert fix.kind == "bugfix" and fix.files == ["src/billing.py"]
    quiet = read_transcript(SET / agent / "r-quiet.jsonl")
    assert propose(quiet, CWD) == []


def _real_transcripts() -> dict[str, dict[str, Path]]:
    """Return the committed transcripts of the real programs, by agent and session name."""
    return {
        agent: {
            path.name.split(".")[0]: path
            for pattern in ("r-*.jsonl", "r-*.jsonl.gz")
            for path in (SET / agent).glob(pattern)
        }
        for agent in AGENTS
    }


def test_every_real_transcript_is_labelled_and_names_no_path_of_this_machine(
    tmp_path: Path,
) -> None:
    """The real set: at least 40 labelled transcripts per agent whose own files engram reads
    (OpenCode's two come from engram's plugin), each read as that agent's with the person's
    prompts in it, naming none of this checkout's or this machine's folders (the generator puts
    fixed placeholders in their place)."""
    labels = json.loads((SET.parent / "labels.json").read_text(encoding="utf-8"))["real"]
    placeholders = (CWD, "/home/dev/scratch", "/home/dev/.venv", "/usr")
    here = {str(Path(__file__).resolve().parents[2]), tempfile.gettempdir(), sys.prefix}
    here |= {sys.base_prefix, os.path.realpath(sys.base_prefix)}
    mine = [path for path in here if not any(p.startswith(path) for p in placeholders)]
    for agent, found in _real_transcripts().items():
        least = 2 if agent == "opencode" else 40
        assert len(found) >= least and set(found) <= set(labels), f"{agent}: {sorted(found)}"
        for name, path in found.items():
            data = path.read_bytes()
            text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")
            for folder in mine:  # as a path of its own, not inside another (.gemini/tmp)
                pattern = rf"(?<![\w.<-]){re.escape(folder)}(?:/|(?![\w.-]))"
                assert not re.search(pattern, text), f"{path.name} names {folder}"
            plain = tmp_path / agent / f"{name}.jsonl"
            plain.parent.mkdir(exist_ok=True)
            plain.write_text(text, encoding="utf-8")
            transcript = read_transcript(plain)
            assert transcript.agent == agent and not transcript.notes, path.name
            assert any(step.kind == "user" for step in transcript.steps), path.name


def test_a_resumed_gemini_session_keeps_the_calls_made_before() -> None:
    """Gemini CLI resumed (``--resume``): the conversation is set anew in the API's form.

    As Gemini CLI 0.61.0 writes it (r-correction-* of the real set): each call a
    ``functionCall`` part, its answer a ``functionResponse`` part of a later user message, no
    ``toolCalls``; a denied call answers with an error only. The calls are steps all the same.
    """

    def call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"m-{cid}",
            "type": "gemini",
            "content": [{"functionCall": {"id": cid, "name": name, "args": args}}],
        }

    def answer(cid: str, response: dict[str, Any]) -> dict[str, Any]:
        part = {"functionResponse": {"id": cid, "name": "x", "response": response}}
        return {"id": f"m-{cid}_response", "type": "user", "content": [part]}

    failed = {"output": "<untrusted_context>\nOutput: AssertionError: a_b\nExit Code: 1\n"}
    conversation = [
        {"id": "u0", "type": "user", "content": [{"text": "<session_context>x</session_context>"}]},
        call("c1", "run_shell_command", {"command": "python3 t.py"}),
        answer("c1", failed),
        call("c2", "replace", {"file_path": f"{CWD}/a.py", "old_string": "_", "new_string": "-"}),
        answer("c2", {"output": "Successfully modified file"}),
        call(
            "c3", "replace", {"file_path": f"{CWD}/Makefile", "old_string": " ", "new_string": "\t"}
        ),
        answer("c3", {"error": "Tool execution denied by policy."}),
        call("c4", "run_shell_command", {"command": "python3 t.py"}),
        answer("c4", {"output": "Output: ok"}),
        {"id": "g5", "type": "gemini", "content": [{"text": "Fixed."}]},
    ]
    lines = [
        {"sessionId": "s-9", "projectHash": "h", "startTime": "t", "kind": "main"},
        {"$set": {"messages": conversation}},
        {"id": "u6", "type": "user", "content": [{"text": "No, never use dashes here."}]},
        {"id": "g7", "type": "gemini", "content": "Understood."},
    ]
    steps = parse_transcript("\n".join(map(json.dumps, lines)), "gemini-cli").steps
    assert [(step.kind, step.code, step.path) for step in steps] == [
        ("run", 1, ""),
        ("edit", None, f"{CWD}/a.py"),
        ("run", 0, ""),
        ("say", None, ""),
        ("user", None, ""),
        ("say", None, ""),
    ]
    assert steps[0].output == "AssertionError: a_b" and steps[2].output == "ok"


def test_a_refused_tool_call_is_no_step() -> None:
    """A command the person did not approve, an edit that did not apply: nothing happened."""
    lines = [
        claude_line("user", "fix it"),
        bash("t1", "pytest -q"),
        result("t1", "This command requires approval", error=True),
        edit("t2", "a.py", "x", "y"),
        result("t2", "<tool_use_error>File has not been read yet.</tool_use_error>", error=True),
        bash("t3", "pytest -q"),
        result("t3", "3 passed"),
    ]
    steps = parse_transcript("\n".join(lines)).steps
    assert [(step.kind, step.code) for step in steps] == [("user", None), ("run", 0)]


NODE_ASSERT = """node:assert:90
  throw new AssertionError(obj);
  ^

AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

'12' !== 3

    at Object.<anonymous> (/home/dev/work/app/test/cart.test.js:4:8)
"""
PY_BARE_ASSERT = """Traceback (most recent call last):
  File "/home/dev/work/app/check.py", line 3, in <module>
    assert greet("Ann") == "Hello, Ann!"
AssertionError
"""


@pytest.mark.parametrize(
    ("output", "title"),
    [
        (NODE_ASSERT, "Fix: AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:"),
        (PY_BARE_ASSERT, "Fix: AssertionError"),
    ],
)
def test_a_fix_is_named_by_what_failed_not_where(output: str, title: str) -> None:
    """A bugfix's title is the error, never a traceback header or a node location line."""
    from engram.agents.transcript import Step, Transcript

    steps = [
        Step("run", 1, "node test/cart.test.js", output=output, code=1),
        Step("edit", 2, "", path="src/cart.js", old="a + b", new="Number(a) + Number(b)"),
        Step("run", 3, "node test/cart.test.js", output="ok", code=0),
    ]
    transcript = Transcript("claude-code", "", "s", "/home/dev/work/app", steps=steps)
    (proposal,) = propose(transcript, "/home/dev/work/app")
    assert proposal.kind == "bugfix" and proposal.title == title


# -- OpenCode: the session as engram's plugin writes it (client.session.messages, a line each) --

OPENCODE = FIXTURES / "hooks" / "opencode"
BILLING_OLD = "    return round(amount_cents * percent / 100)"


def opencode_lines(name: str = "transcript.jsonl") -> list[dict[str, Any]]:
    """Return the messages of a session the real OpenCode ran (paths moved under CWD)."""
    text = (OPENCODE / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_an_opencode_session_reads_into_the_same_steps_and_rules() -> None:
    """A real OpenCode session: a check failed, engram stopped the first edit, the second
    applied, the check passed, a tool OpenCode lacks was called, a file was written."""
    transcript = read_transcript(OPENCODE / "transcript.jsonl")
    assert transcript.agent == "opencode" and not transcript.notes
    assert transcript.session_id.startswith("ses_") and transcript.cwd == CWD
    steps = transcript.steps
    # The edit engram stopped (status error, line 3) and the invalid tool call (line 6): nothing.
    assert [(step.kind, step.line) for step in steps] == [
        ("user", 1),
        ("run", 2),
        ("edit", 4),
        ("run", 5),
        ("edit", 7),
    ]
    failed, fixed, passed, written = steps[1:]
    assert (failed.code, passed.code) == (1, 0) and failed.text == passed.text
    assert "AssertionError: 2" in failed.output
    assert (fixed.path, fixed.old) == (f"{CWD}/src/billing.py", BILLING_OLD)
    assert fixed.new.endswith("// 100  # edit B")
    assert (written.path, written.old, written.new) == (f"{CWD}/x.txt", None, "hi\n")
    (fix,) = propose(transcript, CWD)
    assert (fix.kind, fix.files, fix.line) == ("bugfix", ["src/billing.py"], 2)
    assert fix.title.startswith("Fix: AssertionError: 2")
    quiet = read_transcript(OPENCODE / "transcript-quiet.jsonl")
    assert [(s.kind, s.text, s.code) for s in quiet.steps if s.kind == "run"] == [
        ("run", "ls src", 0)
    ]
    assert propose(quiet, CWD) == []


def test_opencode_summaries_own_parts_unfinished_calls_and_bad_lines_are_skipped() -> None:
    from engram.agents import transcript as module

    messages = opencode_lines()
    user, failed = messages[0], messages[1]
    # OpenCode's own words in the person's message (a file it attached): not the person's.
    user["parts"].append({**user["parts"][0], "text": "Called the Read tool", "synthetic": True})
    # A compaction's summary retells the session: nothing in it happened again.
    summary = json.loads(json.dumps(failed))
    summary["info"]["summary"] = True
    summary["parts"].append({**summary["parts"][0], "type": "text", "text": "We ran the check."})
    # A call still running when the plugin wrote the file: no result to learn from yet.
    running = json.loads(json.dumps(messages[4]))
    running["parts"][1]["state"] = {**running["parts"][1]["state"], "status": "running"}
    huge = json.loads(json.dumps(messages[4]))
    huge["parts"][1]["state"]["output"] = "x" * module.MAX_LINE
    lines = [user, failed, summary, "{not json", huge, messages[3], running, messages[4]]
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    transcript = parse_transcript(text, path="ses.jsonl")
    assert transcript.agent == "opencode"
    assert transcript.notes == ["ses.jsonl: 2 unreadable line(s) skipped: 4, 5"]
    assert [(step.kind, step.line, step.code) for step in transcript.steps] == [
        ("user", 1, None),
        ("run", 2, 1),
        ("edit", 6, None),
        ("run", 8, 0),
    ]
    # `opencode run` sent the prompt to the model in quotes: the person's words are inside.
    assert transcript.steps[0].text == "Fix the refund rounding"


def test_an_opencode_transcript_that_is_a_pipe_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "ses_1.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match=r"not a regular file|cannot be read"):
        read_transcript(fifo, "opencode")


def test_the_opencode_stop_hook_reads_the_session_the_plugin_wrote(project: Engram) -> None:
    """`engram hook opencode stop` with the payload the plugin sends at text.complete."""
    folder = project.root / ".engram" / "state" / "opencode"
    folder.mkdir(parents=True)
    path = folder / "ses_1.jsonl"
    path.write_bytes((OPENCODE / "transcript.jsonl").read_bytes())
    payload = {
        "hook_event_name": "experimental.text.complete",
        "cwd": str(project.root),
        "session_id": "ses_1",
        "last_assistant_message": "Refunds round half up now.",
        "transcript_path": str(path),
    }
    stdin = json.dumps(payload).encode()
    done = run_cli("hook", "opencode", "stop", cwd=project.root, stdin=stdin)
    assert done.returncode == 0, done.stderr.decode()
    notice = json.loads(done.stdout)["systemMessage"]
    assert notice.startswith("engram proposed 1 memory for review (engram review): Fix: Assert")
    (hit,) = project.recall("AssertionError", limit=1)
    record = hit.record
    assert (record["status"], record["source"]) == ("proposed", "capture:opencode")
    assert record["files"] == ["src/billing.py"] and record["kind"] == "bugfix"
    assert record["capture"]["transcript"] == str(path) and record["capture"]["line"] == 2
    again = run_cli("hook", "opencode", "stop", cwd=project.root, stdin=stdin)
    assert again.returncode == 0 and again.stdout.strip() == b""  # proposed once
