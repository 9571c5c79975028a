"""Indexer of ADRs: creates decision memories from the project's architecture decision records.

This module owns reading ADR folders and parsing each record into a ``ParsedAdr``; the service
turns those into ``decision`` memories (``source: adr:<path>``). It does no writes, touches no
store or index, and never imports dulwich, typer or rich. A bad ADR is a value (``Skipped`` with
a reason), never a crash: ``scan_adrs`` does not raise on any file's content (even a parser bug
on one file becomes a ``Skipped``), and ``parse_adr`` is pure (no I/O) and raises only
``InvalidInput``.

Styles read
    Nygard / adr-tools (``# 7. Title``, ``Date:`` line, ``## Status`` section), MADR 2.x (bullet
    lines ``* Status:``, ``- Deciders:``, ``* Date:``), MADR 3/4 (YAML front matter with
    ``status``, ``date``, ``deciders`` / ``decision-makers``, ``tags``), ``**Status:**`` lines and
    ``| Status | … |`` table rows, date-named files (``2024-03-01-use-x.md``).

Conventions
    * ``status``: front matter, else a ``Status:`` line before the first section (or in a
      "Metadata" section), else the ``## Status`` section. In that section a line counts when it
      opens with a status word (after dates, emphasis and a ``Status:`` label); when several do,
      the furthest in the life cycle wins (proposed < accepted < rejected < superseded <
      archived), so "Accepted … Superseded by X" is superseded. Words map as accepted, approved,
      adopted … → ``active``; proposed, draft, in review … → ``proposed``; rejected, declined,
      withdrawn … → ``rejected``; superseded, deprecated, replaced, obsolete … → ``superseded``;
      archived → ``archived``. **No status at all → ``active``** (an ADR committed without a
      status records a decision in force; adr-tools and MADR default to accepted), **a status
      written but not recognised → ``proposed``** (not shown as in force, not hidden either).
      ``status_text`` is the status as written, emphasis removed ("" when there is none).
    * ``date``: front matter ``date``, else a ``Date:`` line, else a date in the status, else the
      date of a date-named file; midnight UTC unless a time is given. ISO dates, English month
      names, and day-first ``07/11/2016`` / ``7.11.2016`` (adr-tools' old default) are read.
    * relations are read outside code fences and HTML comments: anywhere on a line in front
      matter, the status, "Links"/"Related" sections and metadata lines before the first
      section; elsewhere only from lines that open with the phrase ("Supersedes ADR-3"), so
      prose is not mistaken for metadata. Targets are Markdown links (resolved against the ADR's
      folder, then by file name or slug in any case), ``ADR-7`` / ``ADR 0007`` / ``#7`` and bare
      file names or slugs; each resolves to one of ``known_paths`` (same folder preferred; an
      ambiguous or unknown target is dropped). Each ADR lists only what it says itself:
      "Supersedes/Replaces Y" → ``links`` ``("supersedes", Y)``; "Superseded/Replaced by X" →
      ``superseded_by`` ``(X,)`` (the caller adds the ``supersedes`` link on X's memory);
      "Amends", "Amended by", "Refines", "Relates to", "See also" … → ``("relates", Y)``.
    * ``files``: repo-relative paths named in backticks (relative to the repository root) or as
      link targets (relative to the ADR), never absolute, never leaving the repository, never
      an ADR. ``parse_adr`` returns every path-like candidate (a ``/`` or a known file
      extension or name); ``scan_adrs`` keeps only those that exist under the root (a glob is
      kept when its fixed leading folder exists), so MIME types and examples drop out.
    * Not ADRs, skipped silently: README, index, table-of-contents and template files
      (``template.md``, ``adr-template-minimal.md`` …) by name, hidden files, files other than
      ``.md`` / ``.markdown``. Reported in ``skipped``: templates recognised by their
      placeholders, empty files, files with only front matter, broken or unclosed YAML, files
      that are not UTF-8, binary, over 1 MiB, or symlinks leaving the repository, and folders
      (configured or from ``.adr-dir``) that leave it.
    * ``content`` is the Markdown after the front matter, trimmed, capped at 64 KiB (cut at a
      line with a note naming the file).
"""

from __future__ import annotations

import bisect
import os
import posixpath
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

from engram.errors import InvalidInput
from engram.model import format_time, normalize_path, parse_time

DEFAULT_ADR_DIRS: Final = ("docs/adr", "docs/adrs", "docs/decisions", "doc/adr", "adr", "decisions")

MAX_CONTENT_BYTES: Final = 64 * 1024
MAX_FILE_BYTES: Final = 1024 * 1024
MAX_TITLE_CHARS: Final = 200
MAX_LIST_ITEMS: Final = 200
MAX_ITEM_CHARS: Final = 300
ADR_SUFFIXES: Final = (".md", ".markdown")


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


@dataclass(frozen=True)
class Skipped:
    """A file (or folder) in an ADR folder that was not read as an ADR, and why."""

    path: str
    reason: str


