"""A warm Spark per lake: one local Spark Connect server (``org.apache.spark.sql.connect.SparkConnectPlugin``)
that outlives the commands using it, so a later ``lbreplay sql`` or ``report`` starts work in about a second
instead of paying a JVM start.

The first command on a lake starts the server (``python -m lbreplay.warm_server``: the embedded session of
``lbreplay.spark.get_spark`` — same Delta jars, JVM options and in-memory catalog with the lake's tables and views
— plus the Connect plugin on a free port of 127.0.0.1); later commands connect with
``SparkSession.builder.remote("sc://127.0.0.1:PORT")``. One server per lake: its state (``state.json``: pid,
port, lake), lock and log live under ``$LBREPLAY_CACHE_DIR/servers/<hash of the lake path>/``; the lock makes two
commands starting at once share one server. The server stops itself after ``LBREPLAY_WARM_IDLE`` seconds
(default 900) with no command and no running Spark job; ``lbreplay server stop`` stops it at once.

Only local lakes without ``--master`` and outside ``spark-submit`` use it, by default when the command runs in a
terminal; ``LBREPLAY_WARM=1`` turns it on elsewhere too (scripts), ``LBREPLAY_WARM=0`` off (every command then starts
its own embedded Spark, as before). A server that fails to start is reported on stderr and the
command runs on an embedded session instead.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from lbreplay.errors import LbReplayError, UsageError
from lbreplay.paths import CACHE_DIR

ENV_WARM = "LBREPLAY_WARM"
ENV_IDLE = "LBREPLAY_WARM_IDLE"
DEFAULT_IDLE_SECONDS = 900.0
START_TIMEOUT_SECONDS = 180.0
POLL_SECONDS = 1.0
CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
# A command's Connect session ends on the server after this long without a request (a command never waits on its
# own session's release at exit: a server gone mid-way would hold it in the client's retries).
SESSION_TIMEOUT = "10min"
# A server that went away fails the command within seconds (Connect's default retries wait 10 minutes and more).
CLIENT_RETRIES = 5
CLIENT_MAX_BACKOFF_MS = 2000


@dataclass(frozen=True)
class ServerState:
    """What ``state.json`` holds: the server's process, its port and its lake."""

    pid: int
    port: int
    lake: str
    idle_seconds: float
    started: float


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


def warm_enabled(lake: str, master: str | None) -> bool:
    """Whether a command on ``lake`` goes through the lake's warm server: a local lake, no ``--master``, not under
    spark-submit, no Spark already running in this process, and ``LBREPLAY_WARM=1`` or, when it is unset, a
    terminal on stdin or stdout (interactive use; scripts, schedulers and CI leave no server behind)."""
    setting = os.environ.get(ENV_WARM, "")
    if setting == "0" or master is not None or "://" in lake:
        return False
    if setting != "1" and not (sys.stdin.isatty() or sys.stdout.isatty()):
        return False
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is None


