"""cli/ is the ``engram`` command line: a typer adapter over ``engram.service.Engram``.

Each module registers its commands on the one ``app`` where they are defined, their options
derived from the operations' declarations (``options``):

    app.py      the typer app, its one error boundary, -C, output and input helpers
    options.py  the options decorator: a command's typer parameters from its declaration
    memory.py   remember, recall, get, why, related, update, forget, stats, timeline, judge
    agents.py   context, check, session start / summary / end, prompt, capture
    hygiene.py  consolidate, train, insights, projects
    sync.py     sync, export, import, merge-driver, resolve, log, obsidian-export
    admin.py    init, index, doctor, setup, version
    servers.py  mcp, daemon, serve, tui: declared here, run by the adapters that serve them
    fast.py     the fast path of recall, check and context, and ``main``

This package must not be imported by the core; it imports no other adapter.
"""

from __future__ import annotations

# Each module registers its commands on app as it is imported: in the order --help lists them.
from engram.cli import admin, memory, agents, hygiene, sync  # isort: skip
from engram.cli.app import app
from engram.cli.fast import FAST_COMMANDS, fast_command, fast_options, main
from engram.cli.servers import (
    ADAPTER_COMMANDS,
    HTTP_HOST,
    HTTP_PORT,
    HTTP_PORT_ENV,
    HTTP_TOKEN_ENV,
    MCP_BUDGET,
    CompatNames,
    RouteCompat,
    ToolProfile,
    add_adapters,
)

__all__ = [
    "ADAPTER_COMMANDS",
    "FAST_COMMANDS",
    "HTTP_HOST",
    "HTTP_PORT",
    "HTTP_PORT_ENV",
    "HTTP_TOKEN_ENV",
    "MCP_BUDGET",
    "CompatNames",
    "RouteCompat",
    "ToolProfile",
    "add_adapters",
    "admin",
    "agents",
    "app",
    "fast_command",
    "fast_options",
    "hygiene",
    "main",
    "memory",
    "sync",
]
