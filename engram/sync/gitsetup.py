"""Setting git up for the canonical files: the attributes, the merge and diff drivers.

``install`` writes the two ``.gitattributes`` lines and the ``[merge "engram"]`` section of the
repository's own config, and the diff driver that shows memories as readable blocks
(``diff=engram`` on memories.jsonl, ``[diff "engram"] textconv``: ``engram.sync.gitdiff``);
``check_setup`` tells what is there (cheap: no dulwich) and ``runs`` whether a configured
command can run. Also here: ``discover``, opening the repository that holds a folder.

What it must not do: run ``git`` in a subprocess (dulwich only, imported inside functions), or
raise for a repository state a user can be in where a value says it (no repo: ``[]`` or
``Setup(repo=False)``). It writes only git's files: ``.gitattributes`` (through
``gitmerge.write_file``) and the repository's config.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram import gitfiles
from engram.errors import InvalidInput
from engram.fileio import NotAFile, read_own
from engram.plural import counted
from engram.sync.gitmerge import write_file

if TYPE_CHECKING:
    from dulwich.repo import Repo

__all__ = ["ATTRIBUTES", "DRIVER_NAME", "Setup", "check_setup", "discover", "install", "runs"]

ATTRIBUTES: Final = (
    ".engram/memories.jsonl merge=engram diff=engram",
    ".engram/manifest.json merge=engram",
)
MERGE_ATTRIBUTE: Final = "merge=engram"
DIFF_ATTRIBUTE: Final = "diff=engram"
DRIVER_NAME: Final = "engram"
DRIVER_LABEL: Final = "engram memories"
_SECTION: Final = (b"merge", DRIVER_NAME.encode())
_DIFF_SECTION: Final = (b"diff", DRIVER_NAME.encode())


@dataclass
class Setup:
    """What of the git integration is installed in a repository."""

    attributes: bool  # .gitattributes at the work-tree root sets merge=engram on both files
    driver: bool  # the repository's config has [merge "engram"] with a driver command
    repo: bool  # a git work tree was found at or above the root
    command: str = field(default="", compare=False)  # that driver command, as configured
    diff_attribute: bool = False  # .gitattributes sets diff=engram on memories.jsonl
    diff: bool = False  # the repository's config has [diff "engram"] with a textconv command
    diff_command: str = field(default="", compare=False)  # that textconv command, as configured


def open_repo(root: Path, *, objects: bool = False) -> Repo:
    """Open the repository holding ``root`` (root or a folder above it), as dulwich's
    ``Repo.discover`` does, once ``gitfiles.locate`` found the files it reads regular.

    Raises NotGitRepository when there is none, ``gitfiles.GitUnreadable`` (an OSError) when a
    file opening it reads is a FIFO or a device (reading it could wait forever). ``objects``:
    the loose objects are checked too (a reader of history; some milliseconds).
    """
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    folder = gitfiles.locate(root, objects=objects)
    if folder is None:
        raise NotGitRepository(f"no git repository at or above {root}")
    return Repo(folder)


def discover(root: Path, *, objects: bool = False, strict: bool = False) -> Repo | None:
    """Open the repository holding root (root or a folder above it); None when there is none
    or it cannot be read (``open_repo``, which ``objects`` is passed to).

    ``strict``: a repository whose files could not be read without waiting forever (a FIFO
    where git keeps a file) is an InvalidInput naming the file, not None.
    """
    from dulwich.errors import NotGitRepository

    if not root.is_dir():
        return None
    try:
        return open_repo(root, objects=objects)
    except gitfiles.GitUnreadable as exc:
        if strict:
            raise InvalidInput(str(exc), hint=gitfiles.HINT) from exc
        return None
    except (NotGitRepository, OSError, ValueError, KeyError):
        return None


def _attributes_by_pattern(text: str) -> dict[str, set[str]]:
    """Return the attributes each pattern of a .gitattributes text sets (its lines together)."""
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        words = line.split()
        if words and not words[0].startswith("#"):
            found.setdefault(words[0], set()).update(words[1:])
    return found


def _missing_attributes(path: Path) -> list[tuple[str, list[str]]]:
    """Return each pattern of ATTRIBUTES with the attributes .gitattributes lacks for it."""
    try:
        text = read_own(path)[0].decode("utf-8", "replace")
    except FileNotFoundError:
        text = ""
    except NotAFile:  # a link to /dev/zero or a FIFO: none of its lines can be read
        text = ""
    present = _attributes_by_pattern(text)
    missing = []
    for line in ATTRIBUTES:
        pattern, *wanted = line.split()
        lacking = [word for word in wanted if word not in present.get(pattern, set())]
        if lacking:
            missing.append((pattern, lacking))
    return missing


def check_setup(root: Path) -> Setup:
    """Tell whether the attributes and the merge driver are installed in root's repository.

    Cheap (no dulwich): commands run it to offer the driver to a fresh clone.
    """
    from engram.config import git_repo_config

    found = git_repo_config(Path(root)) if Path(root).is_dir() else None
    if found is None:
        return Setup(attributes=False, driver=False, repo=False)
    top, parser = found
    lacking = {word for _, words in _missing_attributes(top / ".gitattributes") for word in words}
    driver = parser.get(f'merge "{DRIVER_NAME}"', "driver", fallback="").strip().strip('"')
    textconv = parser.get(f'diff "{DRIVER_NAME}"', "textconv", fallback="").strip().strip('"')
    return Setup(
        attributes=MERGE_ATTRIBUTE not in lacking,
        driver=bool(driver),
        repo=True,
        command=driver,
        diff_attribute=DIFF_ATTRIBUTE not in lacking,
        diff=bool(textconv),
        diff_command=textconv,
    )


def runs(command: str) -> bool:
    """Say whether a configured driver command's program can be run here (found, executable).

    git runs it through the shell: a bare name must be on PATH, a path must exist.
    """
    try:
        program = shlex.split(command)[0] if command.strip() else ""
    except ValueError:
        return False
    if not program:
        return False
    if "/" in program:
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program) is not None


def install(root: Path, command: str = "engram") -> list[str]:
    """Write the missing .gitattributes lines, merge and diff driver config; say what was done."""
    repo = discover(Path(root))
    if repo is None:
        return []
    done: list[str] = []
    with contextlib.closing(repo):
        attributes = Path(repo.path) / ".gitattributes"
        missing = _missing_attributes(attributes)
        if missing:
            _add_attributes(attributes, missing)
            said = "; ".join(f"{pattern} {' '.join(words)}" for pattern, words in missing)
            done.append(f"added {counted(len(missing), 'attribute line')} to {attributes}: {said}")
        wanted = f"{command} merge-driver %O %A %B %P"
        textconv = f"{command} textconv"
        config = repo.get_config()
        changed = False
        current = _config_value(config, _SECTION, b"driver")
        if current != wanted or _config_value(config, _SECTION, b"name") != DRIVER_LABEL:
            config.set(_SECTION, b"name", DRIVER_LABEL.encode())
            config.set(_SECTION, b"driver", wanted.encode())
            changed = True
            verb = "registered" if current is None else "updated"
            done.append(
                f'{verb} the git merge driver [merge "{DRIVER_NAME}"] in {config.path}: '
                f"driver = {wanted}"
            )
        current = _config_value(config, _DIFF_SECTION, b"textconv")
        if current != textconv or _config_value(config, _DIFF_SECTION, b"cachetextconv") != "true":
            # git caches each blob's rendering under refs/notes/textconv/engram, keyed by this
            # command: a changed command (another installation) renders every blob again.
            config.set(_DIFF_SECTION, b"textconv", textconv.encode())
            config.set(_DIFF_SECTION, b"cachetextconv", b"true")
            changed = True
            verb = "registered" if current is None else "updated"
            done.append(
                f'{verb} the git diff driver [diff "{DRIVER_NAME}"] in {config.path}: '
                f"textconv = {textconv} (git diff, log -p and show print memories as blocks)"
            )
        if changed:
            commands = ((_SECTION, b"driver", wanted), (_DIFF_SECTION, b"textconv", textconv))
            _write_config(config, [(sec, key, value.encode()) for sec, key, value in commands])
    return done


def _write_config(config: Any, commands: list[tuple[tuple[bytes, bytes], bytes, bytes]]) -> None:
    """Write the config through dulwich, quoting each command value that holds ``;``.

    dulwich quotes a value with ``#`` but not one with ``;``, which git reads as the start of a
    comment: the command would be cut there. Such a line is rewritten quoted.
    """
    from dulwich.file import GitFile

    buffer = io.BytesIO()
    config.write_to_file(buffer)
    data = buffer.getvalue()
    for section, key, value in commands:
        data = _quoted(data, section, key, value)
    with GitFile(config.path, "wb") as handle:
        handle.write(data)


def _quoted(data: bytes, section: tuple[bytes, bytes], key: bytes, value: bytes) -> bytes:
    """Return config bytes with ``key = value`` of section quoted when value holds ``;``."""
    escaped = value.replace(b"\\", b"\\\\").replace(b"\n", b"\\n").replace(b"\t", b"\\t")
    escaped = escaped.replace(b'"', b'\\"')
    plain = b"\t" + key + b" = " + escaped + b"\n"
    header = data.find(b"[" + section[0] + b' "' + section[1] + b'"]')
    at = data.find(plain, max(header, 0))
    if b";" in value and at >= 0:
        quoted = b"\t" + key + b' = "' + escaped + b'"\n'
        data = data[:at] + quoted + data[at + len(plain) :]
    return data


def _config_value(config: Any, section: tuple[bytes, bytes], name: bytes) -> str | None:
    try:
        value = config.get(section, name)
    except KeyError:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else None


def _add_attributes(path: Path, missing: list[tuple[str, list[str]]]) -> None:
    """Add attributes to .gitattributes, keeping its content and its line endings.

    A pattern that has a line already gets the attributes appended to its last line (an older
    engram's ``.engram/memories.jsonl merge=engram`` gains ``diff=engram``); a new one a line.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    newline = b"\r\n" if b"\r\n" in data else b"\n"
    lines = data.splitlines(keepends=True)
    if lines and not lines[-1].endswith(b"\n"):
        lines[-1] += newline
    for pattern, words in missing:
        added = " ".join(words).encode("utf-8")
        at = [n for n, line in enumerate(lines) if line.split()[:1] == [pattern.encode()]]
        if at:
            line = lines[at[-1]]
            body = line.rstrip(b"\r\n")
            lines[at[-1]] = body + b" " + added + line[len(body) :]
        else:
            lines.append(pattern.encode("utf-8") + b" " + added + newline)
    write_file(path, b"".join(lines))
