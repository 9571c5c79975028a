"""What an ADR points at: the ADRs it supersedes or relates to, and the repository's files.

This module owns the relation phrases ("Supersedes", "Superseded by", "Relates to" …) and their
targets, the ``Catalog`` of known ADR paths that resolves a link, a number, a file name or a
slug to one ADR, and the repository paths an ADR names in backticks or links. It checks nothing
on disk (``scan_adrs`` keeps only the files that exist) and never raises.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import unquote

from engram.errors import InvalidInput
from engram.indexer.adrfields import NAME_DATE, NAME_NUMBER, number_and_date
from engram.indexer.adrtext import (
    KEY_VALUE,
    LIST_OR_QUOTE,
    LIST_PREFIX,
    MAX_ITEM_CHARS,
    MAX_LIST_ITEMS,
    MD_LINK,
    Line,
    scalars,
)
from engram.model import normalize_path

ADR_SUFFIXES: Final = (".md", ".markdown")


# -- relations ----------------------------------------------------------------------------------

RELATION: Final = re.compile(
    r"\b(?P<phrase>superseded\s+by|superceded\s+by|supersedes|supercedes|superseding"
    r"|replaced\s+by|replaces|replacing|obsoleted\s+by|obsoletes|deprecated\s+by"
    r"|amended\s+by|amends|amending|refined\s+by|refines|clarified\s+by|clarifies"
    r"|extended\s+by|extends|relates\s+to|related\s+to|related|see\s+also)\b\s*:?",
    re.IGNORECASE,
)
_TARGET: Final = re.compile(
    r"(?P<link>"
    + MD_LINK.pattern.replace("?P<text>", "?P<ltext>").replace("?P<url>", "?P<lurl>")
    + r")|\badr[\s_#-]{0,3}0*(?P<anum>\d{1,6})(?!\d)"
    r"|(?<![\w&/#])#0*(?P<hnum>\d{1,6})\b"
    r"|(?P<tok>[\w][\w.-]{0,200})",
    re.IGNORECASE,
)


def _rel_kind(phrase: str) -> str:
    """Map a relation phrase onto supersedes, superseded_by or relates."""
    words = " ".join(phrase.lower().split())
    if words.endswith(" by") and words.split()[0] in (
        "superseded",
        "superceded",
        "replaced",
        "obsoleted",
        "deprecated",
    ):
        return "superseded_by"
    if words in ("supersedes", "supercedes", "superseding", "replaces", "replacing", "obsoletes"):
        return "supersedes"
    return "relates"


def _front_matter_relations(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """Return (relation, target text) pairs from relation keys in the front matter."""
    pairs: list[tuple[str, str]] = []
    for key, value in meta.items():
        words = " ".join(key.replace("_", " ").replace("-", " ").split())
        if not RELATION.fullmatch(words) and words not in ("links", "relates"):
            continue
        kind = _rel_kind(words) if RELATION.fullmatch(words) else "relates"
        pairs += [(kind, text) for text in scalars(value)]
    return pairs


def relations(
    meta: dict[str, Any], status_text: str, lines: list[Line], catalog: Catalog, here: str
) -> tuple[set[str], set[str], set[str]]:
    """Return the ADR paths this ADR supersedes, is superseded by, and relates to."""
    found: dict[str, set[str]] = {"supersedes": set(), "superseded_by": set(), "relates": set()}
    pairs = _front_matter_relations(meta) + _line_relations(status_text, anywhere=True)
    for line in lines:
        if line.meta is None or line.zone in ("title", "heading"):
            continue
        anywhere = line.zone in ("status", "links", "metadata") or (
            line.zone == "preamble"
            and bool(KEY_VALUE.match(line.meta) or LIST_OR_QUOTE.match(line.meta))
        )
        line_pairs = _line_relations(line.meta, anywhere=anywhere)
        if not line_pairs and line.zone == "links":
            line_pairs = [("relates", line.meta)]
        pairs += line_pairs
    for kind, segment in pairs:
        found[kind].update(_targets(segment, catalog, here))
    return found["supersedes"], found["superseded_by"], found["relates"]


def _line_relations(text: str, *, anywhere: bool) -> list[tuple[str, str]]:
    """Split a line into (relation, text naming its targets) at each relation phrase."""
    if not text:
        return []
    matches = list(RELATION.finditer(text))
    if not matches:
        return []
    prefix = LIST_PREFIX.match(text)
    if not anywhere and matches[0].start() != (prefix.end() if prefix else 0):
        return []
    pairs = []
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        pairs.append((_rel_kind(match.group("phrase")), text[match.end() : end]))
    return pairs


def _targets(segment: str, catalog: Catalog, here: str) -> list[str]:
    """Return the known ADR paths a piece of text names (links, numbers, file names, slugs)."""
    if not catalog.paths:
        return []
    out: list[str] = []
    for match in _TARGET.finditer(segment):
        target: str | None = None
        if match.group("link"):
            target = catalog.by_link(match.group("lurl") or "", here) or catalog.by_reference(
                match.group("ltext") or "", here
            )
        elif match.group("anum"):
            target = catalog.by_number(int(match.group("anum")), here)
        elif match.group("hnum"):
            target = catalog.by_number(int(match.group("hnum")), here)
        elif match.group("tok"):
            target = catalog.by_name(match.group("tok").rstrip(".-"), here)
        if target is not None and target not in out:
            out.append(target)
    return out


class Catalog:
    """The known ADR paths, looked up by path, file name, slug and number in any case."""

    def __init__(self, paths: Iterable[str]) -> None:
        unique: set[str] = set()
        for raw in paths:
            try:
                unique.add(normalize_path(str(raw)))
            except InvalidInput:
                continue
        unique.discard("")
        self.paths: list[str] = sorted(unique)
        self._path: dict[str, list[str]] = {}
        self._name: dict[str, list[str]] = {}
        self._stem: dict[str, list[str]] = {}
        self._number: dict[int, list[str]] = {}
        for path in self.paths:
            name = posixpath.basename(path)
            stem = name.rsplit(".", 1)[0].lower()
            self._path.setdefault(path.lower(), []).append(path)
            self._name.setdefault(name.lower(), []).append(path)
            self._stem.setdefault(stem, []).append(path)
            slug = NAME_DATE.sub("", stem) if NAME_DATE.match(stem) else NAME_NUMBER.sub("", stem)
            slug = slug.strip("-_. ")
            if slug and slug != stem:
                self._stem.setdefault(slug, []).append(path)
            number, _ = number_and_date(name)
            if number is not None:
                self._number.setdefault(number, []).append(path)

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and path.lower() in self._path

    @staticmethod
    def _pick(candidates: list[str] | None, here: str) -> str | None:
        """Return the one candidate, preferring the referring ADR's folder; None if ambiguous."""
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        near = [path for path in candidates if posixpath.dirname(path) == here]
        return near[0] if len(near) == 1 else None

    def by_number(self, number: int, here: str) -> str | None:
        """Find the ADR with this number."""
        return self._pick(self._number.get(number), here)

    def by_name(self, token: str, here: str) -> str | None:
        """Find the ADR a bare file name or slug names (only tokens that look like one)."""
        lowered = token.lower()
        if lowered.endswith(ADR_SUFFIXES):
            return self._pick(self._name.get(lowered), here)
        if "-" not in lowered and "_" not in lowered:
            return None
        return self._pick(self._stem.get(lowered), here)

    def by_link(self, url: str, here: str) -> str | None:
        """Find the ADR a Markdown link target points at."""
        target = _link_path(url, here)
        if target is None:
            return None
        found = self._pick(self._path.get(target.lower()), here)
        if found is not None:
            return found
        name = posixpath.basename(target).lower()
        stem = name.rsplit(".", 1)[0] if "." in name else name
        return self._pick(self._name.get(name), here) or self._pick(self._stem.get(stem), here)

    def by_reference(self, text: str, here: str) -> str | None:
        """Find the ADR a link's text names ("ADR-0003", "3. Use X")."""
        match = re.match(r"\s*(?:adr[\s_#-]{0,3})?0*(\d{1,6})\b", text, re.IGNORECASE)
        return self.by_number(int(match.group(1)), here) if match else None


