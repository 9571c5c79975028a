"""A mixed team converges as far as Go engram allows (issue 28).

One engram clone and one Go engram clone share a repository through a bare remote: real git
(clone, commit, pull with git's own merge, push), the engram CLI in subprocesses, the HTTP
server as a process. Go engram 1.7 cannot be built here (its module needs Go 1.25 and modules
no offline source has), so the Go clone's reads and writes are ``tests.helpers.gov17`` (Go
engram 1.7's sync, from its source: no sync_id, every imported row a new id, exports filtered by
the folder's project and by the newest chunk's time, its manifest written with MarshalIndent)
and ``tests.helpers.gosync`` (a Go engram with sync_ids and the mutation journal).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engram.formats.goimport import id_hex
from tests.conftest import run_cli
from tests.helpers.gosync import GoStore
from tests.helpers.gov17 import GoV17
from tests.helpers.serving import Served, free_port

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="needs git",
)

PROJECT = "shop-api"  # engram's name (config.yaml): not the folder's
FOLDER = "shop"  # the folder both clones live in: Go's name for the project
MANIFEST = Path(".engram") / "manifest.json"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ana",
    "GIT_AUTHOR_EMAIL": "ana@example.com",
    "GIT_COMMITTER_NAME": "Ana",
    "GIT_COMMITTER_EMAIL": "ana@example.com",
}


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
        timeout=120,
        check=False,
    )
    if check:
        assert done.returncode == 0, f"git {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


def cli(cwd: Path, *args: str) -> str:
    done = run_cli(*args, cwd=cwd)
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, f"engram {' '.join(args)}: {out}"
    return out


def records(root: Path) -> list[dict[str, Any]]:
    text = (root / ".engram" / "memories.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def live_titles(root: Path) -> list[str]:
    return sorted(r["title"] for r in records(root) if not r.get("deleted_at"))


def remember(root: Path, title: str, content: str, *extra: str) -> str:
    out = run_cli("remember", title, content, "--json", *extra, cwd=root)
    assert out.returncode == 0, out.stderr.decode()
    return str(json.loads(out.stdout)["id"])


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A", ".engram")
    if git(root, "diff", "--cached", "--quiet", check=False).returncode:
        git(root, "commit", "-q", "-m", message)


def team(tmp_path: Path) -> tuple[Path, Path]:
    """A bare remote, an engram clone and a Go clone of it (both in folders named FOLDER)."""
    bare = tmp_path / "team.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    ana = tmp_path / "ana" / FOLDER
    ana.parent.mkdir()
    git(tmp_path, "clone", "-q", str(bare), str(ana))
    cli(ana, "init", "--project", PROJECT)
    git(ana, "add", "-A")
    git(ana, "commit", "-q", "-m", "engram init")
    git(ana, "push", "-q", "origin", "HEAD:main")
    gopher = tmp_path / "gopher" / FOLDER
    gopher.parent.mkdir()
    git(tmp_path, "clone", "-q", str(bare), str(gopher))
    return ana, gopher


def pull(root: Path) -> None:
    git(root, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")


def push(root: Path) -> None:
    git(root, "push", "-q", "origin", "HEAD:main")


def tick() -> None:
    """Let a second pass: Go's times are whole seconds and its export filter is strict."""
    time.sleep(1.05)


def removed_lines(root: Path, *args: str) -> list[str]:
    diff = git(root, "diff", "-U0", *args, "--", str(MANIFEST)).stdout
    return [
        line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")
    ]


# -- 3. manifest.json: each tool adds lines to what the other wrote ---------------------------


