"""Passive capture: the learnings found in real-looking agent replies, exactly."""

from __future__ import annotations

import pytest

from engram.agents.capture import (
    MAX_LEARNINGS,
    MIN_CHARS,
    Learning,
    clean_markdown,
    extract_learnings,
    learning_title,
)

CLAUDE_CODE = """\
I've finished the migration. All 214 tests pass and `mypy --strict` is clean.

## Summary

- Moved the index schema into `engram/index/schema.sql`
- Added a migration for the `sessions` table
- Updated the README

## Key Learnings

1. **SQLite FTS5 needs escaping**: user queries containing `"` or `-` must be quoted with \
`fts_escape()` before `MATCH`, otherwise they raise `sqlite3.OperationalError`.
2. **Migrations run in order**: each one is a named function recorded in the \
`_migrations` table, so never rename an applied migration.
3. **Dulwich returns bytes**: refs and paths from `porcelain.status()` are `bytes`; decode \
with `os.fsdecode` rather than `.decode("utf-8")`.

## Next Steps

1. Benchmark the new index on a 50k-memory store.
2. Document the migration table in DESIGN.md.
"""

CODEX = """\
Implemented the lock timeout and added a regression test.

**Changes:**
- `engram/store/lock.py`: honour `ENGRAM_LOCK_TIMEOUT`
- `tests/test_concurrency.py`: race two writers

**Learnings:**
- The lock file must be opened with `O_CREAT` but never truncated,
  because a second process may already hold a byte-range lock on it.
- `fcntl.flock` is advisory only; every writer has to take it,
  including the `engram sync` merge path.
* Windows has no `fcntl` at all -- `msvcrt.locking` is the fallback and
  it locks bytes, not the file.

Let me know if you want me to also add a `--wait` flag.
"""

GEMINI_TWICE = """\
I will follow this template for my answer:

### Key Learnings:
1. <first learning goes here, one sentence>
2. <second learning goes here, one sentence>

Now the actual work. I read `config.py` and `service.py` and fixed the crash.

### Key Learnings:
1. The config loader treats an empty `config.yaml` as `None`, so callers must default to `{}`.
2. Service methods must never print; adapters own all output.
"""

FENCED = """\
## Key Learnings

- Prompts that ask for a summary template get the template echoed back verbatim.
- A template shown inside a code block must never be parsed as the real section.

Here is the template I added to `AGENTS.md`:

```markdown
## Key Learnings

1. <a learning, one sentence, at least twenty characters>
2. <another learning, also long enough to count>
```

~~~
**Key Learnings:**
- this fake learning sits in a tilde fence and must be ignored
~~~
"""

NESTED = """\
### Learnings

- Two gotchas with the tantivy backend:
  - the writer must be committed before a searcher sees new documents
  - `reload()` on the reader is needed after each commit
- Ranking weights live in `ranking.py`:
    * BM25 is computed by the backend.
    * Recency boost is ours.
- Plain item with no children, long enough to keep.
"""

SHORT = """\
Key Learnings:
- Too short.
- ok
- `x`
- This one is long enough to be kept as a learning.
- [ ] A checkbox item is cleaned of its box and kept.
"""

NO_SECTION = """\
## Summary

Fixed the flaky test by seeding the random generator.

## Next Steps

- Watch CI for a week.
- Remove the retry decorator once it is stable.
"""

MENTIONS = """\
Some learnings from this were surprising, so I wrote them down below.

- This list follows a sentence, not a heading, so it is not captured.
- Neither is this second item about learnings in general.

Key learnings: the store is canonical and the index is derived.
"""


def titles(learnings: list[Learning]) -> list[str]:
    return [learning.title for learning in learnings]


def test_claude_code_summary() -> None:
    assert extract_learnings(CLAUDE_CODE) == [
        Learning(
            'SQLite FTS5 needs escaping: user queries containing " or - must be quoted with '
            "fts_escape() before MATCH, otherwise…",
            'SQLite FTS5 needs escaping: user queries containing " or - must be quoted with '
            "fts_escape() before MATCH, otherwise they raise sqlite3.OperationalError.",
        ),
        Learning(
            "Migrations run in order: each one is a named function recorded in the _migrations "
            "table, so never rename an applied…",
            "Migrations run in order: each one is a named function recorded in the _migrations "
            "table, so never rename an applied migration.",
        ),
        Learning(
            "Dulwich returns bytes: refs and paths from porcelain.status() are bytes; decode "
            "with os.fsdecode rather than…",
            "Dulwich returns bytes: refs and paths from porcelain.status() are bytes; decode "
            'with os.fsdecode rather than .decode("utf-8").',
        ),
    ]


