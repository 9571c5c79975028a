"""The rules that read a value by the words around it: keywords, assignments, URLs and prose.

Owns the finders ``engram.store.redact`` runs on each line beside its token shapes: the keyword
plugin's quoted values (``keyword_finder``), ``password = …``-style assignments
(``assignment_finder``), the password of a URL (``url_finder``), Docker ``"auth"`` entries
(``docker_auth_finder``), ``Basic`` credentials (``basic_finder``) and prose that says what a
secret is (``prose_finder``), and what makes a value a literal and not a placeholder, a
reference or a word. Each finder yields the (start, end) spans of one line to redact.

Split from ``redact``, which owns the text, the records, the rule table and its needles; this
module decides only what a value next to a word is. Must not: import detect_secrets or anything
of engram (``redact`` passes the keyword plugin's regexes in), or scan more than the one line
it is given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Final

__all__ = [
    "ASSIGNMENT_NEEDLE",
    "PROSE_NEEDLE",
    "REDACTED",
    "Finder",
    "assignment_finder",
    "basic_finder",
    "docker_auth_finder",
    "keyword_finder",
    "prose_finder",
    "url_finder",
]

REDACTED: Final = "[REDACTED]"

# Where one line rule finds secrets in one line, (start, end) pairs; given the offsets where its
# needle matched (anchored rules, when known), it tries only those, else it scans the line.
Finder = Callable[[str, Sequence[int] | None], Iterator[tuple[int, int]]]

# `password=…`, `API_KEY: …`, `export TOKEN=…`: the keyword plugin wants the value in quotes (its
# unquoted regexes swallow the rest of the line) and has no `token` keyword at all.
ASSIGNMENT_NEEDLE = (
    r"api_?key|auth_?key|service_?key|account_?key|db_?key|database_?key|priv_?key"
    r"|private_?key|client_?key|db_?pass|database_?pass|key_?pass|password|passwd|pwd|secret"
    r"|contraseña|contrasena|access_?key|token"
)  # the keyword plugin's DENYLIST, plus access_key and token
_ASSIGNMENT = re.compile(
    rf"(?P<word>{ASSIGNMENT_NEEDLE})"
    r"(?P<rest>[A-Za-z0-9_.-]{0,64})['\"]?[ \t]*(?P<sep>:=|=(?![=>])|:(?!:))[ \t]*"
    r"(?P<quote>['\"`]?)(?P<value>[^\s'\"`,;&()\[\]{}<>]+)",
    re.IGNORECASE,
)
_REFERENCE = re.compile(r"[$%]|(?:~|\.{1,2})?/|[A-Za-z][A-Za-z0-9+.-]*://")
_CODE_REFERENCE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_PLACEHOLDERS = frozenset(
    {
        "none", "null", "nil", "true", "false", "undefined", "empty", "redacted", "required",
        "optional", "str", "string", "bytes", "secretstr", "any", "int", "bool",
    }
)  # fmt: skip

# Values docs and examples put where a secret goes: one character repeated, "your_…", changeme.
_FILLER = re.compile(
    r"(.)\1{3,}|(?i:your[_-][\w-]*|[\w-]*[_-]here|change[_-]?me|replace[_-]?me|placeholder"
    r"|dummy|example|redacted|secret|password|passw0rd|token|todo|tbd|fixme)",
)


def _matches(
    pattern: re.Pattern[str], line: str, starts: Sequence[int] | None
) -> Iterator[re.Match[str]]:
    """Yield what pattern.finditer(line) would, trying only at starts when they are given."""
    if starts is None:
        yield from pattern.finditer(line)
        return
    end = 0
    for start in starts:
        if start >= end and (m := pattern.match(line, start)):
            end = m.end()
            yield m


def keyword_finder(pattern: re.Pattern[str], group: int, keyed: bool) -> Finder:
    """Return a finder for one of the keyword plugin's quoted-value regexes.

    ``keyed``: the regex starts with its keyword (group 1), whose whole name is checked for a
    name about the secret (``"secret_id": "…"``) rather than of it.
    """

    def find(line: str, starts: Sequence[int] | None) -> Iterator[tuple[int, int]]:
        for m in _matches(pattern, line, starts):
            start, end = m.span(group)
            if end <= start or not _is_literal(line[start:end]):
                continue
            if keyed and _names_a_setting(line, m.start(1)):
                continue
            yield start, end

    return find


def assignment_finder(line: str, starts: Sequence[int] | None) -> Iterator[tuple[int, int]]:
    """Yield the values of `key = value` / `key: value` assignments that look like secrets."""
    for m in _matches(_ASSIGNMENT, line, starts):
        start = m.start("value")
        value = m.group("value").rstrip(".:")
        end = start + len(value)
        if not _is_literal(value) or _names_a_setting(line, m.start("word")):
            continue  # secret_id: <uuid>, token_type: bearer, api_key_header: X-Api-Key
        if value.isdigit() and (m.group("rest") or len(value) < 6):
            continue  # password_min_length: 12, secret_version: 3 are settings about a secret
        if not m.group("quote") and (
            _CODE_REFERENCE.fullmatch(value) or line[end : end + 1] in ("(", "[")
        ):
            continue  # settings.SECRET_KEY, get_password(), os.environ["TOKEN"]
        # `Password: rotate it monthly` is prose: an unquoted word with more words after it
        # (`API_TOKEN=abcdefghij ./deploy.sh` is a credential, and a command).
        prose = (
            m.group("sep") == ":"
            and not m.group("quote")
            and value.isalpha()
            and _MORE_WORDS.match(line, end)
        )
        if prose or (value.isalpha() and value.lower() in _STATUS_WORDS):
            continue
        word, rest = m.group("word"), m.group("rest")
        if word.lower() == "token":
            if rest[:1].isalpha() or value.isdigit() or len(value) < 8:
                continue  # tokenizer=cl100k_base, max_tokens=4096 name other things
            if value.isalpha() and word.islower() and _SPACED_EQUALS.search(m.group()):
                continue  # token = response: Python code naming a variable
        elif not value.isalpha() and len(value) < 4:
            continue
        elif value.isalpha() and (len(value) < 4 or line.lstrip().startswith("#")):
            continue  # `## Password: Rotation` is a heading
        yield start, end


# Last words of a key that names something about a secret, not the secret itself.
_SETTING_WORDS = frozenset(
    {
        "id", "ids", "uuid", "sha", "type", "types", "header", "headers", "name", "names", "url",
        "urls", "uri", "path", "paths", "file", "files", "dir", "length", "len", "size", "ttl",
        "format", "prefix", "suffix", "field", "fields", "env", "var", "version", "count",
        "limit", "rounds", "policy", "mode", "kind", "scope", "scopes", "endpoint", "location",
        "provider", "source", "label", "param", "arn", "ref", "expiry", "expires", "lifetime",
        "timeout", "min", "max", "regex", "pattern", "algorithm", "alg", "method", "strategy",
        "backend", "rotation", "days", "seconds", "required", "enabled", "hint", "description",
        "help", "placeholder", "title", "column", "table", "attr", "attribute", "class",
        "schema", "template", "budget", "usage", "santa",
    }
)  # fmt: skip
# Values a key takes that say how a secret is, not what it is (`Password: unchanged`).
_STATUS_WORDS = frozenset(
    {
        "yes", "no", "on", "off", "enabled", "disabled", "unset", "set", "unchanged", "expired",
        "rotated", "revoked", "missing", "hidden", "masked", "encrypted", "hashed", "stored",
        "invalid", "valid", "default", "auto", "automatic", "generated", "random", "omitted",
        "provided", "supplied", "inherited", "bearer", "basic", "digest", "oauth", "jwt",
        "unknown", "n", "na", "tba", "same", "different", "see", "ask", "vault", "keychain",
        "sensitive", "secure", "insecure", "plaintext", "plain", "text", "manual", "managed",
    }
)  # fmt: skip
_MORE_WORDS = re.compile(r"[ \t]+[A-Za-z]")  # `password: hunter ; next` is no prose
_SPACED_EQUALS = re.compile(r"[ \t]=[ \t]")
_IDENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_WORD_PART = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _names_a_setting(line: str, start: int) -> bool:
    """Tell whether the key around ``start`` names a setting about a secret (``secret_id``)."""
    left = start
    while left > 0 and line[left - 1] in _IDENT_CHARS:
        left -= 1
    right = start
    while right < len(line) and line[right] in _IDENT_CHARS and line[right] != ".":
        right += 1
    key = line[left:right].rstrip("-_")
    if "." in key:
        key = key.rsplit(".", 1)[1]
    parts = _WORD_PART.findall(key)
    return bool(parts) and parts[-1].lower() in _SETTING_WORDS


# A password in a URL's authority, the scheme optional after `name:` (a title rebuilt from
# `mysql://root:pw@host` may read `mysql: //root:pw@host`). The password may hold `@`, `!` and `$`
# (notes write them raw): it runs to the last `@` followed by a host name and the host's end.
# `host:8443/a@b` is a port and a path, not a password.
_URL_CREDENTIAL = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*:[ \t]*//[^\s/?#@:'\"<>()\[\]{}]*:(?!\d+(?:[/?#\s'\"]|$))"
    r"(?P<pw>[^\s'\"<>`]+?)@(?=[A-Za-z0-9\[][A-Za-z0-9._~%\[\]:-]*(?:[/?#\s'\",;)>\]`]|$))"
)


def url_finder(line: str, starts: Sequence[int] | None) -> Iterator[tuple[int, int]]:
    """Yield the password of ``scheme://user:password@host`` (a ${VAR} or <pw> left alone)."""
    for m in _URL_CREDENTIAL.finditer(line):
        value = m.group("pw")
        if value.startswith(("$", "{", "<")) or not value.strip("*x"):
            continue
        yield m.span("pw")


