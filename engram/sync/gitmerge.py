"""Git integration of the canonical files: merge driver, setup, ``resolve`` and a memory's log.

DESIGN.md §4: git merges ``.engram/memories.jsonl`` and ``.engram/manifest.json`` through
``engram merge-driver %O %A %B %P``, which calls the one merge function
(``engram.sync.merge.merge3``); the manifest merges as a set union of its chunks. ``install``
writes the two ``.gitattributes`` lines and the ``[merge "engram"]`` section of the repository's
own config, and the diff driver that shows memories as readable blocks (``diff=engram`` on
memories.jsonl, ``[diff "engram"] textconv``: ``engram.sync.gitdiff``); ``check_setup`` tells
what is there. ``resolve`` turns a conflicted ``.engram/``
(git's three index stages, or conflict markers committed by a hosted merge or a rebase made
without the driver) into a clean, canonical, staged file. ``memory_log`` lists the versions of
one memory across the commits reachable from HEAD.

Rules where git leaves a choice:

- The driver writes nothing and exits 1 when a side holds a line it cannot read (conflict
  markers included): git then reports the conflict and ``engram resolve`` takes over.
- The manifest ignores git's base: chunks are immutable and the ``chunks/`` folder is
  authoritative, so a chunk listed on either side stays listed. The same id twice keeps the
  entry whose canonical JSON sorts greater; other top-level keys are kept (ours over theirs),
  ``version`` is the larger of the sides' (2 when absent).
- ``resolve`` reads a stage (or a side of a committed file) that itself holds conflict markers
  by splitting them too; a deleted side (modify/delete) is an empty file.
- ``memory_log`` reports a commit when the memory's line differs from its line in every parent
  (so a merge that took one side's version is not a change; the side's commit is).

What it must not do: run ``git`` in a subprocess (dulwich only, imported inside functions), raise
for a repository state a user can be in where a value says it (no repo: ``[]`` or
``Setup(repo=False)``), or write ``memories.jsonl`` or ``manifest.json`` in a work tree other
than through the store (``MemoryStore``, ``engram.store.files``). It writes itself only git's
files: the merge driver's ``%A`` (a temp file git names) and ``.gitattributes``.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from engram.errors import CorruptStore, EngramError, InvalidInput
from engram.model import Record, canonical_line, dumps, format_time, has_float, parse_line
from engram.plural import counted
from engram.store import files as store_files
from engram.store.atomic import atomic_write
from engram.store.jsonl import MemoryStore, scrub_lines
from engram.store.redact import Scrubber, default_scrubber
from engram.sync.merge import conflicted, merge3, merge3_record, taken

if TYPE_CHECKING:
    from dulwich.index import ConflictedIndexEntry, IndexEntry
    from dulwich.objects import ObjectID
    from dulwich.repo import Repo

__all__ = [
    "ATTRIBUTES",
    "DRIVER_NAME",
    "Resolved",
    "Setup",
    "Version",
    "check_setup",
    "has_markers",
    "install",
    "memory_log",
    "merge_driver",
    "resolve",
    "split_markers",
]

ATTRIBUTES: Final = (
    ".engram/memories.jsonl merge=engram diff=engram",
    ".engram/manifest.json merge=engram",
)
MERGE_ATTRIBUTE: Final = "merge=engram"
DIFF_ATTRIBUTE: Final = "diff=engram"
DRIVER_NAME: Final = "engram"
DRIVER_LABEL: Final = "engram memories"
MEMORIES_PATH: Final = ".engram/memories.jsonl"
MANIFEST_PATH: Final = ".engram/manifest.json"
MANIFEST_VERSION: Final = 2
_SECTION: Final = (b"merge", DRIVER_NAME.encode())
_DIFF_SECTION: Final = (b"diff", DRIVER_NAME.encode())
_MARKERS: Final = (b"<<<<<<<", b"|||||||", b"=======", b">>>>>>>")
_FILE_MODE: Final = 0o100644


# --- setup -----------------------------------------------------------------------------------


@dataclass
class Setup:
    """What of the git integration is installed in a repository."""

    attributes: bool  # .gitattributes at the work-tree root sets merge=engram on both files
    driver: bool  # the repository's config has [merge "engram"] with a driver command
    repo: bool  # a git work tree was found at or above the root
    command: str = field(default="", compare=False)  # that driver command, as configured
    diff_attribute: bool = False  # .gitattributes sets diff=engram on memories.jsonl
    diff: bool = False  # the repository's config has [diff "engram"] with a textconv command
    diff_command: str = field(default="", compare=False)  # that textconv command, as configured


def _discover(root: Path) -> Repo | None:
    """Open the repository holding root (root or a folder above it); None when there is none."""
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    if not root.is_dir():
        return None
    try:
        return Repo.discover(str(root))
    except (NotGitRepository, OSError, ValueError, KeyError):
        return None


def _attributes_by_pattern(text: str) -> dict[str, set[str]]:
    """Return the attributes each pattern of a .gitattributes text sets (its lines together)."""
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        words = line.split()
        if words and not words[0].startswith("#"):
            found.setdefault(words[0], set()).update(words[1:])
    return found


def _missing_attributes(path: Path) -> list[tuple[str, list[str]]]:
    """Return each pattern of ATTRIBUTES with the attributes .gitattributes lacks for it."""
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        text = ""
    present = _attributes_by_pattern(text)
    missing = []
    for line in ATTRIBUTES:
        pattern, *wanted = line.split()
        lacking = [word for word in wanted if word not in present.get(pattern, set())]
        if lacking:
            missing.append((pattern, lacking))
    return missing


def check_setup(root: Path) -> Setup:
    """Tell whether the attributes and the merge driver are installed in root's repository.

    Cheap (no dulwich): commands run it to offer the driver to a fresh clone.
    """
    from engram.config import git_repo_config

    found = git_repo_config(Path(root)) if Path(root).is_dir() else None
    if found is None:
        return Setup(attributes=False, driver=False, repo=False)
    top, parser = found
    lacking = {word for _, words in _missing_attributes(top / ".gitattributes") for word in words}
    driver = parser.get(f'merge "{DRIVER_NAME}"', "driver", fallback="").strip().strip('"')
    textconv = parser.get(f'diff "{DRIVER_NAME}"', "textconv", fallback="").strip().strip('"')
    return Setup(
        attributes=MERGE_ATTRIBUTE not in lacking,
        driver=bool(driver),
        repo=True,
        command=driver,
        diff_attribute=DIFF_ATTRIBUTE not in lacking,
        diff=bool(textconv),
        diff_command=textconv,
    )


def runs(command: str) -> bool:
    """Say whether a configured driver command's program can be run here (found, executable).

    git runs it through the shell: a bare name must be on PATH, a path must exist.
    """
    try:
        program = shlex.split(command)[0] if command.strip() else ""
    except ValueError:
        return False
    if not program:
        return False
    if "/" in program:
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program) is not None


def install(root: Path, command: str = "engram") -> list[str]:
    """Write the missing .gitattributes lines, merge and diff driver config; say what was done."""
    repo = _discover(Path(root))
    if repo is None:
        return []
    done: list[str] = []
    with contextlib.closing(repo):
        attributes = Path(repo.path) / ".gitattributes"
        missing = _missing_attributes(attributes)
        if missing:
            _add_attributes(attributes, missing)
            said = "; ".join(f"{pattern} {' '.join(words)}" for pattern, words in missing)
            done.append(f"added {counted(len(missing), 'attribute line')} to {attributes}: {said}")
        wanted = f"{command} merge-driver %O %A %B %P"
        textconv = f"{command} textconv"
        config = repo.get_config()
        changed = False
        current = _config_value(config, _SECTION, b"driver")
        if current != wanted or _config_value(config, _SECTION, b"name") != DRIVER_LABEL:
            config.set(_SECTION, b"name", DRIVER_LABEL.encode())
            config.set(_SECTION, b"driver", wanted.encode())
            changed = True
            verb = "registered" if current is None else "updated"
            done.append(
                f'{verb} the git merge driver [merge "{DRIVER_NAME}"] in {config.path}: '
                f"driver = {wanted}"
            )
        current = _config_value(config, _DIFF_SECTION, b"textconv")
        if current != textconv or _config_value(config, _DIFF_SECTION, b"cachetextconv") != "true":
            # git caches each blob's rendering under refs/notes/textconv/engram, keyed by this
            # command: a changed command (another installation) renders every blob again.
            config.set(_DIFF_SECTION, b"textconv", textconv.encode())
            config.set(_DIFF_SECTION, b"cachetextconv", b"true")
            changed = True
            verb = "registered" if current is None else "updated"
            done.append(
                f'{verb} the git diff driver [diff "{DRIVER_NAME}"] in {config.path}: '
                f"textconv = {textconv} (git diff, log -p and show print memories as blocks)"
            )
        if changed:
            commands = ((_SECTION, b"driver", wanted), (_DIFF_SECTION, b"textconv", textconv))
            _write_config(config, [(sec, key, value.encode()) for sec, key, value in commands])
    return done


def _write_config(config: Any, commands: list[tuple[tuple[bytes, bytes], bytes, bytes]]) -> None:
    """Write the config through dulwich, quoting each command value that holds ``;``.

    dulwich quotes a value with ``#`` but not one with ``;``, which git reads as the start of a
    comment: the command would be cut there. Such a line is rewritten quoted.
    """
    from dulwich.file import GitFile

    buffer = io.BytesIO()
    config.write_to_file(buffer)
    data = buffer.getvalue()
    for section, key, value in commands:
        data = _quoted(data, section, key, value)
    with GitFile(config.path, "wb") as handle:
        handle.write(data)


def _quoted(data: bytes, section: tuple[bytes, bytes], key: bytes, value: bytes) -> bytes:
    """Return config bytes with ``key = value`` of section quoted when value holds ``;``."""
    escaped = value.replace(b"\\", b"\\\\").replace(b"\n", b"\\n").replace(b"\t", b"\\t")
    escaped = escaped.replace(b'"', b'\\"')
    plain = b"\t" + key + b" = " + escaped + b"\n"
    header = data.find(b"[" + section[0] + b' "' + section[1] + b'"]')
    at = data.find(plain, max(header, 0))
    if b";" in value and at >= 0:
        quoted = b"\t" + key + b' = "' + escaped + b'"\n'
        data = data[:at] + quoted + data[at + len(plain) :]
    return data


def _config_value(config: Any, section: tuple[bytes, bytes], name: bytes) -> str | None:
    try:
        value = config.get(section, name)
    except KeyError:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else None


def _add_attributes(path: Path, missing: list[tuple[str, list[str]]]) -> None:
    """Add attributes to .gitattributes, keeping its content and its line endings.

    A pattern that has a line already gets the attributes appended to its last line (an older
    engram's ``.engram/memories.jsonl merge=engram`` gains ``diff=engram``); a new one a line.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    newline = b"\r\n" if b"\r\n" in data else b"\n"
    lines = data.splitlines(keepends=True)
    if lines and not lines[-1].endswith(b"\n"):
        lines[-1] += newline
    for pattern, words in missing:
        added = " ".join(words).encode("utf-8")
        at = [n for n, line in enumerate(lines) if line.split()[:1] == [pattern.encode()]]
        if at:
            line = lines[at[-1]]
            body = line.rstrip(b"\r\n")
            lines[at[-1]] = body + b" " + added + line[len(body) :]
        else:
            lines.append(pattern.encode("utf-8") + b" " + added + newline)
    _write_file(path, b"".join(lines))


# --- the merge driver ------------------------------------------------------------------------


def _write_file(path: Path, data: bytes) -> None:
    """Replace a file of git's (``%A``, ``.gitattributes``) atomically, keeping its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data, mode=None)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _is_manifest(pathname: str) -> bool:
    return pathname.replace("\\", "/").endswith("manifest.json")


def _parse_memories(data: bytes, name: str) -> list[Record]:
    """Parse every line of a memories.jsonl version; CorruptStore names the first bad line."""
    records = []
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if raw.strip():
            records.append(parse_line(raw, path=name, lineno=lineno))
    return records


def _parse_manifest(data: bytes, name: str) -> dict[str, Any]:
    """Parse one side's manifest (empty: no chunks); CorruptStore says what is wrong.

    Conflict markers are told apart here; the format itself is engram.sync.chunks's.
    """
    from engram.sync.chunks import VERSION, parse_manifest

    for lineno, raw in enumerate(data.splitlines(), start=1):
        if raw.startswith(_MARKERS):
            raise CorruptStore(
                f"{name}:{lineno}: git conflict marker {raw[:7].decode('ascii', 'replace')!r}",
                path=name,
                line=lineno,
            )
    if not data.strip():
        return {"version": VERSION, "chunks": []}
    return parse_manifest(data, name=name)


def _memories_bytes(records: list[Record]) -> bytes:
    return b"".join(canonical_line(record) for record in sorted(records, key=lambda r: r["id"]))


def _merge_bytes(base: bytes, ours: bytes, theirs: bytes, name: str) -> tuple[bytes, int, int]:
    """Merge three versions of one file; return (bytes, records, conflicted records)."""
    sides = (("base", base), ("ours", ours), ("theirs", theirs))
    if _is_manifest(name):
        from engram.sync.chunks import manifest_bytes, merge_manifests

        manifests = [_parse_manifest(data, f"{name} ({side})") for side, data in sides]
        merged = merge_manifests(manifests[1], manifests[2])
        return manifest_bytes(merged), len(merged["chunks"]), 0
    return _merge_memories(base, ours, theirs, name)


def _merge_memories_full(
    base: bytes, ours: bytes, theirs: bytes, name: str
) -> tuple[bytes, int, int]:
    """The reference merge of memories.jsonl: parse every line, ``merge3``, serialise all.

    ``_merge_memories`` gives the same bytes faster; this is its oracle in the tests.
    """
    sides = (("base", base), ("ours", ours), ("theirs", theirs))
    parsed = [_parse_memories(data, f"{name} ({side})") for side, data in sides]
    records = merge3(*parsed)
    return _memories_bytes(records), len(records), sum(1 for r in records if conflicted(r))


class _Side:
    """One version of memories.jsonl split into lines by id, each distinct line parsed once."""

    __slots__ = ("by_id", "repeated")

    def __init__(self, data: bytes, name: str, parsed: dict[bytes, Record]) -> None:
        self.by_id: dict[str, bytes] = {}  # id -> its (first) raw line, newline stripped
        self.repeated: dict[str, list[bytes]] = {}  # id -> every line of an id seen twice
        by_id, repeated = self.by_id, self.repeated
        for lineno, raw in enumerate(data.splitlines(), start=1):
            record = parsed.get(raw)
            if record is None:
                if not raw.strip():
                    continue
                record = parse_line(raw, path=name, lineno=lineno)
                parsed[raw] = record
            rid = record["id"]
            if rid in by_id:
                repeated.setdefault(rid, [by_id[rid]]).append(raw)
            else:
                by_id[rid] = raw


def _line_of(raw: bytes, record: Record) -> bytes:
    """Return ``canonical_line(record)`` without its newline: ``raw`` itself when canonical.

    orjson with sorted keys writes what ``engram.model.dumps`` writes for every value a line
    parses to except floats (formatted differently) and integers past 64 bits (refused), so
    equal bytes prove the line canonical; anything else is serialised by ``canonical_line``.
    """
    try:
        same = orjson.dumps(record, option=orjson.OPT_SORT_KEYS) == raw
    except (TypeError, ValueError):
        same = False
    if same and not has_float(record):
        return raw
    return canonical_line(record)[:-1]


def _merge_memories(base: bytes, ours: bytes, theirs: bytes, name: str) -> tuple[bytes, int, int]:
    """Three-way merge of memories.jsonl: the bytes of ``_merge_memories_full``, faster.

    Each distinct line is parsed once, whichever sides hold it (every line is still read, so
    a bad line fails the merge with the same message). Equal lines are equal records, so an id
    whose line is the same on both sides, or changed on one side only, takes that side's line
    as it is (serialised again only when it is not canonical); only ids whose lines differ on
    both sides from the base, that one side added, or that a side holds twice, go through
    ``merge3_record``.
    """
    enabled = gc.isenabled()
    gc.disable()  # the parsed lines stay alive to the end: collecting would rescan them in vain
    try:
        return _merge_lines(base, ours, theirs, name)
    finally:
        if enabled:
            gc.enable()


def _merge_lines(base: bytes, ours: bytes, theirs: bytes, name: str) -> tuple[bytes, int, int]:
    parsed: dict[bytes, Record] = {}
    o, a, b = (
        _Side(data, f"{name} ({side})", parsed)
        for side, data in (("base", base), ("ours", ours), ("theirs", theirs))
    )
    out: list[tuple[str, bytes]] = []
    conflicts = 0
    for rid in a.by_id.keys() | b.by_id.keys():
        if rid in o.repeated or rid in a.repeated or rid in b.repeated:
            merged = merge3(*(_versions(side, rid, parsed) for side in (o, a, b)))
            if merged:
                out.append((rid, canonical_line(merged[0])[:-1]))
                conflicts += conflicted(merged[0])
            continue
        x, y, z = a.by_id.get(rid), b.by_id.get(rid), o.by_id.get(rid)
        if x == y:
            pick = x
        elif z is not None and x == z:
            pick = y
        elif z is not None and y == z:
            pick = x
        else:
            record = merge3_record(*(None if raw is None else parsed[raw] for raw in (z, x, y)))
            if record is not None:
                out.append((rid, canonical_line(record)[:-1]))
                conflicts += conflicted(record)
            continue
        if pick is not None:
            record = parsed[pick]
            if record.get("conflicts"):  # taken as merge3 takes a side: conflicts settled
                record = taken(record)
                out.append((rid, canonical_line(record)[:-1]))
            else:
                out.append((rid, _line_of(pick, record)))
            conflicts += conflicted(record)
    out.sort()
    data = b"\n".join([line for _, line in out]) + b"\n" if out else b""
    return data, len(out), conflicts


def _versions(side: _Side, rid: str, parsed: dict[bytes, Record]) -> list[Record]:
    lines = side.repeated.get(rid) or ([side.by_id[rid]] if rid in side.by_id else [])
    return [parsed[raw] for raw in lines]


def merge_driver(
    base: Path, ours: Path, theirs: Path, pathname: str = "", *, scrubber: Scrubber | None = None
) -> int:
    """Merge git's %O %A %B into %A; return 0 when clean, 1 (and leave %A alone) when not.

    Every memory line the result holds that is not ours byte for byte is scrubbed of secrets,
    as the store scrubs every write: a teammate's line with a key in it is merged redacted.
    """
    name = pathname or MEMORIES_PATH
    try:
        mine = _read(Path(ours))
        data, _, _ = _merge_bytes(_read(Path(base)), mine, _read(Path(theirs)), name)
        if not _is_manifest(name):
            data = scrub_lines(data, scrubber or default_scrubber(), known=set(mine.splitlines()))
        _write_file(Path(ours), data)
    except EngramError as exc:
        sys.stderr.write(
            f"engram merge-driver: cannot merge {name}: {exc.message}\n"
            "  git leaves the conflict in the file; run `engram resolve` "
            "(or `engram doctor --fix`) after fixing it\n"
        )
        return 1
    except OSError as exc:
        sys.stderr.write(f"engram merge-driver: cannot merge {name}: {exc}\n")
        return 1
    return 0


# --- resolve ---------------------------------------------------------------------------------


@dataclass
class Resolved:
    """One conflicted file that ``resolve`` merged, wrote and staged."""

    path: str  # repo-relative path
    records: int  # memories (or manifest chunks) in the result
    conflicts: int  # memories that now carry ``conflicts`` entries

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return asdict(self)


def has_markers(data: bytes) -> bool:
    """Tell whether a file holds a line that starts with a git conflict marker."""
    return any(line.startswith(_MARKERS) for line in data.splitlines())


def split_markers(data: bytes, name: str = MEMORIES_PATH) -> tuple[bytes, bytes, bytes]:
    """Split a file with git conflict markers into its (base, ours, theirs) versions.

    Lines outside the hunks belong to every side; a hunk without a diff3 ``|||||||`` section
    gives the base nothing. Raises CorruptStore naming the line of a malformed hunk.
    """
    sides: dict[str, list[bytes]] = {"base": [], "ours": [], "theirs": []}
    state = "outside"
    opened = 0
    for lineno, line in enumerate(data.splitlines(keepends=True), start=1):
        if line.startswith(b"<<<<<<<") and state == "outside":
            state, opened = "ours", lineno
        elif line.startswith(b"|||||||") and state == "ours":
            state = "base"
        elif line.startswith(b"=======") and state in ("ours", "base"):
            state = "theirs"
        elif line.startswith(b">>>>>>>") and state == "theirs":
            state = "outside"
        elif line.startswith(_MARKERS):
            raise CorruptStore(
                f"{name}:{lineno}: unexpected conflict marker "
                f"{line[:7].decode('ascii', 'replace')!r}",
                path=name,
                line=lineno,
            )
        elif state == "outside":
            for lines in sides.values():
                lines.append(line)
        else:
            sides[state].append(line)
    if state != "outside":
        raise CorruptStore(
            f"{name}:{opened}: conflict hunk opened here is never closed", path=name, line=opened
        )
    return b"".join(sides["base"]), b"".join(sides["ours"]), b"".join(sides["theirs"])


def _merge_with_markers(
    base: bytes, ours: bytes, theirs: bytes, name: str
) -> tuple[bytes, int, int]:
    """Merge three versions, first splitting any that itself holds conflict markers."""

    def flat(data: bytes, side: str) -> bytes:
        if not has_markers(data):
            return data
        parts = split_markers(data, f"{name} ({side})")
        return _merge_bytes(*parts, name)[0]

    return _merge_bytes(flat(base, "base"), flat(ours, "ours"), flat(theirs, "theirs"), name)


def _is_engram_file(path: str) -> bool:
    return any(
        path == suffix or path.endswith("/" + suffix) for suffix in (MEMORIES_PATH, MANIFEST_PATH)
    )


def _blob(repo: Repo, entry: IndexEntry | None, path: str) -> bytes:
    if entry is None:
        return b""
    try:
        return bytes(repo.object_store[entry.sha].as_raw_string())
    except (KeyError, ValueError) as exc:
        raise InvalidInput(
            f"cannot read the git object {entry.sha.decode('ascii', 'replace')} of {path}: {exc}",
            hint="run `git fsck`; the repository is missing objects",
        ) from exc


def _stage(
    repo: Repo, index: Any, path: str, data: bytes, mode: int, scrubber: Scrubber | None
) -> None:
    """Write data to the work tree file and stage it as a normal entry (like ``git add``)."""
    from dulwich.index import index_entry_from_stat
    from dulwich.objects import Blob

    target = Path(repo.path, *path.split("/"))
    if _is_manifest(path):
        store_files.write_manifest(target.parent, data)
    else:
        MemoryStore(target.parent, scrubber=scrubber).rewrite(
            _parse_memories(data, path)  # canonical bytes: the parse cannot fail
        )
    written = target.read_bytes()
    blob = Blob.from_string(written)
    repo.object_store.add_object(blob)
    index[path.encode("utf-8", "surrogateescape")] = index_entry_from_stat(
        os.stat(target), blob.id, mode=mode
    )


def resolve(root: Path, *, scrubber: Scrubber | None = None) -> list[Resolved]:
    """Merge conflicted .engram files (index stages or committed markers); write and stage them."""
    from dulwich.errors import NoIndexPresent
    from dulwich.index import ConflictedIndexEntry

    repo = _discover(Path(root))
    if repo is None:
        raise InvalidInput(
            f"not a git repository: {root} (nor any folder above it)",
            hint="run `engram resolve` inside the repository whose merge left conflicts",
        )
    done: list[Resolved] = []
    with contextlib.closing(repo):
        try:
            index = repo.open_index()
        except NoIndexPresent as exc:
            raise InvalidInput(f"no git index (a bare repository?) at {repo.path}") from exc
        except (OSError, ValueError, AssertionError) as exc:
            raise InvalidInput(f"cannot read the git index of {repo.path}: {exc}") from exc
        items: list[tuple[str, IndexEntry | ConflictedIndexEntry]] = [
            (key.decode("utf-8", "surrogateescape"), value) for key, value in index.items()
        ]
        merged: list[tuple[str, bytes, int]] = []
        for path, entry in sorted(items):
            if not _is_engram_file(path):
                continue
            try:
                if isinstance(entry, ConflictedIndexEntry):
                    result = _merge_with_markers(
                        _blob(repo, entry.ancestor, path),
                        _blob(repo, entry.this, path),
                        _blob(repo, entry.other, path),
                        path,
                    )
                    chosen = entry.this or entry.other or entry.ancestor
                    mode = chosen.mode if chosen is not None else _FILE_MODE
                else:
                    current = _read(Path(repo.path, *path.split("/")))
                    if not has_markers(current):
                        continue
                    result = _merge_bytes(*split_markers(current, path), path)
                    mode = entry.mode
            except CorruptStore as exc:
                raise InvalidInput(
                    f"cannot resolve {path}: {exc.message}",
                    hint=f"fix that line of {path} by hand, then run `engram resolve` again",
                ) from exc
            data, records, conflicts = result
            merged.append((path, data, mode))
            done.append(Resolved(path=path, records=records, conflicts=conflicts))
        # Every file merged before any is written: a file that cannot be merged changes nothing.
        for path, data, mode in merged:
            _stage(repo, index, path, data, mode, scrubber)
        if merged:
            index.write()
    return done


# --- history of one memory -------------------------------------------------------------------


@dataclass
class Version:
    """One version of a memory in the git history, as a commit left it."""

    commit: str
    author: str  # the commit author's name
    date: str  # RFC 3339 UTC of the commit (committer time)
    message: str  # first line
    record: dict[str, Any] | None  # the memory's line at that commit (None: line gone)
    change: str  # "added" | "changed" | "deleted" (tombstoned) | "removed" (line gone)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above; the record as its line was)."""
        return asdict(self)


def _find_line(data: bytes, memory_id: str) -> Record | None:
    """Return the record with this id in a memories.jsonl version (None: absent)."""
    needle = b'"id":' + json.dumps(memory_id).encode("utf-8")
    start = 0
    while True:
        found = data.find(needle, start)
        if found < 0:
            return None
        begin = data.rfind(b"\n", 0, found) + 1
        end = data.find(b"\n", found)
        end = len(data) if end < 0 else end
        start = end
        try:
            record = parse_line(data[begin:end], path=MEMORIES_PATH, lineno=0)
        except CorruptStore:
            continue
        if record.get("id") == memory_id:
            return record


class _Reader:
    """Reads the memory's record at a commit, remembering blobs (a sha names immutable data)."""

    def __init__(self, repo: Repo, path: bytes, memory_id: str) -> None:
        self.repo = repo
        self.path = path
        self.memory_id = memory_id
        self.blobs: dict[bytes, Record | None] = {}

    def at(self, sha: ObjectID) -> Record | None:
        """Return the record at a commit (None: absent); KeyError: the commit is not here."""
        from dulwich.object_store import tree_lookup_path
        from dulwich.objects import Commit

        commit = self.repo.object_store[sha]
        if not isinstance(commit, Commit):
            raise KeyError(sha)
        try:
            _, blob = tree_lookup_path(self.repo.object_store.__getitem__, commit.tree, self.path)
        except (KeyError, NotADirectoryError):
            return None
        if blob not in self.blobs:
            data = self.repo.object_store[blob].as_raw_string()
            self.blobs[blob] = _find_line(bytes(data), self.memory_id)
        return self.blobs[blob]


def _change(record: Record | None, before: Record | None) -> str:
    if record is None:
        return "removed"
    if record.get("deleted_at") and not (before or {}).get("deleted_at"):
        return "deleted"
    return "added" if before is None else "changed"


def _author_name(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    return text.split(" <", 1)[0].strip() if " <" in text else text.strip()


def memory_log(
    root: Path, memory_id: str, *, limit: int = 50, path: str = MEMORIES_PATH
) -> list[Version]:
    """List the versions of one memory in the commits reachable from HEAD, newest first."""
    repo = _discover(Path(root))
    if repo is None or limit < 1:
        return []
    with contextlib.closing(repo):
        try:
            head = repo.head()
        except KeyError:
            return []  # no commits yet
        return list(_walk_versions(repo, head, memory_id, limit, path.encode("utf-8")))[:limit]


def _walk_versions(
    repo: Repo, head: ObjectID, memory_id: str, limit: int, path: bytes
) -> Iterator[Version]:
    from dulwich.walk import Walker

    reader = _Reader(repo, path, memory_id)
    emitted = 0
    try:
        walker = Walker(repo.object_store, [head], paths=[path])
        for entry in walker:
            commit = entry.commit
            try:
                record = reader.at(commit.id)
                before = [reader.at(parent) for parent in commit.parents]
            except KeyError:
                continue  # a parent missing (shallow clone): its change is unknown
            if record is None and not before:
                continue
            if before and any(_same(record, other) for other in before):
                continue
            yield Version(
                commit=commit.id.decode("ascii"),
                author=_author_name(commit.author),
                date=format_time(datetime.fromtimestamp(commit.commit_time, UTC)),
                message=commit.message.decode("utf-8", "replace").split("\n", 1)[0].strip(),
                record=record,
                change=_change(record, before[0] if before else None),
            )
            emitted += 1
            if emitted >= limit:
                return
    except KeyError:
        return  # a missing commit object ends the walk (shallow or damaged clone)


def _same(a: Record | None, b: Record | None) -> bool:
    if a is None or b is None:
        return a is b
    return dumps(a) == dumps(b)
