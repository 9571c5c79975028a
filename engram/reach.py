"""How a short-lived engram process reaches its store's daemon, with the standard library only.

A hook or a command line that a daemon answers must not pay for engram's own imports (pathlib,
dataclasses and the core cost a fresh process more than the answer), so what it needs to find
the daemon lives here: the store of a folder (``find_store``), its socket (``socket_path``,
which ``engram.daemon.protocol`` uses too, so every process computes the same one), one request and
its answer (``call``), and starting a daemon in the background for the next call (``start``).

``start`` runs the daemon as ``engram -C ROOT daemon --idle SECONDS --on-first-use``: the
composition root's daemon, which answers the command line's forwarded calls too
(``engram_cli``). It runs in its own session, so a terminal or agent that dies does not take
it, leaves when idle, and the daemon lock keeps it one per store. ``ENGRAM_DAEMON=off`` keeps
every call in process; the setting ``daemon.auto: false`` keeps daemons from starting on
their own (``turned_off``).
"""

from __future__ import annotations

import json
import os
import socket
import sys

TYPE_CHECKING = False  # typing costs a hook process 10 ms: annotations only (mypy reads this)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import IO, Any, Final

ENGRAM_DIR: Final = ".engram"  # engram.config.ENGRAM_DIR, without importing the settings
OFF_MARKER: Final = ("state", "daemon.off")  # left by a daemon its settings turned off
LOCK: Final = ("state", "daemon.lock")  # engram.daemon's lock: "PID SOCKET" while it serves
SOCKET_NAME: Final = "engram.sock"
SUN_PATH_MAX: Final = 107  # bytes of a Unix socket path, the terminating NUL left out (Linux)
OFF_VALUES: Final = frozenset({"0", "off", "false", "no"})
IDLE: Final = 900  # seconds a daemon started on first use stays without a request
DAEMON_SWITCH: Final = "ENGRAM_DAEMON"
IDLE_SETTING: Final = "ENGRAM_DAEMON_IDLE"


def off(variable: str) -> bool:
    """Tell whether the environment variable ``variable`` says off (0, off, false, no)."""
    return os.environ.get(variable, "").strip().lower() in OFF_VALUES


def find_store(folder: str) -> str | None:
    """Return the nearest folder at or above ``folder`` holding ``.engram/`` (None: none)."""
    here = os.path.realpath(folder)
    while True:
        if os.path.isdir(os.path.join(here, ENGRAM_DIR)):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def socket_path(engram_dir: str) -> str:
    """Return the daemon socket of a store: ``state/engram.sock``, or a short path if too long.

    A Unix socket path holds at most 107 bytes. A store deeper than that gets a socket named by
    the hash of the store's path in a folder only this user may use: ``$XDG_RUNTIME_DIR/engram``
    when the runtime folder is this user's and private, else ``<tmp>/engram-<uid>``. Every
    process computes the same path, so a client still finds its daemon.
    """
    engram_dir = os.path.abspath(engram_dir)
    path = os.path.join(engram_dir, "state", SOCKET_NAME)
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        return path
    import hashlib

    digest = hashlib.sha256(os.fsencode(os.path.realpath(engram_dir))).hexdigest()[:20]
    return os.path.join(short_folder(), f"{digest}.sock")


