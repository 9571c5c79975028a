"""The layer direction of DESIGN.md §7, checked on the import statements of every module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "engram"

LEAVES = {"engram.errors", "engram.model", "engram.config", "engram.fileio", "engram"}
ADAPTERS = {
    "engram.cli",
    "engram.mcp_server",
    "engram.http_api",
    "engram.tui",
    "engram.daemon",
    "engram.__main__",
}
# Third-party modules that belong to adapters only.
ADAPTER_ONLY = {"typer", "click", "rich", "mcp", "textual", "fastapi", "uvicorn", "starlette"}


def layer(module: str) -> int:
    """Return the layer number of an engram module: 0 leaves … 4 adapters."""
    if module in LEAVES:
        return 0
    if module == "engram.store" or module.startswith("engram.store."):
        return 1
    if module == "engram.service":
        return 3
    if module in ADAPTERS or module.startswith("engram.tui."):
        return 4
    return 2  # features: index/, indexer/, sync/, graph, context, doctor …


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path) -> list[tuple[str, int]]:
    """Return (imported module, line) for every import in a file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((name, node.lineno))
            # `from engram import service` imports engram.service
            if name == "engram":
                found += [(f"engram.{alias.name}", node.lineno) for alias in node.names]
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_modules_found() -> None:
    names = {module_name(p) for p in MODULES}
    assert {"engram.model", "engram.store.jsonl", "engram.service", "engram.cli"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_layer_direction(path: Path) -> None:
    own = module_name(path)
    for name, line in imports(path):
        if not name.startswith("engram"):
            continue
        if own.startswith(name + ".") or name == "engram":
            continue  # a package's own __init__ docs
        assert layer(name) <= layer(own), f"{own}:{line} imports {name} from a higher layer"
        if layer(own) == 4 and own != "engram.__main__":
            assert layer(name) < 4, f"{own}:{line}: adapters never import each other ({name})"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_third_party_boundaries(path: Path) -> None:
    own = module_name(path)
    for name, line in imports(path):
        top = name.split(".")[0]
        if top in ADAPTER_ONLY:
            assert layer(own) == 4, f"{own}:{line}: the core must not import {top}"
        if top == "dulwich":
            assert own.startswith(("engram.indexer", "engram.sync")), (
                f"{own}:{line}: dulwich lives only in indexer/ and sync/"
            )


def test_checker_catches_a_violation(tmp_path: Path) -> None:
    """The rule is live: a store module importing the service would be flagged."""
    assert layer("engram.service") > layer("engram.store.jsonl")
    assert layer("engram.cli") == 4 and layer("engram.index.db") == 2
