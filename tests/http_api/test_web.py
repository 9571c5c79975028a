"""The web page of ``engram serve`` in a real browser: headless Chromium driven by Playwright.

A real git repository in tmp_path gets memories (one of them hostile: script tags, attribute
breakouts, markdown and HTML injection), a session, and a history with a revert that
``engram index`` turns into a pitfall candidate; the real ``engram serve`` subprocess serves it
on a free loopback port, and Debian's /usr/bin/chromium (never a downloaded browser) looks at
it: the dashboard, search as you type and the plain form without JavaScript, a memory's page,
confirming a candidate (the store's file changes), and the hostile memory, where no script may
run and no markup may break. Screenshots go to $ENGRAM_SCREENSHOTS (default: tmp_path).
The browser tests are skipped, saying why, only when /usr/bin/chromium or Playwright is absent
(CI installs both). The package-data test needs no browser.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest

import engram
from engram.http_api.web import assets
from tests.helpers.serving import Served, free_port

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE_TITLE = "<script>alert(1)</script> Hostile title"
HOSTILE_CONTENT = (
    '"><img src=x onerror=alert(2)>\n'
    "# Not a heading\n"
    "[click me](javascript:alert(3)) <b>not bold</b> <iframe src=javascript:alert(4)></iframe>\n"
    "</pre><script>alert(5)</script>\n"
    "{{ 7*7 }} {% raw %}"
)
HOSTILE_TAG = '"><svg onload=alert(6)>'

SEED = r"""
import json, sys
from engram.service import Engram
out = {}
with Engram.open() as e:
    old = e.remember("Money was stored as floats", "Replaced later.", kind="decision",
                     tags=["money"], files=["app/money.py"])
    new = e.remember("Money is stored in integer cents", "Never floats: a cent was lost.",
                     kind="decision", tags=["money"], files=["app/money.py"],
                     links=[{"rel": "supersedes", "to": old.record["id"]}])
    e.remember("Round half to even in reports", "Banker's rounding.", kind="pattern",
               tags=["money"], files=["app/money.py"])
    hostile = e.remember(sys.argv[1], sys.argv[2], kind="pitfall", tags=[sys.argv[3], "money"],
                         files=["app/money.py"])
    session = e.session_start("web-test-session")
    e.remember("Uploader retries need a cap", "Found while fixing uploads.", kind="discovery",
               session_id=session.id)
    summary = e.session_summary("## Goal\nFix the uploader\n## Accomplished\nCapped retries",
                                session_id=session.id)
    out = {"old": old.record["id"], "new": new.record["id"], "hostile": hostile.record["id"],
           "summary": summary.record["id"]}
print(json.dumps(out))
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(HOME=str(home), ENGRAM_HOME=str(home / ".engram"), ENGRAM_AUTHOR="Test Author")
    env.update(ENGRAM_DAEMON="off", GIT_AUTHOR_NAME="Ada", GIT_COMMITTER_NAME="Ada")
    env.update(GIT_AUTHOR_EMAIL="ada@example.com", GIT_COMMITTER_EMAIL="ada@example.com")
    return env


def _run(args: list[str], root: Path, env: dict[str, str]) -> str:
    done = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


def _engram(root: Path, env: dict[str, str], *args: str) -> str:
    return _run([sys.executable, "-m", "engram", *args], root, env)


