"""The service facade: the one API every adapter (CLI, MCP, HTTP, TUI) calls.

``Engram`` ties a project's store (and the personal store under ENGRAM_HOME, for
``scope=personal``) to its derived index. Each operation validates caller input, takes the store
lock for writes, keeps the index in step, and returns plain values: a recall with no hits
returns ``[]``; errors are ``EngramError``s with a hint. Nothing here imports typer, rich, mcp
or an HTTP framework, and nothing here prints.
"""

from __future__ import annotations

import math
import platform
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from time import monotonic
from typing import TYPE_CHECKING, Any, Final

from engram import config as config_mod
from engram.errors import (
    AmbiguousId,
    CorruptStore,
    EngramError,
    InvalidInput,
    NotFound,
    NotInitialized,
)
from engram.index.query import Hit, Query
from engram.index.ranking import epoch
from engram.model import (
    Record,
    change_time,
    check_id,
    content_hash,
    dedupe_key,
    format_time,
    is_tombstone,
    new_id,
    normalize_fields,
    normalize_project,
    now,
)
from engram.store import init_layout
from engram.sync import transfer
from engram.sync.transfer import ImportResult
from engram.workspace import Workspace
from engram.workspace import make_scrubber as _scrubber

if TYPE_CHECKING:
    from engram.context import Section
    from engram.doctor import Finding
    from engram.indexer.anchors import AnchorChecker
    from engram.store.sessions import SessionLog

GLOBAL_PROJECTS: Final = ("", "*", "personal")  # personal memories shown in every project
# A command that changes or deletes a memory needs this many characters of its id (or the whole
# id, if shorter): one typed character must not pick the memory to forget.
MIN_WRITE_PREFIX: Final = 4
Progress = Callable[[int, int], None]


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


