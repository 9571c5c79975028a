"""The review inbox: memories proposed from sessions, saved for a person to accept or reject.

``capture_transcript`` reads an agent's transcript (``engram.agents.transcript``), proposes
memories from it (``engram.agents.proposals``) and saves each new one with ``status:
proposed``, ``source: capture:<agent>``, the files it is about, and its provenance under
``capture`` (agent, session, transcript, line, rule, key). A proposal whose key a captured
memory already holds, in any status, is not saved again: a later hook call on the same
transcript finds it, and so does a rejected one (rejections are remembered, in the store, so
they travel to teammates with it). Nor is one whose title or text a live memory already says.
Secrets are scrubbed on the write path, and titles are cut from scrubbed text.

``review`` lists the proposed memories (oldest first) and accepts (optionally edited), rejects
or merges them, one by one or all at once. ``nudge`` is the prompt hook's reminder that
``remember`` exists, for a session that has edited files for a while and saved nothing.

A person's own model command (``capture.polish_command`` in ENGRAM_HOME's config, or
``ENGRAM_CAPTURE_POLISH``; never the committed config: ``engram.config.USER_ONLY``) may
rewrite a proposal's title and content: it gets the proposal as JSON on stdin and answers
JSON ``{"title", "content"}``; one capture gives the command ``POLISH_SECONDS`` in all (a hook
must answer in time), and anything else keeps the proposal as it was.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from engram.errors import InvalidInput, NotFound
from engram.model import Record, loads, normalize_content, now
from engram.operations.views import UNREVIEWED
from engram.project.memories import remember, update

if TYPE_CHECKING:
    from engram.agents.payload import Event
    from engram.agents.proposals import Proposal
    from engram.agents.transcript import Transcript
    from engram.project import Project

__all__ = [
    "ACTIONS",
    "CAPTURE_SOURCE",
    "NUDGE",
    "Captured",
    "Review",
    "capture_hook",
    "capture_notice",
    "capture_transcript",
    "captured_keys",
    "locate_transcript",
    "nudge",
    "proposed_label",
    "review",
    "said_already",
    "save_proposals",
]

CAPTURE_SOURCE: Final = "capture:"
ACTIONS: Final = ("list", "accept", "reject", "merge")
INBOX_LIMIT: Final = 10_000
POLISH_SECONDS: Final = 12.0  # for all of one capture's proposals (a stop hook has 21 s)
# The nudge: after this many edits in a session with nothing saved, once per this many seconds.
NUDGE_EDITS: Final = 5
NUDGE_WINDOW: Final = 3600.0
NUDGE: Final = (
    "engram: this session has edited files and saved nothing yet. If you learned something a "
    "later session should know (a bug's cause, a decision, a pitfall), save it with the "
    "`remember` tool."
)
PROPOSED_LABEL: Final = UNREVIEWED


def proposed_label(record: dict[str, Any] | Record) -> str:
    """Return the label a proposed memory carries wherever it is shown ('' for others)."""
    return PROPOSED_LABEL if record.get("status") == "proposed" else ""


@dataclass
class CapturedItem:
    """One proposal of a capture: the memory that holds it (new, or already known)."""

    id: str
    title: str
    kind: str
    status: str

    def to_dict(self) -> dict[str, Any]:
        """Return the item as JSON-ready data."""
        return {"id": self.id, "title": self.title, "kind": self.kind, "status": self.status}


@dataclass
class Captured:
    """What a capture from a transcript proposed, and what it found already known."""

    agent: str
    session_id: str
    transcript: str
    proposed: list[CapturedItem] = field(default_factory=list)
    known: list[CapturedItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the capture as JSON-ready data."""
        return {
            "agent": self.agent,
            "session_id": self.session_id,
            "transcript": self.transcript,
            "proposed": [item.to_dict() for item in self.proposed],
            "known": [item.to_dict() for item in self.known],
            "notes": list(self.notes),
        }


def capture_transcript(
    here: Project,
    path: str,
    *,
    agent: str = "",
    session_id: str | None = None,
    cwd: str = "",
) -> Captured:
    """Propose memories from an agent's transcript; save the new ones as ``proposed``."""
    from engram.agents.transcript import read_transcript

    transcript = read_transcript(path, agent)
    transcript.cwd = transcript.cwd or cwd
    return save_proposals(here, transcript, session_id=session_id)