def test_codex_bold_label_with_continuation_lines() -> None:
    assert extract_learnings(CODEX) == [
        Learning(
            "The lock file must be opened with O_CREAT but never truncated, because a second "
            "process may already hold a byte-range…",
            "The lock file must be opened with O_CREAT but never truncated, because a second "
            "process may already hold a byte-range lock on it.",
        ),
        Learning(
            "fcntl.flock is advisory only; every writer has to take it, including the engram "
            "sync merge path",
            "fcntl.flock is advisory only; every writer has to take it, including the engram "
            "sync merge path.",
        ),
        Learning(
            "Windows has no fcntl at all -- msvcrt.locking is the fallback and it locks bytes, "
            "not the file",
            "Windows has no fcntl at all -- msvcrt.locking is the fallback and it locks bytes, "
            "not the file.",
        ),
    ]


def test_the_last_section_wins() -> None:
    assert extract_learnings(GEMINI_TWICE) == [
        Learning(
            "The config loader treats an empty config.yaml as None, so callers must default to {}",
            "The config loader treats an empty config.yaml as None, so callers must default to {}.",
        ),
        Learning(
            "Service methods must never print; adapters own all output",
            "Service methods must never print; adapters own all output.",
        ),
    ]


def test_fenced_sections_are_ignored() -> None:
    assert titles(extract_learnings(FENCED)) == [
        "Prompts that ask for a summary template get the template echoed back verbatim",
        "A template shown inside a code block must never be parsed as the real section",
    ]


def test_a_fenced_section_alone_is_no_section() -> None:
    assert extract_learnings("Template:\n\n```\n## Key Learnings\n- " + "x" * 40 + "\n```\n") == []


def test_nested_bullets_fold_into_their_parent() -> None:
    assert [learning.content for learning in extract_learnings(NESTED)] == [
        "Two gotchas with the tantivy backend: the writer must be committed before a searcher "
        "sees new documents; reload() on the reader is needed after each commit",
        "Ranking weights live in ranking.py: BM25 is computed by the backend. Recency boost is "
        "ours.",
        "Plain item with no children, long enough to keep.",
    ]
    assert (
        titles(extract_learnings(NESTED))[1]
        == "Ranking weights live in ranking.py: BM25 is computed by the backend"
    )


def test_short_items_are_dropped() -> None:
    assert extract_learnings(SHORT) == [
        Learning(
            "This one is long enough to be kept as a learning",
            "This one is long enough to be kept as a learning.",
        ),
        Learning(
            "A checkbox item is cleaned of its box and kept",
            "A checkbox item is cleaned of its box and kept.",
        ),
    ]
    assert len(extract_learnings(SHORT, min_chars=1)) == 5
    assert MIN_CHARS == 20


def test_windows_line_endings_and_tabs() -> None:
    text = CODEX.replace("\n", "\r\n").replace("  because", "\tbecause")
    assert extract_learnings(text) == extract_learnings(CODEX)
    assert extract_learnings("## Learnings\r\n\r\n-\tTabs after the marker are fine too.\r\n") == [
        Learning("Tabs after the marker are fine too", "Tabs after the marker are fine too.")
    ]


def test_no_section_gives_nothing() -> None:
    assert extract_learnings(NO_SECTION) == []
    assert extract_learnings("") == []


def test_a_sentence_mentioning_learnings_is_not_a_heading() -> None:
    assert extract_learnings(MENTIONS) == []


@pytest.mark.parametrize(
    "heading",
    [
        "## Key Learnings",
        "### Learnings:",
        "# KEY LEARNINGS #",
        "**Key Learnings:**",
        "**Key Learnings**:",
        "__Learnings__",
        "Key Learnings:",
        "learnings",
        "## 🔑 Key Learnings",
        "## 3. Learnings",
        "### 💡 **Key learnings** 💡",
        "4) Key Learnings:",
    ],
)
def test_heading_forms(heading: str) -> None:
    text = f"Intro.\n\n{heading}\n\n- The first learning is long enough.\n\nThe end.\n"
    assert titles(extract_learnings(text)) == ["The first learning is long enough"]


@pytest.mark.parametrize(
    "heading",
    [
        "Some learnings from this were:",
        "- Key Learnings:",
        "## Key Learnings from the refactor of the store",
        "**Learnings:** none",
        "    Key Learnings:",
    ],
)
def test_not_headings(heading: str) -> None:
    text = f"{heading}\n- The first learning is long enough.\n"
    assert extract_learnings(text) == []


