"""``lbreplay generate``: scenarios, the ownership model, the load model, the report write rule and the tables.

Pure tests (no Spark) come first; the Spark tests share one small generated cluster (``combo``: heterogeneous
capacity, a broker leaving, a broker joining, a hot bundle, jitter and a diurnal cycle) plus the ``scale-in``
scenario at size S (the done-when check).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import zlib
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from lbreplay.errors import UsageError
from lbreplay.kernel.naming import format_range
from lbreplay.lake.generator import generate, generate_command
from lbreplay.lake.host_usage import LoadModel, cpu_limit, kbit_per_s, nic_limit_kbit
from lbreplay.lake.ownership_plan import plan_ownership
from lbreplay.lake.scenario import (
    Event,
    RebalanceSpec,
    broker_names,
    initial_boundaries,
    list_scenarios,
    namespace_names,
    resolve_scenario,
)

MIB = 1024 * 1024
START = datetime(2024, 1, 1, tzinfo=timezone.utc)

COMBO = {
    "name": "combo",
    "description": "tiny cluster with every generator feature",
    "brokers": 4,
    "namespaces": 2,
    "bundles_per_namespace": 8,
    "topics": 320,
    "ticks": 48,
    "broker": {"capacity_factors": [1.0, 0.5, 2.0]},
    "traffic": {
        "target_utilization": 0.4,
        "noise": 0.0,
        "diurnal": {"amplitude": 0.5, "period_ticks": 48},
        "jitter": {"probability": 0.05, "multiplier": [2.0, 4.0], "length_ticks": 2},
        "hot_bundle": {"namespace": 0, "bundle": 5, "threshold_factor": 2.0, "ramp": [0.1, 0.4]},
    },
    "events": [{"at_tick": 10, "leave": 1}, {"at_tick": 20, "join": 1}],
    "rebalance": {"max_moves": 1},
}


def diurnal(tick: int) -> float:
    """The combo's diurnal factor, derived from the scenario: 1 + 0.5 sin(2 pi t / 48 - pi / 2)."""
    return 1.0 + 0.5 * math.sin(2 * math.pi * tick / 48 - math.pi / 2)


def ts(tick: int) -> str:
    """A tick's timestamp as Spark SQL compares it (session time zone UTC)."""
    return (START + timedelta(minutes=tick)).strftime("%Y-%m-%d %H:%M:%S")


def tick_of(column: str):  # type: ignore[no-untyped-def]
    """Minutes since the scenario start, computed in Spark (independent of the Python process time zone)."""
    from pyspark.sql import functions as F

    return ((F.unix_timestamp(column) - int(START.timestamp())) / 60).cast("int")


# ---------------------------------------------------------------------------------------------------------
# pure: naming, scenarios, ownership model, load model
# ---------------------------------------------------------------------------------------------------------
def test_initial_boundaries_follow_policies_util_get_bundles() -> None:
    """PoliciesUtil.getBundles: seg = 2^32 // N, last boundary 0xffffffff (PULSAR-LB-SPEC §2: N=4 example)."""
    assert initial_boundaries(4) == [0x00000000, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF]
    # N=3 does not divide 2^32: seg = 0x55555555 and the last bundle is one larger
    assert initial_boundaries(3) == [0, 0x55555555, 0xAAAAAAAA, 0xFFFFFFFF]
    assert initial_boundaries(1) == [0, 0xFFFFFFFF]
    with pytest.raises(UsageError):
        initial_boundaries(0)


def test_names_sort_in_index_order() -> None:
    """Broker ids are host:port and zero-padded, so sorted order (the replay's visiting order) is index order."""
    assert broker_names(3) == ["broker-00:8080", "broker-01:8080", "broker-02:8080"]
    assert broker_names(120)[7] == "broker-007:8080"
    ns = namespace_names(6)
    assert ns[:4] == ["acme/orders", "acme/payments", "acme/telemetry", "acme/clickstream"]
    assert ns[4] == "globex/inventory" and len(set(namespace_names(200))) == 200


@pytest.mark.parametrize("name", ["steady", "heterogeneous", "hot-bundle", "scale-out", "scale-in",
                                  "rolling-restart", "jitter", "diurnal"])
def test_every_issue_scenario_exists_for_both_sizes(name: str) -> None:
    """Issue: the eight scenarios under conf/scenarios; M = 2,000 bundles, 20,000 topics, 1,440 ticks."""
    assert name in list_scenarios()
    s = resolve_scenario(name, "S")
    m = resolve_scenario(name, "M")
    assert s.ticks <= 240 and s.topics <= 2000 and 64 <= s.num_bundles <= 200
    assert (m.num_bundles, m.topics, m.ticks, m.tick_seconds) == (2000, 20000, 1440, 60)
    assert max(m.brokers, m.brokers + sum(e.count for e in m.events if e.kind == "join")) == 50


