"""Secrets sent through every channel engram has reach neither ``.engram/`` nor its git commits.

Real-format fakes (an ``AKIA`` id, a ``ghp_`` token, a PEM block, a password in a URL …), made
fresh for each channel so that a leak names its channel, go in through the real adapters: CLI
processes, one MCP stdio session, one HTTP server, one socket daemon, imports, a sync chunk
another clone wrote, a teammate's line pushed to the sync branch, ADR files and commit messages.
Then every byte under ``.engram/`` (``.gz`` files decompressed) and every git object engram wrote
is searched for every secret, case-insensitively (a lower-cased AWS id is still a leak). Each
channel also carries a harmless canary, which must arrive: a channel that silently stored
nothing cannot pass as one that redacted.

A second test puts every line of tests/fixtures/benign_secrets_corpus.txt through ``redact``
and through a real save: 0 false positives.

Fixture secrets are assembled at run time, so this file holds no string a scanner would flag.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engram.daemon.protocol import Client as RpcClient
from engram.service import Engram
from engram.store.redact import REDACTED, redact
from engram.sync.chunks import chunk_id
from tests.helpers.places import FIXTURES

FIXTURES = FIXTURES
GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="needs git")

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"
B32 = string.ascii_uppercase + "234567"


# --- real-format fakes ---------------------------------------------------------------------


class Maker:
    """Random pieces for fake secrets, from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def s(self, n: int, alphabet: str = ALNUM) -> str:
        """Return n random characters, with a digit and a letter in them where the set has."""
        out = [self.rng.choice(alphabet) for _ in range(n)]
        digits = [c for c in alphabet if c.isdigit()]
        letters = [c for c in alphabet if c.isalpha()]
        if digits and n > 2:
            out[n // 2] = self.rng.choice(digits)
        if letters and n > 2:
            out[0] = self.rng.choice(letters)
        return "".join(out)

    def b64(self, raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _pem(m: Maker, label: str) -> tuple[str, str]:
    lines = [m.s(64, ALNUM + "+/") for _ in range(3)] + [m.s(20, ALNUM + "+/") + "=="]
    text = f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"
    return text, lines[0]


def _jwt(m: Maker) -> tuple[str, str]:
    head = m.b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = m.b64(json.dumps({"sub": m.s(12, string.digits), "name": m.s(8)}).encode())
    tail = m.s(43, URLSAFE)
    return f"{head}.{body}.{tail}", f"{body}.{tail}"


def _same(text: str) -> tuple[str, str]:
    return text, text


# name -> make(maker) -> (text as written, the part that must not be stored)
KINDS: dict[str, Callable[[Maker], tuple[str, str]]] = {
    "aws access key id": lambda m: _same("AKIA" + m.s(16, B32)),
    "aws secret key": lambda m: (
        f"aws_secret_access_key = {(v := m.s(1, string.ascii_letters) + m.s(39, ALNUM + '+'))}",
        v,
    ),
    "github classic token": lambda m: _same("ghp_" + m.s(36)),
    "github oauth token": lambda m: _same("gho_" + m.s(36)),
    "github app token": lambda m: _same("ghs_" + m.s(36)),
    "github fine-grained pat": lambda m: _same("github_pat_" + m.s(22) + "_" + m.s(59)),
    "gitlab pat": lambda m: _same("glpat-" + m.s(20, URLSAFE)),
    "slack bot token": lambda m: _same(
        f"xoxb-{m.s(12, string.digits)}-{m.s(13, string.digits)}-{m.s(24)}"
    ),
    "slack user token": lambda m: _same(
        f"xoxp-{m.s(12, string.digits)}-{m.s(12, string.digits)}-{m.s(13, string.digits)}-"
        + m.s(32, HEX)
    ),
    "slack webhook": lambda m: (
        f"https://hooks.slack.com/services/T{m.s(8, B32)}/B{m.s(8, B32)}/{(v := m.s(24))}",
        v,
    ),
    "stripe live key": lambda m: _same("sk_live_" + m.s(24)),
    "stripe restricted key": lambda m: _same("rk_live_" + m.s(24)),
    "google api key": lambda m: _same("AIza" + m.s(35, URLSAFE)),
    "google oauth secret": lambda m: _same("GOCSPX-" + m.s(28, URLSAFE)),
    "npm token": lambda m: _same("npm_" + m.s(36)),
    "pypi token": lambda m: _same("pypi-AgEIcHlwaS5vcmc" + m.s(70, URLSAFE)),
    "anthropic key": lambda m: _same("sk-ant-api03-" + m.s(93, URLSAFE) + "AA"),
    "openai project key": lambda m: _same("sk-proj-" + m.s(48, URLSAFE)),
    "twilio account sid": lambda m: _same("AC" + m.s(32, HEX)),
    "twilio api key": lambda m: _same("SK" + m.s(32, HEX)),
    "sendgrid key": lambda m: _same("SG." + m.s(22, URLSAFE) + "." + m.s(43, URLSAFE)),
    "mailgun key": lambda m: _same("key-" + m.s(32, HEX)),
    "jwt": _jwt,
    "rsa private key": lambda m: _pem(m, "RSA PRIVATE KEY"),
    "openssh private key": lambda m: _pem(m, "OPENSSH PRIVATE KEY"),
    "postgres url": lambda m: (f"postgres://app_user:{(v := m.s(16))}@db.internal:5432/app", v),
    "mysql url": lambda m: (f"mysql://root:{(v := m.s(16))}@localhost:3306/shop", v),
    "amqp url": lambda m: (f"amqp://guest:{(v := m.s(16))}@rabbit.internal:5672/jobs", v),
    "mongodb srv url": lambda m: (
        f"mongodb+srv://admin:{(v := m.s(16))}@cluster0.ab1cd.mongodb.net/prod",
        v,
    ),
    "redis url, no user": lambda m: (f"redis://:{(v := m.s(16))}@cache.internal:6379/0", v),
    "redis url": lambda m: (f"redis://default:{(v := m.s(16))}@cache.internal:6379/0", v),
    "ftp url": lambda m: (f"ftp://deploy:{(v := m.s(16))}@files.internal/in", v),
    "http url": lambda m: (f"http://admin:{(v := m.s(16))}@intranet.local/wiki", v),
    "https url": lambda m: (f"https://ci:{(v := m.s(16))}@git.internal/org/repo.git", v),
    # As a title rebuilt from text once wrote it: a space after the scheme's colon.
    "url, space after scheme": lambda m: (f"mysql: //root:{(v := m.s(16))}@db.internal/app", v),
    # Written raw in a note, not percent-encoded: the password runs to the host's @.
    "url, password with @ and !": lambda m: (
        f"postgres://app:{(v := m.s(6) + '@' + m.s(5) + '!' + m.s(5))}@db.internal/app",
        v,
    ),
    "docker auth": lambda m: (
        '{"auths": {"registry.internal": {"auth": "'
        + (v := base64.b64encode(f"deploy:{m.s(14)}".encode()).decode())
        + '"}}}',
        v.rstrip("="),
    ),
    "password, letters only": lambda m: (
        f"password: {(v := m.s(10, string.ascii_letters))}",
        v,
    ),
    "API_TOKEN, letters only": lambda m: (
        f"API_TOKEN={(v := m.s(10, string.ascii_letters))}",
        v,
    ),
    "prose password": lambda m: (f"the staging admin password is {(v := m.s(12))}", v),
    "prose aws secret key": lambda m: (
        f"the aws secret access key is {(v := m.s(40, ALNUM + '/'))}",
        v,
    ),
    "basic auth header": lambda m: (
        f"Authorization: Basic {(v := base64.b64encode(f'deploy:{m.s(14)}'.encode()).decode())}",
        v.rstrip("="),
    ),
    "bearer header": lambda m: (f"Authorization: Bearer {(v := m.s(40))}", v),
    "sentry dsn": lambda m: (
        f"https://{(v := m.s(32, HEX))}@o{m.s(6, string.digits)}.ingest.sentry.io/"
        + m.s(7, string.digits),
        v,
    ),
    "yaml password": lambda m: (f"password: {(v := m.s(16))}", v),
    "json password": lambda m: (f'"db_password": "{(v := m.s(16))}"', v),
    "env password": lambda m: (f"DB_PASSWORD={(v := m.s(16))}", v),
    "shell token": lambda m: (f"export API_TOKEN='{(v := m.s(24))}'", v),
    "heroku api key": lambda m: (
        f"HEROKU_API_KEY={(v := str(uuid.UUID(int=m.rng.getrandbits(128))))}",
        v,
    ),
    "digitalocean token": lambda m: _same("dop_v1_" + m.s(64, HEX)),
    "hugging face token": lambda m: _same("hf_" + m.s(34)),
    "databricks token": lambda m: _same("dapi" + m.s(32, HEX)),
    "shopify token": lambda m: _same("shpat_" + m.s(32, HEX)),
    "square token": lambda m: _same("sq0atp-" + m.s(22, URLSAFE)),
    "telegram bot token": lambda m: _same(
        m.s(1, "123456789") + m.s(8, string.digits) + ":AA" + m.s(33, URLSAFE)
    ),
    "discord bot token": lambda m: _same("M" + m.s(23) + "." + m.s(6) + "." + m.s(27, URLSAFE)),
    "azure storage key": lambda m: (
        f"DefaultEndpointsProtocol=https;AccountName=acct{m.s(4, string.digits)};"
        f"AccountKey={(v := m.s(86, ALNUM + '+/') + '==')};EndpointSuffix=core.windows.net",
        v[:-2],
    ),
    "vault token": lambda m: _same("hvs." + m.s(90, URLSAFE)),
    "curl basic auth": lambda m: (f"curl -u admin:{(v := m.s(14))} https://api.internal/v1", v),
    "private tag": lambda m: (f"<private>vault unseal {(v := m.s(20))}</private>", v),
}
MULTILINE = {"rsa private key", "openssh private key"}
LINE = 240  # the longest secret sent through a one-line field (title, source, author …)
SHORT = 60  # … and through a session id (200 characters at most)


@dataclass
class Channel:
    """One way into engram, the secrets sent through it, and its canary."""

    name: str
    secrets: list[tuple[str, str, str]]  # (kind, text, core)
    canary: str
    delivered: bool = True  # False: what it carries is refused, so its canary never arrives

    def kinds(self) -> set[str]:
        """Return the formats this channel carries."""
        return {kind for kind, _, _ in self.secrets}

    def texts(self, *, single_line: bool = False) -> list[str]:
        """Return the secrets' texts (leaving out multi-line ones where a line is all it takes)."""
        return [t for k, t, _ in self.secrets if not (single_line and k in MULTILINE)]

    def block(self) -> str:
        """All the secrets as one multi-line text, canary first."""
        return "\n".join([f"{self.canary} notes:", *self.texts()])

    def batches(self, limit: int, *, single_line: bool = False) -> list[str]:
        """Return space-separated runs of the secrets (canary first), each under limit chars."""
        out: list[str] = []
        current = self.canary
        for text in self.texts(single_line=single_line):
            text = " ".join(text.split())
            if len(current) + 3 + len(text) > limit:
                out.append(current)
                current = self.canary
            current += " ; " + text
        out.append(current)
        return out


@dataclass
class Ledger:
    """Every channel used, so that the scan can name where a found secret came in."""

    seed: int = 20261201
    channels: dict[str, Channel] = field(default_factory=dict)
    leaked: set[tuple[str, str]] = field(default_factory=set)  # (format, channel)

    def channel(
        self,
        name: str,
        *,
        kinds: list[str] | None = None,
        longest: int | None = None,
        delivered: bool = True,
    ) -> Channel:
        """A channel with fresh secrets of these kinds (all), none longer than ``longest``.

        One-line fields (a title, a session id) are where ``longest`` applies: a 300-character
        key block is no title, and the CLI pays a process for every 500 characters of them.
        """
        maker = Maker(self.seed + len(self.channels))
        chosen = kinds if kinds is not None else list(KINDS)
        secrets = [(kind, *KINDS[kind](maker)) for kind in chosen]
        if longest is not None:
            secrets = [s for s in secrets if len(s[1]) <= longest and s[0] not in MULTILINE]
        canary = f"canary{len(self.channels):03d}x{maker.s(6, string.ascii_lowercase)}"
        made = Channel(name, secrets, canary, delivered)
        self.channels[name] = made
        return made

    def pairs(self) -> int:
        return sum(len(c.secrets) for c in self.channels.values())

    def leaks(self, blobs: dict[str, bytes]) -> list[str]:
        """Return 'kind via channel in file' for every secret found in any blob.

        Its first 16 characters are enough to count: a key cut short (a clipped title) leaks.
        """
        lowered = {name: data.lower() for name, data in blobs.items()}
        found = []
        for channel in self.channels.values():
            for kind, _, core in channel.secrets:
                needle = core[:16].lower().encode()
                for name, data in lowered.items():
                    if needle in data:
                        found.append(f"{kind} via {channel.name} in {name}")
                        self.leaked.add((kind, channel.name))
        return found

    def matrix(self) -> str:
        """Formats x ways in: 'leaked/sent' per cell ('-': none sent), and the totals.

        A way in groups the channels of one adapter or import format (``cli`` holds remember's
        title, content, tags, files, source …); each channel's fields are listed below it.
        """
        groups: dict[str, list[Channel]] = {}
        for channel in self.channels.values():
            groups.setdefault(way_in(channel.name), []).append(channel)
        width = max(len(kind) for kind in KINDS)
        heads = list(groups)
        wide = {name: max(len(name), 5) for name in heads}
        lines = [" " * width + " | " + " | ".join(f"{n:>{wide[n]}}" for n in heads)]
        for kind in KINDS:
            cells = []
            for name in heads:
                sent = [c for c in groups[name] if any(k == kind for k, _, _ in c.secrets)]
                leaked = sum((kind, c.name) in self.leaked for c in sent)
                cell = f"{leaked}/{len(sent)}" if sent else "-"
                cells.append(f"{cell:>{wide[name]}}")
            lines.append(f"{kind:<{width}} | " + " | ".join(cells))
        lines.append(
            f"{len(KINDS)} formats x {len(heads)} ways in ({len(self.channels)} channels), "
            f"{self.pairs()} secrets sent, {len(self.leaked)} leaked"
        )
        for name in heads:
            lines.append(f"  {name}: " + ", ".join(c.name for c in groups[name]))
        return "\n".join(lines)


def way_in(channel: str) -> str:
    """The adapter or import format a channel belongs to: 'cli', 'import go', 'sync chunk' …"""
    words = channel.split()
    if words[0] in {"import", "sync", "go", "hook", "git", "adr"}:
        return " ".join(words[:2])
    return words[0]


# --- what engram holds -----------------------------------------------------------------------


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        with contextlib.suppress(OSError, EOFError):
            data = gzip.decompress(data)
    return data


def engram_files(folder: Path, *, skip: frozenset[Path] = frozenset()) -> dict[str, bytes]:
    """Every file under a .engram/ folder, .gz decompressed, by path relative to it."""
    return {
        str(path.relative_to(folder)): _read(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink() and path not in skip
    }


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ana",
        "GIT_AUTHOR_EMAIL": "ana@example.invalid",
        "GIT_COMMITTER_NAME": "Ana",
        "GIT_COMMITTER_EMAIL": "ana@example.invalid",
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, capture_output=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def objects_written(repo: Path, ref: str, *, not_from: list[str]) -> dict[str, bytes]:
    """Every object reachable from ref but not from the given commits, content decompressed."""
    listed = git(repo, "rev-list", "--objects", ref, "--not", *not_from).decode().split()
    shas = sorted({item for item in listed if len(item) == 40})
    if not shas:
        return {}
    out = git(repo, "cat-file", "--batch", stdin="\n".join(shas).encode() + b"\n")
    blobs: dict[str, bytes] = {}
    pos = 0
    while pos < len(out):
        header_end = out.index(b"\n", pos)
        sha, _, size = out[pos:header_end].split()
        body = out[header_end + 1 : header_end + 1 + int(size)]
        pos = header_end + 1 + int(size) + 1
        if body[:2] == b"\x1f\x8b":
            body = gzip.decompress(body)
        blobs[f"git object {sha.decode()}"] = body
    return blobs


# --- adapters --------------------------------------------------------------------------------


def cli(root: Path, *args: str, stdin: bytes | None = None, codes: tuple[int, ...] = (0,)) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(root), *args, "--json"],
        input=stdin,
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert done.returncode in codes, (args[:2], done.stdout.decode()[-2000:], done.stderr.decode())
    return json.loads(done.stdout) if done.stdout.strip() else {}


def parallel(calls: list[Callable[[], Any]]) -> list[Any]:
    with ThreadPoolExecutor(max_workers=3) as pool:
        return list(pool.map(lambda call: call(), calls))


def _port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "repo"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    (folder / "README.md").write_text("demo\n")
    git(folder, "add", "README.md")
    git(folder, "commit", "-q", "-m", "start")
    Engram.init(folder, "demo")[0].close()
    yield folder


# --- the channels ----------------------------------------------------------------------------


def send_cli(root: Path, ledger: Ledger) -> None:
    """remember, update, judge, prompt, capture, session start and summary, as processes."""
    title, source, topic = (
        ledger.channel(f"cli remember {name}", longest=LINE)
        for name in ("title", "--source", "--topic-key")
    )
    session = ledger.channel("cli remember --session", longest=SHORT)
    content, tags, files = (
        ledger.channel(f"cli remember {name}") for name in ("content", "--tags", "--files")
    )
    up_content, up_tags, up_files = (
        ledger.channel(f"cli update {name}") for name in ("--content", "--tags", "--files")
    )
    up_title, up_topic = (
        ledger.channel(f"cli update {name}", longest=LINE) for name in ("--title", "--topic-key")
    )
    long_fields = [title.batches(480), source.batches(480), topic.batches(480)]
    sessions = session.batches(190, single_line=True)
    titles, topics = up_title.batches(480), up_topic.batches(480)
    updates = max(len(titles), len(topics))
    # Round 0 carries the tags and files, and updates (which replace them) start at round 1.
    rounds = max(len(sessions), updates + 1, *(len(b) for b in long_fields))

    def remember(i: int) -> dict[str, Any]:
        args = ["remember", long_fields[0][i % len(long_fields[0])], f"round {i}"]
        args += ["--source", long_fields[1][i % len(long_fields[1])]]
        args += ["--topic-key", long_fields[2][i % len(long_fields[2])] + f" {i}"]
        args += ["--session", sessions[i % len(sessions)]]
        if i == 0:
            args[2] = content.block()
            args += [opt for text in [tags.canary, *tags.texts()] for opt in ("-t", text)]
            args += [opt for text in [files.canary, *files.texts()] for opt in ("-f", text)]
        return cli(root, *args)

    saved = parallel([lambda i=i: remember(i) for i in range(rounds)])
    ids = [result["id"] for result in saved]

    def update(i: int) -> dict[str, Any]:
        args = ["update", ids[i + 1], "--title", titles[i % len(titles)]]
        args += ["--topic-key", topics[i % len(topics)] + f" u{i}"]
        if i == 0:
            args += ["--content", up_content.block()]
            args += [opt for text in [up_tags.canary, *up_tags.texts()] for opt in ("-t", text)]
            args += [opt for text in [up_files.canary, *up_files.texts()] for opt in ("-f", text)]
        return cli(root, *args)

    parallel([lambda i=i: update(i) for i in range(updates)])

    reason, query = ledger.channel("cli judge --reason"), ledger.channel("cli judge --query")
    prompt, capture = ledger.channel("cli prompt"), ledger.channel("cli capture")
    directory = ledger.channel("cli session start -d")
    start_id = ledger.channel(
        "cli session start ID", kinds=["aws access key id", "github classic token", "npm token"]
    )
    summary = ledger.channel("cli session summary")
    learnings = "\n".join(
        f"- {capture.canary} learned that the deploy credential is {text} (rotate it)"
        for text in capture.texts(single_line=True)
    )
    sid = start_id.batches(190, single_line=True)[0]
    judged = ["judge", ids[1], "--verdict", "useful", "--reason", reason.block()]
    captured = f"Done.\n\n## Key Learnings\n{learnings}\n".encode()
    calls: list[Callable[[], Any]] = [
        lambda: cli(root, *judged, "--query", query.block()),
        lambda: cli(root, "prompt", prompt.block()),
        lambda: cli(root, "capture", "-", stdin=captured),
    ]
    parallel(calls)
    cli(root, "session", "start", sid, "-d", directory.block())
    cli(
        root, "session", "summary", summary.block(), "-s", sid, "--goal", summary.block(),
        "--discoveries", summary.block(), "--next-steps", summary.block(),
        "--relevant-files", summary.block(),
    )  # fmt: skip


def send_imports(root: Path, tmp_path: Path, ledger: Ledger) -> None:
    """`engram import` of an engram export (unknown fields, history, tombstone) and a Go chunk."""
    export, go = ledger.channel("import engram export"), ledger.channel("import go chunk")
    texts = export.texts()
    stamp = "2026-01-01T00:00:00.000Z"

    def record(n: int, **extra: Any) -> dict[str, Any]:
        return {
            "id": f"imp{n:04d}abcdefghijklmnopqr"[:26],
            "kind": "fact",
            "title": f"{export.canary} imported {n}",
            "created_at": stamp,
            "updated_at": stamp,
            "rev": 2,
            **extra,
        }

    half = len(texts) // 2
    memories = [
        record(
            1,
            content="\n".join(texts[:half]),
            custom_field={"nested": [{"deep": text} for text in texts[half:]]},
            history=[{"rev": 1, "title": texts[0], "content": "\n".join(texts)}],
            conflicts=[{"content": "\n".join(texts), "updated_at": stamp}],
            judgements=[{"score": 1.0, "by": texts[1], "reason": "\n".join(texts)}],
            **{f"x-{texts[2]}": "a key of an unknown field"},
        ),
        {  # a tombstone that kept its text
            **record(2, content="\n".join(texts)),
            "deleted_at": stamp,
            "leftover": "\n".join(texts),
        },
    ]
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"format": "engram", "version": 1, "memories": memories}))
    cli(root, "import", str(path))
    gtexts = go.texts()
    chunk = {
        "sessions": [
            {
                "id": "sess-go-1",
                "project": "demo",
                "directory": "\n".join(gtexts),
                "started_at": "2026-01-01 09:00:00",
                "summary": f"{go.canary} summary\n" + "\n".join(gtexts),
            }
        ],
        "observations": [
            {
                "id": n + 1,
                "sync_id": f"obs-go-{n:04d}",
                "session_id": "sess-go-1",
                "type": "decision",
                "title": f"{go.canary} observation {n}",
                "content": text,
                "project": "demo",
                "scope": "project",
                "created_at": "2026-01-01 09:10:00",
                "updated_at": "2026-01-01 09:10:00",
                "tool_name": text,
            }
            for n, text in enumerate(gtexts)
        ],
        "prompts": [
            {
                "id": 1,
                "sync_id": "prompt-go-1",
                "session_id": "sess-go-1",
                "content": f"{go.canary}\n" + "\n".join(gtexts),
                "project": "demo",
                "created_at": "2026-01-01 09:05:00",
            }
        ],
    }
    # Go engram's sessions have no title: engram makes one from the summary's first line.
    titled = ledger.channel("go session summary title")
    chunk["sessions"] += [
        {
            "id": f"sess-go-t{n:03d}",
            "project": "demo",
            "started_at": "2026-01-01 10:00:00",
            "summary": f"{text}\n{titled.canary} worked on the deploy",
        }
        for n, text in enumerate(titled.texts())
    ]
    path = tmp_path / "go-chunk.json"
    path.write_text(json.dumps(chunk))
    cli(root, "import", str(path))


