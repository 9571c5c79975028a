"""The views of results every adapter renders: a hit, a memory line, provenance, staleness.

A view is worked out once from a result and offered in the shapes the adapters need:
``HitView.compact()`` is what an agent reads (MCP, the socket daemon: clipped title and
snippet, a short id, provenance, staleness), ``HitView.full()`` what a person or a program
reads (CLI ``--json``, HTTP: the same fields plus the whole memory). The facade's
``Engram.recall_views`` returns them finished (short id, staleness, matched fields,
relevance), so every door shows one recall the same way and only renders. ``provenance`` is the one
line "who, when, from where" every recalled memory carries. A snippet is plain text
(``snippet``): the markdown of the content (headings, emphasis, list bullets, code fences, link
syntax, table pipes) is left out of it, never out of the stored content or ``get``'s.

This module imports only the leaves and knows nothing of any adapter.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from engram.model import scope_of, status_of

TITLE_CHARS: Final = 160
INACTIVE: Final = ("archived", "superseded", "rejected")  # statuses nobody reads as current
SNIPPET_CHARS: Final = 200
ID_CHARS: Final = 8  # the shortest id prefix a hit shows (longer where 8 names two memories)
STALE_NOTE: Final = "may be stale: "

# The markdown a snippet leaves out, line by line, then within a line.
_FENCE = re.compile(r"^\s{0,3}(?:`{3,}|~{3,})[^`]*$")
_RULE = re.compile(r"^\s{0,3}(?:[-*_]\s*){3,}$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(?:=+|-+)\s*$")
_QUOTE = re.compile(r"^\s{0,3}(?:>\s?)+")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\](?:\([^)]*\)|\[[^\]]*\])")
_AUTOLINK = re.compile(r"<((?:https?|mailto|ftp):[^>\s]+)>")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPHASIS = re.compile(r"(?<![\w*])([*_])(?=\S)(.+?)(?<=\S)\1(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_CODE = re.compile(r"(`+)(.+?)\1")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>~])")
_HIDDEN: Final = 0xE000  # escaped ASCII marks hide as U+E000 + code point while lines are read
_UNHIDE = re.compile("[\ue000-\ue07f]")
# Every inline rule above needs one of these characters: a line without them is left as it is.
_INLINE_MARKS = re.compile(r"[\\`*_\[<~\ue000-\ue07f]")


class HitLike(Protocol):
    """What a view needs of a ranked hit (``engram.index`` ``Hit``)."""

    @property
    def id(self) -> str: ...

    @property
    def score(self) -> float: ...

    @property
    def record(self) -> Mapping[str, Any]: ...

    @property
    def matched(self) -> list[str]: ...

    @property
    def relevance(self) -> float | None: ...


def clip(text: str, limit: int) -> str:
    """Return ``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = str(text)
    window = limit * 4 + 16  # flattening a long text whole would cost more than the line
    flat = " ".join(text[:window].split())
    if len(flat) <= limit and len(text) <= window:
        return flat
    return flat[: max(limit - 1, 0)].rstrip() + "…"


def plain(text: str) -> str:
    """Return markdown as plain text: the words kept, the syntax left out (for snippets).

    Headings end with a colon (``## Goal`` then ``Fix it`` reads ``Goal: Fix it``); list
    bullets, quote marks, fences, rules and table pipes go; emphasis, code spans and links keep
    their text (a link its text, an image its alt text).
    """
    lines: list[str] = []
    for line in str(text).splitlines():
        if _FENCE.match(line) or _RULE.match(line) or _TABLE_RULE.match(line):
            continue
        if _SETEXT.match(line) and lines:
            lines[-1] = _heading(lines[-1])
            continue
        heading = _HEADING.match(line)
        if heading:
            lines.append(_heading(_inline(heading.group(1))))
            continue
        line = _BULLET.sub("", _QUOTE.sub("", line))
        if "|" in line and line.strip().startswith("|"):
            line = ", ".join(cell.strip() for cell in line.strip().strip("|").split("|"))
        lines.append(_inline(line))
    return "\n".join(lines)


