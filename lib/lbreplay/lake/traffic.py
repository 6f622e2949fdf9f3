"""Synthetic topic load: the topics of a scenario and their traffic at every tick, as Spark transformations.

* topics -- ``spark.range(topics)``; fully qualified names ``persistent://tenant/ns/...`` (some partitioned);
  a topic's bundle is found by CRC32 of its name (``F.crc32`` = ``zlib.crc32`` = Guava ``crc32``,
  ``NamespaceBundleFactory#getBundle``) against the namespace's initial boundaries (``PoliciesUtil.getBundles``).
  Per-topic constants (rate weight, message size, subscriptions, producers, consumers) are hash-based
  uniforms of (seed, salt, keys) via ``xxhash64``, so they do not depend on partitioning.
* calibration -- on the driver, from the topics' small metadata: the traffic scale that puts the initial
  brokers at the target utilization, per-bundle rates, and the hot bundle's multiplier.
* ticks x topics -- ``crossJoin`` of ``spark.range(ticks)`` with the topics: rates = scale x weight x diurnal
  x noise x jitter x hot-bundle ramp, kept as integer milli-msg/s and bytes/s so every sum is exact and the
  tables are identical for the same seed whatever the partitioning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from pyspark.sql import functions as F

from lbreplay.errors import UsageError
from lbreplay.lake.scenario import Scenario, namespace_names

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame, SparkSession

PARTITIONS_PER_TOPIC = 8


def uniform(seed: int, salt: str, *cols: Column) -> Column:
    """A deterministic uniform in (0, 1) from ``xxhash64(seed, salt, cols...)`` (53 high bits)."""
    h = F.xxhash64(F.lit(int(seed)).cast("long"), F.lit(salt), *cols)
    return (F.shiftrightunsigned(h, 11).cast("double") + F.lit(0.5)) / F.lit(float(1 << 53))


def topics_frame(spark: SparkSession, sc: Scenario, seed: int) -> DataFrame:
    """One row per topic: name, namespace, bundle (CRC32 rule) and its constant traffic attributes."""
    tr = sc.traffic
    ns_names = namespace_names(sc.namespaces)
    short = [n.split("/", 1)[1] for n in ns_names]
    n_b = sc.bundles_per_namespace
    seg = (1 << 32) // n_b
    idx = F.col("topic_idx")
    local = F.expr(f"topic_idx div {sc.namespaces}")
    block = F.expr(f"(topic_idx div {sc.namespaces}) div {PARTITIONS_PER_TOPIC}")
    ns_col = F.element_at(F.array(*[F.lit(n) for n in ns_names]), F.col("ns_idx") + 1)
    short_col = F.element_at(F.array(*[F.lit(n) for n in short]), F.col("ns_idx") + 1)
    name = F.when(
        block % 2 == 0,
        F.format_string("persistent://%s/%s-events-%03d-partition-%d", ns_col, short_col, block,
                        local % PARTITIONS_PER_TOPIC),
    ).otherwise(F.format_string("persistent://%s/%s-%05d", ns_col, short_col, local))
    u1, u2 = uniform(seed, "weight-1", idx), uniform(seed, "weight-2", idx)
    z = F.sqrt(F.log(u1) * -2.0) * F.cos(u2 * (2 * math.pi))
    s_lo, s_hi = tr.msg_size_bytes
    sub_lo, sub_hi = tr.subscriptions
    p_lo, p_hi = tr.producers
    c_lo, c_hi = tr.consumers_per_subscription

    def int_between(lo: int, hi: int, salt: str) -> Column:
        return (F.floor(uniform(seed, salt, idx) * (hi - lo + 1)) + lo).cast("int")

    df = (
        spark.range(0, sc.topics, 1, numPartitions=max(1, min(8, sc.topics // 5000)))
        .withColumnRenamed("id", "topic_idx")
        .withColumn("ns_idx", (idx % sc.namespaces).cast("int"))
        .withColumn("namespace", ns_col)
        .withColumn("topic", name)
        .withColumn("topic_hash", F.crc32(F.col("topic")))
        .withColumn("bundle_local", F.least(F.expr(f"topic_hash div {seg}"), F.lit(n_b - 1)).cast("int"))
        .withColumn("bundle_idx", (F.col("ns_idx") * n_b + F.col("bundle_local")).cast("int"))
        .withColumn("weight", F.exp(z * tr.weight_sigma - tr.weight_sigma ** 2 / 2.0))
        .withColumn("msg_size", F.round(F.pow(F.lit(s_hi / s_lo), uniform(seed, "size", idx)) * s_lo).cast("long"))
        .withColumn("fanout", int_between(sub_lo, sub_hi, "subscriptions"))
        .withColumn("producers", int_between(p_lo, p_hi, "producers"))
        .withColumn("consumers", (F.col("fanout") * int_between(c_lo, c_hi, "consumers")).cast("int"))
    )
    return df.drop("bundle_local")


@dataclass
class TrafficCalibration:
    """Driver-side numbers derived from the topics: the traffic scale and per-bundle loads."""

    scale: float  # msg/s in per unit of topic weight
    bundle_rate: np.ndarray  # msg/s in+out per bundle at scale (no modulation)
    bundle_topics: np.ndarray
    hot_bundle: int  # -1 when none
    hot_multiplier: float


def calibrate(topics: pd.DataFrame, sc: Scenario) -> TrafficCalibration:
    """Scale traffic so the initial brokers' mean cpu and bandwidth usage are at most ``target_utilization``."""
    t = topics.sort_values("topic_idx")
    w = t["weight"].to_numpy(dtype=np.float64)
    size = t["msg_size"].to_numpy(dtype=np.float64)
    fan = t["fanout"].to_numpy(dtype=np.float64)
    bidx = t["bundle_idx"].to_numpy(dtype=np.int64)
    model = sc.load_model
    caps = [sc.broker.capacity.scaled(sc.broker.factor(i)) for i in range(sc.brokers)]
    cpu_lim = float(sum(c.cpu_limit for c in caps))
    nic_lim = float(sum(c.nic_limit for c in caps))
    target = sc.traffic.target_utilization
    rate_tot = float((w * (1 + fan)).sum())
    thr_in = float((w * size).sum())
    thr_out = float((w * size * fan).sum())
    scales = [(target * cpu_lim - model.cpu_base_pct * sc.brokers) / float(model.cpu_traffic_pct(rate_tot, thr_in + thr_out))]
    if nic_lim > 0:
        scales.append(target * nic_lim / float(model.bandwidth_out_usage(thr_in, thr_out)))
        scales.append(target * nic_lim / float(model.bandwidth_in_usage(thr_in)))
    scale = min(scales)
    if scale <= 0:
        raise UsageError("traffic.target_utilization is below the idle cpu (load_model.cpu_base_pct)")
    nb = sc.num_bundles
    bundle_rate = np.bincount(bidx, weights=scale * w * (1 + fan), minlength=nb)
    bundle_topics = np.bincount(bidx, minlength=nb)
    hot, mult = -1, 1.0
    hb = sc.traffic.hot_bundle
    if hb is not None:
        first = hb.namespace * sc.bundles_per_namespace
        candidates = [first + (hb.bundle + k) % sc.bundles_per_namespace for k in range(sc.bundles_per_namespace)]
        hot = next((b for b in candidates if bundle_topics[b] >= 2), -1)  # BundleSplitterTask skips < 2 topics
        if hot < 0:
            raise UsageError("traffic.hot_bundle: no bundle with at least 2 topics in that namespace")
        goal = hb.threshold_factor * float(sc.pulsar["loadBalancerNamespaceBundleMaxMsgRate"])
        mult = max(1.0, goal / float(bundle_rate[hot])) if bundle_rate[hot] > 0 else 1.0
    return TrafficCalibration(scale, bundle_rate, bundle_topics, hot, mult)


