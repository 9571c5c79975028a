"""Sync end to end: a bare remote and three clones, chunks, the merge driver, resolve, imports.

Real git repositories in tmp_path (made with dulwich, as engram itself works); the real `git`
binary where git itself must run the merge driver (skipped when it is not installed).
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dulwich.repo import Repo

from engram.errors import NotFound
from engram.model import canonical_line
from engram.service import Engram
from engram.store import MemoryStore
from tests.conftest import run_cli
from tests.helpers.records import clone

GIT = shutil.which("git")


@pytest.fixture
def clones(tmp_path: Path) -> list[Engram]:
    remote = tmp_path / "remote.git"
    Repo.init_bare(str(remote), mkdir=True).close()
    made = [clone(tmp_path, name, remote) for name in ("a", "b", "c")]
    yield made
    for engram in made:
        engram.close()


def _bytes(engram: Engram) -> bytes:
    return engram.project_ws.store.path.read_bytes()


def _by_id(engram: Engram) -> dict[str, dict[str, object]]:
    return {str(r["id"]): r for r in engram.project_ws.store.read_all()}


def _texts(record: dict[str, object]) -> set[str]:
    """Every text a record holds: its own, earlier versions and concurrent edits kept."""
    out = {str(record.get("content", ""))}
    for key in ("history", "conflicts"):
        for item in record.get(key) or []:  # type: ignore[attr-defined]
            out.add(str(item.get("content", "")))
    return out


def carry(src: Engram, dst: Engram) -> None:
    """Copy the sync chunks one clone has and another lacks, as a file share would."""
    for path in (src.root / ".engram" / "chunks").glob("*.jsonl.gz"):
        target = dst.root / ".engram" / "chunks" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            shutil.copyfile(path, target)


def test_three_clones_converge_through_a_remote_losing_nothing(clones: list[Engram]) -> None:
    a, b, c = clones
    made = {
        name: [
            engram.remember(f"{name} memory {n}", f"written on {name}, number {n}").record
            for n in range(3)
        ]
        for name, engram in zip("abc", clones, strict=True)
    }
    for engram in (a, b, c, a, b):
        report = engram.sync(remote="origin")
        assert report.to_dict()["remote"]["pushed"], report
    assert _bytes(a) == _bytes(b) == _bytes(c)
    assert len(_by_id(a)) == 9

    # Concurrent work: the same memory edited on two clones (different fields, and both texts),
    # another forgotten on a third, new memories everywhere.
    shared = made["a"][0]["id"]
    a.update(shared, tags=["money"])
    b.update(shared, importance=5)
    a.update(made["b"][1]["id"], content="edited on a")
    b.update(made["b"][1]["id"], content="edited on b")
    c.forget(made["a"][2]["id"])
    extra = [e.remember(f"late {e.root.name}", "after the first sync").record for e in clones]

    for engram in (c, b, a, c, b, a):
        assert engram.sync(remote="origin").to_dict()["remote"]["pushed"]
    assert _bytes(a) == _bytes(b) == _bytes(c)
    final = _by_id(a)
    # Field-level three-way merge: both sides' field changes are kept.
    assert final[shared]["tags"] == ["money"] and final[shared]["importance"] == 5
    # Both concurrent texts survive: one wins, the other is kept on the memory.
    both = final[made["b"][1]["id"]]
    assert {"edited on a", "edited on b"} <= _texts(both)
    assert both.get("conflicts")
    # The delete travelled and was not undone.
    assert final[made["a"][2]["id"]].get("deleted_at")
    assert all(record["id"] in final for record in extra)
    # A sync with nothing new changes nothing and pushes nothing new.
    before = _bytes(a)
    again = a.sync(remote="origin")
    assert again.exported == 0 and _bytes(a) == before


def test_chunks_carry_changes_between_clones_that_share_no_branch(tmp_path: Path) -> None:
    """Two stores that only exchange .engram/chunks (copied by hand, a USB stick, a share)."""
    one, _ = Engram.init(tmp_path / "one", "ledger")
    two, _ = Engram.init(tmp_path / "two", "ledger")
    with one, two:
        kept = one.remember("Amounts are integer cents", "never floats", kind="decision").record
        doomed = one.remember("Temporary note", "to be forgotten").record
        first = one.sync()
        assert first.exported == 2 and first.exported_chunk

        carry(one, two)
        got = two.sync()
        assert got.imported.added == 2 and got.exported == 0
        assert two.get(kept["id"])["title"] == kept["title"]
        # Edits and deletes travel too, not only additions.
        two.update(kept["id"], content="never floats; round half-even")
        one.forget(doomed["id"])
        assert two.sync().exported == 1
        assert one.sync().exported == 1
        carry(two, one)
        carry(one, two)
        one.sync()
        two.sync()
        assert _bytes(one) == _bytes(two)
        assert one.get(kept["id"])["content"] == "never floats; round half-even"
        assert MemoryStore(two.root / ".engram").read_all()[0]  # readable
        assert {r["id"]: bool(r.get("deleted_at")) for r in two.project_ws.store.read_all()}[
            doomed["id"]
        ]
        # Importing the same chunks twice changes nothing.
        before = _bytes(two)
        (two.root / ".engram" / "state" / "sync.json").unlink()
        assert two.sync().imported.updated == 0
        assert _bytes(two) == before
        status = two.sync_status()
        assert status.pending_import == [] and status.chunks == 3


def test_a_hostile_chunk_is_refused_and_nothing_is_touched(tmp_path: Path) -> None:
    engram, _ = Engram.init(tmp_path / "p", "ledger")
    with engram:
        engram.remember("Keep me", "safe")
        engram.sync()
        chunks = engram.root / ".engram" / "chunks"
        # Content that does not match its name, and a gzip bomb.
        forged = json.dumps({"id": "x" * 26, "kind": "note", "title": "forged"}).encode()
        (chunks / ("0" * 32 + ".jsonl.gz")).write_bytes(gzip.compress(forged + b"\n"))
        (chunks / ("1" * 32 + ".jsonl.gz")).write_bytes(
            gzip.compress(b"\n" * (80 * 1024 * 1024), compresslevel=9)
        )
        before = _bytes(engram)
        report = engram.sync()
        assert len(report.problems) == 2
        text = " ".join(report.problems)
        assert "0" * 32 in text and "1" * 32 in text
        assert _bytes(engram) == before


@pytest.mark.skipif(GIT is None, reason="needs the git binary to run a merge")
def test_git_merges_branches_through_the_driver_and_resolve_repairs_a_plain_merge(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    root.mkdir()

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=T", "-c", "user.email=t@x", *args],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode in (0, 1), done.stderr
        return done.stdout + done.stderr

    git("init", "-q", "-b", "main")
    engram, _ = Engram.init(root, "ledger")
    # git runs the driver as a shell command: point it at this interpreter's engram.
    engram.git_setup(install=True, command=f"{sys.executable} -m engram")
    shared = engram.remember("Shared decision", "first text", kind="decision").record
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    git("checkout", "-q", "-b", "feature")
    engram.update(shared["id"], tags=["feature-side"])
    ours = engram.remember("Added on feature", "feature text").record
    git("commit", "-q", "-am", "feature")
    git("checkout", "-q", "main")
    engram.update(shared["id"], importance=4)
    theirs = engram.remember("Added on main", "main text").record
    git("commit", "-q", "-am", "main")
    out = git("merge", "-q", "feature", "-m", "merge")
    assert "CONFLICT" not in out, out
    merged = {r["id"]: r for r in MemoryStore(root / ".engram").read_all()}
    assert {ours["id"], theirs["id"], shared["id"]} <= set(merged)
    assert merged[shared["id"]]["tags"] == ["feature-side"]
    assert merged[shared["id"]]["importance"] == 4
    assert MemoryStore(root / ".engram").scan().canonical

    # Without the driver (a hosted merge, a fresh clone): both sides edit the same memory.
    git("config", "--remove-section", "merge.engram")
    git("checkout", "-q", "-b", "other")
    engram.update(shared["id"], content="text from other")
    git("commit", "-q", "-am", "other")
    git("checkout", "-q", "main")
    engram.update(shared["id"], content="text from main")
    git("commit", "-q", "-am", "main again")
    out = git("merge", "-q", "other", "-m", "merge other")
    assert "CONFLICT" in out
    fixed = run_cli("resolve", cwd=root)
    assert fixed.returncode == 0, fixed.stderr.decode()
    assert "resolved .engram/memories.jsonl" in fixed.stdout.decode()
    status = git("status", "--porcelain")
    assert "UU" not in status
    record = {r["id"]: r for r in MemoryStore(root / ".engram").read_all()}[shared["id"]]
    assert {"text from other", "text from main"} <= _texts(record)
    doctor = run_cli("doctor", cwd=root)
    assert "concurrent edit" in doctor.stdout.decode()
    # The history of that memory across the commits.
    history = run_cli("log", shared["id"][:8], "--json", cwd=root)
    versions = json.loads(history.stdout)
    assert "added" in [v["change"] for v in versions], versions
    assert len(versions) >= 4


def test_import_detects_go_engram_and_mcp_memory_files(tmp_path: Path) -> None:
    engram, _ = Engram.init(tmp_path / "p", "ledger")
    go = {
        "version": "1",
        "exported_at": "2026-01-02 03:04:05",
        "sessions": None,
        "observations": [
            {
                "sync_id": "obs-1",
                "type": "decision",
                "title": "Use Postgres advisory locks",
                "content": "for the nightly jobs",
                "project": "ledger",
                "created_at": "2026-01-02 03:04:05",
                "updated_at": "2026-01-02 03:04:05",
                "surprise": "ignored",
            }
        ],
        "prompts": [],
    }
    go_file = tmp_path / "go-export.json"
    go_file.write_text(json.dumps(go), encoding="utf-8")
    graph = tmp_path / "memory.jsonl"
    graph.write_text(
        "\n".join(
            json.dumps(line)
            for line in (
                {
                    "type": "entity",
                    "name": "billing",
                    "entityType": "module",
                    "observations": ["owns invoices"],
                },
                {
                    "type": "entity",
                    "name": "ledger",
                    "entityType": "module",
                    "observations": ["double entry"],
                },
                {"type": "relation", "from": "billing", "to": "ledger", "relationType": "uses"},
            )
        )
        + "\n",
        encoding="utf-8",
    )
    with engram:
        first = run_cli("import", str(go_file), "--json", cwd=engram.root)
        assert json.loads(first.stdout)["added"] == 1, first.stderr
        again = run_cli("import", str(go_file), "--json", cwd=engram.root)
        assert json.loads(again.stdout) | {"errors": []} == {
            "format": "go-engram-export",
            "added": 0,
            "updated": 0,
            "unchanged": 1,
            "skipped": 0,
            "errors": [],
            "notes": [],
            "personal": 0,
        }
        graph_out = json.loads(run_cli("import", str(graph), "--json", cwd=engram.root).stdout)
        assert (graph_out["format"], graph_out["added"]) == ("mcp-memory", 2)
        hits = engram.recall("advisory locks")
        assert hits and hits[0].record["kind"] == "decision"
        billing = next(r for r in engram.project_ws.store.read_all() if r["title"] == "billing")
        assert billing["links"][0]["rel"] == "relates"
        garbage = tmp_path / "garbage.bin"
        garbage.write_bytes(b"\x00\x01 not anything")
        bad = run_cli("import", str(garbage), cwd=engram.root)
        assert bad.returncode == 1 and "garbage.bin" in bad.stderr.decode()
        assert canonical_line(engram.get(hits[0].id)).endswith(b"\n")


def test_personal_store_follows_a_person_through_its_own_remote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two machines: each has its own ENGRAM_HOME, a git repository with the same remote."""
    remote = tmp_path / "personal.git"
    Repo.init_bare(str(remote), mkdir=True).close()
    stores = []
    for machine in ("laptop", "desktop"):
        home = tmp_path / machine / ".engram"
        home.mkdir(parents=True)
        repo = Repo.init(str(home))
        config = repo.get_config()
        config.set((b"remote", b"origin"), b"url", str(remote).encode())
        config.write_to_path()
        repo.close()
        monkeypatch.setenv("ENGRAM_HOME", str(home))
        project, _ = Engram.init(tmp_path / machine / "work", "ledger")
        stores.append(project)
    laptop, desktop = stores
    with laptop, desktop:
        mine = laptop.remember("I prefer small commits", scope="personal", project="*").record
        assert laptop.sync(scope="personal", remote="origin").to_dict()["remote"]["pushed"]
        got = desktop.sync(scope="personal", remote="origin")
        assert got.to_dict()["remote"]["pulled"]["memories"]["added"] == 1
        assert [hit.id for hit in desktop.recall("small commits")] == [mine["id"]]
        # Nothing of the personal store went into the project's repository.
        assert not list((desktop.root / ".engram").glob("**/*small*"))
        assert "small commits" not in (desktop.root / ".engram" / "memories.jsonl").read_text()


