"""The one merge function (engram.sync.merge): each rule of its docstring, then properties.

The properties run random histories of creates, edits, deletes and two-way syncs on 2–4
replicas (each replica a dict id -> record, edits made the way engram.service makes them) and
check that the replicas converge whatever the merge order, lose no acknowledged text and never
resurrect a delete.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.model import Record, canonical_line, change_time, format_time, is_tombstone
from engram.sync.merge import (
    SET_FIELDS,
    conflicted,
    merge3,
    merge3_record,
    merge_record,
    merge_sets,
    rank,
    settle,
)

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def stamp(tick: float | str) -> str:
    """Return the time ``tick`` seconds after EPOCH (a string is a time already)."""
    if isinstance(tick, str):
        return tick
    return format_time(EPOCH + timedelta(seconds=tick))


def rec(rid: str = "m1", rev: int = 1, tick: int = 0, **fields: Any) -> Record:
    record: Record = {
        "id": rid,
        "kind": "note",
        "title": "title",
        "content": "content",
        "created_at": stamp(0),
        "updated_at": stamp(tick),
        "rev": rev,
    }
    record.update(fields)
    return record


def revise(current: Mapping[str, Any], tick: float | str, **fields: Any) -> Record:
    """Change a memory as engram.service does: rev+1, earlier text appended to history."""
    record = dict(current)
    record.update(fields)
    if any(name in fields and fields[name] != current.get(name) for name in ("title", "content")):
        record["history"] = [
            *current.get("history", []),
            {
                "rev": current["rev"],
                "title": current.get("title", ""),
                "content": current.get("content", ""),
                "updated_at": current["updated_at"],
            },
        ]
    record["rev"] = current["rev"] + 1
    record["updated_at"] = stamp(tick)
    return record


def tombstone(current: Mapping[str, Any], tick: float | str, *, hard: bool = False) -> Record:
    """Delete a memory as engram.service does (a soft delete keeps the text)."""
    if hard:
        return {
            "id": current["id"],
            "rev": current["rev"] + 1,
            "updated_at": stamp(tick),
            "deleted_at": current.get("deleted_at") or stamp(tick),
        }
    return {
        **current,
        "rev": current["rev"] + 1,
        "updated_at": stamp(tick),
        "deleted_at": stamp(tick),
    }


def lines(records: Iterable[Mapping[str, Any]]) -> bytes:
    """Return the canonical bytes of a store holding ``records``."""
    return b"".join(canonical_line(r) for r in sorted(records, key=lambda r: str(r["id"])))


def texts(record: Mapping[str, Any]) -> set[tuple[str, str]]:
    """Return every (title, content) a merged record still holds: current, history, conflicts."""
    out = {(record.get("title", ""), record.get("content", ""))}
    for name in ("history", "conflicts"):
        out |= {(e.get("title", ""), e.get("content", "")) for e in record.get(name, [])}
    return out


# -- two-way ---------------------------------------------------------------------------------


def test_the_later_change_wins_and_its_fields_are_taken_unknown_ones_included() -> None:
    base = rec(importance=3)
    newer = revise(base, 5, importance=5, x_custom={"keep": [1, 2]})
    for merged in (merge_record(base, newer), merge_record(newer, base)):
        assert merged == newer
        assert merged["x_custom"] == {"keep": [1, 2]}
        assert not conflicted(merged)


def test_same_rev_later_updated_at_wins() -> None:
    base = rec()
    early = revise(base, 3, importance=2)
    late = revise(base, 4, importance=4)
    assert merge_record(early, late)["importance"] == 4
    assert merge_record(late, early)["importance"] == 4


def test_a_higher_rev_does_not_beat_a_later_change() -> None:
    # merges and busy clones inflate rev: it counts changes, it never picks the winner
    base = rec()
    busy = revise(revise(revise(base, 1, importance=2), 2, importance=4), 3, importance=5)
    late = revise(base, 4, importance=1)  # rev 2, made last
    assert busy["rev"] == 4 and late["rev"] == 2
    for merged in (merge_record(busy, late), merge_record(late, busy)):
        assert merged == late


def test_times_are_compared_as_times_not_strings() -> None:
    base = rec()
    a = {**revise(base, 0, importance=2), "updated_at": "2026-01-01T00:00:05Z"}
    b = {**revise(base, 0, importance=4), "updated_at": "2026-01-01T00:00:05.500Z"}
    c = {**revise(base, 0, importance=5), "updated_at": "2026-01-01T01:00:00+01:00"}
    assert rank(b) > rank(a) > rank(c)  # "Z" sorts after "." as text; c is 00:00:00 UTC
    assert merge_record(a, b)["importance"] == 4
    assert merge_record(c, a)["importance"] == 2


def test_concurrent_text_edit_keeps_both_texts_and_the_loser_is_in_conflicts() -> None:
    base = rec(title="original", content="v0")
    ours = revise(base, 3, title="ours", content="ours text", author="ann")
    theirs = revise(base, 4, title="theirs", content="theirs text", author="bob")
    merged = merge_record(ours, theirs)
    assert merged == merge_record(theirs, ours)
    assert (merged["title"], merged["content"]) == ("theirs", "theirs text")
    assert merged["conflicts"] == [
        {
            "rev": 2,
            "updated_at": stamp(3),
            "author": "ann",
            "title": "ours",
            "content": "ours text",
        }
    ]
    assert conflicted(merged)
    # the common ancestor's text is history, not a conflict
    assert merged["history"] == [
        {"rev": 1, "title": "original", "content": "v0", "updated_at": stamp(0)}
    ]


def test_an_older_version_whose_text_is_in_the_winners_history_is_not_a_conflict() -> None:
    v1 = rec(title="first")
    v2 = revise(v1, 1, title="second")
    v3 = revise(v2, 2, title="third")
    for older in (v1, v2):
        merged = merge_record(older, v3)
        assert merged == v3
        assert not conflicted(merged)


def test_an_older_version_with_the_winners_text_is_not_a_conflict() -> None:
    v1 = rec(title="same")
    v2 = revise(v1, 1, importance=5)  # text unchanged: nothing appended to history
    merged = merge_record(v1, v2)
    assert merged == v2
    assert not conflicted(merged)


def test_history_is_the_union_of_both_sides() -> None:
    base = rec(title="t0")
    ours = revise(revise(base, 1, title="ours-1"), 2, title="ours-2")
    theirs = revise(base, 3, title="theirs-1")
    merged = merge_record(ours, theirs)
    assert [e["title"] for e in merged["history"]] == ["t0", "ours-1"]
    assert merged["title"] == "theirs-1"  # made last (rev 2 beats rev 3: time decides)
    assert [e["title"] for e in merged["conflicts"]] == ["ours-2"]
    # a later edit on top of the merge keeps everything, and merging the old sides back in
    # changes nothing
    later = revise(merged, 9, title="final")
    again = merge_record(merge_record(later, ours), theirs)
    assert again == later
    assert texts(again) >= {("t0", "content"), ("ours-1", "content"), ("ours-2", "content")}


def test_conflicts_are_not_duplicated_on_re_merge() -> None:
    base = rec(title="t0")
    ours = revise(base, 3, title="ours")
    theirs = revise(base, 4, title="theirs")
    merged = merge_record(ours, theirs)
    assert len(merged["conflicts"]) == 1
    for other in (ours, theirs, merged, base):
        assert merge_record(merged, other) == merged
        assert merge_record(other, merged) == merged


def test_versions_with_the_same_text_give_one_conflict_whatever_the_grouping() -> None:
    # a and b hold the same text (b only changed importance); c edited the text concurrently.
    base = rec(title="t0")
    a = revise(base, 1, title="shared")
    b = revise(a, 2, importance=5)
    c = revise(revise(base, 3, title="other"), 4, title="winner")
    left = merge_record(merge_record(a, b), c)
    right = merge_record(a, merge_record(b, c))
    assert canonical_line(left) == canonical_line(right)
    assert [e["title"] for e in left["conflicts"]] == ["shared"]
    assert left["conflicts"][0]["rev"] == 3  # b's version: the latest with that text


def test_a_conflict_that_became_the_winners_text_is_dropped() -> None:
    base = rec(title="t0")
    ours = revise(base, 3, title="ours")
    theirs = revise(base, 4, title="theirs")
    merged = merge_record(ours, theirs)
    restored = revise(merged, 5, title="ours")  # the user restored the losing text
    assert "conflicts" not in merge_record(restored, merged)
    assert "conflicts" not in merge_record(restored, ours)


@pytest.mark.parametrize("hard", [False, True])
def test_a_tombstone_beats_an_older_edit_in_either_order(hard: bool) -> None:
    base = rec(title="t0")
    edit = revise(base, 3, title="edited")  # rev 2
    gone = tombstone(revise(base, 1, importance=4), 5, hard=hard)  # rev 3
    for merged in (merge_record(edit, gone), merge_record(gone, edit)):
        assert is_tombstone(merged)
        assert merged["rev"] == 3
        # the concurrent edit's text is still kept where a user can restore it
        assert ("edited", "content") in texts(merged)


def forget_notes(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [e for e in record.get("conflicts", []) if "deleted_at" in e]


@pytest.mark.parametrize("hard", [False, True])
def test_a_newer_edit_made_without_seeing_the_delete_wins_and_notes_the_forget(
    hard: bool,
) -> None:
    base = rec(title="t0", author="ann")
    gone = tombstone(base, 1, hard=hard)  # rev 2
    edit = revise(revise(base, 2, title="t1"), 3, title="t2")  # rev 3
    for merged in (merge_record(edit, gone), merge_record(gone, edit)):
        assert not is_tombstone(merged)
        assert merged["title"] == "t2"
        # the deleted text, t0, is history; the forget it overrode is noted, visibly
        assert [e for e in merged["conflicts"] if "deleted_at" not in e] == []
        expected = {"rev": 2, "updated_at": stamp(1), "deleted_at": stamp(1)}
        assert forget_notes(merged) == [expected if hard else {**expected, "author": "ann"}]
        assert conflicted(merged)
        for side in (edit, gone, merged):  # syncing either side back changes nothing
            assert merge_record(merged, side) == merged


def test_a_forget_after_the_last_edit_wins_though_the_edits_count_more_revs() -> None:
    # the report: edited twice on one clone, forgotten a second later on another
    base = rec(title="t0", content="c0")
    edited = revise(revise(base, 10, content="c1"), 11, content="c2")  # rev 3
    gone = tombstone(base, 12)  # rev 2, made last
    for merged in (merge_record(edited, gone), merge_record(gone, edited)):
        assert is_tombstone(merged)
        assert merged["rev"] == 2 and merged["updated_at"] == stamp(12)  # the forget's own
        assert forget_notes(merged) == []  # a tombstone never notes its own forget
        # the edits it had not seen keep their text, where a user can restore it
        assert [(e["content"], e["rev"]) for e in merged["conflicts"]] == [("c2", 3)]
        assert ("t0", "c1") in texts(merged)


def test_the_forget_note_is_the_latest_forget_whatever_the_grouping() -> None:
    base = rec(title="t0")
    first = tombstone(base, 2)
    second = tombstone(revise(base, 1, importance=5), 3)
    edit = revise(base, 4, title="t1")
    groupings = [
        merge_record(merge_record(first, second), edit),
        merge_record(first, merge_record(second, edit)),
        merge_record(merge_record(first, edit), second),
        merge_record(edit, merge_record(second, first)),
    ]
    assert len({canonical_line(g) for g in groupings}) == 1
    assert [e["updated_at"] for e in forget_notes(groupings[0])] == [stamp(3)]
    # forgotten again after the resurrection: a tombstone, later still, wins everywhere
    again = tombstone(groupings[0], 5)
    assert merge_record(again, edit) == merge_record(edit, again)
    assert is_tombstone(merge_record(again, groupings[0]))
    assert forget_notes(merge_record(again, first)) == []


def test_a_tombstone_beats_a_live_version_with_the_same_rev_and_time() -> None:
    base = rec()
    live = revise(base, 2, importance=4)
    gone = {**live, "deleted_at": stamp(2)}
    assert rank(gone) > rank(live)
    assert is_tombstone(merge_record(live, gone))
    assert not conflicted(merge_record(live, gone))


def test_two_forgets_stamped_alike_leave_a_tombstone_without_a_forget_note() -> None:
    # Found by test_forget_and_edit_of_one_memory_across_clones_with_skewed_clocks: the memory
    # was made on a clock half an hour ahead, so both clones forget it 1 ms after it (rev 2).
    made = {
        "id": "m001",
        "kind": "note",
        "title": "alpha",
        "content": "one",
        "tags": [],
        "importance": 3,
        "author": "r0",
        "created_at": "2026-01-01T00:30:01.500Z",
        "updated_at": "2026-01-01T00:30:01.500Z",
        "rev": 1,
    }
    at = "2026-01-01T00:30:01.501Z"
    soft = {**made, "rev": 2, "updated_at": at, "deleted_at": at}
    hard = {"id": "m001", "rev": 2, "updated_at": at, "deleted_at": at}
    for merged in (merge_record(soft, hard), merge_record(hard, soft)):
        assert is_tombstone(merged)
        assert forget_notes(merged) == []  # both forgot: no forget was overridden
        assert ("alpha", "one") in texts(merged)
    # an edit made later, without seeing either forget, notes the same one forget whatever
    # the grouping: the tombstone that won (its forget is the latest note)
    edit = revise(made, "2026-01-01T00:30:02.000Z", content="two")
    left = merge_record(merge_record(soft, hard), edit)
    right = merge_record(soft, merge_record(hard, edit))
    assert canonical_line(left) == canonical_line(right)
    assert [note["updated_at"] for note in forget_notes(left)] == [at]


def test_a_hard_tombstone_keeps_the_text_of_a_live_copy_merged_into_it() -> None:
    # documented limit: without text or history it cannot tell a copy it deleted from an edit
    base = rec(title="t0")
    gone = tombstone(base, 1, hard=True)
    merged = merge_record(gone, base)
    assert is_tombstone(merged)
    assert [(e["title"], e["rev"]) for e in merged["conflicts"]] == [("t0", 1)]
    soft = tombstone(base, 1)  # a soft delete holds the text it deleted: no conflict
    assert merge_record(soft, base) == soft


def test_an_update_settles_the_conflicts_and_older_copies_do_not_bring_them_back() -> None:
    base = rec(title="t0")
    gone = tombstone(base, 1)
    ours = revise(base, 2, title="ours")
    theirs = revise(base, 3, title="theirs")
    merged = merge_record(merge_record(ours, theirs), gone)
    assert [e.get("title", "forget") for e in merged["conflicts"]] == ["forget", "ours"]
    updated = settle(revise(merged, 4, importance=5))  # engram update, after reading them
    assert "conflicts" not in updated
    assert texts(updated) >= {("ours", "content"), ("theirs", "content"), ("t0", "content")}
    for older in (base, gone, ours, theirs, merged):
        assert merge_record(updated, older) == updated
        assert merge_record(older, updated) == updated
    # a forget made later than the one settled is noted again when an edit overrides it
    again = tombstone(ours, 5)
    edit = revise(updated, 6, content="kept once more")
    assert [e["updated_at"] for e in forget_notes(merge_record(edit, again))] == [stamp(5)]


def test_merge_record_refuses_two_ids() -> None:
    with pytest.raises(ValueError):
        merge_record(rec("a"), rec("b"))


def test_merge_sets_keys_by_id_and_merges_duplicates() -> None:
    a1, b1 = rec("a"), rec("b")
    a2 = revise(a1, 1, title="a2")
    out = merge_sets([a1, b1], [a2], [a1, a1])
    assert sorted(out) == ["a", "b"]
    assert out["a"] == a2
    assert out["b"] == b1


# -- three-way -------------------------------------------------------------------------------


def test_a_field_changed_on_one_side_takes_that_side() -> None:
    base = rec(title="t0", importance=3)
    ours = revise(base, 3, importance=5)
    theirs = revise(base, 4, content="theirs content")
    for merged in (merge3_record(base, ours, theirs), merge3_record(base, theirs, ours)):
        assert merged is not None
        assert merged["importance"] == 5
        assert merged["content"] == "theirs content"
        assert merged["title"] == "t0"
        assert merged["rev"] == 3  # a new version
        assert merged["updated_at"] == stamp(4)
        assert not conflicted(merged)
        # both sides are earlier versions of the result
        assert [(e["rev"], e["content"]) for e in merged["history"]] == [
            (1, "content"),
            (2, "content"),
        ]
        for side in (ours, theirs, base):
            assert merge_record(merged, side) == merged


def test_text_fields_changed_on_different_sides_merge_without_a_conflict() -> None:
    base = rec(title="t0", content="c0")
    ours = revise(base, 3, title="t1")
    theirs = revise(base, 4, content="c1")
    merged = merge3_record(base, ours, theirs)
    assert merged is not None
    assert (merged["title"], merged["content"]) == ("t1", "c1")
    assert not conflicted(merged)
    assert texts(merged) == {("t0", "c0"), ("t1", "c0"), ("t0", "c1"), ("t1", "c1")}
    # a sync chunk that brings either side back is no conflict
    assert merge_record(merge_record(merged, ours), theirs) == merged


def test_changed_on_one_side_only_takes_that_side() -> None:
    base = rec()
    ours = revise(base, 3, title="ours", x_new="kept")
    assert merge3_record(base, ours, base) == ours
    assert merge3_record(base, base, ours) == ours


def test_a_side_that_took_back_a_conflicts_text_is_taken_without_that_conflict() -> None:
    # Found by test_merge3_from_a_common_ancestor: replica r0 set content "two" while r2 changed
    # importance; the two-way sync kept r2's version and r0's text in conflicts. Then one side
    # set content "two" itself (an edit that does not settle, such as a topic-key save).
    base = {
        "id": "m001",
        "kind": "note",
        "title": "alpha",
        "content": "one",
        "importance": 1,
        "tags": [],
        "author": "r2",
        "created_at": stamp(1),
        "updated_at": stamp(3),
        "rev": 2,
        "history": [{"rev": 1, "title": "alpha", "content": "one", "updated_at": stamp(1)}],
        "conflicts": [
            {"rev": 2, "updated_at": stamp(2), "author": "r0", "title": "alpha", "content": "two"}
        ],
    }
    theirs = {
        **base,
        "content": "two",
        "updated_at": stamp(4),
        "rev": 3,
        "history": [
            {"rev": 1, "title": "alpha", "content": "one", "updated_at": stamp(1)},
            {"rev": 2, "title": "alpha", "content": "one", "updated_at": stamp(3)},
        ],
    }
    expected = {key: value for key, value in theirs.items() if key != "conflicts"}
    for merged in (merge3_record(base, base, theirs), merge3_record(base, theirs, base)):
        assert merged == expected  # its own text is no divergence: no conflict entry
        for side in (base, theirs):
            assert merge_record(merged, side) == merged
            assert merge_record(side, merged) == merged
    assert merge3([base], [theirs], [theirs]) == [expected]
    assert merge3([], [theirs], []) == [expected]


def test_a_forget_of_a_memory_noted_as_forgotten_elsewhere_is_taken_without_the_note() -> None:
    noted = rec(
        rev=3,
        tick=5,
        conflicts=[{"rev": 2, "updated_at": stamp(4), "author": "bob", "deleted_at": stamp(4)}],
    )
    gone = tombstone(noted, 6)  # engram forget keeps the rest of the record, conflicts too
    expected = {key: value for key, value in gone.items() if key != "conflicts"}
    for merged in (merge3_record(noted, noted, gone), merge3_record(noted, gone, noted)):
        assert merged == expected  # a tombstone carries no note of a forget: it is one
        for side in (noted, gone):
            assert merge_record(merged, side) == merged


def test_both_sides_made_the_same_change() -> None:
    base = rec(importance=3)
    ours = revise(base, 3, importance=5, x_ours=1)
    theirs = revise(base, 4, importance=5, x_theirs=2)
    merged = merge3_record(base, ours, theirs)
    assert merged is not None
    assert merged["importance"] == 5
    assert (merged["x_ours"], merged["x_theirs"]) == (1, 2)  # unknown fields kept from both
    assert not conflicted(merged)
    assert merge3_record(base, ours, dict(ours)) == ours


@pytest.mark.parametrize("field", SET_FIELDS)
def test_set_fields_merge_with_additions_and_removals_on_both_sides(field: str) -> None:
    if field == "links":
        items: list[Any] = [{"rel": "relates", "to": name} for name in "abcde"]
    else:
        items = list("abcde")
    a, b, c, d, e = items
    base = rec(**{field: [a, b, c]})
    ours = revise(base, 3, **{field: [a, b, d]})  # removed c, added d
    theirs = revise(base, 4, **{field: [b, c, e]})  # removed a, added e
    for merged in (merge3_record(base, ours, theirs), merge3_record(base, theirs, ours)):
        assert merged is not None
        assert merged[field] == [b, d, e]


def test_set_field_emptied_on_one_side_stays_empty_unless_the_other_adds() -> None:
    base = rec(tags=["x", "y"])
    ours = revise(base, 3, tags=[])
    theirs = revise(base, 4, tags=["x", "y", "z"])
    merged = merge3_record(base, ours, theirs)
    assert merged is not None
    assert merged["tags"] == ["z"]


def test_scalar_conflict_takes_the_winner_and_keeps_the_losing_text() -> None:
    base = rec(title="t0", content="c0", importance=3)
    ours = revise(base, 3, title="ours", importance=1, author="ann")
    theirs = revise(base, 4, title="theirs", importance=5, tags=["new"], author="bob")
    merged = merge3_record(base, ours, theirs)
    assert merged == merge3_record(base, theirs, ours)
    assert merged is not None
    assert (merged["title"], merged["importance"], merged["author"]) == ("theirs", 5, "bob")
    assert merged["tags"] == ["new"]
    assert merged["conflicts"] == [
        {"rev": 2, "updated_at": stamp(3), "author": "ann", "title": "ours", "content": "c0"}
    ]
    assert [e["title"] for e in merged["history"]] == ["t0"]
    for side in (ours, theirs):
        assert merge_record(merged, side) == merged


def test_a_non_text_scalar_conflict_leaves_no_conflict_entry() -> None:
    base = rec(importance=3)
    ours = revise(base, 3, importance=1)
    theirs = revise(base, 4, importance=5)
    merged = merge3_record(base, ours, theirs)
    assert merged is not None
    assert merged["importance"] == 5
    assert not conflicted(merged)


@pytest.mark.parametrize("hard", [False, True])
def test_three_way_tombstone_against_an_edit_in_both_orders(hard: bool) -> None:
    base = rec(title="t0")
    gone = tombstone(base, 5, hard=hard)  # rev 2, later
    edit = revise(base, 3, title="edited")  # rev 2, earlier
    for merged in (merge3_record(base, gone, edit), merge3_record(base, edit, gone)):
        assert merged is not None
        assert is_tombstone(merged)
        assert ("edited", "content") in texts(merged)
    newer_edit = revise(edit, 6, title="edited again")  # rev 3: made without seeing the delete
    for merged in (merge3_record(base, gone, newer_edit), merge3_record(base, newer_edit, gone)):
        assert merged is not None
        assert not is_tombstone(merged)
        assert merged["title"] == "edited again"


def test_an_id_added_on_one_side_is_kept() -> None:
    new = rec("new", title="added")
    assert merge3_record(None, new, None) == new
    assert merge3_record(None, None, new) == new
    assert merge3([], [new], []) == [new]
    assert merge3([], [], [new]) == [new]


def test_removed_from_the_file_on_one_side() -> None:
    base = rec()
    assert merge3_record(base, None, dict(base)) is None
    assert merge3_record(base, dict(base), None) is None
    changed = revise(base, 3, title="changed")
    assert merge3_record(base, None, changed) == changed
    assert merge3_record(base, changed, None) == changed
    assert merge3_record(base, None, None) is None


def test_merge3_keys_by_id_and_sorts() -> None:
    a, b, c = rec("a"), rec("b"), rec("c")
    ours = [revise(b, 2, title="b ours"), a, c]
    theirs = [c, revise(a, 3, title="a theirs"), b, rec("d")]
    merged = merge3([a, b, c], ours, theirs)
    assert [r["id"] for r in merged] == ["a", "b", "c", "d"]
    assert merged[0]["title"] == "a theirs"
    assert merged[1]["title"] == "b ours"


def test_merge3_merges_duplicate_ids_within_a_side_first() -> None:
    base = rec()
    v2 = revise(base, 2, title="v2")
    merged = merge3([base], [base, v2], [base])
    assert merged == [v2]


# -- properties: random histories on replicas ------------------------------------------------

TITLES = st.sampled_from(["alpha", "beta", "gamma"])
CONTENTS = st.sampled_from(["one", "two"])
TAGS = st.lists(st.sampled_from(["x", "y", "z"]), unique=True, max_size=3).map(sorted)

REPLICA = st.integers(0, 3)
PICK = st.integers(0, 50)  # which memory, modulo the replica's ids
CREATE = st.tuples(st.just("create"), REPLICA, TITLES, CONTENTS)
EDIT = st.one_of(
    st.tuples(st.just("edit"), REPLICA, PICK, st.just("title"), TITLES),
    st.tuples(st.just("edit"), REPLICA, PICK, st.just("content"), CONTENTS),
    st.tuples(st.just("edit"), REPLICA, PICK, st.just("tags"), TAGS),
    st.tuples(st.just("edit"), REPLICA, PICK, st.just("importance"), st.integers(1, 5)),
)
DELETE = st.tuples(st.just("delete"), REPLICA, PICK, st.booleans())
SYNC = st.tuples(st.just("sync"), REPLICA, REPLICA)
OPS = st.one_of(CREATE, EDIT, EDIT, DELETE, SYNC, SYNC)
SIDE_OPS = st.one_of(EDIT, EDIT, EDIT, EDIT, CREATE, DELETE)  # no syncs: the sides diverge
# Replica clocks: right, an hour behind, half an hour ahead, a little behind (fractions keep two
# replicas' readings apart, so that no two changes share a time by accident)
SKEW_CHOICES = (0.0, -3600.25, 1800.5, -0.75)


SKEWS = st.lists(st.sampled_from(SKEW_CHOICES), min_size=4, max_size=4)


class World:
    """Replicas (id -> record) on one real timeline, each reading its own skewed wall clock.

    Every change is stamped the way engram.service stamps it (``model.change_time``: the
    replica's clock, or 1 ms after the version it changes), and every written version records
    which versions its replica had seen (``before``), so tests can tell a change made after
    another from a concurrent one.
    """

    def __init__(self, count: int, skews: Sequence[float] = ()) -> None:
        self.replicas: list[dict[str, Record]] = [{} for _ in range(count)]
        self.skews = [*skews, *[0.0] * count][:count]
        self.real = 0  # seconds since EPOCH on the real timeline: one per change
        self.created = 0
        self.known: list[set[int]] = [set() for _ in range(count)]  # versions each has seen
        self.written: list[Record] = []  # every version any replica wrote
        self.before: list[frozenset[int]] = []  # per written version: what its replica had seen

    def clock(self, r: int, current: Mapping[str, Any] | None = None) -> str:
        self.real += 1
        wall = stamp(self.real + self.skews[r])
        return change_time(current["updated_at"], stamp=wall) if current else wall

    def write(self, r: int, record: Record) -> None:
        self.replicas[r][record["id"]] = record
        self.before.append(frozenset(self.known[r]))
        self.known[r].add(len(self.written))
        self.written.append(record)

    def saw(self, later: int, earlier: int) -> bool:
        """Tell whether written version ``later`` was made after seeing version ``earlier``."""
        return earlier in self.before[later]

    def pick(self, r: int, index: int, *, live: bool) -> Record | None:
        ids = sorted(
            rid for rid, rec_ in self.replicas[r].items() if not live or not is_tombstone(rec_)
        )
        return self.replicas[r][ids[index % len(ids)]] if ids else None

    def apply(self, op: tuple[Any, ...]) -> None:
        count = len(self.replicas)
        name, r = op[0], op[1] % count
        if name == "create":
            self.created += 1
            at = self.clock(r)
            record = rec(f"m{self.created:03d}", 1, 0, title=op[2], content=op[3])
            record.update(created_at=at, updated_at=at, author=f"r{r}", tags=[], importance=3)
            if self.created % 3 == 0:
                record["x_unknown"] = {"from": r, "list": [1, "two"]}
            self.write(r, record)
        elif name == "edit":
            current = self.pick(r, op[2], live=True)
            field, value = op[3], op[4]
            if current is None or current.get(field) == value:
                return  # engram.service returns the memory unchanged
            at = self.clock(r, current)
            self.write(r, revise(current, at, **{field: value, "author": f"r{r}"}))
        elif name == "delete":
            hard = op[3]
            current = self.pick(r, op[2], live=not hard)
            if current is None:
                return
            self.write(r, tombstone(current, self.clock(r, current), hard=hard))
        else:
            other = op[2] % count
            if other != r:
                self.sync(r, other)

    def sync(self, r: int, other: int) -> None:
        merged = merge_sets(self.replicas[r].values(), self.replicas[other].values())
        self.replicas[r] = dict(merged)
        self.replicas[other] = dict(merged)
        both = self.known[r] | self.known[other]
        self.known[r], self.known[other] = set(both), set(both)

    def exchange_everything(self) -> None:
        count = len(self.replicas)
        for r in range(1, count):
            self.sync(0, r)
        for r in range(1, count):
            self.sync(0, r)


def fold(states: Sequence[Iterable[Record]]) -> bytes:
    """Merge stores left to right, two at a time."""
    acc: dict[str, Record] = {}
    for state in states:
        acc = merge_sets(acc.values(), state)
    return lines(acc.values())


def fold_right(states: Sequence[Iterable[Record]]) -> bytes:
    acc: dict[str, Record] = {}
    for state in reversed(states):
        acc = merge_sets(state, acc.values())
    return lines(acc.values())


def tree(states: Sequence[list[Record]]) -> list[Record]:
    """Merge stores as a balanced tree."""
    if len(states) == 1:
        return list(states[0])
    middle = len(states) // 2
    return list(merge_sets(tree(states[:middle]), tree(states[middle:])).values())


WORLDS = st.tuples(st.integers(2, 4), st.lists(OPS, max_size=40), SKEWS)
# One memory on every replica, then only edits, forgets and syncs: forget against edit, often
ONE_MEMORY = st.tuples(
    st.integers(2, 4), st.lists(st.one_of(EDIT, DELETE, DELETE, SYNC, SYNC), max_size=30), SKEWS
)
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run(world_spec: tuple[int, list[Any], list[float]], *, shared: bool = False) -> World:
    count, ops, skews = world_spec
    world = World(count, skews)
    if shared:
        world.apply(("create", 0, "alpha", "one"))
        world.exchange_everything()
    for op in ops:
        world.apply(op)
    return world


@PROPERTY
@given(WORLDS)
def test_replicas_converge_whatever_the_merge_order(
    world_spec: tuple[int, list[Any], list[float]],
) -> None:
    world = run(world_spec)
    finals = [list(replica.values()) for replica in world.replicas]
    expected = fold(finals)
    for order in itertools.permutations(finals):
        assert fold(order) == expected
        assert fold_right(order) == expected
        assert lines(tree(order)) == expected
    # duplicates of whole stores change nothing (idempotence at the store level)
    assert fold(finals + finals) == expected

    world.exchange_everything()
    for replica in world.replicas:
        assert lines(replica.values()) == expected


def check_time_rules(world: World) -> None:
    """Exchange everything, then check each rule of the merge by time on the converged state."""
    world.exchange_everything()
    converged = world.replicas[0]
    for replica in world.replicas[1:]:
        assert lines(replica.values()) == lines(converged.values())
    for rid in {str(v["id"]) for v in world.written}:
        final = converged[rid]
        mine = [i for i, v in enumerate(world.written) if v["id"] == rid]
        live = [i for i in mine if not is_tombstone(world.written[i])]
        gone = [i for i in mine if is_tombstone(world.written[i])]
        last = max(mine, key=lambda i: rank(world.written[i]))
        for i in mine:
            version = world.written[i]
            assert rank(final) >= rank(version)
            for j in mine:
                if world.saw(j, i):
                    # (a) a change made after seeing another is later, whatever the clocks say
                    assert rank(world.written[j]) > rank(version)
            if is_tombstone(version):
                # (d) a delete is never resurrected by an older copy
                assert is_tombstone(final) or rank(final) > rank(version)
            elif not any(world.saw(j, i) and "title" not in world.written[j] for j in gone):
                # (c) nothing acknowledged is lost (unless a hard delete that saw it dropped it)
                assert (version["title"], version["content"]) in texts(final)
        notes = forget_notes(final)
        if any(all(world.saw(t, i) for i in live) for t in gone):
            # (b) a forget made after the last edit stays a forget on every replica
            assert is_tombstone(final)
        if is_tombstone(world.written[last]):
            assert is_tombstone(final) and notes == []
        else:
            # (e) an edit made after the forget wins: live, with its text, the forget noted
            latest = world.written[last]
            assert not is_tombstone(final)
            assert (final["title"], final["content"]) == (latest["title"], latest["content"])
            if gone:
                newest = max((world.written[t] for t in gone), key=rank)
                assert [n["updated_at"] for n in notes] == [newest["updated_at"]]
            else:
                assert notes == []


@PROPERTY
@given(WORLDS)
def test_nothing_acknowledged_is_lost_and_no_delete_is_resurrected(
    world_spec: tuple[int, list[Any], list[float]],
) -> None:
    check_time_rules(run(world_spec))


@PROPERTY
@given(ONE_MEMORY)
def test_forget_and_edit_of_one_memory_across_clones_with_skewed_clocks(
    world_spec: tuple[int, list[Any], list[float]],
) -> None:
    check_time_rules(run(world_spec, shared=True))


def test_a_forget_made_after_seeing_edits_wins_on_a_clock_an_hour_behind() -> None:
    world = World(2, [0.0, -3600.25])
    world.apply(("create", 0, "alpha", "one"))
    world.exchange_everything()
    world.apply(("edit", 0, 0, "content", "two"))
    world.apply(("edit", 0, 0, "title", "beta"))  # rev 3, by a clock an hour ahead of r1's
    world.apply(("sync", 0, 1))
    world.apply(("delete", 1, 0, False))  # r1 saw the edits; its clock says an hour earlier
    gone = world.written[-1]
    assert gone["updated_at"] > world.written[-2]["updated_at"]  # 1 ms after what it saw
    check_time_rules(world)
    assert is_tombstone(world.replicas[0]["m001"])


# -- properties: merge_record on arbitrary versions of one id ---------------------------------

ENTRY = st.fixed_dictionaries(
    {"rev": st.integers(0, 4), "title": TITLES, "content": CONTENTS},
    optional={"updated_at": st.integers(0, 4).map(stamp), "author": st.sampled_from(["a", "b"])},
)
NOTE = st.fixed_dictionaries(  # a forget a later edit overrode (in conflicts; settled: history)
    {"rev": st.integers(0, 4), "updated_at": st.integers(0, 4).map(stamp)},
    optional={"deleted_at": st.integers(0, 4).map(stamp), "author": st.sampled_from(["a", "b"])},
).map(lambda note: {"deleted_at": note["updated_at"], **note})
VERSION = st.fixed_dictionaries(
    {
        "id": st.just("m1"),
        "rev": st.integers(1, 4),
        "updated_at": st.integers(0, 4).map(stamp),
    },
    optional={
        "kind": st.just("note"),
        "title": TITLES,
        "content": CONTENTS,
        "tags": TAGS,
        "importance": st.integers(1, 5),
        "author": st.sampled_from(["a", "b"]),
        "deleted_at": st.integers(0, 4).map(stamp),
        "x_unknown": st.one_of(st.integers(0, 2), st.lists(st.integers(0, 2), max_size=2)),
        "history": st.lists(st.one_of(ENTRY, ENTRY, NOTE), max_size=3),
        "conflicts": st.lists(st.one_of(ENTRY, ENTRY, NOTE), max_size=3),
    },
)
ARBITRARY = settings(max_examples=200, deadline=None)


@ARBITRARY
@given(VERSION, VERSION)
def test_merge_record_is_commutative(a: Record, b: Record) -> None:
    assert canonical_line(merge_record(a, b)) == canonical_line(merge_record(b, a))


@ARBITRARY
@given(VERSION, VERSION, VERSION)
def test_merge_record_is_associative(a: Record, b: Record, c: Record) -> None:
    left = merge_record(merge_record(a, b), c)
    right = merge_record(a, merge_record(b, c))
    assert canonical_line(left) == canonical_line(right)


@ARBITRARY
@given(VERSION, VERSION)
def test_merge_record_is_idempotent(a: Record, b: Record) -> None:
    merged = merge_record(a, b)
    assert merge_record(merged, merged) == merged
    assert merge_record(merged, a) == merged
    assert merge_record(merged, b) == merged
    once = merge_record(a, a)
    assert merge_record(once, a) == once


@ARBITRARY
@given(VERSION, VERSION)
def test_merge_record_keeps_the_winners_fields_and_every_text(a: Record, b: Record) -> None:
    merged = merge_record(a, b)
    winner = a if rank(a) >= rank(b) else b
    assert {k: v for k, v in merged.items() if k not in ("history", "conflicts")} == {
        k: v for k, v in winner.items() if k not in ("history", "conflicts")
    }
    for side in (a, b):
        if side.get("title") or side.get("content"):
            assert (side.get("title", ""), side.get("content", "")) in texts(merged)


@ARBITRARY
@given(VERSION, VERSION)
def test_settled_conflicts_stay_settled_whatever_comes_back(a: Record, b: Record) -> None:
    settled = settle(merge_record(a, b))
    assert "conflicts" not in settled
    for side in (a, b):
        assert merge_record(settled, side) == settled
        assert merge_record(side, settled) == settled


# -- properties: three-way from a common ancestor --------------------------------------------


def as_merged(side: Iterable[Record]) -> list[Record]:
    """Return each record of a side as a merge leaves it: merged with itself."""
    return [merge_record(record, record) for record in side]


@PROPERTY
@given(
    st.lists(OPS, min_size=1, max_size=10),
    st.lists(SIDE_OPS, max_size=6),
    st.lists(SIDE_OPS, max_size=6),
    SKEWS,
)
def test_merge3_from_a_common_ancestor(
    before: list[Any], ours_ops: list[Any], theirs_ops: list[Any], skews: list[float]
) -> None:
    world = World(3, skews)
    world.apply(("create", 0, "alpha", "one"))  # at least one memory both sides can change
    for op in before:
        world.apply(op)
    world.exchange_everything()
    base = list(world.replicas[0].values())
    # replica 1 and replica 2 go their own ways from the common state (no syncs between them)
    for r, ops in ((1, ours_ops), (2, theirs_ops)):
        for op in ops:
            world.apply((op[0], r, *op[2:]))
    ours, theirs = list(world.replicas[1].values()), list(world.replicas[2].values())

    merged = merge3(base, ours, theirs)
    assert lines(merged) == lines(merge3(base, theirs, ours))
    # a side changed alone is taken as the two-way merge leaves it (its conflicts as a merge
    # keeps them: an edit may have taken back a conflict's text)
    assert lines(merge3(base, ours, ours)) == lines(as_merged(ours))
    assert lines(merge3(base, ours, base)) == lines(as_merged(ours))
    assert lines(merge3(base, base, theirs)) == lines(as_merged(theirs))
    # keyed by id, sorted, and every id of either side is there (deletes are tombstones)
    assert [r["id"] for r in merged] == sorted({r["id"] for r in ours + theirs})
    # the sides are earlier versions of the result: a sync chunk or an import that brings
    # either side back changes nothing (no spurious conflict)
    # (a hard tombstone is left out: without text or history it cannot tell an older copy it
    # deleted from a concurrent edit, so the copy's text is kept in its conflicts)
    for side in (ours, theirs):
        for record in merged:
            again = merge_sets([record], [r for r in side if r["id"] == record["id"]])
            if "title" in record:
                assert again[record["id"]] == record
    # no delete resurrected: a tombstone on one side stays, unless the other side is newer
    by_id = {r["id"]: r for r in merged}
    for side in (ours, theirs):
        for record in side:
            final = by_id[record["id"]]
            if is_tombstone(record):
                assert is_tombstone(final) or rank(final) > rank(record)
            assert rank(final) >= rank(record)
    # forget against edit, three-way: the change made last decides, a lost forget is noted
    for record in merged:
        sides = [r for r in ours + theirs if r["id"] == record["id"]]
        if any(is_tombstone(r) for r in sides):
            assert is_tombstone(record) == is_tombstone(max(sides, key=rank))
            if not is_tombstone(record):
                assert forget_notes(record)
