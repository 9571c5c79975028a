"""The canonical line format of memories.jsonl: canonical JSON, a line parsed and repaired.

README: one record per line, keys sorted, compact, raw UTF-8, a newline after each line; the
same record always gives the same bytes, and ``content_hash`` hashes those bytes without the
volatile fields. ``parse_line`` reads one raw line through the bounded JSON reader
(``engram.model.jsonlimits``) and refuses, naming file and line, what is not a record;
``recover_line`` repairs the few damages that can be repaired without guessing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final

from engram.errors import CorruptStore, InputTooLarge, InvalidInput
from engram.model.jsonlimits import MAX_JSON_DEPTH, check_json_limits, loads_line
from engram.model.record import VOLATILE, Record

_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_CONFLICT_PREFIXES: Final = (b"<<<<<<<", b"=======", b">>>>>>>", b"|||||||")
_ID_FIELD_RE: Final = re.compile(rb'"id":"([^"\\]*)"')


def dumps(record: Mapping[str, Any]) -> str:
    """Return the canonical JSON of a record (sorted keys, compact, raw UTF-8), no newline."""
    try:
        return json.dumps(
            record, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except ValueError as exc:
        raise InvalidInput(f"record {record.get('id', '?')} is not valid JSON: {exc}") from exc
    except RecursionError as exc:  # a record built in Python, not parsed (parsing is bounded)
        raise InputTooLarge(
            f"record {record.get('id', '?')} nests deeper than JSON allows ({MAX_JSON_DEPTH})"
        ) from exc


def canonical_line(record: Mapping[str, Any]) -> bytes:
    """Return the exact bytes of a record's line in memories.jsonl, newline included.

    A record over the JSON limits is refused (InputTooLarge): every reader would refuse its line.
    """
    try:
        line = (dumps(record) + "\n").encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"record {record.get('id', '?')} holds text that is not valid Unicode "
            f"(a lone surrogate at {exc.start})"
        ) from exc
    check_json_limits(line, what=f"record {record.get('id', '?')}")
    return line


def is_conflict_marker(line: bytes) -> bool:
    """Tell whether a raw line is a git conflict marker."""
    return line.startswith(_CONFLICT_PREFIXES)


def parse_line(line: bytes, *, path: str, lineno: int) -> Record:
    """Parse one raw line of memories.jsonl, raising CorruptStore naming file and line."""
    if is_conflict_marker(line):
        raise CorruptStore(
            f"{path}:{lineno}: git conflict marker {line[:7].decode('ascii', 'replace')!r}",
            path=path,
            line=lineno,
            hint="run `engram doctor --fix` to merge both sides",
        )
    try:
        value = loads_line(line, what=f"{path}:{lineno}")
    except InvalidInput as exc:  # InputTooLarge too: over the size or the depth limit
        raise CorruptStore(exc.message, path=path, line=lineno) from exc
    if (
        type(value) is dict
        and "id" in value
        and "updated_at" in value
        and "rev" in value
        and (
            value.get("deleted_at")
            or ("kind" in value and "title" in value and "created_at" in value)
        )
        and type(value["id"]) is str
        and _ID_RE.match(value["id"])
    ):
        return value  # every check below passes (the rebuild parses each line through here)
    if not isinstance(value, dict):
        raise CorruptStore(
            f"{path}:{lineno}: expected a JSON object, got {type(value).__name__}",
            path=path,
            line=lineno,
        )
    missing = [key for key in ("id", "updated_at", "rev") if key not in value]
    if not value.get("deleted_at"):
        missing += [key for key in ("kind", "title", "created_at") if key not in value]
    if missing:
        raise CorruptStore(
            f"{path}:{lineno}: missing required field(s) {', '.join(missing)}",
            path=path,
            line=lineno,
        )
    if not isinstance(value["id"], str) or not _ID_RE.match(value["id"]):
        raise CorruptStore(f"{path}:{lineno}: invalid id {value['id']!r}", path=path, line=lineno)
    return value


def line_id(line: bytes, *, path: str = "memories.jsonl", lineno: int = 0) -> str:
    """Return the top-level id of a canonical line without parsing all of it."""
    found = _ID_FIELD_RE.findall(line)
    if len(found) == 1:
        rid = bytes(found[0]).decode("utf-8", "replace")
        if _ID_RE.match(rid):
            return rid
    # Zero or several candidates (a nested "id" in some field), or an id no record may have
    # (bytes that are not UTF-8, say): parse to be sure, or to say what is wrong with the line.
    return str(parse_line(line, path=path, lineno=lineno)["id"])


def recover_line(line: bytes, *, path: str, lineno: int) -> tuple[Record, str]:
    """Repair a line that ``parse_line`` refuses, if the record in it is whole; say how.

    Three repairs, nothing else: a UTF-8 byte order mark (and surrounding whitespace) is
    removed, and bytes that are not UTF-8 or lone surrogate escapes (``\\ud800``) are replaced
    with U+FFFD, only if the line then parses as a record; the replaced text is visibly marked
    rather than guessed. Anything else (not JSON,
    too deep, fields missing) raises the CorruptStore of ``parse_line``.
    """
    body = line.strip()
    done = []
    if body.startswith(b"\xef\xbb\xbf"):
        while body.startswith(b"\xef\xbb\xbf"):
            body = body[3:].strip()
        done.append("removed a UTF-8 byte order mark")
    try:
        return parse_line(body, path=path, lineno=lineno), "; ".join(done)
    except CorruptStore:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            pass  # bad bytes: recovered below by replacing them
        else:
            fixed = _without_surrogates(body)
            if fixed is None:
                raise
            body, runs = fixed
            record = parse_line(body, path=path, lineno=lineno)
            done.append(f"replaced {runs} lone surrogate escape(s) with U+FFFD")
            return record, "; ".join(done)
    text = body.decode("utf-8", "replace")
    record = parse_line(text.encode("utf-8"), path=path, lineno=lineno)
    runs = text.count("\ufffd") - body.count("\ufffd".encode())  # U+FFFD already there aside
    done.append(f"replaced {runs} invalid UTF-8 byte run(s) with U+FFFD")
    return record, "; ".join(done)


_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")


def _without_surrogates(body: bytes) -> tuple[bytes, int] | None:
    """Return a line's JSON with each lone surrogate replaced by U+FFFD, and how many; or None.

    None when the line holds none (or is not JSON): the json module reads a pair of surrogate
    escapes as the one character they stand for, so what is left in its strings is lone.
    """
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    text = json.dumps(value, ensure_ascii=False)
    fixed, runs = _SURROGATE_RE.subn("\ufffd", text)
    if not runs:
        return None
    return fixed.encode("utf-8"), runs


def content_hash(record: Mapping[str, Any]) -> str:
    """Hash a record's meaning: its canonical fields with the volatile ones left out."""
    stable = {key: value for key, value in record.items() if key not in VOLATILE}
    return hashlib.sha256(dumps(stable).encode("utf-8")).hexdigest()
