"""What a commit message says: reverts, reapplies and fix-again commits, and their candidate.

This module owns reading a subject (``parse_revert``, ``classify``, ``subject_key``), decoding a
commit's message, the ``Candidate`` value and the text a candidate is written with (title,
lead, the quoted message and its meta lines, scrubbed). It walks no history and reads no object
store: ``engram.indexer.git`` finds the commits and the reverted ones, then calls in here.

Conventions: a revert has a ``Revert "…"`` subject (a squash merge's ``(#N)`` after it is
allowed); its target is the sha of a ``This reverts commit <sha>`` line or, without one, the
nearest earlier commit of the window with the quoted subject (``inferred``), and a revert that
names none is reported in ``GitScan.unresolved``. ``Reapply "…"`` and ``Revert "Revert "…""``
make no candidate: they mark the revert they undid as re-applied. A "fix again" has a subject
with fix/fixes/fixed/fixing … again (not "so the tests pass again"), or re-fix/refix. Their
text is the commit message as written: untrusted, to be redacted like any other input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from engram.model import MAX_LIST_ITEMS, format_time

if TYPE_CHECKING:
    from dulwich.objects import Commit

_TITLE_CHARS: Final = 119
_CONTENT_BYTES: Final = 2000
_FILES_IN_CONTENT: Final = 12

# GitHub's squash merge adds the pull request after the subject: ``Revert "X (#12)" (#15)``,
# or ``(owner/repo#15)`` for a pull request made in another repository. A reapply of such a
# revert, squash-merged in turn, has two: ``Reapply "X (#12)" (#15) (#18)``.
_PR_REF: Final = r"\((?:[\w.-]+/[\w.-]+)?#\d+\)"
_REVERT_SUBJECT: Final = re.compile(
    rf'^(?P<verb>Revert|Reapply)\s+"(?P<title>.*)"(?:\s+{_PR_REF})*\s*$'
)
_PR_SUFFIX: Final = re.compile(rf"(?:\s+{_PR_REF})+\s*$")
_MAX_NESTING: Final = 20  # Revert "Revert "Revert "…""": layers read before giving up
_REVERTS_LINE: Final = re.compile(
    r"^\s*This reverts commit (?P<sha>[0-9a-fA-F]{7,64})\b", re.MULTILINE
)
_FIX_WORD: Final = re.compile(r"\b(?:re-?)?fix(?:es|ed|ing)?\b", re.IGNORECASE)
_FIX_AGAIN: Final = re.compile(r"\bfix(?:es|ed|ing)?\b.*\bagain\b", re.IGNORECASE)
_REFIX: Final = re.compile(r"\bre-?fix(?:es|ed|ing)?\b", re.IGNORECASE)
# "again" after these words says that something works once more, not that a fix was redone:
# "Fix the build so CI passes again" is an ordinary fix.
_RESTORED: Final = re.compile(
    r"\b(?:work|works|working|pass|passes|passing|run|runs|running|build|builds|building|"
    r"compile|compiles|load|loads|start|starts|green|possible|usable|available|visible|"
    r"show|shows|appear|appears|enabled|responsive|happy)\s+again\b",
    re.IGNORECASE,
)
_AGAIN: Final = re.compile(r"\s*\bagain\b", re.IGNORECASE)


@dataclass(frozen=True)
class Candidate:
    """A pitfall candidate mined from history: a revert or a commit that fixed something again."""

    sha: str
    kind: str
    title: str
    content: str
    files: tuple[str, ...]
    reverted_sha: str | None
    date: str
    author: str
    # A revert without a "This reverts commit" line, matched to an earlier commit by subject.
    inferred: bool = False
    # The commit that brought the reverted change back (a reapply or a revert of this revert).
    reapplied_by: str | None = None


def decode_message(commit: Commit) -> str:
    encoding = (commit.encoding or b"utf-8").decode("ascii", "replace")
    message: bytes = commit.message
    try:
        return message.decode(encoding, "replace")
    except LookupError:  # an encoding name Python does not know
        return message.decode("utf-8", "replace")


