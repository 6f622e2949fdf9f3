"""The client side of the warm server: ``lbreplay.cli.main`` hands its argv to :func:`forward` before parsing it;
a lake-reading command (:data:`FORWARDED`) on a warm-enabled local lake is sent to the lake's server and its output,
messages and exit code come back; anything else returns None and runs in this process. Stdlib only (and
``lake.sql_shell``): the decision costs milliseconds, no pyspark, numpy or pandas import.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lbreplay.errors import EXIT_FAILURE, EXIT_USAGE, LbReplayError, UsageError
from lbreplay.paths import DEFAULT_LAKE
from lbreplay.warm_server import protocol
from lbreplay.warm_server.state import (
    ENV_WARM,
    MAX_SOCKET_PATH,
    ServerState,
    code_stamp,
    idle_for,
    is_server_process,
    locked,
    read_state,
    remove_state,
    socket_path,
    state_dir,
    touch,
)

# the commands that read an existing lake (generate, ingest, collect and demo make lakes; decide, verify need no Spark)
FORWARDED = frozenset({"sql", "report", "compare", "gate", "replay", "sweep", "validate", "prediction"})
START_TIMEOUT_SECONDS = 60.0  # until the server listens (its Spark starts after, while the command waits)
SQL_VALUE_OPTIONS = ("--format", "--lake", "--master")


class NoServer(LbReplayError):
    """The lake's server could not be started or reached: the command runs embedded (said on stderr)."""


def option_value(args: list[str], name: str) -> str | None:
    """The value of ``name`` in ``args`` (``--name value`` or ``--name=value``; options end at ``--``)."""
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return None


def absolute_lake(text: str) -> str:
    """The lake path as ``lbreplay.spark.lake_path`` makes it (without importing pyspark); URIs unchanged."""
    return text.rstrip("/") if "://" in text else str(Path(text).expanduser().resolve())


def warm_enabled(lake: str, master: str | None) -> bool:
    """Whether a command on ``lake`` goes through the lake's warm server: a local lake, no ``--master``, not under
    spark-submit, no Spark already running in this process, and ``LBREPLAY_WARM=1`` or, when it is unset, a
    terminal on stdin or stdout (interactive use; scripts, schedulers and CI leave no server behind)."""
    setting = os.environ.get(ENV_WARM, "")
    if setting == "0" or master is not None or "://" in lake or "PYSPARK_GATEWAY_PORT" in os.environ:
        return False
    if setting != "1" and not (sys.stdin.isatty() or sys.stdout.isatty()):
        return False
    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    return getattr(context, "_active_spark_context", None) is None


def has_tables(lake: str) -> bool:
    """A directory holding at least one Delta table (the command itself refuses one that is not a lake)."""
    try:
        return any(os.path.isdir(os.path.join(e.path, "_delta_log")) for e in os.scandir(lake) if e.is_dir())
    except OSError:
        return False


def forward(argv: list[str]) -> int | None:
    """Run ``lbreplay *argv`` on the lake's warm server and return its exit code, or None: not a forwarded command,
    warm use off, no local lake, or no server (one line on stderr; the caller runs the command itself)."""
    args = [a for a in argv if a != "--verbose"]
    if not args or args[0] not in FORWARDED or any(a in ("--help", "-h") for a in args):
        return None
    lake = absolute_lake(option_value(args, "--lake") or DEFAULT_LAKE)
    if not warm_enabled(lake, option_value(args, "--master")) or not has_tables(lake):
        return None
    try:
        if args[0] == "sql" and (shell_args := sql_shell_options(args[1:])) is not None:
            connect(lake).close()  # the server up before the first prompt
            return remote_shell(lake, shell_args, "--verbose" in argv)
        return run_remote(connect(lake), lake, argv)
    except NoServer as exc:
        print(f"lbreplay: {exc}; running on an embedded Spark instead", file=sys.stderr)
        return None


