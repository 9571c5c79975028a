"""One ADR's text into a ``ParsedAdr``: the parse, the status and the template checks.

This module owns ``parse_adr`` and ``parse_against`` (the same against a ``Catalog`` built
once per scan), the status read from front matter, a ``Status:`` line or the Status section,
the refusal of templates, and the cap on content. The conventions are drawn in
``engram.indexer.adr``. It is pure: no I/O, no store, and it raises only ``InvalidInput``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, Final

from engram.errors import InvalidInput
from engram.indexer.adrfields import (
    DATES,
    clean_title,
    date_in,
    date_value,
    decider_names,
    number_and_date,
    tag_names,
    title_from_name,
)
from engram.indexer.adrlinks import RELATION, Catalog, named_files, relations
from engram.indexer.adrtext import (
    LIST_PREFIX,
    MAX_ITEM_CHARS,
    MD_LINK,
    Line,
    body_lines,
    clean_value,
    field_of,
    heading_text,
    is_table_separator,
    key_values,
    load_front_matter,
    scalar,
    split_front_matter,
)
from engram.model import normalize_path

MAX_CONTENT_BYTES: Final = 64 * 1024


@dataclass(frozen=True)
class ParsedAdr:
    """One architecture decision record, as read from its file.

    ``path`` is repo-relative (posix); ``number`` comes from the file name only (``0005-…`` →
    5; None for date-named or unnumbered files); ``title`` has no number or date prefix;
    ``status`` is one of engram's statuses and ``status_text`` the words as written (emphasis
    removed); ``date`` is RFC 3339 UTC or None; ``deciders`` keep their written order; ``tags``
    are ``adr`` plus front-matter or ``Tags:`` tags, lowercase, sorted; ``links`` are
    ``(rel, ADR path)`` with rel ``supersedes`` or ``relates``; ``superseded_by`` lists the ADR
    paths this one says replace it.
    """

    path: str
    number: int | None
    title: str
    status: str
    status_text: str
    date: str | None
    deciders: tuple[str, ...]
    content: str
    files: tuple[str, ...]
    tags: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    superseded_by: tuple[str, ...] = ()


# -- parsing ------------------------------------------------------------------------------------


def parse_adr(path: str, text: str, *, known_paths: Collection[str] = ()) -> ParsedAdr:
    """Parse one ADR; raise InvalidInput naming why the text is not a usable ADR."""
    catalog = Catalog(known_paths)
    return parse_against(path, text, catalog)


def parse_against(path: str, text: str, catalog: Catalog) -> ParsedAdr:
    """Parse one ADR against a catalog of the known ADR paths."""
    path = normalize_path(path)
    if not path:
        raise InvalidInput("an ADR path must name a file")
    if "\x00" in text:
        raise InvalidInput("binary file (NUL byte)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"not valid Unicode (lone surrogate at {exc.start})") from exc
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise InvalidInput("empty file")
    front_lines, body, first_line = split_front_matter(text)
    lines = body_lines(body)
    heading_title = next(
        (heading_text(line.meta or line.raw) for line in lines if line.zone == "title"), ""
    )
    if heading_title:
        _check_template_title(heading_title)
    meta: dict[str, Any] = {}
    if front_lines is not None:
        meta = load_front_matter(front_lines, first_line)
    fm_title = scalar(meta.get("title"))
    if fm_title:
        _check_template_title(fm_title)
    content = body.strip()
    if not content:
        raise InvalidInput(
            "only front matter, no text" if front_lines is not None else "empty file"
        )

    here = posixpath.dirname(path)
    name = posixpath.basename(path)
    number, name_date = number_and_date(name)
    fields = key_values(lines)

    status, status_text, status_date = _status(meta, fields, lines)
    date_text = (
        date_value(meta.get("date"))
        or _first(date_in(value) for value in fields.get("date", []))
        or status_date
        or name_date
    )

    written_deciders = [meta.get(key) for key in ("deciders", "decision-makers", "decision_makers")]
    deciders = decider_names([*written_deciders, *fields.get("deciders", [])])
    tags = tag_names([meta.get("tags"), *fields.get("tags", [])])

    supersedes, superseded_by, relates = relations(meta, status_text, lines, catalog, here)
    for target_set in (supersedes, superseded_by, relates):
        target_set.discard(path)
    relates -= supersedes | superseded_by
    links = sorted({("supersedes", t) for t in supersedes} | {("relates", t) for t in relates})

    title = clean_title(fm_title or heading_title, number) or title_from_name(name)
    return ParsedAdr(
        path=path,
        number=number,
        title=title,
        status=status,
        status_text=status_text,
        date=date_text,
        deciders=tuple(deciders),
        content=_cap_content(content, path),
        files=tuple(named_files(lines, here, path, catalog)),
        tags=tuple(tags),
        links=tuple(links),
        superseded_by=tuple(sorted(superseded_by)),
    )


def _first(values: Iterable[str | None]) -> str | None:
    """Return the first value that is not None."""
    return next((value for value in values if value is not None), None)


# -- status -------------------------------------------------------------------------------------

_STATUS_GROUPS: Final = (
    (
        "rejected",
        r"not\s+accepted|not\s+approved|won'?t\s+do|rejected|declined|denied|refused|abandoned"
        r"|withdrawn|cancell?ed|dropped|discarded",
    ),
    (
        "superseded",
        r"superseded|superceded|deprecated|obsolete|obsoleted|replaced|retired|outdated|sunset",
    ),
    ("archived", r"archived"),
    (
        "proposed",
        r"proposed|proposal|draft|drafted|pending|open|in\s+review|under\s+review"
        r"|in\s+discussion|under\s+discussion|under\s+consideration|in\s+progress"
        r"|work\s+in\s+progress|wip|rfc|suggested|requested|new|todo|planned|experimental"
        r"|trial|on\s+hold|postponed|deferred",
    ),
    (
        "active",
        r"accepted|approved|adopted|agreed|decided|done|implemented|active|final|finali[sz]ed"
        r"|in\s+effect|enacted|completed?|confirmed|ratified|valid|current|live|in\s+use",
    ),
)
_STATUS_RE: Final = re.compile(
    r"\b(?:" + "|".join(f"(?P<{name}>{words})" for name, words in _STATUS_GROUPS) + r")\b",
    re.IGNORECASE,
)
_RANK: Final = {"proposed": 0, "active": 1, "rejected": 2, "superseded": 3, "archived": 4}
_LEAD_NOISE: Final = re.compile(r"^[\W_]+")
_STATUS_LABEL: Final = re.compile(r"^status\b[\W_]*", re.IGNORECASE)


def _status_word(text: str) -> str | None:
    """Return the engram status named first in a status value, or None."""
    match = _STATUS_RE.search(MD_LINK.sub(" ", text))
    return match.lastgroup if match else None


def _status_opening(text: str) -> str | None:
    """Return the engram status a Status-section line opens with, or None."""
    text = DATES.sub(" ", MD_LINK.sub(" ", text))
    text = _LEAD_NOISE.sub("", text)
    text = _LEAD_NOISE.sub("", _STATUS_LABEL.sub("", text))
    match = _STATUS_RE.match(text)
    return match.lastgroup if match else None


def _status(
    meta: dict[str, Any], fields: dict[str, list[str]], lines: list[Line]
) -> tuple[str, str, str | None]:
    """Return (engram status, the status as written, a date written with it)."""
    written = clean_value(scalar(meta.get("status"))) or next(iter(fields.get("status", [])), "")
    if written and not _has_words(written):  # "Status: 2024-03-01" names a date, no status
        written_date = date_in(written)
        written = ""
    else:
        written_date = None
    if written:
        text = written[:MAX_ITEM_CHARS]
        _check_template_status(text)
        return _status_word(text) or "proposed", text, date_in(text)
    section = [
        clean_value(" ".join(LIST_PREFIX.sub("", line.meta).strip(" |").split(" | ")))
        for line in lines
        if line.zone == "status"
        and line.meta is not None
        and line.meta.strip()
        and not is_table_separator(line.meta)
    ]
    best: tuple[int, int, str, str] | None = None
    for index, text in enumerate(section):
        word = _status_opening(text)
        if word is not None and (best is None or (_RANK[word], index) >= best[:2]):
            best = (_RANK[word], index, word, text)
    section_date = _first(date_in(text) for text in section)
    if best is not None:
        _, _, word, text = best
        _check_template_status(text)
        return word, text[:MAX_ITEM_CHARS], date_in(text) or section_date
    for text in section:
        plain = _LEAD_NOISE.sub("", DATES.sub(" ", text))
        if not _has_words(text) or RELATION.match(plain) or field_of(text) not in (None, "status"):
            continue
        _check_template_status(text)
        return "proposed", text[:MAX_ITEM_CHARS], section_date
    return "active", "", section_date or written_date


def _has_words(text: str) -> bool:
    """Tell whether a text holds a letter once its dates are taken out."""
    return bool(re.search(r"[^\W\d_]", DATES.sub(" ", text)))


# -- templates ----------------------------------------------------------------------------------

_TEMPLATE_PHRASES: Final = (
    "short title of solved problem",
    "short title, representative of solved problem",
    "short title of the decision",
)
_TEMPLATE_TITLE: Final = re.compile(
    r"^(?:(?:adr[-_ ]?)?(?:number|nnnn|nnn|xxxx|xxx|n|x|\{number\}|\[number\]|<number>)"
    r"[\s.:-]*)?(?:title|\{title\}|\[title\]|<title>|short title|adr title|decision title"
    r"|template|adr template|title of (?:the )?(?:decision|adr))$"
)


def _check_template_title(title: str) -> None:
    """Raise InvalidInput when a title is a template's placeholder."""
    lowered = " ".join(title.lower().split())
    for phrase in _TEMPLATE_PHRASES:
        if phrase in lowered:
            raise InvalidInput(f"template (title contains {phrase!r})")
    bare = lowered.strip("#* ")
    if (
        _TEMPLATE_TITLE.match(bare)
        or (bare.startswith("{") and bare.endswith("}"))
        or (bare.startswith("[") and bare.endswith("]") and "](" not in bare)
    ):
        raise InvalidInput(f"template (title is a placeholder: {title!r})")


def _check_template_status(text: str) -> None:
    """Raise InvalidInput when a status is a template's list of choices or placeholder."""
    if text.strip("*_{}[]<> ") == "STATUS":
        raise InvalidInput(f"template (status is a placeholder: {text!r})")
    if "|" in text and len(set(_status_groups(text))) >= 2:
        raise InvalidInput(f"template (status lists the choices: {text!r})")


def _status_groups(text: str) -> list[str]:
    """Return every status group named in a text."""
    return [m.lastgroup for m in _STATUS_RE.finditer(text) if m.lastgroup]


# -- content ------------------------------------------------------------------------------------


def _cap_content(content: str, path: str) -> str:
    """Cap content at MAX_CONTENT_BYTES, cut at a line, with a note naming the file."""
    raw = content.encode("utf-8")
    if len(raw) <= MAX_CONTENT_BYTES:
        return content
    note = f"\n\n[… cut at {MAX_CONTENT_BYTES // 1024} KiB; the full record is {path}]"
    keep = raw[: MAX_CONTENT_BYTES - len(note.encode("utf-8"))].decode("utf-8", "ignore")
    cut = keep.rfind("\n")
    if cut > len(keep) // 2:
        keep = keep[:cut]
    return keep.rstrip() + note