@dataclass
class AdrScan:
    """The result of reading every ADR folder of a repository."""

    dirs: list[str] = field(default_factory=list)
    adrs: list[ParsedAdr] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


# -- folders ------------------------------------------------------------------------------------


def adr_dirs(root: Path, configured: Sequence[str] | None = None) -> list[str]:
    """List the existing ADR folders of a repository, repo-relative, none outside it."""
    return _resolve_dirs(root, configured)[0]


def _resolve_dirs(root: Path, configured: Sequence[str] | None) -> tuple[list[str], list[Skipped]]:
    """Return the ADR folders that exist under root, and the ones refused for leaving it."""
    base = root.resolve()
    if isinstance(configured, str):
        configured = [configured]
    wanted: list[tuple[str, str]] = [
        (str(name), "indexer.adr_dirs")
        for name in (DEFAULT_ADR_DIRS if configured is None else configured)
    ]
    named = _read_adr_dir_file(base)
    if named:
        wanted.append((named, ".adr-dir"))
    dirs: list[str] = []
    refused: list[Skipped] = []
    seen: set[Path] = set()
    for name, origin in wanted:
        try:
            rel = normalize_path(name)
        except InvalidInput:
            refused.append(Skipped(name, f"folder outside the repository (from {origin})"))
            continue
        target = base / rel if rel else base
        try:
            resolved = target.resolve()
            is_dir = target.is_dir()
        except (OSError, RuntimeError):  # a symlink loop, a permission problem
            continue
        if not is_dir:
            continue
        if not resolved.is_relative_to(base):
            refused.append(Skipped(rel, f"folder outside the repository (from {origin})"))
            continue
        if resolved not in seen:
            seen.add(resolved)
            dirs.append(rel)
    return dirs, refused


def _read_adr_dir_file(base: Path) -> str:
    """Return the folder named in the adr-tools ``.adr-dir`` file at root, or ""."""
    try:
        with (base / ".adr-dir").open("rb") as handle:
            raw = handle.read(4096)
    except OSError:
        return ""
    text = raw.decode("utf-8", "replace")
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


# -- scanning -----------------------------------------------------------------------------------

_IGNORED_DIRS: Final = frozenset({"node_modules", "template", "templates"})
_NOT_ADR_STEMS: Final = frozenset(
    {
        "readme",
        "index",
        "toc",
        "contents",
        "table-of-contents",
        "summary",
        "changelog",
        "license",
        "contributing",
        "glossary",
        "sidebar",
        "_sidebar",
        "_index",
        "_template",
    }
)
_TEMPLATE_NAME: Final = re.compile(
    r"^(?:\d+[-_])?(?:adr[-_]?|madr[-_]?|nygard[-_]?|decision[-_]?)?template"
    r"(?:[-_](?:minimal|bare|bare-minimal|short|long|full|madr|nygard|adr|en|de))*$"
)


def _is_not_adr_name(name: str) -> bool:
    """Tell whether a file name says it is an index or template, not an ADR."""
    stem = name.rsplit(".", 1)[0].lower()
    return stem in _NOT_ADR_STEMS or bool(_TEMPLATE_NAME.match(stem))


def scan_adrs(root: Path, configured: Sequence[str] | None = None) -> AdrScan:
    """Read every ADR under the configured folders; report the files that are not usable."""
    base = root.resolve()
    dirs, skipped = _resolve_dirs(base, configured)
    found = _adr_files(base, dirs)
    catalog = _Catalog(rel for rel, _ in found)
    parsed: list[ParsedAdr] = []
    for rel, full in found:
        try:
            text = _read_adr_text(base, full)
            parsed.append(_parse(rel, text, catalog))
        except InvalidInput as exc:
            skipped.append(Skipped(rel, exc.message))
        except Exception as exc:  # a parser bug on one odd file must never stop `engram init`
            reason = f"could not be parsed ({type(exc).__name__}: {exc}); please report this bug"
            skipped.append(Skipped(rel, reason))
    # Links and supersessions may only name ADRs that became memories.
    ok = {adr.path for adr in parsed}
    adrs = [
        replace(
            adr,
            files=tuple(path for path in adr.files if _exists(base, path)),
            links=tuple(link for link in adr.links if link[1] in ok),
            superseded_by=tuple(path for path in adr.superseded_by if path in ok),
        )
        for adr in parsed
    ]
    adrs.sort(key=lambda adr: adr.path)
    skipped.sort(key=lambda item: item.path)
    return AdrScan(dirs=dirs, adrs=adrs, skipped=skipped)