class Site:
    """A project in a real git repository, served by a real ``engram serve`` subprocess."""

    def __init__(self, base: Path) -> None:
        self.root = base / "repo"
        self.home = base / "home"
        self.root.mkdir(parents=True)
        self.home.mkdir()
        env = self.env = _env(self.home)
        _run(["git", "init", "-q", "-b", "main"], self.root, env)
        _engram(self.root, env, "init", "--project", "shop")
        upload = self.root / "app" / "upload.py"
        upload.parent.mkdir()
        for n in range(9):  # a hotspot: changed more often than the threshold (8)
            upload.write_text(f"RETRIES = {n}\n")
            _run(["git", "add", "-A"], self.root, env)
            _run(["git", "commit", "-q", "-m", f"Tune upload retries to {n}"], self.root, env)
        upload.write_text("RETRIES = None  # retry forever\n")
        _run(["git", "commit", "-qam", "Retry uploads forever"], self.root, env)
        _run(["git", "revert", "--no-edit", "HEAD"], self.root, env)
        self.ids: dict[str, str] = json.loads(
            _run(
                [sys.executable, "-c", SEED, HOSTILE_TITLE, HOSTILE_CONTENT, HOSTILE_TAG],
                self.root,
                env,
            )
        )
        _engram(self.root, env, "index")
        _run(["git", "add", "-A"], self.root, env)
        _run(["git", "commit", "-q", "-m", "Remember the money decisions"], self.root, env)
        port = free_port()
        self.server = Served(
            [sys.executable, "-m", "engram", "serve", "--port", str(port)],
            cwd=self.root,
            env=env,
            port=port,
            log=base / "serve.log",
        )
        self.url = self.server.url

    def stop(self) -> str:
        return self.server.stop()

    def stored(self, rid: str) -> dict[str, Any]:
        """Return a memory's line in .engram/memories.jsonl as the store wrote it."""
        for line in (self.root / ".engram" / "memories.jsonl").read_text("utf-8").splitlines():
            record: dict[str, Any] = json.loads(line)
            if record["id"] == rid:
                return record
        raise AssertionError(f"{rid} not in memories.jsonl")

    def candidates(self) -> list[dict[str, Any]]:
        """Return the pitfall candidates in the store's file."""
        path = self.root / ".engram" / "memories.jsonl"
        records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
        return [
            r
            for r in records
            if r.get("kind") == "pitfall"
            and r.get("status") == "proposed"
            and str(r.get("source", "")).startswith("git:")
        ]


# -- the package data: no browser needed --------------------------------------------------------


def test_templates_and_static_files_are_package_data() -> None:
    """Every template and static file lies inside engram/ and is read through importlib."""
    package = Path(engram.__file__).resolve().parent
    folder = resources.files(assets.PACKAGE)
    names = [
        "base.html",
        "_macros.html",
        "_results.html",
        "dashboard.html",
        "search.html",
        "memory.html",
        "session.html",
        "login.html",
        "confirm.html",
        "error.html",
    ]
    for name in names:
        found = folder.joinpath(assets.TEMPLATES, name)
        assert found.is_file(), name
        assert package in Path(str(found)).resolve().parents
    assert sorted(assets.environment().list_templates()) == sorted(names)
    for name in assets.STATIC_TYPES:
        path = Path(str(folder.joinpath(assets.STATIC, name))).resolve()
        assert path.is_file() and package in path.parents
        assert assets.static_file(name) == (path.read_bytes(), assets.STATIC_TYPES[name])
    assert assets.static_file("../assets.py") is None
    # No page asks for anything from another host (no CDN).
    for name in names:
        text = folder.joinpath(assets.TEMPLATES, name).read_text("utf-8")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name
    # The wheel is the package folder (hatch: packages = ["engram"]); nothing in .gitignore
    # leaves these files out of it.
    if shutil.which("git") and (package.parent / ".git").exists():
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", str(package / "http_api" / "web" / "static" / "app.js")],
            cwd=package.parent,
        )
        assert ignored.returncode == 1


def test_autoescape_is_on_for_every_template() -> None:
    rendered = assets.environment().from_string("{{ text }}").render(text="<b>x</b>")
    assert rendered == "&lt;b&gt;x&lt;/b&gt;"


# -- the real server, without a browser ----------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    if shutil.which("git") is None:
        pytest.skip("the web tests build a real git history: git is not installed")
    served = Site(tmp_path_factory.mktemp("web"))
    yield served
    log = served.stop()
    assert "Traceback" not in log, log


