"""A store's scrubber, made when a write first needs it.

``engram.store.redact`` compiles its rules when it is imported (~15 ms), and a hook that only
reads (the pre-edit check, prompt recall) never scrubs anything. ``LazyScrubber`` holds a
scrubber, or the function that makes one, or nothing (the process's default scrubber), and
imports the rules only when ``get`` is first called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engram.store.redact import Scrubber

__all__ = ["LazyScrubber"]


class LazyScrubber:
    """A scrubber made on first use (from a function given, else the process's default)."""

    __slots__ = ("_made", "_make")

    def __init__(self, source: Scrubber | Callable[[], Scrubber] | None = None) -> None:
        self._made: Scrubber | None = None
        self._make: Callable[[], Scrubber] | None = None
        if source is None or callable(source):
            self._make = source
        else:
            self._made = source

    def get(self) -> Scrubber:
        """Return the scrubber, making it the first time."""
        if self._made is None:
            if self._make is not None:
                self._made = self._make()
            else:
                from engram.store.redact import default_scrubber

                self._made = default_scrubber()
        return self._made