# ------------------------------------------------------------------------------------------------- state files
def read_state(folder: Path) -> ServerState | None:
    try:
        return ServerState(**json.loads((folder / "state.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def _write_state(folder: Path, state: ServerState) -> None:
    tmp = folder / f"state.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(asdict(state)), encoding="utf-8")
    tmp.replace(folder / "state.json")


def _remove_state(folder: Path, pid: int) -> None:
    state = read_state(folder)
    if state is not None and state.pid == pid:
        (folder / "state.json").unlink(missing_ok=True)


def touch(folder: Path) -> None:
    """Mark the lake's server as used now (its idle clock starts again)."""
    (folder / "used").touch()


@contextlib.contextmanager
def _locked(folder: Path, blocking: bool = True) -> Iterator[bool]:
    folder.mkdir(parents=True, exist_ok=True)
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
    if not cmdline.exists():
        return True
    return b"lbreplay.warm_server" in cmdline.read_bytes()


def alive(state: ServerState) -> bool:
    """The server process runs and its port accepts connections."""
    if not is_server_process(state.pid):
        return False
    try:
        with socket.create_connection(("127.0.0.1", state.port), timeout=1.0):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------------- client
def ensure_server(lake: str) -> ServerState:
    """The lake's running server, started first if there is none (under the lake's lock: one server per lake)."""
    folder = state_dir(lake)
    with _locked(folder):
        state = read_state(folder)
        if state is not None and alive(state):
            touch(folder)
            return state
        touch(folder)
        log = open(folder / "server.log", "ab")
        proc = subprocess.Popen([sys.executable, "-m", "lbreplay.warm_server", "--lake", lake],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            state = read_state(folder)
            if state is not None and state.pid == proc.pid and alive(state):
                return state
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        if proc.poll() is None:
            proc.terminate()
        raise LbReplayError(f"the warm Spark server for {lake} did not start (log: {folder / 'server.log'})")


def lake_session(lake: str, master: str | None = None) -> Any:
    """The session a command on ``lake`` works on: a Spark Connect session of the lake's warm server when
    :func:`warm_enabled`, else (or when the server cannot start: said on stderr) ``get_spark``'s embedded one.
    Inside ``spark.existing_lake`` a path that is not a lake is refused first."""
    from lbreplay.spark import check_lake_needs, get_spark, lake_needs

    needs = lake_needs()
    if not warm_enabled(lake, master):
        return get_spark(lake, master=master)
    if needs is not None:
        from lbreplay.lake.presence import require_local_lake

        require_local_lake(lake)
    try:
        state = ensure_server(lake)
    except LbReplayError as exc:
        print(f"lbreplay: {exc}; running on an embedded Spark instead", file=sys.stderr)
        return get_spark(lake, master=master)
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark: Any = SparkSession.builder.remote(f"sc://127.0.0.1:{state.port}").getOrCreate()
    spark.client.set_retry_policies([DefaultPolicy(max_retries=CLIENT_RETRIES, max_backoff=CLIENT_MAX_BACKOFF_MS)])
    folder = state_dir(lake)
    atexit.register(touch, folder)  # (no spark.stop(): the server ends idle sessions, SESSION_TIMEOUT)
    if needs is not None:
        check_lake_needs(spark, lake, needs)
    return spark


def stop_server(lake: str, timeout: float = 60.0) -> ServerState | None:
    """Stop the lake's server (SIGTERM to its pid, then wait for it to end); the state it had, None if none ran."""
    folder = state_dir(lake)
    state = read_state(folder)
    if state is None or not is_server_process(state.pid):
        return None
    os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and is_server_process(state.pid):
        time.sleep(0.2)
    if is_server_process(state.pid):
        os.kill(state.pid, signal.SIGKILL)
    _remove_state(folder, state.pid)
    return state


def server_command(action: str, lake: str) -> None:
    """CLI ``lbreplay server status|stop --lake``: show or stop the lake's warm server."""
    from lbreplay.spark import lake_path

    lake = lake_path(lake)
    if action not in ("status", "stop"):
        raise UsageError(f"server action must be status or stop, got {action!r}")
    folder = state_dir(lake)
    state = read_state(folder)
    if action == "stop":
        stopped = stop_server(lake)
        print(f"stopped the warm server of {lake} (pid {stopped.pid})" if stopped else f"no warm server for {lake}")
        return
    if state is None or not alive(state):
        print(f"no warm server for {lake}")
        return
    used = folder / "used"
    idle = time.time() - used.stat().st_mtime if used.exists() else 0.0
    print(f"warm server for {lake}: pid {state.pid}, port {state.port}, idle {idle:.0f} s "
          f"(stops after {state.idle_seconds:.0f} s idle)")


# ---------------------------------------------------------------------------------------------------- server
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _busy(spark: Any) -> bool:
    return bool(spark.sparkContext.statusTracker().getActiveJobsIds())


def serve(lake: str) -> None:
    """Run the lake's server until it has been idle for :func:`idle_seconds` or gets SIGTERM / SIGINT."""
    from lbreplay.lake.tables import ensure_tables
    from lbreplay.lake.views import ensure_views
    from lbreplay.spark import get_spark

    folder = state_dir(lake)
    idle = idle_seconds()
    stopping: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    port = _free_port()
    spark = get_spark(lake, conf={"spark.plugins": CONNECT_PLUGIN, "spark.connect.grpc.binding.port": str(port),
                                  "spark.connect.grpc.binding.address": "127.0.0.1", "spark.ui.enabled": "false",
                                  "spark.connect.session.manager.defaultSessionTimeout": SESSION_TIMEOUT})
    try:
        ensure_tables(spark, lake)
        ensure_views(spark, lake="")
        _write_state(folder, ServerState(os.getpid(), port, lake, idle, time.time()))
        touch(folder)
        while not stopping:
            time.sleep(POLL_SECONDS)
            if _busy(spark):
                touch(folder)
                continue
            if time.time() - (folder / "used").stat().st_mtime < idle:
                continue
            with _locked(folder, blocking=False) as held:  # a command connecting now holds it: not idle
                if held and time.time() - (folder / "used").stat().st_mtime >= idle:
                    _remove_state(folder, os.getpid())
                    break
    finally:
        _remove_state(folder, os.getpid())
        spark.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lbreplay.warm_server", description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True, help="absolute lake path")
    serve(parser.parse_args(argv).lake)


if __name__ == "__main__":
    main()
