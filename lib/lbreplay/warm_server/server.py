"""The lake's warm server process (``python -m lbreplay.warm_server --lake LAKE``): one embedded SparkSession
(``lbreplay.spark.get_spark``: py4j, the same JVM options, Delta jars and in-memory catalog a command's own session
would have) and lbreplay CLI commands run in it one at a time, each as ``lbreplay.cli.main`` would run it in a
process of its own. See the package docstring for the design; this module is the daemon: the socket, the queue,
the per-command isolation, cancel, idle stop.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import queue
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lbreplay.warm_server import protocol
from lbreplay.warm_server.state import (
    ENV_WARM,
    ServerState,
    code_stamp,
    idle_for,
    idle_seconds,
    locked,
    remove_state,
    socket_path,
    state_dir,
    touch,
    write_state,
)

POLL_SECONDS = 0.5
REQUEST_TIMEOUT_SECONDS = 10.0


class FrameText(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` of a command: every write goes to the client at once as one frame (so its
    stdout and stderr keep their order); a client gone makes writes no-ops (its command is being cancelled)."""

    encoding = "utf-8"

    def __init__(self, conn: socket.socket, kind: bytes, lock: threading.Lock, tty: bool) -> None:
        super().__init__()
        self._conn, self.kind, self._lock, self._tty, self._gone = conn, kind, lock, tty, False
        self.buffer = self  # code writing bytes to sys.stdout.buffer

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._tty

    def write(self, text: Any) -> int:
        data = text if isinstance(text, (bytes, bytearray)) else str(text).encode("utf-8", errors="replace")
        if data and not self._gone:
            try:
                protocol.send(self._conn, self.kind, bytes(data), self._lock)
            except OSError:
                self._gone = True
        return len(text)


