"""Redact secrets before anything reaches disk, where git would keep them forever.

Owns ``redact`` (one text), ``scrub_record`` (a whole record: the store calls it on every write
of memories.jsonl, so no field and no path can skip it) and ``find_secrets`` (``engram doctor``
calls it): ``<private>…</private>`` spans, PEM/PuTTY private key blocks, vendor tokens found by
the detect-secrets regex plugins, ``password = …``-style assignments, credentials in URLs (the
scheme's ``//`` may follow a space: a title rebuilt from text can insert one), Docker ``"auth"``
entries, ``Authorization`` headers, prose that says what a secret is ("the staging password is
…", when the value looks like a credential), a few dozen token shapes the plugins miss, and the
user's ``redact.extra_patterns``. Each hit becomes ``[REDACTED]``; the text around it is kept.

Bounded rules, so that a mention does not eat a note:
- an unclosed ``<private>`` hides the rest of its paragraph (up to the next blank line), not the
  rest of the text;
- a private key header alone (a sentence about ``-----BEGIN RSA PRIVATE KEY-----``) is prose. A
  header followed by key material (a base64 run of 32+ characters) is a key: up to its END
  line, or, with none, over the base64 lines after it (fail closed on the body, keep the prose
  that follows);
- an assignment's value is not a secret when it is a placeholder (``<your-token>``, ``${TOKEN}``,
  ``os.environ[...]``, ``changeme``, ``xxxx``, ``********``), a boolean or null, or a number
  where the key names a setting about the secret (``password_min_length: 12``) or the number
  is shorter than 6 digits; nor when the key names something about the secret (``secret_id``,
  ``token_type``, ``api_key_header``: its last word is an id, a type, a header …), nor a
  letters-only word with more words after it (``Password: rotate it monthly`` is prose,
  ``password: hunter`` is a credential).

Must not: import detect_secrets at import time (``engram recall`` never needs it and must start
fast); call a plugin's ``analyze_line`` or ``scan_line`` (they read global settings and may verify
a secret over the network); use the high-entropy detectors (they flag every git SHA and UUID in
engineering notes); read or write files; import anything from engram but ``engram.errors``,
``engram.store.patterns`` (which runs the extra patterns with a time limit) and
``engram.store.secretwords`` (the rules that read a value by the words around it: keywords,
assignments, URLs, Docker auth, ``Basic`` credentials, prose).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engram.errors import InvalidInput
from engram.store.patterns import Extra, compile_extras
from engram.store.secretwords import (
    ASSIGNMENT_NEEDLE,
    PROSE_NEEDLE,
    REDACTED,
    Finder,
    assignment_finder,
    basic_finder,
    docker_auth_finder,
    keyword_finder,
    prose_finder,
    url_finder,
)

__all__ = [
    "REDACTED",
    "STRUCTURAL_FIELDS",
    "Finding",
    "Scrubber",
    "default_scrubber",
    "find_secrets",
    "redact",
    "scrub_record",
]


PRIVATE_TAG = "private-tag"
PRIVATE_KEY = "Private Key"  # the secret_type of detect-secrets' PrivateKeyDetector
SECRET_KEYWORD = "Secret Keyword"  # the secret_type of detect-secrets' KeywordDetector
EXTRA_PATTERN = "extra-pattern"


@dataclass(frozen=True)
class Finding:
    """One span redact() would replace: the 1-based line it starts on and what found it."""

    line: int
    kind: str


def redact(text: str, extra_patterns: Sequence[str] = ()) -> tuple[str, int]:
    """Return text with private spans and detected secrets replaced by [REDACTED], and how many."""
    extras = _compile(tuple(extra_patterns))
    spans = _find(text, extras)
    total = 0
    # Repeat until nothing is found, so redact(redact(x)) == redact(x) holds by construction, even
    # for a user pattern that matches across a fresh marker. Each round turns at least one
    # character outside a marker into a marker, so the loop ends; normally after one round.
    while spans:
        total += len(spans)
        text = _replace(text, spans)
        spans = _find(text, extras, marked_lines_only=True)
    return text, total


# Validated by model.parse_line (an id shape, an integer, RFC 3339 times): never free text. The
# id is still checked (scrub_record refuses a record whose id is a secret).
STRUCTURAL_FIELDS = frozenset({"id", "rev", "created_at", "updated_at", "deleted_at"})


def scrub_record(
    record: Mapping[str, Any], extra_patterns: Sequence[str] = ()
) -> tuple[dict[str, Any], int]:
    """Return the record with every string redacted (values and keys, nested too), and how many.

    Only ``STRUCTURAL_FIELDS`` are left alone; an id that is itself a secret raises InvalidInput.
    """
    scrubber = default_scrubber() if not extra_patterns else Scrubber(extra_patterns)
    return scrubber.record(record)


@functools.cache
def default_scrubber() -> Scrubber:
    """Return the scrubber of the built-in rules only, shared by the process (and its memory)."""
    return Scrubber()


class Scrubber:
    """scrub_record with one set of extra patterns, remembering strings it found clean.

    A clean record (the usual case) costs one scan of its strings joined; strings seen clean
    before (the title the service scrubbed, then the store checks again) are not scanned again.
    Redaction is per string, so a string clean once is clean in any record.
    """

    # How many characters of clean strings are remembered before the memory starts afresh.
    CACHE_CHARS = 4 * 1024 * 1024

    def __init__(self, extra_patterns: Sequence[str] = ()) -> None:
        self.patterns = tuple(str(p) for p in extra_patterns)
        self._clean: set[str] = set()
        self._chars = 0

    def text(self, text: str) -> tuple[str, int]:
        """Return redact(text) with this scrubber's patterns."""
        if text in self._clean:
            return text, 0
        if _NO_SECRET.match(text) and not any(p.search(text) for p in _compile(self.patterns)):
            return text, 0
        out, count = redact(text, self.patterns)
        if not count:
            self._remember([text])
        return out, count

    def record(self, record: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
        """Return the record with every string but the structural fields redacted, and how many."""
        strings: list[str] = []
        rid = record.get("id")
        if isinstance(rid, str):
            strings.append(rid)
        for key, value in record.items():
            if key not in STRUCTURAL_FIELDS:
                strings.append(key)
                _strings(value, strings)
        fresh = [text for text in strings if text not in self._clean]
        scan = [text for text in fresh if not _NO_SECRET.match(text)]
        # Line rules see the same lines joined as apart, and a block or tag found in one string is
        # still found among all: a clean joined text means every string is clean.
        if not fresh or (
            (not scan or not _find("\n".join(scan), ()))
            and not any(p.search(text) for p in _compile(self.patterns) for text in fresh)
        ):
            self._remember(fresh)
            return dict(record), 0
        if isinstance(rid, str) and redact(rid, self.patterns)[1]:
            raise InvalidInput(
                f"memory id {rid[:4]}… looks like a secret; refusing to store it",
                hint="give the memory a random id (engram assigns one when none is given)",
            )
        count = 0

        def clean(value: Any) -> Any:  # _strings above refused a record nested too deep
            nonlocal count
            if isinstance(value, str):
                text, hits = self.text(value)
                count += hits
                return text
            if isinstance(value, list):
                return [clean(item) for item in value]
            if isinstance(value, dict):
                return {clean(key): clean(item) for key, item in value.items()}
            return value

        out = {
            (key if key in STRUCTURAL_FIELDS else clean(key)): (
                value if key in STRUCTURAL_FIELDS else clean(value)
            )
            for key, value in record.items()
        }
        return out, count

    def _remember(self, texts: Iterable[str]) -> None:
        for text in texts:
            if len(text) > self.CACHE_CHARS // 64:
                continue  # a huge content is not worth holding on to
            if self._chars + len(text) > self.CACHE_CHARS:
                self._clean.clear()
                self._chars = 0
            if text not in self._clean:
                self._clean.add(text)
                self._chars += len(text)


# Records are refused past 64 levels where they are read and written (engram.model); this bound
# only keeps the recursive walks here from a RecursionError on a value built in Python.
_MAX_DEPTH = 200


def _too_deep() -> InvalidInput:
    return InvalidInput(f"a record nests more than {_MAX_DEPTH} levels; refusing to store it")


def _strings(value: Any, out: list[str], depth: int = 0) -> None:
    """Append every string in a JSON value (dict keys included) to out."""
    if isinstance(value, str):
        out.append(value)
        return
    if depth > _MAX_DEPTH:
        raise _too_deep()
    if isinstance(value, list):
        for item in value:
            _strings(item, out, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            out.append(str(key))
            _strings(item, out, depth + 1)


def find_secrets(text: str, extra_patterns: Sequence[str] = ()) -> list[Finding]:
    """List the secrets in text (1-based line, kind) without changing it; for `engram doctor`."""
    spans = _find(text, _compile(tuple(extra_patterns)))
    newlines = [m.start() for m in re.finditer("\n", text)] if spans else []
    return [Finding(bisect.bisect_left(newlines, start) + 1, kind) for start, _, kind in spans]


# (start, end, kind) in the scanned text; a tuple because a 1 MiB note can yield many.
_Span = tuple[int, int, str]


@dataclass(frozen=True)
class _Rule:
    """A per-line detector, and the cheap needle a line must hold for the detector to match."""

    kind: str
    find: Finder
    # A regex searched in the lowercased text. Every line the detector can match must contain a
    # match of it; None sends every line. test_prefilter_keeps_results checks both paths agree.
    needle: str | None
    # Every match of the detector starts where its needle matches (a keyword-first regex).
    anchored: bool = False


# --- spans found on the whole text (they cross lines) -----------------------------------------

# A string that is a UUID or an OpenCode session id (agents' session ids) or an ISO time (a stamp
# engram writes) holds no secret for any built-in rule, whatever field it is in (tests hold it on
# thousands), so it is clean without loading the rules, whose first use costs ~0.5 s
# (detect-secrets and ~300 patterns compiled): a session's first hook writes little else.
_NO_SECRET = re.compile(
    r"(?:[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
    r"|ses_[0-9a-f]{12}[0-9A-Za-z]{14}"  # an OpenCode session's id
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d))\Z"
)
_PRIVATE_TAG = re.compile(r"<(/?)private(?:\s[^<>]*)?>", re.IGNORECASE)
# Where an unclosed <private> stops: the next blank line (the end of its paragraph).
_PARAGRAPH_END = re.compile(r"\n[ \t]*\r?\n")

