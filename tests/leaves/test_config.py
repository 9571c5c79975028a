"""Settings: a committed config never runs a command; the user's own settings may.

A repository's ``.engram/config.yaml`` is written by whoever lands a commit, so
``consolidate.llm_command`` (and any key that names a program) is read only from ENGRAM_HOME's
config or the environment. Checked end to end: the CLI and a real MCP stdio session, with a
command that would leave a marker file if it ran.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from engram import config as config_mod
from engram.config import load, personal_dir, set_value
from engram.service import Engram
from tests.conftest import run_cli
from tests.mcp_server.test_mcp import connect

KEY = "consolidate.llm_command"


def decider(tmp_path: Path, marker: Path) -> str:
    """Return a command that leaves ``marker`` behind and keeps every group it is asked about."""
    script = tmp_path / "decide.py"
    script.write_text(
        "import json, pathlib, sys\n"
        "json.load(sys.stdin)\n"
        "pathlib.Path(sys.argv[1]).write_text('ran')\n"
        "print(json.dumps({'action': 'keep', 'target': None, 'reasoning': 'the command ran'}))\n",
        encoding="utf-8",
    )
    return shlex.join([sys.executable, str(script), str(marker)])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project with one near-duplicate pair (so consolidation asks its decider once)."""
    root = tmp_path / "repo"
    engram, _ = Engram.init(root, "demo")
    with engram:
        text = "Local time broke the audit trail in March"
        engram.remember("Use UTC in every log line", text + ".", kind="fact")
        engram.remember("Use UTC in all the log lines", text + "!", kind="fact")
    return root


