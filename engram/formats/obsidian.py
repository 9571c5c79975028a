"""Obsidian export: memories as markdown notes with front matter, wikilinks and hub notes.

``export_vault`` writes, below ``<vault>/<folder>/`` (default ``engram``):

- ``memories/<title-slug>-<id[:8]>.md`` per live memory: YAML front matter (python-frontmatter:
  id, kind, status, tags, files, project, dates, importance, source, author, ``engram: true``),
  the title as a heading, the content, and a Links section with ``[[wikilinks]]`` to linked
  memories (by relation) and to the memory's kind and file hubs;
- ``kinds/<kind>.md`` and ``files/<path-slug>.md`` hubs listing their memories;
- ``.engram-export.json``, the manifest: which files this export owns, with the hash of the
  bytes it wrote.

The export is incremental and never touches a file it does not own. A note is rewritten only
when its bytes change; notes of deleted memories are removed. A file is owned only while it is
in the manifest with the bytes written last: anything else in the vault — the user's notes,
inside the folder or not, and exported notes the user has since edited or replaced — is left
exactly as it is, and an export that wants its name takes another (``-2``, ``-3`` …). Links
use vault-relative paths (``[[engram/memories/x-abcd1234|Title]]``) so they resolve to exactly
one note, whatever else the vault holds.

Titles, kinds and file paths are untrusted: they become names by a slug that keeps letters,
digits, ``-`` and ``_``, bounds the length and avoids names reserved on Windows; every path
written or removed is resolved and checked to stay inside the export folder. Writes are atomic.

This module reads records it is given and writes only below the export folder; it knows
nothing of the store, the service or any adapter.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Final

from engram.errors import InvalidInput
from engram.model import (
    DEFAULT_IMPORTANCE,
    is_tombstone,
    kind_of,
    links_of,
    loads,
    normalize_project,
    parse_time,
    status_of,
)
from engram.store.atomic import atomic_write

MANIFEST_NAME: Final = ".engram-export.json"
MANIFEST_VERSION: Final = 1
MEMORIES_DIR: Final = "memories"
KINDS_DIR: Final = "kinds"
FILES_DIR: Final = "files"
# Bytes of a slug: leaves room for "-<id8>-NN.md" well inside the usual 255-byte name limit.
SLUG_BYTES: Final = 80
WINDOWS_RESERVED: Final = frozenset(
    {"con", "prn", "aux", "nul", "conin$", "conout$"}
    | {f"com{n}" for n in "123456789¹²³"}
    | {f"lpt{n}" for n in "123456789¹²³"}
)
# Dots go too: Obsidian reads a link to "a.py" as a link to a file with that extension.
_UNSAFE_RE: Final = re.compile(r"[^\w\-]+")
_DASHES_RE: Final = re.compile(r"-{2,}")
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Characters that would end or split a wikilink inside its display text.
_LINK_TEXT: Final = str.maketrans({"[": "(", "]": ")", "|": "/"})
_FOLDER_BAD: Final = frozenset('[]|#^\\:*?"<>')


@dataclass
class ExportResult:
    """What one export did: notes written and removed, notes left as they were, hubs written."""

    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    hubs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above; paths vault-relative, POSIX)."""
        return asdict(self)


@dataclass
class _Note:
    """A manifest entry: a file this export owns, and what hubs need to know of a memory."""

    path: str  # vault-relative, POSIX
    hash: str
    title: str = ""
    kind: str = ""
    files: list[str] = field(default_factory=list)
    project: str = ""


def export_vault(
    records: Sequence[Mapping[str, Any]],
    vault: Path,
    *,
    folder: str = "engram",
    project: str | None = None,
    since: str | None = None,
) -> ExportResult:
    """Export memories into an Obsidian vault below ``folder``, incrementally; see the module."""
    export = _Export(vault, folder, project, since)
    return export.run(records)


