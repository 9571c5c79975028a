"""The operations that look after the store: hygiene, training, projects, sync, index, doctor.

Most are offered to agents under the MCP ``admin`` profile only; the CLI offers them all.
"""

from __future__ import annotations

from typing import Final

from engram.model import SCOPES
from engram.operations.memory import CURSOR, ID
from engram.operations.params import Param
from engram.operations.spec import Operation, declare

CONSOLIDATE_PREVIEW = declare(
    Operation(
        "consolidate_preview",
        "List what needs tidying: duplicates, superseded, orphaned, stale and outdated memories.",
        "List what needs tidying: duplicates, near-duplicates, superseded memories still "
        "active, pitfalls about deleted files, orphan links, stale and outdated memories, "
        "each group with a reason and a proposed action. Changes nothing.",
        (),
        read_only=True,
        result="list[Group]",
    )
)

INSIGHTS = declare(
    Operation(
        "insights",
        "List the insights, newest first.",
        "List the trainer's insights (clusters, recurring problems, long decision chains), "
        "each linked to the memories it was derived from.",
        (),
        command="insights list",
        read_only=True,
        result="list[Record]",
    )
)

# The agents' instruction files ``engram export --format NAME`` writes a marked block into
# (engram.formats.instructions has each one's path and front matter).
INSTRUCTION_FORMATS: Final = ("agents-md", "claude-md", "cursor-rules", "kiro-steering", "cline")
# The agents whose own memory files ``engram import --from NAME`` reads
# (engram.formats.platforms has each one's folder).
PLATFORMS: Final = ("claude-code", "codex", "cursor", "cline", "serena", "kiro")

EXPORT = declare(
    Operation(
        "export",
        "Export every memory and tombstone as engram's JSON (stdout or FILE).",
        "Export every memory and tombstone of a store as engram's JSON document, in pages.",
        (Param("scope", "string", "Which store.", enum=SCOPES, default="project"), CURSOR),
        command="export",
        profile="admin",
        read_only=True,
        result="ExportDocument",
    )
)

IMPORT = declare(
    Operation(
        "import",
        "Merge another store's memories into this one (format detected; same merge as git).",
        "Merge an engram export document (given inline, or a JSON file) into the project "
        "store with the same merge git and sync use; returns added/updated/unchanged.",
        (
            Param("document", "object", "An engram export: {version: 1, memories: [...]}."),
            Param("path", "string", "Or: a JSON export file, relative to the project root."),
        ),
        command="import",
        profile="admin",
        idempotent=True,
        result="ImportResult",
    )
)

CONSOLIDATE = declare(
    Operation(
        "consolidate",
        "Tidy the memory: duplicates, superseded, orphaned, stale and outdated memories.",
        "Recommend per consolidation group: merge, archive, delete or keep, with reasoning "
        "(your client's model decides when it supports sampling, else the user's own "
        "command, never a committed one, else heuristics). Returns a plan (with warnings "
        "naming settings ignored); changes nothing.",
        (),
        command="consolidate",
        profile="admin",
        read_only=True,
        result="Plan",
    )
)

CONSOLIDATE_APPLY = declare(
    Operation(
        "consolidate_apply",
        "Apply a consolidation plan (default: a fresh one).",
        "Apply a consolidation plan (default: a fresh one). Nothing is lost: a merge writes "
        "one memory superseding the group, archive is a status, delete a tombstone. "
        "dry_run shows the exact changes; applying twice changes nothing.",
        (
            Param("plan", "object", "A plan from consolidate (optional)."),
            Param("dry_run", "boolean", "Only show the changes.", default=False),
        ),
        profile="admin",
        destructive=True,
        idempotent=True,
        result="Applied",
    )
)

TRAIN = declare(
    Operation(
        "train",
        "Run the trainer: insights from clusters, recurring pitfalls and long supersede chains.",
        "Run the trainer over the store: insights from clusters, recurring pitfalls and "
        "supersede chains, stored as insight memories; recommendations for consolidation.",
        (Param("timeout", "number", "Seconds before the trainer is stopped.", minimum=1),),
        command="train",
        profile="admin",
        idempotent=True,
        result="Training",
    )
)

INSIGHTS_DELETE = declare(
    Operation(
        "insights_delete",
        "Delete an insight (a later training does not bring it back).",
        "Delete an insight (a later training does not bring it back).",
        (ID,),
        command="insights delete",
        profile="admin",
        destructive=True,
        result="Record",
    )
)

MERGE_PROJECTS = declare(
    Operation(
        "merge_projects",
        "Move every memory of the FROM projects to INTO (both stores; rev+1 each).",
        "Move every memory of some projects to another (project names that are variants "
        "of one another, or a rename). rev+1 for each memory moved.",
        (
            Param("from", "strings", "The projects to merge.", required=True, target="sources"),
            Param("to", "string", "The project to merge them into.", required=True),
            Param("dry_run", "boolean", "Only count.", default=False),
        ),
        command="projects merge",
        profile="admin",
        idempotent=True,
        result="ProjectMerge",
    )
)

SYNC = declare(
    Operation(
        "sync",
        "Share memories: import others' sync chunks, export this clone's changes as one.",
        "Share memories beyond the branch: import other clones' sync chunks, export this "
        "clone's changes as one; with remote, also fetch, merge and push the store's own "
        "branch on that git remote (never forced). status=true only reports.",
        (
            Param("remote", "string", "A git remote of the repository (e.g. origin)."),
            Param("branch", "string", "The branch carrying the store (engram-memories)."),
            Param("personal", "boolean", "Sync the personal store instead.", default=False),
            Param("status", "boolean", "Only report what is pending.", default=False),
            # Go engram's sync flags (its plugins run `engram sync --import`), CLI only.
            Param(
                "import_only",
                "boolean",
                "Only import others' chunks; write no chunk (Go engram's --import).",
                default=False,
                flag="import",
                only=("cli",),
            ),
            Param(
                "all_projects",
                "boolean",
                "Export every project's changes (Go engram's --all): what engram's sync does "
                "anyway; personal memories stay in the personal store (--personal).",
                default=False,
                flag="all",
                only=("cli",),
            ),
            Param(
                "project",
                "string",
                "Export only this project's changes (Go engram's --project); the others wait "
                "for the next sync.",
                only=("cli",),
            ),
        ),
        command="sync",
        profile="admin",
        result="SyncReport | SyncStatus",  # status=true: SyncStatus
    )
)

REINDEX = declare(
    Operation(
        "reindex",
        "Bring the search index up to date with memories.jsonl, or rebuild it.",
        "Bring the search index up to date with memories.jsonl, or rebuild it from scratch.",
        (Param("rebuild", "boolean", "Drop the index and rebuild it.", default=False),),
        profile="admin",
        idempotent=True,
        result="IndexReport",
    )
)

DOCTOR = declare(
    Operation(
        "doctor",
        "Check the store: parse errors, duplicate ids, conflict markers, chunks, secrets, index.",
        "Check the store for bad lines, duplicate ids, conflict markers, secrets and index "
        "drift; fix=true repairs what is safe (bad lines are quarantined, never deleted).",
        (Param("fix", "boolean", "Repair what can be repaired safely.", default=False),),
        command="doctor",
        profile="admin",
        destructive=True,
        idempotent=True,
        result="list[Finding]",
    )
)
