"""The tools that look around memories: context, check, stats, why, related, timeline.

Each handler calls the facade and renders the answer within the call's budget: the briefing
and the pre-edit check are packed again with fewer tokens until they fit
(``engram.mcp_server.paging``), lists are cut to fit and say so. ``briefing`` and ``stats_payload``
are shared with the ``engram://`` resources.

It must not import the mcp SDK nor any other adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.mcp_server.paging import CHARS_PER_TOKEN, fitted_check, shrink
from engram.mcp_server.tools.registry import (
    GET_NOTE,
    LIST_CAP,
    RECALL_NOTE,
    Args,
    handler,
)
from engram.operations.advice import PERSON
from engram.operations.views import ID_CHARS, TITLE_CHARS, clip, provenance

if TYPE_CHECKING:
    from engram.mcp_server.core import EngramMCP
    from engram.mcp_server.table import Call
    from engram.service import Briefing, Findings


def stats_payload(mcp: EngramMCP) -> dict[str, Any]:
    """Return the store counts, each by_* list capped, with index sizes."""
    data = mcp.engram.stats().to_dict()
    stores = []
    for store in data["stores"]:
        entry = dict(store)
        for key in ("by_kind", "by_status", "by_scope", "by_project", "top_tags"):
            counts = dict(entry.get(key) or {})
            if len(counts) > LIST_CAP:
                shown = dict(list(counts.items())[:LIST_CAP])
                shown[f"({len(counts) - LIST_CAP} more)"] = sum(list(counts.values())[LIST_CAP:])
                counts = shown
            entry[key] = counts
        index_dir = Path(store["path"]).parent / "index"
        entry["index_bytes"] = (
            sum(p.stat().st_size for p in index_dir.rglob("*") if p.is_file())
            if index_dir.is_dir()
            else 0
        )
        stores.append(entry)
    return {"project": data["project"], "root": data["root"], "stores": stores}


@handler("stats")
def stats(mcp: EngramMCP, args: Args, call: Call) -> str:
    return call.render(stats_payload(mcp))


def briefing_budget(mcp: EngramMCP, budget: int | None) -> int:
    """Return the briefing's tokens: as asked (else context.budget), at most the response's."""
    if budget is None:
        budget = int(mcp.engram.config.number("context.budget"))
    return min(budget, mcp.budget)


def briefing(mcp: EngramMCP, budget: int | None, query: str = "") -> Briefing:
    """Return the packed session briefing, its budget capped by the response budget."""
    return mcp.engram.context(budget=briefing_budget(mcp, budget), query=query)


@handler("context")
def context(mcp: EngramMCP, args: Args, call: Call) -> str:
    query = str(args.get("query") or "")

    def answer(tokens: int) -> dict[str, Any]:
        packed = mcp.engram.context(budget=tokens, query=query)
        return {"briefing": packed.text, "tokens": packed.tokens, "left_out": packed.left_out}

    # JSON escaping lengthens the text a little: shrink until the answer fits.
    start = briefing_budget(mcp, args.get("budget"))
    return call.render(shrink(answer, call.fits, start, factor=0.9))


@handler("check")
def check(mcp: EngramMCP, args: Args, call: Call) -> str:
    budget: int | None = args.get("budget")
    if budget is None:
        configured = int(mcp.engram.config.number("check.budget"))
        budget = min(configured, call.chars // CHARS_PER_TOKEN)
    files, text = args.get("files") or [], str(args.get("text") or "")

    def run(tokens: int) -> Findings:
        return mcp.engram.check(files, text=text, budget=tokens)

    return call.render(fitted_check(run, budget, call.fits))


LINEAGE: Final = ("supersedes", "superseded_by", "links_out", "links_in")


@handler("why")
def why(mcp: EngramMCP, args: Args, call: Call) -> str:
    record = mcp.record(args["id"])
    data = mcp.engram.why(record["id"]).to_dict()
    ids = {data["memory"]["id"]} | {item["id"] for key in LINEAGE for item in data[key]}
    short = mcp.engram.short_ids(sorted(ids), ID_CHARS)
    note = GET_NOTE.format(who=provenance(record))
    longest = max([len(data[key]) for key in LINEAGE] + [len(data["judgements"]), 1])
    text, _ = call.fit(lambda n: lineage(data, short, note, n, longest), longest)
    return text


def lineage(
    data: Mapping[str, Any], short: Mapping[str, str], note: str, n: int, longest: int
) -> dict[str, Any]:
    """Return a memory's lineage (``Engram.why``) with each list cut to its first ``n``."""

    def brief(item: Mapping[str, Any]) -> dict[str, Any]:
        out = {**item, "id": short.get(item["id"], item["id"])}
        if "via" in out:
            out["via"] = short.get(out["via"], out["via"])
        out["title"] = clip(out.get("title", ""), TITLE_CHARS)
        return out

    payload: dict[str, Any] = {"note": note, "memory": brief(data["memory"])}
    for key in LINEAGE:
        if data[key]:
            payload[key] = [brief(item) for item in data[key][:n]]
            if len(data[key]) > n:
                payload[key + "_left_out"] = len(data[key]) - n
    payload["provenance"] = data["provenance"]
    if data.get("stale"):
        payload["may_be_stale"] = data["stale"]
    if data["judgements"]:
        payload["judgements"] = data["judgements"][:n]
    if data["history"]:
        payload["earlier_versions"] = data["history"]
    if data["dangling"]:
        payload["dangling"] = data["dangling"][:n]
    if data["cycles"]:
        payload["cycles"] = data["cycles"][:n]
    if n < longest:
        payload["more"] = f"Lists were cut to fit the budget: {PERSON}`engram why ID` for all."
    return payload


