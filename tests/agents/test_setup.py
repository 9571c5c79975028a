"""`engram setup`: real config files for every agent in a fake HOME, kept byte for byte.

HOME points at a fresh folder (the autouse fixture in conftest), so every `--user` run writes
there. The CLI runs in-process through typer's CliRunner, and once as a real process.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engram.agents import setup as agents
from engram.agents.hookspec import HOOK_AGENTS
from engram.cli import app
from engram.jsonc import Document, parse
from tests.conftest import run_cli

runner = CliRunner()
VENV_BIN = Path(sys.executable).parent
ENGRAM = VENV_BIN / "engram"
CASES = [(agent, scope) for agent in agents.AGENTS for scope in agents.SCOPES]


@pytest.fixture
def home() -> Path:
    return Path(os.environ["HOME"])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture(autouse=True)
def _no_engram_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep PATH free of `engram`, so the user-scope command is predictable."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}{os.pathsep}/usr/bin{os.pathsep}/bin")


def setup(repo: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["-C", str(repo), "setup", *args])
    return result.exit_code, result.stdout, result.stderr


def setup_json(repo: Path, *args: str) -> dict[str, Any]:
    code, out, err = setup(repo, *args, "--json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def scope_args(scope: str) -> list[str]:
    return ["--user"] if scope == "user" else ["--project"]


def snapshot(*folders: Path) -> dict[str, bytes]:
    return {
        str(path): path.read_bytes()
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".git" not in path.parts
    }


def only_insertions(old: str, new: str) -> None:
    """Fail unless ``new`` is ``old`` with text inserted: no byte changed or removed."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        assert tag in ("equal", "insert"), f"{tag}: {old[i1:i2]!r} became {new[j1:j2]!r}"


def strict_jsonc(text: str) -> Any:
    """Parse JSONC independently of engram.jsonc: drop comments and trailing commas, then json."""
    strings_or_comments = r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/'
    text = re.sub(strings_or_comments, lambda m: m.group(1) or "", text, flags=re.S)
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", text))


def expected_command(scope: str) -> list[str]:
    return ["engram", "mcp"] if scope == "project" else [sys.executable, "-m", "engram", "mcp"]


