"""The HTTP API over real HTTP: uvicorn in a subprocess on a free loopback port, real projects.

Schemathesis fuzzes the running server against its own OpenAPI document: no 5xx, every status
documented, every response matching its schema.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from engram.http_api import (
    MAX_BODY_BYTES,
    ServeError,
    cross_origin_write,
    host_allowed,
    is_loopback,
)
from engram.operations import advice
from engram.service import Engram
from tests.helpers.serving import Served, free_port

TOKEN = "s3cret-token-for-tests"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(HOME=str(home), ENGRAM_HOME=str(home / ".engram"), ENGRAM_AUTHOR="Test Author")
    env.update(extra)
    return env


def _make_project(root: Path, name: str = "demo") -> Path:
    root.mkdir(parents=True)
    Engram.init(root, name)[0].close()
    return root


class Server(Served):
    """``python -m engram.http_api`` serving one project on a free loopback port."""

    def __init__(self, root: Path, home: Path, *, token: str | None = None) -> None:
        port = free_port()
        extra = {"ENGRAM_HTTP_TOKEN": token} if token else {}
        super().__init__(
            [sys.executable, "-m", "engram.http_api", "--port", str(port)],
            cwd=root,
            env=_env(home, **extra),
            port=port,
            log=root.parent / f"server-{port}.log",
            token=token,
        )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("http-home")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[Server]:
    """One server shared by the tests that use it (starting one costs an interpreter)."""
    root = _make_project(tmp_path_factory.mktemp("http") / "repo")
    served = Server(root, home)
    yield served
    log = served.stop()
    assert "Traceback" not in log, log


@pytest.fixture
def api(server: Server) -> httpx.Client:
    return server.client


def _save(api: httpx.Client, **fields: Any) -> dict[str, Any]:
    response = api.post("/memories", json=fields)
    assert response.status_code == 201, response.text
    memory: dict[str, Any] = response.json()["memory"]
    return memory


def _error(response: httpx.Response, status: int, code: str) -> dict[str, str]:
    assert response.status_code == status, response.text
    error: dict[str, str] = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    return error


# -- memories ---------------------------------------------------------------------------------


def test_health(api: httpx.Client) -> None:
    body = api.get("/health").json()
    assert body["status"] == "ok" and body["project"] == "demo" and body["version"]


def test_crud_round_trip(api: httpx.Client) -> None:
    response = api.post(
        "/memories",
        json={
            "title": "Retry webhooks with jitter",
            "content": "Stripe retries too; we back off.",
            "kind": "decision",
            "tags": ["Payments"],
            "files": ["src/webhooks.py"],
            "importance": 4,
            "ticket": {"system": "jira", "key": "PAY-12"},  # unknown: kept as it is
        },
    )
    assert response.status_code == 201, response.text
    saved = response.json()
    assert saved["action"] == "created"
    rid = saved["id"]
    assert response.headers["location"] == f"/memories/{rid}"
    memory = api.get(f"/memories/{rid}").json()
    assert memory["title"] == "Retry webhooks with jitter"
    assert memory["tags"] == ["payments"] and memory["importance"] == 4
    assert memory["ticket"] == {"system": "jira", "key": "PAY-12"}
    assert api.get(f"/memories/{rid[:10]}").json()["id"] == rid  # a unique prefix works

    patched = api.patch(f"/memories/{rid}", json={"title": "Retry webhooks with full jitter"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["rev"] == 2
    assert patched.json()["ticket"] == {"system": "jira", "key": "PAY-12"}
    assert api.get(f"/memories/{rid}").json()["title"] == "Retry webhooks with full jitter"

    gone = api.delete(f"/memories/{rid}")
    assert gone.status_code == 200 and gone.json()["deleted_at"]
    error = _error(api.get(f"/memories/{rid}"), 404, "not_found")
    assert error["hint"]
    hard = api.delete(f"/memories/{rid}", params={"hard": "true"})
    assert hard.status_code == 200
    assert "title" not in hard.json()  # a hard delete drops the text
    exported = api.get("/export").json()["memories"]
    tombstone = next(m for m in exported if m["id"] == rid)
    assert tombstone["deleted_at"] and "content" not in tombstone


def test_topic_key_save_updates_with_200(api: httpx.Client) -> None:
    first = _save(api, title="Cache TTL", content="5 minutes", topic_key="config/cache-ttl")
    again = api.post(
        "/memories",
        json={"title": "Cache TTL", "content": "10 minutes", "topic_key": "config/cache-ttl"},
    )
    assert again.status_code == 200, again.text
    assert again.json()["action"] == "updated" and again.json()["id"] == first["id"]
    assert api.get(f"/memories/{first['id']}").json()["content"] == "10 minutes"


def test_patch_refuses_fields_the_store_sets(api: httpx.Client) -> None:
    rid = _save(api, title="Pin the postgres minor version")["id"]
    for field, value in (
        ("rev", 99),
        ("id", "a" * 26),
        ("deleted_at", "2020-01-01T00:00:00Z"),
        ("scope", "personal"),  # a memory stays in its store
    ):
        _error(api.patch(f"/memories/{rid}", json={field: value}), 422, "invalid_input")
    assert api.get(f"/memories/{rid}").json()["rev"] == 1
    _error(api.post("/memories", json={"title": "x", "rev": 5}), 422, "invalid_input")
    _error(api.patch(f"/memories/{rid}", json={}), 422, "invalid_input")  # nothing to change


def test_list_filters_and_paging(api: httpx.Client) -> None:
    made = {
        _save(
            api,
            title=f"Ledger rule {n}",
            kind=kind,
            tags=["ledger", tag],
            files=[path],
            importance=n + 1,  # distinct scores: see test_paging_through_ties
        )["id"]
        for n, (kind, tag, path) in enumerate(
            [
                ("decision", "alpha", "src/ledger/a.py"),
                ("pitfall", "alpha", "src/ledger/b.py"),
                ("pitfall", "beta", "src/ledger/a.py"),
                ("fact", "beta", "src/ledger/c.py"),
                ("decision", "beta", "src/ledger/c.py"),
            ]
        )
    }

    def ids(**params: Any) -> set[str]:
        response = api.get("/memories", params={"tag": "ledger", "limit": 200, **params})
        assert response.status_code == 200, response.text
        return {m["id"] for m in response.json()["memories"]}

    assert ids() == made
    both = ids(kind=["decision", "pitfall"])  # repeated: any of them
    assert len(both) == 4
    assert len(ids(tag=["alpha", "beta"])) == 5  # values of one filter: any of them
    assert len(ids(kind="pitfall", tag="alpha")) == 1  # filters combine with AND
    assert len(ids(file="src/ledger/c.py")) == 2
    assert ids(status="archived") == set()
    assert ids(project="no-such-project") == set()

    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        body = api.get("/memories", params={"tag": "ledger", "limit": 2, "offset": offset}).json()
        assert len(body["memories"]) <= 2 and body["offset"] == offset
        pages += [m["id"] for m in body["memories"]]
        offset = body["next_offset"]
    assert len(pages) == len(set(pages)) == 5 and set(pages) == made
    _error(api.get("/memories", params={"limit": 201}), 422, "invalid_input")
    _error(api.get("/memories", params={"offset": -1}), 422, "invalid_input")


def test_paging_through_ties(api: httpx.Client) -> None:
    """Pages of equally ranked memories neither repeat nor skip one."""
    made = {_save(api, title=f"Tied rule {n}", tags=["tied"])["id"] for n in range(6)}
    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        body = api.get("/memories", params={"tag": "tied", "limit": 2, "offset": offset}).json()
        pages += [m["id"] for m in body["memories"]]
        offset = body["next_offset"]
    assert pages and sorted(pages) == sorted(made)


def test_search(api: httpx.Client) -> None:
    target = _save(
        api, title="Kafka consumer lag alarm", content="Page when lag > 10k", kind="fact"
    )
    _save(api, title="Kafka topic naming", content="team.domain.event", kind="principle")
    body = api.get("/search", params={"q": "kafka lag"}).json()
    assert body["hits"][0]["id"] == target["id"]
    assert body["hits"][0]["score"] > 0 and "title" in body["hits"][0]["matched"]
    only = api.get("/search", params={"q": "kafka", "kind": "principle"}).json()["hits"]
    assert [hit["memory"]["kind"] for hit in only] == ["principle"]
    first = api.get("/search", params={"q": "kafka", "limit": 1}).json()
    assert len(first["hits"]) == 1 and first["next_offset"] == 1
    second = api.get("/search", params={"q": "kafka", "limit": 1, "offset": 1}).json()
    assert second["hits"][0]["id"] != first["hits"][0]["id"]
    weird = api.get("/search", params={"q": 'AND OR "( title:*'})  # any text is a valid query
    assert weird.status_code == 200


# -- graph, check, context ----------------------------------------------------------------------


def test_why_related_timeline(api: httpx.Client) -> None:
    old = _save(api, title="Use celery for jobs", kind="decision", files=["src/jobs.py"])
    new = _save(
        api,
        title="Use a bounded worker pool for jobs",
        kind="decision",
        files=["src/jobs.py"],
        links=[{"rel": "supersedes", "to": old["id"]}],
    )
    why = api.get(f"/memories/{new['id']}/why")
    assert why.status_code == 200, why.text
    assert old["id"] in why.text
    related = api.get(f"/memories/{old['id']}/related").json()["related"]
    assert new["id"] in {item["id"] for item in related}
    assert api.get(f"/memories/{old['id']}").json()["status"] == "superseded"
    timeline = api.get(f"/memories/{new['id']}/timeline", params={"before": 3}).json()
    assert timeline["memory"]["id"] == new["id"]
    assert old["id"] in {entry["id"] for entry in timeline["before"]}
    _error(api.get(f"/memories/{new['id']}/timeline", params={"before": -1}), 422, "invalid_input")
    _error(api.get("/memories/zzzzzzzz/why"), 404, "not_found")


def test_check_and_context(api: httpx.Client) -> None:
    pit = _save(
        api,
        title="Never hold the billing lock across a network call",
        kind="pitfall",
        files=["src/billing/charge.py"],
    )
    check = api.post("/check", json={"files": ["src/billing/charge.py"], "budget": 400})
    assert check.status_code == 200, check.text
    assert pit["id"][:8] in check.text
    assert api.post("/check", json={"files": ["nothing/here.py"]}).status_code == 200
    _error(api.post("/check", json={"files": "x", "budget": -5}), 422, "invalid_input")
    context = api.get("/context", params={"budget": 2000, "query": "billing lock"}).json()
    assert "billing lock" in context["text"] and context["tokens"] <= 2000


# -- sessions, prompts, capture -----------------------------------------------------------------


def test_sessions_prompts_capture(api: httpx.Client) -> None:
    started = api.post("/sessions", json={"directory": "/work"})
    assert started.status_code == 201, started.text
    sid = started.json()["id"]
    prompt = api.post("/prompts", json={"content": "Why do refunds fail?", "session_id": sid})
    assert prompt.status_code == 201, prompt.text
    assert prompt.json()["memory"]["kind"] == "prompt"
    assert prompt.json()["memory"]["session_id"] == sid
    reply = (
        "Fixed it.\n\n## Key Learnings\n"
        "- Refunds need the original charge id, not the invoice id.\n"
        "- The sandbox rejects refunds older than 90 days.\n"
    )
    captured = api.post("/capture", json={"text": reply, "session_id": sid}).json()
    assert captured["extracted"] == 2 and len(captured["saved"]) == 2
    again = api.post("/capture", json={"text": reply, "session_id": sid}).json()
    assert again["saved"] == [] and len(again["duplicates"]) == 2
    summary = api.post(
        f"/sessions/{sid}/summary", json={"goal": "Fix refunds", "accomplished": "Fixed them"}
    )
    assert summary.status_code == 201, summary.text
    assert summary.json()["memory"]["kind"] == "session"
    ended = api.post(f"/sessions/{sid}/end", json={})
    assert ended.status_code == 200 and ended.json()["ended_at"]
    timeline = api.get(f"/memories/{prompt.json()['id']}/timeline").json()
    assert timeline["scope"] == "session" and timeline["session_id"] == sid
    _error(api.post("/prompts", json={"content": ""}), 422, "invalid_input")
    _error(api.post("/sessions/x/summary", json={}), 422, "invalid_input")  # no text


def test_stats_sync_status_preview(api: httpx.Client) -> None:
    _save(api, title="Stats see this one", kind="config")
    stats = api.get("/stats").json()
    assert stats["project"] == "demo" and stats["stores"][0]["scope"] == "project"
    assert api.get("/sync/status").json()["pending_export"] >= 1
    assert isinstance(api.get("/consolidate/preview").json(), list)


def test_concurrent_writes_all_land(api: httpx.Client, server: Server) -> None:
    """Eight clients saving at once: every save is its own memory, none is lost."""
    ids: list[str] = []
    problems: list[str] = []

    def work(worker: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60.0) as client:
            for n in range(5):
                response = client.post(
                    "/memories",
                    json={"title": f"parallel {worker}-{n}", "tags": ["parallel"]},
                )
                if response.status_code != 201:
                    problems.append(response.text)
                else:
                    ids.append(response.json()["id"])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    assert len(set(ids)) == 40
    listed = api.get("/memories", params={"tag": "parallel", "limit": 200}).json()["memories"]
    assert {m["id"] for m in listed} == set(ids)


# -- export / import ----------------------------------------------------------------------------


def test_export_import_into_another_project(api: httpx.Client, tmp_path: Path, home: Path) -> None:
    _save(api, title="Exported memory", content="travels", custom_field=[1, 2])
    document = api.get("/export").json()
    assert document["format"] == "engram" and document["count"] == len(document["memories"])
    other = Server(_make_project(tmp_path / "other", "other"), home)
    try:
        result = other.client.post("/import", json=document)
        assert result.status_code == 200, result.text
        body = result.json()
        assert body["added"] == document["count"] and body["skipped"] == 0
        again = other.client.post("/import", json=document).json()
        assert again["added"] == 0 and again["updated"] == 0
        assert again["unchanged"] == document["count"]
        mine = {m["id"]: m for m in document["memories"]}
        theirs = {m["id"]: m for m in other.client.get("/export").json()["memories"]}
        assert theirs == mine
        _error(other.client.post("/import", json={"format": "nope"}), 422, "invalid_input")
    finally:
        other.stop()


# -- errors -------------------------------------------------------------------------------------


def test_errors(api: httpx.Client) -> None:
    error = _error(api.get("/memories/zzzzzzzzzz"), 404, "not_found")
    assert "recall" in error["hint"]
    _error(api.get("/memories/not an id!"), 422, "invalid_input")
    _error(api.post("/memories", json={"content": "no title"}), 422, "invalid_input")
    _error(api.post("/memories", json={"title": "x", "importance": 9}), 422, "invalid_input")
    _error(api.post("/memories", json={"title": "x", "kind": "banana"}), 422, "invalid_input")
    bad_json = api.post(
        "/memories", content=b"{not json", headers={"content-type": "application/json"}
    )
    _error(bad_json, 422, "invalid_input")
    _error(api.get("/no/such/route"), 404, "not_found")
    _error(api.put("/memories"), 405, "method_not_allowed")


def test_ambiguous_prefix_is_409(api: httpx.Client) -> None:
    stamp = "2026-01-01T00:00:00.000Z"
    twins = [
        {"id": "q" * 20 + tail, "kind": "fact", "title": f"twin {tail}", "rev": 1}
        | {"created_at": stamp, "updated_at": stamp}
        for tail in ("aaaaaa", "bbbbbb")
    ]
    imported = api.post("/import", json={"format": "engram", "version": 1, "memories": twins})
    assert imported.json()["added"] == 2, imported.text
    error = _error(api.get("/memories/" + "q" * 12), 409, "ambiguous_id")
    assert error["hint"]
    assert api.get("/memories/" + "q" * 20 + "a").json()["title"] == "twin aaaaaa"


def test_a_bug_is_a_logged_500_without_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The one error boundary: an unexpected exception is logged; the client gets a JSON 500."""
    from fastapi.testclient import TestClient

    from engram.http_api import create_app

    app = create_app(_make_project(tmp_path / "buggy"))

    @app.get("/boom")
    def boom() -> None:
        raise ZeroDivisionError("secret internals")

    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        response = client.get("/boom")
        error = _error(response, 500, "internal")
        assert "secret internals" not in response.text and "Traceback" not in response.text
        assert "bug" in error["hint"]
        assert client.get("/health").status_code == 200  # the server goes on
    assert any("GET /boom failed" in record.getMessage() for record in caplog.records)