def shorten(text: str, limit: int) -> str:
    """Cut text to at most ``limit`` characters, marking the cut with an ellipsis.

    Secrets are redacted before the cut: half a key no longer matches its rule.
    """
    from engram.store.redact import default_scrubber

    text = " ".join(default_scrubber().text(text)[0].split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _fit_bytes(text: str, limit: int) -> str:
    """Cut text to at most ``limit`` UTF-8 bytes, marking the cut with an ellipsis."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[: max(0, limit - 4)].decode("utf-8", "ignore").rstrip() + " …"


def parse_revert(subject: str) -> tuple[str, str, str] | None:
    """Read a revert subject: (kind, the change in the end undone or re-applied, sought subject).

    ``Revert "X"`` undoes X; ``Reapply "X"`` (git's subject for reverting ``Revert "X"``) and
    ``Revert "Revert "X""`` bring X back, so their kind is ``reapply``; every layer counts, so
    ``Revert "Reapply "X""`` is a revert of X again. The sought subject is the one the reverted
    commit itself has: the quoted text for ``Revert``, ``Revert "X"`` for ``Reapply "X"``.
    """
    found = _REVERT_SUBJECT.match(subject)
    if found is None:
        return None
    verb, quoted = found.group("verb", "title")
    sought = quoted if verb == "Revert" else f'Revert "{quoted}"'
    flips = 1 if verb == "Revert" else 2
    what = quoted
    for _ in range(_MAX_NESTING):
        inner = _REVERT_SUBJECT.match(what)
        if inner is None:
            break
        flips += 1 if inner.group("verb") == "Revert" else 2
        what = inner.group("title")
    return ("revert" if flips % 2 else "reapply"), what, sought


def subject_key(subject: str) -> str:
    """Return a subject without the ``(#N)`` squash merges appended: how reverts may quote it."""
    return _PR_SUFFIX.sub("", subject.strip())


def classify(subject: str, body: str) -> tuple[str, str | None] | None:
    """Tell whether a commit message is a revert, reapply or fix-again: (kind, target) or None.

    The target is the sha of a ``This reverts commit`` line; a revert or reapply without one
    comes back with None, to be resolved by its subject among the earlier commits.
    """
    if subject.startswith(("Revert", "Reapply")):
        parsed = parse_revert(subject)
        if parsed is not None:
            line = _REVERTS_LINE.search(body)
            return parsed[0], line.group("sha") if line is not None else None
        if subject.startswith("Revert"):
            return None  # "Revert ADR-0014 wording" is not a git revert, nor a fix
    if _REFIX.search(subject):
        return "fix-again", None
    if _FIX_AGAIN.search(subject) and not _RESTORED.search(subject):
        return "fix-again", None
    return None


def _fixed_what(subject: str) -> str:
    """Return what a fix-again subject says was fixed: the fix word and "again" taken out."""
    text = _FIX_WORD.sub("", subject, count=1)
    parts = _AGAIN.split(text)
    if len(parts) > 1:  # drop the last "again" only
        text = "".join(parts[:-1]) + " " + parts[-1]
    text = " ".join(text.split()).strip(" :-–—,.")
    text = re.sub(r"\s+([:,.;])", r"\1", text)
    return text or subject


def make_candidate(
    sha: str,
    commit: Commit,
    files: list[str],
    text: str,
    subject: str,
    *,
    kind: str,
    parsed: tuple[str, str, str] | None,
    reverted_sha: str | None,
    known: str | None,
    inferred: str | None,
    named: str | None,
) -> Candidate:
    """Write the candidate a revert, reapply or fix-again commit stands for, scrubbed.

    ``text`` is the commit message, scrubbed already, and ``subject`` its first line; ``parsed``
    is what ``parse_revert`` read of it (None for a fix-again); ``known`` the subject of the
    reverted commit when this clone has it; ``inferred`` the commit found by subject and
    ``named`` the one the ``This reverts commit`` line names, if any.
    """
    from engram.store.redact import default_scrubber

    author = commit.author.decode("utf-8", "replace").rsplit(" <", 1)[0].strip()
    date = format_time(datetime.fromtimestamp(commit.author_time, UTC))
    meta = [f"- commit: {sha}"]
    if parsed is not None:
        assert reverted_sha is not None
        title, lead = _revert_lines(
            sha, kind, parsed[1], reverted_sha, known, inferred, named, meta
        )
    else:
        title = shorten(f"Fixed again: {_fixed_what(subject)}", _TITLE_CHARS)
        lead = f"Commit `{sha[:12]}` fixed something that had been fixed before."
    meta.append(f"- author: {shorten(author, 200)}, {date}")
    if files:
        shown = ", ".join(f"`{path}`" for path in files[:_FILES_IN_CONTENT])
        more = len(files) - _FILES_IN_CONTENT
        meta.append(f"- files ({len(files)}): {shown}" + (f", … {more} more" if more > 0 else ""))
    content = _content(lead, meta, text)
    # The author and paths too: the candidate is cached in state/ and becomes a memory.
    text_fields = {"title": title, "content": content, "author": author, "files": files}
    clean, _ = default_scrubber().record(text_fields)
    return Candidate(
        sha=sha,
        kind=kind,
        title=clean["title"],
        content=clean["content"],
        files=tuple(clean["files"][:MAX_LIST_ITEMS]),
        reverted_sha=reverted_sha,
        date=date,
        author=clean["author"],
        inferred=inferred is not None,
    )


def _revert_lines(
    sha: str,
    kind: str,
    what: str,
    reverted_sha: str,
    known: str | None,
    inferred: str | None,
    named: str | None,
    meta: list[str],
) -> tuple[str, str]:
    """Return a revert's or reapply's title and lead; add its reverted (and inferred) lines."""
    verb = "Reverted" if kind == "revert" else "Re-applied"
    title = shorten(f'{verb}: "{what}"', _TITLE_CHARS)
    undone = "a change that had to be undone" if kind == "revert" else "a revert undone"
    lead = (
        f"Commit `{sha[:12]}` reverted `{reverted_sha[:12]}` "
        f'("{shorten(known or what, 200)}"): {undone}.'
    )
    meta.append(f"- reverted: {reverted_sha}" + (f' ("{shorten(known, 200)}")' if known else ""))
    if inferred is not None:
        why = (
            "the message has no `This reverts commit` line"
            if named is None
            else f"its `This reverts commit` line names {named[:12]}, which this clone "
            "does not have"
        )
        meta.append(
            f"- inferred: {why}; the reverted commit is the nearest earlier one with the "
            "quoted subject"
        )
    return title, lead


def _content(lead: str, meta: list[str], text: str) -> str:
    """Fit the lead, the quoted message and the meta lines into ``_CONTENT_BYTES``."""
    head = f"{lead}\n\n"
    tail = "\n\n" + "\n".join(meta)
    budget = _CONTENT_BYTES - len((head + tail).encode("utf-8"))
    if budget < 200:  # very long paths: list fewer files rather than drop the message
        tail = "\n\n" + "\n".join(meta[:-1])
        budget = _CONTENT_BYTES - len((head + tail).encode("utf-8"))
    quote = "\n".join(f"> {line}".rstrip() for line in text.strip().splitlines())
    return _fit_bytes(head + _fit_bytes(quote, budget) + tail, _CONTENT_BYTES)
