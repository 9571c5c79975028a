"""Reading an agent's own transcript into one list of steps, whatever the agent.

Three on-disk formats, as the agents' programs write them:

- Claude Code: ``~/.claude/projects/<slug>/<session>.jsonl`` (the hook payload's
  ``transcript_path``). One entry per line with ``type`` user or assistant and ``message`` (the
  API message): text, ``tool_use`` blocks (Bash, Edit, MultiEdit, Write, NotebookEdit …) and, in
  the user entry that follows, ``tool_result`` blocks with ``is_error``; a failed Bash answers
  "Exit code N" and its output.
- Codex: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session>.jsonl``. ``{"timestamp",
  "type", "payload"}`` lines: ``event_msg`` user_message and agent_message, ``response_item``
  message, function_call (``exec_command`` with ``cmd``, or the older ``shell`` with a
  ``command`` list) and its function_call_output ("Process exited with code N", or JSON with
  ``metadata.exit_code``), ``exec_command_end`` with ``exit_code``, and ``apply_patch`` (a
  custom or function call) whose patch names the files and their changed lines.
- Gemini CLI: ``~/.gemini/tmp/<project-hash>/chats/session-*.jsonl``: a metadata line, message
  records (``type`` user or gemini, ``content``, ``toolCalls`` with ``name``, ``args`` and
  ``result``; a later record with the same ``id`` replaces it; ``$rewindTo`` drops what follows),
  ``$set`` updates; older versions wrote one JSON object with ``messages``. run_shell_command's
  output says "Exit Code: N" when the command failed.
- OpenCode: ``.engram/state/opencode/<session>.jsonl`` of the project, written by engram's
  OpenCode plugin (``engram.agents.opencode``) from ``client.session.messages``: one line per
  message, ``{"info", "parts"}`` as OpenCode's SDK gives them. ``info`` has ``role`` user or
  assistant, ``sessionID`` and (assistant) ``path.cwd``; ``summary: true`` marks a compaction's
  summary. Parts: ``text`` (``synthetic`` and ``ignored`` ones are OpenCode's own), and ``tool``
  with ``tool`` and ``state`` (``status`` pending, running, completed or error; ``input``;
  ``output``; ``metadata``): ``bash`` with ``input.command`` and ``metadata.exit``, ``edit``
  (``filePath``, ``oldString``, ``newString``), ``write`` (``filePath``, ``content``),
  ``multiedit`` (``edits``) and ``apply_patch`` (``patchText``, the Codex patch format). A tool
  call that ended in ``error`` (denied, stopped by a hook, not applied) did not happen.
  ``opencode run`` quotes a prompt that holds a space: the quotes are taken off.

A transcript is untrusted input: at most ``MAX_BYTES`` are read (the tail of a longer one),
lines over ``MAX_LINE`` and lines that do not parse are skipped and counted in ``notes``, and
no more than ``MAX_STEPS`` steps come back. Pure apart from reading the one file; it never
waits on a pipe or a device (``engram.fileio.read_regular``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from engram.errors import InvalidInput
from engram.fileio import read_regular
from engram.model import MAX_DOCUMENT_DEPTH, loads  # bounded: a transcript is untrusted

__all__ = [
    "AGENTS",
    "MAX_BYTES",
    "Step",
    "Transcript",
    "parse_transcript",
    "read_transcript",
]

MAX_BYTES: Final = 16 * 1024 * 1024  # a longer transcript is read from its tail
MAX_LINE: Final = 2 * 1024 * 1024  # one line (a Write of a large file); longer ones are skipped
MAX_STEPS: Final = 20_000
MAX_TEXT: Final = 20_000  # characters of one step's text or output kept
AGENTS: Final = ("claude-code", "codex", "gemini-cli", "opencode")
_EDIT_TOOLS: Final = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
_CLAUDE_EXIT: Final = re.compile(r"^(?:Error: )?Exit code (-?\d+)")
_CODEX_EXIT: Final = re.compile(r"(?:Process exited with code|Exit code:?) (-?\d+)")
_GEMINI_EXIT: Final = re.compile(r"^Exit Code: (-?\d+)", re.MULTILINE)
REFUSED: Final = "refused"  # a tool call that did not happen (denied, failed to apply): dropped
_NOT_RUN: Final = (
    "This command requires approval",
    "<tool_use_error>",
    "The user doesn't want to proceed",
    "Permission to use",
    "[Request interrupted",
)
# What agents add to the person's message themselves: Gemini CLI's session and hook context.
_INJECTED: Final = re.compile(
    r"<(session_context|hook_context|system-reminder)>.*?</\1>\s*|"
    r"<(?:session_context|hook_context|system-reminder)>.*\Z",
    re.DOTALL,
)
_UNTRUSTED: Final = re.compile(r"</?untrusted_context>")
_PATCH_FILE: Final = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$")
# `opencode run MESSAGE…` sends each argument holding a space in double quotes, its own quotes
# escaped: the person's words are inside.
_RUN_QUOTED: Final = re.compile(r'^"((?:[^"\\]|\\.)*)"$', re.DOTALL)


@dataclass
class Step:
    """One thing that happened: the person spoke, the agent spoke, ran a command or edited."""

    kind: str  # user, say, run, edit
    line: int  # the transcript's line (1-based) where it is recorded
    text: str = ""  # user and say: the words; run: the command
    code: int | None = None  # run: the exit status (None: unknown)
    output: str = ""  # run: what it printed
    path: str = ""  # edit: the file as the agent named it
    old: str | None = None  # edit: the text replaced (None: the whole file written)
    new: str = ""  # edit: the text put in its place


@dataclass
class Transcript:
    """An agent's session read from its transcript."""

    agent: str
    path: str
    session_id: str = ""
    cwd: str = ""
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was skipped, and where


