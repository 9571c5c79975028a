"""``answer``: what engram does at one agent hook, over an opened store (see the package).

Each ``HookSpec.action`` is one moment of the agent loop (``engram.agents.hookspec``). The
memories a session was shown, the files whose pitfalls it saw and the files it edited are kept
in the session's ledger (``engram.store.ledger``), so that a memory reaches the model once per
session, and the agent's own uncommitted edit does not make a memory about its file stale.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from engram.agents import reply
from engram.agents.payload import absolute
from engram.errors import EngramError
from engram.operations import advice
from engram.operations.spec import OPERATIONS

if TYPE_CHECKING:
    from engram.agents.briefing import StandingCache
    from engram.agents.check import Findings
    from engram.agents.hookspec import HookSpec
    from engram.agents.payload import Event
    from engram.project import Project
    from engram.store.ledger import HookLedger

log = logging.getLogger("engram.hooks")
# The reader of a hook's context is the agent, with engram's agent tools: advice names them.
AGENT_TOOLS: Final = advice.Tools(op.name for op in OPERATIONS.values() if op.profile == "agent")
BLOCKING_IMPORTANCE: Final = 5  # a pitfall this important (or pinned) makes a write ask
_AFTER: Final = frozenset(("AfterTool", "postToolUse", "PostToolUse"))  # the tool already ran


def answer(here: Project, cache: StandingCache, spec: HookSpec, event: Event) -> str:
    """Return what the agent reads for ``event`` ('' for nothing), acting on ``here``.

    ``cache`` holds the briefing's query-free sections between calls of a long-lived process.
    """
    from engram.agents import moments, session

    with advice.using(AGENT_TOOLS):
        action = spec.action
        if action == "tool":  # a shell command: a patch it applies, or files it prints
            action = {"patch": "edit", "read": "read"}.get(event.shell, "")
        if action == "brief":
            return _brief(here, cache, spec, event)
        if action in ("read", "edit"):
            return _files(here, spec, event, action)
        if action == "task":
            ledger = ledger_of(here, event)
            if ledger is not None and event.task:
                ledger.add_task(event.agent_type, event.task)
            return ""
        if action == "subagent":
            return moments.subagent(here, spec, event, ledger_of(here, event))
        if action == "prompt":
            offered = moments.prompt(here, spec, event, ledger_of(here, event))
            return _nudged(here, spec, event, offered)
        if action == "failure":
            return moments.failure(here, spec, event, ledger_of(here, event))
        if action == "capture":
            return _capture(here, spec, event)
        if action == "end" and event.session_id:
            notice = _capture(here, spec, event)  # the session's last stretch, then its end
            session.end(here, event.session_id)
            return notice
        return ""


def ledger_of(here: Project, event: Event) -> HookLedger | None:
    """Return the ledger of the event's session (a subagent's own), None without a session."""
    from engram.store.ledger import HookLedger

    if not event.session_id:
        return None
    key = f"{event.session_id}/{event.agent_id}" if event.agent_id else event.session_id
    return HookLedger(here.ws.store.state_dir, key)


def native_of(spec: HookSpec, event: Event) -> str:
    """Return the event name the reply names: the payload's own, else the one set up."""
    return event.native or spec.native


def _brief(here: Project, cache: StandingCache, spec: HookSpec, event: Event) -> str:
    from engram.agents import session
    from engram.agents.briefing import brief
    from engram.store.ledger import prune

    if event.session_id:
        try:
            session.start(here, event.session_id, directory=event.cwd)
        except EngramError as exc:  # the briefing matters more than the session log
            log.warning("engram hook %s %s: %s", spec.agent, spec.event, exc)
    ledger = ledger_of(here, event)
    if ledger is not None:
        if event.source == "compact":
            ledger.reset()  # the context was summarised: what it was shown may be gone
        elif event.source in ("", "startup"):
            prune(here.ws.store.state_dir)
    briefing = brief(here, cache)
    if ledger is not None:
        ledger.record("ids", (item.id for item in briefing.items if item.hotspots is None))
    text = reply.briefing_text(briefing, briefing.overview)
    return reply.context_output(native_of(spec, event), text, spec.agent)


