"""``engram serve --compat go-engram`` driven as Go engram's plugins drive Go's server.

A real ``engram serve`` in a subprocess over a real git repository, on the port Go's plugins
read (``ENGRAM_PORT``), called with the requests Go's Claude Code hooks and OpenCode plugin send:
start a session, save a prompt, post a subagent's output for passive capture, save and search
observations, fetch the context, end the session. The answers are checked against Go's JSON
shapes and statuses, the memories against ``.engram/memories.jsonl`` and engram's own recall.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from engram.model import go_int_id
from engram.service import Engram
from tests.helpers.places import ROOT
from tests.helpers.serving import Served, free_port

TOKEN = "a-long-random-token-for-go-tests"
# Go's structs, as encoding/json marshals them (omitempty fields may be absent).
OBSERVATION = {
    "id",
    "session_id",
    "type",
    "title",
    "content",
    "scope",
    "revision_count",
    "duplicate_count",
    "created_at",
    "updated_at",
}
OBSERVATION_OPTIONAL = {"tool_name", "project", "topic_key", "last_seen_at", "deleted_at"}
PROMPT = {"id", "session_id", "content", "created_at"}
SESSION_SUMMARY = {"id", "project", "started_at", "observation_count"}
GO_TIME = "%Y-%m-%d %H:%M:%S"
LEARNINGS = (
    "Task done.\n\n## Key Learnings:\n\n"
    "1. The session cookie needs SameSite=Lax or the OAuth redirect loops forever\n"
    "2. Staging tokens expire after fifteen minutes, so retry once on a 401\n"
)


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(HOME=str(home), ENGRAM_HOME=str(home / ".engram"), ENGRAM_AUTHOR="Test Author")
    env.update(ENGRAM_DAEMON="off", **extra)
    return env


def _repo(root: Path, name: str = "demo") -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    Engram.init(root, name)[0].close()
    return root


def _engram(root: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engram", *args],
        cwd=root,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class GoServer(Served):
    """``engram serve --compat go-engram`` on the port ENGRAM_PORT names (no --port given)."""

    def __init__(self, root: Path, home: Path, *, token: str | None = None) -> None:
        port = free_port()
        extra = {"ENGRAM_PORT": str(port)}
        if token:
            extra["ENGRAM_HTTP_TOKEN"] = token
        super().__init__(
            [sys.executable, "-m", "engram", "serve", "--compat", "go-engram"],
            cwd=root,
            env=_env(home, **extra),
            port=port,
            log=root.parent / f"go-server-{port}.log",
            token=token,
        )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("go-home")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[GoServer]:
    # The folder's base name is what Go's plugins send as the project: not engram's name.
    root = _repo(tmp_path_factory.mktemp("go-http") / "webapp")
    served = GoServer(root, home)
    yield served
    log = served.stop()
    assert "Traceback" not in log, log


@pytest.fixture
def api(server: GoServer) -> httpx.Client:
    return server.client


def _records(root: Path) -> list[dict[str, Any]]:
    lines = (root / ".engram" / "memories.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _is_go_time(value: Any) -> bool:
    try:
        time.strptime(str(value), GO_TIME)
    except ValueError:
        return False
    return True


def _observation_shape(row: dict[str, Any]) -> None:
    assert set(row) >= OBSERVATION, row
    assert isinstance(row["id"], int) and not isinstance(row["id"], bool)
    assert _is_go_time(row["created_at"]) and _is_go_time(row["updated_at"])
    assert isinstance(row["revision_count"], int) and isinstance(row["duplicate_count"], int)


def _session(api: httpx.Client, sid: str, root: Path) -> None:
    """What session-start.sh and OpenCode's ensureSession send."""
    body = {"id": sid, "project": root.name, "directory": str(root)}
    response = api.post("/sessions", json=body)
    assert response.status_code == 201, response.text
    assert response.json() == {"id": sid, "status": "created"}


# -- the plugins' calls ----------------------------------------------------------------------