def test_a_committed_command_never_runs_from_the_cli(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    set_value(repo / ".engram", KEY, decider(tmp_path, marker))
    done = run_cli("-C", str(repo), "consolidate", "--json")
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    plan = json.loads(done.stdout)
    assert {r["decided_by"] for r in plan["recommendations"]} == {"heuristic"}
    stderr = done.stderr.decode()
    assert stderr.count("warning:") == 1, stderr
    assert ".engram/config.yaml" in stderr and KEY in stderr
    assert any(KEY in w and "config.yaml" in w for w in plan["warnings"])
    # Every reader gets the safe value, not only consolidate; doctor names what was left out.
    assert load(repo).get(KEY) == ""
    with Engram.open(repo) as engram:
        found = [f.message for f in engram.doctor() if f.check == "config"]
    assert len(found) == 1 and KEY in found[0] and ".engram/config.yaml" in found[0]


def test_a_committed_command_never_runs_from_mcp(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    set_value(repo / ".engram", KEY, decider(tmp_path, marker))

    async def scenario() -> None:
        async with connect(repo, "--tools", "admin") as client:
            plan = await client.ok("consolidate")
            assert {r["decided_by"] for r in plan["recommendations"]} == {"heuristic"}
            assert any(".engram/config.yaml" in w and KEY in w for w in plan["warnings"])

    anyio.run(scenario)
    assert not marker.exists()


def test_the_users_own_settings_run_the_command(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran-from-home"
    home = personal_dir()
    home.mkdir(parents=True, exist_ok=True)
    set_value(home, KEY, decider(tmp_path, marker))
    done = run_cli("-C", str(repo), "consolidate", "--json")
    assert done.returncode == 0, done.stderr
    assert marker.exists() and "warning" not in done.stderr.decode()
    assert {r["decided_by"] for r in json.loads(done.stdout)["recommendations"]} == {"llm"}


def test_the_environment_runs_the_command_and_wins(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran-from-env"
    committed = tmp_path / "committed"
    set_value(repo / ".engram", KEY, decider(tmp_path, committed))
    env = {"ENGRAM_CONSOLIDATE_LLM_COMMAND": decider(tmp_path, marker)}
    done = run_cli("-C", str(repo), "consolidate", env=env)
    assert done.returncode == 0, done.stderr
    assert marker.exists() and not committed.exists()
    assert KEY in done.stderr.decode()  # the committed one is still named as ignored


def test_any_key_that_names_a_program_is_dropped_from_a_committed_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "p"
    (root / ".engram").mkdir(parents=True)
    (root / ".engram" / "config.json").write_text(
        json.dumps(
            {
                "trainer": {"command": "rm -rf /", "min_cluster": 4},
                "hooks": {"post_save_hook": "curl evil"},
                "consolidate": {"llm_command": ""},
                "steps": [{"name": "a", "run_cmd": "curl evil"}, "plain"],
                "shell": {"argv": ["sh", "-c", "curl evil"]},
            }
        ),
        encoding="utf-8",
    )
    cfg = load(root)
    assert cfg.get("trainer.min_cluster") == 4
    with pytest.raises(config_mod.ConfigError):
        cfg.get("trainer.command")
    assert sorted(i.key for i in cfg.ignored) == [
        "hooks",
        "shell",
        "steps[0].run_cmd",
        "trainer.command",
    ]
    assert cfg.get("steps") == [{"name": "a"}, "plain"]
    assert all("config.json" in w for w in cfg.warnings())
    assert cfg.warnings("consolidate.") == []  # an empty setting is no warning
    # The personal store's own config is the user's: its command stands.
    home = Path(os.environ["ENGRAM_HOME"])
    home.mkdir(parents=True)
    (home / "config.json").write_text(json.dumps({"consolidate": {"llm_command": "x"}}), "utf-8")
    assert load(home.parent, home).get(KEY) == "x"
    assert load(root).get(KEY) == "x"
    monkeypatch.setenv("ENGRAM_CONSOLIDATE_LLM_COMMAND", "y")
    assert load(root).get(KEY) == "y"


def test_a_catastrophic_committed_pattern_cannot_hang_a_write(tmp_path: Path) -> None:
    """`(A|AA)+$` on 30 A's and a '!' backtracks for ages; the write finishes and names it.

    Upper case: a pattern that can match a random (lower-case) memory id would refuse the id
    itself as a secret, one write in thirty-odd, which is not what this test is about.
    """
    root = tmp_path / "p"
    Engram.init(root, "demo")[0].close()
    evil = ["(A|AA)+$", "(A+)+$", "([A-Z]+)*!x", "(unclosed"]
    set_value(root / ".engram", "redact.extra_patterns", [*evil, r"ACME-\d+"])
    content = "A" * 30 + "! ticket ACME-42"
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(root), "remember", "t", content, "--json"],
        capture_output=True,
        timeout=60,  # generous; without the time limit this takes far longer
        check=False,
    )
    assert done.returncode == 0, done.stderr
    saved = json.loads(done.stdout)
    assert saved["memory"]["content"] == "A" * 30 + "! ticket [REDACTED]"
    stderr = done.stderr.decode()
    for line in (w for w in stderr.splitlines() if w.startswith("warning:")):
        assert ".engram/config.yaml: redact.extra_patterns: pattern" in line
    assert "'(A|AA)+$'" in stderr and "is not used" in stderr
    assert "'(unclosed'" in stderr and "not a valid regular expression" in stderr
    assert any("(A|AA)+$" in w for w in saved["warnings"])
    with Engram.open(root) as engram:
        found = "\n".join(f.message for f in engram.doctor() if f.check == "config")
    assert "'(unclosed'" in found and "'(A|AA)+$'" in found


NODE_CONFIG = (
    '{"project": "shop", "sync": {"jsonl": true}, "context": {"budget": 2000}, "indexer": '
    '{"adrDirs": ["docs/arch"], "gitDepth": 500, "hotspotThreshold": 8}}'
)


def test_the_node_engrams_config_json_is_read_as_it_means_it(tmp_path: Path) -> None:
    """Issue 17: a project set up by the Node engram; `init` said "no ADR folder found"."""
    root = tmp_path / "shop-repo"
    (root / ".engram").mkdir(parents=True)
    (root / ".engram" / "config.json").write_text(NODE_CONFIG, encoding="utf-8")
    (root / "docs" / "arch").mkdir(parents=True)
    (root / "docs" / "arch" / "0001-use-postgres.md").write_text(
        "# 1. Use Postgres\n\n## Status\n\nAccepted\n\n## Decision\n\nWe use Postgres.\n",
        encoding="utf-8",
    )
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    loaded = load(root)
    assert loaded.project == "shop"
    assert loaded.get("indexer.adr_dirs") == ["docs/arch"]
    assert loaded.get("indexer.git_depth") == 500
    assert loaded.get("indexer.hotspot_threshold") == 8
    assert loaded.get("context.budget") == 2000
    result = run_cli("init", cwd=root)
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    assert "docs/arch" in out and "no ADR folder" not in out
    assert (root / ".engram" / "config.json").read_text(encoding="utf-8") == NODE_CONFIG
    with Engram(root) as engram:
        top = engram.recall("postgres")[0]
        assert top.record["title"].endswith("Use Postgres")
        assert top.record["source"].startswith("adr:docs/arch/")


def test_config_yaml_wins_where_both_set_a_key(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / ".engram").mkdir(parents=True)
    (root / ".engram" / "config.json").write_text(NODE_CONFIG, encoding="utf-8")
    (root / ".engram" / "config.yaml").write_text(
        "project: shop-yaml\nindexer:\n  git_depth: 100\n", encoding="utf-8"
    )
    loaded = load(root)
    assert loaded.project == "shop-yaml"
    assert loaded.get("indexer.git_depth") == 100  # the yaml's
    assert loaded.get("indexer.adr_dirs") == ["docs/arch"]  # only the json has it
    assert loaded.get("indexer.hotspot_threshold") == 8
