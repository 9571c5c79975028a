"""What every format reader shares: the ``Converted`` result, import ids, times, text, titles.

``engram.formats.convert`` (the dispatcher), ``goimport`` and ``plain`` import these; none of
them imports another reader for them.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from engram.errors import EngramError, InvalidInput
from engram.model import (
    Record,
    canonical_line,
    format_time,
    normalize_fields,
    normalize_path,
    parse_line,
    parse_time,
)

MAX_CONTENT_BYTES: Final = 1_048_576  # the default of store.max_content_bytes
TITLE_CHARS: Final = 120
_FILE_KEYS: Final = ("files", "file", "file_path", "path", "paths")


@dataclass
class Converted:
    """Records converted from one file, the items left out, and the format read."""

    records: list[Record]
    skipped: list[str] = field(default_factory=list)
    format: str = ""
    notes: list[str] = field(default_factory=list)  # e.g. rows collapsed into one memory


def import_id(key: str) -> str:
    """Return the stable id (26 lowercase base32 characters) of the memory imported as ``key``."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()[:16]
    return base64.b32encode(digest).decode("ascii").rstrip("=").lower()


def sha_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def time_of(value: Any) -> str:
    """Return a Go time (``YYYY-MM-DD HH:MM:SS`` UTC or RFC 3339) as engram's RFC 3339 UTC."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"not a time: {value!r}")
    moment: datetime = parse_time(value)
    return format_time(moment)


def text_of(value: Any) -> str:
    """Return a Go string field as text (null and missing are empty)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int):
        return str(value)
    raise InvalidInput(f"expected text, got {type(value).__name__}")


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


_SECTION_WORDS: Final = frozenset(
    {"goal", "instructions", "discoveries", "accomplished", "next steps", "relevant files"}
)
# A `Label: text` line; never a URL's scheme (`mysql://…` is no label "mysql").
_LABEL: Final = re.compile(
    r"^(?:\*\*|__)?([A-Za-z ]+?)\s*(?::(?!//)\s*(?:\*\*|__)?|(?:\*\*|__)\s*:)\s*(.*)$"
)


def summary_line(text: str) -> str:
    """Return a summary's first line of substance: markdown marks and bare headings left out."""
    for line in text.splitlines():
        words = re.sub(r"^\s*(?:#{1,6}\s*|[-*+•]\s+|\d+[.)]\s+)", "", line).strip()
        label = _LABEL.match(words)
        if label and label.group(1).strip().lower() in _SECTION_WORDS:
            words = label.group(2)  # "**Goal:** ship it" -> "ship it"
        elif label:
            words = f"{label.group(1).strip()}: {label.group(2)}"  # "**Note:** x" -> "Note: x"
        words = words.strip(" *_#`:")
        if words and words.lower() not in _SECTION_WORDS:
            return words
    return ""


def scrubbed(text: str) -> str:
    """Return text with its secrets redacted, before a conversion splits, cuts or rewrites it.

    The store redacts every record it writes, but only what is left: half a key cut by a title's
    limit, a tag split off ``password: hunter`` or a URL whose ``//`` a path became ``/`` no
    longer match their rules.
    """
    from engram.store.redact import default_scrubber

    return default_scrubber().text(text)[0]


def clip_title(text: str, limit: int = TITLE_CHARS) -> str:
    """Return text on one line, at most ``limit`` characters, its secrets redacted first."""
    text = " ".join(scrubbed(text).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] or text[: limit - 1]
    return cut.rstrip() + "…"


def count_of(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def finish_record(record: Record, max_content_bytes: int) -> Record:
    """Validate a converted record as the store would read it; raise InvalidInput if it fails."""
    from engram.store.redact import scrub_record

    # Scrubbed before normalising (which lower-cases tags and could hide a key from the rules);
    # the store scrubs again with the user's extra patterns on the way in.
    record, _ = scrub_record(record)
    out = normalize_fields(record, max_content_bytes=max_content_bytes)
    try:
        parse_line(canonical_line(out), path="import", lineno=1)
    except EngramError as exc:
        raise InvalidInput(exc.message.removeprefix("import:1: ")) from exc
    return out


def files_of(row: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    for key in _FILE_KEYS:
        value = row.get(key)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if not isinstance(item, str) or not item.strip():
                continue
            try:
                path = normalize_path(scrubbed(item))
            except InvalidInput:
                continue  # absolute or escaping paths say nothing about this repository
            if path and path not in found:
                found.append(path)
    return found
