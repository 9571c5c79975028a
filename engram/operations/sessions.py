"""The operations of agent sessions: start, summary, end, prompts and passive capture.

The summary sections are declared once (``SUMMARY_SECTIONS``); every adapter that saves a
summary offers the same fields.
"""

from __future__ import annotations

from typing import Final

from engram.operations.params import Param
from engram.operations.spec import Operation, declare

SESSION = Param("session_id", "string", "Your session's id (default: the open session).")
PROJECT = Param("project", "string", "Project name (default: this project).")
SUMMARY_SECTIONS: Final = (
    Param("goal", "string", "What the session set out to do."),
    Param("instructions", "string", "What the user asked for, constraints given."),
    Param("discoveries", "string", "What was learned."),
    Param("accomplished", "string", "What got done."),
    Param("next_steps", "string", "What is left to do."),
    Param("relevant_files", "string", "Files that matter, as a markdown list."),
)

SESSION_START = declare(
    Operation(
        "session_start",
        "Start a session (or reopen one) and print its id.",
        "Call when a session begins: logs it and returns its id. Memories saved with this "
        "session_id (or while it is the open session) form its timeline.",
        (
            SESSION._replace(help="Your session's id (default: a new one).", argument=True),
            Param("directory", "string", "The folder you work in.", short="-d"),
            PROJECT,
        ),
        command="session start",
        idempotent=True,
        result="Session",
    )
)

SESSION_SUMMARY = declare(
    Operation(
        "session_summary",
        "Save a session summary (Goal, Instructions, Discoveries, Accomplished, Next steps, "
        "Files).",
        "Call before a session ends (or the context is compacted): save what the next "
        "session needs as sections Goal, Instructions, Discoveries, Accomplished, Next "
        "steps, Relevant files. One summary per session: saving again revises it.",
        (
            Param(
                "content",
                "string",
                "Markdown with ## Goal, ## Accomplished … headings.",
                argument=True,
            ),
            *SUMMARY_SECTIONS,
            SESSION._replace(flag="session"),
            PROJECT,
        ),
        command="session summary",
        result="SaveResult",
    )
)

SESSION_END = declare(
    Operation(
        "session_end",
        "End a session, saving its summary if given.",
        "Call when a session ends: marks it ended and saves summary (markdown with the "
        "summary sections) if given.",
        (
            SESSION._replace(help="The session's id (default: the open session).", argument=True),
            Param("summary", "string", "The session summary, as for session_summary."),
            PROJECT,
        ),
        command="session end",
        result="Session",
    )
)

SAVE_PROMPT = declare(
    Operation(
        "save_prompt",
        "Save a user's prompt (kind prompt, secrets redacted) and print its id.",
        "Save the user's prompt (kind prompt; secrets redacted) so later sessions know what "
        "was asked.",
        (
            Param(
                "content",
                "string",
                "The prompt, as the user wrote it.",
                required=True,
                argument=True,
            ),
            SESSION._replace(flag="session"),
            PROJECT,
        ),
        command="prompt",
        result="SaveResult",
    )
)

CAPTURE = declare(
    Operation(
        "capture",
        'Propose the learnings of an agent\'s output (its last "Key Learnings" section).',
        'Passive capture: give your reply\'s text; the items of its last "Key Learnings" '
        '(or "Learnings") section are saved as proposed memories for a person to review '
        "(the review tool), skipping ones already known or rejected before.",
        (
            Param("content", "string", "Your output text.", required=True, argument=True),
            SESSION._replace(flag="session"),
            PROJECT,
            Param("source", "string", "Where the text came from.", default="capture"),
        ),
        command="capture",
        result="Capture",
    )
)

REVIEW = declare(
    Operation(
        "review",
        "List proposed memories (oldest first), or accept, reject or merge them.",
        "The inbox of memories proposed from sessions, not reviewed. list: oldest first. "
        "accept (optionally a new title or content), reject (not proposed again) or merge "
        "(into another memory): ids, or all=true. Use when the person asks to review them.",
        (
            Param(
                "action",
                "string",
                "list, accept, reject or merge.",
                enum=("list", "accept", "reject", "merge"),
                default="list",
                argument=True,
            ),
            Param("ids", "strings", "The proposed memories' ids (or id prefixes).", argument=True),
            Param("all", "boolean", "Every proposed memory.", target="every"),
            Param("title", "string", "accept: the title to keep instead."),
            Param("content", "string", "accept: the content to keep instead."),
            Param("into", "id", "merge: the memory the proposal is folded into."),
            Param("limit", "integer", "list: most to show.", minimum=1, maximum=10000),
        ),
        command="review",
        result="Review",
    )
)
