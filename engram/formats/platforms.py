"""Where other agents keep their own memory, and how each file is taken into engram.

``engram import --from PLATFORM`` reads one of these, each file a proposed memory (a person
accepts or rejects it with ``engram review``) with ``source: import:<platform>:<path>``:

- ``claude-code``: Claude Code's auto memory, ``~/.claude/projects/<slug>/memory/`` (its
  ``MEMORY.md`` and topic files; ``CLAUDE_CONFIG_DIR`` moves ``~/.claude``). The slug is the
  repository's absolute path with every character but ASCII letters and digits made ``-``,
  as Claude Code 2.1 names the folder; a path over 200 characters gets a hash suffix there,
  so the one folder starting with the first 200 is taken.
- ``codex``: Codex's memories, ``~/.codex/memories/`` (``CODEX_HOME`` moves ``~/.codex``):
  ``MEMORY.md``, ``memory_summary.md``, notes and summaries below it.
- ``cursor``: the project's rules, ``.cursor/rules/*.mdc`` (``globs`` become files).
- ``cline``: Cline's memory bank, ``memory-bank/*.md``.
- ``serena``: Serena's memories, ``.serena/memories/*.md``.
- ``kiro``: Kiro's steering files, ``.kiro/steering/*.md`` (``fileMatchPattern`` become files).

engram's own export block (``engram export --format …``) is cut out of every file first, and
a file that held nothing else is left out: engram never imports its own memories back.
Only this module knows the places; ``engram.sync.plaintransfer`` reads them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from engram.formats.plain import Origin
from engram.operations.admin import PLATFORMS as DECLARED

__all__ = ["PLATFORMS", "Platform", "claude_slug", "folder_of"]

CLAUDE_SLUG_CHARS: Final = 200


@dataclass(frozen=True)
class Platform:
    """One agent's memory files: the folder (in the repository or the home) and the suffixes."""

    name: str
    about: str
    suffixes: tuple[str, ...]
    origin: Origin
    in_home: bool  # the folder is under the person's home, not the repository


PLATFORMS: Final[dict[str, Platform]] = {
    "claude-code": Platform(
        "claude-code",
        "Claude Code's auto memory (~/.claude/projects/<slug>/memory/)",
        (".md",),
        Origin(
            "claude-code",
            kinds={"user": "preference", "feedback": "preference", "project": "fact"},
        ),
        in_home=True,
    ),
    "codex": Platform(
        "codex", "Codex's memories (~/.codex/memories/)", (".md",), Origin("codex"), in_home=True
    ),
    "cursor": Platform(
        "cursor",
        "Cursor's project rules (.cursor/rules/*.mdc)",
        (".mdc", ".md"),
        Origin("cursor", kind="principle", files_key="globs"),
        in_home=False,
    ),
    "cline": Platform(
        "cline", "Cline's memory bank (memory-bank/)", (".md",), Origin("cline"), in_home=False
    ),
    "serena": Platform(
        "serena",
        "Serena's memories (.serena/memories/)",
        (".md",),
        Origin("serena"),
        in_home=False,
    ),
    "kiro": Platform(
        "kiro",
        "Kiro's steering files (.kiro/steering/)",
        (".md",),
        Origin("kiro", kind="principle", files_key="fileMatchPattern"),
        in_home=False,
    ),
}


if tuple(PLATFORMS) != DECLARED:
    raise AssertionError("engram.operations.admin.PLATFORMS and these folders differ")


def claude_slug(root: Path) -> str:
    """Return the name Claude Code gives a project's folder under ``~/.claude/projects/``."""
    return re.sub(r"[^a-zA-Z0-9]", "-", str(root))


def _claude_home(home: Path) -> Path:
    custom = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(custom).expanduser() if custom else home / ".claude"


def _codex_home(home: Path) -> Path:
    custom = os.environ.get("CODEX_HOME")
    return Path(custom).expanduser() if custom else home / ".codex"


def folder_of(name: str, root: Path, home: Path) -> Path | None:
    """Return the folder of ``name``'s memory files for the repository ``root``, if any."""
    if name == "claude-code":
        projects = _claude_home(home) / "projects"
        slug = claude_slug(root)
        if len(slug) <= CLAUDE_SLUG_CHARS:
            return projects / slug / "memory"
        prefix = slug[:CLAUDE_SLUG_CHARS] + "-"
        found = sorted(p for p in projects.glob(f"{glob_escape(prefix)}*") if p.is_dir())
        return found[0] / "memory" if len(found) == 1 else None
    if name == "codex":
        return _codex_home(home) / "memories"
    places = {
        "cursor": ".cursor/rules",
        "cline": "memory-bank",
        "serena": ".serena/memories",
        "kiro": ".kiro/steering",
    }
    return root / places[name]


def glob_escape(text: str) -> str:
    """Return ``text`` with glob's special characters taken literally."""
    return re.sub(r"([\[\]*?])", r"[\1]", text)