def read_transcript(path: str | os.PathLike[str], agent: str = "") -> Transcript:
    """Read a transcript file (agent guessed from its content when not given)."""
    name = os.fspath(path)
    data = read_regular(name, limit=1 << 40, tail=MAX_BYTES, what=f"transcript {name}")
    notes: list[str] = []
    size = os.stat(name).st_size
    if size > MAX_BYTES:
        notes.append(f"{name}: only the last {MAX_BYTES} of {size} bytes read")
        data = data.split(b"\n", 1)[1] if b"\n" in data else b""  # the first line is cut
    out = parse_transcript(data.decode("utf-8", errors="replace"), agent, path=name)
    out.notes[:0] = notes
    return out


def parse_transcript(text: str, agent: str = "", *, path: str = "") -> Transcript:
    """Parse a transcript's text (JSON lines, or Gemini CLI's older single JSON object)."""
    entries, notes = _json_lines(text, path)
    if agent and agent not in AGENTS:
        raise InvalidInput(f"unknown agent {agent!r}; transcripts are read for {', '.join(AGENTS)}")
    agent = agent or _guess(entries)
    out = Transcript(agent=agent, path=path, notes=notes)
    readers = {
        "claude-code": _claude,
        "codex": _codex,
        "gemini-cli": _gemini,
        "opencode": _opencode,
    }
    reader = readers[agent]
    reader(entries, out)
    out.steps = [step for step in out.steps if step.kind != REFUSED]
    if len(out.steps) > MAX_STEPS:
        out.notes.append(f"{path}: only the last {MAX_STEPS} of {len(out.steps)} steps kept")
        del out.steps[:-MAX_STEPS]
    return out


