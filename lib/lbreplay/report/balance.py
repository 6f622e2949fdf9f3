"""When is a cluster balanced? By the target the run's own config states, per shedding strategy (data, below).

A tick is balanced when its alive brokers meet the strategy's condition; the run's time to balance is the time
from its first tick until the load stays balanced to the end of the run (null + ``never_balanced`` = 1 when the
last tick is unbalanced). Every condition reads the per-tick figures of ``broker_ticks`` (weighted max usage,
Pulsar's ``getMaxResourceUsageWithWeight``, or msg rate), not the leader's time-averaged view, so a strategy's
target is met when the load the brokers actually carry meets it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Criterion:
    """One strategy's balance condition: ``measure <= key's value x factor``."""

    measure: str  # a per-tick column of :func:`per_tick_balance` (before the comparison)
    key: str  # the broker.conf key holding the threshold
    factor: float  # key's value -> the measure's unit
    text: str  # "{t}" is the threshold in the key's unit


# shedding strategy (short class name) -> its own notion of balanced
CRITERIA: dict[str, Criterion] = {
    # ThresholdShedder sheds a broker whose usage exceeds the average by more than the percentage
    "ThresholdShedder": Criterion("max_minus_mean", "loadBalancerBrokerThresholdShedderPercentage", 0.01,
                                  "every broker within {t} pp above the mean usage"),
    # OverloadShedder sheds brokers above the overloaded threshold
    "OverloadShedder": Criterion("max", "loadBalancerBrokerOverloadedThresholdPercentage", 0.01,
                                 "no broker above {t} % usage"),
    # UniformLoadShedder sheds while (max - min) / min msg rate exceeds the percentage
    "UniformLoadShedder": Criterion("msg_rate_difference", "loadBalancerMsgRateDifferenceShedderThreshold", 0.01,
                                    "max msg rate within {t} % of the min"),
    # AvgShedder: below the low threshold of max - min usage nothing is ever shed
    "AvgShedder": Criterion("spread", "loadBalancerAvgShedderLowThreshold", 0.01,
                            "max − min usage within {t} pp"),
    # TransferShedder (extensible): the std of the brokers' load against loadBalancerBrokerLoadTargetStd
    "TransferShedder": Criterion("std", "loadBalancerBrokerLoadTargetStd", 1.0,
                                 "usage std within {t} (loadBalancerBrokerLoadTargetStd)"),
}


@dataclass(frozen=True)
class BalanceTarget:
    strategy: str
    criterion: Criterion
    threshold: float  # in the key's unit, as the config states it

    @property
    def limit(self) -> float:
        return self.threshold * self.criterion.factor

    def describe(self) -> str:
        t = f"{self.threshold:g}"
        return f"{self.strategy}: {self.criterion.text.format(t=t)} ({self.criterion.key}={t})"


def balance_target(config: Mapping[str, Any]) -> BalanceTarget:
    """The balance target of a run's config (its keys over the Pulsar defaults of its ``pulsarVersion``); the
    extensible load manager always uses TransferShedder's."""
    from lbreplay.kernel.config import PulsarConfig, is_extensible, short_class

    conf = PulsarConfig.resolve(modelled_keys(config))
    strategy = "TransferShedder" if is_extensible(conf) else short_class(conf["loadBalancerLoadSheddingStrategy"])
    criterion = CRITERIA[strategy]
    return BalanceTarget(strategy, criterion, float(conf[criterion.key]))


NON_PULSAR_KEYS = frozenset({"name", "label", "description"})  # run labels kept in runs.config, not broker.conf


