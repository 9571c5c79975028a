"""Routes that move memories between stores: export, import, and what sync has pending."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engram.http_api.declared import implements
from engram.http_api.deps import Api
from engram.http_api.models import Exporting, ExportOut, ImportIn, ImportOut, Syncing, SyncStatusOut

router = APIRouter(tags=["sync"])


@router.get("/export", response_model=ExportOut)
@implements("export")
async def export(params: Exporting, api: Api) -> dict[str, Any]:
    """Return every memory and tombstone of a store as engram's export document."""
    return (await api.call(api.engram.export, **params.arguments())).to_dict()


@router.post("/import", response_model=ImportOut)
@implements("import")
async def import_(document: ImportIn, api: Api) -> dict[str, Any]:
    """Merge an export document into the store (the one merge function)."""
    result = await api.call(api.engram.import_, document.model_dump())
    return result.to_dict()


@router.get("/sync/status", response_model=SyncStatusOut)
async def sync_status(params: Syncing, api: Api) -> dict[str, Any]:
    """Return the sync chunks, their contributors and what is pending either way."""
    status = await api.call(api.engram.sync_status, **params.arguments())
    return status.to_dict()
