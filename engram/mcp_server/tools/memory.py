"""The tools over one memory: remember, recall, get, update, suggest_topic_key, judge, pin …

Each handler checks nothing itself (its tool's schema did), calls the facade once and renders
the answer within the call's budget; hits are rendered through ``engram.operations.views``,
paging through ``engram.mcp_server.paging``. Recall passes the filters its declaration names
(``RECALL.filter_values``), so a filter added there reaches the service without an edit here.

It must not import the mcp SDK nor any other adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engram.errors import InvalidInput
from engram.mcp_server.paging import Budget, Page, decode_cursor, encode_cursor, memory_page, unseen
from engram.mcp_server.tools.registry import (
    BROWSE_NOTE,
    GET_NOTE,
    MORE_NOTE,
    RECALL_NOTE,
    Args,
    as_list,
    handler,
)
from engram.operations import advice
from engram.operations.memory import RECALL, RECALL_LIMIT
from engram.operations.views import TITLE_CHARS, HitView, clip, provenance

if TYPE_CHECKING:
    from engram.mcp_server.core import EngramMCP
    from engram.mcp_server.table import Call
    from engram.service import Engram, Hit, SaveResult


@handler("remember")
def remember(mcp: EngramMCP, args: Args, call: Call) -> str:
    # kind, importance, status, scope: REMEMBER's declared defaults, filled in by the tool's
    # schema check; a name of another tool for it that leaves one out gets the write path's
    # (the same declaration), never one stated here.
    given = {key: args[key] for key in ("kind", "importance", "status", "scope") if args.get(key)}
    result = mcp.engram.remember(
        args["title"],
        args.get("content") or "",
        tags=args.get("tags"),
        files=args.get("files"),
        topic_key=args.get("topic_key"),
        links=as_list(args.get("links")),
        source="agent",
        session_id=args.get("session_id"),
        project=args.get("project"),
        **given,
    )
    return call.render(saved_payload(result))


def saved_payload(result: SaveResult) -> dict[str, Any]:
    """Return the answer to a save: id, what happened, and what the save noticed."""
    record = result.record
    payload: dict[str, Any] = {
        "id": record["id"],
        "action": result.action,
        "rev": record.get("rev"),
        "kind": record.get("kind"),
        "title": clip(record.get("title", ""), TITLE_CHARS),
    }
    if record.get("topic_key"):
        payload["topic_key"] = record["topic_key"]
    if result.action == "duplicate":
        payload["note"] = (
            f"already saved: counted again (duplicate_count {record.get('duplicate_count')})"
        )
    elif result.action == "updated":
        payload["note"] = "updated the memory with this topic_key; earlier text kept"
    if result.redactions:
        payload["redacted"] = result.redactions
    if result.warnings:
        payload["warnings"] = result.warnings
    if result.superseded:
        payload["superseded"] = result.superseded
    if result.similar:
        payload["similar"] = result.similar
        payload["hint"] = (
            f"memories saying nearly the same exist (similar): read them "
            f"({advice.cmd('get', id='ID')}), then update one to say it all and retire the "
            f"other ({advice.cmd('update', id='ID', status='superseded')}) instead of keeping both"
        )
    return payload


def recall_query(args: Args) -> dict[str, Any]:
    """Return a recall's words and declared filters (by service keyword), the empty ones left out.

    This is what a cursor's later pages repeat.
    """
    query = {"query": args.get("query"), **RECALL.filter_values(args)}
    return {key: value for key, value in query.items() if value not in (None, "", [])}


def search(engram: Engram, query: Mapping[str, Any], limit: int) -> list[Hit]:
    """Return the hits of a recall query (``recall_query``), best first (for ``unseen``)."""
    filters = {key: value for key, value in query.items() if key != "query"}
    return engram.recall(str(query.get("query") or ""), **filters, limit=limit)


@handler("recall")
def recall(mcp: EngramMCP, args: Args, call: Call) -> str:
    query, shown, views = ranked(mcp, args)
    limit = int(args.get("limit") or RECALL_LIMIT)
    more, views = len(views) > limit, views[:limit]
    ids = [view.id for view in views]
    items = [view.compact() for view in views]
    token = mcp.pages.token()
    note = RECALL_NOTE + ("" if query.get("query") else BROWSE_NOTE)

    def build(n: int) -> dict[str, Any]:
        payload: dict[str, Any] = {"note": note, "hits": items[:n]}
        if n < len(items) or more:
            payload["next_cursor"] = encode_cursor({"t": "recall", "k": token})
            payload["more"] = MORE_NOTE.format(tool=call.tool.name)
        if not items and not shown:
            payload["hint"] = "no memories match: try other or fewer words, or fewer filters"
        return payload

    text, n = call.fit(build, len(items))
    if n < len(items) or more:
        mcp.pages.put(token, Page(dict(query), shown | frozenset(ids[:n])))
    return text


def ranked(mcp: EngramMCP, args: Args) -> tuple[dict[str, Any], frozenset[str], list[HitView]]:
    """Return a recall page's query, the ids earlier pages showed, and its views (one extra).

    The first page is the facade's ``recall_views``. With a cursor, the query is the first
    page's, and the hits of a longer ranking that earlier pages did not show are finished by
    the facade (``views``).
    """
    query = recall_query(args)
    limit = int(args.get("limit") or RECALL_LIMIT)
    engram = mcp.engram
    if not args.get("cursor"):
        filters = {key: value for key, value in query.items() if key != "query"}
        return (
            query,
            frozenset(),
            engram.recall_views(str(query.get("query") or ""), **filters, limit=limit + 1),
        )
    earlier = mcp.pages.follow(args["cursor"], "recall", query)
    hits = unseen(lambda q, n: search(engram, q, n), earlier.query, earlier.shown, limit)
    return dict(earlier.query), earlier.shown, engram.views(hits[: limit + 1])


@handler("get")
def get(mcp: EngramMCP, args: Args, call: Call) -> str:
    return read_memory(mcp, args.get("id"), args.get("cursor"), call)


def read_memory(mcp: EngramMCP, ref: str | int | None, cursor: str | None, call: Budget) -> str:
    """Return one memory framed as data, its content paged when over the budget."""
    state: dict[str, Any] = {}
    if cursor:
        state = decode_cursor(cursor, "get")
        ref = ref if ref is not None else state.get("id")
    if ref is None:
        raise InvalidInput("get needs an id (or a cursor from a previous get)")
    record = mcp.record(ref)
    if state and state.get("id") != record["id"]:
        raise InvalidInput("this cursor belongs to another memory")
    if state and state.get("rev") != record.get("rev"):
        raise InvalidInput(
            f"memory {record['id']} changed since this cursor was made "
            f"(rev {state.get('rev')}, now {record.get('rev')})",
            hint="call get again without a cursor",
        )
    note = GET_NOTE.format(who=provenance(record))
    stale = mcp.engram.stale(record)
    if stale:
        note += f" It may be stale: {'; '.join(stale)}."
    return memory_page(record, state, note, call)


@handler("update")
def update(mcp: EngramMCP, args: Args, call: Call) -> str:
    current = mcp.record(args["id"], "update")
    scope = args.pop("scope", None)
    if scope is not None and scope != current.get("scope", "project"):
        raise InvalidInput(
            f"memory {current['id']} is in the {current.get('scope', 'project')} store; "
            "update cannot move it",
            hint="remember it again with the other scope, then forget this one",
        )
    changes = {key: value for key, value in args.items() if key != "id"}
    if "links" in changes:
        changes["links"] = as_list(changes["links"])
    record = mcp.engram.update(current["id"], **changes)
    payload = {
        "id": record["id"],
        "rev": record.get("rev"),
        "status": record.get("status", "active"),
        "title": clip(record.get("title", ""), TITLE_CHARS),
    }
    if record.get("rev") == current.get("rev"):
        payload["note"] = "nothing changed: the memory already had these values"
    return call.render(payload)


@handler("suggest_topic_key")
def suggest_topic_key(mcp: EngramMCP, args: Args, call: Call) -> str:
    key = mcp.engram.suggest_topic_key(
        kind=args.get("kind") or "",
        title=args.get("title") or "",
        content=args.get("content") or "",
    )
    return call.render({"topic_key": key})


@handler("judge")
def judge(mcp: EngramMCP, args: Args, call: Call) -> str:
    record = mcp.record(args["id"], "judge")
    score = args.get("score")
    judged = mcp.engram.judge(
        record["id"],
        score=float(score) if score is not None else None,
        verdict=args.get("verdict"),
        reason=str(args.get("reason") or ""),
        query=str(args.get("query") or ""),
    )
    latest = judged["judgements"][-1]
    return call.render(
        {
            "id": judged["id"],
            "memory_id": judged["id"],
            "score": latest["score"],
            "verdict": latest.get("verdict"),
            "judgements": len(judged["judgements"]),
            "rev": judged.get("rev"),
        }
    )


@handler("pin")
def pin(mcp: EngramMCP, args: Args, call: Call) -> str:
    record = mcp.engram.pin(mcp.record(args["id"], "pin")["id"])
    return call.render({"id": record["id"], "pinned": True, "rev": record.get("rev")})


@handler("unpin")
def unpin(mcp: EngramMCP, args: Args, call: Call) -> str:
    record = mcp.engram.unpin(mcp.record(args["id"], "unpin")["id"])
    return call.render({"id": record["id"], "pinned": False, "rev": record.get("rev")})


@handler("forget")
def forget(mcp: EngramMCP, args: Args, call: Call) -> str:
    current = mcp.record(args["id"], "forget")
    hard = bool(args.get("hard"))
    record = mcp.engram.forget(current["id"], hard=hard)
    return call.render(
        {
            "id": record["id"],
            "forgotten": True,
            "hard": hard,
            "deleted_at": record.get("deleted_at"),
            "note": "a tombstone stays so the delete reaches other clones",
        }
    )
