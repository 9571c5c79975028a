"""The one merge function: reconcile versions of memories, keyed by id (README, sync).

Every place that reconciles two views of the memories calls this module: the git merge driver
(three-way, with git's common ancestor), the import of sync chunks and ``engram import``
(two-way), ``doctor --fix`` (duplicate ids) and ``engram resolve``. It is pure and
deterministic: no I/O, no clock, no randomness. It must not decide by ``rev``: merges add to it.

Time, not merge count. Every change engram makes stamps ``updated_at`` with a per-record hybrid
logical clock (``engram.model.change_time``: now, or 1 ms after the version it changed when this
machine's clock is behind), so a change made after seeing another is always the later one. A
merge result keeps the time of the change it kept (the later side's), never the time of the
merge, so merging any number of times orders nothing differently.

Two-way (``merge_record``, ``merge_sets``) — commutative, associative, idempotent:

- The *winner* among versions of one id is the one changed last: the later ``updated_at``
  (compared as times, not strings), then a tombstone over a live version, then the higher
  ``rev`` (a three-way merge's result over the sides it merged, which share its time), between
  two tombstones the larger forget note (``{rev, updated_at, author, deleted_at}``: two forgets
  stamped 1 ms after the same version tie until here, and the winner's forget must be the
  latest note, or the tombstone would note the other forget), then the larger hash of its
  fields (``history`` and ``conflicts`` left out). Its fields are the merged record's fields,
  unknown ones included.
- Nothing is lost: ``history`` (earlier versions) is the union of both sides'. A version whose
  title or content differs from the winner's, and is not an earlier version of it (its text is
  not in the merged ``history``), was edited concurrently: its text is kept in ``conflicts``
  (``[{rev, updated_at, author, title, content}]``, sorted by time), where ``engram get``
  shows it, ``doctor`` lists it and a user can restore it. A soft-deleted tombstone's text counts
  too. ``conflicts`` is a union too, one entry per text (the latest version holding it, so every
  grouping of merges gives the same entry), minus the winner's own text (when the winner is its
  latest version) and earlier versions.
- Forget versus edit, by time. A forget made after the last edit (by its clock) wins on every
  replica: the memory stays forgotten, and an edit it had not seen keeps its text in the
  tombstone's ``conflicts``. An edit made after the forget (by its clock; a clone that saw the
  forget cannot edit the memory) wins: the memory is live again with the edit's text, and the
  forget it overrode is noted in its ``conflicts`` as ``{rev, updated_at, author, deleted_at}``
  (the latest such forget only), so ``doctor`` lists it and ``engram forget`` (stamped later
  still) deletes it again everywhere. A tombstone never carries a note of its own forget.
  A delete is never resurrected by an older copy: only by a change stamped after it.
  A hard tombstone (no text, no history) cannot tell an older copy it deleted from an edit made
  concurrently: a live copy merged into it later leaves its text in the tombstone's
  ``conflicts``.
- Settling (``settle``, on a user's ``update``): ``conflicts`` move into ``history``, where a
  text is an earlier version and a forget note is settled; neither comes back from older copies.

Three-way (``merge3_record``, ``merge3``) — what the merge driver does with git's base version:

- An id on one side only, or changed on one side only, takes that side. Removed from the file on
  one side (not tombstoned) and unchanged on the other: removed. Both sides equal: that.
  A side is taken as the two-way merge leaves it (``taken``): a write can carry ``conflicts``
  no merge keeps (a text it took back without settling, such as a topic-key save or an indexer
  revision; an earlier forget's note on a forget's tombstone), and those go, so that merging
  the result with either side changes nothing.
- Changed on both sides, both live: field by field. A field changed on one side only takes that
  side; ``tags``, ``files`` and ``links`` merge as sets with removals honoured
  (``base∩ours∩theirs ∪ ours−base ∪ theirs−base``); a field both sides changed differently takes
  the winner's value (the two-way rule), and a losing title or content goes to ``conflicts``.
  The result is a new version: ``updated_at`` the later side's, ``rev`` one more than the
  higher side's (a count of changes, which breaks the tie with the sides it merged), and both
  sides are earlier versions of it (their texts join ``history``, except a losing one, which is
  in ``conflicts``), so that a sync bringing a side back changes nothing. Symmetric in ours and
  theirs.
- A tombstone on either side: the two-way rule between the sides (forget versus edit by time).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Final

from engram.errors import InvalidInput
from engram.model import Record, dumps, is_tombstone, parse_time

SET_FIELDS: Final = ("tags", "files", "links")
KEPT: Final = ("history", "conflicts")  # unions, never decided by a winner
_ENTRY_KEYS: Final = ("rev", "updated_at", "author", "title", "content")
_HISTORY_KEYS: Final = ("rev", "title", "content", "updated_at")  # as engram.service writes
_FORGET_KEYS: Final = ("rev", "updated_at", "author", "deleted_at")  # a forget that lost
_NEW_VERSION: Final = ("id", "rev", "updated_at", *KEPT)
_MISSING: Final = object()
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _fields_hash(record: Mapping[str, Any]) -> str:
    body = {key: value for key, value in record.items() if key not in KEPT}
    return hashlib.sha256(dumps(body).encode("utf-8")).hexdigest()


@lru_cache(maxsize=1 << 16)
def _moment(value: str) -> int:
    """Microseconds since 1970 of an RFC 3339 time; -1 (before any) for one that does not parse."""
    try:
        return (parse_time(value) - _EPOCH) // timedelta(microseconds=1)
    except (InvalidInput, OverflowError, ValueError):
        return -1


def change_time(record: Mapping[str, Any]) -> tuple[int, str]:
    """Return the sort key of when a version (or a history or conflicts entry) was made."""
    value = record.get("updated_at", "")
    text = value if isinstance(value, str) else str(value)
    return (_moment(text), text)


def rank(record: Mapping[str, Any]) -> tuple[int, int, int, str, str]:
    """Return the sort key that picks the winner among versions of one memory (time first)."""
    gone = is_tombstone(record)
    return (
        change_time(record)[0],
        1 if gone else 0,
        _int(record.get("rev")),
        dumps(_forget(record)) if gone else "",  # the order of forget notes (``_entry_key``)
        _fields_hash(record),
    )


def _text(record: Mapping[str, Any]) -> tuple[str, str]:
    return (str(record.get("title", "") or ""), str(record.get("content", "") or ""))


def _entry(record: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: record.get(key) for key in _ENTRY_KEYS if record.get(key) not in (None, "")}
    out.setdefault("rev", 0)
    return out


def _items(value: Any) -> list[dict[str, Any]]:
    return [dict(item) for item in value or [] if isinstance(item, Mapping)]


def _forget(record: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: record.get(key) for key in _FORGET_KEYS if record.get(key) not in (None, "")}
    out.setdefault("rev", 0)
    return out


def _entry_key(item: Mapping[str, Any]) -> tuple[int, int, str]:
    return (change_time(item)[0], _int(item.get("rev")), dumps(item))


def _sorted_unique(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    unique = {dumps(item): dict(item) for item in items}
    return sorted(unique.values(), key=_entry_key)


def _finish(
    merged: Record,
    versions: Iterable[Mapping[str, Any]],
    texts: Iterable[Mapping[str, Any]],
    *,
    own: Mapping[str, Any] | None,
    earlier: Iterable[Mapping[str, Any]] = (),
    forgets: Iterable[Mapping[str, Any]] = (),
) -> Record:
    """Set ``history`` and ``conflicts`` of ``merged`` from every version that took part.

    ``texts`` are the versions whose text may become a conflict. ``conflicts`` holds one entry
    per text, the latest (``_entry_key``), so that the versions of one text seen in any grouping
    give the same entry. The merged record's own text is left out when its latest entry is
    ``own`` (the winner's entry, which a later merge adds back as a candidate: nothing is lost
    that a later grouping could need); ``own`` None drops it unconditionally (a new version).
    ``earlier`` are versions that become history entries of ``merged``. ``forgets`` are
    tombstones that took part. The latest forget of all (theirs, the notes in every version's
    ``conflicts`` and the settled ones in ``history``) is noted in ``conflicts`` unless it is
    settled (in ``history``) or ``merged``'s own: each grouping of merges keeps it somewhere
    (fields, ``conflicts`` or ``history``), so every grouping finds the same latest one.
    """
    versions = list(versions)
    history = _sorted_unique(
        [item for v in versions for item in _items(v.get("history"))]
        + [{key: v.get(key, "") for key in _HISTORY_KEYS} for v in earlier]
    )
    old_texts = {_text(item) for item in history}
    candidates = [item for v in versions for item in _items(v.get("conflicts"))]
    notes = [item for item in candidates + history if "deleted_at" in item]
    notes += [_forget(version) for version in forgets]
    candidates = [item for item in candidates if "deleted_at" not in item]
    candidates += [_entry(version) for version in texts]
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for item in candidates:
        text = _text(item)
        if text == ("", "") or text in old_texts:
            continue
        if text not in latest or _entry_key(item) > _entry_key(latest[text]):
            latest[text] = item
    mine = _text(merged)
    if mine in latest and (own is None or dumps(latest[mine]) == dumps(own)):
        del latest[mine]
    kept = list(latest.values())
    if notes:
        note = max(notes, key=_entry_key)
        settled = any(dumps(note) == dumps(item) for item in history)
        if not settled and not (is_tombstone(merged) and dumps(note) == dumps(_forget(merged))):
            kept.append(note)
    conflicts = sorted(kept, key=_entry_key)
    for name, value in (("history", history), ("conflicts", conflicts)):
        if value:
            merged[name] = value
        else:
            merged.pop(name, None)
    return merged


def merge_record(a: Mapping[str, Any], b: Mapping[str, Any]) -> Record:
    """Return the merge of two versions of the same memory (two-way; see the module doc)."""
    if a.get("id") != b.get("id"):
        raise ValueError("merge_record needs two versions of the same id")
    winner = a if rank(a) >= rank(b) else b
    merged: Record = {key: value for key, value in winner.items() if key not in KEPT}
    forgets = [side for side in (a, b) if is_tombstone(side)]
    return _finish(merged, (a, b), (a, b), own=_entry(winner), forgets=forgets)


def taken(record: Mapping[str, Any]) -> Record:
    """Return a version as a merge that takes it whole leaves it: merged with itself.

    Of a version engram wrote only ``conflicts`` can differ: those a merge would not keep go
    (a text the memory holds again, as its own or an earlier version's; a forget note older
    than the latest, or the tombstone's own). A version without ``conflicts`` is taken as it is.
    """
    return merge_record(record, record) if record.get("conflicts") else dict(record)


def settle(record: Mapping[str, Any]) -> Record:
    """Return ``record`` with its ``conflicts`` settled: moved into ``history``.

    For a user's update of a conflicted memory (they have seen what the merge kept): merges
    treat a text in ``history`` as an earlier version and a forget note there as settled, so
    neither comes back as a conflict from copies made before the update.
    """
    out = dict(record)
    lost = _items(out.pop("conflicts", None))
    if lost:
        out["history"] = _sorted_unique([*_items(record.get("history")), *lost])
    return out


def merge_sets(*sides: Iterable[Mapping[str, Any]]) -> dict[str, Record]:
    """Merge collections of records (any number, any order) into id -> merged record."""
    out: dict[str, Record] = {}
    for side in sides:
        for record in side:
            rid = str(record["id"])
            out[rid] = merge_record(out[rid], record) if rid in out else dict(record)
    return out


def _set_merge(base: Any, ours: Any, theirs: Any) -> list[Any]:
    def keyed(value: Any) -> dict[str, Any]:
        if not isinstance(value, list):
            return {}
        return {dumps(item) if isinstance(item, Mapping) else str(item): item for item in value}

    o, a, b = keyed(base), keyed(ours), keyed(theirs)
    keys = (set(o) & set(a) & set(b)) | (set(a) - set(o)) | (set(b) - set(o))
    return [({**a, **b})[key] for key in sorted(keys)]


def merge3_record(
    base: Mapping[str, Any] | None,
    ours: Mapping[str, Any] | None,
    theirs: Mapping[str, Any] | None,
) -> Record | None:
    """Return the three-way merge of one memory (None: absent from the result)."""
    if ours is None and theirs is None:
        return None
    if ours is None or theirs is None:
        present = ours if ours is not None else theirs
        assert present is not None
        if base is not None and dumps(present) == dumps(base):
            return None  # removed on one side, untouched on the other
        return taken(present)
    if dumps(ours) == dumps(theirs):
        return taken(ours)
    if base is not None and dumps(ours) == dumps(base):
        return taken(theirs)
    if base is not None and dumps(theirs) == dumps(base):
        return taken(ours)
    if base is None or is_tombstone(ours) or is_tombstone(theirs):
        return merge_record(ours, theirs)
    winner, loser = (ours, theirs) if rank(ours) >= rank(theirs) else (theirs, ours)
    merged: Record = {}
    text_lost = False
    for key in sorted((set(base) | set(ours) | set(theirs)) - set(_NEW_VERSION)):
        o, a, b = (side.get(key, _MISSING) for side in (base, ours, theirs))
        if key in SET_FIELDS and all(v is _MISSING or isinstance(v, list) for v in (o, a, b)):
            value: Any = _set_merge(o, a, b)
            if not value and a is _MISSING and b is _MISSING:
                value = _MISSING
        elif _same(a, b):
            value = a
        elif _same(a, o):
            value = b
        elif _same(b, o):
            value = a
        else:
            value = winner.get(key, _MISSING)
            text_lost = text_lost or key in ("title", "content")
        if value is not _MISSING:
            merged[key] = value
    merged["id"] = winner["id"]
    merged["rev"] = max(_int(ours.get("rev")), _int(theirs.get("rev"))) + 1
    merged["updated_at"] = max(change_time(ours), change_time(theirs))[1]
    # Both sides are earlier versions of the result (a later sync that brings one back is no
    # conflict), except a side whose title or content lost: that text is a conflict.
    absorbed = [
        side
        for side in (ours, theirs)
        if not (text_lost and side is loser) and _text(side) != _text(merged)
    ]
    lost = (loser,) if text_lost else ()
    return _finish(merged, (ours, theirs), lost, own=None, earlier=absorbed)


def _same(value: Any, other: Any) -> bool:
    if value is _MISSING or other is _MISSING:
        return value is other
    return dumps({"v": value}) == dumps({"v": other})


def merge3(
    base: Iterable[Mapping[str, Any]],
    ours: Iterable[Mapping[str, Any]],
    theirs: Iterable[Mapping[str, Any]],
) -> list[Record]:
    """Merge three versions of a store (git's base, ours, theirs); return records by id.

    Duplicate ids within one side are first merged two-way.
    """
    o, a, b = merge_sets(base), merge_sets(ours), merge_sets(theirs)
    out: list[Record] = []
    for rid in sorted(set(a) | set(b)):
        merged = merge3_record(o.get(rid), a.get(rid), b.get(rid))
        if merged is not None:
            out.append(merged)
    return out


def conflicted(record: Mapping[str, Any]) -> bool:
    """Tell whether a memory holds text from a concurrent edit that lost (see ``conflicts``)."""
    return bool(record.get("conflicts"))