def capture_hook(here: Project, agent: str, event: Event) -> str:
    """Capture at a stop, subagent stop, compaction or session end; return the person's notice.

    The transcript is the payload's (``transcript_path``, a subagent's own when given), else
    the agent's own file for the session (``locate_transcript``); without one, the last
    answer's "Key Learnings" are all there is to read. Every proposal is saved ``proposed``.
    """
    from engram.agents.transcript import Step, Transcript

    if event.nested:
        return ""
    from engram.agents.transcript import AGENTS, read_transcript

    path = event.transcript or locate_transcript(agent, event.session_id)
    if agent in AGENTS and path and os.path.isfile(path):  # a format engram reads
        transcript = read_transcript(path, agent)
        transcript.cwd = transcript.cwd or event.cwd
    elif event.message:
        transcript = Transcript(agent, "", event.session_id, event.cwd)
    else:
        return ""
    message = event.message.strip()
    said = {step.text.strip() for step in transcript.steps if step.kind == "say"}
    if message and message not in said:  # the last answer may not be in the file yet
        end = transcript.steps[-1].line + 1 if transcript.steps else 0
        transcript.steps.append(Step("say", end, message))
    return capture_notice(save_proposals(here, transcript, session_id=event.session_id or None))


def capture_notice(captured: Captured) -> str:
    """Return the line telling the person what a capture proposed ('' when nothing new)."""
    if not captured.proposed:
        return ""
    titles = "; ".join(item.title[:60] for item in captured.proposed[:3])
    more = f" and {len(captured.proposed) - 3} more" if len(captured.proposed) > 3 else ""
    count = len(captured.proposed)
    noun = "memory" if count == 1 else "memories"
    return f"engram proposed {count} {noun} for review (engram review): {titles}{more}"


def locate_transcript(agent: str, session_id: str) -> str:
    """Return the agent's own transcript file of a session ('' when none is found).

    Codex keeps ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<session>.jsonl`` (default
    ``~/.codex``), Gemini CLI ``~/.gemini/tmp/<project-hash>/chats/session-<time>-<first 8 of
    the session>.jsonl``; the newest match wins.
    """
    import glob

    if not session_id or not all(c.isalnum() or c in "-_" for c in session_id):
        return ""
    if agent == "codex":
        home = os.environ.get("CODEX_HOME") or os.path.expanduser("~/.codex")
        pattern = os.path.join(home, "sessions", "*", "*", "*", f"rollout-*-{session_id}.jsonl")
    elif agent == "gemini-cli":
        home = os.path.expanduser("~/.gemini")
        pattern = os.path.join(home, "tmp", "*", "chats", f"session-*-{session_id[:8]}.json*")
    else:
        return ""
    found = sorted(glob.glob(pattern), key=os.path.getmtime)
    return found[-1] if found else ""


def save_proposals(
    here: Project, transcript: Transcript, *, session_id: str | None = None
) -> Captured:
    """Propose memories from a transcript read; save the new ones as ``proposed``."""
    from engram.agents.proposals import propose

    sid = session_id or transcript.session_id
    path = transcript.path
    out = Captured(transcript.agent, sid, path, notes=list(transcript.notes))
    proposals = propose(transcript, str(here.root))
    if not proposals:
        return out
    known = captured_keys(here)
    polish = _polisher(here)
    deadline = time.monotonic() + POLISH_SECONDS
    for proposal in proposals:
        record = known.get(proposal.key) or _said_already(here, proposal)
        if record is not None:
            out.known.append(_item(record))
            continue
        if polish is not None:
            _polish(polish, proposal, out.notes, deadline - time.monotonic())
        result = remember(
            here,
            proposal.title,
            proposal.content,
            kind=proposal.kind,
            tags=["capture"],
            files=_in_repo(proposal.files),
            status="proposed",
            source=f"{CAPTURE_SOURCE}{transcript.agent}",
            session_id=_session(sid),
            extra={
                "capture": {
                    "agent": transcript.agent,
                    "session": sid,
                    "transcript": path,
                    "line": proposal.line,
                    "rule": proposal.rule,
                    "key": proposal.key,
                }
            },
        )
        known[proposal.key] = result.record
        target = out.known if result.action == "duplicate" else out.proposed
        target.append(_item(result.record))
    return out