def _files(here: Project, spec: HookSpec, event: Event, action: str) -> str:
    """Answer a read or a write of files: their findings once per session, and the ask (or,
    where the agent reads a write's context only after it, the write denied once)."""
    from engram.agents.check import check_files

    wanted = _in_repo(here, event)
    if not wanted:
        return ""
    native = native_of(spec, event)
    repo = dict(zip(wanted, here.repo_paths(wanted), strict=True))
    ledger = ledger_of(here, event)
    own = set(ledger.state().edited) if ledger is not None else set()
    if action == "edit":
        if ledger is not None and set(repo.values()) - own:
            ledger.record("edited", set(repo.values()) - own)
        own |= set(repo.values())
    asking = action == "edit" and (spec.agent, native) in reply.ASKS
    # Stopping once needs the session's ledger: without one, every retry would be denied too.
    stopping = action == "edit" and (spec.agent, native) in reply.STOPS and ledger is not None
    holding = asking or stopping
    fresh: list[str] = []
    if stopping or (spec.agent, native) not in reply.SILENT:
        claimed = set(ledger.claim("files", repo.values())) if ledger is not None else None
        fresh = [path for path in wanted if claimed is None or repo[path] in claimed]
    if not fresh and not holding:
        return ""
    findings = check_files(here, wanted if holding else fresh, own_edits=own)
    contents, records = _contents(here, findings)
    text = ""
    if fresh:
        shown = findings if len(fresh) == len(wanted) else check_files(here, fresh, own_edits=own)
        if shown is not findings:
            contents.update(_contents(here, shown)[0])
        verb = "you just edited" if native in _AFTER and action == "edit" else "before you edit"
        text = reply.findings_text(shown, contents, verb)
    titles: list[str] = []
    if holding:
        blockers = [
            item
            for item in findings.findings
            if item.reason == "pitfall" and _blocking(records.get(item.id, {}))
        ]
        new = set(ledger.claim("asked", (b.id for b in blockers))) if ledger else None
        titles = [b.title for b in blockers if new is None or b.id in new]
    if asking and titles:
        return reply.ask_output(spec.agent, native, reply.ask_reason(titles), text)
    if stopping and (text or titles):
        # The agent reads a write's findings only after it, or not at all: the write is
        # denied once with them as the reason, and the retry goes through.
        if titles and not text:
            text = reply.findings_text(findings, contents, "before you edit")
        head = reply.ask_reason(titles) if titles else ""
        return reply.deny_output(spec.agent, native, "\n\n".join(filter(None, (head, text))))
    return reply.context_output(native, text, spec.agent)


def _in_repo(here: Project, event: Event) -> list[str]:
    """Return the event's files inside this repository, as absolute paths."""
    from engram.model import repo_path

    wanted: list[str] = []
    for path in event.files:
        full = absolute(path, event.cwd)
        try:
            repo_path(full, here.root)
        except EngramError:
            continue  # outside this repository: the memory knows nothing of it
        wanted.append(full)
    return wanted


def _contents(
    here: Project, findings: Findings
) -> tuple[dict[str, str], dict[str, dict[str, object]]]:
    """Return the content and the record of each finding's memory, by id."""
    contents: dict[str, str] = {}
    records: dict[str, dict[str, object]] = {}
    for item in findings.findings:
        if item.reason == "hotspot" or item.id in contents:
            continue
        try:
            record = dict(here.locate(item.id)[1])
        except EngramError:
            continue
        records[item.id] = record
        contents[item.id] = str(record.get("content") or "")
    return contents, records


def _blocking(record: dict[str, object]) -> bool:
    """Tell whether a pitfall must ask the person before a write: pinned, or importance 5."""
    from engram.model import is_pinned

    importance = record.get("importance")
    weighty = isinstance(importance, int | float) and importance >= BLOCKING_IMPORTANCE
    return is_pinned(record) or weighty


def _capture(here: Project, spec: HookSpec, event: Event) -> str:
    from engram.agents.inbox import capture_hook

    return reply.notice_output(capture_hook(here, spec.agent, event))


def _nudged(here: Project, spec: HookSpec, event: Event, offered: str) -> str:
    """Return a prompt's answer with the nudge to ``remember`` after it, when one is due."""
    import json

    from engram.agents.inbox import nudge

    text = nudge(here, event.transcript, event.session_id, agent=spec.agent)
    if not text:
        return offered
    if not offered:
        return reply.context_output(native_of(spec, event), text, spec.agent)
    data = json.loads(offered)
    inner = data.get("hookSpecificOutput", data)
    key = "additionalContext" if "additionalContext" in inner else "additional_context"
    inner[key] = f"{inner[key]}\n\n{text}"
    return json.dumps(data, ensure_ascii=False)
