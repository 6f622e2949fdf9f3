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