def mcp_entry(agent: str, path: Path) -> Any:
    """Read engram's server entry back from an agent's config file, with a strict parser."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        return tomllib.loads(text)["mcp_servers"]["engram"]
    data = strict_jsonc(text)
    key = {"opencode": "mcp", "vscode": "servers"}.get(agent, "mcpServers")
    return data[key]["engram"]


def assert_entry(agent: str, scope: str, entry: Any) -> None:
    argv = expected_command(scope)
    if agent == "opencode":
        assert entry == {"type": "local", "command": argv, "enabled": True}
    elif agent == "gemini-cli":  # trusted: headless Gemini CLI hides tools that would ask
        assert entry == {"command": argv[0], "args": argv[1:], "trust": True}
    elif agent == "vscode":
        assert entry == {"type": "stdio", "command": argv[0], "args": argv[1:]}
    else:
        assert entry == {"command": argv[0], "args": argv[1:]}


# -- every agent, both scopes --------------------------------------------------------------


@pytest.mark.parametrize(("agent", "scope"), CASES)
def test_setup_writes_valid_configs_and_is_idempotent(
    repo: Path, home: Path, agent: str, scope: str
) -> None:
    first = setup_json(repo, agent, *scope_args(scope))
    assert first["agent"] == agent and first["scope"] == scope
    changes = first["changes"]
    assert {c["action"] for c in changes} == {"created"}
    base = repo if scope == "project" else home
    for change in changes:
        path = Path(change["path"])
        assert path.is_file() and base in path.parents
        text = path.read_text(encoding="utf-8")
        if change["kind"] == "mcp":
            assert_entry(agent, scope, mcp_entry(agent, path))
        elif change["kind"] == "instructions":
            assert text.count(agents.START) == 1 and text.count(agents.END) == 1
            assert "What" in text and "Learned" in text and "topic_key" in text
        else:
            assert change["kind"] in ("hooks", "permissions")
    kinds = sorted(c["kind"] for c in changes)
    if agent == "claude-code":
        assert kinds == ["hooks", "instructions", "mcp", "permissions"]
    elif agent == "cursor" and scope == "user":
        assert kinds == ["hooks", "mcp"]
        assert any("Cursor keeps user rules" in n for n in first["notes"])
    elif agent in HOOK_AGENTS or agent == "opencode":
        assert kinds == ["hooks", "instructions", "mcp"]
    else:
        assert kinds == ["instructions", "mcp"]
    before = snapshot(repo, home)
    second = setup_json(repo, agent, *scope_args(scope))
    assert [c["action"] for c in second["changes"]] == ["unchanged"] * len(changes)
    assert all(c["diff"] == "" for c in second["changes"])
    assert snapshot(repo, home) == before


def test_project_files_never_hold_machine_paths(repo: Path, home: Path) -> None:
    for agent in agents.AGENTS:
        setup_json(repo, agent)
    for path, data in snapshot(repo).items():
        text = data.decode()
        assert sys.executable not in text and str(home) not in text, path
        assert str(repo) not in text, path


def test_user_scope_uses_engram_from_path_when_there(
    repo: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "engram").write_text("#!/bin/sh\n")
    (bin_dir / "engram").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    setup_json(repo, "gemini-cli", "--user")
    entry = mcp_entry("gemini-cli", home / ".gemini/settings.json")
    assert entry == {"command": "engram", "args": ["mcp"], "trust": True}


def test_user_scope_without_engram_on_path_runs_this_python(repo: Path, home: Path) -> None:
    setup_json(repo, "claude-code", "--user")
    entry = mcp_entry("claude-code", home / ".claude.json")
    assert entry == {"command": sys.executable, "args": ["-m", "engram", "mcp"]}
    settings = json.loads((home / ".claude/settings.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert command.endswith(f"{sys.executable} -m engram hook claude-code session-start")


# -- existing files: every key and comment kept --------------------------------------------

EXISTING: dict[str, dict[str, str]] = {
    "claude-code": {
        "project": ".mcp.json",
        "user": ".claude.json",
        "text": '{\n  "numStartups": 12,\n  "projects": {\n    "/src/app": {"allowedTools": []}\n'
        '  },\n  "mcpServers": {\n    "github": {\n      "command": "gh-mcp",\n'
        '      "args": ["--stdio"]\n    }\n  }\n}\n',
    },
    "codex": {
        "project": ".codex/config.toml",
        "user": ".codex/config.toml",
        "text": '# my codex settings\nmodel = "o4"  # the fast one\n\n[mcp_servers.docs]\n'
        'command = "docs-mcp"\nargs = []  # none needed\n\n[profiles.deep]\nmodel = "o3"\n',
    },
    "gemini-cli": {
        "project": ".gemini/settings.json",
        "user": ".gemini/settings.json",
        "text": '// Gemini settings\n{\n    "theme": "Dracula", // dark\n    "mcpServers": {\n'
        "        /* none yet */\n    },\n}\n",
    },
    "opencode": {
        "project": "opencode.jsonc",
        "user": ".config/opencode/opencode.jsonc",
        "text": '{\n  "$schema": "https://opencode.ai/config.json",\n  // Theme configuration\n'
        '  "theme": "opencode",\n  "mcp": {\n    "jira": {"type": "remote", "url": "https://j",'
        ' "enabled": false},\n  },\n}\n',
    },
    "cursor": {
        "project": ".cursor/mcp.json",
        "user": ".cursor/mcp.json",
        "text": '{"mcpServers": {"browser": {"command": "npx", "args": ["-y", "browser-mcp"]}}}\n',
    },
    "vscode": {
        "project": ".vscode/mcp.json",
        "user": ".config/Code/User/mcp.json",
        "text": '{\r\n\t// Servers for Copilot\r\n\t"inputs": [],\r\n\t"servers": {\r\n'
        '\t\t"fs": {\r\n\t\t\t"type": "stdio",\r\n\t\t\t"command": "fs-mcp" // local\r\n'
        "\t\t}\r\n\t}\r\n}\r\n",
    },
}


@pytest.mark.parametrize(("agent", "scope"), CASES)
def test_existing_entries_and_comments_are_kept_byte_for_byte(
    repo: Path, home: Path, agent: str, scope: str
) -> None:
    base = repo if scope == "project" else home
    config = base / EXISTING[agent][scope]
    config.parent.mkdir(parents=True, exist_ok=True)
    original = EXISTING[agent]["text"]
    config.write_bytes(original.encode())
    notes = base / {"claude-code": "CLAUDE.md"}.get(agent, "AGENTS.md")
    if agent in ("codex", "opencode", "claude-code") and scope == "project":
        notes.write_text("# House rules\n\nUse tabs.\n")
    result = setup_json(repo, agent, *scope_args(scope))
    mcp = next(c for c in result["changes"] if c["kind"] == "mcp")
    assert Path(mcp["path"]) == config and mcp["action"] == "updated"
    new = config.read_bytes().decode()
    only_insertions(original, new)
    assert_entry(agent, scope, mcp_entry(agent, config))
    if config.suffix == ".toml":
        data = tomllib.loads(new)
        assert data["mcp_servers"]["docs"] == {"command": "docs-mcp", "args": []}
        assert data["model"] == "o4" and data["profiles"] == {"deep": {"model": "o3"}}
    else:
        data = strict_jsonc(new)
        before = strict_jsonc(original)
        key = {"opencode": "mcp", "vscode": "servers"}.get(agent, "mcpServers")
        assert {k: v for k, v in data[key].items() if k != "engram"} == before[key]
        extra = {key, "hooks"} if agent == "gemini-cli" else {key}  # its hooks share the file
        assert {k: v for k, v in data.items() if k not in extra} == {
            k: v for k, v in before.items() if k not in extra
        }
    if "\r\n" in original:
        assert new.count("\n") == new.count("\r\n")
    if notes.exists() and scope == "project":
        text = notes.read_text()
        assert text.startswith("# House rules\n\nUse tabs.\n\n" + agents.START)
    again = setup_json(repo, agent, *scope_args(scope))
    assert {c["action"] for c in again["changes"]} == {"unchanged"}
    assert config.read_bytes().decode() == new


def test_outdated_entry_is_updated_in_place_keeping_user_keys(repo: Path) -> None:
    config = repo / ".mcp.json"
    original = (
        '{\n  "mcpServers": {\n    "engram": {\n      "command": "/old/engram",\n'
        '      "args": ["serve"],\n      "env": {"ENGRAM_HOME": "/data"}\n    },\n'
        '    "other": {"command": "x"}\n  }\n}\n'
    )
    config.write_text(original)
    result = setup_json(repo, "claude-code")
    assert result["changes"][0]["action"] == "updated"
    data = json.loads(config.read_text())
    assert data["mcpServers"]["engram"] == {
        "command": "engram",
        "args": ["mcp"],
        "env": {"ENGRAM_HOME": "/data"},
    }
    assert data["mcpServers"]["other"] == {"command": "x"}
    lines = config.read_text().splitlines()
    assert lines[0:3] == original.splitlines()[0:3]
    assert lines[5:] == original.splitlines()[5:]


def test_codex_toml_entry_updated_keeps_comments(repo: Path, home: Path) -> None:
    config = home / ".codex/config.toml"
    config.parent.mkdir()
    config.write_text(
        '[mcp_servers.engram]  # memory\ncommand = "old"\nstartup_timeout_sec = 20  # slow disk\n'
    )
    setup_json(repo, "codex", "--user")
    text = config.read_text()
    assert "# memory" in text and "startup_timeout_sec = 20  # slow disk" in text
    assert tomllib.loads(text)["mcp_servers"]["engram"] == {
        "command": sys.executable,
        "startup_timeout_sec": 20,
        "args": ["-m", "engram", "mcp"],
    }


def test_codex_home_and_xdg_config_home_are_honoured(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    setup_json(repo, "codex", "--user")
    setup_json(repo, "opencode", "--user")
    assert (tmp_path / "codex-home/config.toml").is_file()
    assert (tmp_path / "codex-home/AGENTS.md").is_file()
    assert (tmp_path / "xdg/opencode/opencode.json").is_file()


def test_opencode_new_file_gets_the_schema(repo: Path) -> None:
    setup_json(repo, "opencode")
    data = json.loads((repo / "opencode.json").read_text())
    assert data["$schema"] == "https://opencode.ai/config.json"
    assert not (repo / "opencode.jsonc").exists()


def test_instruction_block_is_replaced_not_duplicated(repo: Path) -> None:
    path = repo / "AGENTS.md"
    path.write_text(
        f"# Agents\n\nBefore.\n\n{agents.START}\nold engram text\n{agents.END}\n\nAfter.\n"
    )
    result = setup_json(repo, "codex")
    assert result["changes"][1]["action"] == "updated"
    text = path.read_text()
    assert text.startswith("# Agents\n\nBefore.\n\n" + agents.START + "\n## Memory (engram)")
    assert text.endswith(agents.END + "\n\nAfter.\n")
    assert "old engram text" not in text and text.count(agents.START) == 1
    lines = agents.INSTRUCTIONS.strip().splitlines()
    assert 15 <= len(lines) <= 30 and all(len(line) <= 100 for line in lines)
    setup_json(repo, "opencode")  # shares AGENTS.md: the same block, nothing to change
    assert path.read_text() == text


def test_unclosed_marker_is_an_error(repo: Path) -> None:
    (repo / "GEMINI.md").write_text(f"x\n{agents.START}\nhalf\n")
    code, _, err = setup(repo, "gemini-cli")
    assert code == 1 and "GEMINI.md:2: <!-- engram:start --> has no <!-- engram:end -->" in err
    assert not (repo / ".gemini").exists()


# -- dry run, list, errors -------------------------------------------------------------------


@pytest.mark.parametrize(("agent", "scope"), CASES)
def test_dry_run_writes_nothing_and_shows_a_diff(
    repo: Path, home: Path, agent: str, scope: str
) -> None:
    before = snapshot(repo, home)
    code, out, err = setup(repo, agent, *scope_args(scope), "--dry-run")
    assert code == 0, err
    assert snapshot(repo, home) == before
    assert "--- /dev/null" in out and "+++ b/" in out and "engram" in out
    assert "would create" in err


def test_dry_run_diff_of_an_existing_file(repo: Path) -> None:
    (repo / ".cursor").mkdir()
    config = repo / ".cursor/mcp.json"
    config.write_text('{\n  "mcpServers": {}\n}\n')
    data = setup_json(repo, "cursor", "--dry-run")
    assert data["dry_run"] is True
    diff = data["changes"][0]["diff"]
    assert diff.startswith("--- a/.cursor/mcp.json\n+++ b/.cursor/mcp.json\n")
    assert '-  "mcpServers": {}\n' in diff and '+    "engram": {\n' in diff
    assert config.read_text() == '{\n  "mcpServers": {}\n}\n'
    assert not (repo / ".cursor/rules").exists()


def test_list_reports_every_agent_and_scope(repo: Path, home: Path) -> None:
    data = setup_json(repo, "--list")
    rows = data["files"]
    assert {(r["agent"], r["scope"]) for r in rows} == set(CASES)
    assert {r["state"] for r in rows} == {"absent"}
    setup_json(repo, "claude-code")
    setup_json(repo, "codex", "--user")
    (repo / ".vscode").mkdir()
    (repo / ".vscode/mcp.json").write_text('{"servers": {}}')
    (repo / ".gemini").mkdir()
    (repo / ".gemini/settings.json").write_text('{"mcpServers": [}')
    config = home / ".codex/config.toml"
    config.write_text(config.read_text().replace('args = ["-m"', 'args = ["-X", "-m"'))
    rows = setup_json(repo, "--list")["files"]
    state = {(r["agent"], r["scope"], r["kind"]): r for r in rows}
    for kind in ("mcp", "instructions", "hooks"):
        assert state["claude-code", "project", kind]["state"] == "configured"
        assert state["claude-code", "user", kind]["state"] == "absent"
    assert state["codex", "user", "mcp"]["state"] == "outdated"
    assert state["codex", "user", "instructions"]["state"] == "configured"
    assert state["codex", "user", "mcp"]["shown"] == "~/.codex/config.toml"
    assert state["vscode", "project", "mcp"]["state"] == "missing"
    gemini = state["gemini-cli", "project", "mcp"]
    assert gemini["state"] == "error" and ".gemini/settings.json:1:17" in gemini["detail"]
    code, out, _ = setup(repo, "--list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["agent", "scope", "what", "state", "path"]
    assert "claude-code  project  mcp           configured  .mcp.json" in lines
    assert len(lines) == 1 + len(rows)


@pytest.mark.parametrize(
    ("agent", "relative", "text", "where"),
    [
        ("claude-code", ".mcp.json", '{\n  "mcpServers": {\n    "a": 1,,\n  }\n}\n', "3:12"),
        ("vscode", ".vscode/mcp.json", '{\n  // c\n  "servers": {"x": tru}\n}\n', "3:20"),
        ("codex", ".codex/config.toml", 'model = "o3"\n[mcp_servers\n', "2:"),
        ("opencode", "opencode.json", '{"mcp": {"a": "unterminated}\n', "1:29"),
    ],
)
def test_invalid_user_file_is_an_error_and_nothing_is_written(
    repo: Path, agent: str, relative: str, text: str, where: str
) -> None:
    path = repo / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    before = snapshot(repo)
    code, out, err = setup(repo, agent)
    assert code == 1 and out == ""
    assert f"error: {path}:{where}" in err
    assert "hint: fix" in err and "Traceback" not in err
    assert snapshot(repo) == before  # the file untouched, and no instructions written either


def test_wrong_shape_is_an_error_not_an_overwrite(repo: Path) -> None:
    (repo / ".mcp.json").write_text('{"mcpServers": ["x"]}')
    code, _, err = setup(repo, "claude-code")
    assert code == 1 and ".mcp.json:1:16: mcpServers must be an object" in err
    assert (repo / ".mcp.json").read_text() == '{"mcpServers": ["x"]}'


def test_unknown_agent_and_missing_agent(repo: Path) -> None:
    code, _, err = setup(repo, "emacs")
    assert code == 1 and "unknown agent 'emacs'" in err and "claude-code" in err
    code, _, err = setup(repo)
    assert code == 1 and "name an agent, or pass --list" in err


def test_text_output(repo: Path) -> None:
    code, out, err = setup(repo, "cursor")
    assert code == 0
    assert out.splitlines() == [
        "created .cursor/mcp.json (mcp)",
        "created .cursor/rules/engram.mdc (instructions)",
        "created .cursor/hooks.json (hooks)",
    ]
    assert "note: no .engram/ in this project yet: run `engram init`" in err
    rule = (repo / ".cursor/rules/engram.mdc").read_text()
    assert rule.startswith("---\ndescription: ") and "alwaysApply: true\n---\n" in rule
    code, out, _ = setup(repo, "cursor")
    assert out.splitlines() == [
        "unchanged .cursor/mcp.json (mcp)",
        "unchanged .cursor/rules/engram.mdc (instructions)",
        "unchanged .cursor/hooks.json (hooks)",
    ]


# -- files on disk: mode, symlinks, parents ------------------------------------------------------


def test_writes_keep_mode_and_symlinks(repo: Path, home: Path, tmp_path: Path) -> None:
    config = home / ".claude.json"
    config.write_text('{"numStartups": 3}\n')
    config.chmod(0o600)
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text('{"model": "opus"}\n')
    (home / ".claude").mkdir()
    (home / ".claude/settings.json").symlink_to(dotfiles / "settings.json")
    setup_json(repo, "claude-code", "--user")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert (home / ".claude/settings.json").is_symlink()
    settings = json.loads((dotfiles / "settings.json").read_text())
    assert settings["model"] == "opus" and "SessionStart" in settings["hooks"]
    umask = os.umask(0)
    os.umask(umask)
    created = home / ".claude/CLAUDE.md"
    assert stat.S_IMODE(created.stat().st_mode) == 0o666 & ~umask
    assert not list(home.rglob("*.tmp"))


def test_a_project_file_a_link_leads_outside_the_project_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    """A repository committing ``.claude -> <a folder of the user's>`` had setup merge engram's
    hooks into the user's file there; ``CLAUDE.md -> /dev/zero`` had it read forever."""
    outside = tmp_path / "users-own-claude"
    outside.mkdir()
    (outside / "settings.json").write_text('{"model": "opus"}\n')
    (repo / ".claude").symlink_to(outside)
    before = snapshot(outside)
    code, _, err = setup(repo, "claude-code", "--project")
    assert code == 1
    assert f"{repo}/.claude/settings.json leads outside the project, to {outside}" in err
    assert snapshot(outside) == before and not (repo / ".mcp.json").exists()  # nothing written
    (repo / ".claude").unlink()
    (repo / "CLAUDE.md").symlink_to("/dev/zero")
    done = run_cli("setup", "claude-code", "--project", cwd=repo)  # a timeout, were it read
    assert done.returncode == 1
    assert "CLAUDE.md leads outside the project, to /dev/zero" in done.stderr.decode()


