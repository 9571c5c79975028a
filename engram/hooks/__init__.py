"""hooks/ is the ``engram hook AGENT EVENT`` adapter: what an agent's hook runs, and answers.

An agent runs its hooks as shell commands with a JSON payload on standard input and reads their
standard output. ``engram setup`` installs one per event (``engram.agents.HOOKS``); this package
runs one: it reads the payload (``payload``), opens the project of the agent's folder, acts,
and prints exactly what the agent reads (``reply``):

    brief    session start, resume, clear and after compaction: the briefing (``context``)
             as additional context, and the agent's session opened in engram's session log
    check    before an edit (Claude Code, Codex) or right after one (Gemini CLI, whose
             BeforeTool cannot add context): what the memory says about every file the tool
             call touches, multi-file patches and notebooks included
    capture  end of a turn or of a subagent: the learnings of the agent's last message saved
             as memories (passive capture), with a line for the person naming them
    end      end of the session: the session closed in engram's session log

A hook never blocks the agent and never hangs it: every outcome exits 0 (2 would block a
Claude Code tool call), nothing is printed when nothing is known or the folder has no engram
store, errors go to standard error (the agents keep it out of the model's context), and a
watchdog ends the process silently well inside the agent's timeout. ``ENGRAM_HOOKS=off`` turns
every hook into a no-op. The hook answers from the files in process; it imports only the core
a hook needs (no typer, no MCP SDK, no event loop).

This package must not import another adapter.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

from engram.errors import EngramError, NotInitialized
from engram.hooks import reply
from engram.hooks.payload import MAX_PAYLOAD, Event, PayloadError, absolute, event_of, parse
from engram.operations.hooks import HOOK_AGENTS, HOOKS, HookSpec, hook_spec

if TYPE_CHECKING:
    from engram.service import Engram

OFF_VALUES: Final = frozenset({"0", "off", "false", "no"})
MARGIN: Final = 0.7  # the share of the agent's timeout a hook may use before it gives up


def run(agent: str, event: str) -> None:
    """Run one hook (the CLI's ``engram hook`` command): read stdin, print, exit."""
    raise SystemExit(main([agent, event]))


def main(
    argv: Sequence[str],
    *,
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Run ``engram hook AGENT EVENT`` and return its exit status (0 unless misused)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    spec = hook_spec(*argv) if len(argv) == 2 else None
    if spec is None:
        events = "; ".join(
            f"{agent}: {', '.join(s.event for s in HOOKS if s.agent == agent)}"
            for agent in HOOK_AGENTS
        )
        print(f"usage: engram hook AGENT EVENT ({events})", file=err)
        return 1  # a mistyped hook is an error the agent shows, never a block (2)
    if os.environ.get("ENGRAM_HOOKS", "").strip().lower() in OFF_VALUES:
        return 0
    _watchdog(spec.timeout * MARGIN)
    try:
        data = (stdin or sys.stdin.buffer).read(MAX_PAYLOAD + 1)
        text = answer(spec, event_of(parse(data), fallback_cwd=_cwd()))
    except NotInitialized:
        return 0  # no engram store for this folder: nothing to say
    except (PayloadError, EngramError, OSError) as exc:
        print(f"engram hook {spec.agent} {spec.event}: {exc}", file=err)
        return 0
    except Exception as exc:  # a hook must never break the agent's loop
        print(f"engram hook {spec.agent} {spec.event}: {type(exc).__name__}: {exc}", file=err)
        return 0
    if text:
        out.write(text + "\n")
        out.flush()
    return 0


def answer(spec: HookSpec, event: Event) -> str:
    """Return what the agent reads for ``event`` ('' for nothing), acting on the store."""
    from engram.service import Engram

    with Engram.open(Path(event.cwd)) as engram:
        if spec.action == "brief":
            return _brief(engram, spec, event)
        if spec.action == "check":
            return _check(engram, spec, event)
        if spec.action == "capture":
            return _capture(engram, spec, event)
        if spec.action == "end" and event.session_id:
            engram.session_end(event.session_id)
    return ""


def _brief(engram: Engram, spec: HookSpec, event: Event) -> str:
    if event.session_id:
        try:
            engram.session_start(event.session_id, directory=event.cwd)
        except EngramError as exc:  # the briefing matters more than the session log
            print(f"engram hook {spec.agent} {spec.event}: {exc}", file=sys.stderr)
    briefing = engram.context()
    return reply.context_output(spec.native, reply.briefing_text(briefing, briefing.overview))


def _check(engram: Engram, spec: HookSpec, event: Event) -> str:
    from engram.model import repo_path

    wanted: list[str] = []
    for path in event.files:
        full = absolute(path, event.cwd)
        try:
            repo_path(full, engram.root)
        except EngramError:
            continue  # outside this repository: the memory knows nothing of it
        wanted.append(full)
    if not wanted:
        return ""
    findings = engram.check(wanted)
    contents: dict[str, str] = {}
    for item in findings.findings:
        if item.reason != "hotspot" and item.id not in contents:
            try:
                contents[item.id] = str(engram.get(item.id).get("content") or "")
            except EngramError:
                continue
    verb = "you just edited" if spec.native == "AfterTool" else "before you edit"
    return reply.context_output(spec.native, reply.findings_text(findings, contents, verb))


def _capture(engram: Engram, spec: HookSpec, event: Event) -> str:
    if event.nested or not event.message:
        return ""
    capture = engram.capture(
        event.message, session_id=event.session_id or None, source=f"hook:{spec.agent}"
    )
    return reply.notice_output(reply.capture_notice(capture))


def _watchdog(seconds: float) -> None:
    """End the process silently after ``seconds``: the agent must never wait for a hook."""

    def give_up() -> None:
        sys.stderr.write(f"engram hook: gave up after {seconds:.1f} s\n")
        sys.stderr.flush()
        os._exit(0)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the folder was removed under the agent
        return str(Path.home())