# A Docker config.json entry: "auth": base64 of `user:password`.
_DOCKER_AUTH = re.compile(r"""(?i)["']auth["'][ \t]*:[ \t]*["']([A-Za-z0-9+/]{8,}={0,2})["']""")


def docker_auth_finder(line: str, starts: Sequence[int] | None) -> Iterator[tuple[int, int]]:
    """Yield Docker ``"auth"`` values: base64 of ``user:password`` (or 20+ characters of it)."""
    import base64
    import binascii

    for m in _DOCKER_AUTH.finditer(line):
        value = m.group(1)
        try:
            decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        if b":" in decoded or len(value) >= 20:
            yield m.span(1)


# Prose that says what a secret is: "the staging admin password is Xk9fPq2L", "the aws secret
# access key was `…`", "the token for ci is now …". Only a value that looks like a credential
# counts (see _credential_like): "the password is rotated monthly" is prose.
_PROSE = re.compile(
    r"(?i)(?<![A-Za-z])(?:pass(?:word|phrase|code)?|passwd|pwd|secret|token|key|credentials?"
    r"|pin)s?(?:[ \t]+(?:for|of|on|to)[ \t]+[\w.@/:-]+)?"
    r"[ \t]+(?:(?:is[ \t]+|was[ \t]+|has[ \t]+been[ \t]+)?(?:set|changed|reset|rotated|updated)"
    r"[ \t]+to|is|was|are|were|equals|reads|became)(?:[ \t]+(?:now|still|just))?[ \t]*:?[ \t]+"
    r"(?P<quote>[\"'`]?)(?P<value>[^\s\"'`]+)"
)
PROSE_NEEDLE = "pass|pwd|secret|token|key|credential|pin"
# Not + (ctrl+c), / (a path), = or | (an expression): those mix words that are no password.
_SYMBOLS = frozenset("!@#$%^&*~?")
# Names of algorithms, versions and encodings: "the key is sha256", "the token is v2".
_WELL_KNOWN = re.compile(
    r"(?i)(?:sha|md|aes|rsa|ecdsa|ed|utf|base|http|oauth|tls|ssl|ipv|gpt|hs|rs|es|ps|v|x|cl)"
    r"\d+[a-z]?"
)


