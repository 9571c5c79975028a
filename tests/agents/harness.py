"""Run a real agent program against the fake model, in a scratch repository set up by engram.

The agent programs are the npm packages ``.ci/agents/package-lock.json`` pins, installed by
``make agents`` (``.ci/agents/install.sh``) into ``.ci/agents/node_modules``; ``ENGRAM_TEST_AGENTS``
names another folder holding such a ``node_modules``. A program that is missing or does not start
here makes its tests skip with the reason.

Each run gets its own HOME (and XDG folders, CODEX_HOME) under the test's tmp_path, an ``engram``
on PATH that runs this checkout, and, where ``unshare -rn`` works, a network namespace of its own
holding only loopback, the fake model and the agent.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FAKEMODEL = Path(__file__).resolve().parent / "fakemodel.py"
PINNED = REPO / ".ci" / "agents" / "package.json"
BINARIES = {
    "claude-code": "claude",
    "codex": "codex",
    "gemini-cli": "gemini",
    "opencode": "opencode",
}
# Read when the module loads: the suite's conftest clears every ENGRAM_* variable around each test.
AGENTS_DIR = os.environ.get("ENGRAM_TEST_AGENTS", "")
NETNS = os.environ.get("ENGRAM_TEST_NETNS", "")
RUN_TIMEOUT = 90.0  # seconds one agent run may take before it is killed

BILLING = '''\
"""Invoices and refunds."""


def refund(amount_cents: int, percent: int) -> int:
    return round(amount_cents * percent / 100)
'''

PITFALL = "Refunds must round half-even in integer cents, never through float"
PITFALL_BODY = (
    "## What\nrefund() in src/billing.py works in integer cents.\n"
    "## Why\nfloat rounding lost a cent on refunds (ticket BILL-77).\n"
    "## Learned\nUse the quantize-zircon helper; never round a float amount."
)
DECISION = "Invoices are totalled in integer cents"
DECISION_BODY = "## What\nAll money in src/billing.py is an int of cents.\n## Why\nExact sums."
FIX = "Fixed ModuleNotFoundError billing_vat: run with PYTHONPATH=src"
FIX_BODY = (
    "## What\n`ModuleNotFoundError: No module named 'billing_vat'` when importing the VAT tables.\n"
    "## Why\nThe package lives in src/.\n## Learned\nRun `PYTHONPATH=src python ...`."
)
FAILING_COMMAND = "python3 -c 'import billing_vat'"


def agents_dir() -> Path:
    """Return the folder whose node_modules holds the pinned agent programs."""
    return Path(AGENTS_DIR) if AGENTS_DIR else REPO / ".ci" / "agents"


@functools.cache
def pinned_version(agent: str) -> str:
    package = {
        "claude-code": "@anthropic-ai/claude-code",
        "codex": "@openai/codex",
        "gemini-cli": "@google/gemini-cli",
        "opencode": "opencode-ai",
    }[agent]
    return str(json.loads(PINNED.read_text(encoding="utf-8"))["dependencies"][package])


@functools.cache
def program(agent: str) -> tuple[Path | None, str]:
    """Return the agent's program and "", or None and why it cannot run here."""
    if not PINNED.exists():
        return (
            None,
            f"{PINNED.relative_to(REPO)} is missing: this copy has no pinned agent versions",
        )
    binary = agents_dir() / "node_modules" / ".bin" / BINARIES[agent]
    if not binary.exists():
        return None, (
            f"{BINARIES[agent]} {pinned_version(agent)} is not installed in "
            f"{agents_dir() / 'node_modules'}: run `make agents` (needs npm and the npm registry)"
        )
    if shutil.which("node") is None and agent == "gemini-cli":
        return None, "gemini needs node on PATH, and there is none"
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{binary} --version failed here: {exc}"
    if done.returncode != 0 or pinned_version(agent) not in done.stdout:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, (
            f"{binary} --version did not print {pinned_version(agent)} "
            f"(exit {done.returncode}: {detail[0]})"
        )
    return binary, ""


