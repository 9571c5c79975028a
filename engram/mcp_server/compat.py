"""The go-engram and engram-rs tool names, as rows of data over the native handlers.

``engram mcp --compat go-engram`` / ``--compat engram-rs`` add these names, so an agent set up
for either tool finds its tools under their names. Each row names its native target, its own
parameters (checked like every tool's), how its arguments map onto the target's (``rename``,
then ``convert``) and how the answer is reshaped (``shape``; engram-rs's shapes live in
``engram.compat_rs``, shared with the socket daemon). These rows are the MCP adapter's own:
they are not operations of the facade, and no other adapter offers them.

It must not import the mcp SDK nor any other adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final, NamedTuple

from engram import compat_rs as rs
from engram.mcp_server.table import Args, Shape, Tool
from engram.model import KINDS
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


def _go_context_args(args: Args) -> Args:
    """Map go-engram's mem_context onto context: ``limit`` memories become a token budget.

    The briefing always covers this project and the personal store, so ``project`` and
    ``scope`` need no mapping.
    """
    limit = int(args.get("limit") or 20)
    return {"budget": CONTEXT_HEADER_TOKENS + CONTEXT_ITEM_TOKENS * limit}


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
    )


_GO_LIMIT = Param(
    "limit", "integer", "Most results.", default=10, minimum=1, maximum=20, clamp=True
)

GO_ENGRAM: Final = (
    _row(
        "mem_save",
        "remember",
        "Save an observation (decision, bug fix, pattern, discovery …) to project memory. "
        "Returns its id; a known topic_key updates instead of duplicating.",
        Param("title", "string", _TITLE.help, required=True),
        Param("content", "string", _CONTENT.help, required=True),
        _GO_TYPE._replace(default="manual"),
        Param("session_id", "string", "Your session's id."),
        _GO_PROJECT,
        _SCOPE,
        _TOPIC,
        rename={"type": "kind"},
    ),
    _row(
        "mem_search",
        "recall",
        "Search memory by words before starting work. Returns compact ranked hits; "
        "mem_get_observation reads one in full.",
        Param("query", "string", "Any words.", required=True),
        _GO_TYPE,
        _GO_PROJECT,
        _SCOPE,
        memory_ops.ALL_PROJECTS,
        _GO_LIMIT,
        _CURSOR,
        rename={"type": "kind"},
    ),
    _row(
        "mem_get_observation",
        "get",
        "Read one observation in full by id.",
        _ID,
        _CURSOR,
    ),
    _row(
        "mem_update",
        "update",
        "Change fields of an observation by id (rev+1; earlier text kept).",
        _ID,
        _TITLE,
        _CONTENT,
        _GO_TYPE,
        _GO_PROJECT,
        _SCOPE,
        _TOPIC,
        rename={"type": "kind"},
    ),
    _row(
        "mem_delete",
        "forget",
        "Delete an observation by id (a tombstone; hard_delete also drops its text).",
        _ID,
        Param("hard_delete", "boolean", "Also drop the text.", default=False),
        rename={"hard_delete": "hard"},
    ),
    _row(
        "mem_suggest_topic_key",
        "suggest_topic_key",
        "Suggest a stable topic_key (family/segment) from a type and a title or content.",
        _GO_TYPE,
        _TITLE,
        _CONTENT,
        rename={"type": "kind"},
    ),
    _row("mem_stats", "stats", "Count memories by type, status and project."),
    _row(
        "mem_context",
        "context",
        "Get the memory context of earlier sessions at the start of a session: decisions, "
        "pitfalls, hotspots and the latest session summaries, each with an id.",
        _GO_PROJECT,
        _SCOPE,
        Param("limit", "integer", "About how many memories.", default=20, minimum=1, maximum=100),
        convert=_go_context_args,
    ),
    _row(
        "mem_timeline",
        "timeline",
        "Show the observations before and after one in its session, oldest first.",
        Param("observation_id", "id", "The observation's id.", required=True),
        Param("before", "integer", "How many before.", default=5, minimum=0, maximum=50),
        Param("after", "integer", "How many after.", default=5, minimum=0, maximum=50),
        rename={"observation_id": "id"},
    ),
    _row(
        "mem_session_summary",
        "session_summary",
        "Save the end-of-session summary (Goal, Instructions, Discoveries, Accomplished, "
        "Next steps, Relevant files).",
        Param("content", "string", "The summary, in markdown.", required=True),
        Param("project", "string", "Project name.", required=True),
        Param("session_id", "string", "The session's id."),
    ),
    _row(
        "mem_session_start",
        "session_start",
        "Register the start of a session.",
        Param("id", "string", "The session's id.", required=True),
        Param("project", "string", "Project name.", required=True),
        Param("directory", "string", "Working folder."),
        rename={"id": "session_id"},
    ),
    _row(
        "mem_session_end",
        "session_end",
        "Mark a session ended, with an optional summary.",
        Param("id", "string", "The session's id.", required=True),
        Param("summary", "string", "The session summary."),
        rename={"id": "session_id"},
    ),
    _row(
        "mem_save_prompt",
        "save_prompt",
        "Save a user prompt.",
        Param("content", "string", "The prompt.", required=True),
        Param("session_id", "string", "The session's id."),
        _GO_PROJECT,
    ),
    _row(
        "mem_capture_passive",
        "capture",
        "Extract the learnings of an agent's output (its Key Learnings section) and save "
        "each, skipping known ones.",
        Param("content", "string", "The agent's output.", required=True),
        Param("session_id", "string", "The session's id."),
        _GO_PROJECT,
        Param("source", "string", "Where it came from.", default="capture"),
    ),
    _row(
        "mem_merge_projects",
        "merge_projects",
        "Merge projects: every memory of `from` (comma-separated) moves to `to`.",
        Param("from", "csv", "Comma-separated project names.", required=True),
        Param("to", "string", "The project to merge into.", required=True),
        convert=_go_merge_args,
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
        destructive=base.destructive if base else False,
        idempotent=base.idempotent if base else False,
        target=row.target,
        compat=compat,
        rename=row.rename,
        convert=row.convert,
        shape=row.shape,
    )
