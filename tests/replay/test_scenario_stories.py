"""Replays of generated S-size scenarios, checked against the stories the issue and the seeds tell.

* ``scale-in`` (11 -> 8 brokers; broker 0 is a 2x machine at about half the others' usage), closed loop:
  ThresholdShedder + LeastResourceUsageWithWeight piles the leavers' bundles onto broker 0 in one tick -- the
  over-placement story of seeds/001 and seeds/002 ("the unloaded bundles will all be assigned to this low-load
  broker") -- while AvgShedder (random pick among the candidates) spreads them and moves fewer bundles later.
  Expected counts follow ``ModularLoadManagerImpl#selectBrokerForAssignment``: with Pulsar's defaults the
  even-spread filter (``loadBalancerDistributeBundlesEvenlyEnabled``,
  ``LoadManagerShared#removeMostServicingBrokersForNamespace``) keeps the brokers with the fewest bundles of the
  bundle's namespace, then ``LeastResourceUsageWithWeight#selectBroker`` keeps those whose usage is at least
  ``loadBalancerAverageResourceUsageDifferenceThresholdPercentage`` (10) below the candidates' average.
* ``hot-bundle`` in audit mode (``--mode observed``): the split decisions fall exactly on the leader refreshes
  where the hot bundle's long-term average crosses ``loadBalancerNamespaceBundleMaxMsgRate`` /
  ``...MaxBandwidthMbytes``. The expected ticks are derived here from the input tables alone, following
  Pulsar's code: one ``updateBundleData`` sample per written broker report plus one per
  ``loadBalancerResourceQuotaUpdateIntervalMinutes`` (``ModularLoadManagerImpl#updateAll`` /
  ``writeBundleDataOnZooKeeper``), ``TimeAverageMessageData#update`` (a running mean over at most 1,000 samples),
  ``BundleSplitterTask#findBundlesToSplit`` (long-term rate/throughput, topics >= 2), and
  ``ModularLoadManagerImpl#checkNamespaceBundleSplit`` (the end of ``updateAll``, so after a written report only:
  ``writeBundleDataOnZooKeeper`` samples but checks no split) dropping the parent's BundleData before it splits.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from pyspark.sql import functions as F

from lbreplay.lake.generator import generate
from lbreplay.lake.scenario import load_scenario_doc
from lbreplay.lake.validation import validate
from lbreplay.replay import spark_replay as R
from lbreplay.replay.run_config import resolve_run_config

MIB = 1024 * 1024
MAX_MSG_RATE = 30000.0  # loadBalancerNamespaceBundleMaxMsgRate default
MAX_BANDWIDTH = 100 * MIB  # loadBalancerNamespaceBundleMaxBandwidthMbytes default
MAX_TOPICS = 1000  # loadBalancerNamespaceBundleMaxTopics default
MAX_SESSIONS = 1000  # loadBalancerNamespaceBundleMaxSessions default
QUOTA_MINUTES = 15  # loadBalancerResourceQuotaUpdateIntervalMinutes default
LONG_TERM_SAMPLES = 1000  # ModularLoadManagerImpl.NUM_LONG_SAMPLES


# --------------------------------------------------------------------------------------------- scale-in what-if
LEAVE_TICK = 40  # the scale-in leave is at 0.4 of the run: 100 ticks here
BIG = "broker-00:8080"  # capacity factor 2.0


@pytest.fixture(scope="module")
def scale_in(spark: Any, lake: str) -> dict[str, Any]:
    """Done-when: generate ``scale-in``; replay it with ThresholdShedder + LeastResourceUsageWithWeight and with
    AvgShedder (both strategy keys: the ``avg-shedder`` preset). Size S (11 brokers, 64 namespaces of 2 bundles),
    trimmed to 100 ticks and 1,000 topics to keep the suite fast."""
    name, doc = load_scenario_doc("scale-in")
    generate(spark, lake, {**doc, "name": name, "ticks": 100, "topics": 1000}, "si-s", seed=7)
    report = validate(spark, lake, "si-s")
    assert report.passed, report.details()
    specs = [resolve_run_config("threshold-lruww"), resolve_run_config("avg-shedder")]
    R.execute(spark, lake, "si-s", specs, run_ids=["si-lruww", "si-avg"], quiet=True)
    return {"cluster": "si-s", "lruww": "si-lruww", "avg": "si-avg"}


def _sql(spark: Any, query: str) -> list[Any]:
    from lbreplay.lake.sql import run_query

    return run_query(spark, query).collect()


def _owners_at(spark: Any, run_id: str, tick: int) -> dict[str, str]:
    """The README's point-in-time query over ``ownership`` (half-open [from_ts, to_ts)), for every bundle."""
    rows = _sql(spark, f"""
        SELECT o.bundle, o.broker FROM lbreplay.ownership o
        JOIN (SELECT min(from_ts) + INTERVAL {tick} MINUTES AS t FROM lbreplay.ownership
              WHERE run_id = '{run_id}') p
        WHERE o.run_id = '{run_id}' AND o.from_ts <= p.t AND (o.to_ts IS NULL OR o.to_ts > p.t)""")
    return {r.bundle: r.broker for r in rows}


