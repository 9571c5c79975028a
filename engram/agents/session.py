"""Session summaries: the structured note an agent leaves when a session ends.

A summary has up to six sections, always written in this order: Goal, Instructions,
Discoveries, Accomplished, Next steps, Relevant files. It can come as markdown (headings
``## Goal`` or bold lines ``**Goal:**``, any case, colon optional), as separate fields, or both:
a field given separately replaces the section of the same name in the text. Text before the
first section is kept as a preamble. ``Relevant files`` lines become the memory's ``files``.

Parsing is pure. Over an opened ``Project``, ``start`` and ``end`` keep the clone's session log,
``save_summary`` saves a summary as the session's ``session`` memory (one per session: a later
one revises it), ``save_prompt`` a user's prompt as a ``prompt`` memory, and ``capture`` the
"Key Learnings" of an agent's reply (``engram.agents.capture`` finds them) as proposed
``discovery`` memories (``engram review``), all through the write path
(``engram.project.memories``). ``start`` and ``end`` return a ``Session``, ``capture`` a
``Capture``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from engram.errors import InvalidInput
from engram.model import Record, new_id, normalize_content
from engram.project import check_session_id
from engram.project.memories import SaveResult, remember

if TYPE_CHECKING:
    from engram.project import Project

SECTIONS: Final = (
    "Goal",
    "Instructions",
    "Discoveries",
    "Accomplished",
    "Next steps",
    "Relevant files",
)
# Argument names of the sections (CLI options, MCP arguments): goal, instructions, …
FIELD_NAMES: Final = {name.lower().replace(" ", "_"): name for name in SECTIONS}
TITLE_CHARS: Final = 120

_BY_KEY: Final = {name.lower(): name for name in SECTIONS}
_HEADING: Final = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*(?P<h>[^#\n]+?)\s*#*\s*|(?:\*\*|__)(?P<b>[^*_\n]+?)(?:\*\*|__)\s*:?\s*)$"
)
_FILE_ITEM: Final = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(?P<item>.+?)\s*$")
_PATHISH: Final = re.compile(r"^[\w.@~+-][\w./@~+*?\[\]{}-]*$")


class Summary(NamedTuple):
    """A parsed session summary."""

    sections: dict[str, str]  # by canonical name, in SECTIONS order, non-empty only
    preamble: str

    @property
    def title(self) -> str:
        """One line: the goal's first line, else the first line of anything written."""
        for text in (self.sections.get("Goal", ""), self.preamble, *self.sections.values()):
            for line in text.splitlines():
                line = re.sub(r"^\s*(?:[-*+•]|\d+[.)])\s+", "", line).strip(" *_#`")
                if line:
                    return _clip(f"Session: {line}", TITLE_CHARS)
        return "Session summary"

    @property
    def files(self) -> list[str]:
        """The paths listed under Relevant files (list items; backticks and notes stripped)."""
        out: list[str] = []
        for line in self.sections.get("Relevant files", "").splitlines():
            match = _FILE_ITEM.match(line)
            text = match.group("item") if match else line.strip()
            text = text.split(" — ")[0].split(" - ")[0].split(": ")[0].strip().strip("*_")
            quoted = text.startswith("`")
            text = text.strip("`")
            if text and _PATHISH.match(text) and (quoted or "/" in text or "." in text):
                out.append(text)
        return list(dict.fromkeys(out))

    def markdown(self) -> str:
        """Render the summary: preamble, then each section under a ``##`` heading."""
        parts = [self.preamble] if self.preamble else []
        parts += [f"## {name}\n{text}" for name, text in self.sections.items()]
        return "\n\n".join(parts)


def _clip(text: str, limit: int) -> str:
    """Return text on one line, at most ``limit`` characters (secrets redacted before the cut)."""
    from engram.store.redact import default_scrubber

    text = " ".join(default_scrubber().text(text)[0].split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] or text[: limit - 1]
    return cut.rstrip() + "…"


def _section_name(line: str) -> str | None:
    match = _HEADING.match(line)
    if not match:
        return None
    name = (match.group("h") or match.group("b") or "").strip().rstrip(":").strip().lower()
    return _BY_KEY.get(name) or _BY_KEY.get(name.replace("_", " "))


