"""Make the "real" set: the real agent programs run scripted sessions; keep their transcripts.

Run ``python benchmarks/capture/real.py [--agent NAME] [--only NAME …]`` (it needs the agent
programs ``make agents`` installs, and takes minutes). Each scenario of ``real_scenarios.py``
runs once per program that engram reads the transcript of (Claude Code, Codex, Gemini CLI),
through the real-agent suite's harness (``tests/agents``): a scratch repository after
``engram init`` with three memories and ``engram setup AGENT``, the scenario's files committed on
top, and the program itself run headless against the fake model (on loopback, inside a network
namespace of its own where ``unshare -rn`` works), which answers each of the program's main
requests with the scenario's next step. A scenario of several prompts runs the program once per
prompt, the later ones resuming the session (``claude --continue``, ``codex exec resume --last``,
``gemini --resume latest``), so the person's later words land in the same transcript.

The transcript is then copied as the program wrote it to
``transcripts/<agent>/r-<name>.jsonl.gz`` (gzip: a Codex transcript carries its whole system
prompt), with one change: this machine's folders are replaced by fixed placeholders (the
repository becomes ``/home/dev/work/app``, the home folder ``/home/dev``, Python's own folders
``/usr`` and ``/home/dev/.venv``), so that no path of the machine that made it is committed.
After each run the edited files are compared with what the scripted edits leave; a run whose
program did not take every scripted step, or left a file otherwise, is reported and not kept.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from real_scenarios import SCENARIOS, Edit, Read, Run, Scenario, Step, Write  # noqa: E402

from tests.agents import harness  # noqa: E402
from tests.agents.programs import AGENTS, Agent  # noqa: E402

PROGRAMS = ("claude-code", "codex", "gemini-cli")  # the ones whose transcripts engram reads
REPO_PLACEHOLDER = "/home/dev/work/app"  # the scorer's CWD: where the sessions ran
HOME_PLACEHOLDER = "/home/dev"
SCRATCH_PLACEHOLDER = "/home/dev/scratch"
# where this machine keeps Python (a traceback names its files) and engram: fixed stand-ins
PYTHON_PLACEHOLDERS = {
    os.path.realpath(sys.base_prefix): "/usr",
    sys.base_prefix: "/usr",
    sys.prefix: "/home/dev/.venv",
    str(ROOT): "/home/dev/engram",
}


def tool_step(agent: Agent, root: Path, step: Step) -> dict[str, Any]:
    """Return the fake model's answer that makes ``agent`` take one scripted step."""
    name = agent.name
    if isinstance(step, Run):
        return agent.shell(step.command)
    full = str(root / step.path)
    if isinstance(step, Read):
        if name == "codex":
            return {"call": "exec_command", "args": {"cmd": f"cat {step.path}"}}
        tool = {"claude-code": "Read", "gemini-cli": "read_file"}[name]
        return {"call": tool, "args": {"file_path": full}}
    if isinstance(step, Edit):
        if name == "codex":
            removed = "".join(f"-{line}\n" for line in step.old.splitlines())
            added = "".join(f"+{line}\n" for line in step.new.splitlines())
            patch = f"*** Begin Patch\n*** Update File: {step.path}\n@@\n{removed}{added}"
            return {"custom": "apply_patch", "input": patch + "*** End Patch\n"}
        args = {"file_path": full, "old_string": step.old, "new_string": step.new}
        if name == "claude-code":
            return {"call": "Edit", "args": args}
        return {"call": "replace", "args": {**args, "instruction": step.why}}
    if name == "codex":
        body = "".join(f"+{line}\n" for line in step.content.splitlines())
        patch = f"*** Begin Patch\n*** Add File: {step.path}\n{body}*** End Patch\n"
        return {"custom": "apply_patch", "input": patch}
    tool = {"claude-code": "Write", "gemini-cli": "write_file"}[name]
    return {"call": tool, "args": {"file_path": full, "content": step.content}}


def command(
    agent: Agent, binary: Path, project: harness.Project, prompt: str, later: bool
) -> list[str]:
    """Return the program's command line for one prompt; a later prompt resumes the session."""
    first = agent.command(binary, project, prompt)
    if not later:
        return first
    if agent.name == "claude-code":
        return [*first, "--continue"]
    if agent.name == "codex":
        # codex exec [flags] resume --last PROMPT: the flags stay, the prompt moves after resume
        flags = first[2:-1]
        return [str(binary), "exec", *flags, "resume", "--last", prompt]
    return [*first, "--resume", "latest"]