def _item(record: Record) -> CapturedItem:
    return CapturedItem(
        str(record.get("id", "")),
        str(record.get("title", "")),
        str(record.get("kind", "")),
        str(record.get("status", "active")),
    )


def _session(sid: str) -> str | None:
    from engram.project import check_session_id

    try:
        return check_session_id(sid) if sid else None
    except InvalidInput:
        return None  # an agent's id engram cannot keep as a session id: the capture says it


def _in_repo(files: list[str]) -> list[str]:
    """Return the files that are inside this repository (a proposal may name others)."""
    out = []
    for path in files:
        if path and not os.path.isabs(path) and not path.startswith("../"):
            out.append(path)
    return out


def captured_keys(here: Project, source: str = CAPTURE_SOURCE) -> dict[str, Record]:
    """Return every captured memory by its proposal key, whatever its status.

    ``source`` is the prefix of the captured memories' ``source`` (a hook's ``capture:AGENT``
    by default; an explicit capture's own source).
    """
    out: dict[str, Record] = {}
    for ws in here.workspaces():
        for record in ws.index.by_source_prefix(source).values():
            capture = record.get("capture")
            key = capture.get("key") if isinstance(capture, dict) else None
            if isinstance(key, str) and key:
                out.setdefault(key, record)
    return out


def _said_already(here: Project, proposal: Proposal) -> Record | None:
    """Return a live memory whose title or text is the proposal's (normalised)."""
    return said_already(here, proposal.title, proposal.content)


def said_already(here: Project, title: str, content: str) -> Record | None:
    """Return a live memory with this title or this text (normalised), if one exists."""
    want = {normalize_content(title), normalize_content(content)}
    for hit in here.recall(title, limit=5):
        record = hit.record
        have = {
            normalize_content(str(record.get("title", ""))),
            normalize_content(str(record.get("content", ""))),
        }
        if want & have:
            return record
    return None


def _polisher(here: Project) -> list[str] | None:
    """Return the person's own polish command (their settings or environment), if any.

    ``capture.polish_command`` is user-only (``engram.config.USER_ONLY``): a committed config
    that sets it is ignored, so only ENGRAM_HOME's config or the environment can.
    """
    from engram.errors import ConfigError

    try:
        text = str(here.config.get("capture.polish_command") or "").strip()
    except ConfigError:
        text = ""
    return shlex.split(text) if text else None


def _polish(command: list[str], proposal: Proposal, notes: list[str], seconds: float) -> None:
    """Let the person's model command rewrite a proposal's title and content, or leave it."""
    if seconds < 1:
        notes.append(f"polish command {command[0]}: no time left; proposal kept as extracted")
        return
    data = json.dumps(
        {
            "kind": proposal.kind,
            "title": proposal.title,
            "content": proposal.content,
            "files": proposal.files,
        }
    )
    try:
        done = subprocess.run(  # the person's own command, from their own settings
            command,
            input=data,
            capture_output=True,
            text=True,
            timeout=seconds,
            check=False,
        )
        answer = loads(done.stdout, what=command[0]) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        notes.append(f"polish command {command[0]}: {exc}; proposal kept as extracted")
        return
    if not isinstance(answer, dict):
        notes.append(f"polish command {command[0]} gave no JSON object; proposal kept")
        return
    title, content = answer.get("title"), answer.get("content")
    if isinstance(title, str) and title.strip():
        proposal.title = " ".join(title.split())[:120]
    if isinstance(content, str) and content.strip():
        proposal.content = content.strip()[:10_000]


# -- the review --------------------------------------------------------------------------------


@dataclass
class Review:
    """The inbox after a review action: what was listed or changed."""

    action: str
    items: list[Record] = field(default_factory=list)
    left: int = 0  # proposed memories still waiting after the action

    def to_dict(self) -> dict[str, Any]:
        """Return the review as JSON-ready data."""
        return {
            "action": self.action,
            "items": [_view(record) for record in self.items],
            "left": self.left,
        }


def _view(record: Record) -> dict[str, Any]:
    capture = record.get("capture") if isinstance(record.get("capture"), dict) else {}
    view = {
        key: record.get(key)
        for key in ("id", "kind", "title", "content", "files", "status", "source", "created_at")
    }
    view["provenance"] = capture
    if record.get("status") == "proposed":
        view["label"] = PROPOSED_LABEL
    return view


