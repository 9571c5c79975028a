"""What a recall asks of the index (``Query``) and what it gets back (``Hit``).

Also the one rule for files: ``file_matches`` says whether a memory's file entry bears on a
wanted path (exact, a folder of it, or a glob either way), for the index's file filter and for
``engram check``. Plain values and pure functions: no I/O, no SQL, no backend.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from engram.errors import InvalidInput
from engram.index.backend import Filters
from engram.model import Record, normalize_kind, normalize_path


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
        values = {
            name: _FILTERS[name](_items(value)) for name, value in filters.items() if value
        }
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
}


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
    fields = {
        "title": str(record.get("title", "")).lower(),
        "tags": " ".join(record.get("tags", []) or []).lower(),
        "files": " ".join(record.get("files", []) or []).lower(),
        "content": str(record.get("content", "")).lower(),
    }
    stems = [token[: max(4, len(token) - 3)] if len(token) > 4 else token for token in tokens]
    return [name for name, text in fields.items() if any(stem in text for stem in stems)]