def prose_finder(line: str, starts: Sequence[int] | None) -> Iterator[tuple[int, int]]:
    """Yield the value of "the X password is VALUE" when VALUE looks like a credential."""
    for m in _PROSE.finditer(line):
        start = m.start("value")
        value = m.group("value")
        if not m.group("quote"):
            value = value.rstrip(".,;:!?)")
        if _credential_like(value, quoted=bool(m.group("quote"))):
            yield start, start + len(value)


def _credential_like(value: str, *, quoted: bool) -> bool:
    """Tell whether a word in prose is a credential: mixed kinds of characters, not a name."""
    if not _is_literal(value) or _CODE_REFERENCE.fullmatch(value) or REDACTED in value:
        return False
    if quoted:
        return len(value) >= 4
    if len(value) < 6 or re.search(r"-[a-z]{3,}$", value):
        return False  # "the token is JWT-based"
    if any(ch in _SYMBOLS for ch in value) and any(ch.isalnum() for ch in value):
        return True
    for part in re.split(r"[-_.]", value):
        if _WELL_KNOWN.fullmatch(part):
            continue
        digits = any(ch.isdigit() for ch in part)
        kinds = digits + any(ch.islower() for ch in part) + any(ch.isupper() for ch in part[1:])
        if len(part) >= 6 and (kinds == 3 or (kinds == 2 and digits)):
            return True  # hunter2, Xk9fPq2L
        if len(part) >= 16 and kinds >= 2:
            return True  # a long mixed-case run: wJalrXUtnFEMIbPxRfiCY…
    return False


_BASIC = re.compile(r"(?i:basic)[ \t]+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")


def basic_finder(line: str, starts: Sequence[int] | None) -> Iterator[tuple[int, int]]:
    """Yield `Basic <base64>` credentials: the base64 must decode to ``user:password``."""
    import base64
    import binascii

    for m in _BASIC.finditer(line):
        value = m.group(1)
        try:
            decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        if b":" in decoded:
            yield m.span(1)


_YAML_TAG = re.compile(r"!{1,2}[A-Za-z]+(?:[.:/][\w.:/-]*)?")  # !vault, !Ref, !!str, !tag:x.org/y


def _is_literal(value: str) -> bool:
    """Tell whether a keyword's value is a literal, not a placeholder, reference, path or URL."""
    if not any(ch.isalnum() for ch in value) or value.lower() in _PLACEHOLDERS:
        return False
    if _YAML_TAG.fullmatch(value):
        return False  # password: !vault | (Ansible), !secret db_password (Home Assistant)
    if _FILLER.fullmatch(value):
        return False  # xxxxxxxx, ********, your-token-here, changeme
    if value.startswith(("{", "<")) and value.endswith(("}", ">")):
        return False  # {{ template }}, <your-key-here>
    return not _REFERENCE.match(value)  # $VAR, ${VAR}, %VAR%, /a/path, ~/a/path, https://host/
