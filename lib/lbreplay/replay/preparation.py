"""Driver side of a replay: pinned inputs, the load model's calibration and the tick stream's Parquet parts.

* Inputs are read at their current Delta versions, recorded in ``runs.input_versions``.
* Stateless preparation as DataFrame transformations: the per-broker least-squares sums of the load model and
  the "tick stream", Parquet parts written in parallel once per (cluster, input versions) under
  ``<lake>/_replay_cache``: brokers aggregated into one row per tick, bundles as flat (tick, bundle) rows, each
  input partition sorted by tick with no shuffle; every file sorted by tick, the task merges a part's files by
  tick. Topics, the biggest input, are read by the task straight from ``topic_load``'s files where plain Parquet
  reads see the table (:mod:`lbreplay.replay.topic_files`), else written as a flat (tick, topic) part with their
  ring positions.
* What the task needs besides the stream travels in a
  :class:`~lbreplay.replay.stream_manifest.StreamManifest` (also the cache's marker file).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import Window
from pyspark.sql import functions as F

from lbreplay.collect.leader_log import logged_by_leader
from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.kernel.leader_election import count_timer_minutes
from lbreplay.lake import tables
from lbreplay.lake.delta_log import delta_version
from lbreplay.lake.dump_tables import (
    BROKER_DEPARTURE,
    BROKER_LOAD_DATA_EXT,
    BUNDLE_DATA,
    LEADER_ELECTION,
    LEADER_PLACEMENT,
    SHEDDING_RUN,
    TOP_BUNDLES_LOAD_DATA,
    TOP_BUNDLES_PUBLICATION,
)
from lbreplay.lake.storage import (
    path_exists,
    plain_parquet_files,
    publish_text,
    read_text,
    remove_path,
    run_concurrently,
    write_parquet,
)
from lbreplay.lake.window import TimeWindow
from lbreplay.replay.load_model import MIN_MEASURED_CPU, CpuCalibration, bandwidth_per_byte
from lbreplay.replay.stored_bundle_data import STORED_COLUMNS
from lbreplay.replay.stream_manifest import (
    BROKER_COLUMNS,
    LOAD_COLUMNS,
    RECORDED_LOAD_DATA,
    STREAM_FORMAT,
    StreamManifest,
)
from lbreplay.replay.tick_stream import departure_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

MAX_STREAM_FILES = 8
# A window inside a recorded cluster's history starts 2 h early (replayed as audit warm-up): every live broker's
# held report (written at least every loadBalancerReportUpdateMaxIntervalMinutes, 15 by default) and 120 minutes
# of strategy history (ThresholdShedder's EWMA keeps 0.9**120 = 3e-6 of its start, as AUDIT_WARMUP_TICKS).
LEAD_IN_MS = 120 * 60_000


# --------------------------------------------------------------------------------------------- inputs
def input_versions(spark: SparkSession, lake: str, cluster: str) -> dict[str, int]:
    """Current Delta version of each input table that exists (from the Delta log, no Spark job), ``bundle_data``
    (the leader's stored BundleData, :mod:`~lbreplay.replay.stored_bundle_data`), ``leader_election`` (the
    leader's shedding timer, :mod:`~lbreplay.kernel.leader_election`), ``shedding_run`` (its runs its log shows)
    ``broker_departure`` (brokers whose znode was deleted), ``leader_placement`` (the placements its log shows) and
    the extensible load manager's ``broker_load_data_ext`` / ``top_bundles_load_data`` / ``top_bundles_publication``
    included."""
    extra = {t.name: t for t in (BUNDLE_DATA, LEADER_ELECTION, SHEDDING_RUN, BROKER_DEPARTURE, LEADER_PLACEMENT,
                                 BROKER_LOAD_DATA_EXT, TOP_BUNDLES_LOAD_DATA, TOP_BUNDLES_PUBLICATION)}
    return {name: v for name, table in {**tables.INPUT_TABLES, **extra}.items()
            if (v := delta_version(spark, lake, table)) is not None}


def read_pinned(spark: SparkSession, lake: str, name: str, versions: dict[str, int], cluster: str,
                window: TimeWindow | None = None) -> DataFrame:
    """``cluster``'s rows of input table ``name`` at its pinned version; with ``window``, only rows in it."""
    df = (
        spark.read.format("delta").option("versionAsOf", versions[name]).load(tables.table_location(lake, name))
        .where(F.col("cluster") == cluster)
    )
    return df if window is None else df.where(window.predicate())


# --------------------------------------------------------------------------------------------- transformations
def calibration_sums(broker_load: DataFrame) -> DataFrame:
    """Per broker least-squares sums of cpu usage (y) against msg rate in+out (x), and the sums of bandwidth in /
    out and throughput in / out (a recording's bandwidth per byte, ``load_model.bandwidth_per_byte``)."""
    x = F.col("msg_rate_in") + F.col("msg_rate_out")
    y = F.col("cpu_usage")
    return broker_load.groupBy("broker").agg(
        F.count(F.lit(1)).alias("n"), F.sum(x).alias("sx"), F.sum(y).alias("sy"),
        F.sum(x * x).alias("sxx"), F.sum(x * y).alias("sxy"),
        *[F.sum(c).alias(f"s_{c}") for c in ("bandwidth_in_usage", "bandwidth_out_usage", "msg_throughput_in",
                                             "msg_throughput_out")],
    )


def calibration_error(broker_load: DataFrame, fit: DataFrame) -> DataFrame:
    """One row, ``mape``: the fitted cpu (``fit``: broker, cpu_base, cpu_per_msg) against the recorded cpu, mean
    absolute percentage error over the reports whose cpu is at least ``MIN_MEASURED_CPU`` (null: none is)."""
    x = F.col("msg_rate_in") + F.col("msg_rate_out")
    err = F.abs(F.col("cpu_base") + F.col("cpu_per_msg") * x - F.col("cpu_usage")) / F.col("cpu_usage")
    return broker_load.where(F.col("cpu_usage") >= MIN_MEASURED_CPU).join(fit.hint("broadcast"), on="broker") \
        .agg(F.avg(err).alias("mape"))


def has_traffic(bundle_load: DataFrame) -> bool:
    """Does any ``bundle_load`` row carry traffic (a msg rate or throughput above 0)?"""
    load = sum((F.coalesce(F.col(c), F.lit(0.0)) for c in LOAD_COLUMNS[:4]), F.lit(0.0))
    return bool(bundle_load.where(load > 0).limit(1).count())


def with_broker_index(broker_index: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Rows of known brokers, with their ``broker_index`` (a broadcast join on ``broker``)."""
    return lambda df: df.join(broker_index.hint("broadcast"), on="broker", how="inner")


def with_last_update_ms(broker_load: DataFrame) -> DataFrame:
    """``last_update_ms``: the report's ``lastUpdate`` (the tick's time where missing) in epoch ms."""
    return broker_load.withColumn("last_update_ms", F.unix_millis(F.coalesce("last_update", "ts")))


def broker_rows_per_tick(partitions: int, columns: tuple[str, ...] = BROKER_COLUMNS) -> Callable[[DataFrame], DataFrame]:
    """One row per tick: the tick's broker rows (sorted by broker index) as parallel arrays, one per column."""
    def step(df: DataFrame) -> DataFrame:
        rows = F.sort_array(F.collect_list(F.struct(*[F.col(f) for f in columns]))).alias("b")
        agg = df.repartition(partitions, "ts").groupBy("ts").agg(rows)
        return agg.select("ts", *[_field("b", f).alias(f) for f in columns])
    return step


def extensible_report_versions(load_data: DataFrame, top_bundles: DataFrame, publications: DataFrame | None = None
                               ) -> tuple[DataFrame, DataFrame]:
    """An extensible recording as report versions: a broker's ``BrokerLoadData`` and ``TopBundlesLoadData`` are
    published on their own (``BrokerLoadDataReporter``, ``TopBundleLoadDataReporter``); at each time either is,
    the broker's version is its latest of both (an as-of join per broker). Returns (``broker_load``-shaped rows
    with the recorded BrokerLoadData as :data:`RECORDED_LOAD_DATA`, ``bundle_load``-shaped rows: the latest top
    bundles list of each version, with its ``position``). Times before a broker's first BrokerLoadData have no
    version (the leader has no load data for it). With ``publications`` (``top_bundles_publication``), a version
    whose latest TopBundlesLoadData message is a tombstone or an empty list says so (``top_bundles_cleared`` 1: the
    leader's store has no bundles of that broker) and keeps the broker's last list as its held bundles."""
    events = (load_data.select("broker", "ts", F.lit(1).alias("load"), F.lit(0).alias("top"),
                               F.lit(None).cast("int").alias("cleared"))
              .unionByName(top_bundles.select("broker", "ts", F.lit(0).alias("load"), F.lit(1).alias("top"),
                                              F.lit(None).cast("int").alias("cleared"))))
    if publications is not None:
        cleared = F.when(F.coalesce(F.col("listed"), F.lit(0)) == 0, 1).otherwise(0)
        events = events.unionByName(publications.select("broker", "ts", F.lit(0).alias("load"), F.lit(0).alias("top"),
                                                        cleared.alias("cleared")))
    published = events.groupBy("broker", "ts").agg(F.max("load").alias("load"), F.max("top").alias("top"),
                                                    F.min("cleared").alias("cleared"))
    upto = Window.partitionBy("broker").orderBy("ts").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    times = published.select(
        "broker", "ts",
        F.last(F.when(F.col("load") == 1, F.col("ts")), ignorenulls=True).over(upto).alias("load_ts"),
        F.last(F.when(F.col("top") == 1, F.col("ts")), ignorenulls=True).over(upto).alias("top_ts"),
        F.coalesce(F.last("cleared", ignorenulls=True).over(upto), F.lit(0)).cast("double")
        .alias("top_bundles_cleared"),
    ).where(F.col("load_ts").isNotNull())
    recorded = load_data.select(
        "broker", F.col("ts").alias("load_ts"), *[F.col(f"{r}_{k}") for r in tables.RESOURCES for k in ("usage", "limit")],
        *[F.col(c) for c in RECORDED_LOAD_DATA if c not in ("updated_at_ms", "reported_at_ms", "top_bundles_cleared")],
        F.unix_millis("updated_at").alias("updated_at_ms"),  # null: a tombstone (the broker removed its entry)
        F.coalesce(F.unix_millis("reported_at"), F.lit(0)).alias("reported_at_ms"),
    )
    # a version's time is its lastUpdate: the newest list of a bundle names its owner (tick_stream.held_reports)
    brokers = times.join(recorded, on=["broker", "load_ts"]).withColumn("last_update", F.col("ts")) \
        .drop("load_ts", "top_ts")
    listed = top_bundles.withColumnRenamed("ts", "top_ts").drop("cluster", "date")
    bundles = times.where(F.col("top_ts").isNotNull()).join(listed, on=["broker", "top_ts"]) \
        .drop("load_ts", "top_ts", "top_bundles_cleared")
    return brokers, bundles


def _field(array_col: str, name: str) -> Column:
    """``transform(array_of_structs, e -> e.name)``: one parallel array per struct field."""
    return F.transform(array_col, lambda e: e[name])


def _sessions() -> Column:
    """Consumers + producers (null = 0) as double: the sessions ``loadBalancerNamespaceBundleMaxSessions`` limits."""
    return (F.coalesce(F.col("consumer_count"), F.lit(0)) + F.coalesce(F.col("producer_count"), F.lit(0))).cast("double")


def _loads() -> list[Column]:
    return [F.col(c) for c in LOAD_COLUMNS[:4]] + [_sessions().alias("sessions")]


def bundle_rows(bundle_load: DataFrame) -> DataFrame:
    """One row per (tick, observed bundle): ``ts_ms``, the bundle's name, its owner's broker index and its loads
    (the task orders a tick's bundles by name: the layout's order); a top bundles list's rows keep their
    ``position`` (the list's order, which TransferShedder walks)."""
    position = [F.col("position")] if "position" in bundle_load.columns else []
    return bundle_load.select(F.unix_millis(F.col("ts")).alias("ts_ms"), "bundle",
                              F.col("broker_index").alias("owner_index"), *_loads(),
                              F.col("topics").cast("double").alias("topics"), *position)


def topic_rows(namespace_index: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """One row per (tick, topic): ``ts_ms``, the topic's global ``ring_position`` (namespace index * 2**32 +
    crc32(topic), NamespaceBundleFactory.getBundle's hash) and its load. Topics of namespaces without bundles are
    dropped (the inner join with the namespace index)."""
    return lambda topic_load: topic_load.join(namespace_index.hint("broadcast"), on="namespace", how="inner").select(
        F.unix_millis(F.col("ts")).alias("ts_ms"),
        (F.col("namespace_index").cast("long") * F.lit(1 << 32) + F.crc32(F.col("topic"))).alias("ring_position"),
        *_loads(),
    )


def stored_bundle_rows(bundle_data: DataFrame) -> DataFrame:
    """The bundle_data part: each recorded BundleData version with its write time ``ts_ms``."""
    return bundle_data.select("bundle", F.unix_millis(F.col("ts")).alias("ts_ms"),
                              *[c for c in STORED_COLUMNS if c not in ("bundle", "ts_ms")])


def sorted_by_tick(df: DataFrame) -> DataFrame:
    """A flat part's files: each input partition sorted by ``ts_ms`` becomes one file, with no shuffle (merged
    down to ``MAX_STREAM_FILES``: the task keeps one batch of each file open and merges them by ``ts_ms``)."""
    if df.rdd.getNumPartitions() > MAX_STREAM_FILES:
        df = df.coalesce(MAX_STREAM_FILES)
    return df.sortWithinPartitions("ts_ms")


def broker_part(df: DataFrame) -> DataFrame:
    """The broker part: one row per tick, each file sorted by ``ts_ms``. The rows were hash-partitioned by ``ts``
    before their aggregation, so the files are written in parallel with no further shuffle."""
    return df.withColumn("ts_ms", F.unix_millis(F.col("ts"))).drop("ts").sortWithinPartitions("ts_ms")


def is_versioned(broker_load: DataFrame) -> bool:
    """Does ``broker_load`` hold report versions rather than the leader's snapshots? ``ingest`` stamps each
    ``LocalBrokerData`` version with its own ``lastUpdate`` (``System.currentTimeMillis()``, so milliseconds), one
    row per version written, each broker at its own time; generated lakes (any ``tick_seconds``) and snapshot dumps
    list every live broker at each tick, on whole seconds."""
    return bool(broker_load.where(F.unix_millis(F.col("ts")) % 1000 != 0).limit(1).count())


# --------------------------------------------------------------------------------------------- the stream
def prepare(spark: SparkSession, lake: str, cluster: str, versions: dict[str, int], use_topics: bool = True,
            window: TimeWindow | None = None, topic_files: bool = True) -> tuple[str, StreamManifest]:
    """Write (or reuse) the tick stream of ``cluster`` at ``versions`` (only the ticks in ``window`` when given);
    return its path and manifest. ``topic_files=False`` writes the topic part even where the task could read
    ``topic_load``'s files itself."""
    key_parts: list[Any] = [cluster, versions, use_topics, STREAM_FORMAT] + ([window.to_json()] if window else [])
    key_parts += [] if topic_files else ["topic-part"]
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()[:16]
    base = f"{lake}/_replay_cache/{cluster}/{key}"
    # The manifest file is published last, by an atomic rename: the sign that the stream it names is complete.
    # Each preparation writes its parts under a directory of its own, so two processes preparing the same stream
    # at once never write into each other's files; the first manifest published stands, the other run uses the
    # stream it wrote itself (identical content).
    marker = f"{base}/manifest.json"
    if path_exists(spark, marker):
        cached = StreamManifest.from_json(read_text(spark, marker))
        if all(os.path.isfile(f) for f in cached.topic_files or ()):  # else vacuumed since: prepare anew
            return cached.stream, cached
        remove_path(spark, marker)
    extensible = is_extensible_recording(spark, lake, cluster, versions)
    if not extensible and ("broker_load" not in versions or "bundle_load" not in versions):
        raise InvalidInputError(f"cluster {cluster!r}: broker_load and bundle_load are required (run generate or ingest)")
    broker_load, bundle_load, in_window, lead_in_ticks, versioned_read = read_with_lead_in(
        spark, lake, cluster, versions, window, extensible)
    has_topics = use_topics and "topic_load" in versions
    stream = f"{base}/stream-{uuid.uuid4().hex[:12]}"
    # few files per part (the task keeps one batch of each open), parallel across the cores
    parts = max(1, min(int(spark.sparkContext.defaultParallelism), MAX_STREAM_FILES))

    def broker_side() -> tuple[list[str], CpuCalibration, bool, float | None]:
        """The broker universe, the load model's calibration, then the broker and bundle parts (whether they are
        report versions, the calibration's error)."""
        brokers = sorted(r[0] for r in broker_load.select("broker").distinct().collect())
        if not brokers and window is not None:
            raise UsageError(f"{window.flag_text()}: cluster {cluster!r} has no ticks in {window.describe()}")
        if not brokers:
            raise InvalidInputError(f"table=broker_load: no rows for cluster {cluster!r}")
        calib, mape = calibrate(spark, in_window, brokers)
        index = spark.createDataFrame([(b, i) for i, b in enumerate(brokers)], "broker STRING, broker_index INT")
        columns = (*BROKER_COLUMNS, *RECORDED_LOAD_DATA) if extensible else BROKER_COLUMNS
        write_parquet(broker_load.transform(with_last_update_ms).transform(with_broker_index(index))
                      .transform(broker_rows_per_tick(parts, columns)).transform(broker_part), f"{stream}/brokers")
        write_parquet(bundle_load.transform(with_broker_index(index)).transform(bundle_rows)
                      .transform(sorted_by_tick), f"{stream}/bundles")
        versioned = extensible or (versioned_read if versioned_read is not None else is_versioned(broker_load))
        return brokers, calib, versioned, mape

    def namespace_side() -> tuple[list[str], list[str] | None, bool]:
        """The namespaces (bundle_load's), then the topics: the files of ``topic_load`` when the task can read
        them itself, else the topic part (the big one) written on their ring positions; whether bundle_load
        carries traffic."""
        namespaces = sorted(r[0] for r in bundle_load.select("namespace").distinct().collect())
        traffic = has_traffic(bundle_load)
        files = None
        if has_topics:
            topic_load = read_pinned(spark, lake, "topic_load", versions, cluster, window)
            files = plain_parquet_files(spark, lake, tables.TOPIC_LOAD, topic_load) if topic_files else None
            if files is None:
                index = spark.createDataFrame([(n, i) for i, n in enumerate(namespaces)],
                                              "namespace STRING, namespace_index INT")
                write_parquet(topic_load.transform(topic_rows(index)).transform(sorted_by_tick), f"{stream}/topics")
        return namespaces, files, traffic

    (brokers, calib, versioned, mape), (namespaces, files, traffic), stored = run_concurrently(
        broker_side, namespace_side, lambda: write_stored_bundle_data(spark, lake, cluster, versions, window, stream))
    timer, lead_in_timer, departures, lookups = recorded_events(spark, lake, cluster, versions, window, broker_load,
                                                                brokers) if versioned else (dict(NO_TIMER), 0, None, None)
    manifest = StreamManifest(brokers, namespaces, calib.cpu_base.tolist(), calib.cpu_per_msg.tolist(), has_topics,
                              stream, versioned=versioned, bundle_data=stored,
                              lead_in_ticks=lead_in_ticks + lead_in_timer, extensible=extensible,
                              bandwidth_in_per_byte=_floats(calib.bandwidth_in_per_byte),
                              bandwidth_out_per_byte=_floats(calib.bandwidth_out_per_byte), calibration_mape=mape,
                              recorded_traffic=traffic, departures=departures, lookups=lookups, **timer)
    if files is not None:
        manifest.topic_files = files
        manifest.topic_window_us = list(window.epoch_micros()) if window else [None, None]
    publish_text(spark, marker, manifest.to_json())
    return manifest.stream, manifest


def calibrate(spark: SparkSession, broker_load: DataFrame, brokers: list[str]) -> tuple[CpuCalibration, float | None]:
    """The load model's calibration per broker (row i: ``brokers[i]``) on ``broker_load`` and its cpu error
    (:func:`calibration_error`; None: no cpu reading to fit)."""
    sums = {r["broker"]: r for r in calibration_sums(broker_load).collect()}

    def per_broker(k: str) -> np.ndarray:
        return np.array([float(sums[b][k] or 0.0) if b in sums else 0.0 for b in brokers])

    calib = CpuCalibration.from_sums(per_broker("n"), per_broker("sx"), per_broker("sy"), per_broker("sxx"),
                                     per_broker("sxy"))
    calib.bandwidth_in_per_byte = bandwidth_per_byte(per_broker("s_bandwidth_in_usage"),
                                                     per_broker("s_msg_throughput_in"))
    calib.bandwidth_out_per_byte = bandwidth_per_byte(per_broker("s_bandwidth_out_usage"),
                                                      per_broker("s_msg_throughput_out"))
    fit = spark.createDataFrame([(b, float(a), float(k)) for b, a, k in zip(brokers, calib.cpu_base, calib.cpu_per_msg)],
                                "broker STRING, cpu_base DOUBLE, cpu_per_msg DOUBLE")
    mape = calibration_error(broker_load, fit).first()
    return calib, (float(mape[0]) if mape is not None and mape[0] is not None else None)


def _floats(values: np.ndarray | None) -> list[float] | None:
    return None if values is None else [float(v) for v in values]


def is_extensible_recording(spark: SparkSession, lake: str, cluster: str, versions: dict[str, int]) -> bool:
    """Is ``cluster`` an extensible load manager's recording: ``broker_load_data_ext`` rows and no
    ``broker_load`` rows?"""
    if BROKER_LOAD_DATA_EXT.name not in versions or TOP_BUNDLES_LOAD_DATA.name not in versions:
        return False
    if "broker_load" in versions and read_pinned(spark, lake, "broker_load", versions, cluster).limit(1).count():
        return False
    return bool(read_pinned(spark, lake, BROKER_LOAD_DATA_EXT.name, versions, cluster).limit(1).count())


def read_reports(spark: SparkSession, lake: str, cluster: str, versions: dict[str, int], window: TimeWindow | None,
                 extensible: bool = False) -> tuple[DataFrame, DataFrame]:
    """``broker_load`` and ``bundle_load`` of ``cluster`` in ``window``; of an extensible recording, its report
    versions (:func:`extensible_report_versions`)."""
    if not extensible:
        return (read_pinned(spark, lake, "broker_load", versions, cluster, window),
                read_pinned(spark, lake, "bundle_load", versions, cluster, window))
    publications = (read_pinned(spark, lake, TOP_BUNDLES_PUBLICATION.name, versions, cluster, window)
                    if TOP_BUNDLES_PUBLICATION.name in versions else None)  # a lake made before the table: none
    return extensible_report_versions(read_pinned(spark, lake, BROKER_LOAD_DATA_EXT.name, versions, cluster, window),
                                      read_pinned(spark, lake, TOP_BUNDLES_LOAD_DATA.name, versions, cluster, window),
                                      publications)


def read_with_lead_in(spark: SparkSession, lake: str, cluster: str, versions: dict[str, int],
                      window: TimeWindow | None, extensible: bool = False
                      ) -> tuple[DataFrame, DataFrame, DataFrame, int, bool | None]:
    """``broker_load`` and ``bundle_load`` of the stream, the ``broker_load`` rows of the window (the load model's
    calibration), the number of lead-in ticks and whether the rows are report versions (None: not looked at). A
    window starting inside a recorded cluster's report versions gets ``LEAD_IN_MS`` of earlier versions, replayed by
    audits as warm-up: the reports the leader holds at the window's start, its BundleData and the strategies'
    history. Other streams start at the window."""
    broker_load, bundle_load = read_reports(spark, lake, cluster, versions, window, extensible)
    if window is None or window.start is None:
        return broker_load, bundle_load, broker_load, 0, None
    lead = TimeWindow(window.start - dt.timedelta(milliseconds=LEAD_IN_MS), window.end, window.flags)
    with_lead, bundles_with_lead = read_reports(spark, lake, cluster, versions, lead, extensible)
    if not is_versioned(with_lead):  # nor are the window's rows, a part of them
        return broker_load, bundle_load, broker_load, 0, False
    before = TimeWindow(None, window.start).predicate(date_column=None)
    ticks = {bool(r[0]): int(r[1]) for r in with_lead.select(F.expr(before).alias("lead"), "ts").distinct()
             .groupBy("lead").count().collect()}
    if not ticks.get(False):
        raise UsageError(f"{window.flag_text()}: cluster {cluster!r} has no ticks in {window.describe()}")
    return with_lead, bundles_with_lead, broker_load, ticks.get(True, 0), True


NO_TIMER: dict[str, Any] = {"leader_elections": None, "leader_brokers": None, "shedding_runs": None,
                            "shedding_reads": None, "timer_ticks": 0}


def leader_timer(spark: SparkSession, lake: str, cluster: str, versions: dict[str, int], window: TimeWindow | None,
                 broker_load: DataFrame) -> tuple[dict[str, Any], int]:
    """A recording's leader timer for the manifest: its elections (epoch ms before the window's end, in time order,
    and the broker each elected; None without any), the shedding runs its leader logged (``shedding_run``; None
    without), the timer ticks the task adds to the stream's report versions ``broker_load`` (each timer minute from
    its first to its last, at its logged run where there is one: :mod:`~lbreplay.kernel.leader_election`); and
    how many of them fall before the window's start."""
    if LEADER_ELECTION.name not in versions:
        return dict(NO_TIMER), 0
    before_end = TimeWindow(None, window.end) if window is not None and window.end is not None else None
    elections = sorted((int(r[0]), str(r[1])) for r in read_pinned(
        spark, lake, LEADER_ELECTION.name, versions, cluster, before_end).select(F.unix_millis("ts"), "broker").collect())
    span = broker_load.agg(F.min(F.unix_millis("ts")), F.max(F.unix_millis("ts"))).first() if elections else None
    if span is None or span[0] is None:
        return dict(NO_TIMER), 0
    logged = sorted((int(r[0]), None if r[1] is None else int(r[1])) for r in read_pinned(
        spark, lake, SHEDDING_RUN.name, versions, cluster, before_end).select(
        F.unix_millis("ts"), F.unix_millis("read_at")).collect()) if SHEDDING_RUN.name in versions else []
    runs, reads = [t for t, _ in logged], [r for _, r in logged]
    first, last = int(span[0]), int(span[1])
    start_us = window.epoch_micros()[0] if window is not None else None
    start_ms = start_us // 1000 if start_us is not None else first
    times = [t for t, _ in elections]
    fields = {"leader_elections": times, "leader_brokers": [b for _, b in elections], "shedding_runs": runs or None,
              "shedding_reads": reads if any(r is not None for r in reads) else None,
              "timer_ticks": count_timer_minutes(times, first, last, runs, reads)}
    return fields, count_timer_minutes(times, first, start_ms - 1, runs, reads)


def broker_departures(spark: SparkSession, lake: str, cluster: str, versions: dict[str, int],
                      window: TimeWindow | None, brokers: list[str]) -> list[list[int]] | None:
    """A recording's broker departures before the window's end (``broker_departure``), as [epoch ms, broker row]
    pairs in time order (brokers outside the universe left before any report: nothing to drop); None without."""
    if BROKER_DEPARTURE.name not in versions:
        return None
    before_end = TimeWindow(None, window.end) if window is not None and window.end is not None else None
    rows = read_pinned(spark, lake, BROKER_DEPARTURE.name, versions, cluster, before_end).select(
        F.unix_millis("ts"), "broker").collect()
    return departure_rows(((int(r[0]), str(r[1])) for r in rows), brokers)


def recorded_events(spark: SparkSession, lake: str, cluster: str, versions: dict[str, int], window: TimeWindow | None,
                    broker_load: DataFrame, brokers: list[str]
                    ) -> tuple[dict[str, Any], int, list[list[int]] | None, list[list[Any]] | None]:
    """A recording's events for the manifest: the leader's timer (:func:`leader_timer`, and its ticks before the
    window), the brokers' departures (:func:`broker_departures`) and the leader's lookups (:func:`leader_lookups`)."""
    timer, lead_in_timer = leader_timer(spark, lake, cluster, versions, window, broker_load)
    departures, lookups = run_concurrently(lambda: broker_departures(spark, lake, cluster, versions, window, brokers),
                                           lambda: leader_lookups(spark, lake, cluster, versions, window, timer))
    return timer, lead_in_timer, departures, lookups


def leader_lookups(spark: SparkSession, lake: str, cluster: str, versions: dict[str, int], window: TimeWindow | None,
                   timer: dict[str, Any]) -> list[list[Any]] | None:
    """The lookups a recording's leader logged before the window's end (``leader_placement``: not on a
    ``pulsar-load-manager-*`` thread; logged by the broker the latest election before it elected, per the timer's
    ``leader_elections`` / ``leader_brokers``, or by an unnamed broker), as [epoch ms, bundle, the broker it logged
    selecting or None] in logged order; None when the recording holds no placement line."""
    if LEADER_PLACEMENT.name not in versions:
        return None
    before_end = TimeWindow(None, window.end) if window is not None and window.end is not None else None
    rows = read_pinned(spark, lake, LEADER_PLACEMENT.name, versions, cluster, before_end).select(
        F.unix_millis("ts").alias("ms"), "seq", "broker", "lookup", "bundle", "selected").orderBy("ms", "seq").collect()
    if not rows:
        return None
    elections, leaders = timer.get("leader_elections"), timer.get("leader_brokers")
    return [[int(r["ms"]), str(r["bundle"]), r["selected"]] for r in rows
            if r["lookup"] and logged_by_leader(r["broker"], int(r["ms"]), elections, leaders)]


def write_stored_bundle_data(spark: SparkSession, lake: str, cluster: str, versions: dict[str, int],
                             window: TimeWindow | None, stream: str) -> bool:
    """The stream's bundle_data part: the recorded BundleData versions written before the window's end (those
    before its start included: the leader finds them in the store at its first tick). False without the table."""
    if BUNDLE_DATA.name not in versions:
        return False
    before_end = TimeWindow(None, window.end) if window is not None and window.end is not None else None
    write_parquet(read_pinned(spark, lake, BUNDLE_DATA.name, versions, cluster, before_end)
                  .transform(stored_bundle_rows).coalesce(1), f"{stream}/bundle_data")
    return True


def namespace_policies_json(spark: SparkSession, lake: str, cluster: str,
                            versions: dict[str, int]) -> dict[str, Any] | None:
    """``namespace_policy``'s isolation policies, anti-affinity groups and shedding exclusions, in the JSON form
    the task turns into ``NamespacePolicies``; None without any."""
    if "namespace_policy" not in versions:
        return None
    rows = read_pinned(spark, lake, "namespace_policy", versions, cluster).collect()
    groups = {r["namespace"]: r["anti_affinity_group"] for r in rows if r["anti_affinity_group"]}
    excluded = [r["namespace"] for r in rows if r["shedding_excluded"]]
    isolation = {}
    for r in rows:
        if r["isolation_primary"]:
            isolation[f"policy-{r['namespace'].replace('/', '-')}"] = {
                "namespaces": [r["namespace"].replace(".", "\\.")], "primary": list(r["isolation_primary"]),
                "secondary": list(r["isolation_secondary"] or []),
                "auto_failover_policy": {"policy_type": "min_available", "parameters": {
                    "min_limit": str(r["isolation_min_available"] or 1), "usage_threshold": "80"}}}
    if not (groups or excluded or isolation):
        return None
    return {"isolation": isolation, "anti_affinity": groups, "excluded": excluded}
