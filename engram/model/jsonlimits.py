"""The limits on every JSON document engram reads, and the one bounded reader (a leaf).

Every JSON text that comes from outside (memories.jsonl lines, chunks, manifests, imports,
daemon, HTTP and MCP requests, settings) is parsed by ``loads`` (or ``loads_line`` for one line
of a JSON Lines file) within ``MAX_RECORD_BYTES`` and ``MAX_JSON_DEPTH``: a document too big or
nested too deep is refused with InputTooLarge naming the input, before the recursive json module
could overflow the stack. ``json_depth_exceeded`` is the linear byte scan behind it, for doors
that refuse a request before parsing it (``peek_request`` then reads what it can of the id and
method, to answer it). Imports nothing from engram but ``errors``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from engram.errors import InputTooLarge, InvalidInput

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
            if kind is str:
                continue  # most of a record: tested first
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


def loads_line(line: bytes, *, what: str) -> Any:
    """Parse one line of a JSON Lines file (orjson when exact, else json), within the limits.

    The fast path of ``loads`` with the depth checked on orjson's result (the index rebuild
    parses every line of memories.jsonl): only a line over MAX_RECORD_BYTES is scanned first.
    Raises InputTooLarge (size, depth) or InvalidInput (not UTF-8, not JSON, a lone surrogate
    escape), each message starting with ``what`` (a file and line).
    """
    try:
        if len(line) > MAX_RECORD_BYTES:
            check_json_limits(line, what=what)
        return _fast_loads(line)
    except _TooDeep:
        raise _refuse_deep(line, what=what, max_depth=MAX_JSON_DEPTH) from None
    except InputTooLarge:
        raise
    except ValueError:
        # orjson refused it: let the standard parser say exactly why (or accept what orjson
        # does not, such as integers wider than 64 bits in an unknown field), within the
        # depth limit (orjson refuses 1,025 levels).
        return _slow_line(line, what=what)


def _slow_line(line: bytes, *, what: str) -> Any:
    """Parse with the json module a line orjson refused; say why it is not JSON if it is not."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what}: invalid UTF-8 at byte {exc.start}") from exc
    try:
        value = _slow_loads(text, what=what, max_depth=MAX_JSON_DEPTH)
    except InputTooLarge:
        raise
    except ValueError as exc:
        raise InvalidInput(f"{what}: not JSON: {exc}") from exc
    surrogate = lone_surrogate(value)
    if surrogate is not None:
        raise InvalidInput(f"{what}: {not_unicode(surrogate)}")
    return value
