"""Routes an agent calls around its work: check files before editing, the session briefing."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engram.http_api.declared import implements
from engram.http_api.deps import Api
from engram.http_api.models import Briefing, Checking, CheckOut, ContextOut

router = APIRouter(tags=["agents"])


@router.post("/check", response_model=CheckOut)
@implements("check")
async def check(request: Checking, api: Api) -> dict[str, Any]:
    """Return what the memory knows about files about to be edited, packed under a budget."""
    return (await api.call(api.engram.check, **request.arguments())).to_dict()


@router.get("/context", response_model=ContextOut)
@implements("context")
async def context(params: Briefing, api: Api) -> dict[str, Any]:
    """Return the session-start briefing packed under a token budget."""
    return (await api.call(api.engram.context, **params.arguments())).to_dict()
