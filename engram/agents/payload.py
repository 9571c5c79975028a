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
  File:``, ``*** Delete File:`` and ``*** Move to:`` lines name the files, relative to ``cwd``.
- Gemini CLI: ``cwd``, ``session_id``, ``transcript_path``; AfterTool ``tool_name`` (write_file,
  replace) and ``tool_input.file_path``; AfterAgent ``prompt_response``; SessionStart ``source``.
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
_PATH_KEYS: Final = ("file_path", "notebook_path", "path", "absolute_path")


class PayloadError(ValueError):
    """The standard input is not a hook payload (not JSON, not an object, too large)."""


class Event:
    """One hook call: where, which session, and what it is about."""

    __slots__ = ("cwd", "files", "message", "nested", "session_id", "transcript")

    def __init__(
        self,
        cwd: str,
        *,
        session_id: str = "",
        files: tuple[str, ...] = (),  # as the agent sent them
        message: str = "",  # the agent's last answer (stop events)
        nested: bool = False,  # a stop hook already running for this stop (do nothing twice)
        transcript: str = "",  # the session's transcript file (a subagent's own when given)
    ) -> None:
        self.cwd = cwd
        self.session_id = session_id
        self.files = files
        self.message = message
        self.nested = nested
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
    """Return the folder the agent works in (the payload's ``cwd``, else the hook's own)."""
    return _text(payload.get("cwd")) or fallback_cwd


def event_of(payload: Mapping[str, Any], *, fallback_cwd: str) -> Event:
    """Return the event a payload describes (every agent's field names are read).

    A stop payload without the last message has it read from the transcript's tail, so this is
    done once, where the hook is answered (the daemon, or the hook's own process).
    """
    cwd = cwd_of(payload, fallback_cwd=fallback_cwd)
    tool_input = payload.get("tool_input")
    files = files_of(tool_input) if isinstance(tool_input, Mapping) else []
    message = _text(payload.get("last_assistant_message")) or _text(payload.get("prompt_response"))
    transcript = _text(payload.get("agent_transcript_path")) or _text(
        payload.get("transcript_path")
    )
    if not message and payload.get("hook_event_name") in ("Stop", "SubagentStop") and transcript:
        message = last_assistant_text(transcript)
    return Event(
        cwd=cwd,
        session_id=_text(payload.get("session_id")),
        files=tuple(files),
        message=message,
        nested=payload.get("stop_hook_active") is True,
        transcript=transcript,
    )


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