def inbox(here: Project) -> list[Record]:
    """Return the proposed memories waiting for review, oldest first (ADRs' own left out)."""
    hits = here.recall("", statuses="proposed", limit=INBOX_LIMIT)
    records = [
        hit.record for hit in hits if not str(hit.record.get("source") or "").startswith("adr:")
    ]
    records.sort(key=lambda r: (str(r.get("created_at") or ""), str(r.get("id"))))
    return records


def review(
    here: Project,
    action: str = "list",
    ids: list[str] | None = None,
    *,
    every: bool = False,
    title: str | None = None,
    content: str | None = None,
    into: str | None = None,
    limit: int | None = None,
) -> Review:
    """List the inbox, or accept, reject or merge proposed memories (``every``: all of them)."""
    if action not in ACTIONS:
        raise InvalidInput(f"unknown review action {action!r}; use {', '.join(ACTIONS)}")
    waiting = inbox(here)
    if action == "list":
        return Review("list", waiting[:limit] if limit else waiting, len(waiting))
    targets = _targets(here, waiting, ids or [], every)
    if (title or content) and len(targets) != 1:
        raise InvalidInput("--title and --content edit one memory: give one id")
    if action == "merge" and not into:
        raise InvalidInput("merge needs the memory to merge into", hint="--into ID")
    changed: list[Record] = []
    for record in targets:
        if action == "accept":
            changes: dict[str, Any] = {"status": "active", "reviewed": {"at": now()}}
            if title:
                changes["title"] = title
            if content:
                changes["content"] = content
            changed.append(update(here, record["id"], changes))
        elif action == "reject":
            changed.append(update(here, record["id"], {"status": "rejected"}))
        else:
            changed.append(_merge(here, record, str(into)))
    return Review(action, changed, len(inbox(here)))


def _targets(here: Project, waiting: list[Record], ids: list[str], every: bool) -> list[Record]:
    if every:
        if ids:
            raise InvalidInput("give ids or --all, not both")
        return waiting
    if not ids:
        raise InvalidInput("name the proposed memories to review", hint="an id, or --all")
    out = []
    for ref in ids:
        record = here.locate(ref)[1]
        if record.get("status") != "proposed":
            raise InvalidInput(
                f"memory {record['id']} is {record.get('status', 'active')}, not proposed",
                hint="engram review lists the proposed ones",
            )
        out.append(record)
    return out


def _merge(here: Project, record: Record, into: str) -> Record:
    """Fold a proposal into an existing memory: its text and files added; it is superseded."""
    try:
        target = here.locate(into)[1]
    except NotFound as exc:
        raise InvalidInput(f"no memory {into} to merge into") from exc
    if target["id"] == record["id"]:
        raise InvalidInput("a proposal cannot be merged into itself")
    text = str(target.get("content") or "")
    addition = str(record.get("content") or record.get("title") or "")
    files = list(dict.fromkeys([*(target.get("files") or []), *(record.get("files") or [])]))
    update(here, target["id"], {"content": f"{text}\n\n{addition}".strip(), "files": files})
    return update(here, record["id"], {"status": "superseded"})


# -- the nudge ---------------------------------------------------------------------------------


def nudge(here: Project, transcript: str, session_id: str, *, agent: str = "") -> str:
    """Return the prompt hook's one-line reminder to ``remember``, or '' (at most once a window).

    Said when the session's transcript shows at least ``NUDGE_EDITS`` edits, the session has
    saved no memory, and it was not said in this session within ``NUDGE_WINDOW`` seconds (the
    clone's session log keeps when).
    """
    from engram.agents.transcript import read_transcript

    if not session_id or not transcript or not os.path.isfile(transcript):
        return ""
    logged = here.sessions.get(session_id) or {}
    last = logged.get("nudged_at")
    if isinstance(last, (int, float)) and time.time() - last < NUDGE_WINDOW:
        return ""
    for ws in here.workspaces():  # the cheap questions first: the transcript is read last
        saved = ws.index.session_records(session_id)
        if any(not str(r.get("source") or "").startswith(CAPTURE_SOURCE) for r in saved):
            return ""
    steps = read_transcript(transcript, agent).steps
    if sum(step.kind == "edit" for step in steps) < NUDGE_EDITS:
        return ""
    here.sessions.note(session_id, nudged_at=time.time())  # logged or not: once a window
    return NUDGE
