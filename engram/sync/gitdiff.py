"""Memory changes a reviewer can read: ``engram diff`` and git's textconv of memories.jsonl.

``memory_diff`` compares two versions of a store's ``memories.jsonl`` (two revisions, or a
revision and the file in the work tree, as ``git diff`` picks them) and lists the memories
added, changed (field by field) and forgotten (tombstoned, or their line removed), keyed by id.
``textconv`` renders one version as readable blocks, one per memory in id order, for git's diff
driver (``[diff "engram"] textconv``, installed with the merge driver by
``engram.sync.gitsetup.install``): git diffs two such renderings line by line, so ``git diff``,
``git log -p`` and ``git show`` print each memory's change as a few readable lines.

Rules where a choice was made:

- A line that does not parse (conflict markers, not JSON, a duplicate id) is reported, naming
  the revision, file and line; every other line still counts. ``textconv`` prints such a line
  as it is (control characters made visible) after a ``!!!`` marker line.
- Text printed to a terminal has its control characters escaped (``engram.terminal``); a
  one-line field shows a newline as ``\\n``; content lines are indented, so no content line
  can pass for a field line, a block header or a conflict marker.
- A revision is a ref, a commit id (or its unique prefix) with optional ``~N`` and ``^N``
  steps; an unborn ``HEAD`` is an empty file (a fresh repository: everything is added).

What it must not do: run ``git`` (dulwich only, imported inside functions: ``textconv`` runs
once per side of every ``git diff`` and imports no more than ``engram.model``), write anything,
or raise for a bad line of the file.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.errors import CorruptStore, InvalidInput
from engram.model import Record, dumps, is_tombstone, parse_line
from engram.sync.gitsetup import discover
from engram.terminal import visible

if TYPE_CHECKING:
    from dulwich.objects import Commit
    from dulwich.repo import Repo

__all__ = [
    "WORK_TREE",
    "BadLine",
    "FieldChange",
    "MemoryChange",
    "MemoryDiff",
    "compare",
    "earlier",
    "memory_diff",
    "parse_version",
    "split_range",
    "text_diff",
    "textconv",
    "textconv_main",
]

WORK_TREE: Final = "working tree"
SHORT: Final = 8  # characters of an id shown to a person
# The fields every block starts with, in this order; the rest follow sorted, content last.
FIRST: Final = ("kind", "title", "tags", "files", "status")
_REVISION: Final = re.compile(r"^(?P<base>[^~^\s]+)(?P<steps>(?:[~^][0-9]*)*)$")
_STEP: Final = re.compile(r"([~^])([0-9]*)")


@dataclass
class BadLine:
    """A line of one version that is not a memory: where it is and why."""

    revision: str  # the revision (or WORK_TREE) the file was read from
    path: str  # the file's repository path
    line: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return {
            "revision": self.revision,
            "path": self.path,
            "line": self.line,
            "message": self.message,
        }


@dataclass
class FieldChange:
    """One field of a memory whose value differs: its old and new values (None: absent)."""

    field: str
    old: Any
    new: Any

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return {"field": self.field, "old": self.old, "new": self.new}


@dataclass
class MemoryChange:
    """One memory that differs between the two versions."""

    id: str
    change: str  # "added" | "changed" | "forgotten"
    kind: str
    title: str
    how: str = ""  # forgotten: "tombstoned" (a tombstone now) or "removed" (its line is gone)
    fields: list[FieldChange] = field(default_factory=list)  # changed: each differing field

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        out: dict[str, Any] = {
            "id": self.id,
            "change": self.change,
            "kind": self.kind,
            "title": self.title,
        }
        if self.how:
            out["how"] = self.how
        if self.change == "changed":
            out["fields"] = [item.to_dict() for item in self.fields]
        return out


@dataclass
class MemoryDiff:
    """What changed in memories.jsonl from ``old`` to ``new``, and the lines that did not parse."""

    old: str  # revision, or WORK_TREE
    new: str
    path: str  # the file's repository path
    changes: list[MemoryChange] = field(default_factory=list)
    problems: list[BadLine] = field(default_factory=list)

    def count(self, change: str) -> int:
        """Return how many memories had this change."""
        return sum(1 for item in self.changes if item.change == change)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: the two sides, counts, changes, bad lines."""
        return {
            "old": self.old,
            "new": self.new,
            "path": self.path,
            "added": self.count("added"),
            "changed": self.count("changed"),
            "forgotten": self.count("forgotten"),
            "changes": [item.to_dict() for item in self.changes],
            "problems": [item.to_dict() for item in self.problems],
        }


