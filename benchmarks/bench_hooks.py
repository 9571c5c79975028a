"""The agent loop as processes: hooks and the commands hooks and shells run, vs ``python -c pass``.

Run ``python benchmarks/bench_hooks.py [--quick] [--size 10000]`` (``make bench``). Like
``bench_core.py``, every figure is a ratio of medians of paired, interleaved runs against a
baseline measured in the same run, here the interpreter itself: ``python -c pass`` with the
same environment (bytecode cached, as in a normal install). A hook runs on every edit an agent
makes, so its whole process is what the agent waits for.

Figures, on a synthetic store of ``--size`` memories:

1. ``engram hook claude-code pre-edit``: a Claude Code PreToolUse payload (an absolute path of a
   file the memory knows) in, the additionalContext JSON out, through the store's warm daemon
   (issue 15 aims <= 3) and with ``ENGRAM_DAEMON=off`` (aims <= 8);
2. ``engram hook claude-code session-start``: the briefing (and the session opened), both ways;
3. ``engram hook claude-code pre-edit`` for a file the memory knows nothing of (silent);
   ``pre-read`` of the known file as a session's first read of it (a payload without a session
   id: no ledger) and as a read the session's ledger says was shown already (silent);
   ``prompt`` with words of the corpus and with an unrelated text (silent); ``tool-failure``
   with an error naming corpus words; Codex's ``pre-shell`` for a command that touches no file
   (answered from the payload alone);
4. ``engram check --files X`` and ``engram recall WORDS`` as processes, through the warm daemon
   (the thin client, issue 15 aims <= 3) and with ``ENGRAM_DAEMON=off`` (aims <= 8); each
   forwarded answer is first checked to be the in-process one, byte for byte;
5. the daemon's start-up: from ``engram -C ROOT daemon --idle S`` (as hooks and the command
   line start it) to its socket accepting, vs ``python -c pass`` (reported, no target);
6. the daemon's resident memory (VmRSS and peak VmHWM) after it answered every figure, and
   again on a store of ``--rss-size`` memories (default 100k; 0 skips) after one check,
   recall, briefing and pre-edit hook.

This file must not assert on wall-clock times, and is not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (  # a sibling script, not a package
    Corpus,
    Figure,
    build_store,
    paired,
    process_env,
    remove_scratch,
    render,
    run_header,
    say,
)

from engram.daemon import protocol as rpc
from engram.service import Engram

HERE: Final = Path(__file__).resolve().parent
DEFAULT_DATA: Final = HERE / ".data"
SEED: Final = 20240611
TARGET_NO_DAEMON: Final = 8.0
TARGET_DAEMON: Final = 3.0


@dataclass(frozen=True)
class Plan:
    rounds: int


FULL: Final = Plan(rounds=21)
QUICK: Final = Plan(rounds=7)


def busiest_file(jsonl: Path) -> str:
    """Return the file the most memories cite (what an agent is most likely to edit)."""
    counts: Counter[str] = Counter()
    with jsonl.open("rb") as handle:
        for line in handle:
            counts.update(json.loads(line).get("files") or [])
    return counts.most_common(1)[0][0]


def run(argv: Sequence[str], stdin: bytes, cwd: Path, env: dict[str, str]) -> bytes:
    done = subprocess.run(argv, input=stdin, cwd=cwd, env=env, capture_output=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr.decode()}")
    return done.stdout


def figure(
    name: str,
    argv: Sequence[str],
    stdin: bytes,
    root: Path,
    env: dict[str, str],
    plan: Plan,
    size: int,
    target: float | None = TARGET_NO_DAEMON,
) -> Figure:
    """Time a process against ``python -c pass``, interleaved."""
    python = [sys.executable, "-c", "pass"]
    ours, base = paired(
        lambda _: run(argv, stdin, root, env),
        lambda _: run(python, b"", root, env),
        plan.rounds,
    )
    return Figure.from_samples(name, size, ours, base, target=target)


def start_daemon(root: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], float]:
    """Start the store's daemon as a hook would; return it and ms until its socket accepts."""
    socket = rpc.socket_path(root / ".engram")
    began = time.perf_counter()
    daemon = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(root), "daemon", "--idle", "600"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not rpc.connectable(socket, timeout=0.05):
        if daemon.poll() is not None:
            raise SystemExit("the daemon did not start")
        time.sleep(0.002)
    return daemon, (time.perf_counter() - began) * 1000


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def big_daemon_memory(data: Path, size: int, seed: int, env: dict[str, str]) -> str:
    """Return the daemon's memory on a ``size`` store after one answer of each kind."""
    root = data / f"store-{size}"
    say(f"[{size:,}] writing the synthetic store for the daemon's memory ...")
    jsonl = build_store(root, size, seed)
    with Engram.open(root) as engram:
        engram.reindex()
    known = busiest_file(jsonl)
    on = {**env, "ENGRAM_DAEMON": "on"}
    engram_cmd = [sys.executable, "-m", "engram"]
    edit = {
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Edit",
        "tool_input": {"file_path": str(root / known)},
    }
    daemon, took = start_daemon(root, env)
    try:
        run([*engram_cmd, "check", "--files", known], b"", root, on)
        run([*engram_cmd, "recall", Corpus(seed + 1).queries(1)[0]], b"", root, on)
        run([*engram_cmd, "context"], b"", root, on)
        run([*engram_cmd, "hook", "claude-code", "pre-edit"], json.dumps(edit).encode(), root, on)
        return (
            f"daemon resident memory at {size:,} memories: {rss_mb(daemon.pid):.0f} MB "
            f"(peak {rss_mb(daemon.pid, 'VmHWM'):.0f} MB; started in {took:.0f} ms)"
        )
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)


