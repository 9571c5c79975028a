"""The web page's routes: the dashboard at ``/``, search, a memory, a session, the review
inbox, and the forms.

Every page is HTML rendered on the server from ``views`` (one facade call in the worker
thread) and sent with headers that forbid inline script, framing and sniffing. A change is a
POST form: confirm or reject a pitfall candidate, accept or reject a proposed memory in the
review inbox, archive, pin, unpin, supersede, forget. The
guard in front already refuses a write whose Origin or Sec-Fetch-Site is another site's; a form
must also carry the key this server made when it started (``CSRF_FIELD``), which only its own
pages hold, so no other page (nor an old browser that sends no Origin) can post one. A form's
``next`` is followed only to a path of this server. An error is a page with the status the
API would send (``errors.status_for``), never a traceback.
"""

from __future__ import annotations

import hmac
import importlib.util
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from engram.errors import EngramError, InvalidInput
from engram.http_api.deps import Api
from engram.http_api.errors import status_for
from engram.http_api.guard import LOGIN_PATH, WEB_COOKIE, web_cookie
from engram.http_api.models import SearchParams
from engram.http_api.web import views
from engram.http_api.web.assets import render, static_file
from engram.model import KINDS, SCOPES, STATUSES, links_of
from engram.operations.views import is_candidate, supersede_warning

CSRF_FIELD: Final = "csrf"
KEY_STATE: Final = "web_form_key"
TOKEN_STATE: Final = "web_token"
SEARCH_LIMIT: Final = 20
MAX_FORM_FIELDS: Final = 20
HEADERS: Final = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # same-origin, not no-referrer: under no-referrer Chromium sends "Origin: null" with a
    # form post, and the guard refuses it as a write from another origin.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
# What a redirect after a change says, by the code it carries (no text from a request shown).
DONE: Final = {
    "confirmed": "Confirmed: the candidate is an active pitfall now.",
    "rejected": "Rejected: the candidate stays, marked rejected.",
    "archived": "Archived.",
    "activated": "Active again.",
    "pinned": "Pinned: every session briefing shows it first.",
    "unpinned": "Unpinned.",
    "superseded": "Supersedes the memory named: that one is superseded now.",
    "forgotten": "Forgotten: a tombstone travels to the other clones.",
    "accepted": "Accepted: an active memory now.",
    "declined": "Rejected: it stays, marked rejected, and is not proposed again.",
}
STATUS_DONE: Final = {
    "active": "activated",
    "rejected": "rejected",
    "archived": "archived",
}

router = APIRouter(include_in_schema=False)


def install(app: FastAPI, *, token: str | None = None) -> None:
    """Serve the web page on ``app``, with a fresh form key for this server's pages.

    ``token``: the server's, which ``/ui/login`` takes from a person once and answers with the
    guard's sign-in cookie. Without jinja2 (an install without the ``http`` extra's templates)
    ``/`` says what to install, and the API is served as ever.
    """
    if importlib.util.find_spec("jinja2") is None:
        app.add_api_route("/", _no_templates, methods=["GET"], include_in_schema=False)
        return
    setattr(app.state, KEY_STATE, secrets.token_urlsafe(32))
    setattr(app.state, TOKEN_STATE, token or "")
    app.include_router(router)


async def _no_templates() -> Response:
    return Response(
        "engram's web page needs jinja2: pip install 'engram-git[http]'\n",
        status_code=503,
        media_type="text/plain",
    )


def _key(request: Request) -> str:
    key: str = getattr(request.app.state, KEY_STATE)
    return key


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """Return a rendered page with the web page's headers."""
    api = request.app.state.facade
    html = render(
        template,
        project=api.engram.project,
        version=api.version,
        csrf=_key(request),
        csrf_field=CSRF_FIELD,
        here=request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        done=DONE.get(request.query_params.get("done", ""), ""),
        **context,
    )
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def failed(request: Request, exc: EngramError) -> HTMLResponse:
    """Return the error page of an engram error, with the status the API would send."""
    return page(request, "error.html", status=status_for(exc), message=exc.message, hint=exc.hint)


async def shown(
    request: Request, api: Api, template: str, view: Callable[..., Mapping[str, Any]], *args: Any
) -> HTMLResponse:
    """Return the page ``template`` makes of one view (a facade call), or its error page."""
    try:
        data = await api.call(view, api.engram, *args)
    except EngramError as exc:
        return failed(request, exc)
    return page(request, template, **data)


@router.get("/", response_class=HTMLResponse)
async def dashboard(request: Request, api: Api) -> HTMLResponse:
    """The dashboard: counts, hotspots, pitfall candidates, recent sessions."""
    return await shown(request, api, "dashboard.html", views.dashboard)