# ---------------------------------------------------------------------------------------------------- connect
def _try_connect(path: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        return sock
    except OSError:
        sock.close()
        return None


def connect(lake: str) -> socket.socket:
    """A connection to the lake's server, started first if none runs or it runs other code (under the lake's
    lock: one server per lake; an idle stop takes the same lock)."""
    folder = state_dir(lake)
    path = socket_path(folder)
    if len(path) > MAX_SOCKET_PATH:
        raise NoServer(f"the warm server's socket path is too long ({path}; set LBREPLAY_CACHE_DIR shorter)")
    stamp = code_stamp()
    with locked(folder):
        state = read_state(folder)
        if state is not None and is_server_process(state.pid):
            if state.stamp == stamp and (sock := _try_connect(state.socket)) is not None:
                touch(folder)
                return sock
            print(f"lbreplay: restarting the warm server of {lake} (lbreplay changed)", file=sys.stderr)
            _stop(folder, state)
        touch(folder)
        return _start(folder, lake, path)


def _start(folder: Path, lake: str, path: str) -> socket.socket:
    with open(folder / "server.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "lbreplay.warm_server", "--lake", lake],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline and proc.poll() is None:
        state = read_state(folder)
        if state is not None and state.pid == proc.pid and (sock := _try_connect(path)) is not None:
            return sock
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    raise NoServer(f"the warm Spark server for {lake} did not start (log: {folder / 'server.log'})")


# ---------------------------------------------------------------------------------------------------- commands
def request(argv: list[str]) -> dict[str, Any]:
    """What the server needs to run ``argv`` as this process would: its cwd, LBREPLAY_* environment and terminals."""
    return {"argv": argv, "cwd": os.getcwd(),
            "env": {k: v for k, v in os.environ.items() if k.startswith("LBREPLAY_")},
            "tty": [s.isatty() for s in (sys.stdin, sys.stdout, sys.stderr)]}


def run_remote(sock: socket.socket, lake: str, argv: list[str]) -> int:
    """Send ``argv``, copy the output frames to stdout / stderr until the exit code. Ctrl-C asks the server to
    cancel the command (its Spark jobs too); a second Ctrl-C leaves at once."""
    cancelled = False
    with sock:
        protocol.send_json(sock, protocol.REQUEST, request(argv))
        while True:
            try:
                frame = protocol.receive(sock)
            except KeyboardInterrupt:
                if cancelled:
                    print("lbreplay: aborted", file=sys.stderr)
                    return EXIT_FAILURE
                cancelled = True
                print("lbreplay: cancelling (Ctrl-C again to leave at once)", file=sys.stderr)
                protocol.send(sock, protocol.CANCEL)
                continue
            if frame is None:
                print(f"lbreplay: the warm server of {lake} ended during the command "
                      f"(log: {state_dir(lake) / 'server.log'})", file=sys.stderr)
                return EXIT_FAILURE
            kind, payload = frame
            if kind in (protocol.STDOUT, protocol.STDERR):
                stream = sys.stdout if kind == protocol.STDOUT else sys.stderr
                stream.flush()
                stream.buffer.write(payload)
                stream.buffer.flush()
            elif kind == protocol.EXIT:
                return int(json.loads(payload))
            elif kind == protocol.FALLBACK:
                raise NoServer(payload.decode(errors="replace"))


def sql_shell_options(args: list[str]) -> list[str] | None:
    """For ``sql`` with no statement (the shell): its options, to pass with each statement; None when there is a
    statement or an option this parse does not know (then the whole command is forwarded as it is)."""
    options: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in SQL_VALUE_OPTIONS and i + 1 < len(args):
            options += args[i:i + 2]
            i += 2
        elif any(arg.startswith(o + "=") for o in SQL_VALUE_OPTIONS):
            options.append(arg)
            i += 1
        else:
            return None
    return options


def remote_shell(lake: str, options: list[str], verbose: bool) -> int:
    """The ``sql`` shell (``lake.sql_shell``) in this process, each statement run by the server as
    ``sql OPTIONS -- STATEMENT``: its result or error printed as it comes; exit 2 naming how many failed."""
    from lbreplay.lake.sql_shell import shell

    failed: list[int] = []

    def run(statement: str) -> bool:
        argv = ["sql", *options, *(["--verbose"] if verbose else []), "--", statement]
        code = run_remote(connect(lake), lake, argv)
        if code != 0:
            failed.append(code)
        return code == 0

    try:
        shell(run, sys.stdin, sys.stdout, interactive=sys.stdin.isatty())
    except KeyboardInterrupt:
        print("lbreplay: aborted", file=sys.stderr)
        return EXIT_FAILURE
    if failed:
        print(f"lbreplay: {len(failed)} statement{'s' if len(failed) > 1 else ''} failed", file=sys.stderr)
        return EXIT_USAGE
    return 0


# ---------------------------------------------------------------------------------------------------- stop/status
def _stop(folder: Path, state: ServerState, timeout: float = 60.0) -> None:
    os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and is_server_process(state.pid):
        time.sleep(0.1)
    if is_server_process(state.pid):
        os.kill(state.pid, signal.SIGKILL)
    remove_state(folder, state.pid)


def stop_server(lake: str, timeout: float = 60.0) -> ServerState | None:
    """Stop the lake's server (SIGTERM: it cancels a running command; SIGKILL after ``timeout``); the state it had,
    None if none ran."""
    folder = state_dir(lake)
    state = read_state(folder)
    if state is None or not is_server_process(state.pid):
        return None
    _stop(folder, state, timeout)
    return state


def server_command(action: str, lake: str) -> None:
    """CLI ``lbreplay server status|stop --lake``: show or stop the lake's warm server."""
    if action not in ("status", "stop"):
        raise UsageError(f"server action must be status or stop, got {action!r}")
    lake = absolute_lake(lake)
    folder = state_dir(lake)
    if action == "stop":
        stopped = stop_server(lake)
        print(f"stopped the warm server of {lake} (pid {stopped.pid})" if stopped else f"no warm server for {lake}")
        return
    state = read_state(folder)
    if state is None or not is_server_process(state.pid):
        print(f"no warm server for {lake}")
        return
    print(f"warm server for {lake}: pid {state.pid}, {'ready' if state.ready else 'starting Spark'}, "
          f"idle {idle_for(folder):.0f} s (stops after {state.idle_seconds:.0f} s idle)")