def test_body_size_limit(api: httpx.Client) -> None:
    big = {"title": "big", "content": "x" * (MAX_BODY_BYTES + 10)}
    _error(api.post("/memories", json=big), 413, "too_large")

    def chunks() -> Iterator[bytes]:  # no content-length: the limit applies while reading
        yield b'{"title": "big", "content": "'
        for _ in range(MAX_BODY_BYTES // (1 << 20) + 1):
            yield b"y" * (1 << 20)
        yield b'"}'

    streamed = api.post("/memories", content=chunks(), headers={"content-type": "application/json"})
    _error(streamed, 413, "too_large")
    assert api.get("/health").status_code == 200


# -- token and binding --------------------------------------------------------------------------


def test_token_is_required_when_set(tmp_path: Path, home: Path) -> None:
    secured = Server(_make_project(tmp_path / "secured"), home, token=TOKEN)
    try:
        with httpx.Client(base_url=secured.url, timeout=30.0) as bare:
            assert bare.get("/health").status_code == 200  # liveness stays open
            error = _error(bare.get("/stats"), 401, "unauthorized")
            assert "ENGRAM_HTTP_TOKEN" in error["hint"]
            assert bare.get("/stats").headers["www-authenticate"] == "Bearer"
            wrong = bare.get("/stats", headers={"Authorization": f"Bearer {TOKEN}x"})
            _error(wrong, 401, "unauthorized")
            _error(bare.get("/stats", headers={"Authorization": TOKEN}), 401, "unauthorized")
            basic = bare.get("/stats", headers={"Authorization": f"Basic {TOKEN}"})
            _error(basic, 401, "unauthorized")
            lower = bare.get("/stats", headers={"Authorization": f"bearer {TOKEN}"})
            assert lower.status_code == 200  # the scheme is case-insensitive (RFC 7235)
            _error(bare.post("/memories", json={"title": "sneaky"}), 401, "unauthorized")
            _error(bare.get("/openapi.json"), 401, "unauthorized")
        assert secured.client.get("/stats").status_code == 200  # the right token
        document = secured.client.get("/openapi.json").json()
        assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
        assert document["security"] == [{"bearer": []}]
        assert "401" in document["paths"]["/stats"]["get"]["responses"]
        assert secured.client.post("/memories", json={"title": "welcome"}).status_code == 201
        assert len(secured.client.get("/export").json()["memories"]) == 1  # "sneaky" never landed
    finally:
        secured.stop()


def test_non_loopback_host_without_token_refuses_to_start(tmp_path: Path, home: Path) -> None:
    root = _make_project(tmp_path / "exposed")
    done = subprocess.run(
        [sys.executable, "-m", "engram.http_api", "--host", "0.0.0.0", "--port", "0"],
        cwd=root,
        env=_env(home),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "refusing to serve on 0.0.0.0" in err and "ENGRAM_HTTP_TOKEN" in err


# -- browsers: DNS rebinding and cross-origin writes -------------------------------------------


def test_a_foreign_host_header_is_refused(api: httpx.Client, server: Server) -> None:
    """DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1."""
    secret = _save(api, title="rebinding target", content="do not leak")
    for host in ("evil.example", f"evil.example:{server.port}", "127.0.0.1.evil.example"):
        response = api.get("/memories", headers={"Host": host})
        error = _error(response, 421, "wrong_host")
        assert host in error["message"] and "rebinding" in error["hint"]
        assert "do not leak" not in response.text
        _error(api.delete(f"/memories/{secret['id']}", headers={"Host": host}), 421, "wrong_host")
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", "localhost"):
        assert api.get(f"/memories/{secret['id']}", headers={"Host": host}).status_code == 200


def test_a_cross_origin_write_is_refused(api: httpx.Client, server: Server) -> None:
    victim = _save(api, title="cross origin victim")
    evil = {"Origin": "https://evil.example"}
    _error(api.post("/memories", json={"title": "planted"}, headers=evil), 403, "cross_origin")
    _error(api.delete(f"/memories/{victim['id']}", headers=evil), 403, "cross_origin")
    # Another local web app (a different port) is another origin too, and says so.
    other = {"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}
    _error(api.post("/memories", json={"title": "planted"}, headers=other), 403, "cross_origin")
    sneaky = {"Sec-Fetch-Site": "cross-site"}
    _error(api.delete(f"/memories/{victim['id']}", headers=sneaky), 403, "cross_origin")
    assert api.get(f"/memories/{victim['id']}").json()["title"] == "cross origin victim"
    assert "planted" not in api.get("/export").text
    # Reads carry no CORS headers, so the page cannot read what it fetched.
    read = api.get("/memories", headers=evil)
    assert read.status_code == 200 and "access-control-allow-origin" not in read.headers
    # The server's own origin, and clients that send none (curl, agents), may write.
    own = {"Origin": server.url, "Sec-Fetch-Site": "same-origin"}
    assert api.post("/memories", json={"title": "same origin"}, headers=own).status_code == 201
    assert api.delete(f"/memories/{victim['id']}").status_code == 200


def test_a_change_needs_four_characters_of_the_id(api: httpx.Client) -> None:
    memory = _save(api, title="prefix guarded")
    short = memory["id"][:3]
    error = _error(api.delete(f"/memories/{short}"), 422, "invalid_input")
    assert "too short to forget" in error["message"]
    _error(api.patch(f"/memories/{short}", json={"title": "x"}), 422, "invalid_input")
    assert api.get(f"/memories/{memory['id']}").json()["title"] == "prefix guarded"
    assert api.delete(f"/memories/{memory['id'][:4]}").status_code == 200


def test_host_and_origin_rules() -> None:
    assert host_allowed("[::1]:7437") and host_allowed("127.0.0.2") and host_allowed("LOCALHOST")
    assert not host_allowed("") and not host_allowed("evil.example") and not host_allowed("a b")
    assert host_allowed("10.0.0.5:80", "10.0.0.5") and not host_allowed("10.0.0.6", "10.0.0.5")
    assert host_allowed("box.lan", "0.0.0.0")  # every name, where a token is required
    assert not cross_origin_write("GET", "localhost", "https://evil.example", "cross-site")
    assert cross_origin_write("PATCH", "localhost:1", "http://localhost:2", None)
    assert cross_origin_write("PUT", "localhost", "null", None)
    assert not cross_origin_write("POST", "localhost:1", "http://LOCALHOST:1", None)
    assert not cross_origin_write("DELETE", "localhost", None, "none")


def test_serve_command_registered(tmp_path: Path) -> None:
    from engram.__main__ import app

    runner = CliRunner()
    helped = runner.invoke(app, ["serve", "--help"])
    assert helped.exit_code == 0 and "--port" in helped.output and "--host" in helped.output
    refused = runner.invoke(app, ["serve", "--host", "10.1.2.3"])
    assert refused.exit_code == 1  # a ServeError, through the CLI's one error boundary
    assert "refusing to serve on 10.1.2.3 without a token" in refused.stderr
    assert f"hint: {ServeError.hint}" in refused.stderr


def test_is_loopback() -> None:
    loopback = ["127.0.0.1", "127.5.0.1", "::1", "[::1]", "localhost", "[::ffff:127.0.0.1]"]
    assert all(map(is_loopback, loopback))
    others = ["0.0.0.0", "::", "192.168.1.2", "example.com", "", "::ffff:192.168.1.2"]
    assert not any(map(is_loopback, others))


# -- derived from the declarations; results as the facade returns them ---------------------------


def test_openapi_recall_parameters_are_the_declarations(tmp_path: Path) -> None:
    """GET /search and GET /memories offer exactly the declared recall filters, with their help."""
    from engram.http_api import create_app
    from engram.operations.memory import RECALL, RECALL_FILTERS

    app = create_app(_make_project(tmp_path / "openapi"))
    try:
        paths = app.openapi()["paths"]
    finally:
        app.state.engram.close()
    http = {p.name: p for p in RECALL.params_for("http")}
    filters = [(p.wire, p.help) for p in RECALL_FILTERS]
    paging = [(name, http[name].help) for name in ("limit", "offset")]
    for path, leading in (("/search", [("q", http["query"].help)]), ("/memories", [])):
        offered = [
            (param["name"], param.get("description"))
            for param in paths[path]["get"]["parameters"]
            if param["in"] == "query"
        ]
        assert offered == [*leading, *filters, *paging], path
        schemas = {param["name"]: param["schema"] for param in paths[path]["get"]["parameters"]}
        for declared in RECALL_FILTERS:  # a list filter is a repeatable parameter
            kind = schemas[declared.wire]["anyOf"][0]["type"]
            assert (kind == "array") == declared.multiple, (path, declared.wire, kind)


def test_a_declared_filter_reaches_both_routes_and_the_facade(tmp_path: Path) -> None:
    """A filter added to RECALL_FILTERS alone: both routes offer it and pass it on by its target."""
    script = """
import json, sys
from pathlib import Path
import engram.operations.memory as memory
from engram.operations.params import Param
memory.RECALL_FILTERS = (
    *memory.RECALL_FILTERS,
    Param("mood", "strings", "Only in these moods.", target="moods", flag="feel", filter=True),
)
from fastapi.testclient import TestClient
from engram.http_api import create_app
from engram.service import Engram
seen = []
Engram.recall = lambda self, query="", **kwargs: seen.append(kwargs) or []
app = create_app(Path(sys.argv[1]))
with TestClient(app, base_url="http://127.0.0.1") as client:
    for path in ("/search", "/memories"):
        assert client.get(path, params={"feel": ["calm", "odd"]}).status_code == 200
        assert client.get(path, params={"feel": "x" * 501}).status_code == 422
    paths = app.openapi()["paths"]
print(json.dumps({"seen": seen, "offered": [
    [p["description"] for p in paths[path]["get"]["parameters"] if p["name"] == "feel"]
    for path in ("/search", "/memories")
]}))
"""
    root = _make_project(tmp_path / "repo")
    done = subprocess.run(
        [sys.executable, "-c", script, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["offered"] == [["Only in these moods."], ["Only in these moods."]]
    assert [call["moods"] for call in out["seen"]] == [["calm", "odd"], ["calm", "odd"]]


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_routes_return_the_facades_results(tmp_path: Path) -> None:
    """Each response model describes the facade's result: nothing added, nothing dropped."""
    from fastapi.testclient import TestClient

    from engram.http_api import create_app
    from engram.operations.views import HitView

    app = create_app(_make_project(tmp_path / "same"))
    engram = app.state.engram
    with TestClient(app, base_url="http://127.0.0.1") as client:

        def post(path: str, body: Any, status: int = 201) -> Any:
            response = client.post(path, json=body)
            assert response.status_code == status, response.text
            return response.json()

        def get(path: str, **params: Any) -> Any:
            response = client.get(path, params=params)
            assert response.status_code == 200, response.text
            return response.json()

        jobs = {"kind": "decision", "files": ["src/jobs.py"], "tags": ["jobs"]}
        old = post("/memories", {"title": "Use celery for jobs", **jobs, "ticket": {"k": 1}})
        assert set(old) == {"action", "id", "redactions", "superseded", "memory", "warnings"}
        rid = old["id"]
        assert old["memory"] == _plain(engram.get(rid))
        links = [{"rel": "supersedes", "to": rid}, f"relates:{rid}"]
        nid = post("/memories", {"title": "Use a worker pool for jobs", **jobs, "links": links})[
            "id"
        ]
        pit = post("/memories", {"title": "Never block the job loop", "scope": "personal"})["id"]
        assert get(f"/memories/{rid}") == _plain(engram.get(rid))
        assert get(f"/memories/{nid}/why") == _plain(engram.why(nid).to_dict())
        assert get(f"/memories/{rid}/why") == _plain(engram.why(rid).to_dict())
        assert get(f"/memories/{rid}/related") == {
            "related": _plain([n.to_dict() for n in engram.related(rid)])
        }
        assert get(f"/memories/{nid}/timeline", before=3) == _plain(
            engram.timeline(nid, before=3).to_dict()
        )
        checked = post("/check", {"files": ["src/jobs.py"], "text": "jobs"}, 200)
        with advice.using(advice.OPERATION_NAMES):  # the advice in them: in HTTP's words
            expected_check = engram.check(["src/jobs.py"], text="jobs").to_dict()
            expected_context = engram.context(query="jobs").to_dict()
        assert "`get` with id=ID" in checked["text"]
        assert checked == _plain(expected_check)
        assert get("/context", query="jobs") == _plain(expected_context)
        assert get("/stats") == _plain(engram.stats().to_dict())
        exported = get("/export")
        assert exported == {
            **_plain(engram.export().to_dict()),
            "exported_at": exported["exported_at"],
        }
        assert get("/sync/status") == _plain(engram.sync_status().to_dict())
        assert get("/consolidate/preview") == _plain(
            [group.to_dict() for group in engram.consolidate_preview()]
        )
        listed = get("/memories", tag="jobs")["memories"]
        assert listed == _plain([hit.record for hit in engram.recall("", tags=["jobs"], limit=20)])
        found = get("/search", q="jobs worker", kind="decision")["hits"]
        hits = engram.recall("jobs worker", kinds=["decision"], limit=10)
        assert found == _plain([HitView.of(hit).full() for hit in hits]) and found

        started = post("/sessions", {"directory": "/work"})
        sid = started["id"]
        assert started == _plain(engram.sessions.get(sid))
        prompt = post("/prompts", {"content": "Why do jobs stall?", "session_id": sid})
        assert prompt["memory"] == _plain(engram.get(prompt["id"]))
        assert get(f"/memories/{prompt['id']}/timeline") == _plain(
            engram.timeline(prompt["id"]).to_dict()
        )
        learned = "## Key Learnings\n- Jobs stall on a full queue.\n"
        captured = post("/capture", {"text": learned, "session_id": sid}, 200)
        assert captured["extracted"] == 1 and captured["session_id"] == sid
        summary = post(f"/sessions/{sid}/summary", {"goal": "Unstick jobs"})
        assert summary["memory"] == _plain(engram.get(summary["id"]))
        ended = post(f"/sessions/{sid}/end", {"summary": "## Goal\nUnstick jobs\n"}, 200)
        assert {**ended, "summary": None} == {**_plain(engram.sessions.get(sid)), "summary": None}
        assert ended["summary"]["memory"] == _plain(engram.get(ended["summary_id"]))
        assert "similar" in ended["summary"] and "warnings" not in ended["summary"]

        assert client.patch(f"/memories/{rid}", json={"importance": 5}).json() == _plain(
            engram.get(rid)
        )
        judged = post(f"/memories/{rid}/judge", {"verdict": "useful", "reason": "helped"}, 200)
        assert judged == _plain(engram.get(rid))
        gone = client.delete(f"/memories/{pit}").json()
        tombstones = {m["id"]: m for m in engram.export(scope="personal").memories}
        assert gone["deleted_at"] and gone == _plain(tombstones[pit])


# -- fuzzing ------------------------------------------------------------------------------------


def test_openapi_fuzzed_with_schemathesis(server: Server) -> None:
    """Every operation, bounded examples each: no 5xx, documented statuses, schema-true bodies.

    Operations on a memory run twice: with generated ids (mostly unknown: 404 or 422), and on
    a real memory made for that operation (so updates, judgements and deletes really happen).
    """
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        response_schema_conformance,
        status_code_conformance,
    )

    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    checks = [not_a_server_error, status_code_conformance, response_schema_conformance]
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    statuses: dict[str, set[int]] = {}

    def fuzz(operation: Any, examples: int, **fixed: Any) -> None:
        seen = statuses.setdefault(operation.label, set())

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(**fixed))
        def run(case: Any) -> None:
            response = case.call_and_validate(base_url=server.url, checks=checks)
            seen.add(response.status_code)

        run()

    for operation in operations:
        fuzz(operation, 10)
        if operation.path.startswith("/memories/{id}"):
            rid = _save(server.client, title=f"fuzz target {operation.label}", tags=["fuzz"])["id"]
            fuzz(operation, 10, path_parameters={"id": rid})
    # The fuzzing reached past validation: real reads, writes and deletes answered 2xx.
    for label in ("PATCH /memories/{id}", "DELETE /memories/{id}", "POST /memories/{id}/judge"):
        assert any(200 <= code < 300 for code in statuses[label]), (label, statuses[label])
    assert 201 in statuses["POST /memories"] and 200 in statuses["POST /import"]
