"""Routes on memories: save, browse, read, change, judge and forget one."""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, Response

from engram.errors import InvalidInput
from engram.http_api.declared import OpenDeclared, implements
from engram.http_api.deps import CREATED, Api, Id, next_offset, saved
from engram.http_api.models import (
    Changes,
    Forgetting,
    Judging,
    Listing,
    Memory,
    NewMemory,
    PageOut,
    SaveOut,
)

router = APIRouter(tags=["memories"])

# Fields the store sets itself: a request may not write them as "unknown" extra fields.
RESERVED: Final = frozenset(
    {
        "id",
        "rev",
        "created_at",
        "updated_at",
        "deleted_at",
        "history",
        "duplicate_count",
        "judgements",
        "anchors",
    }
)


def extras(fields: OpenDeclared) -> dict[str, Any]:
    """Return the fields a request gave beyond the declared ones; refuse reserved ones."""
    extra = fields.extras()
    reserved = sorted(RESERVED & set(extra))
    if reserved:
        raise InvalidInput(
            f"{', '.join(reserved)}: set by the store, not by a request",
            hint="leave these fields out; ids and revisions are assigned by engram",
        )
    return extra


@router.post("/memories", response_model=SaveOut, status_code=201, responses=CREATED)
@implements("remember")
async def create_memory(fields: NewMemory, response: Response, api: Api) -> dict[str, Any]:
    """Save a memory (201); a known topic key or an identical recent save updates (200)."""
    extra = extras(fields)
    result = await api.call(api.engram.remember, **fields.arguments(), extra=extra)
    return saved(result, response)


@router.get("/memories", response_model=PageOut)
@implements("recall")
async def list_memories(params: Listing, api: Api) -> dict[str, Any]:
    """Browse memories with filters (they combine with AND), best ranked first."""
    args = params.arguments()
    hits = await api.call(api.engram.recall, **args)
    return {
        "memories": [hit.record for hit in hits],
        "limit": args["limit"],
        "offset": args["offset"],
        "next_offset": next_offset(hits, args["limit"], args["offset"]),
    }


@router.get("/memories/{id}", response_model=Memory)
@implements("get")
async def get_memory(id: Id, api: Api) -> dict[str, Any]:
    """Return the memory an id or unique prefix names."""
    return await api.call(api.engram.get, id)


@router.patch("/memories/{id}", response_model=Memory)
@implements("update")
async def update_memory(id: Id, changes: Changes, api: Api) -> dict[str, Any]:
    """Change fields of a memory (rev+1); returns the memory."""
    extra = extras(changes)
    if "scope" in extra:
        raise InvalidInput(
            "a memory cannot move between the project and the personal store",
            hint="save a copy with the other scope (POST /memories), then delete this one",
        )
    return await api.call(api.engram.update, id, **changes.arguments(), **extra)


@router.delete("/memories/{id}", response_model=Memory)
@implements("forget")
async def delete_memory(id: Id, params: Forgetting, api: Api) -> dict[str, Any]:
    """Forget a memory: a tombstone that travels to clones (``hard`` drops its text)."""
    return await api.call(api.engram.forget, id, **params.arguments())


@router.post("/memories/{id}/judge", response_model=Memory)
@implements("judge")
async def judge(id: Id, judgement: Judging, api: Api) -> dict[str, Any]:
    """Record a judgement of a memory (it moves the ranking); returns the memory."""
    return await api.call(api.engram.judge, id, **judgement.arguments())
