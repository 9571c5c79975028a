"""collapse_whitespace and dedupe_hash: the shortcuts an index rebuild takes give the same text.

``collapse_whitespace`` returns text with nothing to collapse as it is, without splitting it;
every other text goes through ``" ".join(text.split())``. Checked against that definition on
text built from every kind of whitespace Python knows (and more), and on every code point.
"""

from __future__ import annotations

import hashlib
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from engram.model import collapse_whitespace, dedupe_hash, dedupe_key, normalize_content

# Every character str.split() splits on, the printable space among them.
WHITESPACE = "".join(chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace())
SPECIAL = "aZ\u00df\u0130\u1e9e\ufb01\u03a3\u2026."
# Every code point, lone surrogates among them.
TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(WHITESPACE), st.sampled_from(SPECIAL), st.characters(codec=None)
    ),
    max_size=60,
)
# What a record can hold: every entry refuses a lone surrogate (not valid Unicode) before a
# dedupe key is made of it, so the key's text is always UTF-8.
RECORD_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(WHITESPACE),
        st.sampled_from(SPECIAL),
        st.characters(exclude_categories=["Cs"]),
    ),
    max_size=60,
)


def test_the_space_is_the_only_printable_whitespace() -> None:
    # What lets collapse_whitespace trust printable text without a double or outer space.
    assert [char for char in WHITESPACE if char.isprintable()] == [" "]
    assert len(WHITESPACE) > 20


@settings(max_examples=3000)
@given(TEXT)
def test_collapse_whitespace_is_the_join_of_the_split(text: str) -> None:
    assert collapse_whitespace(text) == " ".join(text.split())


def test_collapse_whitespace_examples() -> None:
    assert collapse_whitespace("already single spaced") == "already single spaced"
    assert collapse_whitespace(" lead") == "lead"
    assert collapse_whitespace("trail ") == "trail"
    assert collapse_whitespace("two  spaces") == "two spaces"
    assert collapse_whitespace("tab\there") == "tab here"
    assert collapse_whitespace("nbsp\u00a0here\u2028line\x1fsep") == "nbsp here line sep"
    assert collapse_whitespace("") == ""
    assert collapse_whitespace(" \t\n") == ""


@given(
    RECORD_TEXT,
    RECORD_TEXT,
    st.sampled_from(["note", "decision"]),
    RECORD_TEXT,
    st.sampled_from(["", "personal"]),
)
def test_dedupe_hash_of_the_normalised_parts_is_the_dedupe_key(
    title: str, content: str, kind: str, project: str, scope: str
) -> None:
    record = {"kind": kind, "title": title, "content": content, "project": project}
    if scope:
        record["scope"] = scope
    expected = hashlib.sha256(
        "\x1f".join(
            [
                kind,
                " ".join(title.split()).casefold(),
                " ".join(content.split()).casefold(),
                project,
                scope or "project",
            ]
        ).encode("utf-8")
    ).hexdigest()
    parts = (normalize_content(title), normalize_content(content))
    key = dedupe_key(record)
    assert key == expected
    assert dedupe_hash(kind, *parts, project, scope or "project") == key
