"""The go-engram and engram-rs tool names, as rows of data over the native handlers.

``engram mcp --compat go-engram`` / ``--compat engram-rs`` add these names (and a Go-style
``--tools`` adds go-engram's, ``catalog.resolve_tools``), so an agent set up for either tool
finds its tools under their names. Go engram's rows follow its newest tool contract and its
profiles, and reach handlers of this adapter's own (``tools/go.py``: text answers with Go's
integer ids); engram-rs's reach the native handlers. Each row names its target, its own
parameters (checked like every tool's), how its arguments map onto the target's (``rename``,
then ``convert``) and how the answer is reshaped (``shape``; engram-rs's shapes live in
``engram.operations.compat_rs``, shared with the socket daemon). These rows are the MCP adapter's
own: they are not operations of the facade, and no other adapter offers them.

It must not import the mcp SDK nor any other adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final, NamedTuple

from engram.mcp_server.table import Args, Shape, Tool
from engram.model import KINDS
from engram.operations import compat_rs as rs
from engram.operations import memory as memory_ops
from engram.operations.params import Param

CONTEXT_HEADER_TOKENS: Final = 150  # the briefing's header, for mem_context's limit
CONTEXT_ITEM_TOKENS: Final = 80  # one briefing line, about

_ID = memory_ops.ID._replace(argument=False)
_CURSOR = memory_ops.CURSOR
_TITLE = memory_ops.TITLE
_TOPIC = memory_ops.TOPIC
_CONTENT = memory_ops.CONTENT
_SCOPE = memory_ops.SCOPE

_GO: Final = "go-engram"
GO_RELATIONS: Final = (
    "related",
    "compatible",
    "scoped",
    "conflicts_with",
    "supersedes",
    "not_conflict",
)
_RS: Final = "engram-rs"
_GO_TYPE = Param(
    "type",
    "string",
    "Observation type: decision, architecture, bugfix, pattern, config, discovery, learning, "
    "manual …",
)
_GO_PROJECT = Param("project", "string", "Project name (default: this project).")


def _go_merge_args(args: Args) -> Args:
    """go-engram gives ``from`` as one comma-separated string."""
    names = [part.strip() for part in str(args.get("from") or "").split(",") if part.strip()]
    return {**args, "from": names}


def _drop(*names: str) -> Callable[[Args], Args]:
    """Return a convert that drops arguments the target has no use for."""
    return lambda args: {key: value for key, value in args.items() if key not in names}


def go_context_budget(args: Args) -> int:
    """Return mem_context's token budget: ``limit`` memories, or ``max_bytes``; compact halves.

    The briefing always covers this project and the personal store, so ``project`` and
    ``scope`` need no mapping.
    """
    limit = int(args.get("limit") or 20)
    budget = CONTEXT_HEADER_TOKENS + CONTEXT_ITEM_TOKENS * limit
    if args.get("max_bytes"):
        budget = min(budget, int(args["max_bytes"]) // 4)
    return budget // 2 if args.get("compact") else budget


class Row(NamedTuple):
    """A compatibility row before it meets its target: what it names and how it maps."""

    name: str
    target: str
    description: str
    params: tuple[Param, ...]
    rename: Mapping[str, str]
    convert: Callable[[Args], Args] | None
    shape: Shape | None
    profile: str | None  # None: the target's
    read_only: bool | None  # None: the target's
    destructive: bool | None  # None: the target's


def _row(
    name: str,
    target: str,
    description: str,
    *params: Param,
    rename: Mapping[str, str] | None = None,
    convert: Callable[[Args], Args] | None = None,
    shape: Shape | None = None,
    profile: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
) -> Row:
    return Row(
        name,
        target,
        description,
        params,
        MappingProxyType(dict(rename or {})),
        convert,
        shape,
        profile,
        read_only,
        destructive,
    )


_GO_LIMIT = Param(
    "limit", "integer", "Most results.", default=10, minimum=1, maximum=20, clamp=True
)
_GO_ID = Param("id", "id", "The observation's id (Go's integer, or an engram id).", required=True)
_GO_RELATION = Param(
    "relation",
    "string",
    "related, compatible, scoped, conflicts_with, supersedes or not_conflict.",
    required=True,
    enum=GO_RELATIONS,
)
_GO_CHOICE = Param(
    "project_choice_reason", "string", "Accepted for Go's clients; engram needs no recovery."
)
_GO_TOKEN = Param("recovery_token", "string", "Accepted for Go's clients; not used.")
_GO_SESSION = Param("session_id", "string", "Your session's id.")

# Go engram's tools, its newest contract (tool-contract-v1): the parameters it declares, the
# same required ones, the profile Go puts each in. Answers are text, as Go's are, with Go's
# integer ids (engram.model.go_id_of); the handlers are engram.mcp_server.tools.go.
GO_ENGRAM: Final = (
    _row(
        "mem_save",
        "go_save",
        "Save an observation (decision, bug fix, pattern, discovery, command …) after "
        "significant work; content as **What** / **Why** / **Where** / **Learned**. Answers its "
        "ID and a suggested topic_key; a known topic_key updates instead of duplicating.",
        Param("title", "string", _TITLE.help, required=True),
        Param("content", "string", _CONTENT.help),
        Param("observation", "string", "Alias of content."),
        _GO_TYPE._replace(
            help="Any type: decision, bugfix, pattern, command, file_change … (default: manual)."
        ),
        _GO_SESSION,
        _GO_PROJECT,
        _SCOPE,
        _TOPIC,
        Param(
            "capture_prompt",
            "boolean",
            "Accepted for Go's clients; prompts are saved with mem_save_prompt.",
        ),
        _GO_CHOICE,
        _GO_TOKEN,
        profile="agent",
        read_only=False,
    ),
    _row(
        "mem_search",
        "go_search",
        "Search memory by words before starting work. Answers ranked observations, each with "
        "its #id, type, title and a preview; mem_get_observation reads one in full.",
        Param("query", "string", "Any words.", required=True),
        _GO_TYPE._replace(help="Only this type (e.g. decision, command)."),
        _GO_PROJECT._replace(help="Only this project (default: this one)."),
        _SCOPE,
        memory_ops.ALL_PROJECTS,
        _GO_LIMIT,
        Param(
            "match_mode",
            "string",
            "Accepted for Go's clients; engram always ranks by words and meaning.",
        ),
        Param("response_format", "string", "text (default) or json.", enum=("text", "json")),
        profile="agent",
        read_only=True,
    ),
    _row(
        "mem_get_observation",
        "go_get",
        "Read one observation in full by id; include_history adds its earlier versions.",
        _GO_ID,
        Param("include_history", "boolean", "Also its earlier versions.", default=False),
        Param("history_cursor", "integer", "Where the next page of history starts.", minimum=0),
        profile="agent",
        read_only=True,
    ),
    _row(
        "mem_update",
        "go_update",
        "Change fields of an observation by id (rev+1; earlier text kept).",
        _GO_ID,
        _TITLE,
        _CONTENT,
        _GO_TYPE,
        _GO_PROJECT,
        _SCOPE,
        _TOPIC,
        profile="agent",
        read_only=False,
    ),
    _row(
        "mem_delete",
        "go_delete",
        "Delete an observation by id (a tombstone; hard_delete also drops its text).",
        _GO_ID,
        Param("hard_delete", "boolean", "Also drop the text.", default=False),
        profile="admin",
        read_only=False,
        destructive=True,
    ),
    _row(
        "mem_suggest_topic_key",
        "go_suggest_topic_key",
        "Suggest a stable topic_key (family/segment) from a type and a title or content.",
        _GO_TYPE,
        _TITLE,
        _CONTENT,
        profile="agent",
        read_only=True,
    ),
    _row(
        "mem_stats",
        "stats",
        "Count memories by type, status and project.",
        _GO_PROJECT._replace(help="Accepted for Go's clients; the counts cover every store."),
        convert=_drop("project"),
        profile="admin",
    ),
    _row(
        "mem_context",
        "go_context",
        "Get the memory context of earlier sessions at the start of a session: pinned "
        "memories first, then decisions, pitfalls, hotspots and the latest session summaries.",
        _GO_PROJECT,
        _SCOPE,
        Param("limit", "integer", "About how many memories.", default=20, minimum=1, maximum=100),
        Param("compact", "boolean", "A shorter briefing (half the budget).", default=False),
        Param("max_bytes", "integer", "At most this many bytes.", minimum=400),
        profile="agent",
        read_only=True,
    ),
    _row(
        "mem_timeline",
        "go_timeline",
        "Show the observations before and after one in its session, oldest first.",
        Param("observation_id", "id", "The observation's id.", required=True),
        Param("before", "integer", "How many before.", default=5, minimum=0, maximum=50),
        Param("after", "integer", "How many after.", default=5, minimum=0, maximum=50),
        _GO_PROJECT._replace(help="Accepted for Go's clients; the observation names it."),
        profile="admin",
        read_only=True,
    ),
    _row(
        "mem_session_summary",
        "go_session_summary",
        "Save the end-of-session summary (Goal, Instructions, Discoveries, Accomplished, "
        "Next steps, Relevant files).",
        Param("content", "string", "The summary, in markdown.", required=True),
        _GO_PROJECT,
        _GO_SESSION,
        _GO_CHOICE,
        _GO_TOKEN,
        profile="agent",
        read_only=False,
    ),
    _row(
        "mem_session_start",
        "go_session_start",
        "Register the start of a session.",
        Param("id", "string", "The session's id.", required=True),
        _GO_PROJECT,
        Param("directory", "string", "Working folder."),
        profile="agent",
        read_only=False,
    ),
    _row(
        "mem_session_end",
        "go_session_end",
        "Mark a session ended, with an optional summary.",
        Param("id", "string", "The session's id.", required=True),
        Param("summary", "string", "The session summary."),
        profile="agent",
        read_only=False,
    ),
    _row(
        "mem_save_prompt",
        "go_save_prompt",
        "Save a user prompt.",
        Param("content", "string", "The prompt.", required=True),
        _GO_SESSION,
        _GO_PROJECT,
        _GO_CHOICE,
        _GO_TOKEN,
        profile="agent",
        read_only=False,
    ),
    _row(
        "mem_capture_passive",
        "capture",
        "Extract the learnings of an agent's output (its Key Learnings section) and save "
        "each as a proposed memory for review, skipping known ones.",
        Param("content", "string", "The agent's output.", required=True),
        _GO_SESSION,
        _GO_PROJECT,
        Param("source", "string", "Where it came from.", default="capture"),
        profile="agent",
    ),
    _row(
        "mem_merge_projects",
        "merge_projects",
        "Merge projects: every memory of `from` (comma-separated) moves to `to`.",
        Param("from", "csv", "Comma-separated project names.", required=True),
        Param("to", "string", "The project to merge into.", required=True),
        convert=_go_merge_args,
        profile="admin",
    ),
    _row(
        "mem_current_project",
        "go_current_project",
        "Say which project this server serves and how it found it (working folder, the "
        "client's roots, or none: the personal store). Never fails; call it first.",
        profile="agent",
        read_only=True,
    ),
    _row(
        "mem_doctor",
        "go_doctor",
        "Check the memory store (read-only): each finding with its severity and check.",
        _GO_PROJECT._replace(help="Accepted for Go's clients; this project is checked."),
        Param("check", "string", "Only the findings of this check."),
        profile="agent",
        read_only=True,
    ),
    _row(
        "mem_pin",
        "go_pin",
        "Pin an observation: every mem_context shows it first.",
        _GO_ID,
        profile="agent",
        read_only=False,
    ),
    _row(
        "mem_unpin",
        "go_unpin",
        "Unpin an observation: mem_context ranks it like any other again.",
        _GO_ID,
        profile="agent",
        read_only=False,
    ),
    _row(
        "mem_compare",
        "go_compare",
        "Record your verdict on two observations: a relation, your confidence and why. "
        "memory_id_a supersedes / conflicts_with / relates to memory_id_b.",
        Param("memory_id_a", "id", "The first observation's id.", required=True),
        Param("memory_id_b", "id", "The second observation's id.", required=True),
        _GO_RELATION,
        Param("confidence", "number", "How sure, 0 to 1.", required=True, minimum=0, maximum=1),
        Param("reasoning", "string", "Why, in a sentence.", required=True),
        Param("model", "string", "Your model, kept with the verdict."),
        profile="agent",
        read_only=False,
    ),
    _row(
        "mem_judge",
        "go_judge",
        "Record a verdict on a possible conflict mem_save listed: its judgment_id and a "
        "relation, with a reason.",
        Param("judgment_id", "string", "The judgment_id mem_save gave.", required=True),
        _GO_RELATION,
        Param("reason", "string", "Why, in a sentence."),
        Param("evidence", "string", "What supports it."),
        Param("confidence", "number", "How sure, 0 to 1 (default 1).", minimum=0, maximum=1),
        _GO_SESSION,
        profile="agent",
        read_only=False,
    ),
    _row(
        "mem_review",
        "go_review",
        "Review memories that may be out of date or were proposed from a session: action "
        "list shows those whose cited files changed, whose review date passed, or that are "
        "proposed, not reviewed; mark_reviewed confirms one as still true (accepts a proposal).",
        Param(
            "action",
            "string",
            "list or mark_reviewed.",
            required=True,
            enum=("list", "mark_reviewed"),
        ),
        Param("id", "id", "The observation to mark reviewed."),
        Param("observation_id", "id", "Alias of id."),
        Param("limit", "integer", "Most to list.", default=10, minimum=1, maximum=50),
        _GO_PROJECT._replace(help="Accepted for Go's clients; this project's memories."),
        profile="agent",
        read_only=False,
    ),
)

ENGRAM_RS: Final = (
    _row(
        "memory_store",
        "remember",
        "Store a memory as context / action / result. Returns {id, indexed, deduplicated}.",
        Param(
            "memory_type",
            "string",
            "Kind of memory.",
            required=True,
            enum=rs.RS_TYPES,
            accept=KINDS,
        ),
        Param("context", "string", "The situation.", required=True),
        Param("action", "string", "What was done or decided.", required=True),
        Param("result", "string", "What came of it."),
        Param("tags", "csv", "Comma-separated tags."),
        Param("project", "string", "Project name (default: this project)."),
        rename={"memory_type": "kind"},
        convert=rs.store_args,
        shape=rs.store_shape,
    ),
    _row(
        "memory_search",
        "recall",
        "Search memories by words. Returns {memories, count} with compact hits.",
        Param("query", "string", "Any words.", required=True),
        Param(
            "limit",
            "integer",
            "Most results.",
            default=memory_ops.RECALL_LIMIT,
            minimum=1,
            maximum=memory_ops.RECALL_MAX,
            clamp=True,
        ),
        Param("tags", "csv", "Only with one of these comma-separated tags."),
        Param("project", "string", "Only this project."),
        _CURSOR,
        shape=rs.search_shape,
    ),
    _row(
        "memory_status",
        "stats",
        "Memory and index counts: {memory_count, indexed_count, index_size, hints}.",
        shape=rs.status_shape,
    ),
    _row(
        "memory_judge",
        "judge",
        "Judge a memory: {memory_id, query, score 0..1}.",
        Param("memory_id", "id", "The memory's id.", required=True),
        Param("query", "string", "The query that surfaced it."),
        Param("score", "number", "How useful, 0 to 1.", minimum=0, maximum=1),
        rename={"memory_id": "id"},
    ),
    _row(
        "memory_consolidate_preview",
        "consolidate_preview",
        "Candidate groups for consolidation, each with a reason and a proposed action.",
    ),
    _row(
        "memory_consolidate",
        "consolidate",
        "Recommendations per group: merge, archive, delete or keep.",
    ),
    _row(
        "memory_consolidate_apply",
        "consolidate_apply",
        "Apply the recommendations (or a given plan); dry_run shows the changes.",
        Param("plan", "object", "A plan from memory_consolidate (optional)."),
        Param("dry_run", "boolean", "Only show the changes.", default=False),
    ),
    _row(
        "memory_train_generate",
        "train",
        "Run the trainer and store its insights.",
        Param("timeout", "number", "Seconds before the trainer is stopped.", minimum=1),
    ),
    _row("memory_train_list", "insights", "List the insights."),
    _row(
        "memory_train_delete",
        "insights_delete",
        "Delete an insight.",
        Param("id", "id", "The insight's id.", required=True),
    ),
    _row(
        "memory_config",
        "config",
        "Read the settings (action get); they are read-only here.",
        Param("action", "string", "get or set.", required=True, enum=("get", "set")),
        Param("key", "string", "Setting name (set only)."),
        Param("value", "string", "New value (set only)."),
        profile="agent",
        read_only=True,
    ),
    _row(
        "memory_export",
        "export",
        "Export all memories: {version: 1, memories, exported_at, count}, in pages.",
        _CURSOR,
        shape=rs.export_shape,
    ),
    _row(
        "memory_import",
        "import",
        "Import {version: 1, memories}; returns {imported, skipped}.",
        Param("version", "integer", "Export format version (1).", required=True),
        Param("memories", "objects", "The exported memories.", required=True),
        convert=rs.import_args,
        shape=rs.import_shape,
    ),
)


def rows(native: Mapping[str, Tool]) -> tuple[Tool, ...]:
    """Return the compatibility rows as tools over the native ones (by name)."""
    return tuple(
        _tool(row, compat, native.get(row.target))
        for compat, table in ((_GO, GO_ENGRAM), (_RS, ENGRAM_RS))
        for row in table
    )


def _tool(row: Row, compat: str, base: Tool | None) -> Tool:
    """Return a row as a tool: its profile and effects are its target's unless given."""
    return Tool(
        row.name,
        row.description,
        row.params,
        row.profile if row.profile is not None else (base.profile if base else "agent"),
        row.read_only if row.read_only is not None else (base.read_only if base else True),
        destructive=(
            row.destructive if row.destructive is not None else bool(base and base.destructive)
        ),
        idempotent=base.idempotent if base else False,
        target=row.target,
        compat=compat,
        rename=row.rename,
        convert=row.convert,
        shape=row.shape,
    )
