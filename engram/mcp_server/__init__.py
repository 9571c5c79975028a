"""mcp_server/ is the MCP adapter: ``engram mcp`` serves the facade to coding agents over stdio.

    table.py      the tool table: a tool per declared operation, profiles, Tool and Call
    compat.py     go-engram and engram-rs names, as rows of data over the native handlers
    tools/        the handlers, each registered where it is defined (a few lines each)
    prompts.py    the memory-protocol prompts
    resources.py  the engram:// resources
    core.py       EngramMCP: the tools of a profile, the budget, the one error boundary
    prelude.py    the handshake answered from the declarations while the SDK loads
    stdio.py      the stdin/stdout pipes, served on the event loop
    server.py     the SDK wiring, sampling, and ``run`` (what ``engram mcp`` calls)

Budgets, paging and cursors are ``engram.mcp_server.paging``'s, hits and provenance
``engram.operations.views``'s; this package renders and transports only. It imports the mcp
SDK only while serving, never another adapter, and writes nothing to stdout. This module only
re-exports.
"""

from __future__ import annotations

from engram.mcp_server.catalog import select_tools, tool_names
from engram.mcp_server.core import DEFAULT_BUDGET, MIN_BUDGET, EngramMCP
from engram.mcp_server.paging import decode_cursor, encode_cursor
from engram.mcp_server.server import run, serve
from engram.mcp_server.table import COMPATS, PROFILES, Call, Tool
from engram.operations.memory import RECALL_LIMIT, RECALL_MAX

__all__ = [
    "COMPATS",
    "DEFAULT_BUDGET",
    "MIN_BUDGET",
    "PROFILES",
    "RECALL_LIMIT",
    "RECALL_MAX",
    "Call",
    "EngramMCP",
    "Tool",
    "decode_cursor",
    "encode_cursor",
    "run",
    "select_tools",
    "serve",
    "tool_names",
]