class _Export:
    """One run of ``export_vault``: the plan is made first, then files are written."""

    def __init__(self, vault: Path, folder: str, project: str | None, since: str | None) -> None:
        self.folder = _check_folder(folder)
        self.vault = _vault_root(vault)
        self.base = _inside(self.vault, self.vault / self.folder, what="the export folder")
        self.project = normalize_project(project) if project is not None else None
        self.since = _parse_since(since) if since is not None else None
        self.manifest_path = self.base / MANIFEST_NAME
        self.result = ExportResult()

    # -- scope -------------------------------------------------------------------------------

    def _in_project(self, name: Any) -> bool:
        return self.project is None or normalize_project(str(name or "")) == self.project

    def _in_window(self, record: Mapping[str, Any]) -> bool:
        if self.since is None:
            return True
        try:
            return parse_time(str(record.get("updated_at") or "")) >= self.since
        except InvalidInput:
            return True  # an unreadable date: export rather than hide the memory

    # -- the run -------------------------------------------------------------------------------

    def run(self, records: Sequence[Mapping[str, Any]]) -> ExportResult:
        for sub in (MEMORIES_DIR, KINDS_DIR, FILES_DIR):
            _inside(self.base, self.base / sub, what=f"the export's {sub}/ folder")
        notes, hubs = self._load_manifest()
        taken = self._existing_names()
        # Owned files whose bytes changed on disk became the user's: forget them, keep them.
        notes = {key: n for key, n in notes.items() if self._still_ours(n)}
        hubs = {key: n for key, n in hubs.items() if self._still_ours(n)}
        owned = {n.path.casefold() for n in (*notes.values(), *hubs.values())}
        taken -= owned

        latest = _latest(records)
        render: dict[str, Mapping[str, Any]] = {}
        drop: set[str] = set()
        for id_, record in latest.items():
            if is_tombstone(record):
                continue
            if self._in_project(record.get("project")) and self._in_window(record):
                render[id_] = record
        for id_, note in notes.items():
            gone = latest.get(id_)
            if gone is None:
                if self.since is None and self._in_project(note.project):
                    drop.add(id_)
            elif is_tombstone(gone):
                project = gone.get("project") or note.project
                if self._in_project(project) and self._in_window(gone):
                    drop.add(id_)

        # Paths: kept notes hold theirs; rendered notes keep a matching one or claim a new one.
        final: dict[str, _Note] = {
            id_: n for id_, n in notes.items() if id_ not in render and id_ not in drop
        }
        claimed = {n.path.casefold() for n in final.values()} | taken
        for id_ in sorted(render, key=lambda i: (i not in notes, i)):
            record = render[id_]
            stem = f"{_slug(_title(record), fallback='memory')}-{_slug(id_[:8], fallback='id')}"
            old = notes.get(id_)
            path = self._claim(f"{MEMORIES_DIR}/{stem}", claimed, old.path if old else None)
            final[id_] = _Note(
                path=path,
                hash="",
                title=_title(record),
                kind=_clean(kind_of(record)),
                files=_strings(record.get("files")),
                project=_clean(str(record.get("project") or "")),
            )

        hub_notes = self._hub_paths(final, hubs)

        pages = {id_: self._memory_note(render[id_], final, hub_notes) for id_ in render}

        # Removals first, so that a name given up this run can be taken by another note.
        for id_, old in sorted(notes.items()):
            if id_ in drop or (id_ in render and old.path != final[id_].path):
                self._remove(old.path)
        for key, old in sorted(hubs.items()):
            if key not in hub_notes or old.path != hub_notes[key][0]:
                self._remove(old.path)

        for id_, data in sorted(pages.items()):
            note = final[id_]
            note.hash = _hash(data)
            if self._write(note.path, data, notes.get(id_)):
                self.result.written.append(note.path)
            else:
                self.result.unchanged += 1
        final_hubs: dict[str, _Note] = {}
        for key, (path, data) in sorted(hub_notes.items()):
            final_hubs[key] = _Note(path=path, hash=_hash(data))
            if self._write(path, data, hubs.get(key)):
                self.result.hubs.append(path)

        self._save_manifest(final, final_hubs)
        self.result.written.sort()
        self.result.removed.sort()
        self.result.hubs.sort()
        return self.result

    # -- names ---------------------------------------------------------------------------------

    def _claim(self, stem: str, claimed: set[str], current: str | None) -> str:
        """Return a free vault-relative path for ``<folder>/<stem>[-N].md`` and claim it."""
        prefix = f"{self.folder}/{stem}"
        # Keep the name a note has when it is still its name (with or without a suffix).
        if (
            current is not None
            and current.casefold() not in claimed
            and re.fullmatch(re.escape(prefix) + r"(-[0-9]+)?\.md", current)
        ):
            claimed.add(current.casefold())
            return current
        n = 1
        while True:
            path = f"{prefix}.md" if n == 1 else f"{prefix}-{n}.md"
            if path.casefold() not in claimed:
                claimed.add(path.casefold())
                return path
            n += 1

    def _hub_paths(
        self, final: Mapping[str, _Note], hubs: Mapping[str, _Note]
    ) -> dict[str, tuple[str, bytes]]:
        """Return hub key → (path, bytes) for every kind and file the final notes name."""
        members: dict[str, list[str]] = {}
        for id_, note in final.items():
            members.setdefault(f"kind:{note.kind}", []).append(id_)
            for path in note.files:
                members.setdefault(f"file:{path}", []).append(id_)
        stems: dict[str, str] = {}
        for key in members:
            kind, _, value = key.partition(":")
            if kind == "kind":
                stems[key] = f"{KINDS_DIR}/{_slug(value, fallback='kind')}"
            else:
                stems[key] = f"{FILES_DIR}/{_slug(value.replace('/', '-'), fallback='file')}"
        # Different paths may slug alike (a/b.py, a-b.py): all of them get a hash to tell apart.
        seen: dict[str, int] = {}
        for stem in stems.values():
            seen[stem.casefold()] = seen.get(stem.casefold(), 0) + 1
        for key, stem in stems.items():
            if seen[stem.casefold()] > 1:
                stems[key] = f"{stem}-{hashlib.sha256(_clean(key).encode()).hexdigest()[:8]}"

        claimed = {n.path.casefold() for n in final.values()} | self._taken
        paths: dict[str, str] = {}
        for key in sorted(members, key=lambda k: (k not in hubs, k)):
            old = hubs.get(key)
            paths[key] = self._claim(stems[key], claimed, old.path if old else None)

        out: dict[str, tuple[str, bytes]] = {}
        for key, ids in members.items():
            kind, _, value = key.partition(":")
            entries = sorted(ids, key=lambda i: (final[i].title.casefold(), i))
            lines = [f"- {_wikilink(final[i].path, final[i].title)}" for i in entries]
            meta: dict[str, Any] = {"engram": True, "hub": kind, kind: value}
            body = f"# {_inline(value)}\n\n" + "\n".join(lines)
            out[key] = (paths[key], _document(meta, body))
        return out

    # -- notes ---------------------------------------------------------------------------------

    def _memory_note(
        self,
        record: Mapping[str, Any],
        final: Mapping[str, _Note],
        hubs: Mapping[str, tuple[str, bytes]],
    ) -> bytes:
        title = _title(record)
        meta: dict[str, Any] = {
            "id": _clean(str(record.get("id"))),
            "kind": _clean(kind_of(record)),
            "status": _clean(status_of(record)),
            "aliases": [title],
            "tags": _strings(record.get("tags")),
            "files": _strings(record.get("files")),
        }
        for key, source in (
            ("project", "project"),
            ("created", "created_at"),
            ("updated", "updated_at"),
            ("source", "source"),
            ("author", "author"),
        ):
            value = record.get(source)
            if value is None or value == "":
                continue
            meta[key] = _clean(str(value))
        importance = record.get("importance", DEFAULT_IMPORTANCE)
        meta["importance"] = importance if isinstance(importance, int) else str(importance)
        meta["engram"] = True

        links: list[str] = []
        for link in links_of(record):
            if not isinstance(link, Mapping):
                continue
            rel = _inline(str(link.get("rel") or "relates"))
            to = str(link.get("to") or "")
            target = final.get(to)
            if target is not None:
                links.append(f"- {rel} {_wikilink(target.path, target.title)}")
            elif to:
                links.append(f"- {rel} `{_inline(to).replace('`', '')}` (not exported)")
        kind_hub = hubs[f"kind:{meta['kind']}"][0]
        links.append(f"- kind: {_wikilink(kind_hub, meta['kind'])}")
        for path in meta["files"]:
            links.append(f"- file: {_wikilink(hubs[f'file:{path}'][0], path)}")

        content = str(record.get("content") or "").strip()
        parts = [f"# {_inline(title)}"]
        if content:
            parts.append(content)
        parts.append("## Links\n\n" + "\n".join(links))
        return _document(meta, "\n\n".join(parts))

    # -- files ---------------------------------------------------------------------------------

    @property
    def _taken(self) -> set[str]:
        return self._taken_names

    def _existing_names(self) -> set[str]:
        """Return the case-folded vault-relative paths of everything below the folder."""
        names: set[str] = set()
        top_folder = self.vault / self.folder
        if top_folder.is_dir():
            for top, dirs, files in os.walk(top_folder, followlinks=False):
                for name in (*dirs, *files):
                    rel = (Path(top) / name).relative_to(self.vault).as_posix()
                    names.add(rel.casefold())
        self._taken_names = names
        return names

    def _target(self, rel: str) -> Path:
        """Return the absolute path of an owned file, checked to stay inside the folder."""
        path = self.vault / rel
        _inside(self.base, path.parent, what=rel)
        return path

    def _read(self, rel: str) -> bytes | None:
        """Return an owned file's bytes; None when it is missing or not a plain file."""
        path = self._target(rel)
        try:
            info = path.lstat()
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return b""  # a link or a folder now stands there: never ours to touch
        return path.read_bytes()

    def _still_ours(self, note: _Note) -> bool:
        """Tell whether an owned file is missing or still holds the bytes written last."""
        try:
            data = self._read(note.path)
        except InvalidInput:
            return False
        return data is None or _hash(data) == note.hash

    def _write(self, rel: str, data: bytes, old: _Note | None) -> bool:
        """Write an owned file unless it already holds ``data``; tell whether it was written."""
        path = self._target(rel)
        unchanged = old is not None and old.path == rel and old.hash == _hash(data)
        if unchanged and self._read(rel) == data:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        _inside(self.base, path.parent, what=rel)
        atomic_write(path, data)
        return True

    def _remove(self, rel: str) -> None:
        """Remove an owned file (already checked to hold the bytes written last)."""
        path = self._target(rel)
        try:
            info = path.lstat()
        except FileNotFoundError:
            return
        if stat.S_ISREG(info.st_mode):
            path.unlink()
            self.result.removed.append(rel)

    # -- manifest ------------------------------------------------------------------------------

    def _load_manifest(self) -> tuple[dict[str, _Note], dict[str, _Note]]:
        try:
            raw = self.manifest_path.read_bytes()
        except FileNotFoundError:
            return {}, {}
        except OSError as exc:
            raise InvalidInput(f"cannot read {self.manifest_path}: {exc}") from exc
        try:
            data = loads(raw, what=str(self.manifest_path))
            if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION:
                raise ValueError("not a version 1 export manifest")
            notes = self._entries(data.get("notes"))
            hubs = self._entries(data.get("hubs"))
        except (ValueError, TypeError) as exc:
            raise InvalidInput(
                f"{self.manifest_path} is not an engram export manifest: {exc}",
                hint="move it away and export again (the notes it listed are then left alone)",
            ) from exc
        return notes, hubs

    def _entries(self, value: Any) -> dict[str, _Note]:
        """Read manifest entries, leaving out any whose path is not a note below the folder."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise TypeError("entries must be an object")
        out: dict[str, _Note] = {}
        prefix = f"{self.folder}/"
        for key, entry in value.items():
            if not isinstance(entry, dict):
                continue
            path, digest = entry.get("path"), entry.get("hash")
            if not isinstance(path, str) or not isinstance(digest, str):
                continue
            parts = PurePosixPath(path).parts
            if (
                not path.startswith(prefix)
                or not path.endswith(".md")
                or any(p in ("", ".", "..") for p in parts)
                or "\\" in path
                or PurePosixPath(path).is_absolute()
            ):
                continue  # a hand-edited manifest never makes the export touch other files
            out[str(key)] = _Note(
                path=path,
                hash=digest,
                title=str(entry.get("title") or ""),
                kind=kind_of(entry),
                files=_strings(entry.get("files")),
                project=str(entry.get("project") or ""),
            )
        return out

    def _save_manifest(self, notes: Mapping[str, _Note], hubs: Mapping[str, _Note]) -> None:
        data = {
            "version": MANIFEST_VERSION,
            "notes": {key: asdict(note) for key, note in sorted(notes.items())},
            "hubs": {key: {"path": n.path, "hash": n.hash} for key, n in sorted(hubs.items())},
        }
        text = json.dumps(data, ensure_ascii=False, sort_keys=True, indent=1) + "\n"
        raw = text.encode("utf-8", "replace")
        try:
            if self.manifest_path.read_bytes() == raw:
                return
        except FileNotFoundError:
            pass  # first export: no manifest yet, write it
        self.base.mkdir(parents=True, exist_ok=True)
        atomic_write(self.manifest_path, raw)


# -- helpers -----------------------------------------------------------------------------------


def _vault_root(vault: Path) -> Path:
    path = Path(vault).expanduser()
    if path.exists() and not path.is_dir():
        raise InvalidInput(
            f"the vault {path} is not a folder", hint="pass an Obsidian vault folder"
        )
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def _check_folder(folder: str) -> str:
    """Return the export folder as a clean relative POSIX path, or raise InvalidInput."""
    text = str(folder).strip().replace("\\", "/").rstrip("/")
    parts = text.split("/") if text else []
    if (
        not parts
        or any(p in ("", ".", "..") or p != p.strip() for p in parts)
        or any(ch in _FOLDER_BAD or _CONTROL_RE.match(ch) for ch in text)
        or PurePosixPath(text).is_absolute()
    ):
        raise InvalidInput(
            f"the export folder {folder!r} must be a plain folder path inside the vault",
            hint="pass --folder NAME, e.g. engram",
        )
    return "/".join(parts)


def _inside(root: Path, path: Path, *, what: str) -> Path:
    """Return ``path`` resolved, or raise InvalidInput when it leaves ``root``."""
    resolved = path.resolve()
    if resolved != root.resolve() and not resolved.is_relative_to(root.resolve()):
        raise InvalidInput(
            f"{what} resolves to {resolved}, outside {root}",
            hint="remove the link that points out of the vault, or choose another folder",
        )
    return resolved


def _parse_since(since: str) -> datetime:
    try:
        return parse_time(since)
    except InvalidInput as exc:
        raise InvalidInput(
            f"--since {since!r} is not a date", hint="use YYYY-MM-DD or an RFC 3339 time"
        ) from exc


def _latest(records: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Return one record per id: the highest rev, then the latest update."""
    out: dict[str, Mapping[str, Any]] = {}
    for record in records:
        id_ = record.get("id")
        if not isinstance(id_, str) or not id_:
            continue
        seen = out.get(id_)
        if seen is None or _version(record) > _version(seen):
            out[id_] = record
    return out