def test_scenario_stories() -> None:
    """Issue text: scale-out 5 -> 10, scale-in 11 -> 8, heterogeneous 0.5x and 2x capacity."""
    out = resolve_scenario("scale-out")
    assert out.brokers == 5 and [(e.kind, e.count) for e in out.events] == [("join", 5)]
    into = resolve_scenario("scale-in")
    assert into.brokers == 11 and [(e.kind, e.count) for e in into.events] == [("leave", 3)]
    het = resolve_scenario("heterogeneous")
    assert {0.5, 2.0} <= set(het.broker.capacity_factors)
    assert resolve_scenario("hot-bundle").traffic.hot_bundle is not None
    assert resolve_scenario("rolling-restart").events[0].kind == "rolling_restart"


def test_scenario_errors_name_the_key() -> None:
    """Unknown keys are an error that names the key (DESIGN.md §6); unknown names list the known ones."""
    with pytest.raises(UsageError, match="bogus: unknown key"):
        resolve_scenario({**COMBO, "bogus": 1})
    with pytest.raises(UsageError, match=r"traffic\.colour: unknown key"):
        resolve_scenario({**COMBO, "traffic": {"colour": "red"}})
    with pytest.raises(UsageError, match=r"pulsar\.notAKey: unknown config key"):
        resolve_scenario({**COMBO, "pulsar": {"notAKey": 1}})
    with pytest.raises(UsageError, match="unknown scenario 'nope'.*scale-in"):
        resolve_scenario("nope")
    with pytest.raises(UsageError, match="size 'XL' unknown"):
        resolve_scenario("steady", "XL")
    with pytest.raises(UsageError, match="cannot remove 4 of 4"):
        plan_ownership(np.ones(8), np.ones(4), 4, (Event(2, "leave", 4),), 5)


def test_generate_command_rejects_bad_scenario_before_spark() -> None:
    with pytest.raises(UsageError, match="unknown scenario"):
        generate_command("no-such-scenario", "c1", lake="/nonexistent/lake")


def test_initial_placement_and_leave_spread_orphans_to_least_loaded() -> None:
    """12 equal bundles on 3 brokers: 4 each; broker 2 leaves at tick 3 and its 4 bundles alternate 0, 1
    (least loaded first, ties to the lowest index) -> 6 and 6. Every bundle always has one alive owner."""
    plan = plan_ownership(np.ones(12), np.ones(3), 3, (Event(3, "leave", 1),), 6, RebalanceSpec(enabled=False))
    assert np.bincount(plan.owner_at(0), minlength=3).tolist() == [4, 4, 4]
    assert np.bincount(plan.owner_at(3), minlength=3).tolist() == [6, 6, 0]
    assert plan.alive == [(0, 0, 5), (1, 0, 5), (2, 0, 2)]
    gone = np.flatnonzero(plan.owner_at(2) == 2)
    assert sorted(plan.owner_at(3)[gone].tolist()) == [0, 0, 1, 1]
    for t in range(6):
        assert set(plan.owner_at(t).tolist()) <= set(plan.alive_at(t))
    # both survivors' bundle sets changed at tick 3: they write a report then
    assert (0, 3) in plan.changes and (1, 3) in plan.changes and (2, 3) not in plan.changes


def test_join_receives_bundles_gradually() -> None:
    """12 equal bundles on 2 brokers (6, 6); broker 2 joins at tick 1 empty (it has not reported yet, so it
    is no destination that tick), then with one move per tick gets a bundle from the most loaded broker until
    the gap is within tolerance: 4, 4, 4 at tick 5."""
    plan = plan_ownership(np.ones(12), np.ones(3), 2, (Event(1, "join", 1),), 8, RebalanceSpec(max_moves=1))
    counts = [np.bincount(plan.owner_at(t), minlength=3).tolist() for t in range(8)]
    assert counts[0] == [6, 6, 0] and counts[1] == [6, 6, 0]
    assert counts[2] == [5, 6, 1]  # tie of the two old brokers -> the lowest index gives first
    assert counts[3] == [5, 5, 2]
    assert counts[5] == [4, 4, 4] and counts[7] == [4, 4, 4]
    assert plan.moves == 4
    assert plan.alive == [(0, 0, 7), (1, 0, 7), (2, 1, 7)]