def _link_path(url: str, here: str) -> str | None:
    """Return the repo-relative path a link target names, or None (URLs keep their path)."""
    url = url.strip().strip("<>")
    url = re.split(r"[#?]", url, maxsplit=1)[0]
    if not url:
        return None
    url = unquote(url)
    if _URL_SCHEME.match(url):  # a URL: only its last segment can match
        return posixpath.basename(url.rstrip("/")) or None
    joined = url.lstrip("/") if url.startswith("/") else posixpath.join(here, url)
    normal = posixpath.normpath(joined)
    if normal == "." or normal == ".." or normal.startswith(("../", "/")):
        return None
    return normal


# -- files --------------------------------------------------------------------------------------

_PATHISH: Final = re.compile(r"^[\w.@+~*?{},-]+(?:/[\w.@+~*?{},-]*)*$")
_EXTENSION_WORDS: Final = (
    "py pyi pyx ipynb js mjs cjs ts tsx jsx json jsonc jsonl json5 yaml yml toml ini cfg conf "
    "md markdown mdx rst txt adoc go rs java kt kts scala groovy gradle rb php c h cc cpp cxx "
    "hpp hh cs fs swift m mm sh bash zsh fish ps1 bat cmd sql proto graphql gql tf tfvars hcl "
    "xml xsd html htm css scss sass less vue svelte lock env properties mod sum csv tsv ex "
    "exs erl hrl hs ml mli clj cljs edn lua r jl dart zig nim pl pm bzl bazel nix cmake mk "
    "dockerfile containerfile tpl j2 jinja jinja2 tmpl mustache hbs ejs erb plist pem crt "
    "key pub svg png jpg jpeg gif webp pdf drawio puml plantuml mermaid mmd dot log pbtxt "
    "avsc thrift wasm vim el lisp scm rkt sol"
)
_FILE_EXTENSIONS: Final = frozenset(_EXTENSION_WORDS.split())
_FILE_NAMES: Final = frozenset(
    {
        "dockerfile",
        "containerfile",
        "makefile",
        "gnumakefile",
        "justfile",
        "jenkinsfile",
        "procfile",
        "gemfile",
        "rakefile",
        "vagrantfile",
        "brewfile",
        "podfile",
        "cmakelists.txt",
        "license",
        "codeowners",
    }
)