def test_a_claude_code_and_opencode_session_lands_in_the_repository(
    api: httpx.Client, server: GoServer, home: Path
) -> None:
    root = server.root
    health = api.get("/health")
    assert health.status_code == 200
    assert {"status": "ok", "service": "engram"}.items() <= health.json().items()

    _session(api, "cc-1", root)
    _session(api, "cc-1", root)  # ensureSession is idempotent

    prompt = api.post(
        "/prompts",
        json={
            "session_id": "cc-1",
            "content": "fix the OAuth login redirect",
            "project": root.name,
        },
    )
    assert prompt.status_code == 201, prompt.text
    assert prompt.json()["status"] == "saved" and isinstance(prompt.json()["id"], int)

    # subagent-stop.sh: the subagent's stdout, for the server to extract its learnings
    passive = {
        "session_id": "cc-1",
        "content": LEARNINGS,
        "project": root.name,
        "source": "subagent-stop",
    }
    captured = api.post("/observations/passive", json=passive)
    assert captured.status_code == 200, captured.text
    assert captured.json() == {"extracted": 2, "saved": 2, "duplicates": 0}
    again = api.post("/observations/passive", json=passive).json()
    assert again == {"extracted": 2, "saved": 0, "duplicates": 2}

    saved = api.post(
        "/observations",
        json={
            "session_id": "cc-1",
            "type": "bugfix",
            "title": "Fixed OAuth redirect loop",
            "content": "**What**: cookie SameSite was Strict\n**Where**: auth/session.py",
            "project": root.name,
            "topic_key": "bugfix/oauth-redirect",
        },
    )
    assert saved.status_code == 201, saved.text
    oid = saved.json()["id"]
    assert saved.json() == {"id": oid, "status": "saved"}
    command = api.post(
        "/observations",
        json={
            "session_id": "cc-1",
            "type": "command",
            "title": "Ran the auth tests",
            "content": "pytest tests/auth -q: 14 passed",
            "tool_name": "bash",
            "project": root.name,
        },
    )
    assert command.status_code == 201
    # a known topic_key updates the same observation, as Go's upsert does
    upsert = api.post(
        "/observations",
        json={
            "session_id": "cc-1",
            "type": "bugfix",
            "title": "Fixed OAuth redirect loop (SameSite=Lax)",
            "content": "**What**: cookie SameSite is now Lax",
            "topic_key": "bugfix/oauth-redirect",
        },
    )
    assert upsert.status_code == 201 and upsert.json()["id"] == oid

    hits = api.get("/search", params={"q": "redirect", "project": root.name, "limit": "5"})
    assert hits.status_code == 200, hits.text
    rows = hits.json()
    assert rows and rows[0]["id"] == oid
    for row in rows:
        _observation_shape(row)
        assert isinstance(row["rank"], float) and row["rank"] < 0
    assert [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)  # lower is better
    assert all(r["type"] != "prompt" for r in rows)  # prompts are Go's other table
    commands = api.get("/search", params={"q": "auth tests", "type": "command"}).json()
    assert [(r["type"], r.get("tool_name")) for r in commands] == [("command", "bash")]

    one = api.get(f"/observations/{oid}").json()
    _observation_shape(one)
    assert one["title"] == "Fixed OAuth redirect loop (SameSite=Lax)"
    assert one["type"] == "bugfix" and one["topic_key"] == "bugfix/oauth-redirect"
    assert one["revision_count"] == 2 and one["session_id"] == "cc-1"

    # session-start.sh reads .context with jq; OpenCode's compaction hook pushes data.context
    context = api.get("/context", params={"project": root.name})
    assert context.status_code == 200
    assert set(context.json()) == {"context"} and "demo" in context.json()["context"]

    ended = api.post(
        "/sessions/cc-1/end",
        json={"summary": "## Goal\nFix the OAuth login\n## Accomplished\n- cookie fixed"},
    )
    assert ended.status_code == 200 and ended.json() == {"id": "cc-1", "status": "completed"}

    records = {r["title"]: r for r in _records(root) if "title" in r}
    fixed = records["Fixed OAuth redirect loop (SameSite=Lax)"]
    assert go_int_id(fixed["id"]) == oid and fixed["kind"] == "bugfix"
    assert fixed["session_id"] == "cc-1" and fixed["project"] == "demo"  # this project
    assert records["Ran the auth tests"]["type"] == "command"
    assert records["Ran the auth tests"]["tool_name"] == "bash"
    assert records["fix the OAuth login redirect"]["kind"] == "prompt"
    learned = [r for r in records.values() if r.get("source") == "subagent-stop"]
    assert len(learned) == 2
    assert any(r["kind"] == "session" and r["session_id"] == "cc-1" for r in records.values())

    found = _engram(root, home, "recall", "SameSite", "--json")
    assert found.returncode == 0, found.stderr
    assert "Fixed OAuth redirect loop (SameSite=Lax)" in found.stdout
    assert "The session cookie needs SameSite=Lax" in found.stdout


