"""Paths as agents send them: absolute inside the repository, or relative to the current folder.

One rule (``engram.model.repo_path`` through ``Project.repo_paths``) for every adapter: stored
repo-relative, and a path outside the repository is refused with the root named. Driven as an
agent does: the CLI as a process from the root and from a subfolder, and a real MCP session.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engram.errors import InvalidInput
from engram.model import repo_path
from engram.service import Engram
from tests.conftest import run_cli
from tests.mcp_server.test_mcp import connect, run


def test_repo_path_takes_absolute_and_folder_relative_paths(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "ledger").mkdir(parents=True)
    assert repo_path(str(root / "src" / "a.py"), root) == "src/a.py"
    assert repo_path(str(root / "src" / "**" / "models.py"), root) == "src/**/models.py"
    assert repo_path("money.py", root, root / "ledger") == "ledger/money.py"
    assert repo_path("../app.py", root, root / "ledger") == "app.py"
    assert repo_path("./src/a.py", root, root) == "src/a.py"
    assert repo_path("src/a.py", root, tmp_path / "elsewhere") == "src/a.py"  # cwd outside: root
    link = tmp_path / "link"
    link.symlink_to(root)  # the agent's path runs through a symlink to the repository
    assert repo_path(str(link / "ledger" / "money.py"), root) == "ledger/money.py"


@pytest.mark.parametrize(
    ("value", "cwd"),
    [("/etc/passwd", None), ("../../outside.py", "ledger"), ("C:/work/a.py", None)],
)
def test_repo_path_refuses_paths_outside_and_names_the_root(
    tmp_path: Path, value: str, cwd: str | None
) -> None:
    root = tmp_path / "repo"
    (root / "ledger").mkdir(parents=True)
    with pytest.raises(InvalidInput) as caught:
        repo_path(value, root, root / cwd if cwd else None)
    assert str(root) in caught.value.message and value in caught.value.message


def test_cli_stores_absolute_and_subfolder_paths_repo_relative(project: Engram) -> None:
    root = project.root
    (root / "ledger").mkdir()
    absolute = str(root / "app" / "pay.py")
    done = run_cli("-C", str(root), "remember", "Pin the api version", "--files", absolute)
    assert done.returncode == 0, done.stderr.decode()
    done = run_cli("remember", "Money is integer cents", "--files", "money.py", cwd=root / "ledger")
    assert done.returncode == 0, done.stderr.decode()
    lines = project.project_ws.store.path.read_text().splitlines()
    stored = {r["title"]: r["files"] for r in map(json.loads, lines)}
    assert stored == {
        "Pin the api version": ["app/pay.py"],
        "Money is integer cents": ["ledger/money.py"],
    }
    # check and recall take the same paths: absolute, and from the subfolder
    done = run_cli("-C", str(root), "check", "--json", "--files", str(root / "ledger" / "money.py"))
    assert done.returncode == 0, done.stderr.decode()
    assert [f["title"] for f in json.loads(done.stdout)["findings"]] == ["Money is integer cents"]
    done = run_cli("recall", "--json", "--file", "money.py", cwd=root / "ledger")
    assert done.returncode == 0, done.stderr.decode()
    assert [hit["title"] for hit in json.loads(done.stdout)["hits"]] == ["Money is integer cents"]


def test_cli_refuses_a_path_outside_the_repository_naming_the_root(project: Engram) -> None:
    root = project.root
    done = run_cli("-C", str(root), "remember", "Outside", "--files", "/etc/hosts")
    assert done.returncode != 0
    message = done.stderr.decode()
    assert "/etc/hosts" in message and str(root) in message and "Traceback" not in message
    assert not project.project_ws.store.path.read_text().strip()  # nothing was saved


def test_mcp_session_takes_the_absolute_paths_agents_send(project: Engram) -> None:
    root = project.root
    edited = str(root / "src" / "billing" / "models.py")

    async def scenario() -> None:
        async with connect(root) as client:
            saved = await client.ok(
                "remember", {"title": "Amounts are cents", "kind": "pitfall", "files": [edited]}
            )
            assert saved
            found = await client.ok("check", {"files": [edited]})
            assert "Amounts are cents" in json.dumps(found)
            refused = await client.error("check", {"files": ["/etc/hosts"]})
            assert str(root) in refused["message"]

    run(scenario)
    lines = project.project_ws.store.path.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["files"] for r in records] == [["src/billing/models.py"]]
    assert os.path.isabs(edited)


def test_a_secret_given_as_a_file_is_scrubbed_before_the_path_is_made_relative(
    project: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project.root / "ledger").mkdir()
    monkeypatch.chdir(project.root / "ledger")  # joining and collapsing `//` would hide it
    password = "Zq8vKp2mWx7rTn4b"
    project.remember("Where the db is", files=[f"postgres://app_user:{password}@db.internal/app"])
    assert password not in project.project_ws.store.path.read_text()
