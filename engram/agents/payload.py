"""What a hook call says, read from the JSON an agent sends on standard input.

Each agent documents its own payload; this module turns one into an ``Event``: the folder the
agent works in, its session id, the files a tool call is about to touch (or just touched), the
text of its last answer, and how the session started. Pure: it reads the payload and, for the
last answer when the payload lacks it, the tail of the transcript file the payload names. It
imports only the standard library's cheapest modules: a hook process the daemon answers loads
this, ``engram.agents.hookspec`` and little else.

Payloads, from the agents' hook references:

- Claude Code: ``cwd``, ``session_id``, ``transcript_path``, ``hook_event_name``; SessionStart
  has ``source`` (startup, resume, clear, compact); PreToolUse ``tool_name`` and ``tool_input``
  (Write and Edit ``file_path``, MultiEdit ``file_path`` and ``edits``, NotebookEdit
  ``notebook_path``), paths absolute; Stop and SubagentStop ``last_assistant_message`` (older
  versions only the transcript, a JSON line per entry); SessionEnd ``reason``.
- Codex: the same common fields; PreToolUse ``apply_patch`` (also matched as Edit or Write)
  carries the patch text in ``tool_input.command``, whose ``*** Add File:``, ``*** Update
  File:``, ``*** Delete File:`` and ``*** Move to:`` lines name the files, relative to ``cwd``;
  UserPromptSubmit ``prompt``; PreToolUse on a shell tool (``Bash``, ``shell``, ``exec_command``
  …) ``tool_input.command`` as a string or an argument list: a patch applied through the shell
  names its files as ``apply_patch`` does, a command that prints files (``cat``, ``sed -n``,
  ``head``, ``nl`` …) names those that exist; PostToolUse ``tool_response`` (the command's
  output, a string or an object) says its exit code.
- Claude Code, besides: PreToolUse ``Read`` ``tool_input.file_path``; ``Task``/``Agent``
  ``tool_input.prompt`` and ``subagent_type``; SubagentStart ``agent_type``; PostToolUseFailure
  ``error``; PreCompact ``trigger`` and ``transcript_path``.
- Gemini CLI: ``cwd``, ``session_id``, ``transcript_path``; BeforeTool and AfterTool ``tool_name``
  (read_file, write_file, replace, run_shell_command) and ``tool_input.file_path``; AfterTool
  ``tool_response`` (``llmContent``, ``error``; a shell command's ``Exit Code: N`` line);
  BeforeAgent ``prompt``; AfterAgent ``prompt_response``; SessionStart ``source``; PreCompress
  ``trigger``.
- Cursor: ``conversation_id`` (``session_id`` at sessionStart), ``workspace_roots`` (no
  ``cwd``), ``hook_event_name``; preToolUse and postToolUse ``tool_name`` and ``tool_input``;
  afterAgentResponse ``text``; preCompact ``transcript_path``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping

TYPE_CHECKING = False  # typing costs a hook process 10 ms: annotations only (mypy reads this)
if TYPE_CHECKING:
    from typing import Any, Final

MAX_PAYLOAD: Final = 32 * 1024 * 1024  # a Write of a large file carries its whole content
TRANSCRIPT_TAIL: Final = 256 * 1024  # bytes read from the end of a transcript, at most
MAX_TRANSCRIPT: Final = 4 * 1024 * 1024 * 1024  # a longer "transcript" is no agent's: refused
MAX_FILES: Final = 64  # files of one tool call that are checked
_PATCH_FILE: Final = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$")
_PATH_KEYS: Final = (
    "file_path",
    "notebook_path",
    "path",
    "absolute_path",
    "target_file",  # Cursor
    "filePath",  # OpenCode's tool arguments, as a plugin passes them on
)
# Programs that print the files named in their arguments: a shell read of a file.
READERS: Final = frozenset(
    ("cat", "head", "tail", "sed", "nl", "less", "more", "bat", "batcat", "view", "awk", "wc")
)
MAX_READS: Final = 16  # files of one shell command taken as read
_EXIT: Final = re.compile(r"(?im)^\s*(?:exit code|process exited with code)[:\s]+(-?\d+)")
_ERROR_LINE: Final = re.compile(
    r"(?i)error|exception|traceback|failed|failure|fatal|panic|assert|denied|not found"
)
ERROR_CHARS: Final = 400  # characters of a failure's text recalled for
# Context hooks added earlier, as Gemini CLI 0.61 puts it ahead of the person's words in a
# BeforeAgent ``prompt`` (the briefing among it): never the person's own text.
_HOOK_CONTEXT: Final = re.compile(r"(?is)<hook_context>.*?(?:</hook_context>|\Z)")


class PayloadError(ValueError):
    """The standard input is not a hook payload (not JSON, not an object, too large)."""


class Event:
    """One hook call: where, which session, and what it is about."""

    __slots__ = (
        "agent_id",
        "agent_type",
        "cwd",
        "error",
        "files",
        "message",
        "native",
        "nested",
        "prompt",
        "session_id",
        "shell",
        "source",
        "task",
        "tool",
        "transcript",
    )

    def __init__(
        self,
        cwd: str,
        *,
        session_id: str = "",
        files: tuple[str, ...] = (),  # as the agent sent them
        message: str = "",  # the agent's last answer (stop events)
        nested: bool = False,  # a stop hook already running for this stop (do nothing twice)
        native: str = "",  # the payload's hook_event_name: what the reply must name
        tool: str = "",  # the tool a tool event is about
        shell: str = "",  # a shell command's files are a patch's ("patch") or printed ("read")
        prompt: str = "",  # the person's prompt (prompt events)
        error: str = "",  # a failed tool call's error text ('' when it did not fail)
        source: str = "",  # how a session started (startup, resume, clear, compact) or compacts
        agent_type: str = "",  # the subagent's type (subagent start), the task's (Task tool)
        task: str = "",  # the text of the task a Task tool call gives a subagent
        agent_id: str = "",  # the subagent a hook runs in (its tool calls have their own ledger)
        transcript: str = "",  # the session's transcript file (a subagent's own when given)
    ) -> None:
        self.cwd = cwd
        self.session_id = session_id
        self.files = files
        self.message = message
        self.nested = nested
        self.native = native
        self.tool = tool
        self.shell = shell
        self.prompt = prompt
        self.error = error
        self.source = source
        self.agent_type = agent_type
        self.task = task
        self.agent_id = agent_id
        self.transcript = transcript


def parse(data: bytes) -> dict[str, Any]:
    """Return the payload object of a hook's standard input."""
    if len(data) > MAX_PAYLOAD:
        raise PayloadError(f"hook payload of {len(data)} bytes is larger than {MAX_PAYLOAD}")
    try:
        payload = json.loads(data.decode("utf-8", errors="replace") or "null")
    except ValueError as exc:
        raise PayloadError(f"hook payload is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise PayloadError("hook payload is not a JSON object")
    return payload


def cwd_of(payload: Mapping[str, Any], *, fallback_cwd: str) -> str:
    """Return the folder the agent works in (``cwd``, Cursor's first workspace root, else the
    hook's own)."""
    roots = payload.get("workspace_roots")
    first = roots[0] if isinstance(roots, list) and roots else None
    return _text(payload.get("cwd")) or _text(first) or fallback_cwd


def event_of(payload: Mapping[str, Any], *, fallback_cwd: str) -> Event:
    """Return the event a payload describes (every agent's field names are read).

    A stop or compaction payload without the last message has it read from the transcript's
    tail, so this is done once, where the hook is answered (the daemon, or the hook's own
    process).
    """
    cwd = cwd_of(payload, fallback_cwd=fallback_cwd)
    native = _text(payload.get("hook_event_name"))
    tool = _text(payload.get("tool_name"))
    tool_input = payload.get("tool_input")
    if isinstance(tool_input, str):  # Cursor's MCP calls send their input as JSON text
        try:
            tool_input = json.loads(tool_input)
        except ValueError:
            tool_input = None
    files: list[str] = []
    shell = ""
    task = agent_type = ""
    if isinstance(tool_input, Mapping):
        command = _command_text(tool_input)
        if command:
            files, shell = shell_files(command, cwd)
        if not shell:
            files = files_of(tool_input)
        task = _text(tool_input.get("prompt"))
        agent_type = _text(tool_input.get("subagent_type"))
    message = (
        _text(payload.get("last_assistant_message"))
        or _text(payload.get("prompt_response"))
        or (_text(payload.get("text")) if native == "afterAgentResponse" else "")
    )
    transcript = _text(payload.get("agent_transcript_path")) or _text(
        payload.get("transcript_path")
    )
    if not message and native in _TRANSCRIPT_EVENTS:
        message = last_assistant_text(transcript) if transcript else ""
    return Event(
        cwd=cwd,
        session_id=_text(payload.get("session_id")) or _text(payload.get("conversation_id")),
        files=tuple(files),
        message=message,
        nested=payload.get("stop_hook_active") is True,
        native=native,
        tool=tool,
        shell=shell,
        prompt=prompt_text(payload.get("prompt")) if "tool_name" not in payload else "",
        error=failure_text(payload),
        source=_text(payload.get("source")) or _text(payload.get("trigger")),
        agent_type=_text(payload.get("agent_type")) or agent_type,
        task=task,
        agent_id=_text(payload.get("agent_id")) if native != "SubagentStart" else "",
        transcript=transcript,
    )


# The events whose last answer is read from the transcript when the payload lacks it.
_TRANSCRIPT_EVENTS: Final = frozenset(
    ("Stop", "SubagentStop", "PreCompact", "PreCompress", "preCompact")
)


def _command_text(tool_input: Mapping[str, Any]) -> str:
    """Return a shell tool's command as one text (an argument list joined, ``bash -lc X``: X)."""
    command = tool_input.get("command", tool_input.get("cmd"))
    if isinstance(command, list):
        parts = [str(part) for part in command]
        if len(parts) >= 3 and parts[-2] in ("-c", "-lc", "-ic"):
            return parts[-1]
        return " ".join(parts)
    return command if isinstance(command, str) else ""


def shell_files(command: str, cwd: str) -> tuple[list[str], str]:
    """Return the files a shell command patches ("patch") or prints ("read"), and which.

    A patch applied through the shell (``apply_patch <<EOF`` with the patch text) names its
    files as ``apply_patch`` does; otherwise each simple command run by a reader (``READERS``)
    names the arguments that are files under ``cwd`` (an option or a sed script is not one).
    """
    if "*** Begin Patch" in command:
        return list(dict.fromkeys(patch_files(command)))[:MAX_FILES], "patch"
    import shlex

    found: list[str] = []
    for part in re.split(r"&&|\|\||;|\||\n", command):
        try:
            words = shlex.split(part, posix=True)
        except ValueError:
            continue  # an unclosed quote: nothing taken from this part
        if not words or os.path.basename(words[0]) not in READERS:
            continue
        for word in words[1:]:
            if word.startswith("-") or word.startswith(("<", ">")) or len(word) > 4096:
                continue
            if os.path.isfile(absolute(word, cwd)):
                found.append(word)
    unique = list(dict.fromkeys(found))[:MAX_READS]
    return unique, "read" if unique else ""


def prompt_text(value: Any) -> str:
    """Return the person's prompt: the payload's text without the hooks' context blocks."""
    text = _text(value)
    return _HOOK_CONTEXT.sub("", text).strip() if "<hook_context>" in text.lower() else text


def failure_text(payload: Mapping[str, Any]) -> str:
    """Return the error text of a failed tool call ('' when the call did not fail).

    Claude Code's PostToolUseFailure ``error``, Cursor's ``error_message``; Gemini CLI's
    AfterTool ``tool_response.error`` or a shell command's ``Exit Code: N`` (N not 0); Codex's
    PostToolUse ``tool_response`` with an exit code that is not 0 (in the response, or for
    Codex 0.171's plain output in its rollout: ``codex_exit_code``). Clipped to its last lines
    that say what failed, ERROR_CHARS at most.
    """
    text = _text(payload.get("error")) or _text(payload.get("error_message"))
    if text:
        return error_query(text)
    response = payload.get("tool_response")
    if isinstance(response, Mapping):
        error = response.get("error")
        if isinstance(error, Mapping):
            error = error.get("message")
        if isinstance(error, str) and error.strip():
            return error_query(error)
        code = response.get("exit_code", response.get("exitCode"))
        body = "\n".join(
            str(response.get(key) or "")
            for key in ("llmContent", "output", "aggregated_output", "stdout", "stderr")
        )
        if isinstance(code, int) and not isinstance(code, bool):
            return error_query(body or f"exit code {code}") if code != 0 else ""
        response = body
    if isinstance(response, str):
        found = _EXIT.search(response)
        if found:
            return error_query(response) if int(found.group(1)) != 0 else ""
        if isinstance(payload.get("tool_response"), str):  # Codex: the command's output only
            code = codex_exit_code(payload)
            if code is not None and code != 0:
                return error_query(response or f"exit code {code}")
    return ""


def codex_exit_code(payload: Mapping[str, Any]) -> int | None:
    """Return the exit code of the Codex command a PostToolUse payload is about (None: unknown).

    Codex 0.171 sends a shell command's output alone as ``tool_response``; the code is in its
    session's rollout (``transcript_path``), which records the finished command (its
    ``item_completed`` event, the item's ``id`` the payload's ``tool_use_id``) before the hook
    runs. Only the rollout's last TRANSCRIPT_TAIL bytes are read.
    """
    from engram.errors import InvalidInput
    from engram.fileio import read_regular

    call = _text(payload.get("tool_use_id"))
    transcript = _text(payload.get("transcript_path"))
    if not call or not transcript or not os.path.lexists(transcript):
        return None
    try:
        tail = read_regular(
            transcript, limit=MAX_TRANSCRIPT, tail=TRANSCRIPT_TAIL, what="transcript_path"
        )
    except InvalidInput:
        return None  # a hook answers nothing rather than fail on an unreadable rollout
    needle = call.encode("utf-8", "replace")
    for line in reversed(tail.splitlines()):
        if needle not in line or b"exit_code" not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        inner = entry.get("payload") if isinstance(entry, Mapping) else None
        item = inner.get("item") if isinstance(inner, Mapping) else None
        if isinstance(item, Mapping) and item.get("id") == call:
            code = item.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool):
                return code
    return None