@pytest.mark.parametrize(
    "ending",
    [
        "## Files changed",
        "# Done",
        "**Next steps:**",
        "__Open questions__",
        "---",
        "* * *",
        "\nA plain paragraph after a blank line.",
        "\n```\nfenced code after a blank line\n```",
    ],
)
def test_section_endings(ending: str) -> None:
    text = (
        f"## Key Learnings\n- The first learning is long enough.\n{ending}\n"
        "- This item is after the end of the section.\n"
    )
    assert titles(extract_learnings(text)) == ["The first learning is long enough"]


def test_numbering_styles_and_loose_lists() -> None:
    text = (
        "## Learnings\n\nA few things stood out:\n\n"
        "1. First numbered with a dot, long enough.\n\n"
        "2) Second numbered with a parenthesis.\n\n"
        "   It has a second paragraph, indented.\n\n"
        "(3) Third numbered in parentheses, long enough.\n"
        "+ A plus bullet, long enough to be kept.\n"
        "• A bullet dot, long enough to be kept.\n"
    )
    assert [learning.content for learning in extract_learnings(text)] == [
        "First numbered with a dot, long enough.",
        "Second numbered with a parenthesis. It has a second paragraph, indented.",
        "Third numbered in parentheses, long enough.",
        "A plus bullet, long enough to be kept.",
        "A bullet dot, long enough to be kept.",
    ]


def test_sub_headings_of_a_lower_level_group_items() -> None:
    text = (
        "## Key Learnings\n### Testing\n- Real git repos beat mocks every time.\n"
        "### Design\n- The store is the only writer of canonical files.\n## Next\n- no\n"
    )
    assert titles(extract_learnings(text)) == [
        "Real git repos beat mocks every time",
        "The store is the only writer of canonical files",
    ]


def test_code_inside_an_item_is_not_content() -> None:
    text = (
        "## Key Learnings\n"
        "- Run the migrations before opening the index:\n"
        "  ```python\n  - not an item\n  store.migrate()\n  ```\n"
        "- Another learning that is long enough.\n"
    )
    assert [learning.content for learning in extract_learnings(text)] == [
        "Run the migrations before opening the index:",
        "Another learning that is long enough.",
    ]


def test_duplicates_keep_the_first() -> None:
    text = (
        "## Key Learnings\n- Always run `ruff format` before committing.\n"
        "- always run ruff   format before committing.\n"
        "- **Always** run ruff format before committing.\n"
        "- A different learning entirely here.\n"
    )
    assert [learning.content for learning in extract_learnings(text)] == [
        "Always run ruff format before committing.",
        "A different learning entirely here.",
    ]


def test_at_most_max_learnings() -> None:
    items = "".join(f"- Learning number {n} is long enough.\n" for n in range(MAX_LEARNINGS + 50))
    learnings = extract_learnings("## Key Learnings\n" + items)
    assert len(learnings) == MAX_LEARNINGS == 100
    assert learnings[-1].title == "Learning number 99 is long enough"


@pytest.mark.parametrize(
    ("markdown", "clean"),
    [
        (
            "**bold** and *italic* and _under_ and ~~struck~~",
            "bold and italic and under and struck",
        ),
        ("keep `__init__.py` and `*args` as code", "keep __init__.py and *args as code"),
        ("a [link](https://example.com/x_y) here", "a link here"),
        ("[Foo](https://en.wikipedia.org/wiki/Foo_(bar)) page", "Foo page"),
        ("a [reference][1] link", "a reference link"),
        ("[not a link] stays", "[not a link] stays"),
        ('an ![diagram](d.png "Title") image', "an image"),
        ("<kbd>Ctrl</kbd>+<kbd>C</kbd> <br/> stops it", "Ctrl+C stops it"),
        ("see <https://example.com> now", "see https://example.com now"),
        ("returns Vec<T> or Option<String>", "returns Vec<T> or Option<String>"),
        ('<DETAILS><Summary>Why</Summary> <a href="x">here</a></DETAILS>', "Why here"),
        ("snake_case_name and 2 * 3 * 4", "snake_case_name and 2 * 3 * 4"),
        (r"escaped \*stars\* stay", "escaped *stars* stay"),
        ("``code with ` tick``", "code with ` tick"),
        ("unmatched ` tick and **bold", "unmatched ` tick and **bold"),
        ("Größe, 日本語 и emoji 🚀 stay", "Größe, 日本語 и emoji 🚀 stay"),
        ("a <!-- hidden --> b", "a b"),
        ("spaces\t and\u00a0 tabs  ", "spaces and tabs"),
    ],
)
def test_clean_markdown(markdown: str, clean: str) -> None:
    assert clean_markdown(markdown) == clean


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("One sentence. Two sentences.", "One sentence"),
        ("Why? Because.", "Why?"),
        ("Use e.g. a lock here. Then more.", "Use e.g. a lock here"),
        ("Version 1.2.3 is broken... really. Yes.", "Version 1.2.3 is broken... really"),
        ("No terminator at all", "No terminator at all"),
        ("word " * 40, ("word " * 23).strip() + "…"),
        ("x" * 200, "x" * 119 + "…"),
    ],
)
def test_learning_title(text: str, title: str) -> None:
    assert learning_title(text) == title
    assert len(learning_title(text)) <= 120