def test_forms_need_this_servers_key_and_origin(site: Site) -> None:
    """A post without the page's key, or from another origin, changes nothing."""
    rid = site.ids["new"]
    before = site.stored(rid)
    url = f"{site.url}/ui/memories/{rid}/status"
    form = {"status": "archived"}
    no_key = httpx.post(url, data=form)
    assert no_key.status_code == 403
    assert "this form is not from this server" in no_key.text
    page = httpx.get(f"{site.url}/ui/memories/{rid}").text
    key = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    other = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
    crossed = httpx.post(url, data={**form, "csrf": key}, headers=other)
    assert crossed.status_code == 403
    assert site.stored(rid) == before
    away = httpx.post(url, data={**form, "csrf": key, "next": "//evil.example/x"})
    assert away.status_code == 303
    assert away.headers["location"] == f"/ui/memories/{rid}?done=archived"
    assert site.stored(rid)["status"] == "archived"
    back = httpx.post(url, data={"status": "active", "csrf": key})
    assert back.status_code == 303
    assert site.stored(rid)["status"] == "active"


def test_pages_refuse_other_hosts_and_send_no_inline_script_policy(site: Site) -> None:
    rebound = httpx.get(f"{site.url}/", headers={"Host": "evil.example"})
    assert rebound.status_code == 421
    page = httpx.get(f"{site.url}/")
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert page.headers["x-frame-options"] == "DENY"
    missing = httpx.get(f"{site.url}/ui/memories/zzzzzzzz")
    assert missing.status_code == 404 and "no memory" in missing.text
    bad = httpx.get(f"{site.url}/ui/search", params={"q": "x", "limit": "many"})
    assert bad.status_code == 422 and "search field &#39;limit&#39;" in bad.text


# -- the browser -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium(site: Site) -> Iterator[Any]:
    """Playwright's Chromium launcher, pointed at Debian's /usr/bin/chromium."""
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: apt-get install chromium (CI's .ci/run does)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright for Python is not installed"
    )
    runner = sync_api.sync_playwright().start()
    try:
        yield runner.chromium
    finally:
        runner.stop()