def parse_summary(content: str, fields: Mapping[str, str | None] | None = None) -> Summary:
    """Split ``content`` into the six sections; ``fields`` (by name or argument name) override."""
    found: dict[str, list[str]] = {}
    preamble: list[str] = []
    current: list[str] = preamble
    fence = False
    for line in content.replace("\r\n", "\n").split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        name = None if fence else _section_name(line)
        if name is not None:
            current = found.setdefault(name, [])
            continue
        current.append(line)
    texts = {name: "\n".join(lines).strip() for name, lines in found.items()}
    for key, value in (fields or {}).items():
        name = FIELD_NAMES.get(key) or _BY_KEY.get(key.lower())
        if name is None:
            raise KeyError(key)
        if value is not None and str(value).strip():
            texts[name] = str(value).strip()
    sections = {name: texts[name] for name in SECTIONS if texts.get(name)}
    return Summary(sections, "\n".join(preamble).strip())


# -- over an opened project ---------------------------------------------------------------------

# The log entry's fields a Session reads; any other field of an entry is kept as it is.
_SESSION_FIELDS: Final = ("id", "started_at", "project", "directory", "ended_at", "summary_id")


@dataclass
class Session:
    """A logged session: when and where it ran, and the summary ``end`` saved, if any."""

    id: str
    started_at: str | None = None
    project: str | None = None
    directory: str | None = None
    ended_at: str | None = None
    summary_id: str | None = None
    summary: SaveResult | None = None  # the summary saved by ``end``
    extra: dict[str, Any] = field(default_factory=dict)  # the entry's other fields
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)  # the entry's keys

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Session:
        """Read a session log entry (a field of an unexpected type is kept among ``extra``)."""
        known = {
            key: entry[key]
            for key in _SESSION_FIELDS
            if key in entry and isinstance(entry[key], str)
        }
        extra = {key: value for key, value in entry.items() if key not in known}
        return cls(**known, extra=extra, order=tuple(entry))

    def to_dict(self) -> dict[str, Any]:
        """Return the session as JSON-ready data: the entry's fields in the entry's order."""
        values = dict(self.extra)
        values.update(
            (key, getattr(self, key)) for key in _SESSION_FIELDS if getattr(self, key) is not None
        )
        if self.summary is not None:
            values["summary"] = self.summary.to_dict()
        order = [key for key in self.order if key in values]
        return {key: values[key] for key in [*order, *(k for k in values if k not in order)]}


@dataclass
class CaptureItem:
    """A learning of a capture: the id and title of the memory that holds it."""

    id: str
    title: str

    def to_dict(self) -> dict[str, Any]:
        """Return the item as JSON-ready data."""
        return {"id": self.id, "title": self.title}


