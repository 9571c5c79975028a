"""Go engram's HTTP routes, served by ``engram serve --compat go-engram``.

Go engram's Claude Code hooks and OpenCode plugin talk to its HTTP server (127.0.0.1, port
``ENGRAM_PORT`` or 7437): they start sessions, save prompts, post an agent's output for passive
capture and fetch the context. These routes answer them as Go's server does: its paths and query
parameters, its request bodies, its JSON (integer ids from ``engram.model.go_id_of``, times as
``YYYY-MM-DD HH:MM:SS``, rows as ``engram.formats.goexport`` writes them for ``engram export
--format go-engram``), its statuses (400 for a body or parameter that is not what it needs, 404
for an unknown id, 201 for a save) and its errors (``{"error": "message"}``, naming the field).
Go's arguments map onto the facade through ``engram.operations.compat_go``, as Go's MCP names do.

Where the shapes cannot be Go's, engram's meaning is kept and said: a list with nothing in it
is ``[]`` (Go sends ``null``); ``/search`` ranks with engram's score, given as ``rank`` negated
(lower is better, as Go's FTS rank); ``/import`` reports Go's counts (the rows of each table
read) and engram's (added, updated, unchanged, skipped). ``/context`` is Go's formatter (its
sections: recent sessions, user prompts, observations of every type), and a DELETE of an id
that has no live observation answers 200, as Go's does. ``app.create_app`` puts this router first
and drops engram's own routes at the same method and path, so there Go's shape wins.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Final

from fastapi import APIRouter, Query, Request
from starlette.responses import JSONResponse

from engram.errors import EngramError, InvalidInput, NotFound
from engram.formats.goexport import go_document, go_observation, go_prompt, go_time
from engram.formats.goknown import sync_id_of
from engram.http_api.deps import Api
from engram.http_api.errors import GoRouteError
from engram.model import go_id_of, is_tombstone, now, type_of
from engram.operations import compat_go

if TYPE_CHECKING:
    from engram.service import Engram

router = APIRouter(tags=["go-engram"])

SEARCH_MAX: Final = 20  # Go's largest search page
LIST_MAX: Final = 500  # the most rows a recent list returns
AROUND_MAX: Final = 5000  # memories of a session a timeline looks through
_INT: Final = re.compile(r"^[+-]?\d{1,19}$")
_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})

Param = Annotated[str | None, Query(max_length=2000)]


# -- Go's parsing --------------------------------------------------------------------------------


def _int(value: str | None, default: int) -> int:
    """Read an integer query parameter as Go does: absent, empty or not a number is the default."""
    text = (value or "").strip()
    return int(text) if _INT.match(text) else default


def _bool(value: str | None) -> bool:
    """Read a boolean query parameter as Go's strconv.ParseBool does (anything else: false)."""
    return (value or "") in _TRUE


def _limit(value: str | None, default: int, most: int) -> int:
    """Return a page size: Go's default for none or one below 1, at most ``most``."""
    number = _int(value, default)
    return min(number if number > 0 else default, most)


def _go_id(text: str, what: str = "observation id") -> int:
    """Return the integer id a path or parameter gives; 400 when it is not one (Go's words)."""
    value = text.strip()
    if not _INT.match(value) or not -(2**63) <= int(value) < 2**63:
        raise GoRouteError(400, f"invalid {what}: {text[:40]!r} is not an integer")
    return int(value)


async def _body(
    request: Request, required: Iterable[str], strings: Iterable[str]
) -> dict[str, Any]:
    """Return the JSON object a request sent; 400 naming the field that is wrong or missing."""
    raw = await request.body()
    try:
        data = json.loads(raw) if raw.strip() else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise GoRouteError(400, f"invalid json: {exc}") from exc
    if not isinstance(data, dict):
        raise GoRouteError(400, "invalid json: the body must be a JSON object")
    for name in strings:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise GoRouteError(
                400, f"invalid json: field {name} must be a string, not {type(value).__name__}"
            )
    wanted = list(required)
    missing = [name for name in wanted if not str(data.get(name) or "").strip()]
    if missing:
        names = ", ".join(wanted[:-1]) + (" and " if len(wanted) > 1 else "") + wanted[-1]
        verb = "is" if len(wanted) == 1 else "are"
        raise GoRouteError(400, f"{names} {verb} required (missing: {', '.join(missing)})")
    return data