def test_stale_orphans_over_place_on_one_broker() -> None:
    """rebalance.orphans: stale puts every orphan on the broker least loaded before the event (the
    over-placement of seed 001 §1.2: 11 brokers, 3 leave, all their bundles land on one broker)."""
    w = np.ones(22)
    plan = plan_ownership(w, np.ones(11), 11, (Event(1, "leave", 3),), 3,
                          RebalanceSpec(enabled=False, orphans="stale"))
    after = np.bincount(plan.owner_at(1), minlength=11)
    assert after.max() == 2 + 6 and (after[:8] == 2).sum() == 7


def test_placement_is_capacity_blind_by_rate_and_proportional_by_capacity() -> None:
    """rebalance.by: rate balances message rate whatever the capacity (LeastLongTermMessageRate-like, so a
    0.5x broker gets as much as a 2x one); capacity balances load / capacity factor (1 : 4 here)."""
    w = np.ones(20)
    by_rate = plan_ownership(w, np.array([0.5, 2.0]), 2, (), 1, RebalanceSpec(enabled=False))
    assert np.bincount(by_rate.owner_at(0)).tolist() == [10, 10]
    by_cap = plan_ownership(w, np.array([0.5, 2.0]), 2, (), 1, RebalanceSpec(enabled=False, by="capacity"))
    assert np.bincount(by_cap.owner_at(0)).tolist() == [4, 16]


def test_rolling_restart_takes_brokers_down_in_turn() -> None:
    """Every broker is down for down_ticks, highest first, interval_ticks apart; it comes back empty."""
    ev = Event(2, "rolling_restart", 0, down_ticks=2, interval_ticks=3)
    plan = plan_ownership(np.ones(9), np.ones(3), 3, (ev,), 14, RebalanceSpec(max_moves=1))
    assert plan.alive == [(0, 0, 7), (0, 10, 13), (1, 0, 4), (1, 7, 13), (2, 0, 1), (2, 4, 13)]
    assert 2 not in plan.owner_at(2).tolist() and 2 not in plan.owner_at(3).tolist()
    for t in range(14):
        owners = plan.owner_at(t)
        assert (owners >= 0).all() and set(owners.tolist()) <= set(plan.alive_at(t))


def test_load_model_units() -> None:
    """DESIGN.md units: bandwidth Kbit/s = bytes/s * 8 / 1024; NIC limit = Gbps * 1024 * 1024
    (loadBalancerOverrideBrokerNicSpeedGbps in LinuxBrokerHostUsageImpl); cpu limit = 100 x cores."""
    m = LoadModel()
    assert kbit_per_s(MIB) == 8192.0
    assert nic_limit_kbit(1.0) == 1048576.0 and cpu_limit(8) == 800.0
    # 25,000 msg/s in+out and 1 MiB/s in+out: 40 + 0.004 * 25000 + 0.5 * 1 = 140.5 % of one core
    assert m.cpu_usage(25000.0, float(MIB)) == pytest.approx(140.5)
    # tx = 2 MiB/s to consumers + 2 copies of 1 MiB/s to bookies = 4 MiB/s = 32768 Kbit/s
    assert m.bandwidth_out_usage(float(MIB), 2.0 * MIB) == 32768.0
    assert m.direct_usage(10.0 * MIB) == pytest.approx(256 + 20)
    assert m.heap_usage(4096.0, 0.5, 1024) == pytest.approx(4096 * 0.30 + 4096 * 0.125 + 64)
    with pytest.raises(UsageError, match="load_model.nope"):
        LoadModel.from_mapping({"nope": 1})


# ---------------------------------------------------------------------------------------------------------
# Spark: the report write rule and the usage it compares
# ---------------------------------------------------------------------------------------------------------
def _writes(spark, rows, **kw):  # type: ignore[no-untyped-def]
    from lbreplay.lake.host_usage import report_write_ticks

    cols = "broker int, tick int, rate_total double, thr_total double, num_bundles int, usage double, forced boolean"
    if len(rows[0]) == 8:
        cols += ", origin int"
    df = spark.createDataFrame(rows, cols)
    args = {"tick_seconds": 60, "threshold_pct": 10.0, "max_interval_minutes": 15.0, **kw}
    got = report_write_ticks(df, **args).collect()
    return sorted((r["broker"], r["tick"]) for r in got)


