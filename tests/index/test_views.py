"""Snippets are plain text: recall shows the words of a memory, not its markdown syntax.

Session summaries (``## Goal`` … ``## Relevant files`` with list items and code spans) are the
memories whose raw markdown used to fill recall's snippets. The snippet is plain on every
adapter (the service's views, a real MCP session, the CLI as a process); the stored content and
``get``'s full content keep every mark.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.index.query import Hit
from engram.operations import views
from engram.operations.views import HitView, hit_views, plain, snippet
from engram.service import Engram
from tests.conftest import run_cli
from tests.mcp_server.test_mcp import connect, run

MARKS = ("##", "**", "- ", "`", "](", "| ", "```", "> ")


def no_marks(text: str) -> bool:
    return not any(mark in text for mark in MARKS)


@pytest.mark.parametrize(
    ("markdown", "text"),
    [
        ("## Goal\nFix rounding", "Goal: Fix rounding"),
        ("# Title #\n\ntext", "Title: text"),
        ("Setext\n======\nbody", "Setext: body"),
        ("Use **integers** and __cents__, *not* _floats_", "Use integers and cents, not floats"),
        ("snake_case_names and 2*3*4 stay", "snake_case_names and 2*3*4 stay"),
        ("- one\n* two\n+ three\n1. four\n2) five", "one two three four five"),
        ("- [ ] open\n- [x] done", "open done"),
        ("See [the ADR](docs/adr/7.md) and ![a chart](c.png)", "See the ADR and a chart"),
        ("See [the ADR][adr7] or <https://example.com/x>", "See the ADR or https://example.com/x"),
        ("run `make test` first", "run make test first"),
        ("```python\nx = 1\n```\nafter", "x = 1 after"),
        ("> quoted\n>> deeper", "quoted deeper"),
        ("| a | b |\n|---|:-:|\n| 1 | 2 |", "a, b 1, 2"),
        ("above\n\n---\n\nbelow", "above below"),
        ("~~old~~ new", "old new"),
        (r"a \*literal\* star", "a *literal* star"),
        ("Goal? Done.\n## Why?\nbecause", "Goal? Done. Why? because"),
    ],
)
def test_plain_keeps_the_words_and_drops_the_syntax(markdown: str, text: str) -> None:
    assert " ".join(plain(markdown).split()) == text


def test_snippet_is_clipped_plain_text_on_one_line() -> None:
    long = "## Goal\n" + "\n".join(["- **word**"] * 200)
    cut = snippet(long, 60)
    assert len(cut) == 60 and cut.endswith("…") and no_marks(cut)
    assert cut.startswith("Goal: word word")
    assert snippet("## Goal\nshort", 60) == "Goal: short"
    assert snippet("", 60) == ""


def _every_inline_rule(line: str) -> str:
    """What ``_inline`` does to a line when it runs each of its rules (no shortcut)."""
    line = views._ESCAPE.sub(lambda m: chr(views._HIDDEN + ord(m.group(1))), line)
    line = views._CODE.sub(lambda m: m.group(2).strip(), line)
    for rule, keep in (
        (views._IMAGE, r"\1"),
        (views._LINK, r"\1"),
        (views._AUTOLINK, r"\1"),
        (views._STRONG, r"\2"),
        (views._STRIKE, r"\1"),
        (views._EMPHASIS, r"\2"),
    ):
        line = rule.sub(keep, line)
    return views._UNHIDE.sub(lambda m: chr(ord(m.group(0)) - views._HIDDEN), line)


PIECES = (
    *"ab 1.#*_`[]()!<>~\\|-:\n\ue000\ue041é",
    *("**", "__", "~~", "``", "](", "![", "<https://x.y>", "\\*", "\\~", " word "),
    *("**b**", "_e_", "~~s~~", "`c`", "[t](u)", "![i](j)"),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=16).map("".join))
def test_lines_without_inline_marks_are_left_as_they_are(text: str) -> None:
    # _inline skips its rules on a line holding none of their characters: no answer changes.
    for line in text.splitlines() or [text]:
        assert views._inline(line) == _every_inline_rule(line)


def test_a_hit_view_without_matched_fields_shows_the_same_compact_hit(project: Engram) -> None:
    project.remember("Pin the stripe api version", "stripe pins it", kind="decision")
    hit = project.recall("stripe")[0]
    assert hit.matched
    lean = HitView.of(hit, matched=False)
    assert lean.matched == []
    assert lean.compact(matched=False) == HitView.of(hit).compact(matched=False)
    assert "matched" in HitView.of(hit).compact()


WORDS = ("Stripe", "api", "version", "pins", "webhook", "retries", "ß", "ÄPI", "src/pay.py", " ")


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "title": st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join),
            "tags": st.lists(st.sampled_from(WORDS), max_size=3),
            "files": st.lists(st.sampled_from(WORDS), max_size=3),
            "content": st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join),
        },
    ),
    st.lists(
        st.sampled_from(("stripe", "api", "versions", "webhooks", "pins", "pay", "ss")), max_size=4
    ),
)
def test_matched_names_each_field_a_query_word_or_its_stem_is_in(
    record: dict[str, object], tokens: list[str]
) -> None:
    def rule(name: str) -> bool:  # the rule as written: stems of words over four characters
        value = record.get(name, [] if name in ("tags", "files") else "")
        text = (" ".join(value) if isinstance(value, list) else str(value)).lower()
        stems = [t[: max(4, len(t) - 3)] if len(t) > 4 else t for t in tokens]
        return any(stem in text for stem in stems)

    hit = Hit(id="m1", score=1.0, bm25=1.0, record=record, tokens=tuple(tokens))
    assert hit.matched == [name for name in ("title", "tags", "files", "content") if rule(name)]


def _summaries(project: Engram) -> str:
    saved = project.session_summary(
        goal="Fix rounding in money.py",
        discoveries="- Floats drift; see [ADR 7](docs/adr/7.md)\n- `Decimal` is slow",
        accomplished="- Switched to **integer cents**",
        relevant_files="src/money.py, src/tax.py",
        session_id="s-plain",
    )
    content = str(saved.record["content"])
    assert "## Goal" in content and "- `src/money.py`" in content  # stored as written
    return str(saved.record["id"])


def test_recall_snippets_of_session_summaries_are_plain_on_every_adapter(
    project: Engram,
) -> None:
    rid = _summaries(project)
    stored = project.get(rid)["content"]

    hits = project.recall("rounding", kinds="session")
    [view] = hit_views(hits)
    assert view.snippet.startswith("Goal: Fix rounding in money.py Discoveries: Floats drift")
    assert "see ADR 7" in view.snippet and no_marks(view.snippet)
    assert no_marks(view.full()["snippet"])
    assert view.full()["memory"]["content"] == stored  # people and programs get it whole

    async def scenario() -> None:
        async with connect(project.root) as client:
            found = await client.ok("recall", {"query": "rounding"})
            [hit] = [h for h in found["hits"] if rid.startswith(h["id"])]
            assert hit["snippet"] == view.snippet
            full = await client.ok("get", {"id": rid})
            assert full["memory"]["content"] == stored  # get keeps every mark
            briefing = await client.ok("context", {"query": "rounding"})
            line = next(x for x in briefing["briefing"].splitlines() if "money.py" in x)
            assert "Goal: Fix rounding" in line and "Switched to integer" in line
            assert "##" not in line and "**" not in line

    run(scenario)
    shown = run_cli("-C", str(project.root), "recall", "rounding")
    out = shown.stdout.decode()
    assert shown.returncode == 0, shown.stderr
    snippet_line = next(line for line in out.splitlines() if "Goal: Fix rounding" in line)
    assert snippet_line.strip().startswith("Goal: Fix rounding in money.py") and no_marks(
        snippet_line
    )
    whole = run_cli("-C", str(project.root), "get", rid[:8]).stdout.decode()
    assert "## Goal" in whole and "- `src/money.py`" in whole


def test_http_recall_snippets_are_plain(project: Engram) -> None:
    from fastapi.testclient import TestClient

    from engram.http_api import create_app

    rid = _summaries(project)
    app = create_app(project.root)
    try:
        with TestClient(app, base_url="http://127.0.0.1") as client:
            response = client.get("/search", params={"q": "rounding"})
            assert response.status_code == 200, response.text
            found = response.json()
    finally:
        app.state.engram.close()
    [hit] = [h for h in found["hits"] if h["id"] == rid]
    assert hit["snippet"].startswith("Goal: Fix rounding") and no_marks(hit["snippet"])
    assert "## Goal" in hit["memory"]["content"]
