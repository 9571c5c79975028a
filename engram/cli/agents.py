"""The commands agents and their hooks run: context, check, session, prompt, capture.

``context`` and ``check`` are what a session runs first and before every edit, often as a fresh
process; the fast path (``engram.cli.fast``) runs them without typer's parsing, from the same
declarations. Options come from the declarations (``options``); ``-s`` is the CLI's short name
for ``--session``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

from engram.cli.app import (
    JsonOpt,
    app,
    echo,
    emit_json,
    group,
    open_engram,
    read_stdin,
    stdin_has_data,
    text_arg,
    warn_problems,
)
from engram.cli.options import OPTIONAL, Values, options
from engram.errors import InvalidInput
from engram.operations.compat_go import own_project
from engram.operations.memory import CHECK, CONTEXT
from engram.operations.sessions import (
    CAPTURE,
    REVIEW,
    SAVE_PROMPT,
    SESSION_END,
    SESSION_START,
    SESSION_SUMMARY,
    SUMMARY_SECTIONS,
)
from engram.operations.views import UNREVIEWED

if TYPE_CHECKING:
    from engram.service import Engram

SESSION: Final = {"short": "-s"}
PIPED: Final = "'-' or a pipe reads standard input."


@app.command()
@options(CONTEXT)
def context(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Print the session-start briefing: overview, decisions, pitfalls, hotspots, sessions."""
    with open_engram(ctx) as engram:
        _same_project(engram, values["project"])
        briefing = engram.context(budget=values["budget"], query=values["query"] or "")
        warn_problems(engram)
    if as_json:
        emit_json(briefing.to_dict())
    else:
        echo(briefing.text)


def _same_project(engram: Engram, named: str | None) -> None:
    """Refuse a PROJECT (Go engram's `context PROJECT`) that is not this repository's.

    Go's plugins name a project by its folder's base name: that name is this project's too.
    """
    if own_project(named, project=engram.project, root=engram.root) is None:
        return
    raise InvalidInput(
        f"PROJECT {named!r} is not this repository's project ({engram.project!r})",
        hint="engram briefs the project of the repository it runs in: run "
        "`engram -C PATH context` in that project's repository",
    )


