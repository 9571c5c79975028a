"""The write path of memories: remember, update and forget, and the revisions they make.

It owns what a save does: caller fields scrubbed and normalised, cited files anchored to their
git blobs, links resolved to full ids, a known topic key or an identical recent save updating
instead of adding, the memories a ``supersedes`` link names marked superseded, near-duplicates
reported; what an update does (rev+1, earlier text kept in history, a merge's conflicts
settled); and a forget's tombstone. ``revise`` is the one way a memory's new version is made,
for the indexer and the trainer too. Every write goes through ``Workspace.write`` under the
store's lock.

It must not import the service or an adapter, and it prints nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypedDict, Unpack

from engram import config as config_mod
from engram.errors import InvalidInput, NotFound
from engram.model import (
    Record,
    change_time,
    content_hash,
    dedupe_key,
    format_time,
    go_id_of,
    is_pinned,
    is_tombstone,
    new_id,
    normalize_fields,
    normalize_project,
)
from engram.operations import advice
from engram.operations.memory import (
    DEFAULT_IMPORTANCE,
    DEFAULT_KIND,
    DEFAULT_SCOPE,
    DEFAULT_STATUS,
)
from engram.project import MIN_WRITE_PREFIX, Project, as_list

if TYPE_CHECKING:
    from engram.workspace import Workspace

__all__ = [
    "NEAR_DUPLICATE_COSINE",
    "Draft",
    "SaveResult",
    "find_by_go_id",
    "forget",
    "remember",
    "revise",
    "set_pinned",
    "update",
]

NEAR_DUPLICATE_COSINE: Final = 0.92


@dataclass
class SaveResult:
    """What a remember did: ``created``, ``updated`` (topic key) or ``duplicate``."""

    action: str
    record: Record
    redactions: int = 0
    superseded: list[str] = field(default_factory=list)
    similar: list[str] = field(default_factory=list)  # near-duplicates already stored
    warnings: list[str] = field(default_factory=list)  # e.g. a redaction pattern left out

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        out = {
            "action": self.action,
            "id": self.record["id"],
            "redactions": self.redactions,
            "superseded": self.superseded,
            "similar": self.similar,
            "memory": self.record,
        }
        if self.warnings:
            out["warnings"] = self.warnings
        return out


class Draft(TypedDict, total=False):
    """The fields of a memory to save besides its title and content (all optional).

    Defaults (``engram.operations.memory``'s, declared once): kind ``note``, importance 3,
    status ``active``, scope ``project``; source ``cli``. A missing session id is the open
    session's, a missing author git's user name, a missing project this repository's (a
    personal memory's: none, so it is global, unless it cites files of this repository:
    ``Project.project_of``). ``extra`` carries further fields
    as they are.
    """

    kind: str
    tags: Iterable[str] | str | None
    files: Iterable[str] | str | None
    importance: int
    status: str
    scope: str
    topic_key: str | None
    links: Iterable[str | Mapping[str, str]] | None
    source: str
    session_id: str | None
    author: str | None
    project: str | None
    extra: Mapping[str, Any] | None


def remember(here: Project, title: str, content: str = "", **draft: Unpack[Draft]) -> SaveResult:
    """Save a memory; an identical recent save or a known topic key updates instead."""
    fields: Record = dict(draft.get("extra") or {})
    session_id = draft.get("session_id")
    project = draft.get("project")
    fields.update(
        kind=draft.get("kind", DEFAULT_KIND),
        title=title,
        content=content or "",
        tags=as_list(draft.get("tags")),
        files=as_list(draft.get("files")),
        importance=draft.get("importance", DEFAULT_IMPORTANCE),
        status=draft.get("status", DEFAULT_STATUS),
        scope=draft.get("scope", DEFAULT_SCOPE),
        topic_key=draft.get("topic_key"),
        links=list(draft.get("links") or []),
        source=draft.get("source", "cli"),
        session_id=session_id,
    )
    scope = str(fields["scope"]).strip().lower()
    ws = here.workspace(scope)
    fields["project"] = here.project_of(scope, project, fields["files"])
    if session_id is None and here.sessions.path.exists():
        fields["session_id"] = here.session_id(None, normalize_project(project or "") or here.name)
    author = draft.get("author")
    fields["author"] = author if author is not None else config_mod.git_user_name(here.root)
    ours = fields["project"] == here.name
    fields, redactions = _clean(ws, fields, here.repo_paths if ours else None)
    anchors = []
    if here.has_project and fields["project"] == here.name:  # files of this repository
        anchors = _anchors(here, ws, fields.get("files") or [])
    if anchors:
        fields["anchors"] = anchors
    with ws.store.lock():
        action, record, superseded = _save(ws, fields, here.now)
        if action != "duplicate":
            ws.write([record, *superseded])
    result = SaveResult(action, record, redactions, [r["id"] for r in superseded])
    result.warnings = _pattern_warnings(ws)
    if action == "created":
        result.similar = _near_duplicates(ws, record)
    return result


def _clean(
    ws: Workspace, fields: Record, paths: Callable[[list[str]], list[str]] | None = None
) -> tuple[Record, int]:
    """Return caller fields scrubbed and normalised, and how many secrets were redacted.

    ``paths`` makes the cited files repo-relative (``Project.repo_paths``, for memories of
    this repository) once they are scrubbed: collapsing ``//`` first would hide a URL's
    credentials from the rules.
    """
    max_bytes = int(ws.config.number("store.max_content_bytes"))
    # Scrubbed before normalising too: lower-casing a tag must not hide a key from the rules.
    redactions = ws.scrub(fields)
    if paths is not None and fields.get("files"):
        fields["files"] = paths(as_list(fields["files"]))
    fields = normalize_fields(fields, max_content_bytes=max_bytes)
    redactions += ws.scrub(fields)
    return fields, redactions


def _save(
    ws: Workspace, fields: Record, clock: Callable[[], str]
) -> tuple[str, Record, list[Record]]:
    """Return what a save under the lock makes: its action, its record, the ones it supersedes.

    A ``duplicate`` is written here already (its count goes up); the others are the caller's
    to write.
    """
    fields["links"] = _resolve_links(ws, fields.get("links", []))
    if not fields["links"]:
        del fields["links"]
    stamp = clock()
    existing = None
    if fields.get("topic_key"):
        existing = ws.index.find_topic(fields["topic_key"], fields["project"], fields["scope"])
    if existing is not None:
        # The save is the topic's new version: the files it cites (and their anchors) replace
        # the old ones, also when it cites none.
        record = revise(ws, existing, {"files": [], "anchors": [], **fields}, stamp)
        for name in ("files", "anchors"):
            if record.get(name) == []:
                del record[name]
        return "updated", record, supersede(ws, record, stamp)
    window = float(ws.config.number("store.dedupe_window_minutes"))
    since = format_time(datetime.now(UTC) - timedelta(minutes=window))
    duplicate = ws.index.find_duplicate(dedupe_key(fields), since)
    if duplicate is not None:
        # The same memory again: it counts, and tags the earlier save lacked join it (rev+1).
        kept = [str(tag) for tag in duplicate.get("tags") or []]
        added = [tag for tag in fields.get("tags") or [] if tag not in kept]
        record = revise(ws, duplicate, {"tags": kept + added}, stamp) if added else dict(duplicate)
        record["duplicate_count"] = int(record.get("duplicate_count", 0) or 0) + 1
        ws.write([record])
        return "duplicate", record, []
    record = {**fields, "id": new_id(), "created_at": stamp, "updated_at": stamp, "rev": 1}
    return "created", record, supersede(ws, record, stamp)


def update(here: Project, ref: str, changes: Mapping[str, Any]) -> Record:
    """Change fields of a memory (rev+1; earlier title and content kept in history)."""
    ws, current = here.locate(ref, changing="update")
    fields = {key: value for key, value in changes.items() if value is not None}
    for name in ("tags", "files"):
        if name in fields:
            fields[name] = as_list(fields[name])
    if "links" in fields:
        fields["links"] = list(fields["links"])
    if not fields:
        raise InvalidInput("nothing to update: give at least one field to change")
    ours = fields.get("project", current.get("project")) == here.name
    # Scrubbed before lower-casing tags, as remember does.
    fields = _clean(ws, fields, here.repo_paths if ours else None)[0]
    project = fields.get("project", current.get("project"))
    if {"title", "content", "files"} & set(fields) and here.has_project and project == here.name:
        # Rewritten against the code as it is now: anchor the cited files afresh.
        cited = fields["files"] if "files" in fields else current.get("files") or []
        fields["anchors"] = _anchors(here, ws, cited)
    with ws.store.lock():
        current = ws.index.get(current["id"]) or current
        if is_tombstone(current):
            raise NotFound(f"memory {current['id']} was forgotten")
        if "links" in fields:
            fields["links"] = _resolve_links(ws, fields["links"])
        if fields.get("anchors") == [] and not current.get("anchors"):
            del fields["anchors"]
        record = revise(ws, current, fields, here.now())
        if record is current:
            return current
        if record.get("conflicts"):
            from engram.sync.merge import settle

            record = settle(record)  # a user's update settles what a merge kept
        if record.get("anchors") == []:
            del record["anchors"]
        superseded = supersede(ws, record, record["updated_at"])
        ws.write([record, *superseded])
    return record


def forget(here: Project, ref: str, *, hard: bool = False) -> Record:
    """Delete a memory: a tombstone that travels to other clones (hard drops the text)."""
    ws, current = here.locate(ref, include_deleted=hard, changing="forget")
    with ws.store.lock():
        current = ws.index.get(current["id"]) or current
        # after the last change this clone has seen, whatever its clock says: the forget
        # then wins over every edit it saw on every replica (engram.sync.merge)
        stamp = change_time(current.get("updated_at"))
        rev = int(current.get("rev", 1) or 1) + 1
        if hard:
            tombstone: Record = {
                "id": current["id"],
                "rev": rev,
                "updated_at": stamp,
                "deleted_at": current.get("deleted_at") or stamp,
            }
        else:
            if is_tombstone(current):
                return current
            tombstone = {**current, "rev": rev, "updated_at": stamp, "deleted_at": stamp}
        ws.write([tombstone])
    return tombstone


def set_pinned(here: Project, ref: str, pinned: bool) -> Record:
    """Pin a memory (``pinned: true``: every briefing shows it first) or unpin it (field gone).

    Pinning a pinned memory, or unpinning one that is not, changes nothing.
    """
    ws, current = here.locate(ref, changing="pin" if pinned else "unpin")
    with ws.store.lock():
        current = ws.index.get(current["id"]) or current
        if is_pinned(current) == pinned:
            return current
        record = {key: value for key, value in current.items() if key != "pinned"}
        if pinned:
            record["pinned"] = True
        elif isinstance(current.get("go"), Mapping) and "pinned" in current["go"]:
            # Go's pin, kept on import: unpinning drops it too
            record["go"] = {k: v for k, v in current["go"].items() if k != "pinned"}
            if not record["go"]:
                del record["go"]
        record["rev"] = int(current.get("rev", 1) or 1) + 1
        record["updated_at"] = change_time(current.get("updated_at"), stamp=here.now())
        ws.write([record])
    return record


def find_by_go_id(here: Project, number: int) -> Record:
    """Return the live memory whose Go integer id (``engram.model.go_id_of``) is ``number``.

    A client that parsed the id as a double (JavaScript) may send it rounded above 2**53: when
    no id matches exactly, the one memory whose id rounds to the same double is taken.
    """
    close: list[Record] = []
    for ws in here.workspaces():
        for record in ws.index.all_records():
            go_id = go_id_of(record)
            if go_id == number:
                return record
            if float(go_id) == float(number):
                close.append(record)
    if len(close) == 1:
        return close[0]
    raise NotFound(
        f"no memory with id {number}",
        hint=f"{advice.cmd('recall', query='WORDS')} shows the ids",
    )


def revise(ws: Workspace, current: Record, fields: Mapping[str, Any], stamp: str) -> Record:
    """Return ``current`` with ``fields`` applied: rev+1, old text kept in history.

    ``current`` itself comes back when nothing changed.
    """
    record = dict(current)
    changed_text = any(
        name in fields and fields[name] != current.get(name) for name in ("title", "content")
    )
    for name, value in fields.items():
        if name in ("id", "created_at", "rev", "history", "duplicate_count"):
            continue
        record[name] = value
    if changed_text:
        history = list(current.get("history", []) or [])
        history.append(
            {
                "rev": current.get("rev", 1),
                "title": current.get("title", ""),
                "content": current.get("content", ""),
                "updated_at": current.get("updated_at", ""),
            }
        )
        limit = int(ws.config.number("store.history_limit"))
        record["history"] = history[-limit:] if limit > 0 else []
        if not record["history"]:
            del record["history"]
    if content_hash(record) == content_hash(current) and not changed_text:
        return current
    rev = current.get("rev", 1)
    record["rev"] = (rev if isinstance(rev, int) else 1) + 1
    # A hybrid logical clock: later than the version it changes, also when this clock is
    # behind, so the merge (which orders by time) never lets it lose to that version.
    record["updated_at"] = change_time(current.get("updated_at"), stamp=stamp)
    return record


def supersede(ws: Workspace, record: Mapping[str, Any], stamp: str) -> list[Record]:
    """Return the memories ``record`` supersedes, marked superseded (rev+1)."""
    out: list[Record] = []
    for link in record.get("links", []) or []:
        if link.get("rel") != "supersedes" or link.get("to") == record["id"]:
            continue
        target = ws.index.get(str(link["to"]))
        if target is None or is_tombstone(target) or target.get("status") == "superseded":
            continue
        out.append(
            {
                **target,
                "status": "superseded",
                "updated_at": change_time(target.get("updated_at"), stamp=stamp),
                "rev": int(target.get("rev", 1) or 1) + 1,
            }
        )
    return out


def _resolve_links(ws: Workspace, links: Sequence[Mapping[str, Any]]) -> list[Record]:
    """Return links with their targets' full ids, in a stable order."""
    out: list[Record] = []
    for link in links:
        ref = str(link["to"])
        # A supersedes link changes its target (status superseded): the rule of forget.
        short = len(ref) < MIN_WRITE_PREFIX and ws.index.get(ref) is None
        if link.get("rel") == "supersedes" and short:
            raise InvalidInput(
                f"id prefix {ref!r} is too short to supersede a memory: "
                f"give at least {MIN_WRITE_PREFIX} characters of its id",
                hint=f"{advice.cmd('recall', query='WORDS')} shows the ids",
            )
        target = ws.index.resolve(ref)
        out.append({**link, "to": target})
    return sorted(out, key=lambda link: (link["rel"], link["to"]))


