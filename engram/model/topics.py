"""Topic keys: a stable ``family/segment`` key suggested from a kind, a title or content.

A save with an existing topic key updates that memory instead of adding one (README); the
suggestion follows what other engram tools suggest, so keys agree across them.
"""

from __future__ import annotations

import re
from typing import Final

from engram.errors import InvalidInput
from engram.model.record import normalize_kind

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
