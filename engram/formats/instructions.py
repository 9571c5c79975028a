"""The memory compiled into the instruction files agents read without MCP or hooks.

``engram export --format agents-md|claude-md|cursor-rules|kiro-steering|cline`` writes one
marked block into the file that agent reads at every session (``AGENTS.md``, ``CLAUDE.md``,
``.cursor/rules/engram.mdc``, ``.kiro/steering/engram.md`` or Cline's
``memory-bank/systemPatterns.md``): the pinned and important (importance 4 or 5) decisions,
pitfalls and principles, most important first, within a budget of tokens.

The block is the only text engram owns in the file::

    <!-- BEGIN engram export (engram export --format agents-md rewrites this block) -->
    ...
    <!-- END engram export -->

Everything before and after it is kept byte for byte; a file without the block gets it appended
(a new file also gets the front matter Cursor's and Kiro's loaders want); a second run with the
same memories changes nothing, because the block holds no time stamp. A file whose markers are
damaged (a second BEGIN, an END without BEGIN, a BEGIN without END) is refused with its line,
and nothing is written. The target must be a regular file or absent: a committed symlink or
FIFO in its place is refused (a repository must not steer engram's writes elsewhere).

Only compiling and splicing are pure; ``write_block`` reads and replaces the one file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from engram.errors import InvalidInput
from engram.fileio import atomic_write, read_regular
from engram.model import is_pinned, is_tombstone
from engram.operations.admin import INSTRUCTION_FORMATS

__all__ = [
    "FORMATS",
    "KINDS",
    "BlockWrite",
    "Target",
    "compile_block",
    "find_block",
    "selected",
    "splice",
    "strip_block",
    "write_block",
]

BEGIN: Final = "<!-- BEGIN engram export"
END: Final = "<!-- END engram export -->"
KINDS: Final = ("pitfall", "decision", "principle")  # the order of the block's sections
_HEADINGS: Final = {"pitfall": "Pitfalls", "decision": "Decisions", "principle": "Principles"}
DEFAULT_BUDGET: Final = 1500  # tokens (about four characters each) for the whole block
MIN_IMPORTANCE: Final = 4
MAX_ITEM_CHARS: Final = 320  # of a memory's content shown under its title
MAX_FILE_BYTES: Final = 4 * 1024 * 1024  # an instruction file over this is refused, not read


@dataclass(frozen=True)
class Target:
    """Where one format's block goes, and what a new file of that format starts with."""

    path: str  # relative to the repository root
    front: str = ""  # written only when the file is new
    about: str = ""


FORMATS: Final[dict[str, Target]] = {  # keyed by INSTRUCTION_FORMATS, in that order
    "agents-md": Target("AGENTS.md", about="AGENTS.md (Codex, OpenCode, Cursor, many others)"),
    "claude-md": Target("CLAUDE.md", about="CLAUDE.md (Claude Code)"),
    "cursor-rules": Target(
        ".cursor/rules/engram.mdc",
        front=(
            "---\n"
            "description: Decisions, pitfalls and principles from the project's engram memory\n"
            "globs:\n"
            "alwaysApply: true\n"
            "---\n\n"
        ),
        about="a Cursor project rule, always applied",
    ),
    "kiro-steering": Target(
        ".kiro/steering/engram.md",
        front="---\ninclusion: always\n---\n\n",
        about="a Kiro steering file, always included",
    ),
    "cline": Target(
        "memory-bank/systemPatterns.md",
        about="Cline's memory bank (systemPatterns.md: decisions and patterns)",
    ),
}


if tuple(FORMATS) != INSTRUCTION_FORMATS:
    raise AssertionError("engram.operations.admin.INSTRUCTION_FORMATS and these targets differ")


@dataclass(frozen=True)
class BlockWrite:
    """What ``write_block`` did to one file."""

    format: str
    path: str  # as the person sees it (relative to the root when inside it)
    changed: bool
    created: bool
    memories: int  # memories in the block
    left_out: int  # selected memories the budget left out

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "path": self.path,
            "changed": self.changed,
            "created": self.created,
            "memories": self.memories,
            "left_out": self.left_out,
        }


def _importance(record: Mapping[str, Any]) -> int:
    value = record.get("importance", 3)
    return value if isinstance(value, int) and not isinstance(value, bool) else 3


