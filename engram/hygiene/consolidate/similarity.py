"""How alike two memories' texts are, as consolidation judges near duplicates.

Two measures, and a pair is as alike as the higher of them says:

- the characters: rapidfuzz's ratio of the two normalised texts (a copy with a few edits);
- the words: the Dice coefficient of their word sets, each word lowercased and lightly stemmed
  (plurals, -ed, -ing, a final e), stop words left out, so that "Timestamps are stored in UTC
  and converted" and "Store timestamps in UTC; convert" say the same words. A negation is
  bound to the word it negates ("not memcached", "don't use"), so "use Redis, not Memcached"
  and "use Memcached, not Redis" do not share their words.

Two texts of which one negates a word the other says plainly ("do not use eval", "use eval")
contradict each other, however alike their characters: they are never near duplicates.

``words_of`` is computed once per memory; ``alike`` compares two; ``spellings`` gives each
word's stem as first spelled (what a full-text search is asked). The stemmer is a few suffix
rules (no dictionary, English only, other scripts are left as they are): it must make the
same word the same stem, and it may leave related words apart. Pure: no I/O, no state but a
cache of stems.
"""

from __future__ import annotations

import re
from typing import Final

from rapidfuzz import fuzz

__all__ = ["STOP_WORDS", "Words", "alike", "spellings", "stem", "words_of"]

Words = frozenset[str]

_WORD_RE: Final = re.compile(r"\w+")
# Words that carry no meaning of their own. No negation is here: "not" changes what is said.
STOP_WORDS: Final = frozenset(
    """
    a an the and or but nor of in on at to for from by with without into onto over under via
    per as is are was were be been being am it its this that these those there here all any
    each every both some such so then than too very we our ours us i me my you your yours he she
    they them their his her do does did doing done has have had having will would shall can
    could should may might must just also only about when while where which who whom whose
    what how why if else
    """.split()  # noqa: SIM905 -- a list of words reads best as the words
)
# Words that negate what follows; the short forms are what \\w+ leaves of "don't", "isn't" ...
_NEGATIONS: Final = frozenset({"not", "no", "never", "cannot", "t"})
_CONTRACTED: Final = frozenset(
    """
    don doesn didn isn aren wasn weren won wouldn shouldn couldn hasn haven hadn can
    """.split()  # noqa: SIM905
)
_VOWELS: Final = frozenset("aeiouy")
# The character ratio is computed only for pairs sharing this share of the fewer words.
_EDITED_WORDS: Final = 0.5
_KEYS_KEPT: Final = 200_000  # distinct words whose stem is kept; a bigger vocabulary starts over


def stem(word: str) -> str:
    """Return a lowercase word's stem: plural, -ed, -ing and a final e taken off."""
    out = word
    if len(out) > 3 and out.isascii() and out.isalpha():
        if out.endswith(("ies", "ied")) and len(out) > 4:
            out = out[:-3] + "y"  # retries, retried -> retry
        elif out.endswith("sses"):
            out = out[:-2]
        elif out.endswith("s") and not out.endswith(("ss", "us", "is")):
            out = out[:-1]
        for suffix in ("ing", "ed"):
            if out.endswith(suffix) and not out.endswith("eed"):
                base = out[: -len(suffix)]
                if len(base) >= 2 and not _VOWELS.isdisjoint(base):
                    out = base
                    if len(out) > 2 and out[-1] == out[-2] and out[-1] not in "lsz":
                        out = out[:-1]  # stopped -> stop
                break
        if out.endswith("e") and len(out) > 2:
            out = out[:-1]
    return out


class _Keys(dict[str, str]):
    """Each word seen: its stem, or "" for a stop word or a negation (made on first sight)."""

    def __missing__(self, token: str) -> str:
        if len(self) >= _KEYS_KEPT:
            self.clear()
        left_out = token in STOP_WORDS or token in _CONTRACTED or token in _NEGATIONS
        key = "" if left_out else stem(token)
        self[token] = key
        return key


_KEYS: Final = _Keys()


def words_of(text: str) -> Words:
    """Return the stemmed words of a (normalised, lowercase) text, stop words left out."""
    tokens = _WORD_RE.findall(text)
    if _NEGATIONS.isdisjoint(tokens):  # most texts: one pass of dictionary lookups
        plain = set(map(_KEYS.__getitem__, tokens))
        plain.discard("")
        return frozenset(plain)
    out: set[str] = set()
    negated = False
    for token in tokens:
        if token in _NEGATIONS:
            negated = True
            continue
        key = _KEYS[token]
        if key:
            out.add(f"not {key}" if negated else key)
            negated = False
    if negated:
        out.add("not")
    return frozenset(out)


def spellings(text: str) -> dict[str, str]:
    """Return each stem of a text's words (stop words and negations left out), first spelling."""
    tokens = _WORD_RE.findall(text)
    tokens.reverse()  # the first spelling of a stem is the last one written into the dict
    out = dict(zip(map(_KEYS.__getitem__, tokens), tokens, strict=True))
    out.pop("", None)
    return out


def alike(
    text_a: str, text_b: str, words_a: Words, words_b: Words, threshold: float
) -> float | None:
    """Return how alike two texts are (0..1) when it is at least ``threshold``, else None."""
    shared = len(words_a & words_b)
    sizes = len(words_a) + len(words_b)
    dice = 2 * shared / sizes if sizes else 0.0
    ratio = 0.0
    # A ratio of t needs the shorter text to be at least t / (2 - t) of the longer, and texts
    # a few edits apart share most of their words: at least half of the fewer.
    short, long = len(text_a), len(text_b)
    if short > long:
        short, long = long, short
    fewer = min(len(words_a), len(words_b))
    if shared >= _EDITED_WORDS * fewer and short >= long * threshold / (2 - threshold):
        ratio = fuzz.ratio(text_a, text_b, score_cutoff=threshold * 100) / 100
    best = max(dice, ratio)
    if best < threshold or _contradict(words_a, words_b):
        return None
    return round(best, 4)


def _contradict(words_a: Words, words_b: Words) -> bool:
    """Tell whether one text negates a word that the other says plainly ("do not use eval")."""
    for word in words_a ^ words_b:
        if word.startswith("not "):
            plain = word[4:]
            if plain in (words_b if word in words_a else words_a):
                return True
    return False
