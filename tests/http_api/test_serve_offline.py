"""engram serve as a user meets it: API docs with no network, a missing extra, a busy port.

Each test runs the real ``engram`` command in a subprocess over a real project. The docs pages
must name only this server and every asset they name must be served; an optional command whose
extra is missing (a shim folder on PYTHONPATH makes the package unimportable, as it is when not
installed) says so in one line with the ``pip install`` hint and exits 1; a port that a real
socket holds is named with ``--port``, without uvicorn's log.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from engram.service import Engram

ENGRAM = [sys.executable, "-m", "engram"]
START_SECONDS = 60.0
TOKEN = "docs-token-for-tests"


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    Engram.init(root, "demo")[0].close()
    return root


class Served:
    """``python -m engram.http_api --port 0`` in a project; the URL read from the line it prints."""

    def __init__(self, root: Path, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "engram.http_api", "--port", "0"],
            cwd=root,
            env=_env(**env),
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()  # printed once the port is bound
        found = re.search(r"serving (http://127\.0\.0\.1:(\d+))", line)
        if found is None:
            self.proc.kill()
            raise AssertionError(f"no URL in {line!r}: {self.proc.stderr.read()}")
        assert found.group(2) != "0"  # the port the system gave, not the one asked for
        self.url = found.group(1)
        headers = {"Authorization": f"Bearer {env['ENGRAM_HTTP_TOKEN']}"} if env else {}
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=60.0)

    def stop(self) -> str:
        self.client.close()
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=30)
        return err


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(_project(tmp_path))
    yield server
    log = server.stop()
    assert "Traceback" not in log, log


class _References(HTMLParser):
    """Every URL a page makes the browser load: src, href, spec-url and quoted paths in scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        self.urls += [v for name, v in attrs if name in {"src", "href", "spec-url"} and v]

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def _references(page: str) -> list[str]:
    parser = _References()
    parser.feed(page)
    quoted = [u for text in parser.scripts for u in re.findall(r"""['"](/[^'"]*)['"]""", text)]
    return parser.urls + quoted


@pytest.mark.parametrize(("path", "kinds"), [("/docs", {"js", "css"}), ("/redoc", {"js"})])
def test_docs_pages_name_only_this_server_and_each_asset_is_served(
    served: Served, path: str, kinds: set[str]
) -> None:
    response = served.client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]  # what a script asks for stays here
    assert "default-src 'self'" in policy and "connect-src 'self'" in policy
    assert not re.search(r"https?:|\*|//", policy), policy
    page = response.text
    assert "cdn" not in page.lower() and "fonts.googleapis" not in page
    assert not re.search(r"(?:https?:)?//[a-z0-9]", page, re.IGNORECASE), page  # nothing remote
    references = _references(page)
    assert "/openapi.json" in references
    seen: set[str] = set()
    for reference in references:
        url = urljoin(served.url + path, reference)
        assert urlsplit(url).netloc == urlsplit(served.url).netloc, reference
        asset = served.client.get(url)
        assert asset.status_code == 200, (reference, asset.text[:200])
        seen.add(reference.rpartition(".")[2])
        if reference.endswith(".js"):
            assert asset.headers["content-type"].startswith("text/javascript")
            assert len(asset.content) > 100_000  # the real bundle, not a stub
    assert kinds <= seen, references
    if path == "/docs":
        assert '"validatorUrl": null' in page  # no badge sending the address to a validator


def test_only_the_named_assets_are_served(served: Served) -> None:
    for name in ("core.py", "../__init__.py", "..%2F__init__.py", "nothing.js"):
        response = served.client.get(f"/docs/assets/{name}")
        assert response.status_code == 404, name
    assert served.client.get("/docs/oauth2-redirect").status_code == 404  # not offered


def test_the_guard_stays_in_front_of_the_docs(tmp_path: Path) -> None:
    server = Served(_project(tmp_path), ENGRAM_HTTP_TOKEN=TOKEN)
    try:
        with httpx.Client(base_url=server.url, timeout=30.0) as bare:
            for path in ("/docs", "/redoc", "/docs/assets/swagger-ui-bundle.js"):
                assert bare.get(path).status_code == 401, path
        assert server.client.get("/docs").status_code == 200
        assert server.client.get("/docs/assets/swagger-ui.css").status_code == 200
        foreign = server.client.get("/docs", headers={"Host": "evil.example"})
        assert foreign.status_code == 421
    finally:
        assert "Traceback" not in server.stop()


# -- a missing extra ------------------------------------------------------------------------------


def _shim(folder: Path, *packages: str) -> Path:
    """Return a folder whose packages fail to import as missing ones do."""
    for package in packages:
        (folder / package).mkdir(parents=True)
        (folder / package / "__init__.py").write_text(
            f"raise ModuleNotFoundError({f'No module named {package!r}'!r}, name={package!r})\n"
        )
    return folder


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=120, check=False
    )


def _one_line_and_hint(done: subprocess.CompletedProcess[str], extra: str) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith("error: ")
    assert lines[1] == f"hint: pip install 'engram-git[{extra}]'"
    assert "Traceback" not in done.stderr and not done.stdout
    return lines[0]