def _adr_files(base: Path, dirs: Sequence[str]) -> list[tuple[str, Path]]:
    """List (repo-relative path, file) of the Markdown files under the ADR folders."""
    found: dict[str, Path] = {}
    seen: set[Path] = set()
    for rel_dir in dirs:
        top = base / rel_dir if rel_dir else base
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(
                name
                for name in dirnames
                if not name.startswith((".", "_")) and name.lower() not in _IGNORED_DIRS
            )
            sub = Path(dirpath).relative_to(top).as_posix()
            for name in sorted(filenames):
                if name.startswith(".") or not name.lower().endswith(ADR_SUFFIXES):
                    continue
                if _is_not_adr_name(name):
                    continue
                full = Path(dirpath) / name
                rel = posixpath.normpath(posixpath.join(rel_dir, sub, name))
                try:
                    key = full.resolve()
                except (OSError, RuntimeError):
                    key = full
                if rel in found or key in seen:
                    continue
                seen.add(key)
                found[rel] = full
    return sorted(found.items())


def _read_adr_text(base: Path, full: Path) -> str:
    """Read an ADR file as text, raising InvalidInput for what cannot be an ADR."""
    try:
        if full.is_symlink() and not full.resolve().is_relative_to(base):
            raise InvalidInput("symlink to a file outside the repository")
        size = full.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InvalidInput(f"too large ({size:,} bytes; the limit is {MAX_FILE_BYTES:,})")
        raw = full.read_bytes()
    except (OSError, RuntimeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidInput(f"unreadable: {reason}") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            hint="re-save the file as UTF-8",
        ) from exc


def _exists(base: Path, rel: str) -> bool:
    """Tell whether a repo-relative path exists (a glob: whether its fixed folder does)."""
    parts = rel.split("/")
    fixed: list[str] = []
    for part in parts:
        if any(char in part for char in "*?{["):
            return os.path.isdir(base.joinpath(*fixed))
        fixed.append(part)
    return os.path.lexists(base.joinpath(*parts))


# -- parsing ------------------------------------------------------------------------------------


def parse_adr(path: str, text: str, *, known_paths: Collection[str] = ()) -> ParsedAdr:
    """Parse one ADR; raise InvalidInput naming why the text is not a usable ADR."""
    catalog = _Catalog(known_paths)
    return _parse(path, text, catalog)


@dataclass(frozen=True)
class _Line:
    """A body line with what the metadata readers need to know about it."""

    raw: str
    meta: str | None  # the line without HTML comments; None inside a code fence
    zone: str  # title, heading, preamble, status, links, metadata or body


def _parse(path: str, text: str, catalog: _Catalog) -> ParsedAdr:
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
    front_lines, body, first_line = _split_front_matter(text)
    lines = _lines(body)
    heading_title = next(
        (_heading_text(line.meta or line.raw) for line in lines if line.zone == "title"), ""
    )
    if heading_title:
        _check_template_title(heading_title)
    meta: dict[str, Any] = {}
    if front_lines is not None:
        meta = _load_front_matter(front_lines, first_line)
    fm_title = _scalar(meta.get("title"))
    if fm_title:
        _check_template_title(fm_title)
    content = body.strip()
    if not content:
        raise InvalidInput(
            "only front matter, no text" if front_lines is not None else "empty file"
        )

    here = posixpath.dirname(path)
    name = posixpath.basename(path)
    number, name_date = _number_and_date(name)
    fields = _key_values(lines)

    status, status_text, status_date = _status(meta, fields, lines)
    date_text = (
        _date_value(meta.get("date"))
        or _first(_date_in(value) for value in fields.get("date", []))
        or status_date
        or name_date
    )

    written_deciders = [meta.get(key) for key in ("deciders", "decision-makers", "decision_makers")]
    deciders = _names([*written_deciders, *fields.get("deciders", [])])
    tags = _tags([meta.get("tags"), *fields.get("tags", [])])

    supersedes, superseded_by, relates = _relations(meta, status_text, lines, catalog, here)
    for target_set in (supersedes, superseded_by, relates):
        target_set.discard(path)
    relates -= supersedes | superseded_by
    links = sorted({("supersedes", t) for t in supersedes} | {("relates", t) for t in relates})

    title = _clean_title(fm_title or heading_title, number) or _title_from_name(name)
    return ParsedAdr(
        path=path,
        number=number,
        title=title,
        status=status,
        status_text=status_text,
        date=date_text,
        deciders=tuple(deciders),
        content=_cap_content(content, path),
        files=tuple(_files(lines, here, path, catalog)),
        tags=tuple(tags),
        links=tuple(links),
        superseded_by=tuple(sorted(superseded_by)),
    )


def _first(values: Iterable[str | None]) -> str | None:
    """Return the first value that is not None."""
    return next((value for value in values if value is not None), None)


# -- front matter -------------------------------------------------------------------------------

_FM_OPEN: Final = re.compile(r"^-{3,}[ \t]*$")
_FM_CLOSE: Final = re.compile(r"^(?:-{3,}|\.{3})[ \t]*$")