def search_arguments(pairs: list[tuple[str, str]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Return recall's arguments from a search form's fields, and the form's values to show.

    The fields are recall's HTTP query parameters (``q``, ``kind``, ``tag``, ``file``,
    ``status``, ``scope``, ``project``, ``author``, ``since``, ``until``, ``all_projects``,
    ``limit``, ``offset``), validated by the same model as ``GET /search``; an empty field is
    left out, as a form sends every field.
    """
    given: dict[str, list[str]] = {}
    for key, value in pairs:
        if value.strip():
            given.setdefault(key, []).append(value)
    values: dict[str, Any] = {}
    for param in SearchParams.declared:
        found = given.get(param.wire)
        if found:
            values[param.wire] = found if param.multiple else found[-1]
    shown = {
        key: ", ".join(value) if isinstance(value, list) else value for key, value in values.items()
    }
    values.setdefault("limit", str(SEARCH_LIMIT))
    try:
        model = SearchParams.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise InvalidInput(
            f"search field {where!r}: {first.get('msg', 'invalid')}",
            hint="correct the field in the search form",
        ) from exc
    return model.arguments(), shown


@router.get("/ui/search", response_class=HTMLResponse)
async def search(request: Request, api: Api) -> HTMLResponse:
    """Search with recall's filters; ``fragment=1`` returns the results alone (for the script)."""
    pairs = [(k, v) for k, v in request.query_params.multi_items() if k != "fragment"]
    fragment = request.query_params.get("fragment") == "1"
    shown: Mapping[str, str] = {}
    try:
        arguments, shown = search_arguments(pairs)
        hits = await api.call(views.search, api.engram, arguments)
        error = ""
    except EngramError as exc:
        arguments, hits, error = {}, [], exc.message
        shown = {k: v for k, v in pairs if v.strip()}
    limit = int(arguments.get("limit", SEARCH_LIMIT))
    offset = int(arguments.get("offset", 0))
    more = ""
    if limit and len(hits) >= limit:
        more = "/ui/search?" + urlencode([*_without(pairs, "offset"), ("offset", offset + limit)])
    template = "_results.html" if fragment else "search.html"
    return page(
        request,
        template,
        status=422 if error else 200,
        hits=hits,
        error=error,
        form=shown,
        query=str(arguments.get("query", "")),
        more=more,
        kinds=KINDS,
        statuses=STATUSES,
        scopes=SCOPES,
    )


def _without(pairs: list[tuple[str, str]], name: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in pairs if k != name and v.strip()]


@router.get("/ui/memories/{ref}", response_class=HTMLResponse)
async def memory(request: Request, ref: str, api: Api) -> HTMLResponse:
    """One memory: fields, text, why, related, timeline, versions, staleness, actions."""
    return await shown(request, api, "memory.html", views.memory, ref)


@router.get("/ui/memories/{ref}/session", response_class=HTMLResponse)
async def session(request: Request, ref: str, api: Api) -> HTMLResponse:
    """The session a memory belongs to: its log entry, summary, memories in order."""
    return await shown(request, api, "session.html", views.session, ref)


async def _form(request: Request) -> dict[str, str]:
    """Return a urlencoded form's fields (the last of a repeated name), or refuse it."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise InvalidInput(f"a form is sent urlencoded, not as {kind or 'nothing'}")
    body = (await request.body()).decode("utf-8", errors="replace")
    pairs = parse_qsl(body, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    return dict(pairs)


def _local(target: str, default: str) -> str:
    """Return ``target`` when it is a path of this server, else ``default`` (no open redirect)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    return target


def _next(form: Mapping[str, str], default: str, done: str) -> str:
    """Return where to go after a change: the form's ``next`` when it is a path here."""
    target = _local(form.get("next", ""), default)
    path, _, query = target.partition("?")
    kept = [(k, v) for k, v in parse_qsl(query) if k != "done"]
    return f"{path}?{urlencode([*kept, ('done', done)])}"


@router.post("/ui/memories/{ref}/{action}", response_class=HTMLResponse)
async def act(request: Request, ref: str, action: str, api: Api) -> Response:
    """Change a memory from a form: status, pin, unpin, supersede or forget; then go back."""
    try:
        form = await _form(request)
    except (EngramError, ValueError) as exc:
        message = exc.message if isinstance(exc, EngramError) else "too many form fields"
        return page(request, "error.html", status=422, message=message, hint="")
    given = form.get(CSRF_FIELD, "")
    if not hmac.compare_digest(given.encode(), _key(request).encode()):
        return page(
            request,
            "error.html",
            status=403,
            message="this form is not from this server's page (or the server restarted since)",
            hint="reload the page and send the form again",
        )
    engram = api.engram
    try:
        record = await api.call(engram.get, ref)
        rid = str(record["id"])
        default = f"/ui/memories/{rid}"
        if action == "status":
            status = form.get("status", "")
            if status not in STATUS_DONE:
                raise InvalidInput(
                    f"form field 'status': {status!r} is not one of {', '.join(STATUS_DONE)}"
                )
            done = STATUS_DONE[status]
            if status == "active" and is_candidate(record):
                done = "confirmed"
            await api.call(engram.update, rid, status=status)
        elif action in ("pin", "unpin"):
            await api.call(engram.pin if action == "pin" else engram.unpin, rid)
            done = f"{action}ned"
        elif action == "supersede":
            target = await api.call(engram.get, form.get("target", "").strip() or "?")
            if target["id"] == rid:
                raise InvalidInput("a memory cannot supersede itself", hint="name another one")
            warning = supersede_warning(record, target)
            if warning and form.get("confirm") != "yes":  # asked first, as the TUI asks
                return page(
                    request,
                    "confirm.html",
                    status=409,
                    message=warning[0].upper() + warning[1:] + ".",
                    action=f"/ui/memories/{rid}/supersede",
                    fields={"target": str(target["id"]), "next": form.get("next", "")},
                    button="Supersede it anyway",
                    back=default,
                )
            links = [dict(link) for link in links_of(record)]
            links.append({"rel": "supersedes", "to": str(target["id"])})
            await api.call(engram.update, rid, links=links)
            done = "superseded"
        elif action == "forget":
            if form.get("sure") != "yes":
                raise InvalidInput(
                    "form field 'sure': tick the box to forget this memory",
                    hint="forgetting writes a tombstone that travels to every clone",
                )
            await api.call(engram.forget, rid)
            done, default = "forgotten", "/"
            form = {k: v for k, v in form.items() if k != "next"}  # its page is gone
        else:
            raise InvalidInput(
                f"no action {action[:40]!r}; use status, pin, unpin, supersede or forget"
            )
    except EngramError as exc:
        return failed(request, exc)
    return RedirectResponse(_next(form, default, done), status_code=303, headers=HEADERS)


@router.get("/ui/review", response_class=HTMLResponse)
async def review(request: Request, api: Api) -> HTMLResponse:
    """The review inbox: proposed memories, oldest first, each to accept or reject."""
    return await shown(request, api, "review.html", views.review)


@router.post("/ui/review/{ref}/{verdict}", response_class=HTMLResponse)
async def review_verdict(request: Request, ref: str, verdict: str, api: Api) -> Response:
    """Accept or reject a proposed memory from the inbox's form; then back to the inbox."""
    try:
        form = await _form(request)
    except (EngramError, ValueError) as exc:
        message = exc.message if isinstance(exc, EngramError) else "too many form fields"
        return page(request, "error.html", status=422, message=message, hint="")
    if not hmac.compare_digest(form.get(CSRF_FIELD, "").encode(), _key(request).encode()):
        return page(
            request,
            "error.html",
            status=403,
            message="this form is not from this server's page (or the server restarted since)",
            hint="reload the page and send the form again",
        )
    if verdict not in ("accept", "reject"):
        return failed(request, InvalidInput(f"no verdict {verdict[:40]!r}; use accept or reject"))
    try:
        await api.call(api.engram.review, verdict, [ref])
    except EngramError as exc:
        return failed(request, exc)
    done = "accepted" if verdict == "accept" else "declined"
    return RedirectResponse(f"/ui/review?done={done}", status_code=303, headers=HEADERS)


def _back(target: str) -> str:
    """Return where a sign-in goes next: a path of this server (never the form itself)."""
    target = _local(target, "/")
    return "/" if target.startswith(LOGIN_PATH) else target


@router.get(LOGIN_PATH, response_class=HTMLResponse)
async def login_form(request: Request) -> Response:
    """The sign-in form of a server with a token (without one, nothing to sign in to)."""
    target = _back(request.query_params.get("next", "/"))
    if not getattr(request.app.state, TOKEN_STATE):
        return RedirectResponse(target, status_code=303, headers=HEADERS)
    return page(request, "login.html", next=target, wrong=False)


@router.post(LOGIN_PATH, response_class=HTMLResponse)
async def login(request: Request) -> Response:
    """Check the token typed in and set the sign-in cookie the guard takes for the pages."""
    token: str = getattr(request.app.state, TOKEN_STATE)
    try:
        form = await _form(request)
    except (EngramError, ValueError) as exc:
        message = exc.message if isinstance(exc, EngramError) else "too many form fields"
        return page(request, "error.html", status=422, message=message, hint="")
    target = _back(form.get("next", "/"))
    if not token:
        return RedirectResponse(target, status_code=303, headers=HEADERS)
    if not hmac.compare_digest(form.get(CSRF_FIELD, "").encode(), _key(request).encode()):
        return page(request, "login.html", status=403, next=target, wrong=False)
    if not hmac.compare_digest(form.get("token", "").strip().encode(), token.encode()):
        return page(request, "login.html", status=401, next=target, wrong=True)
    done = RedirectResponse(target, status_code=303, headers=HEADERS)
    done.set_cookie(
        WEB_COOKIE,
        web_cookie(token),
        httponly=True,
        samesite="strict",
        path="/",
        secure=request.url.scheme == "https",
    )
    return done


@router.get("/ui/static/{name}")
async def static(name: str) -> Response:
    """Return one of the shipped static files (a closed list)."""
    found = static_file(name)
    if found is None:
        return Response("not found", status_code=404, media_type="text/plain")
    data, kind = found
    headers = {"x-content-type-options": "nosniff", "cache-control": "no-cache"}
    return Response(data, media_type=kind, headers=headers)
