"""The ADR indexer: golden records, folders, relations, statuses and robustness on any text."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.errors import InvalidInput
from engram.indexer.adr import DEFAULT_ADR_DIRS, AdrScan, Skipped, adr_dirs, scan_adrs
from engram.indexer.adrparse import MAX_CONTENT_BYTES, ParsedAdr, parse_adr
from engram.model import LINK_RELS, STATUSES
from tests.helpers.places import FIXTURES

FIXTURES = FIXTURES / "adr"
EXPECTED: dict[str, Any] = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
FOLDER: str = EXPECTED["folder"]
KNOWN = [f"{FOLDER}/{path.name}" for path in sorted(FIXTURES.glob("*.md"))]


def as_json(adr: ParsedAdr) -> dict[str, Any]:
    """Return a ParsedAdr as the JSON the golden file holds (tuples become lists)."""
    value: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(adr)))
    return value


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def parse(
    text: str, path: str = "docs/adr/0010-this.md", known: list[str] | None = None
) -> ParsedAdr:
    return parse_adr(path, text, known_paths=known or [])


# -- golden records -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED["adrs"]))
def test_golden_record(name: str) -> None:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    adr = parse_adr(f"{FOLDER}/{name}", text, known_paths=KNOWN)
    assert as_json(adr) == EXPECTED["adrs"][name]


@pytest.mark.parametrize(
    "name", sorted(name for name in EXPECTED["skipped"] if name != "0093-latin1.md")
)
def test_golden_skip_reason(name: str) -> None:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    with pytest.raises(InvalidInput) as caught:
        parse_adr(f"{FOLDER}/{name}", text, known_paths=KNOWN)
    assert caught.value.message == EXPECTED["skipped"][name]


def test_golden_scan(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES, tmp_path / FOLDER, ignore=shutil.ignore_patterns("*.json"))
    present = {
        "config/database.yml",
        "src/db/pool.py",
        "src/orders/events.py",
        "src/api/routes.py",
        "pyproject.toml",
        "engram/config.py",
        "docs/spec.md",
        "schemas/events/order.json",
    }
    for rel in present:
        write(tmp_path, rel, "x\n")

    scan = scan_adrs(tmp_path)

    assert scan.dirs == [FOLDER]
    assert [(item.path, item.reason) for item in scan.skipped] == [
        (f"{FOLDER}/{name}", reason) for name, reason in sorted(EXPECTED["skipped"].items())
    ]
    assert [adr.path for adr in scan.adrs] == [f"{FOLDER}/{name}" for name in EXPECTED["adrs"]]
    for adr in scan.adrs:
        expected = dict(EXPECTED["adrs"][adr.path.rsplit("/", 1)[1]])
        got = as_json(adr)
        # Files are kept only when they exist (a glob: when its folder does) …
        kept = [p for p in expected["files"] if p in present or p == "schemas/events/*.json"]
        kept += [p for p in expected["files"] if p == FOLDER]
        assert got["files"] == sorted(kept), adr.path
        # … and links only to ADRs that were read (0090 has broken front matter).
        assert got["links"] == [
            link
            for link in expected["links"]
            if not link[1].endswith("0090-broken-front-matter.md")
        ]
        for key in ("files", "links"):
            del got[key], expected[key]
        assert got == expected
    seen = {adr.path for adr in scan.adrs} | {item.path for item in scan.skipped}
    assert not seen & {f"{FOLDER}/{name}" for name in EXPECTED["ignored"]}


def test_golden_records_are_valid_memory_fields() -> None:
    for record in EXPECTED["adrs"].values():
        assert record["status"] in STATUSES
        assert {rel for rel, _ in record["links"]} <= set(LINK_RELS)
        assert "adr" in record["tags"]
        for target in [t for _, t in record["links"]] + record["superseded_by"]:
            assert target in KNOWN and target != record["path"]


# -- folders ------------------------------------------------------------------------------------


def test_default_folders_only_existing(tmp_path: Path) -> None:
    assert DEFAULT_ADR_DIRS == (
        "docs/adr",
        "docs/adrs",
        "docs/decisions",
        "doc/adr",
        "adr",
        "decisions",
    )
    assert adr_dirs(tmp_path) == []
    (tmp_path / "docs" / "decisions").mkdir(parents=True)
    (tmp_path / "adr").mkdir()
    (tmp_path / "decisions").write_text("a file, not a folder\n", encoding="utf-8")
    assert adr_dirs(tmp_path) == ["docs/decisions", "adr"]


def test_configured_folders_replace_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "docs" / "adr").mkdir(parents=True)
    (tmp_path / "architecture" / "records").mkdir(parents=True)
    assert adr_dirs(tmp_path, ["architecture/records/", "./missing"]) == ["architecture/records"]
    assert adr_dirs(tmp_path, "architecture/records") == ["architecture/records"]
    assert adr_dirs(tmp_path, []) == []


def test_adr_dir_file_adds_its_folder(tmp_path: Path) -> None:
    (tmp_path / "doc" / "architecture" / "decisions").mkdir(parents=True)
    (tmp_path / ".adr-dir").write_text("doc/architecture/decisions\n", encoding="utf-8")
    write(tmp_path, "doc/architecture/decisions/0001-x.md", "# 1. X\n\nAccepted\n")
    assert adr_dirs(tmp_path) == ["doc/architecture/decisions"]
    assert adr_dirs(tmp_path, []) == ["doc/architecture/decisions"]
    scan = scan_adrs(tmp_path)
    assert [adr.path for adr in scan.adrs] == ["doc/architecture/decisions/0001-x.md"]


def test_folders_outside_the_root_are_refused_and_reported(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    outside = tmp_path / "elsewhere"
    write(outside, "0001-secret.md", "# 1. Outside\n")
    root.mkdir()
    (root / "docs").mkdir()
    (root / "docs" / "adr").symlink_to(outside, target_is_directory=True)
    (root / ".adr-dir").write_text("../elsewhere\n", encoding="utf-8")

    assert adr_dirs(root) == []
    assert adr_dirs(root, ["/etc", "../elsewhere", str(outside)]) == []
    scan = scan_adrs(root)
    assert scan.adrs == [] and scan.dirs == []
    assert [(item.path, item.reason) for item in scan.skipped] == [
        ("../elsewhere", "folder outside the repository (from .adr-dir)"),
        ("docs/adr", "folder outside the repository (from indexer.adr_dirs)"),
    ]


def test_symlink_inside_the_root_is_read_once(tmp_path: Path) -> None:
    write(tmp_path, "docs/adr/0001-x.md", "# 1. X\n")
    (tmp_path / "adr").symlink_to(tmp_path / "docs" / "adr", target_is_directory=True)
    scan = scan_adrs(tmp_path)
    assert scan.dirs == ["docs/adr"]
    assert [adr.path for adr in scan.adrs] == ["docs/adr/0001-x.md"]


def test_file_symlink_leaving_the_root_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    secret = write(tmp_path, "secret.md", "# Secret\n")
    (root / "docs" / "adr").mkdir(parents=True)
    (root / "docs" / "adr" / "0001-link.md").symlink_to(secret)
    scan = scan_adrs(root)
    assert scan.adrs == []
    assert scan.skipped == [
        Skipped("docs/adr/0001-link.md", "symlink to a file outside the repository")
    ]


def test_scan_walks_subfolders_and_skips_non_adrs(tmp_path: Path) -> None:
    write(tmp_path, "docs/adr/README.md", "# ADRs\n")
    write(tmp_path, "docs/adr/index.md", "# Index\n")
    write(tmp_path, "docs/adr/template.md", "# Title\n")
    write(tmp_path, "docs/adr/adr-template-minimal.md", "# {short title}\n")
    write(tmp_path, "docs/adr/templates/0000-x.md", "# X\n")
    write(tmp_path, "docs/adr/.draft.md", "# Draft\n")
    write(tmp_path, "docs/adr/diagram.svg", "<svg/>\n")
    write(tmp_path, "docs/adr/notes.txt", "notes\n")
    write(tmp_path, "docs/adr/0012-use-jinja-templates.md", "# 12. Use Jinja templates\n")
    write(tmp_path, "docs/adr/payments/0001-use-stripe.markdown", "# 1. Use Stripe\n")
    scan = scan_adrs(tmp_path)
    assert scan.skipped == []
    assert [(adr.path, adr.title) for adr in scan.adrs] == [
        ("docs/adr/0012-use-jinja-templates.md", "Use Jinja templates"),
        ("docs/adr/payments/0001-use-stripe.markdown", "Use Stripe"),
    ]


def test_scan_reports_unreadable_files_and_never_raises(tmp_path: Path) -> None:
    write(tmp_path, "docs/adr/0001-ok.md", "# 1. Fine\n\n## Status\n\nAccepted\n")
    (tmp_path / "docs/adr/0002-binary.md").write_bytes(b"# 2. Bin\x00ary\n")
    (tmp_path / "docs/adr/0003-big.md").write_bytes(b"# 3. Big\n" + b"x" * (1024 * 1024))
    (tmp_path / "docs/adr/0004-latin1.md").write_bytes("# 4. Café\n".encode("latin-1"))
    write(tmp_path, "docs/adr/0005-blank.md", "\n  \n\t\n")
    scan = scan_adrs(tmp_path)
    assert isinstance(scan, AdrScan)
    assert [adr.path for adr in scan.adrs] == ["docs/adr/0001-ok.md"]
    reasons = {item.path.rsplit("/", 1)[1]: item.reason for item in scan.skipped}
    assert reasons == {
        "0002-binary.md": "binary file (NUL byte)",
        "0003-big.md": "too large (1,048,585 bytes; the limit is 1,048,576)",
        "0004-latin1.md": "not UTF-8 (byte 0xe9 at offset 8)",
        "0005-blank.md": "empty file",
    }


def test_scan_keeps_only_files_that_exist(tmp_path: Path) -> None:
    write(tmp_path, "src/app.py", "")
    (tmp_path / "lib").mkdir()
    write(
        tmp_path,
        "docs/adr/0001-x.md",
        "# 1. X\n\nSee `src/app.py`, `src/gone.py`, `lib/**/*.rb`, `none/*.rb`, `text/html`.\n",
    )
    (adr,) = scan_adrs(tmp_path).adrs
    assert adr.files == ("lib/**/*.rb", "src/app.py")


# -- relations ----------------------------------------------------------------------------------

TARGET = "docs/adr/0003-use-redis.md"
CATALOG = [
    "docs/adr/0001-record-decisions.md",
    TARGET,
    "docs/adr/0010-this.md",
    "docs/adr/2024-03-01-use-kafka.md",
    "docs/other/0004-elsewhere.md",
]


@pytest.mark.parametrize(
    "reference",
    [
        "[ADR-0003](0003-use-redis.md)",
        "[the cache decision](./0003-USE-REDIS.MD)",
        "[3. Use Redis](0003-use-redis.md#decision)",
        "[x](../adr/0003-use-redis.md)",
        "[x](/docs/adr/0003-use-redis.md)",
        "[x](https://github.com/o/r/blob/main/docs/adr/0003-use-redis.md)",
        "[x](0003-use-redis.html)",
        "[ADR-0003](broken-link.md)",
        "ADR-0003",
        "ADR-3",
        "adr 0003",
        "ADR_003",
        "Adr#3",
        "#3",
        "#0003",
        "0003-use-redis.md",
        "0003-Use-Redis",
        "use-redis",
        "USE-REDIS.",
    ],
)
def test_reference_forms_resolve(reference: str) -> None:
    adr = parse(f"# 10. This\n\nSupersedes {reference}\n", known=CATALOG)
    assert adr.links == (("supersedes", TARGET),)


@pytest.mark.parametrize(
    ("line", "links", "superseded_by"),
    [
        ("Supersedes ADR-3", [("supersedes", TARGET)], []),
        ("supercedes: ADR-3", [("supersedes", TARGET)], []),
        ("* Replaces: ADR-3", [("supersedes", TARGET)], []),
        ("- **Replaces:** [ADR-0003](0003-use-redis.md)", [("supersedes", TARGET)], []),
        ("Superseded by ADR-3", [], [TARGET]),
        ("SUPERSEDED BY [ADR-0003](0003-use-redis.md)", [], [TARGET]),
        ("Replaced by #3", [], [TARGET]),
        ("Amends ADR-3", [("relates", TARGET)], []),
        ("Amended by ADR-3", [("relates", TARGET)], []),
        ("Refined by ADR-3", [("relates", TARGET)], []),
        ("Relates to ADR-3", [("relates", TARGET)], []),
        ("See also: use-kafka", [("relates", "docs/adr/2024-03-01-use-kafka.md")], []),
        (
            "Supersedes ADR-1 and ADR-3; amends use-kafka",
            [
                ("relates", "docs/adr/2024-03-01-use-kafka.md"),
                ("supersedes", "docs/adr/0001-record-decisions.md"),
                ("supersedes", TARGET),
            ],
            [],
        ),
        ("Supersedes ADR-0099 and [x](0099-missing.md)", [], []),  # unknown: dropped
        ("Supersedes ADR-10", [], []),  # itself: dropped
        ("Superseded by ADR-3 on 2024-05-01", [], [TARGET]),  # the date is not ADR 5 or 1
    ],
)
def test_relation_phrases(
    line: str, links: list[tuple[str, str]], superseded_by: list[str]
) -> None:
    adr = parse(f"# 10. This\n\n{line}\n", known=CATALOG)
    assert list(adr.links) == links
    assert list(adr.superseded_by) == superseded_by


def test_relations_in_prose_and_code_are_not_metadata() -> None:
    text = (
        "# 10. This\n\n## Context\n\nThe plan supersedes ADR-1 in a way, and see #3 on GitHub.\n"
        "```\nSupersedes ADR-3\nStatus: rejected\n```\n"
        "<!-- Superseded by ADR-3 -->\n"
        "> Supersedes ADR-0001\n"
    )
    adr = parse(text, known=CATALOG)
    assert adr.links == (("supersedes", "docs/adr/0001-record-decisions.md"),)  # the quote line
    assert adr.superseded_by == ()
    assert adr.status == "active"


def test_same_number_prefers_the_same_folder() -> None:
    known = ["docs/adr/0004-here.md", "docs/other/0004-elsewhere.md", "docs/other/0005-x.md"]
    adr = parse("# 10. This\n\nAmends ADR-4 and ADR-5\n", known=known)
    assert adr.links == (("relates", "docs/adr/0004-here.md"), ("relates", "docs/other/0005-x.md"))
    ambiguous = parse("# 1. X\n\nAmends ADR-4\n", path="docs/third/0001-x.md", known=known)
    assert ambiguous.links == ()


def test_front_matter_relations() -> None:
    text = (
        "---\nstatus: superseded by ADR-0003\nsupersedes: [ADR-1]\nrelated:\n  - use-kafka\n---\n"
        "# This\n\nText.\n"
    )
    adr = parse(text, known=CATALOG)
    assert adr.status == "superseded"
    assert adr.superseded_by == (TARGET,)
    assert adr.links == (
        ("relates", "docs/adr/2024-03-01-use-kafka.md"),
        ("supersedes", "docs/adr/0001-record-decisions.md"),
    )


def test_supersedes_wins_over_relates_for_the_same_target() -> None:
    adr = parse("# 10. This\n\nSupersedes ADR-3\n\nAmends ADR-3\n", known=CATALOG)
    assert adr.links == (("supersedes", TARGET),)


def test_links_section_lists_relations() -> None:
    text = "# 10. This\n\n## Links\n\n* [ADR-0001](0001-record-decisions.md)\n* Superseded by #3\n"
    adr = parse(text, known=CATALOG)
    assert adr.links == (("relates", "docs/adr/0001-record-decisions.md"),)
    assert adr.superseded_by == (TARGET,)


# -- status -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "status"),
    [
        ("Accepted", "active"),
        ("approved", "active"),
        ("Adopted", "active"),
        ("Proposed", "proposed"),
        ("Draft", "proposed"),
        ("In review", "proposed"),
        ("Rejected", "rejected"),
        ("Not accepted", "rejected"),
        ("Withdrawn", "rejected"),
        ("Superseded", "superseded"),
        ("Superseded by ADR-7", "superseded"),
        ("Deprecated", "superseded"),
        ("Obsolete", "superseded"),
        ("Archived", "archived"),
        ("Proposed (to be accepted in May)", "proposed"),
        ("Parked", "proposed"),  # written but not recognised
        ("✅ **Accepted**", "active"),
    ],
)
def test_status_words(written: str, status: str) -> None:
    forms = [
        f"---\nstatus: {json.dumps(written)}\n---\n# T\n\nText.\n",
        f"# T\n\n* Status: {written}\n\n## Context\n\nText.\n",
        f"# T\n\n**Status:** {written}\n",
        f"# T\n\n| Status | {written} |\n",
        f"# T\n\n## Status\n\n{written}\n\n## Context\n\nText.\n",
    ]
    for text in forms:
        adr = parse(text)
        assert (adr.status, adr.status_text) == (status, written.replace("**", "")), text


def test_missing_status_is_active() -> None:
    adr = parse("# 10. This\n\n## Context\n\nThe status of the build is rejected.\n")
    assert (adr.status, adr.status_text) == ("active", "")


def test_status_section_life_cycle_wins() -> None:
    text = (
        "# 10. This\n\n## Status\n\n- 2024-01-05 Proposed\n- 2024-02-01 Accepted\n\n"
        "Supersedes [ADR-0001](0001-record-decisions.md)\n\n## Context\n\nThe approved plan.\n"
    )
    adr = parse(text, known=CATALOG)
    assert (adr.status, adr.status_text, adr.date) == (
        "active",
        "2024-02-01 Accepted",
        "2024-02-01T00:00:00.000Z",
    )
    assert adr.links == (("supersedes", "docs/adr/0001-record-decisions.md"),)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (  # one row per field
            "| Field | Value |\n|---|---|\n| Status | Rejected |\n| Date | 2024-01-05 |\n",
            ("rejected", "Rejected", "2024-01-05T00:00:00.000Z", ("Ann",)),
        ),
        (  # one column per field
            "| Status | Date | Deciders |\n|---|:---:|---|\n| **Accepted** | 2024-01-05 | Ann |\n",
            ("active", "Accepted", "2024-01-05T00:00:00.000Z", ("Ann",)),
        ),
        (  # a status history in the Status section
            "## Status\n\n| Date | Status |\n|---|---|\n| 2024-01-01 | Proposed |\n"
            "| 2024-02-01 | Accepted |\n",
            ("active", "2024-02-01 Accepted", "2024-02-01T00:00:00.000Z", ("Ann",)),
        ),
    ],
)
def test_status_tables(table: str, expected: tuple[str, str, str, tuple[str, ...]]) -> None:
    adr = parse(f"# T\n\n* Deciders: Ann\n\n{table}\n## Context\n\nText.\n")
    assert (adr.status, adr.status_text, adr.date, adr.deciders) == expected


def test_status_section_with_only_a_date_is_not_a_status() -> None:
    adr = parse("# 10. This\n\n## Status\n\n2024-03-04\n")
    assert (adr.status, adr.status_text, adr.date) == ("active", "", "2024-03-04T00:00:00.000Z")


# -- titles, numbers, dates, deciders, tags -----------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "title"),
    [
        ("# 7. Use X", "Use X"),
        ("# 7 - Use X", "Use X"),
        ("# ADR-0007: Use X", "Use X"),
        ("# ADR 7 - Use X", "Use X"),
        ("# [ADR-007] Use X", "Use X"),
        ("# adr0007 Use X", "Use X"),
        ("# 0007 Use X", "Use X"),
        ("# 0007-Use X", "Use X"),
        ("# 7 Use X", "Use X"),  # the file's own number
        ("# 3 ways to use X", "3 ways to use X"),
        ("# 1.2 release plan", "1.2 release plan"),
        ("# 2024-03-01: Use X", "Use X"),
        ("# Use X ##", "Use X"),
        ("# Use C# <!-- was: Use Java -->", "Use C#"),
        ("# RFC 7231 compliance", "RFC 7231 compliance"),
        ("# ADR-0007", "Use x"),  # nothing left: from the file name
        ("Use X\n=====", "Use X"),
        ("Intro text without a heading.", "Use x"),
    ],
)
def test_titles(heading: str, title: str) -> None:
    assert parse(f"{heading}\n\nText.\n", path="docs/adr/0007-use-x.md").title == title


def test_front_matter_title_comes_first() -> None:
    adr = parse("---\ntitle: 'ADR-7: From front matter'\n---\n# 7. From heading\n")
    assert adr.title == "From front matter"


@pytest.mark.parametrize(
    ("name", "number", "date"),
    [
        ("0005-use-postgres.md", 5, None),
        ("0000-use-markdown.md", 0, None),
        ("ADR-012-x.md", 12, None),
        ("adr_7.md", 7, None),
        ("2024-03-01-use-x.md", None, "2024-03-01T00:00:00.000Z"),
        ("20240301-use-x.md", None, "2024-03-01T00:00:00.000Z"),
        ("use-x.md", None, None),
        ("12factor.md", None, None),
    ],
)
def test_numbers_and_dates_from_file_names(name: str, number: int | None, date: str | None) -> None:
    adr = parse("# Use X\n\nText.\n", path=f"docs/adr/{name}")
    assert (adr.number, adr.date) == (number, date)


@pytest.mark.parametrize(
    ("text", "date"),
    [
        ("---\ndate: 2024-03-01\n---\n# T\n", "2024-03-01T00:00:00.000Z"),
        ("---\ndate: 2024-03-01T10:30:00+02:00\n---\n# T\n", "2024-03-01T08:30:00.000Z"),
        ("---\ndate: '2024-03-01 10:30:00'\n---\n# T\n", "2024-03-01T10:30:00.000Z"),
        ("---\ndate: March 5, 2024\n---\n# T\n", "2024-03-05T00:00:00.000Z"),
        ("---\ndate: someday\n---\n# T\n", None),
        ("# T\n\nDate: 2019/12/31\n", "2019-12-31T00:00:00.000Z"),
        ("# T\n\n* Date: 31st December 2019\n", "2019-12-31T00:00:00.000Z"),
        ("# T\n\nDate: 2019-02-30\n", None),
        ("# 7. T\n\nDate: 07/11/2016\n", "2016-11-07T00:00:00.000Z"),  # adr-tools, day first
        ("# T\n\nDate: 11/25/2016\n", "2016-11-25T00:00:00.000Z"),  # only month first fits
        ("# T\n\n- Date: 1.3.2024\n", "2024-03-01T00:00:00.000Z"),
        ("# T\n\n## Status\n\nAccepted (Jan 9, 2020)\n", "2020-01-09T00:00:00.000Z"),
        ("# T\n\n## Context\n\nSince 2020-01-01 we have 5 decisions 2024.\n", None),
    ],
)
def test_dates(text: str, date: str | None) -> None:
    assert parse(text).date == date


def test_deciders_and_tags() -> None:
    text = (
        "---\ndeciders: [Ann, '@bob', Ann]\ndecision-makers: Carl and Dora\n"
        "tags: [Storage, ' #Perf ', {nested: 1}]\n---\n# T\n\n* Deciders: [Eve](mailto:e@x), Fay\n"
    )
    adr = parse(text)
    assert adr.deciders == ("Ann", "@bob", "Carl", "Dora", "Eve", "Fay")
    assert adr.tags == ("adr", "perf", "storage")


# -- templates, content and odd input -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "# [short title of solved problem and solution]\n\n* Status: accepted\n",
            "template (title contains 'short title of solved problem')",
        ),
        (
            "# {short title, representative of solved problem and found solution}\n",
            "template (title contains 'short title, representative of solved problem')",
        ),
        ("# Title\n\nText.\n", "template (title is a placeholder: 'Title')"),
        ("# {Title}\n\nText.\n", "template (title is a placeholder: '{Title}')"),
        ("# Real\n\n## Status\n\nSTATUS\n", "template (status is a placeholder: 'STATUS')"),
        (
            "# Real\n\n* Status: proposed | rejected | accepted\n",
            "template (status lists the choices: 'proposed | rejected | accepted')",
        ),
        ("", "empty file"),
        (" \n\n", "empty file"),
        ("---\n---\n", "only front matter, no text"),
        ("---\ntitle: x\n", "broken YAML front matter: line 1: no closing '---' line"),
        ("# A\x00B\n", "binary file (NUL byte)"),
        ("# A\ud800\n", "not valid Unicode (lone surrogate at 3)"),
    ],
)
def test_unusable_input_is_reported(text: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(text)
    assert caught.value.message == reason


def test_template_code_in_a_real_adr_is_fine() -> None:
    text = "# 1. Use MADR\n\n```markdown\n# {short title of solved problem and solution}\n```\n"
    assert parse(text).title == "Use MADR"


def test_content_keeps_the_body_without_front_matter() -> None:
    text = "\ufeff---\r\nstatus: accepted\r\n---\r\n\r\n# T\r\n\r\n## Context\r\n\r\nWhy.\r\n\r\n"
    adr = parse(text)
    assert adr.content == "# T\n\n## Context\n\nWhy."
    assert adr.status == "active"


def test_content_is_capped() -> None:
    body = "# T\n\n" + "".join(f"line {i} é\n" for i in range(20_000))
    adr = parse(body)
    assert len(adr.content.encode("utf-8")) <= MAX_CONTENT_BYTES
    assert adr.content.startswith("# T\n\nline 0 é\n")
    assert adr.content.endswith("[… cut at 64 KiB; the full record is docs/adr/0010-this.md]")


def test_file_candidates() -> None:
    text = (
        "# T\n\n`src/a.py:12` `./src/b.py` `src/c.py#L3-L9` `../up.py` `/abs.py` `~/.bashrc` "
        "`os.path` `self.save()` `--flag` `Makefile` `.gitignore` `v1.2.3` `a b/c.py` "
        "`pkg/**/*.go` [d](img/d.png) [e](mailto:x@y) [f](#top) [g](../../h.md)\n\n"
        "[ref]: ../../docs/ref.md\n"
    )
    adr = parse(text, known=["docs/adr/0010-this.md"])
    assert adr.files == (
        ".gitignore",
        "Makefile",
        "docs/adr/img/d.png",
        "docs/ref.md",
        "h.md",
        "pkg/**/*.go",
        "src/a.py",
        "src/b.py",
        "src/c.py",
    )


def test_parse_rejects_paths_outside_the_repository() -> None:
    with pytest.raises(InvalidInput):
        parse_adr("/etc/adr/0001-x.md", "# 1. X\n")
    with pytest.raises(InvalidInput):
        parse_adr("../0001-x.md", "# 1. X\n")


# -- any text -----------------------------------------------------------------------------------

MARKDOWN_BITS = [
    "---\n",
    "# ",
    "## Status\n",
    "Status: ",
    "* ",
    "accepted",
    "Superseded by ",
    "ADR-",
    "#",
    "[x](",
    ")",
    "```\n",
    "~~~\n",
    "<!--",
    "-->",
    "`",
    "2024-02-30",
    "\n",
    "|",
    "{",
    "}",
    ":",
    "0003-use-redis.md",
    "\x00",
    "\r",
    "é",
]
markdownish = st.lists(
    st.one_of(st.sampled_from(MARKDOWN_BITS), st.text(max_size=8)), max_size=40
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(max_size=300), markdownish, markdownish.map(lambda t: "---\n" + t)))
def test_parse_adr_raises_only_invalid_input(text: str) -> None:
    try:
        adr = parse_adr("docs/adr/0010-this.md", text, known_paths=CATALOG)
    except InvalidInput:
        return
    assert adr.status in STATUSES
    assert adr.title.strip()
    assert all(rel in LINK_RELS for rel, _ in adr.links)
    assert all(not path.startswith(("/", "../")) for path in adr.files)
    assert "adr" in adr.tags


def test_scan_survives_odd_file_names(tmp_path: Path) -> None:
    write(tmp_path, "docs/adr/0001 spaced name.md", "# 1. Spaced\n")
    write(tmp_path, "docs/adr/ünïcode-décision.md", "# Ünïcode\n")
    if os.name == "posix":
        (tmp_path / "docs/adr/0002-loop.md").symlink_to(tmp_path / "docs/adr/0002-loop.md")
    scan = scan_adrs(tmp_path)
    assert [adr.title for adr in scan.adrs] == ["Spaced", "Ünïcode"]
    assert [item.path for item in scan.skipped] == (
        ["docs/adr/0002-loop.md"] if os.name == "posix" else []
    )
