"""``LeastResourceUsageWithWeight`` (modular placement, PULSAR-LB-SPEC.md §4.3).

Mirrors ``org.apache.pulsar.broker.loadbalance.impl.LeastResourceUsageWithWeight``: per candidate, the EWMA
``brokerAvgResourceUsageWithWeight`` of the weighted max usage is advanced on EVERY ``selectBroker`` call
(``updateAndGetMaxResourceUsageWithWeight``); it restarts from the current usage when the broker reports no
bundles or no message rate. Brokers whose EWMA + ``loadBalancerAverageResourceUsageDifferenceThresholdPercentage``
is at most the candidates' average are the best; if none, every candidate. The pick is uniform (``rng``, over the
best rows in ascending order). The average sums the candidates in the order given (Java: the candidate
``HashSet``'s order, :mod:`lbreplay.kernel.broker_candidate_cache`), which decides the floating-point sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data import LoadData, cached
from lbreplay.kernel.resource_usage import weighted_max_usage
from lbreplay.kernel.strategy import best_draw
from lbreplay.kernel.version_profile import profile_for

MAX_RESOURCE_USAGE = 1.0  # LeastResourceUsageWithWeight.MAX_RESOURCE_USAGE (getOrDefault for unknown brokers)


class LeastResourceUsageWithWeight:
    """``ModularLoadManagerStrategy`` with the per-broker EWMA as state."""

    def __init__(self) -> None:
        self.ema: dict[str, float] = {}  # brokerAvgResourceUsageWithWeight
        self.last_average: float | None = None
        self.drawn: np.ndarray | None = None  # the rows the last call drew among (ascending); None: no draw

    def update_usage(self, rows: np.ndarray, ld: LoadData, conf: PulsarConfig) -> np.ndarray:
        """``updateAndGetMaxResourceUsageWithWeight`` for ``rows``: advance and return their EWMAs."""
        br = ld.brokers
        h = conf.history_percentage
        usage = cached(ld, "broker", "weighted_max_usage", lambda: weighted_max_usage(br.usage, br.limit, conf), conf)
        usage = usage[rows].tolist()  # per row, as computed for the row alone
        bundles = cached(ld, "bundle", "bundle_count", ld.bundle_count)[rows]
        idle = ((bundles == 0) | ((br.msg_rate_in[rows] == 0) & (br.msg_rate_out[rows] == 0))).tolist()
        if not profile_for(conf["pulsarVersion"]).lruw_idle_restart:  # before apache/pulsar#16766 (2.11.0)
            idle = [False] * len(idle)
        ids, ema = br.ids, self.ema
        out = []
        for k, row in enumerate(rows.tolist()):
            broker = ids[row]
            prev = None if idle[k] else ema.get(broker)
            value = usage[k] if prev is None else prev * h + (1 - h) * usage[k]
            ema[broker] = value
            out.append(value)
        return np.array(out, dtype=np.float64)

    def select_broker(
        self, candidates: np.ndarray, bundle: str, ld: LoadData, conf: PulsarConfig, rng: np.random.Generator
    ) -> int:
        """``selectBroker``: -1 when there are no candidates."""
        rows = np.asarray(candidates, dtype=np.int64)
        self.drawn = None
        if rows.size == 0:
            return -1
        ema = self.update_usage(rows, ld, conf)
        total = 0.0
        for v in ema.tolist():  # Java sums in iteration order; keep a left-to-right double sum
            total += v
        avg = total / rows.size
        self.last_average = avg
        diff = conf["loadBalancerAverageResourceUsageDifferenceThresholdPercentage"] / 100.0
        best = rows[ema + diff <= avg]
        if best.size == 0:  # "Assign randomly as all brokers are overloaded"
            best = rows
        row, self.drawn = best_draw(best, rng)  # bestBrokers.get(ThreadLocalRandom...nextInt(size))
        return row

    def on_active_brokers_change(self, active: set[str]) -> None:
        """Prune the EWMA of brokers no longer active ([M] ``onActiveBrokersChange``)."""
        self.ema = {b: v for b, v in self.ema.items() if b in active}

    def get_state(self) -> dict[str, Any]:
        return {"brokerAvgResourceUsageWithWeight": dict(sorted(self.ema.items()))}

    def set_state(self, state: dict[str, Any]) -> None:
        raw = (state or {}).get("brokerAvgResourceUsageWithWeight", {}) or {}
        self.ema = {str(k): float(v) for k, v in raw.items()}
