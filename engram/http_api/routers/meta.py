"""Routes about the server and the store: liveness and counts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engram.http_api.declared import implements
from engram.http_api.deps import Api
from engram.http_api.models import HealthOut, StatsOut

router = APIRouter(tags=["meta"])


@router.get("/health", response_model=HealthOut)
async def health(api: Api) -> dict[str, Any]:
    """Tell that the server is up, its version and the project it serves."""
    return {"status": "ok", "version": api.version, "project": api.engram.project}


@router.get("/stats", response_model=StatsOut)
@implements("stats")
async def stats(api: Api) -> dict[str, Any]:
    """Return counts by kind, status, scope and project, and the sizes of the files."""
    return (await api.call(api.engram.stats)).to_dict()
