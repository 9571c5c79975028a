"""The operations on memories: remember, recall, get, update, forget, why, check, context …

Each is declared here once (``declare``) and every adapter derives its surface from it. The
recall filters are declared once (``RECALL_FILTERS``) and shared by every operation that
filters memories: add a filter here and to the index's ``Query`` and every adapter offers it.
"""

from __future__ import annotations

from typing import Final

from engram.model import KIND_ALIASES, KINDS, SCOPES, STATUSES
from engram.operations.params import Param
from engram.operations.spec import Operation, declare

RECALL_LIMIT: Final = 5  # hits per MCP page
# What a memory is when its save does not say: declared here once, offered by every adapter
# (REMEMBER's parameters) and filled in by the write path (engram.project.memories.remember).
DEFAULT_KIND: Final = "note"
DEFAULT_IMPORTANCE: Final = 3
DEFAULT_STATUS: Final = "active"
DEFAULT_SCOPE: Final = "project"
RECALL_MAX: Final = 50
VERDICTS: Final = ("useful", "outdated", "wrong")
KIND_HELP: Final = "decision, pitfall, bugfix, pattern, principle, architecture, fact, note …"

ID = Param(
    "id", "id", "Memory id or unique id prefix (as recall shows it).", required=True, argument=True
)
CURSOR = Param(
    "cursor", "string", "next_cursor from the previous page, to continue.", only=("mcp",)
)
TAGS = Param("tags", "strings", "Topic tags, lower-case (a list, or comma-separated).", short="-t")
FILES = Param(
    "files",
    "strings",
    "Paths or globs the memory is about (a list, or comma-separated): absolute inside the "
    "repository, or relative to it (from the current folder in a subfolder); stored "
    "repo-relative.",
    short="-f",
)
IMPORTANCE = Param(
    "importance", "integer", "1–5; 3 is normal, 5 critical.", minimum=1, maximum=5, short="-i"
)
TOPIC = Param(
    "topic_key",
    "string",
    "Stable key of an evolving topic: a later save with it updates this memory.",
)
LINKS = Param(
    "links",
    "strings",
    "REL:ID, e.g. supersedes:7f3kq2ab (rel: supersedes, relates, fixes …).",
    flag="link",
)
TITLE = Param("title", "string", "One specific, searchable line.")
CONTENT = Param("content", "string", "What / Why / Where / Learned, in markdown.")
KIND = Param(
    "kind",
    "string",
    f"What sort of memory: {KIND_HELP}",
    enum=KINDS,
    accept=tuple(KIND_ALIASES),
    short="-k",
)
STATUS = Param("status", "string", "Lifecycle: active unless replaced or doubtful.", enum=STATUSES)
SCOPE = Param(
    "scope",
    "string",
    "project (shared in the repo) or personal (your own store, ENGRAM_HOME).",
    enum=SCOPES,
)

# Personal memories are global unless tied to a project; recall shows this project's and the
# global ones, and with this flag every project's (go-engram's name for it).
ALL_PROJECTS = Param(
    "all_projects",
    "boolean",
    "Every project's memories: also your personal ones tied to other projects (default: "
    "this project's and your global ones).",
    filter=True,
)

# The filters of recall (and of every listing that filters memories), each passed to the
# index's Query under its target name (all_projects to the recall itself).
RECALL_FILTERS: Final = (
    Param(
        "kind",
        "strings",
        "Only these kinds (a list, or comma-separated).",
        enum=KINDS,
        accept=tuple(KIND_ALIASES),
        target="kinds",
        short="-k",
        filter=True,
    ),
    Param(
        "tags",
        "strings",
        "Only memories with one of these tags.",
        target="tags",
        flag="tag",
        short="-t",
        filter=True,
    ),
    Param(
        "files",
        "strings",
        "Only memories about these paths (exact, folder, glob).",
        target="files",
        flag="file",
        short="-f",
        filter=True,
    ),
    Param(
        "status", "strings", "Only these statuses.", enum=STATUSES, target="statuses", filter=True
    ),
    Param("scope", "strings", "Only these stores.", enum=SCOPES, target="scopes", filter=True),
    Param("project", "strings", "Only these projects.", target="projects", filter=True),
    ALL_PROJECTS,
    Param(
        "since",
        "date",
        "Only memories changed on or after this: a date (2026-11-01), an RFC 3339 time, or an "
        "age (12h, 7d, 2w, 3m, 1y).",
        filter=True,
    ),
    Param(
        "until",
        "date",
        "Only memories changed on or before this (a date, a time or an age, as for since).",
        filter=True,
    ),
    Param(
        "author",
        "strings",
        "Only memories by these authors (git user names, any case).",
        target="authors",
        filter=True,
    ),
)

