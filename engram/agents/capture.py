"""Passive capture: find the "Key Learnings" an agent wrote at the end of its reply.

It owns reading an agent's output text: locating the last section headed "Key Learnings" or
"Learnings" (a markdown heading, a bold line or a plain ``Key Learnings:`` line, outside fenced
code), splitting its list into items, folding continuation lines and sub-bullets into their
item, cleaning the markdown and naming each item with its first sentence. Everything here is
pure and linear in the size of the text: no regular expression can backtrack without bound, and
at most ``MAX_LEARNINGS`` items come back. It must not do I/O, save memories or decide on
duplicates across the store: the service saves each ``Learning`` and deduplicates.
"""

from __future__ import annotations

import re
import string
import unicodedata
from bisect import bisect_right
from collections.abc import Callable
from typing import Final, NamedTuple

from engram.model import normalize_content

__all__ = [
    "MAX_LEARNINGS",
    "MIN_CHARS",
    "Learning",
    "clean_markdown",
    "extract_learnings",
    "learning_title",
]

MIN_CHARS: Final = 20
# A reply is not a backlog: past this many items the rest is noise or an attack, not learnings.
MAX_LEARNINGS: Final = 100
TITLE_CHARS: Final = 120
HEADING_NAMES: Final = frozenset({"key learnings", "learnings"})
# A heading line is short; longer lines are never read as one (keeps huge lines cheap).
_MAX_HEADING_CHARS: Final = 200
_NESTED: Final = 2  # columns past the list's own indent that make an item a sub-item

_FENCE = re.compile(r"^ *(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t](.*))?$")
_HRULE = re.compile(r"^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
_SETEXT = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_ITEM = re.compile(r"^( *)(?:[-*+•]|\d{1,9}[.)]|\(\d{1,9}\))(?:[ \t]+(.*))?$")
_BULLET = re.compile(r"^[-*+•][ \t]")
_CHECKBOX = re.compile(r"^\[[ xX]\][ \t]+")

# Inner parts exclude the delimiters that could start another match, so each scan stops at
# the next candidate and the total work stays linear; the bounds are a second guard.
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_IMAGE = re.compile(r'!\[[^\[\]]{0,1000}\]\([^()\s]{0,2000}(?:\s+"[^"]{0,300}")?\)')
_LINK = re.compile(
    r"\[([^\[\]]{0,1000})\]"
    r'(?:\((?:[^()\s]|\([^()\s]{0,200}\)){0,2000}(?:\s+"[^"]{0,300}")?\)|\[[^\[\]]{0,100}\])'
)
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^<>\s]{1,2000})>")
_TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9-]{0,40})(?:\s[^<>]{0,1000})?/?>")
# Only real HTML tags go: ``Vec<T>`` or ``Option<String>`` outside backticks is text.
_HTML_TAG_NAMES: Final = (
    "a abbr b blockquote br code del details div em h1 h2 h3 h4 h5 h6 hr i img ins kbd li "
    "mark ol p pre s samp small span strike strong sub summary sup table tbody td th thead tr "
    "tt u ul var"
)
_HTML_TAGS: Final = frozenset(_HTML_TAG_NAMES.split())
_DELIMS = re.compile(r"\*+|_+|~~+")
_BACKTICKS = re.compile(r"`+")
_MASKED = re.compile("\ue000(\\d+)\ue001")
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")
_ABBREVIATIONS: Final = frozenset({"e.g", "i.e", "vs", "cf", "approx"})


class Learning(NamedTuple):
    """One learning found in an agent's reply."""

    title: str  # the first sentence, at most 120 characters
    content: str  # the whole item, markdown cleaned, on one line


