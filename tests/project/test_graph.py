"""The memory graph: why (lineage) and related (neighbours), through the facade, CLI and MCP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engram.__main__ import app
from engram.model import new_id, now
from engram.project.graph import lineage, related
from engram.service import Engram
from tests.mcp_server.test_mcp import FRAME, connect, run

runner = CliRunner()


def raw(title: str, **fields: Any) -> dict[str, Any]:
    stamp = now()
    return {
        "id": new_id(),
        "kind": "decision",
        "title": title,
        "content": "",
        "status": "active",
        "created_at": stamp,
        "updated_at": stamp,
        "rev": 1,
        **fields,
    }


def chain(project: Engram, length: int = 5) -> list[str]:
    ids = [project.remember("Use REST v1", kind="decision").record["id"]]
    for n in range(2, length + 1):
        result = project.remember(
            f"Use REST v{n}", kind="decision", links=[f"supersedes:{ids[-1]}"]
        )
        ids.append(result.record["id"])
    return ids


def test_why_on_the_middle_of_a_chain_of_five_lists_both_directions_in_order(
    project: Engram,
) -> None:
    ids = chain(project)
    data = project.why(ids[2][:10])
    assert data.memory.id == ids[2]
    assert data.memory.status == "superseded"
    assert [item.id for item in data.supersedes] == [ids[1], ids[0]]
    assert [item.depth for item in data.supersedes] == [1, 2]
    assert [item.id for item in data.superseded_by] == [ids[3], ids[4]]
    assert data.superseded_by[-1].status == "active"
    assert data.to_dict()["links_out"] == [
        {"rel": "supersedes", "id": ids[1], "kind": "decision", "status": "superseded"}
        | {"title": "Use REST v2"}
    ]
    assert [(item.rel, item.id) for item in data.links_in] == [("supersedes", ids[3])]
    assert data.dangling == [] and data.cycles == []
    assert data.provenance["created_at"] and data.history == 0


def test_a_supersede_cycle_terminates_and_is_reported(project: Engram) -> None:
    a, b = raw("Tabs"), raw("Spaces")
    a["links"] = [{"rel": "supersedes", "to": b["id"]}]
    b["links"] = [{"rel": "supersedes", "to": a["id"]}]
    project.project_ws.store.put([a, b])
    data = project.why(a["id"])
    assert [item.id for item in data.supersedes] == [b["id"]]
    assert [item.id for item in data.superseded_by] == [b["id"]]
    assert data.cycles == [[a["id"], b["id"], a["id"]]]
    code = runner.invoke(app, ["-C", str(project.root), "why", a["id"]])
    assert code.exit_code == 0
    assert f"cycle: {a['id']} -> {b['id']} -> {a['id']}" in code.stdout


def test_a_dangling_link_is_reported_not_raised(project: Engram) -> None:
    missing = new_id()
    a = raw("Cache", links=[{"rel": "supersedes", "to": missing}, {"rel": "fixes", "to": missing}])
    project.project_ws.store.put([a])
    data = project.why(a["id"])
    assert data.supersedes == [] and data.links_out == []
    assert data.to_dict()["dangling"] == [
        {"from": a["id"], "rel": "supersedes", "to": missing},
        {"from": a["id"], "rel": "fixes", "to": missing},
    ]


def test_links_of_every_kind_in_and_out_and_provenance(project: Engram) -> None:
    rels = ("relates", "caused_by", "fixes", "derived_from", "contradicts")
    others = {rel: project.remember(f"Other {rel}", kind="fact").record["id"] for rel in rels}
    centre = project.remember(
        "Centre", kind="bugfix", links=[f"{rel}:{rid}" for rel, rid in others.items()]
    ).record
    pointing = {
        rel: project.remember(f"Points {rel}", links=[f"{rel}:{centre['id']}"]).record["id"]
        for rel in rels
    }
    a = raw(
        "Judged",
        source="adr:docs/adr/0001-rest.md",
        session_id="s-1",
        author="Ada",
        judgements=[{"verdict": "useful"}],
        history=[{"rev": 1, "title": "old"}],
        rev=2,
    )
    project.project_ws.store.put([a])
    data = project.why(centre["id"])
    assert sorted((item.rel, item.id) for item in data.links_out) == sorted(
        (rel, rid) for rel, rid in others.items()
    )
    assert sorted((item.rel, item.id) for item in data.links_in) == sorted(
        (rel, rid) for rel, rid in pointing.items()
    )
    assert data.supersedes == [] and data.superseded_by == []
    judged = project.why(a["id"])
    assert judged.provenance["adr"] == "docs/adr/0001-rest.md"
    assert judged.provenance["session_id"] == "s-1"
    assert judged.provenance["author"] == "Ada"
    assert judged.judgements == [{"verdict": "useful"}] and judged.history == 1


def test_related_ranks_links_then_files_then_tags_without_itself_or_tombstones(
    project: Engram,
) -> None:
    linked = project.remember("Linked", kind="fact").record["id"]
    me = project.remember(
        "Me", files=["src/auth"], tags=["auth", "security"], links=[f"relates:{linked}"]
    ).record["id"]
    same_file = project.remember("Same folder", files=["src/auth/login.py"]).record["id"]
    same_tag = project.remember("Same tag", tags=["auth"]).record["id"]
    gone = project.remember("Gone", tags=["auth", "security"]).record["id"]
    project.forget(gone)
    project.remember("Unrelated", files=["docs/x.md"], tags=["docs"])
    items = project.related(me)
    assert [item.id for item in items] == [linked, same_file, same_tag]
    assert items[0].reason == "link: relates"
    assert items[1].reason == "files: src/auth/login.py"
    assert items[2].reason == "tags: auth"
    assert items[0].score > items[1].score > items[2].score
    assert [item.id for item in project.related(me, limit=1)] == [linked]
    incoming = [item.id for item in project.related(linked)]
    assert incoming == [me]


def test_pure_functions_take_plain_records() -> None:
    a = raw("A", files=["x.py"])
    b = raw("B", files=["x.py"], tags=["t"], links=[{"rel": "supersedes", "to": a["id"]}])
    records = {a["id"]: a, b["id"]: b}

    def incoming(rid: str) -> list[tuple[str, str]]:
        return [
            (r["id"], link["rel"])
            for r in records.values()
            for link in r.get("links", [])
            if link["to"] == rid
        ]

    data = lineage(a, records.get, incoming)
    assert [item.id for item in data.superseded_by] == [b["id"]]
    assert [item.id for item in related(a, [a, b], incoming(a["id"]))] == [b["id"]]


def test_cli_why_and_related_human_and_json(project: Engram) -> None:
    ids = chain(project, 3)
    root = str(project.root)
    result = runner.invoke(app, ["-C", root, "why", ids[1]])
    assert result.exit_code == 0, result.stdout
    lines = result.stdout.splitlines()
    assert lines[0] == f"{ids[1]}  decision  [superseded]  Use REST v2"
    assert lines[1:5] == [
        "supersedes:",
        f"  {ids[0]}  decision  [superseded]  Use REST v1",
        "superseded by:",
        f"  {ids[2]}  decision  [active]  Use REST v3",
    ]
    assert "links out:" in lines and "links in:" in lines
    assert any(line.startswith("from: source ") for line in lines)
    result = runner.invoke(app, ["-C", root, "why", ids[1], "--json"])
    data = json.loads(result.stdout)
    assert [item["id"] for item in data["superseded_by"]] == [ids[2]]
    result = runner.invoke(app, ["-C", root, "related", ids[1], "--json", "--limit", "1"])
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)) == 1
    result = runner.invoke(app, ["-C", root, "related", ids[1]])
    assert "link: supersedes" in result.stdout
    result = runner.invoke(app, ["-C", root, "why", "zzzzzzzz"])
    assert result.exit_code != 0 and "Traceback" not in result.stdout + result.stderr


def test_mcp_why_and_related_over_stdio(project: Engram) -> None:
    ids = chain(project, 3)
    root: Path = project.root

    async def scenario() -> None:
        async with connect(root) as client:
            data = await client.ok("why", {"id": ids[1]})
            assert data["note"].startswith(FRAME)
            assert data["memory"]["id"] == ids[1][: len(data["memory"]["id"])]
            assert len(data["memory"]["id"]) < len(ids[1])
            assert [ids[0].startswith(item["id"]) for item in data["supersedes"]] == [True]
            assert [ids[2].startswith(item["id"]) for item in data["superseded_by"]] == [True]
            near = await client.ok("related", {"id": ids[1], "limit": 5})
            assert near["note"].startswith(FRAME)
            reasons = [item["reason"] for item in near["related"]]
            assert any(reason.startswith("link: supersedes") for reason in reasons), reasons
            await client.error("why", {"id": "zzzzzzzz"})

    run(scenario)


def test_related_finds_memories_of_similar_meaning(project: Engram) -> None:
    """With semantic search on, a paraphrase is a neighbour though it shares no file or tag."""
    from engram.index import semantic

    if not semantic.available():
        pytest.skip("the embedding model (engram-git[semantic]) is not installed")
    first = project.remember(
        "Store user sessions in Postgres", "Sessions live in the sessions table, not Redis."
    ).record
    twin = project.remember(
        "Keep login sessions in the Postgres database", "We do not put session state in Redis."
    ).record
    project.remember("Release notes are written in Markdown", "One file per version.")
    found = project.related(first["id"], limit=5)
    assert found and found[0].id == twin["id"]
    assert "similar text" in found[0].reason
