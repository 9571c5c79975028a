"""The lookups over the records DB: by id and prefix, by file, tag, topic and time, and counts.

This module owns ``RecordQueries``, the read side of ``engram.index.records.Records``: ``get``,
``resolve`` (an id prefix), the file and tag filters, what check pages through, ``counts``, and
the columns ranking and the vectors read. It keeps the per-process caches ``Records`` declares
(valid until ``drop_caches``). It never writes a row, opens no connection of its own (``db`` is
``Records``'), and ranks nothing (``ranking.py`` does).
"""

from __future__ import annotations

import abc
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from engram.errors import AmbiguousId, NotFound
from engram.index.dbfile import chunks, marks
from engram.index.query import Query, file_matches
from engram.index.ranking import RankColumns
from engram.model import Record, check_id, loads

CACHE_LIMIT: Final = 200_000
RESOLVED_LIMIT: Final = 4096  # id prefixes whose answer resolve keeps
_RANK_COLUMNS: Final = "id, kind, status, importance, updated_epoch, judged"


class RecordQueries(abc.ABC):
    """The lookups over the records of one index; ``Records`` adds the connection and writes."""

    # The per-process caches of the rows, made and dropped by ``Records`` (see its __init__).
    _record_cache: dict[str, Record]
    _paths_cache: dict[str, list[str]] | None
    _resolved: dict[str, str | None]

    @property
    @abc.abstractmethod
    def db(self) -> sqlite3.Connection:
        """The connection to engram.db (``Records`` opens it)."""

    # -- lookups -----------------------------------------------------------------------------

    def count(self) -> int:
        """Return the number of rows, tombstones included."""
        return int(self.db.execute("SELECT count(*) FROM records").fetchone()[0])

    def resolve(self, prefix: str) -> str:
        """Return the one id starting with ``prefix`` (tombstones included)."""
        if prefix in self._resolved:
            known = self._resolved[prefix]
            if known is None:
                raise NotFound(f"no memory with id {prefix.strip()}")
            return known
        asked, prefix = prefix, check_id(prefix)
        try:
            found = self._resolve(prefix)
        except NotFound:
            self._keep_resolved(asked, None)
            raise
        self._keep_resolved(asked, found)
        return found

    def _keep_resolved(self, prefix: str, found: str | None) -> None:
        if len(self._resolved) >= RESOLVED_LIMIT:
            self._resolved.clear()
        self._resolved[prefix] = found

    def _resolve(self, prefix: str) -> str:
        rows = self.db.execute(
            "SELECT id, kind, coalesce(json_extract(json, '$.title'), ''),"
            " json_extract(json, '$.deleted_at') IS NOT NULL"
            " FROM records WHERE id >= ? AND id < ? ORDER BY id LIMIT 6",
            (prefix, prefix + "\U0010ffff"),
        ).fetchall()
        if not rows:
            raise NotFound(f"no memory with id {prefix}")
        exact = [row[0] for row in rows if row[0] == prefix]
        if exact:
            return str(exact[0])
        if len(rows) > 1:
            # Each candidate with its kind and title, so the caller can pick the one meant.
            shown = "; ".join(
                f"{rid} ({'forgotten ' if gone else ''}{kind}) {str(title)[:60]!r}"
                for rid, kind, title, gone in rows[:5]
            )
            more = ", and more" if len(rows) > 5 else ""
            raise AmbiguousId(f"id prefix {prefix!r} matches several memories: {shown}{more}")
        return str(rows[0][0])

    def get(self, rid: str) -> Record | None:
        """Return the record with exactly this id, or None."""
        row = self.db.execute("SELECT json FROM records WHERE id=?", (rid,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def get_many(self, ids: Iterable[str], *, cache: bool = True) -> dict[str, Record]:
        """Return the records with these ids (missing ones left out); ``cache``: keep them."""
        out: dict[str, Record] = {}
        missing = []
        for rid in ids:
            cached = self._record_cache.get(rid)
            if cached is None:
                missing.append(rid)
            else:
                out[rid] = dict(cached)
        for chunk in chunks(missing):
            for rid, text in self.db.execute(
                f"SELECT id, json FROM records WHERE id IN ({marks(len(chunk))})", chunk
            ):
                record = _loads(text)
                if cache and len(self._record_cache) < CACHE_LIMIT:
                    self._record_cache[rid] = record
                out[rid] = dict(record)
        return out

    def by_source_prefix(self, prefix: str) -> dict[str, Record]:
        """Return every record (tombstones included) whose ``source`` starts with ``prefix``."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return {
            str(rid): _loads(text)
            for rid, text in self.db.execute(
                "SELECT id, json FROM records WHERE json_extract(json, '$.source') LIKE ? "
                "ESCAPE '\\'",
                (escaped + "%",),
            )
        }

    def find_duplicate(self, key: str, since: str) -> Record | None:
        """Return a live record with this dedupe key updated at or after ``since``."""
        row = self.db.execute(
            "SELECT json FROM records WHERE dedupe_key=? AND deleted=0 AND updated_at>=? "
            "ORDER BY updated_at DESC LIMIT 1",
            (key, since),
        ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def find_topic(self, topic_key: str, project: str, scope: str) -> Record | None:
        """Return the live record holding this topic key in this project and scope."""
        row = self.db.execute(
            "SELECT json FROM records WHERE topic_key=? AND project=? AND scope=? AND deleted=0 "
            "ORDER BY updated_at DESC LIMIT 1",
            (topic_key, project, scope),
        ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def session_records(self, session_id: str) -> list[Record]:
        """Return the live memories written in a session, oldest first (then by id)."""
        rows = self.db.execute(
            "SELECT json FROM records WHERE session_id=? AND deleted=0 ORDER BY created_at, id",
            (session_id,),
        ).fetchall()
        return [_loads(row[0]) for row in rows]

    def neighbours_in_time(self, created_at: str, project: str, count: int) -> list[Record]:
        """Return up to ``count`` live memories of ``project`` on each side of ``created_at``."""
        before = self.db.execute(
            "SELECT json FROM records WHERE deleted=0 AND project=? AND created_at<=? "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (project, created_at, count + 1),
        ).fetchall()
        after = self.db.execute(
            "SELECT json FROM records WHERE deleted=0 AND project=? AND created_at>? "
            "ORDER BY created_at, id LIMIT ?",
            (project, created_at, count),
        ).fetchall()
        return [_loads(row[0]) for row in reversed(before)] + [_loads(row[0]) for row in after]

    def linked_to(self, rid: str) -> list[tuple[str, str]]:
        """Return (source id, relation) of live records that link to ``rid``."""
        return [
            (str(src), str(rel))
            for src, rel in self.db.execute(
                "SELECT links.src, links.rel FROM links JOIN records ON records.id = links.src "
                "WHERE links.dst=? AND records.deleted=0 ORDER BY links.src",
                (rid,),
            )
        ]

    def matching_paths(self, wanted: Sequence[str]) -> list[str]:
        """Return the cited paths (as the files table holds them) bearing on any wanted path."""
        if not wanted:
            return []
        if self._paths_cache is None:
            rows = self.db.execute("SELECT DISTINCT path FROM files").fetchall()
            self._paths_cache = {"": [str(row[0]) for row in rows]}
        key = "\0".join(wanted)
        hits = self._paths_cache.get(key)
        if hits is None:
            if len(self._paths_cache) > 256:
                self._paths_cache = {"": self._paths_cache[""]}
            paths = self._paths_cache[""]
            hits = [p for p in paths if any(file_matches(p, w) for w in wanted)]
            self._paths_cache[key] = hits
        return hits

    def ids_for_files(self, wanted: Sequence[str]) -> frozenset[str]:
        """Return ids of live records whose files bear on any wanted path."""
        return self.citing_ids(self.matching_paths(wanted))

    def citing_ids(
        self,
        paths: Sequence[str],
        *,
        status: str | None = None,
        kind: str | None = None,
        among: Iterable[str] | None = None,
    ) -> frozenset[str]:
        """Return ids of live records citing one of ``paths`` (as ``matching_paths`` gives them).

        ``status`` and ``kind`` (as ``cite_columns`` reads them) narrow it; so does ``among``,
        a few ids to look for.
        """
        if not paths:
            return frozenset()
        sql = "SELECT DISTINCT id FROM files WHERE path IN (SELECT value FROM json_each(?))"
        params: list[Any] = [json.dumps(list(paths))]
        for column, value in (("status", status), ("kind", kind)):
            if value is not None:
                sql += f" AND {column}=?"
                params.append(value)
        if among is not None:
            wanted = sorted(set(among))
            if not wanted:
                return frozenset()
            sql += " AND id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(wanted))
        return frozenset(row[0] for row in self.db.execute(sql, params))

    def count_citing(
        self, paths: Sequence[str], statuses: Sequence[str], *, exclude: Iterable[str] = ()
    ) -> int:
        """Return how many live records with one of ``statuses`` cite one of ``paths``.

        Ids in ``exclude`` are not counted.
        """
        if not paths or not statuses:
            return 0
        sql = (
            "SELECT id FROM files WHERE path IN (SELECT value FROM json_each(?))"
            f" AND status IN ({marks(len(statuses))})"
        )
        # The ids are kept with the matching paths, until the rows change (a check before
        # each edit asks the same again; 8,000 citing rows took 8-12 ms at 100k memories).
        cache = self._paths_cache
        key = "\x01" + "\0".join(paths) + "\x02" + "\0".join(statuses)
        ids = None if cache is None else cache.get(key)
        if ids is None:
            # A set of the ids beats SQLite's count(DISTINCT id) (about 2.5 ms against 4 for
            # 8,000 rows): a record citing several of the paths has a row for each.
            found = {row[0] for row in self.db.execute(sql, [json.dumps(list(paths)), *statuses])}
            ids = list(found)
            if cache is not None and len(cache) <= 256:
                cache[key] = ids
        return len(ids) - len(set(exclude).intersection(ids))

    def supersedes_citing(self, paths: Sequence[str], rid: str) -> bool:
        """Tell whether live record ``rid`` supersedes a superseded record citing ``paths``."""
        if not paths:
            return False
        row = self.db.execute(
            "SELECT 1 FROM links JOIN records ON records.id = links.src AND records.deleted=0"
            " WHERE links.src=? AND links.rel='supersedes' AND links.dst IN (SELECT id FROM files"
            " WHERE path IN (SELECT value FROM json_each(?)) AND status='superseded') LIMIT 1",
            (rid, json.dumps(list(paths))),
        ).fetchone()
        return row is not None

    def citing_page(
        self,
        paths: Sequence[str],
        status: str,
        *,
        kinds: Sequence[str] = (),
        other_kinds: Sequence[str] = (),
        after: tuple[float, str] | None = None,
        limit: int = 32,
    ) -> list[tuple[str, float]]:
        """Return up to ``limit`` (id, weight) of live records with ``status`` citing ``paths``.

        Heaviest first, then by id, each id once; ``kinds`` keeps only those kinds,
        ``other_kinds`` leaves those out, and ``after`` (a weight and id this returned last)
        starts after it. Fewer than ``limit`` means there are no more.
        """
        if not paths or limit <= 0:
            return []
        head = (
            "SELECT id, weight FROM files WHERE path IN (SELECT value FROM json_each(?))"
            " AND status=?"
        )
        params: list[Any] = [json.dumps(list(paths)), status]
        if kinds:
            head += f" AND kind IN ({marks(len(kinds))})"
            params.extend(kinds)
        if other_kinds:
            head += f" AND kind NOT IN ({marks(len(other_kinds))})"
            params.extend(other_kinds)
        out: list[tuple[str, float]] = []
        while len(out) < limit:
            want = limit - len(out)
            sql, page = head, list(params)
            if after is not None:
                sql += " AND (weight < ? OR (weight = ? AND id > ?))"
                page += [after[0], after[0], after[1]]
            rows = self.db.execute(f"{sql} ORDER BY weight DESC, id LIMIT ?", [*page, want])
            count = 0
            for rid, weight in rows:
                count += 1
                # A record citing several of the paths has a row for each: they sort together.
                if after is None or rid != after[1]:
                    out.append((str(rid), float(weight)))
                after = (float(weight), str(rid))
            if count < want:
                break
        return out

    def ids_changed(
        self, since: float | None, until: float | None, authors: frozenset[str]
    ) -> frozenset[str]:
        """Return ids of live records changed in [since, until] by one of ``authors``."""
        clauses, params = ["deleted=0"], list[Any]()
        if since is not None:
            clauses.append("updated_epoch >= ?")
            params.append(since)
        if until is not None:
            clauses.append("updated_epoch <= ?")
            params.append(until)
        if authors:
            clauses.append(f"author IN ({marks(len(authors))})")
            params.extend(sorted(authors))
        rows = self.db.execute(f"SELECT id FROM records WHERE {' AND '.join(clauses)}", params)
        return frozenset(row[0] for row in rows)

    def ids_for_tags(self, wanted: Sequence[str]) -> frozenset[str]:
        """Return ids of records carrying any of these tags."""
        out: set[str] = set()
        for chunk in chunks(list(wanted)):
            out.update(
                row[0]
                for row in self.db.execute(
                    f"SELECT id FROM tags WHERE tag IN ({marks(len(chunk))})", chunk
                )
            )
        return frozenset(out)

    def all_records(self, *, include_deleted: bool = False) -> list[Record]:
        """Return every record in id order."""
        where = "" if include_deleted else " WHERE deleted=0"
        return [
            dict(json.loads(row[0]))
            for row in self.db.execute(f"SELECT json FROM records{where} ORDER BY id")
        ]

    def stored_problems(self) -> list[tuple[int, str]]:
        """Return the unreadable lines noted by the last refresh."""
        return [(int(a), str(b)) for a, b in self.db.execute("SELECT line, message FROM problems")]

    def counts(self) -> dict[str, Any]:
        """Return counts by kind, status, scope and project, plus totals and the top tags."""
        db = self.db
        out: dict[str, Any] = {
            "memories": db.execute("SELECT count(*) FROM records WHERE deleted=0").fetchone()[0],
            "tombstones": db.execute("SELECT count(*) FROM records WHERE deleted=1").fetchone()[0],
            "links": db.execute("SELECT count(*) FROM links").fetchone()[0],
        }
        for column in ("kind", "status", "scope", "project"):
            out[f"by_{column}"] = {
                str(key): int(n)
                for key, n in db.execute(
                    f"SELECT {column}, count(*) FROM records WHERE deleted=0 "
                    f"GROUP BY {column} ORDER BY count(*) DESC, {column}"
                )
            }
        out["top_tags"] = {
            str(tag): int(n)
            for tag, n in db.execute(
                "SELECT tag, count(*) FROM tags GROUP BY tag ORDER BY count(*) DESC, tag LIMIT 10"
            )
        }
        return out

    # -- what ranking and the vectors read ---------------------------------------------------

    def rank_columns(self, ids: Sequence[str]) -> Iterator[RankColumns]:
        """Yield the ranking columns of the live records among ``ids``."""
        for chunk in chunks(ids):
            yield from self.db.execute(
                f"SELECT {_RANK_COLUMNS} FROM records WHERE deleted=0 "
                f"AND id IN ({marks(len(chunk))})",
                chunk,
            )

    def browse_columns(self, query: Query) -> list[RankColumns]:
        """Return the ranking columns of every live record passing the query's filters."""
        clauses = ["deleted=0"]
        params: list[Any] = []
        for column, values in (
            ("kind", query.kinds),
            ("status", query.statuses),
            ("scope", query.scopes),
            ("project", query.projects),
        ):
            if values:
                clauses.append(f"{column} IN ({marks(len(values))})")
                params.extend(sorted(values))
        if query.tags:
            clauses.append(f"id IN (SELECT id FROM tags WHERE tag IN ({marks(len(query.tags))}))")
            params.extend(sorted(tag.lower() for tag in query.tags))
        return self.db.execute(
            f"SELECT {_RANK_COLUMNS} FROM records WHERE {' AND '.join(clauses)}", params
        ).fetchall()

    def live_hashes(self) -> dict[str, str]:
        """Return id -> line hash of every live record."""
        return dict(self.db.execute("SELECT id, line_hash FROM records WHERE deleted=0"))

    def column(self, name: str) -> dict[str, str]:
        """Return id -> value of one filter column (kind, status, scope, project), live only."""
        if name not in ("kind", "status", "scope", "project"):
            raise ValueError(f"not a filter column: {name}")
        return dict(self.db.execute(f"SELECT id, {name} FROM records WHERE deleted=0"))


def _loads(text: str) -> Record:
    """Parse a stored record (canonical JSON written by engram itself)."""
    return dict(loads(text))
