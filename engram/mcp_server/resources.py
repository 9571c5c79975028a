"""The ``engram://`` resources: the session briefing, the counts, and one memory by id.

``engram://context`` is the briefing the ``context`` tool packs, ``engram://stats`` the
``stats`` tool's answer, ``engram://memory/{id}`` (a template) what ``get`` reads, framed as
data with provenance. Each is rendered within the server's response budget.

It must not import the mcp SDK nor any other adapter.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from engram.errors import NotFound
from engram.mcp_server.catalog import tables
from engram.mcp_server.paging import CHARS_PER_TOKEN
from engram.mcp_server.table import Call
from engram.mcp_server.tools.around import briefing, stats_payload
from engram.mcp_server.tools.memory import read_memory

if TYPE_CHECKING:
    from engram.mcp_server.core import EngramMCP


def read_resource(mcp: EngramMCP, uri: str) -> tuple[str, str]:
    """Return (text, mime type) of an engram:// resource; raise EngramError if it fails."""
    budget = mcp.budget * CHARS_PER_TOKEN
    if uri == "engram://stats":
        text = Call(tables().by_name["stats"], budget).render(stats_payload(mcp))
        return text, "application/json"
    if uri == "engram://context":
        return context_digest(mcp, budget), "text/markdown"
    match = re.fullmatch(r"engram://memory/([^/?#]+)", uri)
    if match:
        call = Call(tables().by_name["get"], budget)
        return read_memory(mcp, match.group(1), None, call), "application/json"
    raise NotFound(
        f"no resource {uri}",
        hint="resources: engram://context, engram://stats, engram://memory/{id}",
    )


def context_digest(mcp: EngramMCP, budget: int) -> str:
    """Return the session briefing (the context packer's text) within ``budget`` characters."""
    return briefing(mcp, None).text[:budget]
