"""When a broker writes its load report: ``ModularLoadManagerImpl.needBrokerDataUpdate`` (vectorized).

A broker rewrites ``/loadbalance/brokers/<id>`` only when its load moved by more than
``loadBalancerReportUpdateThresholdPercentage`` (10 %) or ``loadBalancerReportUpdateMaxIntervalMinutes``
(15 min) passed since its last write; the leader sees the last written report (PULSAR-LB-SPEC.md §1.7).
"""

from __future__ import annotations

import numpy as np

from lbreplay.kernel.config import PulsarConfig


def percent_change(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``pctChange``: 0 if both are 0, +inf if old is 0, else 100*|old-new|/old."""
    old = np.asarray(old, dtype=np.float64)
    new = np.asarray(new, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = 100.0 * np.abs(old - new) / old
    pct = np.where(old == 0, np.where(new == 0, 0.0, np.inf), pct)
    return pct


def need_broker_data_update(
    last_written_ms: np.ndarray,
    now_ms: int,
    last_msg_rate: np.ndarray,
    msg_rate: np.ndarray,
    last_throughput: np.ndarray,
    throughput: np.ndarray,
    last_num_bundles: np.ndarray,
    num_bundles: np.ndarray,
    last_usage: np.ndarray,
    usage: np.ndarray,
    conf: PulsarConfig,
) -> np.ndarray:
    """Mask of brokers that write a new report now.

    ``usage`` is the max usage the version compares (4-arg weighted max in [M], getMaxResourceUsage older) as
    a fraction. A broker that never wrote (``last_written_ms < 0``) writes.
    """
    max_interval_ms = conf["loadBalancerReportUpdateMaxIntervalMinutes"] * 60_000
    stale = (now_ms - last_written_ms) > max_interval_ms
    change = np.maximum.reduce(
        [
            percent_change(last_msg_rate, msg_rate),
            percent_change(last_throughput, throughput),
            percent_change(last_num_bundles, num_bundles),
            100.0 * np.abs(np.asarray(last_usage) - np.asarray(usage)),
        ]
    )
    return (last_written_ms < 0) | stale | (change > conf["loadBalancerReportUpdateThresholdPercentage"])


class WrittenReports:
    """The last report each broker wrote (what the leader reads), and the write rule for the next one.

    One writer for both load managers: ``ModularLoadManagerImpl.writeBrokerDataOnZooKeeper`` and the extensible
    ``BrokerLoadDataReporter`` both publish only when ``needBrokerDataUpdate`` holds.
    """

    def __init__(self, n_brokers: int) -> None:
        self.written_ms = np.full(n_brokers, -1, dtype=np.int64)
        self.msg_rate = np.zeros(n_brokers)
        self.msg_throughput = np.zeros(n_brokers)
        self.num_bundles = np.zeros(n_brokers)
        self.max_usage = np.zeros(n_brokers)

    def due(self, now_ms: int, msg_rate: np.ndarray, msg_throughput: np.ndarray, num_bundles: np.ndarray,
            max_usage: np.ndarray, conf: PulsarConfig) -> np.ndarray:
        """Mask of the brokers whose report ``needBrokerDataUpdate`` rewrites now."""
        return need_broker_data_update(self.written_ms, now_ms, self.msg_rate, msg_rate, self.msg_throughput,
                                       msg_throughput, self.num_bundles, num_bundles, self.max_usage, max_usage, conf)

    def record(self, rows: np.ndarray, now_ms: int, msg_rate: np.ndarray, msg_throughput: np.ndarray,
               num_bundles: np.ndarray, max_usage: np.ndarray) -> None:
        """The brokers of ``rows`` wrote their report now (the figures are per broker, all rows)."""
        self.written_ms[rows] = now_ms
        self.msg_rate[rows] = msg_rate[rows]
        self.msg_throughput[rows] = msg_throughput[rows]
        self.num_bundles[rows] = num_bundles[rows]
        self.max_usage[rows] = max_usage[rows]
