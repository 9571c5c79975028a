"""The hooks engram installs in each agent, declared once: setup writes, ``engram hook`` runs.

Each ``HookSpec`` is one hook as the agent's hooks reference documents it: the event in the
agent's settings, its matcher, how long the agent waits (seconds) and what ``engram hook AGENT
EVENT`` does there (its ``action``, listed above ``HOOKS``). ``engram.agents`` writes them
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
        action: str,  # brief, read, edit, tool, task, subagent, prompt, failure, capture, end
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


# Actions (what `engram hook AGENT EVENT` does, engram.agents.answer):
#   brief    the briefing (session start, and after compaction: the session's ledger restarts)
#   read     the pitfalls and decisions of the files a tool call reads, once per file per session
#   edit     the same at a write, for the files not shown yet; a blocking pitfall (pinned, or
#            importance 5) makes the write ask the person where the agent can ask; where the
#            model would read them only after the write (Codex, Gemini CLI, OpenCode), the
#            write is denied once with them as the reason (reply.STOPS)
#   tool     a shell command: the files of a patch it applies (edit) or of a file it prints (read)
#   task     a subagent's task noted for the subagent-start hook (nothing printed)
#   subagent the memories for the files a subagent's task names, and recall for its text
#   prompt   recall for the prompt's text and the files it names, above the relevance floor
#   failure  recall for the error of a failed command (nothing when the command succeeded)
#   capture  the learnings of the last answer saved (stop, subagent stop, before compaction)
#   end      the session closed
_CLAUDE_EDITS: Final = "Edit|Write|MultiEdit|NotebookEdit"
_CODEX_SHELL: Final = "Bash|shell|shell_command|exec_command|local_shell|container.exec"
_GEMINI_EDITS: Final = "write_file|replace"
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
    HookSpec("claude-code", "prompt", "UserPromptSubmit", None, 15, "prompt"),
    HookSpec("claude-code", "pre-read", "PreToolUse", "Read", 10, "read"),
    HookSpec("claude-code", "pre-edit", "PreToolUse", _CLAUDE_EDITS, 10, "edit", ("engram check",)),
    HookSpec("claude-code", "pre-task", "PreToolUse", "Task|Agent", 10, "task"),
    HookSpec("claude-code", "subagent-start", "SubagentStart", None, 15, "subagent"),
    HookSpec("claude-code", "tool-failure", "PostToolUseFailure", "Bash", 10, "failure"),
    HookSpec("claude-code", "pre-compact", "PreCompact", None, 30, "capture"),
    HookSpec("claude-code", "stop", "Stop", None, 30, "capture"),
    HookSpec("claude-code", "subagent-stop", "SubagentStop", None, 30, "capture"),
    HookSpec("claude-code", "session-end", "SessionEnd", None, 15, "end"),
    HookSpec("codex", "session-start", "SessionStart", "startup|resume|clear|compact", 30, "brief"),
    HookSpec("codex", "prompt", "UserPromptSubmit", None, 15, "prompt"),
    HookSpec("codex", "pre-edit", "PreToolUse", "apply_patch|Edit|Write", 10, "edit"),
    HookSpec("codex", "pre-shell", "PreToolUse", _CODEX_SHELL, 10, "tool"),
    HookSpec("codex", "post-shell", "PostToolUse", _CODEX_SHELL, 10, "failure"),
    HookSpec("codex", "stop", "Stop", None, 30, "capture"),
    HookSpec("codex", "subagent-stop", "SubagentStop", None, 30, "capture"),
    # Gemini CLI compares a lifecycle matcher as one exact string: none, so every source fires.
    HookSpec("gemini-cli", "session-start", "SessionStart", None, 30, "brief"),
    HookSpec("gemini-cli", "prompt", "BeforeAgent", None, 15, "prompt"),
    # BeforeTool cannot add context (Gemini CLI reads it from AfterTool only): the read's
    # findings are appended to the file's contents, in the result the model edits from.
    HookSpec("gemini-cli", "post-read", "AfterTool", "read_file|read_many_files", 10, "read"),
    HookSpec("gemini-cli", "pre-edit", "BeforeTool", _GEMINI_EDITS, 10, "edit"),
    HookSpec("gemini-cli", "post-edit", "AfterTool", _GEMINI_EDITS, 10, "edit"),
    HookSpec("gemini-cli", "tool-failure", "AfterTool", "run_shell_command", 10, "failure"),
    HookSpec("gemini-cli", "pre-compress", "PreCompress", None, 30, "capture"),
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
    HookSpec("opencode", "pre-read", "tool.execute.before", "read", 10, "read"),
    HookSpec("opencode", "pre-edit", "tool.execute.before", _OPENCODE_EDITS, 10, "edit"),
    HookSpec("opencode", "tool-failure", "tool.execute.after", "bash", 10, "failure"),
    HookSpec("opencode", "pre-compact", "experimental.session.compacting", None, 30, "capture"),
    HookSpec("opencode", "stop", "experimental.text.complete", None, 30, "capture"),
)
HOOK_AGENTS: Final = tuple(dict.fromkeys(spec.agent for spec in HOOKS))


def hook_spec(agent: str, event: str) -> HookSpec | None:
    """Return the hook engram installs for ``agent`` at ``event`` (None if there is none)."""
    for spec in HOOKS:
        if spec.agent == agent and spec.event == event:
            return spec
    return None
