"""Proposing memories from what happened in a session, read from its transcript; no model.

Four rules over a transcript's steps (``engram.agents.transcript``):

- **bugfix**: a command failed, files were edited, and the same command then passed. The
  proposal names the error (the most telling line of the failed output), the files changed and
  what changed in them (a few removed and added lines). A failure that passes again with no
  edit between (a flaky test, a package installed) proposes nothing.
- **pitfall** (an edit undone): an edit whose later edit of the same file puts the old text
  back. The proposal names the change, the failure seen while it stood, and what the agent said
  after undoing it. A bugfix whose only edits are such undoing is this pitfall, not a bugfix.
- **preference** (a correction): the person's message, after the agent acted, that starts by
  stopping it ("no, …", "wait, …", "don't …") or states a rule of the project ("we never …",
  "we always …", "in this repo …") *and* carries a rule word (never, always, don't, instead,
  must …). "No, that's all, thanks" is no correction. The files are those the agent had just
  edited.
- **discovery** (a lesson in the agent's words): the items of a "Key Learnings" section of the
  agent's replies (``engram.agents.capture``).

Each ``Proposal`` carries a ``key``: the words that make it the same proposal again (the
command and error, the change undone, the correction), normalised, so a later hook call on the
same transcript, or a rejected proposal, is recognised. Pure: no I/O, no store.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from engram.agents.capture import Learning, extract_learnings, learning_title
from engram.model import normalize_content

if TYPE_CHECKING:
    from engram.agents.transcript import Step, Transcript

__all__ = ["Proposal", "propose"]

MAX_PROPOSALS: Final = 20  # one session's; past this it is noise
CHANGED_LINES: Final = 4  # removed and added lines shown of each edit
LINE_CHARS: Final = 160
_ERROR_WORDS: Final = re.compile(
    r"(?:Error|Exception|FAILED|FAIL\b|error:|Traceback|assert|panic:|fatal:|undefined|"
    r"cannot|Cannot|not found|got .* want)"
)
_STOPPING: Final = re.compile(
    r"^\s*(?:no\b|nope\b|wait\b|stop\b|don'?t\b|do not\b|never\b|please (?:don'?t|do not|"
    r"never|always|use|avoid)\b|actually\b|that'?s wrong\b|not like that\b)",
    re.IGNORECASE,
)
_PROJECT_RULE: Final = re.compile(
    r"\b(?:we (?:never|always|don'?t|do not|only|must)|in this (?:repo|project|codebase)|"
    r"this (?:repo|project|codebase) (?:has|uses|moved|never|always)|"
    r"here we|our (?:rule|convention|style))\b",
    re.IGNORECASE,
)
# Words that stop the agent without stating any rule ("don't worry about …", "never mind").
_NOT_A_RULE: Final = re.compile(
    r"^\W*(?:no,?\s+)?(?:don'?t worry|do not worry|never ?mind|no worries|no problem|"
    r"no need)\b",
    re.IGNORECASE,
)
_RULE_WORD: Final = re.compile(
    r"\b(?:never|always|don'?t|do not|must|mustn'?t|instead|should(?:n'?t| not)?|only|avoid|"
    r"use)\b",
    re.IGNORECASE,
)
# The lines of a failed output that say most, best first: pytest's "E" lines, a named error,
# a Go test's "got … want", a test runner's FAILED line.
_TELLING: Final = (
    r"^E\s+\S",
    r"\b\w+(?:Error|Exception)\b(?: \[[A-Z_]+\])?:",  # node adds a code: `… [ERR_ASSERTION]:`
    r"^\w+(?:Error|Exception)$",  # a bare exception, as Python's last line of `assert x`
    r"\bgot\b.*\bwant\b",
    r"^(?:FAILED|FAIL:?)\s",
)
# Lines that say where a failure happened, not what it was: a traceback's header and frames, a
# node location (`node:assert:90`, `at f (file.js:3:9)`), a caret under the code.
_WHERE: Final = re.compile(
    r"^(?:Traceback \(most recent call last\):|File \"|at \S|node:[\w/]+:\d+$|\^+$)"
)
# Failures that are slips of writing, not knowledge: the agent's own typo, a linter's or a
# formatter's complaint. Fixing one teaches a later session nothing.
_SLIP: Final = re.compile(
    r"\b(?:NameError|SyntaxError|IndentationError|TabError|UnboundLocalError)\b|"
    r"\bF401\b|\bimported but unused\b|\bwould reformat\b"
)
_LINTERS: Final = frozenset(
    {"ruff", "flake8", "pylint", "black", "isort", "eslint", "prettier", "gofmt", "rubocop"}
)
# A lesson the agent states on a line of its own, outside a "Key Learnings" section.
_LESSON_LINE: Final = re.compile(
    r"^[ \t>*_-]*(?:note for next time|lesson(?: learned| learnt)?|takeaway|for future "
    r"reference|gotcha|remember for next time)[*_]*\s*[:—–-]\s*(.{20,600})$",
    re.IGNORECASE | re.MULTILINE,
)
_SENTENCE: Final = re.compile(r"(?<=[.!?;])\s+")


@dataclass
class Proposal:
    """A memory proposed from a session, with where in the transcript it comes from."""

    kind: str  # bugfix, pitfall, preference, discovery
    rule: str  # bugfix, undone, correction, lesson
    title: str
    content: str
    line: int  # the transcript line of the step it rests on
    files: list[str] = field(default_factory=list)  # repository-relative
    key: str = ""  # normalised words that make it the same proposal again


def propose(transcript: Transcript, root: str) -> list[Proposal]:
    """Return the memories a session's transcript suggests (at most MAX_PROPOSALS)."""
    cwd = transcript.cwd or root
    steps = transcript.steps

    def rel(path: str) -> str:
        return _relative(path, cwd, root)

    undone = _undone(steps)
    found = _bugfixes(steps, undone, rel) + [_pitfall(steps, pair, rel) for pair in undone]
    found += _corrections(steps, rel) + _lessons(steps)
    found.sort(key=lambda proposal: proposal.line)
    unique: dict[str, Proposal] = {}
    for proposal in found:
        unique.setdefault(proposal.key, proposal)
    return list(unique.values())[:MAX_PROPOSALS]


