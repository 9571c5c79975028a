"""The Markdown of an ADR as its readers need it: front matter, lines by part, ``Key: value``.

This module owns splitting YAML front matter off (python-frontmatter's safe loader), telling
each body line's part of the record (title, heading, preamble, status, links, metadata, body;
fenced code and HTML comments blanked out), reading ``Key: value`` lines and table rows, and the
patterns and limits the other ADR modules share. It decides nothing about what a record means
(status, dates, relations: ``adrparse``, ``adrfields``, ``adrlinks``), reads no file and raises
only ``InvalidInput``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from engram.errors import InputTooLarge, InvalidInput

MAX_LIST_ITEMS: Final = 200
MAX_ITEM_CHARS: Final = 300
# A Markdown link, and a list item's or quote's opening marks: read by the status, relation,
# decider and file readers alike.
MD_LINK: Final = re.compile(
    r"!?\[(?P<text>[^\[\]\n]{0,300}+)\]\(\s*+<?(?P<url>[^)\s>\[]{0,1000}+)>?"
    r"(?:\s++(?:\"[^\"\n]*+\"|'[^'\n]*+'))?+\s*+\)"
)
LIST_PREFIX: Final = re.compile(r"^\s*(?:>\s*)*(?:[-*+]\s+|\d{1,3}[.)]\s+)?(?:[*_]{1,2}\s*)?")


@dataclass(frozen=True)
class Line:
    """A body line with what the metadata readers need to know about it."""

    raw: str
    meta: str | None  # the line without HTML comments; None inside a code fence
    zone: str  # title, heading, preamble, status, links, metadata or body


# -- front matter -------------------------------------------------------------------------------

_FM_OPEN: Final = re.compile(r"^-{3,}[ \t]*$")
_FM_CLOSE: Final = re.compile(r"^(?:-{3,}|\.{3})[ \t]*$")


def split_front_matter(text: str) -> tuple[list[str] | None, str, int]:
    """Split YAML front matter off: (its lines or None, the body, its first line's index)."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip()), 0)
    if not _FM_OPEN.match(lines[start]):
        return None, text, 0
    for end in range(start + 1, len(lines)):
        if _FM_CLOSE.match(lines[end]):
            return lines[start + 1 : end], "\n".join(lines[end + 1 :]), start + 1
    raise InvalidInput(f"broken YAML front matter: line {start + 1}: no closing '---' line")


def load_front_matter(lines: list[str], first_line: int) -> dict[str, Any]:
    """Parse front matter with python-frontmatter's YAML handler (safe loader)."""
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no type stubs

    from engram.config import load_front_matter as load_bounded

    try:
        value = load_bounded("\n".join(lines))
    except InputTooLarge as exc:  # anchors and aliases that expand too far (billion laughs)
        raise InvalidInput(f"broken YAML front matter: {exc.message}") from exc
    except yaml.YAMLError as exc:
        raise InvalidInput(f"broken YAML front matter: {_yaml_problem(exc, first_line)}") from exc
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. date: 2024-13-45
        raise InvalidInput(f"broken YAML front matter: {exc}") from exc
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(
            f"broken YAML front matter: a {type(value).__name__}, not a mapping of keys"
        )
    return {str(key).strip().lower(): item for key, item in value.items()}


def _yaml_problem(exc: Exception, first_line: int) -> str:
    """Describe a YAML error with line numbers counted in the ADR file."""
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["invalid YAML"])[0]
    mark = getattr(exc, "problem_mark", None)
    text = f"line {first_line + 1 + mark.line}: {problem}" if mark is not None else str(problem)
    context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and start is not None and (mark is None or start.line != mark.line):
        text += f" ({context} started on line {first_line + 1 + start.line})"
    return text


def scalar(value: Any) -> str:
    """Return a YAML scalar as one line of text ("" for a missing value or a container)."""
    if value is None or isinstance(value, dict | list | tuple | set):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return " ".join(str(value).split())


def scalars(value: Any) -> list[str]:
    """Return the scalars of a YAML value (a scalar or a flat list of them)."""
    if isinstance(value, list | tuple):
        return [text for item in value[:MAX_LIST_ITEMS] if (text := scalar(item))]
    text = scalar(value)
    return [text] if text else []