def _json_lines(text: str, path: str) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """Return the transcript's objects with their line numbers, and a note per skipped line."""
    stripped = text.lstrip()
    if stripped.startswith("{") and "\n{" not in stripped.rstrip():
        try:  # Gemini CLI before JSON lines: one object holding every message
            whole = loads(stripped, what=path, max_depth=MAX_DOCUMENT_DEPTH)
        except ValueError:
            whole = None
        if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
            head = {k: v for k, v in whole.items() if k != "messages"}
            rows = [(1, head)] + [(1, m) for m in whole["messages"] if isinstance(m, dict)]
            return rows, []
    entries: list[tuple[int, dict[str, Any]]] = []
    bad: list[int] = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE:
            bad.append(number)
            continue
        try:
            value = loads(line, what=f"{path}:{number}")
        except ValueError:
            bad.append(number)
            continue
        if isinstance(value, dict):
            entries.append((number, value))
        else:
            bad.append(number)
    notes = []
    if bad:
        where = ", ".join(str(n) for n in bad[:5]) + (" …" if len(bad) > 5 else "")
        notes.append(f"{path or 'transcript'}: {len(bad)} unreadable line(s) skipped: {where}")
    return entries, notes


def _guess(entries: list[tuple[int, dict[str, Any]]]) -> str:
    for _, entry in entries[:50]:
        if "payload" in entry and entry.get("type") in (
            "session_meta",
            "response_item",
            "event_msg",
            "turn_context",
        ):
            return "codex"
        if "projectHash" in entry or entry.get("type") == "gemini" or "$set" in entry:
            return "gemini-cli"
        if entry.get("type") in ("user", "assistant") and "message" in entry:
            return "claude-code"
        if isinstance(entry.get("info"), Mapping) and isinstance(entry.get("parts"), list):
            return "opencode"
    return "claude-code"


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " …"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# -- Claude Code ---------------------------------------------------------------------------------


def _claude(entries: list[tuple[int, dict[str, Any]]], out: Transcript) -> None:
    pending: dict[str, list[Step]] = {}
    for number, entry in entries:
        out.session_id = out.session_id or _str(entry.get("sessionId"))
        out.cwd = out.cwd or _str(entry.get("cwd"))
        message = entry.get("message")
        if not isinstance(message, Mapping) or entry.get("isMeta") or entry.get("isSidechain"):
            continue
        content = message.get("content")
        if entry.get("type") == "user":
            if entry.get("isCompactSummary"):
                continue
            if isinstance(content, str):
                _person(out, number, content)
                continue
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, Mapping):
                    continue
                if block.get("type") == "text":
                    _person(out, number, _str(block.get("text")))
                elif block.get("type") == "tool_result":
                    for step in pending.pop(_str(block.get("tool_use_id")), []):
                        _claude_result(step, block)
        elif entry.get("type") == "assistant":
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, Mapping):
                    continue
                if block.get("type") == "text" and _str(block.get("text")).strip():
                    out.steps.append(Step("say", number, text=_clip(block["text"])))
                elif block.get("type") == "tool_use":
                    tool_input = block.get("input")
                    if isinstance(tool_input, Mapping):
                        steps = list(_claude_tool(_str(block.get("name")), tool_input, number))
                        out.steps += steps
                        pending[_str(block.get("id"))] = steps


def _person(out: Transcript, number: int, text: str) -> None:
    """Add the person's words (not the commands, notes and hook context agents record there)."""
    text = _INJECTED.sub("", text).strip()
    if text and not text.startswith(("<command-", "<local-command", "Caveat:", "[Request")):
        out.steps.append(Step("user", number, text=_clip(text)))


def _claude_tool(name: str, tool_input: Mapping[str, Any], number: int) -> Iterator[Step]:
    if name == "Bash":
        yield Step("run", number, text=_clip(_str(tool_input.get("command"))))
    elif name in _EDIT_TOOLS:
        path = _str(tool_input.get("file_path")) or _str(tool_input.get("notebook_path"))
        if name == "Write":
            yield Step("edit", number, path=path, new=_clip(_str(tool_input.get("content"))))
        elif name == "MultiEdit":
            for edit in tool_input.get("edits") or []:
                if isinstance(edit, Mapping):
                    old, new = _str(edit.get("old_string")), _str(edit.get("new_string"))
                    yield Step("edit", number, path=path, old=_clip(old), new=_clip(new))
        elif name == "NotebookEdit":
            yield Step("edit", number, path=path, new=_clip(_str(tool_input.get("new_source"))))
        else:
            old, new = _str(tool_input.get("old_string")), _str(tool_input.get("new_string"))
            yield Step("edit", number, path=path, old=_clip(old), new=_clip(new))