def _ticks_frame(spark: SparkSession, sc: Scenario, cal: TrafficCalibration, partitions: int) -> DataFrame:
    """One row per tick with its timestamp, diurnal factor and hot-bundle ramp."""
    tr = sc.traffic
    period = tr.diurnal_period_ticks or max(1, int(round(86400 / sc.tick_seconds)))
    tick = F.col("tick")
    diurnal = F.sin(tick.cast("double") * (2 * math.pi / period) + F.lit(tr.diurnal_phase)) * tr.diurnal_amplitude + 1.0
    hot = F.lit(1.0)
    if tr.hot_bundle is not None and cal.hot_multiplier > 1.0:
        r0, r1 = tr.hot_bundle.ramp
        frac = tick.cast("double") / float(sc.ticks)
        ramp = F.least(F.greatest((frac - r0) / max(r1 - r0, 1e-9), F.lit(0.0)), F.lit(1.0))
        hot = ramp * (cal.hot_multiplier - 1.0) + 1.0
    return (
        spark.range(0, sc.ticks, 1, numPartitions=partitions)
        .select(F.col("id").cast("int").alias("tick"))
        .withColumn("ts", F.timestamp_seconds(F.lit(sc.start_epoch) + tick.cast("long") * sc.tick_seconds))
        .withColumn("diurnal", diurnal)
        .withColumn("hot_mult", hot)
    )


def topic_ticks_frame(spark: SparkSession, sc: Scenario, seed: int, topics: DataFrame,
                      cal: TrafficCalibration) -> DataFrame:
    """ticks x topics with integer ``rate_in_milli`` (msg/s x 1000), ``thr_in`` bytes/s and the out sides."""
    tr = sc.traffic
    rows = sc.ticks * sc.topics
    partitions = int(max(2, min(64, rows // 1_000_000)))
    ticks = _ticks_frame(spark, sc, cal, min(partitions, sc.ticks))
    df = ticks.crossJoin(F.broadcast(topics.select("topic_idx", "topic", "namespace", "bundle_idx", "weight",
                                                    "msg_size", "fanout", "producers", "consumers")))
    noise = (uniform(seed, "noise", F.col("tick"), F.col("topic_idx")) * 2.0 - 1.0) * tr.noise + 1.0
    factor = F.col("diurnal") * noise
    if tr.jitter_probability > 0:
        window = F.expr(f"tick div {tr.jitter_length_ticks}")
        lo, hi = tr.jitter_multiplier
        spike = F.when(uniform(seed, "jitter", F.col("bundle_idx"), window) < tr.jitter_probability,
                       uniform(seed, "jitter-size", F.col("bundle_idx"), window) * (hi - lo) + lo).otherwise(1.0)
        factor = factor * spike
    if cal.hot_bundle >= 0:
        factor = factor * F.when(F.col("bundle_idx") == cal.hot_bundle, F.col("hot_mult")).otherwise(1.0)
    rate_in = F.round(F.col("weight") * factor * (cal.scale * 1000.0)).cast("long")
    return (
        df.withColumn("rate_in_milli", rate_in)
        .withColumn("thr_in", F.round(F.col("rate_in_milli") * F.col("msg_size") / 1000.0).cast("long"))
        .withColumn("rate_out_milli", F.col("rate_in_milli") * F.col("fanout"))
        .withColumn("thr_out", F.col("thr_in") * F.col("fanout"))
    )