def _relative(path: str, cwd: str, root: str) -> str:
    """Return a path the agent named relative to the repository (the agent's folder stands
    for it when that folder is not inside ``root``: a transcript read elsewhere)."""
    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))
    for base in (os.path.normpath(root), os.path.normpath(cwd)):
        if full.startswith(base.rstrip(os.sep) + os.sep):
            return os.path.relpath(full, base).replace(os.sep, "/")
    return full


def _same_command(a: str, b: str) -> bool:
    """Tell whether two command lines run the same thing (options aside: ``-x``, ``-q`` …)."""
    return _bare(a) == _bare(b)


def _bare(command: str) -> tuple[str, ...]:
    return tuple(word for word in command.split() if not word.startswith("-"))


def _flat(text: str | None) -> str:
    return "\n".join(line.rstrip() for line in (text or "").strip("\n").splitlines())


def _undone(steps: list[Step]) -> list[tuple[int, int]]:
    """Return (edit, later edit) index pairs where the later one puts the old text back."""
    pairs: list[tuple[int, int]] = []
    taken: set[int] = set()
    for later, step in enumerate(steps):
        if step.kind != "edit":
            continue
        for earlier in range(later - 1, -1, -1):
            first = steps[earlier]
            if first.kind != "edit" or first.path != step.path or earlier in taken:
                continue
            restored = first.old is not None and _flat(step.new) == _flat(first.old)
            if restored and _flat(first.new) in _flat(step.old if step.old is not None else ""):
                pairs.append((earlier, later))
                taken.add(earlier)
                break
            if (
                step.old is None
                and first.old
                and _flat(first.old) in _flat(step.new)
                and _flat(first.new) not in _flat(step.new)
            ):  # the whole file written again, with the old text back and the new one gone
                pairs.append((earlier, later))
                taken.add(earlier)
                break
    return pairs


def _error_line(output: str) -> str:
    """Return the line of a failed command's output that best says what went wrong."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for pattern in _TELLING:
        for line in lines:
            if re.search(pattern, line):
                return line.removeprefix("E").strip()[:LINE_CHARS]
    lines = [line for line in lines if not _WHERE.match(line)] or lines
    hits = [line for line in lines if _ERROR_WORDS.search(line)]
    return (hits[0] if hits else (lines[-1] if lines else "it failed"))[:LINE_CHARS]


def _changes(edits: list[Step]) -> str:
    """Return a few removed and added lines of each edit, as a diff fragment."""
    out: list[str] = []
    for edit in edits:
        old = [line for line in (edit.old or "").splitlines() if line.strip()]
        new = [line for line in edit.new.splitlines() if line.strip()]
        common = set(old) & set(new)
        old, new = [x for x in old if x not in common], [x for x in new if x not in common]
        out += [f"- {line.strip()[:LINE_CHARS]}" for line in old[:CHANGED_LINES]]
        out += [f"+ {line.strip()[:LINE_CHARS]}" for line in new[:CHANGED_LINES]]
    return "\n".join(out)


def _bugfixes(steps: list[Step], undone: list[tuple[int, int]], rel: _Rel) -> list[Proposal]:
    undoing = {later for _, later in undone}
    out: list[Proposal] = []
    used: set[int] = set()
    for index, failed in enumerate(steps):
        if failed.kind != "run" or not failed.code or index in used or _slip(failed):
            continue
        edits: list[int] = []
        for later in range(index + 1, len(steps)):
            step = steps[later]
            if step.kind == "edit":
                edits.append(later)
            elif step.kind == "run" and _same_command(step.text, failed.text):
                used.add(later)
                if step.code == 0 and edits and not set(edits) <= undoing:
                    out.append(_bugfix(steps, failed, [steps[i] for i in edits], step, rel))
                if step.code == 0:
                    break
    return out


def _slip(failed: Step) -> bool:
    """Tell whether a failure is a slip of writing or a linter's complaint (no bugfix)."""
    words = [w for w in failed.text.split() if not w.startswith("-")]
    programs = {os.path.basename(w) for w in words[:3]}
    return bool(programs & _LINTERS) or bool(_SLIP.search(_error_line(failed.output)))


