"""The package as it would be published: the wheel and the sdist built from this checkout.

Built with the project's own backend (hatchling, no isolated environment) into ``tmp_path``:
the license ships in both, the metadata names the license, the supported Pythons and the
project's URL, no test tool is a dependency users get, and the sdist holds the docs and no local
state. .ci/smoke.sh goes further: it installs the wheel into a clean virtualenv and uses it.
"""

from __future__ import annotations

import email
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_TOOLS = ("pytest", "hypothesis", "ruff", "mypy", "schemathesis", "build", "hatchling")


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_wheel_ships_the_license_and_honest_metadata(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = email.message_from_bytes(archive.read(info))
        license_file = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
        assert b"MIT License" in archive.read(license_file)
    assert metadata["License-Expression"] == "MIT"
    classifiers = metadata.get_all("Classifier") or []
    for version in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert "Environment :: Console" in classifiers
    assert any(c.startswith("Topic :: ") for c in classifiers)
    assert not [c for c in classifiers if c.startswith("License :: ")]  # PEP 639: the expression
    assert metadata.get_all("Project-URL")
    requires = [r.split(";")[0].split(">")[0].strip() for r in metadata.get_all("Requires-Dist")]
    assert not set(requires) & set(TEST_TOOLS), requires
    assert set(metadata.get_all("Provides-Extra") or []) == {"http", "tui", "semantic", "minilm"}
    assert not [n for n in names if not n.startswith(("engram/", "engram_git-"))]
    assert "engram/py.typed" in names


def test_the_sdist_ships_the_docs_and_no_local_state(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.partition("/")[2] for name in archive.getnames()}
    for needed in ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "docs/library.md"):
        assert needed in names, needed
    assert "examples/.engram/memories.jsonl" in names  # the example store the tests read
    junk = (".venv/", ".git/", "__pycache__", ".hypothesis/", "_cache/", ".engram/index/")
    assert not [n for n in names if any(j in n for j in junk) or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith(".engram/")]  # the checkout's own store