def test_a_sync_only_adds_lines_to_a_manifest_go_wrote_and_go_only_adds_to_ours(
    tmp_path: Path,
) -> None:
    ana, gopher = team(tmp_path)
    go = GoV17(FOLDER)
    go.save("go-s1", "Use pnpm", "npm is not used here")
    tick()
    assert go.sync_export(gopher / ".engram") is not None
    written = (gopher / MANIFEST).read_text(encoding="utf-8")
    assert written.startswith('{\n  "version": 1,\n  "chunks": [\n    {\n      "id": ')
    assert not written.endswith("\n")  # MarshalIndent, no final newline
    commit(gopher, "go sync")
    push(gopher)

    pull(ana)
    remember(ana, "Retry with jitter", "exponential backoff plus jitter on 429")
    out = cli(ana, "sync")
    diff = git(ana, "diff", "--numstat", "--", str(MANIFEST)).stdout.split()
    assert int(diff[0]) > 0 and int(diff[1]) == 0, (diff, out)  # added lines, none removed
    assert removed_lines(ana) == []
    text = (ana / MANIFEST).read_text(encoding="utf-8")
    assert text.startswith(written[: written.index("[") + 1])  # Go's layout and version kept
    assert not text.endswith("\n")
    commit(ana, "engram sync")
    push(ana)

    # Go reads it, writes it back through its struct: again only added lines.
    pull(gopher)
    assert go.sync_import(gopher / ".engram") == 1
    assert sorted(o["title"] for o in go.live()) == ["Retry with jitter", "Use pnpm"]
    tick()
    go.save("go-s2", "Feature flags live in flags.yaml", "not in env vars")
    tick()
    assert go.sync_export(gopher / ".engram") is not None
    assert removed_lines(gopher) == []
    assert git(gopher, "diff", "--numstat", "--", str(MANIFEST)).stdout.split()[1] == "0"