@pytest.mark.spark
def test_report_write_rule_follows_need_broker_data_update(spark) -> None:  # type: ignore[no-untyped-def]
    """ModularLoadManagerImpl#needBrokerDataUpdate / #percentChange, one-minute ticks:
    broker 0 -- constant load: writes at 0, then only when more than 15 min passed: 16, 32;
    broker 1 -- +9 % rate at 3 (no), +11 % vs the last write at 5 (yes), then 0 -> 0 stays, usage +0.05 (5
    points, no) at 8 and +0.11 (11 points, yes) at 9, numBundles 10 -> 11 (10 %, not > 10) at 12;
    broker 2 -- forced at 2 (bundle set changed), a restart gap (down at 4-5) writes at 6;
    broker 3 -- throughput from 0 to > 0 is an infinite percent change."""
    rows = [(0, t, 100.0, 1e6, 10, 0.5, False) for t in range(40)]
    rates = {3: 109.0, 4: 109.0, 5: 111.0}
    usage = {8: 0.55, 9: 0.61, 10: 0.61, 11: 0.61, 12: 0.61}
    for t in range(13):
        rows.append((1, t, rates.get(t, 111.0 if t > 5 else 100.0), 1e6, 11 if t == 12 else 10, usage.get(t, 0.5),
                     False))
    for t in [0, 1, 2, 3, 6, 7]:
        rows.append((2, t, 100.0, 1e6, 10, 0.5, t == 2))
    rows += [(3, 0, 0.0, 0.0, 0, 0.5, False), (3, 1, 0.0, 0.0, 0, 0.5, False), (3, 2, 0.0, 1.0, 0, 0.5, False)]
    got = _writes(spark, rows)
    assert [t for b, t in got if b == 0] == [0, 16, 32]
    assert [t for b, t in got if b == 1] == [0, 5, 9]
    assert [t for b, t in got if b == 2] == [0, 2, 6]
    assert [t for b, t in got if b == 3] == [0, 2]
    # a 4 % threshold: +9 % at 3 writes (rate 109), +1.8 % at 5 does not, usage +5 and +6 points at 8 and 9
    # do, numBundles +10 % at 12 does
    got4 = _writes(spark, [r for r in rows if r[0] == 1], threshold_pct=4.0)
    assert [t for _, t in got4] == [0, 3, 8, 9, 12]


@pytest.mark.spark
def test_report_write_rule_origin_staggers_the_interval(spark) -> None:  # type: ignore[no-untyped-def]
    """A broker already running at t=0 wrote its report at ``origin`` (-5): the 15-min rule fires at 11."""
    rows = [(0, t, 1.0, 1.0, 1, 0.1, False, -5 if t == 0 else t) for t in range(30)]
    assert [t for _, t in _writes(spark, rows)] == [-5, 11, 27]


@pytest.mark.spark
def test_report_usage_is_weighted_in_4x_and_includes_memory_in_2_11(spark) -> None:  # type: ignore[no-untyped-def]
    """LocalBrokerData#getMaxResourceUsageWithWeight (4.x, memory weight 0) vs #getMaxResourceUsage (2.11,
    memory included): cpu 50 %, memory 90 %, direct 10 %, bw in 20 %, bw out 30 %."""
    from lbreplay.kernel.config import PulsarConfig
    from lbreplay.lake.host_usage import report_usage_column

    df = spark.createDataFrame(
        [(400.0, 800.0, 900.0, 1000.0, 10.0, 100.0, 20.0, 100.0, 30.0, 100.0)],
        "cpu_usage double, cpu_limit double, memory_usage double, memory_limit double, direct_memory_usage double, "
        "direct_memory_limit double, bandwidth_in_usage double, bandwidth_in_limit double, "
        "bandwidth_out_usage double, bandwidth_out_limit double")
    w4 = PulsarConfig.resolve({}).resource_weights()
    got = df.select(
        report_usage_column(weights=w4, weighted=True, include_memory=False).alias("m4"),
        report_usage_column(weights=w4, weighted=False, include_memory=True).alias("m211"),
        report_usage_column(weights=(0.5, 1.0, 1.0, 1.0, 1.0), weighted=True, include_memory=False).alias("w"),
    ).first()
    assert got["m4"] == pytest.approx(0.5)
    assert got["m211"] == pytest.approx(0.9, rel=1e-6)
    assert got["w"] == pytest.approx(0.3)  # max(50 * 0.5, 10, 20, 30) / 100


# ---------------------------------------------------------------------------------------------------------
# Spark: the generated tables
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def combo(spark, lake):  # type: ignore[no-untyped-def]
    return generate(spark, lake, COMBO, "combo", seed=7)


def _table(spark, name: str, cluster: str):  # type: ignore[no-untyped-def]
    return spark.table(f"lbreplay.{name}").where(f"cluster = '{cluster}'")


