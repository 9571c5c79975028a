"""The memory record: kinds, statuses, links, canonical JSON, ids, hashes and validation.

A memory is a plain ``dict`` (``Record``) so that unknown fields survive every read and write
verbatim (README). This module owns the canonical line format of memories.jsonl
(README) and the rules that turn caller input into a valid record. It does no I/O and
imports nothing from engram but ``errors``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from engram.errors import CorruptStore, InputTooLarge, InvalidInput

Record = dict[str, Any]

KINDS: Final = (
    "decision",
    "pitfall",
    "principle",
    "pattern",
    "bugfix",
    "architecture",
    "fact",
    "discovery",
    "config",
    "preference",
    "insight",
    "session",
    "prompt",
    "note",
)

# Names other memory tools use for the same kinds (go-engram types, engram-rs memory_type, …).
KIND_ALIASES: Final = {
    "antipattern": "pitfall",
    "anti-pattern": "pitfall",
    "gotcha": "pitfall",
    "warning": "pitfall",
    "learning": "discovery",
    "context": "fact",
    "manual": "note",
    "bug": "bugfix",
    "fix": "bugfix",
    "adr": "decision",
    "rule": "principle",
    "convention": "pattern",
    "summary": "session",
    "session_summary": "session",
    "configuration": "config",
    "observation": "note",
}

STATUSES: Final = ("active", "proposed", "rejected", "superseded", "archived")
SCOPES: Final = ("project", "personal")
LINK_RELS: Final = ("supersedes", "relates", "caused_by", "fixes", "derived_from", "contradicts")
REQUIRED: Final = ("id", "kind", "title", "created_at", "updated_at", "rev")

# Fields that change without the memory's meaning changing; left out of the content hash.
VOLATILE: Final = frozenset(
    {
        "id",
        "created_at",
        "updated_at",
        "rev",
        "duplicate_count",
        "judgements",
        "history",
        "session_id",
        "author",
        "anchors",
        "source",
    }
)

MAX_TITLE_CHARS: Final = 500
MAX_LIST_ITEMS: Final = 200
MAX_ITEM_CHARS: Final = 500
_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_PREFIX_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_CONFLICT_PREFIXES: Final = (b"<<<<<<<", b"=======", b">>>>>>>", b"|||||||")
_ID_FIELD_RE: Final = re.compile(rb'"id":"([^"\\]*)"')

# Limits on every JSON document engram reads (memories.jsonl lines, chunks, manifests, imports,
# daemon, HTTP and MCP requests). A memory nests 3 or 4 levels (record → links → link; a Go
# engram chunk → observations → observation → payload), so 64 is far above anything real and
# far below where a recursive parser or dumper overflows the stack (about 1,000).
MAX_JSON_DEPTH: Final = 64
# A file that holds many records in ONE document (an export, a Go engram chunk): deep enough
# that a record nested too deep is skipped on its own (checked against MAX_JSON_DEPTH as it is
# converted), shallow enough for the json module's recursive fallback.
MAX_DOCUMENT_DEPTH: Final = 256
# One record, history and kept conflicts included; the same as the decompressed size of a chunk
# (engram.sync.chunks.MAX_CHUNK_BYTES): a record over it could never travel through sync.
MAX_RECORD_BYTES: Final = 64 * 1024 * 1024
# The depth scan, linear in the length of the text (issue 28: a scan that retried a string at
# every escaped quote read a 64 KB line for seconds). Escapes are blanked out first, keeping
# every offset: what is left of a string is quote, text without quotes, quote, and a split on
# quotes separates strings from what lies between them. A string left open runs to the end.
_BLANK_ESCAPES: Final = ((b"\\\\", b"__"), (b'\\"', b"__"))
# Brackets as ``[`` and ``]``, every other byte as ``_``: the same offsets, only the nesting.
_BRACKETS_ONLY: Final = bytes(
    {ord("["): ord("["), ord("{"): ord("["), ord("]"): ord("]"), ord("}"): ord("]")}.get(
        byte, ord("_")
    )
    for byte in range(256)
)
_ALL_BLANK: Final = bytes([ord("_")] * 256)
_RUN_RE: Final = re.compile(rb"\[+|\]+")
_SPACED_RUN_RE: Final = re.compile(rb"\[[\[_]*+|\][\]_]*+")  # a run, other bytes between
# Few enough runs of brackets to walk them one by one (else a pass removes innermost pairs).
_WALK_RUNS: Final = 4096


def _nesting(raw: bytes) -> bytes:
    """Return JSON text as ``[``, ``]`` and ``_`` at the same offsets: strings are all ``_``."""
    for escape, blank in _BLANK_ESCAPES:
        if escape in raw:
            raw = raw.replace(escape, blank)
    parts = raw.split(b'"')
    if len(parts) > 1:
        parts[1::2] = [part.translate(_ALL_BLANK) for part in parts[1::2]]
        raw = b"_".join(parts)
    return raw.translate(_BRACKETS_ONLY)


def _nests_deeper(nesting: bytes, limit: int) -> bool:
    """Tell whether brackets (``[``, ``]``, ``_`` between) nest deeper than ``limit``.

    A closer with nothing open is ignored (a parser stops there). Every opener is closed at
    the end; a pass removes every innermost pair at once, in C, lowering the deepest nesting
    by exactly one, while the brackets form many short runs; few runs are walked run by run.
    Each pass shortens the text by a sixteenth at least, so the whole costs linear time.
    """
    text = nesting.translate(None, b"_")
    text += b"]" * text.count(b"[")
    passes = 0
    while b"[" in text:
        if passes > limit:
            return True
        runs = text.count(b"[]") + text.count(b"][") + 1
        if runs <= _WALK_RUNS or runs * 16 <= len(text):
            depth = 0
            for run in _RUN_RE.finditer(text):
                size = run.end() - run.start()
                if text[run.start()] == 91:  # "["
                    depth += size
                    if passes + depth > limit:
                        return True
                else:
                    depth = max(0, depth - size)
            return False
        text = text.replace(b"[]", b"")
        passes += 1
    return passes > limit


def json_depth_exceeded(data: bytes | str, limit: int = MAX_JSON_DEPTH) -> int | None:
    """Return the offset where JSON text nests deeper than ``limit`` containers, else None.

    A byte scan before parsing, never recursive and linear: each byte is read a bounded number
    of times, brackets inside strings do not count, a string left open runs to the end and a
    closer with nothing open is ignored. Text with no more than ``limit`` brackets in all
    (every real record) costs two ``count`` calls. Only text found too deep is walked again,
    run of brackets by run, to the offset where it gets too deep.
    """
    if isinstance(data, str):
        raw = data.encode("utf-8", "surrogatepass")
    else:
        raw = data if isinstance(data, bytes) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return None
    nesting = _nesting(raw)
    if not _nests_deeper(nesting, limit):
        return None
    depth = 0
    for run in _SPACED_RUN_RE.finditer(nesting):
        size = run.group().count(b"[")
        if not size:
            depth = max(0, depth - run.group().count(b"]"))
        elif depth + size > limit:
            offset = run.start()
            for _ in range(limit - depth):
                offset = nesting.index(b"[", offset) + 1
            return nesting.index(b"[", offset)
        else:
            depth += size
    return None  # not reached: both passes count the same brackets


def value_too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Tell whether a parsed JSON value nests more than ``limit`` containers (not recursive)."""
    level = [value] if isinstance(value, dict | list | tuple) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, dict | list | tuple):
                    below.append(child)
        level = below
    return False


