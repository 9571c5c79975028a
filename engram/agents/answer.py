"""``answer``: what engram does at one agent hook, over an opened store (see the package)."""

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
    from engram.agents.hookspec import HookSpec
    from engram.agents.payload import Event
    from engram.project import Project

log = logging.getLogger("engram.hooks")
# The reader of a hook's context is the agent, with engram's agent tools: advice names them.
AGENT_TOOLS: Final = advice.Tools(op.name for op in OPERATIONS.values() if op.profile == "agent")


def answer(here: Project, cache: StandingCache, spec: HookSpec, event: Event) -> str:
    """Return what the agent reads for ``event`` ('' for nothing), acting on ``here``.

    ``cache`` holds the briefing's query-free sections between calls of a long-lived process.
    """
    from engram.agents import session

    with advice.using(AGENT_TOOLS):
        if spec.action == "brief":
            return _brief(here, cache, spec, event)
        if spec.action == "check":
            return _check(here, spec, event)
        if spec.action == "capture":
            return _capture(here, spec, event)
        if spec.action == "prompt":
            return _nudge(here, spec, event)
        if spec.action == "end" and event.session_id:
            notice = _capture(here, spec, event)  # the session's last stretch, then its end
            session.end(here, event.session_id)
            return notice
        return ""


def _brief(here: Project, cache: StandingCache, spec: HookSpec, event: Event) -> str:
    from engram.agents import session
    from engram.agents.briefing import brief

    if event.session_id:
        try:
            session.start(here, event.session_id, directory=event.cwd)
        except EngramError as exc:  # the briefing matters more than the session log
            log.warning("engram hook %s %s: %s", spec.agent, spec.event, exc)
    briefing = brief(here, cache)
    return reply.context_output(spec.native, reply.briefing_text(briefing, briefing.overview))


def _check(here: Project, spec: HookSpec, event: Event) -> str:
    from engram.agents.check import check_files
    from engram.model import repo_path

    wanted: list[str] = []
    for path in event.files:
        full = absolute(path, event.cwd)
        try:
            repo_path(full, here.root)
        except EngramError:
            continue  # outside this repository: the memory knows nothing of it
        wanted.append(full)
    if not wanted:
        return ""
    findings = check_files(here, wanted)
    contents: dict[str, str] = {}
    for item in findings.findings:
        if item.reason != "hotspot" and item.id not in contents:
            try:
                contents[item.id] = str(here.locate(item.id)[1].get("content") or "")
            except EngramError:
                continue
    verb = "you just edited" if spec.native == "AfterTool" else "before you edit"
    return reply.context_output(spec.native, reply.findings_text(findings, contents, verb))


def _capture(here: Project, spec: HookSpec, event: Event) -> str:
    from engram.agents.inbox import capture_hook

    return reply.notice_output(capture_hook(here, spec.agent, event))


def _nudge(here: Project, spec: HookSpec, event: Event) -> str:
    from engram.agents.inbox import nudge

    text = nudge(here, event.transcript, event.session_id, agent=spec.agent)
    return reply.context_output(spec.native, text)
