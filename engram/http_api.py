"""The HTTP adapter: ``engram serve``, a REST API (FastAPI on uvicorn) over the service facade.

One ``Engram`` is opened when the app is made and closed when it stops. The facade is
synchronous: every call runs in a worker thread under one lock, so the store and its index see
one call at a time however many requests are in flight. Routes are thin: they check the shape of
a request (pydantic models, so the OpenAPI document at ``/openapi.json`` is precise), call the
facade and return its values; memories are open JSON objects (unknown fields are kept).

Rules of the boundary:

- Errors are ``{"error": {"code", "message", "hint"}}``: NotFound 404, InvalidInput and request
  validation 422 (a body nested deeper than ``model.MAX_JSON_DEPTH`` too, refused before it is
  parsed), every other ``EngramError`` (AmbiguousId, LockTimeout, CorruptStore …) 409,
  an unknown route 404, a body over ``MAX_BODY_BYTES`` 413, a missing or wrong token 401. A 500
  means a bug in engram: it is logged with its traceback, and the client gets no traceback.
- The server binds to 127.0.0.1 unless told otherwise; any other address needs a token in
  ``ENGRAM_HTTP_TOKEN``. With a token set, every request but ``GET /health`` must carry
  ``Authorization: Bearer <token>`` (compared in constant time).
- A web page must not reach the memories through the user's browser. The ``Host`` header must
  name this machine (127.0.0.0/8, ``localhost``, ``[::1]``, any port) or the address the server
  was told to bind, else 421 (DNS rebinding); a write (POST, PUT, PATCH, DELETE) whose
  ``Origin`` is not the server's own, or whose ``Sec-Fetch-Site`` is neither ``same-origin`` nor
  ``none``, gets 403. No CORS headers are ever sent, so browsers keep other pages from reading
  answers. Clients that are not browsers (curl, agents) send no ``Origin`` and are unaffected.

This is an adapter: it imports engram.service and what lies below it, never another adapter.
fastapi, pydantic and uvicorn (the optional extra ``engram-git[http]``) are imported only when
an app is made or served, so ``engram --help`` stays fast and works without them.
"""

import contextlib
import hmac
import ipaddress
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypeVar

from engram.errors import EngramError, InputTooLarge, InvalidInput, NotFound

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger("engram.http")

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 7437
TOKEN_ENV: Final = "ENGRAM_HTTP_TOKEN"
MAX_BODY_BYTES: Final = 8 * 1024 * 1024
MAX_PAGE: Final = 200
MAX_BUDGET: Final = 1_000_000
MAX_AROUND: Final = 200
# Fields the store sets itself: a request may not write them as "unknown" extra fields.
RESERVED: Final = frozenset(
    {
        "id",
        "rev",
        "created_at",
        "updated_at",
        "deleted_at",
        "history",
        "duplicate_count",
        "judgements",
        "anchors",
    }
)
ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"  # as engram.model checks ids
ERROR_HINT: Final = "this is a bug in engram: the server log has the details"

T = TypeVar("T")


class ServeError(EngramError):
    """The server cannot start as asked (an exposed address without a token, say)."""

    code = "serve"
    hint = f"bind to {DEFAULT_HOST}, or set {TOKEN_ENV} to a long random secret"


