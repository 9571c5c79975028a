"""The installed `engram mcp`, driven by the mcp client SDK over stdio: list the tools, recall.

Run by .ci/smoke.sh with the clean virtualenv's Python, in the smoke project; prints the tool
names and exits non-zero when a tool the agents need is missing or recall finds nothing.
"""

from __future__ import annotations

import os
import shutil
import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

NEEDED = {"remember", "recall", "check", "context"}


async def main() -> int:
    engram = shutil.which("engram")
    if engram is None:
        print("smoke: no engram command on PATH", file=sys.stderr)
        return 1
    params = StdioServerParameters(command=engram, args=["mcp"], env=dict(os.environ))
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, read_timeout_seconds=60) as session,
    ):
        await session.initialize()
        names = sorted(tool.name for tool in (await session.list_tools()).tools)
        print("tools/list:", " ".join(names))
        missing = NEEDED - set(names)
        if missing:
            print(f"smoke: tools missing: {sorted(missing)}", file=sys.stderr)
            return 1
        answer = await session.call_tool("recall", {"query": "integer minor units"})
        text = " ".join(getattr(part, "text", "") for part in answer.content)
        if answer.is_error or "integer minor units" not in text:
            print(f"smoke: recall over MCP found nothing: {text[:500]}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
