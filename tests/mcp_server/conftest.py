"""Fixtures of the MCP server's tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from engram.service import Engram


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with an engram store holding one decision (test_mcp.py has its own,
    without git)."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    engram, _ = Engram.init(root, "demo")
    with engram:
        engram.remember("Money is integer cents", "Floats lost a cent.", kind="decision")
    return root