def test_a_link_within_the_project_is_followed(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("# Team notes\n")
    (repo / "CLAUDE.md").symlink_to("AGENTS.md")
    setup_json(repo, "claude-code", "--project")
    assert (repo / "CLAUDE.md").is_symlink()
    text = (repo / "AGENTS.md").read_text()
    assert text.startswith("# Team notes\n") and "engram" in text


def test_an_agent_file_that_is_a_fifo_is_refused_at_once(repo: Path) -> None:
    os.mkfifo(repo / ".mcp.json")
    done = run_cli("setup", "claude-code", "--project", cwd=repo)
    assert done.returncode == 1
    assert ".mcp.json is a named pipe (FIFO), not a regular file: setup reads and writes only" in (
        done.stderr.decode()
    )


# -- hooks -------------------------------------------------------------------------------------

# The Claude Code hooks of an earlier engram setup (a grep/sed one-liner into `engram check`).
OLD_CHECK = (
    'f=$(grep -o \'"file_path" *: *"[^"]*"\' | head -n 1 | sed \'s/^"file_path" *: *"//; s/"$//;'
    ' s/\\\\\\\\/\\\\/g\'); [ -z "$f" ] || engram check --files "$f" 2>/dev/null || true'
)
OLD_SETTINGS = {
    "hooks": {
        "SessionStart": [
            {
                "matcher": "startup|resume|clear|compact",
                "hooks": [
                    {
                        "type": "command",
                        "command": "engram context 2>/dev/null || true",
                        "timeout": 30,
                    }
                ],
            }
        ],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]},
            {
                "matcher": "Edit|Write|MultiEdit",
                "hooks": [{"type": "command", "command": OLD_CHECK, "timeout": 15}],
            },
        ],
    }
}