@pytest.mark.spark
def test_keys_are_unique_and_every_bundle_has_one_alive_owner(spark, combo) -> None:  # type: ignore[no-untyped-def]
    """DESIGN.md §4: cluster + ts + entity key is unique; a broker without a row at a ts is not alive."""
    from pyspark.sql import functions as F

    assert combo.rows["topic_load"] == 48 * 320 and combo.rows["bundle_load"] == 48 * 16
    # broker-03 reports for ticks 0-9, broker-04 for 20-47, the other three for all 48 ticks
    assert combo.rows["broker_load"] == 3 * 48 + 10 + 28 and combo.rows["namespace_policy"] == 2
    for name, n in combo.rows.items():
        assert _table(spark, name, "combo").count() == n, name
    for name, key in (("broker_load", "broker"), ("bundle_load", "bundle"), ("topic_load", "topic")):
        df = _table(spark, name, "combo")
        assert df.groupBy("ts", key).count().where("count > 1").count() == 0, name
    per_ts = _table(spark, "bundle_load", "combo").groupBy("ts").agg(F.countDistinct("bundle").alias("n"))
    assert {r["n"] for r in per_ts.collect()} == {16}
    orphaned = _table(spark, "bundle_load", "combo").join(
        _table(spark, "broker_load", "combo").select("ts", "broker"), ["ts", "broker"], "left_anti")
    assert orphaned.count() == 0


@pytest.mark.spark
def test_topics_map_to_bundles_by_crc32(spark, combo) -> None:  # type: ignore[no-untyped-def]
    """NamespaceBundleFactory#getBundle: crc32 of the full topic name (zlib here) against the initial
    boundaries; bundle i covers [b_i, b_i+1), the last one closed. At t=0 every broker's report is fresh, so
    bundle_load's topics and rates equal the sums of topic_load over that rule."""
    bounds = initial_boundaries(8)
    topics = _table(spark, "topic_load", "combo").where(f"ts = '{ts(0)}'").collect()
    assert len(topics) == 320
    assert all(r["topic"].startswith(f"persistent://{r['namespace']}/") for r in topics)
    assert any("-partition-" in r["topic"] for r in topics)
    count: dict[str, int] = defaultdict(int)
    rate: dict[str, float] = defaultdict(float)
    for r in topics:
        h = zlib.crc32(r["topic"].encode()) & 0xFFFFFFFF
        i = max(k for k in range(8) if bounds[k] <= h)
        name = f"{r['namespace']}/{format_range(bounds[i], bounds[i + 1])}"
        count[name] += 1
        rate[name] += r["msg_rate_in"]
    bundles = _table(spark, "bundle_load", "combo").where(f"ts = '{ts(0)}'").collect()
    assert {b["bundle"]: b["topics"] for b in bundles} == {k: v for k, v in count.items()}
    for b in bundles:
        assert b["msg_rate_in"] == pytest.approx(rate[b["bundle"]], abs=1e-6)
        lo, hi = b["bundle"].rsplit("/", 1)[1].split("_")
        assert (b["range_lower"], b["range_upper"]) == (int(lo, 16), int(hi, 16))


@pytest.mark.spark
def test_broker_rows_aggregate_their_bundle_rows(spark, combo) -> None:  # type: ignore[no-untyped-def]
    """LocalBrokerData#update: msgRate*/msgThroughput*/numTopics/numBundles/numConsumers/numProducers are sums
    over lastStats -- bundle_load holds each broker's lastStats, so grouping it gives broker_load's totals."""
    from chispa import assert_df_equality
    from pyspark.sql import functions as F

    cols = ["msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out"]
    bundles = _table(spark, "bundle_load", "combo").groupBy("ts", "broker").agg(
        *[F.round(F.sum(c), 3).alias(c) for c in cols], F.sum("topics").alias("num_topics"),
        F.count(F.lit(1)).cast("int").alias("num_bundles"), F.sum("consumer_count").cast("int").alias("num_consumers"),
        F.sum("producer_count").cast("int").alias("num_producers"))
    brokers = _table(spark, "broker_load", "combo").where("num_bundles > 0").select(
        "ts", "broker", *[F.round(c, 3).alias(c) for c in cols], "num_topics", "num_bundles", "num_consumers",
        "num_producers")
    assert brokers.count() > 0
    assert_df_equality(brokers, bundles, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True)


