"""The HTTP API's models: requests derived from the operations' declarations, and every response.

Request bodies and query-parameter sets are built from the declarations (``declared``): the
recall filters of ``GET /memories`` and ``GET /search`` are ``RECALL_FILTERS``, the fields of
``POST /memories`` are remember's parameters, and so on, each with HTTP's own bounds on strings
and where HTTP has always allowed more (pages of 200, any budget). A route takes one through the
alias next to it (``Search``, ``NewMemory`` …) and passes ``arguments()`` to the facade.

Responses describe the facade's results as the API has always returned them: a memory is an
open record (the fields the store keeps and any others it was saved with), and a result is
passed on whole, but for a save (``SaveOut``: its near-duplicates left out, ``warnings`` always
there). tests/http_api/test_http.py compares every route with the facade.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from engram.http_api.declared import (
    Declared,
    Item,
    OpenDeclared,
    Text,
    Title,
    body,
    declared_model,
    http_params,
    query,
)
from engram.operations import admin, memory, sessions
from engram.operations.params import Param

MAX_PAGE: Final = 200
MAX_OFFSET: Final = 1_000_000
MAX_BUDGET: Final = 1_000_000
MAX_AROUND: Final = 200
SESSION_CHARS: Final = 200

SessionId = Annotated[str, Field(min_length=1, max_length=SESSION_CHARS)]
# The long strings of request bodies; every other string is an item of ITEM_CHARS.
LONG: Final = {
    "title": Title,
    **{name: Text for name in ("content", "text", "summary", "reason", "query")},
    **{section.name: Text for section in sessions.SUMMARY_SECTIONS},
}
WIDE_BUDGET: Final = {"minimum": 0, "maximum": MAX_BUDGET}  # HTTP packs any budget

# -- requests: the query parameters -------------------------------------------------------------


def _recall(name: str) -> Param:
    return next(p for p in memory.RECALL.params_for("http") if p.name == name)


FILTERS: Final = tuple(p for p in memory.RECALL_FILTERS if not p.only or "http" in p.only)
PAGE: Final = _recall("limit")._replace(maximum=MAX_PAGE)
SKIP: Final = _recall("offset")._replace(maximum=MAX_OFFSET)
TEXT: Final = _recall("query")._replace(flag="q")
SCOPE: Final = admin.EXPORT.param("scope")

ListParams = declared_model(
    "ListParams", (*FILTERS, PAGE._replace(default=20), SKIP), where="query"
)
SearchParams = declared_model("SearchParams", (TEXT, *FILTERS, PAGE, SKIP), where="query")
ContextParams = declared_model(
    "ContextParams", http_params(memory.CONTEXT, budget=WIDE_BUDGET), where="query"
)
ForgetParams = declared_model(
    "ForgetParams", http_params(memory.FORGET, drop=["id"]), where="query"
)
RelatedParams = declared_model(
    "RelatedParams",
    http_params(memory.RELATED, drop=["id"], limit={"minimum": 0, "maximum": MAX_PAGE}),
    where="query",
)
TimelineParams = declared_model(
    "TimelineParams",
    http_params(
        memory.TIMELINE, drop=["id"], before={"maximum": MAX_AROUND}, after={"maximum": MAX_AROUND}
    ),
    where="query",
)
ExportParams = declared_model("ExportParams", http_params(admin.EXPORT), where="query")
SyncParams = declared_model("SyncParams", (SCOPE,), where="query")

Listing = Annotated[Declared, query(ListParams)]
Search = Annotated[Declared, query(SearchParams)]
Briefing = Annotated[Declared, query(ContextParams)]
Forgetting = Annotated[Declared, query(ForgetParams)]
Neighbours = Annotated[Declared, query(RelatedParams)]
Around = Annotated[Declared, query(TimelineParams)]
Exporting = Annotated[Declared, query(ExportParams)]
Syncing = Annotated[Declared, query(SyncParams)]

# -- requests: the bodies -----------------------------------------------------------------------


class Link(BaseModel):
    """A link to another memory."""

    rel: str = "relates"
    to: str


LINKS: Final = {"links": list[Link | Item]}
SESSION: Final = {"session_id": SessionId}
SOURCE: Final = Param("source", "string", "Where the memory came from.", default="http")
AUTHOR: Final = Param("author", "string", "Who saved it (default: this machine's author).")

MemoryIn = declared_model(
    "MemoryIn",
    http_params(memory.REMEMBER, add=(SOURCE, AUTHOR, sessions.PROJECT)),
    strings=LONG,
    types=LINKS,
    base=OpenDeclared,
    doc="A new memory; fields beyond these are kept on the memory as they are.",
)
MemoryPatch = declared_model(
    "MemoryPatch",
    http_params(memory.UPDATE, drop=["id"], add=(sessions.PROJECT,)),
    optional=True,
    strings=LONG,
    types=LINKS,
    base=OpenDeclared,
    doc="Fields to change (absent or null: unchanged); other fields are set as they are.",
)
JudgeIn = declared_model(
    "JudgeIn", http_params(memory.JUDGE, drop=["id"], add=(AUTHOR,)), strings=LONG
)
CheckIn = declared_model(
    "CheckIn",
    http_params(memory.CHECK, files={"required": False, "default": []}, budget=WIDE_BUDGET),
    strings=LONG,
)
SessionIn = declared_model(
    "SessionIn", http_params(sessions.SESSION_START), strings=LONG, types=SESSION
)
SessionEndIn = declared_model(
    "SessionEndIn", http_params(sessions.SESSION_END, drop=["session_id"]), strings=LONG
)
SummaryIn = declared_model(
    "SummaryIn", http_params(sessions.SESSION_SUMMARY, drop=["session_id"]), strings=LONG
)
PromptIn = declared_model(
    "PromptIn", http_params(sessions.SAVE_PROMPT), strings=LONG, types=SESSION
)
CaptureIn = declared_model(
    "CaptureIn",
    http_params(sessions.CAPTURE, content={"name": "text"}),  # the body has called it text
    strings=LONG,
    types=SESSION,
)


class ImportIn(BaseModel):
    """An export document (GET /export); other fields of it are ignored."""

    model_config = ConfigDict(extra="allow")

    format: Literal["engram"] = "engram"
    version: Literal[1] = 1
    memories: list[dict[str, Any]] = Field(
        description="memories and tombstones; each is checked like a line of memories.jsonl "
        "and skipped with its reason when it fails"
    )


NewMemory = Annotated[OpenDeclared, body(MemoryIn)]
Changes = Annotated[OpenDeclared, body(MemoryPatch)]
Judging = Annotated[Declared, body(JudgeIn)]
Checking = Annotated[Declared, body(CheckIn)]
NewSession = Annotated[Declared, body(SessionIn)]
Ending = Annotated[Declared, body(SessionEndIn)]
Summarising = Annotated[Declared, body(SummaryIn)]
Prompting = Annotated[Declared, body(PromptIn)]
Capturing = Annotated[Declared, body(CaptureIn)]

# -- responses ----------------------------------------------------------------------------------


class Open(BaseModel):
    """A result that may carry more fields than these (kept as they are)."""

    model_config = ConfigDict(extra="allow")


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


class Memory(Open):
    """A memory as the store keeps it: kind, title, content, tags, files, links, status, scope,
    importance, rev, times … and any other field it was saved with (a tombstone: id, rev,
    updated_at, deleted_at)."""

    id: str


class SaveOut(BaseModel):
    action: str = Field(description="created, updated (topic key) or duplicate")
    id: str
    redactions: int
    superseded: list[str]
    memory: Memory
    warnings: list[str] = Field(
        default_factory=list, description="e.g. a redaction pattern of config.yaml left out"
    )


class PageOut(BaseModel):
    memories: list[Memory]
    limit: int
    offset: int
    next_offset: int | None = Field(
        description="offset of the next page; null when this page is not full"
    )


class SearchHit(BaseModel):
    id: str
    score: float
    relevance: float | None = Field(
        description="the estimated probability (0-1) that the hit answers the query;"
        " null when no words were given"
    )
    kind: str | None
    status: str
    title: str | None
    snippet: str = Field(description="the start of the content, on one line")
    matched: list[str] = Field(description="the fields the query matched")
    memory: Memory
    stale: list[str] = Field(
        default_factory=list, description="why it may be stale (absent when it is not)"
    )


class SearchOut(BaseModel):
    query: str
    hits: list[SearchHit]
    limit: int
    offset: int
    next_offset: int | None


class MemorySummary(BaseModel):
    id: str
    kind: str
    status: str = Field(description="its status, or forgotten")
    title: str


class ChainEntry(MemorySummary):
    depth: int = Field(description="steps from the memory asked about")
    via: str = Field(description="the memory it was reached from")


class LinkedMemory(MemorySummary):
    rel: str


class Provenance(BaseModel):
    source: str
    adr: str | None = None
    commit: str | None = None
    session_id: str | None = None
    author: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    rev: int | None = None


class DanglingLink(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    from_: str = Field(alias="from")
    rel: str
    to: str = Field(description="the id no memory has")


class LineageOut(BaseModel):
    memory: MemorySummary
    supersedes: list[ChainEntry]
    superseded_by: list[ChainEntry]
    links_out: list[LinkedMemory]
    links_in: list[LinkedMemory]
    provenance: Provenance
    judgements: list[dict[str, Any]]
    history: int = Field(description="earlier revisions kept")
    dangling: list[DanglingLink]
    cycles: list[list[str]]
    stale: list[str]


class Neighbour(MemorySummary):
    reason: str
    score: float


class RelatedOut(BaseModel):
    related: list[Neighbour]


class TimelineEntry(BaseModel):
    id: str
    kind: str
    title: str
    created_at: str
    status: str


class Session(Open):
    """A logged session (its log entry may carry more fields)."""

    id: str
    started_at: str | None = None
    project: str | None = None
    directory: str | None = None
    ended_at: str | None = None
    summary_id: str | None = None


class SavedSummary(SaveOut):
    similar: list[str] = Field(description="near-duplicates already stored")


class SessionEnded(Session):
    summary: SavedSummary | None = None


class TimelineOut(BaseModel):
    memory: TimelineEntry
    scope: str = Field(description="session, or project when the memory has no session")
    session_id: str | None
    before: list[TimelineEntry]
    after: list[TimelineEntry]
    earlier: int = Field(description="memories before those shown")
    later: int = Field(description="memories after those shown")
    session: Session | None = None


class Finding(Open):
    """One finding (a hotspot has its path and changes too)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    reason: str = Field(description="pitfall, decision, hotspot, candidate, memory, superseded …")
    id: str
    short_id: str
    kind: str | None
    status: str
    title: str
    note: str
    from_: str = Field(alias="from")


