"""tools/ holds the MCP tool handlers, each registered where it is defined (``registry``).

    registry.py  HANDLERS, the ``handler`` decorator, what the handlers share
    memory.py    remember, recall, get, update, suggest_topic_key, judge, forget
    around.py    context, check, stats, why, related, timeline
    sessions.py  session_start, session_summary, session_end, save_prompt, capture, review
    admin.py     export, import, consolidation, the trainer, projects, sync, reindex, doctor
    go.py        the handlers behind Go engram's names: text answers with Go's integer ids

Importing this package registers every handler. It must not import the mcp SDK nor any other
adapter.
"""

from __future__ import annotations

from engram.mcp_server.tools import admin, around, go, memory, sessions
from engram.mcp_server.tools.registry import HANDLERS, Handler, handler

__all__ = ["HANDLERS", "Handler", "admin", "around", "go", "handler", "memory", "sessions"]
