"""The committed recording of the extensible load manager (data/samples/real-extensible-transfer): 3 Pulsar 4.0.7
brokers, ExtensibleLoadManagerImpl with TransferShedder; the leader made 11 transfers and the owners 5 splits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lbreplay.collect.leader_log import parse_leader_log, shedding_runs
from lbreplay.lake.ingest import read_dumps
from lbreplay.live_audit.audit_check import check, leader_decisions, shedding_timer_check

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-extensible-transfer"
ELECTED = 1795772302251  # /loadbalance/extension/leader's ctime: 2026-11-27T09:38:22.251Z


def _log() -> list[str]:
    return (SAMPLE / "leader-decisions.log").read_text(encoding="utf-8").splitlines()


def test_the_leaders_transfers_and_the_owners_splits() -> None:
    """UnloadScheduler's ``Unload[...]`` lines (each a transfer to a named broker) and SplitManager's split events
    (each completed), their owners from the lines' broker prefixes."""
    decisions = leader_decisions(SAMPLE)
    unloads = [d for d in decisions if d.action == "UNLOAD"]
    splits = [d for d in decisions if d.action == "SPLIT"]
    assert (len(unloads), len(splits)) == (11, 5)
    assert all(d.strategy == "TransferShedder" and d.target and d.target != d.source for d in unloads)
    assert [d.outcome for d in parse_leader_log(_log(), attempts=True) if d.action == "SPLIT"] == ["succeeded"] * 5
    assert {d.source for d in splits} == {"127.0.0.1:18082", "127.0.0.1:18083"}


def test_ingest_keeps_the_tombstones_and_the_unload_schedulers_start() -> None:
    """Each ``.tombstone`` is a broker_load_data_ext row with no load data (the leader has none of that broker until
    its next report); the election's row is the UnloadScheduler's start, the earliest phase of its logged runs:
    9.5 s after the znode's creation, while the leader was starting (``ExtensibleLoadManagerImpl.playLeader``)."""
    rows = read_dumps(SAMPLE, "ext").rows
    tombstones = [r for r in rows["broker_load_data_ext"] if r.get("updated_at") is None]
    assert len(tombstones) == len(list(SAMPLE.glob("extensible/broker-load-data/*/*.tombstone"))) == 13
    assert all(r.get("weighted_max_ema") is None and r.get("cpu_usage") is None for r in tombstones)
    [election] = rows["leader_election"]
    start = (election["ts"] - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    offsets = [(t - start) % 60_000 for t in shedding_runs(_log())]
    assert (election["broker"], start - ELECTED, min(offsets)) == ("127.0.0.1:18083", 9_477, 0)
    assert offsets[0] == 10 and max(offsets) < 1_000  # the first run 10 ms late; every run on the timer


def test_every_unload_scheduler_run_is_on_the_timer_and_holds_the_printed_loads() -> None:
    """The 12 runs the leader logged fall on the timer's minutes; at the 7 that printed TransferShedder's load
    statistics (the held BrokerLoadData's weightedMaxEMA: sum, sqSum, avg, std and the brokers sorted by it), the
    versions held at the timer tick give the same figures and order."""
    got = shedding_timer_check(SAMPLE, read_dumps(SAMPLE, "ext").rows, SAMPLE / "broker.conf")
    assert (got["elections"], got["leader"], got["audit"], got["leader_on_timer"]) == (1, 12, 12, 12)
    assert (got["views"], got["views_equal"], got["views_unexplained"]) == (7, 7, [])


@pytest.mark.spark
def test_audit_reproduces_the_extensible_leader(spark, lake: str, tmp_path: Path) -> None:
    """``ingest`` -> ``validate`` -> ``replay --mode observed --broker-conf``: the audit decides with the extensible
    load manager on the versions the leader held (published weightedMaxEMA, top bundles lists in their published
    order, tombstones) at its UnloadScheduler's minutes, and makes the leader's 11 transfers (same bundle, source,
    destination and minute) and the owners' 5 splits, nothing else."""
    assert_reproduced(check(SAMPLE, tmp_path, "real-ext", SAMPLE / "broker.conf", spark=spark, lake=lake), 16, 11)


def assert_reproduced(report: dict[str, Any], decisions: int, unloads: int) -> None:
    """The comparison of an audit that reproduces its leader: the raw recording validated, every one of the
    leader's ``decisions`` matched and nothing else, its ``unloads`` to the leader's destinations."""
    assert report["raw"]["validation_passed"], report["raw"]["validation"]
    assert report["result"] == "compared", report["result"]
    assert not report["differences"], report["differences"]
    assert report["matched"] == report["leader_decisions"] == report["audit_decisions"] == decisions
    moved = [m for m in report["matched_decisions"] if m["action"] == "UNLOAD"]
    assert len(moved) == unloads and all(m["leader_target"] == m["audit_target"] for m in moved)