@handler("related")
def related(mcp: EngramMCP, args: Args, call: Call) -> str:
    record = mcp.record(args["id"])
    found = mcp.engram.related(record["id"], limit=int(args.get("limit") or 10))
    items = [item.to_dict() for item in found]
    short = mcp.engram.short_ids([item["id"] for item in items], ID_CHARS)
    rows = [
        {
            **item,
            "id": short.get(item["id"], item["id"]),
            "title": clip(item["title"], TITLE_CHARS),
            "score": round(float(item["score"]), 3),
        }
        for item in items
    ]

    def build(n: int) -> dict[str, Any]:
        payload: dict[str, Any] = {"note": RECALL_NOTE, "related": rows[:n]}
        if n < len(rows):
            payload["more"] = "Cut to fit the budget: call again with a smaller limit."
        if not rows:
            payload["hint"] = "nothing shares links, files or tags with this memory"
        return payload

    text, _ = call.fit(build, len(rows))
    return text


@handler("timeline")
def timeline(mcp: EngramMCP, args: Args, call: Call) -> str:
    record = mcp.record(args["id"])
    data = mcp.engram.timeline(
        record["id"], before=int(args.get("before", 5)), after=int(args.get("after", 5))
    ).to_dict()
    items = [*data["before"], data["memory"], *data["after"]]
    short = mcp.engram.short_ids([item["id"] for item in items], ID_CHARS)

    def line(item: Mapping[str, Any]) -> str:
        stamp = str(item.get("created_at", ""))[:16].replace("T", " ")
        title = clip(str(item.get("title", "")), TITLE_CHARS)
        return f"{stamp} {short.get(item['id'], item['id'])} {item.get('kind')}: {title}"

    def build(n: int) -> dict[str, Any]:
        before, after = data["before"][-n:] if n else [], data["after"][:n]
        payload: dict[str, Any] = {
            "note": RECALL_NOTE,
            "scope": data["scope"],
            "session_id": data["session_id"],
            "earlier": data["earlier"] + len(data["before"]) - len(before),
            "before": [line(item) for item in before],
            "memory": line(data["memory"]),
            "after": [line(item) for item in after],
            "later": data["later"] + len(data["after"]) - len(after),
        }
        if data["session_id"] is None:
            payload["hint"] = "no session: these are the project's memories around it in time"
        return payload

    text, _ = call.fit(build, max(len(data["before"]), len(data["after"])))
    return text