def send_notes(root: Path, tmp_path: Path, ledger: Ledger) -> None:
    """`engram import` of plain rows (JSON Lines), a folder of Markdown notes, an Obsidian vault.

    Their titles are clipped to one line of 120 characters on the way in: a title batch holds
    one secret, so that the clip would cut it, not leave it out.
    """
    stamp = "2026-01-05T00:00:00Z"
    title = ledger.channel("import plain rows title", longest=LINE)
    content, tags, files, extra = (
        ledger.channel(f"import plain rows {name}") for name in ("content", "tags", "files", "x")
    )
    rows: list[dict[str, Any]] = []
    for i, line in enumerate(title.batches(40)):
        row: dict[str, Any] = {"title": line, "content": f"row {i}", "created_at": stamp}
        if i == 0:
            row.update(
                content=content.block(),
                tags=[tags.canary, *tags.texts(single_line=True)],
                files=[files.canary, *files.texts(single_line=True)],
                vendor_notes={"text": extra.block(), "list": extra.texts()},
            )
        rows.append(row)
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert cli(root, "import", str(path))["added"] == len(rows)

    for form, marker in (("markdown", None), ("obsidian", ".obsidian")):
        heading = ledger.channel(f"import {form} notes title", longest=LINE)
        body = ledger.channel(f"import {form} notes body")
        front = ledger.channel(f"import {form} notes front matter")
        folder = tmp_path / form
        folder.mkdir()
        if marker:
            (folder / marker).mkdir()
            (folder / marker / "app.json").write_text("{}")
        for i, line in enumerate(heading.batches(40)):
            matter = {"title": line, "tags": [f"n{i}"]}
            text = f"note {i}"
            if i == 0:
                matter.update(
                    tags=[front.canary, *front.texts(single_line=True)], vendor=front.block()
                )
                text = body.block()
            lines = [f"{key}: {json.dumps(value)}" for key, value in matter.items()]
            (folder / f"{form}-{i:03d}.md").write_text(
                "---\n" + "\n".join(lines) + f"\n---\n\n{text}\n", encoding="utf-8"
            )
        result = cli(root, "import", str(folder))
        assert (result["format"], result["added"]) == (form, len(heading.batches(40))), result