def _assigns_at_leave(spark: Any, run_id: str) -> dict[str, int]:
    rows = _sql(spark, f"""
        SELECT target_broker, count(*) AS n FROM lbreplay.decisions
        WHERE run_id = '{run_id}' AND action = 'ASSIGN' AND tick = {LEAVE_TICK} GROUP BY target_broker""")
    return {r.target_broker: r.n for r in rows}


def test_threshold_lruww_piles_the_orphans_onto_the_least_loaded_broker(
        spark: Any, scale_in: dict[str, Any]) -> None:
    """seeds/002 (20, 51, 52, 80, 80, 80: "only the broker with a score of 20 will be selected ... the unloaded
    bundles will all be assigned to this low-load broker") and seeds/001 (11 brokers at ~50 %, scale in 3: the
    same lowest-score broker takes the bundles because the leader's load data is stale).

    Broker 0 (2x machine, ~27 % vs ~54 %) is the only broker 10 points below the candidates' average, so it
    takes one orphan of every namespace in which it held no bundle (the even-spread filter admits it there
    and only there: every namespace has 4 bundles and 8 survivors, so the fewest is always 0)."""
    before = _owners_at(spark, scale_in["lruww"], LEAVE_TICK - 1)
    leavers = {"broker-08:8080", "broker-09:8080", "broker-10:8080"}
    orphans = sorted(b for b, o in before.items() if o in leavers)
    ns_of = lambda bundle: bundle.rsplit("/", 1)[0]  # noqa: E731
    big_namespaces = {ns_of(b) for b, o in before.items() if o == BIG}
    expected_big = len({ns_of(b) for b in orphans} - big_namespaces)
    got = _assigns_at_leave(spark, scale_in["lruww"])
    assert sum(got.values()) == len(orphans) > 0
    assert got[BIG] == expected_big
    assert got[BIG] >= 3 and got[BIG] > 2 * max(n for b, n in got.items() if b != BIG)
    after = _owners_at(spark, scale_in["lruww"], LEAVE_TICK)
    assert sum(after[b] == BIG for b in orphans) == expected_big
    over = _sql(spark, f"SELECT value FROM lbreplay.run_metrics WHERE run_id = '{scale_in['lruww']}' "
                       "AND metric = 'over_placement_events'")
    assert over[0].value >= 1


def test_avg_shedder_spreads_the_orphans_and_moves_fewer_bundles(spark: Any, scale_in: dict[str, Any]) -> None:
    """AvgShedder places a bundle it did not plan by a uniform pick among the candidates
    (``AvgShedder#selectBroker``), so no broker takes the pile; ThresholdShedder then sheds the pile off
    broker 0 again (more unloads), AvgShedder barely moves anything."""
    lruww = _assigns_at_leave(spark, scale_in["lruww"])
    avg = _assigns_at_leave(spark, scale_in["avg"])
    assert sum(avg.values()) == sum(lruww.values())
    assert max(avg.values()) < lruww[BIG]
    moves = {r.run_id: r.n for r in _sql(spark, """
        SELECT run_id, count(*) AS n FROM lbreplay.moves WHERE run_id IN ('si-lruww', 'si-avg') GROUP BY run_id""")}
    assert moves.get("si-avg", 0) < moves["si-lruww"]
    shed_from_big = _sql(spark, f"""SELECT count(*) AS n FROM lbreplay.decisions WHERE run_id = '{scale_in["lruww"]}'
        AND action = 'UNLOAD' AND source_broker = '{BIG}' AND tick > {LEAVE_TICK}""")
    assert shed_from_big[0].n >= 1


