"""Replays on Spark over a tiny hand-made history: both modes, output tables, idempotent re-runs, determinism."""

from __future__ import annotations

from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from lbreplay.replay import spark_replay as R
from lbreplay.replay.run_config import resolve_run_config
from tests.replay.history import write_history

CLUSTER = "rp1"


@pytest.fixture(scope="module")
def runs(spark: Any, lake: str) -> dict[str, str]:
    from lbreplay.lake.validation import validate

    write_history(spark, lake, CLUSTER, ticks=24, leave_at=16)
    report = validate(spark, lake, CLUSTER)
    assert report.passed, report.details()
    threshold = resolve_run_config("conf/strategies/threshold-lltmr.yaml")
    avg = resolve_run_config("conf/strategies/avg-shedder.yaml")
    audit = (threshold[0], {**threshold[1], "mode": "observed", "warmupTicks": 4})
    ids = R.execute(spark, lake, CLUSTER, [threshold, avg, audit], run_ids=["t-lltmr", "avg", "audit"], quiet=True)
    return dict(zip(["threshold", "avg", "audit"], ids))


def _decisions(spark: Any, lake: str, run_id: str) -> Any:
    return spark.read.format("delta").load(f"{lake}/decisions").where(F.col("run_id") == run_id)


def test_runs_rows_record_config_versions_and_status(spark: Any, lake: str, runs: dict[str, str]) -> None:
    """runs: one succeeded row per run with its mode, ticks and the pinned Delta versions of the inputs."""
    df = spark.read.format("delta").load(f"{lake}/runs").where(F.col("run_id").isin(list(runs.values())))
    got = df.select("run_id", "cluster", "mode", "status", "ticks").orderBy("run_id")
    expected = spark.createDataFrame(
        [("audit", CLUSTER, "observed", "succeeded", 24), ("avg", CLUSTER, "closed-loop", "succeeded", 24),
         ("t-lltmr", CLUSTER, "closed-loop", "succeeded", 24)],
        "run_id STRING NOT NULL, cluster STRING, mode STRING, status STRING, ticks BIGINT")
    assert_df_equality(got, expected, ignore_nullable=True, ignore_metadata=True)
    versions = df.select("input_versions").first()[0]
    assert set(versions) >= {"broker_load", "bundle_load"}


def test_closed_loop_threshold_sheds_from_the_hot_broker(spark: Any, lake: str, runs: dict[str, str]) -> None:
    """ThresholdShedder moves bundles off broker-0 (8 of 16 bundles) with destinations; broker-4 leaves at tick 16
    and its bundles are assigned to live brokers."""
    dec = _decisions(spark, lake, runs["threshold"])
    unloads = dec.where("action = 'UNLOAD'").collect()
    assert unloads and {r.source_broker for r in unloads} == {"broker-0:8080"}
    assert all(r.target_broker and r.target_broker != "broker-0:8080" for r in unloads)
    assigns = dec.where("action = 'ASSIGN'").collect()
    assert {r.tick for r in assigns} == {16}
    assert all(r.target_broker != "broker-4:8080" for r in assigns)
    seqs = [r.seq for r in dec.orderBy("seq").collect()]
    assert seqs == list(range(1, len(seqs) + 1))


def test_ownership_answers_who_owned_a_bundle_at_a_time(spark: Any, lake: str, runs: dict[str, str]) -> None:
    """The documented point-in-time query returns exactly one owner per bundle at any tick."""
    spark.read.format("delta").load(f"{lake}/ownership").createOrReplaceTempView("own_t")
    try:
        _check_point_in_time(spark, runs)
    finally:
        spark.catalog.dropTempView("own_t")


def _check_point_in_time(spark: Any, runs: dict[str, str]) -> None:
    rows = spark.sql(f"""
        SELECT bundle, broker FROM own_t
        WHERE run_id = '{runs['threshold']}' AND bundle = 'tenant/ns/0x00000000_0x10000000'
          AND from_ts <= TIMESTAMP '2026-01-01 00:20:00' AND (to_ts IS NULL OR to_ts > TIMESTAMP '2026-01-01 00:20:00')
    """).collect()
    assert len(rows) == 1
    per_tick = spark.sql(f"""
        SELECT t.tick, count(*) AS owners FROM (SELECT explode(sequence(0, 23)) AS tick) t
        JOIN own_t o ON o.run_id = '{runs['threshold']}' AND o.from_tick <= t.tick AND (o.to_tick IS NULL OR o.to_tick > t.tick)
        GROUP BY t.tick""").collect()
    assert {r.owners for r in per_tick} == {16}


def test_audit_mode_keeps_observed_ownership(spark: Any, lake: str, runs: dict[str, str]) -> None:
    """Observed mode: ownership is the observed one (broker-4's two bundles go to broker-0 at tick 16), the strategy
    still decides unloads (run in parallel tick slices), and no ASSIGN is issued (no feedback)."""
    own = spark.read.format("delta").load(f"{lake}/ownership").where(F.col("run_id") == runs["audit"])
    moved = own.where("from_tick = 16").select("broker").distinct().collect()
    assert [r.broker for r in moved] == ["broker-0:8080"]
    dec = _decisions(spark, lake, runs["audit"])
    assert dec.where("action = 'UNLOAD'").count() > 0
    assert dec.where("action = 'ASSIGN'").count() == 0


