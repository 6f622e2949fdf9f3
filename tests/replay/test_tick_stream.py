"""``tick_stream``: a stream of report versions turned into the reports the leader holds, and its timer ticks."""

from __future__ import annotations

import copy
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


# ------------------------------------------------------------------------------------------- the leader's timer
def test_timer_ticks_hold_the_leaders_view_between_report_writes() -> None:
    """kernel.leader_election: after an election at 42 s the leader's timed tasks can run at 102 s, 162 s, ...
    ``with_leader_timer`` adds a tick at each timer minute between the stream's first and last report tick, holding
    what the leader held then (the previous tick's view, nothing written); a timer minute at a write's own time
    comes after it; ticks are numbered anew, report ticks say timer minute 0."""
    from lbreplay.replay.tick_stream import with_leader_timer

    stream = [_version(0, 27_000, 0, {A: 1.0}), _version(1, 87_000, 1, {B: 2.0}), _version(2, 162_000, 0, {A: 3.0}),
              _version(3, 200_000, 1, {B: 4.0})]
    out = list(with_leader_timer(held_reports(iter(stream), 3), [42_000]))
    assert [(t.tick, t.ts_ms, t.timer_minute) for t in out] == [
        (0, 27_000, 0), (1, 87_000, 0), (2, 102_000, 1), (3, 162_000, 0), (4, 162_000, 2), (5, 200_000, 0)]
    timer, before = out[2], out[1]
    assert timer.alive.tolist() == before.alive.tolist() and timer.bundle_names == before.bundle_names
    assert timer.last_update.tolist() == before.last_update.tolist()  # type: ignore[union-attr]
    assert out[4].bundle_values[:, 2].tolist() == out[3].bundle_values[:, 2].tolist() == [3.0, 2.0]
    # a second election restarts the count; none before the stream's first tick
    again = list(with_leader_timer(held_reports(iter(stream), 3), [-500_000, 130_000]))
    assert [(t.ts_ms, t.timer_minute) for t in again if t.timer_minute] == [(40_000, 9), (100_000, 10), (190_000, 1)]


def test_a_timer_tick_at_its_logged_run_holds_the_reports_written_during_its_lag() -> None:
    """The leader's log shows its 102 s run at 102.4 s (its earlier runs' durations: fixed delay); broker 0 wrote
    at 102.3 s. The timer tick is at the run, holds that report and says its lag; the 162 s run, not logged, stays
    at its minute."""
    from lbreplay.replay.tick_stream import with_leader_timer

    stream = [_version(0, 27_000, 0, {A: 1.0}), _version(1, 102_300, 0, {A: 5.0}), _version(2, 200_000, 1, {B: 4.0})]
    out = list(with_leader_timer(held_reports(iter(stream), 3), [42_000], ["b:8080"], [102_400]))
    assert [(t.ts_ms, t.timer_minute, t.timer_lag_ms, t.leader_broker) for t in out] == [
        (27_000, 0, None, None), (102_300, 0, None, "b:8080"), (102_400, 1, 400, "b:8080"),
        (162_000, 2, None, "b:8080"), (200_000, 0, None, "b:8080")]
    assert out[2].bundle_values[:, 2].tolist() == [5.0]  # the report written during the lag
    nominal = list(with_leader_timer(held_reports(iter(stream), 3), [42_000]))
    assert [(t.ts_ms, t.timer_minute) for t in nominal if t.timer_minute] == [(102_000, 1), (162_000, 2)]
    assert nominal[1].bundle_values[:, 2].tolist() == [1.0]  # at the minute: the older report