@pytest.mark.parametrize("window", [None, ("2024-01-01T00:20:00Z", "2024-01-01T01:05:30Z")])
def test_task_reads_topic_load_files_like_the_written_topic_part(
        spark: Any, lake: str, scale_in: dict[str, Any], window: tuple[str, str] | None) -> None:
    """The replay task reads ``topic_load``'s Parquet files itself (local lake, reader protocol 1): every tick has
    the same topics, ring positions (namespace index * 2**32 + crc32, ``NamespaceBundleFactory#getBundle``) and
    loads as from the topic part Spark writes (join with the namespace index, ``F.crc32``) -- over the whole
    history and over a ``--from/--to`` window that starts and ends inside the history (the end between ticks)."""
    import numpy as np

    from lbreplay.lake.window import window_from_flags
    from lbreplay.replay.tick_stream import ticks_from_stream

    span = window_from_flags(*window) if window else None
    versions = R.input_versions(spark, lake, scale_in["cluster"])
    _, direct = R.prepare(spark, lake, scale_in["cluster"], versions, window=span)
    _, written = R.prepare(spark, lake, scale_in["cluster"], versions, window=span, topic_files=False)
    assert direct.topic_files and written.topic_files is None
    a = list(ticks_from_stream(direct))
    b = list(ticks_from_stream(written))
    assert len(a) == len(b) == (46 if window else 100)
    for x, y in zip(a, b):
        assert x.ts_ms == y.ts_ms and x.bundle_names == y.bundle_names
        assert x.topic_positions is not None and len(x.topic_positions) == 1000
        np.testing.assert_array_equal(x.topic_positions, y.topic_positions)
        np.testing.assert_array_equal(x.topic_values, y.topic_values)


# --------------------------------------------------------------------------------------------- hot-bundle audit
@pytest.fixture(scope="module")
def hot_bundle(spark: Any, lake: str) -> dict[str, Any]:
    """``hot-bundle`` at size S (8 brokers), trimmed to 120 ticks and 1,000 topics to keep the suite fast; the
    hot bundle ramps over ticks 12..60 to twice the split message rate."""
    name, doc = load_scenario_doc("hot-bundle")
    doc = {**doc, "name": name, "ticks": 120, "topics": 1000}
    generate(spark, lake, doc, "hot-s", seed=5)
    report = validate(spark, lake, "hot-s")
    assert report.passed, report.details()
    pulsar, replay = resolve_run_config("threshold-lltmr")
    R.execute(spark, lake, "hot-s", [(pulsar, {**replay, "mode": "observed"})], run_ids=["hot-audit"], quiet=True)
    return {"cluster": "hot-s", "run_id": "hot-audit"}


