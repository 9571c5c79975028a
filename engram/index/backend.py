"""The full-text backend contract of the search index: Doc, Filters, SearchIndex.

This module owns what every backend shares: the indexed document, the filters, the
``SearchIndex`` protocol, the field weights, and ``tokenize_query`` (the one place that turns any
user text into safe word tokens). Backends live in ``tantivy.py`` and ``fts.py`` and import this
module; ``factory.open_backend`` picks one by name, so this module imports no backend and no
backend imports the factory. Both backends must pass ``tests/index/test_index_contract.py``. It must
not import a backend library, read memories.jsonl, or apply the ranking multipliers of
README (that is ``ranking.py``).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol

from engram.errors import ConfigError
from engram.model import collapse_whitespace

TEXT_FIELDS: Final = ("title", "tags", "content", "files")
DEFAULT_FIELD_WEIGHTS: Final[Mapping[str, float]] = {
    "title": 6.0,
    "tags": 3.0,
    "content": 1.0,
    "files": 1.5,
}
MAX_QUERY_TOKENS: Final = 64
MAX_TOKEN_CHARS: Final = 40

_WORD: Final = re.compile(r"\w+")
# Words that say how a question is asked rather than what about. They are searched like any
# other, but ``informative`` leaves them out of the share of a query that a memory answers.
_STOP_WORDS: Final = (
    "a an and are as at be been but by can could did do does doing for from had has have"
    " how i if in into is it its me my no not of on or our should so than that the their"
    " them then there these they this those to us was we were what when where which who"
    " whom why will with would you your"
)
QUERY_STOP_WORDS: Final = frozenset(_STOP_WORDS.split())


class Doc(NamedTuple):
    """What a backend indexes for one memory (a named tuple: cheap to build in bulk)."""

    id: str
    title: str
    content: str
    tags: tuple[str, ...]
    files: tuple[str, ...]
    kind: str
    status: str
    scope: str
    project: str
    # ``ranked_title(title, content)`` when the maker of the document has it (a rebuild
    # does, from what the dedupe key normalises anyway); None: the backend works it out.
    ranked: str | None = None

    def ranked_title(self) -> str:
        """Return the title a backend ranks (``ranked_title``)."""
        return ranked_title(self.title, self.content) if self.ranked is None else self.ranked


@dataclass(frozen=True)
class Filters:
    """Restrictions on hits: every given field must match; values within one field are OR'ed.

    ``tags`` match exactly (case-folded), never as substrings. ``ids`` of None means no
    restriction; an empty set means nothing can match.
    """

    kinds: frozenset[str] = frozenset()
    statuses: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()
    projects: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    ids: frozenset[str] | None = None

    def excludes_everything(self) -> bool:
        """Return True when no document can pass these filters."""
        return self.ids is not None and not self.ids


NO_FILTERS: Final = Filters()


class QueryWeight(NamedTuple):
    """What relevance needs to know of a query in one index (``SearchIndex.query_weight``).

    ``weight``: the sum of the idf of its informative words, about what a memory holding each
    of them once, at an average length, scores; ``search`` scores divided by it say how much of
    the query a memory answers (0 when the query has no word). A word no memory has counts as
    one that a single memory has: either way the others do not answer it, and in a small store
    it would otherwise outweigh the rest. ``docs``: the documents indexed. ``unseen``: a word
    of the query written as a name (``names``) is in no document, so the query names something
    no memory mentions. ``words``: how many informative words the query has. ``terms``: each
    informative word with its share of ``weight`` (its idf), for the coverage of a hit.
    """

    weight: float
    docs: int
    unseen: bool
    words: int = 0
    terms: tuple[tuple[str, float], ...] = ()


class SearchIndex(Protocol):
    """A full-text backend: stores only what it needs to rank and filter, keyed by memory id."""

    name: str

    def upsert(self, docs: Sequence[Doc]) -> None:
        """Insert or replace documents by id; durable when it returns."""
        ...

    def bulk_load(self, docs: Iterable[Doc]) -> int:
        """Add many documents in one session to an (assumed) empty index; return the count."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Remove documents by id; missing ids are ignored."""
        ...

    def clear(self) -> None:
        """Remove every document."""
        ...

    def search(
        self, query: str, *, limit: int, filters: Filters = NO_FILTERS
    ) -> list[tuple[str, float]]:
        """Return up to ``limit`` (id, weighted bm25 score > 0) pairs, best first."""
        ...

    def query_weight(self, query: str) -> QueryWeight:
        """Return what relevance needs of a query here (``QueryWeight``)."""
        ...

    def ids(self) -> set[str]:
        """Return every indexed id."""
        ...

    def count(self) -> int:
        """Return the number of indexed documents."""
        ...

    def close(self) -> None:
        """Release files, connections and locks; safe to call twice."""
        ...


