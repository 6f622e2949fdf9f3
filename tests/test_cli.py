"""The CLI's catch-all error path (cli.main): an unexpected exception in any command exits 1 with one line that
names it and the file holding its traceback; ``--verbose`` prints the traceback too (DESIGN.md §3 exit codes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lbreplay import cli
from tests.hostile import harness

# command -> (module, function it delegates to, minimal argv)
COMMANDS: dict[str, tuple[str, str, list[str]]] = {
    "generate": ("lbreplay.lake.generator", "generate_command", ["--scenario", "s", "--cluster", "c"]),
    "ingest": ("lbreplay.lake.ingest", "ingest_command", ["--source", ".", "--cluster", "c"]),
    "validate": ("lbreplay.lake.validation", "validate_command", []),
    "sql": ("lbreplay.lake.sql", "sql_command", ["SELECT 1"]),
    "decide": ("lbreplay.decide", "decide_command", ["--request", "-"]),
    "replay": ("lbreplay.replay.spark_replay", "replay_command", ["--cluster", "c"]),
    "sweep": ("lbreplay.replay.spark_replay", "sweep_command", ["--cluster", "c", "--grid", "g.yaml"]),
    "report": ("lbreplay.report.html_report", "report_command", ["--runs", "a", "--out", "x.html"]),
    "demo": ("lbreplay.demo", "demo_command", []),
}


def _run(argv: list[str]) -> tuple[int, str, str]:
    outcome = harness.cli(None, *argv)
    return outcome.code, outcome.out, outcome.err


@pytest.fixture()
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "logs"
    monkeypatch.setattr(cli, "crash_log_dir", lambda: folder)
    return folder


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("verbose", [False, True])
def test_unexpected_error_in_each_command_exits_1_with_one_line(
    command: str, verbose: bool, logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    module, func, argv = COMMANDS[command]

    def boom(*_a: object, **_k: object) -> None:
        raise ZeroDivisionError(f"forced failure in {command}\nsecond line of detail")

    monkeypatch.setattr(importlib.import_module(module), func, boom)
    code, out, err = _run([command, *argv, *(["--verbose"] if verbose else [])])
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.strip()]
    last = lines[-1]
    assert last.startswith("lbreplay: unexpected error: ZeroDivisionError: forced failure in " + command)
    assert "second line" not in last
    written = sorted(logs.glob("lbreplay-*.log"))
    assert len(written) == 1 and str(written[0]) in last
    assert "Traceback (most recent call last)" in written[0].read_text()
    assert f"forced failure in {command}" in written[0].read_text()
    if verbose:
        assert "Traceback (most recent call last)" in err
    else:
        assert len(lines) == 1 and "Traceback" not in err and "--verbose" in last
    # --verbose lasts one command: main() called in-process does not leave Spark's default logging switched on
    # for later commands of the same process or for the processes it starts (lbreplay.spark reads the variable)
    assert "LBREPLAY_VERBOSE" not in os.environ


def test_usage_error_still_exits_2_and_lbreplay_errors_keep_their_code(logs: Path) -> None:
    code, _, err = _run(["replay", "--no-such-flag"])
    assert code == 2 and "No such option" in err
    code, _, err = _run(["sql", "SELECT 1", "--format", "xml"])
    assert code == 2 and err.strip() == "lbreplay: --format must be one of table, csv, json, got 'xml'"
    assert not logs.exists()


def test_console_script_unexpected_error_in_a_real_process(tmp_path: Path) -> None:
    """The entry point in a fresh interpreter (no click installed: typer vendors it): a failure inside the command
    gives exactly one stderr line, never a second traceback from the error path itself."""
    env = {**os.environ, "LBREPLAY_CACHE_DIR": str(tmp_path / "cache")}
    code = (
        "import sys, lbreplay.decide as d\n"
        "def boom(**k): raise RuntimeError('kaput')\n"
        "d.decide_command = boom\n"
        "from lbreplay.cli import main\n"
        "sys.argv = ['lbreplay', 'decide', '--request', 'x.json']\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("lbreplay: unexpected error: RuntimeError: kaput (traceback in ")
    assert list((tmp_path / "cache" / "logs").glob("lbreplay-*.log"))