_REQUEST_NAME_RE: Final = re.compile(
    rb'"(id|method)"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?[0-9]{1,30})'
)


def peek_request(line: bytes) -> tuple[Any, str]:
    """Return the id and method of a JSON-RPC request too deep to parse, as far as readable."""
    try:
        import orjson

        obj = orjson.loads(line)  # not recursive; refuses more than 1,024 levels
        if isinstance(obj, dict):
            rid, method = obj.get("id"), obj.get("method")
            valid = rid is None or (
                isinstance(rid, str | int | float) and not isinstance(rid, bool)
            )
            return (rid if valid else None), (method if isinstance(method, str) else "")
    except ValueError:
        pass  # not JSON at all (or too deep to parse): look for the names in the text
    found: dict[bytes, Any] = {}
    for key, value in _REQUEST_NAME_RE.findall(line[:4096]):
        try:
            found.setdefault(key, json.loads(value))
        except ValueError:
            continue
    method = found.get(b"method")
    return found.get(b"id"), method if isinstance(method, str) else ""


def check_json_limits(
    data: bytes | str,
    *,
    what: str,
    max_bytes: int = MAX_RECORD_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> None:
    """Refuse JSON text over ``max_bytes`` or nested deeper than ``max_depth`` (InputTooLarge).

    ``what`` names the input in the message: a file and line, a request, a chunk record.
    """
    size = len(data)
    if size > max_bytes:
        raise InputTooLarge(f"{what}: {size:,} bytes of JSON is over the limit of {max_bytes:,}")
    if type(data) is bytes and data.count(b"[") + data.count(b"{") <= max_depth:
        return  # the common case, without a call: too few brackets to nest too deep
    offset = json_depth_exceeded(data, max_depth)
    if offset is not None:
        raise InputTooLarge(
            f"{what}: JSON nested deeper than {max_depth} levels (at byte {offset}); refused"
        )


def has_float(value: Any) -> bool:
    """Tell whether a parsed JSON value holds a float anywhere (records normally hold none)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is float:
            return True
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return False


class _TooDeep(ValueError):
    """orjson parsed it, but it nests deeper than the limit (turned into InputTooLarge)."""


def _refuse_deep(text: bytes | str, *, what: str, max_depth: int) -> InputTooLarge:
    """Return the InputTooLarge for text found too deep, with the offset the byte scan finds."""
    offset = json_depth_exceeded(text, max_depth)
    at = f" (at byte {offset})" if offset is not None else ""
    return InputTooLarge(f"{what}: JSON nested deeper than {max_depth} levels{at}; refused")


def _floats_and_depth(value: Any, limit: int) -> tuple[bool, bool]:
    """Return (holds a float, nests more than ``limit`` containers) for a parsed JSON value.

    One walk, level by level and not recursive: the has_float walk the index rebuild pays for
    anyway, with the depth counted on the way.
    """
    level = [value]
    depth = 0
    floats = False
    while level:
        below: list[Any] = []
        containers = False
        for item in level:
            kind = type(item)
            if kind is dict:
                below.extend(item.values())
                containers = True
            elif kind is list:
                below.extend(item)
                containers = True
            elif kind is float:
                floats = True
        if containers:
            depth += 1
            if depth > limit:
                return floats, True
        level = below
    return floats, False


def _fast_loads(line: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON with orjson (several times faster than json on the index rebuild path).

    orjson reads integers wider than 64 bits as floats, so a result holding any float is parsed
    again by the standard parser, which keeps such integers exact (and reads floats the same).
    orjson itself is not recursive and refuses more than 1,024 levels; deeper than ``max_depth``
    raises _TooDeep (the caller names the input). Whatever orjson refuses raises ValueError: a
    caller falling back on the json module must check the limits first, as it recurses.
    """
    import orjson

    value = orjson.loads(line)
    floats, deep = _floats_and_depth(value, max_depth)
    if deep:
        raise _TooDeep
    if floats:
        return json.loads(line)
    return value


def loads(
    text: bytes | str,
    *,
    what: str = "JSON input",
    max_bytes: int = MAX_RECORD_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """Parse JSON: orjson when it is exact, else the json module; within the JSON limits.

    Raises InputTooLarge (a ValueError) over ``max_bytes`` or ``max_depth``, before the
    recursive json module sees the text; ``what`` names the input in that message.
    """
    if len(text) > max_bytes:
        check_json_limits(text, what=what, max_bytes=max_bytes, max_depth=max_depth)
    try:
        return _fast_loads(text, max_depth=max_depth)
    except _TooDeep:
        raise _refuse_deep(text, what=what, max_depth=max_depth) from None
    except ValueError:  # what orjson refuses, e.g. a lone surrogate escape or 1,025 levels
        return _slow_loads(text, what=what, max_depth=max_depth)


def _slow_loads(text: bytes | str, *, what: str, max_depth: int) -> Any:
    """Parse with the json module what orjson refuses, within ``max_depth``.

    No scan first (that would read the text once more): the json module's C scanner counts
    its own recursion and raises RecursionError long before the stack runs out (about 1,000
    levels), and the depth of what it returns is checked as orjson's is. So refusing text,
    valid or not, costs one orjson attempt and one json attempt, both linear.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise _refuse_deep(text, what=what, max_depth=max_depth) from None
    if value_too_deep(value, max_depth):
        raise _refuse_deep(text, what=what, max_depth=max_depth)
    return value


def lone_surrogate(value: Any) -> str | None:
    """Return the first lone surrogate in a parsed JSON value's keys and strings, else None.

    The json module reads an escape such as ``\\ud800`` into a str that no UTF-8 file, index
    or hash can hold; orjson refuses it. One dump and encode, in C.
    """
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return str(exc.object[exc.start : exc.end])
    except (ValueError, TypeError, RecursionError):
        return None  # not a JSON value this function is about
    return None


def check_unicode(value: Any) -> None:
    """Refuse (InvalidInput) a parsed JSON value holding a lone surrogate: one bad item."""
    surrogate = lone_surrogate(value)
    if surrogate is not None:
        raise InvalidInput(not_unicode(surrogate), hint="fix or remove that text, then retry")


def not_unicode(surrogate: str) -> str:
    """Return the words for a lone surrogate found in text: which escape, and why it is bad."""
    escape = "".join(f"\\u{ord(char):04x}" for char in surrogate)
    return f"text holds {escape}, a lone surrogate escape, which is not valid Unicode"


def new_id() -> str:
    """Return a fresh id: 128 random bits in lowercase base32 (26 characters)."""
    return base64.b32encode(os.urandom(16)).decode("ascii").rstrip("=").lower()


def now() -> str:
    """Return the current UTC time as RFC 3339 with milliseconds (``…T…Z``)."""
    return format_time(datetime.now(UTC))


def change_time(*seen: object, stamp: str | None = None) -> str:
    """Return the time to stamp on a change made after seeing ``seen``: a hybrid logical clock.

    ``stamp`` (default: now), unless a time seen is not earlier than it: then 1 ms after the
    latest time seen. A change made after seeing another is therefore always later than it, also
    on a machine whose clock is behind, and the merge function (which orders changes by this
    time) never lets it lose to what it replaced. Seen values that are not times are ignored.
    """
    current = stamp if stamp is not None else now()
    latest: datetime | None = None
    for value in seen:
        if isinstance(value, str) and value:
            try:
                moment = parse_time(value)
            except InvalidInput:
                continue
            latest = moment if latest is None or moment > latest else latest
    if latest is None:
        return current
    try:
        step = latest + timedelta(milliseconds=1)
    except OverflowError:
        return current
    try:
        if parse_time(current) >= step:
            return current
    except InvalidInput:
        pass  # a ``stamp`` that is not a time: the step after what was seen stands
    return format_time(step)


def format_time(moment: datetime) -> str:
    """Render an aware datetime as the RFC 3339 UTC string engram stores."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_time(value: str) -> datetime:
    """Parse an RFC 3339 (or ``YYYY-MM-DD HH:MM:SS`` UTC) string into an aware datetime."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidInput(f"not an RFC 3339 time: {value!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


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
        if len(line) > MAX_RECORD_BYTES:
            check_json_limits(line, what=f"{path}:{lineno}")
        # The depth is checked on orjson's result (the index rebuild parses every line).
        value = _fast_loads(line)
    except InputTooLarge as exc:
        raise CorruptStore(exc.message, path=path, line=lineno) from exc
    except _TooDeep:
        what = f"{path}:{lineno}"
        message = _refuse_deep(line, what=what, max_depth=MAX_JSON_DEPTH).message
        raise CorruptStore(message, path=path, line=lineno) from None
    except ValueError:
        # orjson refused it: let the standard parser say exactly why (or accept what orjson
        # does not, such as integers wider than 64 bits in an unknown field), within the
        # depth limit (orjson refuses 1,025 levels).
        what = f"{path}:{lineno}"
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptStore(
                f"{what}: invalid UTF-8 at byte {exc.start}", path=path, line=lineno
            ) from exc
        try:
            value = _slow_loads(text, what=what, max_depth=MAX_JSON_DEPTH)
        except InputTooLarge as exc:
            raise CorruptStore(exc.message, path=path, line=lineno) from exc
        except ValueError as exc:
            raise CorruptStore(f"{what}: not JSON: {exc}", path=path, line=lineno) from exc
        surrogate = lone_surrogate(value)
        if surrogate is not None:
            message = f"{what}: {not_unicode(surrogate)}"
            raise CorruptStore(message, path=path, line=lineno) from None
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


def check_id(value: str) -> str:
    """Validate a full id or an id prefix typed by a user or agent."""
    text = str(value).strip()
    if not _PREFIX_RE.match(text):
        raise InvalidInput(f"not a memory id: {value!r}")
    return text


def is_tombstone(record: Mapping[str, Any]) -> bool:
    """Tell whether a record is a tombstone (a deleted memory)."""
    return bool(record.get("deleted_at"))


def normalize_kind(value: str) -> str:
    """Map a kind or an alias from another tool onto one of KINDS."""
    key = str(value).strip().lower().replace(" ", "_")
    key = KIND_ALIASES.get(key, key)
    if key not in KINDS:
        raise InvalidInput(
            f"unknown kind {value!r}; use one of: {', '.join(KINDS)}",
            hint="aliases such as antipattern, learning, context are accepted too",
        )
    return key


# Longest foreign type kept as written (Go engram lets a user invent any string).
MAX_TYPE_CHARS: Final = 64


def kind_and_type(value: object, *, default: str = "note") -> tuple[str, str | None]:
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
    return str(record.get("kind") or "note")


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


def normalize_content(text: str) -> str:
    """Return content as compared for duplicates: whitespace collapsed, case folded."""
    return " ".join(text.split()).casefold()


def content_hash(record: Mapping[str, Any]) -> str:
    """Hash a record's meaning: its canonical fields with the volatile ones left out."""
    stable = {key: value for key, value in record.items() if key not in VOLATILE}
    return hashlib.sha256(dumps(stable).encode("utf-8")).hexdigest()


def dedupe_key(record: Mapping[str, Any]) -> str:
    """Hash what makes two saves the same memory: kind, title, normalised content, scope."""
    parts = [
        str(record.get("kind", "")),
        normalize_content(str(record.get("title", ""))),
        normalize_content(str(record.get("content", ""))),
        str(record.get("project", "")),
        str(record.get("scope", "project")),
    ]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def _check_text(field: str, value: Any, *, limit: int, required: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"field {field!r} must be text, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInput(
            f"field {field!r} looks binary (NUL byte at character {value.index(chr(0))})",
            hint="store text; put binary artefacts in the repo and cite their path in files",
        )
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"field {field!r} is not valid Unicode (lone surrogate at {exc.start})"
        ) from exc
    if size > limit:
        raise InvalidInput(
            f"field {field!r} is {size:,} bytes; the limit is {limit:,}",
            hint="store a summary and cite the file; raise store.max_content_bytes if needed",
        )
    if required and not value.strip():
        raise InvalidInput(f"field {field!r} must not be empty")
    return value


def _string_list(field: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [part for part in value.split(",")]
    if not isinstance(value, list | tuple):
        raise InvalidInput(f"field {field!r} must be a list of strings")
    items: list[str] = []
    for item in value:
        text = _check_text(field, item, limit=MAX_ITEM_CHARS).strip()
        if text and text not in items:
            items.append(text)
    if len(items) > MAX_LIST_ITEMS:
        raise InvalidInput(f"field {field!r} has {len(items)} items; the limit is {MAX_LIST_ITEMS}")
    return sorted(items)


def normalize_path(value: str) -> str:
    """Return a repo-relative path or glob; refuse absolute paths and ones escaping the repo."""
    text = value.strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    if text.startswith("/") or re.match(r"^[A-Za-z]:/", text):
        raise InvalidInput(f"file {value!r} must be relative to the repository root")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidInput(f"file {value!r} leaves the repository ('..' is not allowed)")
    return "/".join(parts)


def repo_path(
    value: str, root: os.PathLike[str] | str, cwd: os.PathLike[str] | str | None = None
) -> str:
    """Return a path or glob as agents send it, relative to the repository ``root``.

    An absolute path must lie inside the root (as written, or once symlinks are resolved); a
    relative one is taken from ``cwd`` when that is a folder inside the root (``cd ledger``
    then ``money.py`` is ``ledger/money.py``), else from the root. The result is what
    ``normalize_path`` stores; a path outside the repository is refused with the root named.
    """
    text = value.strip().replace("\\", "/")
    if not text:
        return ""
    top = os.path.abspath(root)
    if text.startswith("/") or re.match(r"^[A-Za-z]:/", text):
        inside = _inside(text, top)
        if inside is None:
            raise InvalidInput(
                f"file {value!r} is outside the repository {top}",
                hint="give a path inside the repository, absolute or relative to it",
            )
        text = inside
    elif cwd is not None:
        here = _inside(os.path.abspath(cwd), top)
        if here:
            joined = os.path.normpath(os.path.join(here, text)).replace(os.sep, "/")
            if joined == ".." or joined.startswith("../"):
                raise InvalidInput(
                    f"file {value!r} (from {os.path.abspath(cwd)}) is outside the repository {top}",
                    hint="give a path inside the repository, absolute or relative to it",
                )
            text = joined
    return normalize_path(text)


def _inside(path: str, top: str) -> str | None:
    """Return ``path`` relative to ``top`` ('' for top itself), or None when it lies outside."""
    for candidate, base in (
        (os.path.normpath(path), top),
        (os.path.realpath(path), os.path.realpath(top)),
    ):
        if candidate == base:
            return ""
        if candidate.startswith(base.rstrip(os.sep) + os.sep):
            return candidate[len(base.rstrip(os.sep)) + 1 :].replace(os.sep, "/")
    return None


def normalize_links(value: Any) -> list[dict[str, str]]:
    """Validate links (``[{rel, to}]`` or ``["rel:id"]``), sorted and without repeats."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise InvalidInput("field 'links' must be a list")
    links: list[dict[str, str]] = []
    for item in value:
        if isinstance(item, str):
            rel, sep, target = item.partition(":")
            if not sep:
                raise InvalidInput(f"link {item!r} must look like REL:ID, e.g. supersedes:7f3k")
            item = {"rel": rel, "to": target}
        if not isinstance(item, Mapping) or "rel" not in item or "to" not in item:
            raise InvalidInput(f"link {item!r} must have 'rel' and 'to'")
        rel = str(item["rel"]).strip().lower()
        if rel not in LINK_RELS:
            raise InvalidInput(f"unknown link relation {rel!r}; use one of: {', '.join(LINK_RELS)}")
        link = {**{str(k): v for k, v in item.items()}, "rel": rel, "to": check_id(item["to"])}
        if link not in links:
            links.append(link)
    return sorted(links, key=lambda link: (link["rel"], link["to"]))


def normalize_fields(fields: Mapping[str, Any], *, max_content_bytes: int) -> Record:
    """Validate and coerce user-settable fields; unknown fields pass through untouched."""
    out: Record = dict(fields)
    if "kind" in out:
        out["kind"] = normalize_kind(out["kind"])
    if "title" in out:
        out["title"] = _check_text("title", out["title"], limit=MAX_TITLE_CHARS * 4, required=True)
        out["title"] = " ".join(out["title"].split())
        if len(out["title"]) > MAX_TITLE_CHARS:
            raise InvalidInput(
                f"title is {len(out['title'])} characters; the limit is {MAX_TITLE_CHARS}",
                hint="keep the title short and put the detail in content",
            )
    if "content" in out:
        out["content"] = _check_text("content", out["content"] or "", limit=max_content_bytes)
    for field in ("tags", "files"):
        if field in out:
            out[field] = _string_list(field, out[field])
    if "tags" in out:
        out["tags"] = sorted({tag.lower() for tag in out["tags"]})
    if "files" in out:
        out["files"] = sorted({normalize_path(path) for path in out["files"]} - {""})
    if "importance" in out:
        try:
            importance = int(out["importance"])
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"importance must be 1–5, got {out['importance']!r}") from exc
        if not 1 <= importance <= 5:
            raise InvalidInput(f"importance must be 1–5, got {importance}")
        out["importance"] = importance
    if "status" in out:
        out["status"] = str(out["status"]).strip().lower()
        if out["status"] not in STATUSES:
            raise InvalidInput(
                f"unknown status {out['status']!r}; use one of: {', '.join(STATUSES)}"
            )
    if "scope" in out:
        out["scope"] = str(out["scope"]).strip().lower()
        if out["scope"] not in SCOPES:
            raise InvalidInput(f"unknown scope {out['scope']!r}; use project or personal")
    if "links" in out:
        out["links"] = normalize_links(out["links"])
    for field in ("topic_key", "project", "source", "session_id", "author"):
        if field in out and out[field] is not None:
            out[field] = _check_text(field, str(out[field]), limit=MAX_ITEM_CHARS).strip()
    if out.get("project"):
        out["project"] = normalize_project(str(out["project"]))
    # Drop empty optional values so that the canonical line stays short and stable.
    for field in ("tags", "files", "links", "topic_key", "session_id", "author"):
        if field in out and out[field] in ([], "", None):
            del out[field]
    return out


def normalize_project(name: str) -> str:
    """Return a project name as engram compares it: trimmed, lower case, inner spaces single."""
    return " ".join(str(name).split()).lower()


def iter_strings(record: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """Yield (field, text) for each free-text field a secret could hide in."""
    for field in ("title", "content"):
        value = record.get(field)
        if isinstance(value, str):
            yield field, value


_TOPIC_FAMILIES: Final = {
    "architecture": "architecture",
    "bugfix": "bug",
    "decision": "decision",
    "pattern": "pattern",
    "config": "config",
    "discovery": "discovery",
    "session": "session",
    "pitfall": "pitfall",
    "principle": "principle",
    "preference": "preference",
}
_FAMILY_WORDS: Final = (
    ("bug", ("bug", "fix", "fixed", "crash", "panic", "error", "regression")),
    ("decision", ("decide", "decided", "decision", "chose", "choose", "adopt")),
    ("architecture", ("architecture", "design", "layer", "module", "boundary")),
    ("pattern", ("pattern", "convention", "idiom")),
    ("config", ("config", "configuration", "setting", "env")),
    ("learning", ("learned", "learning", "lesson", "til")),
)
_SLUG_RE: Final = re.compile(r"[^0-9a-z]+")


def suggest_topic_key(kind: str = "", title: str = "", content: str = "") -> str:
    """Suggest a stable ``family/segment`` topic key from a kind, a title or content."""
    if not title.strip() and not content.strip():
        raise InvalidInput("suggest_topic_key needs a title or content")
    family = ""
    if kind.strip():
        try:
            family = _TOPIC_FAMILIES.get(normalize_kind(kind), "")
        except InvalidInput:
            family = ""
        if kind.strip().lower() == "learning":
            family = "learning"
    if not family:
        words = set(_SLUG_RE.split(f"{title} {content}".lower()))
        family = next((name for name, keys in _FAMILY_WORDS if words & set(keys)), "topic")
    # From the title, else the content's first eight words, as other engram tools do.
    source = title if title.strip() else " ".join(content.split()[:8])
    segment = _SLUG_RE.sub("-", source.lower()).strip("-")
    segment = segment.encode("utf-8")[:100].decode("utf-8", "ignore").strip("-")
    return f"{family}/{segment or 'untitled'}"