def _bugfix(
    steps: list[Step], failed: Step, edits: list[Step], passed: Step, rel: _Rel
) -> Proposal:
    files = list(dict.fromkeys(rel(edit.path) for edit in edits if edit.path))
    error = _error_line(failed.output)
    after = _said_after(steps, passed)
    parts = [f"`{failed.text}` failed with: {error}", f"Fixed by changing {', '.join(files)}."]
    changed = _changes(edits)
    if changed:
        parts.append(f"What changed:\n{changed}")
    if after:
        parts.append(f"The agent's note: {after}")
    title = learning_title(f"Fix: {error}", 110)
    return Proposal(
        "bugfix",
        "bugfix",
        title,
        "\n\n".join(parts),
        failed.line,
        files,
        normalize_content(f"bugfix {failed.text} {error}"),
    )


def _pitfall(steps: list[Step], pair: tuple[int, int], rel: _Rel) -> Proposal:
    first, undo = steps[pair[0]], steps[pair[1]]
    path = rel(first.path)
    failures = [
        s for s in steps[pair[0] + 1 : pair[1]] if s.kind == "run" and s.code not in (0, None)
    ]
    added = [line.strip() for line in first.new.splitlines() if line.strip()]
    removed = {line.strip() for line in (first.old or "").splitlines()}
    novel = [line for line in added if line not in removed] or added
    what = novel[0][:LINE_CHARS] if novel else "a change"
    parts = [f"A change to {path} was made and undone in the same session:\n{_changes([first])}"]
    if failures:
        parts.append(
            f"While it stood, `{failures[0].text}` failed with: {_error_line(failures[0].output)}"
        )
    after = _said_after(steps, undo)
    if after:
        parts.append(f"The agent's note: {after}")
    reason = f": {_error_line(failures[0].output)}" if failures else " and was undone"
    return Proposal(
        "pitfall",
        "undone",
        learning_title(f"Pitfall in {path}: `{what}` broke things{reason}", 110)
        if failures
        else learning_title(f"Pitfall in {path}: `{what}` was undone", 110),
        "\n\n".join(parts),
        first.line,
        [path],
        normalize_content(f"undone {path} {what}"),
    )


def _said_after(steps: list[Step], step: Step, limit: int = 300) -> str:
    """Return the agent's first words after ``step`` (before the person speaks again)."""
    start = steps.index(step)
    for later in steps[start + 1 :]:
        if later.kind == "user":
            return ""
        if later.kind == "say":
            text = " ".join(later.text.split())
            return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"
    return ""


def _corrections(steps: list[Step], rel: _Rel) -> list[Proposal]:
    out: list[Proposal] = []
    acted = False  # the agent did or said something the person may be answering
    touched: list[str] = []  # the files the agent edited since the person last spoke
    for step in steps:
        if step.kind != "user":
            acted = True
            if step.kind == "edit" and step.path:
                touched.append(rel(step.path))
            continue
        text = " ".join(step.text.split())
        # A rule of the project counts whenever it is said; a "no, …" only after the agent acted.
        if _is_correction(text) and (acted or _PROJECT_RULE.search(text)):
            rule = _rule_sentence(text)
            out.append(
                Proposal(
                    "preference",
                    "correction",
                    learning_title(rule[0].upper() + rule[1:], 110),
                    f"The person corrected the agent: “{text[:1000]}”",
                    step.line,
                    list(dict.fromkeys(touched)),
                    normalize_content(f"correction {text[:400]}"),
                )
            )
        touched = []
    return out


def _is_correction(text: str) -> bool:
    """Tell whether the person's words stop the agent or state a rule, with a rule word."""
    if len(text) < 12 or len(text) > 2000 or _NOT_A_RULE.match(text):
        return False
    return bool((_STOPPING.match(text) or _PROJECT_RULE.search(text)) and _RULE_WORD.search(text))


def _rule_sentence(text: str) -> str:
    """Return the correction's words without the interjection, from its first rule sentence."""
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    start = next((n for n, s in enumerate(sentences) if _RULE_WORD.search(s)), 0)
    rule = " ".join(sentences[start : start + 2])
    rule = re.sub(r"^(?:no|nope|wait|actually|hmm|ok)\s*[,.!:-]+\s*", "", rule, flags=re.I)
    return rule or text


def _lessons(steps: list[Step]) -> list[Proposal]:
    out: list[Proposal] = []
    for step in steps:
        if step.kind != "say":
            continue
        found = extract_learnings(step.text) if "earning" in step.text else []
        for match in _LESSON_LINE.finditer(step.text):
            text = " ".join(match.group(1).split())
            if len(text) >= 20:
                found.append(Learning(learning_title(text), text))
        for learning in found:
            out.append(
                Proposal(
                    "discovery",
                    "lesson",
                    learning.title,
                    learning.content,
                    step.line,
                    [],
                    normalize_content(f"lesson {learning.content}"),
                )
            )
    return out


if TYPE_CHECKING:
    from collections.abc import Callable

    _Rel = Callable[[str], str]