@app.command()
@options(
    CHECK, files={**OPTIONAL, "note": "Comma-separated or repeated; needed unless --text is given."}
)
def check(
    ctx: typer.Context,
    values: Values,
    staged: Annotated[
        bool,
        typer.Option(
            "--staged",
            help="Check the files staged for commit (the pre-commit hook of `engram setup "
            "git-hooks`); exit 1 for a pinned pitfall tagged blocking or a reverted change "
            "brought back.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check before editing: pitfalls, decisions, hotspots and reverts that bear on these files."""
    if staged:
        _check_staged(ctx, values, as_json)
        return
    if not values["files"] and not values["text"]:
        # Nothing to check: a usage error, as typer gives for a missing option.
        raise typer.BadParameter(
            "none given; name the files about to be edited, or give --text", param_hint="--files"
        )
    with open_engram(ctx) as engram:
        result = engram.check(
            values["files"] or [], text=values["text"] or "", budget=values["budget"]
        )
    if as_json:
        emit_json(result.to_dict())
    else:
        echo(result.text)


def _check_staged(ctx: typer.Context, values: Values, as_json: bool) -> None:
    if values["files"] or values["text"]:
        raise InvalidInput("--staged checks the staged files: give no --files or --text")
    with open_engram(ctx) as engram:
        result = engram.check_staged(budget=values["budget"])
    if as_json:
        emit_json(result.to_dict())
    elif result.findings.files and result.findings.findings:
        echo(result.findings.text)
    for blocker in result.blockers:
        echo(f"engram: commit refused: {blocker.text}", err=True)
    if result.blockers:
        echo("engram: fix it, or commit anyway with `git commit --no-verify`", err=True)
        raise typer.Exit(1)


session_app = group("session", "Start and end agent sessions and save their summaries.")


@session_app.command("start")
@options(SESSION_START)
def session_start(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Start a session (or reopen one) and print its id."""
    with open_engram(ctx) as engram:
        session = engram.session_start(
            values["session_id"],
            directory=values["directory"] or os.getcwd(),
            project=values["project"],
        )
    if as_json:
        emit_json(session.to_dict())
    else:
        echo(session.id)


@session_app.command("end")
@options(SESSION_END, summary={"note": "'-' reads standard input."})
def session_end(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """End a session, saving its summary if given."""
    summary = values["summary"]
    if summary == "-":
        summary = read_stdin()
    with open_engram(ctx) as engram:
        session = engram.session_end(
            values["session_id"], summary=summary or "", project=values["project"]
        )
    if as_json:
        emit_json(session.to_dict())
        return
    echo(f"ended {session.id}")
    if session.summary_id:
        echo(f"summary: {session.summary_id}")


@session_app.command("summary")
@options(
    SESSION_SUMMARY,
    content={"note": PIPED},
    relevant_files={"note": "One per line or comma-separated works too."},
    session_id=SESSION,
)
def session_summary(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Save a session summary (Goal, Instructions, Discoveries, Accomplished, Next steps, Files)."""
    sections = {section.name: values[section.name] for section in SUMMARY_SECTIONS}
    content = values["content"]
    if content == "-" or (content is None and stdin_has_data()):
        content = read_stdin()
    with open_engram(ctx) as engram:
        result = engram.session_summary(
            content or "", session_id=values["session_id"], project=values["project"], **sections
        )
    if as_json:
        emit_json(result.to_dict())
        return
    echo(result.record["id"])
    if result.action == "updated":
        echo(f"updated the summary of session {result.record.get('session_id')}", err=True)


@app.command("prompt")
@options(SAVE_PROMPT, content={**OPTIONAL, "note": PIPED}, session_id=SESSION)
def prompt(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Save a user's prompt (kind prompt, secrets redacted) and print its id."""
    content = text_arg(values["content"], "prompt")
    with open_engram(ctx) as engram:
        result = engram.save_prompt(
            content, session_id=values["session_id"], project=values["project"]
        )
    if as_json:
        emit_json(result.to_dict())
    else:
        echo(result.record["id"])


@app.command()
@options(CAPTURE, omit=("content",), session_id=SESSION)
def capture(
    ctx: typer.Context,
    file: Annotated[
        Path | None, typer.Argument(help="A file with the agent's output (default: stdin).")
    ] = None,
    *,
    values: Values,
    transcript: Annotated[
        Path | None,
        typer.Option(
            "--transcript",
            help="Propose memories from an agent's session transcript instead (saved as "
            "proposed: engram review).",
        ),
    ] = None,
    agent: Annotated[
        str,
        typer.Option(
            help="The transcript's agent: claude-code, codex, gemini-cli or opencode "
            "(default: read from the file)."
        ),
    ] = "",
    as_json: JsonOpt = False,
) -> None:
    """Propose the learnings of an agent's output (its last "Key Learnings" section)."""
    if transcript is not None:
        with open_engram(ctx) as engram:
            captured = engram.capture_transcript(
                str(transcript), agent=agent, session_id=values["session_id"]
            )
        if as_json:
            emit_json(captured.to_dict())
            return
        for note in captured.notes:
            echo(note, err=True)
        for new in captured.proposed:
            echo(f"proposed {new.id}  {new.kind}: {new.title}")
        for old in captured.known:
            echo(f"known    {old.id}  {old.kind} ({old.status}): {old.title}")
        if not captured.proposed and not captured.known:
            echo("nothing worth proposing in this transcript", err=True)
        return
    text = _read_output(file)
    with open_engram(ctx) as engram:
        result = engram.capture(text, **values.keywords())
    if as_json:
        emit_json(result.to_dict())
        return
    if not result.extracted:
        echo('no "Key Learnings" section found: nothing saved', err=True)
        return
    for item in result.saved:
        echo(f"proposed {item.id}  {item.title}")
    for item in result.duplicates:
        echo(f"known {item.id}  {item.title}")


@app.command()
@options(REVIEW)
def review(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """List proposed memories (oldest first), or accept, reject or merge them."""
    with open_engram(ctx) as engram:
        result = engram.review(**values.keywords())
    if as_json:
        emit_json(result.to_dict())
        return
    if result.action == "list":
        if not result.items:
            echo("nothing to review: no proposed memories")
            return
        for record in result.items:
            capture = record.get("capture") if isinstance(record.get("capture"), dict) else {}
            where = f" · {capture.get('agent')} line {capture.get('line')}" if capture else ""
            files = ", ".join(record.get("files") or [])
            echo(
                f"{record['id'][:8]}  {record.get('kind', 'note')} ({UNREVIEWED}): "
                f"{record.get('title', '')}"
            )
            echo(
                f"          from {record.get('source', '')}{where}"
                + (f" · {files}" if files else "")
            )
        echo(
            f"{result.left} waiting · engram review accept ID [--title … --content …], "
            "engram review reject ID, engram review merge ID --into ID, --all for every one"
        )
        return
    verb = {"accept": "accepted", "reject": "rejected", "merge": "merged"}[result.action]
    for record in result.items:
        echo(f"{verb} {record['id'][:8]}  {record.get('title', '')}")
    echo(f"{result.left} still waiting for review")


def _read_output(file: Path | None) -> str:
    """Return an agent's output from a file, or from stdin (no file, or '-')."""
    if file is None or str(file) == "-":
        return text_arg("-" if file else None, "agent output")
    from engram.fileio import read_regular

    data = read_regular(file)  # a named pipe or a device is refused, never waited on
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{file}: not UTF-8 text (byte {exc.start})") from exc
