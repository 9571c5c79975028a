"""Run the user's extra redaction patterns (``redact.extra_patterns``) with a time limit.

The patterns come from a committed config, so anyone who lands a commit writes them; a
catastrophic one (``(a+)+$``) must not hang every write. Owns compiling them with the ``regex``
package, each search bounded by ``PATTERN_TIMEOUT`` seconds, and the problems found: a pattern
that does not compile, or that ran out of time, is left out from then on in this process and
reported by ``problems`` (the caller names the config file and key).

Must not: raise on a bad pattern (writes go on with the built-in rules and the other patterns);
read or write files; import anything from engram. ``regex`` is imported only when there are
patterns, so a store without any never pays for it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable
from typing import Any, Final

__all__ = ["PATTERN_TIMEOUT", "Extra", "compile_extras", "problems"]

# Seconds one search of one text may take. Normal patterns finish in microseconds; a pattern that
# needs this long is backtracking without end.
PATTERN_TIMEOUT: Final = 0.25

_lock = threading.Lock()
_problems: dict[str, str] = {}  # pattern → why it is not used (first problem seen)


def _fail(source: str, message: str) -> None:
    with _lock:
        _problems.setdefault(source, message)


class Extra:
    """One extra pattern, searched with a time limit; after a failure it matches nothing."""

    def __init__(self, source: str, compiled: Any) -> None:
        self.source = source
        self._compiled = compiled

    @property
    def usable(self) -> bool:
        """Whether the pattern compiled and has not run out of time."""
        return self._compiled is not None and self.source not in _problems

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Return the (start, end) of each non-empty match; [] once the pattern failed."""
        if not self.usable:
            return []
        try:
            return [
                m.span()
                for m in self._compiled.finditer(text, timeout=PATTERN_TIMEOUT)
                if m.end() > m.start()
            ]
        except TimeoutError:
            self._timed_out(text)
            return []

    def search(self, text: str) -> bool:
        """Tell whether the pattern matches anywhere in text (False once it failed)."""
        if not self.usable:
            return False
        try:
            return self._compiled.search(text, timeout=PATTERN_TIMEOUT) is not None
        except TimeoutError:
            self._timed_out(text)
            return False

    def _timed_out(self, text: str) -> None:
        _fail(
            self.source,
            f"pattern {self.source!r} took over {PATTERN_TIMEOUT} s on a {len(text)}-character "
            "text (it backtracks without end) and is not used; rewrite it without nested "
            "repetition such as (a+)+",
        )


@functools.lru_cache(maxsize=32)
def compile_extras(patterns: tuple[str, ...]) -> tuple[Extra, ...]:
    """Compile the extra patterns once per distinct config; a bad one is kept, disabled."""
    if not patterns:
        return ()
    import regex

    out = []
    for source in patterns:
        try:
            compiled: Any = regex.compile(source)
        except (regex.error, TypeError, ValueError, OverflowError) as exc:
            _fail(source, f"pattern {source!r} is not a valid regular expression ({exc}); not used")
            compiled = None
        out.append(Extra(source, compiled))
    return tuple(out)


def problems(patterns: Iterable[str]) -> list[str]:
    """Return why each of these patterns is not used (bad syntax, out of time), in order."""
    sources = tuple(str(p) for p in patterns)
    compile_extras(sources)
    with _lock:
        return [_problems[s] for s in dict.fromkeys(sources) if s in _problems]