def _list(value: Iterable[str] | str | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    out: list[str] = []
    for item in value:
        out.extend(part.strip() for part in str(item).split(",") if part.strip())
    return out


def _frozen(
    value: Iterable[str] | str | None, normalise: Callable[[str], str] = str
) -> frozenset[str]:
    return frozenset(normalise(item) for item in _list(value))


class Engram:
    """The facade over one project (and the personal store for ``scope=personal``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project_ws = Workspace.open(root, root / config_mod.ENGRAM_DIR, "project")
        self._personal: Workspace | None = None
        # Resolved once: recall checks for the personal store on every call.
        personal = config_mod.personal_dir()
        same = personal.resolve() == self.project_ws.store.dir.resolve()
        self._personal_dir: Path | None = None if same else personal
        self._sessions: SessionLog | None = None
        self._anchor_checker: AnchorChecker | None = None
        self._context_cache: (
            tuple[Any, float, dict[str, Any], list[Section], dict[str, str]] | None
        ) = None

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | None = None) -> Engram:
        """Open the project holding ``path`` (default: the working directory)."""
        return cls(config_mod.find_root(path))

    @classmethod
    def init(
        cls, path: Path | None = None, project: str | None = None
    ) -> tuple[Engram, list[Path]]:
        """Create .engram/ in ``path`` (default: the git work tree here); keep what exists."""
        root = config_mod.find_repo_root(path) if path is None else path.resolve()
        root.mkdir(parents=True, exist_ok=True)
        name = normalize_project(project or "") or config_mod.detect_project(root)
        created = init_layout(root / config_mod.ENGRAM_DIR, name)
        engram = cls(root)
        engram.git_setup(install=True)
        return engram, created

    def close(self) -> None:
        """Release index files of every open workspace."""
        self.project_ws.close()
        if self._anchor_checker is not None:
            self._anchor_checker.close()
            self._anchor_checker = None
        if self._personal is not None:
            self._personal.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def config(self) -> config_mod.Config:
        return self.project_ws.config

    @property
    def project(self) -> str:
        """This project's name (config.yaml, else the git remote, else the folder; normalised)."""
        return self.config.project

    @property
    def _personal_projects(self) -> frozenset[str]:
        """The personal store's memories recall shows here: this project's and global ones.

        A personal memory names the project it was saved in; one whose project is empty, ``*``
        or ``personal`` (the store's own name) belongs to every project.
        """
        return frozenset((self.project, *GLOBAL_PROJECTS))

    def personal(self, *, create: bool = False) -> Workspace | None:
        """Return the personal store's workspace (ENGRAM_HOME), creating it if asked."""
        if self._personal is None:
            folder = self._personal_dir
            if folder is None:
                return None
            if not (folder / "memories.jsonl").exists():
                if not create:
                    return None
                init_layout(folder, "personal")
            self._personal = Workspace.open(folder.parent, folder, "personal")
        return self._personal

    def _workspace(self, scope: str) -> Workspace:
        if scope == "personal":
            ws = self.personal(create=True)
            if ws is not None:
                return ws
        return self.project_ws

    def _workspaces(self, scopes: frozenset[str] = frozenset()) -> list[Workspace]:
        out = [self.project_ws]
        if not scopes or "personal" in scopes:
            personal = self.personal()
            if personal is not None:
                out.append(personal)
        return out

    def _locate(
        self, ref: str, *, include_deleted: bool = False, changing: str = ""
    ) -> tuple[Workspace, Record]:
        """Find the workspace and record an id or unique id prefix names.

        ``changing`` names a command that changes the memory (forget, update …): its prefix
        must be at least MIN_WRITE_PREFIX characters long, unless it is a whole id.
        """
        prefix = check_id(ref)
        workspaces = self._workspaces()
        if (
            changing
            and len(prefix) < MIN_WRITE_PREFIX
            and all(ws.index.get(prefix) is None for ws in workspaces)
        ):
            raise InvalidInput(
                f"id prefix {prefix!r} is too short to {changing} a memory: "
                f"give at least {MIN_WRITE_PREFIX} characters of its id",
                hint="engram recall or engram get shows the ids",
            )
        found: list[tuple[Workspace, str]] = []
        ambiguous: AmbiguousId | None = None
        for ws in workspaces:
            try:
                found.append((ws, ws.index.resolve(prefix)))
            except NotFound:
                continue
            except AmbiguousId as exc:
                ambiguous = exc
        if ambiguous is not None:
            raise ambiguous
        if not found:
            raise NotFound(f"no memory with id {prefix}")
        if len(found) > 1 and not any(rid == prefix for _, rid in found):
            raise AmbiguousId(f"id prefix {prefix!r} matches memories in several stores")
        ws, rid = next(((w, r) for w, r in found if r == prefix), found[0])
        record = ws.index.get(rid)
        if record is None:
            raise NotFound(f"no memory with id {prefix}")
        if is_tombstone(record) and not include_deleted:
            # edits made elsewhere that the forget had not seen: kept on it by the merge
            unseen = [c for c in record.get("conflicts") or [] if "deleted_at" not in c]
            kept = f"; it keeps {len(unseen)} edit(s) made on another clone" if unseen else ""
            raise NotFound(
                f"memory {rid} was forgotten at {record.get('deleted_at')}{kept}",
                hint="engram export shows tombstones and the text they keep; a forgotten memory "
                "cannot be edited (save the text again with engram remember)",
            )
        return ws, record

    # -- writes ------------------------------------------------------------------------------

    def _scrub(self, ws: Workspace, fields: Record) -> int:
        """Redact secrets in every field, in place, with the store's scrubber; return the count."""
        return ws.scrub(fields)

    def scrub_text(self, text: str) -> str:
        """Return text with what a write would redact replaced: for text a title is cut from."""
        return self.project_ws.store.scrubber.text(text)[0]

    def _prescrub(self, text: str) -> tuple[str, int]:
        """Return scrub_text(text) and how many secrets it replaced (a save reports them)."""
        return self.project_ws.store.scrubber.text(text)

    def _write(self, ws: Workspace, records: Sequence[Record], *, journal: bool = True) -> None:
        """Write records to the store and the index; journal them as this clone's changes."""
        ws.write(records, journal=journal)

    def remember(
        self,
        title: str,
        content: str = "",
        *,
        kind: str = "note",
        tags: Iterable[str] | str | None = None,
        files: Iterable[str] | str | None = None,
        importance: int = 3,
        status: str = "active",
        scope: str = "project",
        topic_key: str | None = None,
        links: Iterable[str | Mapping[str, str]] | None = None,
        source: str = "cli",
        session_id: str | None = None,
        author: str | None = None,
        project: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> SaveResult:
        """Save a memory; an identical recent save or a known topic key updates instead."""
        fields: Record = dict(extra or {})
        fields.update(
            kind=kind,
            title=title,
            content=content or "",
            tags=_list(tags),
            files=_list(files),
            importance=importance,
            status=status,
            scope=scope,
            topic_key=topic_key,
            links=list(links or []),
            source=source,
            session_id=session_id,
        )
        ws = self._workspace(str(fields["scope"]).strip().lower())
        fields["project"] = self.project if project is None or not project.strip() else project
        if session_id is None and self.sessions.path.exists():
            fields["session_id"] = self._session_id(None, normalize_project(fields["project"]))
        fields["author"] = author if author is not None else config_mod.git_user_name(self.root)
        max_bytes = int(ws.config.number("store.max_content_bytes"))
        # Scrubbed before normalising too: lower-casing a tag must not hide a key from the rules.
        redactions = self._scrub(ws, fields)
        fields = normalize_fields(fields, max_content_bytes=max_bytes)
        redactions += self._scrub(ws, fields)
        anchors = []
        if fields["project"] == self.project:  # files of this repository
            anchors = self._anchors(ws, fields.get("files") or [])
        if anchors:
            fields["anchors"] = anchors
        with ws.store.lock():
            fields["links"] = self._resolve_links(ws, fields.get("links", []))
            if not fields["links"]:
                del fields["links"]
            stamp = now()
            existing = None
            if fields.get("topic_key"):
                existing = ws.index.find_topic(
                    fields["topic_key"], fields["project"], fields["scope"]
                )
            if existing is not None:
                # The save is the topic's new version: the files it cites (and their anchors)
                # replace the old ones, also when it cites none.
                revision = {"files": [], "anchors": [], **fields}
                record = self._revise(ws, existing, revision, stamp)
                for name in ("files", "anchors"):
                    if record.get(name) == []:
                        del record[name]
                action = "updated"
            else:
                window = float(ws.config.number("store.dedupe_window_minutes"))
                since = format_time(datetime.now(UTC) - timedelta(minutes=window))
                duplicate = ws.index.find_duplicate(dedupe_key(fields), since)
                if duplicate is not None:
                    record = dict(duplicate)
                    record["duplicate_count"] = int(record.get("duplicate_count", 0) or 0) + 1
                    self._write(ws, [record])
                    warnings = self._pattern_warnings(ws)
                    return SaveResult("duplicate", record, redactions, warnings=warnings)
                record = {
                    **fields,
                    "id": new_id(),
                    "created_at": stamp,
                    "updated_at": stamp,
                    "rev": 1,
                }
                action = "created"
            superseded = self._supersede(ws, record, stamp)
            self._write(ws, [record, *superseded])
        result = SaveResult(action, record, redactions, [r["id"] for r in superseded])
        result.warnings = self._pattern_warnings(ws)
        if action == "created":
            result.similar = self._near_duplicates(ws, record)
        return result

    def _pattern_warnings(self, ws: Workspace) -> list[str]:
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

    def _near_duplicates(self, ws: Workspace, record: Mapping[str, Any]) -> list[str]:
        """Ids of live memories of the same kind that say nearly the same (cosine ≥ 0.92).

        Only where the embedding model is loaded already (a server, a process that searched):
        a one-shot save never pays for loading it. Reported, never merged: consolidation does.
        """
        from engram.index import semantic

        if not semantic.loaded():
            return []
        text = semantic.record_text(record)
        found = ws.index.similar(text, limit=4, min_cosine=NEAR_DUPLICATE_COSINE)
        others = [rid for rid, _ in found if rid != record["id"]]
        kinds = ws.index.get_many(others)
        return [rid for rid in others if kinds.get(rid, {}).get("kind") == record.get("kind")]

    def _anchors(self, ws: Workspace, files: Sequence[str]) -> list[dict[str, str]]:
        """Return the git blobs of the cited files git tracks (``store.anchors`` turns it off)."""
        if not files or not ws.config.get("store.anchors"):
            return []
        from engram.indexer.anchors import record_anchors

        return record_anchors(self.root, [str(path) for path in files])

    def stale(self, record: Mapping[str, Any]) -> list[str]:
        """Say which of a memory's anchored files changed in git since it was written.

        One sentence per file, e.g. ``src/auth.py changed in 3 commits since it was written``;
        ``[]`` for a memory without anchors or whose files are unchanged at HEAD. Answers are
        cached per HEAD, so a recall pays for this only when HEAD moved.
        """
        return self.stale_many([record]).get(str(record.get("id", "")), [])

    def stale_many(self, records: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
        """Return ``stale`` for several memories by id (only those with something to say)."""
        wanted = [
            r
            for r in records
            if isinstance(r.get("anchors"), list)
            and r.get("anchors")
            # Anchored in another project's repository (a personal memory): not checked here.
            and str(r.get("project") or "") == self.project
        ]
        if not wanted:
            return {}
        if self._anchor_checker is None:
            from engram.indexer.anchors import AnchorChecker

            self._anchor_checker = AnchorChecker(self.root, self.project_ws.store.state_dir)
        items = [(r["anchors"], epoch(r.get("created_at")) or None) for r in wanted]
        out: dict[str, list[str]] = {}
        for record, found in zip(wanted, self._anchor_checker.check_many(items), strict=True):
            lines = []
            for item in found:
                if item.deleted:
                    lines.append(f"{item.path} was deleted since it was written")
                    continue
                least = "at least " if item.capped else ""
                plural = "commit" if item.commits == 1 else "commits"
                count = f"{least}{item.commits} {plural}"
                lines.append(f"{item.path} changed in {count} since it was written")
            if lines:
                out[str(record.get("id", ""))] = lines
        return out

    def _resolve_links(self, ws: Workspace, links: Sequence[Mapping[str, Any]]) -> list[Record]:
        out: list[Record] = []
        for link in links:
            ref = str(link["to"])
            # A supersedes link changes its target (status superseded): the rule of forget.
            short = len(ref) < MIN_WRITE_PREFIX and ws.index.get(ref) is None
            if link.get("rel") == "supersedes" and short:
                raise InvalidInput(
                    f"id prefix {ref!r} is too short to supersede a memory: "
                    f"give at least {MIN_WRITE_PREFIX} characters of its id",
                    hint="engram recall or engram get shows the ids",
                )
            target = ws.index.resolve(ref)
            out.append({**link, "to": target})
        return sorted(out, key=lambda link: (link["rel"], link["to"]))

    def _revise(
        self, ws: Workspace, current: Record, fields: Mapping[str, Any], stamp: str
    ) -> Record:
        """Return ``current`` with ``fields`` applied: rev+1, old text kept in history."""
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

    def _supersede(self, ws: Workspace, record: Mapping[str, Any], stamp: str) -> list[Record]:
        """Mark the memories ``record`` supersedes as superseded (rev+1)."""
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

    def update(self, ref: str, **changes: Any) -> Record:
        """Change fields of a memory (rev+1; earlier title and content kept in history)."""
        ws, current = self._locate(ref, changing="update")
        fields = {key: value for key, value in changes.items() if value is not None}
        for name in ("tags", "files"):
            if name in fields:
                fields[name] = _list(fields[name])
        if "links" in fields:
            fields["links"] = list(fields["links"])
        if not fields:
            raise InvalidInput("nothing to update: give at least one field to change")
        self._scrub(ws, fields)  # before lower-casing tags, as remember does
        fields = normalize_fields(
            fields, max_content_bytes=int(ws.config.number("store.max_content_bytes"))
        )
        redactions = self._scrub(ws, fields)
        del redactions
        project = fields.get("project", current.get("project"))
        if {"title", "content", "files"} & set(fields) and project == self.project:
            # Rewritten against the code as it is now: anchor the cited files afresh.
            cited = fields["files"] if "files" in fields else current.get("files") or []
            fields["anchors"] = self._anchors(ws, cited)
        with ws.store.lock():
            current = ws.index.get(current["id"]) or current
            if is_tombstone(current):
                raise NotFound(f"memory {current['id']} was forgotten")
            if "links" in fields:
                fields["links"] = self._resolve_links(ws, fields["links"])
            if fields.get("anchors") == [] and not current.get("anchors"):
                del fields["anchors"]
            record = self._revise(ws, current, fields, now())
            if record is current:
                return current
            if record.get("conflicts"):
                from engram.sync.merge import settle

                record = settle(record)  # a user's update settles what a merge kept
            if record.get("anchors") == []:
                del record["anchors"]
            superseded = self._supersede(ws, record, record["updated_at"])
            self._write(ws, [record, *superseded])
        return record

    def forget(self, ref: str, *, hard: bool = False) -> Record:
        """Delete a memory: a tombstone that travels to other clones (hard drops the text)."""
        ws, current = self._locate(ref, include_deleted=hard, changing="forget")
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
            self._write(ws, [tombstone])
        return tombstone

    # -- reads -------------------------------------------------------------------------------

    def suggest_topic_key(self, *, kind: str = "", title: str = "", content: str = "") -> str:
        """Suggest a stable ``family/segment`` topic key for a memory about to be saved."""
        from engram.model import suggest_topic_key

        return suggest_topic_key(kind, title, content)

    def get(self, ref: str) -> Record:
        """Return the full memory an id or unique prefix names."""
        return self._locate(ref)[1]

    def target(self, ref: str, changing: str) -> Record:
        """Return the memory a command about to change it names (a prefix of 4+ characters)."""
        return self._locate(ref, changing=changing)[1]

    def why(self, ref: str) -> dict[str, Any]:
        """Return the lineage of a memory: supersede chains, links, provenance, judgements."""
        from engram.graph import lineage

        ws, record = self._locate(ref)
        out = lineage(record, ws.index.get, ws.index.linked_to)
        out["stale"] = self.stale(record)
        return out

    def related(self, ref: str, *, limit: int = 10) -> list[dict[str, Any]]:
        """Return a memory's neighbours by links, shared files and shared tags, best first."""
        from engram.graph import related

        if limit < 0:
            raise InvalidInput(f"limit must not be negative, got {limit}")
        ws, record = self._locate(ref)
        incoming = ws.index.linked_to(record["id"])
        ids = {str(link.get("to")) for link in record.get("links", []) or []}
        ids.update(src for src, _ in incoming)
        files = [str(path) for path in record.get("files", []) or []]
        if files:
            ids.update(ws.index.ids_for_files(files))
        tags = [str(tag) for tag in record.get("tags", []) or []]
        if tags:
            ids.update(ws.index.ids_for_tags(tags))
        # Similar meaning, from the stored embeddings (empty when semantic search is off).
        similar = dict(ws.index.similar(like=record["id"], limit=max(limit, 10), min_cosine=0.6))
        ids.update(similar)
        ids.discard(record["id"])
        candidates = ws.index.get_many(sorted(ids)).values()
        return related(record, candidates, incoming, limit=limit, similar=similar)

    def check(
        self, files: Iterable[str] | str, *, text: str = "", budget: int | None = None
    ) -> dict[str, Any]:
        """Return what the memory knows about files about to be edited, packed under a budget.

        Findings, most relevant first: active pitfalls and decisions citing the files, hotspot
        warnings, revert and fix-again candidates, other active memories, superseded decisions
        still citing them, and with ``text`` the best recall hits for it. ``budget`` defaults to
        ``check.budget`` in config.yaml (800 tokens). No findings is a valid answer.
        """
        from engram.check import gather_findings, pack_check
        from engram.indexer.plan import hotspots_id
        from engram.model import normalize_path

        if budget is None:
            budget = int(self.config.number("check.budget"))
        if budget < 0:
            raise InvalidInput(f"budget must not be negative, got {budget}")
        wanted = [normalize_path(path) for path in _list(files)]
        records: list[Record] = []
        superseded_by: dict[str, list[str]] = {}
        for ws in self._workspaces():
            if not wanted:
                continue
            found = ws.index.get_many(sorted(ws.index.ids_for_files(wanted)))
            for rid, record in found.items():
                records.append(record)
                if record.get("status") == "superseded":
                    superseded_by[rid] = [
                        src for src, rel in ws.index.linked_to(rid) if rel == "supersedes"
                    ]
        hotspots = self.project_ws.index.get(hotspots_id(self.project)) if wanted else None
        if hotspots is not None and (
            is_tombstone(hotspots) or hotspots.get("status", "active") in ("archived", "rejected")
        ):
            hotspots = None
        text = str(text or "").strip()
        hits = _records(self.recall(text, limit=5)) if text else []
        findings = gather_findings(
            wanted, records, hotspots=hotspots, superseded_by=superseded_by, recall_hits=hits
        )
        by_id = {str(record["id"]): record for record in [*records, *hits]}
        known = {rid for ids in superseded_by.values() for rid in ids}
        # The packer looks at the first findings only (those that fit, then a few that do not):
        # their short ids and staleness are worked out in one batch, the rest on demand.
        first = [str(f["id"]) for f in findings[:_CHECK_BATCH]]
        shorts = self.short_ids({*first, *known})
        stale_of = self.stale_many(by_id[rid] for rid in first if rid in by_id)
        batch = set(first)

        def short(rid: str) -> str:
            if rid not in shorts:
                shorts.update(self.short_ids([rid]))
            return shorts[rid]

        def decorate(finding: dict[str, Any]) -> dict[str, Any]:
            """Shorten the ids a note names and add staleness: only for findings packed."""
            note = _ID_IN_TEXT.sub(
                lambda m: (
                    short(m.group()) if m.group() in by_id or m.group() in known else m.group()
                ),
                str(finding["note"]),
            )
            rid = str(finding["id"])
            stale = stale_of.get(rid, []) if rid in batch else self.stale(by_id.get(rid, {}))
            if stale:
                finding["stale"] = stale
                note = f"{note}; may be stale: {'; '.join(stale)}"
            finding["note"] = note
            return finding

        return pack_check(wanted, findings, budget=budget, short_id=short, decorate=decorate)

    def short_ids(self, ids: Iterable[str], minimum: int = 8) -> dict[str, str]:
        """Return each id's shortest prefix, at least ``minimum`` long, that names only it."""
        workspaces = self._workspaces()
        out: dict[str, str] = {}
        for rid in ids:
            out[rid] = rid
            for size in range(minimum, len(rid)):
                prefix, unique = rid[:size], True
                for ws in workspaces:
                    try:
                        unique = ws.index.resolve(prefix) == rid
                    except NotFound:
                        continue
                    except AmbiguousId:
                        unique = False
                    if not unique:
                        break
                if unique:
                    out[rid] = prefix
                    break
        return out

    def recall(
        self, query: str = "", *, limit: int = 10, offset: int = 0, **filters: Any
    ) -> list[Hit]:
        """Return ranked memories for any text (best first; filters combine with AND).

        ``filters`` are the recall filters engram.operations declares, by their Query field
        (``kinds``, ``tags``, ``files`` …); the index reads them (``Query.build``).
        """
        if limit < 0 or offset < 0:
            raise InvalidInput("limit and offset must not be negative")
        q = Query.build(query, limit=limit + offset, **filters)
        hits: list[Hit] = []
        for ws in self._workspaces(q.scopes):
            if ws.scope == "personal" and not q.projects:
                hits.extend(ws.index.search(replace(q, projects=self._personal_projects)))
            else:
                hits.extend(ws.index.search(q))
        hits.sort(key=lambda hit: (-hit.score, hit.id))
        if hits and hits[0].bm25 > 0:
            floor = hits[0].score * self.project_ws.index.weights.min_score_ratio
            hits = [hit for hit in hits if hit.score >= floor]
        return hits[offset : offset + limit]

    def problems(self) -> list[tuple[int, str]]:
        """Return unreadable lines the index skipped in memories.jsonl (for warnings)."""
        return self.project_ws.index.stored_problems()

    def stats(self) -> dict[str, Any]:
        """Return counts by kind, status, scope and project, and the sizes of the files."""
        out: dict[str, Any] = {"project": self.project, "root": str(self.root), "stores": []}
        for ws in self._workspaces():
            ws.index.flush()
            counts = ws.index.counts()
            counts["scope"] = ws.scope
            counts["path"] = str(ws.store.path)
            counts["file_bytes"] = ws.store.path.stat().st_size if ws.store.exists() else 0
            counts["backend"] = ws.index.backend_name
            out["stores"].append(counts)
        return out

    def context(self, *, budget: int | None = None, query: str = "") -> dict[str, Any]:
        """Return the session-start briefing packed under a token budget (text, items, tokens).

        Sections, in priority order: the memories most relevant to ``query`` (when given),
        active decisions, principles and pitfalls, the code hotspots, the latest session
        summaries. ``budget`` defaults to ``context.budget`` in config.yaml.
        """
        from engram.context import Section, clip, pack_context

        if budget is None:
            budget = int(self.config.number("context.budget"))
        if budget < 0:
            raise InvalidInput(f"budget must not be negative, got {budget}")
        query = str(query or "").strip()
        scale = budget / 2000  # candidates per section grow with the budget
        sections: list[Section] = []
        if query:
            limit = max(1, math.ceil(8 * scale))
            hits = self.recall(query, limit=limit + 1)
            heading = f'Relevant to "{clip(query, 60)}"'
            sections.append(Section("query", heading, _records(hits[:limit]), len(hits) > limit))
        counts, standing, shorts = self._standing_sections(scale)
        sections += standing
        briefing = pack_context(
            project=self.project,
            counts=counts,
            sections=sections,
            budget=budget,
            short_id=lambda rid: shorts.get(rid) or self.short_ids([rid])[rid],
        )
        return {"project": self.project, "query": query, **briefing.to_dict()}

    def _standing_sections(
        self, scale: float
    ) -> tuple[dict[str, Any], list[Section], dict[str, str]]:
        """Return the counts, the query-free sections and their short ids, cached per state.

        They cost a scan of the records table; a long-lived process (the MCP server) asks again
        and again while nothing changed, so they are kept until a store file changes (its stat
        signature) or an hour passes (freshness moves the ranking only over days).
        """
        from engram.context import Section
        from engram.indexer.plan import hotspots_id

        workspaces = self._workspaces()
        key = (scale, tuple(ws.store.signature() for ws in workspaces))
        cached = self._context_cache
        if cached is not None and cached[0] == key and monotonic() - cached[1] < 3600:
            return cached[2], cached[3], cached[4]
        sections: list[Section] = []
        for name, kind, heading, size in (
            ("decisions", "decision", "Active decisions", 6),
            ("principles", "principle", "Principles", 4),
            ("pitfalls", "pitfall", "Active pitfalls", 6),
        ):
            limit = max(1, math.ceil(size * scale))
            hits = self.recall("", kinds=kind, statuses="active", limit=limit + 1)
            sections.append(Section(name, heading, _records(hits[:limit]), len(hits) > limit))
        hotspots = self.project_ws.index.get(hotspots_id(self.project))
        if (
            hotspots is not None
            and not is_tombstone(hotspots)
            and hotspots.get("status", "active") not in ("archived", "rejected")
            and hotspots.get("hotspots")
        ):
            sections.append(Section("hotspots", "Code hotspots", [hotspots]))
        # Browsing ranks by freshness among other factors: take a few more, then sort by date.
        sessions = _records(self.recall("", kinds="session", limit=15))
        sessions.sort(key=lambda r: str(r.get("created_at") or ""), reverse=True)
        sections.append(Section("sessions", "Latest sessions", sessions[:3]))
        memories = 0
        by_kind: dict[str, int] = {}
        by_status: dict[str, int] = {}
        for ws in self._workspaces():
            for kind, status, number in ws.index.db.execute(
                "SELECT kind, status, count(*) FROM records WHERE deleted=0 GROUP BY kind, status"
            ):
                memories += int(number)
                by_kind[str(kind)] = by_kind.get(str(kind), 0) + int(number)
                by_status[str(status)] = by_status.get(str(status), 0) + int(number)
        counts: dict[str, Any] = {
            "memories": memories,
            "by_kind": dict(sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0]))),
            "by_status": dict(sorted(by_status.items(), key=lambda kv: (-kv[1], kv[0]))),
        }
        shorts = self.short_ids(str(r["id"]) for section in sections for r in section.records)
        self._context_cache = (key, monotonic(), counts, sections, shorts)
        return counts, sections, shorts

    # -- sessions, prompts, capture, timeline ------------------------------------------------

    @property
    def sessions(self) -> SessionLog:
        """The clone's session log (state/sessions.json)."""
        if self._sessions is None:
            from engram.store.sessions import SessionLog

            ws = self.project_ws
            timeout = float(ws.config.number("store.lock_timeout_seconds"))
            self._sessions = SessionLog(
                ws.store.state_dir, lock_timeout=timeout, scrubber=ws.store.scrubber
            )
        return self._sessions

    def _session_id(self, session_id: str | None, project: str) -> str | None:
        """Return the session id given, else the open session of ``project`` (or None)."""
        if session_id is not None and str(session_id).strip():
            return _check_session_id(str(session_id))
        current = self.sessions.open_session(project)
        return str(current["id"]) if current else None

    def _project_name(self, project: str | None) -> str:
        # Scrubbed before lower-casing: a key in a project name must not slip past the rules.
        name = self.project_ws.store.scrubber.text(str(project or ""))[0]
        return normalize_project(name) or self.project

    def session_start(
        self,
        session_id: str | None = None,
        *,
        directory: str = "",
        project: str | None = None,
    ) -> dict[str, Any]:
        """Start (or reopen) a session; without an id a new one is made. Returns the session."""
        sid = _check_session_id(session_id) if session_id else new_id()
        return self.sessions.start(
            sid, project=self._project_name(project), directory=str(directory or ""), stamp=now()
        )

    def session_end(
        self,
        session_id: str | None = None,
        *,
        summary: str = "",
        project: str | None = None,
    ) -> dict[str, Any]:
        """End a session (default: the open one), saving ``summary`` as its summary if given."""
        name = self._project_name(project)
        sid = self._session_id(session_id, name)
        if sid is None:
            raise InvalidInput(
                "no session to end: none is open in this project",
                hint="pass the session id that session_start returned",
            )
        entry = self.sessions.end(sid, stamp=now())
        if str(summary or "").strip():
            saved = self.session_summary(summary, session_id=sid, project=project)
            entry["summary_id"] = saved.record["id"]
            entry["summary"] = saved.to_dict()
        return entry

    def session_summary(
        self,
        content: str = "",
        *,
        session_id: str | None = None,
        project: str | None = None,
        **sections: str | None,
    ) -> SaveResult:
        """Save a session summary (a ``session`` memory, one per session: a later one revises it).

        ``content`` is markdown with any of the sections Goal, Instructions, Discoveries,
        Accomplished, Next steps, Relevant files; ``sections`` (goal=…, next_steps=…) replace
        the section of that name. Relevant files become the memory's ``files``.
        """
        from engram.session import FIELD_NAMES, parse_summary

        unknown = sorted(set(sections) - set(FIELD_NAMES))
        if unknown:
            raise InvalidInput(
                f"unknown summary section {', '.join(unknown)}; use: {', '.join(FIELD_NAMES)}"
            )
        # Scrubbed before the title is cut from it: a clipped key would slip past the rules.
        content, found = self._prescrub(str(content or ""))
        for key, value in list(sections.items()):
            if value is not None:
                sections[key], hits = self._prescrub(str(value))
                found += hits
        summary = parse_summary(content, sections)
        if not summary.sections and not summary.preamble:
            raise InvalidInput(
                "a session summary needs some text",
                hint="give content, or sections such as goal and accomplished",
            )
        name = self._project_name(project)
        sid = self._session_id(session_id, name) or new_id()
        logged = self.sessions.get(sid) or {}
        extra = {
            key: logged[key]
            for key in ("started_at", "ended_at", "directory")
            if isinstance(logged.get(key), str) and logged[key]
        }
        result = self.remember(
            summary.title,
            summary.markdown(),
            kind="session",
            files=summary.files,
            topic_key=f"session/{sid}",
            source="session",
            session_id=sid,
            project=name,
            extra={"session": extra} if extra else None,
        )
        if logged:
            self.sessions.note_summary(sid, result.record["id"])
        result.redactions += found
        return result

    def save_prompt(
        self, content: str, *, session_id: str | None = None, project: str | None = None
    ) -> SaveResult:
        """Save a user's prompt (kind ``prompt``; redacted like every memory)."""
        from engram.session import TITLE_CHARS, _clip

        text, found = self._prescrub(str(content or ""))  # before its title is clipped
        text = text.strip()
        if not text:
            raise InvalidInput("a prompt needs some text")
        name = self._project_name(project)
        first = next(line for line in text.splitlines() if line.strip())
        result = self.remember(
            _clip(first, TITLE_CHARS),
            text,
            kind="prompt",
            source="prompt",
            session_id=self._session_id(session_id, name),
            project=name,
        )
        result.redactions += found
        return result

    def capture(
        self,
        text: str,
        *,
        session_id: str | None = None,
        project: str | None = None,
        source: str = "capture",
    ) -> dict[str, Any]:
        """Save the learnings of an agent's output (its last "Key Learnings" section).

        Each item becomes a ``discovery`` memory unless one with the same title or the same
        text already exists (in any kind). Returns what was extracted, saved and skipped.
        """
        from engram.capture import extract_learnings

        name = self._project_name(project)
        sid = self._session_id(session_id, name)
        learnings = extract_learnings(self.scrub_text(str(text or "")))  # titles are cut from it
        saved: list[dict[str, Any]] = []
        duplicates: list[dict[str, Any]] = []
        for item in learnings:
            existing = self._same_learning(item.title, item.content)
            if existing is not None:
                duplicates.append({"id": existing["id"], "title": existing.get("title", "")})
                continue
            result = self.remember(
                item.title,
                item.content,
                kind="discovery",
                tags=["capture"],
                source=str(source or "capture"),
                session_id=sid,
                project=name,
            )
            target = duplicates if result.action == "duplicate" else saved
            target.append({"id": result.record["id"], "title": result.record.get("title", "")})
        return {
            "extracted": len(learnings),
            "saved": saved,
            "duplicates": duplicates,
            "session_id": sid,
        }

    def _same_learning(self, title: str, content: str) -> Record | None:
        """Return a live memory with this title or this text (normalised), if one exists."""
        from engram.model import normalize_content

        want = {normalize_content(title), normalize_content(content)}
        for hit in self.recall(title, limit=5):
            record = hit.record
            have = {
                normalize_content(str(record.get("title", ""))),
                normalize_content(str(record.get("content", ""))),
            }
            if want & have:
                return record
        return None

    def timeline(self, ref: str, *, before: int = 5, after: int = 5) -> dict[str, Any]:
        """Return what happened before and after a memory, oldest first.

        Within its session when it has a ``session_id``, else among its project's memories by
        creation time. ``before`` and ``after`` count memories on each side.
        """
        if before < 0 or after < 0:
            raise InvalidInput("before and after must not be negative")
        ws, record = self._locate(ref)
        sid = record.get("session_id")
        if isinstance(sid, str) and sid:
            around = ws.index.session_records(sid)
            scope = "session"
        else:
            count = max(before, after)
            around = ws.index.neighbours_in_time(
                str(record.get("created_at", "")), str(record.get("project", "")), count
            )
            scope = "project"
        ids = [str(r["id"]) for r in around]
        at = ids.index(record["id"]) if record["id"] in ids else len(ids)
        if at == len(ids):
            around.append(record)
        start = max(0, at - before)
        out: dict[str, Any] = {
            "memory": _entry(record),
            "scope": scope,
            "session_id": sid if scope == "session" else None,
            "before": [_entry(r) for r in around[start:at]],
            "after": [_entry(r) for r in around[at + 1 : at + 1 + after]],
            "earlier": start,
            "later": max(0, len(around) - (at + 1 + after)),
        }
        if scope == "session":
            logged = self.sessions.get(str(sid))
            if logged:
                out["session"] = logged
        return out

    # -- export / import ---------------------------------------------------------------------

    def export(self, *, scope: str = "project") -> dict[str, Any]:
        """Return every memory and tombstone of a store as engram's export document."""
        ws = self._workspace(scope) if scope == "personal" else self.project_ws
        return transfer.export(ws)

    def import_(self, document: Any, *, progress: Progress | None = None) -> ImportResult:
        """Merge an export document into the store through the one merge function."""
        return transfer.import_document(self.project_ws, document, progress=progress)

    # -- hygiene: judge, consolidate, insights ----------------------------------------------

    def judge(
        self,
        ref: str,
        *,
        score: float | None = None,
        verdict: str | None = None,
        reason: str = "",
        query: str = "",
        author: str | None = None,
    ) -> Record:
        """Record a judgement of a memory (who, when, why); it moves the memory's ranking.

        ``verdict``: useful, outdated or wrong. Without ``score``, the verdict's score is used;
        without either, a heuristic: how much of ``query`` (what surfaced the memory) it covers,
        and how fresh it is. Returns the memory, rev+1, with the judgement appended (the last
        ``JUDGEMENTS_KEPT`` are kept).
        """
        from engram.index.backend import tokenize_query
        from engram.index.ranking import VERDICT_SCORES, freshness
        from engram.index.ranking import epoch as epoch_of

        if verdict is not None:
            verdict = str(verdict).strip().lower()
            if verdict not in VERDICT_SCORES:
                raise InvalidInput(
                    f"unknown verdict {verdict!r}; use one of: {', '.join(VERDICT_SCORES)}"
                )
        if score is not None:
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise InvalidInput(f"score must be a number from 0 to 1, got {score!r}")
            if not 0.0 <= float(score) <= 1.0 or math.isnan(float(score)):
                raise InvalidInput(f"score must be from 0 to 1, got {score}")
        ws, current = self._locate(ref, changing="judge")
        if score is None and verdict is not None:
            score = VERDICT_SCORES[verdict]
        heuristic = score is None
        if score is None:
            words = set(tokenize_query(query))
            text = " ".join(
                [str(current.get("title", "")), str(current.get("content", ""))]
                + [str(t) for t in current.get("tags", []) or []]
            )
            have = set(tokenize_query(text))
            overlap = len(words & have) / len(words) if words else 0.5
            weights = ws.index.weights
            fresh = freshness(
                epoch_of(current.get("updated_at")), datetime.now(UTC).timestamp(), weights
            )
            recency = (fresh - (1 - weights.freshness_max_loss)) / max(
                weights.freshness_max_loss, 1e-9
            )
            score = round(0.6 * overlap + 0.4 * recency, 3)
        entry: dict[str, Any] = {
            "score": float(score),
            "by": author if author is not None else config_mod.git_user_name(self.root),
            "at": now(),
        }
        if verdict:
            entry["verdict"] = verdict
        if reason.strip():
            entry["reason"] = reason.strip()
        if query.strip():
            entry["query"] = query.strip()
        if heuristic:
            entry["heuristic"] = True
        fields = {"reason": entry.get("reason", "")}
        self._scrub(ws, fields)
        if fields["reason"]:
            entry["reason"] = fields["reason"]
        with ws.store.lock():
            latest = ws.index.get(current["id"]) or current
            judgements = list(latest.get("judgements") or [])
            judgements.append(entry)
            record = {
                **latest,
                "judgements": judgements[-JUDGEMENTS_KEPT:],
                "rev": int(latest.get("rev", 1) or 1) + 1,
                "updated_at": change_time(latest.get("updated_at"), stamp=entry["at"]),
            }
            self._write(ws, [record])
        return record

    def consolidate_preview(self) -> list[dict[str, Any]]:
        """Return the candidate groups for consolidation, each with a reason and an action."""
        return [group.to_dict() for group in self._consolidation_groups()]

    def _consolidation_groups(self) -> list[Any]:
        from engram.consolidate import find_groups

        ws = self.project_ws
        records = ws.index.all_records(include_deleted=True)
        root = self.root.resolve()

        def exists(path: str) -> bool:
            target = (root / path).resolve()
            return target.is_relative_to(root) and target.exists()

        stale = self.stale_many(records)
        return find_groups(
            records,
            exists=exists,
            stale=lambda record: stale.get(str(record.get("id", "")), []),
            near_threshold=float(ws.config.number("consolidate.near_threshold")),
        )

    def consolidate(
        self,
        *,
        groups: Sequence[Mapping[str, Any]] | None = None,
        llm: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Return a consolidation plan: a recommendation (merge, archive, delete, keep) per group.

        ``llm`` decides each group when given (the MCP client's sampling, say); else the
        user's ``consolidate.llm_command`` (ENGRAM_HOME or the environment: never a committed
        config, whose command is ignored and named under ``warnings``); else the heuristics.
        """
        from engram.consolidate import Group, llm_command, make_plan, recommend

        ws = self.project_ws
        found = (
            [Group.from_dict(g) for g in groups]
            if groups is not None
            else (self._consolidation_groups())
        )
        if llm is None:
            command = str(ws.config.get("consolidate.llm_command") or "").strip()
            if command:
                timeout = float(ws.config.number("consolidate.llm_timeout_seconds"))
                llm = llm_command(command, timeout=timeout)
        records = ws.index.get_many(sorted({rid for g in found for rid in g.ids}))
        plan = make_plan(recommend(found, records, llm=llm), created_at=now())
        warnings = ws.config.warnings("consolidate.")
        if warnings:
            plan["warnings"] = warnings
        return plan

    def consolidate_apply(
        self, plan: Mapping[str, Any] | None = None, *, dry_run: bool = False
    ) -> dict[str, Any]:
        """Apply a consolidation plan (default: a fresh one); nothing is lost, twice is a no-op.

        A merge writes one memory that supersedes the group (their text kept, status
        superseded); archive is a status; delete is a tombstone. ``dry_run`` returns the exact
        changes without writing them.
        """
        from engram.consolidate import plan_changes, read_plan

        ws = self.project_ws
        fresh = self.consolidate() if plan is None else None
        chosen = read_plan(plan if plan is not None else fresh)
        author = config_mod.git_user_name(self.root)
        with ws.store.lock():
            # The whole store, tombstones included: dangling links are told apart from live
            # ones, and a merged memory an earlier run wrote is recognised.
            records = {str(r["id"]): r for r in ws.index.all_records(include_deleted=True)}
            changes = plan_changes(chosen, records, stamp=now(), author=author)
            if changes and not dry_run:
                self._write(ws, changes)
        result: dict[str, Any] = {
            "dry_run": dry_run,
            "recommendations": len(chosen),
            "changes": changes,
            "changed": len(changes),
        }
        if fresh is not None and fresh.get("warnings"):
            result["warnings"] = fresh["warnings"]
        return result

    def train(
        self,
        *,
        timeout: float | None = None,
        on_event: Callable[[Any], None] | None = None,
        command: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Run the trainer; store its insights as ``insight`` memories derived from their sources.

        A trainer that crashes, hangs or prints garbage changes nothing: its problems come back.
        Recommendations are returned for consolidation, not applied.
        """
        from engram.trainer.protocol import default_command, run_trainer

        ws = self.project_ws
        if timeout is None:
            timeout = float(ws.config.number("trainer.timeout_seconds"))
        argv = list(command) if command is not None else default_command(ws.store.dir)
        outcome = run_trainer(argv, timeout=timeout, on_event=on_event)
        report: dict[str, Any] = {
            "ok": outcome.ok,
            "problems": outcome.problems,
            "metrics": outcome.metrics,
            "recommendations": [asdict_(r) for r in outcome.recommendations],
            "insights": [],
        }
        if not outcome.ok:
            return report
        stamp = now()
        with ws.store.lock():
            known = ws.index.get_many([_insight_id(i.id) for i in outcome.insights])
            live = set(
                ws.index.get_many(sorted({s for i in outcome.insights for s in i.source_ids}))
            )
            writes: list[Record] = []
            for insight in outcome.insights:
                sources = [rid for rid in insight.source_ids if rid in live]
                if not sources:
                    continue
                rid = _insight_id(insight.id)
                fields = normalize_fields(
                    {
                        "kind": "insight",
                        "title": insight.action[:200] or insight.context[:200],
                        "content": "\n\n".join(
                            f"**{name}:** {text}"
                            for name, text in (
                                ("Context", insight.context),
                                ("Insight", insight.action),
                                ("Evidence", insight.result),
                            )
                            if text
                        ),
                        "tags": sorted({*insight.tags, insight.insight_type}),
                        "links": [{"rel": "derived_from", "to": src} for src in sources],
                        "source": "trainer",
                        "project": self.project,
                        "scope": "project",
                        "importance": 3,
                        "status": "active",
                        "insight_type": insight.insight_type,
                        "insight_id": insight.id,
                    },
                    max_content_bytes=int(ws.config.number("store.max_content_bytes")),
                )
                self._scrub(ws, fields)
                current = known.get(rid)
                if current is not None:
                    if is_tombstone(current):
                        continue  # deleted by a person: the trainer does not bring it back
                    revised = self._revise(ws, current, fields, stamp)
                    if revised is not current:
                        writes.append(revised)
                else:
                    writes.append(
                        {**fields, "id": rid, "created_at": stamp, "updated_at": stamp, "rev": 1}
                    )
                report["insights"].append(rid)
            if writes:
                self._write(ws, writes, journal=True)
        report["written"] = len(writes)
        return report

    def insights(self) -> list[Record]:
        """Return the live insight memories, newest first."""
        hits = self.recall("", kinds="insight", scopes="project", limit=10_000)
        records = [hit.record for hit in hits]
        records.sort(key=lambda r: (str(r.get("updated_at", "")), str(r["id"])), reverse=True)
        return records

    def delete_insight(self, ref: str) -> Record:
        """Forget an insight memory (a tombstone: a later training does not bring it back)."""
        record = self._locate(ref, changing="delete")[1]
        if record.get("kind") != "insight":
            raise InvalidInput(
                f"memory {record['id']} is a {record.get('kind')}, not an insight",
                hint="engram insights list shows the insights",
            )
        return self.forget(record["id"])

    # -- projects ----------------------------------------------------------------------------

    def _all_live(self) -> list[Record]:
        out: list[Record] = []
        for ws in self._workspaces():
            out += ws.index.all_records()
        return out

    def projects(self) -> list[dict[str, Any]]:
        """Return every project named in the project and personal stores, with its counts."""
        from engram.projects import summarize

        return [info.to_dict() for info in summarize(self._all_live())]

    def projects_merge(
        self, sources: Iterable[str], into: str, *, dry_run: bool = False
    ) -> dict[str, Any]:
        """Move the memories of ``sources`` to project ``into`` (rev+1 each), in both stores."""
        from engram.projects import rename_changes

        target = normalize_project(into)
        names = [normalize_project(name) for name in _list(sources)]
        names = [name for name in names if name and name != target]
        if not target or not names:
            raise InvalidInput(
                "give the projects to merge and a different project to merge them into"
            )
        moved: dict[str, int] = {}
        stamp = now()
        for ws in self._workspaces():
            with ws.store.lock():
                changes = rename_changes(ws.index.all_records(), names, target, stamp=stamp)
                if changes:
                    moved[ws.scope] = len(changes)
                if changes and not dry_run:
                    self._write(ws, changes)
        return {"from": names, "into": target, "dry_run": dry_run, "moved": moved}

    def projects_variants(self) -> list[dict[str, Any]]:
        """Return groups of project names that look like one project spelled differently."""
        from engram.projects import pick_target, variant_groups

        infos = self.projects()
        counts = {info["name"]: int(info["memories"]) for info in infos}
        return [
            {"names": group, "into": pick_target(group, counts)} for group in variant_groups(counts)
        ]

    def projects_prune(self, *, dry_run: bool = False) -> dict[str, Any]:
        """Forget projects that have no live memory left: their entries in the session log."""
        live = {info["name"] for info in self.projects()}
        logged = self.sessions.projects()
        gone = sorted(name for name in logged if name not in live and name != self.project)
        if gone and not dry_run:
            self.sessions.drop_projects(gone)
        return {"pruned": gone, "dry_run": dry_run}

    def obsidian_export(
        self,
        vault: Path,
        *,
        project: str | None = None,
        since: str | None = None,
        folder: str = "engram",
    ) -> dict[str, Any]:
        """Write the memories as notes in an Obsidian vault (incremental; the user's notes kept)."""
        from engram.obsidian import export_vault

        records = self._all_live()
        name = normalize_project(project) if project else None
        result = export_vault(records, Path(vault), folder=folder, project=name, since=since)
        return result.to_dict()

    # -- git integration ---------------------------------------------------------------------

    @staticmethod
    def merge_driver(base: Path, ours: Path, theirs: Path, pathname: str = "") -> int:
        """git's merge driver for .engram files: merge %O %A %B into %A; 0 when clean."""
        from engram.sync.gitmerge import merge_driver

        try:  # git runs the driver at the top of the work tree: its settings name extra patterns
            root = config_mod.find_root(Path.cwd())
            scrubber = _scrubber(config_mod.load(root, root / config_mod.ENGRAM_DIR))
        except EngramError:
            scrubber = None  # the built-in rules still apply
        return merge_driver(base, ours, theirs, pathname, scrubber=scrubber)

    def git_setup(self, *, install: bool = False, command: str | None = None) -> dict[str, Any]:
        """Report (and with ``install`` write) .gitattributes and the merge driver's config.

        The driver runs ``engram merge-driver``: the engram found on PATH now (quoted), else
        plain ``engram``. The repo's config is local to the clone, never committed.
        """
        from engram.sync.gitmerge import check_setup
        from engram.sync.gitmerge import install as install_driver

        if command is None:
            command = _driver_command()
        done = install_driver(self.root, command) if install else []
        setup = check_setup(self.root)
        return {
            "repo": setup.repo,
            "attributes": setup.attributes,
            "driver": setup.driver,
            "installed": done,
        }

    def resolve(self) -> list[dict[str, Any]]:
        """Rebuild conflicted .engram files from git's three stages (or their markers)."""
        from dataclasses import asdict

        from engram.sync.gitmerge import resolve

        # Writes memories.jsonl under the store's lock, scrubbed like every write.
        resolved = resolve(self.root, scrubber=self.project_ws.store.scrubber)
        return [asdict(item) for item in resolved]

    def log(self, ref: str, *, limit: int = 50) -> list[dict[str, Any]]:
        """Return the versions of one memory in the commits reachable from HEAD, newest first."""
        from dataclasses import asdict

        from engram.sync.gitmerge import memory_log

        try:
            rid = self._locate(ref, include_deleted=True)[1]["id"]
        except NotFound:
            rid = check_id(ref)  # gone from the file now: its full id still finds its past
        store = self.project_ws.store.path
        try:
            path = store.resolve().relative_to(self._work_tree()).as_posix()
        except ValueError:
            path = f"{config_mod.ENGRAM_DIR}/memories.jsonl"
        return [asdict(version) for version in memory_log(self.root, rid, limit=limit, path=path)]

    def _work_tree(self) -> Path:
        for folder in (self.root.resolve(), *self.root.resolve().parents):
            if (folder / ".git").exists():
                return folder
        return self.root.resolve()

    def import_path(self, path: Path, *, progress: Progress | None = None) -> ImportResult:
        """Import a file or folder of another memory tool (format detected) or of engram."""
        return transfer.import_path(self.project_ws, path, project=self.project, progress=progress)

    # -- sync --------------------------------------------------------------------------------

    def _sync_ws(self, scope: str) -> Workspace:
        if scope not in ("project", "personal"):
            raise InvalidInput(f"unknown scope {scope!r}; use project or personal")
        return self._workspace(scope) if scope == "personal" else self.project_ws

    def sync(
        self,
        *,
        scope: str = "project",
        remote: str | None = None,
        branch: str | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Import the sync chunks not applied here, export this clone's changes as a chunk.

        With ``remote``: also fetch, merge, commit and push the store's branch (never forced).
        """
        from engram.sync import exchange

        ws = self._sync_ws(scope)
        return exchange.sync(
            ws,
            root=self.root,
            project=self.project,
            remote=remote,
            branch=branch,
            progress=progress,
        )

    def sync_status(self, *, scope: str = "project") -> dict[str, Any]:
        """Return the chunks, their contributors and what is pending either way."""
        from engram.sync import exchange

        return exchange.sync_status(self._sync_ws(scope))

    # -- maintenance -------------------------------------------------------------------------

    def reindex(self, *, rebuild: bool = False, progress: Progress | None = None) -> dict[str, Any]:
        """Bring the index up to date (or rebuild it from scratch); return counts."""
        ws = self.project_ws
        if rebuild:
            total = ws.index.rebuild(progress)
            return {"rebuilt": True, "records": total, "changed": total}
        changed = ws.index.refresh(progress)
        flushed = ws.index.flush()
        return {"rebuilt": False, "changed": changed, "flushed": flushed}

    def index_project(
        self,
        *,
        adr: bool = True,
        git: bool = True,
        dry_run: bool = False,
        rebuild: bool = False,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Create and refresh memories from the project's ADRs and git history; summarise.

        Idempotent: ids are derived from ADR paths and commit shas, unchanged input writes
        nothing, an edited ADR revises its memory (rev+1) and a deleted one is archived.
        ``dry_run`` plans without writing (not even the history cache); ``rebuild`` forgets the
        history cache and walks the whole window again.
        """
        from engram.indexer import plan as planner

        ws = self.project_ws
        cfg = ws.config
        stamp = now()
        summary: dict[str, Any] = {"dry_run": dry_run}
        writes: list[Record] = []

        def revise(current: Record, changes: Mapping[str, Any]) -> Record:
            return self._revise(ws, current, changes, stamp)

        with ws.store.lock():
            if adr:
                from engram.indexer.adr import scan_adrs

                dirs = cfg.get("indexer.adr_dirs")
                configured = [str(d) for d in dirs] if isinstance(dirs, list) else None
                scan = scan_adrs(self.root, configured)
                existing = ws.index.by_source_prefix("adr:")
                adr_plan = planner.plan_adrs(
                    scan.adrs, existing, project=cfg.project, stamp=stamp, revise=revise
                )
                writes += adr_plan.writes
                summary["adr"] = {
                    "dirs": scan.dirs,
                    "found": len(scan.adrs),
                    "created": len(adr_plan.created),
                    "updated": len(adr_plan.updated),
                    "archived": len(adr_plan.archived),
                    "unchanged": len(adr_plan.unchanged),
                    "skipped": [{"path": s.path, "reason": s.reason} for s in scan.skipped],
                }
            if git:
                from engram.indexer.git import CACHE_FILE, scan_history

                if rebuild and not dry_run:
                    (ws.store.state_dir / CACHE_FILE).unlink(missing_ok=True)
                depth = int(cfg.number("indexer.git_depth"))
                threshold = int(cfg.number("indexer.hotspot_threshold"))
                history = scan_history(
                    self.root,
                    depth=depth,
                    threshold=threshold,
                    state_dir=None if dry_run else ws.store.state_dir,  # a dry run writes nothing
                    progress=progress,
                )
                ids = [planner.hotspots_id(cfg.project)]
                ids += [planner.candidate_id(c.sha) for c in history.candidates]
                git_plan = planner.plan_git(
                    history,
                    ws.index.get_many(ids),
                    project=cfg.project,
                    depth=depth,
                    threshold=threshold,
                    stamp=stamp,
                    revise=revise,
                )
                writes += git_plan.writes
                summary["git"] = {
                    "head": history.head,
                    "commits": history.commits_walked,
                    "unchanged": history.unchanged,
                    "hotspots": [{"path": p, "changes": n} for p, n in history.hotspots],
                    "candidates_found": len(history.candidates),
                    "candidates_new": len([rid for rid in git_plan.created if rid != ids[0]]),
                    "problems": history.problems,
                }
            max_bytes = int(cfg.number("store.max_content_bytes"))
            cleaned: list[Record] = []
            for record in writes:
                fields = normalize_fields(record, max_content_bytes=max_bytes)
                self._scrub(ws, fields)
                cleaned.append(fields)
            summary["writes"] = len(cleaned)
            if cleaned and not dry_run:
                # Every clone derives these from the same files and history: not exported.
                self._write(ws, cleaned, journal=False)
        return summary

    def doctor(self, *, fix: bool = False) -> list[Finding]:
        """Check the store, its git hygiene, secrets and index drift; repair what is safe."""
        from engram.doctor import run_checks

        ws = self.project_ws
        return run_checks(ws.config, ws.store, ws.index, fix=fix, driver_command=_driver_command())


_CHECK_BATCH: Final = 48  # findings of a check prepared in one batch
_ID_IN_TEXT: Final = re.compile(r"\b[a-z2-7]{26}\b")


JUDGEMENTS_KEPT: Final = 50
NEAR_DUPLICATE_COSINE: Final = 0.92


def _insight_id(trainer_id: str) -> str:
    """Return the memory id of a trainer insight (stable: re-training updates it)."""
    import base64
    import hashlib

    digest = hashlib.sha256(f"insight:{trainer_id}".encode()).digest()[:16]
    return base64.b32encode(digest).decode("ascii").rstrip("=").lower()


def asdict_(value: Any) -> dict[str, Any]:
    """Return a dataclass (or NamedTuple) as a plain dict."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return dict(value._asdict())


def _driver_command() -> str:
    """Return how git should run engram for the merge driver: the one on PATH, quoted."""
    import shlex
    import shutil

    found = shutil.which("engram")
    return shlex.quote(found) if found else "engram"


def _check_session_id(value: str) -> str:
    text = str(value).strip()
    if not text or len(text) > 200 or any(ord(ch) < 32 for ch in text):
        raise InvalidInput(
            f"invalid session id {value[:40]!r}: 1–200 printable characters",
            hint="use the id session_start returned",
        )
    return text


def _entry(record: Mapping[str, Any]) -> dict[str, Any]:
    """Return the compact timeline view of a memory."""
    return {
        "id": record["id"],
        "kind": record.get("kind", ""),
        "title": record.get("title", ""),
        "created_at": record.get("created_at", ""),
        "status": record.get("status", "active"),
    }


def _records(hits: Iterable[Hit]) -> list[Record]:
    return [hit.record for hit in hits]


def version_info() -> dict[str, str]:
    """Return the versions of engram, Python and the main dependencies."""
    out = {"engram": _version("engram-git"), "python": platform.python_version()}
    for name in ("tantivy", "mcp", "dulwich", "typer"):
        out[name] = _version(name)
    return out


def _version(name: str) -> str:
    from importlib import metadata  # slow to import: only `engram version` needs it

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


__all__ = [
    "CorruptStore",
    "Engram",
    "Hit",
    "ImportResult",
    "NotInitialized",
    "SaveResult",
    "Workspace",
    "version_info",
]