class CurrentStream(io.TextIOBase):
    """Writes to whatever ``sys.stdout`` / ``sys.stderr`` is now: the stream of a logging handler a command created
    (pyspark's query-context loggers make theirs on first use), so later commands' records reach their own client."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self._name = name

    def write(self, text: Any) -> int:
        return int(getattr(sys, self._name).write(text))

    def flush(self) -> None:
        getattr(sys, self._name).flush()


def rebind_log_handlers() -> None:
    """Logging handlers bound to a command's client stream are pointed at :class:`CurrentStream`."""
    loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values()
                                      if isinstance(v, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and isinstance(handler.stream, FrameText):
                handler.setStream(CurrentStream("stdout" if handler.stream.kind == protocol.STDOUT else "stderr"))


def _children() -> list[int]:
    """Pids of this process's children (``/proc``; none where there is no ``/proc``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.append(int(stat.parent.name))
    return found


def _activate(session: Any) -> None:
    """Make ``session`` the one ``SparkSession.builder.getOrCreate()`` returns (Python and JVM side)."""
    from pyspark.sql import SparkSession

    SparkSession._instantiatedSession = session
    SparkSession._activeSession = session
    jclass = session._jvm.org.apache.spark.sql.SparkSession
    jclass.setDefaultSession(session._jsparkSession)
    jclass.setActiveSession(session._jsparkSession)


@contextlib.contextmanager
def isolated(base: Any, req: dict[str, Any], out: FrameText, err: FrameText) -> Iterator[None]:
    """One command's surroundings, undone after it: its cwd, its LBREPLAY_* environment (``LBREPLAY_WARM=0``: it
    never forwards again), argv, an empty stdin, stdout/stderr to the client, and a new SparkSession of the shared
    context (``newSession``: its own SQL conf, temporary views and functions; the lake's catalog shared) made the
    default; afterwards the thread's Spark local properties and the cached tables are reset."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved = sys.argv, sys.stdin, sys.stdout, sys.stderr
    jsc = base.sparkContext._jsc.sc()
    properties = jsc.getLocalProperties().clone()
    session = base.newSession()
    try:
        for key in [k for k in os.environ if k.startswith("LBREPLAY_")]:
            del os.environ[key]
        os.environ.update({k: str(v) for k, v in req.get("env", {}).items() if k.startswith("LBREPLAY_")})
        os.environ[ENV_WARM] = "0"
        os.chdir(req["cwd"])
        _activate(session)
        sys.argv = ["lbreplay", *req["argv"]]
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(), out, err
        yield
    finally:
        sys.argv, sys.stdin, sys.stdout, sys.stderr = saved
        rebind_log_handlers()
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        _activate(base)
        jsc.setLocalProperties(properties)
        base.catalog.clearCache()


def run_cli() -> int:
    """``lbreplay.cli.main`` on ``sys.argv``: its exit code (its one-line messages went to ``sys.stderr``)."""
    from lbreplay import cli

    try:
        cli.main()
        return 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lbreplay: aborted", file=sys.stderr)
        return 1


class CommandServer:
    """The daemon: an accept thread admits requests into a queue; the main thread runs them one at a time."""

    def __init__(self, lake: str) -> None:
        self.lake, self.folder, self.idle = lake, state_dir(lake), idle_seconds()
        self.queue: queue.Queue[tuple[socket.socket, dict[str, Any], threading.Lock]] = queue.Queue()
        self.guard = threading.Lock()
        self.busy, self.cancelling, self.current = False, False, 0
        self.stopping, self.closing = threading.Event(), threading.Event()
        self.spark: Any = None
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.acceptor = threading.Thread(target=self._accept_loop, name="warm-accept", daemon=True)
        self.state = ServerState(os.getpid(), socket_path(self.folder), lake, self.idle, time.time(), code_stamp())

    # ------------------------------------------------------------------------------------------- admission
    def listen(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        Path(self.state.socket).unlink(missing_ok=True)
        self.listener.bind(self.state.socket)
        os.chmod(self.state.socket, 0o600)
        self.listener.listen(16)
        self.listener.settimeout(POLL_SECONDS)
        write_state(self.folder, self.state)
        self.acceptor.start()

    def _accept_loop(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self._admit(conn)
        self.listener.setblocking(False)  # closing: admit what is in the backlog still (connected before the stop)
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        conn.setblocking(True)
        conn.settimeout(REQUEST_TIMEOUT_SECONDS)
        try:
            frame = protocol.receive(conn)
        except OSError:
            frame = None
        if frame is None or frame[0] != protocol.REQUEST:
            conn.close()
            return
        conn.settimeout(None)
        lock = threading.Lock()
        with self.guard:
            waiting = self.busy or not self.queue.empty()
            self.queue.put((conn, json.loads(frame[1]), lock))
        note = ("lbreplay: waiting for the command running on this lake's warm server\n" if waiting and self.spark
                else f"lbreplay: starting the warm Spark of {self.lake} (later commands skip this)\n"
                if self.spark is None else "")
        if note:
            with contextlib.suppress(OSError):
                protocol.send(conn, protocol.STDERR, note.encode(), lock)

    # ------------------------------------------------------------------------------------------- commands
    def execute(self, conn: socket.socket, req: dict[str, Any], lock: threading.Lock) -> None:
        tty = (list(req.get("tty", [])) + [False] * 3)[:3]
        out = FrameText(conn, protocol.STDOUT, lock, bool(tty[1]))
        err = FrameText(conn, protocol.STDERR, lock, bool(tty[2]))
        with self.guard:
            self.current += 1
            self.busy, self.cancelling = True, False
        threading.Thread(target=self._watch, args=(conn, self.current), daemon=True).start()
        code, started = 1, time.monotonic()
        try:
            try:
                with isolated(self.spark, req, out, err):
                    code = run_cli()
            except OSError as exc:  # the client's cwd is gone
                err.write(f"lbreplay: cannot run in {req.get('cwd')}: {exc.strerror}\n")
        finally:
            with self.guard:
                self.busy = False
        with contextlib.suppress(OSError):
            protocol.send_json(conn, protocol.EXIT, code, lock)
        conn.close()
        print(f"warm server: {' '.join(req.get('argv', [])[:1])} exit {code} in {time.monotonic() - started:.2f}s",
              file=sys.stderr, flush=True)

    def _watch(self, conn: socket.socket, number: int) -> None:
        """The client's Ctrl-C (a cancel frame) or its end (the connection closed) cancels its command."""
        try:
            frame = protocol.receive(conn)
        except OSError:
            frame = None
        if frame is None or frame[0] == protocol.CANCEL:
            self.cancel(number)

    def cancel(self, number: int | None = None) -> None:
        """Cancel the running command: its Spark jobs (``SparkContext.cancelAllJobs``), then a KeyboardInterrupt in
        the main thread (delivered between Python bytecodes, never inside a py4j call's socket read)."""
        import _thread

        with self.guard:
            if not self.busy or self.cancelling or (number is not None and number != self.current):
                return
            self.cancelling = True
        with contextlib.suppress(Exception):
            self.spark.sparkContext.cancelAllJobs()
        _thread.interrupt_main(signal.SIGINT)

    def _on_sigint(self, _signum: int, _frame: Any) -> None:
        if self.busy and self.cancelling:
            raise KeyboardInterrupt

    def _on_sigterm(self, _signum: int, _frame: Any) -> None:
        self.stopping.set()
        if self.spark is None:  # still starting Spark: end the JVM being launched (a child of this process) and leave
            for pid in _children():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            raise SystemExit(0)
        threading.Thread(target=self.cancel, daemon=True).start()

    # ------------------------------------------------------------------------------------------- life cycle
    def _idle_stop(self) -> bool:
        """Stop when idle for ``idle`` seconds with no Spark job running, under the lake's lock (a client that
        holds it is connecting: not idle); connections already made are served before the exit."""
        if idle_for(self.folder) < self.idle or not self.queue.empty():
            return False
        if self.spark.sparkContext.statusTracker().getActiveJobsIds():
            touch(self.folder)
            return False
        with locked(self.folder, blocking=False) as held:
            if not held or idle_for(self.folder) < self.idle:
                return False
            self._close()
        return True

    def _close(self) -> None:
        self.closing.set()
        if self.acceptor.is_alive():
            self.acceptor.join()
        self.listener.close()
        remove_state(self.folder, os.getpid())

    def _refuse_queued(self, reason: str) -> None:
        while not self.queue.empty():
            conn, _, lock = self.queue.get()
            with contextlib.suppress(OSError):
                protocol.send(conn, protocol.FALLBACK, reason.encode(), lock)
            conn.close()

    def serve(self) -> int:
        """Listen, start Spark, run commands until idle or SIGTERM; 0, or 1 when Spark did not start."""
        signal.signal(signal.SIGTERM, self._on_sigterm)
        self.listen()
        try:
            from lbreplay.spark import get_spark

            self.spark = get_spark(self.lake, conf={"spark.ui.enabled": "false"})
        except Exception as exc:  # noqa: BLE001 - told to every waiting client, which runs its command itself
            from lbreplay.errors import one_line_reason

            print(f"warm server: Spark did not start: {one_line_reason(exc)}", file=sys.stderr, flush=True)
            self._close()
            self._refuse_queued(f"the warm server of {self.lake} could not start Spark ({one_line_reason(exc)}; "
                                f"log: {self.folder / 'server.log'})")
            return 1
        signal.signal(signal.SIGINT, self._on_sigint)  # (after pyspark installed its own)
        self._register_lake()
        write_state(self.folder, ServerState(**{**self.state.__dict__, "ready": True}))
        try:
            self._loop()
        finally:
            if not self.closing.is_set():  # (a client that restarts this server holds the lock: close anyway)
                with locked(self.folder, blocking=False):
                    self._close()
            self._refuse_queued(f"the warm server of {self.lake} was stopped")
            self.spark.stop()
        return 0

    def _register_lake(self) -> None:
        """The lake's tables and views in the shared catalog once, as ``sql`` registers them (a later command's
        session finds them: on a loaded 2-core machine the first registration took 17 s, later ones 0.1-0.4 s)."""
        from lbreplay.lake.sql import register_lake

        started = time.monotonic()
        try:
            register_lake(self.spark, self.lake)
        except Exception as exc:  # noqa: BLE001 - each command registers what it needs itself
            from lbreplay.errors import one_line_reason

            print(f"warm server: lake not registered: {one_line_reason(exc)}", file=sys.stderr, flush=True)
        print(f"warm server: lake registered in {time.monotonic() - started:.2f}s", file=sys.stderr, flush=True)

    def _loop(self) -> None:
        touch(self.folder)
        while not self.stopping.is_set():
            try:
                item = self.queue.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if self._idle_stop():
                    while not self.queue.empty():  # admitted while closing
                        self.execute(*self.queue.get())
                    return
                continue
            except KeyboardInterrupt:  # a cancel that came after its command ended
                continue
            self.execute(*item)
            touch(self.folder)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lbreplay.warm_server", description="The lake's warm server.")
    parser.add_argument("--lake", required=True, help="absolute lake path")
    lake = parser.parse_args(argv).lake
    try:
        sys.exit(CommandServer(lake).serve())
    finally:  # (a SIGTERM while Spark starts ends the process here)
        remove_state(state_dir(lake), os.getpid())
