"""``ResourceUsage.percentUsage`` and ``LocalBrokerData`` max-usage functions, vectorized.

Resource columns are always in Pulsar's order: cpu, memory, directMemory, bandwidthIn, bandwidthOut.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.version_profile import profile_for

RESOURCES: tuple[str, ...] = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
CPU, MEMORY, DIRECT_MEMORY, BANDWIDTH_IN, BANDWIDTH_OUT = range(5)
_HUNDRED = np.float32(100.0)
_ONE = np.float32(1.0)
_ZERO = np.float32(0.0)
# Columns of the max: 4-arg form (no memory) since 3.0, 5-arg form up to 2.11 (#19559).
_COLS_4 = np.array([CPU, DIRECT_MEMORY, BANDWIDTH_IN, BANDWIDTH_OUT])
_COLS_5 = np.array([CPU, MEMORY, DIRECT_MEMORY, BANDWIDTH_IN, BANDWIDTH_OUT])


def percent_usage(usage: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """``ResourceUsage.percentUsage()``: float32 ``usage/limit*100``; 0 where ``limit <= 0``."""
    u = np.asarray(usage, dtype=np.float32)
    lim = np.asarray(limit, dtype=np.float32)
    positive = lim > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(positive, u / np.where(positive, lim, _ONE), _ZERO)  # float32 throughout
    return p * _HUNDRED


def max_resource_usage(usage: np.ndarray, limit: np.ndarray, conf: PulsarConfig) -> np.ndarray:
    """``LocalBrokerData.getMaxResourceUsage()`` (float32 / 100) per broker; memory only up to 2.11 (#19559)."""
    pct = percent_usage(usage, limit)
    cols = _COLS_5 if profile_for(conf["pulsarVersion"]).max_usage_includes_memory else _COLS_4
    return (pct[:, cols].max(axis=1) / _HUNDRED).astype(np.float64)


def weighted_max_usage(usage: np.ndarray, limit: np.ndarray, conf: PulsarConfig) -> np.ndarray:
    """``getMaxResourceUsageWithWeight`` (double): 4-arg form since 3.0, 5-arg (with memory) up to 2.11."""
    cols = _COLS_5 if profile_for(conf["pulsarVersion"]).weighted_max_includes_memory else _COLS_4
    pct = percent_usage(usage, limit)[:, cols].astype(np.float64)
    w = np.asarray(conf.resource_weights(), dtype=np.float64)[cols]
    return (pct * w).max(axis=1) / 100.0


def overload_check_usage(usage: np.ndarray, limit: np.ndarray, conf: PulsarConfig) -> np.ndarray:
    """The usage Overload checks compare with the threshold: weighted since PIP-358 (4.0), else getMaxResourceUsage."""
    if profile_for(conf["pulsarVersion"]).overload_checks_weighted:
        return weighted_max_usage(usage, limit, conf)
    return max_resource_usage(usage, limit, conf)


def java_2f(value: float) -> str:
    """Java's ``String.format("%.2f", double)``: the shortest decimal of the double, rounded half up."""
    from decimal import ROUND_HALF_UP, Decimal

    return str(Decimal(repr(float(value))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def printed_resource_usage(usage: Sequence[float] | np.ndarray, limit: Sequence[float] | np.ndarray) -> dict[str, str]:
    """``LocalBrokerData.printResourceUsage()`` of one report: each resource's ``percentUsage()`` (float32) as
    ``%.2f`` prints it, by resource name (the strategies' DEBUG lines print it)."""
    pct = percent_usage(np.asarray(usage).reshape(5), np.asarray(limit).reshape(5))
    return {r: java_2f(float(p)) for r, p in zip(RESOURCES, pct)}