async def _run(api: Api, fn: Any, *args: Any) -> Any:
    """Call ``fn(engram, *args)`` on the facade's thread; an engram error gets Go's status."""
    try:
        return await api.call(fn, api.engram, *args)
    except NotFound as exc:
        raise GoRouteError(404, exc.message) from exc
    except InvalidInput as exc:
        raise GoRouteError(400, f"{exc.message} ({exc.hint})" if exc.hint else exc.message) from exc
    except EngramError as exc:
        raise GoRouteError(500, f"{exc.message} ({exc.hint})" if exc.hint else exc.message) from exc


# -- Go's rows, from the stores ----------------------------------------------------------------


def _project(engram: Engram, name: object) -> str | None:
    """Return the project a Go client named, or None for the project served."""
    root = engram.root if engram.has_project else None
    return compat_go.own_project(name, project=engram.project, root=root)


def _observation_of(engram: Engram, number: int) -> dict[str, Any]:
    """Return the live observation (any memory but a prompt) with Go id ``number``."""
    try:
        record = engram.by_go_id(number)
    except NotFound as exc:
        raise GoRouteError(404, f"observation not found: no observation has id {number}") from exc
    if record.get("kind") == "prompt" or is_tombstone(record):
        raise GoRouteError(404, f"observation not found: no observation has id {number}")
    return record


