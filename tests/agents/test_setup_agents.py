"""What `engram setup` writes so each agent works the first time, and what `engram doctor` says.

Real files in a fake HOME (conftest), real `engram` processes, real `sh` for hook commands and
real `node` for the OpenCode plugin (with a fake `engram` program on PATH that records what it
is given, and a client object shaped as OpenCode passes it: the one part that cannot exist here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from engram.agents import health
from engram.agents import setup as agents
from engram.agents.commands import GEMINI_TRIGGERS
from engram.agents.hookspec import HOOKS
from engram.mcp_server import select_tools
from engram.service import Engram
from tests.conftest import run_cli
from tests.helpers.places import FIXTURES

NODE = shutil.which("node")


@pytest.fixture
def home() -> Path:
    return Path(os.environ["HOME"])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def bare_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A PATH without engram on it (the system's tools only)."""
    empty = tmp_path / "no-engram"
    empty.mkdir()
    path = f"{empty}{os.pathsep}/usr/bin{os.pathsep}/bin"
    monkeypatch.setenv("PATH", path)
    return path


def fake_engram(folder: Path, reply: str = "") -> Path:
    """Write an `engram` program that records its arguments and stdin, and prints ``reply``."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "calls.jsonl"
    program = folder / "engram"
    program.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"with open({str(log)!r}, 'a') as out:\n"
        "    out.write(json.dumps({'argv': sys.argv[1:], 'stdin': sys.stdin.read()}) + '\\n')\n"
        f"sys.stdout.write({reply!r})\n"
    )
    program.chmod(0o755)
    return log


def calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


# -- Claude Code -------------------------------------------------------------------------------


def test_claude_code_may_call_the_read_only_tools_and_asks_for_the_rest(repo: Path) -> None:
    settings = repo / ".claude/settings.json"
    settings.parent.mkdir()
    settings.write_text(
        '{\n  "permissions": {"allow": ["Bash(npm test)"], "deny": ["Read(.env)"]}\n}\n'
    )
    agents.setup("claude-code", root=repo)
    permissions = json.loads(settings.read_text())["permissions"]
    served = select_tools("agent")  # what `engram mcp` offers, as setup writes it
    read_only = {f"mcp__engram__{name}" for name, tool in served.items() if tool.read_only}
    writes = {f"mcp__engram__{name}" for name, tool in served.items() if not tool.read_only}
    assert set(permissions["allow"]) == {"Bash(npm test)"} | read_only
    assert "mcp__engram__check" in read_only and "mcp__engram__recall" in read_only
    assert not writes & set(permissions["allow"])  # remember, update, forget … still ask
    assert permissions["deny"] == ["Read(.env)"]
    before = settings.read_text()
    result = agents.setup("claude-code", root=repo)
    assert [c.action for c in result.changes] == ["unchanged"] * 4
    assert settings.read_text() == before


def test_claude_code_permissions_that_are_not_a_list_stop_the_setup(repo: Path) -> None:
    settings = repo / ".claude/settings.json"
    settings.parent.mkdir()
    settings.write_text('{"permissions": {"allow": "mcp__engram__recall"}}\n')
    with pytest.raises(agents.ConfigError, match=r"permissions\.allow must be a list"):
        agents.setup("claude-code", root=repo)
    assert not (repo / ".mcp.json").exists()  # nothing written


# -- Gemini CLI --------------------------------------------------------------------------------


def test_gemini_lifecycle_matchers_match_as_gemini_compares_them(repo: Path) -> None:
    agents.setup("gemini-cli", root=repo)
    data = json.loads((repo / ".gemini/settings.json").read_text())
    assert data["mcpServers"]["engram"]["trust"] is True
    for event, groups in data["hooks"].items():
        for group in groups:
            matcher = group.get("matcher")
            if event in GEMINI_TRIGGERS:  # one exact trigger, or none (every trigger)
                assert matcher is None or matcher in GEMINI_TRIGGERS[event], event
    for spec in HOOKS:  # an alternation written as "no matcher" must name every trigger
        lifecycle = spec.agent == "gemini-cli" and spec.native in GEMINI_TRIGGERS
        if lifecycle and spec.matcher and "|" in spec.matcher:
            assert set(spec.matcher.split("|")) >= set(GEMINI_TRIGGERS[spec.native])


def test_native_matcher_of_gemini_lifecycle_and_tool_events() -> None:
    start = agents.HookSpec("gemini-cli", "x", "SessionStart", "startup|resume|clear", 30, "brief")
    one = agents.HookSpec("gemini-cli", "x", "SessionStart", "resume", 30, "brief")
    tool = agents.HookSpec("gemini-cli", "x", "AfterTool", "write_file|replace", 10, "check")
    claude = agents.HookSpec("claude-code", "x", "SessionStart", "startup|resume", 30, "brief")
    assert agents.native_matcher(start) is None
    assert agents.native_matcher(one) == "resume"
    assert agents.native_matcher(tool) == "write_file|replace"  # a regular expression there
    assert agents.native_matcher(claude) == "startup|resume"


# -- Cursor ------------------------------------------------------------------------------------

# The schema of .cursor/hooks.json as Cursor documents it (https://cursor.com/docs/agent/hooks,
# "Configuration"): version 1, and per event a list of hooks, each a command with an optional
# type, timeout in seconds, matcher, failClosed and loop_limit. Written here from the docs.
CURSOR_EVENTS = [
    "sessionStart", "sessionEnd", "preToolUse", "postToolUse", "postToolUseFailure",
    "subagentStart", "subagentStop", "beforeShellExecution", "afterShellExecution",
    "beforeMCPExecution", "afterMCPExecution", "beforeReadFile", "afterFileEdit",
    "beforeSubmitPrompt", "preCompact", "stop", "afterAgentResponse", "afterAgentThought",
    "beforeTabFileRead", "afterTabFileEdit",
]  # fmt: skip
CURSOR_SCHEMA = {
    "type": "object",
    "required": ["version", "hooks"],
    "properties": {
        "version": {"const": 1},
        "hooks": {
            "type": "object",
            "propertyNames": {"enum": CURSOR_EVENTS},
            "additionalProperties": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["command"],
                    "properties": {
                        "command": {"type": "string", "minLength": 1},
                        "type": {"enum": ["command", "prompt"]},
                        "timeout": {"type": "number", "exclusiveMinimum": 0},
                        "matcher": {"type": "string"},
                        "failClosed": {"type": "boolean"},
                        "loop_limit": {"type": ["integer", "null"]},
                    },
                    "additionalProperties": False,
                },
            },
        },
    },
}


@pytest.mark.parametrize("scope", agents.SCOPES)
def test_cursor_hooks_file_is_valid_against_cursors_schema(
    repo: Path, home: Path, scope: str
) -> None:
    agents.setup("cursor", scope, root=repo)
    path = (repo if scope == "project" else home) / ".cursor/hooks.json"
    data = json.loads(path.read_text())
    jsonschema.validate(data, CURSOR_SCHEMA)
    wanted = {spec.native for spec in HOOKS if spec.agent == "cursor"}
    assert set(data["hooks"]) == wanted and wanted
    for spec in (s for s in HOOKS if s.agent == "cursor"):
        (entry,) = [e for e in data["hooks"][spec.native] if spec.event in e["command"]]
        assert entry.get("matcher") == spec.matcher and entry["timeout"] == spec.timeout
        assert entry["command"].endswith(f"hook cursor {spec.event}")


def test_cursor_hooks_join_the_users_own(repo: Path) -> None:
    path = repo / ".cursor/hooks.json"
    path.parent.mkdir()
    mine = {"command": "./audit.sh", "matcher": "Shell"}
    path.write_text(json.dumps({"version": 1, "hooks": {"preToolUse": [mine]}}, indent=2) + "\n")
    agents.setup("cursor", root=repo)
    data = json.loads(path.read_text())
    jsonschema.validate(data, CURSOR_SCHEMA)
    assert data["hooks"]["preToolUse"][0] == mine
    assert len(data["hooks"]["preToolUse"]) == 1 + sum(
        1 for s in HOOKS if s.agent == "cursor" and s.native == "preToolUse"
    )
    before = path.read_text()
    agents.setup("cursor", root=repo)
    assert path.read_text() == before


# -- Codex -------------------------------------------------------------------------------------

# Hashes Codex 0.171.0 itself reported (`codex app-server`, method hooks/list, currentHash) for
# the hooks of an `engram setup codex`: engram must compute the same to tell trusted from not.
CODEX_VECTORS = [
    (
        "PreToolUse",
        "apply_patch|Edit|Write",
        "command -v engram >/dev/null 2>&1 || exit 0; engram hook codex pre-edit",
        10,
        "sha256:31b49f3234adce1918b2dfa432182920db8fe17e720ece9b30ebe11d8f394fe0",
    ),
    (
        "Stop",
        None,
        "command -v engram >/dev/null 2>&1 || exit 0; engram hook codex stop",
        30,
        "sha256:209a6e9d091822e375d24291ae27208104c0b487e669677a5a5134418337b1b5",
    ),
    (
        "SubagentStop",
        None,
        "command -v engram >/dev/null 2>&1 || exit 0; engram hook codex subagent-stop",
        30,
        "sha256:0776a32d0713e8412cad489b8de67a1dd00ac21121f48562af0abfa67a6dd7e1",
    ),
]


@pytest.mark.parametrize(("native", "matcher", "command", "timeout", "expected"), CODEX_VECTORS)
def test_codex_hook_hash_is_codexs(
    native: str, matcher: str | None, command: str, timeout: int, expected: str
) -> None:
    assert health.codex_hook_hash(native, matcher, command, timeout) == expected


def test_codex_hash_normalizes_as_codex_does() -> None:
    base = health.codex_hook_hash("Stop", None, "x", None)
    assert base == health.codex_hook_hash("Stop", "ignored for Stop", "x", 600)  # defaults
    assert health.codex_hook_hash("SessionEnd", None, "x", 30) == health.codex_hook_hash(
        "SessionEnd", None, "x", 3
    )  # SessionEnd's timeout is held to 1-3 s
    assert health.codex_hook_hash("PreToolUse", "a", "x", 5) != health.codex_hook_hash(
        "PreToolUse", "b", "x", 5
    )


def test_setup_notes_say_what_the_person_must_do_for_claude_and_opencode(repo: Path) -> None:
    """Found with the real programs: Claude Code applies a project's permissions and hooks
    only in a trusted folder, and OpenCode waits for npm before it loads a plugin folder."""
    claude = agents.setup("claude-code", root=repo)
    assert any("only once you trust the folder" in note for note in claude.notes)
    opencode = agents.setup("opencode", root=repo)
    assert any("@opencode-ai/plugin" in note and "npm" in note for note in opencode.notes)


def trust(config: Path, key: str, value: str, *, enabled: bool | None = None) -> None:
    with config.open("a") as out:
        out.write(f'\n[hooks.state."{key}"]\ntrusted_hash = "{value}"\n')
        if enabled is not None:
            out.write(f"enabled = {str(enabled).lower()}\n")


def test_codex_trust_and_doctor_say_what_to_do(repo: Path, home: Path) -> None:
    result = agents.setup("codex", root=repo)
    assert any("Trust all and continue" in note for note in result.notes)
    hooks = repo / ".codex/hooks.json"
    config = home / ".codex/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[projects."{repo}"]\ntrust_level = "trusted"\n')
    found = health.codex_trust(hooks, config)
    assert found is not None and not found.trusted
    codex = [s for s in HOOKS if s.agent == "codex"]
    assert len(found.untrusted) == len(codex)
    data = json.loads(hooks.read_text())

    def place(spec: agents.HookSpec) -> tuple[str, str]:
        """Return the trust key of engram's hook for ``spec`` and its current hash."""
        groups = data["hooks"][spec.native]
        (index,) = [i for i, g in enumerate(groups) if f"hook codex {spec.event}" in json.dumps(g)]
        group = groups[index]
        hook = group["hooks"][0]
        label = health.CODEX_LABELS[spec.native]
        current = health.codex_hook_hash(
            spec.native, group.get("matcher"), hook["command"], hook["timeout"]
        )
        return f"{hooks}:{label}:{index}:0", current

    first, second, *rest = codex
    trust(config, *place(first))
    trust(config, place(second)[0], "sha256:" + "0" * 64)
    for spec in rest:
        trust(config, *place(spec), enabled=False)
    found = health.codex_trust(hooks, config)
    assert found is not None
    assert found.trusted == [f"{first.native} ({first.event})"]
    assert found.modified == [f"{second.native} ({second.event})"]
    assert found.disabled == [f"{s.native} ({s.event})" for s in rest] and not found.untrusted
    messages = [p.message for p in health.agent_problems(repo) if p.agent == "codex"]
    assert any("changed since you trusted them" in m for m in messages)
    assert any("turned off in Codex" in m for m in messages)


