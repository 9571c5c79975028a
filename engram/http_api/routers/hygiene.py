"""Routes of the memory's hygiene: what consolidation would merge, archive or drop."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engram.http_api.declared import implements
from engram.http_api.deps import Api
from engram.http_api.models import ConsolidationGroup

router = APIRouter(tags=["hygiene"])


@router.get("/consolidate/preview", response_model=list[ConsolidationGroup])
@implements("consolidate_preview")
async def consolidate_preview(api: Api) -> list[dict[str, Any]]:
    """Return candidate groups for consolidation, each with a reason and an action."""
    return [group.to_dict() for group in await api.call(api.engram.consolidate_preview)]