# --- parsing one version ---------------------------------------------------------------------


def parse_version(
    data: bytes, *, revision: str, path: str
) -> tuple[dict[str, Record], list[BadLine]]:
    """Parse one version of memories.jsonl: records by id, and every line that is not one.

    A duplicate id keeps the first line (as the store reads it) and reports the later one.
    """
    name = path if revision == WORK_TREE else f"{revision}:{path}"
    records: dict[str, Record] = {}
    first: dict[str, int] = {}
    problems: list[BadLine] = []
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = parse_line(raw, path=name, lineno=lineno)
        except CorruptStore as exc:
            problems.append(BadLine(revision, path, lineno, exc.message))
            continue
        rid = record["id"]
        if rid in records:
            message = f"{name}:{lineno}: duplicate id {rid} (first on line {first[rid]})"
            problems.append(BadLine(revision, path, lineno, message))
            continue
        records[rid] = record
        first[rid] = lineno
    return records, problems


# --- comparing two versions ------------------------------------------------------------------


def _field_order(name: str) -> tuple[int, str]:
    if name in FIRST:
        return FIRST.index(name), name
    return (len(FIRST) + 1 if name == "content" else len(FIRST)), name


def compare(old: dict[str, Record], new: dict[str, Record]) -> list[MemoryChange]:
    """List the memories that differ between two parsed versions, in id order."""
    out: list[MemoryChange] = []
    for rid in sorted(old.keys() | new.keys()):
        before, after = old.get(rid), new.get(rid)
        if before is not None and after is not None and dumps(before) == dumps(after):
            continue
        shown = after if after is not None and not is_tombstone(after) else before or after or {}
        kind, title = str(shown.get("kind", "")), str(shown.get("title", ""))
        if after is None:
            out.append(MemoryChange(rid, "forgotten", kind, title, how="removed"))
        elif before is None:
            if is_tombstone(after):
                out.append(MemoryChange(rid, "forgotten", kind, title, how="tombstoned"))
            else:
                out.append(MemoryChange(rid, "added", kind, title))
        elif is_tombstone(after) and not is_tombstone(before):
            out.append(MemoryChange(rid, "forgotten", kind, title, how="tombstoned"))
        else:
            fields = [
                FieldChange(name, before.get(name), after.get(name))
                for name in sorted(before.keys() | after.keys(), key=_field_order)
                if name != "id" and _json(before.get(name)) != _json(after.get(name))
            ]
            out.append(MemoryChange(rid, "changed", kind, title, fields=fields))
    return out


def _json(value: Any) -> str:
    return dumps({"v": value})


def text_diff(old: str, new: str, *, context: int = 1, limit: int = 40) -> list[str]:
    """Return a compact line diff of two texts (``-``/``+``/`` `` lines), clipped to ``limit``."""
    lines = [
        line
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), n=context, lineterm="")
        if not line.startswith(("---", "+++"))
    ]
    lines = ["…" if line.startswith("@@") else line for line in lines]
    if lines[:1] == ["…"]:
        lines = lines[1:]
    if len(lines) > limit:
        lines = [*lines[:limit], f"… {len(lines) - limit} more diff lines"]
    return lines