# -- engram not on PATH ------------------------------------------------------------------------


def test_doctor_names_every_agent_that_cannot_start_engram(
    repo: Path, home: Path, bare_path: str, tmp_path: Path
) -> None:
    engram, _ = Engram.init(repo, "demo")
    engram.close()
    for agent in agents.AGENTS:
        agents.setup(agent, root=repo)
    done = run_cli("doctor", "--json", cwd=repo, env={"PATH": bare_path})
    findings = json.loads(done.stdout)
    named = [f for f in findings if f["check"] == "agents" and "cannot run" in f["message"]]
    assert {f["message"].split(":")[0] for f in named} == set(agents.AGENTS)
    assert all("`engram` is not found on PATH or not executable" in f["message"] for f in named)
    assert any(".cursor/hooks.json" in f["message"] for f in named)
    assert any(".opencode/plugins/engram.js" in f["message"] for f in named)
    assert done.returncode == 0  # warnings: the store itself is sound
    # With engram on PATH (an executable of that name), nothing is said about starting it.
    fake_engram(tmp_path / "bin")
    again = run_cli("doctor", "--json", cwd=repo, env={"PATH": f"{tmp_path / 'bin'}:{bare_path}"})
    assert not [f for f in json.loads(again.stdout) if "cannot run" in f["message"]]
    # A program that exists but cannot be executed is named too.
    (tmp_path / "bin/engram").chmod(0o644)
    third = run_cli("doctor", "--json", cwd=repo, env={"PATH": f"{tmp_path / 'bin'}:{bare_path}"})
    assert {
        f["message"].split(":")[0] for f in json.loads(third.stdout) if "cannot run" in f["message"]
    } == set(agents.AGENTS)