def test_recent_lists_timeline_and_stats_in_gos_shapes(api: httpx.Client, server: GoServer) -> None:
    root = server.root
    _session(api, "oc-2", root)
    ids = []
    for n, title in enumerate(("Chose Postgres for jobs", "Added the jobs table", "Tuned vacuum")):
        saved = api.post(
            "/observations",
            json={"session_id": "oc-2", "type": "decision", "title": title, "content": f"step {n}"},
        )
        ids.append(saved.json()["id"])
        time.sleep(1.05)  # Go's times are whole seconds: keep the order visible
    api.post("/prompts", json={"session_id": "oc-2", "content": "set up the jobs queue"})

    sessions = api.get("/sessions/recent", params={"limit": "10"}).json()
    assert sessions[0]["id"] == "oc-2"
    assert all(set(s) >= SESSION_SUMMARY for s in sessions)
    assert sessions[0]["observation_count"] == 3 and "ended_at" not in sessions[0]
    assert _is_go_time(sessions[0]["started_at"])
    assert len(api.get("/sessions/recent", params={"limit": "1"}).json()) == 1
    assert api.get("/sessions/recent", params={"project": "elsewhere"}).json() == []

    recent = api.get("/observations/recent", params={"limit": "3", "project": root.name}).json()
    assert [r["id"] for r in recent] == ids[::-1], [(r["title"], r["created_at"]) for r in recent]
    for row in recent:
        _observation_shape(row)
        assert set(row) <= OBSERVATION | OBSERVATION_OPTIONAL | {"sync_id", "review_after"}

    prompts = api.get("/prompts/recent", params={"limit": "not a number"}).json()  # Go: default
    assert prompts[0]["content"] == "set up the jobs queue"
    assert all(set(p) >= PROMPT and isinstance(p["id"], int) for p in prompts)
    searched = api.get("/prompts/search", params={"q": "jobs queue"}).json()
    assert [p["content"] for p in searched] == ["set up the jobs queue"]

    middle = api.get("/timeline", params={"observation_id": str(ids[1]), "before": "1"}).json()
    assert set(middle) == {"focus", "before", "after", "session_info", "total_in_range"}
    assert middle["focus"]["id"] == ids[1]
    assert [e["id"] for e in middle["before"]] == [ids[0]]
    assert [e["id"] for e in middle["after"]] == [ids[2]]
    assert all(e["is_focus"] is False for e in middle["before"] + middle["after"])
    assert middle["session_info"]["id"] == "oc-2" and middle["total_in_range"] == 3
    assert middle["session_info"]["directory"] == str(root)

    stats = api.get("/stats").json()
    assert set(stats) == {"total_sessions", "total_observations", "total_prompts", "projects"}
    assert stats["total_observations"] >= 3 and stats["total_prompts"] >= 1
    assert stats["projects"][0] == "demo"


