"""A store wherever the agent runs, and personal memories that follow the person.

The MCP server started outside any repository serves the personal store, opens the project
the client's roots name (asked again when they change), and answers what needs a project in
words for the person. A personal memory saved in one repository shows in another's recall and
briefing; one tied to a project shows elsewhere only with ``all_projects`` (``--all-projects``),
on the CLI, over MCP, HTTP and the socket daemon. Driven as agents drive it: real processes, a
real MCP client over stdio, real git repositories in tmp_path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning

from engram.mcp_server import EngramMCP, tool_names
from engram.service import Engram
from tests.conftest import run_cli
from tests.mcp_server.test_mcp import Client, run

PERSON_HINT = "the user can run `engram init`"


def personal_records() -> list[dict[str, Any]]:
    """Return the records of the personal store (ENGRAM_HOME), in file order."""
    path = Path(os.environ["ENGRAM_HOME"]) / "memories.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def make_repo(root: Path, name: str) -> Path:
    """Return a git repository with an initialised engram store."""
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    Engram.init(root, name)[0].close()
    return root


def addressed_to_the_person(error: dict[str, str]) -> None:
    """Assert a no-project answer speaks of the user, and tells the agent to run nothing."""
    assert error["code"] == "not_initialized", error
    assert "no engram store in this repository" in error["message"], error
    assert PERSON_HINT in error["hint"], error
    for text in (error["message"], error["hint"]):
        assert "the user can the user can" not in text, text
        assert not re.match(r"(?i)\s*run\b", text), text
        assert not re.search(r"(?i)(^|[.;:]\s*)run `engram init`", text), text


@asynccontextmanager
async def session(
    cwd: Path, *options: str, roots: list[Path] | None = None
) -> AsyncIterator[tuple[Client, list[Path] | None]]:
    """Start `engram mcp` in ``cwd`` (no -C) and open a client session; ``roots`` offers roots.

    The list of roots is yielded too: the test may change it, then notify the server.
    """
    env = {key: value for key, value in os.environ.items() if key.startswith("ENGRAM_")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engram", "mcp", *options], env=env, cwd=cwd
    )
    garbage: list[Exception] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            garbage.append(message)

    async def list_roots(context: Any) -> types.ListRootsResult:
        assert roots is not None
        return types.ListRootsResult(
            roots=[types.Root(uri=folder.as_uri(), name=folder.name) for folder in roots]  # type: ignore[arg-type]
        )

    callback = list_roots if roots is not None else None
    with (cwd.parent / f"stderr-{id(garbage)}.log").open("w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(
                read,
                write,
                read_timeout_seconds=60,
                message_handler=on_message,
                list_roots_callback=callback,
            ) as s,
        ):
            await s.initialize()
            yield Client(s, garbage), roots
    assert not garbage, f"the server wrote something other than the protocol: {garbage}"


# -- the MCP server outside any repository --------------------------------------------------------


def test_mcp_outside_any_repository_serves_the_personal_store(tmp_path: Path) -> None:
    outside = tmp_path / "scratch"
    outside.mkdir()
    with Engram.personal_only(outside) as engram:
        engram.remember(
            "Prefer small focused commits", "One change per commit.", kind="preference",
            scope="personal",
        )  # fmt: skip

    async def scenario() -> None:
        async with session(outside) as (client, _):
            assert await client.names() == tool_names("agent")
            found = await client.ok("recall", {"query": "small commits"})
            assert [hit["title"] for hit in found["hits"]] == ["Prefer small focused commits"]
            saved = await client.ok(
                "remember",
                {"title": "Answer in British English", "kind": "preference", "scope": "personal"},
            )
            assert saved["action"] == "created"
            got = await client.ok("get", {"id": saved["id"]})
            assert got["memory"]["title"] == "Answer in British English"
            briefing = await client.ok("context", {})
            assert "Answer in British English" in json.dumps(briefing)
            for name, args in (
                ("remember", {"title": "A project decision", "kind": "decision"}),
                ("check", {"files": ["src/app.py"]}),
                ("session_start", {}),
            ):
                error = await client.error(name, args)
                addressed_to_the_person(error)
                assert str(outside.resolve()) in error["message"]

    run(scenario)
    records = personal_records()
    assert [r["title"] for r in records if r["title"].startswith("Answer")] == [
        "Answer in British English"
    ]
    assert all(r["project"] == "" and r["scope"] == "personal" for r in records)
    assert not (outside / ".engram").exists(), "nothing is written where there is no project"


def test_mcp_outside_a_repository_opens_the_project_the_client_roots_name(
    tmp_path: Path,
) -> None:
    ledger = make_repo(tmp_path / "ledger", "ledger")
    shop = make_repo(tmp_path / "shop", "shop")
    (ledger / "src").mkdir()
    with Engram(ledger) as engram:
        engram.remember("Amounts are integer cents", kind="pitfall")
    with Engram(shop) as engram:
        engram.remember("Carts expire after a day", kind="decision")
    outside = tmp_path / "home-folder"
    outside.mkdir()
    # The first root lies in no project; the second is a subfolder of one.
    roots = [tmp_path / "nowhere", ledger / "src"]

    async def scenario() -> None:
        async with session(outside, roots=roots) as (client, offered):
            found = await client.ok("recall", {"query": "cents"})
            assert [hit["title"] for hit in found["hits"]] == ["Amounts are integer cents"]
            assert (await client.ok("remember", {"title": "Round half to even"}))["id"]
            # The client's folders change: the server asks again and opens the new project.
            assert offered is not None
            offered[:] = [shop]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)  # still in the protocol
                await client.session.send_roots_list_changed()
            found = await client.ok("recall", {"query": "carts expire"})
            assert [hit["title"] for hit in found["hits"]] == ["Carts expire after a day"]
            assert (await client.ok("recall", {"query": "cents"}))["hits"] == []

    run(scenario)
    with Engram(ledger) as engram:
        assert [hit.record["title"] for hit in engram.recall("round half even")] == [
            "Round half to even"
        ]


def test_mcp_working_folder_comes_before_the_roots(tmp_path: Path) -> None:
    ledger = make_repo(tmp_path / "ledger", "ledger")
    shop = make_repo(tmp_path / "shop", "shop")
    with Engram(ledger) as engram:
        engram.remember("Amounts are integer cents", kind="pitfall")

    async def scenario() -> None:
        async with session(ledger, roots=[shop]) as (client, _):
            found = await client.ok("recall", {"query": "cents"})
            assert [hit["title"] for hit in found["hits"]] == ["Amounts are integer cents"]

    run(scenario)


def test_the_working_folders_project_is_looked_for_again_once_its_store_goes(
    tmp_path: Path,
) -> None:
    # Before each call the server asks whether it needs the client's roots; while the project
    # it found stays, one stat answers, and a store removed or made nearer is still seen.
    repo = make_repo(tmp_path / "repo", "repo")
    (repo / "src").mkdir()
    with EngramMCP(repo / "src") as core:
        assert not core.wants_roots() and not core.wants_roots()
        shutil.rmtree(repo / ".engram")
        assert core.wants_roots()
        Engram.init(repo / "src", "src")[0].close()
        assert not core.wants_roots() and core.project_root() == (repo / "src").resolve()
        shutil.rmtree(repo / "src" / ".engram")
        assert core.wants_roots()


# -- personal memories follow the person ----------------------------------------------------------


def _titles(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads(result.stdout)
    hits = data["hits"] if isinstance(data, dict) else data
    return [str(hit.get("title") or hit.get("memory", {}).get("title")) for hit in hits]


@pytest.fixture
def two_repos(tmp_path: Path) -> tuple[Path, Path]:
    """Repositories a and b; in a, a global personal memory and one tied to a by its file."""
    a = make_repo(tmp_path / "a", "alpha")
    b = make_repo(tmp_path / "b", "beta")
    (a / "ledger").mkdir()
    for args in (
        ("Prefer pytest over unittest", "--kind", "preference"),
        ("Ledger rounding is mine to fix", "--files", "ledger/money.py"),
    ):
        saved = run_cli("remember", *args, "--scope", "personal", cwd=a)
        assert saved.returncode == 0, saved.stderr.decode()
    return a, b


def test_a_personal_memory_saved_in_one_repository_shows_in_another(
    two_repos: tuple[Path, Path],
) -> None:
    a, b = two_repos
    by_title = {r["title"]: r for r in personal_records()}
    assert by_title["Prefer pytest over unittest"]["project"] == ""
    assert by_title["Ledger rounding is mine to fix"]["project"] == "alpha"

    assert _titles(run_cli("recall", "pytest", "--json", cwd=b)) == ["Prefer pytest over unittest"]
    briefing = run_cli("context", cwd=b)
    assert briefing.returncode == 0, briefing.stderr.decode()
    text = briefing.stdout.decode()
    assert "## Your personal memories" in text and "Prefer pytest over unittest" in text
    assert "Ledger rounding" not in text
    # Tied to project a by its file: shown in a, elsewhere only across all projects.
    assert _titles(run_cli("recall", "ledger rounding", "--json", cwd=b)) == []
    assert _titles(run_cli("recall", "ledger rounding", "--json", cwd=a)) == [
        "Ledger rounding is mine to fix"
    ]
    for flags in (("--all-projects",), ("--project", "*")):
        assert _titles(run_cli("recall", "ledger rounding", "--json", *flags, cwd=b)) == [
            "Ledger rounding is mine to fix"
        ]


def test_a_personal_memory_saved_with_a_project_stays_tied_to_it(tmp_path: Path) -> None:
    a = make_repo(tmp_path / "a", "alpha")
    b = make_repo(tmp_path / "b", "beta")
    # As every personal memory was saved before the rule: stamped with its project.
    with Engram(a) as engram:
        engram.remember("Deploy alpha on Fridays only", scope="personal", project="alpha")
    with Engram(a) as engram:
        assert [h.record["title"] for h in engram.recall("deploy fridays")] == [
            "Deploy alpha on Fridays only"
        ]
    with Engram(b) as engram:
        assert engram.recall("deploy fridays") == []
        hits = engram.recall("deploy fridays", all_projects=True)
        assert [h.record["title"] for h in hits] == ["Deploy alpha on Fridays only"]


def test_all_projects_over_mcp_and_go_engram_names(two_repos: tuple[Path, Path]) -> None:
    _, b = two_repos

    async def scenario() -> None:
        async with session(b, "--compat", "go-engram") as (client, _):
            query = {"query": "ledger rounding"}
            assert (await client.ok("recall", query))["hits"] == []
            found = await client.ok("recall", {**query, "all_projects": True})
            assert [h["title"] for h in found["hits"]] == ["Ledger rounding is mine to fix"]
            as_json = {**query, "response_format": "json"}  # Go's names answer text otherwise
            found = await client.ok("mem_search", {**as_json, "all_projects": True})
            assert "Ledger rounding is mine to fix" in json.dumps(found)
            assert "Ledger rounding" not in json.dumps(await client.ok("mem_search", as_json))

    run(scenario)


def test_all_projects_over_http(two_repos: tuple[Path, Path]) -> None:
    from tests.http_api.test_http import Server

    _, b = two_repos
    served = Server(b, Path(os.environ["HOME"]))
    try:
        for path in ("/search", "/memories"):
            q = {"q": "ledger rounding"} if path == "/search" else {"scope": "personal"}
            plain = served.client.get(path, params=q).json()
            every = served.client.get(path, params={**q, "all_projects": "true"}).json()
            key = "hits" if path == "/search" else "memories"
            assert "Ledger rounding" not in json.dumps(plain[key]), path
            assert "Ledger rounding is mine to fix" in json.dumps(every[key]), path
    finally:
        log = served.stop()
    assert "Traceback" not in log, log


def test_all_projects_over_the_daemon(two_repos: tuple[Path, Path]) -> None:
    from tests.daemon.test_daemon import Daemon

    _, b = two_repos
    daemon = Daemon(b, Path(os.environ["HOME"]))
    try:
        with daemon.client() as client:
            query = {"query": "ledger rounding", "limit": 5}
            assert client.call("memory_search", query)["count"] == 0
            found = client.call("memory_search", {**query, "all_projects": True})
        assert found["count"] == 1 and "Ledger rounding" in json.dumps(found)
    finally:
        assert daemon.stop() == 0
