"""The real agent programs, driven against a recording fake model: what reaches the model, and when.

Each agent (Claude Code, Codex, Gemini CLI, OpenCode, at the versions ``.ci/agents`` pins) runs
non-interactively in a scratch repository after ``engram init``, three memories about
src/billing.py (a pinned, importance-5 pitfall, a decision, a past fix) and ``engram setup
AGENT``. The fake model (``tests/agents/fakemodel.py``; the one mocked part, since a remote model
cannot exist here) answers from a script and records every request, so each test asserts on what
the model was given, in order. The sessions:

- ``edit``: a prompt about the file; the model reads it, edits it (twice, the second attempt for
  when the first is held for the person), calls engram's ``check`` and ends with Key Learnings;
- ``other``: an unrelated prompt; the model edits the file without reading it first (twice,
  likewise);
- ``fail``: the unrelated prompt; the model runs a command that fails with the error the past fix
  is about (a session of its own: a memory is shown once per session);
- ``related``: a prompt that the past fix answers; the model ends at once;
- ``bugfix`` (OpenCode): the model runs a check that fails, edits the file (twice, likewise),
  runs the check again, which passes, and ends without Key Learnings;
- ``quiet`` (OpenCode): the model runs a command that passes and ends without Key Learnings.

Each session runs once per agent and module; each test reads one of them. Where a program is
not installed or does not start here, its tests skip saying why (``make agents`` installs them).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engram.agents.transcript import read_transcript
from tests.agents import harness
from tests.agents.harness import FAILING_COMMAND, FIX, PITFALL, Project, Recording
from tests.agents.programs import AGENTS, Agent

pytestmark = [pytest.mark.agents, pytest.mark.timeout(600)]

EDIT_PROMPT = "Fix the refund rounding bug in src/billing.py"
OTHER_PROMPT = "Write a haiku about autumn leaves"
RELATED_PROMPT = "Importing billing_vat fails with ModuleNotFoundError: how do I run it?"
LEARNING = "refund() rounds half up in integer cents, never through float (zeta-learned)"
FINAL = f"I fixed it.\n\n## Key Learnings\n- {LEARNING}\n"
# Fails on the file as the project starts (round(2.5) is 2), passes after either scripted edit.
CHECK = (
    'python3 -c \'import sys; sys.path.insert(0, "src"); '
    "from billing import refund; assert refund(5, 50) == 3, refund(5, 50)'"
)
PLAIN_FINAL = "Refunds now round half up in integer cents; the check passes."

_RUNS: dict[tuple[str, str], tuple[Project, Recording]] = {}


def _agent(name: str) -> tuple[Agent, Path]:
    binary, why = harness.program(name)
    if binary is None:
        pytest.skip(why)
    return AGENTS[name], binary


def session(name: str, kind: str, factory: pytest.TempPathFactory) -> tuple[Project, Recording]:
    """Run (once per module) one of the three sessions of an agent; return project and record."""
    if (name, kind) in _RUNS:
        return _RUNS[name, kind]
    agent, binary = _agent(name)
    project = harness.make_project(factory.mktemp(f"{name}-{kind}"), name)
    env = agent.prepare(project)
    if kind == "edit":
        prompt = EDIT_PROMPT
        steps = [agent.read(project), agent.edit(project, "edit A"), agent.edit(project, "edit B")]
        steps += agent.check()
    elif kind == "other":
        prompt = OTHER_PROMPT
        steps = [agent.edit(project, "edit A"), agent.edit(project, "edit B")]
    elif kind == "fail":
        prompt = OTHER_PROMPT
        steps = [agent.shell(FAILING_COMMAND)]
    elif kind == "bugfix":
        prompt = "Make the refund check pass"
        steps = [agent.shell(CHECK), agent.edit(project, "edit A"), agent.edit(project, "edit B")]
        steps.append(agent.shell(CHECK))
    elif kind == "quiet":
        prompt = OTHER_PROMPT
        steps = [agent.shell("ls src")]
    else:
        prompt = RELATED_PROMPT
        steps = []
    final = PLAIN_FINAL if kind in ("bugfix", "quiet") else FINAL
    script = {"main_tool": agent.main_tool, "steps": steps, "final": final}
    record = harness.run_agent(project, agent.command(binary, project, prompt), script, env=env)
    _RUNS[name, kind] = (project, record)
    if not record.main:
        pytest.fail(
            f"{name} sent the fake model no request of its main loop (exit {record.returncode}):\n"
            f"{record.output[-3000:]}"
        )
    return project, record


def _step_request(record: Recording, step: int) -> dict[str, Any]:
    """Return the main request the script answered with ``step``."""
    for request in record.main:
        if request["step"] == step:
            return request
    raise AssertionError(
        f"the agent never asked the model for step {step}: {len(record.main)} main requests\n"
        f"{record.output[-2000:]}"
    )


def _written_by(project: Project) -> str:
    """Return which scripted edit wrote src/billing.py: "edit A", "edit B" or ""."""
    text = (project.root / "src" / "billing.py").read_text(encoding="utf-8")
    return next((tag for tag in ("edit A", "edit B") if tag in text), "")


AGENT_NAMES = list(AGENTS)


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_engram_tools_are_in_the_models_tool_list(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, record = session(name, "edit", tmp_path_factory)
    steps = AGENTS[name].check()
    call = steps[-1]
    asked = _step_request(record, 2 + len(steps))  # the request answered by the check call
    if "namespace" in call:  # Codex: the tools its tool_search found, in the request's input
        found = [
            tool["name"]
            for item in asked["body"].get("input", [])
            if isinstance(item, dict) and item.get("type") == "tool_search_output"
            for space in item.get("tools", [])
            if space.get("name") == call["namespace"]
            for tool in space.get("tools", [])
        ]
        assert call["call"] in found, f"codex's tool_search offered {found}, not engram's check"
        return
    assert call["call"] in asked["tools"], (
        f"{call['call']} is not among the {len(asked['tools'])} tools {name} offered the model "
        f"when it called it: {asked['tools']}"
    )


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_briefing_is_in_the_first_request(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, record = session(name, "other", tmp_path_factory)  # the prompt recalls nothing
    first = record.text(record.main[0])
    assert PITFALL in first, f"the pinned pitfall is not in {name}'s first request"


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_related_prompt_gets_its_memory(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    project, record = session(name, "related", tmp_path_factory)
    first = record.text(record.main[0])
    assert RELATED_PROMPT in first.replace("\\", "") or "billing_vat" in first
    assert FIX in first or project.ids["fix"][:8] in first, (
        f"the past fix ({project.ids['fix']}) the prompt asks about is not in {name}'s first "
        "request"
    )


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_unrelated_prompt_gets_nothing(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    project, record = session(name, "other", tmp_path_factory)
    first = record.text(record.main[0])
    assert OTHER_PROMPT in first, f"{name}'s first main request does not hold the prompt"
    assert "memories relevant to your request" not in first
    assert FIX not in first and project.ids["fix"] not in first


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_pitfall_before_the_write_after_a_read(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    project, record = session(name, "edit", tmp_path_factory)
    written = _written_by(project)
    assert written, f"{name} never wrote src/billing.py:\n{record.output[-2000:]}"
    writing = _step_request(record, 1 if written == "edit A" else 2)
    assert PITFALL in record.text(writing), (
        f"the pitfall is not in the request whose answer ({written}) wrote src/billing.py"
    )


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_pitfall_before_the_write_without_a_read(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The file's memories reach the model before a write it did not read the file for.

    The pinned pitfall is in every request from the briefing on, so the file's own delivery is
    told by its other memories: the past fix, which neither the briefing nor this unrelated
    prompt brings.
    """
    project, record = session(name, "other", tmp_path_factory)
    written = _written_by(project)
    if not written:
        after = record.text(_step_request(record, 2))
        if "File has not been read yet" in after:
            pytest.skip(f"{name} refuses to edit a file not read first, before any hook runs")
        # the agent refused both edits: the model must have been told the file's memories
        assert PITFALL in after and (FIX in after or project.ids["fix"][:8] in after), (
            f"{name} refused the edits, and the model was not given the file's memories"
        )
        return
    writing = record.text(_step_request(record, 0 if written == "edit A" else 1))
    assert PITFALL in writing
    assert FIX in writing or project.ids["fix"][:8] in writing, (
        f"the file's memories are not in the request whose answer ({written}) wrote "
        "src/billing.py without reading it"
    )


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_pinned_pitfall_asks_before_the_write(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    project, record = session(name, "edit", tmp_path_factory)
    assert _written_by(project) != "edit A", (
        f"{name} wrote the first edit of a file with a pinned pitfall without asking"
    )
    answer = _step_request(record, 2)  # the request after the held edit
    calls = json.dumps(answer["body"])
    assert PITFALL in calls


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_failed_command_recalls_the_past_fix(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    project, record = session(name, "fail", tmp_path_factory)
    first = record.text(record.main[0])
    assert FIX not in first and project.ids["fix"][:8] not in first
    after = record.text(_step_request(record, 1))  # the request after the failed command
    assert "No module named" in after, f"{name} did not run the failing command"
    assert FIX in after or project.ids["fix"][:8] in after, (
        f"the past fix is not in the request after the failed command in {name}"
    )


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_learnings_captured_at_stop(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    project, record = session(name, "edit", tmp_path_factory)
    saved = [
        path.relative_to(project.root)
        for path in (project.root / ".engram").rglob("*")
        if path.is_file() and "zeta-learned" in path.read_text(encoding="utf-8", errors="replace")
    ]
    assert saved, (
        f"the session's Key Learnings are in no file under .engram/ after {name} stopped "
        f"(exit {record.returncode})"
    )


def _proposed(project: Project) -> list[dict[str, Any]]:
    """Return the project's proposed memories, as `engram review list --json` gives them."""
    listed = json.loads(harness.engram(project.root, project.env, "review", "list", "--json"))
    items: list[dict[str, Any]] = listed["items"]
    return items


def test_opencode_session_that_fixed_a_bug_proposes_a_bugfix(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A session that failed a check, edited, passed it and said nothing leaves a proposal."""
    project, record = session("opencode", "bugfix", tmp_path_factory)
    assert _written_by(project) == "edit B", record.output[-2000:]
    after = record.text(_step_request(record, 1))  # the request after the failed check
    assert "AssertionError" in after, "OpenCode did not run the failing check"
    (fix,) = [item for item in _proposed(project) if item.get("kind") == "bugfix"]
    assert (fix["status"], fix["source"]) == ("proposed", "capture:opencode")
    assert fix["files"] == ["src/billing.py"]
    assert "AssertionError" in fix["title"]
    assert "(amount_cents * percent + 50) // 100" in fix["content"]
    where = fix["provenance"]
    assert where["agent"] == "opencode" and where["session"].startswith("ses_")
    written = project.root / ".engram" / "state" / "opencode" / f"{where['session']}.jsonl"
    assert where["transcript"] == str(written) and written.is_file()


def test_opencode_uneventful_session_proposes_nothing(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    project, record = session("opencode", "quiet", tmp_path_factory)
    (written,) = (project.root / ".engram" / "state" / "opencode").glob("ses_*.jsonl")
    runs = [step for step in read_transcript(written).steps if step.kind == "run"]
    assert [(step.text, step.code) for step in runs] == [("ls src", 0)], record.output[-2000:]
    assert _proposed(project) == []


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            return _strings(json.loads(value)) if value.lstrip().startswith("{") else [value]
        except ValueError:
            return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def briefing_text(project: Project, name: str) -> str:
    """Return what engram's session-start hook gives a new session of this project."""
    payload = {
        "hook_event_name": "SessionStart" if name != "opencode" else "session.created",
        "source": "startup",
        "session_id": "tokens-measured",
        "cwd": str(project.root),
    }
    done = subprocess.run(
        ["engram", "hook", name, "session-start"],
        input=json.dumps(payload),
        cwd=project.root,
        env={**project.env, "ENGRAM_DAEMON": "off"},  # no daemon left behind by the test
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    texts = [text for text in _strings(done.stdout) if "engram" in text]
    return max(texts, key=len) if texts else done.stdout


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_added_tokens(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tokens engram adds (characters / 4): at session start, and at a prompt.

    The session start is the briefing the hook gives (checked to be what the first request
    holds); a prompt's share is how much longer the first request of a session whose prompt
    memory answers is than that of the unrelated prompt's session, the prompts' own lengths
    taken out.
    """
    project, other = session(name, "other", tmp_path_factory)
    first = "\n".join(_strings(other.main[0]["body"]))
    briefing = briefing_text(project, name)
    line = next(text for text in briefing.splitlines() if PITFALL in text)
    assert line in first, f"the briefing's pinned line is not in {name}'s first request"
    start = len(briefing) / 4
    base = len(other.text(other.main[0])) - len(json.dumps(OTHER_PROMPT))
    added = {}
    for kind, prompt in (("related", RELATED_PROMPT), ("edit", EDIT_PROMPT)):
        _, record = session(name, kind, tmp_path_factory)
        added[kind] = (len(record.text(record.main[0])) - len(json.dumps(prompt)) - base) / 4
    print(
        f"\nADDED_TOKENS {name} session_start={start:.0f} "
        + " ".join(f"prompt_{kind}={value:.0f}" for kind, value in added.items())
    )
    assert start <= 2000 + 100, f"the briefing is {start:.0f} tokens, over its 2000 budget"
    assert max(added.values()) <= 450, f"a prompt's recall added {added} tokens"
