"""``lbreplay generate``: a deterministic synthetic cluster history, written as Spark transformations.

The generator writes the input tables ``topic_load``, ``bundle_load``, ``broker_load`` and ``namespace_policy``
for one cluster of a scenario (:mod:`lbreplay.lake.scenario`), replacing what that cluster had before (one atomic
Delta commit per table). No per-row driver loops:

* topics and their traffic at every tick -- :mod:`lbreplay.lake.traffic` (Spark, hash-based uniforms of the
  seed, integer rates so every sum is exact);
* ownership -- :mod:`lbreplay.lake.ownership_plan`, a small driver-side model over (bundle x event) metadata,
  whose ownership intervals are joined to the per-tick data;
* bundles and brokers (here) -- sums per (tick, bundle) and (tick, broker); broker resource usage from
  :mod:`lbreplay.lake.host_usage`; the report write rule (``needBrokerDataUpdate``) is a sequential fold per
  broker; the leader's view at each tick is each broker's last written report (``broker_load``, with its
  ``lastStats`` in ``bundle_load``). ``topic_load`` holds the current per-topic rates at every tick.

The generated history keeps the initial bundle layout (it never splits); splitting is the replay's decision.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import Window
from pyspark.sql import functions as F

from lbreplay.errors import UsageError
from lbreplay.kernel.naming import format_range
from lbreplay.kernel.version_profile import profile_for
from lbreplay.lake import tables
from lbreplay.lake.host_usage import LoadModel, report_usage_column, report_write_ticks
from lbreplay.lake.ownership_plan import OwnershipPlan, plan_ownership
from lbreplay.lake.scenario import Scenario, broker_names, initial_boundaries, namespace_names, resolve_scenario
from lbreplay.lake.traffic import TrafficCalibration, calibrate, topic_ticks_frame, topics_frame, uniform
from lbreplay.paths import DEFAULT_LAKE
from lbreplay.progress import StepProgress
from lbreplay.spark import get_spark, lake_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

MODULAR_LOAD_MANAGER = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
_REPORT_SUMS = ("rate_in_milli", "rate_out_milli", "thr_in", "thr_out", "num_topics", "num_bundles", "num_producers",
                "num_consumers")


@dataclass
class GenerateResult:
    scenario: Scenario
    cluster: str
    seed: int
    rows: dict[str, int]
    seconds: float
    plan: OwnershipPlan
    calibration: TrafficCalibration
    brokers: list[str]


def generate_steps(sc: Scenario) -> list[tuple[str, int]]:
    """The Spark steps of :func:`generate` with the rows each one covers, known up front (progress weights): the
    topics; ticks x topics written, then read again and summed per bundle; ticks x brokers (the initial ones);
    ticks x bundles; the namespaces."""
    return [("topics", sc.topics), ("topic_load", sc.ticks * sc.topics), ("bundle_stats", sc.ticks * sc.topics),
            ("broker_load", sc.ticks * sc.brokers), ("bundle_load", sc.ticks * sc.num_bundles),
            ("namespace_policy", sc.namespaces)]


# ---------------------------------------------------------------------------------------------------------
# The cluster's layout: small driver-side frames (bundles, brokers, ownership intervals, lifetimes)
# ---------------------------------------------------------------------------------------------------------
def _frame(spark: SparkSession, rows: list[tuple], schema: str) -> DataFrame:
    return spark.createDataFrame(rows, schema)


@dataclass(frozen=True)
class _Layout:
    """Broadcast-sized frames: bundle names and ranges, brokers and capacities, who owns what when, who is alive."""

    bundles: DataFrame  # bundle_idx, bundle, namespace, range_lower, range_upper
    brokers: DataFrame  # broker_idx, broker and the four resource limits
    intervals: DataFrame  # bundle_idx, broker_idx, from_tick, to_tick (inclusive)
    alive: DataFrame  # (broker_idx, tick) of every live broker
    forced: DataFrame  # (broker_idx, tick, forced): the broker's bundle set changed, so it writes a report


def _layout(spark: SparkSession, sc: Scenario, plan: OwnershipPlan, names: list[str]) -> _Layout:
    bounds = initial_boundaries(sc.bundles_per_namespace)
    bundle_rows = []
    for k, ns in enumerate(namespace_names(sc.namespaces)):
        for i in range(sc.bundles_per_namespace):
            lo, hi = bounds[i], bounds[i + 1]
            bundle_rows.append((k * sc.bundles_per_namespace + i, f"{ns}/{format_range(lo, hi)}", ns, lo, hi))
    broker_rows = []
    for i, nm in enumerate(names):
        c = sc.broker.capacity.scaled(sc.broker.factor(i))
        broker_rows.append((i, nm, c.cpu_limit, c.heap_mib, c.direct_mib, c.nic_limit))
    return _Layout(
        bundles=_frame(spark, bundle_rows, "bundle_idx int, bundle string, namespace string, range_lower long, "
                                           "range_upper long"),
        brokers=_frame(spark, broker_rows, "broker_idx int, broker string, cpu_limit double, memory_limit double, "
                                           "direct_memory_limit double, nic_limit double"),
        intervals=_frame(spark, list(zip(plan.bundle.tolist(), plan.broker.tolist(), plan.from_tick.tolist(),
                                         plan.to_tick.tolist())),
                         "bundle_idx int, broker_idx int, from_tick int, to_tick int"),
        alive=_frame(spark, plan.alive, "broker_idx int, from_tick int, to_tick int").select(
            "broker_idx", F.explode(F.sequence("from_tick", "to_tick")).alias("tick")),
        forced=_frame(spark, plan.changes, "broker_idx int, tick int").withColumn("forced", F.lit(True)),
    )


# ---------------------------------------------------------------------------------------------------------
# Pure steps: ticks x topics -> bundle stats -> broker reports -> the leader's view -> the tables
# ---------------------------------------------------------------------------------------------------------
def _tick_ts(sc: Scenario, column: str) -> Column:
    return F.timestamp_seconds(F.lit(sc.start_epoch) + F.col(column).cast("long") * sc.tick_seconds)


def topic_load_rows(cluster: str) -> Callable[[DataFrame], DataFrame]:
    """ticks x topics (:func:`~lbreplay.lake.traffic.topic_ticks_frame`) in ``topic_load``'s columns."""
    def step(tt: DataFrame) -> DataFrame:
        return tt.select(
            F.lit(cluster).alias("cluster"), "ts", "topic", "namespace",
            (F.col("rate_in_milli") / 1000.0).alias("msg_rate_in"), (F.col("rate_out_milli") / 1000.0).alias("msg_rate_out"),
            F.col("thr_in").cast("double").alias("msg_throughput_in"),
            F.col("thr_out").cast("double").alias("msg_throughput_out"),
            F.col("producers").alias("producer_count"), F.col("consumers").alias("consumer_count"),
        )
    return step