@pytest.mark.parametrize(
    ("missing", "args"),
    [
        ("fastapi", ["serve"]),
        ("fastapi", ["serve", "--compat", "go-engram", "--port", "0"]),
        ("uvicorn", ["serve", "--port", "0"]),
        ("fastapi_offline", ["serve", "--port", "0"]),
    ],
)
def test_serve_without_the_http_extra(tmp_path: Path, missing: str, args: list[str]) -> None:
    root = _project(tmp_path)
    shim = _shim(tmp_path / "shim", missing)
    line = _one_line_and_hint(_run([*ENGRAM, *args], root, PYTHONPATH=str(shim)), "http")
    assert missing.replace("_", "-") in line


def test_python_m_http_api_without_the_extra(tmp_path: Path) -> None:
    root = _project(tmp_path)
    shim = _shim(tmp_path / "shim", "fastapi")
    done = _run(
        [sys.executable, "-m", "engram.http_api", "--port", "0"], root, PYTHONPATH=str(shim)
    )
    assert "fastapi" in _one_line_and_hint(done, "http")


def test_tui_without_the_tui_extra(tmp_path: Path) -> None:
    root = _project(tmp_path)
    shim = _shim(tmp_path / "shim", "textual")
    assert "textual" in _one_line_and_hint(
        _run([*ENGRAM, "tui"], root, PYTHONPATH=str(shim)), "tui"
    )


def test_recall_without_the_semantic_extra_falls_back_to_keywords(tmp_path: Path) -> None:
    """search.mode hybrid (the default) without wordllama is keyword search, as config says."""
    root = _project(tmp_path)
    shim = _shim(tmp_path / "shim", "wordllama")
    saved = _run([*ENGRAM, "remember", "Amounts are integer cents", "no floats"], root)
    assert saved.returncode == 0, saved.stderr
    done = _run([*ENGRAM, "recall", "integer cents"], root, PYTHONPATH=str(shim))
    assert done.returncode == 0, done.stderr
    assert "Amounts are integer cents" in done.stdout and "Traceback" not in done.stderr


# -- a busy port ----------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["engram serve", "python -m engram.http_api"])
def test_a_busy_port_is_one_line_naming_it(tmp_path: Path, how: str) -> None:
    root = _project(tmp_path)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        command = (
            [*ENGRAM, "serve"]
            if how == "engram serve"
            else [sys.executable, "-m", "engram.http_api"]
        )
        done = _run([*command, "--port", str(port)], root)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0] == f"error: port {port} on 127.0.0.1 is in use: pass --port to serve on another"
    assert lines[1].startswith("hint: ") and "--port" in lines[1]
    assert "Errno" not in done.stderr and "serving" not in done.stderr


# -- in a real browser, with no network --------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def chromium() -> Iterator[Any]:
    """Playwright's Chromium launcher, pointed at Debian's /usr/bin/chromium."""
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: apt-get install chromium (CI's .ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    runner = sync_api.sync_playwright().start()
    try:
        yield runner.chromium
    finally:
        runner.stop()


def test_the_docs_render_in_a_browser_with_no_network(
    served: Served, chromium: Any, tmp_path: Path
) -> None:
    """Every request but to this server is refused: Swagger UI and ReDoc still draw the API."""
    browser = chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
    )
    blocked: list[str] = []
    errors: list[str] = []
    own = urlsplit(served.url).netloc

    def only_this_server(route: Any) -> None:
        if urlsplit(route.request.url).netloc == own:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    shots = Path(os.environ.get("ENGRAM_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route("**/*", only_this_server)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{served.url}/docs")
        page.wait_for_selector(".opblock-summary-path", timeout=30_000)
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        assert "/memories" in {p.strip() for p in paths}, paths
        assert len(paths) >= 20  # every operation, not a fragment
        assert page.locator(".info .title").inner_text().startswith("engram")
        page.screenshot(path=str(shots / "api-docs.png"))

        page.goto(f"{served.url}/redoc")
        page.wait_for_selector("[data-section-id^='tag/'], [data-section-id^='operation/']")
        text = page.locator("body").inner_text()
        assert "engram" in text and "/memories" in text
        page.screenshot(path=str(shots / "api-redoc.png"))
    finally:
        browser.close()
    assert not blocked, blocked  # nothing was asked of any other host
    assert not errors, errors


def test_the_served_connections_send_without_nagles_delay() -> None:
    """The socket handed to uvicorn says TCP, so asyncio sets TCP_NODELAY on each connection.

    With proto 0 it did not, and every keep-alive answer waited for the client's delayed ACK
    (about 40 ms: one client got 22 requests a second instead of ~390; bench_http.py).
    """
    import asyncio

    from engram.http_api.serve import bind

    listening = bind("127.0.0.1", 0)
    port = listening.getsockname()[1]
    seen: list[int] = []

    async def main() -> None:
        def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(connected, sock=listening)
        async with server:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()

    try:
        asyncio.run(main())
    finally:
        listening.close()
    assert seen and seen[0] != 0  # TCP_NODELAY on the accepted connection