def _version(record: Mapping[str, Any]) -> tuple[int, str]:
    try:
        rev = int(record.get("rev") or 0)
    except (TypeError, ValueError):
        rev = 0
    return rev, str(record.get("updated_at") or "")


def _title(record: Mapping[str, Any]) -> str:
    return _inline(str(record.get("title") or "")) or str(record.get("id") or "untitled")


def _strings(value: Any) -> list[str]:
    """Return a list field's distinct non-empty strings, in their order."""
    if not isinstance(value, list | tuple):
        return []
    items = (_clean(str(item)) for item in value if item is not None)
    return list(dict.fromkeys(item for item in items if item))


def _clean(text: str) -> str:
    """Return text that encodes as UTF-8 (a lone surrogate from JSON becomes ``?``)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _inline(text: str) -> str:
    """Return text on one line: control characters and line breaks become single spaces."""
    return " ".join(_CONTROL_RE.sub(" ", _clean(text)).split())


def _slug(text: str, *, fallback: str) -> str:
    """Return a file-name-safe slug: letters, digits, ``-_``; bounded; never reserved."""
    slug = unicodedata.normalize("NFKC", _clean(text)).lower()
    slug = _UNSAFE_RE.sub("-", slug)
    slug = _DASHES_RE.sub("-", slug).strip("-_")
    while len(slug.encode("utf-8")) > SLUG_BYTES:
        slug = slug[:-1]
    slug = slug.rstrip("-_") or fallback
    if slug in WINDOWS_RESERVED:
        slug = f"{slug}_"
    return slug


def _wikilink(path: str, text: str) -> str:
    target = path[: -len(".md")] if path.endswith(".md") else path
    label = _inline(text).translate(_LINK_TEXT) or target
    return f"[[{target}|{label}]]"


def _document(meta: Mapping[str, Any], body: str) -> bytes:
    """Render front matter and body with python-frontmatter; keys in the order given."""
    import frontmatter

    post = frontmatter.Post(body, **meta)
    text = frontmatter.dumps(post, sort_keys=False) + "\n"
    return text.encode("utf-8", "replace")


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