def engram_hooks(settings: Path) -> dict[str, list[dict[str, Any]]]:
    """Return engram's hook groups by event in an agent's settings file."""
    data = json.loads(settings.read_text())
    found: dict[str, list[dict[str, Any]]] = {}
    for event, groups in data["hooks"].items():
        ours = [g for g in groups if " hook " in json.dumps(g) and "engram" in json.dumps(g)]
        if ours:
            found[event] = ours
    return found


@pytest.mark.parametrize(
    ("agent", "relative", "events"),
    [
        (
            "claude-code",
            ".claude/settings.json",
            {
                "SessionStart",
                "UserPromptSubmit",
                "PreToolUse",
                "SubagentStart",
                "PostToolUseFailure",
                "PreCompact",
                "Stop",
                "SubagentStop",
                "SessionEnd",
            },
        ),
        (
            "codex",
            ".codex/hooks.json",
            {
                "SessionStart",
                "UserPromptSubmit",
                "PreToolUse",
                "PostToolUse",
                "Stop",
                "SubagentStop",
            },
        ),
        (
            "gemini-cli",
            ".gemini/settings.json",
            {
                "SessionStart",
                "BeforeAgent",
                "BeforeTool",
                "AfterTool",
                "PreCompress",
                "AfterAgent",
                "SessionEnd",
            },
        ),
    ],
)
def test_setup_installs_each_agents_documented_hooks(
    repo: Path, agent: str, relative: str, events: set[str]
) -> None:
    setup_json(repo, agent)
    hooks = engram_hooks(repo / relative)
    assert set(hooks) == events
    specs = [s for s in agents.HOOKS if s.agent == agent]
    for event, groups in hooks.items():
        assert len(groups) == len([s for s in specs if s.native == event]), event
    for spec in specs:  # one group per hook engram declares, several for one event
        (group,) = [g for g in hooks[spec.native] if f"hook {agent} {spec.event}" in json.dumps(g)]
        (hook,) = group["hooks"]
        assert group.get("matcher") == agents.native_matcher(spec)
        assert hook["command"] == agents.hook_command(["engram"], spec)
        assert hook["command"].endswith(f"; engram hook {agent} {spec.event}")
        # Gemini CLI counts milliseconds, the others seconds.
        assert hook["timeout"] == spec.timeout * (1000 if agent == "gemini-cli" else 1)
    if agent == "gemini-cli":  # one file holds the MCP entry and the hooks
        assert mcp_entry(agent, repo / relative) == {
            "command": "engram",
            "args": ["mcp"],
            "trust": True,
        }


