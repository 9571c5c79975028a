"""Imports of the plain shapes people have: JSON rows of notes, and folders of Markdown notes.

Two formats, converted into engram records deterministically (like ``engram.formats.convert``):

- ``plain``: JSON Lines, a JSON array, or an object ``{"memories": [...]}`` /
  ``{"records": [...]}`` of ``{title, content, kind?, tags?, files?, ...}`` rows. Synonyms a
  user would expect are read too: ``text`` / ``body`` for content, ``type`` for kind,
  ``created_at`` / ``created`` / ``date`` and ``updated_at`` / ``updated`` / ``modified`` for
  the times, ``project``, ``scope``, ``importance``, ``status``, ``topic_key``. A row that is
  already a whole engram record (id, rev, times) is taken as it is.
- ``markdown`` (``obsidian`` when the folder holds ``.obsidian/``): a folder of ``.md`` notes
  with optional YAML front matter, as basic-memory writes them (title, type, tags, permalink)
  or as an Obsidian vault holds them: the title from front matter or the file name, tags from
  front matter and ``#tags`` in the text, the body as content (``[[wikilinks]]`` kept as
  text). Notes written by ``engram obsidian-export`` (``engram: true``) are left out: their
  memories are the store's own.

Ids come from what the item is: a row's own ``id`` or ``topic_key``, else its title and
content; a note's ``permalink``, else its path in the folder. An item without times takes
``stamp`` (the caller passes the file's modification time), so converting the same input twice
gives the same records. Keys engram has no field for are kept under ``imported``. A bad item is
named in ``skipped`` (``file:line``, ``file: records[N]`` for a JSON document, the note's path)
and the rest converts.

This module only converts: it does no I/O and writes nothing (the folder is read by
``engram.sync.transfer``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import UTC, date, datetime
from typing import Any, Final

from engram.config import load_front_matter
from engram.errors import InputTooLarge, InvalidInput
from engram.formats.common import (
    MAX_CONTENT_BYTES,
    Converted,
    clip_title,
    files_of,
    finish_record,
    first_line,
    import_id,
    scrubbed,
    sha_hex,
    time_of,
)
from engram.model import (
    MAX_LIST_ITEMS,
    REQUIRED,
    Record,
    check_unicode,
    format_time,
    kind_and_type,
    loads,
    normalize_project,
    value_too_deep,
)

__all__ = [
    "MARKDOWN_FORMATS",
    "PLAIN_FORMAT",
    "Note",
    "Origin",
    "convert_markdown",
    "convert_plain",
    "plain_rows",
]

PLAIN_FORMAT: Final = "plain"
MARKDOWN_FORMATS: Final = ("markdown", "obsidian")
LIST_KEYS: Final = ("memories", "records")
_CONTENT_KEYS: Final = ("content", "text", "body")
_TITLE_KEYS: Final = ("title",)
_CREATED_KEYS: Final = ("created_at", "created", "date")
_UPDATED_KEYS: Final = ("updated_at", "updated", "modified")
_TEXT_FIELDS: Final = ("importance", "status", "topic_key", "project", "scope", "author")
_FILE_KEYS: Final = ("files", "file", "file_path", "path", "paths")
# Keys a row is read through; everything else of a row is kept under ``imported``.
_READ: Final = frozenset(
    {"id", "kind", "type", "tags", "tag", "links", *_CONTENT_KEYS, *_TITLE_KEYS}
    | {*_CREATED_KEYS, *_UPDATED_KEYS, *_TEXT_FIELDS, *_FILE_KEYS}
)
_SNIFF_LINES: Final = 50
# A #tag: not inside a word or a URL fragment, not a heading ("# Title"), not only digits.
_TAG_RE: Final = re.compile(r"(?<![\w#&/\]\[(])#([A-Za-z_][\w/-]*|\d+[A-Za-z_][\w/-]*)")
_FENCE_RE: Final = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE_RE: Final = re.compile(r"`[^`\n]*`")


# ── detecting ────────────────────────────────────────────────────────────────────────────────


def _is_row(value: Any) -> bool:
    return isinstance(value, dict) and any(key in value for key in (*_TITLE_KEYS, *_CONTENT_KEYS))


def plain_rows(value: Any) -> tuple[str, list[Any]] | None:
    """Return (what to call an item, the items) of a parsed JSON document of plain rows."""
    if isinstance(value, list):
        return ("records", value) if any(_is_row(item) for item in value) or not value else None
    if isinstance(value, dict):
        for key in LIST_KEYS:
            items = value.get(key)
            if isinstance(items, list):
                return key, items
    return None


def looks_plain_lines(payload: bytes) -> bool:
    """Tell whether some early line of JSON Lines is a plain row (an object with a title...)."""
    text = payload.decode("utf-8-sig", errors="replace")
    for number, line in enumerate(text.splitlines()):
        if number >= _SNIFF_LINES:
            break
        try:
            value = loads(line)
        except ValueError:
            continue
        if _is_row(value):
            return True
    return False


# ── plain rows ───────────────────────────────────────────────────────────────────────────────


def convert_plain(
    payload: bytes,
    document: Any = None,
    *,
    name: str,
    project: str,
    stamp: str,
    max_content_bytes: int = MAX_CONTENT_BYTES,
) -> Converted:
    """Convert plain rows: a parsed JSON ``document`` (array or object), else JSON Lines."""
    label = name or "input"
    items: list[tuple[str, Any]] = []
    skipped: list[str] = []
    found = plain_rows(document) if document is not None else None
    if found is not None:
        key, rows = found
        items = [(f"{label}: {key}[{index}]", row) for index, row in enumerate(rows)]
    else:
        text = payload.decode("utf-8-sig", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            where = f"{label}:{number}"
            if not line.strip():
                continue
            try:
                items.append((where, loads(line, what=where)))
            except InputTooLarge as exc:
                skipped.append(exc.message)
            except ValueError as exc:
                skipped.append(f"{where}: not JSON ({exc})")
    by_id: dict[str, tuple[str, Record]] = {}
    notes: list[str] = []
    for where, row in items:
        try:
            check_unicode(row)
            record = _row(row, project=project, stamp=stamp, max_bytes=max_content_bytes)
        except InvalidInput as exc:
            skipped.append(f"{where}: {exc.message}")
            continue
        _keep(by_id, record, where, notes)
    records = [record for _where, record in sorted(by_id.values(), key=lambda v: v[1]["id"])]
    return Converted(records, skipped, PLAIN_FORMAT, notes)


def _keep(
    by_id: dict[str, tuple[str, Record]], record: Record, where: str, notes: list[str]
) -> None:
    """Keep one record per id: the later ``updated_at`` wins, else the later item."""
    rid = str(record["id"])
    old = by_id.get(rid)
    if old is not None:
        if old[1] == record:
            return
        notes.append(f"{old[0]} and {where} are one memory (the same id); the later is kept")
        if str(old[1].get("updated_at")) > str(record.get("updated_at")):
            return
    by_id[rid] = (where, record)


def _text(value: Any, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{field}: expected text, got {type(value).__name__}")
    return str(value)


def _pick(row: Mapping[str, Any], keys: Sequence[str]) -> tuple[str, Any]:
    for key in keys:
        if row.get(key) not in (None, ""):
            return key, row[key]
    return "", None


def _moment(value: Any, field: str) -> str:
    """Return a time written as RFC 3339, a date, a YAML date or epoch seconds, in RFC 3339."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return format_time(moment)
    if isinstance(value, date):
        return format_time(datetime(value.year, value.month, value.day, tzinfo=UTC))
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if value > 1e11 else value  # milliseconds, as JavaScript writes
        try:
            return format_time(datetime.fromtimestamp(seconds, UTC))
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidInput(f"{field}: not a time: {value!r}") from exc
    try:
        return time_of(value)
    except InvalidInput as exc:
        raise InvalidInput(f"{field}: {exc.message}") from exc


