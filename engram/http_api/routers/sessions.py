"""Routes on agent sessions: start and end one, its summary, prompts, capture and its review."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from engram.http_api.declared import implements
from engram.http_api.deps import CREATED, Api, SessionPath, saved
from engram.http_api.models import (
    CaptureOut,
    Capturing,
    Ending,
    NewSession,
    Prompting,
    Reviewing,
    ReviewOut,
    SaveOut,
    Session,
    SessionEnded,
    Summarising,
)

router = APIRouter(tags=["sessions"])


@router.post(
    "/sessions", response_model=Session, status_code=201, response_model_exclude_unset=True
)
@implements("session_start")
async def start_session(session: NewSession, api: Api) -> dict[str, Any]:
    """Start (or reopen) a session; without an id a new one is made."""
    return (await api.call(api.engram.session_start, **session.arguments())).to_dict()


@router.post("/sessions/{id}/end", response_model=SessionEnded, response_model_exclude_unset=True)
@implements("session_end")
async def end_session(id: SessionPath, ending: Ending, api: Api) -> dict[str, Any]:
    """End a session, saving ``summary`` as its summary when given."""
    return (await api.call(api.engram.session_end, id, **ending.arguments())).to_dict()


@router.post("/sessions/{id}/summary", response_model=SaveOut, status_code=201, responses=CREATED)
@implements("session_summary")
async def session_summary(
    id: SessionPath, summary: Summarising, response: Response, api: Api
) -> dict[str, Any]:
    """Save a session's summary (one per session: a later one revises it)."""
    result = await api.call(api.engram.session_summary, **summary.arguments(), session_id=id)
    return saved(result, response)


@router.post("/prompts", response_model=SaveOut, status_code=201, responses=CREATED)
@implements("save_prompt")
async def save_prompt(prompt: Prompting, response: Response, api: Api) -> dict[str, Any]:
    """Save a user's prompt (kind ``prompt``)."""
    return saved(await api.call(api.engram.save_prompt, **prompt.arguments()), response)


@router.post("/capture", response_model=CaptureOut)
@implements("capture")
async def capture(output: Capturing, api: Api) -> dict[str, Any]:
    """Propose the learnings of an agent's output (its last "Key Learnings" section)."""
    return (await api.call(api.engram.capture, **output.arguments())).to_dict()


@router.get("/review", response_model=ReviewOut)
@implements("review")
async def review_list(api: Api) -> dict[str, Any]:
    """List proposed memories (oldest first), or accept, reject or merge them."""
    return (await api.call(api.engram.review)).to_dict()


@router.post("/review", response_model=ReviewOut)
@implements("review")
async def review(action: Reviewing, api: Api) -> dict[str, Any]:
    """List proposed memories (oldest first), or accept, reject or merge them."""
    return (await api.call(api.engram.review, **action.arguments())).to_dict()