def _heading(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".:!?" else text + ":"


def _inline(line: str) -> str:
    """Return one line without its inline markdown: code spans, links, emphasis, escapes."""
    if not _INLINE_MARKS.search(line):
        return line
    # Each rule runs only where the line (as the rules before left it) holds its mark.
    # An escaped mark is text: hidden from the rules below (as a private-use character).
    if "\\" in line:
        line = _ESCAPE.sub(lambda m: chr(_HIDDEN + ord(m.group(1))), line)
    if "`" in line:
        line = _CODE.sub(lambda m: m.group(2).strip(), line)
    if "![" in line:
        line = _IMAGE.sub(r"\1", line)
    if "[" in line:
        line = _LINK.sub(r"\1", line)
    if "<" in line:
        line = _AUTOLINK.sub(r"\1", line)
    if "**" in line or "__" in line:
        line = _STRONG.sub(r"\2", line)
    if "~~" in line:
        line = _STRIKE.sub(r"\1", line)
    if "*" in line or "_" in line:
        line = _EMPHASIS.sub(r"\2", line)
    return _UNHIDE.sub(lambda m: chr(ord(m.group(0)) - _HIDDEN), line)


def snippet(text: str, limit: int) -> str:
    """Return the start of a memory's content as plain text on one line (``plain``, ``clip``)."""
    text = str(text)
    window = limit * 8 + 64  # markdown shrinks; a long text is read only as far as it shows
    flat = _flat(text[:window])
    if len(flat) <= limit and len(text) <= window:
        return flat
    return flat[: max(limit - 1, 0)].rstrip() + "…"


@functools.lru_cache(maxsize=1024)
def _flat(text: str) -> str:
    """Return ``plain(text)`` on one line (cached: recall shows the same memories again)."""
    return " ".join(plain(text).split())


def is_candidate(record: Mapping[str, Any]) -> bool:
    """Tell whether a record is a pitfall candidate mined from git (a revert or a fix-again).

    The git indexer proposes them (``engram index``: kind pitfall, status proposed, source
    ``git:<sha>``); a person confirms one (active) or rejects it.
    """
    return (
        record.get("kind") == "pitfall"
        and record.get("status") == "proposed"
        and str(record.get("source") or "").startswith("git:")
    )


def supersede_warning(current: Mapping[str, Any], target: Mapping[str, Any]) -> str:
    """Return why ``current`` superseding ``target`` is likely a mistake ("" when it is not).

    A memory no longer current (archived, superseded, rejected) that supersedes an active one
    leaves the project with neither: the active one turns superseded behind a memory that is
    itself out of use.
    """
    status = status_of(current)
    target_status = status_of(target)
    if status in INACTIVE and target_status not in INACTIVE:
        return (
            f"this memory is {status} and “{target.get('title', '')}” is {target_status}: "
            f"it would be superseded by a memory that is itself out of use"
        )
    return ""


UNREVIEWED: Final = "proposed, not reviewed"


def is_unreviewed(record: Mapping[str, Any]) -> bool:
    """Tell whether a record was proposed from an agent's session and nobody reviewed it yet.

    Capture saves them (``engram.agents.inbox``: status proposed, source ``capture:<agent>``);
    a person accepts (active) or rejects one with ``engram review``. On the labelled capture
    set (benchmarks/capture) the rules' first run on sessions they were not shaped on was wrong
    four times in five, and after adjustment one in seven proposals on fresh sessions is still
    wrong, so nothing unasked (a briefing, a prompt's or a file's memories) shows one, and
    wherever one is shown its provenance says it is unreviewed.
    """
    return record.get("status") == "proposed" and str(record.get("source") or "").startswith(
        "capture:"
    )


def provenance(record: Mapping[str, Any]) -> str:
    """Return who saved a memory, when and from where: ``author, date, source``.

    A proposal from a session nobody reviewed says so: ``…, proposed, not reviewed``.
    """
    parts = [
        str(record.get("author") or ""),
        str(record.get("updated_at") or record.get("created_at") or "")[:10],
        str(record.get("source") or ""),
        UNREVIEWED if is_unreviewed(record) else "",
    ]
    return ", ".join(part for part in parts if part) or "unknown origin"


def stale_note(notes: Sequence[str]) -> str:
    """Return the one line that says why a memory may be stale ('' when it is not)."""
    return f"{STALE_NOTE}{'; '.join(notes)}" if notes else ""


@dataclass(frozen=True)
class HitView:
    """One recall hit, as every adapter shows it."""

    id: str
    short_id: str
    score: float
    kind: str
    status: str
    title: str
    snippet: str
    matched: list[str]
    scope: str
    provenance: str
    memory: Mapping[str, Any]
    stale: list[str] = field(default_factory=list)
    # The probability (0..1) that the hit answers the query; None for a recall without words.
    relevance: float | None = None

    @property
    def stale_note(self) -> str:
        """Return the one line that says why this memory may be stale ('' when it is not)."""
        return stale_note(self.stale)

    @classmethod
    def of(
        cls,
        hit: HitLike,
        *,
        short_id: str = "",
        stale: Iterable[str] = (),
        title_chars: int = TITLE_CHARS,
        snippet_chars: int = SNIPPET_CHARS,
        matched: bool = True,
    ) -> HitView:
        """Return the view of ``hit`` (``short_id``: the prefix to show; stale: its notes).

        ``matched=False`` leaves the matched fields unworked (a shape that does not show them).
        """
        record = hit.record
        return cls(
            id=hit.id,
            short_id=short_id or hit.id,
            score=hit.score,
            kind=str(record.get("kind") or ""),
            status=status_of(record),
            title=clip(record.get("title", ""), title_chars),
            snippet=snippet(str(record.get("content") or ""), snippet_chars),
            matched=list(hit.matched) if matched else [],
            scope=scope_of(record),
            provenance=provenance(record),
            memory=record,
            stale=list(stale),
            relevance=hit.relevance,
        )

    def compact(
        self, *, matched: bool = True, scope: bool = True, whole_id: bool = False
    ) -> dict[str, Any]:
        """Return the agent's shape: short id, clipped text, provenance, staleness.

        ``whole_id``: the whole id instead of the short one (a client that keeps ids).
        """
        out: dict[str, Any] = {
            "id": self.id if whole_id else self.short_id,
            "kind": self.memory.get("kind"),
            "status": self.status,
            "title": self.title,
        }
        if self.snippet:
            out["snippet"] = self.snippet
        out["score"] = round(self.score, 3)
        out["relevance"] = None if self.relevance is None else round(self.relevance, 3)
        if matched and self.matched:
            out["matched"] = self.matched
        if scope and self.scope != "project":
            out["scope"] = self.scope
        out["from"] = self.provenance
        if self.stale:
            out["may_be_stale"] = "; ".join(self.stale)
        return out

    def full(self) -> dict[str, Any]:
        """Return the shape for people and programs: the fields and the whole memory."""
        out: dict[str, Any] = {
            "id": self.id,
            "score": self.score,
            "relevance": self.relevance,
            "kind": self.memory.get("kind"),
            "status": self.status,
            "title": self.memory.get("title"),
            "snippet": self.snippet,
            "matched": self.matched,
            "memory": dict(self.memory),
        }
        if self.stale:
            out["stale"] = self.stale
        return out


def hit_views(
    hits: Iterable[HitLike],
    *,
    short_ids: Mapping[str, str] | None = None,
    stale: Mapping[str, Sequence[str]] | None = None,
) -> list[HitView]:
    """Return the views of ranked hits, in order."""
    shorts = short_ids or {}
    notes = stale or {}
    return [
        HitView.of(hit, short_id=shorts.get(hit.id, ""), stale=notes.get(hit.id, ()))
        for hit in hits
    ]