def _claude_result(step: Step, block: Mapping[str, Any]) -> None:
    """Read a tool call's answer: a command's exit status and output; an edit that failed."""
    content = block.get("content")
    if isinstance(content, list):
        content = "\n".join(_str(part.get("text")) for part in content if isinstance(part, Mapping))
    text = _str(content)
    if step.kind == "edit":
        if block.get("is_error") is True:
            step.kind = REFUSED  # not applied: the file was not read first, the text not found
        return
    match = _CLAUDE_EXIT.match(text)
    if match:
        step.code = int(match.group(1))
        text = text[match.end() :].lstrip("\n")
    elif block.get("is_error") is True:
        # Refused or interrupted before it ran ("requires approval", a tool_use_error): it
        # neither failed nor passed, and tells nothing about the code.
        step.kind = REFUSED if text.lstrip().startswith(_NOT_RUN) else step.kind
        step.code = 1
    else:
        step.code = 0
    step.output = _clip(text)


# -- Codex ---------------------------------------------------------------------------------------


def _codex(entries: list[tuple[int, dict[str, Any]]], out: Transcript) -> None:
    calls: dict[str, Step] = {}
    patched: dict[str, list[Step]] = {}  # the edits of each apply_patch call
    said: list[Step] = []  # the assistant's response_item messages
    told: list[Step] = []  # agent_message events (the same words; used when no message item)
    people = 0
    items: list[Step] = []  # the person's response_item messages, when no event says them
    for number, entry in entries:
        payload = entry.get("payload")
        if not isinstance(payload, Mapping):
            continue
        kind, what = entry.get("type"), payload.get("type")
        if kind == "session_meta":
            out.session_id = out.session_id or _str(payload.get("id"))
            out.cwd = out.cwd or _str(payload.get("cwd"))
        elif kind == "event_msg" and what == "user_message":
            people += 1
            _person(out, number, _str(payload.get("message")))
        elif kind == "event_msg" and what == "agent_message":
            told.append(Step("say", number, text=_clip(_str(payload.get("message")))))
        elif kind == "event_msg" and what == "exec_command_end":
            step = calls.get(_str(payload.get("call_id")))
            if step is not None and isinstance(payload.get("exit_code"), int):
                step.code = payload["exit_code"]
                step.output = step.output or _clip(_str(payload.get("aggregated_output")))
        elif kind == "response_item" and what == "message":
            text = "\n".join(
                _str(part.get("text"))
                for part in payload.get("content") or []
                if isinstance(part, Mapping)
            ).strip()
            if payload.get("role") == "assistant" and text:
                said.append(Step("say", number, text=_clip(text)))
            elif payload.get("role") == "user" and text and not text.startswith(("<", "#")):
                items.append(Step("user", number, text=_clip(text)))
        elif kind == "response_item" and what in ("function_call", "custom_tool_call"):
            for step in _codex_call(payload, number):
                out.steps.append(step)
                calls[_str(payload.get("call_id"))] = step
                if step.kind == "edit":
                    patched.setdefault(_str(payload.get("call_id")), []).append(step)
        elif kind == "event_msg" and what == "patch_apply_end" and payload.get("success") is False:
            for edit in patched.get(_str(payload.get("call_id")), []):
                edit.kind = REFUSED
        elif kind == "response_item" and what in (
            "function_call_output",
            "custom_tool_call_output",
        ):
            step = calls.get(_str(payload.get("call_id")))
            if step is not None and step.kind == "run":
                _codex_output(step, payload.get("output"))
            elif step is not None and _codex_failed(payload.get("output")):
                for edit in patched.get(_str(payload.get("call_id")), []):
                    edit.kind = REFUSED  # the patch did not apply
    if not people:
        out.steps += items
    out.steps += said or told
    out.steps.sort(key=lambda step: step.line)


