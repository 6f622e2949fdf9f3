"""The lake's warm command server (``lbreplay.warm_server``), as a user meets it: ``lbreplay`` processes whose
commands run in the server's Spark. Output, messages and exit codes are those of the embedded path (run in this
process on the test session); two clients at once share one server; nothing leaks from one command to the next;
the server stops when idle, or by ``lbreplay server stop`` (while its Spark still starts); no process is left
(servers and their JVMs are killed by pid whatever happens)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from lbreplay import warm_server
from lbreplay.warm_server import client
from tests.hostile.harness import LBREPLAY, REPO, cli, env, on_lake

IDLE_SECONDS = 6
TINY = {"brokers": 3, "namespaces": 1, "bundles_per_namespace": 4, "topics": 24, "ticks": 6}
COUNT = "SELECT count(*) AS n FROM lbreplay.broker_load"
REPLAY = ("replay", "--cluster", "tw", "--config", "threshold-lltmr", "--seed", "1", "--quiet")


def _processes_mentioning(text: str) -> list[int]:
    """Pids (not this one) whose command line mentions ``text`` (the server names the lake, its JVM the catalog)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if text.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _kill_all(lake: str) -> None:
    state = warm_server.read_state(warm_server.state_dir(lake))
    for pid in dict.fromkeys(([state.pid] if state else []) + _processes_mentioning(lake)):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _gone(lake: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _processes_mentioning(lake):
        time.sleep(0.2)
    return not _processes_mentioning(lake)


@pytest.fixture(scope="module")
def tiny_lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A tiny generated lake (not validated yet); afterwards every process naming it is killed by pid."""
    from lbreplay.lake.generator import generate

    lake = str(tmp_path_factory.mktemp("warm") / "a lake")
    with on_lake(spark, lake):
        generate(spark, lake, TINY, "tw")
    yield lake
    _kill_all(lake)
    log = warm_server.state_dir(lake) / "server.log"
    if log.exists():  # shown by pytest when the test failed
        print(log.read_text(encoding="utf-8", errors="replace")[-4000:])
    shutil.rmtree(warm_server.state_dir(lake), ignore_errors=True)


def _decisions_hash(spark: Any, lake: str, run_id: str) -> str:
    rows = spark.read.format("delta").load(f"{lake}/decisions").where(f"run_id = '{run_id}'").drop("run_id").collect()
    assert rows, f"no decisions for {run_id}"
    return hashlib.sha256(repr(sorted(map(repr, rows))).encode()).hexdigest()


NOTES = ("lbreplay: starting the warm Spark", "lbreplay: waiting for the command", "lbreplay: restarting the warm")


def _errors(stderr: str) -> str:
    """``stderr`` without the server's notes (a restart: another engineer's edit changed lbreplay's code stamp)."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith(NOTES))


def _env() -> dict[str, str]:
    return {**env(), "LBREPLAY_WARM": "1", "LBREPLAY_WARM_IDLE": str(IDLE_SECONDS)}


def _run(*argv: str, cwd: str = str(REPO), stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LBREPLAY, *argv], input=stdin, capture_output=True, text=True, env=_env(), cwd=cwd,
                          timeout=300)