def test_mcp_admin_sync_tool_reports(tmp_path: Path) -> None:
    from engram.mcp_server import EngramMCP

    engram, _ = Engram.init(tmp_path / "p", "ledger")
    engram.remember("Something to share", "text")
    engram.close()
    with EngramMCP(tmp_path / "p", profile="admin") as server:
        text, error = server.call("sync", {})
        assert not error, text
        assert json.loads(text)["exported"] == 1
        text, error = server.call("sync", {"status": True})
        payload = json.loads(text)
        assert not error and payload["chunks"] == 1 and payload["pending_export"] == 0
        text, error = server.call("sync", {"remote": "nowhere"})
        assert error and "not in a git repository" in json.loads(text)["message"]


# -- forget against edit, by time (issue 13): real git, real pulls, the installed driver -------


class Clock:
    """The wall clock engram reads (engram.model.now), set by the test: one clone's may lag."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import engram.model
        import engram.sync.exchange
        import engram.sync.transfer

        self.value = "2026-03-01T10:00:00.000Z"
        modules = (engram.model, engram.sync.exchange, engram.sync.transfer)
        for module in modules:
            monkeypatch.setattr(module, "now", lambda: self.value)

    def at(self, value: str) -> None:
        self.value = value


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@x", "-c", "pull.rebase=false", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def _two_clones_of_one_memory(tmp_path: Path, clock: Clock) -> tuple[Engram, Engram, str]:
    """A bare remote; clone a saves a memory and pushes; clone b clones it. Drivers installed."""
    import shlex

    remote = tmp_path / "remote.git"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    _git(tmp_path, "init", "-q", "-b", "main", str(tmp_path / "a"))
    a, _ = Engram.init(tmp_path / "a", "ledger")
    command = f"{shlex.quote(sys.executable)} -m engram"  # git runs the driver in a shell
    a.git_setup(install=True, command=command)
    clock.at("2026-03-01T10:00:00.000Z")
    rid = str(a.remember("Deploy window", "Fridays after 16:00.", kind="decision").record["id"])
    _git(a.root, "add", "-A")
    _git(a.root, "commit", "-q", "-m", "a memory")
    _git(a.root, "remote", "add", "origin", str(remote))
    _git(a.root, "push", "-q", "-u", "origin", "main")
    _git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "b"))
    b = Engram(tmp_path / "b")
    b.git_setup(install=True, command=command)
    assert b.get(rid)["content"] == "Fridays after 16:00."
    return a, b, rid


def _edit_twice_and_push(a: Engram, rid: str, clock: Clock) -> None:
    clock.at("2026-03-01T10:00:10.000Z")
    a.update(rid, content="Thursdays after 14:00.")
    clock.at("2026-03-01T10:00:20.000Z")
    a.update(rid, content="Thursdays after 15:00.")
    _git(a.root, "commit", "-q", "-am", "edited twice")
    _git(a.root, "push", "-q")


@pytest.mark.skipif(GIT is None, reason="needs the git binary to run the merge driver")
def test_a_forget_made_after_two_edits_stays_forgotten_after_git_pull(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report: edited twice on one clone (rev 3), forgotten a second later on another
    clone that had only the original (rev 2); the pull used to bring it back, text included."""
    clock = Clock(monkeypatch)
    a, b, rid = _two_clones_of_one_memory(tmp_path, clock)
    with a, b:
        _edit_twice_and_push(a, rid, clock)
        clock.at("2026-03-01T10:00:21.000Z")
        b.forget(rid)
        _git(b.root, "commit", "-q", "-am", "forgotten")
        _git(b.root, "pull", "-q", "--no-edit")  # the merge driver merges memories.jsonl
        assert _git(b.root, "status", "--porcelain") == ""
        _git(b.root, "push", "-q")
        _git(a.root, "pull", "-q", "--no-edit")
        assert _bytes(a) == _bytes(b)
        for clone in (a, b):
            with pytest.raises(NotFound, match="forgotten"):
                clone.get(rid)
            assert clone.recall("Thursdays") == []
            record = _by_id(clone)[rid]
            assert record["deleted_at"] == "2026-03-01T10:00:21.000Z"
            # the edits it had not seen are kept where a user can restore them
            assert [c["content"] for c in record["conflicts"]] == ["Thursdays after 15:00."]
            assert {"Thursdays after 14:00.", "Fridays after 16:00."} <= _texts(record)
        shown = run_cli("get", rid[:8], cwd=a.root)
        assert shown.returncode != 0
        assert "keeps 1 edit(s) made on another clone" in shown.stderr.decode()


