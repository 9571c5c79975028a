"""Answers held to a token budget: paged with opaque cursors, shrunk to fit, never cut silently.

Every adapter that answers a reader with a bounded window (an agent over MCP, a program over
HTTP or the CLI's ``--json``) shares this engine:

- ``Budget``: an answer's budget in characters and the shape its payload is rendered in;
  ``fit`` finds the largest prefix of a list that fits, ``render`` marks an answer still over
  the budget as truncated instead of cutting it unannounced.
- cursors: ``encode_cursor`` / ``decode_cursor`` carry a paging state to the next call;
  ``Pages`` keeps recall's pages (what each has shown) so a hit is never shown twice, and
  ``unseen`` ranks past them.
- ``shrink``: ask again with a smaller budget until the answer fits (``fitted_check`` is the
  check loop: pre-edit findings packed for the answer's room).
- ``memory_page``: one memory's content in pages, or its JSON in parts when even its fields
  exceed the budget.

Plain synchronous code over plain data: it imports no adapter framework (mcp, typer, HTTP),
never the facade, and does no I/O; the callers pass in the search or check to run.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from engram.agents.briefing import CHARS_PER_TOKEN, estimate_tokens
from engram.errors import InvalidInput
from engram.operations.advice import PERSON
from engram.operations.views import HitLike

if TYPE_CHECKING:
    from engram.service import Findings

__all__ = [
    "CHARS_PER_TOKEN",
    "Budget",
    "Page",
    "Pages",
    "check_answer",
    "decode_cursor",
    "dumps",
    "encode_cursor",
    "estimate_tokens",
    "fitted_check",
    "memory_page",
    "memory_view",
    "shrink",
    "unseen",
]

PAGE_WINDOW: Final = 50  # hits ranked at once when a cursor is followed
PAGES_KEPT: Final = 256  # recall cursors a process remembers
WHOLE_FIRST: Final = 64  # lists up to this long are serialized whole before any probing
MIN_TOKENS: Final = 50  # the smallest budget a shrinking answer is asked for
CHECK_FIELDS: Final = ("short_id", "reason", "kind", "status", "title")  # of a check.Finding

Payload = dict[str, Any]
Shape = Callable[[Payload], Payload]
H = TypeVar("H", bound=HitLike)


def dumps(value: Any) -> str:
    """Serialize an answer compactly (what the reader gets and the budget counts)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Budget:
    """An answer's budget in characters, and the shape its payload is rendered in.

    ``name`` is what the reader called (a tool, a route), named in the notes that say how to
    page on; ``setting`` is the configuration key that raises the budget.
    """

    def __init__(
        self,
        chars: int,
        *,
        name: str = "",
        shape: Shape | None = None,
        setting: str = "mcp.token_budget",
    ) -> None:
        self.chars = chars
        self.name = name
        self.shaper = shape
        self.setting = setting

    def shape(self, payload: Payload) -> Payload:
        """Return the payload in the shape the reader asked for."""
        return self.shaper(payload) if self.shaper is not None else payload

    def size(self, payload: Payload) -> int:
        """Return the length of an answer's text."""
        return len(dumps(self.shape(payload)))

    def fits(self, payload: Payload) -> bool:
        """Tell whether an answer's text is within the budget."""
        return self.size(payload) <= self.chars

    def over(self, text: str) -> None:
        """Note an answer still over the budget once rendered (a hook; by default nothing)."""

    def render(self, payload: Payload) -> str:
        """Return the answer's text; one that still exceeds the budget is marked, not cut."""
        text = dumps(self.shape(payload))
        if len(text) <= self.chars:
            return text
        self.over(text)
        room = max(0, self.chars - 300)
        return dumps(
            {
                "truncated": True,
                "note": f"The answer has {estimate_tokens(text)} tokens, more than the budget of "
                f"{self.chars // CHARS_PER_TOKEN}; this is its beginning only. Narrow the "
                f"request, or raise {self.setting} in .engram/config.yaml.",
                "text": text[: room // 2],  # JSON escaping can double the length
            }
        )

    def fit(self, build: Callable[[int], Payload], count: int) -> tuple[str, int]:
        """Return the text of ``build(n)`` for the largest ``n <= count`` within budget, and n.

        ``build(n)`` is the answer holding the first n items (and a cursor when n < count).
        A short list is tried whole first; otherwise probing n = 1, 2, 4 … then bisecting keeps
        every probe near the budget's size, however many items there are.
        """
        good, bad = 0, count + 1  # build(good) is the answer; build(bad) would not fit
        if count <= WHOLE_FIRST:
            whole = dumps(self.shape(build(count)))
            if len(whole) <= self.chars:
                return whole, count  # the usual case: one serialization
            bad = count
        n = 1
        while n < bad:
            if self.fits(build(n)):
                good = n
                if n == bad - 1:
                    break
                n = min(n * 2, bad - 1)
            else:
                bad = n
        while bad - good > 1:
            middle = (good + bad) // 2
            if self.fits(build(middle)):
                good = middle
            else:
                bad = middle
        return self.render(build(good)), good


# -- cursors ------------------------------------------------------------------------------------


def encode_cursor(state: Mapping[str, Any]) -> str:
    """Return an opaque cursor for a paging state."""
    raw = dumps(dict(state)).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, tool: str) -> dict[str, Any]:
    """Return the paging state in a cursor this process made for ``tool``."""
    try:
        raw = base64.urlsafe_b64decode(cursor.strip() + "=" * (-len(cursor.strip()) % 4))
        state = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            "cursor is not one this server made",
            hint="pass next_cursor exactly as the previous page returned it",
        ) from exc
    if not isinstance(state, dict) or state.get("t") != tool:
        raise InvalidInput(
            f"cursor does not belong to {tool}",
            hint="pass next_cursor to the tool that returned it",
        )
    return state


