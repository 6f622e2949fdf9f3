"""The report's data: aggregated in Spark per run and tick, collected only as small plotting frames.

Long runs are downsampled to at most ``max_points`` points per line: ticks are grouped into buckets of
``bucket_width(ticks, max_points)`` consecutive ticks and each bucket is plotted at its first ``ts`` with the
mean of its values (cumulative counts take the bucket's last value).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from lbreplay.errors import UsageError
from lbreplay.lake.tables import DATABASE

DEFAULT_MAX_POINTS = 2000
DEFAULT_MAX_MOVES = 2000  # moves timeline: markers per run


def bucket_width(ticks: int, max_points: int = DEFAULT_MAX_POINTS) -> int:
    """Consecutive ticks per plotted point so that a run of ``ticks`` ticks yields at most ``max_points`` points."""
    if max_points < 1:
        raise ValueError("max_points must be >= 1")
    return max(1, math.ceil(max(ticks, 0) / max_points))


@dataclass
class RunInfo:
    run_id: str
    cluster: str
    mode: str
    seed: int
    ticks: int
    status: str
    config: dict[str, Any]
    shedding_strategy: str
    placement_strategy: str
    pulsar_version: str
    started_at: Any = None
    finished_at: Any = None
    name: str = ""  # the verdict's human name (config name, sweep label or the keys that differ)
    replay_options: dict[str, Any] = field(default_factory=dict)

    @property
    def given_name(self) -> str:
        """The sweep point's ``label`` (the grid values that vary), else the config file's ``name``."""
        return str(self.replay_options.get("label") or self.replay_options.get("name") or "")

    @property
    def label(self) -> str:
        """Legend label: the run's name (else its id) and its strategies."""
        return f"{self.name or self.run_id} ({self.shedding_strategy} + {self.placement_strategy})"


@dataclass
class ReportFrames:
    """Everything the report plots, as small pandas frames (one row per run/bucket or event)."""

    runs: list[RunInfo]
    metrics: dict[str, dict[str, float | None]]  # run_id -> metric -> value
    broker_usage: pd.DataFrame  # run_id, broker, bucket, ts, weighted_max_usage, num_bundles
    cluster_load: pd.DataFrame  # run_id, bucket, ts, spread, std, max_over_mean, alive
    cumulative: pd.DataFrame  # run_id, bucket, ts, unloads, splits (cumulative)
    moves: pd.DataFrame  # run_id, seq, tick, ts, action, bundle, source_broker, target_broker, broker, reason
    moves_total: dict[str, int] = field(default_factory=dict)  # run_id -> decisions before thinning
    events: pd.DataFrame = field(default_factory=pd.DataFrame)  # run_id, broker, kind (join|leave), tick, ts
    max_points: int = DEFAULT_MAX_POINTS


def _in_list(run_ids: list[str]) -> str:
    return "(" + ", ".join("'" + r.replace("'", "''") + "'" for r in run_ids) + ")"


def _effective(config: dict[str, Any]) -> tuple[str, str, str]:
    """(shedding strategy, placement strategy, pulsarVersion) the run used: its keys over the version's defaults."""
    from lbreplay.kernel.config import PulsarConfig, short_class

    try:
        conf = PulsarConfig.resolve(config)
    except Exception:  # noqa: BLE001 - a config this build no longer knows: show what was given
        return (short_class(str(config.get("loadBalancerLoadSheddingStrategy", "?"))),
                short_class(str(config.get("loadBalancerLoadPlacementStrategy", "?"))), str(config.get("pulsarVersion", "?")))
    return (short_class(conf["loadBalancerLoadSheddingStrategy"]), short_class(conf["loadBalancerLoadPlacementStrategy"]),
            str(conf["pulsarVersion"]))


def load_run_metrics(spark: Any, run_ids: Sequence[str], database: str = DATABASE) -> dict[str, dict[str, float | None]]:
    """The runs' ``run_metrics`` as run id -> metric -> value (a run without rows: an empty dict)."""
    metrics: dict[str, dict[str, float | None]] = {r: {} for r in run_ids}
    for row in spark.sql(f"SELECT run_id, metric, value FROM {database}.run_metrics "
                         f"WHERE run_id IN {_in_list(list(run_ids))}").collect():
        metrics[row["run_id"]][row["metric"]] = row["value"]
    return metrics


