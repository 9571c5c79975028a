"""An ADR's title, number and date, its deciders and its tags, read from names and values.

This module owns the number or date a file name starts with, a title cleaned of its prefix (or
made from the file name), the dates written in text or front matter (ISO, month names,
day-first), and the decider and tag lists. It reads no file, raises nothing, and knows nothing
of statuses or relations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any, Final

from engram.errors import InvalidInput
from engram.indexer.adrtext import MAX_ITEM_CHARS, MD_LINK, clean_value, scalars
from engram.model import format_time, parse_time

MAX_TITLE_CHARS: Final = 200


# -- titles, numbers and dates ------------------------------------------------------------------

NAME_NUMBER: Final = re.compile(r"^(?:adr|dr|rfc)?[-_ ]?0*(\d{1,6})(?=$|[-_. ])", re.IGNORECASE)
NAME_DATE: Final = re.compile(r"^(\d{4})-?(\d{2})-?(\d{2})(?=$|[-_. ])")
_TITLE_ADR: Final = re.compile(
    r"^\[?\s*adr[\s_#-]{0,3}(\d{1,9})\s*\]?\s*(?:[.:)–—-]\s*|\s+|$)", re.IGNORECASE
)
_TITLE_NUMBER: Final = re.compile(r"^#?(\d{1,9})(\s*[.:)–—](?!\d)\s*|\s+[-–—]\s+|-(?=[^\d\s])|\s+)")
_TITLE_DATE: Final = re.compile(r"^\d{4}-\d{2}-\d{2}(?:\s*[:.–—-]\s*|\s+)")


def number_and_date(name: str) -> tuple[int | None, str | None]:
    """Return the number or the date an ADR's file name starts with."""
    stem = name.rsplit(".", 1)[0]
    dated = NAME_DATE.match(stem)
    if dated:
        moment = _make_date(*dated.groups())
        if moment is not None:
            return None, moment
    numbered = NAME_NUMBER.match(stem)
    return (int(numbered.group(1)) if numbered else None), None


def clean_title(title: str, number: int | None) -> str:
    """Strip an ADR title of its number ("7. ", "ADR-0007: ", "0007 ") or date prefix."""
    title = " ".join(title.split())
    rest = title
    adr = _TITLE_ADR.match(title)
    if adr:
        rest = title[adr.end() :]
    elif dated := _TITLE_DATE.match(title):
        rest = title[dated.end() :]
    elif bare := _TITLE_NUMBER.match(title):
        digits, separator = bare.groups()
        # "# 3 ways to cache" keeps its number; "# 0003 Use X" and "# 3. Use X" do not.
        if separator.strip() or digits.startswith("0") or int(digits) == number:
            rest = title[bare.end() :]
    rest = rest.strip(" -–—:.")
    if len(rest) > MAX_TITLE_CHARS:
        from engram.store.redact import default_scrubber

        # Redacted before the cut: half a key no longer matches its rule, and would be stored.
        rest = default_scrubber().text(rest)[0]
    if len(rest) > MAX_TITLE_CHARS:
        rest = rest[: MAX_TITLE_CHARS - 1].rstrip() + "…"
    return rest


def title_from_name(name: str) -> str:
    """Make a title from a file name: "0005-use-postgres.md" → "Use postgres"."""
    stem = name.rsplit(".", 1)[0]
    stem = NAME_DATE.sub("", stem) if NAME_DATE.match(stem) else NAME_NUMBER.sub("", stem)
    words = " ".join(stem.replace("-", " ").replace("_", " ").split())
    return (words[:1].upper() + words[1:])[:MAX_TITLE_CHARS] or name