def _codex_call(payload: Mapping[str, Any], number: int) -> Iterator[Step]:
    name = _str(payload.get("name"))
    raw = payload.get("arguments") if "arguments" in payload else payload.get("input")
    args: Any = raw
    if isinstance(raw, str) and raw.lstrip().startswith("{"):
        try:
            args = loads(raw, what="a tool call's arguments")
        except ValueError:
            args = raw
    patch = ""
    if name == "apply_patch":
        patch = raw if isinstance(raw, str) and "*** Begin Patch" in raw else ""
        if isinstance(args, Mapping):
            patch = _str(args.get("input")) or _str(args.get("patch")) or patch
    elif isinstance(args, Mapping):
        command = args.get("cmd") if "cmd" in args else args.get("command")
        if isinstance(command, list):
            words = [str(word) for word in command]
            # ["bash", "-lc", "pytest -q"]: the script is what was run
            text = words[-1] if len(words) >= 3 and words[-2] in ("-lc", "-c") else " ".join(words)
        else:
            text = _str(command)
        if "*** Begin Patch" in text:
            patch = text
        elif text:
            yield Step("run", number, text=_clip(text))
    if patch:
        yield from _patch_steps(patch, number)


def _patch_steps(patch: str, number: int) -> Iterator[Step]:
    """Yield one edit per file of an apply_patch text: its removed and added lines."""
    path, action = "", ""
    old: list[str] = []
    new: list[str] = []
    for line in patch.splitlines():
        match = _PATCH_FILE.match(line)
        if match or line.startswith("*** End Patch"):
            if path:
                yield _patch_step(number, path, action, old, new)
            path, old, new = (match.group(2).strip(), [], []) if match else ("", [], [])
            action = match.group(1) if match else ""
        elif path and line.startswith("-") and not line.startswith("---"):
            old.append(line[1:])
        elif path and line.startswith("+") and not line.startswith("+++"):
            new.append(line[1:])
    if path:
        yield _patch_step(number, path, action, old, new)


def _patch_step(number: int, path: str, action: str, old: list[str], new: list[str]) -> Step:
    before = None if action == "Add" else _clip("".join(f"{line}\n" for line in old))
    return Step("edit", number, path=path, old=before, new=_clip("".join(f"{x}\n" for x in new)))


def _codex_answer(output: Any) -> tuple[str, Any]:
    """Return a Codex tool answer's text and its exit code (None if it says none).

    Codex sends either the text itself or a JSON object with ``output`` and
    ``metadata.exit_code``; the object is parsed within the JSON bounds.
    """
    text = _str(output)
    code: Any = None
    if text.lstrip().startswith("{"):
        try:
            value = loads(text, what="a tool's output")
        except ValueError:
            value = None
        if isinstance(value, Mapping):
            meta = value.get("metadata")
            if isinstance(meta, Mapping):
                code = meta.get("exit_code")
            text = _str(value.get("output"))
    return text, code


def _codex_failed(output: Any) -> bool:
    """Tell whether an apply_patch answer says the patch was not applied."""
    text, code = _codex_answer(output)
    if code not in (0, None):
        return True
    return text.lstrip().lower().startswith(("error", "apply_patch verification failed"))


def _codex_output(step: Step, output: Any) -> None:
    text, code = _codex_answer(output)
    if isinstance(code, int) and not isinstance(code, bool):
        step.code = code
    match = _CODEX_EXIT.search(text[:400])
    if match and step.code is None:
        step.code = int(match.group(1))
    head, marker, body = text.partition("Output:\n")
    step.output = _clip(body if marker and "Wall time" in head else text) or step.output