def _path_candidate(text: str) -> str | None:
    """Return a backticked text as a repo-relative path when it looks like one, else None."""
    text = text.strip()
    if len(text) > MAX_ITEM_CHARS:
        return None
    text = re.sub(r"(?::\d{1,7}){1,2}$|#L\d{1,7}(?:-L?\d{1,7})?$", "", text)
    if not text or text.startswith(("-", "~", "@", "$")):
        return None
    if not _PATHISH.match(text) or not re.search(r"[A-Za-z]", text):
        return None
    if "/" not in text:
        lowered = text.lower()
        extension = lowered.rsplit(".", 1)[1] if "." in lowered[1:] else ""
        dotfile = lowered.startswith(".") and lowered.count(".") == 1 and len(lowered) > 2
        if extension not in _FILE_EXTENSIONS and lowered not in _FILE_NAMES and not dotfile:
            return None
    try:
        path = normalize_path(text)
    except InvalidInput:
        return None
    return path or None


_URL_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_LINK_DEFINITION: Final = re.compile(r"^\s{0,3}\[[^\]\n]{1,300}\]:\s*<?([^\s>]{1,1000})")


def _code_spans(text: str) -> list[str]:
    """Return the texts of a line's code spans (a run of backticks closed by one as long)."""
    runs = [(match.start(), match.end()) for match in re.finditer(r"`+", text)]
    by_length: dict[int, list[int]] = {}
    for index, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(index)
    spans: list[str] = []
    index = 0
    while index < len(runs):
        start, end = runs[index]
        same = by_length[end - start]
        later = bisect.bisect_right(same, index)
        if later < len(same):
            closing = same[later]
            spans.append(text[end : runs[closing][0]])
            index = closing + 1
        else:
            index += 1
    return spans


def named_files(lines: list[Line], here: str, own: str, catalog: Catalog) -> list[str]:
    """Return the repo paths an ADR names in backticks or links to (not ADRs), sorted."""
    found: set[str] = set()
    for line in lines:
        if line.meta is None:
            continue
        for span in _code_spans(line.meta):
            candidate = _path_candidate(span)
            if candidate:
                found.add(candidate)
        urls = [match.group("url") for match in MD_LINK.finditer(line.meta)]
        urls += [match.group(1) for match in _LINK_DEFINITION.finditer(line.meta)]
        for url in urls:
            if not url or _URL_SCHEME.match(url.strip("<>")):
                continue
            target = _link_path(url, here)
            if target is not None and len(target) <= MAX_ITEM_CHARS:
                found.add(target)
    return sorted(path for path in found if path != own and path not in catalog)[:MAX_LIST_ITEMS]
