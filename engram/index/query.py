"""What a recall asks of the index (``Query``) and what it gets back (``Hit``).

Also the one rule for files: ``file_matches`` says whether a memory's file entry bears on a
wanted path (exact, a folder of it, or a glob either way), for the index's file filter and for
``engram check``. Plain values and pure functions: no I/O, no SQL, no backend.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final

from engram.errors import InvalidInput
from engram.index.backend import Filters
from engram.model import Record, normalize_kind, normalize_path, parse_time


@dataclass(frozen=True)
class Query:
    """What a recall asks for: words plus filters (all optional)."""

    text: str = ""
    kinds: frozenset[str] = frozenset()
    statuses: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()
    projects: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    files: tuple[str, ...] = ()
    since: float | None = None  # changed at or after (epoch seconds)
    until: float | None = None  # changed at or before (epoch seconds)
    authors: frozenset[str] = frozenset()  # case-folded author names
    limit: int = 10
    offset: int = 0

    @classmethod
    def build(cls, text: str = "", *, limit: int = 10, offset: int = 0, **filters: Any) -> Query:
        """Return the query for recall's words and filters, as the operations declare them.

        ``filters`` are keyed by Query field (``kinds``, ``tags`` …): each takes one value or
        a list, normalised here (kinds through their aliases, paths repo-relative); ``None``
        and empty lists mean "no filter". An unknown filter is refused by name.
        """
        unknown = sorted(set(filters) - set(_FILTERS))
        if unknown:
            raise InvalidInput(
                f"recall has no filter {', '.join(unknown)}; filters: {', '.join(_FILTERS)}"
            )
        values = {name: _FILTERS[name](_items(value)) for name, value in filters.items() if value}
        return cls(text=str(text or ""), limit=limit, offset=offset, **values)

    def filters(self, ids: frozenset[str] | None) -> Filters:
        """Return the full-text backend's filters for this query, restricted to ``ids``."""
        return Filters(
            kinds=self.kinds,
            statuses=self.statuses,
            scopes=self.scopes,
            projects=self.projects,
            tags=frozenset(tag.lower() for tag in self.tags),
            ids=ids,
        )


@dataclass(eq=False)
class Hit:
    """One ranked result: the record, its final score and the parts of it."""

    id: str
    score: float
    bm25: float
    record: Record
    tokens: tuple[str, ...] = ()
    cosine: float = 0.0  # similarity of the query's and the memory's embeddings (semantic modes)
    # The probability that it answers the query (``relevance.py``); None when no words were
    # given (a browse by filters), and its features (``relevance.FEATURES``).
    relevance: float | None = None
    features: tuple[float, ...] = ()

    @functools.cached_property
    def matched(self) -> list[str]:
        """Name the fields the query's words appear in (worked out only when asked)."""
        return _matched(self.record, self.tokens)


def _items(value: Iterable[str] | str) -> list[str]:
    """Return a filter's values: one string or a list, each split at commas, blanks dropped."""
    items = [value] if isinstance(value, str) else list(value)
    return [part.strip() for item in items for part in str(item).split(",") if part.strip()]


def _set(convert: Callable[[str], str] = str) -> Callable[[list[str]], frozenset[str]]:
    return lambda items: frozenset(convert(item) for item in items)


# How each filter's values are read, by Query field.
_FILTERS: dict[str, Callable[[list[str]], Any]] = {
    "kinds": _set(normalize_kind),
    "statuses": _set(str.lower),
    "scopes": _set(str.lower),
    "projects": _set(),
    "tags": _set(str.lower),
    "files": lambda items: tuple(normalize_path(item) for item in items),
    "since": lambda items: _moment(items, "since", end_of_day=False),
    "until": lambda items: _moment(items, "until", end_of_day=True),
    "authors": _set(str.casefold),
}
_AGE: Final = re.compile(r"(\d{1,6})\s*([hdwmy])")
_AGE_SECONDS: Final = {"h": 3600, "d": 86400, "w": 7 * 86400, "m": 30 * 86400, "y": 365 * 86400}
_DATE: Final = re.compile(r"\d{4}-\d{2}-\d{2}")


def _moment(items: list[str], name: str, *, end_of_day: bool) -> float:
    """Read a since/until value: an age (7d, 2w, 3m, 1y, 12h), a date or an RFC 3339 time.

    A date alone covers its whole day (UTC): ``since`` starts at its midnight, ``until`` ends
    at the next one.
    """
    if len(items) != 1:
        raise InvalidInput(f"{name} takes one date, got {len(items)}: {', '.join(items)}")
    text = items[0].strip().lower()
    age = _AGE.fullmatch(text)
    if age:
        return time.time() - int(age.group(1)) * _AGE_SECONDS[age.group(2)]
    try:
        moment = parse_time(text)
    except InvalidInput:
        raise InvalidInput(
            f"{name} {items[0]!r} is not a date: give 2026-11-01, an RFC 3339 time, "
            "or an age such as 12h, 7d, 2w, 3m (months) or 1y"
        ) from None
    stamp = moment.timestamp()
    if end_of_day and _DATE.fullmatch(text):
        stamp += 86400 - 1e-6
    return stamp


def file_matches(memory_path: str, wanted: str) -> bool:
    """Tell whether a memory's file entry bears on a wanted path (exact, directory or glob)."""
    memory_path, wanted = memory_path.strip("/"), wanted.strip("/")
    if memory_path == wanted:
        return True
    if wanted.startswith(memory_path + "/") or memory_path.startswith(wanted + "/"):
        return True
    return fnmatchcase(wanted, memory_path) or fnmatchcase(memory_path, wanted)


def _matched(record: Mapping[str, Any], tokens: Sequence[str]) -> list[str]:
    """Name the fields in which the query's words (or their stems) appear."""
    if not tokens:
        return []
    get = record.get
    stems = [token[: max(4, len(token) - 3)] if len(token) > 4 else token for token in tokens]
    out: list[str] = []
    # Plain loops: every hit of every recall asks (a generator per field cost a third more).
    for name, text in (
        ("title", str(get("title", "")).lower()),
        ("tags", " ".join(get("tags", []) or []).lower()),
        ("files", " ".join(get("files", []) or []).lower()),
        ("content", str(get("content", "")).lower()),
    ):
        for stem in stems:
            if stem in text:
                out.append(name)
                break
    return out