def _anchors(here: Project, ws: Workspace, files: Sequence[str]) -> list[dict[str, str]]:
    """Return the git blobs of the cited files git tracks (``store.anchors`` turns it off)."""
    if not files or not ws.config.get("store.anchors"):
        return []
    from engram.indexer.anchorrecord import record_anchors

    return record_anchors(here.root, [str(path) for path in files])


def _pattern_warnings(ws: Workspace) -> list[str]:
    """Name each extra redaction pattern left out (bad syntax, out of time) and its file."""
    from engram.store.patterns import problems

    found = problems(ws.store.scrubber.patterns)
    if not found:
        return []
    folder = ws.config.engram_dir
    path = folder / "config.yaml"
    if not path.exists() and (folder / "config.json").exists():
        path = folder / "config.json"
    return [f"{path}: redact.extra_patterns: {problem}" for problem in found]


def _near_duplicates(ws: Workspace, record: Mapping[str, Any]) -> list[str]:
    """Ids of live memories of the same kind that say nearly the same (cosine ≥ 0.92).

    Only where the embedding model is loaded already (a server, a process that searched):
    a one-shot save never pays for loading it. Reported, never merged: consolidation does.
    """
    from engram.index import semantic

    if not semantic.loaded(ws.index.vectors.model):
        return []
    text = semantic.record_text(record)
    found = ws.index.similar(text, limit=4, min_cosine=NEAR_DUPLICATE_COSINE)
    others = [rid for rid, _ in found if rid != record["id"]]
    kinds = ws.index.get_many(others)
    return [rid for rid in others if kinds.get(rid, {}).get("kind") == record.get("kind")]