def extract_learnings(text: str, *, min_chars: int = MIN_CHARS) -> list[Learning]:
    """Return the items of the last "Key Learnings" section of an agent's reply."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    fenced = _fenced_lines(lines)
    found = [
        (index, level)
        for index, line in enumerate(lines)
        if not fenced[index] and (level := _learnings_heading(line)) is not None
    ]
    if not found:
        return []
    start, level = found[-1]  # agents repeat their template; the final section is the real one
    learnings: list[Learning] = []
    seen: set[str] = set()
    for blocks in _section_items(lines, fenced, start + 1, level):
        content = _join_blocks([clean_markdown(block) for block in blocks])
        key = normalize_content(content)
        if len(content) < min_chars or key in seen:
            continue
        seen.add(key)
        learnings.append(Learning(learning_title(content), content))
        if len(learnings) == MAX_LEARNINGS:
            break
    return learnings


def learning_title(text: str, limit: int = TITLE_CHARS) -> str:
    """Return the first sentence of a text, cut at a word boundary with "…" past ``limit``."""
    from engram.store.redact import default_scrubber

    # Redacted before the cut: half a key no longer matches its rule, and would be stored.
    flat = " ".join(default_scrubber().text(text)[0].split())
    window = flat[: limit + 2]
    sentence = window
    for match in _SENTENCE_END.finditer(window):
        if match.group() != "." and set(match.group()) == {"."}:
            continue  # an ellipsis "..." does not end the sentence
        words = window[: match.start()].rsplit(None, 1)
        if words and words[-1].lstrip("(").lower() in _ABBREVIATIONS:
            continue
        sentence = window[: match.end()]
        if sentence.endswith(".") and not sentence.endswith(".."):
            sentence = sentence[:-1]
        break
    if not sentence:
        sentence = window
    if len(sentence) <= limit:
        return sentence
    cut = sentence[: max(limit - 1, 0)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-–—") + "…"


def clean_markdown(text: str) -> str:
    """Return text without markdown markup: emphasis, code ticks, links, images, HTML tags."""
    text = text.replace("\ue000", "").replace("\ue001", "")
    kept: list[str] = []

    def mask(literal: str) -> str:
        kept.append(literal)
        return f"\ue000{len(kept) - 1}\ue001"

    # Code spans and escapes are literal text: hide them from every later rule.
    text = _mask_code_spans(text, mask)
    text = _ESCAPE.sub(lambda m: mask(m[1]), text)
    text = _strip_comments(text)
    text = _IMAGE.sub("", text)
    text = _LINK.sub(lambda m: m[1], text)
    text = _AUTOLINK.sub(lambda m: m[1], text)
    text = _TAG.sub(lambda m: "" if m[1].lower() in _HTML_TAGS else m[0], text)
    text = _strip_emphasis(text)
    text = _MASKED.sub(lambda m: kept[int(m[1])], text)
    return " ".join(text.split())


def _fenced_lines(lines: list[str]) -> list[int]:
    """Return, for each line, 0 outside fenced code, 1 on an opening fence, 2 inside or closing."""
    fenced = [0] * len(lines)
    opener = ""
    for index, line in enumerate(lines):
        match = _FENCE.match(line)
        if opener:
            fenced[index] = 2
            closing = match and match[1][0] == opener[0] and len(match[1]) >= len(opener)
            if closing and not line.strip().strip(opener[0]):
                opener = ""
        elif match and not (match[1][0] == "`" and "`" in line[match.end() :]):
            fenced[index] = 1  # (a backtick fence's info string has no backtick: CommonMark)
            opener = match[1]
    return fenced


def _learnings_heading(line: str) -> int | None:
    """Return the level of a "Key Learnings" heading line (7 for bold or plain), else None."""
    if len(line) > _MAX_HEADING_CHARS or "learning" not in line.lower():
        return None
    line = line.expandtabs(4)
    atx = _ATX.match(line)
    if atx:
        level, name = len(atx[1]), _strip_closing_hashes(atx[2] or "")
    elif len(line) - len(line.lstrip(" ")) > 3 or _BULLET.match(line.lstrip()):
        return None
    else:
        level, name = 7, line
    name = name.replace("*", "").replace("_", "").replace("`", "")
    name = "".join(char for char in name if char.isalnum() or char.isspace() or char in ".:")
    start, end = 0, len(name)
    while start < end and not name[start].isalpha():
        start += 1
    while end > start and not name[end - 1].isalnum():
        end -= 1
    return level if " ".join(name[start:end].lower().split()) in HEADING_NAMES else None


def _strip_closing_hashes(text: str) -> str:
    """Return an ATX heading's text without its optional closing ``#`` sequence."""
    text = text.rstrip()
    bare = text.rstrip("#")
    if bare != text and (not bare or bare[-1] in " \t"):
        return bare.rstrip()
    return text


def _bold_line(text: str) -> bool:
    """Tell whether a stripped line is one bold phrase, like ``**Next steps:**``."""
    for marker in ("**", "__"):
        if text.startswith(marker):
            inner = text[2:].removesuffix(":")
            if not inner.endswith(marker):
                return False
            inner = inner[:-2]
            return bool(inner) and inner == inner.strip() and marker not in inner
    return False


