"""The pre-commit hook of ``engram setup git-hooks``, vs ``python -c pass`` in the same run.

Run ``python benchmarks/bench_guardrails.py [--quick] [--size 10000]`` (``make bench``). A git
repository holds a synthetic store of ``--size`` memories and one staged change to the file the
most memories cite; the figures are ratios of medians of paired, interleaved runs (as in
``bench_hooks.py``):

1. ``engram check --staged`` as a process, with ``ENGRAM_DAEMON=off`` and through the store's
   warm daemon;
2. the installed ``.git/hooks/pre-commit`` itself (``sh`` running it, engram found on PATH),
   through the warm daemon: what ``git commit`` adds (issue 32 aims under 3x).

This file must not assert on wall-clock times, and is not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import build_store, process_env, remove_scratch, render, run_header, say
from bench_hooks import FULL, QUICK, busiest_file, figure, run, start_daemon

from engram.service import Engram

HERE: Final = Path(__file__).resolve().parent
DEFAULT_DATA: Final = HERE / ".data"
SEED: Final = 20240611
TARGET: Final = 3.0


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Build the repository, run the figures and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories in the store")
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="scratch parent")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    size: int = args.size
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="guard-", dir=args.data_dir))
    os.environ["ENGRAM_HOME"] = str(data / "home" / ".engram")
    os.environ["ENGRAM_AUTHOR"] = "Bench Author"
    env = process_env(data / "pycache")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for name, value in (("NAME", "Bench"), ("EMAIL", "bench@example.com")):
        env[f"GIT_AUTHOR_{name}"] = env[f"GIT_COMMITTER_{name}"] = value
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    rows = []
    try:
        root = data / "repo"
        say(f"[{size:,}] writing the synthetic store in a git repository ...")
        jsonl = build_store(root, size, SEED)
        git(root, "init", "-q")
        with Engram.open(root) as engram:
            engram.reindex()
            hook = engram.setup_git_hooks()
        known = busiest_file(jsonl)
        target = root / known
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("x = 1\n")
        git(root, "add", "-A")
        subprocess.run(
            ["git", "commit", "-q", "--no-verify", "-m", "start"], cwd=root, env=env, check=True
        )
        target.write_text("x = 2\ny = 3\n")
        git(root, "add", known)
        check = [sys.executable, "-m", "engram", "check", "--staged"]
        off = {**env, "ENGRAM_DAEMON": "off"}
        say(f"[{size:,}] engram check --staged, no daemon ...")
        rows.append(
            figure(
                "check --staged, no daemon, vs python -c pass", check, b"", root, off, plan, size
            )
        )
        daemon, _ = start_daemon(root, off)
        try:
            on = {**env, "ENGRAM_DAEMON": "on"}
            if run(check, b"", root, on) != run(check, b"", root, off):
                raise SystemExit("check --staged: the daemon's answer differs from the process's")
            say(f"[{size:,}] engram check --staged, warm daemon ...")
            rows.append(
                figure(
                    "check --staged, warm daemon, vs python -c pass",
                    check,
                    b"",
                    root,
                    on,
                    plan,
                    size,
                    TARGET,
                )
            )
            say(f"[{size:,}] the pre-commit hook, warm daemon ...")
            rows.append(
                figure(
                    "pre-commit hook, warm daemon, vs python -c pass",
                    ["sh", hook.path],
                    b"",
                    root,
                    on,
                    plan,
                    size,
                    TARGET,
                )
            )
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
    finally:
        remove_scratch(data, args.data_dir, keep=False)
    print(run_header("guardrails", quick=args.quick, started=started, load_before=load_before))
    print(render(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