def _split_front_matter(text: str) -> tuple[list[str] | None, str, int]:
    """Split YAML front matter off: (its lines or None, the body, its first line's index)."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip()), 0)
    if not _FM_OPEN.match(lines[start]):
        return None, text, 0
    for end in range(start + 1, len(lines)):
        if _FM_CLOSE.match(lines[end]):
            return lines[start + 1 : end], "\n".join(lines[end + 1 :]), start + 1
    raise InvalidInput(f"broken YAML front matter: line {start + 1}: no closing '---' line")


def _load_front_matter(lines: list[str], first_line: int) -> dict[str, Any]:
    """Parse front matter with python-frontmatter's YAML handler (safe loader)."""
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no type stubs
    from frontmatter.default_handlers import YAMLHandler

    try:
        value = YAMLHandler().load("\n".join(lines))
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


def _scalar(value: Any) -> str:
    """Return a YAML scalar as one line of text ("" for a missing value or a container)."""
    if value is None or isinstance(value, dict | list | tuple | set):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return " ".join(str(value).split())


def _scalars(value: Any) -> list[str]:
    """Return the scalars of a YAML value (a scalar or a flat list of them)."""
    if isinstance(value, list | tuple):
        return [text for item in value[:MAX_LIST_ITEMS] if (text := _scalar(item))]
    text = _scalar(value)
    return [text] if text else []


# -- body lines ---------------------------------------------------------------------------------

_FENCE: Final = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE: Final = re.compile(r"^\s*(`{3,}|~{3,})\s*$")
_ATX: Final = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+|$)(.*)$")
_SETEXT: Final = re.compile(r"^ {0,3}(=+|-{2,})[ \t]*$")
_LIST_OR_QUOTE: Final = re.compile(r"^\s*(?:[-*+>|]|\d+[.)])(?:\s|$)")
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


def _lines(body: str) -> list[_Line]:
    """Classify each body line: fenced or not, and which part of the ADR it belongs to."""
    raws = body.split("\n")
    metas = _meta_texts(raws)
    levels: list[int | None] = [_heading_level(meta) for meta in metas]
    # Setext headings: a single-line paragraph underlined with === or ---.
    for i in range(1, len(raws)):
        meta, above = metas[i], metas[i - 1]
        if meta is None or above is None or not _SETEXT.match(meta):
            continue
        if not above.strip() or levels[i - 1] is not None or _LIST_OR_QUOTE.match(above):
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
    out: list[_Line] = []
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
            stack.append((level, _section_name(_heading_text(raws[i]))))
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
        out.append(_Line(raw=raw, meta=metas[i], zone=zone))
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