# --- reading a revision ----------------------------------------------------------------------


def split_range(spec: str | None) -> tuple[str, str]:
    """Return the (old, new) sides of ``A..B``, ``A`` (against the work tree) or nothing.

    Sides as git reads them: an empty side of ``..`` is HEAD; no range is HEAD against the
    work tree.
    """
    text = (spec or "").strip()
    if not text:
        return "HEAD", WORK_TREE
    if "..." in text:
        raise InvalidInput(
            f"{spec!r}: A...B (changes since the merge base) is not supported",
            hint="name two revisions as A..B, or one revision to compare with the work tree",
        )
    if ".." in text:
        old, new = text.split("..", 1)
        return old.strip() or "HEAD", new.strip() or "HEAD"
    return text, WORK_TREE


def _commit(repo: Repo, revision: str) -> Commit | None:
    """Return the commit a revision names (None: an unborn HEAD); InvalidInput when none."""
    from dulwich.objects import Commit
    from dulwich.objectspec import parse_commit

    found = _REVISION.match(revision)
    if found is None:
        raise _unknown(revision)
    if revision == "HEAD":
        try:
            repo.head()
        except KeyError:
            return None  # no commit yet: an empty file
    try:
        commit = parse_commit(repo, found["base"].encode("utf-8"))
    except (KeyError, ValueError, UnicodeError) as exc:
        raise _unknown(revision) from exc
    for kind, digits in _STEP.findall(found["steps"]):
        count = int(digits) if digits else 1
        if kind == "^":
            if count == 0:
                continue
            parents = commit.parents
            if len(parents) < count:
                raise _unknown(revision)
            step = repo[parents[count - 1]]
            if not isinstance(step, Commit):
                raise _unknown(revision)
            commit = step
            continue
        for _ in range(count):
            if not commit.parents:
                raise _unknown(revision)
            step = repo[commit.parents[0]]
            if not isinstance(step, Commit):
                raise _unknown(revision)
            commit = step
    return commit


def _unknown(revision: str) -> InvalidInput:
    return InvalidInput(
        f"unknown revision {revision!r}",
        hint="name a branch, a tag or a commit (HEAD~2, main, a1b2c3d), as git does",
    )


def _blob_at(repo: Repo, revision: str, path: str) -> bytes:
    """Return the file's bytes at a revision (b"": absent there, or no commit yet)."""
    from dulwich.object_store import tree_lookup_path
    from dulwich.objects import Blob

    commit = _commit(repo, revision)
    if commit is None:
        return b""
    try:
        _, sha = tree_lookup_path(repo.object_store.__getitem__, commit.tree, path.encode())
    except (KeyError, NotADirectoryError):
        return b""
    blob = repo.object_store[sha]
    if not isinstance(blob, Blob):
        return b""  # a folder where the file was: nothing to read
    return bytes(blob.as_raw_string())


def memory_diff(store_file: Path, spec: str | None = None) -> MemoryDiff:
    """Compare two versions of a store's memories.jsonl: ``A..B``, ``A`` or HEAD (see above)."""
    old_rev, new_rev = split_range(spec)
    store_file = Path(store_file)
    repo = discover(store_file.parent, objects=True, strict=True)  # strict: a FIFO is named
    if repo is None:
        raise InvalidInput(
            f"{store_file.parent} is not in a git repository: there is no history to compare",
            hint="commit .engram/ in a git repository first (git init; git add .engram)",
        )
    with contextlib.closing(repo):
        top = Path(repo.path).resolve()
        try:
            path = store_file.resolve().relative_to(top).as_posix()
        except ValueError as exc:
            raise InvalidInput(f"{store_file} is not inside the git work tree {top}") from exc

        def read(revision: str) -> bytes:
            if revision == WORK_TREE:
                try:
                    return store_file.read_bytes()
                except FileNotFoundError:
                    return b""
            return _blob_at(repo, revision, path)

        old_data, new_data = read(old_rev), read(new_rev)
    old, old_problems = parse_version(old_data, revision=old_rev, path=path)
    new, new_problems = parse_version(new_data, revision=new_rev, path=path)
    return MemoryDiff(old_rev, new_rev, path, compare(old, new), old_problems + new_problems)