def tokenize_query(text: str) -> list[str]:
    """Return the safe word tokens of any text: lowercased, deduplicated, in order, at most 64.

    A recall tokenizes its text in several places: a short text's tokens are kept (a copy is
    returned, so a caller may change it).
    """
    if len(text) <= _KEPT_TEXT_CHARS:
        return list(_tokens_kept(text))
    return _tokenize(text)


# Texts up to this long have their tokens kept (``_tokens_kept``, by the text): queries.
_KEPT_TEXT_CHARS: Final = 512


@functools.lru_cache(maxsize=2048)
def _tokens_kept(text: str) -> tuple[str, ...]:
    return tuple(_tokenize(text))


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    seen: set[str] = set()
    for match in _WORD.finditer(text):
        token = match.group().lower()
        if len(token) > MAX_TOKEN_CHARS or token in seen:
            continue
        seen.add(token)
        tokens.append(token)
        if len(tokens) == MAX_QUERY_TOKENS:
            break
    return tokens


def names(text: str) -> set[str]:
    """Return the tokens of ``text`` (lowercased) that are written as names.

    A name has a capital letter after its first character (GraphQL, iOS), a digit (S3, 404s),
    or a capital first letter anywhere but at the start of the text (MongoDB, Zendesk): what a
    question names, where a plain word ("timestamps", "shrunk") may be a paraphrase.
    """
    found: set[str] = set()
    for number, match in enumerate(_WORD.finditer(text)):
        word = match.group()
        rest = word[1:]
        if (
            any(char.isdigit() for char in word)
            or any(char.isupper() for char in rest)
            or (number > 0 and word[0].isupper())
        ):
            found.add(word.lower())
    return found


def informative(tokens: Sequence[str]) -> list[str]:
    """Return the tokens that are not ``QUERY_STOP_WORDS``, or all of them when none is left."""
    kept = [token for token in tokens if token not in QUERY_STOP_WORDS]
    return kept or list(tokens)


def idf(total: int, found: int) -> float:
    """Return BM25's inverse document frequency of a term in ``found`` of ``total`` documents."""
    return math.log(1.0 + (total - found + 0.5) / (found + 0.5))


_ELLIPSIS: Final = ("…", "...")


def ranked_title(title: str, content: str) -> str:
    """Return the title a backend ranks: none when it is only the content's first words.

    ``capture`` and ``prompt`` title a turn by its first words ("Upgraded to AnyIO 4. Its
    task groups raise…"); weighted as a title, those words would count once more than the
    rest of the text for no reason but how the memory was written (issue 30). A title that
    says something of its own is ranked as one.
    """
    # collapse_whitespace is the \s+ -> " " collapse and strip, without a regular expression
    # (a fifth of a rebuild's per-record work went to those two substitutions), and without
    # splitting text that has nothing to collapse.
    head = collapse_whitespace(title).casefold()
    for mark in _ELLIPSIS:
        head = head.removesuffix(mark).rstrip()
    if not head:
        return title
    body = collapse_whitespace(content[: len(title) * 2 + 64]).casefold()
    return "" if body.startswith(head) else title


def ranked_title_of(title: str, content: str, folded_title: str, folded_content: str) -> str:
    """Return ``ranked_title(title, content)`` given both already collapsed and case-folded
    (``normalize_content``), as the dedupe key has them.

    The same answer: ``ranked_title`` compares the title with the start of the content cut
    to a length, and the cut content, collapsed and folded, is a start of the whole folded
    (both are done character by character). So a folded content that does not start with the
    title settles it; one that does is cut and compared as ``ranked_title`` does.
    """
    head = folded_title
    for mark in _ELLIPSIS:
        head = head.removesuffix(mark).rstrip()
    if not head or not folded_content.startswith(head):
        return title
    return ranked_title(title, content)


def resolve_field_weights(field_weights: Mapping[str, float] | None) -> dict[str, float]:
    """Return the weight of every text field: the defaults overridden by ``field_weights``."""
    weights = dict(DEFAULT_FIELD_WEIGHTS)
    for field, value in (field_weights or {}).items():
        if field not in weights:
            raise ConfigError(
                f"unknown search field weight {field!r}; known fields: {', '.join(TEXT_FIELDS)}"
            )
        try:
            weight = float(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"search field weight {field!r} is not a number: {value!r}") from exc
        if not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"search field weight {field!r} must be >= 0, got {value!r}")
        weights[field] = weight
    return weights