@pytest.mark.skipif(GIT is None, reason="needs the git binary to run the merge driver")
def test_edits_made_after_a_forget_bring_it_back_with_the_forget_noted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    a, b, rid = _two_clones_of_one_memory(tmp_path, clock)
    with a, b:
        clock.at("2026-03-01T10:00:05.000Z")
        b.forget(rid)
        _git(b.root, "commit", "-q", "-am", "forgotten")
        _edit_twice_and_push(a, rid, clock)  # later, without having seen the forget
        _git(b.root, "pull", "-q", "--no-edit")
        _git(b.root, "push", "-q")
        _git(a.root, "pull", "-q", "--no-edit")
        assert _bytes(a) == _bytes(b)
        for clone in (a, b):
            record = clone.get(rid)
            assert record["content"] == "Thursdays after 15:00."
            notes = [c for c in record["conflicts"] if "deleted_at" in c]
            assert [n["deleted_at"] for n in notes] == ["2026-03-01T10:00:05.000Z"]
        doctor = run_cli("doctor", cwd=b.root)
        assert rid[:8] in doctor.stdout.decode() and "forgotten" in doctor.stdout.decode()
        shown = run_cli("get", rid[:8], cwd=a.root).stdout.decode()
        assert "forgotten on another clone at 2026-03-01T10:00:05.000Z" in shown
        # Forgotten again, after seeing the edits: that forget is the last change everywhere.
        clock.at("2026-03-01T09:00:00.000Z")  # even on a clock an hour behind
        b.forget(rid)
        _git(b.root, "commit", "-q", "-am", "forgotten again")
        _git(b.root, "push", "-q")
        _git(a.root, "pull", "-q", "--no-edit")
        for clone in (a, b):
            with pytest.raises(NotFound, match="forgotten"):
                clone.get(rid)


def test_a_forget_on_a_clock_an_hour_behind_beats_the_edits_it_saw_through_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks merge two-way, with no common ancestor: only the change times order them."""
    clock = Clock(monkeypatch)
    one, _ = Engram.init(tmp_path / "one", "ledger")
    two, _ = Engram.init(tmp_path / "two", "ledger")

    with one, two:
        rid = one.remember("Deploy window", "Fridays after 16:00.").record["id"]
        clock.at("2026-03-01T10:00:10.000Z")
        one.update(rid, content="Thursdays after 14:00.")
        clock.at("2026-03-01T10:00:20.000Z")
        one.update(rid, content="Thursdays after 15:00.")
        one.sync()
        carry(one, two)
        two.sync()  # two has seen both edits ...
        clock.at("2026-03-01T09:00:21.000Z")  # ... and its clock is an hour behind
        gone = two.forget(rid)
        assert gone["updated_at"] == "2026-03-01T10:00:20.001Z"
        two.sync()
        carry(two, one)
        one.sync()
        one.sync()
        carry(one, two)
        two.sync()
        assert _bytes(one) == _bytes(two)
        for clone in (one, two):
            with pytest.raises(NotFound, match="forgotten"):
                clone.get(rid)