def error_query(text: str) -> str:
    """Return what of an error's text is recalled for: the last lines that name the failure."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    named = [line for line in lines if _ERROR_LINE.search(line) and not _EXIT.match(line)]
    chosen = (named or lines)[-3:]
    joined = " ".join(chosen)
    return joined[-ERROR_CHARS:]


def files_of(tool_input: Mapping[str, Any]) -> list[str]:
    """Return the files a tool call's input names, in order, each once (at most MAX_FILES)."""
    found: list[str] = []
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            found.append(value.strip())
    for key in ("command", "patch", "input"):
        value = tool_input.get(key)
        if isinstance(value, str) and "*** Begin Patch" in value:
            found += list(patch_files(value))
    edits = tool_input.get("edits")
    if isinstance(edits, list):  # an edit list may name its own files (other agents' tools)
        for edit in edits:
            if isinstance(edit, Mapping):
                found += [str(edit[k]).strip() for k in _PATH_KEYS if isinstance(edit.get(k), str)]
    unique = list(dict.fromkeys(path for path in found if path))
    return unique[:MAX_FILES]


def patch_files(patch: str) -> Iterator[str]:
    """Yield the files a Codex ``apply_patch`` text adds, updates, deletes or moves to."""
    for line in patch.splitlines():
        match = _PATCH_FILE.match(line.rstrip("\r"))
        if match:
            yield (match.group(1) or match.group(2)).strip()


