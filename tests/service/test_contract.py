"""One declaration per operation: the MCP tool table, OpenAPI, --help and the README agree with it.

engram/operations declares each operation once; these tests read every adapter's published
surface (the tool list a real MCP client sees, the OpenAPI document, typer's --help, the README's
tables) and hold it to the declaration, so a parameter or a description edited in one place
shows up in all of them, and one edited anywhere else is caught.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from engram.operations import OPERATIONS, Operation
from engram.service import Engram
from tests.helpers.places import ROOT

README = ROOT / "README.md"


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from engram.http_api import create_app

    root = tmp_path_factory.mktemp("contract") / "repo"
    root.mkdir()
    Engram.init(root, "contract")[0].close()
    document: dict[str, Any] = create_app(root).openapi()
    return document


def _routes(openapi: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, spec)
        for path, methods in openapi["paths"].items()
        for method, spec in methods.items()
    ]


def test_mcp_tools_are_the_declarations() -> None:
    from engram.mcp_server import select_tools

    tools = select_tools("all")
    native = [op for op in OPERATIONS.values() if not op.only or "mcp" in op.only]
    assert {op.name for op in native} <= set(tools)
    for op in native:
        tool = tools[op.name]
        assert tool.description == op.description, op.name
        schema = tool.input_schema()
        assert list(schema["properties"]) == [p.name for p in op.params_for("mcp")], op.name
        for param in op.params_for("mcp"):
            assert schema["properties"][param.name]["description"] == param.help
        assert (tool.read_only, tool.destructive, tool.idempotent, tool.profile) == (
            op.read_only,
            op.destructive,
            op.idempotent,
            op.profile,
        ), op.name


def test_openapi_summaries_are_the_declarations(openapi: dict[str, Any]) -> None:
    marked = [
        (method, path, spec)
        for method, path, spec in _routes(openapi)
        if "x-engram-operation" in spec
    ]
    assert len(marked) >= 20, "routes lost their operations"
    for method, path, spec in marked:
        op: Operation = OPERATIONS[spec["x-engram-operation"]]
        assert spec["summary"] == op.summary, (method, path)
    named = {spec["x-engram-operation"] for _, _, spec in marked}
    assert {"remember", "recall", "get", "update", "forget", "check", "context"} <= named


def test_openapi_query_parameters_carry_the_declared_help(openapi: dict[str, Any]) -> None:
    from engram.operations.memory import RECALL

    for path in ("/search", "/memories"):
        params = {p["name"]: p for p in openapi["paths"][path]["get"]["parameters"]}
        for param in RECALL.filters:
            assert params[param.wire]["description"] == param.help, (path, param.name)


def test_help_shows_the_declared_summary() -> None:
    from typer.testing import CliRunner

    from engram.__main__ import app

    runner = CliRunner()
    for op in OPERATIONS.values():
        if not op.command or (op.only and "cli" not in op.only):
            continue
        out = runner.invoke(app, [*op.command.split(), "--help"], terminal_width=200).stdout
        assert " ".join(op.summary.split()[:6]) in " ".join(out.split()), op.command
        # the options of commands built from a declaration: tests/cli/test_cli.py


def test_readme_names_every_recall_filter_and_every_tool() -> None:
    from engram.operations.memory import RECALL_FILTERS

    text = README.read_text(encoding="utf-8")
    commands = text.split("## Commands", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in commands.splitlines() if line.startswith("| `recall`"))
    from engram.cli.options import option_names

    for param in RECALL_FILTERS:
        assert option_names(param)[0] in row, param.wire
    tools = text.split("## MCP tools", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(\w+)`", tools, flags=re.MULTILINE))
    for op in OPERATIONS.values():
        if not op.only or "mcp" in op.only:
            assert op.name in listed, f"README's MCP tools table lacks {op.name}"


# The facade methods of operations whose name is not the method's (sync with status=true is
# the facade's sync_status, so its result is either one).
FACADE_METHODS = {
    "import": ("import_",),
    "insights_delete": ("delete_insight",),
    "merge_projects": ("projects_merge",),
    "sync": ("sync", "sync_status"),
}


def _facade_result(name: str) -> str:
    results = []
    for method_name in FACADE_METHODS.get(name, (name,)):
        method = getattr(Engram, method_name, None)
        assert method is not None, f"operation {name} has no facade method {method_name}"
        results.append(str(method.__annotations__["return"]))
    return " | ".join(results)


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_the_facade_returns_the_declared_result(name: str) -> None:
    op = OPERATIONS[name]
    assert op.result, f"operation {name} declares no result type"
    assert _facade_result(name) == op.result


def test_no_facade_operation_returns_an_untyped_mapping() -> None:
    untyped = re.compile(r"\bdict\[str, Any\]")
    loose = {
        name: str(member.__annotations__.get("return"))
        for name, member in vars(Engram).items()
        if callable(member) and not name.startswith("_")
        if untyped.search(str(getattr(member, "__annotations__", {}).get("return", "")))
    }
    assert not loose, f"facade methods still return dict[str, Any]: {loose}"
