"""The stdio pipes of ``engram mcp``, served on the event loop itself for a fast round trip.

The SDK's stdio transport reads and writes through a worker thread per line; on POSIX pipes
(what every MCP client uses) the event loop can do both itself (``Pipes``). A message nested
too deep for the SDK's parser is answered here with a JSON-RPC error (``Lines``), and fd 1 is
pointed at stderr while serving, so that nothing but the protocol reaches the client.

It imports asyncio only when the pipes are opened, and must not import another adapter.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from typing import TYPE_CHECKING, Final

from engram.model import MAX_JSON_DEPTH, json_depth_exceeded, peek_request

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

    from engram.mcp_server.prelude import Replay

MAX_MESSAGE_BYTES: Final = 256 * 1024 * 1024  # one JSON-RPC line from the client, at most
# A whole message: tool arguments are held to MAX_JSON_DEPTH (an error result), the envelope
# around them to twice that (a JSON-RPC error), well below where the SDK's parser gives up.
MAX_MESSAGE_DEPTH: Final = 2 * MAX_JSON_DEPTH


class Lines:
    """Lines of the client's messages, read from the stdin pipe by the event loop itself.

    A message nested deeper than MAX_MESSAGE_DEPTH is answered here with a JSON-RPC error
    naming its id and method, and never reaches the SDK: its parser would refuse it without
    an answer, leaving the client waiting. ``ended`` is called once at the end of input.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        out: Out,
        first: Sequence[bytes] = (),
        rest: bytes = b"",
        ended: Callable[[], object] | None = None,
    ) -> None:
        self.reader = reader
        self.out = out
        self.first = list(first)  # lines read before the SDK took over (engram.mcp_server.prelude)
        self.rest = rest  # and the start of the next line
        self.ended = ended

    def __aiter__(self) -> Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            if self.first:
                line = self.first.pop(0)
            else:
                line = await self.reader.readline()
                if self.rest:
                    line, self.rest = self.rest + line, b""
            if not line:
                if self.ended is not None:
                    self.ended()
                    self.ended = None
                raise StopAsyncIteration
            offset = json_depth_exceeded(line, MAX_MESSAGE_DEPTH)
            if offset is None:
                return line.decode("utf-8", errors="replace")
            rid, method = peek_request(line)
            error = {
                "code": -32600,  # JSON-RPC "invalid request"
                "message": f"{method or 'message'}: nested deeper than {MAX_MESSAGE_DEPTH} "
                f"levels (at byte {offset}); refused",
            }
            await self.out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}) + "\n")


class Out:
    """The protocol's stdout: each message written straight to the saved fd, no worker thread."""

    def __init__(self, fd: int, answered: Iterable[Any] = ()) -> None:
        self.fd = fd
        self.answered = set(answered)  # ids the prelude answered: the SDK's answers are dropped

    async def write(self, text: str) -> None:
        """Write one message (a blocking write: one client, whose reader is always waiting)."""
        if self.answered and _answers(text, self.answered):
            return
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(self.fd, data) :]

    async def flush(self) -> None:
        """Do nothing: writes are unbuffered."""


class Pipes:
    """stdin and stdout served on the event loop, for a fast round trip.

    The SDK's stdio transport reads and writes through a worker thread per line, which costs
    about half a millisecond a round trip; on POSIX pipes (what every MCP client uses) the
    event loop can do both itself. fd 1 is pointed at stderr meanwhile, so that nothing but the
    protocol reaches the client.
    """

    def __init__(self, lines: Lines, out: Out, transport: asyncio.BaseTransport, wire: int) -> None:
        self.lines, self.out, self.transport, self.wire = lines, out, transport, wire

    @classmethod
    async def open(
        cls, replay: Replay | None = None, ended: Callable[[], object] | None = None
    ) -> Pipes | None:
        """Return the pipes, or None where the SDK's own transport must do (not a pipe …);
        ``ended`` is called at the end of input."""
        import asyncio

        if sys.platform == "win32":
            return None
        try:
            loop = asyncio.get_running_loop()
            if not stat.S_ISFIFO(os.fstat(0).st_mode) and not stat.S_ISSOCK(os.fstat(0).st_mode):
                return None
        except (RuntimeError, OSError):
            return None
        reader = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES)
        source = os.fdopen(os.dup(0), "rb", buffering=0)
        try:
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), source
            )
        except (OSError, ValueError):
            source.close()
            return None
        wire = os.dup(1)
        os.dup2(2, 1)
        out = Out(wire, replay.answered if replay else ())
        if replay is not None:
            lines = Lines(reader, out, replay.lines, replay.rest, ended)
        else:
            lines = Lines(reader, out, ended=ended)
        return cls(lines, out, transport, wire)

    def close(self) -> None:
        """Stop reading and give fd 1 back its original file."""
        self.transport.close()
        with contextlib.suppress(OSError):
            os.dup2(self.wire, 1)
            os.close(self.wire)


def _answers(text: str, answered: set[Any]) -> bool:
    """Tell whether a message answers a request the prelude answered (and forget that id)."""
    try:
        message = json.loads(text)
    except ValueError:
        return False
    if not isinstance(message, dict) or "method" in message:
        return False
    rid = message.get("id")
    done = "result" in message or "error" in message
    if isinstance(rid, (str, int)) and rid in answered and done:
        answered.discard(rid)
        return True
    return False