def status_for(exc: EngramError) -> int:
    """Return the HTTP status an engram error maps to."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, InvalidInput):
        return 422
    return 409  # the request conflicts with the state of the store: ambiguous id, lock, …


def is_loopback(host: str) -> bool:
    """Tell whether ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]")
    if name.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 (Python 3.11 does not call it loopback)
    return address.is_loopback


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to serve a non-loopback address without a token."""
    if not is_loopback(host) and not (token or "").strip():
        raise ServeError(
            f"refusing to serve on {host} without a token: anyone who can reach it could read "
            f"and change the memories; set {TOKEN_ENV} (clients send it as "
            "'Authorization: Bearer <token>')"
        )


def _error(code: str, message: str, hint: str = "") -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "hint": hint}}


# -- the ASGI guard: token and body size, before anything is parsed --------------------------


WILDCARDS: Final = frozenset({"0.0.0.0", "::", ""})
WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def host_name(value: str) -> str | None:
    """Return the lowercased name of a ``Host`` header (``[::1]:80`` gives ``::1``), or None."""
    from urllib.parse import urlsplit

    value = value.strip()
    if not value or any(c in value for c in "/?#@ \t"):
        return None
    try:
        name = urlsplit(f"//{value}").hostname
    except ValueError:
        return None
    return name.rstrip(".") if name else None


def host_allowed(value: str, bound: str = DEFAULT_HOST) -> bool:
    """Tell whether a ``Host`` header names this machine or the address the server binds."""
    name = host_name(value)
    if name is None:
        return False
    if is_loopback(name):
        return True
    bound_name = bound.strip().strip("[]").lower().rstrip(".")
    if bound_name in WILDCARDS:
        return True  # every address of the machine is served, and a token is required there
    return name == bound_name


def cross_origin_write(method: str, host: str, origin: str | None, fetch_site: str | None) -> bool:
    """Tell whether a request is a write a browser sends for another origin."""
    if method.upper() not in WRITES:
        return False
    if fetch_site is not None and fetch_site.strip().lower() not in ("same-origin", "none"):
        return True
    if origin is None:
        return False  # not a browser (curl, an agent), or a same-origin GET-style navigation
    own = host.strip().lower()
    return origin.strip().lower() not in (f"http://{own}", f"https://{own}")


class _Guard:
    """Check Host, Origin and the bearer token, and bound the body (pure ASGI: cheap)."""

    def __init__(
        self, app: Any, *, token: str | None, max_body: int, host: str = DEFAULT_HOST
    ) -> None:
        self.app = app
        self.expected = token.encode() if token else None
        self.max_body = max_body
        self.host = host

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1")
        if not host_allowed(host, self.host):
            shown = host[:100] or "(none)"
            await _reply(
                send,
                421,
                _error(
                    "wrong_host",
                    f"Host {shown!r} is not served here: only this machine's names are",
                    "connect to http://127.0.0.1:PORT or http://localhost:PORT; a web page "
                    "reaching this server through another name is refused (DNS rebinding)",
                ),
            )
            return
        origin = headers.get(b"origin")
        fetch_site = headers.get(b"sec-fetch-site")
        if cross_origin_write(
            str(scope.get("method", "")),
            host,
            origin.decode("latin-1") if origin is not None else None,
            fetch_site.decode("latin-1") if fetch_site is not None else None,
        ):
            shown = (origin or fetch_site or b"").decode("latin-1")[:100]
            await _reply(
                send,
                403,
                _error(
                    "cross_origin",
                    f"a write from another origin ({shown}) is refused",
                    "call the API from a client that is not a web page (curl, an agent), "
                    "or from a page served by this server",
                ),
            )
            return
        if self.expected is not None and scope.get("path") != "/health":
            scheme, _, given = headers.get(b"authorization", b"").strip().partition(b" ")
            right = hmac.compare_digest(given.strip(), self.expected)  # constant time
            if scheme.lower() != b"bearer" or not right:
                await _reply(
                    send,
                    401,
                    _error(
                        "unauthorized",
                        "missing or wrong bearer token",
                        f"send 'Authorization: Bearer <token>' with the server's {TOKEN_ENV}",
                    ),
                    extra=[(b"www-authenticate", b"Bearer")],
                )
                return
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await _reply(send, 413, self._too_large())
            return
        # The body is read here, whole (it is bounded), so that its size and JSON depth are
        # checked before any parser sees it; the app is then given it as one message.
        pieces: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            piece = message.get("body", b"")
            seen += len(piece)
            if seen > self.max_body:
                await _reply(send, 413, self._too_large())
                return
            pieces.append(piece)
            if not message.get("more_body", False):
                break
        body = b"".join(pieces)
        problem = _too_deep(scope, body)
        if problem is not None:
            await _reply(send, 422, {"error": problem.to_dict()})
            return
        whole = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay([whole], receive), send)

    def _too_large(self) -> dict[str, Any]:
        return _error(
            "too_large",
            f"request body over {self.max_body} bytes",
            "send fewer memories per request (import a large export in parts)",
        )


def _too_deep(scope: Any, body: bytes) -> InputTooLarge | None:
    """Return the error for a body nested deeper than the JSON limit (no parser recursed yet)."""
    from engram.model import MAX_JSON_DEPTH, json_depth_exceeded

    offset = json_depth_exceeded(body)
    if offset is None:
        return None
    where = f"{scope.get('method', '')} {scope.get('path', '')}".strip()
    return InputTooLarge(
        f"request body of {where}: JSON nested deeper than {MAX_JSON_DEPTH} levels "
        f"(at byte {offset}); refused"
    )


def _replay(messages: list[Any], receive: Any) -> Any:
    """Return an ASGI ``receive`` that gives ``messages`` first, then the real ones."""
    queue = list(messages)

    async def replay() -> Any:
        if queue:
            return queue.pop(0)
        return await receive()

    return replay


async def _reply(
    send: Any, status: int, body: Mapping[str, Any], extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    import json

    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *extra]})
    await send({"type": "http.response.body", "body": data})


# -- the app ----------------------------------------------------------------------------------


def create_app(
    root: Path | None = None,
    *,
    token: str | None = None,
    max_body: int = MAX_BODY_BYTES,
    host: str = DEFAULT_HOST,
) -> "FastAPI":
    """Return the API over the project at ``root`` (default: found from the working directory).

    ``token`` defaults to ``ENGRAM_HTTP_TOKEN``; when set, requests need it as a bearer token.
    ``host`` is the address served: Host headers naming it (or loopback) are accepted.
    """
    from fastapi import FastAPI, Query, Request, Response
    from fastapi import Path as PathParam
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, ConfigDict, Field
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from engram.service import Engram, version_info

    token = (token if token is not None else os.environ.get(TOKEN_ENV, "")).strip() or None
    engram = Engram.open(root)
    version = version_info()["engram"]
    lock = threading.Lock()

    async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a facade call in a worker thread, one at a time."""

        def run() -> T:
            with lock:
                return fn(*args, **kwargs)

        return await run_in_threadpool(run)

    # -- models -------------------------------------------------------------------------------

    class ErrorDetail(BaseModel):
        code: str
        message: str
        hint: str

    class ErrorOut(BaseModel):
        error: ErrorDetail

    class HealthOut(BaseModel):
        status: str
        version: str
        project: str

    class Link(BaseModel):
        rel: str = "relates"
        to: str

    Text = Annotated[str, Field(max_length=MAX_BODY_BYTES)]
    Item = Annotated[str, Field(max_length=500)]

    class MemoryIn(BaseModel):
        """A new memory; fields beyond these are kept on the memory as they are."""

        model_config = ConfigDict(extra="allow")

        title: Annotated[str, Field(min_length=1, max_length=2000)]
        content: Text = ""
        kind: Item = "note"
        tags: list[Item] = []
        files: list[Item] = []
        importance: Annotated[int, Field(ge=1, le=5)] = 3
        status: Literal["active", "proposed", "rejected", "superseded", "archived"] = "active"
        scope: Literal["project", "personal"] = "project"
        topic_key: Item | None = None
        links: list[Link | Item] = []
        source: Item = "http"
        session_id: Item | None = None
        author: Item | None = None
        project: Item | None = None

    class MemoryPatch(BaseModel):
        """Fields to change (absent or null: unchanged); other fields are set as they are."""

        model_config = ConfigDict(extra="allow")

        title: Annotated[str, Field(min_length=1, max_length=2000)] | None = None
        content: Text | None = None
        kind: Item | None = None
        tags: list[Item] | None = None
        files: list[Item] | None = None
        importance: Annotated[int, Field(ge=1, le=5)] | None = None
        status: Literal["active", "proposed", "rejected", "superseded", "archived"] | None = None
        topic_key: Item | None = None
        links: list[Link | Item] | None = None
        project: Item | None = None

    class SaveOut(BaseModel):
        action: str = Field(description="created, updated (topic key) or duplicate")
        id: str
        redactions: int
        superseded: list[str]
        memory: dict[str, Any]
        warnings: list[str] = Field(
            default_factory=list, description="e.g. a redaction pattern of config.yaml left out"
        )

    class PageOut(BaseModel):
        memories: list[dict[str, Any]]
        limit: int
        offset: int
        next_offset: int | None = Field(
            description="offset of the next page; null when this page is not full"
        )

    class SearchHit(BaseModel):
        id: str
        score: float
        matched: list[str]
        memory: dict[str, Any]

    class SearchOut(BaseModel):
        query: str
        hits: list[SearchHit]
        limit: int
        offset: int
        next_offset: int | None

    class RelatedOut(BaseModel):
        related: list[dict[str, Any]]

    class CheckIn(BaseModel):
        files: list[Item] = []
        text: Text = ""
        budget: Annotated[int, Field(ge=0, le=MAX_BUDGET)] | None = None

    class SessionIn(BaseModel):
        session_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
        directory: Item = ""
        project: Item | None = None

    class SessionEndIn(BaseModel):
        summary: Text = ""
        project: Item | None = None

    class SummaryIn(BaseModel):
        content: Text = ""
        project: Item | None = None
        goal: Text | None = None
        instructions: Text | None = None
        discoveries: Text | None = None
        accomplished: Text | None = None
        next_steps: Text | None = None
        relevant_files: Text | None = None

    class PromptIn(BaseModel):
        content: Annotated[str, Field(min_length=1, max_length=MAX_BODY_BYTES)]
        session_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
        project: Item | None = None

    class CaptureIn(BaseModel):
        text: Text
        session_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
        project: Item | None = None
        source: Item = "capture"

    class CaptureItem(BaseModel):
        id: str
        title: str

    class CaptureOut(BaseModel):
        extracted: int
        saved: list[CaptureItem]
        duplicates: list[CaptureItem]
        session_id: str | None

    class ImportIn(BaseModel):
        """An export document (GET /export); other fields of it are ignored."""

        model_config = ConfigDict(extra="allow")

        format: Literal["engram"] = "engram"
        version: Literal[1] = 1
        memories: list[dict[str, Any]] = Field(
            description="memories and tombstones; each is checked like a line of memories.jsonl "
            "and skipped with its reason when it fails"
        )

    class ImportOut(BaseModel):
        format: str
        added: int
        updated: int
        unchanged: int
        skipped: int
        errors: list[str]

    class JudgeIn(BaseModel):
        score: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
        verdict: Literal["useful", "outdated", "wrong"] | None = None
        reason: Text = ""
        query: Text = ""
        author: Item | None = None

    # -- the app, its errors ------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await call(engram.close)

    errors: dict[int | str, dict[str, Any]] = {
        404: {"model": ErrorOut, "description": "No memory (or route) with this id"},
        409: {"model": ErrorOut, "description": "Ambiguous id prefix, store busy or corrupt"},
        403: {"model": ErrorOut, "description": "A write from another origin (a web page)"},
        413: {"model": ErrorOut, "description": "Request body too large"},
        421: {"model": ErrorOut, "description": "Host header names another server"},
        422: {"model": ErrorOut, "description": "Invalid input"},
    }
    if token:
        errors[401] = {"model": ErrorOut, "description": "Missing or wrong bearer token"}
    app = FastAPI(
        title="engram",
        version=version,
        description="Git-native, file-first memory for AI coding agents: the HTTP API.",
        lifespan=lifespan,
        responses=errors,
        redirect_slashes=False,
    )
    app.state.engram = engram

    @app.exception_handler(EngramError)
    async def engram_error(_: Request, exc: EngramError) -> JSONResponse:
        return JSONResponse({"error": exc.to_dict()}, status_code=status_for(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for item in exc.errors()[:10]:
            where = ".".join(str(part) for part in item.get("loc", ()))
            problems.append(f"{where}: {item.get('msg', 'invalid')}")
        return JSONResponse(
            _error(
                "invalid_input",
                "; ".join(problems) or "invalid request",
                "see /openapi.json (or /docs) for the shape of each request",
            ),
            status_code=422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed"}
        codes[413] = "too_large"
        hint = (
            "see /openapi.json (or /docs) for the routes" if exc.status_code in (404, 405) else ""
        )
        return JSONResponse(
            _error(codes.get(exc.status_code, "http"), str(exc.detail), hint),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return JSONResponse(
            _error("internal", f"internal error ({type(exc).__name__})", ERROR_HINT),
            status_code=500,
        )

    app.add_middleware(_Guard, token=token, max_body=max_body, host=host)
    if token:
        plain = app.openapi

        def secured() -> dict[str, Any]:
            """Declare the bearer token in the OpenAPI document (/docs offers to send it)."""
            schema = plain()
            components = schema.setdefault("components", {})
            components.setdefault("securitySchemes", {})["bearer"] = {
                "type": "http",
                "scheme": "bearer",
                "description": f"the server's {TOKEN_ENV}",
            }
            schema["security"] = [{"bearer": []}]
            schema["paths"]["/health"]["get"]["security"] = []  # liveness stays open
            return schema

        app.openapi = secured  # type: ignore[method-assign]

    # -- parameters ---------------------------------------------------------------------------

    Id = Annotated[
        str,
        PathParam(
            description="a memory id or a unique prefix of one",
            min_length=1,
            max_length=128,
            pattern=ID_PATTERN,
        ),
    ]
    Limit = Annotated[int, Query(ge=0, le=MAX_PAGE, description=f"at most {MAX_PAGE}")]
    Offset = Annotated[int, Query(ge=0, le=1_000_000)]
    Filter = Annotated[list[Item] | None, Query(description="repeat for several (any of them)")]

    def extras(model: BaseModel) -> dict[str, Any]:
        """Return the fields a request gave beyond the model's own; refuse reserved ones."""
        extra = dict(model.model_extra or {})
        reserved = sorted(RESERVED & set(extra))
        if reserved:
            raise InvalidInput(
                f"{', '.join(reserved)}: set by the store, not by a request",
                hint="leave these fields out; ids and revisions are assigned by engram",
            )
        return extra

    def links(value: list[Any] | None) -> list[Any] | None:
        if value is None:
            return None
        return [item.model_dump() if isinstance(item, BaseModel) else item for item in value]

    def next_offset(hits: list[Any], limit: int, offset: int) -> int | None:
        # A full page may be the last one: the next is then empty. Asking the index for one
        # more than the page would tell, but its top-k ranking depends on k, and a page must
        # hold what `engram recall --limit` shows.
        return offset + limit if limit and len(hits) >= limit else None

    def saved(result: Any, response: Response) -> dict[str, Any]:
        out: dict[str, Any] = result.to_dict()
        if result.action != "created":
            response.status_code = 200
        else:
            response.headers["location"] = f"/memories/{out['id']}"
        return out

    created: dict[int | str, dict[str, Any]] = {
        200: {"model": SaveOut, "description": "An existing memory was updated"}
    }

    # -- routes -------------------------------------------------------------------------------

    @app.get("/health", response_model=HealthOut, tags=["meta"])
    async def health() -> dict[str, Any]:
        """Tell that the server is up, its version and the project it serves."""
        return {"status": "ok", "version": version, "project": engram.project}

    @app.post(
        "/memories",
        response_model=SaveOut,
        status_code=201,
        responses=created,
        tags=["memories"],
    )
    async def create_memory(body: MemoryIn, response: Response) -> dict[str, Any]:
        """Save a memory (201); a known topic key or an identical recent save updates (200)."""
        extra = extras(body)
        fields = body.model_dump(exclude=set(extra))
        fields["links"] = links(body.links)
        result = await call(engram.remember, extra=extra, **fields)
        return saved(result, response)

    @app.get("/memories", response_model=PageOut, tags=["memories"])
    async def list_memories(
        kind: Filter = None,
        tag: Filter = None,
        file: Filter = None,
        status: Filter = None,
        scope: Filter = None,
        project: Filter = None,
        limit: Limit = 20,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """Browse memories with filters (they combine with AND), best ranked first."""
        hits = await call(
            engram.recall,
            "",
            kinds=kind,
            tags=tag,
            files=file,
            statuses=status,
            scopes=scope,
            projects=project,
            limit=limit,
            offset=offset,
        )
        return {
            "memories": [hit.record for hit in hits],
            "limit": limit,
            "offset": offset,
            "next_offset": next_offset(hits, limit, offset),
        }

    @app.get("/memories/{id}", response_model=dict[str, Any], tags=["memories"])
    async def get_memory(id: Id) -> dict[str, Any]:
        """Return the memory an id or unique prefix names."""
        return await call(engram.get, id)

    @app.patch("/memories/{id}", response_model=dict[str, Any], tags=["memories"])
    async def update_memory(id: Id, body: MemoryPatch) -> dict[str, Any]:
        """Change fields of a memory (rev+1); returns the memory."""
        extra = extras(body)
        if "scope" in extra:
            raise InvalidInput(
                "a memory cannot move between the project and the personal store",
                hint="save a copy with the other scope (POST /memories), then delete this one",
            )
        fields = body.model_dump(exclude=set(extra), exclude_none=True)
        if body.links is not None:
            fields["links"] = links(body.links)
        return await call(engram.update, id, **fields, **extra)

    @app.delete("/memories/{id}", response_model=dict[str, Any], tags=["memories"])
    async def delete_memory(id: Id, hard: bool = False) -> dict[str, Any]:
        """Forget a memory: a tombstone that travels to clones (``hard`` drops its text)."""
        return await call(engram.forget, id, hard=hard)

    @app.get("/search", response_model=SearchOut, tags=["memories"])
    async def search(
        q: Annotated[str, Query(max_length=2000, description="any text")] = "",
        kind: Filter = None,
        tag: Filter = None,
        file: Filter = None,
        status: Filter = None,
        scope: Filter = None,
        project: Filter = None,
        limit: Limit = 10,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """Rank memories for any text, best first."""
        hits = await call(
            engram.recall,
            q,
            kinds=kind,
            tags=tag,
            files=file,
            statuses=status,
            scopes=scope,
            projects=project,
            limit=limit,
            offset=offset,
        )
        return {
            "query": q,
            "hits": [
                {"id": h.id, "score": h.score, "matched": h.matched, "memory": h.record}
                for h in hits
            ],
            "limit": limit,
            "offset": offset,
            "next_offset": next_offset(hits, limit, offset),
        }

    @app.get("/memories/{id}/why", response_model=dict[str, Any], tags=["graph"])
    async def why(id: Id) -> dict[str, Any]:
        """Return a memory's lineage: supersede chains, links, provenance, judgements."""
        return await call(engram.why, id)

    @app.get("/memories/{id}/related", response_model=RelatedOut, tags=["graph"])
    async def related(id: Id, limit: Limit = 10) -> dict[str, Any]:
        """Return a memory's neighbours by links, shared files and tags, best first."""
        return {"related": await call(engram.related, id, limit=limit)}

    @app.get("/memories/{id}/timeline", response_model=dict[str, Any], tags=["graph"])
    async def timeline(
        id: Id,
        before: Annotated[int, Query(ge=0, le=MAX_AROUND)] = 5,
        after: Annotated[int, Query(ge=0, le=MAX_AROUND)] = 5,
    ) -> dict[str, Any]:
        """Return what happened before and after a memory, oldest first."""
        return await call(engram.timeline, id, before=before, after=after)

    @app.post("/memories/{id}/judge", response_model=dict[str, Any], tags=["memories"])
    async def judge(id: Id, body: JudgeIn) -> dict[str, Any]:
        """Record a judgement of a memory (it moves the ranking); returns the memory."""
        return await call(engram.judge, id, **body.model_dump())

    @app.post("/check", response_model=dict[str, Any], tags=["agents"])
    async def check(body: CheckIn) -> dict[str, Any]:
        """Return what the memory knows about files about to be edited, packed under a budget."""
        return await call(engram.check, body.files, text=body.text, budget=body.budget)

    @app.get("/context", response_model=dict[str, Any], tags=["agents"])
    async def context(
        budget: Annotated[int | None, Query(ge=0, le=MAX_BUDGET)] = None,
        query: Annotated[str, Query(max_length=2000)] = "",
    ) -> dict[str, Any]:
        """Return the session-start briefing packed under a token budget."""
        return await call(engram.context, budget=budget, query=query)

    @app.post("/sessions", response_model=dict[str, Any], status_code=201, tags=["sessions"])
    async def start_session(body: SessionIn) -> dict[str, Any]:
        """Start (or reopen) a session; without an id a new one is made."""
        return await call(
            engram.session_start, body.session_id, directory=body.directory, project=body.project
        )

    Session = Annotated[str, PathParam(min_length=1, max_length=200)]

    @app.post("/sessions/{id}/end", response_model=dict[str, Any], tags=["sessions"])
    async def end_session(id: Session, body: SessionEndIn) -> dict[str, Any]:
        """End a session, saving ``summary`` as its summary when given."""
        return await call(engram.session_end, id, summary=body.summary, project=body.project)

    @app.post(
        "/sessions/{id}/summary",
        response_model=SaveOut,
        status_code=201,
        responses=created,
        tags=["sessions"],
    )
    async def session_summary(id: Session, body: SummaryIn, response: Response) -> dict[str, Any]:
        """Save a session's summary (one per session: a later one revises it)."""
        sections = body.model_dump(exclude={"content", "project"}, exclude_none=True)
        result = await call(
            engram.session_summary,
            body.content,
            session_id=id,
            project=body.project,
            **sections,
        )
        return saved(result, response)

    @app.post(
        "/prompts", response_model=SaveOut, status_code=201, responses=created, tags=["sessions"]
    )
    async def save_prompt(body: PromptIn, response: Response) -> dict[str, Any]:
        """Save a user's prompt (kind ``prompt``)."""
        result = await call(
            engram.save_prompt, body.content, session_id=body.session_id, project=body.project
        )
        return saved(result, response)

    @app.post("/capture", response_model=CaptureOut, tags=["sessions"])
    async def capture(body: CaptureIn) -> dict[str, Any]:
        """Save the learnings of an agent's output (its last "Key Learnings" section)."""
        return await call(
            engram.capture,
            body.text,
            session_id=body.session_id,
            project=body.project,
            source=body.source,
        )

    @app.get("/stats", response_model=dict[str, Any], tags=["meta"])
    async def stats() -> dict[str, Any]:
        """Return counts by kind, status, scope and project, and the sizes of the files."""
        return await call(engram.stats)

    @app.get("/export", response_model=dict[str, Any], tags=["sync"])
    async def export(scope: Literal["project", "personal"] = "project") -> dict[str, Any]:
        """Return every memory and tombstone of a store as engram's export document."""
        return await call(engram.export, scope=scope)

    @app.post("/import", response_model=ImportOut, tags=["sync"])
    async def import_(document: ImportIn) -> dict[str, Any]:
        """Merge an export document into the store (the one merge function)."""
        result = await call(engram.import_, document.model_dump())
        out: dict[str, Any] = result.to_dict()
        return out

    @app.get("/sync/status", response_model=dict[str, Any], tags=["sync"])
    async def sync_status(scope: Literal["project", "personal"] = "project") -> dict[str, Any]:
        """Return the sync chunks, their contributors and what is pending either way."""
        return await call(engram.sync_status, scope=scope)

    @app.get("/consolidate/preview", response_model=list[dict[str, Any]], tags=["hygiene"])
    async def consolidate_preview() -> list[dict[str, Any]]:
        """Return candidate groups for consolidation, each with a reason and an action."""
        return await call(engram.consolidate_preview)

    return app


# -- serving ----------------------------------------------------------------------------------


def serve(
    root: Path | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the API until interrupted; refuse a non-loopback host without a token.

    ``engram serve`` calls this (the CLI declares the command's options); ``ready`` gets the URL
    just before the server starts.
    """
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    check_exposure(host, token)
    try:
        import uvicorn
    except ImportError as exc:
        raise ServeError(
            f"the HTTP API needs fastapi and uvicorn ({exc.name} is missing)",
            hint="pip install 'engram-git[http]'",
        ) from exc
    app = create_app(root, token=token, host=host)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    if ready is not None:
        where = f"[{host}]" if ":" in host else host
        ready(f"http://{where}:{port}")
    server.run()


def _main(argv: list[str]) -> int:
    """Run ``python -m engram.http_api [--host H] [--port P]`` in the project here."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m engram.http_api")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("-C", dest="directory", type=Path, default=None)
    args = parser.parse_args(argv)

    def ready(url: str) -> None:
        print(f"serving {url}", file=sys.stderr, flush=True)

    try:
        serve(args.directory, host=args.host, port=args.port, ready=ready)
    except EngramError as exc:
        print(f"error: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
        return 1
    return 0


__all__ = [
    "ServeError",
    "check_exposure",
    "create_app",
    "cross_origin_write",
    "host_allowed",
    "host_name",
    "is_loopback",
    "serve",
]

if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(_main(sys.argv[1:]))
