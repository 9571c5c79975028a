"""Counts in words: "1 finding", "2 findings", "1 memory", "0 memories".

Owns the one rule every sentence that counts something uses (the CLI's reports, doctor's and
check's findings, the TUI's dashboard): the noun agrees with its number. English plurals as
engram's nouns need them (memory → memories, match → matches, chunk → chunks), and an irregular
one given where it is used. Must not: import anything (a pure function on text).
"""

from __future__ import annotations

__all__ = ["counted", "plural"]

_SIBILANT = ("s", "x", "z", "ch", "sh")


def plural(noun: str) -> str:
    """Return the plural of an English noun (or of a phrase's last word: memory versions)."""
    head, space, last = noun.rpartition(" ")
    if last.endswith("y") and last[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        last = last[:-1] + "ies"
    elif last.endswith(_SIBILANT):
        last += "es"
    else:
        last += "s"
    return f"{head}{space}{last}"


def counted(count: int, noun: str, many: str | None = None) -> str:
    """Return ``count`` and its noun in agreement: ``counted(1, "finding")`` is "1 finding".

    ``many`` is the plural where ``plural`` would get it wrong.
    """
    word = noun if count == 1 else (many or plural(noun))
    return f"{count} {word}"