class CheckOut(BaseModel):
    files: list[str]
    budget: int
    tokens: int
    left_out: int
    findings: list[Finding]
    text: str


class BriefingItem(Open):
    """One memory of the briefing (with a snippet, or the hotspots of the hotspots memory)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    section: str
    id: str
    short_id: str
    kind: str | None
    status: str
    title: str
    from_: str = Field(alias="from")


class ContextOut(BaseModel):
    project: str
    query: str
    budget: int
    tokens: int
    left_out: int
    items: list[BriefingItem]
    text: str


class CaptureItem(BaseModel):
    id: str
    title: str


class CaptureOut(BaseModel):
    extracted: int
    saved: list[CaptureItem]
    duplicates: list[CaptureItem]
    session_id: str | None


class StoreStats(Open):
    memories: int
    tombstones: int
    links: int
    by_kind: dict[str, int]
    by_status: dict[str, int]
    by_scope: dict[str, int]
    by_project: dict[str, int]
    top_tags: dict[str, int]
    indexed: int
    pending: int
    scope: str
    path: str
    file_bytes: int
    backend: str


class StatsOut(BaseModel):
    project: str
    root: str
    stores: list[StoreStats]


class ExportOut(BaseModel):
    format: str
    version: int
    exported_at: str
    project: str
    count: int
    memories: list[Memory]


class ImportOut(BaseModel):
    format: str
    added: int
    updated: int
    unchanged: int
    skipped: int
    errors: list[str]


class SyncStatusOut(BaseModel):
    scope: str
    clone_id: str
    chunks: int
    memories_in_chunks: int
    contributors: dict[str, int] = Field(description="memories in the chunks, by who made them")
    pending_import: list[str] = Field(description="chunks not merged in yet")
    pending_export: int = Field(description="changes not in a chunk yet")
    problems: list[str]


class ConsolidationGroup(BaseModel):
    kind: str
    ids: list[str]
    reason: str
    action: str
    keep: str | None
    score: float


def error_responses(token: bool) -> dict[int | str, dict[str, Any]]:
    """Return the error statuses every route may answer (401 too when a token is required)."""
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
    return errors