# Go engram's CLI flags (`engram save TITLE MSG --type T --project P --topic K`), offered by
# the CLI only: the other adapters take Go's names through their own Go surfaces.
GO_TYPE = Param(
    "type",
    "string",
    "Go engram's type: a kind (as --kind), or any other type (command, file_change …) kept "
    "as written, ranked as --kind.",
    only=("cli",),
)
GO_SAVE_FLAGS: Final = (
    GO_TYPE,
    Param(
        "project",
        "string",
        "The project it belongs to (default: this repository's).",
        only=("cli",),
    ),
    Param("topic", "string", "Go engram's name for --topic-key.", only=("cli",)),
)

REMEMBER = declare(
    Operation(
        "remember",
        "Save a memory and print its id (an identical recent save only counts).",
        "Save something the next session should know: a decision, pitfall, bug fix, pattern "
        "or lesson (What / Why / Where / Learned). Returns its id; an identical recent save "
        "or a known topic_key updates instead of duplicating.",
        (
            TITLE._replace(required=True, argument=True),
            CONTENT._replace(argument=True),
            KIND._replace(default=DEFAULT_KIND),
            TAGS,
            FILES,
            IMPORTANCE._replace(default=DEFAULT_IMPORTANCE),
            TOPIC,
            SCOPE._replace(default=DEFAULT_SCOPE),
            STATUS._replace(default=DEFAULT_STATUS),
            LINKS,
            Param("session_id", "string", "Your session's id, if you have one.", flag="session"),
            *GO_SAVE_FLAGS,
        ),
        command="remember",
        result="SaveResult",
    )
)

RECALL = declare(
    Operation(
        "recall",
        "Search memories, best first (ranked by how well they match, status, age).",
        "Search project and personal memory before you start a task, decide something or "
        "edit a file. Returns compact ranked hits (id, kind, title, snippet, relevance: the "
        "chance 0-1 that it answers, why it matched, provenance), none when nothing does; get "
        "with a hit's id reads one in full, next_cursor pages on.",
        (
            Param(
                "query",
                "string",
                "Any words; no syntax to get wrong. Empty: browse.",
                argument=True,
            ),
            *RECALL_FILTERS,
            GO_TYPE._replace(
                help="Only this type (Go engram's --type): a kind, or a type kept as written "
                "(command, file_change …)."
            ),
            Param(
                "limit",
                "integer",
                "Hits per page.",
                default=RECALL_LIMIT,
                minimum=1,
                maximum=RECALL_MAX,
                clamp=True,
                only=("mcp",),
            ),
            Param(
                "limit",
                "integer",
                "At most this many.",
                default=10,
                minimum=0,
                short="-n",
                only=("cli", "http"),
            ),
            Param(
                "offset",
                "integer",
                "Skip this many (paging).",
                default=0,
                minimum=0,
                only=("cli", "http"),
            ),
            CURSOR,
        ),
        command="recall",
        read_only=True,
        result="list[Hit]",
    )
)

GET = declare(
    Operation(
        "get",
        "Show one memory in full.",
        "Read one memory in full by id or unique id prefix (as recall shows it). Content "
        "longer than the response budget comes in pages with a cursor.",
        (ID._replace(required=False), CURSOR),
        command="get",
        read_only=True,
        result="Record",
    )
)

UPDATE = declare(
    Operation(
        "update",
        "Change fields of a memory (rev+1; the earlier text stays retrievable).",
        "Change fields of a memory, e.g. fix its text or mark it superseded or archived when "
        "it no longer holds (rev+1; the earlier text is kept). Returns its id and rev.",
        (ID, TITLE, CONTENT, KIND, TAGS, FILES, IMPORTANCE, STATUS, TOPIC, LINKS),
        command="update",
        idempotent=True,
        result="Record",
    )
)

SUGGEST_TOPIC_KEY = declare(
    Operation(
        "suggest_topic_key",
        "Suggest a stable topic key for a memory about to be saved.",
        "Suggest a stable topic_key (family/segment) for a memory about to be saved, so "
        "later saves on the same topic update it instead of adding duplicates.",
        (KIND, TITLE, CONTENT),
        read_only=True,
        result="str",
    )
)

STATS = declare(
    Operation(
        "stats",
        "Count memories by kind, status, scope and project.",
        "Count memories by kind, status and project in the project and personal stores.",
        (),
        command="stats",
        read_only=True,
        result="Stats",
    )
)

CONTEXT = declare(
    Operation(
        "context",
        "Print the session-start briefing: overview, decisions, pitfalls, hotspots, sessions.",
        "Call at the start of a session: a compact briefing of this project's memory "
        "(overview, active decisions, principles, pitfalls, hotspots, latest sessions, and "
        "with query the memories most relevant to it), within a token budget. Each line has "
        "an id for get.",
        (
            Param(
                "project",
                "string",
                "This repository's project name (Go engram's `context PROJECT`); another "
                "project's briefing comes from its own repository (engram -C PATH context).",
                argument=True,
                only=("cli",),
            ),
            Param("query", "string", "Words of the task at hand (optional).", short="-q"),
            Param(
                "budget",
                "integer",
                "Most tokens in the briefing (default: context.budget, 2000).",
                minimum=50,
            ),
        ),
        command="context",
        read_only=True,
        result="Briefing",
    )
)