def _report(ts: int, broker: int, cpu_pct: float, nb: int = 2) -> ObservedTick:
    """One broker's report version: 4 bundles of 40 MB/s each (broker 0) or 2 MB/s (broker 1) at ``cpu_pct``."""
    alive = np.zeros(nb, dtype=bool)
    alive[broker] = True
    usage, limit = np.zeros((nb, 5)), np.full((nb, 5), 100.0)
    usage[broker, 0] = cpu_pct
    last_update = np.full(nb, -1, dtype=np.int64)
    last_update[broker] = ts
    lo = 0 if broker == 0 else 0x80000000
    names = [f"t/ns/0x{lo + k * 0x20000000:08x}_0x{lo + (k + 1) * 0x20000000 - (1 if broker and k == 3 else 0):08x}"
             for k in range(4)]
    per = 20e6 if broker == 0 else 1e6
    values = np.tile([per, per, 100.0, 100.0, 2.0, 1.0], (4, 1))
    return ObservedTick(0, ts, alive, usage, limit, bundle_names=names,
                        bundle_owner=np.full(4, broker, dtype=np.int32), bundle_values=values, last_update=last_update)


@pytest.mark.parametrize("drop_at_s", [95, 105])
def test_shedding_runs_at_the_leaders_timer_on_what_it_holds_then(drop_at_s: int) -> None:
    """The live run's finding: the leader elected at :42 sheds at :42 of each minute (LoadSheddingTask, started by
    startLoadBalancerTasks), on the reports it holds then. Broker 0 reports 90 % CPU at 27 s and 87 s, broker 1
    10 %; broker 0's next report (``drop_at_s``) says 20 %. ThresholdShedder at the timer (102 s) unloads from
    broker 0 only if the 90 % report is still the one held (drop at 105 s); a replay without the election sheds at
    the first report write an interval after its start (87 s), on the 90 % report, whatever came next."""
    from lbreplay.replay.engine import Replay
    from lbreplay.replay.load_model import CpuCalibration
    from lbreplay.replay.records import RunSpec, StaticInputs
    from lbreplay.replay.tick_stream import with_leader_timer

    t0, elected = 1_767_225_600_000, 1_767_225_600_000 + 42_000
    stream = [_report(t0 + 27_000, 0, 90.0), _report(t0 + 28_000, 1, 10.0), _report(t0 + 87_000, 0, 90.0),
              _report(t0 + 88_000, 1, 10.0), _report(t0 + drop_at_s * 1000, 0, 20.0), _report(t0 + 147_000, 0, 20.0),
              _report(t0 + 148_000, 1, 10.0)]
    static = StaticInputs(["a:8080", "b:8080"], ["t/ns"], CpuCalibration(np.zeros(2), np.zeros(2)))

    def unloads(elections: list[int] | None) -> list[tuple[int, str | None]]:
        replay = Replay(RunSpec("r", "c", "observed", {"loadBalancerSheddingGracePeriodMinutes": 0}), static)
        ticks = held_reports(iter(copy.deepcopy(stream)), 2)
        if elections:
            ticks = with_leader_timer(ticks, elections)
        return [((d.ts_ms - t0) // 1000, d.source_broker) for obs in ticks for d in replay.step(obs).decisions
                if d.action == "UNLOAD"]

    timed = unloads([elected])
    assert set(timed) == (set() if drop_at_s < 102 else {(102, "a:8080")})
    untimed = unloads(None)
    assert untimed[0] == (87, "a:8080") and {t for t, _ in untimed} <= {87, 147}


def test_a_bundle_unloaded_at_one_timer_run_may_go_again_at_the_next() -> None:
    """The live run of 2026-11-27: grace period and shedding interval both 1 minute. A run's synchronous unload
    calls take time and LoadSheddingTask starts the next run one interval after the run ends, so at the next run a
    bundle unloaded before a later step of its run is past the grace period (the leader unloaded it again), and
    the one unloaded at the run's last step is not (equal milliseconds: the leader passed it over for a smaller
    bundle) -- ``modular_load_manager.RunClock``. Broker 0 stays at 90 % and lists the same bundles."""
    from lbreplay.replay.engine import Replay
    from lbreplay.replay.load_model import CpuCalibration
    from lbreplay.replay.records import RunSpec, StaticInputs
    from lbreplay.replay.tick_stream import with_leader_timer

    t0, elected = 1_767_225_600_000, 1_767_225_600_000 + 42_000
    stream = []
    for s in (27, 87, 147, 207):
        heavy = _report(t0 + s * 1000, 0, 90.0)
        heavy.bundle_values[0, :2] = 30e6
        stream += [heavy, _report(t0 + (s + 1) * 1000, 1, 10.0)]
    static = StaticInputs(["a:8080", "b:8080"], ["t/ns"], CpuCalibration(np.zeros(2), np.zeros(2)))
    replay = Replay(RunSpec("r", "c", "observed", {"loadBalancerSheddingGracePeriodMinutes": 1}), static)
    got = [((d.ts_ms - t0) // 1000, d.bundle) for obs in with_leader_timer(held_reports(iter(stream), 2), [elected])
           for d in replay.step(obs).decisions if d.action == "UNLOAD"]
    first, second = ([b for t, b in got if t == s] for s in (102, 162))
    names = stream[0].bundle_names
    # the biggest, then the first of the equal ones in getBundleDataForLoadShedding()'s HashMap order: two steps
    assert first == [names[0], names[2]]
    assert names[0] in second and names[2] not in second


def test_bundle_part_ticks_reuse_the_order_only_for_the_same_rows(tmp_path: Path) -> None:
    """The bundle part's ticks come ordered by name with their owners and loads; a tick listing the same bundles
    in the same rows as the one before reuses its names and order, the same bundles in other rows or other
    bundles are sorted anew (each tick checked against its own rows sorted by name)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lbreplay.replay.stream_manifest import BUNDLE_COLUMNS
    from lbreplay.replay.tick_stream import _bundle_part_ticks

    ticks = {1000: ["ns/0x2", "ns/0x1", "ns/0x3"], 2000: ["ns/0x2", "ns/0x1", "ns/0x3"],
             3000: ["ns/0x1", "ns/0x3", "ns/0x2"], 4000: ["ns/0x3", "ns/0x1"]}
    rows = [(ts, name, k, float(ts + k)) for ts, names in ticks.items() for k, name in enumerate(names)]
    part = tmp_path / "bundles"
    part.mkdir()
    table = {"ts_ms": pa.array([r[0] for r in rows], pa.int64()), "bundle": [r[1] for r in rows],
             "owner_index": pa.array([r[2] for r in rows], pa.int32())}
    table.update({c: pa.array([r[3] * (i + 1) for r in rows], pa.float64()) for i, c in enumerate(BUNDLE_COLUMNS)})
    pq.write_table(pa.table(table), part / "part-0.parquet")
    got = list(_bundle_part_ticks(str(part)))
    assert [g[0] for g in got] == list(ticks)
    for (ts, names, owners, vals), listed in zip(got, ticks.values(), strict=True):
        want = sorted(range(len(listed)), key=listed.__getitem__)
        assert names == sorted(listed)
        assert owners.tolist() == want
        assert vals[:, 0].tolist() == [float(ts + k) for k in want]


def test_a_timer_tick_holds_what_its_run_read_when_its_strategy_printed_an_older_report() -> None:
    """Broker 0 wrote at 102.3 s and the run's lines start at 102.4 s, but its strategy printed broker 0's 27 s
    report (``shedding_run.read_at`` = 102.299 s): the tick is at that time and holds the older report."""
    from lbreplay.replay.tick_stream import with_leader_timer

    stream = [_version(0, 27_000, 0, {A: 1.0}), _version(1, 102_300, 0, {A: 5.0}), _version(2, 200_000, 1, {B: 4.0})]
    out = list(with_leader_timer(held_reports(iter(stream), 3), [42_000], ["b:8080"], [102_400], [102_299]))
    assert [(t.ts_ms, t.timer_minute, t.timer_lag_ms) for t in out] == [
        (27_000, 0, None), (102_299, 1, 400), (102_300, 0, None), (162_000, 2, None), (200_000, 0, None)]
    assert out[1].bundle_values[:, 2].tolist() == [1.0]  # the report the run printed, not the one 100 ms before it