# -- body lines ---------------------------------------------------------------------------------

_FENCE: Final = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE: Final = re.compile(r"^\s*(`{3,}|~{3,})\s*$")
_ATX: Final = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+|$)(.*)$")
_SETEXT: Final = re.compile(r"^ {0,3}(=+|-{2,})[ \t]*$")
LIST_OR_QUOTE: Final = re.compile(r"^\s*(?:[-*+>|]|\d+[.)])(?:\s|$)")
_STATUS_SECTIONS: Final = frozenset(
    {"status", "state", "decision status", "adr status", "current status", "status history"}
)
_LINK_SECTIONS: Final = frozenset(
    {
        "links",
        "related",
        "related decisions",
        "related adrs",
        "related records",
        "related documents",
        "relations",
        "relationships",
        "see also",
        "references",
    }
)
_META_SECTIONS: Final = frozenset({"metadata", "meta", "adr metadata", "decision metadata"})


def body_lines(body: str) -> list[Line]:
    """Classify each body line: fenced or not, and which part of the ADR it belongs to."""
    raws = body.split("\n")
    metas = _meta_texts(raws)
    levels: list[int | None] = [_heading_level(meta) for meta in metas]
    # Setext headings: a single-line paragraph underlined with === or ---.
    for i in range(1, len(raws)):
        meta, above = metas[i], metas[i - 1]
        if meta is None or above is None or not _SETEXT.match(meta):
            continue
        if not above.strip() or levels[i - 1] is not None or LIST_OR_QUOTE.match(above):
            continue
        if i >= 2 and metas[i - 2] is not None and (metas[i - 2] or "").strip():
            continue
        levels[i - 1] = 1 if meta.strip().startswith("=") else 2
        levels[i] = 0  # the underline itself: part of the heading above
    title_at = next((i for i, level in enumerate(levels) if level == 1), None)
    if title_at is None:
        first = next((i for i, meta in enumerate(metas) if meta is None or meta.strip()), None)
        if first is not None and levels[first]:
            title_at = first
    out: list[Line] = []
    stack: list[tuple[int, str]] = []
    for i, raw in enumerate(raws):
        level = levels[i]
        if i == title_at:
            zone = "title"
        elif level == 0:
            zone = "heading"
        elif level is not None:
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, _section_name(heading_text(raws[i]))))
            zone = "heading"
        elif not stack:
            zone = "preamble"
        else:
            names = {name for _, name in stack}
            if names & _STATUS_SECTIONS:
                zone = "status"
            elif names & _LINK_SECTIONS:
                zone = "links"
            elif names & _META_SECTIONS:
                zone = "metadata"
            else:
                zone = "body"
        out.append(Line(raw=raw, meta=metas[i], zone=zone))
    return out


def _meta_texts(raws: list[str]) -> list[str | None]:
    """Return each line without HTML comments, or None for lines inside code fences."""
    out: list[str | None] = []
    fence: tuple[str, int] | None = None
    in_comment = False
    for raw in raws:
        if fence is not None:
            out.append(None)
            close = _FENCE_CLOSE.match(raw)
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= fence[1]:
                fence = None
            continue
        opening = _FENCE.match(raw)
        if opening and not in_comment:
            marks, info = opening.groups()
            if not (marks[0] == "`" and "`" in info):
                fence = (marks[0], len(marks))
                out.append(None)
                continue
        text, in_comment = _strip_comments(raw, in_comment)
        out.append(text)
    return out


def _strip_comments(text: str, in_comment: bool) -> tuple[str, bool]:
    """Blank out HTML comments in a line; say whether a comment is still open at its end."""
    parts: list[str] = []
    at = 0
    while True:
        if in_comment:
            end = text.find("-->", at)
            if end < 0:
                return "".join(parts), True
            at, in_comment = end + 3, False
        else:
            start = text.find("<!--", at)
            if start < 0:
                parts.append(text[at:])
                return "".join(parts), False
            parts.append(text[at:start] + " ")
            at, in_comment = start + 4, True


def _heading_level(meta: str | None) -> int | None:
    """Return the level of an ATX heading line, or None."""
    if meta is None:
        return None
    match = _ATX.match(meta)
    return len(match.group(1)) if match else None