# -- Gemini CLI ----------------------------------------------------------------------------------


def _gemini(entries: list[tuple[int, dict[str, Any]]], out: Transcript) -> None:
    messages: dict[str, tuple[int, dict[str, Any]]] = {}
    for number, entry in entries:
        if "sessionId" in entry and "projectHash" in entry:
            out.session_id = out.session_id or _str(entry.get("sessionId"))
            dirs = entry.get("directories")
            if isinstance(dirs, list) and dirs and isinstance(dirs[0], str):
                out.cwd = out.cwd or dirs[0]
        elif isinstance(entry.get("$rewindTo"), str):
            keys = list(messages)
            cut = keys.index(entry["$rewindTo"]) if entry["$rewindTo"] in keys else 0
            for key in keys[cut:]:
                del messages[key]
        elif isinstance(entry.get("id"), str):
            first = messages.get(entry["id"], (number, entry))[0]
            messages[entry["id"]] = (first, entry)
        elif isinstance(entry.get("$set"), Mapping) and isinstance(
            entry["$set"].get("messages"), list
        ):  # the whole conversation set anew (a resumed or rewritten session), in the API's
            # form: a record read before keeps its tool calls, which that form has not
            messages = {
                m["id"]: messages.get(m["id"], (number, m))
                for m in entry["$set"]["messages"]
                if isinstance(m, dict) and isinstance(m.get("id"), str)
            }
    answers = _gemini_responses(message for _, message in messages.values())
    for number, message in messages.values():
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                _str(part.get("text")) for part in content if isinstance(part, Mapping)
            )
        text = _str(content).strip()
        if message.get("type") == "user" and text:
            _person(out, number, text)
        elif message.get("type") == "gemini":
            if text:
                out.steps.append(Step("say", number, text=_clip(text)))
            calls = message.get("toolCalls") or _gemini_parts(message.get("content"), answers)
            for call in calls if isinstance(calls, list) else []:
                if isinstance(call, Mapping):
                    out.steps.extend(_gemini_call(call, number))