def absolute(path: str, cwd: str) -> str:
    """Return a path the agent sent as an absolute one, taken from the agent's folder."""
    text = path.replace("\\", "/") if os.sep == "/" else path
    if os.path.isabs(text):
        return text
    return os.path.join(cwd, text)


def last_assistant_text(transcript: str | os.PathLike[str]) -> str:
    """Return the text of the last assistant message in a JSON-lines transcript ('' if none).

    The path comes from the payload: a named pipe, a device or a file over MAX_TRANSCRIPT
    raises PayloadError naming it; only the last TRANSCRIPT_TAIL bytes are read.
    """
    from engram.errors import InvalidInput
    from engram.fileio import read_regular

    if not os.path.lexists(transcript):
        return ""  # not written yet (a session that said nothing)
    try:
        tail = read_regular(
            transcript,
            limit=MAX_TRANSCRIPT,
            tail=TRANSCRIPT_TAIL,
            what=f"transcript_path {os.fspath(transcript)}",
        )
    except InvalidInput as exc:
        raise PayloadError(exc.message) from exc
    for line in reversed(tail.splitlines()):
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # the first line of the tail may be cut
        text = _assistant_text(entry)
        if text:
            return text
    return ""


def _assistant_text(entry: Any) -> str:
    if not isinstance(entry, Mapping):
        return ""
    message = entry.get("message")
    if entry.get("type") != "assistant" or not isinstance(message, Mapping):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [
        str(part.get("text") or "")
        for part in content
        if isinstance(part, Mapping) and part.get("type") == "text"
    ]
    return "\n".join(part for part in parts if part)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""
