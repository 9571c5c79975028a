"""The bytes of ``.engram/manifest.json``: written in the layout the file already has.

Go engram and engram both rewrite the whole manifest. Go writes ``json.MarshalIndent(m, "",
"  ")``: ``version`` then ``chunks``, each entry an indented block with its keys in Go's struct
order, no newline at the end; engram wrote sorted keys, one entry per line. Rewriting one
layout as the other made every switch of tool a whole-file diff, and a Go clone (no merge
driver) a conflict on every pair of concurrent syncs. So an update keeps what is there: the
file's top-level key order, its entry layout, each entry's key order, the final newline, and
the entries' order; new entries go at the end, oldest first, as Go appends them (Go imports
chunks in the manifest's order, so a later change must come after what it changes). In Go's
layout a diff of a sync is then only added lines (the last block's closing line matches the
new last block's); in engram's one-line layout the line before gains a comma. A removed entry
is the only removed text.

A manifest holding git conflict markers (a conflicted merge committed as is) is read as the
union of both sides, with a sentence naming the conflict: such a file stops Go's sync, so the
next write replaces it with a clean one.

Pure: bytes in, bytes out; ``engram.sync.chunks`` checks the content and writes the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["Layout", "layout_of", "render", "split_conflict"]

_OURS: Final = b"<<<<<<<"
_BASE: Final = b"|||||||"
_MID: Final = b"======="
_THEIRS: Final = b">>>>>>>"
# Go's ChunkEntry fields in struct order: the key order of an entry Go would write.
GO_ENTRY_KEYS: Final = ("id", "created_by", "created_at", "sessions", "memories", "prompts")


@dataclass(frozen=True)
class Layout:
    """How a manifest file is laid out: the parts an update keeps."""

    go: bool  # entries as indented blocks (Go's MarshalIndent), else one line each (engram)
    top_keys: tuple[str, ...]  # top-level key order
    newline: bool  # a newline after the closing brace
    order: tuple[str, ...]  # entry ids in file order
    entry_keys: Mapping[str, tuple[str, ...]]  # each entry's key order
    null_chunks: bool  # ``"chunks": null`` (Go's empty list)


def split_conflict(data: bytes) -> tuple[bytes, bytes, str] | None:
    """Return the two sides of a file with git conflict markers and a sentence naming them.

    None when the file has no conflict marker at the start of a line. Lines outside the
    conflicts belong to both sides; a diff3 base section is dropped.
    """
    lines = data.splitlines(keepends=True)
    if not any(line.startswith((_OURS, _THEIRS)) for line in lines):
        return None
    ours: list[bytes] = []
    theirs: list[bytes] = []
    state = "both"
    names: list[str] = []
    for line in lines:
        if line.startswith(_OURS):
            state = "ours"
            names.append(line[7:].strip().decode("utf-8", "replace") or "ours")
        elif line.startswith(_BASE) and state == "ours":
            state = "base"
        elif line.startswith(_MID) and state in ("ours", "base"):
            state = "theirs"
        elif line.startswith(_THEIRS) and state == "theirs":
            state = "both"
            names.append(line[7:].strip().decode("utf-8", "replace") or "theirs")
        elif state == "both":
            ours.append(line)
            theirs.append(line)
        elif state == "ours":
            ours.append(line)
        elif state == "theirs":
            theirs.append(line)
    sides = " and ".join(dict.fromkeys(names)) or "both sides"
    return b"".join(ours), b"".join(theirs), sides


def _entry_style(text: str) -> bool | None:
    """Tell whether the entries of a manifest's text are indented blocks (None: no entry)."""
    start = text.find('"chunks"')
    if start < 0:
        return None
    brace = text.find("{", start)
    if brace < 0:
        return None
    close = text.find("}", brace)
    newline = text.find("\n", brace)
    return 0 <= newline < close


