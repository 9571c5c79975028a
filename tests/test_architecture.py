"""The layers of docs/architecture.md, as docs/layers.toml has them, checked on every module.

One checker (``violations``) reads the import statements of a package and reports: a module the
map does not place, an import the map does not allow (adapters never import each other, the
index never imports the store …), a third-party package outside its home, and a write to the
file system outside engram/store that ``ALLOWED_WRITES`` does not name with its reason. It runs
on engram/ and, to show that it bites, on a small package planted in ``tmp_path`` with one
violation of each kind. Also here: the exception tree drawn in engram/errors.py names every
``EngramError`` subclass, and ``engram check``, ``recall`` and ``context`` import no adapter, no
async stack and no pydantic.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engram.service import Engram

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "engram"
LAYERS = ROOT / "docs" / "layers.toml"

# Every module outside engram/store that writes files, and what it writes. A key is a module or
# a ``package.*`` pattern, as in docs/layers.toml; an entry whose modules write nothing fails.
ALLOWED_WRITES: dict[str, str] = {
    "engram.__main__": "only /dev/null, over stdout once its reader went away (`recall | head`)",
    "engram.agents.setup": "the coding agents' own settings (.claude/, .cursor/, AGENTS.md …)",
    "engram.cli": "`export --output` and `consolidate --out` write the file the user named",
    "engram.config": "config.yaml (its template, `config set`) and state/config.cache.json",
    "engram.daemon.server": (
        "its flock file, Unix socket and off marker in .engram/state/ (no data)"
    ),
    "engram.fileio": "the primitives (atomic replace, lock files) called with others' paths",
    "engram.index.*": "the derived index in .engram/index/, rebuilt from memories.jsonl at will",
    "engram.formats.obsidian": "the Obsidian vault the user names, outside .engram/",
    "engram.formats.instructions": "only engram's marked block of an agent's instruction file",
    "engram.service": "`init` makes the project folder",
    "engram.sync.gitguard": "the pre-commit hook `engram setup git-hooks` installs, in git's hooks",
    "engram.sync.gitmerge": "the merge driver rewrites the file git hands it, outside .engram/",
    "engram.sync.remote": "its run marker and stale git lock files, in the git folder",
}

# Reading names only: calls of these modules that change no file.
_READ_ONLY = {
    "shutil": {"which", "get_terminal_size", "disk_usage"},
    "tempfile": {"gettempdir", "gettempdirb", "gettempprefix"},
}
_OS_WRITES = {
    "chmod", "link", "makedirs", "mkdir", "mkfifo", "remove", "removedirs", "rename", "renames",
    "replace", "rmdir", "symlink", "truncate", "unlink",
}  # fmt: skip
_PATH_WRITES = {
    "chmod", "hardlink_to", "mkdir", "rmdir", "symlink_to", "touch", "unlink", "write_bytes",
    "write_text",
}  # fmt: skip
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


# -- the map ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    name: str
    modules: frozenset[str]  # exact module names
    patterns: frozenset[str]  # "engram.store" for "engram.store.*"
    imports: frozenset[str]  # the other groups it may import


@dataclass(frozen=True)
class LayerMap:
    groups: Mapping[str, Group]
    third_party: Mapping[str, frozenset[str]]  # top-level package -> groups that may import it
    reexports: Mapping[str, frozenset[str]] = field(default_factory=dict)  # name -> it may import

    def place(self, module: str) -> str | None:
        """Return the group of ``module``: its exact name first, else the longest pattern."""
        for group in self.groups.values():
            if module in group.modules:
                return group.name
        best: tuple[int, str] | None = None
        for group in self.groups.values():
            for pattern in group.patterns:
                if matches(pattern, module) and (best is None or len(pattern) > best[0]):
                    best = (len(pattern), group.name)
        return best[1] if best else None


def matches(pattern: str, module: str) -> bool:
    """Tell whether ``module`` is the package ``pattern`` or a module under it."""
    return module == pattern or module.startswith(pattern + ".")


def load_map(path: Path = LAYERS) -> LayerMap:
    """Read docs/layers.toml; refuse a name placed twice or an import of an unknown group."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    groups: dict[str, Group] = {}
    seen: set[str] = set()
    for name, body in data["groups"].items():
        names = list(body["modules"])
        assert not seen & set(names), f"{path.name}: {sorted(seen & set(names))} placed twice"
        seen |= set(names)
        groups[name] = Group(
            name,
            frozenset(n for n in names if not n.endswith(".*")),
            frozenset(n.removesuffix(".*") for n in names if n.endswith(".*")),
            frozenset(body["imports"]),
        )
    for group in groups.values():
        unknown = group.imports - set(groups)
        assert not unknown, f"{path.name}: group {group.name} imports unknown groups {unknown}"
    third = {top: frozenset(homes) for top, homes in data["third_party"].items()}
    for top, homes in third.items():
        assert homes <= set(groups), f"{path.name}: {top} lives in unknown groups"
    reexports = {name: frozenset(targets) for name, targets in data.get("reexports", {}).items()}
    return LayerMap(groups, third, reexports)


