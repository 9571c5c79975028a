"""The memory record: its fields and their defaults, kinds, statuses, links, validation.

A memory is a plain ``dict`` (``Record``) so that unknown fields survive every read and write
verbatim (README). ``MemoryRecord`` names the fields engram knows, with their types, for mypy:
``fields_of(record)["stauts"]`` is an error where ``record["stauts"]`` is not. A field with a
default is read through its accessor (``status_of``, ``scope_of``, ``importance_of``,
``kind_of``, ``rev_of``, ``tags_of``, ``files_of``, ``links_of``), so the default is stated
here once. The rules that turn caller input into a valid record are here too. No I/O; imports
nothing from engram but ``errors``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, TypedDict, cast

from engram.errors import InvalidInput

# A memory as read and written: every field, known or not. Dict operations stay available.
Record = dict[str, Any]


class MemoryRecord(TypedDict, total=False):
    """The fields of a memory engram knows (README: a memory); any other field is kept too."""

    id: str
    kind: str
    title: str
    content: str
    tags: list[str]
    files: list[str]
    importance: int
    status: str
    scope: str
    project: str
    topic_key: str
    links: list[dict[str, Any]]
    source: str
    session_id: str
    author: str
    anchors: list[dict[str, Any]]
    created_at: str
    updated_at: str
    rev: int
    duplicate_count: int
    judgements: list[dict[str, Any]]
    history: list[Any]
    type: str
    pinned: bool
    reviewed: dict[str, Any]
    go: dict[str, Any]
    deleted_at: str


DEFAULT_KIND: Final = "note"
DEFAULT_STATUS: Final = "active"
DEFAULT_SCOPE: Final = "project"
DEFAULT_IMPORTANCE: Final = 3
FIRST_REV: Final = 1


def fields_of(record: Mapping[str, Any]) -> MemoryRecord:
    """Return a record as its known fields, for reads mypy checks (the same dict, no copy)."""
    return cast(MemoryRecord, record)


def status_of(record: Mapping[str, Any]) -> str:
    """Return a memory's status: ``active`` unless it says otherwise."""
    return str(fields_of(record).get("status") or DEFAULT_STATUS)


def scope_of(record: Mapping[str, Any]) -> str:
    """Return a memory's scope: ``project`` unless it says otherwise."""
    return str(fields_of(record).get("scope") or DEFAULT_SCOPE)


def kind_of(record: Mapping[str, Any]) -> str:
    """Return a memory's kind: ``note`` when it has none."""
    return str(fields_of(record).get("kind") or DEFAULT_KIND)


def importance_of(record: Mapping[str, Any]) -> int:
    """Return a memory's importance, 1 to 5: 3 when it has none (or one that is no number)."""
    value: Any = fields_of(record).get("importance")
    if isinstance(value, bool) or value in (None, ""):
        return DEFAULT_IMPORTANCE
    try:
        return int(value)
    except (TypeError, ValueError):
        return DEFAULT_IMPORTANCE


def rev_of(record: Mapping[str, Any]) -> int:
    """Return a memory's revision: 1 when it has none (or one that is no number)."""
    value: Any = fields_of(record).get("rev")
    if isinstance(value, bool) or not value:
        return FIRST_REV
    try:
        return int(value)
    except (TypeError, ValueError):
        return FIRST_REV


def tags_of(record: Mapping[str, Any]) -> list[str]:
    """Return a memory's tags (the record's own list; [] when it has none)."""
    value: Any = fields_of(record).get("tags")
    return value if isinstance(value, list) else []


def files_of(record: Mapping[str, Any]) -> list[str]:
    """Return the files a memory is about (the record's own list; [] when it has none)."""
    value: Any = fields_of(record).get("files")
    return value if isinstance(value, list) else []


def links_of(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Return a memory's links (the record's own list; [] when it has none)."""
    value: Any = fields_of(record).get("links")
    return value if isinstance(value, list) else []


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
_PREFIX_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


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


def collapse_whitespace(text: str) -> str:
    """Return ``" ".join(text.split())``: runs of whitespace made one space, ends stripped.

    Text that is already so is returned as it is, without splitting it into words (an index
    rebuild collapses every memory's title and content). The space is the only character that
    is both whitespace and printable, so printable text with no double, leading or trailing
    space has nothing to collapse.
    """
    if (
        text.isprintable()
        and "  " not in text
        and not text.startswith(" ")
        and not text.endswith(" ")
    ):
        return text
    return " ".join(text.split())


def normalize_content(text: str) -> str:
    """Return content as compared for duplicates: whitespace collapsed, case folded."""
    return collapse_whitespace(text).casefold()


def dedupe_key(record: Mapping[str, Any]) -> str:
    """Hash what makes two saves the same memory: kind, title, normalised content, scope."""
    return dedupe_hash(
        str(record.get("kind", "")),
        normalize_content(str(record.get("title", ""))),
        normalize_content(str(record.get("content", ""))),
        str(record.get("project", "")),
        str(record.get("scope") or DEFAULT_SCOPE),  # scope_of, inline: once per memory
    )


def dedupe_hash(kind: str, title: str, content: str, project: str, scope: str) -> str:
    """Return ``dedupe_key`` of a memory from its parts, title and content normalised
    (``normalize_content``): for a caller that has normalised them already."""
    return hashlib.sha256("\x1f".join((kind, title, content, project, scope)).encode()).hexdigest()


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