def test_hooks_join_the_users_own(repo: Path) -> None:
    settings = repo / ".claude/settings.json"
    settings.parent.mkdir()
    original = (
        '{\n  "permissions": {"allow": ["Bash(npm test)"]},\n  "hooks": {\n'
        '    "PreToolUse": [\n      {\n        "matcher": "Bash",\n'
        '        "hooks": [{"type": "command", "command": "audit.sh"}]\n      }\n    ]\n  }\n}\n'
    )
    settings.write_text(original)
    setup_json(repo, "claude-code")
    new = settings.read_text()
    only_insertions(original, new)
    data = json.loads(new)
    assert data["permissions"] == {"allow": ["Bash(npm test)", *agents.allowed_tools()]}
    assert data["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "audit.sh"
    pre_tool = [s for s in agents.HOOKS if s.agent == "claude-code" and s.native == "PreToolUse"]
    assert len(engram_hooks(settings)["PreToolUse"]) == len(pre_tool)
    # A hand-edited engram hook is put back, the user's hooks stay.
    settings.write_text(
        new.replace("|| exit 0; engram hook claude-code stop", "; engram hook claude-code stop")
    )
    result = setup_json(repo, "claude-code")
    assert [c["action"] for c in result["changes"]] == [
        "unchanged",
        "unchanged",
        "updated",
        "unchanged",
    ]
    assert settings.read_text() == new


def test_upgrade_replaces_the_one_liner_hooks_in_place(repo: Path) -> None:
    settings = repo / ".claude/settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(OLD_SETTINGS, indent=2) + "\n")
    rows = {
        r["kind"]: r["state"]
        for r in setup_json(repo, "--list")["files"]
        if r["agent"] == "claude-code" and r["scope"] == "project"
    }
    assert rows["hooks"] == "outdated"
    setup_json(repo, "claude-code")
    data = json.loads(settings.read_text())
    text = json.dumps(data)
    assert "engram check" not in text and "engram context" not in text and "grep" not in text
    pre = data["hooks"]["PreToolUse"]
    matchers = [g["matcher"] for g in pre]
    assert matchers[:2] == ["Bash", "Edit|Write|MultiEdit|NotebookEdit"]  # replaced in place
    assert set(matchers[2:]) == {"Read", "Task|Agent"}  # the new ones added
    assert pre[0]["hooks"] == [{"type": "command", "command": "audit.sh"}]  # the user's stays
    assert pre[1]["hooks"][0]["command"].endswith("engram hook claude-code pre-edit")
    (start,) = data["hooks"]["SessionStart"]
    assert start["hooks"][0]["command"].endswith("engram hook claude-code session-start")
    assert setup_json(repo, "claude-code")["changes"][2]["action"] == "unchanged"


@pytest.mark.parametrize(
    ("agent", "relative"),
    [
        ("claude-code", ".claude/settings.json"),
        ("codex", ".codex/hooks.json"),
        ("gemini-cli", ".gemini/settings.json"),
        ("cursor", ".cursor/hooks.json"),
    ],
)
def test_without_engram_only_session_start_says_so(repo: Path, agent: str, relative: str) -> None:
    """engram not on PATH: one line at session start (and the model told), the rest silent."""
    setup_json(repo, agent)
    data = json.loads((repo / relative).read_text())
    said = {}
    for event, entries in data["hooks"].items():
        for entry in entries:
            for hook in entry.get("hooks", [entry]):
                done = subprocess.run(
                    ["sh", "-c", hook["command"]],
                    cwd=repo,
                    input=b'{"hook_event_name": "x", "tool_input": {"file_path": "/x/a.py"}}',
                    capture_output=True,
                    env={**os.environ, "PATH": f"/usr/bin{os.pathsep}/bin"},
                    timeout=60,
                    check=False,
                )
                assert (done.returncode, done.stderr) == (0, b""), hook["command"]
                if done.stdout:
                    said[event] = json.loads(done.stdout)
    start = next(s.native for s in agents.HOOKS if s.agent == agent and s.action == "brief")
    assert list(said) == [start]  # one hook speaks: the session start's
    if agent == "cursor":
        text = said[start]["additional_context"]
        assert text.splitlines()[0] == agents.missing_line("engram")
    else:
        assert said[start]["systemMessage"] == agents.missing_line("engram")
        context = said[start]["hookSpecificOutput"]
        assert context["hookEventName"] == start and "not available" in context["additionalContext"]
    assert "`engram` cannot be run here" in agents.missing_line("engram")


# -- one real process ----------------------------------------------------------------------------


def test_setup_through_a_real_process(repo: Path, home: Path) -> None:
    done = run_cli("setup", "vscode", "--user", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    changes = json.loads(done.stdout)["changes"]
    assert [c["action"] for c in changes] == ["created", "created"]
    user = home / ".config/Code/User"
    assert json.loads((user / "mcp.json").read_text())["servers"]["engram"]["type"] == "stdio"
    text = (user / "prompts/engram.instructions.md").read_text()
    assert text.startswith("---\ndescription: ") and "applyTo: '**'" in text
    again = run_cli("setup", "vscode", "--user", cwd=repo)
    assert again.returncode == 0
    assert again.stdout.decode().splitlines() == [
        "unchanged ~/.config/Code/User/mcp.json (mcp)",
        "unchanged ~/.config/Code/User/prompts/engram.instructions.md (instructions)",
    ]


def test_jsonc_reader_agrees_with_the_strict_one(repo: Path, home: Path) -> None:
    for agent, scope in CASES:
        setup_json(repo, agent, *scope_args(scope))
    for path in [*repo.rglob("*.json"), *home.rglob("*.json")]:
        text = path.read_text()
        root = parse(text)
        assert root is not None and root.value == strict_jsonc(text) == json.loads(text)
        assert Document(text).text == text