def selected(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Return the memories a block holds, most important first.

    Active decisions, pitfalls and principles that are pinned or of importance 4 or 5; then
    pinned first, higher importance first, pitfalls before decisions before principles, and
    by title and id so that the order never depends on the store's.
    """
    chosen = [
        record
        for record in records
        if not is_tombstone(record)
        and record.get("kind") in KINDS
        and record.get("status", "active") == "active"
        and (is_pinned(record) or _importance(record) >= MIN_IMPORTANCE)
    ]
    chosen.sort(
        key=lambda r: (
            not is_pinned(r),
            -_importance(r),
            KINDS.index(str(r.get("kind"))),
            str(r.get("title", "")).casefold(),
            str(r.get("id", "")),
        )
    )
    return chosen


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _item(record: Mapping[str, Any]) -> str:
    title = _one_line(str(record.get("title", ""))) or "(untitled)"
    content = _one_line(str(record.get("content", "")))
    if len(content) > MAX_ITEM_CHARS:
        content = content[: MAX_ITEM_CHARS - 1].rstrip() + "…"
    line = f"- **{title}**"
    if is_pinned(record):
        line += " (pinned)"
    files = [str(f) for f in record.get("files") or [] if isinstance(f, str)]
    if files:
        shown = ", ".join(f"`{f}`" for f in files[:5])
        line += f" — files: {shown}" + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    if content and content != title:
        line += f"\n  {content}"
    return line


def compile_block(
    fmt: str, records: Iterable[Mapping[str, Any]], *, budget: int = DEFAULT_BUDGET
) -> tuple[str, int, int]:
    """Return the block for ``fmt`` (markers included), the memories in it and those left out.

    Memories go in most important first until the next would pass ``budget`` tokens (counted
    as four characters each); the block then says how many were left out.
    """
    chosen = selected(records)
    head = [
        f"{BEGIN} (engram export --format {fmt} rewrites this block) -->",
        "## Project memory (engram)",
        "",
        "The pinned and important decisions, pitfalls and principles recorded in "
        "`.engram/memories.jsonl`. Ask engram (`engram recall`, `engram check FILE`) for the rest.",
    ]
    limit = max(budget, 0) * 4 - sum(len(line) + 1 for line in head) - len(END) - 80
    items: dict[str, list[str]] = {kind: [] for kind in KINDS}
    used = 0
    taken = 0
    for record in chosen:
        text = _item(record)
        if used + len(text) + 1 > limit:
            break
        items[str(record["kind"])].append(text)
        used += len(text) + 1
        taken += 1
    lines = list(head)
    for kind in KINDS:
        if items[kind]:
            lines += ["", f"### {_HEADINGS[kind]}", "", *items[kind]]
    if not taken:
        lines += ["", "Nothing pinned or of importance 4 or 5 yet."]
    left = len(chosen) - taken
    if left:
        lines += ["", f"{left} more left out to stay within {budget} tokens: `engram recall`."]
    lines.append(END)
    return "\n".join(lines), taken, left


def find_block(text: str, shown: str) -> tuple[int, int] | None:
    """Return the character span of the block in ``text`` (END's line end excluded), or None.

    Raises InvalidInput naming ``shown`` and the line when the markers are damaged.
    """
    begin: tuple[int, int] | None = None  # (offset, line number)
    span: tuple[int, int] | None = None
    offset = 0
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        bare = line.strip()
        if bare.startswith(BEGIN):
            if begin is not None or span is not None:
                raise InvalidInput(
                    f"{shown}:{number}: a second engram export block begins here; "
                    "remove one by hand, then export again"
                )
            begin = (offset + line.index(BEGIN), number)
        elif bare == END:
            if begin is None:
                raise InvalidInput(
                    f"{shown}:{number}: the engram export block ends here but never begins; "
                    "remove the line or the whole block, then export again"
                )
            span = (begin[0], offset + line.index(END) + len(END))
            begin = None
        offset += len(line)
    if begin is not None:
        raise InvalidInput(
            f"{shown}:{begin[1]}: the engram export block begins here but never ends; "
            "remove it, then export again"
        )
    return span


def strip_block(text: str) -> str:
    """Return ``text`` without engram's export block (for imports: never read it back)."""
    try:
        span = find_block(text, "")
    except InvalidInput:
        return text
    if span is None:
        return text
    return text[: span[0]] + text[span[1] :]


def splice(old: str | None, block: str, *, front: str = "", shown: str) -> str:
    """Return the file's new text: ``block`` in place of the old one, all else unchanged."""
    if old is None:
        return f"{front}{block}\n"
    newline = "\r\n" if "\r\n" in old else "\n"
    if newline != "\n":
        block = block.replace("\n", newline)
    span = find_block(old, shown)
    if span is not None:
        return old[: span[0]] + block + old[span[1] :]
    if not old.strip():
        return old + block + newline
    gap = "" if old.endswith(newline * 2) else (newline if old.endswith(newline) else newline * 2)
    return old + gap + block + newline


def _existing(path: Path, shown: str) -> str | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidInput(f"{shown}: cannot be read: {exc.strerror or exc}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise InvalidInput(
            f"{shown}: is a symbolic link; engram writes only a regular file here (refused)"
        )
    data = read_regular(path, limit=MAX_FILE_BYTES, what=shown)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{shown}: not UTF-8 text (byte {exc.start}); refused") from exc


def _parents_inside(path: Path, root: Path, shown: str) -> None:
    """Refuse a default target whose folders are links leading out of the repository."""
    try:
        path.parent.resolve().relative_to(root.resolve())
    except ValueError:
        raise InvalidInput(
            f"{shown}: its folder leads outside the repository (a symbolic link?); refused"
        ) from None


def write_block(
    fmt: str,
    records: Iterable[Mapping[str, Any]],
    root: Path,
    *,
    to: Path | None = None,
    budget: int = DEFAULT_BUDGET,
) -> BlockWrite:
    """Write ``fmt``'s block into its file (``to``, else the format's path under ``root``)."""
    if fmt not in FORMATS:
        raise InvalidInput(
            f"unknown instruction format {fmt!r}", hint="use one of: " + ", ".join(FORMATS)
        )
    target = FORMATS[fmt]
    path = to if to is not None else root / target.path
    if not path.is_absolute():
        path = Path.cwd() / path
    try:
        shown = path.relative_to(root).as_posix()
    except ValueError:
        shown = str(path)
    if to is None:
        _parents_inside(path, root, shown)
    block, count, left = compile_block(fmt, records, budget=budget)
    old = _existing(path, shown)
    new = splice(old, block, front=target.front, shown=shown)
    changed = new != old
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, new.encode("utf-8"))
    return BlockWrite(fmt, shown, changed, old is None, count, left)
