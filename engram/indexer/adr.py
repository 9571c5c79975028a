"""Indexer of ADRs: creates decision memories from the project's architecture decision records.

This module owns finding the ADR folders and files and reading them; ``adrparse`` parses each
record into a ``ParsedAdr`` (with ``adrtext`` for the Markdown, ``adrfields`` for titles,
dates, deciders and tags, ``adrlinks`` for relations and named files), and the service turns
those into ``decision`` memories (``source: adr:<path>``). It does no writes, touches no store
or index, and never imports dulwich, typer or rich. A bad ADR is a value (``Skipped`` with
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

import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from engram.errors import InputTooLarge, InvalidInput
from engram.fileio import read_regular
from engram.indexer.adrlinks import ADR_SUFFIXES, Catalog
from engram.indexer.adrparse import ParsedAdr, parse_against
from engram.model import normalize_path

DEFAULT_ADR_DIRS: Final = ("docs/adr", "docs/adrs", "docs/decisions", "doc/adr", "adr", "decisions")
MAX_FILE_BYTES: Final = 1024 * 1024


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
    catalog = Catalog(rel for rel, _ in found)
    parsed: list[ParsedAdr] = []
    for rel, full in found:
        try:
            text = _read_adr_text(base, full)
            parsed.append(parse_against(rel, text, catalog))
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
        raw = read_regular(full, limit=MAX_FILE_BYTES, what="")
    except InputTooLarge as exc:
        size = full.stat().st_size
        raise InvalidInput(f"too large ({size:,} bytes; the limit is {MAX_FILE_BYTES:,})") from exc
    except InvalidInput as exc:  # a named pipe or a device (a committed link to /dev/zero)
        reason = exc.message.removeprefix(": ")
        raise InvalidInput(reason.replace("cannot be read: ", "unreadable: ", 1)) from exc
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
