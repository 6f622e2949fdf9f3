"""``lake.dump_rows``: the leader's elections from collect's record, the extensible leader's timer start."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from lbreplay.lake.dump_rows import DumpRows, leader_elections, timer_start

MINUTE = 60_000
ELECTED = 1795743875968  # /loadbalance/extension/leader's ctime in a live 4.0.7 run (01:44:35.968Z)


def test_the_timer_starts_at_the_first_logged_run_less_whole_minutes() -> None:
    """The live run: elected at 01:44:35.968 while starting, first UnloadScheduler run at 01:45:45.268, so the
    timer started 9.3 s after the election (ExtensibleLoadManagerImpl.playLeader waits for the broker to be ready)."""
    runs = [ELECTED + 69_300, ELECTED + 129_298]
    assert timer_start(ELECTED, runs) == ELECTED + 9_300
    assert timer_start(ELECTED, [ELECTED - 5_000, *runs]) == ELECTED + 9_300  # a run of an earlier leadership
    assert timer_start(ELECTED, []) == ELECTED  # no log: the election
    assert timer_start(ELECTED, [ELECTED + 61 * MINUTE]) == ELECTED  # nothing within the hour after it


@given(delay=st.integers(0, MINUTE - 1), interval=st.integers(1, 30), skipped=st.integers(0, 3))
def test_timer_start_whatever_the_interval(delay: int, interval: int, skipped: int) -> None:
    """A timer that started ``delay`` ms after the election and runs every ``interval`` minutes (its first run one
    interval after its start; the log may lack the first ``skipped`` runs): its start is recovered exactly while the
    first logged run is within the hour after the election."""
    start = ELECTED + delay
    runs = [start + (k + 1) * interval * MINUTE for k in range(skipped, skipped + 3)]
    expect = start if runs[0] - ELECTED <= 60 * MINUTE else ELECTED
    assert timer_start(ELECTED, runs) == expect


def test_an_extension_leader_record_with_the_leaders_log(tmp_path: Path) -> None:
    """collect's record of /loadbalance/extension/leader is an election; with the leader's log in the dump its
    leader_election row is the timer's start, without it the znode's ctime. /loadbalance/leader (modular) keeps
    its ctime."""
    (tmp_path / "collect").mkdir()
    records = [
        {"event": "version", "path": "/loadbalance/extension/leader", "ctime": ELECTED, "mtime": ELECTED, "version": 0,
         "data": {"brokerId": "127.0.0.1:18083", "serviceUrl": "http://127.0.0.1:18083"}},
        {"event": "version", "path": "/loadbalance/leader", "ctime": ELECTED + 5, "mtime": ELECTED + 5, "version": 0,
         "data": {"brokerId": "127.0.0.1:18081"}},
    ]
    (tmp_path / "collect" / "metadata-versions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    def elections() -> list[tuple[int, str]]:
        out = DumpRows()
        leader_elections(tmp_path, "c", out)
        return sorted((int(r["ts"].timestamp() * 1000), r["broker"]) for r in out.rows["leader_election"])

    assert elections() == [(ELECTED, "127.0.0.1:18083"), (ELECTED + 5, "127.0.0.1:18081")]
    (tmp_path / "leader-decisions.log").write_text(
        "127.0.0.1:18083 2026-11-27T01:45:45,268+0000 [pulsar-load-manager-1-1] INFO  org.apache.pulsar.broker."
        "loadbalance.extensions.scheduler.UnloadScheduler - [TransferShedder] Unload decision result: []\n")
    assert elections() == [(ELECTED + 5, "127.0.0.1:18081"), (ELECTED + 69_300 - MINUTE, "127.0.0.1:18083")]