@dataclass
class Capture:
    """What a capture extracted, saved, and skipped as already known."""

    extracted: int
    saved: list[CaptureItem] = field(default_factory=list)
    duplicates: list[CaptureItem] = field(default_factory=list)
    session_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the capture as JSON-ready data."""
        return {
            "extracted": self.extracted,
            "saved": [item.to_dict() for item in self.saved],
            "duplicates": [item.to_dict() for item in self.duplicates],
            "session_id": self.session_id,
        }


def start(
    here: Project, session_id: str | None = None, *, directory: str = "", project: str | None = None
) -> Session:
    """Start (or reopen) a session; without an id a new one is made. Returns the session."""
    sid = check_session_id(session_id) if session_id else new_id()
    name = here.project_name(project)
    directory = str(directory or "")
    return Session.of(here.sessions.start(sid, project=name, directory=directory, stamp=here.now()))


def end(
    here: Project, session_id: str | None = None, *, summary: str = "", project: str | None = None
) -> Session:
    """End a session (default: the open one), saving ``summary`` as its summary if given."""
    sid = here.session_id(session_id, here.project_name(project))
    if sid is None:
        raise InvalidInput(
            "no session to end: none is open in this project",
            hint="pass the session id that session_start returned",
        )
    session = Session.of(here.sessions.end(sid, stamp=here.now()))
    if str(summary or "").strip():
        saved = save_summary(here, summary, session_id=sid, project=project)
        session.summary_id = saved.record["id"]
        session.summary = saved
    return session


def file_list(value: str) -> str:
    """Return relevant files as a markdown list: list items stay, plain lines split at commas.

    Agents send ``"a.py, b.py"`` as often as a list; every adapter passes it on as given.
    """
    lines: list[str] = []
    for line in value.splitlines():
        if _FILE_ITEM.match(line):
            lines.append(line.strip())
            continue
        parts = (part.strip().strip("`").strip() for part in line.split(","))
        lines += [f"- `{part}`" for part in parts if part]
    return "\n".join(lines)


def save_summary(
    here: Project,
    content: str = "",
    *,
    session_id: str | None = None,
    project: str | None = None,
    sections: Mapping[str, str | None] | None = None,
) -> SaveResult:
    """Save a session summary (a ``session`` memory, one per session: a later one revises it).

    ``content`` is markdown with any of the sections Goal, Instructions, Discoveries,
    Accomplished, Next steps, Relevant files; ``sections`` (goal=…, next_steps=…) replace the
    section of that name. Relevant files become the memory's ``files``.
    """
    sections = dict(sections or {})
    unknown = sorted(set(sections) - set(FIELD_NAMES))
    if unknown:
        raise InvalidInput(
            f"unknown summary section {', '.join(unknown)}; use: {', '.join(FIELD_NAMES)}"
        )
    # Scrubbed before the title is cut from it: a clipped key would slip past the rules.
    content, found = here.redact(str(content or ""))
    for key, value in list(sections.items()):
        if value is not None:
            sections[key], hits = here.redact(str(value))
            found += hits
    if sections.get("relevant_files"):
        sections["relevant_files"] = file_list(str(sections["relevant_files"]))
    summary = parse_summary(content, sections)
    if not summary.sections and not summary.preamble:
        raise InvalidInput(
            "a session summary needs some text",
            hint="give content, or sections such as goal and accomplished",
        )
    name = here.project_name(project)
    sid = here.session_id(session_id, name) or new_id()
    logged = here.sessions.get(sid) or {}
    extra = {
        key: logged[key]
        for key in ("started_at", "ended_at", "directory")
        if isinstance(logged.get(key), str) and logged[key]
    }
    result = remember(
        here,
        summary.title,
        summary.markdown(),
        kind="session",
        files=summary.files,
        topic_key=f"session/{sid}",
        source="session",
        session_id=sid,
        project=name,
        extra={"session": extra} if extra else None,
    )
    if logged:
        here.sessions.note_summary(sid, result.record["id"])
    result.redactions += found
    return result


def save_prompt(
    here: Project, content: str, *, session_id: str | None = None, project: str | None = None
) -> SaveResult:
    """Save a user's prompt (kind ``prompt``; redacted like every memory)."""
    text, found = here.redact(str(content or ""))  # before its title is clipped
    text = text.strip()
    if not text:
        raise InvalidInput("a prompt needs some text")
    name = here.project_name(project)
    first = next(line for line in text.splitlines() if line.strip())
    result = remember(
        here,
        _clip(first, TITLE_CHARS),
        text,
        kind="prompt",
        source="prompt",
        session_id=here.session_id(session_id, name),
        project=name,
    )
    result.redactions += found
    return result


def capture(
    here: Project,
    text: str,
    *,
    session_id: str | None = None,
    project: str | None = None,
    source: str = "capture",
) -> Capture:
    """Propose the learnings of an agent's output (its last "Key Learnings" section).

    Each item becomes a ``discovery`` memory saved ``proposed``, for a person to accept or
    reject (``engram review``), as the learnings a hook captures are: text read out of an
    answer is never established fact until someone has looked at it. An item is skipped when a
    live memory already has its title or text (in any kind), or when the same learning was
    captured before, rejected included, so a rejection holds. Returns what was extracted,
    saved and skipped.
    """
    from engram.agents.capture import extract_learnings
    from engram.agents.inbox import captured_keys, said_already

    name = here.project_name(project)
    sid = here.session_id(session_id, name)
    origin = str(source or "capture")
    learnings = extract_learnings(here.redact(str(text or ""))[0])  # titles are cut from it
    out = Capture(extracted=len(learnings), session_id=sid)
    known: dict[str, Record] = {}
    for prefix in dict.fromkeys(("capture", origin) if learnings else ()):  # hooks' and this
        known.update(captured_keys(here, prefix))
    for item in learnings:
        key = normalize_content(f"lesson {item.content}")
        existing = known.get(key) or said_already(here, item.title, item.content)
        if existing is not None:
            out.duplicates.append(CaptureItem(existing["id"], existing.get("title", "")))
            continue
        result = remember(
            here,
            item.title,
            item.content,
            kind="discovery",
            tags=["capture"],
            status="proposed",
            source=origin,
            session_id=sid,
            project=name,
            extra={"capture": {"agent": origin, "session": sid, "rule": "lesson", "key": key}},
        )
        known[key] = result.record
        target = out.duplicates if result.action == "duplicate" else out.saved
        target.append(CaptureItem(result.record["id"], result.record.get("title", "")))
    return out