def _session_row(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Return a logged session as Go's session row."""
    row: dict[str, Any] = {
        "id": str(entry.get("id", "")),
        "project": str(entry.get("project") or ""),
        "directory": str(entry.get("directory") or ""),
        "started_at": go_time(entry.get("started_at")) or "",
    }
    if go_time(entry.get("ended_at")):
        row["ended_at"] = go_time(entry.get("ended_at"))
    return row


@dataclass
class _View:
    """The stores as Go's tables: sessions, live observations and prompts."""

    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    observations: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    created: dict[str, str] = field(default_factory=dict)  # sync_id: engram's exact time

    def newest(self, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Return rows newest first (Go's times are whole seconds: engram's own break ties)."""

        def key(row: dict[str, Any]) -> tuple[str, str, int]:
            exact = self.created.get(str(row.get("sync_id")), "")
            return str(row.get("created_at", "")), exact, int(row["id"])

        return sorted(rows, key=key, reverse=True)


def _view(engram: Engram) -> _View:
    """Return the project's and the personal store's rows as Go's export shows them."""
    view = _View()
    scopes = ["project"] + (["personal"] if engram.personal() is not None else [])
    for scope in scopes:
        records = engram.export(scope=scope).memories
        view.created.update((sync_id_of(r), str(r.get("created_at", ""))) for r in records)
        document = go_document(records, exported_at=now()).to_dict()
        for session in document["sessions"]:
            view.sessions.setdefault(str(session["id"]), dict(session))
        view.observations += [row for row in document["observations"] if not row.get("deleted_at")]
        view.prompts += document["prompts"]
    for entry in engram.sessions.entries():  # the log knows sessions no memory names yet
        row = _session_row(entry)
        view.sessions[row["id"]] = {**view.sessions.get(row["id"], {}), **row}
    return view


def _in_project(row: Mapping[str, Any], wanted: str, engram: Engram) -> bool:
    """Tell whether a row belongs to the project a Go client asked for ('' asks for any)."""
    if not wanted.strip():
        return True
    named = _project(engram, wanted)
    own = _project(engram, row.get("project"))
    if named is None:
        return own is None
    return own is not None and own.strip().lower() == named.strip().lower()


# -- health, sessions ---------------------------------------------------------------------------


@router.get("/health")
async def health(api: Api) -> dict[str, Any]:
    """Tell that the server is up (Go's plugins start a server when this fails)."""
    return {
        "status": "ok",
        "service": "engram",
        "version": api.version,
        "project": api.engram.project,
    }


def _start(engram: Engram, body: Mapping[str, Any]) -> None:
    engram.session_start(
        str(body["id"]),
        directory=str(body.get("directory") or ""),
        project=_project(engram, body.get("project")),
    )


@router.post("/sessions", status_code=201)
async def create_session(request: Request, api: Api) -> dict[str, Any]:
    """Start (or reopen) a session: ``{id, project, directory}``; Go requires id and project."""
    body = await _body(request, ("id", "project"), ("id", "project", "directory"))
    await _run(api, _start, body)
    return {"id": body["id"], "status": "created"}


def _end(engram: Engram, session_id: str, summary: str) -> None:
    engram.session_end(session_id, summary=summary)


@router.post("/sessions/{id}/end")
async def end_session(id: str, request: Request, api: Api) -> dict[str, Any]:
    """End a session; ``{summary}`` saves its summary (Go reads the body only if it parses)."""
    summary = ""
    with contextlib.suppress(GoRouteError):
        summary = str((await _body(request, (), ("summary",))).get("summary") or "")
    await _run(api, _end, id, summary)
    return {"id": id, "status": "completed"}


def _recent_sessions(engram: Engram, project: str, limit: int) -> list[dict[str, Any]]:
    view = _view(engram)
    counts: dict[str, int] = {}
    latest: dict[str, str] = {}
    for row in view.observations:
        sid = str(row.get("session_id", ""))
        counts[sid] = counts.get(sid, 0) + 1
        latest[sid] = max(latest.get(sid, ""), str(row.get("created_at") or ""))
    rows = []
    for sid, session in view.sessions.items():
        if not _in_project(session, project, engram):
            continue
        row = {
            "id": sid,
            "project": session.get("project") or "",
            "started_at": session.get("started_at") or "",
            "ended_at": session.get("ended_at"),
            "summary": session.get("summary") or None,
            "observation_count": counts.get(sid, 0),
        }
        rows.append(({key: value for key, value in row.items() if value is not None}, sid))
    rows.sort(key=lambda item: (max(latest.get(item[1], ""), item[0]["started_at"]), item[1]))
    return [row for row, _sid in reversed(rows)][:limit]


@router.get("/sessions/recent")
async def recent_sessions(api: Api, project: Param = None, limit: Param = None) -> Any:
    """The latest sessions, each with its summary and how many observations it has."""
    return await _run(api, _recent_sessions, project or "", _limit(limit, 5, LIST_MAX))


# -- observations -----------------------------------------------------------------------------

_OBSERVATION_FIELDS: Final = (
    "session_id",
    "type",
    "title",
    "content",
    "tool_name",
    "project",
    "scope",
    "topic_key",
)


def _save(engram: Engram, body: Mapping[str, Any]) -> int:
    title, content, draft = compat_go.observation_draft(
        body, project=_project(engram, body.get("project"))
    )
    return go_id_of(engram.remember(title, content, **draft).record)


@router.post("/observations", status_code=201)
async def add_observation(request: Request, api: Api) -> dict[str, Any]:
    """Save an observation; a known topic_key or an identical recent save updates (same id)."""
    body = await _body(request, ("session_id", "title", "content"), _OBSERVATION_FIELDS)
    return {"id": await _run(api, _save, body), "status": "saved"}


def _capture(engram: Engram, body: Mapping[str, Any]) -> dict[str, int]:
    captured = engram.capture(
        str(body.get("content") or ""),
        session_id=str(body["session_id"]),
        project=_project(engram, body.get("project")),
        source=str(body.get("source") or "capture"),
    )
    return {
        "extracted": captured.extracted,
        "saved": len(captured.saved),
        "duplicates": len(captured.duplicates),
    }


@router.post("/observations/passive")
async def passive_capture(request: Request, api: Api) -> dict[str, int]:
    """Propose each learning of an agent's output ("## Key Learnings" items), skip known ones."""
    body = await _body(request, ("session_id",), ("session_id", "content", "project", "source"))
    result: dict[str, int] = await _run(api, _capture, body)
    return result


def _recent_observations(
    engram: Engram, project: str, scope: str, limit: int
) -> list[dict[str, Any]]:
    view = _view(engram)
    rows = [
        row
        for row in view.observations
        if _in_project(row, project, engram) and (not scope or row.get("scope") == scope)
    ]
    return view.newest(rows)[:limit]


@router.get("/observations/recent")
async def recent_observations(
    api: Api, project: Param = None, scope: Param = None, limit: Param = None
) -> Any:
    """The latest observations, newest first."""
    scope = (scope or "").strip().lower()
    return await _run(api, _recent_observations, project or "", scope, _limit(limit, 20, LIST_MAX))


def _get(engram: Engram, number: int) -> dict[str, Any]:
    return go_observation(_observation_of(engram, number))


@router.get("/observations/{id}")
async def get_observation(id: str, api: Api) -> Any:
    """One observation in full."""
    return await _run(api, _get, _go_id(id))


def _update(engram: Engram, number: int, body: Mapping[str, Any]) -> dict[str, Any]:
    current = _observation_of(engram, number)
    named = body.get("project")
    project = (_project(engram, named) or engram.project) if named is not None else None
    changes = compat_go.update_changes(
        current,
        body,
        project=project,
        hint="save it again (POST /observations) with the other scope, then DELETE this one",
    )
    return go_observation(engram.update(current["id"], **changes))


@router.patch("/observations/{id}")
async def update_observation(id: str, request: Request, api: Api) -> Any:
    """Change fields of an observation (type, title, content, project, scope, topic_key)."""
    number = _go_id(id)
    body = await _body(request, (), _OBSERVATION_FIELDS)
    if not any(body.get(key) is not None for key in _OBSERVATION_FIELDS[1:]):
        raise GoRouteError(
            400, "at least one field is required: type, title, content, project, scope, topic_key"
        )
    return await _run(api, _update, number, body)


def _delete(engram: Engram, number: int, hard: bool) -> None:
    # Go answers 200 for an id it has no live row of (its UPDATE changes nothing): so do we.
    with contextlib.suppress(GoRouteError):
        engram.forget(_observation_of(engram, number)["id"], hard=hard)


@router.delete("/observations/{id}")
async def delete_observation(id: str, api: Api, hard: Param = None) -> dict[str, Any]:
    """Delete an observation: a tombstone that travels to clones (``?hard=true`` drops its text)."""
    number, dropped = _go_id(id), _bool(hard)
    await _run(api, _delete, number, dropped)
    return {"id": number, "status": "deleted", "hard_delete": dropped}


# -- search, timeline ---------------------------------------------------------------------------


def _search(engram: Engram, args: Mapping[str, Any], limit: int) -> list[dict[str, Any]]:
    filters, typ = compat_go.search_filters(args, project=_project(engram, args.get("project")))
    hits = engram.recall(str(args["query"]), limit=limit, of_type=typ, observations=True, **filters)
    return [{**go_observation(hit.record), "rank": -round(float(hit.score), 6)} for hit in hits]


@router.get("/search")
async def search(
    api: Api,
    q: Param = None,
    type: Param = None,
    project: Param = None,
    scope: Param = None,
    limit: Param = None,
) -> Any:
    """Rank observations for any words (``q``), best first; ``rank`` is lower for better."""
    if not (q or "").strip():
        raise GoRouteError(400, "q parameter is required")
    args = {"query": q, "type": type, "project": project, "scope": (scope or "").lower() or None}
    return await _run(api, _search, args, _limit(limit, 10, SEARCH_MAX))


def _timeline(engram: Engram, number: int, before: int, after: int) -> dict[str, Any]:
    focus = _observation_of(engram, number)
    around = engram.timeline(focus["id"], before=AROUND_MAX, after=AROUND_MAX)
    rows: list[dict[str, Any]] = []
    for item in [*around.before, around.memory, *around.after]:
        record = focus if item.id == focus["id"] else engram.get(item.id)
        if record.get("kind") != "prompt" and not is_tombstone(record):
            rows.append({**go_observation(record), "is_focus": item.id == focus["id"]})
    at = next(i for i, row in enumerate(rows) if row["is_focus"])
    session = _session_row(around.session) if around.session else None
    if session is not None:
        summary = next((r["content"] for r in rows if type_of(r) == "session"), None)
        if summary:
            session["summary"] = summary
    return {
        "focus": go_observation(focus),
        "before": rows[max(0, at - before) : at],
        "after": rows[at + 1 : at + 1 + after],
        "session_info": session,
        "total_in_range": len(rows),
    }


@router.get("/timeline")
async def timeline(
    api: Api, observation_id: Param = None, before: Param = None, after: Param = None
) -> Any:
    """The observations before and after one in its session, oldest first."""
    if not (observation_id or "").strip():
        raise GoRouteError(400, "observation_id parameter is required")
    number = _go_id(str(observation_id), "observation_id")
    return await _run(
        api, _timeline, number, _limit(before, 5, AROUND_MAX), _limit(after, 5, AROUND_MAX)
    )


# -- prompts ------------------------------------------------------------------------------------


def _prompt(engram: Engram, body: Mapping[str, Any]) -> int:
    result = engram.save_prompt(
        str(body["content"]),
        session_id=str(body["session_id"]),
        project=_project(engram, body.get("project")),
    )
    return go_id_of(result.record)


@router.post("/prompts", status_code=201)
async def add_prompt(request: Request, api: Api) -> dict[str, Any]:
    """Save a user's prompt."""
    body = await _body(request, ("session_id", "content"), ("session_id", "content", "project"))
    return {"id": await _run(api, _prompt, body), "status": "saved"}


def _prompt_out(row: Mapping[str, Any]) -> dict[str, Any]:
    """Return a prompt row as Go's Prompt struct marshals it (an empty project left out)."""
    keys = ("id", "session_id", "content", "project", "created_at")
    return {key: row.get(key) for key in keys if key != "project" or row.get("project")}


def _recent_prompts(engram: Engram, project: str, limit: int) -> list[dict[str, Any]]:
    view = _view(engram)
    rows = [row for row in view.prompts if _in_project(row, project, engram)]
    return [_prompt_out(row) for row in view.newest(rows)[:limit]]


@router.get("/prompts/recent")
async def recent_prompts(api: Api, project: Param = None, limit: Param = None) -> Any:
    """The latest prompts, newest first."""
    return await _run(api, _recent_prompts, project or "", _limit(limit, 20, LIST_MAX))


def _search_prompts(engram: Engram, query: str, project: str, limit: int) -> list[dict[str, Any]]:
    filters: dict[str, Any] = {"kinds": "prompt"}
    named = _project(engram, project)
    if named:
        filters["projects"] = named
    hits = engram.recall(query, limit=limit, **filters)
    return [_prompt_out(go_prompt(hit.record)) for hit in hits]


@router.get("/prompts/search")
async def search_prompts(
    api: Api, q: Param = None, project: Param = None, limit: Param = None
) -> Any:
    """Rank prompts for any words (``q``), best first."""
    if not (q or "").strip():
        raise GoRouteError(400, "q parameter is required")
    return await _run(api, _search_prompts, q, project or "", _limit(limit, 10, LIST_MAX))


# -- context, export, import, stats --------------------------------------------------------------


CONTEXT_SESSIONS: Final = 5  # Go's FormatContext: RecentSessions(project, 5)
CONTEXT_PROMPTS: Final = 10  # RecentPrompts(project, 10)
CONTEXT_OBSERVATIONS: Final = 20  # RecentObservations(project, scope, MaxContextResults)


def _cut(text: str, limit: int) -> str:
    """Go's ``truncate``: the first ``limit`` bytes and "..." when longer."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore") + "..."


def _context(engram: Engram, project: str, scope: str) -> str:
    """Return Go's ``FormatContext``: recent sessions, user prompts and observations.

    Its sections in its order and wording, over this project's and the personal store's
    memories: every type of observation (decisions, bugfixes, discoveries …) newest first.
    """
    view = _view(engram)
    wanted = (scope or "").strip().lower()
    observations = view.newest(
        row
        for row in view.observations
        if _in_project(row, project, engram)
        and (not wanted or row.get("scope") == ("personal" if wanted == "personal" else "project"))
    )[:CONTEXT_OBSERVATIONS]
    prompts = view.newest(row for row in view.prompts if _in_project(row, project, engram))
    counts: dict[str, int] = {}
    latest: dict[str, str] = {}
    for row in view.observations:
        sid = str(row.get("session_id", ""))
        counts[sid] = counts.get(sid, 0) + 1
        latest[sid] = max(latest.get(sid, ""), str(row.get("created_at", "")))
    sessions = sorted(
        (row for row in view.sessions.values() if _in_project(row, project, engram)),
        key=lambda row: latest.get(str(row["id"])) or str(row.get("started_at", "")),
        reverse=True,
    )[:CONTEXT_SESSIONS]
    if not sessions and not observations and not prompts:
        return ""
    out = ["## Memory from Previous Sessions\n\n"]
    if sessions:
        out.append("### Recent Sessions\n")
        for row in sessions:
            summary = row.get("summary")
            said = f": {_cut(str(summary), 200)}" if summary else ""
            out.append(
                f"- **{row.get('project', '')}** ({row.get('started_at', '')}){said} "
                f"[{counts.get(str(row['id']), 0)} observations]\n"
            )
        out.append("\n")
    if prompts:
        out.append("### Recent User Prompts\n")
        out += [
            f"- {row.get('created_at', '')}: {_cut(str(row.get('content', '')), 200)}\n"
            for row in prompts[:CONTEXT_PROMPTS]
        ]
        out.append("\n")
    if observations:
        out.append("### Recent Observations\n")
        out += [
            f"- [{row.get('type', '')}] **{row.get('title', '')}**: "
            f"{_cut(str(row.get('content', '')), 300)}\n"
            for row in observations
        ]
        out.append("\n")
    return "".join(out)


@router.get("/context")
async def context(api: Api, project: Param = None, scope: Param = None) -> dict[str, str]:
    """Go's session-start context as ``{context}``: recent sessions, prompts and observations."""
    text: str = await _run(api, _context, project or "", scope or "")
    return {"context": text}


def _export(engram: Engram) -> dict[str, Any]:
    document: dict[str, Any] = engram.export_go().to_dict()
    return document


@router.get("/export")
async def export(api: Api) -> JSONResponse:
    """The project's memories as Go engram's export (``engram export --format go-engram``)."""
    document = await _run(api, _export)
    headers = {"Content-Disposition": "attachment; filename=engram-export.json"}
    return JSONResponse(document, headers=headers)


_TABLES: Final = ("sessions", "observations", "prompts")


def _import(engram: Engram, raw: bytes) -> dict[str, Any]:
    result: dict[str, Any] = engram.import_go(raw, name="the request body").to_dict()
    return result


@router.post("/import")
async def import_(request: Request, api: Api) -> dict[str, Any]:
    """Import Go engram's export, as ``engram import`` of that file does."""
    raw = await request.body()
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise GoRouteError(400, f"invalid json: {exc}") from exc
    if not isinstance(data, dict) or not any(key in data for key in _TABLES):
        raise GoRouteError(
            400, "invalid json: a Go engram export is an object of sessions, observations, prompts"
        )
    for key in _TABLES:
        if data.get(key) is not None and not isinstance(data[key], list):
            raise GoRouteError(400, f"invalid json: field {key} must be a list")
    result = await _run(api, _import, raw)
    counts = {f"{key}_imported": len(data.get(key) or []) for key in _TABLES}
    return {**counts, **result}


def _stats(engram: Engram) -> dict[str, Any]:
    view = _view(engram)
    latest: dict[str, str] = {}
    for row in view.observations:
        name = row.get("project")
        if isinstance(name, str) and name:
            latest[name] = max(latest.get(name, ""), str(row.get("created_at") or ""))
    return {
        "total_sessions": len(view.sessions),
        "total_observations": len(view.observations),
        "total_prompts": len(view.prompts),
        "projects": sorted(latest, key=lambda name: (latest[name], name), reverse=True),
    }


@router.get("/stats")
async def stats(api: Api) -> dict[str, Any]:
    """How many sessions, observations and prompts, and the projects, latest first."""
    result: dict[str, Any] = await _run(api, _stats)
    return result