def transcripts(agent: str, home: Path) -> list[Path]:
    """Return the transcript files the program wrote under its home, oldest first."""
    pattern = {
        "claude-code": ".claude/projects/*/*.jsonl",
        "codex": ".codex/sessions/*/*/*/rollout-*.jsonl",
        "gemini-cli": ".gemini/tmp/*/chats/session-*.json*",
    }[agent]
    found = [Path(path) for path in glob.glob(str(home / pattern))]
    return sorted(found, key=lambda path: path.stat().st_mtime)


def slug(path: Path) -> str:
    """Return Claude Code's project folder name for a path (each non-alphanumeric a dash)."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(path))


def placeholders(text: str, scratch: Path, project: harness.Project) -> str:
    """Replace this machine's scratch folder (and its other spellings) with fixed placeholders."""
    pairs = [
        (str(project.root), REPO_PLACEHOLDER),
        (slug(project.root), slug(Path(REPO_PLACEHOLDER))),
        (str(project.home), HOME_PLACEHOLDER),
        (str(scratch), SCRATCH_PLACEHOLDER),
        (slug(scratch), slug(Path(SCRATCH_PLACEHOLDER))),
    ]
    pairs += sorted(PYTHON_PLACEHOLDERS.items(), key=lambda pair: -len(pair[0]))
    for old, new in pairs:
        text = text.replace(old, new)
    return text


def machine_paths(text: str, scratch: Path) -> list[str]:
    """Return what in a copied transcript still names this machine's folders."""
    words = {str(ROOT.parent), sys.prefix, sys.base_prefix, str(Path.home()), tempfile.gettempdir()}
    left = {scratch.name} & set(re.findall(r"[\w.-]+", text))
    for word in words:  # as a path of its own: not inside another one, nor a tag like </root>
        left |= set(re.findall(rf"(?<![\w.<-]){re.escape(word)}(?:/[^\s\"'<]*|(?![\w.-]))", text))
    return sorted(left)


def add_files(root: Path, files: dict[str, str]) -> None:
    """Write a scenario's project files into a repository."""
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")


def expected(scenario: Scenario, start: dict[str, str]) -> dict[str, str | None]:
    """Return each edited or written file's content after the session (None: as committed)."""
    files: dict[str, str | None] = {}
    for turn in scenario.turns:
        for step in turn.steps:
            if isinstance(step, Edit):
                text = files.get(step.path) or start[step.path]
                files[step.path] = text.replace(step.old, step.new, 1)
            elif isinstance(step, Write):
                files[step.path] = step.content
            elif isinstance(step, Run) and step.restores:
                files[step.restores] = None
    return files