# --- textconv --------------------------------------------------------------------------------


def _one_line(value: Any) -> str:
    """Return a field's value on one line: lists joined, other values as compact JSON."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        text = ", ".join(value)
    else:
        text = dumps({"v": value})[5:-1]
    return visible(text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t"))


def _block(record: Record, duplicate: int = 0) -> list[str]:
    """Render one memory (or tombstone) as readable lines, ending with an empty line."""
    rid = str(record["id"])
    gone = is_tombstone(record)
    title = _one_line(record.get("title", ""))
    head = "forgotten" if gone else _one_line(record.get("kind", ""))
    mark = f" (duplicate line {duplicate})" if duplicate else ""
    lines = [f"=== {rid[:SHORT]} {head}: {title}{mark}".rstrip(), f"id: {rid}"]
    if gone:
        lines.append(f"forgotten: {_one_line(record.get('deleted_at'))}")
    for name in FIRST:
        if name in record:
            lines.append(f"{name}: {_one_line(record[name])}")
    shown = {"id", "content", "deleted_at", *FIRST}
    for name in sorted(record.keys() - shown):
        value = record[name]
        if name == "history" and isinstance(value, list):
            value = earlier(value)  # the earlier texts are the diff's own "-" lines
        lines.append(f"{_one_line(name)}: {_one_line(value)}")
    content = record.get("content")
    if isinstance(content, str) and content:
        lines.append("")
        lines += ["    " + visible(line) for line in content.splitlines()]
    elif content is not None and not isinstance(content, str):
        lines.append(f"content: {_one_line(content)}")
    lines.append("")
    return lines


def earlier(history: list[Any]) -> str:
    """Summarise a memory's ``history`` (its earlier versions) on one short line."""
    revs = [str(item["rev"]) for item in history if isinstance(item, dict) and "rev" in item]
    count = f"{len(history)} earlier version{'' if len(history) == 1 else 's'}"
    return f"{count} (rev {', '.join(revs)})" if revs else count


def textconv(data: bytes, name: str = "memories.jsonl") -> str:
    """Render one version of memories.jsonl as readable blocks, one per memory, by id.

    Lines that are not memories follow, each as it is (made safe) after a ``!!!`` marker.
    """
    good: list[tuple[str, int, Record]] = []
    bad: list[tuple[str, bytes]] = []
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = parse_line(raw, path=name, lineno=lineno)
        except CorruptStore as exc:
            bad.append((exc.message, raw))
            continue
        good.append((record["id"], lineno, record))
    good.sort(key=lambda item: (item[0], item[1]))
    out: list[str] = []
    previous = ""
    for rid, lineno, record in good:
        out += _block(record, duplicate=lineno if rid == previous else 0)
        previous = rid
    for message, raw in bad:
        out.append(f"!!! not a memory: {visible(message)}")
        out.append("    " + visible(raw.decode("utf-8", "replace")))
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


def textconv_main(args: list[str]) -> int:
    """Run ``engram textconv FILE`` for git: print the file's blocks on stdout; 0 when done."""
    if len(args) != 1:
        sys.stderr.write("usage: engram textconv FILE (git's diff driver runs it)\n")
        return 2
    try:
        data = Path(args[0]).read_bytes()
    except OSError as exc:
        sys.stderr.write(f"engram textconv: cannot read {args[0]}: {exc.strerror or exc}\n")
        return 1
    text = textconv(data)
    try:
        sys.stdout.buffer.write(text.encode("utf-8", "backslashreplace"))
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        return 0  # git stopped reading (a pager quit): nothing is wrong
    return 0