_MONTHS: Final = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH: Final = (
    r"(?P<{name}>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?"
)
DATES: Final = re.compile(
    "|".join(
        (
            r"(?<![\d.])(?P<y1>\d{4})[-/.](?P<m1>\d{1,2})[-/.](?P<d1>\d{1,2})(?!\d)",
            r"(?<![\d./-])(?P<a4>\d{1,2})(?P<sep>[/.])(?P<b4>\d{1,2})(?P=sep)(?P<y4>\d{4})(?!\d)",
            r"(?<!\d)(?P<d2>\d{1,2})(?:st|nd|rd|th)?\s+"
            + _MONTH.format(name="m2")
            + r",?\s+(?P<y2>\d{4})(?!\d)",
            r"\b"
            + _MONTH.format(name="m3")
            + r"\s+(?P<d3>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y3>\d{4})(?!\d)",
        )
    ),
    re.IGNORECASE,
)


def _make_date(year: str, month: str, day: str) -> str | None:
    """Return a date as engram's RFC 3339 UTC midnight, or None when it is not a real date."""
    try:
        moment = datetime(int(year), int(month), int(day), tzinfo=UTC)
    except ValueError:
        return None
    return format_time(moment) if 1900 <= moment.year <= 2999 else None


def date_in(text: str) -> str | None:
    """Return the first real date written in a text.

    ISO (2024-03-01, 2024/03/01), an English month name (1 March 2024, March 1, 2024), or
    day first with slashes or dots (01/03/2024, 1.3.2024: adr-tools' old default and the
    German style); month first only when the day-first reading cannot be a date (03/25/2024).
    """
    for match in DATES.finditer(text):
        g = match.groupdict()
        if g["y1"]:
            found = _make_date(g["y1"], g["m1"], g["d1"])
        elif g["y4"]:
            found = _make_date(g["y4"], g["b4"], g["a4"]) or _make_date(g["y4"], g["a4"], g["b4"])
        elif g["y2"]:
            found = _make_date(g["y2"], str(_MONTHS[g["m2"][:3].lower()]), g["d2"])
        else:
            found = _make_date(g["y3"], str(_MONTHS[g["m3"][:3].lower()]), g["d3"])
        if found:
            return found
    return None


def date_value(value: Any) -> str | None:
    """Return a front-matter date (a YAML date, datetime or text) as RFC 3339 UTC."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return format_time(moment) if 1900 <= moment.year <= 2999 else None
    if isinstance(value, date):
        return _make_date(str(value.year), str(value.month), str(value.day))
    if isinstance(value, str) and len(value) < 200:
        if re.match(r"^\s*\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}", value):
            try:
                return date_value(parse_time(value))
            except InvalidInput:
                pass  # not a time after all: look for a date in the text instead
        return date_in(value)
    return None


# -- deciders and tags --------------------------------------------------------------------------

_NAME_SPLIT: Final = re.compile(r"\s*(?:[,;]|\band\b|&)\s*", re.IGNORECASE)


def decider_names(values: Iterable[Any]) -> list[str]:
    """Return decider names from YAML values and ``Deciders:`` lines, in order, once each."""
    names: list[str] = []
    seen: set[str] = set()
    for value in values:
        for text in scalars(value):
            text = MD_LINK.sub(lambda link: link.group("text"), text)
            for part in _NAME_SPLIT.split(text):
                name = clean_value(part).strip(" .")
                if not name or name.startswith(("{", "[", "<")) or len(name) > MAX_ITEM_CHARS:
                    continue
                if name.casefold() not in seen:
                    seen.add(name.casefold())
                    names.append(name)
    return names[:50]


def tag_names(values: Iterable[Any]) -> list[str]:
    """Return ``adr`` and the front-matter tags, lowercase, sorted, once each."""
    tags = {"adr"}
    for value in values:
        for text in scalars(value):
            for part in re.split(r"[,;]", text) if isinstance(value, str) else [text]:
                tag = " ".join(part.strip().lstrip("#").lower().split())
                if tag and len(tag) <= MAX_ITEM_CHARS and not tag.startswith(("{", "[")):
                    tags.add(tag)
    return sorted(tags)[:50]
