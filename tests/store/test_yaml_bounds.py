"""YAML anchors and aliases are bounded (issue 28): a "billion laughs" note or config is refused.

Ten lines of front matter whose aliases expand to a billion nodes made ``engram import`` die
with MemoryError after 77 s. Now the node graph is counted, every alias expanded, before a
value is built from it: the note is skipped and named, the rest imports; a committed
config.yaml of that shape is refused naming the file; an ADR's front matter is broken YAML.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no type stubs
from ruamel.yaml import YAML

from engram.config import MAX_YAML_NODES, load_front_matter, yaml_nodes_over
from engram.errors import InputTooLarge, InvalidInput
from engram.indexer.adrparse import parse_adr
from engram.service import Engram

# Refusing is immediate; expanding took 77 s and then ran out of memory.
BOUNDED = 90


def laughs(levels: int = 9, prefix: str = "") -> list[str]:
    """YAML lines whose last key expands to 9 ** (levels + 1) strings."""
    lines = [f'{prefix}a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    previous = "a"
    for number in range(levels):
        name = chr(ord("b") + number)
        lines.append(f"{prefix}{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
        previous = name
    return lines


def test_expanded_nodes_are_counted_once_per_distinct_node() -> None:
    # The root, three keys, a (1 + 9), b (1 + 9 * 10) and c (1 + 9 * 91): 925 nodes, counted
    # without expanding anything, the same by both YAML libraries.
    small = "\n".join(laughs(levels=2))
    for root in (yaml.compose(small, Loader=yaml.SafeLoader), YAML(typ="safe").compose(small)):
        assert yaml_nodes_over(root, limit=925) is None
        assert yaml_nodes_over(root, limit=924) is not None
    huge = "\n".join(laughs())
    for root in (yaml.compose(huge, Loader=yaml.SafeLoader), YAML(typ="safe").compose(huge)):
        assert yaml_nodes_over(root) == (
            f"YAML anchors and aliases expand to more than {MAX_YAML_NODES:,} nodes; refused"
        )
    cycle = yaml.compose("a: &a [1, *a]", Loader=yaml.SafeLoader)
    assert yaml_nodes_over(cycle) == "a YAML alias refers to a node that contains it; refused"
    # A few aliases, as people use them, load as before.
    assert load_front_matter("base: &b {x: 1}\nother: *b\n") == {
        "base": {"x": 1},
        "other": {"x": 1},
    }
    with pytest.raises(InputTooLarge, match="expand to more than"):
        load_front_matter(huge)


def test_import_skips_a_billion_laughs_note_and_imports_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "p"
    Engram.init(root, "ledger")[0].close()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "laughs.md").write_text("\n".join(["---", "title: laughs", *laughs(), "---", "x"]))
    (notes / "fine.md").write_text("---\ntitle: A fine note\ntags: [ok]\n---\nIts body.\n")
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(root), "import", str(notes)],
        capture_output=True,
        text=True,
        timeout=BOUNDED,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert f"skipped {notes / 'laughs.md'}: YAML front matter: YAML anchors and aliases" in said
    assert "added 1" in said
    with Engram.open(root) as engram:
        assert [r["title"] for r in engram.project_ws.store.read_all()] == ["A fine note"]


def test_a_billion_laughs_config_is_refused_naming_the_file(tmp_path: Path) -> None:
    root = tmp_path / "p"
    Engram.init(root, "ledger")[0].close()
    config = root / ".engram" / "config.yaml"
    config.write_text(config.read_text() + "\n".join(laughs(prefix="x")) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(root), "stats"],
        capture_output=True,
        text=True,
        timeout=BOUNDED,
    )
    assert done.returncode != 0
    assert f"{config}: YAML anchors and aliases expand to more than" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_adr_with_billion_laughs_front_matter_is_broken_yaml() -> None:
    text = "\n".join(["---", "status: accepted", *laughs(), "---", "# ADR 1: Use cents", "x"])
    with pytest.raises(InvalidInput, match="broken YAML front matter: YAML anchors and aliases"):
        parse_adr("docs/adr/0001-cents.md", text)