WHY = declare(
    Operation(
        "why",
        "Show why a memory exists: what it supersedes, what superseded it, links, provenance.",
        'Answer "why do we do X?" for one memory (id from recall): what it supersedes and '
        "what superseded it (whole chain), memories linked to it, where it came from, "
        "judgements. Dangling links and cycles are noted.",
        (ID._replace(required=False),),
        command="why",
        read_only=True,
        idempotent=True,
        result="Lineage",
    )
)

CHECK = declare(
    Operation(
        "check",
        "Check before editing: pitfalls, decisions, hotspots and reverts that bear on these files.",
        "Call before editing files: pitfalls and decisions citing them (path, folder, "
        "glob), hotspot and revert warnings, superseded decisions still citing them; with "
        "text, memories relevant to the plan. Best first, each with an id for get. An "
        "empty answer is valid.",
        (
            Param(
                "files",
                "strings",
                "Paths about to be edited (a list, or comma-separated): absolute inside the "
                "repository, or relative to it.",
                required=True,
                short="-f",
            ),
            Param("text", "string", "The plan, in a few words (optional)."),
            Param(
                "budget",
                "integer",
                "Most tokens in the answer (default: check.budget, 800).",
                minimum=50,
            ),
        ),
        command="check",
        read_only=True,
        result="Findings",
    )
)

RELATED = declare(
    Operation(
        "related",
        "List a memory's neighbours by links, shared files and shared tags, best first.",
        "List a memory's neighbours (by links, shared files, shared tags), each with why it "
        "is related and a score. Use to explore around a memory recall found.",
        (
            ID._replace(required=False),
            Param(
                "limit",
                "integer",
                "Most neighbours.",
                default=10,
                minimum=1,
                maximum=50,
                short="-n",
            ),
        ),
        command="related",
        read_only=True,
        idempotent=True,
        result="list[Neighbour]",
    )
)

TIMELINE = declare(
    Operation(
        "timeline",
        "Show what happened before and after a memory in its session (else its project).",
        "Show what happened before and after a memory (id from recall) in its session, "
        "oldest first: compact lines with ids. Without a session: its project's memories "
        "around it in time.",
        (
            ID._replace(required=False),
            Param(
                "before",
                "integer",
                "Memories before it.",
                default=5,
                minimum=0,
                maximum=50,
                short="-b",
            ),
            Param(
                "after",
                "integer",
                "Memories after it.",
                default=5,
                minimum=0,
                maximum=50,
                short="-a",
            ),
        ),
        command="timeline",
        read_only=True,
        idempotent=True,
        result="Timeline",
    )
)

JUDGE = declare(
    Operation(
        "judge",
        "Judge a memory: useful ones rank up, wrong ones down; outdated ones get archived later.",
        "Judge a memory recall gave you: verdict useful, outdated or wrong (or a score 0-1), "
        "with a reason. Useful memories rank up, wrong ones down; outdated ones are proposed "
        "for archiving. Without verdict or score, query scores it by overlap and recency.",
        (
            ID._replace(required=False),
            Param("verdict", "string", "useful, outdated or wrong.", enum=VERDICTS),
            Param("score", "number", "How useful, 0 to 1.", minimum=0, maximum=1),
            Param("reason", "string", "Why, in a sentence."),
            Param("query", "string", "The search that surfaced it."),
        ),
        command="judge",
        result="Record",
    )
)

PIN = declare(
    Operation(
        "pin",
        "Pin a memory: every session briefing shows it first, within its budget.",
        "Pin a memory every session must see: context shows pinned memories first (within "
        "its budget). Returns the id and pinned: true.",
        (ID,),
        command="pin",
        idempotent=True,
        result="Record",
        only=("cli", "mcp"),
    )
)

UNPIN = declare(
    Operation(
        "unpin",
        "Unpin a memory: the briefing ranks it like any other again.",
        "Unpin a memory: context ranks it like any other again. Returns the id and pinned: false.",
        (ID,),
        command="unpin",
        idempotent=True,
        result="Record",
        only=("cli", "mcp"),
    )
)

FORGET = declare(
    Operation(
        "forget",
        "Delete a memory; a tombstone stays so the delete reaches other clones.",
        "Delete a memory that is wrong or harmful; a tombstone carries the delete to other "
        "clones (hard=true also drops its text). Prefer update status=archived.",
        (ID, Param("hard", "boolean", "Also drop the text from the file.", default=False)),
        command="forget",
        profile="admin",
        destructive=True,
        idempotent=True,
        result="Record",
    )
)
