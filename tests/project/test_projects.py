"""Project names (config, else the git remote, else the folder) and the personal store's filter."""

from __future__ import annotations

from pathlib import Path

import pytest
from dulwich.repo import Repo

from engram import config as config_mod
from engram.model import normalize_project
from engram.service import Engram


def _repo_with_remotes(root: Path, remotes: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    repo = Repo.init(str(root))
    config = repo.get_config()
    for name, url in remotes.items():
        config.set((b"remote", name.encode()), b"url", url.encode())
    config.write_to_path()
    repo.close()
    return root


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("git@github.com:Team/Ledger-API.git", "ledger-api"),
        ("https://gitlab.example.com/group/sub/Billing.git/", "billing"),
        ("ssh://git@host:2222/team/payments", "payments"),
        ("/srv/git/Inventory Service.git", "inventory service"),
        ("C:\\repos\\Windows-App.git", "windows-app"),
    ],
)
def test_remote_url_gives_the_repository_name(tmp_path: Path, url: str, name: str) -> None:
    root = _repo_with_remotes(tmp_path / "work", {"origin": url})
    assert config_mod.remote_project(root) == name
    assert config_mod.detect_project(root) == name


def test_origin_wins_over_other_remotes_and_subfolders_find_the_repo(tmp_path: Path) -> None:
    root = _repo_with_remotes(
        tmp_path / "work",
        {"upstream": "https://h/org/aaa-upstream.git", "origin": "https://h/me/fork.git"},
    )
    sub = root / "services" / "api"
    sub.mkdir(parents=True)
    assert config_mod.remote_project(root) == "fork"
    assert config_mod.remote_project(sub) == "fork"


def test_without_remote_the_folder_name_is_used_normalised(tmp_path: Path) -> None:
    root = tmp_path / "  My Project  "
    _repo_with_remotes(root, {})
    assert config_mod.remote_project(root) == ""
    assert config_mod.detect_project(root) == "my project"
    plain = tmp_path / "NoGit"
    plain.mkdir()
    assert config_mod.detect_project(plain) == "nogit"


def test_a_gitdir_file_is_followed(tmp_path: Path) -> None:
    """A submodule or linked work tree has a .git file naming the real git folder."""
    real = _repo_with_remotes(tmp_path / "real", {"origin": "git@h:team/Linked.git"})
    work = tmp_path / "checkout"
    work.mkdir()
    (work / ".git").write_text(f"gitdir: {real / '.git'}\n", encoding="utf-8")
    assert config_mod.remote_project(work) == "linked"


def test_an_unreadable_git_config_gives_the_folder_name(tmp_path: Path) -> None:
    root = tmp_path / "Broken"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_bytes(b"\xff\xfe[remote \x00 garbage")
    assert config_mod.detect_project(root) == "broken"


def test_config_names_the_project_first_normalised(tmp_path: Path) -> None:
    root = _repo_with_remotes(tmp_path / "work", {"origin": "git@h:team/from-remote.git"})
    engram, _ = Engram.init(root)
    with engram:
        assert engram.project == "from-remote"  # init wrote the remote's name
        text = (root / ".engram" / "config.yaml").read_text(encoding="utf-8")
        assert 'project: "from-remote"' in text
    config_mod.set_value(root / ".engram", "project", "  Ledger  API ")
    with Engram.open(root) as engram:
        assert engram.project == "ledger api"
        saved = engram.remember("Rounding is banker's rounding", kind="fact").record
        assert saved["project"] == "ledger api"
    config_mod.set_value(root / ".engram", "project", "")
    with Engram.open(root) as engram:
        assert engram.project == "from-remote"


def test_project_names_given_to_remember_are_normalised(project: Engram) -> None:
    record = project.remember("Use UTC everywhere", project="  Other APP ").record
    assert record["project"] == "other app"
    assert normalize_project("\tA  b\n") == "a b"
    assert project.recall("UTC", projects="other app")[0].id == record["id"]


def test_personal_memories_of_other_projects_are_filtered_out(tmp_path: Path) -> None:
    alpha, _ = Engram.init(tmp_path / "alpha", "alpha")
    beta, _ = Engram.init(tmp_path / "beta", "beta")
    with alpha, beta:
        # Tied to a project on purpose (as every personal memory was saved before the rule).
        mine = alpha.remember(
            "Prefer small pull requests in alpha",
            scope="personal",
            kind="preference",
            project="alpha",
        ).record
        everywhere = alpha.remember(
            "Prefer small pull requests everywhere", scope="personal", project="*"
        ).record
        theirs = beta.remember(
            "Prefer small pull requests in beta", scope="personal", project="beta"
        ).record
        # Saved with no project: global, it follows the person.
        anywhere = beta.remember("Prefer small pull requests anywhere", scope="personal").record
        assert mine["project"] == "alpha" and theirs["project"] == "beta"
        assert anywhere["project"] == ""

        seen_alpha = {hit.id for hit in alpha.recall("small pull requests")}
        seen_beta = {hit.id for hit in beta.recall("small pull requests")}
        assert seen_alpha == {mine["id"], everywhere["id"], anywhere["id"]}
        assert seen_beta == {theirs["id"], everywhere["id"], anywhere["id"]}
        every = {mine["id"], theirs["id"], everywhere["id"], anywhere["id"]}
        assert {hit.id for hit in beta.recall("small pull requests", all_projects=True)} == every
        # Browsing (no words) filters the same way.
        assert {hit.id for hit in beta.recall("", scopes="personal")} == seen_beta
        # Asking for a project by name reaches it on purpose.
        assert [hit.id for hit in beta.recall("small", projects="alpha")] == [mine["id"]]
        # An id is an explicit request: get works across projects.
        assert beta.get(mine["id"])["title"] == mine["title"]


def test_only_memories_of_this_project_are_anchored_and_checked(tmp_path: Path) -> None:
    """Anchors name blobs of this repository: a memory of another project never gets any."""
    from dulwich import porcelain

    root = tmp_path / "alpha"
    root.mkdir()
    porcelain.init(str(root)).close()
    (root / "app.py").write_text("print('hi')\n", encoding="utf-8")
    porcelain.add(str(root), paths=[str(root / "app.py")])
    porcelain.commit(str(root), message=b"app", author=b"A <a@x>", committer=b"A <a@x>")
    engram, _ = Engram.init(root, "alpha")
    with engram:
        own = engram.remember("The app prints a greeting", files="app.py").record
        assert [a["path"] for a in own["anchors"]] == ["app.py"]
        everywhere = engram.remember(
            "Greeting apps print hi", files="app.py", scope="personal", project="*"
        ).record
        assert "anchors" not in everywhere
        # A record anchored elsewhere (e.g. written by hand) is not checked against this repo.
        foreign = {
            **own,
            "project": "beta",
            "created_at": "2020-01-01T00:00:00.000Z",
            "anchors": [{"path": "app.py", "blob": "0" * 40}],
        }
        assert engram.stale(foreign) == []
        assert engram.stale({**foreign, "project": "alpha"}) == [
            "app.py changed in 1 commit since it was written"
        ]
