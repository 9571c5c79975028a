"""Render the scripted sessions (scenarios.py) into each agent's on-disk transcript format.

Run ``python benchmarks/capture/make.py`` to write ``transcripts/<agent>/<scenario>.jsonl``.
The formats follow what each program writes, read from its own package:

- Claude Code (``~/.claude/projects/<slug>/<session>.jsonl``): one JSON object per line with
  ``type`` user or assistant, ``uuid``/``parentUuid``, ``sessionId``, ``cwd``, ``timestamp``
  and ``message`` (the API message); a tool call is an assistant ``tool_use`` block (Bash,
  Read, Edit, Write), its answer a user ``tool_result`` block with ``is_error`` and the entry's
  ``toolUseResult``; a failed Bash answers "Exit code N" then its output.
- Codex (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``): ``{"timestamp", "type", "payload"}``
  lines: ``session_meta``, ``turn_context``, ``event_msg`` (user_message, agent_message,
  exec_command_end, patch_apply_end) and ``response_item`` (message, function_call
  ``exec_command`` with ``{"cmd", "workdir"}`` arguments, its ``function_call_output`` text
  "Process exited with code N … Output:", custom_tool_call ``apply_patch``).
- Gemini CLI (``~/.gemini/tmp/<project-hash>/chats/session-*.jsonl``): a metadata line
  (sessionId, projectHash, startTime, kind), then message records (``type`` user or gemini,
  ``content``, ``toolCalls`` with ``name``, ``args``, ``result`` as functionResponse parts and
  ``status``) and ``{"$set": …}`` metadata updates; run_shell_command's output says
  "Exit Code: N" when the command failed.
- OpenCode (``.engram/state/opencode/<session>.jsonl``, written by engram's plugin from
  ``client.session.messages``): one ``{"info", "parts"}`` line per message; the person's
  message a ``text`` part; each model step an assistant message (``path.cwd``) with
  ``step-start``, a ``text`` or ``tool`` part and ``step-finish``; a tool part's ``state``
  ``completed`` with ``input``, ``output`` and ``metadata`` (``bash``: ``exit`` and
  ``output``; ``read``, ``edit`` and ``write`` with ``filePath``) and a ``patch`` part after an
  edit.

The times and ids are made up but shaped like the real ones; nothing here calls a model.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scenarios import FRESH, HELD_OUT, SCENARIOS, Step  # noqa: E402

CWD = "/home/dev/work/app"
AGENTS = ("claude-code", "codex", "gemini-cli", "opencode")


class Clock:
    """Times a few seconds apart, from a fixed start per scenario."""

    def __init__(self, name: str) -> None:
        seed = int(hashlib.sha256(name.encode()).hexdigest()[:6], 16) % 86400
        self.now = datetime(2026, 11, 2, 9, 0, tzinfo=UTC) + timedelta(seconds=seed)

    def tick(self) -> str:
        self.now += timedelta(seconds=3)
        return self.now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def ids(name: str, agent: str) -> Any:
    """Yield stable uuids for one rendering."""
    number = 0
    while True:
        number += 1
        yield str(uuid.uuid5(uuid.NAMESPACE_URL, f"{agent}/{name}/{number}"))


def full(path: str) -> str:
    return f"{CWD}/{path}"


def numbered(content: str) -> str:
    return "".join(f"{n:>6}\u2192{line}\n" for n, line in enumerate(content.splitlines(), 1))


# -- Claude Code ---------------------------------------------------------------------------------


def claude(name: str, steps: list[Step]) -> list[dict[str, Any]]:
    clock, make = Clock(name), ids(name, "claude-code")
    session = next(make)
    lines: list[dict[str, Any]] = []
    parent: str | None = None

    def entry(kind: str, message: dict[str, Any], **more: Any) -> None:
        nonlocal parent
        uid = next(make)
        line = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": CWD,
            "sessionId": session,
            "version": "2.1.197",
            "gitBranch": "main",
            "type": kind,
            "message": message,
            "uuid": uid,
            "timestamp": clock.tick(),
            **more,
        }
        if kind == "assistant":
            line["requestId"] = "req_" + uid.replace("-", "")[:24]
        lines.append(line)
        parent = uid

    def assistant(content: list[dict[str, Any]]) -> None:
        entry(
            "assistant",
            {
                "id": "msg_" + next(make).replace("-", "")[:24],
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": content,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1200, "output_tokens": 80},
            },
        )

    def tool(name_: str, input_: dict[str, Any], result: str, error: bool, extra: Any) -> None:
        call = "toolu_" + next(make).replace("-", "")[:24]
        assistant([{"type": "tool_use", "id": call, "name": name_, "input": input_}])
        block: dict[str, Any] = {"tool_use_id": call, "type": "tool_result", "content": result}
        if error:
            block["is_error"] = True
        entry("user", {"role": "user", "content": [block]}, toolUseResult=extra)

    for step in steps:
        if step[0] == "user":
            entry("user", {"role": "user", "content": step[1]})
        elif step[0] == "say":
            assistant([{"type": "text", "text": step[1]}])
        elif step[0] == "run":
            _, command, code, output = step
            if code:
                result = f"Exit code {code}\n{output}"
                tool(
                    "Bash",
                    {"command": command, "description": "Run"},
                    result,
                    True,
                    f"Error: {result}",
                )
            else:
                extra = {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}
                tool("Bash", {"command": command, "description": "Run"}, output, False, extra)
        elif step[0] == "read":
            _, path, content = step
            extra = {
                "type": "text",
                "file": {
                    "filePath": full(path),
                    "content": content,
                    "numLines": content.count("\n"),
                    "startLine": 1,
                    "totalLines": content.count("\n"),
                },
            }
            tool("Read", {"file_path": full(path)}, numbered(content), False, extra)
        elif step[0] == "edit":
            _, path, old, new = step
            extra = {
                "filePath": full(path),
                "oldString": old,
                "newString": new,
                "originalFile": None,
                "structuredPatch": [],
                "userModified": False,
                "replaceAll": False,
            }
            tool(
                "Edit",
                {
                    "file_path": full(path),
                    "old_string": old,
                    "new_string": new,
                    "replace_all": False,
                },
                f"The file {full(path)} has been updated. Here's the result of running `cat -n` "
                f"on a snippet of the edited file:\n{numbered(new)}",
                False,
                extra,
            )
        elif step[0] == "write":
            _, path, content = step
            extra = {
                "type": "create",
                "filePath": full(path),
                "content": content,
                "structuredPatch": [],
            }
            tool(
                "Write",
                {"file_path": full(path), "content": content},
                f"File created successfully at: {full(path)}",
                False,
                extra,
            )
    return lines


# -- Codex ---------------------------------------------------------------------------------------


def patch_of(path: str, old: str, new: str, *, add: bool = False) -> str:
    if add:
        body = "".join(f"+{line}\n" for line in new.splitlines())
        return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch"
    minus = "".join(f"-{line}\n" for line in old.splitlines())
    plus = "".join(f"+{line}\n" for line in new.splitlines())
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n{minus}{plus}*** End Patch"


def codex(name: str, steps: list[Step]) -> list[dict[str, Any]]:
    clock, make = Clock(name), ids(name, "codex")
    session = next(make)
    lines: list[dict[str, Any]] = []

    def line(kind: str, payload: dict[str, Any]) -> None:
        lines.append({"timestamp": clock.tick(), "type": kind, "payload": payload})

    line(
        "session_meta",
        {
            "id": session,
            "timestamp": clock.tick(),
            "cwd": CWD,
            "originator": "codex_cli_rs",
            "cli_version": "0.171.0",
            "instructions": None,
            "source": "cli",
            "model_provider": "openai",
            "git": {"commit_hash": "9f1c2e7", "branch": "main"},
        },
    )
    for step in steps:
        if step[0] == "user":
            line(
                "turn_context",
                {
                    "cwd": CWD,
                    "approval_policy": "on-request",
                    "sandbox_policy": {"type": "workspace-write"},
                    "model": "gpt-5.1-codex",
                    "summary": "auto",
                },
            )
            line(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": step[1]}],
                },
            )
            line("event_msg", {"type": "user_message", "message": step[1], "images": []})
        elif step[0] == "say":
            line("event_msg", {"type": "agent_message", "message": step[1]})
            line(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": step[1]}],
                },
            )
        elif step[0] in ("run", "read"):
            if step[0] == "run":
                _, command, code, output = step
            else:
                command, code, output = f"sed -n '1,200p' {step[1]}", 0, step[2]
            call = "call_" + next(make).replace("-", "")[:22]
            line(
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "arguments": json.dumps({"cmd": command, "workdir": CWD}),
                    "call_id": call,
                },
            )
            line(
                "event_msg",
                {
                    "type": "exec_command_end",
                    "call_id": call,
                    "command": ["/bin/bash", "-lc", command],
                    "cwd": CWD,
                    "exit_code": code,
                    "aggregated_output": output,
                    "stdout": output,
                    "stderr": "",
                    "duration": {"secs": 0, "nanos": 400000000},
                    "formatted_output": output,
                },
            )
            text = (
                f"Chunk ID: {call[-6:]}\nWall time: 0.4012 seconds\nProcess exited with code "
                f"{code}\nOriginal token count: {len(output) // 4}\nOutput:\n{output}"
            )
            line("response_item", {"type": "function_call_output", "call_id": call, "output": text})
        elif step[0] in ("edit", "write"):
            if step[0] == "edit":
                _, path, old, new = step
                patch = patch_of(path, old, new)
            else:
                _, path, new = step
                patch = patch_of(path, "", new, add=True)
            call = "call_" + next(make).replace("-", "")[:22]
            line(
                "response_item",
                {
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": call,
                    "name": "apply_patch",
                    "input": patch,
                },
            )
            line(
                "event_msg",
                {
                    "type": "patch_apply_end",
                    "call_id": call,
                    "success": True,
                    "stdout": f"Success. Updated the following files:\nM {path}\n",
                    "stderr": "",
                },
            )
            out = {
                "output": f"Success. Updated the following files:\nM {path}\n",
                "metadata": {"exit_code": 0, "duration_seconds": 0.0},
            }
            line(
                "response_item",
                {"type": "custom_tool_call_output", "call_id": call, "output": json.dumps(out)},
            )
    return lines


# -- Gemini CLI ----------------------------------------------------------------------------------


def gemini(name: str, steps: list[Step]) -> list[dict[str, Any]]:
    clock, make = Clock(name), ids(name, "gemini-cli")
    session = next(make)
    start = clock.tick()
    lines: list[dict[str, Any]] = [
        {
            "sessionId": session,
            "projectHash": hashlib.sha256(CWD.encode()).hexdigest(),
            "startTime": start,
            "lastUpdated": start,
            "kind": "main",
        }
    ]

    def call(tool: str, args: dict[str, Any], output: str, display: str) -> None:
        cid = f"{tool}-{next(make)[:13]}"
        stamp = clock.tick()
        lines.append(
            {
                "id": next(make),
                "timestamp": stamp,
                "type": "gemini",
                "content": "",
                "toolCalls": [
                    {
                        "id": cid,
                        "name": tool,
                        "args": args,
                        "result": [
                            {
                                "functionResponse": {
                                    "id": cid,
                                    "name": tool,
                                    "response": {"output": output},
                                }
                            }
                        ],
                        "status": "success",
                        "timestamp": stamp,
                        "resultDisplay": display,
                        "displayName": tool,
                        "description": "",
                        "renderOutputAsMarkdown": False,
                    }
                ],
                "thoughts": [],
                "model": "gemini-3-pro",
            }
        )
        lines.append({"$set": {"lastUpdated": stamp}})

    for step in steps:
        if step[0] == "user":
            lines.append(
                {
                    "id": next(make),
                    "timestamp": clock.tick(),
                    "type": "user",
                    "content": [{"text": step[1]}],
                }
            )
        elif step[0] == "say":
            lines.append(
                {
                    "id": next(make),
                    "timestamp": clock.tick(),
                    "type": "gemini",
                    "content": step[1],
                    "thoughts": [],
                    "tokens": {
                        "input": 2100,
                        "output": 60,
                        "cached": 0,
                        "thoughts": 0,
                        "tool": 0,
                        "total": 2160,
                    },
                    "model": "gemini-3-pro",
                }
            )
        elif step[0] == "run":
            _, command, code, output = step
            text = f"Output: {output or '(empty)'}"
            if code:
                text += f"\nExit Code: {code}"
            text += "\nProcess Group PGID: 48213"
            call(
                "run_shell_command",
                {"command": command, "description": "Run"},
                text,
                output if not code else f"{output}\nExit Code: {code}",
            )
        elif step[0] == "read":
            call("read_file", {"file_path": full(step[1])}, step[2], "")
        elif step[0] == "edit":
            _, path, old, new = step
            call(
                "replace",
                {
                    "file_path": full(path),
                    "old_string": old,
                    "new_string": new,
                    "instruction": "Apply the change",
                },
                f"Successfully modified file: {full(path)} (1 replacements).",
                "",
            )
        elif step[0] == "write":
            _, path, content = step
            call(
                "write_file",
                {"file_path": full(path), "content": content},
                f"Successfully created and wrote to new file: {full(path)}.",
                "",
            )
    return lines


# -- OpenCode ------------------------------------------------------------------------------------


def opencode(name: str, steps: list[Step]) -> list[dict[str, Any]]:
    clock, make = Clock(name), ids(name, "opencode")

    def oid(prefix: str) -> str:
        return f"{prefix}_" + next(make).replace("-", "")[:26]

    session = oid("ses")
    lines: list[dict[str, Any]] = []
    parent = ""

    def millis() -> int:
        clock.tick()
        return int(clock.now.timestamp() * 1000)

    def part(message: str, kind: str, **more: Any) -> dict[str, Any]:
        return {"id": oid("prt"), "sessionID": session, "messageID": message, "type": kind, **more}

    def tokens() -> dict[str, Any]:
        return {
            "total": 1280,
            "input": 1200,
            "output": 80,
            "reasoning": 0,
            "cache": {"read": 0, "write": 0},
        }

    def assistant(body: dict[str, Any], finish: str, files: list[str] | None = None) -> None:
        message = oid("msg")
        created = millis()
        snapshot = hashlib.sha1(f"{name}/{created}".encode()).hexdigest()
        parts = [
            part(message, "step-start", snapshot=snapshot),
            {**part(message, body.pop("type")), **body},
        ]
        parts.append(
            part(message, "step-finish", reason=finish, snapshot=snapshot, cost=0, tokens=tokens())
        )
        if files:
            parts.append(part(message, "patch", hash=snapshot, files=files))
        info = {
            "id": message,
            "sessionID": session,
            "role": "assistant",
            "time": {"created": created, "completed": created + 900},
            "parentID": parent,
            "modelID": "claude-sonnet-4-5",
            "providerID": "anthropic",
            "mode": "build",
            "agent": "build",
            "path": {"cwd": CWD, "root": CWD},
            "cost": 0,
            "tokens": tokens(),
            "finish": finish,
        }
        lines.append({"info": info, "parts": parts})

    def tool(
        tool_name: str,
        input_: dict[str, Any],
        output: str,
        title: str,
        metadata: dict[str, Any],
        files: list[str] | None = None,
    ) -> None:
        begun = millis()
        state = {
            "status": "completed",
            "input": input_,
            "output": output,
            "title": title,
            "metadata": metadata,
            "time": {"start": begun, "end": begun + 400},
        }
        body = {"type": "tool", "callID": oid("toolu"), "tool": tool_name, "state": state}
        assistant(body, "tool-calls", files)

    for step in steps:
        if step[0] == "user":
            message = oid("msg")
            parent = message
            info = {
                "id": message,
                "sessionID": session,
                "role": "user",
                "time": {"created": millis()},
                "summary": {"diffs": []},
                "agent": "build",
                "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"},
            }
            lines.append({"info": info, "parts": [part(message, "text", text=step[1])]})
        elif step[0] == "say":
            at = millis()
            assistant({"type": "text", "text": step[1], "time": {"start": at, "end": at}}, "stop")
        elif step[0] == "run":
            _, command, code, output = step
            meta = {"output": output, "exit": code, "description": "Run", "truncated": False}
            tool("bash", {"command": command, "description": "Run"}, output, command, meta)
        elif step[0] == "read":
            _, path, content = step
            body = "".join(f"{n}: {line}\n" for n, line in enumerate(content.splitlines(), 1))
            output = f"<path>{full(path)}</path>\n<type>file</type>\n<content>\n{body}</content>"
            meta = {"preview": content[:200], "truncated": False, "loaded": []}
            tool("read", {"filePath": full(path)}, output, path, meta)
        elif step[0] == "edit":
            _, path, old, new = step
            diff = f"Index: {full(path)}\n" + patch_of(path, old, new)
            meta = {"diagnostics": {}, "diff": diff, "truncated": False}
            args = {"filePath": full(path), "oldString": old, "newString": new}
            tool("edit", args, "Edit applied successfully.", path, meta, [full(path)])
        elif step[0] == "write":
            _, path, content = step
            meta = {"diagnostics": {}, "filepath": full(path), "exists": False, "truncated": False}
            args = {"filePath": full(path), "content": content}
            tool("write", args, "Wrote file successfully.", path, meta, [full(path)])
    return lines


RENDER = {"claude-code": claude, "codex": codex, "gemini-cli": gemini, "opencode": opencode}


def main() -> int:
    for agent in AGENTS:
        folder = HERE / "transcripts" / agent
        folder.mkdir(parents=True, exist_ok=True)
        for name, steps in {**SCENARIOS, **HELD_OUT, **FRESH}.items():
            lines = RENDER[agent](name, steps)
            text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
            (folder / f"{name}.jsonl").write_text(text, encoding="utf-8")
    count = len(AGENTS) * (len(SCENARIOS) + len(HELD_OUT) + len(FRESH))
    print(f"wrote {count} transcripts under {HERE / 'transcripts'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