@pytest.mark.spark
def test_commands_on_the_warm_server_answer_as_embedded_ones(spark: Any, tiny_lake: str) -> None:
    lake = tiny_lake
    both = [subprocess.Popen([*LBREPLAY, "sql", COUNT, "--lake", lake], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=_env(), cwd=str(REPO)) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in both]
    assert [p.returncode for p in both] == [0, 0], [err[-2000:] for _, err in outs]
    assert outs[0][0] == outs[1][0] and outs[0][0].splitlines()[-1] == "(1 row)"
    assert any("starting the warm Spark" in err or "waiting for the command" in err for _, err in outs)
    state = warm_server.read_state(warm_server.state_dir(lake))
    assert state is not None and state.ready and state.lake == lake
    assert [p for p in _processes_mentioning(lake) if warm_server.is_server_process(p)] == [state.pid]

    started = time.monotonic()  # warm: the client's cwd resolves a relative --lake
    done = _run("sql", COUNT, "--lake", Path(lake).name, cwd=str(Path(lake).parent))
    assert (done.returncode, done.stdout, _errors(done.stderr)) == (0, outs[0][0], "")
    assert time.monotonic() - started < 20
    assert _run("validate", "--cluster", "tw", "--quiet", "--lake", lake).returncode == 0

    # nothing leaks between commands: a SQL conf, a temporary view
    assert _run("sql", "SET spark.sql.shuffle.partitions=3; CREATE TEMP VIEW v AS SELECT 1 AS a; SELECT * FROM v",
                "--lake", lake).returncode == 0
    done = _run("sql", "SET spark.sql.shuffle.partitions", "--format", "csv", "--lake", lake)
    assert done.stdout.splitlines()[1] == "spark.sql.shuffle.partitions,8"
    done = _run("sql", "SELECT * FROM v", "--lake", lake)  # an error: its exit code and one line
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1].startswith("lbreplay: bad query: [TABLE_OR_VIEW_NOT_FOUND]"), done.stderr
    assert "SQLQueryContextLogger" not in done.stderr  # pyspark's JSON record of the error (the JVM stack) is off
    assert _errors(done.stderr).count("\n") == 1, done.stderr  # one line, nothing else
    done = _run("sql", "--lake", lake, "--format", "csv", stdin="SELECT 2 AS b;\nSELECT nope;\n")
    assert done.returncode == 2 and done.stdout == "b\n2\n" and done.stderr.endswith("lbreplay: 1 statement failed\n")
    assert done.stderr.count("lbreplay: bad query: ") == 1 and "SQLQueryContextLogger" not in done.stderr

    done = _run(*REPLAY, "--run-id", "warm", "--lake", lake)
    assert done.returncode == 0, done.stderr[-2000:]
    done = _run("replay", "--cluster", "nosuch", "--config", "threshold-lltmr", "--lake", lake)
    assert done.returncode == 2 and _errors(done.stderr).count("\n") == 1 and "nosuch" in done.stderr, done.stderr
    status, now = _run("server", "status", "--lake", lake), warm_server.read_state(warm_server.state_dir(lake))
    assert now is not None and status.stdout.startswith(f"warm server for {lake}: pid {now.pid}, ready, idle ")

    with on_lake(spark, lake):  # the embedded path, in this process, while the server idles
        embedded = cli(spark, "sql", COUNT, "--lake", lake), cli(spark, *REPLAY, "--run-id", "embedded", "--lake", lake)
        assert [o.code for o in embedded] == [0, 0] and embedded[0].out == outs[0][0], embedded[1].err
        hashes = [_decisions_hash(spark, lake, r) for r in ("embedded", "warm")]
    assert hashes[0] == hashes[1]
    assert _gone(lake, IDLE_SECONDS + 30), "the server and its JVM stop when idle"
    assert warm_server.read_state(warm_server.state_dir(lake)) is None


def test_server_stop_ends_a_server_still_starting(tmp_path: Path) -> None:
    lake = str(tmp_path / "a lake")
    (tmp_path / "a lake" / "runs" / "_delta_log").mkdir(parents=True)
    folder = warm_server.state_dir(lake)
    try:
        with client.locked(folder):
            client._start(folder, lake, client.socket_path(folder)).close()
        state = warm_server.read_state(folder)
        assert state is not None and warm_server.is_server_process(state.pid)
        done = _run("server", "stop", "--lake", lake)
        assert done.stdout == f"stopped the warm server of {lake} (pid {state.pid})\n", done.stderr
        assert _gone(lake, 30) and warm_server.read_state(folder) is None  # its JVM too
        assert _run("server", "status", "--lake", lake).stdout == f"no warm server for {lake}\n"
    finally:
        _kill_all(lake)
        shutil.rmtree(folder, ignore_errors=True)


def test_which_commands_go_to_a_warm_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Local lakes without --master only, unless LBREPLAY_WARM=0; lake-reading commands only, never --help;
    status/stop of a lake with no server say so."""
    from lbreplay.errors import UsageError

    monkeypatch.setenv("LBREPLAY_WARM", "0")
    assert not warm_server.warm_enabled(str(tmp_path), None)
    monkeypatch.delenv("LBREPLAY_WARM")
    assert not warm_server.warm_enabled(str(tmp_path), None)  # unset: a terminal only (pytest captures both)
    monkeypatch.setenv("LBREPLAY_WARM", "1")
    assert not warm_server.warm_enabled(str(tmp_path), "local[2]")
    assert not warm_server.warm_enabled("s3a://bucket/lake", None)
    (tmp_path / "runs" / "_delta_log").mkdir(parents=True)
    for argv in (["decide", "--request", "-"], ["generate", "--lake", str(tmp_path)], ["sql", "--help"],
                 ["sql", "SELECT 1", "--lake", str(tmp_path), "--master", "local[1]"]):
        assert client.forward(argv) is None
    assert client.option_value(["sql", "--lake=x", "--", "--lake", "y"], "--lake") == "x"
    assert client.sql_shell_options(["--format", "csv", "--lake=x"]) == ["--format", "csv", "--lake=x"]
    assert client.sql_shell_options(["SELECT 1"]) is None and client.sql_shell_options(["--bogus"]) is None
    monkeypatch.setenv("LBREPLAY_WARM_IDLE", "soon")
    with pytest.raises(UsageError, match="LBREPLAY_WARM_IDLE must be a number of seconds, got 'soon'"):
        warm_server.idle_seconds()
    for action in ("status", "stop"):
        warm_server.server_command(action, str(tmp_path))
        assert capsys.readouterr().out == f"no warm server for {tmp_path}\n"
    with pytest.raises(UsageError, match="server action must be status or stop, got 'restart'"):
        warm_server.server_command("restart", str(tmp_path))