def test_learning_title_limit() -> None:
    assert learning_title("alpha beta gamma delta", limit=12) == "alpha beta…"


@pytest.mark.parametrize(
    "line",
    [
        "*" * 3_000_000,
        "[" * 3_000_000,
        "![a](" * 600_000,
        "**a " * 750_000,
        "".join("`" * (n % 50 + 1) + "a" for n in range(200_000)),
        "<a " * 1_000_000,
        "_a " * 1_000_000,
        "<!--" * 750_000,
        "[a](b(c" * 500_000,
    ],
    ids=[
        "stars",
        "brackets",
        "images",
        "bold-openers",
        "backticks",
        "tags",
        "underscores",
        "comments",
        "links",
    ],
)
def test_huge_pathological_input_stays_linear(line: str) -> None:
    text = f"## Key Learnings\n- {line}\n- A normal learning after the huge one.\n"
    learnings = extract_learnings(text)
    assert learnings[-1] == Learning(
        "A normal learning after the huge one", "A normal learning after the huge one."
    )
    assert len(learnings) == 2
    assert len(learnings[0].title) <= 120


def test_huge_input_without_a_section() -> None:
    text = ("Some line about learnings and **bold** `code` [x](y)\n" * 100_000) + "#" * 1_000_000
    assert extract_learnings(text) == []


def test_a_bold_lead_in_line_gets_a_colon() -> None:
    text = (
        "## Key Learnings\n\n"
        "1. **Atomic writes**\n   Write to a temporary file, then rename it over the old one.\n"
        "2. **Testing**\n   - real git repos in tmp_path\n   - no mocks of dulwich\n"
        "3. **Already punctuated:**\n   nothing is added to this one.\n"
    )
    assert extract_learnings(text) == [
        Learning(
            "Atomic writes: Write to a temporary file, then rename it over the old one",
            "Atomic writes: Write to a temporary file, then rename it over the old one.",
        ),
        Learning(
            "Testing: real git repos in tmp_path; no mocks of dulwich",
            "Testing: real git repos in tmp_path; no mocks of dulwich",
        ),
        Learning(
            "Already punctuated: nothing is added to this one",
            "Already punctuated: nothing is added to this one.",
        ),
    ]


def test_setext_heading() -> None:
    text = "Key Learnings\n=============\n\n- A setext heading works like an ATX one.\n"
    assert titles(extract_learnings(text)) == ["A setext heading works like an ATX one"]


def test_an_empty_last_section_still_wins() -> None:
    text = (
        "## Key Learnings\n- An early learning that is long enough.\n\n"
        "## Key Learnings\n\nNothing new this time.\n"
    )
    assert extract_learnings(text) == []


@pytest.mark.parametrize(
    "line",
    [
        "* " * 1_500_000 + "x",
        "- " * 1_500_000 + "x",
        " " * 3_000_000 + "x",
        "**Key Learnings" + "*" * 3_000_000,
        "## " + "#" * 3_000_000 + " x",
        "```x" + "`" * 3_000_000,
    ],
    ids=["star-rule", "dash-rule", "spaces", "bold-heading", "hashes", "fence"],
)
def test_huge_lines_around_the_section(line: str) -> None:
    text = f"{line}\n\n## Key Learnings\n- A learning after a huge line.\n\n## Next\n{line}\n"
    assert titles(extract_learnings(text)) == ["A learning after a huge line"]
    nested = f"## Key Learnings\n- A learning before a huge line:\n  {line}\n"
    title = extract_learnings(nested)[0].title
    assert title.startswith("A learning before a huge line")
    assert len(title) <= 120
