"""A tiny hand-made cluster history for replay tests (independent of the scenario generator)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from lbreplay.kernel.naming import bundle_names, initial_boundaries

T0 = dt.datetime(2026, 1, 1, 0, 0, 0)


def write_history(spark: Any, lake: str, cluster: str, *, brokers: int = 5, bundles: int = 16, ticks: int = 30,
                  hot_broker_bundles: int = 8, leave_at: int | None = None) -> list[str]:
    """Broker 0 owns ``hot_broker_bundles`` bundles, the rest round-robin; every bundle 10 MB/s + 2000 msg/s.

    With ``leave_at``, the last broker has no row from that tick on and its bundles are reported by broker 0.
    """
    from lbreplay.lake import tables as T

    ids = [f"broker-{i}:8080" for i in range(brokers)]
    names = bundle_names("tenant/ns", initial_boundaries(bundles))
    owner = [0] * hot_broker_bundles + [1 + (i % (brokers - 1)) for i in range(bundles - hot_broker_bundles)]
    brows, urows = [], []
    for t in range(ticks):
        ts = T0 + dt.timedelta(minutes=t)
        alive = [i for i in range(brokers) if leave_at is None or t < leave_at or i != brokers - 1]
        own = [o if o in alive else 0 for o in owner]
        for j, name in enumerate(names):
            lo, hi = name.rsplit("/", 1)[1].split("_")
            urows.append(dict(cluster=cluster, ts=ts, broker=ids[own[j]], bundle=name, namespace="tenant/ns",
                              range_lower=int(lo, 16), range_upper=int(hi, 16), msg_rate_in=1000.0, msg_rate_out=1000.0,
                              msg_throughput_in=5e6, msg_throughput_out=5e6, topics=20, consumer_count=5,
                              producer_count=5, cache_size=0))
        for i in alive:
            n = own.count(i)
            rate = 2000.0 * n
            thr = 1e7 * n
            brows.append(dict(cluster=cluster, ts=ts, broker=ids[i], cpu_usage=5.0 + 0.004 * rate, cpu_limit=800.0,
                              memory_usage=1024.0, memory_limit=4096.0, direct_memory_usage=512.0,
                              direct_memory_limit=4096.0, bandwidth_in_usage=thr / 2 * 8 / 1024,
                              bandwidth_in_limit=1e6, bandwidth_out_usage=thr / 2 * 8 / 1024, bandwidth_out_limit=1e6,
                              msg_rate_in=rate / 2, msg_rate_out=rate / 2, msg_throughput_in=thr / 2,
                              msg_throughput_out=thr / 2, num_topics=20 * n, num_bundles=n, num_consumers=5 * n,
                              num_producers=5 * n, broker_version="4.0.0",
                              load_manager_class_name="org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
                              persistent_topics_enabled=True, non_persistent_topics_enabled=True, last_update=ts))
    bdf = spark.createDataFrame(brows, schema=None)
    udf = spark.createDataFrame(urows, schema=None)
    T.replace_partitions(spark, lake, T.BROKER_LOAD, bdf, f"cluster = '{cluster}'")
    T.replace_partitions(spark, lake, T.BUNDLE_LOAD, udf, f"cluster = '{cluster}'")
    return ids
