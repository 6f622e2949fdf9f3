"""Run-id locks (lbreplay.lake.locks): one writer per run id per lake; a killed holder releases its lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lbreplay.errors import LbReplayError
from lbreplay.lake.locks import RunInProgressError, _lock_file, run_id_lock
from tests.hostile.harness import env

HOLD = "import sys, time\nfrom lbreplay.lake.locks import run_id_lock\nwith run_id_lock(sys.argv[1], [sys.argv[2]]):\n" \
       "    print('held', flush=True)\n    time.sleep(600)\n"


def _lake(tmp_path: Path) -> str:
    (tmp_path / "lake" / "runs" / "_delta_log").mkdir(parents=True)  # a lake: one of lbreplay's Delta tables
    return str(tmp_path / "lake")


def test_second_writer_of_a_run_id_fails_and_a_kill_9_releases_it(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, lake, "run/é 1"], stdout=subprocess.PIPE, text=True,
                              env=env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunInProgressError) as err:
            with run_id_lock(lake, ["other", "run/é 1"]):
                pytest.fail("entered a held lock")
        assert str(err.value).startswith(f"run id 'run/é 1' is being written by another lbreplay process on this lake "
                                         f"(pid {holder.pid})")
        assert err.value.exit_code == 1
        with run_id_lock(lake, ["other"]):  # the one not held was released again on the way out
            pass
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    with run_id_lock(lake, ["run/é 1"]):
        assert _lock_file(lake, "run/é 1").read_text() == f"pid {os.getpid()}\n"


def test_uri_lakes_and_no_ids_take_no_lock(tmp_path: Path) -> None:
    with run_id_lock("s3a://bucket/lake", ["a"]):
        pass
    with run_id_lock(str(tmp_path / "x"), []):
        pass
    assert not (tmp_path / "x").exists()


def test_a_path_that_is_not_a_lake_is_refused_before_a_lock_directory_is_made(tmp_path: Path) -> None:
    with pytest.raises(LbReplayError) as err:
        with run_id_lock(str(tmp_path / "x"), ["a"]):
            pytest.fail("locked outside a lake")
    assert err.value.exit_code == 2 and str(err.value).startswith(f"no lake at {tmp_path / 'x'}")
    assert not (tmp_path / "x").exists()