@functools.cache
def npm_cache() -> str:
    """Return the npm cache ``make agents`` filled (its packages install offline from it)."""
    try:
        done = subprocess.run(
            ["npm", "config", "get", "cache"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return str(Path.home() / ".npm")
    return done.stdout.strip() or str(Path.home() / ".npm")


@functools.cache
def netns() -> bool:
    """Whether ``unshare -rn`` gives this user a network namespace with loopback up.

    ``ENGRAM_TEST_NETNS=0`` runs the agents in the machine's own network instead (to tell an
    agent that hangs without a network from one that fails otherwise).
    """
    if NETNS == "0":
        return False
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    done = subprocess.run(
        ["unshare", "-rn", "ip", "link", "set", "lo", "up"],
        capture_output=True,
        timeout=10,
        check=False,
    )
    return done.returncode == 0


def engram(repo: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        ["engram", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"engram {' '.join(args)}: {done.stderr}"
    return done.stdout


@dataclass
class Project:
    """A scratch repository with engram set up for one agent, and the environment to run it."""

    root: Path
    home: Path
    env: dict[str, str]
    ids: dict[str, str]  # pitfall, decision, fix -> memory id


def make_project(tmp_path: Path, agent: str) -> Project:
    """Create the repository, its three memories about src/billing.py, and run engram setup."""
    home = tmp_path / "home"
    bin_dir = tmp_path / "bin"
    root = tmp_path / "repo"
    for folder in (home, bin_dir, root / "src"):
        folder.mkdir(parents=True)
    shim = bin_dir / "engram"
    shim.write_text(
        f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m engram "$@"\n', encoding="utf-8"
    )
    shim.chmod(0o755)
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ENGRAM_", "ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "CODEX_"))
        and not name.startswith(("XDG_", "CLAUDE", "OPENCODE", "PYTEST", "COV_"))
    }
    env.update(
        HOME=str(home),
        PATH=f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        CODEX_HOME=str(home / ".codex"),
        ENGRAM_HOME=str(home / ".engram"),
        ENGRAM_AUTHOR="Test Author",
        GIT_AUTHOR_NAME="Test Author",
        GIT_AUTHOR_EMAIL="test@example.invalid",
        GIT_COMMITTER_NAME="Test Author",
        GIT_COMMITTER_EMAIL="test@example.invalid",
        NO_COLOR="1",
        TERM="dumb",
    )
    (root / "src" / "billing.py").write_text(BILLING, encoding="utf-8")
    (root / "README.md").write_text("# shop\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, env=env)
    engram(root, env, "init")
    ids = {
        "pitfall": engram(
            root,
            env,
            "remember",
            PITFALL,
            PITFALL_BODY,
            "-k",
            "pitfall",
            "-i",
            "5",
            "-f",
            "src/billing.py",
        )
        .strip()
        .split()[-1],
        "decision": engram(
            root, env, "remember", DECISION, DECISION_BODY, "-k", "decision", "-f", "src/billing.py"
        )
        .strip()
        .split()[-1],
        "fix": engram(root, env, "remember", FIX, FIX_BODY, "-k", "bugfix", "-f", "src/billing.py")
        .strip()
        .split()[-1],
    }
    engram(root, env, "pin", ids["pitfall"])
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True, env=env)
    engram(root, env, "setup", agent)
    return Project(root, home, env, ids)


@dataclass
class Recording:
    """What the agent sent the fake model, in order, and how the run ended."""

    requests: list[dict[str, Any]]
    returncode: int
    output: str

    @property
    def main(self) -> list[dict[str, Any]]:
        return [request for request in self.requests if request["main"]]

    def text(self, request: dict[str, Any]) -> str:
        """Return everything the model was given in one request, as one string."""
        return json.dumps(request["body"], ensure_ascii=False)


def stop_daemon(project: Project) -> None:
    """Stop the engram daemon the agent's hooks started for this project (it would idle on)."""
    lock = project.root / ".engram" / "state" / "daemon.lock"
    try:
        pid = int(lock.read_text(encoding="utf-8").split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return
    if b"daemon" in cmdline and str(project.root).encode() in cmdline:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def run_agent(
    project: Project,
    command: list[str],
    script: dict[str, Any],
    *,
    env: dict[str, str] | None = None,
    timeout: float = RUN_TIMEOUT,
) -> Recording:
    """Run ``command`` (``@BASE@`` is the fake model's URL) in the project; return the record."""
    tmp = project.root.parent
    record = tmp / "requests.jsonl"
    record.unlink(missing_ok=True)
    script_file = tmp / "script.json"
    script_file.write_text(json.dumps(script), encoding="utf-8")
    full_env = dict(project.env)
    full_env["PWD"] = str(project.root)  # OpenCode takes its project folder from PWD
    for name, value in (env or {}).items():
        full_env[f"FAKE_ENV_{name}" if "@BASE@" in value else name] = value
    wrapper = [sys.executable, str(FAKEMODEL), "--script", str(script_file)]
    wrapper += ["--record", str(record), "--timeout", str(timeout)]
    if netns():
        wrapper = ["unshare", "-rn", *wrapper, "--netns"]
    done = subprocess.run(
        [*wrapper, "--", *command],
        cwd=project.root,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout + 30,
        check=False,
    )
    requests = []
    if record.exists():
        requests = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    stop_daemon(project)
    (tmp / "output.txt").write_text(done.stdout + done.stderr, encoding="utf-8")  # to look at
    return Recording(requests, done.returncode, done.stdout + done.stderr)