def _j(payload: dict[str, object]) -> bytes:
    return json.dumps(payload).encode()


def run_ms(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    began = time.perf_counter()
    run(argv, b"", cwd, env)
    return (time.perf_counter() - began) * 1000


def main(argv: Sequence[str] | None = None) -> int:
    """Build the store, run every figure and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories in the store")
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--seed", type=int, default=SEED, help="corpus seed")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="scratch parent")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder afterwards")
    parser.add_argument(
        "--rss-size", type=int, default=100_000, help="store for the daemon's memory (0: skip)"
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    size: int = args.size
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="hooks-", dir=args.data_dir))
    os.environ["ENGRAM_HOME"] = str(data / "home" / ".engram")
    os.environ["ENGRAM_AUTHOR"] = "Bench Author"
    env = {**process_env(data / "pycache"), "ENGRAM_DAEMON": "off"}
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    rows: list[Figure] = []
    memory = big = ""
    try:
        root = data / f"store-{size}"
        say(f"[{size:,}] writing the synthetic store ...")
        jsonl = build_store(root, size, args.seed)
        with Engram.open(root) as engram:
            engram.reindex()
        known = busiest_file(jsonl)
        engram_cmd = [sys.executable, "-m", "engram"]
        edit = {
            "session_id": "bench",
            "cwd": str(root),
            "hook_event_name": "PreToolUse",
            "tool_name": "Edit",
            "tool_input": {"file_path": str(root / known), "old_string": "a", "new_string": "b"},
        }
        unknown = {**edit, "tool_input": {"file_path": str(root / "nothing" / "here.py")}}
        start = {
            "session_id": "bench",
            "cwd": str(root),
            "hook_event_name": "SessionStart",
            "source": "startup",
        }
        sessionless = {k: v for k, v in edit.items() if k != "session_id"}
        read = {**sessionless, "tool_name": "Read", "tool_input": {"file_path": str(root / known)}}
        seen = {**read, "session_id": "bench-seen"}  # a session already shown the file
        words = Corpus(args.seed + 2).queries(1)[0]
        prompt = {"cwd": str(root), "hook_event_name": "UserPromptSubmit", "prompt": words}
        unrelated = {**prompt, "prompt": "write a haiku about autumn leaves falling in Kyoto"}
        failed = {
            "cwd": str(root),
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash",
            "tool_input": {"command": "pytest -q"},
            "error": f"Exit code 1\nE   AssertionError: {words}\nFAILED tests/test_x.py::test_y",
        }
        shell = {
            "cwd": str(root),
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "git status && ls -la"},
        }
        hook_of = {
            event: [*engram_cmd, "hook", agent, event]
            for agent, event in (
                ("claude-code", "pre-read"),
                ("claude-code", "prompt"),
                ("claude-code", "tool-failure"),
                ("codex", "pre-shell"),
            )
        }
        run(hook_of["pre-read"], json.dumps(seen).encode(), root, env)  # the ledger, primed
        pre_edit = [*engram_cmd, "hook", "claude-code", "pre-edit"]
        out = run(pre_edit, json.dumps(edit).encode(), root, env)
        context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        say(f"pre-edit on {known}: {len(context)} characters of context")
        query = Corpus(args.seed + 1).queries(1)[0]
        cases = [
            ("hook pre-edit (known file)", pre_edit, json.dumps(edit).encode()),
            ("hook pre-edit (unknown file)", pre_edit, json.dumps(unknown).encode()),
            (
                "hook session-start",
                [*engram_cmd, "hook", "claude-code", "session-start"],
                json.dumps(start).encode(),
            ),
            ("hook pre-read (known file, first read)", hook_of["pre-read"], _j(read)),
            ("hook pre-read (file shown already)", hook_of["pre-read"], _j(seen)),
            ("hook prompt (corpus words)", hook_of["prompt"], _j(prompt)),
            ("hook prompt (unrelated)", hook_of["prompt"], _j(unrelated)),
            ("hook tool-failure", hook_of["tool-failure"], _j(failed)),
            ("hook codex pre-shell (no file)", hook_of["pre-shell"], _j(shell)),
            ("engram check --files X", [*engram_cmd, "check", "--files", known], b""),
            ("engram recall WORDS", [*engram_cmd, "recall", query], b""),
        ]
        off = env
        for name, command, stdin in cases:
            say(f"[{size:,}] {name}, no daemon ...")
            label = f"{name}, no daemon, vs python -c pass"
            rows.append(figure(label, command, stdin, root, off, plan, size))
        starts: list[float] = []
        bases: list[float] = []
        for _ in range(3):
            daemon, took = start_daemon(root, env)
            starts.append(took)
            bases.append(min(run_ms([sys.executable, "-c", "pass"], root, env) for _ in range(3)))
            daemon.terminate()
            daemon.wait(timeout=30)
        rows.append(
            Figure.from_samples("daemon start-up to accepting", size, starts, bases, target=None)
        )
        daemon, _ = start_daemon(root, env)
        try:
            on = {**env, "ENGRAM_DAEMON": "on"}
            for name, command, stdin in cases:
                # The daemon's first answer warms it; it must be the in-process one.
                if run(command, stdin, root, on) != run(command, stdin, root, off):
                    raise SystemExit(f"{name}: the daemon's answer differs from the process's")
                say(f"[{size:,}] {name}, warm daemon ...")
                label = f"{name}, warm daemon, vs python -c pass"
                rows.append(figure(label, command, stdin, root, on, plan, size, TARGET_DAEMON))
            memory = f"{rss_mb(daemon.pid):.0f} MB (peak {rss_mb(daemon.pid, 'VmHWM'):.0f} MB)"
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
        if args.rss_size:
            big = big_daemon_memory(data, args.rss_size, args.seed, env)
    finally:
        remove_scratch(data, args.data_dir, keep=args.keep)
    print(run_header("hooks", quick=args.quick, started=started, load_before=load_before))
    print(render(rows))
    print(f"daemon resident memory after the figures: {memory} at {size:,} memories")
    if big:
        print(big)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