@pytest.mark.spark
def test_broker_usage_follows_the_load_model(spark, combo) -> None:  # type: ignore[no-untyped-def]
    """load_model: NIC Kbit/s from bytes/s, tx includes 2 bookie copies, limits scale with the capacity
    factors [1, 0.5, 2] cycled over broker index (0.5x and 2x brokers), cpu within the +-3 % noise."""
    rows = _table(spark, "broker_load", "combo").collect()
    m = LoadModel()
    factor = {0: 1.0, 1: 0.5, 2: 2.0, 3: 1.0, 4: 0.5}
    for r in rows:
        f = factor[int(r["broker"][7:9])]
        assert (r["cpu_limit"], r["bandwidth_in_limit"]) == (800.0 * f, 4.0 * f * 1048576.0)
        assert (r["memory_limit"], r["direct_memory_limit"]) == (4096.0 * f, 8192.0 * f)
        assert r["bandwidth_in_usage"] == pytest.approx(r["msg_throughput_in"] * 8 / 1024)
        assert r["bandwidth_out_usage"] == pytest.approx((r["msg_throughput_out"] + 2 * r["msg_throughput_in"]) * 8 / 1024)
        base = 40.0 + 0.004 * (r["msg_rate_in"] + r["msg_rate_out"]) + 0.5 * (
            r["msg_throughput_in"] + r["msg_throughput_out"]) / MIB
        assert base * 0.97 - 1e-9 <= r["cpu_usage"] <= base * 1.03 + 1e-9
        assert r["direct_memory_usage"] == pytest.approx(min(256 + 2 * r["msg_throughput_in"] / MIB, 0.95 * 8192 * f))
        assert 0 < r["memory_usage"] <= 0.95 * r["memory_limit"]
        # brokerVersionString: null, a generated lake names no Pulsar line (replays run on the default line)
        assert r["broker_version"] is None and r["load_manager_class_name"].endswith("ModularLoadManagerImpl")


@pytest.mark.spark
def test_leader_sees_last_written_report(spark, combo) -> None:  # type: ignore[no-untyped-def]
    """needBrokerDataUpdate: between writes the leader sees the same report (same lastUpdate -> same numbers);
    a report is never more than 15 minutes old (strictly more than 15 min forces a write); some are stale."""
    from pyspark.sql import functions as F

    df = _table(spark, "broker_load", "combo")
    same = df.groupBy("broker", "last_update").agg(
        F.countDistinct("msg_rate_in", "cpu_usage", "num_bundles", "memory_usage").alias("n"))
    assert {r["n"] for r in same.collect()} == {1}
    age = df.select((F.unix_timestamp("ts") - F.unix_timestamp("last_update")).alias("age")).collect()
    ages = [r["age"] for r in age]
    assert max(ages) <= 900 and min(ages) >= 0 and any(a > 0 for a in ages)
    # bundle_load rows carry the same report: for each broker and ts, their sums match broker_load's totals
    # (checked in test_broker_rows_aggregate_their_bundle_rows), so the staleness applies to lastStats too.


@pytest.mark.spark
def test_departing_broker_bundles_go_to_survivors_and_joiner_fills_gradually(spark, combo) -> None:  # type: ignore[no-untyped-def]
    """Events: broker-03 leaves at tick 10 (its bundles are owned by alive brokers at tick 10); broker-04
    joins at tick 20 empty and receives at most one bundle per tick (rebalance.max_moves 1) until it has some."""
    from pyspark.sql import functions as F

    brokers = _table(spark, "broker_load", "combo").withColumn("tick", tick_of("ts"))
    life = {r["broker"]: (r["a"], r["b"]) for r in brokers.groupBy("broker").agg(
        F.min("tick").alias("a"), F.max("tick").alias("b")).collect()}
    assert life["broker-03:8080"] == (0, 9)
    assert life["broker-04:8080"] == (20, 47)
    assert all(life[f"broker-0{i}:8080"] == (0, 47) for i in range(3))
    bundles = _table(spark, "bundle_load", "combo")
    before = {r["bundle"] for r in bundles.where(f"ts = '{ts(9)}' AND broker = 'broker-03:8080'").collect()}
    after = {r["bundle"]: r["broker"] for r in bundles.where(f"ts = '{ts(10)}'").collect()}
    assert before and all(after[b] in {"broker-00:8080", "broker-01:8080", "broker-02:8080"} for b in before)
    joiner = [r["num_bundles"] for r in brokers.where("broker = 'broker-04:8080'").orderBy("ts").collect()]
    assert joiner[0] == 0 and joiner[-1] >= 2
    assert all(0 <= b - a <= 1 for a, b in zip(joiner, joiner[1:]))