def dry(scenario: Scenario) -> list[str]:
    """Take a scenario's steps by hand in a scratch repository; return what is not as scripted."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="engram-dry-") as tmp:
        root = Path(tmp)
        add_files(root, {"README.md": "# shop\n", **scenario.files})
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid"}
        env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
        for argv in (
            ["git", "init", "-q", "-b", "main"],
            ["git", "add", "-A"],
            ["git", "commit", "-qm", "x"],
        ):
            subprocess.run(argv, cwd=root, check=True, env=env)
        for number, turn in enumerate(scenario.turns, 1):
            for step in turn.steps:
                where = f"prompt {number}, {step}"
                if isinstance(step, Read) and not (root / step.path).is_file():
                    problems.append(f"{where}: no such file")
                elif isinstance(step, Run):
                    done = subprocess.run(
                        ["sh", "-c", step.command],
                        cwd=root,
                        env=env,
                        capture_output=True,
                        text=True,
                    )
                    if done.returncode != step.code:
                        problems.append(
                            f"{where}: exit {done.returncode}: {done.stdout}{done.stderr}"
                        )
                elif isinstance(step, Edit):
                    text = (root / step.path).read_text(encoding="utf-8")
                    lines = text.splitlines()
                    if text.count(step.old) != 1:
                        problems.append(f"{where}: found {text.count(step.old)} times")
                    elif not any(
                        lines[i : i + len(step.old.splitlines())] == step.old.splitlines()
                        for i in range(len(lines))
                    ):
                        problems.append(f"{where}: not whole lines")
                    (root / step.path).write_text(text.replace(step.old, step.new, 1), "utf-8")
                elif isinstance(step, Write):
                    if (root / step.path).exists():
                        problems.append(f"{where}: the file exists")
                    add_files(root, {step.path: step.content})
    return problems


def run_scenario(scenario: Scenario, name: str, binary: Path, keep: bool) -> tuple[str, str]:
    """Run one scenario with one program; return (outcome, detail)."""
    agent = AGENTS[name]
    scratch = Path(tempfile.mkdtemp(prefix=f"engram-real-{name}-"))
    try:
        project = harness.make_project(scratch, name)
        start = {path: (project.root / path).read_text(encoding="utf-8") for path in ("README.md",)}
        start.update(scenario.files)
        add_files(project.root, scenario.files)
        if scenario.files:
            subprocess.run(["git", "add", "-A"], cwd=project.root, check=True, env=project.env)
            subprocess.run(
                ["git", "commit", "-qm", "project files"],
                cwd=project.root,
                check=True,
                env=project.env,
            )
        env = agent.prepare(project)
        for number, turn in enumerate(scenario.turns):
            steps = [tool_step(agent, project.root, step) for step in turn.steps]
            script = {"main_tool": agent.main_tool, "steps": steps, "final": turn.final}
            argv = command(agent, binary, project, turn.prompt, later=number > 0)
            record = harness.run_agent(project, argv, script, env=env, timeout=150.0)
            taken = max((request["step"] for request in record.main), default=-1)
            if taken < len(steps):  # the final text is step len(steps)
                return "short", (
                    f"prompt {number + 1}: took {taken + 1} of {len(steps) + 1} steps "
                    f"(exit {record.returncode}): {record.output[-600:]}"
                )
        for path, content in expected(scenario, start).items():
            now = (
                (project.root / path).read_text(encoding="utf-8")
                if (project.root / path).exists()
                else ""
            )
            if now != (start[path] if content is None else content):
                return "edits", f"{path} is not as the scripted edits leave it:\n{now}"
        found = transcripts(name, project.home)
        if not found:
            return "none", "the program wrote no transcript"
        # a resumed Gemini CLI session may go on in a new file that holds it all: the newest
        # file is the session's, as engram's hooks find it (inbox.locate_transcript)
        source = found[-1]
        text = placeholders(source.read_text(encoding="utf-8"), scratch, project)
        left = machine_paths(text, scratch)
        if left:
            return "paths", f"still names {left}"
        out = HERE / "transcripts" / name / f"r-{scenario.name}.jsonl.gz"
        out.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
        return "ok", f"{source.name} ({len(found)} file(s)) -> {out.name}"
    finally:
        if keep:
            print(f"    kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agent", action="append", choices=PROGRAMS, help="only this program")
    parser.add_argument("--only", action="append", help="only this scenario (by name)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folders")
    parser.add_argument("--missing", action="store_true", help="only scenarios not yet kept")
    parser.add_argument("--dry", action="store_true", help="check the scenarios, run no agent")
    args = parser.parse_args(argv)
    names = args.agent or list(PROGRAMS)
    wanted = [s for s in SCENARIOS if not args.only or s.name in args.only]
    if args.dry:
        bad = {scenario.name: dry(scenario) for scenario in wanted}
        for name, problems in bad.items():
            for problem in problems:
                print(f"{name}: {problem}")
        print(f"{len(wanted)} scenarios, {sum(map(bool, bad.values()))} with problems")
        return 1 if any(bad.values()) else 0
    failed = 0
    for name in names:
        binary, why = harness.program(name)
        if binary is None:
            print(f"{name}: skipped: {why}")
            failed += 1
            continue
        (HERE / "transcripts" / name).mkdir(parents=True, exist_ok=True)
        for scenario in wanted:
            if (
                args.missing
                and (HERE / "transcripts" / name / f"r-{scenario.name}.jsonl.gz").exists()
            ):
                continue
            start = time.monotonic()
            outcome, detail = run_scenario(scenario, name, binary, args.keep)
            took = time.monotonic() - start
            print(f"{name} r-{scenario.name}: {outcome} in {took:.0f} s: {detail}", flush=True)
            failed += outcome != "ok"
    print(f"{failed} run(s) not kept" if failed else "every run kept")
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.pop("ENGRAM_DIR", None)
    raise SystemExit(main())
