"""``org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder`` (the default since 2.10).

Per shedding call every broker's weighted max usage advances an EWMA
(``updateAvgResourceUsage``: ``prev * h + (1 - h) * u``, ``h = loadBalancerHistoryResourcePercentage``);
a broker whose EWMA reaches ``avg + threshold`` sheds ``throughput * (cur - avg - threshold + 0.05)``
(instantaneous ``localData`` throughput) if that is at least
``loadBalancerBundleUnloadMinThroughputThreshold`` MiB/s and it owns more than one bundle.
Version switches (``version_profile``): the first observation is taken raw since 2.10, while older
versions seeded the history with 0.0 (first value ``(1 - h) * u``); the usage is the 4-arg weighted max
since 3.0 and the 5-arg one (with memory) before.

``lowerBoundarySheddingEnabled`` (#17456): when the main pass selected nothing,
``tryLowerBoundaryShedding`` recomputes the average -- advancing every EWMA a second time in the same
call -- and, if some broker is below ``avg - threshold``, sheds ``throughput * threshold * 0.5`` from the
highest-EWMA broker above ``avg - threshold`` that owns more than one bundle.

Brokers are visited in ``LoadData.getBrokerData()``'s JVM order (:mod:`lbreplay.kernel.load_data_order`), so the
lower-boundary tie (strict ``>``, first wins) goes to the first broker in that order and the average is summed
sequentially in it; bundles of equal throughput keep ``getBundleDataForLoadShedding()``'s order. The plan is the
field ``selectedBundlesCache`` (an ``ArrayListMultimap`` cleared each call), whose table length is kept in the state
(``selectedBundlesCache``, :mod:`lbreplay.kernel.guava_multimap`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.guava_multimap import SelectedBundlesCache
from lbreplay.kernel.load_data import LoadData
from lbreplay.kernel.load_data_order import broker_data_order
from lbreplay.kernel.resource_usage import weighted_max_usage
from lbreplay.kernel.selection import (
    OwnedCandidates,
    ShedderReport,
    SkipReasons,
    population_std,
    ranked_candidates,
    select_largest_first,
    shedding_candidates,
    short_term_throughput,
)
from lbreplay.kernel.strategy import Unload
from lbreplay.kernel.version_profile import profile_for

ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05  # ThresholdShedder.ADDITIONAL_THRESHOLD_PERCENT_MARGIN
LOWER_BOUNDARY_THRESHOLD_MARGIN = 0.5  # ThresholdShedder.LOWER_BOUNDARY_THRESHOLD_MARGIN
MB = 1024.0 * 1024.0
REASON = "max resource usage above avgUsage and threshold"
LOWER_BOUNDARY_REASON = "lower boundary shedding"
# Skip reasons, least to most progress.
SKIPS = ("NoBrokers", "ZeroAvgUsage", "Balanced", "MinThroughput", "NoBundles", "SoleBundle", "NoCandidates")


class ThresholdShedder(ShedderReport):
    """``ThresholdShedder`` with its ``brokerAvgResourceUsage`` EWMA map as threaded state."""

    def __init__(self) -> None:
        super().__init__()
        self.broker_avg_resource_usage: dict[str, float] = {}
        self.selected_bundles_cache = SelectedBundlesCache()  # the plan's multimap: its table kept across runs

    # --- EWMA -----------------------------------------------------------------------------------
    def _advance(self, ld: LoadData, usage: np.ndarray, conf: PulsarConfig) -> tuple[np.ndarray, float]:
        """``getBrokerAvgUsage``: advance every broker's EWMA once; return (EWMAs, their mean)."""
        h = conf.history_percentage
        raw_first = profile_for(conf["pulsarVersion"]).threshold_first_sample_raw
        ids = ld.brokers.ids
        prev = np.array([self.broker_avg_resource_usage.get(b, np.nan) for b in ids], dtype=np.float64)
        seeded = np.where(np.isnan(prev), 0.0, prev)  # legacy: history defaults to 0.0
        ewma = seeded * h + (1 - h) * usage
        if raw_first:
            ewma = np.where(np.isnan(prev), usage, ewma)
        self.broker_avg_resource_usage.update(zip(ids, ewma.tolist()))
        avg = float(np.cumsum(ewma[broker_data_order(ld)])[-1]) / len(ids) if len(ids) else 0.0  # brokerData order
        return ewma, avg

    # --- LoadSheddingStrategy -------------------------------------------------------------------
    def find_bundles_for_unloading(self, ld: LoadData, conf: PulsarConfig) -> list[Unload]:
        brokers = ld.brokers
        skip = SkipReasons(SKIPS)
        threshold = conf["loadBalancerBrokerThresholdShedderPercentage"] / 100.0
        min_throughput = conf["loadBalancerBundleUnloadMinThroughputThreshold"] * MB
        usage = weighted_max_usage(brokers.usage, brokers.limit, conf)
        cur, avg = self._advance(ld, usage, conf)
        self._stats = self._figures(brokers.ids, cur, avg, threshold)
        if len(brokers) == 0:
            skip.note("NoBrokers")
            return self._finish([], skip)
        if avg == 0:  # exact check, as in the source ("average max resource usage is 0")
            skip.note("ZeroAvgUsage")
            return self._finish([], skip)
        throughput = brokers.msg_throughput
        counts = ld.bundle_count()
        values = short_term_throughput(ld)
        candidates: OwnedCandidates | None = None
        at_least_one = bool(conf["atLeastOneBundleSelected"])
        need = throughput * (cur - avg - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN)
        over = ~(cur < avg + threshold)
        out: list[Unload] = []
        if not over.any():
            skip.note("Balanced")
        for i in broker_data_order(ld)[over[broker_data_order(ld)]].tolist():  # getBrokerData().forEach
            if need[i] < min_throughput:
                skip.note("MinThroughput")
                continue
            if counts[i] <= 1:
                skip.note("SoleBundle" if counts[i] == 1 else "NoBundles")
                continue
            if candidates is None:
                candidates = OwnedCandidates(ld, shedding_candidates(ld, conf))
            rows, vals = ranked_candidates(ld, i, values, candidates)
            picked = select_largest_first(rows, vals, float(need[i]), at_least_one)
            if picked.size == 0:
                skip.note("NoCandidates")
            details = {
                "usage": float(cur[i]),
                "average": avg,
                "threshold": threshold,
                "required": float(need[i]),
                "brokerThroughput": float(throughput[i]),
            }
            out.extend(self._unloads(ld, i, picked, vals, REASON, details))
        lower_boundary = profile_for(conf["pulsarVersion"]).threshold_lower_boundary  # #17456 (2.11.0)
        if not out and conf["lowerBoundarySheddingEnabled"] and lower_boundary:
            out = self._try_lower_boundary_shedding(ld, usage, conf, threshold, min_throughput, at_least_one, skip)
        return self._finish(out, skip)

    def _try_lower_boundary_shedding(
        self,
        ld: LoadData,
        usage: np.ndarray,
        conf: PulsarConfig,
        threshold: float,
        min_throughput: float,
        at_least_one: bool,
        skip: SkipReasons,
    ) -> list[Unload]:
        """``tryLowerBoundaryShedding`` + ``getMaxUsageBroker`` (the EWMA advances a second time)."""
        brokers = ld.brokers
        cur, avg = self._advance(ld, usage, conf)
        self._stats = self._figures(brokers.ids, cur, avg, threshold)
        self._stats["lowerBoundaryShedding"] = True
        floor = avg - threshold
        counts = ld.bundle_count()
        eligible = (cur > floor) & (counts > 1)
        if not eligible.any():  # "Load data is null or bundle <=1, skipping bundle unload."
            return []
        visit = broker_data_order(ld)  # strict '>' scan over getBrokerData(): the first maximum wins
        top = int(visit[int(np.argmax(np.where(eligible, cur, -np.inf)[visit]))])
        if not (cur < floor).any():  # "No broker is below the lower bound"
            return []
        throughput = float(brokers.msg_throughput[top])
        need = throughput * threshold * LOWER_BOUNDARY_THRESHOLD_MARGIN
        if min_throughput > need:
            skip.note("MinThroughput")
            return []
        rows, vals = ranked_candidates(ld, top, short_term_throughput(ld), shedding_candidates(ld, conf))
        picked = select_largest_first(rows, vals, need, at_least_one)
        if picked.size == 0:
            skip.note("NoCandidates")
        details = {
            "usage": float(cur[top]),
            "average": avg,
            "threshold": threshold,
            "required": need,
            "brokerThroughput": throughput,
        }
        return self._unloads(ld, top, picked, vals, LOWER_BOUNDARY_REASON, details)

    @staticmethod
    def _unloads(
        ld: LoadData, broker: int, picked: np.ndarray, vals: np.ndarray, reason: str, details: dict[str, float]
    ) -> list[Unload]:
        source, names, loads = ld.brokers.ids[broker], ld.bundles.names, vals.tolist()
        return [
            Unload(broker=source, bundle=names[row], reason=reason, details={**details, "bundleLoad": loads[k]})
            for k, row in enumerate(picked.tolist())
        ]

    @staticmethod
    def _figures(ids: list[str], cur: np.ndarray, avg: float, threshold: float) -> dict[str, Any]:
        return {
            "loadAvg": avg,
            "loadStd": population_std(cur),
            "threshold": threshold,
            "brokerAvgResourceUsage": {b: float(v) for b, v in zip(ids, cur.tolist())},
        }

    def on_active_brokers_change(self, active: set[str]) -> None:
        """Drop EWMA entries of brokers no longer active (``onActiveBrokersChange``), so a returning broker
        starts a fresh history."""
        for broker in [b for b in self.broker_avg_resource_usage if b not in active]:
            del self.broker_avg_resource_usage[broker]

    def on_unload_attempt_completed(self, bundles: set[str]) -> None:
        """No pending state."""

    def get_state(self) -> dict[str, Any]:
        out: dict[str, Any] = {"brokerAvgResourceUsage": dict(sorted(self.broker_avg_resource_usage.items()))}
        if self.selected_bundles_cache.get_state():
            out["selectedBundlesCache"] = self.selected_bundles_cache.get_state()
        return out

    def set_state(self, state: dict[str, Any] | None) -> None:
        state = state or {}
        self.broker_avg_resource_usage = {
            str(k): float(v) for k, v in (state.get("brokerAvgResourceUsage") or {}).items()
        }
        self.selected_bundles_cache = SelectedBundlesCache()
        self.selected_bundles_cache.set_state(state.get("selectedBundlesCache"))