def modelled_keys(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``config`` lbreplay models (conf/pulsar/defaults.yaml, aliases included); broker.conf keys of
    other Pulsar features a run keeps are left out."""
    from lbreplay.kernel.config import _defaults_doc

    doc = _defaults_doc()
    aliases: dict[str, str] = doc.get("aliases") or {}
    return {k: v for k, v in config.items() if aliases.get(k, k) in doc["keys"]}


def targets_frame(spark: SparkSession, configs: Mapping[str, Mapping[str, Any]]) -> DataFrame:
    """(run_id, measure, limit) of each run's config."""
    rows = []
    for run_id, config in configs.items():
        t = balance_target(config)
        rows.append((run_id, t.criterion.measure, t.limit))
    return spark.createDataFrame(rows, "run_id STRING, measure STRING, limit DOUBLE")


def per_tick_balance(broker_ticks: DataFrame, targets: DataFrame) -> DataFrame:
    """Per run and tick over alive brokers: ts (seconds), spread, idle brokers (no bundle), and ``balanced``
    by the run's target."""
    from pyspark.sql import functions as F

    w, rate = F.col("weighted_max_usage"), F.col("msg_rate")
    per_tick = broker_ticks.where("alive").groupBy("run_id", "tick").agg(
        F.min(F.col("ts").cast("double")).alias("t"),
        F.max(w).alias("max"), F.min(w).alias("min"), F.avg(w).alias("mean"), F.stddev_pop(w).alias("std"),
        F.max(rate).alias("rate_max"), F.min(rate).alias("rate_min"),
        F.sum(F.when(F.col("num_bundles") == 0, 1).otherwise(0)).alias("idle"),
    )
    measure = (
        F.when(F.col("measure") == "max_minus_mean", F.col("max") - F.col("mean"))
        .when(F.col("measure") == "max", F.col("max"))
        .when(F.col("measure") == "spread", F.col("max") - F.col("min"))
        .when(F.col("measure") == "std", F.col("std"))
        .when(F.col("measure") == "msg_rate_difference",
              F.when(F.col("rate_min") > 0, (F.col("rate_max") - F.col("rate_min")) / F.col("rate_min"))
              .when(F.col("rate_max") > 0, F.lit(float("inf"))).otherwise(F.lit(0.0)))
    )
    return per_tick.join(targets.hint("broadcast"), on="run_id").select(
        "run_id", "tick", "t", "idle", (F.col("max") - F.col("min")).alias("spread"),
        (measure <= F.col("limit") + 1e-12).alias("balanced"))


def balance_metrics(broker_ticks: DataFrame, targets: DataFrame) -> DataFrame:
    """run_metrics rows (run_id, metric, value): time_to_balance_minutes (null when never), never_balanced,
    unbalanced_ticks, max_spread, idle_broker_minutes, duration_minutes (ticks x tick length)."""
    from pyspark.sql import functions as F

    ticks = per_tick_balance(broker_ticks, targets)
    last_bad = ticks.where(~F.col("balanced")).groupBy("run_id").agg(F.max("tick").alias("last_bad"))
    runs = ticks.groupBy("run_id").agg(
        F.min("t").alias("t0"), F.max("t").alias("t1"), F.count(F.lit(1)).alias("n"), F.max("tick").alias("last"),
        F.sum(F.when(F.col("balanced"), 0).otherwise(1)).alias("bad"), F.max("spread").alias("max_spread"),
        F.sum("idle").alias("idle_ticks"),
    ).join(last_bad, on="run_id", how="left")
    from_t = ticks.join(last_bad, on="run_id", how="left").where(
        F.col("last_bad").isNull() | (F.col("tick") > F.col("last_bad"))
    ).groupBy("run_id").agg(F.min("t").alias("balanced_from"))
    runs = runs.join(from_t, on="run_id", how="left")
    tick_min = F.when(F.col("n") > 1, (F.col("t1") - F.col("t0")) / 60.0 / (F.col("n") - 1)).otherwise(F.lit(1.0))
    never = F.col("last_bad").isNotNull() & (F.col("last_bad") == F.col("last"))
    cols = {
        "time_to_balance_minutes": F.when(never, F.lit(None).cast("double"))
        .otherwise((F.col("balanced_from") - F.col("t0")) / 60.0),
        "never_balanced": F.when(never, 1.0).otherwise(0.0),
        "unbalanced_ticks": F.col("bad").cast("double"),
        "max_spread": F.col("max_spread"),
        "idle_broker_minutes": F.col("idle_ticks") * tick_min,
        "duration_minutes": F.col("n") * tick_min,
    }
    wide = runs.select("run_id", *[c.cast("double").alias(k) for k, c in cols.items()])
    stack = f"stack({len(cols)}, " + ", ".join(f"'{k}', {k}" for k in cols) + ")"
    return wide.select("run_id", F.expr(stack).alias("metric", "value"))