def _gemini_responses(messages: Iterator[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Return the ``functionResponse`` parts of the messages, by the call id they answer."""
    found: dict[str, Mapping[str, Any]] = {}
    for message in messages:
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            response = part.get("functionResponse") if isinstance(part, Mapping) else None
            if isinstance(response, Mapping) and isinstance(response.get("id"), str):
                found.setdefault(response["id"], response)
    return found


def _gemini_parts(content: Any, answers: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return tool calls as ``toolCalls`` holds them, from a message in the API's form.

    A resumed session's conversation, set anew, has each call as a ``functionCall`` part and
    its answer as a ``functionResponse`` part of a later message; an answer with an error and
    no output is a call that did not happen (a denied edit).
    """
    calls: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        call = part.get("functionCall") if isinstance(part, Mapping) else None
        if not isinstance(call, Mapping):
            continue
        answer = answers.get(_str(call.get("id")), {})
        reply = answer.get("response")
        failed = isinstance(reply, Mapping) and "error" in reply and "output" not in reply
        calls.append(
            {
                "name": call.get("name"),
                "args": call.get("args"),
                "result": [{"functionResponse": answer}] if answer else [],
                "status": "error" if failed else "success",
            }
        )
    return calls


def _gemini_call(call: Mapping[str, Any], number: int) -> Iterator[Step]:
    name, args = _str(call.get("name")), call.get("args")
    if not isinstance(args, Mapping):
        return
    path = _str(args.get("file_path")) or _str(args.get("absolute_path"))
    if name == "run_shell_command":
        step = Step("run", number, text=_clip(_str(args.get("command"))))
        output = _gemini_output(call.get("result"))
        match = _GEMINI_EXIT.search(output)
        if match:
            step.code = int(match.group(1))
        else:
            step.code = 1 if call.get("status") == "error" else 0
        body = _UNTRUSTED.sub("", output).strip().removeprefix("Output: ")
        step.output = _clip(re.split(r"\n(?:Exit Code|Process Group PGID|Signal): ", body)[0])
        yield step
    elif name == "replace" and call.get("status") not in ("error", "cancelled"):
        old, new = _str(args.get("old_string")), _str(args.get("new_string"))
        yield Step("edit", number, path=path, old=_clip(old), new=_clip(new))
    elif name == "write_file" and call.get("status") not in ("error", "cancelled"):
        yield Step("edit", number, path=path, new=_clip(_str(args.get("content"))))


def _gemini_output(result: Any) -> str:
    parts: list[str] = []
    for part in result if isinstance(result, list) else []:
        response = part.get("functionResponse") if isinstance(part, Mapping) else None
        answer = response.get("response") if isinstance(response, Mapping) else None
        if isinstance(answer, Mapping):
            parts.append(_str(answer.get("output")) or _str(answer.get("error")))
    return "\n".join(parts)


# -- OpenCode ------------------------------------------------------------------------------------


def _opencode(entries: list[tuple[int, dict[str, Any]]], out: Transcript) -> None:
    for number, entry in entries:
        info, parts = entry.get("info"), entry.get("parts")
        if not isinstance(info, Mapping) or not isinstance(parts, list):
            continue
        out.session_id = out.session_id or _str(info.get("sessionID"))
        where = info.get("path")
        if isinstance(where, Mapping):
            out.cwd = out.cwd or _str(where.get("cwd"))
        role = info.get("role")
        if role == "assistant" and info.get("summary") is True:
            continue  # a compaction's summary of what came before, not something that happened
        for part in parts:
            if not isinstance(part, Mapping) or part.get("synthetic") or part.get("ignored"):
                continue
            if part.get("type") == "text":
                text = _str(part.get("text"))
                if role == "user":
                    quoted = _RUN_QUOTED.match(text.strip())
                    _person(out, number, quoted[1].replace('\\"', '"') if quoted else text)
                elif role == "assistant" and text.strip():
                    out.steps.append(Step("say", number, text=_clip(text)))
            elif part.get("type") == "tool" and role == "assistant":
                state = part.get("state")
                if isinstance(state, Mapping) and state.get("status") == "completed":
                    out.steps.extend(_opencode_tool(_str(part.get("tool")), state, number))


def _opencode_tool(name: str, state: Mapping[str, Any], number: int) -> Iterator[Step]:
    """Yield the steps of a completed tool call (a call that ended in error did not happen)."""
    args = state.get("input")
    if not isinstance(args, Mapping):
        return
    meta = state.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    if name == "bash":
        step = Step("run", number, text=_clip(_str(args.get("command"))))
        code = meta.get("exit")
        step.code = code if isinstance(code, int) and not isinstance(code, bool) else None
        step.output = _clip(_str(state.get("output")) or _str(meta.get("output")))
        yield step
    elif name == "edit":
        old, new = _str(args.get("oldString")), _str(args.get("newString"))
        yield Step("edit", number, path=_str(args.get("filePath")), old=_clip(old), new=_clip(new))
    elif name == "write":
        yield Step(
            "edit", number, path=_str(args.get("filePath")), new=_clip(_str(args.get("content")))
        )
    elif name == "multiedit":
        edits = args.get("edits")
        for edit in edits if isinstance(edits, list) else []:
            if isinstance(edit, Mapping):
                path = _str(edit.get("filePath")) or _str(args.get("filePath"))
                old, new = _str(edit.get("oldString")), _str(edit.get("newString"))
                yield Step("edit", number, path=path, old=_clip(old), new=_clip(new))
    elif name in ("apply_patch", "patch"):
        yield from _patch_steps(_str(args.get("patchText")), number)