class Browser:
    """A fresh browser profile (user data dir) of its own, closed and removed at the end."""

    def __init__(self, chromium: Any, **options: Any) -> None:
        self.profile = tempfile.mkdtemp(prefix="engram-web-profile-")
        self.context = chromium.launch_persistent_context(
            self.profile, executable_path=str(CHROMIUM), headless=True, args=ARGS, **options
        )

    def close(self) -> None:
        self.context.close()
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser_context(chromium: Any) -> Iterator[Any]:
    browser = Browser(chromium)
    try:
        yield browser.context
    finally:
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("ENGRAM_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Watch:
    """A browser page with every dialog and console message it raised recorded."""

    def __init__(self, context: Any) -> None:
        self.page = context.new_page()
        self.page.set_viewport_size({"width": 1200, "height": 900})
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.errors: list[str] = []

        def dialog(d: Any) -> None:
            self.dialogs.append(d.message)
            d.dismiss()

        self.page.on("dialog", dialog)
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def watch(browser_context: Any) -> Iterator[Watch]:
    watched = Watch(browser_context)
    yield watched
    watched.close()
    assert watched.dialogs == []
    assert watched.errors == []


def test_dashboard_shows_counts_candidates_hotspots_sessions(
    site: Site, watch: Watch, shots: Path
) -> None:
    page = watch.page
    page.goto(f"{site.url}/")
    stats = json.loads(_engram(site.root, site.env, "stats", "--json"))
    total = sum(store["memories"] for store in stats["stores"])
    assert page.inner_text("#total") == str(total)
    candidates = site.candidates()
    assert candidates, "engram index found no candidate in the revert"
    listed = page.locator("#candidates tr.candidate")
    assert listed.count() == len(candidates)
    assert "Retry uploads forever" in page.inner_text("#candidates")
    assert "app/upload.py" in page.inner_text("#hotspots")
    assert "Fix the uploader" in page.inner_text("#sessions")
    page.screenshot(path=str(shots / "dashboard.png"), full_page=True)
    page.click("#sessions a:has-text('session')")
    assert page.locator("h1").inner_text() == "Session web-test-session"
    assert "Uploader retries need a cap" in page.inner_text("main")
    page.screenshot(path=str(shots / "session.png"), full_page=True)


def test_search_as_you_type_then_open_a_memory(site: Site, watch: Watch, shots: Path) -> None:
    page = watch.page
    page.goto(f"{site.url}/ui/search")
    page.locator("#q").press_sequentially("integer cents", delay=30)
    page.wait_for_url("**/ui/search?q=integer+cents**")
    first = page.locator("#results .hit-title").first
    first.wait_for()
    assert first.inner_text() == "Money is stored in integer cents"
    page.fill("#q", "money")
    page.select_option("select[name=kind]", "pattern")
    page.wait_for_url("**/ui/search?q=money&kind=pattern**")
    page.wait_for_function(
        "[...document.querySelectorAll('#results .hit-title')]"
        ".map(a => a.innerText).join('|') === 'Round half to even in reports'"
    )
    page.select_option("select[name=kind]", "")
    page.locator("#results .hit-title:has-text('integer cents')").wait_for()
    page.screenshot(path=str(shots / "search.png"), full_page=True)
    page.locator("#results .hit-title:has-text('integer cents')").click()
    assert page.inner_text("#title") == "Money is stored in integer cents"
    assert "Money was stored as floats" in page.inner_text("#why")
    assert "supersedes" in page.inner_text("#why")
    assert "Round half to even" in page.inner_text("#related")
    assert "Remember the money decisions" in page.inner_text("#versions")
    assert page.locator("#timeline tr").count() >= 2
    page.screenshot(path=str(shots / "memory.png"))


def test_search_works_without_javascript(site: Site, chromium: Any, shots: Path) -> None:
    """With JavaScript off, the search form is a plain GET form and the pages read the same."""
    browser = Browser(chromium, java_script_enabled=False)
    try:
        page = browser.context.new_page()
        page.goto(f"{site.url}/ui/search")
        page.fill("#q", "rounding")
        page.press("#q", "Enter")
        page.wait_for_url("**/ui/search?q=rounding**")
        assert "Round half to even in reports" in page.inner_text("#results")
        page.goto(f"{site.url}/ui/search?q=money&kind=decision&tag=money")
        titles = page.locator("#results .hit-title").all_inner_texts()
        assert "Money is stored in integer cents" in titles
        assert all("Round half" not in title for title in titles)
        assert page.locator("select[name=kind] option[selected]").inner_text() == "decision"
        page.locator("#results .hit-title", has_text="integer cents").click()
        assert page.inner_text("#title") == "Money is stored in integer cents"
        assert "Money was stored as floats" in page.inner_text("#why")
        page.screenshot(path=str(shots / "no-javascript.png"))
    finally:
        browser.close()


def test_confirm_a_candidate_changes_the_store(site: Site, watch: Watch, shots: Path) -> None:
    page = watch.page
    page.goto(f"{site.url}/")
    candidate = site.candidates()[0]
    row = page.locator("#candidates tr.candidate", has_text=candidate["title"])
    row.locator("button.confirm").click()
    page.wait_for_url(lambda url: url == f"{site.url}/?done=confirmed")
    assert "Confirmed" in page.inner_text(".done")
    assert site.stored(candidate["id"])["status"] == "active"
    assert page.locator("#candidates", has_text=candidate["title"]).count() == 0
    page.screenshot(path=str(shots / "confirmed.png"), full_page=True)


def test_hostile_memory_text_runs_nothing_and_breaks_no_markup(
    site: Site, watch: Watch, shots: Path
) -> None:
    page = watch.page
    rid = site.ids["hostile"]
    page.goto(f"{site.url}/ui/memories/{rid}")
    assert page.inner_text("#title") == HOSTILE_TITLE
    assert page.inner_text("#content") == HOSTILE_CONTENT
    assert HOSTILE_TAG in page.inner_text("main")
    assert page.locator("main img, main iframe, main svg, main b").count() == 0
    assert page.locator("script").count() == 1  # the page's own app.js
    assert page.locator("a[href^='javascript:']").count() == 0
    assert page.locator("#actions form").count() >= 4  # the markup after the text still stands
    page.screenshot(path=str(shots / "hostile.png"))
    page.goto(f"{site.url}/ui/search")
    page.locator("#q").press_sequentially("Hostile", delay=20)
    page.locator("#results .hit-title", has_text="Hostile title").wait_for()
    assert page.locator("#results img, #results script, #results svg").count() == 0
    query = "%3Cscript%3Ealert(7)%3C/script%3E%22%3E%3Cimg+src=x+onerror=alert(8)%3E"
    page.goto(f"{site.url}/ui/search?q={query}")
    assert "<script>alert(7)</script>" in page.input_value("#q")
    assert page.locator("main img, main script").count() == 0
    time.sleep(0.3)  # a script that had slipped through would have raised its dialog by now


# -- a server with a token: the browser signs in once ---------------------------------------------


def test_a_token_server_lets_a_person_sign_in_and_keeps_the_api_bearer_only(
    tmp_path: Path, chromium: Any, shots: Path
) -> None:
    root, home = tmp_path / "repo", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    env = dict(_env(home), ENGRAM_HTTP_TOKEN="s3cret-token-for-the-team")
    _run(["git", "init", "-q"], root, env)
    _engram(root, env, "init", "--project", "guarded")
    _engram(root, env, "remember", "Deploys need a token", "Behind the team's token.")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = Served(
        [sys.executable, "-m", "engram", "serve", "--port", str(port)],
        cwd=root,
        env=env,
        port=port,
        log=tmp_path / "serve.log",
    )
    browser = None
    try:
        page_get = httpx.get(f"{url}/ui/search?q=deploys", headers={"accept": "text/html"})
        assert page_get.status_code == 303
        assert page_get.headers["location"] == "/ui/login?next=%2Fui%2Fsearch%3Fq%3Ddeploys"
        assert httpx.get(f"{url}/memories").status_code == 401  # the API: bearer, as ever
        assert httpx.get(f"{url}/ui/static/style.css").status_code == 200  # no data in it

        browser = Browser(chromium)
        page = browser.context.new_page()
        page.goto(f"{url}/")
        assert page.url == f"{url}/ui/login?next=%2F"
        page.fill("input[name=token]", "a guess")
        page.click("button[type=submit]")
        assert "not this server's token" in page.inner_text("main")
        page.fill("input[name=token]", "s3cret-token-for-the-team")
        page.click("button[type=submit]")
        page.wait_for_url(f"{url}/")
        assert "1" in page.inner_text("main") and "Project guarded" in page.inner_text("main")
        page.screenshot(path=str(shots / "signed-in.png"))
        cookies = {c["name"]: c for c in browser.context.cookies()}
        cookie = cookies["engram_web"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert "s3cret" not in cookie["value"]  # an HMAC of the token, not the token
        # The cookie opens the pages, never the API (a script's request there needs the bearer).
        jar = {"engram_web": cookie["value"]}
        assert httpx.get(f"{url}/memories", cookies=jar).status_code == 401
        assert httpx.get(f"{url}/", cookies=jar).status_code == 200
        bearer = {"authorization": "Bearer s3cret-token-for-the-team"}
        assert httpx.get(f"{url}/memories", headers=bearer).status_code == 200
    finally:
        if browser is not None:
            browser.close()
        assert "Traceback" not in server.stop()


def test_superseding_by_a_memory_out_of_use_asks_first(site: Site) -> None:
    """As the TUI does: a superseded memory superseding an active one needs a second yes."""
    old, hostile = site.ids["old"], site.ids["hostile"]
    assert site.stored(old)["status"] == "superseded"
    before = site.stored(old)
    page = httpx.get(f"{site.url}/ui/memories/{old}").text
    key = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    url = f"{site.url}/ui/memories/{old}/supersede"
    asked = httpx.post(url, data={"target": hostile, "csrf": key})
    assert asked.status_code == 409
    assert "This memory is superseded and" in asked.text and "itself out of use" in asked.text
    assert '<input type="hidden" name="confirm" value="yes">' in asked.text
    assert "<script>alert(1)</script>" not in asked.text  # the target's title, escaped
    assert site.stored(old) == before
    done = httpx.post(url, data={"target": hostile, "csrf": key, "confirm": "yes"})
    assert done.status_code == 303
    links = site.stored(old).get("links") or []
    assert {"rel": "supersedes", "to": hostile} in links