def test_user_setup_names_this_interpreter_and_doctor_checks_it(
    repo: Path, home: Path, bare_path: str, tmp_path: Path
) -> None:
    agents.setup("claude-code", "user", root=repo)
    assert not [p for p in health.agent_problems(repo, home=home) if "cannot run" in p.message]
    config = home / ".claude.json"
    entry = json.loads(config.read_text())["mcpServers"]["engram"]
    assert [entry["command"], *entry["args"]] == [sys.executable, "-m", "engram", "mcp"]
    # An interpreter that runs but cannot import engram (engram uninstalled from it) is named.
    broken = tmp_path / "python-without-engram"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    config.write_text(
        config.read_text().replace(json.dumps(sys.executable), json.dumps(f"{broken}"))
    )
    (problem,) = [p for p in health.agent_problems(repo, home=home) if "cannot run" in p.message]
    assert problem.agent == "claude-code" and "~/.claude.json" in problem.message
    assert f"`{broken} -m engram` cannot import engram" in problem.message


# -- OpenCode ----------------------------------------------------------------------------------

DRIVER = r"""
import { existsSync, readFileSync, statSync } from "node:fs";
const { ENGRAM_PLUGIN: plugin, ENGRAM_REPO: directory, ENGRAM_MESSAGES: given } = process.env;
const { EngramPlugin } = await import(plugin);
const seen = { toasts: [], logs: [] };
const said = [{ type: "text", text: "Done.\n## Key Learnings\n- cents" }];
const list = given
  ? JSON.parse(readFileSync(given, "utf8"))
  : [{ info: { role: "user" }, parts: [] }, { info: { role: "assistant" }, parts: said }];
const client = {
  tui: { showToast: async ({ body }) => { seen.toasts.push(body); } },
  app: { log: async ({ body }) => { seen.logs.push(body); } },
  session: { messages: async ({ path }) => ({ data: list }) },
};
const hooks = await EngramPlugin({ client, directory, worktree: directory, project: {}, $: null });
const session = { sessionID: "ses_1" };
await hooks.event({ event: { type: "session.created", properties: { info: { id: "ses_1" } } } });
const prompt = { parts: [{ type: "text", text: "fix rounding in src/billing.py" }] };
await hooks["chat.message"](session, prompt);
const system = { system: ["base"] };
await hooks["experimental.chat.system.transform"](session, system);
const read = { args: { filePath: `${directory}/src/billing.py` } };
const c1 = { tool: "read", callID: "c1", ...session };
await hooks["tool.execute.before"](c1, read);
const result = { title: "", output: "1: def total():", metadata: {} };
await hooks["tool.execute.after"]({ ...c1, args: read.args }, result);
const c2 = { tool: "list", callID: "c2", ...session };
const other = { title: "", output: "listing", metadata: {} };
await hooks["tool.execute.before"](c2, { args: {} });
await hooks["tool.execute.after"]({ ...c2, args: {} }, other);
const compacting = { context: [] };
await hooks["experimental.session.compacting"](session, compacting);
const done = { text: "Done.\n## Key Learnings\n- cents" };
await hooks["experimental.text.complete"]({ ...session, messageID: "m1", partID: "p1" }, done);
const blank = { text: " " };
await hooks["experimental.text.complete"]({ ...session, messageID: "m1", partID: "p2" }, blank);
await hooks.event({ event: { type: "session.idle", properties: session } });
await hooks["chat.message"](session, { parts: [{ type: "text", text: "and the VAT?" }] });
const file = `${directory}/.engram/state/opencode/ses_1.jsonl`;
const written = existsSync(file)
  ? { text: readFileSync(file, "utf8"), mode: statSync(file).mode & 0o777 }
  : null;
await hooks.event({ event: { type: "session.deleted", properties: { info: { id: "ses_1" } } } });
const out = { system: system.system, read: result.output, other: other.output, ...seen };
const after = { written, removed: !existsSync(file) };
process.stdout.write(JSON.stringify({ ...out, ...after, compacting: compacting.context }));
"""