def _section_items(lines: list[str], fenced: list[int], start: int, level: int) -> list[list[str]]:
    """Return the items of the section starting at ``start``: each a list of text blocks."""
    items: list[list[list[str]]] = []  # item -> blocks (item text, sub-items) -> lines
    base = -1  # indent of the section's list; -1 before its first item
    blank = False
    intro = False  # one short paragraph may introduce the list
    index = start
    if index < len(lines) and not fenced[index] and _SETEXT.match(lines[index]):
        index += 1
    while index < len(lines):
        line = lines[index].expandtabs(4)
        indent = len(line) - len(line.lstrip(" "))
        nested = base >= 0 and indent >= base + _NESTED
        if fenced[index]:
            # A fenced block is a paragraph of its own; its text never becomes a learning.
            if fenced[index] == 1:
                if blank and not nested and (items or intro):
                    break
                intro = intro or not items
            blank = False
            index += 1
            continue
        stripped = line.strip()
        if not stripped:
            blank = True
            index += 1
            continue
        atx = _ATX.match(line)
        if atx:
            if len(atx[1]) <= level:
                break
            blank, intro = True, False  # a sub-heading inside the section groups items
            index += 1
            continue
        if _HRULE.match(line) or (not nested and _bold_line(stripped)):
            break
        item = _ITEM.match(line)
        if item:
            text = _CHECKBOX.sub("", item[2] or "")
            if items and nested:
                _lead_in(items[-1])
                items[-1].append([text])
            else:
                if base < 0:
                    base = indent
                items.append([[text]])
        elif items:
            if blank and not nested:
                break  # the first paragraph after the list ends the section
            _lead_in(items[-1])
            if blank:
                items[-1].append([stripped])
            else:
                items[-1][-1].append(stripped)
        else:
            if blank and intro:
                break
            intro = True
        blank = False
        index += 1
    return [[" ".join(block) for block in item] for item in items]


def _lead_in(item: list[list[str]]) -> None:
    """End a bold-only first line (``**Atomic writes**``) with a colon before text follows it."""
    if len(item) == 1 and len(item[0]) == 1:
        line = item[0][0].strip()
        if _bold_line(line) and line.rstrip("*_")[-1:].isalnum():
            item[0][0] = line + ":"


def _join_blocks(blocks: list[str]) -> str:
    """Join an item's text and its folded sub-items, marking each boundary."""
    out = ""
    for block in blocks:
        if not block:
            continue
        if not out:
            out = block
        elif out[-1] in ".!?:;,…":
            out = f"{out} {block}"
        else:
            out = f"{out}; {block}"
    return out


def _mask_code_spans(text: str, mask: Callable[[str], str]) -> str:
    """Replace each inline code span by ``mask(code)``; unmatched backticks stay literal."""
    runs = [match.span() for match in _BACKTICKS.finditer(text)]
    if not runs:
        return text
    by_length: dict[int, list[int]] = {}
    for number, (begin, end) in enumerate(runs):
        by_length.setdefault(end - begin, []).append(number)
    out: list[str] = []
    position = number = 0
    while number < len(runs):
        begin, end = runs[number]
        same = by_length[end - begin]
        following = bisect_right(same, number)
        if following == len(same):
            number += 1
            continue
        closing = same[following]
        close_begin, close_end = runs[closing]
        code = text[end:close_begin]
        if code.startswith(" ") and code.endswith(" ") and code.strip():
            code = code[1:-1]
        out += [text[position:begin], mask(code)]
        position, number = close_end, closing + 1
    out.append(text[position:])
    return "".join(out)


def _strip_comments(text: str) -> str:
    """Remove ``<!-- … -->`` comments, scanning each part of the text once."""
    out: list[str] = []
    position = 0
    while (begin := text.find("<!--", position)) >= 0:
        end = text.find("-->", begin + 4)
        if end < 0:
            break
        out.append(text[position:begin])
        position = end + 3
    out.append(text[position:])
    return "".join(out)


def _punctuation(char: str) -> bool:
    return char in string.punctuation or unicodedata.category(char)[0] in "PS"


def _strip_emphasis(text: str) -> str:
    """Remove paired emphasis delimiters (``*``, ``_``, ``~~``) as CommonMark would pair them."""
    openers: dict[str, list[tuple[int, int]]] = {"*": [], "_": [], "~": []}
    removed: list[tuple[int, int]] = []
    for match in _DELIMS.finditer(text):
        begin, end = match.span()
        char = text[begin]
        before = text[begin - 1] if begin else " "
        after = text[end] if end < len(text) else " "
        left = not after.isspace() and (
            not _punctuation(after) or before.isspace() or _punctuation(before)
        )
        right = not before.isspace() and (
            not _punctuation(before) or after.isspace() or _punctuation(after)
        )
        if char == "_":
            can_open = left and (not right or _punctuation(before))
            can_close = right and (not left or _punctuation(after))
        else:
            can_open, can_close = left, right
        if can_close and openers[char]:
            removed += [openers[char].pop(), (begin, end)]
        elif can_open:
            openers[char].append((begin, end))
    if not removed:
        return text
    out: list[str] = []
    position = 0
    for begin, end in sorted(removed):
        out.append(text[position:begin])
        position = end
    out.append(text[position:])
    return "".join(out)
