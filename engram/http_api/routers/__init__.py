"""The HTTP API's routes, one router per area; each takes a request, calls the facade, returns.

    meta      /health, /stats
    memories  /memories (save, browse), /memories/{id} (read, change, forget, judge)
    search    /search
    graph     /memories/{id}/why, /related, /timeline
    agents    /check, /context
    sessions  /sessions, /sessions/{id}/end, /summary, /prompts, /capture
    sync      /export, /import, /sync/status
    hygiene   /consolidate/preview

``ROUTERS`` is the order the app includes them in (and the order of the OpenAPI document).
``goengram`` (Go engram's routes) is not among them: ``create_app`` puts it first under
``--compat go-engram``, without the routes of these at the same method and path.
"""

from __future__ import annotations

from typing import Final

from engram.http_api.routers import agents, graph, hygiene, memories, meta, search, sessions, sync

ROUTERS: Final = (
    meta.router,
    memories.router,
    search.router,
    graph.router,
    agents.router,
    sessions.router,
    sync.router,
    hygiene.router,
)

__all__ = ["ROUTERS"]