class Page(NamedTuple):
    """Where a recall's paging stands: its arguments and the ids its pages have shown."""

    query: dict[str, Any]
    shown: frozenset[str]


class Pages:
    """The recall cursors of this process (the most recent ones, each immutable)."""

    def __init__(self, size: int = PAGES_KEPT) -> None:
        self.size = size
        self._pages: OrderedDict[str, Page] = OrderedDict()

    def token(self) -> str:
        """Return a fresh, unguessable cursor key."""
        import secrets

        return secrets.token_urlsafe(9)

    def put(self, token: str, page: Page) -> None:
        """Remember a page, forgetting the oldest beyond the size."""
        self._pages[token] = page
        while len(self._pages) > self.size:
            self._pages.popitem(last=False)

    def get(self, token: str) -> Page | None:
        """Return the page a cursor key names, if it is still remembered."""
        return self._pages.get(token)

    def follow(self, cursor: str, tool: str, query: Mapping[str, Any]) -> Page:
        """Return the page a cursor continues; ``query``, when given, must be the page's."""
        state = decode_cursor(cursor, tool)
        earlier = self.get(str(state.get("k")))
        if earlier is None:
            raise InvalidInput(
                "this cursor has expired",
                hint="call recall again without a cursor (cursors last while the server runs)",
            )
        if query and query != earlier.query:
            raise InvalidInput(
                "this cursor belongs to a recall with other arguments",
                hint="repeat the arguments of the first page exactly, or only pass the cursor",
            )
        return earlier


def unseen(
    search: Callable[[Mapping[str, Any], int], list[H]],
    query: Mapping[str, Any],
    shown: frozenset[str],
    limit: int,
) -> list[H]:
    """Return the ranked hits earlier pages did not show: more than ``limit`` if there are more.

    A window is ranked and what earlier pages showed is left out, so a hit is never shown
    twice, however the candidate pool or the store changed in between.
    """
    window = max(PAGE_WINDOW, len(shown) + limit + 1)
    while True:
        ranked = search(query, window)
        hits = [hit for hit in ranked if hit.id not in shown]
        if len(hits) > limit or len(ranked) < window:
            return hits
        window *= 2


# -- shrinking to fit ---------------------------------------------------------------------------


def shrink(
    answer: Callable[[int], Payload],
    fits: Callable[[Payload], bool],
    tokens: int,
    *,
    factor: float,
) -> Payload:
    """Return ``answer(tokens)``, asked again with ``factor`` fewer tokens until it fits.

    At MIN_TOKENS the answer is returned as it is.
    """
    while True:
        payload = answer(tokens)
        if fits(payload) or tokens <= MIN_TOKENS:
            return payload
        tokens = max(MIN_TOKENS, int(tokens * factor))


