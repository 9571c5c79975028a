"""The first answers of ``engram mcp``, given before the mcp SDK is loaded.

Importing the SDK (its pydantic models) takes most of a second, and an agent that starts the
server lists its tools right away; Codex does not wait. So the server answers the handshake
itself from the declarations: ``initialize`` (of the protocol versions reached by handshake),
``ping`` and a first page of ``tools/list``, while a thread imports the SDK and opens the
store. The first message it does not answer (a tool call, resources, prompts, anything else)
hands the connection to the SDK: the messages it answered that set the session's state
(``initialize`` and ``notifications/initialized``) are replayed to the SDK, whose answers to
them are not sent again, then the rest follows from standard input. End of input before that
ends the server at once. tests/test_mcp_start.py holds these answers equal to the SDK's own.

It imports only the standard library and engram's declarations (never the SDK).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Final

from engram.mcp_server.listings import prompt_list, resource_list, template_list
from engram.model import loads

if TYPE_CHECKING:
    from engram.mcp_server.table import Tool

# The protocol versions the SDK negotiates by the initialize handshake (mcp_types.version
# HANDSHAKE_PROTOCOL_VERSIONS; a test holds them equal), newest last.
HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# What the SDK's low-level server advertises with engram's handlers (tools, resources, prompts).
CAPABILITIES: Final = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}
READ: Final = 1 << 16
# Claude Code lists these before it offers a server's tools: answered from the declarations.
_LISTS: Final = {
    "prompts/list": prompt_list,
    "resources/list": resource_list,
    "resources/templates/list": template_list,
}
EARLY_BYTES: Final = 64 * 1024  # longer lines go to the SDK unparsed here


class Replay:
    """What the SDK gets first: the messages that set the session up, and the unread rest."""

    def __init__(self, lines: list[bytes], rest: bytes, answered: set[Any]) -> None:
        self.lines = lines  # whole lines, each ending in a newline
        self.rest = rest  # bytes read past the last whole line
        self.answered = answered  # request ids already answered: the SDK's answers are dropped


def tool_json(tool: Tool) -> dict[str, Any]:
    """Return a tool as ``tools/list`` lists it (the SDK's field names and annotations)."""
    return {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema(),
        "annotations": {
            "readOnlyHint": tool.read_only,
            "destructiveHint": tool.destructive,
            "idempotentHint": tool.idempotent or tool.read_only,
            "openWorldHint": False,
        },
    }


def initialize_result(version: str, instructions: str) -> dict[str, Any]:
    """Return the ``initialize`` result for a requested protocol version."""
    from engram import __version__

    chosen = version if version in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {
        "capabilities": CAPABILITIES,
        "instructions": instructions,
        "protocolVersion": chosen,
        "serverInfo": {"name": "engram", "version": __version__},
    }


def answer_early(
    tools: dict[str, Tool], instructions: str, *, fd_in: int = 0, fd_out: int = 1
) -> Replay | None:
    """Answer the handshake from ``fd_in`` until a message needs the SDK; None at end of input."""
    buffer = b""
    replay: list[bytes] = []
    answered: set[Any] = set()
    ready = False  # initialize answered: tools/list and ping may be answered too
    listed: list[dict[str, Any]] | None = None
    while True:
        while b"\n" not in buffer:
            chunk = os.read(fd_in, READ)
            if not chunk:
                if buffer.strip():  # a last line without its newline: the SDK reads it
                    return Replay([*replay, buffer + b"\n"], b"", answered)
                return None
            buffer += chunk
        raw, buffer = buffer.split(b"\n", 1)
        line = raw + b"\n"
        if not raw.strip():
            continue
        if len(raw) > EARLY_BYTES:  # no handshake message is this long: the SDK's to answer
            return Replay([*replay, line], buffer, answered)
        try:
            message = loads(raw, what="an MCP message")  # bounded: a hostile line is no crash
        except ValueError:
            return Replay([*replay, line], buffer, answered)
        method = message.get("method") if isinstance(message, dict) else None
        rid = message.get("id") if isinstance(message, dict) else None
        params = message.get("params") if isinstance(message, dict) else None
        params = params if isinstance(params, dict) else {}
        result: dict[str, Any] | None = None
        if method == "initialize" and rid is not None and not ready:
            version = params.get("protocolVersion")
            if isinstance(version, str) and version in HANDSHAKE_VERSIONS:
                result = initialize_result(version, instructions)
                ready = True
                replay.append(line)
                answered.add(rid)
        elif method == "notifications/initialized" and ready:
            replay.append(line)
            continue
        elif ready and rid is not None and method == "ping":
            result = {}
        elif ready and rid is not None and method == "tools/list" and not params.get("cursor"):
            if listed is None:
                listed = [tool_json(tool) for tool in tools.values()]
            result = {"tools": listed}
        elif ready and rid is not None and method in _LISTS and not params.get("cursor"):
            result = _LISTS[method]()
        if result is None:
            return Replay([*replay, line], buffer, answered)
        _write(fd_out, {"jsonrpc": "2.0", "id": rid, "result": result})


def _write(fd: int, message: dict[str, Any]) -> None:
    data = memoryview((json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8"))
    while data:
        data = data[os.write(fd, data) :]