def _times(row: Mapping[str, Any], stamp: str) -> tuple[str, str]:
    created_key, created = _pick(row, _CREATED_KEYS)
    updated_key, updated = _pick(row, _UPDATED_KEYS)
    first = _moment(created, created_key) if created_key else ""
    last = _moment(updated, updated_key) if updated_key else ""
    first = first or last or time_of(stamp)
    return first, max(last or first, first)


def _tags(value: Any) -> list[str]:
    """Return tags written as a list or as one comma- or space-separated string."""
    items = value if isinstance(value, list | tuple) else [value]
    out: list[str] = []
    for item in items[:MAX_LIST_ITEMS]:
        if item is None or isinstance(item, dict | list | tuple | set):
            continue
        for word in re.split(r"[,\s]+", scrubbed(str(item))):  # `password: x` is no two tags
            word = word.strip().lstrip("#")
            if word and word not in out:
                out.append(word)
    return out


def _jsonable(value: Any) -> Any:
    """Return a YAML value as JSON data (dates as RFC 3339 text, other objects as text)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, datetime | date):
        return _moment(value, "value")
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(item) for item in value]
    return str(value)


def _row(
    row: Any,
    *,
    project: str,
    stamp: str,
    max_bytes: int,
    source: str = "",
    identity: str = "",
    kept: Mapping[str, Any] | None = None,
) -> Record:
    """Convert one plain row (or take a whole engram record) into a checked record.

    ``identity``: the key the id is derived from (default: the row's id, topic key or text);
    ``kept``: more to keep under ``imported``.
    """
    if not isinstance(row, dict):
        raise InvalidInput("not a JSON object")
    if all(key in row for key in REQUIRED):
        return finish_record(dict(row), max_bytes)  # already an engram record
    _key, title_value = _pick(row, _TITLE_KEYS)
    content_key, content_value = _pick(row, _CONTENT_KEYS)
    title = _text(title_value, "title").strip()
    content = _text(content_value, content_key or "content").strip()
    if not title and not content:
        raise InvalidInput("missing title and content")
    title = clip_title(title or first_line(content).lstrip("# ").strip())
    type_key, written = _pick(row, ("kind", "type"))
    kind, foreign = kind_and_type(written if type_key else "", default="note")
    created, updated = _times(row, stamp)
    record: Record = {
        "kind": kind,
        "title": title,
        "content": content,
        "tags": _tags(row.get("tags", row.get("tag"))),
        "files": files_of(row),
        "project": normalize_project(str(row.get("project") or project)),
        "scope": "project",
        "source": source or f"import:{PLAIN_FORMAT}",
        "created_at": created,
        "updated_at": updated,
        "rev": 1,
    }
    if foreign:
        record["type"] = foreign
    for field in _TEXT_FIELDS:
        if row.get(field) not in (None, "") and field != "project":
            record[field] = row[field]
    if isinstance(row.get("links"), list):
        record["links"] = row["links"]
    if not record["project"]:
        del record["project"]
    extra = {**(kept or {}), **{key: value for key, value in row.items() if key not in _READ}}
    if extra and not value_too_deep(extra):
        record["imported"] = _jsonable(extra)
    record["id"] = import_id(identity or _identity(row, title, content))
    return finish_record(record, max_bytes)


def _identity(row: Mapping[str, Any], title: str, content: str) -> str:
    """Return the key a row's id is derived from: its own id, topic key, else its text."""
    own = row.get("id")
    if isinstance(own, str | int) and not isinstance(own, bool) and str(own).strip():
        return f"plain:id:{own}"
    if isinstance(row.get("topic_key"), str) and row["topic_key"].strip():
        return f"plain:topic:{row['topic_key'].strip()}"
    return f"plain:{sha_hex(title + chr(31) + content)}"


# ── Markdown notes ───────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Note:
    """One Markdown file of a folder: its path in the folder (POSIX), bytes and time stamp."""

    path: str
    data: bytes
    stamp: str


@dataclass(frozen=True)
class Origin:
    """Another agent's memory files as notes: where each came from, and how they are taken.

    Each note becomes a ``proposed`` memory (a person reviews it) with ``source``
    ``import:<platform>:<path>`` and an id from the platform and the note's path, so the same
    file imported again is the same memory; ``kinds`` maps the note's ``type`` front matter
    onto engram's kinds (anything else: ``kind``); ``files_key`` names a front matter key of
    glob patterns the note applies to (Cursor's ``globs``, Kiro's ``fileMatchPattern``).
    """

    platform: str
    kind: str = "note"
    kinds: Mapping[str, str] = dataclass_field(default_factory=dict)
    files_key: str = ""


def convert_markdown(
    notes: Sequence[Note],
    *,
    name: str,
    project: str,
    fmt: str = "markdown",
    max_content_bytes: int = MAX_CONTENT_BYTES,
    origin: Origin | None = None,
) -> Converted:
    """Convert a folder's Markdown notes (front matter optional) into engram records.

    ``origin``: the notes are another agent's memory files (``Origin``).
    """
    skipped: list[str] = []
    notes_out: list[str] = []
    by_id: dict[str, tuple[str, Record]] = {}
    own = 0
    for note in notes:
        where = f"{name}/{note.path}" if name else note.path
        try:
            meta, body = _front_matter(note.data, where)
            if meta.get("engram") is True:
                own += 1  # engram obsidian-export's note or hub: the store has these memories
                continue
            if origin is not None:
                meta = _as_origin(meta, origin)
            record = _note(
                note,
                meta,
                body,
                project=project,
                fmt=fmt,
                max_bytes=max_content_bytes,
                origin=origin,
            )
        except InvalidInput as exc:
            message = exc.message
            skipped.append(message if message.startswith(where) else f"{where}: {message}")
            continue
        _keep(by_id, record, where, notes_out)
    if own:
        notes_out.append(
            f"{own} {'note' if own == 1 else 'notes'} written by engram obsidian-export left out: "
            "their memories are already in the store they were exported from (`engram export` "
            "carries them to another)"
        )
    records = [record for _where, record in sorted(by_id.values(), key=lambda v: v[1]["id"])]
    return Converted(records, skipped, fmt, notes_out)


def _front_matter(data: bytes, where: str) -> tuple[dict[str, Any], str]:
    """Split a note into its front matter (python-frontmatter, safe YAML) and its body."""
    import frontmatter
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no type stubs
    from frontmatter.default_handlers import YAMLHandler

    class _BoundedYAML(YAMLHandler):
        """python-frontmatter's YAML handler, its aliases bounded (billion laughs)."""

        def load(self, fm: str, **kwargs: object) -> Any:
            return load_front_matter(fm)

    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{where}: not UTF-8 text (byte {exc.start})") from exc
    handler = frontmatter.detect_format(text, frontmatter.handlers)
    if isinstance(handler, YAMLHandler):
        handler = _BoundedYAML()
    try:
        meta, body = frontmatter.parse(text, handler=handler)
    except InputTooLarge as exc:
        raise InvalidInput(f"{where}: YAML front matter: {exc.message}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["invalid YAML"])[0]
        line = f":{mark.line + 2}" if mark is not None else ""  # +1: the opening '---'
        raise InvalidInput(f"{where}{line}: broken YAML front matter: {problem}") from exc
    except (ValueError, OverflowError, RecursionError, TypeError) as exc:
        raise InvalidInput(f"{where}: broken YAML front matter: {exc}") from exc
    if not isinstance(meta, dict):
        raise InvalidInput(f"{where}: front matter is not a mapping of keys")
    return {str(key).strip().lower(): value for key, value in meta.items()}, body


def _body_tags(body: str) -> list[str]:
    """Return the #tags written in a note's text, outside code."""
    found: list[str] = []
    fenced = False
    for line in body.splitlines():
        if _FENCE_RE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for tag in _TAG_RE.findall(_INLINE_CODE_RE.sub("", line)):
            tag = tag.rstrip("/-")
            if tag and tag not in found:
                found.append(tag)
    return found


def _as_origin(meta: Mapping[str, Any], origin: Origin) -> dict[str, Any]:
    """Return a platform note's front matter as a proposed memory's row reads it."""
    row = dict(meta)
    written = row.pop("type", None)
    row["kind"] = origin.kinds.get(str(written).strip().lower(), origin.kind)
    if written is not None:
        row["platform_type"] = written
    if "title" not in row:
        for key in ("name", "description"):
            if isinstance(row.get(key), str) and row[key].strip():
                row["title"] = row[key]
                break
    if origin.files_key and origin.files_key.lower() in row:
        patterns = row.pop(origin.files_key.lower())
        if isinstance(patterns, str):
            patterns = [p.strip() for p in patterns.split(",")]
        if isinstance(patterns, list):
            row["files"] = [p for p in patterns if isinstance(p, str) and p.strip()]
    row["status"] = "proposed"
    row.pop("scope", None)
    row.pop("id", None)
    return row


def _note(
    note: Note,
    meta: Mapping[str, Any],
    body: str,
    *,
    project: str,
    fmt: str,
    max_bytes: int,
    origin: Origin | None = None,
) -> Record:
    """Convert one note: its title, the body as content.

    The title is the front matter's; else, in a folder of notes that is no Obsidian vault, the
    note's leading ``# Heading`` (documentation's title); else the file name (a vault's title).
    A leading heading that is the title is not repeated in the content (basic-memory writes one).
    """
    stem = note.path.rsplit("/", 1)[-1]
    stem = stem[: -len(".md")] if stem.lower().endswith(".md") else stem
    title = _text(meta.get("title"), "title").strip() if meta.get("title") is not None else ""
    content = body.strip()
    lines = content.split("\n", 1)
    heading = lines[0].strip()
    heading = " ".join(heading[2:].split()) if heading.startswith("# ") else ""
    if not title and heading and fmt != "obsidian":
        title = heading
    title = title or stem
    if heading and heading.casefold() == " ".join(title.split()).casefold():
        content = lines[1].strip() if len(lines) > 1 else ""
    row: dict[str, Any] = {
        key: value
        for key, value in meta.items()
        if key not in ("title", "tags", "tag", "id", "permalink", "content", "text", "body")
    }
    row.update(title=title, content=content)
    tags = _tags(meta.get("tags", meta.get("tag")))
    row["tags"] = tags + [tag for tag in _body_tags(scrubbed(body)) if tag not in tags]
    permalink = meta.get("permalink")
    kept: dict[str, Any] = {"path": note.path}
    identity = f"markdown:{note.path}"  # the same key whether the folder is a vault or not
    source = f"import:{fmt}"
    if origin is not None:
        identity = f"platform:{origin.platform}:{note.path}"
        source = f"import:{origin.platform}:{note.path}"
        if origin.platform not in row["tags"]:
            row["tags"].append(origin.platform)
    elif isinstance(permalink, str) and permalink.strip():
        kept["permalink"] = permalink
        identity = f"markdown:permalink:{permalink.strip()}"  # stays when the file moves
    return _row(
        _dates_as_text(row),
        project=project,
        stamp=note.stamp,
        max_bytes=max_bytes,
        source=source,
        identity=identity,
        kept=kept,
    )


def _dates_as_text(row: Mapping[str, Any]) -> dict[str, Any]:
    """Return a front matter row with its YAML dates kept as dates for the times, JSON else."""
    times = {*_CREATED_KEYS, *_UPDATED_KEYS}
    return {key: value if key in times else _jsonable(value) for key, value in row.items()}