def check_answer(result: Findings) -> Payload:
    """Return the compact answer of a pre-edit check: its text and findings, without memories."""
    return {
        "text": result.text,
        "findings": [{key: getattr(item, key) for key in CHECK_FIELDS} for item in result.findings],
        "tokens": result.tokens,
        "left_out": result.left_out,
    }


def fitted_check(
    check: Callable[[int], Findings], tokens: int, fits: Callable[[Payload], bool]
) -> Payload:
    """Return the check answer packed for the largest budget (from ``tokens``) that fits."""
    return shrink(lambda budget: check_answer(check(budget)), fits, tokens, factor=0.7)


# -- one memory in pages ------------------------------------------------------------------------


def memory_view(record: Mapping[str, Any], *, brief_history: bool) -> Payload:
    """Return a memory as it is shown whole; ``brief_history`` keeps earlier titles only."""
    view = dict(record)
    if brief_history and view.get("history"):
        view["history"] = [
            {key: old.get(key) for key in ("rev", "updated_at", "title")} for old in view["history"]
        ]
        view["history_note"] = (
            f"earlier versions by title only, to fit the response budget ({PERSON}"
            "`engram get ID` for their text)"
        )
    return view


def memory_page(
    record: Mapping[str, Any], state: Mapping[str, Any], note: str, budget: Budget
) -> str:
    """Return one memory framed by ``note``: whole, a page of its content, or a part of its JSON.

    ``state`` is the cursor's (``o``: where the content page starts, ``part``: which part).
    """
    start = int(state.get("o", 0))
    if "part" not in state and start == 0:
        for brief in (False, True):
            payload = {"note": note, "memory": memory_view(record, brief_history=brief)}
            text = dumps(budget.shape(payload))
            if len(text) <= budget.chars:
                return text
    content = str(record.get("content") or "")
    if start and start >= len(content):
        raise InvalidInput("this cursor points past the end of the memory")
    if "part" not in state:
        page = _content_page(record, content, start, note, budget)
        if page is not None:
            return page
    return _part(record, int(state.get("part", 0)), note, budget)


def _content_page(
    record: Mapping[str, Any], content: str, start: int, note: str, budget: Budget
) -> str | None:
    """Return the longest page of content from ``start`` that fits (None: not even one char)."""
    view = memory_view(record, brief_history=True)
    if start > 0:
        view = {key: record.get(key) for key in ("id", "title")}

    def page(end: int) -> Payload:
        payload: Payload = {
            "note": note,
            "memory": {**view, "content": content[start:end]},
            "content_page": {"start": start, "end": end, "total": len(content)},
        }
        if end < len(content):
            payload["next_cursor"] = encode_cursor(
                {"t": "get", "id": record["id"], "rev": record.get("rev"), "o": end}
            )
            payload["more"] = f"The content continues: call {budget.name} with cursor=next_cursor."
        return payload

    if not budget.fits(page(min(start + 1, len(content)))):
        return None
    low, high = min(start + 1, len(content)), len(content)
    while low < high:
        middle = (low + high + 1) // 2
        if budget.fits(page(middle)):
            low = middle
        else:
            high = middle - 1
    return dumps(budget.shape(page(low)))


def _part(record: Mapping[str, Any], part: int, note: str, budget: Budget) -> str:
    """Return part ``part`` of a memory whose fields alone exceed the budget."""
    text = dumps(record)
    size = max(200, (budget.chars - len(note) - 400) // 2)  # escaping can double a char
    pages = max(1, math.ceil(len(text) / size))
    if not 0 <= part < pages:
        raise InvalidInput("this cursor points past the end of the memory")
    payload: Payload = {
        "note": note + " Too large for one response: concatenate the part of every page "
        "to get the memory's JSON.",
        "id": record["id"],
        "part": text[part * size : (part + 1) * size],
        "page": part + 1,
        "pages": pages,
    }
    if part + 1 < pages:
        payload["next_cursor"] = encode_cursor(
            {"t": "get", "id": record["id"], "rev": record.get("rev"), "part": part + 1}
        )
        payload["more"] = f"More parts: call {budget.name} with cursor=next_cursor."
    return budget.render(payload)
