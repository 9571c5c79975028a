"""engram-rs compatibility: its memory shape (context / action / result) mapped onto engram's.

engram-rs stores a memory as ``memory_type``, ``context``, ``action``, ``result``, ``tags`` and
``project``, and answers with its own shapes (``{id, indexed, deduplicated}``, ``{memories,
count}`` …). The MCP server's ``--compat engram-rs`` tools and the daemon's socket methods both
use these functions, so the mapping is written once. Plain data in, plain data out.
"""

from __future__ import annotations

from typing import Any, Final

from engram.errors import InvalidInput
from engram.operations.views import clip

Args = dict[str, Any]
RS_TYPES: Final = ("decision", "pattern", "bugfix", "context", "antipattern")
RS_BACK: Final = {"pitfall": "antipattern", "fact": "context"}


def rs_title(context: str, action: str) -> str:
    line = next((ln.strip() for ln in (action or context).splitlines() if ln.strip()), "")
    return clip(line or "memory", 120)


def rs_content(context: str, action: str, result: str) -> str:
    parts = [("Context", context), ("Action", action), ("Result", result)]
    return "\n\n".join(f"**{name}:** {text.strip()}" for name, text in parts if text.strip())


def store_args(args: Args) -> Args:
    context, action = str(args.pop("context", "")), str(args.pop("action", ""))
    result = str(args.pop("result", "") or "")
    args["title"] = rs_title(context, action)
    args["content"] = rs_content(context, action, result)
    return args


def store_shape(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": payload["id"],
        "indexed": True,
        "deduplicated": payload.get("action") == "duplicate",
    }


def search_shape(payload: dict[str, Any]) -> dict[str, Any]:
    memories = [
        {**hit, "memory_type": RS_BACK.get(str(hit.get("kind")), hit.get("kind"))}
        for hit in payload.get("hits", [])
    ]
    out: dict[str, Any] = {"note": payload["note"], "memories": memories, "count": len(memories)}
    for key in ("next_cursor", "more"):
        if key in payload:
            out[key] = payload[key]
    return out


def status_shape(payload: dict[str, Any]) -> dict[str, Any]:
    stores = payload["stores"]
    pending = sum(int(s.get("pending", 0)) for s in stores)
    hints: list[str] = []
    if pending:
        hints.append(f"{pending} memories wait for the full-text index; the next search adds them")
    if not any(s["memories"] for s in stores):
        hints.append("no memories yet: save one with memory_store")
    return {
        "memory_count": sum(int(s["memories"]) for s in stores),
        "indexed_count": sum(int(s.get("indexed", 0)) for s in stores),
        "pending_judgments": 0,
        "index_size": sum(int(s.get("index_bytes", 0)) for s in stores),
        "hints": hints,
    }


def export_shape(payload: dict[str, Any]) -> dict[str, Any]:
    out = {
        "version": 1,
        "memories": payload["memories"],
        "exported_at": payload["exported_at"],
        "count": payload["count"],
    }
    for key in ("omitted", "next_cursor", "more"):
        if key in payload:
            out[key] = payload[key]
    return out


def rs_record(item: Any) -> Any:
    """Turn one engram-rs memory into an engram record (engram records pass unchanged)."""
    if not isinstance(item, dict) or "title" in item or not ({"context", "action"} & set(item)):
        return item
    context, action = str(item.get("context") or ""), str(item.get("action") or "")
    result = str(item.get("result") or "")
    text = "\x1f".join((context, action, result)).encode("utf-8")
    import hashlib

    rid = str(item.get("id") or "rs-" + hashlib.sha256(text).hexdigest()[:24])
    stamp = item.get("created_at") or item.get("updated_at")
    tags = item.get("tags")
    record: dict[str, Any] = {
        "id": rid,
        "kind": str(item.get("memory_type") or "note"),
        "title": rs_title(context, action),
        "content": rs_content(context, action, result),
        "tags": [t.strip() for t in tags.split(",") if t.strip()]
        if isinstance(tags, str)
        else list(tags or []),
        "source": "import:engram-rs",
        "created_at": stamp,
        "updated_at": item.get("updated_at") or stamp,
        "rev": 1,
    }
    if item.get("project"):
        record["project"] = str(item["project"])
    if not stamp:
        from engram.model import now

        record["created_at"] = record["updated_at"] = now()
    return record


def import_args(args: Args) -> Args:
    version = args.get("version")
    if version != 1:
        raise InvalidInput(
            f"[6010] import version mismatch: expected 1, got {version!r}",
            hint="export again with memory_export, which writes version 1",
        )
    memories = [rs_record(item) for item in args.get("memories") or []]
    return {"document": {"version": 1, "memories": memories}}


def import_shape(payload: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "imported": payload["added"] + payload["updated"],
        "skipped": payload["unchanged"] + len(payload["errors"]),
    }
    if payload["errors"]:
        out["errors"] = payload["errors"]
    return out
