"""Project operations over records: summaries, variant names, targets and rename versions."""

from __future__ import annotations

from typing import Any

import pytest

from engram.project.names import ProjectInfo, pick_target, rename_changes, summarize, variant_groups


def _rec(id_: str, project: str | None, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": id_,
        "kind": "decision",
        "title": f"memory {id_}",
        "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:00.000Z",
        "rev": 1,
    }
    if project is not None:
        record["project"] = project
    record.update(extra)
    return record


def test_summarize_counts_live_memories_sessions_and_last_activity() -> None:
    records = [
        _rec("a1", "ledger", updated_at="2026-03-01T10:00:00.000Z"),
        _rec("a2", "ledger", kind="session", updated_at="2026-03-05T09:00:00.000Z"),
        _rec("a3", "ledger", kind="session", scope="personal"),
        # A deleted session counts for nothing, even though it is the newest record.
        _rec(
            "a4",
            "ledger",
            kind="session",
            updated_at="2026-09-09T00:00:00.000Z",
            deleted_at="2026-09-09T00:00:00.000Z",
        ),
        _rec("b1", "billing", updated_at="2026-02-01T00:00:00.000Z"),
        _rec("c1", None),
    ]
    assert summarize(records) == [
        ProjectInfo("", 1, 0, "2026-01-01T00:00:00.000Z", ["project"]),
        ProjectInfo("billing", 1, 0, "2026-02-01T00:00:00.000Z", ["project"]),
        ProjectInfo("ledger", 3, 2, "2026-03-05T09:00:00.000Z", ["personal", "project"]),
    ]
    assert summarize([]) == []
    assert summarize(records)[2].to_dict()["sessions"] == 2


def test_variant_groups_join_case_separators_and_typos() -> None:
    names = ["Ledger-API", "ledger_api", "ledger api", "ledgr-api", "billing", "api", "app"]
    assert variant_groups(names) == [["ledger api", "Ledger-API", "ledger_api", "ledgr-api"]]


def test_short_names_are_not_merged_by_edit_distance() -> None:
    assert variant_groups(["api", "app"]) == []
    # …but squashed equality still holds for short names.
    assert variant_groups(["API", "a-p-i", "app"]) == [["a-p-i", "API"]]


def test_numbered_siblings_stay_apart_and_distance_is_bounded() -> None:
    assert variant_groups(["worker-1", "worker-2", "api-v1", "api-v2"]) == []
    assert variant_groups(["payments", "paymnts"]) == [["payments", "paymnts"]]
    assert variant_groups(["payments", "paymnts"], max_distance=0) == []
    # Three edits apart: not variants under the default distance.
    assert variant_groups(["inventory", "invntry-x"]) == []


def test_variant_groups_are_deterministic_and_ignore_duplicates_and_empty_names() -> None:
    names = ["beta-svc", "Beta_Svc", "alpha-one", "alpha_one", "", "  ", "beta-svc"]
    first = variant_groups(names)
    assert first == [["alpha-one", "alpha_one"], ["beta-svc", "Beta_Svc"]]
    assert variant_groups(list(reversed(names))) == first


def test_pick_target_prefers_most_memories_then_shortest_then_alphabetical() -> None:
    group = ["ledger-api", "ledger_api", "ledgerapi"]
    assert pick_target(group, {"ledger_api": 5, "ledger-api": 2}) == "ledger_api"
    assert pick_target(group, {}) == "ledgerapi"
    assert pick_target(["b-x", "a-x"], {"a-x": 1, "b-x": 1}) == "a-x"
    with pytest.raises(ValueError):
        pick_target([], {})


def test_rename_changes_returns_exact_new_versions() -> None:
    records = [
        _rec("m2", "ledger_api", rev=3, tags=["x"], custom={"kept": True}),
        _rec("m1", "Ledger API "),  # not normalised on disk: still matches "ledger api"
        _rec("m3", "ledger-api"),  # already the target: untouched
        _rec("m4", "ledger_api", deleted_at="2026-02-02T00:00:00.000Z"),  # tombstone
        _rec("m5", "billing"),
        _rec("m6", None),
    ]
    changes = rename_changes(
        records, ["ledger_api", "LEDGER API"], "ledger-api", stamp="2026-05-05T05:05:05.000Z"
    )
    assert changes == [
        {**records[1], "project": "ledger-api", "rev": 2, "updated_at": "2026-05-05T05:05:05.000Z"},
        {**records[0], "project": "ledger-api", "rev": 4, "updated_at": "2026-05-05T05:05:05.000Z"},
    ]
    # The inputs are not modified.
    assert records[0]["project"] == "ledger_api" and records[0]["rev"] == 3
    assert rename_changes(records, ["nothing"], "ledger-api", stamp="x") == []
