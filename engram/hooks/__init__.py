"""hooks/ is the ``engram hook AGENT EVENT`` adapter: an agent's hook payload in, its answer out.

An agent runs its hooks as shell commands with a JSON payload on standard input and reads their
standard output. ``engram setup`` installs one per event (``engram.agents.hookspec.HOOKS``);
this package runs one: it reads the payload, finds the store of the agent's folder, and prints
what ``engram.agents.answer`` returns (the briefing, the pitfalls of the files a tool call reads
or writes, recall at the prompt, after a failure and for a subagent, the learnings captured,
the session ended). A hook with nothing to do by its payload alone (a shell command that
touches no file, a command that succeeded) answers without the store (``idle``).

Answers in milliseconds: the store's daemon answers when it runs (``engram_hook`` over its
socket, a few milliseconds once warm), and the hook process then imports only the standard
library and the payload reader. When no daemon answers within ``CONNECT`` seconds, the hook
starts one in the background for the next call (its own session, detached, leaving when idle
for ``ENGRAM_DAEMON_IDLE`` seconds, default 900, or when its store is gone; the daemon lock
keeps it one per store) and answers from the files itself this time. ``ENGRAM_DAEMON=off``
keeps every hook in process.

A hook never blocks the agent and never hangs it: every outcome exits 0 (2 would block a
Claude Code tool call), nothing is printed when nothing is known or the folder has no engram
store, errors go to standard error (the agents keep it out of the model's context), and a
watchdog ends the process silently well inside the agent's timeout. ``ENGRAM_HOOKS=off`` turns
every hook into a no-op.

This package must not import another adapter.
"""

from __future__ import annotations

import os
import signal
import sys

from engram import reach
from engram.agents.hookspec import HOOK_AGENTS, HOOKS, HookSpec, hook_spec
from engram.agents.payload import MAX_PAYLOAD, PayloadError, cwd_of, event_of, parse
from engram.errors import EngramError, NotInitialized

TYPE_CHECKING = False  # typing costs a hook process 10 ms: annotations only (mypy reads this)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import IO, Any, Final

# Imported here: only what a hook the daemon answers needs (no pathlib, dataclasses, engram
# core). The store and its index are opened only when no daemon answers.
MARGIN: Final = 0.7  # the share of the agent's timeout a hook may use before it gives up
CONNECT: Final = 0.3  # seconds a hook waits for the daemon to accept before answering itself
ANSWER: Final = 2.0  # seconds it then waits for the answer (a busy daemon: answer here)


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
    if reach.off("ENGRAM_HOOKS"):
        return 0
    _watchdog(spec.timeout * MARGIN)
    try:
        data = (stdin or sys.stdin.buffer).read(MAX_PAYLOAD + 1)
        text = respond(spec, parse(data), fallback_cwd=_cwd())
    except NotInitialized:
        return 0  # no engram store for this folder: nothing to say
    except (PayloadError, EngramError, OSError) as exc:
        print(f"engram hook {spec.agent} {spec.event}: {exc}", file=err)
        return 0
    except Exception as exc:  # a hook must never break the agent's loop
        print(f"engram hook {spec.agent} {spec.event}: {type(exc).__name__}: {exc}", file=err)
        return 0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)  # answered in time: disarm the watchdog
    if text:
        out.write(text + "\n")
        out.flush()
    return 0


def respond(spec: HookSpec, payload: dict[str, Any], *, fallback_cwd: str) -> str:
    """Return the answer to a hook: from the store's daemon if it answers, else in process."""
    root = reach.find_store(cwd_of(payload, fallback_cwd=fallback_cwd))
    if root is None or idle(spec.action, payload, fallback_cwd):
        return ""
    if not reach.off(reach.DAEMON_SWITCH):
        forwarded = forward(root, spec, payload, fallback_cwd)
        if forwarded is not None:
            return forwarded
        reach.start(root)
    from pathlib import Path

    from engram.service import Engram

    with Engram(Path(root)) as engram:
        return engram.hook(spec, event_of(payload, fallback_cwd=fallback_cwd))


def idle(action: str, payload: dict[str, Any], fallback_cwd: str) -> bool:
    """Tell whether a hook has nothing to do, from its payload alone (no store, no daemon).

    A shell command that neither patches nor prints a file, a command that did not fail and an
    empty prompt are most calls of their hooks: answered here, they cost only this process.
    """
    if action not in ("tool", "failure", "prompt"):
        return False
    event = event_of(payload, fallback_cwd=fallback_cwd)
    wanted = {"tool": event.shell, "failure": event.error, "prompt": event.prompt}
    return not wanted[action]


def forward(root: str, spec: HookSpec, payload: dict[str, Any], fallback_cwd: str) -> str | None:
    """Return the daemon's answer to a hook, or None when no daemon answers in time."""
    params = {"agent": spec.agent, "event": spec.event, "payload": payload, "cwd": fallback_cwd}
    # The time left to answer here once the daemon is passed over.
    wait = min(ANSWER, spec.timeout * MARGIN / 2)
    data = reach.call(root, "engram_hook", params, connect=CONNECT, answer=wait)
    output = data.get("output") if isinstance(data, dict) else None
    return output if isinstance(output, str) else None


def _watchdog(seconds: float) -> None:
    """End the process silently after ``seconds``: the agent must never wait for a hook."""

    def give_up(*_: object) -> None:
        sys.stderr.write(f"engram hook: gave up after {seconds:.1f} s\n")
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGALRM, give_up)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the folder was removed under the agent
        return os.path.expanduser("~")