def load_runs(spark: Any, run_ids: list[str], database: str = DATABASE) -> list[RunInfo]:
    """The runs' rows, in the order given. Unknown run ids and runs that did not succeed are a UsageError naming
    them."""
    rows = {
        r["run_id"]: r
        for r in spark.sql(
            f"SELECT run_id, cluster, mode, seed, ticks, status, config, started_at, finished_at, replay_options "
            f"FROM {database}.runs WHERE run_id IN {_in_list(run_ids)}"
        ).collect()
    }
    missing = [r for r in run_ids if r not in rows]
    if missing:
        raise UsageError(f"--runs: unknown run id(s): {', '.join(missing)}")
    failed = [f"{r} ({rows[r]['status']})" for r in run_ids if rows[r]["status"] != "succeeded"]
    if failed:
        raise UsageError(f"--runs: run(s) did not succeed: {', '.join(failed)}")
    out = []
    for rid in run_ids:
        r = rows[rid]
        config = json.loads(r["config"] or "{}")
        shed, place, version = _effective(config)
        out.append(RunInfo(
            run_id=rid, cluster=r["cluster"] or "", mode=r["mode"] or "", seed=int(r["seed"] or 0),
            ticks=int(r["ticks"] or 0), status=r["status"], config=config, shedding_strategy=shed,
            placement_strategy=place, pulsar_version=version, started_at=r["started_at"], finished_at=r["finished_at"],
            replay_options=json.loads(r["replay_options"] or "{}"),
        ))
    return out