def test_extensible_audit_runs_end_to_end(spark: Any, lake: str, runs: dict[str, str]) -> None:
    """Observed mode under ``ExtensibleLoadManagerImpl`` + TransferShedder (an audit of an extensible cluster):
    the replay runs to the end with the extensible leader (decisions, if any, named after the extensible
    strategies), keeps the observed ownership and assigns nothing. Before, the audit took the modular path and
    crashed in the task (``'LoadData' object has no attribute 'has_load_data'``)."""
    pulsar, replay = resolve_run_config(None, sets=[
        "loadManagerClassName=org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
        "loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder",
        "replay.mode=observed", "replay.warmupTicks=4"])
    (rid,) = R.execute(spark, lake, CLUSTER, [(pulsar, replay)], run_ids=["ext-audit"], quiet=True)
    row = spark.read.format("delta").load(f"{lake}/runs").where(F.col("run_id") == rid).first()
    assert (row.mode, row.status, row.ticks) == ("observed", "succeeded", 24)
    dec = _decisions(spark, lake, rid)
    decided = {(r.action, r.strategy) for r in dec.select("action", "strategy").distinct().collect()}
    assert decided <= {("TRANSFER", "TransferShedder"), ("UNLOAD", "TransferShedder"),
                       ("SPLIT", "DefaultNamespaceBundleSplitStrategyImpl")}  # never the modular strategies, no ASSIGN
    own = spark.read.format("delta").load(f"{lake}/ownership").where(F.col("run_id") == rid)
    assert [r.broker for r in own.where("from_tick = 16").select("broker").distinct().collect()] == ["broker-0:8080"]


def test_metrics_present_and_consistent(spark: Any, lake: str, runs: dict[str, str]) -> None:
    """run_metrics: unloads equals the UNLOAD decisions; ticks equals the run's ticks; std stats are ordered."""
    m = {r.metric: r.value for r in spark.read.format("delta").load(f"{lake}/run_metrics")
         .where(F.col("run_id") == runs["threshold"]).collect()}
    assert m["unloads"] == _decisions(spark, lake, runs["threshold"]).where("action = 'UNLOAD'").count()
    assert m["ticks"] == 24
    assert m["cluster_events"] == 1.0  # broker-4 leaving
    assert 0 <= m["load_std_mean"] <= m["load_std_p95"] + 1e-12
    assert m["calibration_mape"] < 0.05  # the history's cpu follows the load model exactly before any move


def test_rerun_replaces_and_is_deterministic(spark: Any, lake: str, runs: dict[str, str]) -> None:
    """Re-running a run id leaves exactly one copy, with identical decisions (content hash)."""
    def digest() -> tuple[int, str]:
        d = _decisions(spark, lake, "t-lltmr").drop("ts")
        h = d.select(F.sha2(F.concat_ws("|", *[F.col(c).cast("string") for c in d.columns]), 256).alias("h"))
        rows = sorted(r.h for r in h.collect())
        return len(rows), "".join(rows)

    before = digest()
    threshold = resolve_run_config("conf/strategies/threshold-lltmr.yaml")
    R.execute(spark, lake, CLUSTER, [threshold], run_ids=["t-lltmr"], quiet=True)
    assert digest() == before
    n = spark.read.format("delta").load(f"{lake}/runs").where("run_id = 't-lltmr'").count()
    assert n == 1


