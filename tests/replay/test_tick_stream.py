"""``tick_stream.held_reports``: a stream of report versions turned into the reports the leader holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lbreplay.replay.records import ObservedTick
from lbreplay.replay.tick_stream import held_reports

REPO = Path(__file__).resolve().parents[2]


def _version(tick: int, ts: int, broker: int, bundles: dict[str, float], nb: int = 3) -> ObservedTick:
    alive = np.zeros(nb, dtype=bool)
    alive[broker] = True
    usage = np.zeros((nb, 5))
    usage[broker, 0] = 10.0 + tick
    last_update = np.full(nb, -1, dtype=np.int64)
    last_update[broker] = ts
    names = sorted(bundles)
    values = np.array([[0, 0, bundles[n], 0, 0, 1] for n in names], dtype=float).reshape(-1, 6)
    return ObservedTick(tick, ts, alive, usage, np.ones((nb, 5)), bundle_names=names,
                        bundle_owner=np.full(len(names), broker, dtype=np.int32), bundle_values=values,
                        last_update=last_update)


A, B, C = "ns/0x00000000_0x80000000", "ns/0x80000000_0xffffffff", "ns/0x80000000_0xc0000000"


def test_each_broker_keeps_its_latest_report_and_a_bundle_may_sit_in_two() -> None:
    """ModularLoadManagerImpl keeps each broker's latest LocalBrokerData: a tick holds every broker that wrote so
    far with its last version; a bundle listed by two held reports (B moved from broker 0 to 1, whose report is
    newer) is in both listings, and the one-owner view follows the newest report."""
    stream = [_version(0, 60_000, 0, {A: 1.0, B: 2.0}), _version(1, 61_500, 1, {B: 3.0}),
              _version(2, 120_100, 0, {A: 4.0}), _version(3, 121_000, 1, {B: 5.0, C: 6.0})]
    out = list(held_reports(iter(stream), 3))
    assert [t.alive.tolist() for t in out] == [[True, False, False], [True, True, False], [True, True, False],
                                               [True, True, False]]
    t1 = out[1]
    assert t1.bundle_names == [A, B] and t1.bundle_owner.tolist() == [0, 1]  # B: broker 1's report is newer
    assert t1.bundle_values[:, 2].tolist() == [1.0, 3.0]
    brokers, idx, values = t1.listings  # type: ignore[misc]
    assert sorted(zip(brokers.tolist(), [t1.bundle_names[i] for i in idx], values[:, 2].tolist())) == [
        (0, A, 1.0), (0, B, 2.0), (1, B, 3.0)]
    assert t1.last_update.tolist() == [60_000, 61_500, -1]  # type: ignore[union-attr]
    assert t1.usage[:, 0].tolist() == [10.0, 11.0, 0.0]
    t2 = out[2]  # broker 0's new version no longer lists B: only broker 1 does
    assert t2.bundle_names == [A, B] and t2.bundle_owner.tolist() == [0, 1]
    assert len(t2.listings[0]) == 2  # type: ignore[index]
    t3 = out[3]  # overlapping ranges (B and its half C) are both held: real reports around a split
    assert t3.bundle_names == [A, C, B] and t3.bundle_owner.tolist() == [0, 1, 1]


def test_a_report_older_than_the_hold_counts_as_its_broker_gone() -> None:
    """The lake does not record a broker's node deletion: a broker that wrote nothing for longer than the hold
    (a live one writes at least every loadBalancerReportUpdateMaxIntervalMinutes) is gone with its bundles."""
    stream = [_version(0, 0, 0, {A: 1.0}), _version(1, 1_000, 1, {B: 2.0}), _version(2, 65_000, 1, {B: 2.0}),
              _version(3, 130_000, 1, {B: 2.0})]
    out = list(held_reports(iter(stream), 3, hold_ms=120_000))
    assert [t.alive.tolist()[:2] for t in out] == [[True, False], [True, True], [True, True], [False, True]]
    assert out[3].bundle_names == [B]
    kept = list(held_reports(iter(stream), 3))  # no hold: every broker that wrote stays
    assert kept[3].alive.tolist()[:2] == [True, True]


@pytest.mark.spark
def test_hand_made_sample_replays_as_report_versions(spark: Any, lake: str) -> None:
    """data/samples/modular-3brokers ingested: each broker writes at its own second of the minute (broker-1 :05.217,
    broker-2 :17.903, broker-3 :33.412), so broker_load holds report versions (not whole minutes) and the tick stream
    is one tick per version, turned into the leader's held view: the first write holds broker-1 only, the third all
    three, and from then on every tick holds all 3 brokers with the bundles of their latest reports: 7 while
    public/default/0x80000000_0xc0000000 moves (broker-2's 12:01 report dropped it, broker-3's next one lists it),
    9 after broker-1's split. A generator-style history (every broker at each tick, on whole seconds, whatever its
    tick_seconds) is not versioned; one row at a millisecond makes it versions."""
    from datetime import datetime

    from lbreplay.lake.ingest import ingest
    from lbreplay.replay.preparation import input_versions, is_versioned, prepare
    from lbreplay.replay.tick_stream import ticks_from_stream

    ingest(spark, lake, REPO / "data" / "samples" / "modular-3brokers", "ts_versions")
    _, manifest = prepare(spark, lake, "ts_versions", input_versions(spark, lake, "ts_versions"), use_topics=False)
    assert manifest.versioned and manifest.broker_ids == ["broker-1:8080", "broker-2:8080", "broker-3:8080"]
    ticks = list(ticks_from_stream(manifest, hold_ms=16 * 60_000))
    first = 1_690_977_600_000  # 2023-08-02T12:00:00Z
    assert [t.ts_ms - first for t in ticks] == [m * 60_000 + s for m in range(3) for s in (5_217, 17_903, 33_412)]
    assert [int(t.alive.sum()) for t in ticks] == [1, 2, 3, 3, 3, 3, 3, 3, 3]
    assert [len(t.bundle_names) for t in ticks] == [3, 6, 8, 8, 7, 8, 9, 9, 9]
    ticks_30s = spark.createDataFrame([(datetime(2023, 8, 2, 12, m, s),) for m in range(3) for s in (0, 30)],
                                      "ts TIMESTAMP")
    assert not is_versioned(ticks_30s)
    report = spark.createDataFrame([(datetime(2023, 8, 2, 12, 3, 5, 217_000),)], "ts TIMESTAMP")
    assert is_versioned(ticks_30s.union(report))