def broker_events(broker_ticks: Any) -> Any:
    """Broker joins and leaves of each run, from the alive rows of ``broker_ticks``: DataFrame -> DataFrame.

    A broker joins at a tick where it is alive and was not at the run's previous tick (not counting the run's
    first tick); it leaves at the first tick after an alive tick where it is not alive (if the run goes on).
    Columns: run_id, broker, kind ('join' | 'leave'), tick, ts (ts of that tick; for a leave into a tick without
    any alive broker, the ts of the broker's last alive tick)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    alive = broker_ticks.where(F.col("alive")).select("run_id", "broker", "tick", "ts")
    ticks = alive.select("run_id", "tick", "ts").distinct()
    bounds = ticks.groupBy("run_id").agg(F.min("tick").alias("first_tick"), F.max("tick").alias("last_tick"))
    w = Window.partitionBy("run_id", "broker").orderBy("tick")
    seq = (
        alive.withColumn("prev_tick", F.lag("tick").over(w)).withColumn("next_tick", F.lead("tick").over(w))
        .join(bounds, on="run_id")
    )
    joins = seq.where(
        (F.col("prev_tick").isNull() & (F.col("tick") > F.col("first_tick")))
        | (F.col("tick") - F.col("prev_tick") > 1)
    ).select("run_id", "broker", F.lit("join").alias("kind"), "tick", "ts")
    leaves = seq.where(
        (F.col("next_tick").isNull() & (F.col("tick") < F.col("last_tick")))
        | (F.col("next_tick") - F.col("tick") > 1)
    ).select("run_id", "broker", (F.col("tick") + 1).alias("tick"), F.col("ts").alias("last_ts"))
    leaves = leaves.join(ticks, on=["run_id", "tick"], how="left").select(
        "run_id", "broker", F.lit("leave").alias("kind"), "tick", F.coalesce(F.col("ts"), F.col("last_ts")).alias("ts")
    )
    return joins.unionByName(leaves)


def cluster_load(broker_ticks: Any) -> Any:
    """Per run and tick over alive brokers: spread (max - min), std (population) and max/mean of the weighted
    max usage (the figures ``run_metrics`` summarises), and the number of alive brokers."""
    from pyspark.sql import functions as F

    w = F.col("weighted_max_usage")
    return (
        broker_ticks.where(F.col("alive"))
        .groupBy("run_id", "tick")
        .agg(
            F.min("ts").alias("ts"),
            (F.max(w) - F.min(w)).alias("spread"),
            F.stddev_pop(w).alias("std"),
            F.when(F.avg(w) > 0, F.max(w) / F.avg(w)).otherwise(F.lit(1.0)).alias("max_over_mean"),
            F.count(F.lit(1)).alias("alive"),
        )
    )


def _bucketed(df: Any, widths: Any) -> Any:
    from pyspark.sql import functions as F

    return df.join(widths.hint("broadcast"), on="run_id").withColumn(
        "bucket", F.floor(F.col("tick") / F.col("width")).cast("long")
    )


def load_frames(
    spark: Any, run_ids: list[str], *, max_points: int = DEFAULT_MAX_POINTS, max_moves: int = DEFAULT_MAX_MOVES,
    database: str = DATABASE,
) -> ReportFrames:
    """Aggregate the runs' output tables in Spark and collect the report's frames."""
    if not run_ids:
        raise UsageError("--runs: give at least one run id")
    run_ids = list(dict.fromkeys(run_ids))
    runs = load_runs(spark, run_ids, database)
    ids = _in_list(run_ids)
    widths = spark.createDataFrame(
        [(r.run_id, bucket_width(r.ticks, max_points)) for r in runs], "run_id STRING, width BIGINT"
    )
    bt = (
        spark.table(f"{database}.broker_ticks").where(f"run_id IN {ids}")
        .select("run_id", "broker", "tick", "ts", "weighted_max_usage", "num_bundles", "alive").cache()
    )
    dec = spark.table(f"{database}.decisions").where(f"run_id IN {ids}")
    try:
        return _collect(spark, runs, run_ids, widths, bt, dec, max_points, max_moves, database)
    finally:
        bt.unpersist()


def _collect(spark: Any, runs: list[RunInfo], run_ids: list[str], widths: Any, bt: Any, dec: Any,
             max_points: int, max_moves: int, database: str) -> ReportFrames:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    metrics = {r: {m: None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
                   for m, v in by_metric.items()}
               for r, by_metric in load_run_metrics(spark, run_ids, database).items()}

    per_broker = (
        _bucketed(bt.where(F.col("alive")), widths)
        .groupBy("run_id", "broker", "bucket")
        .agg(F.min("ts").alias("ts"), F.avg("weighted_max_usage").alias("weighted_max_usage"),
             F.avg("num_bundles").alias("num_bundles"))
        .orderBy("run_id", "broker", "bucket")
    )
    cl = (
        _bucketed(cluster_load(bt), widths)
        .groupBy("run_id", "bucket")
        .agg(F.min("ts").alias("ts"), F.avg("spread").alias("spread"), F.avg("std").alias("std"),
             F.avg("max_over_mean").alias("max_over_mean"), F.avg("alive").alias("alive"))
        .orderBy("run_id", "bucket")
    )
    # cumulative unloads (UNLOAD + TRANSFER, as run_metrics counts them) and splits at every tick of the run
    ticks = bt.where(F.col("alive")).groupBy("run_id", "tick").agg(F.min("ts").alias("ts"))
    per_tick = dec.groupBy("run_id", "tick").agg(
        F.sum(F.when(F.col("action").isin("UNLOAD", "TRANSFER"), 1).otherwise(0)).alias("n_unloads"),
        F.sum(F.when(F.col("action") == "SPLIT", 1).otherwise(0)).alias("n_splits"),
    )
    w = Window.partitionBy("run_id").orderBy("tick").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    cum = (
        ticks.join(per_tick, on=["run_id", "tick"], how="left").fillna(0, subset=["n_unloads", "n_splits"])
        .withColumn("unloads", F.sum("n_unloads").over(w)).withColumn("splits", F.sum("n_splits").over(w))
    )
    cum = (
        _bucketed(cum, widths).groupBy("run_id", "bucket")
        .agg(F.min("ts").alias("ts"), F.max("unloads").alias("unloads"), F.max("splits").alias("splits"))
        .orderBy("run_id", "bucket")
    )
    # moves timeline: every decision that moved or split something (a KEEP moved nothing), thinned to at most
    # max_moves per run (every k-th by seq)
    rw = Window.partitionBy("run_id").orderBy("seq")
    total = F.count(F.lit(1)).over(Window.partitionBy("run_id"))
    moves = (
        dec.where(F.col("action") != "KEEP").withColumn("_n", F.row_number().over(rw) - 1).withColumn("total", total)
        .where(F.col("_n") % F.greatest(F.lit(1), F.ceil(F.col("total") / F.lit(max_moves))) == 0)
        .select("run_id", "seq", "tick", "ts", "action", "bundle", "source_broker", "target_broker",
                F.coalesce("target_broker", "source_broker").alias("broker"), "reason", "total")
        .orderBy("run_id", "seq")
    ).toPandas()
    totals = {r: int(moves.loc[moves["run_id"] == r, "total"].max()) if (moves["run_id"] == r).any() else 0
              for r in run_ids}
    events = broker_events(bt).orderBy("run_id", "tick", "kind", "broker")
    return ReportFrames(
        runs=runs, metrics=metrics, broker_usage=per_broker.toPandas(), cluster_load=cl.toPandas(),
        cumulative=cum.toPandas(), moves=moves.drop(columns=["total"]), moves_total=totals,
        events=events.toPandas(), max_points=max_points,
    )