def short_folder() -> str:
    """Return the private folder of this user's short socket paths (it may not exist yet)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and private_folder(runtime) is None:
        return os.path.join(runtime, "engram")
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"engram-{os.getuid()}")


def private_folder(folder: str) -> str | None:
    """Return why ``folder`` is not a real folder of this user that no one else may write.

    None when it is. A socket in a folder another user owns or may write to can be swapped
    for theirs (as ssh-agent and tmux check for theirs).
    """
    import stat

    try:
        info = os.lstat(folder)
    except OSError as exc:
        return f"{folder}: {exc.strerror}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{folder} is not a folder" + (" (a link)" if stat.S_ISLNK(info.st_mode) else "")
    if info.st_uid != os.getuid():
        return f"{folder} belongs to uid {info.st_uid}, not to this user ({os.getuid()})"
    if info.st_mode & 0o022:
        return f"{folder} may be written by others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def unsafe_socket(path: str) -> str | None:
    """Return why the socket file ``path`` is not one this user's daemon made (None: it is).

    It must be a socket itself (never a link to one), owned by this user, in a folder of this
    user's that no one else may write to. The peer's credentials are checked once connected.
    """
    import stat

    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if not stat.S_ISSOCK(info.st_mode):
        return f"{path} is not a socket" + (" (a link)" if stat.S_ISLNK(info.st_mode) else "")
    if info.st_uid != os.getuid():
        return f"{path} belongs to uid {info.st_uid}, not to this user ({os.getuid()})"
    return private_folder(os.path.dirname(path))


def socket_of(root: str) -> str:
    """Return where the daemon of the store in the folder ``root`` listens.

    The socket its running daemon wrote in its lock file (``PID SOCKET``: one started with
    ``--socket`` listens elsewhere), else the default one (``socket_path``). The lock is taken
    only when this user's daemon wrote it (owned by this user, a regular file only its owner
    may read or write, as the daemon makes it): a file a repository commits there names
    nothing. Either way the socket is checked before anything is sent (``connect``).
    """
    engram_dir = os.path.join(root, ENGRAM_DIR)
    holder: list[str] = []
    try:
        fd = os.open(os.path.join(engram_dir, *LOCK), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        fd = -1
    if fd >= 0:
        try:
            import stat

            info = os.fstat(fd)
            if (
                stat.S_ISREG(info.st_mode)
                and info.st_uid == os.getuid()
                and not info.st_mode & 0o077
            ):
                holder = os.read(fd, 4096).decode("utf-8", "replace").split(maxsplit=1)
        except OSError:
            holder = []
        finally:
            os.close(fd)
    if len(holder) == 2 and os.path.isabs(holder[1].strip()):
        return holder[1].strip()
    return socket_path(engram_dir)


def peer_uid(sock: socket.socket) -> int | None:
    """Return the uid of the process at the other end of a Unix socket (None: unknown here).

    Linux tells it with ``SO_PEERCRED``; elsewhere None, and the socket file's owner, checked
    before connecting, is all there is.
    """
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    import struct

    size = struct.calcsize("3i")
    try:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, size))
    except OSError:
        return None
    return int(uid)


HELLO: Final = "engram_hello"  # the daemon's first answer: the store it serves
HELLO_MAX: Final = 64 * 1024  # bytes of its answer line read at most


def open_daemon(root: str, timeout: float) -> tuple[socket.socket, IO[bytes]] | None:
    """Return a connection to the daemon of the store in ``root``, proven to be it; else None.

    Proven before a request carries anything: the socket file is this user's (``unsafe_socket``),
    the process that accepted runs as this user (its peer credentials), and it answers
    ``engram_hello`` with this very store (its real path). A socket another user planted, a
    lock file a repository committed, or the daemon of another store of this user's all give
    None, and the caller answers in process. The connection comes with its reader.
    """
    path = socket_of(root)
    if unsafe_socket(path) is not None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    reader = None
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        peer = peer_uid(sock)
        if peer is not None and peer != os.getuid():
            raise OSError(f"{path} is served by uid {peer}")
        sock.sendall(json.dumps({"id": 0, "method": HELLO, "params": {}}).encode() + b"\n")
        reader = sock.makefile("rb")
        response = json.loads(reader.readline(HELLO_MAX) or b"null")
        data = response.get("data") if isinstance(response, dict) else None
        store = data.get("store") if isinstance(data, dict) else None
        if not isinstance(store, str) or store != os.path.realpath(root):
            raise OSError(f"{path} serves another store ({store!r})")
    except (OSError, ValueError):
        if reader is not None:
            reader.close()
        sock.close()
        return None
    return sock, reader


def call(
    root: str, method: str, params: Mapping[str, Any], *, connect: float, answer: float
) -> Any:
    """Return the data of the daemon's answer to one request, or None when none answers.

    None also when the daemon refuses (an older daemon without the method, a bad request) or
    cannot be proven to be this store's (``open_daemon``): the caller then does the work
    itself. One request line of ``engram.daemon.protocol``'s protocol, one response line;
    ``connect`` and ``answer`` bound the waits, in seconds.
    """
    opened = open_daemon(root, connect)
    if opened is None:
        return None
    sock, reader = opened
    request = {"id": 1, "method": method, "params": params}
    try:
        with sock, reader:
            sock.settimeout(answer)
            sock.sendall(json.dumps(request, ensure_ascii=False).encode("utf-8") + b"\n")
            response = json.loads(reader.readline() or b"null")
    except (OSError, ValueError):
        return None  # restarting, busy past the wait
    if not isinstance(response, dict) or not response.get("ok"):
        return None
    return response.get("data")


def idle_seconds() -> float:
    """Return how long a daemon started on first use stays idle (``ENGRAM_DAEMON_IDLE``)."""
    text = os.environ.get(IDLE_SETTING, "").strip()
    try:
        seconds = float(text) if text else IDLE
    except ValueError:
        return IDLE  # a mistyped setting must not leave every call without its daemon
    return seconds if seconds > 0 else IDLE


def accepting(path: str) -> bool:
    """Tell whether a process accepts connections on the Unix socket ``path``."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.05)
            sock.connect(path)
    except OSError:
        return False
    return True