_KEY_HEADER = re.compile(r"-{4,5} ?BEGIN [A-Z0-9 ]*?PRIVATE KEY(?: BLOCK)? ?-{4,5}")
_KEY_FOOTER = re.compile(r"-{4,5} ?END [A-Z0-9 ]*?PRIVATE KEY(?: BLOCK)? ?-{4,5}")
# Key material: a base64 run no prose word reaches (a PEM line holds 64 characters).
_KEY_MATERIAL = re.compile(r"[A-Za-z0-9+/]{32,}")
# How far after a header its END line may be (a 16384-bit RSA key is about 12 KiB).
_KEY_WINDOW = 64 * 1024
_EOL = r"(?:[ \t]*(?:\r?\n|\\r\\n|\\n)[ \t]*)"  # a newline, or one written as \n
# The body of a block with no END line: the lines after its header that are armour headers,
# blank, or base64 (whole lines), or long base64 runs on the header's own line.
_KEY_BODY = re.compile(
    rf"(?:{_EOL}+(?:(?:Proc-Type|DEK-Info|Comment|Version|Hash|Charset):[^\n]*"
    rf"|[A-Za-z0-9+/=]+(?={_EOL}|[ \t]*\Z))|[ \t]+[A-Za-z0-9+/]{{16,}}={{0,2}})*"
)
_PUTTY = re.compile(
    r"PuTTY-User-Key-File-\d+:[^\n]*(?:\n[^\n]*){0,64}?\nPrivate-Lines:[^\n]*"
    r"(?:\r?\n[A-Za-z0-9+/=]+(?=\r?\n|\Z))*(?:\r?\nPrivate-MAC:[^\n]*)?"
)

