"""The shell commands ``engram setup`` writes into the agents' hooks, and their matchers.

Each hook runs ``engram hook AGENT EVENT``, guarded: where the program cannot be started, the
session-start hook prints one line the agent shows the person (and tells the model that the
tools are missing), in the JSON shape that agent reads; every other hook does nothing. A
matcher is written as the agent compares it (Gemini CLI's lifecycle events: exact strings).
Pure: it renders text.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Final

from engram.agents.hookspec import HookSpec

# Gemini CLI's lifecycle events and every trigger each fires with (its SessionStartSource,
# SessionEndReason and PreCompressTrigger): it compares a matcher there as one exact string.
GEMINI_TRIGGERS: Final = {
    "SessionStart": ("startup", "resume", "clear"),
    "SessionEnd": ("exit", "clear", "logout", "prompt_input_exit", "other"),
    "PreCompress": ("manual", "auto"),
}


def hook_command(prefix: Sequence[str], spec: HookSpec) -> str:
    """Return the shell command of a hook: engram's, skipped where engram cannot be started.

    Where the program is missing, the session-start hook prints instead one line the agent
    shows the person (and tells the model the tools are missing); every other hook does nothing.
    """
    program = shlex.quote(prefix[0])
    notice = missing_notice(spec, prefix[0])
    fallback = f"{{ printf '%s\\n' {shlex.quote(notice)}; exit 0; }}" if notice else "exit 0"
    return (
        f"command -v {program} >/dev/null 2>&1 || {fallback}; "
        f"{shlex.join([*prefix, 'hook', spec.agent, spec.event])}"
    )


def missing_line(program: str) -> str:
    """Return the line that says engram cannot be started (shown once per session)."""
    return (
        f"engram: `{program}` cannot be run here (not on PATH, or not executable): the engram "
        "hooks do nothing and its MCP tools are missing in this session; install engram "
        "(pip install engram-git) or run `engram setup` again where it is installed"
    )


def missing_notice(spec: HookSpec, program: str) -> str:
    """Return what a session-start hook prints when engram cannot start ('' for other hooks)."""
    if spec.action != "brief":
        return ""
    line = missing_line(program)
    model = (
        "The engram memory tools named in the instructions of this project are not available "
        "in this session (engram is not installed here): work without them."
    )
    if spec.agent == "cursor":  # sessionStart adds context only
        return json.dumps({"additional_context": f"{line}\n{model}"})
    if spec.agent in ("claude-code", "codex", "gemini-cli"):
        return json.dumps(
            {
                "systemMessage": line,
                "hookSpecificOutput": {"hookEventName": spec.native, "additionalContext": model},
            }
        )
    return ""


def native_matcher(spec: HookSpec) -> str | None:
    """Return the matcher setup writes for a hook, as the agent compares it.

    Gemini CLI tests a tool event's matcher as a regular expression, but a lifecycle event's
    (SessionStart, SessionEnd, PreCompress) as one exact string against the trigger: there an
    alternation ``a|b`` would never match, so several triggers are written as no matcher (every
    trigger; HOOKS lists them all, a test holds it) and one trigger as itself.
    """
    matcher = spec.matcher
    if spec.agent == "gemini-cli" and spec.native in GEMINI_TRIGGERS and matcher:
        return None if "|" in matcher else matcher
    return matcher
