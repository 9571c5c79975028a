"""Go engram's view of a record: its integer ids, a type as another tool writes it, its pin.

Go engram names memories by integers and lets a user invent any type; engram keeps its own ids
and kinds and shows Go the same memory through these functions (README: Go engram
compatibility). The same id always gives the same integer.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

from engram.errors import InvalidInput
from engram.model.record import DEFAULT_KIND, kind_of, normalize_kind

# Longest foreign type kept as written (Go engram lets a user invent any string).
MAX_TYPE_CHARS: Final = 64


def kind_and_type(value: object, *, default: str = DEFAULT_KIND) -> tuple[str, str | None]:
    """Split another tool's type into the kind engram ranks it as and the type as written.

    README: a type engram knows (or an alias of one) is its kind, and nothing more is
    kept when it is written exactly as that kind. Any other string (Go engram's ``command``,
    ``file_change``, ``passive``, ``manual``, a user's own) ranks as ``default`` or as its
    alias's kind, and is returned as written, stripped, so it goes back out unchanged (the
    record's ``type`` field). An empty value is the default kind.
    """
    text = " ".join(str(value if value is not None else "").split())
    if not text:
        return default, None
    if len(text) > MAX_TYPE_CHARS:
        raise InvalidInput(f"type is {len(text)} characters long; at most {MAX_TYPE_CHARS}")
    try:
        kind = normalize_kind(text)
    except InvalidInput:
        return default, text
    return kind, (None if text == kind else text)


def type_of(record: Mapping[str, Any]) -> str:
    """Return the type another tool should see: the type as written, else the kind."""
    written = record.get("type")
    if isinstance(written, str) and written.strip():
        return written
    return kind_of(record)


GO_ID_HEX: Final = 15  # hex digits of a Go view's integer id: 60 bits, inside Go's int64
_HEX32_RE: Final = re.compile(r"^[0-9a-f]{32}$")


def id_hex(record_id: str) -> str:
    """Return the 32 hex digits of an id: its 128 bits (base32 or hex), else its sha256."""
    text = str(record_id).strip().lower()
    if _HEX32_RE.match(text):
        return text
    if len(text) == 26:
        try:
            raw = base64.b32decode(text.upper() + "======")
        except ValueError:
            raw = b""
        if len(raw) == 16:
            return raw.hex()
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def go_int_id(record_id: str) -> int:
    """Return the stable integer a Go engram view shows for an engram id.

    The first ``GO_ID_HEX`` hex digits of the id's 128 bits (an id that is neither base32 nor
    hex of 128 bits: of its sha256), as an integer: the same id always gives the same number.
    """
    return int(id_hex(record_id)[:GO_ID_HEX], 16)


def go_id_of(record: Mapping[str, Any]) -> int:
    """Return a memory's Go integer id: the one it was imported with, else ``go_int_id``."""
    go = record.get("go")
    if isinstance(go, Mapping):
        value = go.get("id")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value.strip())
    return go_int_id(str(record.get("id", "")))


def is_pinned(record: Mapping[str, Any]) -> bool:
    """Tell whether a memory is pinned: ``pinned: true``, or Go's pin kept on import."""
    if record.get("pinned") is True:
        return True
    go = record.get("go")
    return isinstance(go, Mapping) and go.get("pinned") not in (None, False, 0, "", "0", "false")
