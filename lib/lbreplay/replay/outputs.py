"""Driver side of a replay's outputs: the tasks' rows shaped into the output tables (columns from
``lake.tables``), run metrics, observed ownership, and the Delta commits (``replaceWhere run_id IN (...)``: a
re-run replaces its rows; the ``runs`` row last, so a run is complete when ``runs.status = 'succeeded'``)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import Window
from pyspark.sql import functions as F

from lbreplay import __version__
from lbreplay.lake import tables
from lbreplay.lake.storage import run_concurrently
from lbreplay.replay.payload import NOT_IN_PAYLOAD, TIMESTAMP, payload_fields

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

KPI_SUMS = ("time_to_balance_minutes_total", "cluster_events", "calibration_error_total", "calibration_ticks")


def parsed_payloads(kind: str, fields: list[tuple[str, str]]) -> Callable[[DataFrame], DataFrame]:
    """The task rows of ``kind``, their JSON array payloads parsed positionally into typed columns."""
    def step(raw: DataFrame) -> DataFrame:
        df = raw.where(F.col("kind") == kind).select("run_id", F.from_json(F.col("payload"), "ARRAY<STRING>").alias("p"))
        cols = []
        for i, (name, typ) in enumerate(fields):
            c = F.col("p")[i]
            cols.append((F.from_json(c, typ) if typ.startswith(("ARRAY", "MAP")) else c.cast(typ)).alias(name))
        return df.select("run_id", *cols)
    return step


def _epoch_ms_to_timestamp(column: str) -> Column:
    return (F.col(column) / 1000).cast("timestamp")


def as_table(table: tables.Table, cluster: str) -> Callable[[DataFrame], DataFrame]:
    """Parsed payloads in ``table``'s columns: the cluster added, epoch ms back to timestamps."""
    def step(df: DataFrame) -> DataFrame:
        cols: list[Any] = []
        for c in table.columns:
            if c.name == "cluster":
                cols.append(F.lit(cluster).alias("cluster"))
            elif c.type == TIMESTAMP and c.name not in NOT_IN_PAYLOAD:
                cols.append(_epoch_ms_to_timestamp(f"{c.name}_ms").alias(c.name))
            else:
                cols.append(c.name)
        return df.select(*cols)
    return step


def table_rows(raw: DataFrame, table: tables.Table, cluster: str) -> DataFrame:
    """The rows of output ``table`` among the tasks' rows."""
    return raw.transform(parsed_payloads(table.name, payload_fields(table))).transform(as_table(table, cluster))


def renumbered_decisions(decisions: DataFrame) -> DataFrame:
    """Audit slices number their decisions from 1 each: renumber per run in (tick, seq) order."""
    return decisions.withColumn(
        "seq", F.row_number().over(Window.partitionBy("run_id").orderBy("tick", "seq")).cast("bigint"))


# Floating-point sums in Spark's aggregates follow the order rows reach them (partitions, slices, execution
# shape); these fold a sorted array instead, so the same rows give the same bits whatever the shape.
def _fold_sum(values: Column) -> Column:
    """Sum of an array column, added in its order."""
    return F.aggregate(values, F.lit(0.0), lambda acc, x: acc + x)


def _ordered_sum(name: str) -> Column:
    """Sum of the group's values, added in ascending order (an aggregate: collect, sort, fold)."""
    return _fold_sum(F.array_sort(F.collect_list(name)))


def _sorted_mean(values: Column) -> Column:
    """Mean of a sorted array column (added in its order)."""
    return F.try_divide(_fold_sum(values), F.size(values))


def _sorted_std(values: Column) -> Column:
    """Population standard deviation of a sorted array column (two passes, in its order)."""
    mean = _sorted_mean(values)
    return F.sqrt(F.try_divide(_fold_sum(F.transform(values, lambda x: (x - mean) * (x - mean))), F.size(values)))