# --- needles: which lines are worth a detector's time -----------------------------------------

# Every word the IBM/Cloudant/SoftLayer assignment regexes look for contains one of these.
_KEYWORD_NEEDLE = r"key|pass|pw|secret|token|contrase"
# One needle per denylist regex, in order; a plugin whose denylist no longer has this many
# regexes (a detect-secrets upgrade) falls back to scanning every line rather than missing one.
_PLUGIN_NEEDLES: dict[str, tuple[str, ...]] = {
    "AWSKeyDetector": ("a3t|abia|acca|akia|asia", "aws"),
    "ArtifactoryDetector": ("akc", r"ap[\da-f]"),
    "AzureStorageKeyDetector": ("accountkey=",),
    "BasicAuthDetector": ("://",),
    "CloudantDetector": (_KEYWORD_NEEDLE,) * 2 + (r"cloudant\.com",) * 2,
    "DiscordBotTokenDetector": (r"\.[a-z\d_-]{6}\.",),
    "GitHubTokenDetector": ("gh[opusr]_",),
    "GitLabTokenDetector": (r"gl[a-z]+-|gr1348941",) * 7,
    "IbmCloudIamDetector": (_KEYWORD_NEEDLE,),
    "IbmCosHmacDetector": ("secret",),
    "JwtTokenDetector": ("eyj",),
    "MailchimpDetector": (r"-us\d",),
    "NpmDetector": (":_authtoken=",),
    "OpenAIDetector": ("t3blbkfj",),
    "PypiTokenDetector": ("pypi-",) * 2,
    "SendGridDetector": (r"sg\.",),
    "SlackDetector": ("xox", r"hooks\.slack\.com"),
    "SoftlayerDetector": (_KEYWORD_NEEDLE, "softlayer"),
    "SquareOAuthDetector": ("sq0csp-",),
    "StripeDetector": ("k_live_",),
    "TelegramBotTokenDetector": (r"(?<=\d{8}):",),
    "TwilioKeyDetector": ("ac[a-z0-9]{32}", "sk[a-z0-9]{32}"),
}
# str.lower() leaves these two alone, yet re.IGNORECASE matches them to i and s. With them mapped,
# every character an IGNORECASE needle letter (a-z, ñ, digits, _-.:/=) matches lowers to that
# letter: checked over all of Unicode when this was written.
_FOLD = str.maketrans({"ı": "i", "ſ": "s"})