def _heading_text(raw: str) -> str:
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
_KEY_VALUE: Final = re.compile(
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


def _key_values(lines: list[_Line]) -> dict[str, list[str]]:
    """Collect ``Key: value`` lines and table rows of the metadata parts, by engram field."""
    fields: dict[str, list[str]] = {}
    for index, line in enumerate(lines):
        if line.meta is None or line.zone not in ("preamble", "metadata", "status"):
            continue
        after = [other.meta or "" for other in lines[index + 1 : index + 3]]
        if after and _is_table_separator(after[0]):
            # A header row: "| Status | Date |" over "| Accepted | 2024-03-01 |" sets both.
            keys = [_KEYS.get(_key_name(cell)) for cell in _table_cells(line.meta)]
            # In a Status section it is a history: the section's own reading picks the row.
            if line.zone != "status" and sum(key is not None for key in keys) >= 2 and after[1:]:
                for key, cell in zip(keys, _table_cells(after[1]), strict=False):
                    if key is not None and _clean_value(cell):
                        fields.setdefault(key, []).append(_clean_value(cell))
            continue
        match = _KEY_VALUE.match(line.meta) or _TABLE_ROW.match(line.meta)
        name = _field_of(line.meta)
        if match is None or name is None or (name == "status" and line.zone == "status"):
            continue
        value = _clean_value(match.group("value"))
        if value:
            fields.setdefault(name, []).append(value)
    return fields


def _table_cells(text: str) -> list[str]:
    """Return the cells of a Markdown table row ([] when the line is not one)."""
    text = text.strip()
    if not text.startswith("|"):
        return []
    return [cell.strip() for cell in text.strip("|").split("|")]


def _is_table_separator(text: str) -> bool:
    """Tell whether a line is a table's header separator (``|---|:--:|``)."""
    text = text.strip()
    return "-" in text and "|" in text and not set(text) - set("|:- \t")


def _key_name(text: str) -> str:
    """Normalise a metadata key: lowercase, no emphasis, colon, dashes or underscores."""
    text = text.replace("*", " ").replace(":", " ").replace("-", " ").replace("_", " ")
    return " ".join(text.lower().split())


def _field_of(text: str) -> str | None:
    """Return the engram field a ``Key: value`` line or table row sets, or None."""
    match = _KEY_VALUE.match(text) or _TABLE_ROW.match(text)
    return _KEYS.get(_key_name(match.group("key"))) if match else None


def _clean_value(text: str) -> str:
    """Return a metadata value without surrounding emphasis, whitespace collapsed."""
    text = " ".join(text.replace("**", "").split())
    return text.strip("*_ ")


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
_MD_LINK: Final = re.compile(
    r"!?\[(?P<text>[^\[\]\n]{0,300}+)\]\(\s*+<?(?P<url>[^)\s>\[]{0,1000}+)>?"
    r"(?:\s++(?:\"[^\"\n]*+\"|'[^'\n]*+'))?+\s*+\)"
)
_LEAD_NOISE: Final = re.compile(r"^[\W_]+")
_STATUS_LABEL: Final = re.compile(r"^status\b[\W_]*", re.IGNORECASE)


def _status_word(text: str) -> str | None:
    """Return the engram status named first in a status value, or None."""
    match = _STATUS_RE.search(_MD_LINK.sub(" ", text))
    return match.lastgroup if match else None


def _status_opening(text: str) -> str | None:
    """Return the engram status a Status-section line opens with, or None."""
    text = _DATES.sub(" ", _MD_LINK.sub(" ", text))
    text = _LEAD_NOISE.sub("", text)
    text = _LEAD_NOISE.sub("", _STATUS_LABEL.sub("", text))
    match = _STATUS_RE.match(text)
    return match.lastgroup if match else None


def _status(
    meta: dict[str, Any], fields: dict[str, list[str]], lines: list[_Line]
) -> tuple[str, str, str | None]:
    """Return (engram status, the status as written, a date written with it)."""
    written = _clean_value(_scalar(meta.get("status"))) or next(iter(fields.get("status", [])), "")
    if written and not _has_words(written):  # "Status: 2024-03-01" names a date, no status
        written_date = _date_in(written)
        written = ""
    else:
        written_date = None
    if written:
        text = written[:MAX_ITEM_CHARS]
        _check_template_status(text)
        return _status_word(text) or "proposed", text, _date_in(text)
    section = [
        _clean_value(" ".join(_LIST_PREFIX.sub("", line.meta).strip(" |").split(" | ")))
        for line in lines
        if line.zone == "status"
        and line.meta is not None
        and line.meta.strip()
        and not _is_table_separator(line.meta)
    ]
    best: tuple[int, int, str, str] | None = None
    for index, text in enumerate(section):
        word = _status_opening(text)
        if word is not None and (best is None or (_RANK[word], index) >= best[:2]):
            best = (_RANK[word], index, word, text)
    section_date = _first(_date_in(text) for text in section)
    if best is not None:
        _, _, word, text = best
        _check_template_status(text)
        return word, text[:MAX_ITEM_CHARS], _date_in(text) or section_date
    for text in section:
        plain = _LEAD_NOISE.sub("", _DATES.sub(" ", text))
        if (
            not _has_words(text)
            or _RELATION.match(plain)
            or _field_of(text) not in (None, "status")
        ):
            continue
        _check_template_status(text)
        return "proposed", text[:MAX_ITEM_CHARS], section_date
    return "active", "", section_date or written_date


def _has_words(text: str) -> bool:
    """Tell whether a text holds a letter once its dates are taken out."""
    return bool(re.search(r"[^\W\d_]", _DATES.sub(" ", text)))


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


# -- titles, numbers and dates ------------------------------------------------------------------

_NAME_NUMBER: Final = re.compile(r"^(?:adr|dr|rfc)?[-_ ]?0*(\d{1,6})(?=$|[-_. ])", re.IGNORECASE)
_NAME_DATE: Final = re.compile(r"^(\d{4})-?(\d{2})-?(\d{2})(?=$|[-_. ])")
_TITLE_ADR: Final = re.compile(
    r"^\[?\s*adr[\s_#-]{0,3}(\d{1,9})\s*\]?\s*(?:[.:)–—-]\s*|\s+|$)", re.IGNORECASE
)
_TITLE_NUMBER: Final = re.compile(r"^#?(\d{1,9})(\s*[.:)–—](?!\d)\s*|\s+[-–—]\s+|-(?=[^\d\s])|\s+)")
_TITLE_DATE: Final = re.compile(r"^\d{4}-\d{2}-\d{2}(?:\s*[:.–—-]\s*|\s+)")


def _number_and_date(name: str) -> tuple[int | None, str | None]:
    """Return the number or the date an ADR's file name starts with."""
    stem = name.rsplit(".", 1)[0]
    dated = _NAME_DATE.match(stem)
    if dated:
        moment = _make_date(*dated.groups())
        if moment is not None:
            return None, moment
    numbered = _NAME_NUMBER.match(stem)
    return (int(numbered.group(1)) if numbered else None), None


def _clean_title(title: str, number: int | None) -> str:
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
        rest = rest[: MAX_TITLE_CHARS - 1].rstrip() + "…"
    return rest


def _title_from_name(name: str) -> str:
    """Make a title from a file name: "0005-use-postgres.md" → "Use postgres"."""
    stem = name.rsplit(".", 1)[0]
    stem = _NAME_DATE.sub("", stem) if _NAME_DATE.match(stem) else _NAME_NUMBER.sub("", stem)
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
_DATES: Final = re.compile(
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


def _date_in(text: str) -> str | None:
    """Return the first real date written in a text.

    ISO (2024-03-01, 2024/03/01), an English month name (1 March 2024, March 1, 2024), or
    day first with slashes or dots (01/03/2024, 1.3.2024: adr-tools' old default and the
    German style); month first only when the day-first reading cannot be a date (03/25/2024).
    """
    for match in _DATES.finditer(text):
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


def _date_value(value: Any) -> str | None:
    """Return a front-matter date (a YAML date, datetime or text) as RFC 3339 UTC."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return format_time(moment) if 1900 <= moment.year <= 2999 else None
    if isinstance(value, date):
        return _make_date(str(value.year), str(value.month), str(value.day))
    if isinstance(value, str) and len(value) < 200:
        if re.match(r"^\s*\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}", value):
            try:
                return _date_value(parse_time(value))
            except InvalidInput:
                pass  # not a time after all: look for a date in the text instead
        return _date_in(value)
    return None


# -- deciders and tags --------------------------------------------------------------------------

_NAME_SPLIT: Final = re.compile(r"\s*(?:[,;]|\band\b|&)\s*", re.IGNORECASE)


def _names(values: Iterable[Any]) -> list[str]:
    """Return decider names from YAML values and ``Deciders:`` lines, in order, once each."""
    names: list[str] = []
    seen: set[str] = set()
    for value in values:
        for text in _scalars(value):
            text = _MD_LINK.sub(lambda link: link.group("text"), text)
            for part in _NAME_SPLIT.split(text):
                name = _clean_value(part).strip(" .")
                if not name or name.startswith(("{", "[", "<")) or len(name) > MAX_ITEM_CHARS:
                    continue
                if name.casefold() not in seen:
                    seen.add(name.casefold())
                    names.append(name)
    return names[:50]


def _tags(values: Iterable[Any]) -> list[str]:
    """Return ``adr`` and the front-matter tags, lowercase, sorted, once each."""
    tags = {"adr"}
    for value in values:
        for text in _scalars(value):
            for part in re.split(r"[,;]", text) if isinstance(value, str) else [text]:
                tag = " ".join(part.strip().lstrip("#").lower().split())
                if tag and len(tag) <= MAX_ITEM_CHARS and not tag.startswith(("{", "[")):
                    tags.add(tag)
    return sorted(tags)[:50]


# -- relations ----------------------------------------------------------------------------------

_RELATION: Final = re.compile(
    r"\b(?P<phrase>superseded\s+by|superceded\s+by|supersedes|supercedes|superseding"
    r"|replaced\s+by|replaces|replacing|obsoleted\s+by|obsoletes|deprecated\s+by"
    r"|amended\s+by|amends|amending|refined\s+by|refines|clarified\s+by|clarifies"
    r"|extended\s+by|extends|relates\s+to|related\s+to|related|see\s+also)\b\s*:?",
    re.IGNORECASE,
)
_LIST_PREFIX: Final = re.compile(r"^\s*(?:>\s*)*(?:[-*+]\s+|\d{1,3}[.)]\s+)?(?:[*_]{1,2}\s*)?")
_TARGET: Final = re.compile(
    r"(?P<link>"
    + _MD_LINK.pattern.replace("?P<text>", "?P<ltext>").replace("?P<url>", "?P<lurl>")
    + r")|\badr[\s_#-]{0,3}0*(?P<anum>\d{1,6})(?!\d)"
    r"|(?<![\w&/#])#0*(?P<hnum>\d{1,6})\b"
    r"|(?P<tok>[\w][\w.-]{0,200})",
    re.IGNORECASE,
)


def _rel_kind(phrase: str) -> str:
    """Map a relation phrase onto supersedes, superseded_by or relates."""
    words = " ".join(phrase.lower().split())
    if words.endswith(" by") and words.split()[0] in (
        "superseded",
        "superceded",
        "replaced",
        "obsoleted",
        "deprecated",
    ):
        return "superseded_by"
    if words in ("supersedes", "supercedes", "superseding", "replaces", "replacing", "obsoletes"):
        return "supersedes"
    return "relates"


def _front_matter_relations(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """Return (relation, target text) pairs from relation keys in the front matter."""
    pairs: list[tuple[str, str]] = []
    for key, value in meta.items():
        words = " ".join(key.replace("_", " ").replace("-", " ").split())
        if not _RELATION.fullmatch(words) and words not in ("links", "relates"):
            continue
        kind = _rel_kind(words) if _RELATION.fullmatch(words) else "relates"
        pairs += [(kind, text) for text in _scalars(value)]
    return pairs


def _relations(
    meta: dict[str, Any], status_text: str, lines: list[_Line], catalog: _Catalog, here: str
) -> tuple[set[str], set[str], set[str]]:
    """Return the ADR paths this ADR supersedes, is superseded by, and relates to."""
    found: dict[str, set[str]] = {"supersedes": set(), "superseded_by": set(), "relates": set()}
    pairs = _front_matter_relations(meta) + _line_relations(status_text, anywhere=True)
    for line in lines:
        if line.meta is None or line.zone in ("title", "heading"):
            continue
        anywhere = line.zone in ("status", "links", "metadata") or (
            line.zone == "preamble"
            and bool(_KEY_VALUE.match(line.meta) or _LIST_OR_QUOTE.match(line.meta))
        )
        line_pairs = _line_relations(line.meta, anywhere=anywhere)
        if not line_pairs and line.zone == "links":
            line_pairs = [("relates", line.meta)]
        pairs += line_pairs
    for kind, segment in pairs:
        found[kind].update(_targets(segment, catalog, here))
    return found["supersedes"], found["superseded_by"], found["relates"]


def _line_relations(text: str, *, anywhere: bool) -> list[tuple[str, str]]:
    """Split a line into (relation, text naming its targets) at each relation phrase."""
    if not text:
        return []
    matches = list(_RELATION.finditer(text))
    if not matches:
        return []
    prefix = _LIST_PREFIX.match(text)
    if not anywhere and matches[0].start() != (prefix.end() if prefix else 0):
        return []
    pairs = []
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        pairs.append((_rel_kind(match.group("phrase")), text[match.end() : end]))
    return pairs


def _targets(segment: str, catalog: _Catalog, here: str) -> list[str]:
    """Return the known ADR paths a piece of text names (links, numbers, file names, slugs)."""
    if not catalog.paths:
        return []
    out: list[str] = []
    for match in _TARGET.finditer(segment):
        target: str | None = None
        if match.group("link"):
            target = catalog.by_link(match.group("lurl") or "", here) or catalog.by_reference(
                match.group("ltext") or "", here
            )
        elif match.group("anum"):
            target = catalog.by_number(int(match.group("anum")), here)
        elif match.group("hnum"):
            target = catalog.by_number(int(match.group("hnum")), here)
        elif match.group("tok"):
            target = catalog.by_name(match.group("tok").rstrip(".-"), here)
        if target is not None and target not in out:
            out.append(target)
    return out


class _Catalog:
    """The known ADR paths, looked up by path, file name, slug and number in any case."""

    def __init__(self, paths: Iterable[str]) -> None:
        unique: set[str] = set()
        for raw in paths:
            try:
                unique.add(normalize_path(str(raw)))
            except InvalidInput:
                continue
        unique.discard("")
        self.paths: list[str] = sorted(unique)
        self._path: dict[str, list[str]] = {}
        self._name: dict[str, list[str]] = {}
        self._stem: dict[str, list[str]] = {}
        self._number: dict[int, list[str]] = {}
        for path in self.paths:
            name = posixpath.basename(path)
            stem = name.rsplit(".", 1)[0].lower()
            self._path.setdefault(path.lower(), []).append(path)
            self._name.setdefault(name.lower(), []).append(path)
            self._stem.setdefault(stem, []).append(path)
            slug = (
                _NAME_DATE.sub("", stem) if _NAME_DATE.match(stem) else _NAME_NUMBER.sub("", stem)
            )
            slug = slug.strip("-_. ")
            if slug and slug != stem:
                self._stem.setdefault(slug, []).append(path)
            number, _ = _number_and_date(name)
            if number is not None:
                self._number.setdefault(number, []).append(path)

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and path.lower() in self._path

    @staticmethod
    def _pick(candidates: list[str] | None, here: str) -> str | None:
        """Return the one candidate, preferring the referring ADR's folder; None if ambiguous."""
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        near = [path for path in candidates if posixpath.dirname(path) == here]
        return near[0] if len(near) == 1 else None

    def by_number(self, number: int, here: str) -> str | None:
        """Find the ADR with this number."""
        return self._pick(self._number.get(number), here)

    def by_name(self, token: str, here: str) -> str | None:
        """Find the ADR a bare file name or slug names (only tokens that look like one)."""
        lowered = token.lower()
        if lowered.endswith(ADR_SUFFIXES):
            return self._pick(self._name.get(lowered), here)
        if "-" not in lowered and "_" not in lowered:
            return None
        return self._pick(self._stem.get(lowered), here)

    def by_link(self, url: str, here: str) -> str | None:
        """Find the ADR a Markdown link target points at."""
        target = _link_path(url, here)
        if target is None:
            return None
        found = self._pick(self._path.get(target.lower()), here)
        if found is not None:
            return found
        name = posixpath.basename(target).lower()
        stem = name.rsplit(".", 1)[0] if "." in name else name
        return self._pick(self._name.get(name), here) or self._pick(self._stem.get(stem), here)

    def by_reference(self, text: str, here: str) -> str | None:
        """Find the ADR a link's text names ("ADR-0003", "3. Use X")."""
        match = re.match(r"\s*(?:adr[\s_#-]{0,3})?0*(\d{1,6})\b", text, re.IGNORECASE)
        return self.by_number(int(match.group(1)), here) if match else None


def _link_path(url: str, here: str) -> str | None:
    """Return the repo-relative path a link target names, or None (URLs keep their path)."""
    url = url.strip().strip("<>")
    url = re.split(r"[#?]", url, maxsplit=1)[0]
    if not url:
        return None
    url = unquote(url)
    if _URL_SCHEME.match(url):  # a URL: only its last segment can match
        return posixpath.basename(url.rstrip("/")) or None
    joined = url.lstrip("/") if url.startswith("/") else posixpath.join(here, url)
    normal = posixpath.normpath(joined)
    if normal == "." or normal == ".." or normal.startswith(("../", "/")):
        return None
    return normal


# -- files --------------------------------------------------------------------------------------

_PATHISH: Final = re.compile(r"^[\w.@+~*?{},-]+(?:/[\w.@+~*?{},-]*)*$")
_EXTENSION_WORDS: Final = (
    "py pyi pyx ipynb js mjs cjs ts tsx jsx json jsonc jsonl json5 yaml yml toml ini cfg conf "
    "md markdown mdx rst txt adoc go rs java kt kts scala groovy gradle rb php c h cc cpp cxx "
    "hpp hh cs fs swift m mm sh bash zsh fish ps1 bat cmd sql proto graphql gql tf tfvars hcl "
    "xml xsd html htm css scss sass less vue svelte lock env properties mod sum csv tsv ex "
    "exs erl hrl hs ml mli clj cljs edn lua r jl dart zig nim pl pm bzl bazel nix cmake mk "
    "dockerfile containerfile tpl j2 jinja jinja2 tmpl mustache hbs ejs erb plist pem crt "
    "key pub svg png jpg jpeg gif webp pdf drawio puml plantuml mermaid mmd dot log pbtxt "
    "avsc thrift wasm vim el lisp scm rkt sol"
)
_FILE_EXTENSIONS: Final = frozenset(_EXTENSION_WORDS.split())
_FILE_NAMES: Final = frozenset(
    {
        "dockerfile",
        "containerfile",
        "makefile",
        "gnumakefile",
        "justfile",
        "jenkinsfile",
        "procfile",
        "gemfile",
        "rakefile",
        "vagrantfile",
        "brewfile",
        "podfile",
        "cmakelists.txt",
        "license",
        "codeowners",
    }
)


def _path_candidate(text: str) -> str | None:
    """Return a backticked text as a repo-relative path when it looks like one, else None."""
    text = text.strip()
    if len(text) > MAX_ITEM_CHARS:
        return None
    text = re.sub(r"(?::\d{1,7}){1,2}$|#L\d{1,7}(?:-L?\d{1,7})?$", "", text)
    if not text or text.startswith(("-", "~", "@", "$")):
        return None
    if not _PATHISH.match(text) or not re.search(r"[A-Za-z]", text):
        return None
    if "/" not in text:
        lowered = text.lower()
        extension = lowered.rsplit(".", 1)[1] if "." in lowered[1:] else ""
        dotfile = lowered.startswith(".") and lowered.count(".") == 1 and len(lowered) > 2
        if extension not in _FILE_EXTENSIONS and lowered not in _FILE_NAMES and not dotfile:
            return None
    try:
        path = normalize_path(text)
    except InvalidInput:
        return None
    return path or None


_URL_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_LINK_DEFINITION: Final = re.compile(r"^\s{0,3}\[[^\]\n]{1,300}\]:\s*<?([^\s>]{1,1000})")


def _code_spans(text: str) -> list[str]:
    """Return the texts of a line's code spans (a run of backticks closed by one as long)."""
    runs = [(match.start(), match.end()) for match in re.finditer(r"`+", text)]
    by_length: dict[int, list[int]] = {}
    for index, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(index)
    spans: list[str] = []
    index = 0
    while index < len(runs):
        start, end = runs[index]
        same = by_length[end - start]
        later = bisect.bisect_right(same, index)
        if later < len(same):
            closing = same[later]
            spans.append(text[end : runs[closing][0]])
            index = closing + 1
        else:
            index += 1
    return spans


def _files(lines: list[_Line], here: str, own: str, catalog: _Catalog) -> list[str]:
    """Return the repo paths an ADR names in backticks or links to (not ADRs), sorted."""
    found: set[str] = set()
    for line in lines:
        if line.meta is None:
            continue
        for span in _code_spans(line.meta):
            candidate = _path_candidate(span)
            if candidate:
                found.add(candidate)
        urls = [match.group("url") for match in _MD_LINK.finditer(line.meta)]
        urls += [match.group(1) for match in _LINK_DEFINITION.finditer(line.meta)]
        for url in urls:
            if not url or _URL_SCHEME.match(url.strip("<>")):
                continue
            target = _link_path(url, here)
            if target is not None and len(target) <= MAX_ITEM_CHARS:
                found.add(target)
    return sorted(path for path in found if path != own and path not in catalog)[:MAX_LIST_ITEMS]


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
