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
    assert timer_start(ELECTED, runs) == ELECTED + 9_298  # the earlier phase of the two runs
    assert timer_start(ELECTED, [ELECTED - 5_000, *runs]) == ELECTED + 9_298  # a run of an earlier leadership
    assert timer_start(ELECTED, []) == ELECTED  # no log: the election
    assert timer_start(ELECTED, [ELECTED + 61 * MINUTE]) == ELECTED  # nothing within the hour after it


def test_a_late_first_run_does_not_shift_the_timer() -> None:
    """The fresh-clone extensible run: UnloadScheduler's first run came 406 ms after its timer minute (the pool
    busy at start), the others within a few ms. The fixed-rate timer's phase is the earliest run's, also when the
    phase is near a whole minute (a late run then wraps past it), and runs after the next election are another
    timer's."""
    runs = [ELECTED + 69_706, ELECTED + 129_303, ELECTED + 189_300, ELECTED + 249_301]
    assert timer_start(ELECTED, runs) == ELECTED + 9_300
    near = [ELECTED + 60_000 + 59_900 + 400, ELECTED + 2 * 60_000 + 59_900, ELECTED + 3 * 60_000 + 59_903]
    assert timer_start(ELECTED, near) == ELECTED + 59_900
    nxt = ELECTED + 150_000
    assert timer_start(ELECTED, [*runs[:2], nxt + 61_000], until_ms=nxt) == ELECTED + 9_303


@given(delay=st.integers(0, MINUTE - 1), interval=st.integers(1, 30), skipped=st.integers(0, 3),
       late=st.lists(st.integers(0, 20_000), min_size=3, max_size=3))
def test_timer_start_whatever_the_interval(delay: int, interval: int, skipped: int, late: list[int]) -> None:
    """A timer that started ``delay`` ms after the election and runs every ``interval`` minutes (its first run one
    interval after its start; the log may lack the first ``skipped`` runs), each logged run up to 20 s late: while
    the first logged run is within the hour after the election, the start is the least late run's within the hour
    (exact when one is on time), as a phase within the minute after the election."""
    start = ELECTED + delay
    runs = [start + (k + 1) * interval * MINUTE + late[i] for i, k in enumerate(range(skipped, skipped + 3))]
    within = [lt for t, lt in zip(runs, late) if t - ELECTED <= 60 * MINUTE]
    expect = ELECTED + (delay + min(within)) % MINUTE if within else ELECTED
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
