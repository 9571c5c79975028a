"""The session tools: session_start, session_summary, session_end, save_prompt, capture, review.

Each handler calls the facade once and renders a short answer within the call's budget.

It must not import the mcp SDK nor any other adapter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engram.mcp_server.tools.registry import Args, handler
from engram.operations.sessions import SUMMARY_SECTIONS
from engram.operations.views import TITLE_CHARS, UNREVIEWED, clip

if TYPE_CHECKING:
    from engram.mcp_server.core import EngramMCP
    from engram.mcp_server.table import Call
    from engram.service import SaveResult


def saved(result: SaveResult, call: Call) -> str:
    """Return the answer to a session save: id, what happened, its session, redactions."""
    record = result.record
    payload: dict[str, Any] = {
        "id": record["id"],
        "action": result.action,
        "rev": record.get("rev"),
        "title": clip(record.get("title", ""), TITLE_CHARS),
    }
    if record.get("session_id"):
        payload["session_id"] = record["session_id"]
    if result.redactions:
        payload["redacted"] = result.redactions
    return call.render(payload)


@handler("session_start")
def session_start(mcp: EngramMCP, args: Args, call: Call) -> str:
    session = mcp.engram.session_start(
        args.get("session_id"),
        directory=str(args.get("directory") or ""),
        project=args.get("project"),
    )
    return call.render({"session_id": session.id, **session.to_dict()})


@handler("session_summary")
def session_summary(mcp: EngramMCP, args: Args, call: Call) -> str:
    sections = {p.name: args.get(p.name) for p in SUMMARY_SECTIONS if args.get(p.name)}
    result = mcp.engram.session_summary(
        str(args.get("content") or ""),
        session_id=args.get("session_id"),
        project=args.get("project"),
        **sections,
    )
    return saved(result, call)


@handler("session_end")
def session_end(mcp: EngramMCP, args: Args, call: Call) -> str:
    session = mcp.engram.session_end(
        args.get("session_id"),
        summary=str(args.get("summary") or ""),
        project=args.get("project"),
    )
    payload = {key: value for key, value in session.to_dict().items() if key != "summary"}
    return call.render({"session_id": session.id, **payload})


@handler("save_prompt")
def save_prompt(mcp: EngramMCP, args: Args, call: Call) -> str:
    result = mcp.engram.save_prompt(
        str(args["content"]), session_id=args.get("session_id"), project=args.get("project")
    )
    return saved(result, call)


@handler("capture")
def capture(mcp: EngramMCP, args: Args, call: Call) -> str:
    result = mcp.engram.capture(
        str(args["content"]),
        session_id=args.get("session_id"),
        project=args.get("project"),
        source=str(args.get("source") or "capture"),
    )
    rows = {
        key: [{**item.to_dict(), "title": clip(item.title, TITLE_CHARS)} for item in items]
        for key, items in (("saved", result.saved), ("duplicates", result.duplicates))
    }
    longest = max(len(rows["saved"]), len(rows["duplicates"]), 1)

    def build(n: int) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "extracted": result.extracted,
            "saved": rows["saved"][:n],
            "already_known": rows["duplicates"][:n],
        }
        if not result.extracted:
            payload["hint"] = (
                'no "Key Learnings" section with items of 20 characters or more was found'
            )
        if n < longest:
            payload["more"] = (
                "Lists were cut to fit the budget; all items were saved (proposed, for review)."
            )
        return payload

    text, _ = call.fit(build, longest)
    return text


@handler("review")
def review(mcp: EngramMCP, args: Args, call: Call) -> str:
    result = mcp.engram.review(
        str(args.get("action") or "list"),
        list(args.get("ids") or []),
        every=bool(args.get("all")),
        title=args.get("title"),
        content=args.get("content"),
        into=args.get("into"),
        limit=args.get("limit"),
    )
    rows = [
        {
            "id": record["id"],
            "kind": record.get("kind"),
            "status": record.get("status"),
            "label": UNREVIEWED if record.get("status") == "proposed" else "",
            "title": clip(str(record.get("title", "")), TITLE_CHARS),
            "files": list(record.get("files") or []),
            "source": record.get("source"),
        }
        for record in result.items
    ]

    def build(n: int) -> dict[str, Any]:
        payload: dict[str, Any] = {"action": result.action, "items": rows[:n], "left": result.left}
        if n < len(rows):
            payload["more"] = f"{len(rows) - n} more not shown: call review with a limit."
        return payload

    text, _ = call.fit(build, max(len(rows), 1))
    return text
