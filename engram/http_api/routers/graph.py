"""Routes on a memory's graph: its lineage, its neighbours and its timeline."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engram.http_api.declared import implements
from engram.http_api.deps import Api, Id
from engram.http_api.models import Around, LineageOut, Neighbours, RelatedOut, TimelineOut

router = APIRouter(tags=["graph"])


@router.get("/memories/{id}/why", response_model=LineageOut, response_model_exclude_unset=True)
@implements("why")
async def why(id: Id, api: Api) -> dict[str, Any]:
    """Return a memory's lineage: supersede chains, links, provenance, judgements."""
    return (await api.call(api.engram.why, id)).to_dict()


@router.get("/memories/{id}/related", response_model=RelatedOut)
@implements("related")
async def related(id: Id, params: Neighbours, api: Api) -> dict[str, Any]:
    """Return a memory's neighbours by links, shared files and tags, best first."""
    found = await api.call(api.engram.related, id, **params.arguments())
    return {"related": [item.to_dict() for item in found]}


@router.get(
    "/memories/{id}/timeline", response_model=TimelineOut, response_model_exclude_unset=True
)
@implements("timeline")
async def timeline(id: Id, params: Around, api: Api) -> dict[str, Any]:
    """Return what happened before and after a memory, oldest first."""
    return (await api.call(api.engram.timeline, id, **params.arguments())).to_dict()