@pytest.mark.spark
def test_hot_bundle_grows_past_the_split_threshold(spark, combo) -> None:  # type: ignore[no-untyped-def]
    """BundleSplitterTask: loadBalancerNamespaceBundleMaxMsgRate = 30000 msg/s in+out. The hot bundle (ns 0,
    bundle 5) ramps to 2 x 30000 by 40 % of the run; at the diurnal peak (tick 24, factor 1.5) it carries at
    least 90000 msg/s (a jitter spike can only add), at the trough it is far below the limit."""
    bounds = initial_boundaries(8)
    hot = f"{namespace_names(2)[0]}/{format_range(bounds[5], bounds[6])}"
    assert combo.calibration.hot_bundle == 5
    topics = _table(spark, "topic_load", "combo")
    hot_topics = {r["topic"] for r in topics.where(f"ts = '{ts(0)}'").collect()
                  if r["namespace"] == namespace_names(2)[0]
                  and bounds[5] <= (zlib.crc32(r["topic"].encode()) & 0xFFFFFFFF) < bounds[6]}
    assert len(hot_topics) >= 2

    def rate(tick: int) -> float:
        rows = topics.where(f"ts = '{ts(tick)}'").collect()
        return sum(r["msg_rate_in"] + r["msg_rate_out"] for r in rows if r["topic"] in hot_topics)

    assert rate(24) >= 0.999 * 2 * 30000 * 1.5
    assert rate(0) < 30000
    assert hot in {r["bundle"] for r in _table(spark, "bundle_load", "combo").where(f"ts = '{ts(0)}'").collect()}