def combine_metrics(seq_metrics: DataFrame, broker_ticks: DataFrame, targets: DataFrame | None = None) -> DataFrame:
    """run_metrics: the tasks' additive metrics summed over tick slices, plus the load distribution over time
    (std, max-min spread and max/mean of the weighted max usage over alive brokers per tick; mean, p95, final)
    computed from ``broker_ticks``; with ``targets`` the balance KPIs (``report.balance.balance_metrics``)."""
    summed = seq_metrics.groupBy("run_id", "metric").agg(
        F.when(F.col("metric") == "task_peak_rss_mb", F.max("value")).otherwise(_ordered_sum("value")).alias("value"))
    wide = summed.groupBy("run_id").pivot("metric", list(KPI_SUMS)).agg(F.first("value"))
    derived = wide.select(
        "run_id",
        F.when(F.col("cluster_events") > 0, F.col("time_to_balance_minutes_total") / F.col("cluster_events"))
        .otherwise(F.lit(0.0)).alias("recovery_minutes"),
        F.when(F.col("calibration_ticks") > 0, F.col("calibration_error_total") / F.col("calibration_ticks"))
        .otherwise(F.lit(None).cast("double")).alias("calibration_mape"),
    )
    derived = derived.select("run_id", F.expr(
        "stack(2, 'recovery_minutes', recovery_minutes, 'calibration_mape', calibration_mape)"
    ).alias("metric", "value"))
    per_tick = broker_ticks.where("alive").groupBy("run_id", "tick").agg(
        F.array_sort(F.collect_list("weighted_max_usage")).alias("u"),
        (F.max("weighted_max_usage") - F.min("weighted_max_usage")).alias("load_spread"),
        F.max("weighted_max_usage").alias("max"),
    ).select("run_id", "tick", "load_spread", "max", _sorted_mean(F.col("u")).alias("mean"),
             _sorted_std(F.col("u")).alias("load_std")).select(
        "run_id", "tick", "load_std", "load_spread", "max",
        F.when(F.col("mean") > 0, F.col("max") / F.col("mean")).otherwise(F.lit(1.0)).alias("load_max_over_mean"))
    # every distribution KPI in one aggregation: mean, p95 and the final tick's value (max_by tick)
    names = ("load_std", "load_spread", "load_max_over_mean")
    aggs = [F.count(F.lit(1)).cast("double").alias("ticks"), F.max("max").alias("peak_usage")]
    for name in names:
        aggs += [F.array_sort(F.collect_list(name)).alias(f"{name}_values"),
                 F.percentile(name, 0.95).alias(f"{name}_p95"),
                 F.max_by(name, "tick").alias(f"{name}_final")]
    kpis = per_tick.groupBy("run_id").agg(*aggs)
    kpis = kpis.select("*", *[_sorted_mean(F.col(f"{n}_values")).alias(f"{n}_mean") for n in names])
    cols = ["ticks", "peak_usage"] + [f"{n}_{s}" for n in names for s in ("mean", "p95", "final")]
    stacked = kpis.select("run_id", F.expr(
        f"stack({len(cols)}, " + ", ".join(f"'{c}', CAST({c} AS DOUBLE)" for c in cols) + ")").alias("metric", "value"))
    rest = summed.where(~F.col("metric").isin("time_to_balance_minutes_total", "calibration_error_total",
                                               "calibration_ticks"))
    out = rest.unionByName(derived).unionByName(stacked)
    if targets is None:
        return out
    from lbreplay.report.balance import balance_metrics

    return out.unionByName(balance_metrics(broker_ticks, targets))