def expected_audit_splits(spark: Any, lake: str, cluster: str) -> dict[tuple[int, str], str]:
    """(tick, bundle) -> reason of every split the leader decides on the observed history (see module doc)."""
    brokers = (spark.read.format("delta").load(f"{lake}/broker_load").where(F.col("cluster") == cluster)
               .select("ts", "broker", "last_update").orderBy("ts", "broker").collect())
    ticks = sorted({r.ts for r in brokers})
    tick_of = {ts: i for i, ts in enumerate(ticks)}
    samples = [0] * len(ticks)
    seen: dict[str, Any] = {}
    for r in brokers:  # a report was written when the broker's lastUpdate changed (first sight: written)
        if seen.get(r.broker, object()) != r.last_update:
            samples[tick_of[r.ts]] += 1
        seen[r.broker] = r.last_update
    writes = list(samples)  # updateAll (a sample and the split check) per written report
    last_quota = ticks[0]
    for i, ts in enumerate(ticks[1:], start=1):
        if (ts - last_quota).total_seconds() >= QUOTA_MINUTES * 60:
            samples[i] += 1
            last_quota = ts
    bundles = (spark.read.format("delta").load(f"{lake}/bundle_load").where(F.col("cluster") == cluster)
               .select("ts", "bundle", (F.col("msg_rate_in") + F.col("msg_rate_out")).alias("rate"),
                       (F.col("msg_throughput_in") + F.col("msg_throughput_out")).alias("thr"), "topics",
                       (F.col("consumer_count") + F.col("producer_count")).alias("sessions")).collect())
    series: dict[str, dict[int, Any]] = defaultdict(dict)
    for r in bundles:
        series[r.bundle][tick_of[r.ts]] = r
    out: dict[tuple[int, str], str] = {}
    for bundle, rows in series.items():
        n, rate, thr = 0, 0.0, 0.0  # BundleData.longTermData (absent: numSamples 0)
        for t in range(len(ticks)):
            row = rows.get(t)
            if row is None or samples[t] == 0:
                continue
            for _ in range(samples[t]):  # TimeAverageMessageData#update
                n = min(n + 1, LONG_TERM_SAMPLES)
                rate += (row.rate - rate) / n
                thr += (row.thr - thr) / n
            if row.topics < 2 or not writes[t]:  # writeBundleDataOnZooKeeper samples but checks no split
                continue
            reason = ("Topics" if row.topics > MAX_TOPICS else "Sessions" if row.sessions > MAX_SESSIONS
                      else "MsgRate" if rate > MAX_MSG_RATE else "Bandwidth" if thr > MAX_BANDWIDTH else None)
            if reason is not None:
                out[(t, bundle)] = reason
                n, rate, thr = 0, 0.0, 0.0  # checkNamespaceBundleSplit: loadData.getBundleData().remove(bundle)
    return out


def test_audit_splits_the_hot_bundle_where_its_long_term_rate_crosses_the_limit(
        spark: Any, lake: str, hot_bundle: dict[str, Any]) -> None:
    """Issue 4 done-when: audit mode over ``hot-bundle`` shows the split decisions at the ticks where the
    long-term rate crosses the threshold (expected set derived from the inputs; see the module docstring)."""
    expected = expected_audit_splits(spark, lake, hot_bundle["cluster"])
    got_rows = (spark.read.format("delta").load(f"{lake}/decisions")
                .where((F.col("run_id") == hot_bundle["run_id"]) & (F.col("action") == "SPLIT"))
                .select("tick", "bundle", "reason", "details", "child_bundles").collect())
    got = {(r.tick, r.bundle): r.reason for r in got_rows}
    assert expected, "the hot bundle never crosses a split threshold: the scenario lost its story"
    assert got == expected
    hot = {b for _, b in expected}
    assert len(hot) == 1  # only the hot bundle
    first = min(t for t, _ in expected)
    assert 12 <= first <= 119  # after the ramp starts (ramp: 10 % .. 50 % of 120 ticks)
    for r in got_rows:
        limit_key = "maxMsgRate" if r.reason == "MsgRate" else "maxMsgThroughput"
        value_key = "msgRate" if r.reason == "MsgRate" else "msgThroughput"
        assert r.details[value_key] > r.details[limit_key]
        lo, hi = r.bundle.rsplit("/", 1)[1].split("_")
        mid = int(lo, 16) + (int(hi, 16) - int(lo, 16)) // 2  # range_equally_divide
        ns = r.bundle.rsplit("/", 1)[0]
        assert r.child_bundles == [f"{ns}/{lo}_0x{mid:08x}", f"{ns}/0x{mid:08x}_{hi}"]


def test_audit_keeps_the_observed_layout_and_ownership(spark: Any, lake: str, hot_bundle: dict[str, Any]) -> None:
    """An audit records a split but does not apply it: ownership intervals are the observed ones, one per
    (bundle, owner) stretch, and no child bundle ever appears in them."""
    own = spark.read.format("delta").load(f"{lake}/ownership").where(F.col("run_id") == hot_bundle["run_id"])
    observed = R.observed_ownership(
        spark.read.format("delta").load(f"{lake}/bundle_load").where(F.col("cluster") == hot_bundle["cluster"]),
        hot_bundle["cluster"])
    cols = ["bundle", "broker", "from_tick", "to_tick"]
    assert sorted(map(tuple, own.select(*cols).collect())) == sorted(map(tuple, observed.select(*cols).collect()))
