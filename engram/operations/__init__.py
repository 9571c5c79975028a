"""operations/ is the contract: one declaration per operation, from which every adapter derives.

An ``Operation`` names its parameters (``Param``: type, default, help, limits), its result type,
whether it is read-only or destructive, and the MCP profile that offers it. The CLI options,
the MCP input schemas and tool table, the HTTP request models and the socket daemon's checks
are all derived from ``OPERATIONS``, so an operation's parameter is added in one place.
Declarations are registered where they are defined (``declare``), area by area:

    memory.py    remember, recall, get, update, forget, why, related, timeline, check, context …
    sessions.py  session start / summary / end, prompts, capture
    admin.py     consolidate, train, insights, projects, import/export, sync, reindex, doctor

This package imports only the leaves (errors, model); it knows nothing of typer, mcp or HTTP.
"""

from __future__ import annotations

from engram.operations import admin, memory, sessions
from engram.operations.params import Param, json_type
from engram.operations.spec import OPERATIONS, Operation, declare, for_adapter

__all__ = [
    "OPERATIONS",
    "Operation",
    "Param",
    "admin",
    "declare",
    "for_adapter",
    "get",
    "json_type",
    "memory",
    "sessions",
]


def get(name: str) -> Operation:
    """Return the operation called ``name`` (KeyError names the known ones)."""
    try:
        return OPERATIONS[name]
    except KeyError:
        raise KeyError(f"no operation {name!r}; operations: {', '.join(OPERATIONS)}") from None
