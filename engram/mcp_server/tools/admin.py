"""The admin tools: export, import, consolidation, the trainer, projects, sync, reindex, doctor.

Each handler calls the facade and renders its report within the call's budget: long lists are
cut to fit and say where the whole report is (a command the user can run: no tool answers
with more); export pages with a cursor.
engram-rs's ``config`` (read-only here) is this adapter's own target.

It must not import the mcp SDK nor any other adapter.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.errors import InvalidInput
from engram.mcp_server.paging import decode_cursor, dumps, encode_cursor
from engram.mcp_server.tools.registry import MORE_NOTE, Args, handler, listing
from engram.model import DEFAULT_SCOPE, MAX_DOCUMENT_DEPTH, links_of, loads
from engram.operations.advice import PERSON
from engram.operations.views import TITLE_CHARS, clip

if TYPE_CHECKING:
    from engram.mcp_server.core import EngramMCP
    from engram.mcp_server.table import Call


@handler("export")
def export(mcp: EngramMCP, args: Args, call: Call) -> str:
    scope = str(args.get("scope") or DEFAULT_SCOPE)
    after = ""
    if args.get("cursor"):
        state = decode_cursor(args["cursor"], "export")
        scope, after = str(state.get("scope", scope)), str(state.get("after", ""))
    document = mcp.engram.export(scope=scope).to_dict()
    head = {key: value for key, value in document.items() if key != "memories"}
    records = [r for r in document["memories"] if not after or str(r["id"]) > after]
    # A record larger than a page on its own is listed, never cut: get pages its content.
    room = call.chars - len(dumps(head)) - 600
    omitted = [r["id"] for r in records if len(dumps(r)) > room]
    items = [r for r in records if len(dumps(r)) <= room] if omitted else records

    def build(n: int) -> dict[str, Any]:
        page = items[:n]
        payload: dict[str, Any] = {**head, "memories": page}
        last = str(page[-1]["id"]) if page else after
        skipped = [rid for rid in omitted if rid <= last or n == len(items)]
        if skipped:
            payload["omitted"] = {
                "ids": skipped,
                "why": "each is larger than a response; read them with get",
            }
        if n < len(items):
            payload["next_cursor"] = encode_cursor({"t": "export", "scope": scope, "after": last})
            payload["more"] = MORE_NOTE.format(tool=call.tool.name)
        return payload

    return call.fit(build, len(items))[0]


def _read_document(mcp: EngramMCP, path: str) -> Any:
    """Return the JSON document in a file (relative to the project's root)."""
    file = Path(path).expanduser()
    if not file.is_absolute():
        file = mcp.engram.root / file
    from engram.fileio import read_regular

    data = read_regular(file)  # an agent's path: a named pipe or a device is refused at once
    try:
        return loads(data.decode("utf-8"), what=str(file), max_depth=MAX_DOCUMENT_DEPTH)
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{file} is not valid UTF-8 (byte {exc.start})") from exc
    except ValueError as exc:
        raise InvalidInput(f"{file}: not valid JSON: {exc}") from exc


@handler("import")
def import_(mcp: EngramMCP, args: Args, call: Call) -> str:
    document, path = args.get("document"), args.get("path")
    if (document is None) == (path is None):
        raise InvalidInput("import needs either document or path (not both)")
    if path is not None:
        document = _read_document(mcp, path)
    payload = mcp.engram.import_(document).to_dict()
    errors = payload["errors"]

    def build(n: int) -> dict[str, Any]:
        out = {**payload, "errors": errors[:n]}
        if n < len(errors):
            out["errors_not_shown"] = len(errors) - n
        return out

    return call.fit(build, len(errors))[0]


@handler("consolidate_preview")
def consolidate_preview(mcp: EngramMCP, args: Args, call: Call) -> str:
    return listing("groups", [group.to_dict() for group in mcp.engram.consolidate_preview()], call)


@handler("consolidate")
def consolidate(mcp: EngramMCP, args: Args, call: Call) -> str:
    plan = mcp.engram.consolidate(llm=mcp.sampler).to_dict()
    items = plan["recommendations"]

    def build(n: int) -> dict[str, Any]:
        payload: dict[str, Any] = {**plan, "recommendations": items[:n]}
        if n < len(items):
            payload["more"] = (
                f"Cut to fit the budget: {PERSON}`engram consolidate --out FILE` for all of it."
            )
        return payload

    text, _ = call.fit(build, len(items))
    return text


@handler("consolidate_apply")
def consolidate_apply(mcp: EngramMCP, args: Args, call: Call) -> str:
    applied = mcp.engram.consolidate_apply(args.get("plan"), dry_run=bool(args.get("dry_run")))
    result = applied.to_dict()
    changes = [
        {
            "id": change["id"],
            "title": clip(str(change.get("title", "")), TITLE_CHARS),
            "status": "deleted" if change.get("deleted_at") else change.get("status"),
            "rev": change.get("rev"),
        }
        for change in applied.changes
    ]

    def build(n: int) -> dict[str, Any]:
        payload: dict[str, Any] = {**result, "changes": changes[:n]}
        if n < len(changes):
            payload["more"] = "Cut to fit the budget."
        return payload

    text, _ = call.fit(build, len(changes))
    return text


@handler("train")
def train(mcp: EngramMCP, args: Args, call: Call) -> str:
    timeout = args.get("timeout")
    report = mcp.engram.train(timeout=float(timeout) if timeout is not None else None)
    if not report.ok:
        raise InvalidInput(
            "the trainer failed, nothing was changed: " + "; ".join(report.problems[:3]),
            hint=f"{PERSON}`engram train` in a terminal to see its output",
        )
    return call.render(
        {
            "insights_generated": len(report.insights),
            "written": report.written or 0,
            "insights": report.insights[:50],
            "recommendations": report.to_dict()["recommendations"][:20],
            "metrics": report.metrics,
        }
    )


@handler("insights")
def insights(mcp: EngramMCP, args: Args, call: Call) -> str:
    rows = [
        {
            "id": record["id"],
            "title": clip(str(record.get("title", "")), TITLE_CHARS),
            "insight_type": record.get("insight_type"),
            "source_ids": [link.get("to") for link in links_of(record)],
        }
        for record in mcp.engram.insights()
    ]
    return listing("insights", rows, call)


@handler("insights_delete")
def insights_delete(mcp: EngramMCP, args: Args, call: Call) -> str:
    record = mcp.record(args["id"], "delete")
    deleted = mcp.engram.delete_insight(record["id"])
    return call.render({"id": deleted["id"], "deleted": True})


@handler("merge_projects")
def merge_projects(mcp: EngramMCP, args: Args, call: Call) -> str:
    result = mcp.engram.projects_merge(
        args.get("from") or [], str(args["to"]), dry_run=bool(args.get("dry_run"))
    )
    return call.render(result.to_dict())


@handler("sync")
def sync(mcp: EngramMCP, args: Args, call: Call) -> str:
    scope = "personal" if args.get("personal") else "project"
    if args.get("status"):
        report = mcp.engram.sync_status(scope=scope).to_dict()
    else:
        done = mcp.engram.sync(scope=scope, remote=args.get("remote"), branch=args.get("branch"))
        report = done.to_dict()
    problems = list(report.get("problems") or [])

    def build(n: int) -> dict[str, Any]:
        payload = {**report, "problems": problems[:n]}
        if "pending_import" in payload:
            payload["pending_import"] = payload["pending_import"][:n]
        if n < len(problems):
            payload["more"] = f"Lists were cut to fit the budget: {PERSON}`engram sync --json`."
        return payload

    text, _ = call.fit(build, max(len(problems), len(report.get("pending_import") or []), 1))
    return text


@handler("reindex")
def reindex(mcp: EngramMCP, args: Args, call: Call) -> str:
    return call.render(mcp.engram.reindex(rebuild=bool(args.get("rebuild"))).to_dict())


@handler("doctor")
def doctor(mcp: EngramMCP, args: Args, call: Call) -> str:
    findings = [f.to_dict() for f in mcp.engram.doctor(fix=bool(args.get("fix")))]
    counts = {
        severity: sum(1 for f in findings if f["severity"] == severity)
        for severity in ("error", "warning", "ok")
    }

    def build(n: int) -> dict[str, Any]:
        payload: dict[str, Any] = {**counts, "findings": findings[:n]}
        if n < len(findings):
            payload["more"] = f"{len(findings) - n} more findings: {PERSON}`engram doctor`"
        return payload

    return call.fit(build, len(findings))[0]


@handler("config", own=True)
def config(mcp: EngramMCP, args: Args, call: Call) -> str:
    if args.get("action") == "set":
        raise InvalidInput(
            "[6008] config is read-only over MCP",
            hint="edit .engram/config.yaml (engram keeps its comments)",
        )
    from engram.config import public

    settings = mcp.engram.config
    return call.render(
        {
            "project": settings.project,
            "path": str(settings.engram_dir),
            "config": public(settings.data),
        }
    )