def test_window_replays_only_its_ticks(spark: Any, lake: str, runs: dict[str, str]) -> None:
    """Issue 5 item 3 (--from/--to): over [00:10, 00:20) of the 24-tick history only those 10 ticks are replayed,
    numbered from 0 (broker-4 leaving at 00:16 is window tick 6). The closed loop starts from the ownership observed
    at 00:10 — broker-0 still owns 8 of the 16 bundles, although the full-history run had shed some of them by
    then; the audit run (two parallel slices of 5 ticks) stays inside the window. The window is recorded in
    runs.replay_options; an empty window or one without ticks is a usage error naming the flags."""
    import datetime as dt
    import json

    from lbreplay.errors import UsageError
    from lbreplay.lake.window import window_from_flags

    window = window_from_flags("2026-01-01T00:10:00Z", "2026-01-01T00:20:00")
    threshold = resolve_run_config("conf/strategies/threshold-lltmr.yaml")
    audit = (threshold[0], {**threshold[1], "mode": "observed", "warmupTicks": 4})
    R.execute(spark, lake, CLUSTER, [threshold, audit], run_ids=["win-t", "win-audit"], quiet=True, window=window)

    def table(name: str, run_id: str) -> Any:
        return spark.read.format("delta").load(f"{lake}/{name}").where(F.col("run_id") == run_id)

    for rid in ("win-t", "win-audit"):
        row = table("runs", rid).first()
        assert (row.status, row.ticks) == ("succeeded", 10)
        assert json.loads(row.replay_options)["window"] == {"from": "2026-01-01T00:10:00Z", "to": "2026-01-01T00:20:00Z"}
        bt = table("broker_ticks", rid).agg(F.min("tick"), F.max("tick"), F.min("ts"), F.max("ts"), F.count(F.lit(1)))
        # 5 brokers at window ticks 0..5, 4 from tick 6 on
        assert tuple(bt.first()) == (0, 9, dt.datetime(2026, 1, 1, 0, 10), dt.datetime(2026, 1, 1, 0, 19), 6 * 5 + 4 * 4)
    start = table("ownership", "win-t").where("from_tick = 0").groupBy("broker").count()
    assert {r.broker: r["count"] for r in start.collect()} == {
        "broker-0:8080": 8, "broker-1:8080": 2, "broker-2:8080": 2, "broker-3:8080": 2, "broker-4:8080": 2}
    full_at_10 = table("ownership", runs["threshold"]).where(
        "from_tick <= 10 AND (to_tick IS NULL OR to_tick > 10) AND broker = 'broker-0:8080'").count()
    assert full_at_10 < 8  # the window run's start is the observation, not the full run's state
    assigns = table("decisions", "win-t").where("action = 'ASSIGN'").select("tick", "ts").distinct().collect()
    assert [(r.tick, r.ts) for r in assigns] == [(6, dt.datetime(2026, 1, 1, 0, 16))]
    moved = table("ownership", "win-audit").where("from_tick = 6").select("broker").distinct().collect()
    assert [r.broker for r in moved] == ["broker-0:8080"]
    assert table("decisions", "win-audit").where("ts < '2026-01-01 00:10:00' OR ts >= '2026-01-01 00:20:00'").count() == 0

    with pytest.raises(UsageError, match=r"--from/--to: cluster 'rp1' has no ticks in \[2030"):
        R.execute(spark, lake, CLUSTER, [threshold], run_ids=["win-none"], quiet=True,
                  window=window_from_flags("2030-01-01", "2030-01-02"))
    with pytest.raises(UsageError, match="--to 2026-01-01 must be later than --from 2026-01-01T00:10:00Z"):
        window_from_flags("2026-01-01T00:10:00Z", "2026-01-01")


def test_two_cold_preparations_at_once_publish_one_complete_stream(spark: Any, lake: str, runs: dict[str, str]) -> None:
    """Two replays preparing one tick stream at the same time (the DAG's parallel branches on a cold cache): each
    writes its own directory, the first manifest published stands (``preparation.prepare``), both streams hold
    the same rows, and the next replay reuses the published one."""
    import json
    import shutil
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from lbreplay.replay.preparation import input_versions, prepare

    versions = input_versions(spark, lake, CLUSTER)
    shutil.rmtree(Path(lake) / "_replay_cache" / CLUSTER, ignore_errors=True)
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda _: prepare(spark, lake, CLUSTER, versions), range(2)))
    (one, first), (two, second) = both
    assert one != two  # each preparation wrote a directory of its own
    published = json.loads(next((Path(lake) / "_replay_cache" / CLUSTER).glob("*/manifest.json")).read_text())
    assert published["stream"] in (one, two)
    assert first.ticks == second.ticks > 0 and first.broker_ids == second.broker_ids
    for part in ("brokers", "bundles"):
        a, b = (spark.read.parquet(f"{s}/{part}") for s in (one, two))
        assert_df_equality(a, b, ignore_row_order=True)
    assert prepare(spark, lake, CLUSTER, versions)[0] == published["stream"]


def test_small_replays_get_a_c1_only_driver_jvm(tmp_path, monkeypatch) -> None:
    """A closed loop's driver JVM compiles with C1 only when the cluster's report tables (not ``topic_load``, read
    by the task) hold under ``QUICK_JIT_MAX_BYTES`` in a local lake; other clusters' files do not count; a storage
    URI (its size is not looked up) and any audit run keep the tiered JIT."""
    monkeypatch.setattr(R, "QUICK_JIT_MAX_BYTES", 1000)
    lake = tmp_path / "lake"

    def put(table: str, cluster: str, size: int) -> None:
        part = lake / table / f"cluster={cluster}" / "date=2024-01-01"
        part.mkdir(parents=True, exist_ok=True)
        (part / f"part-{len(list(part.iterdir()))}.parquet").write_bytes(b"x" * size)

    put("bundle_load", "c1", 600)
    put("topic_load", "c1", 5000)
    put("bundle_load", "c2", 5000)
    closed, audit = [({}, {"mode": "closed-loop"}), ({}, {})], [({}, {}), ({}, {"mode": "observed"})]
    assert R.quick_jit(str(lake), "c1", closed) and R.quick_jit(str(lake), "never-written", closed)
    assert not R.quick_jit(str(lake), "c1", audit)
    put("broker_load", "c1", 400)
    assert not R.quick_jit(str(lake), "c1", closed) and not R.quick_jit(str(lake), "c2", closed)
    assert not R.quick_jit("s3a://bucket/lake", "c1", closed)