def heading_text(raw: str) -> str:
    """Return a heading's text without its marks (ATX or setext)."""
    match = _ATX.match(raw)
    text = match.group(2) if match else raw
    text = " ".join(text.split())
    return re.sub(r"(?:^| )#+$", "", text).strip()


def _section_name(text: str) -> str:
    """Normalise a section heading for matching: no numbering, emphasis or colon."""
    text = re.sub(r"^[\d.\s]+", "", text.lower())
    return " ".join(text.replace("*", " ").replace("_", " ").replace(":", " ").split())


# -- key: value lines ---------------------------------------------------------------------------

# Possessive quantifiers (*+, ++) keep these linear on long runs of spaces or marks.
KEY_VALUE: Final = re.compile(
    r"^\s*+(?:>\s*+)*+(?:[-*+]\s++)?+[*_]{0,2}+\s*+(?P<key>[A-Za-z][A-Za-z \t_-]{0,30}?)"
    r"\s*+[*_]{0,2}+\s*+:\s*+(?P<value>.*)$"
)
_TABLE_ROW: Final = re.compile(
    r"^\s*+\|\s*+[*_]{0,2}+(?P<key>[A-Za-z][A-Za-z \t_-]{0,30}?)[*_]{0,2}+\s*+:?+\s*+\|"
    r"(?P<value>[^|]*+)\|?+\s*+$"
)
_KEYS: Final = {
    "status": "status",
    "state": "status",
    "date": "date",
    "decision date": "date",
    "last updated": "date",
    "updated": "date",
    "deciders": "deciders",
    "decision makers": "deciders",
    "decided by": "deciders",
    "tags": "tags",
}


def key_values(lines: list[Line]) -> dict[str, list[str]]:
    """Collect ``Key: value`` lines and table rows of the metadata parts, by engram field."""
    fields: dict[str, list[str]] = {}
    for index, line in enumerate(lines):
        if line.meta is None or line.zone not in ("preamble", "metadata", "status"):
            continue
        after = [other.meta or "" for other in lines[index + 1 : index + 3]]
        if after and is_table_separator(after[0]):
            # A header row: "| Status | Date |" over "| Accepted | 2024-03-01 |" sets both.
            keys = [_KEYS.get(_key_name(cell)) for cell in _table_cells(line.meta)]
            # In a Status section it is a history: the section's own reading picks the row.
            if line.zone != "status" and sum(key is not None for key in keys) >= 2 and after[1:]:
                for key, cell in zip(keys, _table_cells(after[1]), strict=False):
                    if key is not None and clean_value(cell):
                        fields.setdefault(key, []).append(clean_value(cell))
            continue
        match = KEY_VALUE.match(line.meta) or _TABLE_ROW.match(line.meta)
        name = field_of(line.meta)
        if match is None or name is None or (name == "status" and line.zone == "status"):
            continue
        value = clean_value(match.group("value"))
        if value:
            fields.setdefault(name, []).append(value)
    return fields


def _table_cells(text: str) -> list[str]:
    """Return the cells of a Markdown table row ([] when the line is not one)."""
    text = text.strip()
    if not text.startswith("|"):
        return []
    return [cell.strip() for cell in text.strip("|").split("|")]


def is_table_separator(text: str) -> bool:
    """Tell whether a line is a table's header separator (``|---|:--:|``)."""
    text = text.strip()
    return "-" in text and "|" in text and not set(text) - set("|:- \t")


def _key_name(text: str) -> str:
    """Normalise a metadata key: lowercase, no emphasis, colon, dashes or underscores."""
    text = text.replace("*", " ").replace(":", " ").replace("-", " ").replace("_", " ")
    return " ".join(text.lower().split())


def field_of(text: str) -> str | None:
    """Return the engram field a ``Key: value`` line or table row sets, or None."""
    match = KEY_VALUE.match(text) or _TABLE_ROW.match(text)
    return _KEYS.get(_key_name(match.group("key"))) if match else None


def clean_value(text: str) -> str:
    """Return a metadata value without surrounding emphasis, whitespace collapsed."""
    text = " ".join(text.replace("**", "").split())
    return text.strip("*_ ")
