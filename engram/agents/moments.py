"""Memory offered unasked: at the prompt, after a failed command, and to a starting subagent.

Nobody asked for these, so each is held to more than a recall is: a hit must itself clear the
relevance floor (``engram.index.relevance``: the calibrated chance that it answers the text),
be an active memory that is not a saved prompt or session summary, and not have been shown in
this session already (the session's ledger); what is left is packed small (``PROMPT_CHARS``).
A prompt no memory answers gets nothing at all. The files a text names (paths that exist in the
repository) bring their pitfalls and decisions too, once per session like a read of them does.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Final

from engram.agents import reply
from engram.agents.payload import absolute
from engram.errors import EngramError
from engram.operations.views import provenance, snippet

if TYPE_CHECKING:
    from engram.agents.hookspec import HookSpec
    from engram.agents.payload import Event
    from engram.index.query import Hit
    from engram.project import Project
    from engram.store.ledger import HookLedger

PROMPT_CHARS: Final = 1400  # about 350 tokens: what a prompt's recall may add at most
FAILURE_CHARS: Final = 1200
SUBAGENT_CHARS: Final = 3000
SNIPPET: Final = 140
HITS: Final = 8  # recall hits looked at
SIMILAR: Final = 0.6  # the cosine that offers a hit holding none of the text's words
UNASKED_KINDS: Final = frozenset(("prompt", "session"))  # never offered unasked
_PATHISH: Final = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]{1,8})(?![\w/])")
MAX_NAMED: Final = 8  # files of one text checked


def prompt(here: Project, spec: HookSpec, event: Event, ledger: HookLedger | None) -> str:
    """Answer a prompt: the memories that answer it, and the pitfalls of the files it names."""
    text = event.prompt.strip()
    if not text:
        return ""
    head = "# engram: memories relevant to your request"
    body = _offer(here, text, event, ledger, PROMPT_CHARS, files=True)
    return _reply(spec, event, head, body)


def failure(here: Project, spec: HookSpec, event: Event, ledger: HookLedger | None) -> str:
    """Answer a failed command: past fixes and pitfalls its error text recalls."""
    if not event.error:
        return ""
    head = "# engram: past notes on this failure"
    body = _offer(here, event.error, event, ledger, FAILURE_CHARS, files=False)
    return _reply(spec, event, head, body)


def subagent(here: Project, spec: HookSpec, event: Event, ledger: HookLedger | None) -> str:
    """Answer a subagent's start: the memories for its task's files and words."""
    task = ledger.take_task(event.agent_type) if ledger is not None else None
    text = str(task.get("text") or "") if task else ""
    if not text.strip():
        return ""
    head = "# engram: project memory for this task"
    body = _offer(here, text, event, None, SUBAGENT_CHARS, files=True)
    return _reply(spec, event, head, body)


def _reply(spec: HookSpec, event: Event, head: str, body: str) -> str:
    text = f"{head}\n{body}" if body else ""
    return reply.context_output(event.native or spec.native, text, spec.agent)


def unasked_floor(here: Project) -> float:
    """Return the relevance each unasked hit needs: ``search.min_relevance`` when it is a
    number, else the floor fitted for the search mode in effect (whatever the store's size)."""
    from engram.index import relevance

    setting = here.config.get("search.min_relevance")
    if isinstance(setting, int | float) and not isinstance(setting, bool):
        return float(setting)
    mode = getattr(here.ws.index, "mode", None)
    name = mode() if callable(mode) else "keyword"
    return relevance.FLOORS.get(str(name), max(relevance.FLOORS.values()))


def _offer(
    here: Project,
    text: str,
    event: Event,
    ledger: HookLedger | None,
    limit: int,
    *,
    files: bool,
) -> str:
    """Return the lines offered for ``text`` (files' findings first), packed under ``limit``."""
    seen = ledger.state().ids if ledger is not None else set()
    lines: list[tuple[str, str]] = []  # (id, line)
    if files:
        lines += _named_files(here, text, event, ledger)
    floor = unasked_floor(here)
    hits = [hit for hit in _recall(here, text) if _offered(hit, floor)]
    taken = {rid for rid, _ in lines}
    fresh = [hit for hit in hits if hit.id not in seen and hit.id not in taken]
    shorts = here.short_ids([hit.id for hit in fresh]) if fresh else {}
    lines += [(hit.id, _hit_line(hit, shorts.get(hit.id, hit.id[:8]))) for hit in fresh]
    packed: list[tuple[str, str]] = []
    used = 0
    for rid, line in lines:
        if used + len(line) + 1 > limit:
            break
        packed.append((rid, line))
        used += len(line) + 1
    if ledger is not None and packed:
        kept = set(ledger.claim("ids", (rid for rid, _ in packed)))
        packed = [(rid, line) for rid, line in packed if rid in kept]
    if not packed:
        return ""
    return "\n".join([reply.FRAME, *(line for _, line in packed)])


def _recall(here: Project, text: str) -> list[Hit]:
    try:
        return here.recall(text, limit=HITS)
    except EngramError:
        return []  # a text the query parser refuses offers nothing


def _offered(hit: Hit, floor: float) -> bool:
    """Tell whether a hit is offered unasked: it clears the floor itself, holds some of the
    text's informative words or is close to it in meaning (the last hit's ``gap`` of 1 alone
    lifts a memory that holds none of them over the floor), and is an active memory."""
    from engram.index.relevance import FEATURES

    record = hit.record
    values = dict(zip(FEATURES, hit.features, strict=False))
    matched = values.get("coverage", 0.0) > 0 or values.get("cosine", 0.0) >= SIMILAR
    return (
        hit.relevance is not None
        and hit.relevance >= floor
        and matched
        and str(record.get("status") or "active") == "active"
        and str(record.get("kind") or "") not in UNASKED_KINDS
    )


def _hit_line(hit: Hit, short: str) -> str:
    record = hit.record
    line = f"- {short} {record.get('kind') or 'note'}: {record.get('title', '')}"
    content = str(record.get("content") or "")
    if content:
        line += f" — {snippet(content, SNIPPET)}"
    return f"{line} (from {provenance(record)})"


def named_files(text: str, cwd: str, root: str) -> list[str]:
    """Return the files a text names that exist inside the repository at ``root``."""
    found: list[str] = []
    real_root = os.path.realpath(root)
    for match in _PATHISH.finditer(text):
        full = os.path.realpath(absolute(match.group(1), cwd))
        if not os.path.isfile(full):
            full = os.path.realpath(absolute(match.group(1), root))
        inside = full.startswith(real_root + os.sep)
        if inside and os.path.isfile(full) and full not in found:
            found.append(full)
        if len(found) >= MAX_NAMED:
            break
    return found


def _named_files(
    here: Project, text: str, event: Event, ledger: HookLedger | None
) -> list[tuple[str, str]]:
    """Return the pitfall and decision lines of the files ``text`` names, not yet shown."""
    from engram.agents.check import check_files

    paths = named_files(text, event.cwd, str(here.root))
    if not paths:
        return []
    repo = dict(zip(paths, here.repo_paths(paths), strict=True))
    if ledger is not None:
        claimed = set(ledger.claim("files", repo.values()))
        paths = [path for path in paths if repo[path] in claimed]
    if not paths:
        return []
    own = ledger.state().edited if ledger is not None else set()
    findings = check_files(here, paths, own_edits=own)
    return [
        (item.id, reply.finding_line(item, ""))
        for item in findings.findings
        if item.reason in ("pitfall", "decision")
    ]