def drive(plugin: Path, repo: Path, path: str, messages: Path | None = None) -> dict[str, Any]:
    """Run the plugin's hooks under node as OpenCode calls them; ``messages``: a JSON file of
    what the fake client's ``session.messages`` answers."""
    assert NODE is not None
    done = subprocess.run(
        [NODE, "--input-type=module", "-e", DRIVER],
        capture_output=True,
        env={
            **os.environ,
            "PATH": path,
            "ENGRAM_PLUGIN": plugin.as_uri(),
            "ENGRAM_REPO": f"{repo}",
            **({"ENGRAM_MESSAGES": f"{messages}"} if messages else {}),
        },
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_opencode_plugin_runs_engrams_hooks_and_feeds_the_model(
    repo: Path, bare_path: str, tmp_path: Path
) -> None:
    agents.setup("opencode", root=repo)
    plugin = repo / ".opencode/plugins/engram.js"
    context = {"hookSpecificOutput": {"hookEventName": "x", "additionalContext": "MEMORY NOTE"}}
    log = fake_engram(tmp_path / "bin", json.dumps(context) + "\n")
    seen = drive(plugin, repo, f"{tmp_path / 'bin'}:{bare_path}")
    made = calls(log)
    events = [c["argv"] for c in made]
    assert events == [
        ["hook", "opencode", "session-start"],
        ["hook", "opencode", "prompt"],
        ["hook", "opencode", "pre-read"],
        ["hook", "opencode", "pre-compact"],
        ["hook", "opencode", "stop"],
        ["hook", "opencode", "prompt"],
    ]
    payloads = [json.loads(c["stdin"]) for c in made]
    # No .engram/ in the project: no transcript file, the last answer is all engram reads.
    assert not any("transcript_path" in p for p in payloads) and seen["written"] is None
    assert all(p["cwd"] == str(repo) and p["session_id"] == "ses_1" for p in payloads)
    assert payloads[0]["hook_event_name"] == "session.created"
    assert payloads[1]["prompt"] == "fix rounding in src/billing.py"
    assert payloads[2]["tool_name"] == "read"
    assert payloads[2]["tool_input"]["file_path"] == f"{repo}/src/billing.py"
    assert payloads[3]["last_assistant_message"].endswith("## Key Learnings\n- cents")
    assert payloads[4]["hook_event_name"] == "experimental.text.complete"
    assert payloads[4]["last_assistant_message"] == "Done.\n## Key Learnings\n- cents"
    # engram's answers reach the model: the system prompt, the read's result, the summary.
    assert seen["system"] == ["base", "MEMORY NOTE", "MEMORY NOTE"]
    assert seen["read"] == "1: def total():\n\nMEMORY NOTE"
    assert seen["other"] == "listing"  # a tool engram has no hook for is left alone
    assert seen["compacting"] == ["MEMORY NOTE"]
    assert seen["toasts"] == []


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_opencode_plugin_writes_the_session_for_capture(
    repo: Path, bare_path: str, tmp_path: Path
) -> None:
    """At text.complete and compaction the plugin writes the session's messages (as OpenCode's
    client gives them, a line each) under .engram/state/opencode/ and names the file."""
    agents.setup("opencode", root=repo)
    folder = repo / ".engram" / "state" / "opencode"
    folder.mkdir(parents=True)
    stale, recent = folder / "ses_old.jsonl", folder / "ses_recent.jsonl"
    stale.write_text("{}\n")
    recent.write_text("{}\n")
    month_ago = stale.stat().st_mtime - 30 * 86400
    os.utime(stale, (month_ago, month_ago))
    real = FIXTURES / "hooks" / "opencode" / "transcript.jsonl"  # what the real OpenCode gave
    messages = [json.loads(line) for line in real.read_text().splitlines()]
    messages[1]["parts"][1]["state"]["output"] = "E" * 70_000  # a long output is cut
    answer = messages[-1]["parts"][-1]  # the answer's text, empty until text.complete is done
    assert (answer["type"], answer["text"]) == ("text", "")
    answer["id"] = "p1"  # the part the driver's text.complete finishes
    given = tmp_path / "messages.json"
    given.write_text(json.dumps(messages))
    log = fake_engram(tmp_path / "bin")
    seen = drive(
        repo / ".opencode/plugins/engram.js", repo, f"{tmp_path / 'bin'}:{bare_path}", given
    )
    payloads = {c["argv"][2]: json.loads(c["stdin"]) for c in calls(log)}  # the last of each
    path = str(folder / "ses_1.jsonl")
    assert payloads["pre-compact"]["transcript_path"] == path
    assert payloads["stop"]["transcript_path"] == path
    assert payloads["stop"]["last_assistant_message"] == "Done.\n## Key Learnings\n- cents"
    assert payloads["prompt"]["transcript_path"] == path  # a prompt after an answer: the nudge
    assert seen["written"]["mode"] == 0o600
    lines = [json.loads(line) for line in seen["written"]["text"].splitlines()]
    output = lines[1]["parts"][1]["state"].pop("output")
    assert output == "E" * 65536 + " …"
    messages[1]["parts"][1]["state"].pop("output")
    assert lines[-1]["parts"][-1]["text"] == "Done.\n## Key Learnings\n- cents"  # filled in
    answer["text"] = "Done.\n## Key Learnings\n- cents"
    assert lines == messages
    assert seen["removed"]  # the session deleted in OpenCode: its file goes too
    assert not stale.exists() and recent.exists()  # files of sessions long untouched go
    assert sorted(p.name for p in folder.iterdir()) == ["ses_recent.jsonl"]  # no temp left


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_opencode_plugin_without_engram_says_so_once(repo: Path, bare_path: str) -> None:
    agents.setup("opencode", root=repo)
    seen = drive(repo / ".opencode/plugins/engram.js", repo, bare_path)
    line = agents.missing_line("engram")
    assert seen["toasts"] == [{"message": line, "variant": "warning"}]
    assert seen["system"] == ["base", line]
    assert seen["read"] == "1: def total():"


def test_opencode_hook_side_answers_the_plugins_payloads(repo: Path) -> None:
    """`engram hook opencode …` with the payloads the plugin sends, on a real store."""
    engram, _ = Engram.init(repo, "demo")
    with engram:
        engram.remember(
            "Billing rounds in integer cents",
            "Floats lost a cent on JPY totals.",
            kind="pitfall",
            files=["src/billing.py"],
        )
    env = {"ENGRAM_DAEMON": "off"}
    start = {"hook_event_name": "session.created", "cwd": str(repo), "session_id": "ses_1"}
    done = run_cli("hook", "opencode", "session-start", stdin=json.dumps(start).encode(), env=env)
    assert done.returncode == 0, done.stderr
    briefing = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Billing rounds in integer cents" in briefing
    read = {
        "hook_event_name": "tool.execute.before",
        "cwd": str(repo),
        "session_id": "ses_1",
        "tool_name": "read",
        "tool_input": {"filePath": f"{repo}/src/billing.py", "file_path": f"{repo}/src/billing.py"},
    }
    done = run_cli("hook", "opencode", "pre-read", stdin=json.dumps(read).encode(), env=env)
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Billing rounds in integer cents" in context and "src/billing.py" in context
