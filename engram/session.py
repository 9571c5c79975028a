"""Session summaries: the structured note an agent leaves when a session ends.

A summary has up to six sections, always written in this order: Goal, Instructions,
Discoveries, Accomplished, Next steps, Relevant files. It can come as markdown (headings
``## Goal`` or bold lines ``**Goal:**``, any case, colon optional), as separate fields, or both:
a field given separately replaces the section of the same name in the text. Text before the
first section is kept as a preamble. ``Relevant files`` lines become the memory's ``files``.

Pure functions: no I/O; the service saves the result as a ``session`` memory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, NamedTuple

SECTIONS: Final = (
    "Goal",
    "Instructions",
    "Discoveries",
    "Accomplished",
    "Next steps",
    "Relevant files",
)
# Argument names of the sections (CLI options, MCP arguments): goal, instructions, …
FIELD_NAMES: Final = {name.lower().replace(" ", "_"): name for name in SECTIONS}
TITLE_CHARS: Final = 120

_BY_KEY: Final = {name.lower(): name for name in SECTIONS}
_HEADING: Final = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*(?P<h>[^#\n]+?)\s*#*\s*|(?:\*\*|__)(?P<b>[^*_\n]+?)(?:\*\*|__)\s*:?\s*)$"
)
_FILE_ITEM: Final = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(?P<item>.+?)\s*$")
_PATHISH: Final = re.compile(r"^[\w.@~+-][\w./@~+*?\[\]{}-]*$")


class Summary(NamedTuple):
    """A parsed session summary."""

    sections: dict[str, str]  # by canonical name, in SECTIONS order, non-empty only
    preamble: str

    @property
    def title(self) -> str:
        """One line: the goal's first line, else the first line of anything written."""
        for text in (self.sections.get("Goal", ""), self.preamble, *self.sections.values()):
            for line in text.splitlines():
                line = re.sub(r"^\s*(?:[-*+•]|\d+[.)])\s+", "", line).strip(" *_#`")
                if line:
                    return _clip(f"Session: {line}", TITLE_CHARS)
        return "Session summary"

    @property
    def files(self) -> list[str]:
        """The paths listed under Relevant files (list items; backticks and notes stripped)."""
        out: list[str] = []
        for line in self.sections.get("Relevant files", "").splitlines():
            match = _FILE_ITEM.match(line)
            text = match.group("item") if match else line.strip()
            text = text.split(" — ")[0].split(" - ")[0].split(": ")[0].strip().strip("*_")
            quoted = text.startswith("`")
            text = text.strip("`")
            if text and _PATHISH.match(text) and (quoted or "/" in text or "." in text):
                out.append(text)
        return list(dict.fromkeys(out))

    def markdown(self) -> str:
        """Render the summary: preamble, then each section under a ``##`` heading."""
        parts = [self.preamble] if self.preamble else []
        parts += [f"## {name}\n{text}" for name, text in self.sections.items()]
        return "\n\n".join(parts)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] or text[: limit - 1]
    return cut.rstrip() + "…"


def _section_name(line: str) -> str | None:
    match = _HEADING.match(line)
    if not match:
        return None
    name = (match.group("h") or match.group("b") or "").strip().rstrip(":").strip().lower()
    return _BY_KEY.get(name) or _BY_KEY.get(name.replace("_", " "))


def parse_summary(content: str, fields: Mapping[str, str | None] | None = None) -> Summary:
    """Split ``content`` into the six sections; ``fields`` (by name or argument name) override."""
    found: dict[str, list[str]] = {}
    preamble: list[str] = []
    current: list[str] = preamble
    fence = False
    for line in content.replace("\r\n", "\n").split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        name = None if fence else _section_name(line)
        if name is not None:
            current = found.setdefault(name, [])
            continue
        current.append(line)
    texts = {name: "\n".join(lines).strip() for name, lines in found.items()}
    for key, value in (fields or {}).items():
        name = FIELD_NAMES.get(key) or _BY_KEY.get(key.lower())
        if name is None:
            raise KeyError(key)
        if value is not None and str(value).strip():
            texts[name] = str(value).strip()
    sections = {name: texts[name] for name in SECTIONS if texts.get(name)}
    return Summary(sections, "\n".join(preamble).strip())