def layout_of(data: bytes, manifest: Mapping[str, Any]) -> Layout:
    """Return the layout of a parsed manifest file (``data`` is what ``manifest`` came from)."""
    text = data.decode("utf-8", "replace")
    chunks = manifest.get("chunks")
    entries = [entry for entry in chunks or [] if isinstance(entry, Mapping)]
    style = _entry_style(text) if entries else None
    top_keys = tuple(str(key) for key in manifest)
    if style is None:
        # No entry to tell by: Go writes ``version`` first and no final newline.
        style = top_keys[:1] == ("version",) and not text.endswith("\n")
    return Layout(
        go=style,
        top_keys=top_keys,
        newline=text.endswith("\n"),
        order=tuple(str(entry.get("id")) for entry in entries),
        entry_keys={str(entry.get("id")): tuple(str(k) for k in entry) for entry in entries},
        null_chunks=chunks is None,
    )


def _go_string(value: str) -> str:
    """Return a JSON string as Go's encoder writes it (HTML characters escaped, raw UTF-8)."""
    out = json.dumps(value, ensure_ascii=False)
    for char, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        out = out.replace(char, escaped)
    return out.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _go_value(value: Any, indent: str) -> str:
    """Return a JSON value as Go's ``json.MarshalIndent(v, "", "  ")`` writes it at ``indent``."""
    inner = indent + "  "
    if isinstance(value, str):
        return _go_string(value)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [f"{inner}{_go_string(str(k))}: {_go_value(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(f"{inner}{_go_value(v, inner)}" for v in value) + f"\n{indent}]"
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _ordered(entry: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """Return an entry with its keys in ``keys``' order, the others after them."""
    out = {key: entry[key] for key in keys if key in entry}
    out.update({key: value for key, value in entry.items() if key not in out})
    return out


def _placed(layout: Layout, entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Return the entries in the file's order, the new ones after them, oldest first."""
    by_id = {str(entry.get("id")): entry for entry in entries}
    kept = [by_id[ident] for ident in layout.order if ident in by_id]
    known = set(layout.order)
    new = [entry for ident, entry in by_id.items() if ident not in known]
    new.sort(key=lambda entry: (str(entry.get("created_at", "")), str(entry.get("id"))))
    return kept + new


def render(
    manifest: Mapping[str, Any],
    layout: Layout | None,
    compact: Callable[[Any], str],
) -> bytes:
    """Render a checked manifest in ``layout`` (None: engram's canonical layout).

    ``compact`` renders one value as engram's canonical compact JSON (sorted keys): the
    one-line entries and top-level values of engram's layout.
    """
    entries = [e for e in manifest.get("chunks") or [] if isinstance(e, Mapping)]
    if layout is None:
        ordered = sorted(entries, key=lambda entry: str(entry.get("id", "")))
        keys = sorted({*manifest, "chunks"})
        go, newline, null = False, True, False
    else:
        ordered = _placed(layout, entries)
        keys = [k for k in layout.top_keys if k in manifest or k == "chunks"]
        keys += sorted(k for k in {*manifest, "chunks"} if k not in keys)
        go, newline, null = layout.go, layout.newline, layout.null_chunks
    lines = []
    for key in keys:
        name = json.dumps(key, ensure_ascii=False)
        if key != "chunks":
            value = manifest[key]
            lines.append(f"  {name}: {_go_value(value, '  ') if go else compact(value)}")
        elif not ordered:
            lines.append(f"  {name}: {'null' if null else '[]'}")
        else:
            shown = []
            for entry in ordered:
                ident = str(entry.get("id"))
                if go:
                    wanted = (layout.entry_keys.get(ident) if layout else None) or GO_ENTRY_KEYS
                    shown.append(f"    {_go_value(_ordered(entry, wanted), '    ')}")
                else:
                    shown.append(f"    {compact(entry)}")
            lines.append(f"  {name}: [\n" + ",\n".join(shown) + "\n  ]")
    return ("{\n" + ",\n".join(lines) + "\n}" + ("\n" if newline else "")).encode("utf-8")
