"""Extensible ``BrokerLoadData`` (PIP-192), columnar: one row per broker.

Mirrors ``org.apache.pulsar.broker.loadbalance.extensions.data.BrokerLoadData`` (``update``,
``updateMaxResourceUsage``, ``updateWeightedMaxEMA``, the ``msgThroughputEMA`` of #22321, ``clear``) and
``BrokerLoadDataTest``. Resource columns are in Pulsar's order: cpu, memory, directMemory, bandwidthIn,
bandwidthOut (``lbreplay.kernel.resource_usage.RESOURCES``).

* ``maxResourceUsage`` = max(pct(cpu), pct(directMemory), pct(bwIn), pct(bwOut)) / 100 — memory excluded.
  The percentages are ``ResourceUsage.percentUsage()`` floats; the max and the division are done in double
  (``LocalBrokerData.max(double...)``), so 4 % gives exactly 0.04 as ``BrokerLoadDataTest`` asserts.
* ``weightedMaxEMA``: the 5-weight max (memory included, weighted by ``loadBalancerMemoryResourceWeight``,
  0 by default since 4.0) / 100, EWMA'd with ``loadBalancerHistoryResourcePercentage``; the first update
  (``updatedAt == 0``) takes the raw value.
* ``msgThroughputEMA``: same EWMA of ``msgThroughputIn + msgThroughputOut``.
* A new object has ``maxResourceUsage = weightedMaxEMA = 1.0`` (``DEFAULT_RESOURCE_USAGE``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.resource_usage import BANDWIDTH_IN, BANDWIDTH_OUT, CPU, DIRECT_MEMORY, percent_usage

DEFAULT_RESOURCE_USAGE = 1.0  # BrokerLoadData.DEFAULT_RESOURCE_USAGE
_MAX_COLS = [CPU, DIRECT_MEMORY, BANDWIDTH_IN, BANDWIDTH_OUT]


def max_resource_usage(usage: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """``BrokerLoadData.updateMaxResourceUsage``: max of the float percentages (memory excluded) / 100, in double."""
    pct = percent_usage(usage, limit).astype(np.float64)
    return pct[:, _MAX_COLS].max(axis=1) / 100.0


def weighted_max_usage(usage: np.ndarray, limit: np.ndarray, conf: PulsarConfig) -> np.ndarray:
    """``BrokerLoadData.getMaxResourceUsageWithWeight`` (5 weights, ``conf.resource_weights()``) / 100."""
    pct = percent_usage(usage, limit).astype(np.float64)
    w = np.asarray(conf.resource_weights(), dtype=np.float64)
    return (pct * w).max(axis=1) / 100.0


@dataclass
class BrokerLoadData:
    """The broker-load-data store (``loadbalancer-broker-load-data``) as columns, rows aligned with broker ids."""

    usage: np.ndarray  # (B, 5) resource usage, Pulsar units
    limit: np.ndarray  # (B, 5)
    msg_throughput_in: np.ndarray  # bytes/s
    msg_throughput_out: np.ndarray
    msg_rate_in: np.ndarray  # msg/s
    msg_rate_out: np.ndarray
    bundle_count: np.ndarray  # int64
    topics: np.ndarray  # int64
    max_resource_usage: np.ndarray  # fraction (1.0 = 100 %)
    weighted_max_ema: np.ndarray  # fraction
    msg_throughput_ema: np.ndarray  # bytes/s
    updated_at: np.ndarray  # int64 ms; 0 = never updated
    reported_at: np.ndarray  # int64 ms

    @classmethod
    def empty(cls, n: int) -> "BrokerLoadData":
        """``n`` rows of ``new BrokerLoadData()``."""
        return cls(
            usage=np.zeros((n, 5)),
            limit=np.zeros((n, 5)),
            msg_throughput_in=np.zeros(n),
            msg_throughput_out=np.zeros(n),
            msg_rate_in=np.zeros(n),
            msg_rate_out=np.zeros(n),
            bundle_count=np.zeros(n, dtype=np.int64),
            topics=np.zeros(n, dtype=np.int64),
            max_resource_usage=np.full(n, DEFAULT_RESOURCE_USAGE),
            weighted_max_ema=np.full(n, DEFAULT_RESOURCE_USAGE),
            msg_throughput_ema=np.zeros(n),
            updated_at=np.zeros(n, dtype=np.int64),
            reported_at=np.zeros(n, dtype=np.int64),
        )

    def __len__(self) -> int:
        return len(self.updated_at)

    @property
    def msg_throughput(self) -> np.ndarray:
        """``msgThroughputIn + msgThroughputOut`` per broker."""
        return self.msg_throughput_in + self.msg_throughput_out

    def update(
        self,
        rows: np.ndarray,
        usage: np.ndarray,
        limit: np.ndarray,
        msg_throughput_in: np.ndarray,
        msg_throughput_out: np.ndarray,
        msg_rate_in: np.ndarray,
        msg_rate_out: np.ndarray,
        bundle_count: np.ndarray,
        topics: np.ndarray,
        now_ms: int,
        conf: PulsarConfig,
    ) -> None:
        """``BrokerLoadData.update(usage, thrIn, thrOut, rateIn, rateOut, bundleCount, topics, conf)`` for ``rows``.

        Called by ``BrokerLoadDataReporter.generateLoadData`` every ``loadBalancerReportUpdateMinIntervalMillis``.
        The EMAs are seeded with the raw value on a row's first update (``updatedAt == 0``).
        """
        rows = np.asarray(rows, dtype=np.int64)
        usage = np.asarray(usage, dtype=np.float64).reshape(len(rows), 5)
        limit = np.asarray(limit, dtype=np.float64).reshape(len(rows), 5)
        thr_in = np.asarray(msg_throughput_in, dtype=np.float64)
        thr_out = np.asarray(msg_throughput_out, dtype=np.float64)
        h = conf.history_percentage
        first = self.updated_at[rows] == 0
        self.usage[rows] = usage
        self.limit[rows] = limit
        self.msg_throughput_in[rows] = thr_in
        self.msg_throughput_out[rows] = thr_out
        self.msg_rate_in[rows] = msg_rate_in
        self.msg_rate_out[rows] = msg_rate_out
        self.bundle_count[rows] = bundle_count
        self.topics[rows] = topics
        self.max_resource_usage[rows] = max_resource_usage(usage, limit)
        w = weighted_max_usage(usage, limit, conf)
        old_w = self.weighted_max_ema[rows]
        self.weighted_max_ema[rows] = np.where(first, w, old_w * h + (1 - h) * w)
        thr = thr_in + thr_out
        old_t = self.msg_throughput_ema[rows]
        self.msg_throughput_ema[rows] = np.where(first, thr, old_t * h + (1 - h) * thr)
        self.updated_at[rows] = now_ms

    def copy_rows(self, dst: np.ndarray, other: "BrokerLoadData", src: np.ndarray) -> None:
        """``BrokerLoadData.update(BrokerLoadData other)``: copy every field of ``other[src]`` into ``self[dst]``."""
        for name in self.__dataclass_fields__:
            getattr(self, name)[dst] = getattr(other, name)[src]

    def clear(self, rows: np.ndarray) -> None:
        """``BrokerLoadData.clear()``: back to ``new BrokerLoadData()``."""
        fresh = BrokerLoadData.empty(len(np.atleast_1d(rows)))
        self.copy_rows(np.atleast_1d(rows), fresh, np.arange(len(fresh)))

    def take(self, rows: np.ndarray) -> "BrokerLoadData":
        """A new store holding ``rows`` (in that order)."""
        return BrokerLoadData(**{name: getattr(self, name)[rows].copy() for name in self.__dataclass_fields__})