@pytest.mark.spark
def test_diurnal_cycle_and_jitter_spikes(spark, combo) -> None:  # type: ignore[no-untyped-def]
    """diurnal: with noise 0 a topic's rate follows 1 + 0.5 sin(2 pi t / 48 - pi / 2) -> peak/trough = 3;
    jitter: per (bundle, 2-tick window) spikes of 2-4x with probability 5 %."""
    from pyspark.sql import functions as F

    hot_ns = namespace_names(2)[0]
    bounds = initial_boundaries(8)
    rows = _table(spark, "topic_load", "combo").select("topic", "namespace", "msg_rate_in",
                                                       tick_of("ts").alias("tick")).collect()
    series: dict[str, dict[int, float]] = defaultdict(dict)
    for r in rows:
        h = zlib.crc32(r["topic"].encode()) & 0xFFFFFFFF
        if r["namespace"] == hot_ns and bounds[5] <= h < bounds[6]:
            continue
        series[r["topic"]][r["tick"]] = r["msg_rate_in"] / diurnal(r["tick"])
    ratios = sorted(s[24] * diurnal(24) / (s[0] * diurnal(0)) for s in series.values())
    assert ratios[len(ratios) // 2] == pytest.approx(3.0, rel=1e-3)
    norm = [v / min(s.values()) for s in series.values() for v in s.values()]
    spiked = [v for v in norm if v > 1.5]
    assert 0.01 * len(norm) < len(spiked) < 0.15 * len(norm)
    assert min(spiked) >= 2.0 * 0.999 and max(spiked) <= 4.0 * 1.001


@pytest.mark.spark
def test_namespace_policy_rows(spark, combo) -> None:  # type: ignore[no-untyped-def]
    """namespace_policy: initial boundaries as 0x%08x strings (PoliciesUtil.getBundles), nothing else set."""
    rows = sorted(_table(spark, "namespace_policy", "combo").collect(), key=lambda r: r["namespace"])
    assert [r["namespace"] for r in rows] == sorted(namespace_names(2))
    for r in rows:
        assert r["num_bundles"] == 8 and r["shedding_excluded"] is False and r["anti_affinity_group"] is None
        assert r["initial_boundaries"] == [f"0x{i * 0x20000000:08x}" for i in range(8)] + ["0xffffffff"]


def _content_hash(spark, cluster: str) -> dict[str, tuple[int, int]]:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    out = {}
    for name in ("broker_load", "bundle_load", "topic_load", "namespace_policy"):
        df = _table(spark, name, cluster).drop("cluster")
        cols = [F.to_json(F.col(c)) if dict(df.dtypes)[c].startswith("array") else F.col(c) for c in df.columns]
        r = df.select(F.sum(F.xxhash64(*cols).cast("decimal(38,0)")).alias("h"), F.count(F.lit(1)).alias("n")).first()
        out[name] = (int(r["h"]), int(r["n"]))
    return out


@pytest.mark.spark
def test_same_seed_identical_other_seed_different_and_regeneration_replaces(spark, lake, combo) -> None:  # type: ignore[no-untyped-def]
    """Issue: same seed -> identical table contents (content hashes); different seed -> different. Writing a
    cluster again replaces its rows (replaceWhere): seed 8 then seed 7 into `combo2` equals `combo` (seed 7)."""
    reference = _content_hash(spark, "combo")
    generate(spark, lake, COMBO, "combo2", seed=8)
    other = _content_hash(spark, "combo2")
    for name in ("broker_load", "bundle_load", "topic_load"):
        assert other[name][0] != reference[name][0], name
    generate(spark, lake, COMBO, "combo2", seed=7)
    assert _content_hash(spark, "combo2") == reference


@pytest.mark.spark
def test_scale_in_size_s_then_sql_counts_eleven_brokers(spark, lake, capsys) -> None:  # type: ignore[no-untyped-def]
    """Done-when: `generate --scenario scale-in --cluster c1` then `sql "SELECT count(DISTINCT broker) ..."`
    prints 11; after the event (tick 72 of 180) 8 brokers report, and all 128 bundles have a reporting owner."""
    from pyspark.sql import functions as F

    from lbreplay.lake.sql import sql_command

    generate_command("scale-in", "c1", lake=lake, quiet=True)
    printed = capsys.readouterr().out
    assert "generated cluster c1" in printed and "broker_load=" in printed
    sql_command("SELECT count(DISTINCT broker) FROM lbreplay.broker_load WHERE cluster='c1'", "table", lake)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[2].strip() == "11"
    alive = {r["tick"]: r["n"] for r in _table(spark, "broker_load", "c1").groupBy(tick_of("ts").alias("tick")).agg(
        F.count(F.lit(1)).alias("n")).collect()}
    assert len(alive) == 180
    assert {alive[t] for t in range(72)} == {11} and {alive[t] for t in range(72, 180)} == {8}
    per_ts = _table(spark, "bundle_load", "c1").groupBy("ts").agg(F.countDistinct("bundle").alias("n"))
    assert {r["n"] for r in per_ts.collect()} == {128}
    gone = _table(spark, "broker_load", "c1").where(f"ts >= '{ts(72)}'").where(
        "broker IN ('broker-08:8080', 'broker-09:8080', 'broker-10:8080')")
    assert gone.count() == 0


@pytest.mark.spark
def test_cli_generate_then_sql_in_new_processes(tmp_path: Path) -> None:
    """The CLI path end to end in fresh processes on their own lake (the catalog lives in the lake)."""
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(
        "brokers: 3\nnamespaces: 1\nbundles_per_namespace: 4\ntopics: 40\nticks: 6\n"
        "events:\n  - {at_tick: 3, leave: 1}\n", encoding="utf-8")
    lake = str(tmp_path / "lake")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cli = [sys.executable, "-m", "lbreplay.cli"]
    gen = subprocess.run(cli + ["generate", "--scenario", str(scenario), "--cluster", "e2e", "--lake", lake,
                                "--master", "local[1]", "--quiet"], capture_output=True, text=True, env=env,
                         timeout=600)
    assert gen.returncode == 0, gen.stderr[-2000:]
    assert "topic_load=240" in gen.stdout
    q = subprocess.run(cli + ["sql", "SELECT count(DISTINCT broker) AS n FROM lbreplay.broker_load WHERE cluster='e2e'",
                              "--format", "csv", "--lake", lake, "--master", "local[1]"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert q.returncode == 0, q.stderr[-2000:]
    assert q.stdout.splitlines() == ["n", "3"]


def test_size_l_and_the_large_scenario() -> None:
    """Issue 15: L = 200 brokers, 20,000 bundles, 100,000 topics, 1,440 ticks; heterogeneous brokers and a hot
    bundle past the split limit, in namespaces small enough to take splits (< loadBalancerNamespaceMaximumBundles)."""
    big = resolve_scenario("large", "L")
    assert (big.brokers, big.num_bundles, big.topics, big.ticks) == (200, 20000, 100000, 1440)
    assert big.bundles_per_namespace < int(big.pulsar["loadBalancerNamespaceMaximumBundles"])
    assert {0.5, 1.0, 2.0} <= set(big.broker.capacity_factors)
    assert big.traffic.hot_bundle is not None and big.traffic.hot_bundle.threshold_factor >= 4
    assert len(set(namespace_names(big.namespaces))) == big.namespaces
    m = resolve_scenario("large", "M")
    assert (m.num_bundles, m.topics, m.ticks) == (2000, 20000, 1440)
    assert resolve_scenario("steady", "L").num_bundles == 20000  # every scenario inherits the L dimensions
