"""The hooks engram installs in each agent, declared once: setup writes, ``engram hook`` runs.

Each ``HookSpec`` is one hook as the agent's hooks reference documents it: the event in the
agent's settings, its matcher, how long the agent waits (seconds) and what ``engram hook AGENT
EVENT`` does there (``brief``, ``check``, ``capture`` or ``end``). ``engram.agents`` writes them
into the agents' settings files and ``engram.hooks`` answers them; every command reads the
agent's JSON payload on stdin, prints only what the agent reads, and exits 0. ``legacy`` names
the commands of earlier setups that a hook replaces in place. Pure data, and cheap to import
(no dataclasses, no typing at run time): every hook process reads it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a hook process 10 ms: annotations only (mypy reads this)
if TYPE_CHECKING:
    from typing import Final


class HookSpec:
    """One hook engram installs for an agent: its event there and what engram does then."""

    __slots__ = ("action", "agent", "event", "legacy", "matcher", "native", "timeout")

    def __init__(
        self,
        agent: str,
        event: str,  # engram's name: the second argument of `engram hook AGENT EVENT`
        native: str,  # the agent's event name in its settings file
        matcher: str | None,
        timeout: int,  # seconds the agent waits for the hook
        action: str,  # brief, check, capture or end
        legacy: tuple[str, ...] = (),
    ) -> None:
        self.agent = agent
        self.event = event
        self.native = native
        self.matcher = matcher
        self.timeout = timeout
        self.action = action
        self.legacy = legacy

    def __repr__(self) -> str:
        return f"HookSpec({self.agent!r}, {self.event!r}, {self.native!r})"


_EDITS: Final = "Edit|Write|MultiEdit|NotebookEdit"
_CURSOR_EDITS: Final = "Write|Edit|MultiEdit|StrReplace|Delete"
_OPENCODE_EDITS: Final = "edit|write|patch|multiedit|apply_patch"
HOOKS: Final = (
    HookSpec(
        "claude-code",
        "session-start",
        "SessionStart",
        "startup|resume|clear|compact",
        30,
        "brief",
        ("engram context",),
    ),
    HookSpec("claude-code", "pre-edit", "PreToolUse", _EDITS, 10, "check", ("engram check",)),
    HookSpec("claude-code", "stop", "Stop", None, 30, "capture"),
    HookSpec("claude-code", "subagent-stop", "SubagentStop", None, 30, "capture"),
    HookSpec("claude-code", "session-end", "SessionEnd", None, 15, "end"),
    HookSpec("codex", "session-start", "SessionStart", "startup|resume|clear|compact", 30, "brief"),
    HookSpec("codex", "pre-edit", "PreToolUse", "apply_patch|Edit|Write", 10, "check"),
    HookSpec("codex", "stop", "Stop", None, 30, "capture"),
    HookSpec("codex", "subagent-stop", "SubagentStop", None, 30, "capture"),
    HookSpec("gemini-cli", "session-start", "SessionStart", "startup|resume|clear", 30, "brief"),
    HookSpec("gemini-cli", "post-edit", "AfterTool", "write_file|replace", 10, "check"),
    HookSpec("gemini-cli", "stop", "AfterAgent", None, 30, "capture"),
    HookSpec("gemini-cli", "session-end", "SessionEnd", None, 15, "end"),
    HookSpec("cursor", "session-start", "sessionStart", None, 30, "brief"),
    # beforeReadFile answers allow or deny only: the read's findings follow it in postToolUse.
    HookSpec("cursor", "post-read", "postToolUse", "Read", 10, "read"),
    HookSpec("cursor", "pre-edit", "preToolUse", _CURSOR_EDITS, 10, "edit"),
    HookSpec("cursor", "post-edit", "postToolUse", _CURSOR_EDITS, 10, "edit"),
    HookSpec("cursor", "pre-compact", "preCompact", None, 30, "capture"),
    HookSpec("cursor", "stop", "afterAgentResponse", None, 30, "capture"),
    # OpenCode's plugin events (engram.agents.opencode runs these from its plugin file).
    HookSpec("opencode", "session-start", "session.created", None, 30, "brief"),
    HookSpec("opencode", "prompt", "chat.message", None, 15, "prompt"),
    HookSpec("opencode", "pre-read", "tool.execute.before", "read", 10, "check"),
    HookSpec("opencode", "pre-edit", "tool.execute.before", _OPENCODE_EDITS, 10, "check"),
    HookSpec("opencode", "pre-compact", "experimental.session.compacting", None, 30, "capture"),
    HookSpec("opencode", "stop", "session.idle", None, 30, "capture"),
)
HOOK_AGENTS: Final = tuple(dict.fromkeys(spec.agent for spec in HOOKS))


def hook_spec(agent: str, event: str) -> HookSpec | None:
    """Return the hook engram installs for ``agent`` at ``event`` (None if there is none)."""
    for spec in HOOKS:
        if spec.agent == agent and spec.event == event:
            return spec
    return None
