"""A lake's warm server on disk: ``$LBREPLAY_CACHE_DIR/servers/<sha256 of the lake path>[:16]/`` holds ``state.json``
(pid, socket, lake, idle timeout, code stamp), ``sock`` (the Unix socket commands arrive on), ``lock`` (the flock that
makes one server per lake and orders a starting client against an idle stop), ``used`` (its mtime: the last command)
and ``server.log``. The folder is private to the user (mode 0700): whoever can connect runs commands as the user.

Stdlib only: the client imports this before deciding to forward a command, so it must stay cheap to import.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from lbreplay.errors import UsageError
from lbreplay.paths import CACHE_DIR, CONF_DIR

ENV_WARM = "LBREPLAY_WARM"
ENV_IDLE = "LBREPLAY_WARM_IDLE"
DEFAULT_IDLE_SECONDS = 900.0
SOCKET_NAME = "sock"
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes with its NUL; stay clear of it
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # lib/lbreplay


@dataclass(frozen=True)
class ServerState:
    """What ``state.json`` holds. ``ready``: its Spark session is up; ``stamp``: :func:`code_stamp` at its start."""

    pid: int
    socket: str
    lake: str
    idle_seconds: float
    started: float
    stamp: str
    ready: bool = False


def idle_seconds() -> float:
    """``LBREPLAY_WARM_IDLE`` (seconds a server waits for a next command), default :data:`DEFAULT_IDLE_SECONDS`."""
    text = os.environ.get(ENV_IDLE, "")
    try:
        value = float(text) if text else DEFAULT_IDLE_SECONDS
    except ValueError:
        raise UsageError(f"{ENV_IDLE} must be a number of seconds, got {text!r}") from None
    if value <= 0:
        raise UsageError(f"{ENV_IDLE} must be positive, got {text!r}")
    return value


def state_dir(lake: str) -> Path:
    """``$LBREPLAY_CACHE_DIR/servers/<sha256 of the lake path>[:16]``: the lake's server files."""
    return CACHE_DIR / "servers" / hashlib.sha256(lake.encode()).hexdigest()[:16]


def socket_path(folder: Path) -> str:
    return str(folder / SOCKET_NAME)


def code_stamp() -> str:
    """What a server's answers depend on besides the lake: the interpreter, every lbreplay module and Pulsar key
    list (path, size, mtime) and the conf directory. A client whose stamp differs from the server's (lbreplay was
    edited or upgraded) restarts the server rather than run old code."""
    entries: list[tuple[str, int, int]] = []
    for root in (PACKAGE_DIR, CONF_DIR / "pulsar"):
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".yaml", ".txt"):
                st = path.stat()
                entries.append((str(path), st.st_size, st.st_mtime_ns))
    text = repr((sys.executable, str(CONF_DIR), entries))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_state(folder: Path) -> ServerState | None:
    try:
        return ServerState(**json.loads((folder / "state.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def write_state(folder: Path, state: ServerState) -> None:
    """``state.json`` replaced atomically (written under a temporary name, then renamed)."""
    tmp = folder / f"state.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(asdict(state)), encoding="utf-8")
    tmp.replace(folder / "state.json")


def remove_state(folder: Path, pid: int) -> None:
    """Remove ``state.json`` and the socket if they are ``pid``'s."""
    state = read_state(folder)
    if state is not None and state.pid == pid:
        (folder / "state.json").unlink(missing_ok=True)
        Path(state.socket).unlink(missing_ok=True)


def touch(folder: Path) -> None:
    """Mark the lake's server as used now (its idle clock starts again)."""
    (folder / "used").touch()


def idle_for(folder: Path) -> float:
    """Seconds since the lake's server was last used."""
    try:
        return max(0.0, time.time() - (folder / "used").stat().st_mtime)
    except OSError:
        return 0.0


@contextlib.contextmanager
def locked(folder: Path, blocking: bool = True) -> Iterator[bool]:
    """The lake's server lock (flock): yields whether it is held (always True when ``blocking``)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fh: IO[str] = open(folder / "lock", "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        fh.close()


def is_server_process(pid: int) -> bool:
    """Whether ``pid`` runs and is a warm server (its command line, where ``/proc`` shows it)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        return b"lbreplay.warm_server" in cmdline.read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no /proc (macOS): the pid is taken for the server
    except OSError:
        return False