# -- reading a package --------------------------------------------------------------------------


def module_name(path: Path, package: Path) -> str:
    """Return the dotted module name of a file of ``package`` (a folder named like it)."""
    parts = path.relative_to(package.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules(package: Path) -> dict[str, Path]:
    """Return every module of a package by dotted name."""
    return {module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def imports(path: Path, package: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """Yield (imported module, line) for every import in a file, relative ones resolved.

    ``from engram.store import jsonl`` imports engram.store.jsonl (a module of ``known``); an
    ``importlib.import_module("engram.x")`` with a literal name counts as an import too.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = module_name(path, package)
    here = own if path.name == "__init__.py" else own.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            yield name, node.lineno
            for alias in node.names:
                if f"{name}.{alias.name}" in known:
                    yield f"{name}.{alias.name}", node.lineno
        elif (
            isinstance(node, ast.Call)
            and _called(node) in {"import_module", "importlib.import_module"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno


def _called(node: ast.Call) -> str:
    """Return the dotted name a call calls (``os.replace``, ``open``, ``?.write_text``)."""
    func, parts = node.func, []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    elif parts:
        parts.append("?")  # called on an expression: Path(x).write_text(...)
    return ".".join(reversed(parts))


def _owner(name: str, known: set[str]) -> str | None:
    """Return the module ``name`` lies in (``engram.index.db.Hit`` -> engram.index.db)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _mode(node: ast.Call, position: int) -> str | None:
    """Return the constant mode of an open call ('r' when none is given), None if unknown."""
    mode: ast.expr | None = node.args[position] if len(node.args) > position else None
    for keyword in node.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    if mode is None:
        return "r"
    return mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else None


def writes(path: Path) -> Iterator[tuple[str, int]]:
    """Yield (what, line) for every call in a file that may create, change or remove a file."""
    calls = [
        n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Call)
    ]
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        called = _called(node)
        head, _, tail = called.rpartition(".")
        if called in {"open", "io.open", "os.fdopen"}:
            mode = _mode(node, 1)
            if mode is None or set(mode) & set("wax+"):
                yield f"{called}(mode {mode or '?'})", node.lineno
        elif called == "os.open":
            flags = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            if flags & _WRITE_FLAGS:
                yield called, node.lineno
        elif head == "os" and tail in _OS_WRITES:
            yield called, node.lineno
        elif head in _READ_ONLY:
            if tail not in _READ_ONLY[head]:
                yield called, node.lineno
        elif tail == "atomic_write":  # the store's primitive, called with a path of one's own
            yield called, node.lineno
        elif head and head != "os" and tail in _PATH_WRITES:
            yield f".{tail}()", node.lineno
        elif head and tail in {"rename", "replace"} and len(node.args) == 1 and not node.keywords:
            yield f".{tail}()", node.lineno  # Path.replace(target); str.replace takes two
        elif head and tail == "open":  # Path.open(mode); Engram.open(start) is no file
            mode = _mode(node, 0)
            if mode is not None and set(mode) & set("wax+"):
                yield f".open(mode {mode})", node.lineno


# -- the checker --------------------------------------------------------------------------------


def violations(
    package: Path, layers: LayerMap, allowed_writes: Mapping[str, str] = ALLOWED_WRITES
) -> list[str]:
    """Return every breach of the layer map in ``package``, one line each (none: [])."""
    found = modules(package)
    known = set(found)
    top = package.name
    problems: list[str] = []
    placed = {name: layers.place(name) for name in found}
    problems += [f"{name}: not placed in docs/layers.toml" for name, g in placed.items() if not g]
    for name, path in found.items():
        group = placed[name]
        if group is None:
            continue
        allowed = layers.groups[group].imports | {group}
        for imported, line in imports(path, package, known):
            where = f"{name}:{line}"
            first = imported.split(".")[0]
            if first != top:
                homes = layers.third_party.get(first)
                if homes is not None and group not in homes:
                    problems.append(f"{where}: {first} belongs to {sorted(homes)}, not {group}")
                continue
            target = _owner(imported, known)
            if target is None:
                problems.append(f"{where}: imports {imported}, no module of {top}")
                continue
            other = placed[target]
            if target in layers.reexports.get(name, ()):
                continue  # the package's front door hands out what it names (docs/layers.toml)
            if other is not None and other not in allowed:
                problems.append(
                    f"{where}: {group} imports {target} ({other}); "
                    f"it may import only {sorted(allowed)}"
                )
        problems += _write_breaches(name, group, path, allowed_writes)
    return problems


def _write_breaches(name: str, group: str, path: Path, allowed: Mapping[str, str]) -> list[str]:
    if group == "store" or any(matches(key.removesuffix(".*"), name) for key in allowed):
        return []
    return [
        f"{name}:{line}: {what} writes outside engram/store (only the store writes .engram/)"
        for what, line in writes(path)
    ]


# -- the real package ---------------------------------------------------------------------------


def test_the_map_places_every_module_and_every_import_follows_it() -> None:
    assert violations(PACKAGE, load_map()) == []


def test_every_name_in_the_map_is_a_module_of_engram() -> None:
    layers, known = load_map(), set(modules(PACKAGE))
    for group in layers.groups.values():
        assert group.modules <= known, f"{group.name}: {sorted(group.modules - known)} are gone"
        for pattern in group.patterns:
            assert any(matches(pattern, name) for name in known), f"{pattern}.* matches nothing"


def test_every_allowed_writer_still_writes() -> None:
    found = modules(PACKAGE)
    for key, why in ALLOWED_WRITES.items():
        assert why, f"{key}: say why it may write"
        writers = [n for n, p in found.items() if matches(key.removesuffix(".*"), n)]
        assert any(next(writes(found[n]), None) for n in writers), f"{key} writes nothing now"


def test_the_checker_reports_each_planted_violation(tmp_path: Path) -> None:
    package = tmp_path / "engram"
    files = {
        "__init__.py": "",
        "agents/__init__.py": "",
        "errors.py": "",
        "service.py": "from engram.store import jsonl\n",
        "store/__init__.py": "",
        "store/jsonl.py": "from engram.errors import *\nfrom engram import service\n",
        "index/__init__.py": "",
        "index/db.py": "from engram.store.jsonl import MemoryStore\n",
        "agents/briefing.py": "from pathlib import Path\nPath('x').write_text('')\n",
        "agents/check.py": "import typer\nimport dulwich.repo\n",
        "cli.py": "import typer\nfrom engram.service import Engram\n",
        "mcp_server.py": "from .cli import app\n",
        "tui/__init__.py": "import importlib\nimportlib.import_module('engram.daemon')\n",
        "daemon.py": "",
        "stray.py": "",
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    found = violations(package, load_map(), allowed_writes={})
    expected = [
        "engram.stray: not placed",
        "engram.store.jsonl:2: store imports engram.service (service)",
        "engram.index.db:1: index imports engram.store.jsonl (store)",
        "engram.mcp_server:1: mcp_server imports engram.cli (cli)",
        "engram.tui:2: tui imports engram.daemon (daemon)",
        "engram.agents.check:1: typer belongs to ['cli'], not agents",
        "engram.agents.check:2: dulwich belongs to ['indexer', 'sync'], not agents",
        "engram.agents.briefing:2: .write_text() writes outside engram/store",
    ]
    for message in expected:
        assert any(line.startswith(message) for line in found), (message, found)
    assert len(found) == len(expected), found  # the clean modules report nothing


def test_the_front_door_may_hand_out_only_what_the_map_names(tmp_path: Path) -> None:
    package = tmp_path / "engram"
    files = {
        "__init__.py": (
            "def __getattr__(name):\n"
            "    from engram.service import Engram\n"
            "    from engram.cli import app\n"
        ),
        "service.py": "",
        "cli.py": "",
        "errors.py": "from engram.service import Engram\n",
    }
    package.mkdir()
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    found = violations(package, load_map(), allowed_writes={})
    assert [line.partition(";")[0] for line in found] == [
        "engram:3: leaves imports engram.cli (cli)",
        "engram.errors:1: leaves imports engram.service (service)",
    ]


def test_import_engram_is_cheap_and_hands_out_the_facade() -> None:
    code = (
        "import sys, engram\n"
        "assert 'engram.service' not in sys.modules, 'import engram loaded the facade'\n"
        "from engram import Engram\n"
        "import engram.service\n"
        "assert Engram is engram.service.Engram\n"
        "try:\n"
        "    engram.Nothing\n"
        "except AttributeError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "module 'engram' has no attribute 'Nothing'"


def test_writes_are_found_in_every_form(tmp_path: Path) -> None:
    source = tmp_path / "w.py"
    source.write_text(
        textwrap.dedent("""\
            import os, shutil, tempfile
            open(p, "a"); open(p); p.open("wb"); p.open()
            os.replace(a, b); os.open(p, os.O_WRONLY | os.O_CREAT); os.open(p, os.O_RDONLY)
            shutil.rmtree(p); shutil.which("git"); tempfile.mkstemp(); tempfile.gettempdir()
            p.replace(q); s.replace("a", "b"); d.replace(tzinfo=None); p.unlink()
            atomic_write(p, b""); store.atomic_write(p, b""); open(p, mode)
        """),
        encoding="utf-8",
    )
    assert [what for what, _ in writes(source)] == [
        "open(mode a)",
        ".open(mode wb)",
        "os.replace",
        "os.open",
        "shutil.rmtree",
        "tempfile.mkstemp",
        ".replace()",
        ".unlink()",
        "atomic_write",
        "store.atomic_write",
        "open(mode ?)",
    ]


# -- the exception tree -------------------------------------------------------------------------


def engram_errors(package: Path = PACKAGE) -> dict[str, str]:
    """Return every subclass of EngramError defined in the package, by name -> module."""
    classes: list[tuple[str, str, set[str]]] = []
    for name, path in modules(package).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases}
                classes.append((node.name, name, {b.rpartition(".")[2] for b in bases}))
    found = {"EngramError": "engram.errors"}
    grew = True
    while grew:
        grew = False
        for cls, module, bases in classes:
            if cls not in found and bases & set(found):
                found[cls], grew = module, True
    return found


def test_the_error_tree_draws_every_engram_error() -> None:
    import engram.errors

    doc = engram.errors.__doc__ or ""
    drawn = {
        match.group(1): match.group(2)
        for match in re.finditer(r"(?:── |^ {4})(\w+)\s+(?:\[([\w.]+)\])?", doc, re.MULTILINE)
    }
    found = engram_errors()
    assert set(drawn) == set(found), "errors.py draws other classes than engram/ defines"
    for cls, module in found.items():
        where = drawn[cls] and f"engram.{drawn[cls]}"
        assert (where or "engram.errors") == module, f"{cls} is drawn in {where}, not {module}"
    here = {cls for cls, module in found.items() if module == "engram.errors"}
    assert here == set(engram.errors.__all__)


# -- what a plain command imports ---------------------------------------------------------------

HEAVY = ("mcp", "anyio", "asyncio", "pydantic", "fastapi", "starlette", "uvicorn", "textual")
ADAPTERS = (
    "engram.mcp_server",
    "engram.http_api",
    "engram.daemon",
    "engram.tui",
    "engram.hooks",
)


def test_check_recall_and_context_import_no_adapter_nor_async_stack(project: Engram) -> None:
    (project.root / "a.py").write_text("x = 1\n", encoding="utf-8")
    project.remember(
        "Keep a.py small", "It is imported at start-up.", kind="pitfall", files=["a.py"]
    )
    code = textwrap.dedent("""\
        import json, sys
        import engram.__main__ as composition
        for argv in (["check", "--files", "a.py"], ["recall", "x"], ["context"]):
            sys.argv = ["engram", *argv]
            try:
                composition.main()
            except SystemExit as exit_:
                assert not exit_.code, (argv, exit_.code)
        print(json.dumps(sorted(sys.modules)), file=sys.stderr)
    """)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Keep a.py small" in done.stdout
    loaded = json.loads(done.stderr.splitlines()[-1])
    heavy = [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(ADAPTERS)]
    assert heavy == []


# -- house rules: sizes, circles, private names -------------------------------------------------

MODULE_LINES = 800  # a module past this is usually two things: split it where a reader would
FUNCTION_LINES = 80
# Each exception names its reason; a module or function that no longer needs one fails the test,
# so the list only shrinks.
LONG_MODULES: dict[str, str] = {
    "engram.sync.chunks": "to split (issue 29): chunk files and the manifest",
    "engram.model": "to split (issue 29): record rules, the bounded JSON reader, Go ids",
    "engram.daemon.server": "to split (issue 29): the server and its methods",
}
# Past 1000 lines even an exception does not hold.
OVER_1000: frozenset[str] = frozenset()
LONG_FUNCTIONS: dict[str, str] = {
    "engram.formats.goimport:convert_go": "to split (issue 29): one Go document's parts in turn",
    "engram.formats.convert:convert_mcp_memory": "to split (issue 29): entities, then relations",
}
# Import circles at run time (imports inside functions count, TYPE_CHECKING ones do not), each
# as its sorted members; the list only shrinks.
KNOWN_CIRCLES: dict[tuple[str, ...], str] = {}
# A private name (_x) imported from another module: importer -> that module; the list only
# shrinks.
KNOWN_PRIVATE_IMPORTS: dict[str, str] = {}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Return the ids of the nodes under ``if TYPE_CHECKING:`` (imports that never run)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", "")
            if name == "TYPE_CHECKING":
                for child in node.body:
                    inside |= {id(sub) for sub in ast.walk(child)}
    return inside


def runtime_graph(package: Path) -> dict[str, set[str]]:
    """Return, for every module, the modules of the package it imports when it runs."""
    found = modules(package)
    known = set(found)
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_nodes(tree)
        own = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = own.split(".")[: len(own.split(".")) - node.level + 1]
                    base = ".".join([*parts, node.module] if node.module else parts)
                targets = [f"{base}.{alias.name}" for alias in node.names] or [base]
            for target in targets:
                owner = _owner(target, known)
                if owner is not None and owner != name:
                    graph[name].add(owner)
    return graph


def circles(graph: Mapping[str, set[str]]) -> list[tuple[str, ...]]:
    """Return the import circles of a graph: its strongly connected parts of two or more."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(start: str) -> None:  # Tarjan's, with an explicit stack (no recursion limit)
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(tuple(sorted(part)))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(found)


def private_imports(package: Path) -> dict[str, set[str]]:
    """Return, per module, the other modules it imports a private ``_name`` from."""
    found = modules(package)
    known = set(found)
    out: dict[str, set[str]] = {}
    for name, path in found.items():
        own = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                parts = own.split(".")[: len(own.split(".")) - node.level + 1]
                base = ".".join([*parts, node.module] if node.module else parts)
            source = _owner(base, known)
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    continue  # a module, not a name in one
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and source is not None and source != name:
                    out.setdefault(name, set()).add(source)
    return out


def oversized(package: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Return the modules over MODULE_LINES and the functions over FUNCTION_LINES."""
    long_modules: dict[str, int] = {}
    long_functions: dict[str, int] = {}
    for name, path in modules(package).items():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MODULE_LINES:
            long_modules[name] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES:
                    long_functions[f"{name}:{node.name}"] = length
    return long_modules, long_functions


def house_breaches(
    package: Path,
    *,
    long_modules: Mapping[str, str],
    long_functions: Mapping[str, str],
    known_circles: Mapping[tuple[str, ...], str],
    known_private: Mapping[str, str],
) -> list[str]:
    """Return every breach of the house rules in ``package``, and every exception now unused."""
    problems: list[str] = []
    modules_over, functions_over = oversized(package)
    for name, lines in modules_over.items():
        if name not in long_modules:
            problems.append(f"{name}: {lines} lines, over {MODULE_LINES}: split it")
        elif lines > 1000 and name not in OVER_1000:
            problems.append(f"{name}: {lines} lines, over 1000 even with an exception")
    for name, lines in functions_over.items():
        if name not in long_functions:
            problems.append(f"{name}: a function of {lines} lines, over {FUNCTION_LINES}")
    found = circles(runtime_graph(package))
    problems += [f"import circle: {' <-> '.join(c)}" for c in found if c not in known_circles]
    for importer, sources in sorted(private_imports(package).items()):
        for source in sorted(sources):
            if known_private.get(importer) != source:
                problems.append(f"{importer}: imports a private name from {source}")
    unused = [name for name in long_modules if name not in modules_over]
    unused += [name for name in long_functions if name not in functions_over]
    unused += [" <-> ".join(c) for c in known_circles if c not in found]
    privates = private_imports(package)
    unused += [f"{i} from {s}" for i, s in known_private.items() if s not in privates.get(i, ())]
    problems += [f"{name}: an exception no longer needed: remove it" for name in unused]
    return problems


def test_modules_and_functions_stay_short_with_no_circle_and_no_private_import() -> None:
    found = house_breaches(
        PACKAGE,
        long_modules=LONG_MODULES,
        long_functions=LONG_FUNCTIONS,
        known_circles=KNOWN_CIRCLES,
        known_private=KNOWN_PRIVATE_IMPORTS,
    )
    assert found == []
    assert all(LONG_MODULES.values()) and all(LONG_FUNCTIONS.values())


def test_the_house_rules_report_each_planted_breach(tmp_path: Path) -> None:
    package = tmp_path / "engram"
    body = "\n".join(f"x{i} = {i}" for i in range(MODULE_LINES + 1))
    function = "def long():\n" + "".join(f"    y{i} = {i}\n" for i in range(FUNCTION_LINES))
    files = {
        "__init__.py": "",
        "big.py": body + "\n",
        "funcs.py": function,
        "a.py": "def f():\n    from engram import b\n",
        "b.py": "from engram.a import f\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from engram import d\n",
        "d.py": "import engram.c\n",
        "pub.py": "from engram.a import _hidden\nfrom . import _own\n",
        "_own.py": "",
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    found = house_breaches(
        package,
        long_modules={"engram.gone": "split long ago"},
        long_functions={},
        known_circles={},
        known_private={},
    )
    assert found == [
        f"engram.big: {MODULE_LINES + 1} lines, over {MODULE_LINES}: split it",
        f"engram.funcs:long: a function of {FUNCTION_LINES + 1} lines, over {FUNCTION_LINES}",
        "import circle: engram.a <-> engram.b",  # inside a function counts; TYPE_CHECKING not
        "engram.pub: imports a private name from engram.a",  # a private module is its own
        "engram.gone: an exception no longer needed: remove it",
    ]


def test_code_tests_and_docs_cite_only_what_the_repository_holds() -> None:
    outside = re.compile(r"DESIGN(?:\.md)?\s*(?:§|section)|STYLE\.md|REFERENCE\.md|\.\./shared/")
    places = [*PACKAGE.rglob("*.py"), *(ROOT / "tests").glob("*.py"), *(ROOT / "docs").glob("*")]
    places += [ROOT / "README.md", *(ROOT / "benchmarks").rglob("*.py")]
    cited = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in places
        if path.is_file()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if outside.search(line)
    ]
    assert cited == []  # a clone's reader can open docs/architecture.md, not a file beside it


# -- tests sit where a reader looks for them --------------------------------------------------

# The test files that are about the whole house, not one package: they stay at the top.
HOUSE_TESTS = {
    "test_architecture": "the layers and house rules of every module",
    "test_packaging": "the wheel and sdist built from the checkout",
    "test_examples": "the example store in examples/",
    "test_library": "examples/library.py run as a user runs it",
}
TEST_SUPPORT = {"helpers", "fixtures", "__pycache__"}


def misplaced_tests(tests: Path, package: Path) -> list[str]:
    """Test files outside a folder named after the engram package (or module) they test.

    ``leaves/`` holds the tests of the leaf modules (records, settings, JSONC: the bottom layer
    of docs/layers.toml), which are one module each.
    """
    found = []
    for path in sorted(tests.glob("test_*.py")):
        if path.stem not in HOUSE_TESTS:
            found.append(f"{path.name}: at the top of tests/, not in a package's folder")
    for folder in sorted(p for p in tests.iterdir() if p.is_dir()):
        if folder.name in TEST_SUPPORT:
            continue
        named = package / folder.name
        if folder.name != "leaves" and not (named.is_dir() or named.with_suffix(".py").is_file()):
            found.append(f"{folder.name}/: engram has no package or module of that name")
        elif not (folder / "__init__.py").is_file():
            found.append(f"{folder.name}/: no __init__.py (test modules would clash by name)")
    return found


def test_tests_sit_in_the_folder_of_the_package_they_test() -> None:
    assert misplaced_tests(ROOT / "tests", PACKAGE) == []


def test_a_misplaced_test_file_is_reported(tmp_path: Path) -> None:
    tests, package = tmp_path / "tests", tmp_path / "engram"
    (package / "store").mkdir(parents=True)
    (tests / "store").mkdir(parents=True)
    (tests / "store" / "__init__.py").write_text("")
    (tests / "nowhere").mkdir()
    (tests / "nowhere" / "__init__.py").write_text("")
    (tests / "test_loose.py").write_text("")
    (tests / "test_architecture.py").write_text("")
    assert misplaced_tests(tests, package) == [
        "test_loose.py: at the top of tests/, not in a package's folder",
        "nowhere/: engram has no package or module of that name",
    ]