def build() -> str:
    """Return a signature of the engram code this process runs, as it is on disk now.

    engram's version, and the number and newest modification time of its modules' files. A
    daemon leaves once the code on disk is not the code it runs (an upgrade, a pull of engram
    itself), so that the next call starts one that runs the new code.
    """
    from engram import __version__

    count, newest = 0, 0
    folders = [os.path.dirname(os.path.abspath(__file__))]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append(entry.path)
                elif entry.name.endswith(".py"):
                    count += 1
                    newest = max(newest, entry.stat().st_mtime_ns)
    return f"{__version__}:{count}:{newest}"


def signature(path: str) -> str:
    """Return what tells a file's versions apart cheaply (size, mtime, inode; "" if absent)."""
    try:
        info = os.stat(path)
    except OSError:
        return ""
    return f"{info.st_size}:{info.st_mtime_ns}:{info.st_ino}"


def turned_off(root: str) -> bool:
    """Tell whether the store's settings turn its daemon off (``daemon.auto: false``).

    Reading the settings costs more than a client may spend, so the daemon decides: started on
    first use with the setting off, it leaves at once and writes ``state/daemon.off``, naming
    the settings files it read and their signatures. While none of them changed, no daemon is
    started again; once one did, the next start decides anew.
    """
    try:
        with open(os.path.join(root, ENGRAM_DIR, *OFF_MARKER), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return False
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not files:
        return False
    return all(isinstance(seen, str) and signature(path) == seen for path, seen in files.items())


def start(root: str) -> None:
    """Start the store's daemon in the background for the next call (never waited for).

    Nothing is started while a daemon accepts on the store's socket (one busy or refusing
    this call: the daemon lock would turn the new one away anyway), nor while the store's
    settings turn it off (``turned_off``).
    """
    import subprocess

    path = socket_of(root)
    if (unsafe_socket(path) is None and accepting(path)) or turned_off(root):
        return

    subprocess.Popen(  # its own session: a terminal or agent that dies does not take it
        [
            *(sys.executable, "-m", "engram", "-C", root, "daemon"),
            *("--idle", f"{idle_seconds():g}", "--on-first-use"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


# What of a process's environment can change an answer: the engram variables a forwarded command
# reads (where the personal store is, who writes, the person's consolidation and capture polish
# commands, where the embedding model comes from and whether it may be downloaded), where the
# person's files are, the time zone, and who writes. A daemon answers a command line only for a
# caller whose environment says the same. Every other variable, another tool's ENGRAM_* among
# them (Go engram's ENGRAM_DATA_DIR), neither decides nor travels: a token never reaches the
# socket.
ANSWER_VARIABLES: Final = (
    "ENGRAM_HOME",
    "ENGRAM_AUTHOR",
    "ENGRAM_CONSOLIDATE_LLM_COMMAND",
    "ENGRAM_CAPTURE_POLISH",
    "ENGRAM_OFFLINE",
    "ENGRAM_MODEL_URL",
    "ENGRAM_MODEL_CACHE",
)
ANSWER_ENVIRONMENT: Final = ("HOME", "XDG_CONFIG_HOME", "TZ", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL")
SWITCHES: Final = frozenset({DAEMON_SWITCH, IDLE_SETTING, "ENGRAM_HOOKS"})
# engram's variables that no forwarded command reads (the HTTP server's).
SERVER_ONLY: Final = frozenset({"ENGRAM_PORT", "ENGRAM_HTTP_TOKEN"})


def environment() -> dict[str, str]:
    """Return the part of this process's environment that can change an answer."""
    environ = os.environ
    return {
        name: environ[name] for name in (*ANSWER_VARIABLES, *ANSWER_ENVIRONMENT) if name in environ
    }