# --- our own line rules: what the detect-secrets plugins miss ---------------------------------

# Vendor tokens that announce themselves with a fixed prefix; all share one needle.
_PREFIXED: tuple[tuple[str, str], ...] = (
    ("DigitalOcean Token", r"(?<![A-Za-z0-9])do[opr]_v1_[a-f0-9]{64}"),
    ("Databricks Token", r"(?<![A-Za-z0-9])dapi[a-f0-9]{32}(?:-\d)?"),
    ("Shopify Token", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"),
    ("Square Token", r"sq0atp-[0-9A-Za-z_-]{22}"),
    ("Google OAuth Token", r"GOCSPX-[A-Za-z0-9_-]{28}|(?<![A-Za-z0-9])ya29\.[0-9A-Za-z_-]{20,}"),
    ("Linear API Key", r"lin_api_[A-Za-z0-9]{40}"),
    ("Vault Token", r"(?<![A-Za-z0-9])hv[sb]\.[A-Za-z0-9_-]{24,}"),
    ("Docker Hub Token", r"dckr_pat_[A-Za-z0-9_-]{27,}"),
    ("Age Secret Key", r"AGE-SECRET-KEY-1[A-Z0-9]{58}"),
    ("New Relic Key", r"NRAK-[A-Z0-9]{27}"),
    ("Pulumi Token", r"(?<![A-Za-z0-9])pul-[a-f0-9]{40}"),
    ("Sentry Token", r"sntr[ysu]s?_[A-Za-z0-9_=+/-]{40,}"),
    ("Figma Token", r"figd_[A-Za-z0-9_-]{40,}"),
    ("Postman Key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    ("Atlassian Token", r"ATATT3[A-Za-z0-9_=-]{100,}"),
    ("Grafana Token", r"(?<![A-Za-z0-9])gl(?:sa|c)_[A-Za-z0-9_=+/-]{32,}"),
    ("Doppler Token", r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,}"),
    ("Mailgun API Key", r"(?<![A-Za-z0-9_-])key-[0-9a-f]{32}(?![0-9a-f])"),
    ("Supabase Token", r"sbp_[a-f0-9]{40}"),
    ("Netlify Token", r"nfp_[A-Za-z0-9]{36,}"),
)
_PREFIX_NEEDLE = (
    r"do[opr]_v1_|dapi|shp[acps][sta]_|sq0atp-|gocspx-|ya29\.|lin_api_|hv[sb]\.|dckr_pat_"
    r"|age-secret-key-1|nrak-|pul-|sntr|figd_|pmak-|atatt3|gl(?:sa|c)_|dp\.|key-|sbp_|nfp_"
)
# `curl -u user:password`: a password that is not a number (docker's -u 1000:1000) or $VAR.
_CURL_USER = r"(?:^|\s)(?:-u|--user)[ =]['\"]?[^\s:'\"$]+:((?!\$)[^\s'\"]*[^\s'\"\d][^\s'\"]*)"

# (kind, needle, regex). A match's groups, if any matched, are the secret, else the whole match.
_OWN_TOKENS: tuple[tuple[str, str, str], ...] = (
    # The plugin only knows the legacy T3BlbkFJ shape; sk-proj-, sk-ant-api03-, sk-svcacct- slip.
    ("Anthropic API Key", "sk-ant-", r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}"),
    ("OpenAI Token", "sk-", r"(?<![A-Za-z0-9_-])sk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}"),
    ("Google API Key", "aiza", r"AIza[0-9A-Za-z_-]{35}"),
    # Fine-grained PATs; the plugin only knows ghp_/gho_/ghu_/ghs_/ghr_.
    ("GitHub Token", "github_pat_", r"github_pat_[A-Za-z0-9_]{22,}"),
    # App-level tokens; the plugin only knows xox?- tokens and webhook URLs.
    ("Slack Token", "xapp-", r"xapp-\d-[A-Za-z0-9-]{10,}"),
    # The plugin only finds npm tokens on an .npmrc `//host/:_authToken=` line.
    ("NPM tokens", "npm_", r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}"),
    # The plugin only knows live keys; test keys and webhook secrets still open an account.
    ("Stripe Access Key", "k_test_|whsec_", r"[rs]k_test_[0-9A-Za-z]{24,}|whsec_[A-Za-z0-9]{32,}"),
    ("Hugging Face Token", "hf_", r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{34,}"),
    ("Bearer Token", "bearer", r"(?i:bearer)\s+((?=[\w.~+/-]*\d)[A-Za-z0-9._~+/-]{16,}=*)"),
    # Lower-cased (a tag, a project name): these alphabets lose nothing to str.lower().
    (
        "AWS Access Key",
        "a3t|abia|acca|akia|asia",
        r"(?<![A-Za-z0-9])(?:a3t[a-z]|abia|acca|akia|asia)[a-z2-7]{16}(?![A-Za-z0-9])",
    ),
    ("Twilio API Key", "ac[a-z0-9]{32}", r"(?<![A-Za-z0-9])ac[0-9a-f]{32}(?![A-Za-z0-9])"),
    # The plugin wants a user before the colon: redis://:password@host has none.
    ("Basic Auth Credentials", "://", r"[A-Za-z][A-Za-z0-9+.-]*://:([^\s/?#@]+)@"),
    # Sentry DSNs carry their key as the URL's user: https://<32 hex>@o1.ingest.sentry.io/2.
    ("Sentry DSN", "://", r"://([0-9a-f]{32}(?::[0-9a-f]{32})?)@"),
    ("Basic Auth Credentials", r"-u |-u=|--user", _CURL_USER),
    # Without its scheme too: a title rebuilt as `https: //hooks.slack.com/…` is still one.
    (
        "Slack Token",
        r"hooks\.slack\.com",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/-]{8,})",
    ),
    ("Discord Webhook", "discord", r"discord(?:app)?\.com/api/webhooks/\d+/([A-Za-z0-9_-]{40,})"),
    ("Azure SAS Token", "sig=", r"[?&]sig=([A-Za-z0-9%+/=]{30,})"),
    ("PyPI Token", "pypi-", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{40,}"),
    (
        "Mailgun API Key",
        r"[0-9a-f]{32}-[0-9a-f]{8}-",
        r"(?<![0-9a-f])[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}",
    ),
    ("Square Token", "eaaa", r"(?<![A-Za-z0-9])EAAA[A-Za-z0-9_-]{60,}"),
    *((kind, _PREFIX_NEEDLE, regex) for kind, regex in _PREFIXED),
)

# A vendor token's alphabet: a fixed-length regex's span widens over it to the whole token.
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _find(
    text: str,
    extras: tuple[Extra, ...],
    *,
    prefilter: bool = True,
    marked_lines_only: bool = False,
) -> list[_Span]:
    """Return the merged spans to replace, outside any [REDACTED] already present."""
    if not text:
        return []
    spans = _private_spans(text)
    spans.extend(_key_spans(text))
    spans.extend(_line_spans(text, prefilter=prefilter, marked_lines_only=marked_lines_only))
    for pattern in extras:  # each search time-limited: a committed pattern may backtrack forever
        spans.extend((start, end, EXTRA_PATTERN) for start, end in pattern.spans(text))
    return _merge(_outside_markers(text, spans))


def _private_spans(text: str) -> list[_Span]:
    """Return `<private>` spans, nesting-aware; an unclosed tag runs to the end of its paragraph.

    The tag that closes an opening one is the first after it where as many tags have closed as
    opened (found for every tag in one pass with a stack, so a text of many tags stays linear).
    """
    if "<" not in text:
        return []
    tags = list(_PRIVATE_TAG.finditer(text))
    if not tags:
        return []
    # depth[k]: opening minus closing tags among tags[:k + 1]; closes[k]: the first tag after an
    # opening tag k whose depth falls back to depth[k] - 1, i.e. the tag that closes it.
    depth: list[int] = []
    level = 0
    for m in tags:
        level += -1 if m.group(1) else 1
        depth.append(level)
    closes: dict[int, int] = {}
    waiting: list[int] = []  # opening tags not closed yet, their depths rising
    for k, m in enumerate(tags):
        while waiting and depth[k] <= depth[waiting[-1]] - 1:
            closes[waiting.pop()] = k
        if not m.group(1):
            waiting.append(k)
    spans: list[_Span] = []
    k = 0
    while k < len(tags):
        m = tags[k]
        if m.group(1):  # a stray closing tag is left alone: there is nothing to hide
            k += 1
            continue
        if k in closes:
            spans.append((m.start(), tags[closes[k]].end(), PRIVATE_TAG))
            k = closes[k] + 1
            continue
        # Never closed: hide the rest of its paragraph, not the rest of the note.
        found = _PARAGRAPH_END.search(text, m.end())
        end = found.start() if found else len(text)
        spans.append((m.start(), end, PRIVATE_TAG))
        while k < len(tags) and tags[k].start() < end:
            k += 1
    return spans


def _key_spans(text: str) -> Iterator[_Span]:
    """Yield private key blocks: a header with key material after it, to its END line if any.

    A header alone (a sentence about ``-----BEGIN RSA PRIVATE KEY-----``) is prose, not a key.
    Without an END line the block runs over the base64 lines that follow its header (fail
    closed on the key material) and stops at the first line of prose.
    """
    if "PRIVATE KEY" in text:
        covered = 0
        for m in _KEY_HEADER.finditer(text):
            if m.start() < covered:
                continue
            footer = _KEY_FOOTER.search(text, m.end(), m.end() + _KEY_WINDOW)
            if footer and _KEY_MATERIAL.search(text, m.end(), footer.start()):
                covered = footer.end()
            else:
                body = _KEY_BODY.match(text, m.end())
                end = body.end() if body else m.end()
                if not _KEY_MATERIAL.search(text, m.end(), end):
                    continue
                covered = end
            yield m.start(), covered, PRIVATE_KEY
    if "PuTTY-User-Key-File" in text:
        yield from ((m.start(), m.end(), PRIVATE_KEY) for m in _PUTTY.finditer(text))


def _line_spans(text: str, *, prefilter: bool, marked_lines_only: bool) -> Iterator[_Span]:
    """Yield the line rules' spans, offset into text; with prefilter, only on needle lines."""
    lines = text.split("\n")
    offsets = _offsets(lines)
    rows: Sequence[int] = range(len(lines))
    if marked_lines_only:
        # After a round of redaction only lines holding a marker changed; the rest found nothing.
        rows = [i for i, line in enumerate(lines) if REDACTED in line]
        lines = [lines[i] for i in rows]
        text = "\n".join(lines)
    for candidates, starts, rules in _plan(text, lines, _offsets(lines), prefilter):
        for j in candidates:
            line = lines[j].rstrip("\r")
            for rule in rules:
                for start, end in rule.find(line, starts.get(j)):
                    yield offsets[rows[j]] + start, offsets[rows[j]] + end, rule.kind


def _offsets(lines: list[str]) -> list[int]:
    """Return where each line starts in the text they were split from."""
    offsets = [0] * len(lines)
    pos = 0
    for i, line in enumerate(lines):
        offsets[i] = pos
        pos += len(line) + 1
    return offsets


# Which lines each group of rules scans, and where anchored rules start in them.
_Plan = list[tuple[Iterable[int], dict[int, list[int]], tuple[_Rule, ...]]]


def _plan(text: str, lines: list[str], offsets: list[int], prefilter: bool) -> _Plan:
    """Decide which lines each group of rules scans."""
    if not prefilter:
        return [(range(len(lines)), {}, _rules())]
    folded = text.lower().translate(_FOLD)
    # lower() may lengthen a character (İ) but never adds or removes a newline; when it lengthens
    # none, offsets in folded are offsets in text too, and anchored rules can use them.
    newlines = [m.start() for m in re.finditer("\n", folded)]
    aligned = len(folded) == len(text)
    plan: _Plan = []
    for (needle, anchored, rules), words in zip(_rule_groups(), _needle_words(), strict=True):
        starts: dict[int, list[int]] = {}
        if words is not None and not any(word in folded for word in words):
            continue  # a needle of plain words: `in` says no faster than the regex would
        if needle is None:
            plan.append((range(len(lines)), starts, rules))
        elif anchored and aligned:
            for m in needle.finditer(folded):
                i = bisect.bisect_right(newlines, m.start())
                starts.setdefault(i, []).append(m.start() - offsets[i])
            plan.append((starts, starts, rules))
        else:
            hits = {bisect.bisect_right(newlines, m.start()) for m in needle.finditer(folded)}
            plan.append((hits, starts, rules))
    return plan


def _token_finder(
    pattern: re.Pattern[str],
    *,
    widen: bool = True,
    verdict: Callable[[str], Iterable[str]] | None = None,
) -> Finder:
    """Return a finder for a token regex: its groups that matched (as findall), else the match."""

    def find(line: str, starts: Sequence[int] | None) -> Iterator[tuple[int, int]]:
        allowed: set[str] | None = None
        covered = 0  # widened so far: never walk the same run twice (a 1 MiB run of AKIA…)
        for m in pattern.finditer(line):
            bounds = [m.span(g) for g in range(1, pattern.groups + 1) if m.end(g) > m.start(g)]
            for start, end in bounds or [_trim(line, *m.span())]:
                if end <= start:
                    continue
                if verdict is not None:
                    if allowed is None:
                        allowed = set(verdict(line))
                    if line[start:end] not in allowed:
                        continue
                if widen:
                    if end <= covered:
                        continue  # inside the token widened last: nothing new to yield
                    start, end = _widen(line, start, end, floor=covered)
                    covered = end
                yield start, end

    return find


def _trim(line: str, start: int, end: int) -> tuple[int, int]:
    """Drop the delimiters some plugins match around a token (`=AKC…"`, `AccountKey=`)."""
    if line.startswith("AccountKey=", start):
        start += len("AccountKey=")
    while start < end and line[start] in " \t\"'=:":
        start += 1
    while end > start and line[end - 1] in " \t\"'":
        end -= 1
    return start, end


def _widen(line: str, start: int, end: int, *, floor: int = 0) -> tuple[int, int]:
    """Grow a span to the whole token: a 24-char regex must not leave a 99-char key's tail."""
    while start > floor and line[start - 1] in _TOKEN_CHARS:
        start -= 1
    while end < len(line) and line[end] in _TOKEN_CHARS:
        end += 1
    return start, end


@functools.cache
def _rule_groups() -> tuple[tuple[re.Pattern[str] | None, bool, tuple[_Rule, ...]], ...]:
    """Group the line rules by needle, so each needle is searched once per text."""
    groups: dict[tuple[str | None, bool], list[_Rule]] = {}
    for rule in _rules():
        groups.setdefault((rule.needle, rule.anchored and rule.needle is not None), []).append(rule)
    compiled = []
    for (needle, anchored), rules in groups.items():
        # Anchored: a lookahead, so overlapping starts (db_password, password) are all found.
        source = needle if not anchored else f"(?=(?:{needle}))"
        compiled.append((None if source is None else re.compile(source), anchored, tuple(rules)))
    return tuple(compiled)


# A needle that is plain words: alternatives of literal characters, `\.` and `x?` allowed.
_PLAIN = re.compile(r"(?:[a-z0-9_:=/ ñ-]|\\\.|[a-z0-9_-]\?)+")


@functools.cache
def _needle_words() -> tuple[tuple[str, ...] | None, ...]:
    """Return, per rule group, the literal words its needle is made of (None: a real regex)."""
    out: list[tuple[str, ...] | None] = []
    for needle, _, _ in _rule_groups():
        words: list[str] | None = [] if needle is not None else None
        source = needle.pattern.removeprefix("(?=(?:").removesuffix("))") if needle else ""
        for part in source.split("|") if needle is not None else ():
            if words is None or not _PLAIN.fullmatch(part):
                words = None
                break
            words.extend(_expand(part.replace("\\.", ".")))
        out.append(tuple(words) if words is not None else None)
    return tuple(out)


def _expand(part: str) -> list[str]:
    """Spell out every optional character of a plain needle: ``api_?key`` is apikey, api_key."""
    mark = part.find("?")
    if mark < 0:
        return [part]
    head, tail = part[: mark - 1], part[mark + 1 :]
    rests = _expand(tail)
    return [head + rest for rest in rests] + [head + part[mark - 1] + rest for rest in rests]


@functools.cache
def _rules() -> tuple[_Rule, ...]:
    """Build the line rules once: detect-secrets plugins first, then ours."""
    # Imported here: ~0.3 s (requests, multiprocessing) that `engram recall` must not pay.
    from detect_secrets.plugins import keyword as keyword_plugin
    from detect_secrets.plugins.artifactory import ArtifactoryDetector
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.cloudant import CloudantDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
    from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.softlayer import SoftlayerDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

    plugin_classes = (
        AWSKeyDetector, ArtifactoryDetector, AzureStorageKeyDetector, BasicAuthDetector,
        CloudantDetector, DiscordBotTokenDetector, GitHubTokenDetector, GitLabTokenDetector,
        IbmCloudIamDetector, IbmCosHmacDetector, JwtTokenDetector, MailchimpDetector, NpmDetector,
        OpenAIDetector, PypiTokenDetector, SendGridDetector, SlackDetector,
        SoftlayerDetector, SquareOAuthDetector, StripeDetector, TelegramBotTokenDetector,
        TwilioKeyDetector,
    )  # fmt: skip
    rules: list[_Rule] = []
    for cls in plugin_classes:
        plugin = cls()
        patterns = list(plugin.denylist)
        needles: Sequence[str | None] = _PLUGIN_NEEDLES.get(cls.__name__, ())
        if len(needles) != len(patterns):
            needles = [None] * len(patterns)
        # A plugin that overrides analyze_string (JWT checks the token decodes) has the last word.
        own = type(plugin).analyze_string is not RegexBasedDetector.analyze_string
        verdict = plugin.analyze_string if own else None
        kind = str(plugin.secret_type)
        rules.extend(
            _Rule(kind, _token_finder(pattern, verdict=verdict), needle)
            for pattern, needle in zip(patterns, needles, strict=True)
        )
    # The keyword plugin's quoted-value regexes (its default for an unknown file type), run with
    # finditer for positions and every match: the plugin itself stops at the first per regex.
    # Each starts or ends with one of the plugin's (lowercase) DENYLIST words.
    denylist_needle = "|".join(keyword_plugin.DENYLIST)
    rules.extend(
        _Rule(
            SECRET_KEYWORD,
            keyword_finder(
                pattern, group, pattern.pattern.startswith(keyword_plugin.DENYLIST_REGEX)
            ),
            denylist_needle,
            anchored=pattern.pattern.startswith(keyword_plugin.DENYLIST_REGEX),
        )
        for pattern, group in keyword_plugin.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items()
    )
    rules.append(_Rule(SECRET_KEYWORD, assignment_finder, ASSIGNMENT_NEEDLE, anchored=True))
    rules.append(_Rule("Basic Auth Credentials", basic_finder, "basic"))
    rules.append(_Rule("Basic Auth Credentials", url_finder, r":[ \t]*//"))
    rules.append(_Rule("Docker Auth", docker_auth_finder, "auth"))
    rules.append(_Rule(SECRET_KEYWORD, prose_finder, PROSE_NEEDLE))
    rules.extend(
        _Rule(kind, _token_finder(re.compile(regex)), needle) for kind, needle, regex in _OWN_TOKENS
    )
    return tuple(rules)


def _compile(patterns: tuple[str, ...]) -> tuple[Extra, ...]:
    """Compile the user's extra patterns (engram.store.patterns: time-limited, bad ones off)."""
    return compile_extras(patterns)


def _outside_markers(text: str, spans: list[_Span]) -> list[_Span]:
    """Cut every [REDACTED] already in text out of the spans, so a marker is never flagged."""
    if REDACTED not in text:
        return spans
    markers = [m.span() for m in re.finditer(re.escape(REDACTED), text)]
    starts = [start for start, _ in markers]
    pieces: list[_Span] = []
    for start, end, kind in spans:
        i = max(bisect.bisect_right(starts, start) - 1, 0)
        while start < end and i < len(markers) and markers[i][0] < end:
            m_start, m_end = markers[i]
            if m_end > start:
                if m_start > start:
                    pieces.append((start, m_start, kind))
                start = m_end
            i += 1
        if start < end:
            pieces.append((start, end, kind))
    return pieces


def _merge(spans: list[_Span]) -> list[_Span]:
    """Merge overlapping or touching spans; the earliest, longest, first-named kind wins."""
    spans.sort(key=lambda s: (s[0], -s[1], s[2]))  # the same kind whichever rule ran first
    merged: list[_Span] = []
    for start, end, kind in spans:
        if merged and start <= merged[-1][1]:
            last_start, last_end, last_kind = merged[-1]
            if end > last_end:
                merged[-1] = (last_start, end, last_kind)
        else:
            merged.append((start, end, kind))
    return merged


def _replace(text: str, spans: list[_Span]) -> str:
    """Replace each span (sorted, disjoint) with the marker."""
    parts = []
    pos = 0
    for start, end, _ in spans:
        parts.append(text[pos:start])
        parts.append(REDACTED)
        pos = end
    parts.append(text[pos:])
    return "".join(parts)
