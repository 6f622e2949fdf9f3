"""The warm Spark per lake (``lbreplay.warm_server``), as a user meets it: ``lbreplay sql`` processes. Two commands
starting at once share one server; a later command (and the piped shell) reuses it, faster than the cold start; the
server stops itself when idle and leaves no process behind. The server is stopped by pid whatever happens."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import pytest

from lbreplay import warm_server
from tests.hostile.harness import LBREPLAY, REPO, env, on_lake

IDLE_SECONDS = 10


def _processes_mentioning(text: str) -> list[int]:
    """Pids whose command line mentions ``text`` (the server and its JVM name the lake)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@pytest.fixture()
def warm_lake(spark: Any, tmp_path: Path) -> Iterator[str]:
    """A small lake (two broker_load rows); afterwards its server and the server's JVM are stopped by pid."""
    from lbreplay.lake.tables import BROKER_LOAD, replace_partitions

    lake = str(tmp_path / "warm lake")
    rows = [("w1", datetime(2024, 1, 1, 0, m), "broker-1:8080") for m in range(2)]
    with on_lake(spark, lake):
        replace_partitions(spark, lake, BROKER_LOAD, spark.createDataFrame(rows, "cluster string, ts timestamp, "
                                                                                 "broker string"), "cluster = 'w1'")
    yield lake
    state = warm_server.read_state(warm_server.state_dir(lake))
    pids = ([state.pid] if state is not None else []) + _processes_mentioning(f"{lake}/_catalog")
    for pid in dict.fromkeys(pids):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    log = warm_server.state_dir(lake) / "server.log"
    if log.exists():  # shown by pytest when the test failed
        print(log.read_text(encoding="utf-8", errors="replace")[-4000:])
    shutil.rmtree(warm_server.state_dir(lake), ignore_errors=True)


def _sql(lake: str, *argv: str, stdin: str | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([*LBREPLAY, "sql", *argv, "--lake", lake], input=stdin, capture_output=True, text=True,
                          env=_env(), cwd=str(REPO), timeout=600)
    return done, time.monotonic() - started


def _env() -> dict[str, str]:
    return {**env(), "LBREPLAY_WARM": "1", "LBREPLAY_WARM_IDLE": str(IDLE_SECONDS)}


@pytest.mark.spark
def test_one_warm_server_per_lake_reused_then_stopped_when_idle(warm_lake: str) -> None:
    lake = warm_lake
    query = ["SELECT count(*) AS n FROM lbreplay.broker_load"]
    started = time.monotonic()
    both = [subprocess.Popen([*LBREPLAY, "sql", *query, "--lake", lake], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=_env(), cwd=str(REPO)) for _ in range(2)]
    outs = [p.communicate(timeout=420) for p in both]
    cold = time.monotonic() - started
    assert [p.returncode for p in both] == [0, 0], [err[-2000:] for _, err in outs]
    assert [out.splitlines()[2] for out, _ in outs] == ["2", "2"]
    state = warm_server.read_state(warm_server.state_dir(lake))
    assert state is not None and state.lake == lake
    servers = [pid for pid in _processes_mentioning(lake) if pid != os.getpid() and warm_server.is_server_process(pid)]
    assert servers == [state.pid]  # two commands starting at once: one server

    done, warm = _sql(lake, "SELECT 1 AS a")
    assert done.returncode == 0 and done.stdout.splitlines() == ["a", "-", "1", "(1 row)"], done.stderr[-2000:]
    assert warm < cold
    done, _ = _sql(lake, stdin="SELECT 2 AS b;\n.quit\n")  # the shell, piped
    assert done.returncode == 0 and done.stdout.splitlines() == ["b", "-", "2", "(1 row)"], done.stderr[-2000:]
    status = subprocess.run([*LBREPLAY, "server", "status", "--lake", lake], capture_output=True, text=True,
                            env=_env(), cwd=str(REPO), timeout=120)
    assert status.stdout.startswith(f"warm server for {lake}: pid {state.pid}, port {state.port}, idle ")
    assert warm_server.read_state(warm_server.state_dir(lake)) == state  # the same server all along

    deadline = time.monotonic() + IDLE_SECONDS + 120
    while time.monotonic() < deadline and _processes_mentioning(f"{lake}/_catalog"):
        time.sleep(1)
    assert not warm_server.is_server_process(state.pid)
    assert _processes_mentioning(f"{lake}/_catalog") == []  # its JVM is gone too
    assert warm_server.read_state(warm_server.state_dir(lake)) is None


def test_when_commands_use_a_warm_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Local lakes without --master only, unless LBREPLAY_WARM=0; status/stop of a lake with no server say so."""
    from lbreplay.errors import UsageError

    monkeypatch.setenv("LBREPLAY_WARM", "0")
    assert not warm_server.warm_enabled(str(tmp_path), None)
    monkeypatch.delenv("LBREPLAY_WARM")
    assert not warm_server.warm_enabled(str(tmp_path), None)  # unset: a terminal only (pytest captures both)
    monkeypatch.setenv("LBREPLAY_WARM", "1")
    assert not warm_server.warm_enabled(str(tmp_path), "local[2]")
    assert not warm_server.warm_enabled("s3a://bucket/lake", None)
    monkeypatch.setenv("LBREPLAY_WARM_IDLE", "soon")
    with pytest.raises(UsageError, match="LBREPLAY_WARM_IDLE must be a number of seconds, got 'soon'"):
        warm_server.idle_seconds()
    for action in ("status", "stop"):
        warm_server.server_command(action, str(tmp_path))
        assert capsys.readouterr().out == f"no warm server for {tmp_path}\n"
    with pytest.raises(UsageError, match="server action must be status or stop, got 'restart'"):
        warm_server.server_command("restart", str(tmp_path))