def test_update_and_delete_by_go_id(api: httpx.Client, server: GoServer) -> None:
    saved = api.post(
        "/observations",
        json={"session_id": "oc-3", "title": "Cache TTL is 60s", "content": "in config/cache"},
    ).json()
    oid = saved["id"]
    patched = api.patch(f"/observations/{oid}", json={"type": "config", "content": "TTL 120s"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["type"] == "config" and patched.json()["content"] == "TTL 120s"
    assert patched.json()["revision_count"] == 2

    soft = api.delete(f"/observations/{oid}")
    assert soft.json() == {"id": oid, "status": "deleted", "hard_delete": False}
    assert api.get(f"/observations/{oid}").status_code == 404
    tomb = next(r for r in _records(server.root) if go_int_id(r["id"]) == oid)
    assert tomb.get("deleted_at") and tomb.get("content") == "TTL 120s"

    other = api.post(
        "/observations",
        json={"session_id": "oc-3", "title": "Drop the old cron", "content": "cron.d/old"},
    ).json()["id"]
    hard = api.delete(f"/observations/{other}", params={"hard": "true"})
    assert hard.json() == {"id": other, "status": "deleted", "hard_delete": True}
    gone = next(r for r in _records(server.root) if go_int_id(r["id"]) == other)
    assert gone.get("deleted_at") and "cron.d/old" not in json.dumps(gone)


# -- bad input ----------------------------------------------------------------------------------


def _go_error(response: httpx.Response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and isinstance(body["error"], str), body
    for word in words:
        assert word in body["error"], body["error"]
    message: str = body["error"]
    return message


def test_bad_input_gets_gos_statuses_and_names_the_field(api: httpx.Client) -> None:
    headers = {"content-type": "application/json"}
    for path in ("/sessions", "/observations", "/observations/passive", "/prompts", "/import"):
        _go_error(api.post(path, content=b"{not json", headers=headers), 400, "invalid json")
    _go_error(api.post("/observations", json=[1, 2]), 400, "JSON object")
    _go_error(api.post("/sessions", json={"id": "s"}), 400, "project", "missing: project")
    _go_error(
        api.post("/observations", json={"session_id": "s", "title": "t"}),
        400,
        "session_id, title and content are required",
        "missing: content",
    )
    _go_error(
        api.post("/observations", json={"session_id": "s", "title": 7, "content": "c"}),
        400,
        "field title must be a string",
    )
    _go_error(api.post("/observations/passive", json={"content": "x"}), 400, "session_id")
    _go_error(api.post("/prompts", json={"session_id": "s"}), 400, "missing: content")

    _go_error(api.get("/observations/abc"), 400, "invalid observation id", "'abc'")
    _go_error(api.get("/observations/99999"), 404, "observation not found", "99999")
    _go_error(api.patch("/observations/99999", json={"title": "x"}), 404, "99999")
    # Go's DELETE of an id it has no live row of changes nothing and answers 200.
    gone = api.delete("/observations/99999")
    assert gone.status_code == 200, gone.text
    assert gone.json() == {"id": 99999, "status": "deleted", "hard_delete": False}
    _go_error(api.patch("/observations/1x", json={"title": "x"}), 400, "invalid observation id")

    oid = api.post(
        "/observations", json={"session_id": "s", "title": "Some fact", "content": "body"}
    ).json()["id"]
    _go_error(api.patch(f"/observations/{oid}", json={}), 400, "at least one field")
    _go_error(api.patch(f"/observations/{oid}", json={"scope": "personal"}), 400, "scope")

    _go_error(api.get("/search"), 400, "q parameter is required")
    _go_error(api.get("/prompts/search"), 400, "q parameter is required")
    _go_error(api.get("/timeline"), 400, "observation_id parameter is required")
    _go_error(api.get("/timeline", params={"observation_id": "x"}), 400, "invalid observation_id")
    _go_error(api.get("/timeline", params={"observation_id": "424242"}), 404, "424242")
    _go_error(api.post("/import", json={"memories": []}), 400, "sessions, observations, prompts")
    _go_error(api.post("/import", json={"observations": {"a": 1}}), 400, "observations")


# -- export and import --------------------------------------------------------------------------


def test_export_is_the_cli_export_and_import_is_the_cli_import(
    api: httpx.Client, server: GoServer, home: Path, tmp_path: Path
) -> None:
    api.post("/observations", json={"session_id": "x-1", "title": "Exported", "content": "yes"})
    response = api.get("/export")
    assert response.status_code == 200
    assert "attachment" in response.headers["content-disposition"]
    cli = _engram(server.root, home, "export", "--format", "go-engram")
    assert cli.returncode == 0, cli.stderr
    served, written = response.json(), json.loads(cli.stdout)
    served.pop("exported_at")
    written.pop("exported_at")
    assert served == written

    # a file from Go engram itself: its own ids, a custom type, a session and a prompt
    go_file = {
        "version": "0.1.0",
        "exported_at": "2026-01-02 10:00:00",
        "sessions": [
            {
                "id": "go-s",
                "project": "webapp",
                "directory": "/w",
                "started_at": "2026-01-02 09:00:00",
            }
        ],
        "observations": [
            {
                "id": 455,
                "session_id": "go-s",
                "type": "file_change",
                "title": "Edited the router from Go",
                "content": "router.go: new /healthz",
                "project": "webapp",
                "scope": "project",
                "revision_count": 1,
                "duplicate_count": 1,
                "created_at": "2026-01-02 09:30:00",
                "updated_at": "2026-01-02 09:30:00",
            }
        ],
        "prompts": [
            {
                "id": 9,
                "session_id": "go-s",
                "content": "add a health route",
                "project": "webapp",
                "created_at": "2026-01-02 09:10:00",
            }
        ],
    }
    imported = api.post("/import", json=go_file)
    assert imported.status_code == 200, imported.text
    body = imported.json()
    assert {"sessions_imported": 1, "observations_imported": 1, "prompts_imported": 1}.items() <= (
        body.items()
    )
    assert body["added"] == 2 and body["format"] == "go-engram-export"
    assert api.get("/observations/455").json()["type"] == "file_change"  # Go's id still names it
    again = api.post("/import", json=go_file).json()
    assert again["added"] == 0 and again["updated"] == 0

    # the same file through `engram import` in a second repository gives the same memories
    # (a clone in a folder of the same name: Go's rows of project "webapp" are its project too)
    other = _repo(tmp_path / "other" / server.root.name)
    path = tmp_path / "go.json"
    path.write_text(json.dumps(go_file), encoding="utf-8")
    done = _engram(other, home, "import", str(path))
    assert done.returncode == 0, done.stderr

    def mine(root: Path) -> dict[str, Any]:
        return {
            r["id"]: {k: v for k, v in r.items() if k not in ("author",)}
            for r in _records(root)
            if str(r.get("source", "")).startswith("import:")
        }

    assert len(mine(other)) == 2 and mine(other) == mine(server.root)


# -- the guard, the port, the collisions -------------------------------------------------------


def test_the_guard_stands_in_front_of_gos_routes(
    api: httpx.Client, server: GoServer, tmp_path: Path, home: Path
) -> None:
    refused = api.get("/stats", headers={"Host": "evil.example"})
    assert refused.status_code == 421
    big = {"session_id": "s", "title": "big", "content": "x" * (8 * 1024 * 1024 + 10)}
    assert api.post("/observations", json=big).status_code == 413
    cross = api.post(
        "/sessions",
        json={"id": "s", "project": "p"},
        headers={"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
    )
    assert cross.status_code == 403

    guarded = GoServer(_repo(tmp_path / "tok"), home, token=TOKEN)
    try:
        bare = httpx.post(f"{guarded.url}/sessions", json={"id": "s", "project": "tok"})
        assert bare.status_code == 401
        assert guarded.client.post("/sessions", json={"id": "s", "project": "tok"}).json() == {
            "id": "s",
            "status": "created",
        }
    finally:
        guarded.stop()


def test_gos_shape_wins_where_the_paths_collide_and_only_under_compat(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from engram import cli, http_api
    from engram.http_api import create_app
    from engram.http_api.routers import ROUTERS

    assert tuple(c.value for c in cli.RouteCompat) == http_api.COMPATS
    assert cli.HTTP_PORT_ENV == http_api.PORT_ENV
    root = _repo(tmp_path / "repo")
    plain = create_app(root)
    with TestClient(plain, base_url="http://127.0.0.1") as client:
        assert client.get("/observations/recent").status_code == 404  # not without --compat
        assert "service" not in client.get("/health").json()
    go = create_app(root, compat=["go-engram"])
    with TestClient(go, base_url="http://127.0.0.1") as client:
        assert client.get("/health").json()["service"] == "engram"
        assert client.get("/memories").status_code == 200  # engram's own routes stay
        assert isinstance(client.get("/stats").json()["total_observations"], int)
    native = {
        (method, str(getattr(route, "path", "")))
        for router in ROUTERS
        for route in router.routes
        for method in getattr(route, "methods", ())
    }
    served: dict[tuple[str, str], int] = {}
    for route in go.routes:
        for method in getattr(route, "methods", None) or ():
            key = (method, str(getattr(route, "path", "")))
            served[key] = served.get(key, 0) + 1
    assert all(count == 1 for count in served.values())  # one route per method and path
    from engram.__main__ import app
    from engram.http_api.routers.goengram import router as go_router

    clashes = set()
    for route in go_router.routes:
        for method in getattr(route, "methods", ()):
            if (method, getattr(route, "path", "")) in native:
                clashes.add(getattr(route, "path", ""))
    assert clashes == {
        "/health",
        "/sessions",
        "/sessions/{id}/end",
        "/search",
        "/context",
        "/stats",
        "/export",
        "/import",
        "/prompts",
    }
    helped = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in clashes - {"/sessions/{id}/end"}:
        assert path in " ".join(helped.output.split()), path
        assert f"`{path}`" in readme or f"`POST {path}`" in readme, path
    go.state.engram.close()
    plain.state.engram.close()


def test_engram_port_is_read_only_under_compat(monkeypatch: pytest.MonkeyPatch) -> None:
    from engram.http_api import DEFAULT_PORT, ServeError, port_for

    monkeypatch.setenv("ENGRAM_PORT", "8123")
    assert port_for(None, ["go-engram"]) == 8123
    assert port_for(None, []) == DEFAULT_PORT == 7437
    assert port_for(9000, ["go-engram"]) == 9000
    monkeypatch.setenv("ENGRAM_PORT", "eighty")
    with pytest.raises(ServeError, match="ENGRAM_PORT='eighty' is not a port"):
        port_for(None, ["go-engram"])
    monkeypatch.delenv("ENGRAM_PORT")
    assert port_for(None, ["go-engram"]) == 7437


def test_the_plain_serve_gos_plugins_start_serves_gos_routes_when_the_project_says_so(
    tmp_path: Path, home: Path
) -> None:
    """serve.compat: [go-engram] in config.yaml: `engram serve` (no flag) is Go's server."""
    root = _repo(tmp_path / "mixed")
    config = root / ".engram" / "config.yaml"
    text = config.read_text("utf-8")
    assert "\nserve:\n" in text and "  compat: []\n" in text  # as init writes it
    config.write_text(text.replace("  compat: []\n", "  compat: [go-engram]\n"), "utf-8")
    port = free_port()
    # What session-start.sh runs when nothing answers: `engram serve`, ENGRAM_PORT set.
    plain = Served(
        [sys.executable, "-m", "engram", "serve"],
        cwd=root,
        env=_env(home, ENGRAM_PORT=str(port)),
        port=port,
        log=tmp_path / "plain.log",
    )
    try:
        api = plain.client
        assert api.get("/health").json()["service"] == "engram"
        _session(api, "plain-1", root)
        saved = api.post(
            "/observations",
            json={"session_id": "plain-1", "title": "Ran it", "content": "x", "type": "command"},
        )
        assert saved.status_code == 201, saved.text
    finally:
        assert "Traceback" not in plain.stop()
    assert [r["title"] for r in _records(root) if r.get("type") == "command"] == ["Ran it"]

    config.write_text(config.read_text("utf-8").replace("[go-engram]", "[mem0]"), encoding="utf-8")
    refused = _engram(root, home, "serve")
    assert refused.returncode != 0
    assert "setting 'serve.compat' names 'mem0'; known: go-engram" in refused.stderr
