"""A warm Spark per lake: a *command server* that keeps one embedded Spark alive between commands, so a later
``lbreplay sql``, ``report``, ``compare``, ``replay``, ``sweep``, ``gate`` or ``validate`` starts work in about a
second instead of paying a JVM start (25-45 s on a busy 2-core machine).

Design. ``lbreplay.cli.main`` asks :func:`client.forward` first (before typer parses anything; the client imports
only the standard library, ~0.1 s with typer itself): a lake-reading command on a warm-enabled local lake is sent
over a Unix socket (``<state dir>/sock``) to the lake's server with the client's argv, cwd, ``LBREPLAY_*``
environment and which of its streams are terminals. The server (``python -m lbreplay.warm_server``, started on
demand in its own session) holds one classic SparkSession made by ``lbreplay.spark.get_spark`` and runs the command
in-process through ``lbreplay.cli.main``: the replay's driver code, which calls Spark's JVM directly
(``spark._jvm``, ``sparkContext``), works unchanged, and messages and exit codes are those of a process of its own.
Output streams back as it is written; the exit code ends the exchange. Spark Connect, used before for ``sql``
only, is gone: one mechanism serves every command, and importing its client alone cost ~3 s.

Rules. One command at a time (a second waits and says so once on stderr); Ctrl-C in the client cancels the
command and its Spark jobs (``cancelAllJobs``); nothing leaks between commands: each gets its own
``SparkSession.newSession()`` (SQL conf, temporary views, functions), cwd, environment and argv, and the cached
tables and the thread's Spark local properties are reset after it. What stays is what should: the JVM, its JIT and
the catalog's registrations of the lake's tables. Per-command JVM options (the replay's ``quick_jit``,
``spark.driver.*``) cannot apply to a running JVM: the server's JVM has lbreplay's defaults. A client whose
lbreplay code or conf differs from the server's (:func:`state.code_stamp`) restarts it.

When. Local lakes only, no ``--master``, not under spark-submit; by default when stdin or stdout is a terminal,
``LBREPLAY_WARM=1`` everywhere, ``LBREPLAY_WARM=0`` never. The server stops after ``LBREPLAY_WARM_IDLE`` seconds
(default 900) without a command or running Spark job; ``lbreplay server status|stop`` shows or stops it. A server
that cannot start (or whose Spark cannot) is said in one line on stderr and the command runs embedded.
"""

from __future__ import annotations

from typing import Any

from lbreplay.warm_server.client import forward, server_command, stop_server, warm_enabled
from lbreplay.warm_server.state import idle_seconds, is_server_process, read_state, state_dir

__all__ = ["forward", "idle_seconds", "is_server_process", "lake_session", "read_state", "server_command",
           "state_dir", "stop_server", "warm_enabled"]


def lake_session(lake: str, master: str | None = None) -> Any:
    """The session a command on ``lake`` works on: ``get_spark``'s (in a warm server, the command's own session of
    the server's Spark; the command was forwarded before it got here)."""
    from lbreplay.spark import get_spark

    return get_spark(lake, master=master)