def test_a_committed_conflict_in_the_manifest_is_read_as_both_sides_and_written_clean(
    tmp_path: Path,
) -> None:
    ana, gopher = team(tmp_path)
    bob = tmp_path / "bob" / FOLDER
    bob.parent.mkdir()
    git(tmp_path, "clone", "-q", str(tmp_path / "team.git"), str(bob))
    go, go_bob = GoV17(FOLDER), GoV17(FOLDER)
    go.save("go-s1", "Gopher's note", "from the first Go clone")
    go_bob.save("go-b1", "Bob's note", "from the second Go clone")
    tick()
    go.sync_export(gopher / ".engram", created_by="gopher")
    go_bob.sync_export(bob / ".engram", created_by="bob")
    commit(gopher, "go sync")
    push(gopher)
    commit(bob, "go sync")
    merged = git(bob, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main", check=False)
    assert merged.returncode != 0  # Go has no merge driver: git's line merge conflicts
    conflicted = (bob / MANIFEST).read_text(encoding="utf-8")
    assert "<<<<<<<" in conflicted and ">>>>>>>" in conflicted
    git(bob, "add", "-A")  # committed as it is, markers and all (it happens)
    git(bob, "commit", "-q", "--no-edit")
    push(bob)
    with pytest.raises(Exception, match="parse manifest"):
        GoV17(FOLDER).sync_import(bob / ".engram")  # Go's sync stops on it

    pull(ana)
    out = cli(ana, "sync")
    assert "conflict markers" in out and "union of both sides" in out, out
    manifest = json.loads((ana / MANIFEST).read_text(encoding="utf-8"))
    assert len(manifest["chunks"]) == 2  # both Go chunks (nothing of engram's to export)
    assert {"Gopher's note", "Bob's note"} <= set(live_titles(ana))
    commit(ana, "engram sync")
    push(ana)
    pull(gopher)
    fresh = GoV17(FOLDER)
    assert fresh.sync_import(gopher / ".engram") == 2  # Go reads it again
    assert {o["title"] for o in fresh.live()} == {"Gopher's note", "Bob's note"}


# -- 1. our memories come back through Go 1.7 without sync_id ---------------------------------


def test_our_memories_back_from_go_17_land_on_themselves_and_a_forgotten_one_stays_forgotten(
    tmp_path: Path,
) -> None:
    ana, gopher = team(tmp_path)
    ids = {t: remember(ana, t, f"why: {t}") for t in ("Cache for 60s", "Pin deps", "Use UTC")}
    cli(ana, "sync")
    commit(ana, "engram sync")
    push(ana)

    pull(gopher)
    go = GoV17(FOLDER)
    assert go.sync_import(gopher / ".engram") == 1
    assert sorted(o["title"] for o in go.live()) == sorted(ids)
    assert all("sync_id" not in o for o in go.observations.values())  # v1.7 has no such field
    tick()
    row = next(i for i, o in go.observations.items() if o["title"] == "Use UTC")
    go.update(row, content="why: Use UTC, and ISO 8601 in logs")  # a Go user's edit

    cli(ana, "forget", ids["Pin deps"])  # Go 1.7 cannot apply this forget
    before = len(records(ana))
    export = tmp_path / "go-export.json"
    export.write_text(json.dumps(go.export()), encoding="utf-8")  # renumbered, no sync_id
    out = cli(ana, "import", str(export), "--json")
    after = records(ana)
    assert len(after) == before, out  # nothing added
    assert live_titles(ana) == ["Cache for 60s", "Use UTC"]  # the forgotten one stays gone
    utc = next(r for r in after if r["id"] == ids["Use UTC"])
    assert utc["content"] == "why: Use UTC, and ISO 8601 in logs" and utc["rev"] == 2
    assert json.loads(cli(ana, "import", str(export), "--json"))["added"] == 0  # again: nothing


# -- 4. the folder's name reaches the same project ----------------------------------------------


def test_go_lists_our_memories_under_its_folder_name_and_we_file_its_rows_under_ours(
    tmp_path: Path,
) -> None:
    ana, gopher = team(tmp_path)
    remember(ana, "Money is integer cents", "never floats")
    cli(ana, "sync")
    commit(ana, "engram sync")
    push(ana)

    pull(gopher)
    go = GoV17(FOLDER)
    go.sync_import(gopher / ".engram")
    assert go.context_titles() == ["Money is integer cents"]  # FormatContext("shop") lists it
    tick()  # Go exports what was created after the newest chunk, to the second
    go.save("go-s1", "Deploys go through CI", "never from a laptop")
    tick()
    go.sync_export(gopher / ".engram")
    commit(gopher, "go sync")
    push(gopher)

    pull(ana)
    cli(ana, "sync")
    mine = {r["title"]: r for r in records(ana)}
    theirs = mine["Deploys go through CI"]
    assert theirs["project"] == PROJECT and theirs["go"]["project"] == FOLDER
    assert mine["Money is integer cents"]["project"] == PROJECT
    listed = json.loads(cli(ana, "recall", "CI laptop", "--json"))
    assert [hit["title"] for hit in listed["hits"]][:1] == ["Deploys go through CI"]


# -- 2. our edits and forgets of Go's memories ------------------------------------------------


def _chunk(engram_dir: Path, ident: str) -> dict[str, Any]:
    data = gzip.decompress((engram_dir / "chunks" / f"{ident}.jsonl.gz").read_bytes())
    value: dict[str, Any] = json.loads(data)
    return value


def test_edits_and_forgets_of_gos_memories_reach_go_as_its_mutation_journal(
    tmp_path: Path,
) -> None:
    ana, _ = team(tmp_path)
    engram_dir = ana / ".engram"
    newer = GoStore()  # a Go engram with sync_ids
    session = {
        "id": "go-s1",
        "project": FOLDER,
        "directory": "/w/shop",
        "started_at": "2026-03-04 05:06:07",
    }
    rows = [
        {
            "id": n,
            "sync_id": f"obs-{n:016x}",
            "session_id": "go-s1",
            "type": "decision",
            "title": title,
            "content": f"why: {title}",
            "project": FOLDER,
            "scope": "project",
            "revision_count": 1,
            "duplicate_count": 1,
            "created_at": "2026-03-04 05:06:07",
            "updated_at": "2026-03-04 05:06:07",
        }
        for n, title in ((1, "Edit me"), (2, "Forget me"), (3, "Leave me"))
    ]
    newer.sync_export(engram_dir, sessions=[session], observations=rows)
    newer.synced.clear()  # read back below from the chunks, its own first, as a fresh clone
    cli(ana, "sync")
    mine = {r["title"]: r["id"] for r in records(ana)}
    own = remember(ana, "Ours, later edited", "first text")
    cli(ana, "sync")
    cli(ana, "update", mine["Edit me"], "--content", "why: edited in engram")
    cli(ana, "forget", mine["Forget me"])
    cli(ana, "update", own, "--content", "second text")
    before = {e["id"] for e in json.loads((engram_dir / "manifest.json").read_text())["chunks"]}
    cli(ana, "sync")
    after = json.loads((engram_dir / "manifest.json").read_text())["chunks"]
    (new,) = [e["id"] for e in after if e["id"] not in before]
    chunk = _chunk(engram_dir, new)
    assert chunk["observations"] == []  # no second copy for a Go that adds every row
    journal = {(m["entity_key"], m["op"]) for m in chunk["mutations"]}
    assert journal == {
        ("obs-0000000000000001", "upsert"),
        ("obs-0000000000000002", "delete"),
        (f"obs-{id_hex(own)}", "upsert"),
    }
    for mutation in chunk["mutations"]:
        payload = json.loads(mutation["payload"])  # a JSON object in a string, as Go's
        assert payload["sync_id"] == mutation["entity_key"]
    assert newer.sync_import(engram_dir) >= 1
    assert newer.live()["obs-0000000000000001"]["content"] == "why: edited in engram"
    assert "obs-0000000000000002" not in newer.live()
    assert newer.live()[f"obs-{id_hex(own)}"]["content"] == "second text"
    assert newer.live()["obs-0000000000000003"]["content"] == "why: Leave me"


def test_doctor_says_which_changes_go_17_cannot_apply(tmp_path: Path) -> None:
    ana, gopher = team(tmp_path)
    go = GoV17(FOLDER)
    go.save("go-s1", "Go's first", "from Go 1.7")
    go.save("go-s1", "Go's second", "from Go 1.7")
    tick()
    go.sync_export(gopher / ".engram")
    commit(gopher, "go sync")
    push(gopher)
    pull(ana)
    own = remember(ana, "Ours", "first text")
    cli(ana, "sync")
    clean = run_cli("doctor", cwd=ana)
    assert "Go engram 1.7" not in clean.stdout.decode()  # nothing it cannot apply yet
    mine = {r["title"]: r["id"] for r in records(ana)}
    cli(ana, "update", mine["Go's first"], "--content", "edited here")
    cli(ana, "forget", mine["Go's second"])
    cli(ana, "update", own, "--content", "second text")
    cli(ana, "sync")
    said = run_cli("doctor", cwd=ana).stdout.decode()
    assert "Go engram 1.7 or older syncs in this repository (1 chunk without sync_ids" in said
    assert "2 memories edited and 1 memory forgotten here" in said, said


# -- 5. the HTTP routes answer as Go's do --------------------------------------------------------


def test_compat_routes_answer_delete_last_seen_and_context_as_go(tmp_path: Path) -> None:
    ana, _ = team(tmp_path)
    port = free_port()
    served = Served(
        [sys.executable, "-m", "engram", "serve", "--compat", "go-engram", "--port", str(port)],
        cwd=ana,
        env=os.environ,
        port=port,
        log=tmp_path / "serve.log",
    )
    try:
        api = served.client
        assert api.post("/sessions", json={"id": "s1", "project": FOLDER}).status_code == 201
        saved = {}
        for typ, title in (
            ("decision", "Use SQLite"),
            ("bugfix", "Fixed nil token panic"),
            ("discovery", "The cache is per process"),
        ):
            answer = api.post(
                "/observations",
                json={
                    "session_id": "s1",
                    "type": typ,
                    "title": title,
                    "content": f"{title}: details",
                    "project": FOLDER,
                },
            )
            assert answer.status_code == 201, answer.text
            saved[title] = answer.json()["id"]
        assert (
            api.post(
                "/prompts",
                json={"session_id": "s1", "content": "why is auth slow?", "project": FOLDER},
            ).status_code
            == 201
        )
        row = api.get(f"/observations/{saved['Use SQLite']}").json()
        assert isinstance(row["last_seen_at"], str) and len(row["last_seen_at"]) == 19
        gone = api.delete("/observations/424242")
        assert (gone.status_code, gone.json()) == (
            200,
            {"id": 424242, "status": "deleted", "hard_delete": False},
        )
        text = api.get("/context", params={"project": FOLDER}).json()["context"]
        assert text.startswith("## Memory from Previous Sessions\n\n### Recent Sessions\n")
        assert "### Recent User Prompts\n- " in text and "why is auth slow?" in text
        observations = text[text.index("### Recent Observations\n") :]
        for typ, title in (
            ("bugfix", "Fixed nil token panic"),
            ("discovery", "The cache is per process"),
            ("decision", "Use SQLite"),
        ):
            assert f"- [{typ}] **{title}**: {title}: details\n" in observations
    finally:
        log = served.stop()
    assert "Traceback" not in log, log


# -- six rounds of a mixed team ---------------------------------------------------------------


def _titles(root: Path) -> list[str]:
    return [r["title"] for r in records(root) if not r.get("deleted_at")]


def _id_of(root: Path, title: str) -> str:
    (found,) = [r["id"] for r in records(root) if r.get("title") == title]
    return found


def _row_of(go: GoV17, title: str) -> int:
    (found,) = [i for i, o in go.observations.items() if o["title"] == title]
    return found


@pytest.mark.slow
def test_six_rounds_of_a_mixed_team_converge_as_far_as_go_17_allows(tmp_path: Path) -> None:
    ana, gopher = team(tmp_path)
    go = GoV17(FOLDER)
    # What each side should show, live: engram applies every change it receives; Go 1.7
    # applies none (no sync_id): it keeps what engram forgot, and only its own deletes count.
    want_engram: set[str] = set()
    want_go: set[str] = set()
    figures = []
    for r in range(1, 7):
        # engram: its work, committed, then the Go clone's push merged in (the merge driver).
        ours = [f"E{r}a engram memory", f"E{r}b engram memory"]
        for title in ours:
            remember(ana, title, f"written by engram in round {r}")
        want_engram |= set(ours)
        want_go |= set(ours)
        if r == 2:
            cli(ana, "forget", _id_of(ana, "E1a engram memory"))  # ours, Go has it
            want_engram.discard("E1a engram memory")
        if r == 3:
            cli(ana, "update", _id_of(ana, "G1a go memory"), "--content", "edited in engram")
        if r == 4:
            cli(ana, "forget", _id_of(ana, "G2b go memory"))  # Go's, Go 1.7 keeps it
            want_engram.discard("G2b go memory")
        if r == 5:
            cli(ana, "update", _id_of(ana, "E3a engram memory"), "--content", "edited twice")
        cli(ana, "sync")
        commit(ana, f"engram round {r}")
        pull(ana)
        cli(ana, "sync")
        commit(ana, f"engram round {r}, Go's merged")
        push(ana)
        seen = _titles(ana)
        assert sorted(seen) == sorted(want_engram), r
        assert len(seen) == len(set(seen)), f"round {r}: duplicates in engram"
        engram_figures = (len(want_engram), len(seen), len(seen) - len(set(seen)))

        # Go 1.7: pull, import, its work, export.
        pull(gopher)
        go.sync_import(gopher / ".engram")
        tick()  # Go exports only what was created after the newest chunk, to the second
        theirs = [f"G{r}a go memory", f"G{r}b go memory"]
        for title in theirs:
            go.save(f"go-s{r}", title, f"written by Go in round {r}")
        want_go |= set(theirs)
        want_engram |= set(theirs)
        if r == 3:
            go.update(_row_of(go, "E1b engram memory"), content="edited in Go")
        if r == 5:
            go.delete(_row_of(go, "G4a go memory"))  # exported last round: its sync sends no delete
            want_go.discard("G4a go memory")
        tick()
        go.sync_export(gopher / ".engram")
        commit(gopher, f"go round {r}")
        push(gopher)
        seen_go = [o["title"] for o in go.live()]
        assert sorted(seen_go) == sorted(want_go), r
        assert len(seen_go) == len(set(seen_go)), f"round {r}: duplicates in Go"
        go_figures = (len(want_go), len(seen_go), len(seen_go) - len(set(seen_go)))
        figures.append((r, *engram_figures, *go_figures))

    # A last pull on both sides, then the Go user shares a full `engram export` (every row
    # renumbered, no sync_id): engram's own memories come back, and must not be added.
    pull(ana)
    cli(ana, "sync")
    go_file = tmp_path / "go-export.json"
    go_file.write_text(json.dumps(go.export()), encoding="utf-8")
    imported = json.loads(cli(ana, "import", str(go_file), "--json"))
    assert imported["added"] == 0, imported
    want_engram.discard("G4a go memory")  # Go's delete: its export file carries it
    pull(gopher)
    go.sync_import(gopher / ".engram")

    seen = _titles(ana)
    seen_go = [o["title"] for o in go.live()]
    assert sorted(seen) == sorted(want_engram) and len(seen) == len(set(seen)) == 21
    assert sorted(seen_go) == sorted(want_go) and len(seen_go) == len(set(seen_go)) == 23
    assert sorted(o["title"] for o in go.live() if o["project"] == FOLDER) == sorted(seen_go)
    by_title = {r["title"]: r for r in records(ana)}
    assert by_title["G1a go memory"]["content"] == "edited in engram"
    assert by_title["E1b engram memory"]["content"] == "edited in Go"  # came in by the export
    assert by_title["E1a engram memory"].get("deleted_at")  # forgotten stays forgotten
    assert by_title["G4a go memory"].get("deleted_at")  # by the export, not by its chunks
    assert by_title["G2b go memory"].get("deleted_at")  # Go's live copy did not revive it
    said = run_cli("doctor", cwd=ana).stdout.decode()
    assert "Go engram 1.7 or older syncs in this repository" in said, said
    figures.append(("end", len(want_engram), len(seen), 0, len(want_go), len(seen_go), 0))
    # round: engram expected, seen, duplicates; Go expected, seen, duplicates (pytest -s)
    print("mixed team:", figures)


def test_two_of_our_memories_saved_in_one_second_come_back_each_onto_its_own() -> None:
    from engram.formats.goimport import GoKnown, convert_go

    def ours(n: int, title: str) -> dict[str, Any]:
        stamp = f"2026-05-06T07:08:09.{n:03d}Z"  # one second, as Go keeps it
        return {
            "id": f"own{n}" + "a" * 22,
            "kind": "decision",
            "title": title,
            "content": f"why: {title}",
            "project": PROJECT,
            "scope": "project",
            "created_at": stamp,
            "updated_at": stamp,
            "rev": 1,
        }

    first, second = ours(1, "First in the second"), ours(2, "Second in the second")
    known = GoKnown([first, second])
    rows = [  # Go 1.7's export: new ids, no sync_id; a Go user edited one content, one title
        {
            "id": 7,
            "session_id": f"engram-{PROJECT}",
            "type": "decision",
            "title": "First in the second",
            "content": "edited in Go",
            "project": FOLDER,
            "scope": "project",
            "created_at": "2026-05-06 07:08:09",
            "updated_at": "2026-05-06 09:00:00",
        },
        {
            "id": 8,
            "session_id": f"engram-{PROJECT}",
            "type": "decision",
            "title": "Renamed in Go",
            "content": "why: Second in the second",
            "project": FOLDER,
            "scope": "project",
            "created_at": "2026-05-06 07:08:09",
            "updated_at": "2026-05-06 09:00:00",
        },
    ]
    done = convert_go({"observations": rows}, project=PROJECT, known=known, go_names=[FOLDER])
    by_id = {r["id"]: r for r in done.records}
    assert sorted(by_id) == sorted([first["id"], second["id"]])  # nothing new
    assert by_id[first["id"]]["content"] == "edited in Go"
    assert by_id[second["id"]]["title"] == "Renamed in Go"
