"""The people-facing commands over a real store: projects and the Obsidian export, via the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import frontmatter

from engram.service import Engram
from tests.conftest import run_cli


def test_projects_list_consolidate_merge_and_prune(project: Engram) -> None:
    root = project.root
    for name in ("ledger-api", "Ledger_API", "ledgr-api", "billing"):
        project.remember(f"A memory of {name}", f"text for {name}", project=name)
    project.remember("Another billing fact", "invoices are monthly", project="billing")
    listed = json.loads(run_cli("projects", "list", "--json", cwd=root).stdout)
    counts = {row["name"]: row["memories"] for row in listed}
    assert counts["billing"] == 2 and counts["ledger-api"] == 1 and counts["ledger_api"] == 1

    dry = run_cli("projects", "consolidate", "--dry-run", "--json", cwd=root)
    plan = json.loads(dry.stdout)
    assert [sorted(g["names"]) for g in plan["groups"]] == [
        ["ledger-api", "ledger_api", "ledgr-api"]
    ]
    assert all(merge["dry_run"] for merge in plan["merges"])
    done = run_cli("projects", "consolidate", "--yes", cwd=root)
    assert done.returncode == 0 and "merged" in done.stdout.decode()
    after = {row.name: row.memories for row in project.projects()}
    assert sum(count for name, count in after.items() if "led" in name) == 3
    assert len([name for name in after if "led" in name]) == 1

    moved = run_cli("projects", "merge", "billing", "finance", "--json", cwd=root)
    assert json.loads(moved.stdout)["moved"] == {"project": 2}
    assert "billing" not in {row.name for row in project.projects()}
    bad = run_cli("projects", "merge", "finance", cwd=root)
    assert bad.returncode == 1 and "error:" in bad.stderr.decode()

    project.session_start("s-old", project="retired")
    pruned = json.loads(run_cli("projects", "prune", "--json", cwd=root).stdout)
    assert pruned["pruned"] == ["retired"]


def test_obsidian_export_through_the_cli_is_incremental(project: Engram, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / "Daily").mkdir(parents=True)
    mine = vault / "Daily" / "2026-11-29.md"
    mine.write_text("my own note\n", encoding="utf-8")
    first = project.remember("Amounts are integer cents", "never floats", kind="decision").record
    later = project.remember(
        "Cents everywhere, also in reports",
        "reports too",
        kind="decision",
        links=[f"supersedes:{first['id']}"],
        files="reports/export.py",
    ).record
    out = run_cli("obsidian-export", "--vault", str(vault), "--json", cwd=project.root)
    result = json.loads(out.stdout)
    assert len(result["written"]) == 2 and result["hubs"]
    note = next(p for p in vault.rglob("*.md") if later["id"][:8] in p.name)
    post = frontmatter.load(note)
    assert post["id"] == later["id"] and post["kind"] == "decision"
    assert "[[" in post.content and "supersedes" in post.content
    again = json.loads(
        run_cli("obsidian-export", "--vault", str(vault), "--json", cwd=project.root).stdout
    )
    assert again["written"] == [] and again["unchanged"] == 2
    project.forget(first["id"])
    third = json.loads(
        run_cli("obsidian-export", "--vault", str(vault), "--json", cwd=project.root).stdout
    )
    assert len(third["removed"]) >= 1
    assert mine.read_text(encoding="utf-8") == "my own note\n"
