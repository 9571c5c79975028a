"""The search route: rank memories for any text; the facade's finished hit views, rendered."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engram.http_api.declared import implements
from engram.http_api.deps import Api, next_offset
from engram.http_api.models import Search, SearchOut

router = APIRouter(tags=["memories"])


@router.get("/search", response_model=SearchOut, response_model_exclude_unset=True)
@implements("recall")
async def search(params: Search, api: Api) -> dict[str, Any]:
    """Rank memories for any text, best first."""
    args = params.arguments()
    views = await api.call(api.engram.recall_views, **args)
    return {
        "query": args.get("query", ""),
        "hits": [view.full() for view in views],
        "limit": args["limit"],
        "offset": args["offset"],
        "next_offset": next_offset(views, args["limit"], args["offset"]),
    }