def observed_ownership(bundle_load: DataFrame, cluster: str) -> DataFrame:
    """Observed ownership as intervals (gaps and islands over the tick sequence of ``bundle_load``), in the
    ``ownership`` columns minus ``run_id``."""
    ticks = bundle_load.select("ts").distinct().withColumn("tick", F.row_number().over(Window.orderBy("ts")) - 1)
    rows = bundle_load.join(ticks, "ts").select("bundle", "namespace", "range_lower", "range_upper", "broker", "tick", "ts")
    w = Window.partitionBy("bundle").orderBy("tick")
    rows = rows.withColumn("prev_broker", F.lag("broker").over(w)).withColumn("prev_tick", F.lag("tick").over(w))
    rows = rows.withColumn("new_island", (F.col("prev_broker").isNull() | (F.col("prev_broker") != F.col("broker"))
                                          | (F.col("prev_tick") != F.col("tick") - 1)).cast("int"))
    rows = rows.withColumn("island", F.sum("new_island").over(w.rowsBetween(Window.unboundedPreceding, 0)))
    last_tick = ticks.agg(F.max("tick").alias("last")).first()["last"]  # type: ignore[index]
    isl = rows.groupBy("bundle", "namespace", "range_lower", "range_upper", "broker", "island").agg(
        F.min("tick").alias("from_tick"), F.max("tick").alias("last_tick"), F.min("ts").alias("from_ts"))
    nxt = ticks.select(F.col("tick").alias("to_tick_j"), F.col("ts").alias("to_ts"))
    isl = isl.withColumn("to_tick", F.when(F.col("last_tick") < last_tick, F.col("last_tick") + 1))
    isl = isl.join(nxt, isl["to_tick"] == nxt["to_tick_j"], "left")
    return isl.select(F.lit(cluster).alias("cluster"), "bundle", "namespace", "range_lower", "range_upper", "broker",
                      F.col("from_tick").cast("bigint"), F.col("to_tick").cast("bigint"), "from_ts", "to_ts")


def write_outputs(spark: SparkSession, lake: str, cluster: str, raw: DataFrame, runs: list[dict[str, Any]],
                  observed: DataFrame | None = None) -> None:
    """Commit the runs' rows of every output table, then their ``runs`` rows. ``observed`` is the observed
    ownership (:func:`observed_ownership`), the ownership of the audit runs."""
    ids = [r["run_id"] for r in runs]
    where = "run_id IN (" + ", ".join("'" + i.replace("'", "''") + "'" for i in ids) + ")"
    bt = table_rows(raw, tables.BROKER_TICKS, cluster)
    dec = raw.transform(parsed_payloads("decisions", payload_fields(tables.DECISIONS))) \
        .transform(renumbered_decisions).transform(as_table(tables.DECISIONS, cluster))
    own = table_rows(raw, tables.OWNERSHIP, cluster)
    audits = [r["run_id"] for r in runs if r["mode"] == "observed"]
    if audits and observed is not None:
        own = own.unionByName(observed.crossJoin(
            spark.createDataFrame([(i,) for i in audits], "run_id STRING")).select(*own.columns))
    seq_metrics = raw.transform(parsed_payloads("run_metrics", payload_fields(tables.RUN_METRICS)))
    # broker_ticks feeds its table and every per-tick KPI of run_metrics: parse the JSON once
    bt = bt.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        from lbreplay.report.balance import targets_frame

        met = combine_metrics(seq_metrics, bt, targets_frame(spark, {r["run_id"]: r["config"] for r in runs}))
        # four independent Delta commits, concurrently; the runs row is written after all of them
        run_concurrently(*[
            (lambda table=table, df=df: tables.replace_partitions(spark, lake, table, df, where))
            for table, df in ((tables.OWNERSHIP, own), (tables.DECISIONS, dec), (tables.BROKER_TICKS, bt),
                              (tables.RUN_METRICS, met))
        ])
    finally:
        bt.unpersist()
    ticks: dict[str, int] = {}
    for r in raw.where(F.col("kind") == "ticks").collect():
        ticks[r["run_id"]] = ticks.get(r["run_id"], 0) + json.loads(r["payload"])[0]
    finished = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    rows = [(r["run_id"], cluster, r["mode"], json.dumps(r["config"], sort_keys=True), int(r["seed"]),
             r["input_versions"], r["started_at"], finished, "succeeded", int(ticks.get(r["run_id"], 0)), __version__,
             json.dumps(r["replay"], sort_keys=True)) for r in runs]
    runs_df = spark.createDataFrame(rows, tables.RUNS.struct_type())
    tables.replace_partitions(spark, lake, tables.RUNS, runs_df, where)