def send_hook(root: Path, ledger: Ledger) -> None:
    """The agent's stop hook, as Claude Code runs it: its last message's Key Learnings."""
    learned = ledger.channel("hook stop Key Learnings")
    items = "\n".join(
        f"- {learned.canary} found that the deploy key is {text} (rotate it)"
        for text in learned.texts(single_line=True)
    )
    payload = {
        "session_id": "5f0c2d1e-8a7b-4c3d-9e2f-1a0b9c8d7e6f",
        "transcript_path": str(root / ".transcript.jsonl"),
        "cwd": str(root),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": f"Done.\n\n## Key Learnings\n{items}\n",
    }
    done = subprocess.run(
        [sys.executable, "-m", "engram", "hook", "claude-code", "stop"],
        cwd=root,
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()


def chunk_file(channel: Any, prefix: str, stamp: str) -> tuple[str, bytes]:
    """A chunk as another clone's engram would write it, raw, secrets in: (file name, bytes)."""
    lines = [
        {
            "id": f"{prefix}{n:04d}abcdefghijklmnopqr"[:26],
            "kind": "note",
            "title": f"{channel.canary} from elsewhere {n}",
            "content": text,
            "tags": [text],
            "extra_field": {"text": text},
            "created_at": stamp,
            "updated_at": stamp,
            "rev": 1,
        }
        for n, text in enumerate(channel.texts())
    ]
    document = {  # ONE object, as engram writes a chunk (Go's view beside its records)
        "engram": {"records": sorted(lines, key=lambda r: r["id"]), "version": 1},
        "observations": [],
        "prompts": [],
        "sessions": [],
    }
    data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    return f"{chunk_id(data)}.jsonl.gz", zlib.compress(data, 9, 16 + zlib.MAX_WBITS)


def plant_chunk(root: Path, ledger: Ledger) -> Path:
    """Write a chunk as another clone's engram would have (raw, secrets in); return its path."""
    name, packed = chunk_file(
        ledger.channel("sync chunk from another clone"), "chk", "2026-01-02T00:00:00.000Z"
    )
    path = root / ".engram" / "chunks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(packed)
    return path


def send_repo(root: Path, ledger: Ledger) -> None:
    """ADR files indexed by `engram index --adr`, commit messages mined by `engram index --git`."""
    adr = ledger.channel("adr file")
    folder = root / "docs" / "adr"
    folder.mkdir(parents=True)
    body = "\n\n".join(adr.texts())
    (folder / "0001-use-the-vault.md").write_text(
        "---\nstatus: accepted\ndate: 2026-01-01\n"
        f"tags: [{adr.canary}]\n---\n# Use the vault {adr.canary}\n\n## Context\n\n{body}\n\n"
        f"## Decision\n\n{body}\n",
        encoding="utf-8",
    )
    commits = ledger.channel("git commit messages")
    texts = commits.texts()
    src = root / "app.py"
    for n, text in enumerate(texts):
        src.write_text(f"x = {n}\n")
        git(root, "add", "app.py")
        git(root, "commit", "-q", "-m", f"fix login again {commits.canary}\n\nThe key was {text}")
    cli(root, "index", "--adr")
    cli(root, "index", "--git")


def send_mcp(root: Path, ledger: Ledger) -> None:
    """One MCP stdio session: remember, update, sessions, prompts, capture, judge."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    names = ("remember title", "remember content", "remember tags", "remember files")
    title = ledger.channel("mcp remember title", longest=LINE)
    content, tags, files = (ledger.channel(f"mcp {n}") for n in names[1:])
    topic = ledger.channel("mcp remember topic_key", longest=LINE)
    session = ledger.channel("mcp remember session_id", longest=SHORT)
    upd = ledger.channel("mcp update", longest=LINE)
    start_dir = ledger.channel("mcp session_start directory")
    start_project = ledger.channel("mcp session_start project", longest=LINE)
    start_id = ledger.channel("mcp session_start session_id", longest=SHORT)
    summary, prompt = ledger.channel("mcp session_summary"), ledger.channel("mcp save_prompt")
    capture = ledger.channel("mcp capture")
    capture_source = ledger.channel("mcp capture source", longest=LINE)
    judge = ledger.channel("mcp judge")
    env = {key: value for key, value in os.environ.items() if key.startswith("ENGRAM_")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engram", "-C", str(root), "mcp", "--tools", "all"],
        env={**os.environ, **env},
    )  # fmt: skip

    async def ok(session_: ClientSession, tool: str, args: dict[str, Any]) -> Any:
        result = await session_.call_tool(tool, args)
        text = result.content[0].text  # type: ignore[union-attr]
        assert not result.is_error, (tool, text)
        return json.loads(text)

    async def scenario() -> None:
        log = root.parent / "mcp-stderr.log"
        with log.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, read_timeout_seconds=120) as s,
            ):
                await s.initialize()
                first = None
                titles, topics = title.batches(480), topic.batches(480)
                sessions = session.batches(190, single_line=True)
                for i in range(max(len(titles), len(topics), len(sessions))):
                    args: dict[str, Any] = {
                        "title": titles[i % len(titles)],
                        "content": f"mcp round {i}",
                        "topic_key": topics[i % len(topics)] + f" m{i}",
                        "session_id": sessions[i % len(sessions)],
                    }
                    if i == 0:
                        args["content"] = content.block()
                        args["tags"] = [tags.canary, *tags.texts()]
                        args["files"] = [files.canary, *files.texts()]
                    saved = await ok(s, "remember", args)
                    first = first or saved["id"]
                assert first is not None
                for i, line in enumerate(upd.batches(480)):
                    changes = {"id": first, "title": line, "content": f"{upd.block()}\n{i}"}
                    await ok(s, "update", changes)
                ids, projects = start_id.batches(190, single_line=True), start_project.batches(480)
                for i in range(max(len(ids), len(projects))):
                    await ok(
                        s,
                        "session_start",
                        {
                            "session_id": ids[i % len(ids)],
                            "directory": start_dir.block() if i == 0 else "",
                            "project": projects[i % len(projects)],
                        },
                    )
                sid = ids[0]
                await ok(
                    s,
                    "session_summary",
                    {"session_id": sid, "content": summary.block(), "goal": summary.block(),
                     "next_steps": summary.block(), "relevant_files": summary.block()},
                )  # fmt: skip
                await ok(s, "save_prompt", {"content": prompt.block()})
                items = "\n".join(
                    f"- {capture.canary} found that the service key is {text} (rotate)"
                    for text in capture.texts(single_line=True)
                )
                for i, source in enumerate(capture_source.batches(480)):
                    if i:  # one new learning per call, so that each is saved with its source
                        items = f"- {capture.canary} round {i} showed the cache stays warm"
                    text = f"## Key Learnings\n{items}\n"
                    await ok(s, "capture", {"content": text, "source": source})
                await ok(s, "judge", {"id": first, "reason": judge.block(), "query": judge.block()})

    anyio.run(scenario)


def send_mcp_go(root: Path, ledger: Ledger) -> None:
    """One MCP stdio session with Go engram's tools, as Go's own setup starts it (--tools=agent).

    ``mem_session_summary`` is called once per secret: Go sessions have no title, and engram
    makes one from the summary's first line.
    """
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    title = ledger.channel("mcp-go mem_save title", longest=LINE)
    content = ledger.channel("mcp-go mem_save content")
    topic = ledger.channel("mcp-go mem_save topic_key", longest=LINE)
    upd = ledger.channel("mcp-go mem_update", longest=LINE)
    summary = ledger.channel("mcp-go mem_session_summary")
    prompt = ledger.channel("mcp-go mem_save_prompt")
    passive = ledger.channel("mcp-go mem_capture_passive")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engram", "-C", str(root), "mcp", "--tools=agent"],
        env=dict(os.environ),
    )

    async def said(session_: ClientSession, tool: str, args: dict[str, Any]) -> str:
        result = await session_.call_tool(tool, args)
        text = str(result.content[0].text)  # type: ignore[union-attr]
        assert not result.is_error, (tool, text)
        return text

    async def scenario() -> None:
        log = root.parent / "mcp-go-stderr.log"
        with log.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, read_timeout_seconds=120) as s,
            ):
                await s.initialize()
                titles, topics = title.batches(480), topic.batches(480)
                first = None
                for i in range(max(len(titles), len(topics))):
                    args: dict[str, Any] = {
                        "title": titles[i % len(titles)],
                        "content": content.block() if i == 0 else f"go round {i}",
                        "type": "decision",
                        "topic_key": topics[i % len(topics)] + f" g{i}",
                    }
                    answer = await said(s, "mem_save", args)
                    found = re.search(r"^ID: (\d+)$", answer, flags=re.MULTILINE)
                    assert found, answer
                    first = first or int(found.group(1))
                for i, line in enumerate(upd.batches(480)):
                    changes = {"id": first, "title": line, "content": f"{upd.block()}\n{i}"}
                    await said(s, "mem_update", changes)
                for n, text in enumerate(summary.texts()):
                    body = f"{text}\n\n## Accomplished\n{summary.canary} shipped round {n}"
                    await said(s, "mem_session_summary", {"content": body, "session_id": f"g-{n}"})
                await said(s, "mem_save_prompt", {"content": prompt.block()})
                items = "\n".join(
                    f"- {passive.canary} found that the service key is {text} (rotate)"
                    for text in passive.texts(single_line=True)
                )
                await said(s, "mem_capture_passive", {"content": f"## Key Learnings\n{items}\n"})

    anyio.run(scenario)


def send_http(root: Path, home: Path, ledger: Ledger) -> None:
    """One HTTP server: POST (author, extra fields), PATCH, judge, sessions, capture, import."""
    port = _port()
    env = {k: v for k, v in os.environ.items()}
    log = (root.parent / "http.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram.http_api", "--port", str(port)],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120.0)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "http server did not start"
            time.sleep(0.1)
        body, extra = (ledger.channel(f"http post {name}") for name in ("content", "extra fields"))
        author = ledger.channel("http post author", longest=LINE)
        title = ledger.channel("http post title", longest=LINE)
        tags, files = ledger.channel("http post tags"), ledger.channel("http post files")
        patch, judge = ledger.channel("http patch extra fields"), ledger.channel("http judge")
        sessions = ledger.channel("http sessions directory", longest=LINE)
        capture = ledger.channel("http capture")
        imported = ledger.channel("http import")
        first = None
        authors, titles = author.batches(480), title.batches(480)
        for i in range(max(len(authors), len(titles))):
            fields: dict[str, Any] = {
                "title": titles[i % len(titles)],
                "content": f"round {i}",
                "author": authors[i % len(authors)],
            }
            if i == 0:
                fields["content"] = body.block()
                fields["tags"] = [tags.canary, *tags.texts(single_line=True)]
                fields["files"] = [files.canary, *files.texts(single_line=True)]
                texts = extra.texts()
                fields["vendor_meta"] = {
                    "notes": texts[: len(texts) // 2],
                    "deep": {"deeper": [{"x": t} for t in texts[len(texts) // 2 :]]},
                    f"key {texts[0]}": extra.canary,
                }
            response = client.post("/memories", json=fields)
            assert response.status_code == 201, response.text
            first = first or response.json()["id"]
        response = client.patch(
            f"/memories/{first}", json={"content": "patched", "vendor_patch": patch.texts(),
                                        "note": patch.block()},
        )  # fmt: skip
        assert response.status_code == 200, response.text
        response = client.post(
            f"/memories/{first}/judge", json={"reason": judge.block(), "query": judge.block()}
        )
        assert response.status_code == 200, response.text
        for directory in sessions.batches(480):
            response = client.post("/sessions", json={"directory": directory})
            assert response.status_code == 201, response.text
        items = "\n".join(
            f"- {capture.canary} learned the token is {text} (rotate it)"
            for text in capture.texts(single_line=True)
        )
        response = client.post("/capture", json={"text": f"## Key Learnings\n{items}\n"})
        assert response.status_code == 200, response.text
        stamp = "2026-01-03T00:00:00.000Z"
        response = client.post(
            "/import",
            json={
                "memories": [
                    {
                        "id": "httpimp0000abcdefghijklmn",
                        "kind": "fact",
                        "title": f"{imported.canary} via http import",
                        "content": imported.block(),
                        "unknown": {"list": imported.texts()},
                        "created_at": stamp,
                        "updated_at": stamp,
                        "rev": 1,
                    }
                ]
            },
        )
        assert response.status_code == 200, response.text
        assert response.json()["added"] == 1, response.text
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    assert "Traceback" not in (root.parent / "http.log").read_text()


def send_daemon(root: Path, ledger: Ledger) -> None:
    """One socket daemon: memory_store (context, action, result, tags, project), memory_judge."""
    context, action, result = (
        ledger.channel(f"daemon memory_store {name}") for name in ("context", "action", "result")
    )
    tags, project = (
        ledger.channel("daemon memory_store tags"),
        ledger.channel(
            "daemon memory_store project", kinds=["aws access key id", "google api key", "jwt"]
        ),
    )
    judge = ledger.channel("daemon memory_judge")
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram.daemon", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        path = None
        deadline = time.monotonic() + 60
        while path is None and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                line = proc.stdout.readline().decode()
                assert line, "daemon exited"
                if line.startswith("ready "):
                    path = line.split(" ", 1)[1].strip()
        assert path is not None, "daemon did not start"
        with RpcClient(path, timeout=120) as client:
            stored = client.call(
                "memory_store",
                {
                    "memory_type": "decision",
                    "context": context.block(),
                    "action": action.block(),
                    "result": result.block(),
                    "tags": ",".join([tags.canary, *tags.texts(single_line=True)]),
                    "project": project.batches(480)[0],
                },
            )
            client.call(
                "memory_judge",
                {"memory_id": stored["id"], "query": judge.block(), "reason": judge.block()},
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def send_remote(root: Path, tmp_path: Path, ledger: Ledger) -> tuple[Path, str]:
    """A teammate pushes a raw line with secrets to the sync branch; this clone syncs it in."""
    mate = ledger.channel("sync --remote teammate line")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(root, "remote", "add", "origin", str(remote))
    cli(root, "sync", "--remote", "origin")  # creates the branch with this clone's store
    work = tmp_path / "teammate"
    git(tmp_path, "clone", "-q", "-b", "engram-memories", str(remote), str(work))
    stamp = "2026-01-04T00:00:00.000Z"
    line = {
        "id": "mate0000abcdefghijklmnopq",
        "kind": "note",
        "title": f"{mate.canary} from a teammate",
        "content": mate.block(),
        "tags": mate.texts(single_line=True)[:5],
        "their_field": {"all": mate.texts()},
        "history": [{"rev": 1, "title": "old", "content": mate.block(), "updated_at": stamp}],
        "created_at": stamp,
        "updated_at": stamp,
        "rev": 2,
    }
    # A line whose very id is a secret: left out (and said so), the rest still merges.
    refused = ledger.channel("sync --remote id", kinds=["aws access key id"], delivered=False)
    ((_, bad_id, _),) = refused.secrets
    bad = {**line, "id": bad_id, "title": "an id that is a key", "content": "x"}
    target = work / ".engram" / "memories.jsonl"  # the branch holds the store's folder
    kept = target.read_bytes().splitlines(keepends=True)
    raws = [
        json.dumps(r, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        for r in (line, bad)
    ]
    lines = sorted([*kept, *raws], key=lambda b: json.loads(b)["id"])
    target.write_bytes(b"".join(lines))
    # And a chunk of theirs, raw: kept here (and pushed on) only scrubbed, under its new name.
    name, packed = chunk_file(ledger.channel("sync --remote teammate chunk"), "mch", stamp)
    (work / ".engram" / "chunks").mkdir(exist_ok=True)
    (work / ".engram" / "chunks" / name).write_bytes(packed)
    git(work, "add", ".engram")
    git(work, "commit", "-q", "-m", "teammate adds a note")
    git(work, "push", "-q", "origin", "engram-memories")
    tip = git(work, "rev-parse", "HEAD").decode().strip()
    report = cli(root, "sync", "--remote", "origin")
    assert report["remote"]["pushed"], report
    (error,) = report["remote"]["pulled"]["memories"]["errors"]
    assert "looks like a secret" in error and bad_id not in error
    return remote, tip


# --- the tests -------------------------------------------------------------------------------


def test_secrets_sent_through_every_channel_reach_no_file_and_no_commit(
    root: Path, tmp_path: Path
) -> None:
    ledger = Ledger()
    folder = root / ".engram"
    send_cli(root, ledger)
    send_imports(root, tmp_path, ledger)
    send_notes(root, tmp_path, ledger)
    send_hook(root, ledger)
    planted = plant_chunk(root, ledger)
    cli(root, "sync")  # imports the chunk another clone wrote
    send_repo(root, ledger)
    send_mcp(root, ledger)
    send_mcp_go(root, ledger)
    send_http(root, Path(os.environ["HOME"]), ledger)
    send_daemon(root, ledger)

    # The planted chunk is the other clone's file as it came (named by its content): the only
    # place its secrets may still be, until doctor rewrites it.
    leaks = ledger.leaks(engram_files(folder, skip=frozenset({planted})))
    findings = cli(root, "doctor", codes=(1,))  # an error: the chunk holds secrets
    secret_findings = [f["message"] for f in findings if f["check"] == "secrets"]
    assert len(secret_findings) == 1 and planted.name in secret_findings[0], secret_findings
    fixed = cli(root, "doctor", "--fix")
    (chunk_fix,) = [f for f in fixed if f["check"] == "secrets"]
    assert chunk_fix["fixed"] and "written scrubbed as" in chunk_fix["message"], chunk_fix
    assert not planted.exists()

    remote, teammate_tip = send_remote(root, tmp_path, ledger)
    blobs = engram_files(folder)
    leaks += ledger.leaks(blobs)
    written = objects_written(root, "refs/heads/engram-memories", not_from=[teammate_tip])
    assert any(name.startswith("git object") for name in written)
    leaks += ledger.leaks(written)
    pushed = objects_written(remote, "refs/heads/engram-memories", not_from=[teammate_tip])
    leaks += ledger.leaks(pushed)
    print("\n" + ledger.matrix())
    assert leaks == [], "\n".join(leaks)

    # Every channel delivered: its canary is stored (the memories, or the session log), and
    # the redactions are where the secrets were.
    stored = b"\n".join(blobs[name] for name in ("memories.jsonl", "state/sessions.json"))
    missing = [
        c.name for c in ledger.channels.values() if c.delivered and c.canary.encode() not in stored
    ]
    assert missing == [], missing
    assert stored.count(REDACTED.encode()) >= ledger.pairs() // 2
    # Every format went through every way in that takes text of its shape.
    ways = {way_in(name) for name in ledger.channels}
    assert len(ways) == 16, sorted(ways)
    for kind in KINDS:
        carried = {way_in(c.name) for c in ledger.channels.values() if kind in c.kinds()}
        assert carried == ways, (kind, sorted(ways - carried))


def _benign() -> list[str]:
    lines = (FIXTURES / "benign_secrets_corpus.txt").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("# ")]


def test_the_benign_corpus_comes_through_unchanged(project: Engram) -> None:
    corpus = _benign()
    assert len(corpus) >= 50
    changed = [(line, redact(line)[0]) for line in corpus if redact(line)[1]]
    assert changed == [], changed
    saved = project.remember(
        "benign corpus", "\n".join(corpus), tags=["fixtures"], extra={"lines": corpus}
    )
    assert saved.redactions == 0
    stored = project.get(saved.record["id"])
    assert stored["content"] == "\n".join(corpus) and stored["lines"] == corpus