def bundle_sums(tt: DataFrame) -> DataFrame:
    """Fresh NamespaceBundleStats per (tick, bundle): the sums over the bundle's topics."""
    return tt.groupBy("tick", "bundle_idx").agg(
        F.sum("rate_in_milli").alias("rate_in_milli"), F.sum("rate_out_milli").alias("rate_out_milli"),
        F.sum("thr_in").alias("thr_in"), F.sum("thr_out").alias("thr_out"), F.count(F.lit(1)).alias("topics"),
        F.sum("producers").alias("producers"), F.sum("consumers").alias("consumers"),
    )


def with_owner(intervals: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Each (tick, bundle) row with ``broker_idx``, the broker owning the bundle at that tick."""
    def step(agg: DataFrame) -> DataFrame:
        iv = F.broadcast(intervals).alias("iv")
        return agg.alias("a").join(
            iv, (F.col("a.bundle_idx") == F.col("iv.bundle_idx")) & F.col("a.tick").between(F.col("iv.from_tick"),
                                                                                               F.col("iv.to_tick"))
        ).select("a.*", "iv.broker_idx")
    return step


def broker_sums(owned: DataFrame) -> DataFrame:
    """Per (tick, broker): the sums of the bundles it owns (LocalBrokerData's totals)."""
    return owned.groupBy("tick", "broker_idx").agg(
        F.sum("rate_in_milli").alias("rate_in_milli"), F.sum("rate_out_milli").alias("rate_out_milli"),
        F.sum("thr_in").alias("thr_in"), F.sum("thr_out").alias("thr_out"), F.sum("topics").alias("num_topics"),
        F.count(F.lit(1)).alias("num_bundles"), F.sum("producers").alias("num_producers"),
        F.sum("consumers").alias("num_consumers"),
    )


def for_alive_brokers(layout: _Layout) -> Callable[[DataFrame], DataFrame]:
    """Every live (tick, broker), with zero sums when it owns nothing, and its resource limits."""
    def step(sums: DataFrame) -> DataFrame:
        zero: dict[str, bool | float | int | str] = {c: 0 for c in _REPORT_SUMS}
        return layout.alive.join(sums, ["tick", "broker_idx"], "left").fillna(zero).join(
            F.broadcast(layout.brokers), "broker_idx")
    return step


def broker_reports(model: LoadModel, seed: int) -> Callable[[DataFrame], DataFrame]:
    """A broker's fresh report: its sums and its resource usage from the load model."""
    def step(df: DataFrame) -> DataFrame:
        rate_in, rate_out = F.col("rate_in_milli") / 1000.0, F.col("rate_out_milli") / 1000.0
        thr_in, thr_out = F.col("thr_in").cast("double"), F.col("thr_out").cast("double")
        cpu_noise = (uniform(seed, "cpu", F.col("tick"), F.col("broker_idx")) * 2.0 - 1.0) * model.cpu_noise + 1.0
        gc_phase = ((F.col("tick") + F.col("broker_idx") * 3) % model.gc_period_ticks) / float(model.gc_period_ticks)
        return df.select(
            "tick", "broker_idx", "broker",
            (model.cpu_usage(rate_in + rate_out, thr_in + thr_out) * cpu_noise).alias("cpu_usage"), "cpu_limit",
            F.least(model.heap_usage(F.col("memory_limit"), gc_phase, F.col("num_topics")),
                    F.col("memory_limit") * 0.95).alias("memory_usage"), "memory_limit",
            F.least(model.direct_usage(thr_in), F.col("direct_memory_limit") * 0.95).alias("direct_memory_usage"),
            "direct_memory_limit",
            model.bandwidth_in_usage(thr_in).alias("bandwidth_in_usage"), F.col("nic_limit").alias("bandwidth_in_limit"),
            model.bandwidth_out_usage(thr_in, thr_out).alias("bandwidth_out_usage"),
            F.col("nic_limit").alias("bandwidth_out_limit"),
            rate_in.alias("msg_rate_in"), rate_out.alias("msg_rate_out"),
            thr_in.alias("msg_throughput_in"), thr_out.alias("msg_throughput_out"),
            F.col("num_topics").cast("long").alias("num_topics"), F.col("num_bundles").cast("int").alias("num_bundles"),
            F.col("num_consumers").cast("int").alias("num_consumers"),
            F.col("num_producers").cast("int").alias("num_producers"),
        )
    return step


def report_writes(sc: Scenario, seed: int, forced: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """The (broker_idx, tick, written) of every report a broker writes: the write rule (``needBrokerDataUpdate``)
    folded over its fresh reports; brokers running before the history starts wrote their t=0 report up to
    maxInterval earlier (``written`` < 0, ``tick`` 0)."""
    max_minutes = float(sc.pulsar["loadBalancerReportUpdateMaxIntervalMinutes"])
    max_ticks = max(1, int(max_minutes * 60 // sc.tick_seconds))
    prof = profile_for(sc.pulsar["pulsarVersion"])
    weighted = prof.overload_checks_weighted
    usage = report_usage_column(
        weights=sc.pulsar.resource_weights(), weighted=weighted,
        include_memory=prof.weighted_max_includes_memory if weighted else prof.max_usage_includes_memory)

    def step(fresh: DataFrame) -> DataFrame:
        rule_in = fresh.join(forced, ["broker_idx", "tick"], "left").select(
            F.col("broker_idx").alias("broker"), "tick", (F.col("msg_rate_in") + F.col("msg_rate_out")).alias("rate_total"),
            (F.col("msg_throughput_in") + F.col("msg_throughput_out")).alias("thr_total"), "num_bundles",
            usage.alias("usage"), F.coalesce(F.col("forced"), F.lit(False)).alias("forced"),
            F.when(F.col("tick") == 0, -F.floor(uniform(seed, "report-offset", F.col("broker_idx")) * max_ticks))
            .otherwise(F.col("tick")).cast("int").alias("origin"))
        return report_write_ticks(
            rule_in, tick_seconds=sc.tick_seconds,
            threshold_pct=float(sc.pulsar["loadBalancerReportUpdateThresholdPercentage"]),
            max_interval_minutes=max_minutes,
        ).select(F.col("broker").alias("broker_idx"), F.greatest("tick", F.lit(0)).alias("tick"),
                 F.col("tick").alias("written"))
    return step


def leader_view(alive: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Per live (broker, tick): the tick of its last written report (``write_tick``) and of the data it holds
    (``content_tick``, that tick clamped to the history)."""
    def step(writes: DataFrame) -> DataFrame:
        last_write = F.last("written", ignorenulls=True).over(
            Window.partitionBy("broker_idx").orderBy("tick").rowsBetween(Window.unboundedPreceding, 0))
        return (alive.join(writes, ["broker_idx", "tick"], "left")
                .select("broker_idx", "tick", last_write.alias("write_tick"))
                .withColumn("content_tick", F.greatest("write_tick", F.lit(0))))
    return step


def broker_load_rows(sc: Scenario, cluster: str, fresh: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """The leader's view in ``broker_load``'s columns: each broker's last written report at every tick."""
    def step(view: DataFrame) -> DataFrame:
        return view.alias("v").join(
            fresh.alias("f"), (F.col("f.broker_idx") == F.col("v.broker_idx")) & (F.col("f.tick") == F.col("v.content_tick"))
        ).select(
            F.lit(cluster).alias("cluster"), _tick_ts(sc, "v.tick").alias("ts"), "f.*",
            F.lit(sc.broker.version).cast("string").alias("broker_version"),
            F.lit(MODULAR_LOAD_MANAGER).alias("load_manager_class_name"),
            F.lit(True).alias("persistent_topics_enabled"), F.lit(True).alias("non_persistent_topics_enabled"),
            _tick_ts(sc, "v.write_tick").alias("last_update"),
        )
    return step


def bundle_load_rows(sc: Scenario, cluster: str, view: DataFrame, layout: _Layout) -> Callable[[DataFrame], DataFrame]:
    """Each written report's ``lastStats`` in ``bundle_load``'s columns, as the leader sees them at every tick."""
    def step(owned: DataFrame) -> DataFrame:
        return owned.alias("o").join(
            F.broadcast(view).alias("v"),
            (F.col("o.broker_idx") == F.col("v.broker_idx")) & (F.col("o.tick") == F.col("v.content_tick")),
        ).join(F.broadcast(layout.bundles).alias("m"), F.col("o.bundle_idx") == F.col("m.bundle_idx")).join(
            F.broadcast(layout.brokers.select("broker_idx", "broker")).alias("b"),
            F.col("o.broker_idx") == F.col("b.broker_idx")
        ).select(
            F.lit(cluster).alias("cluster"), _tick_ts(sc, "v.tick").alias("ts"), "b.broker", "m.bundle", "m.namespace",
            "m.range_lower", "m.range_upper",
            (F.col("o.rate_in_milli") / 1000.0).alias("msg_rate_in"), (F.col("o.rate_out_milli") / 1000.0).alias("msg_rate_out"),
            F.col("o.thr_in").cast("double").alias("msg_throughput_in"),
            F.col("o.thr_out").cast("double").alias("msg_throughput_out"),
            F.col("o.topics").alias("topics"), F.col("o.consumers").alias("consumer_count"),
            F.col("o.producers").alias("producer_count"),
            F.round(sc.load_model.cache_size(F.col("o.thr_in").cast("double"))).cast("long").alias("cache_size"),
        )
    return step


def namespace_policy_rows(spark: SparkSession, sc: Scenario, cluster: str) -> DataFrame:
    """namespace_policy: the initial boundaries, nothing else set."""
    bounds = initial_boundaries(sc.bundles_per_namespace)
    policy_rows = [(cluster, ns, [f"0x{b:08x}" for b in bounds], sc.bundles_per_namespace, None, None, None, None, False)
                   for ns in namespace_names(sc.namespaces)]
    return _frame(spark, policy_rows, "cluster string, namespace string, initial_boundaries array<string>, "
                                      "num_bundles int, anti_affinity_group string, isolation_primary array<string>, "
                                      "isolation_secondary array<string>, isolation_min_available int, "
                                      "shedding_excluded boolean")


# ---------------------------------------------------------------------------------------------------------
# The run: plan on the driver, then one Delta commit per table
# ---------------------------------------------------------------------------------------------------------
@dataclass
class _Writer:
    """Replaces the cluster's rows of one table per progress step and counts them (``rows``, in write order)."""

    spark: SparkSession
    lake: str
    cluster: str
    steps: StepProgress
    say: Callable[[str], None] | None  # a line per table when no progress display was passed
    rows: dict[str, int] = field(default_factory=dict)

    def step(self, name: str) -> Any:
        return self.steps.step(name, self.spark.sparkContext)

    def write(self, table: tables.Table, df: DataFrame, rows: int, started: float | None) -> None:
        self.rows[table.name] = rows
        with self.step(table.name) as note:
            tables.replace_partitions(self.spark, self.lake, table, df, f"cluster = '{self.cluster}'")
            note.text = f"{rows} rows"
            if self.say is not None and started is not None:
                self.say(f"{table.name}: {rows} rows ({time.time() - started:.1f}s)")


def _plan(sc: Scenario, cal: TrafficCalibration, say: Callable[[str], None]) -> tuple[OwnershipPlan, list[str]]:
    """The ownership intervals over every broker the run ever has (the initial ones, then the joiners)."""
    n_total = sc.brokers + sum(e.count for e in sc.events if e.kind == "join")
    factors = np.array([sc.broker.factor(i) for i in range(n_total)])
    plan = plan_ownership(cal.bundle_rate, factors, sc.brokers, sc.events, sc.ticks, sc.rebalance)
    say(f"ownership: {len(plan.bundle)} intervals, {plan.moves} rebalance moves, {n_total} brokers over the run")
    return plan, broker_names(n_total, sc.broker.port)


def _write_reports(out: _Writer, sc: Scenario, seed: int, tt: DataFrame, layout: _Layout, plan: OwnershipPlan,
                   cal: TrafficCalibration) -> None:
    """broker_load and bundle_load: the fresh bundle stats with their owner (materialized once, used twice), the
    brokers' fresh reports, the write rule and the leader's view of the last written reports."""
    t0 = time.time()
    owned = tt.transform(bundle_sums).transform(with_owner(layout.intervals)).persist(StorageLevel.DISK_ONLY)
    fresh = view = None
    try:
        with out.step("bundle_stats"):
            owned.count()
        fresh = (owned.transform(broker_sums).transform(for_alive_brokers(layout))
                 .transform(broker_reports(sc.load_model, seed)).persist(StorageLevel.MEMORY_AND_DISK))
        view = (fresh.transform(report_writes(sc, seed, layout.forced)).transform(leader_view(layout.alive))
                .persist(StorageLevel.MEMORY_AND_DISK))
        out.write(tables.BROKER_LOAD, view.transform(broker_load_rows(sc, out.cluster, fresh)),
                  sum(hi - lo + 1 for _, lo, hi in plan.alive), t0)
        t0 = time.time()
        # a bundle without topics has no stats
        out.write(tables.BUNDLE_LOAD, owned.transform(bundle_load_rows(sc, out.cluster, view, layout)),
                  sc.ticks * int((cal.bundle_topics > 0).sum()), t0)
    finally:
        for cached in (owned, fresh, view):
            if cached is not None:
                cached.unpersist()


def generate(spark: SparkSession, lake: str, scenario: str | Path | Mapping[str, Any], cluster: str, seed: int = 42,
             size: str | None = None, log: Callable[[str], None] | None = None,
             progress: StepProgress | None = None) -> GenerateResult:
    """Generate ``scenario`` for ``cluster`` into the lake's input tables (replacing that cluster's rows).

    ``progress`` (built from :func:`generate_steps`) reports each step; without it ``log`` gets a line per table.
    """
    say = log or (lambda _msg: None)
    if not cluster or any(ch in cluster for ch in "'\\\n"):
        raise UsageError(f"invalid cluster name {cluster!r}")
    lake = lake_path(lake)
    started = time.time()
    sc = resolve_scenario(scenario, size)
    say(f"scenario {sc.name} size {sc.size}: {sc.brokers} brokers, {sc.num_bundles} bundles, {sc.topics} topics, "
        f"{sc.ticks} ticks of {sc.tick_seconds}s, seed {seed}")
    out = _Writer(spark, lake, cluster, progress or StepProgress("generate", generate_steps(sc), quiet=True),
                  say if progress is None else None)

    topics = topics_frame(spark, sc, seed)  # collected as small metadata for calibration and ownership
    with out.step("topics"):
        meta = topics.select("topic_idx", "bundle_idx", "weight", "msg_size", "fanout").toPandas()
    cal = calibrate(meta, sc)
    plan, names = _plan(sc, cal, say)
    layout = _layout(spark, sc, plan, names)

    t0 = time.time()
    tt = topic_ticks_frame(spark, sc, seed, topics, cal)
    # row counts hold by construction: every topic and every bundle with topics at every tick, and every alive
    # (broker, tick)
    out.write(tables.TOPIC_LOAD, tt.transform(topic_load_rows(cluster)), sc.ticks * sc.topics, t0)
    _write_reports(out, sc, seed, tt, layout, plan, cal)
    out.write(tables.NAMESPACE_POLICY, namespace_policy_rows(spark, sc, cluster), sc.namespaces, None)
    return GenerateResult(sc, cluster, seed, out.rows, time.time() - started, plan, cal, names)


def generate_command(scenario: str, cluster: str, seed: int = 42, size: str | None = None, lake: str | None = None,
                     master: str | None = None, quiet: bool = False) -> GenerateResult:
    """CLI entry point of ``lbreplay generate``: progress on standard error (step k/n, Spark tasks, rows, ETA; a
    live line on a terminal, plain lines otherwise, nothing when quiet), then the row counts and the time."""
    sc = resolve_scenario(scenario, size)  # fail fast on usage errors, before starting Spark
    progress = StepProgress("generate", generate_steps(sc), quiet=quiet)
    t0 = time.time()
    lake = lake_path(lake or DEFAULT_LAKE)
    try:
        spark = get_spark(lake, master=master)
        progress.log(f"spark ready ({time.time() - t0:.1f}s)")
        result = generate(spark, lake, scenario, cluster, seed=seed, size=size, log=progress.log, progress=progress)
    finally:
        progress.close()
    counts = ", ".join(f"{k}={v}" for k, v in result.rows.items())
    print(f"generated cluster {cluster} (scenario {result.scenario.name}, size {result.scenario.size}, seed {seed}) "
          f"into {lake}: {counts} in {result.seconds:.1f}s")
    return result
