"""``org.apache.pulsar.broker.loadbalance.impl.AvgShedder`` (PIP-364): shedding AND placement.

Shedding (``findBundlesForUnloading``): score = 4-arg weighted max usage x 100 (current value, no
EWMA); brokers sorted by score ascending (stable; ties in ``brokerScoreMap``'s ``HashMap`` order) are
paired lowest with highest, second lowest with second highest, ... (an odd middle broker pairs with itself).
A pair whose score gap is below ``loadBalancerAvgShedderLowThreshold`` resets both brokers' hit counts;
otherwise it is kept and bumps the low count (gap < ``loadBalancerAvgShedderHighThreshold``, also resetting
the high count) or both counts. No pair at all clears every count. A pair fires once either broker's high
count reaches ``loadBalancerAvgShedderHitCountHighThreshold`` or low count reaches
``loadBalancerAvgShedderHitCountLowThreshold``; firing resets both brokers' counts. The high broker then
sheds ``(its msgRate - low's msgRate) * maxUnloadPercentage`` if above ``minUnloadMessage``, else the
throughput gap if above ``minUnloadMessageThroughput`` (``localData`` instantaneous totals), taking short-term
bundles largest first whenever ``0 < traffic <= remaining``. There is no "more than one bundle" guard.

Placement (``selectBroker``): the broker in ``bundleBrokerMap`` for the bundle (planned by a shedding pass, or
an earlier fallback pick) if it is still a candidate, else a uniformly random pick among the candidates sorted
by id (Java: ``crc32(String(new Random().nextInt())) % n``), drawn from the passed generator, which is cached
in ``bundleBrokerMap`` in turn. Every released jar with AvgShedder (3.3.6, 4.0.7, 4.2.4, 5.0.0-M1, checked by the
oracle) keys that map by the bundle's ``BundleData`` object and never clears it; kept here by bundle name (the
``BundleData`` object of a bundle lives as long as the bundle stays in ``LoadData``). (apache/pulsar#26246 on
master keys it by name and clears it per unload attempt; no released line carries it.)

``onActiveBrokersChange`` is the interface's no-op in the source, so hit counts of brokers that left are
kept (and resume if the broker returns) -- mirrored here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lbreplay.errors import UsageError
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.java_hash_map import JavaHashMap
from lbreplay.kernel.java_tim_sort import ComparisonContractViolation, tim_sort
from lbreplay.kernel.load_data import LoadData
from lbreplay.kernel.load_data_order import broker_data_order
from lbreplay.kernel.resource_usage import weighted_max_usage
from lbreplay.kernel.selection import (
    OwnedCandidates,
    ShedderReport,
    SkipReasons,
    population_std,
    ranked_candidates,
    select_fitting,
    shedding_candidates,
    short_term_msg_rate,
    short_term_throughput,
)
from lbreplay.kernel.strategy import Unload, best_draw
from lbreplay.kernel.version_profile import profile_for

HIGH_REASON = "score difference above high threshold"
LOW_REASON = "score difference above low threshold"
# Skip reasons, least to most progress.
# ComparisonContractViolation: 4.0.x only, TimSort threw while sorting the scores (nothing unloaded that tick).
SKIPS = ("NoBrokers", "Balanced", "HitCount", "MinUnload", "NoCandidates", "ComparisonContractViolation")


def java_sort_int_difference(values: list[float]) -> list[int]:
    """Indices of ``values`` in the order Java's ``Stream.sorted`` gives them with the comparator
    ``(a, b) -> (int) (a - b)`` (AvgShedder.calculateScoresAndSort in 4.0.x; 4.0.7 bytecode: dsub, d2i), input in
    ``brokerScoreMap``'s order. Raises :class:`ComparisonContractViolation` where Java's TimSort throws."""

    def cmp(i: int, j: int) -> int:
        d = values[i] - values[j]
        if math.isnan(d):  # NaN: d2i gives 0
            return 0
        return int(max(min(d, 2**31 - 1), -(2**31)))  # d2i truncates toward zero and saturates

    return tim_sort(list(range(len(values))), cmp)


class AvgShedder(ShedderReport):
    """``AvgShedder`` with hit counts and pending targets as threaded state."""

    def __init__(self) -> None:
        super().__init__()
        self.hit_count_high: dict[str, int] = {}
        self.hit_count_low: dict[str, int] = {}
        self.pending_targets: dict[str, str] = {}  # bundle name -> planned destination broker id
        self.score_map = JavaHashMap()  # brokerScoreMap: only its table size carries over between calls
        self.drawn: np.ndarray | None = None  # the rows the last selectBroker drew among (ascending); None: no draw

    # --- shedding ---------------------------------------------------------------------------------
    def find_bundles_for_unloading(self, ld: LoadData, conf: PulsarConfig) -> list[Unload]:
        profile = profile_for(conf["pulsarVersion"])
        if not profile.avg_shedder_available:
            raise UsageError(
                f"config.loadBalancerLoadSheddingStrategy: AvgShedder does not exist in pulsarVersion {profile.name}"
            )
        skip = SkipReasons(SKIPS)
        brokers = ld.brokers
        low_threshold = float(conf["loadBalancerAvgShedderLowThreshold"])
        high_threshold = float(conf["loadBalancerAvgShedderHighThreshold"])
        hit_high = int(conf["loadBalancerAvgShedderHitCountHighThreshold"])
        hit_low = int(conf["loadBalancerAvgShedderHitCountLowThreshold"])

        scores = weighted_max_usage(brokers.usage, brokers.limit, conf) * 100  # calculateScores
        visit = self._score_map_order(brokers.ids, broker_data_order(ld).tolist())
        if profile.avg_shedder_int_comparator:
            try:  # 4.0.x: (int) (a - b), ties in brokerScoreMap's order
                order = [visit[k] for k in java_sort_int_difference(scores[visit].tolist())]
            except ComparisonContractViolation:
                # findBundlesForUnloading throws out of doLoadShedding: no unloads, hit counts untouched
                self._stats = {}
                skip.note("ComparisonContractViolation")
                return self._finish([], skip)
        else:  # comparingDouble (a stable sort), ties in brokerScoreMap's order
            order = [visit[k] for k in np.argsort(scores[visit], kind="stable").tolist()]
        self._stats = {
            "loadAvg": float(np.mean(scores)) / 100 if len(brokers) else 0.0,
            "loadStd": population_std(scores) / 100,
            "scores": {brokers.ids[i]: float(s) for i, s in enumerate(scores.tolist())},
        }
        pairs = self._find_broker_pairs([brokers.ids[i] for i in order], order, scores, low_threshold, high_threshold)
        if not pairs:
            self.hit_count_high.clear()
            self.hit_count_low.clear()
            skip.note("NoBrokers" if len(brokers) == 0 else "Balanced")
            self._stats["pairs"] = []
            return self._finish([], skip)
        self._stats["pairs"] = [[brokers.ids[lo], brokers.ids[hi]] for lo, hi in pairs]

        out: list[Unload] = []
        candidates: OwnedCandidates | None = None
        for lo, hi in pairs:
            lo_id, hi_id = brokers.ids[lo], brokers.ids[hi]
            # computeIfAbsent(..., 0) in the check: absent counts become explicit zeros.
            counts = [
                self.hit_count_high.setdefault(lo_id, 0),
                self.hit_count_high.setdefault(hi_id, 0),
                self.hit_count_low.setdefault(lo_id, 0),
                self.hit_count_low.setdefault(hi_id, 0),
            ]
            fired_high = counts[0] >= hit_high or counts[1] >= hit_high
            fired_low = counts[2] >= hit_low or counts[3] >= hit_low
            if not (fired_high or fired_low):
                skip.note("HitCount")
                continue
            for table in (self.hit_count_high, self.hit_count_low):
                table.pop(lo_id, None)
                table.pop(hi_id, None)
            reason = HIGH_REASON if fired_high else LOW_REASON
            if candidates is None:
                candidates = OwnedCandidates(ld, shedding_candidates(ld, conf))
            out.extend(self._select_for_pair(ld, conf, hi, lo, scores, candidates, reason, skip))
        return self._finish(out, skip)

    def _find_broker_pairs(
        self, ids: list[str], order: list[int], scores: np.ndarray, low: float, high: float
    ) -> list[tuple[int, int]]:
        """``findBrokerPairs``: pair ranks i and n-1-i, updating hit counts; returns (low row, high row)."""
        pairs: list[tuple[int, int]] = []
        i, j = 0, len(order) - 1
        while i <= j:
            lo_row, hi_row = order[i], order[j]
            lo_id, hi_id = ids[i], ids[j]
            gap = float(scores[hi_row]) - float(scores[lo_row])
            if gap < low:
                for table in (self.hit_count_high, self.hit_count_low):
                    table.pop(hi_id, None)
                    table.pop(lo_id, None)
            else:
                pairs.append((lo_row, hi_row))
                self.hit_count_low[lo_id] = self.hit_count_low.get(lo_id, 0) + 1
                self.hit_count_low[hi_id] = self.hit_count_low.get(hi_id, 0) + 1
                if gap < high:
                    self.hit_count_high.pop(hi_id, None)
                    self.hit_count_high.pop(lo_id, None)
                else:
                    self.hit_count_high[lo_id] = self.hit_count_high.get(lo_id, 0) + 1
                    self.hit_count_high[hi_id] = self.hit_count_high.get(hi_id, 0) + 1
            i += 1
            j -= 1
        return pairs

    def _select_for_pair(
        self,
        ld: LoadData,
        conf: PulsarConfig,
        src: int,
        dst: int,
        scores: np.ndarray,
        candidates: OwnedCandidates,
        reason: str,
        skip: SkipReasons,
    ) -> list[Unload]:
        """``selectBundleForUnloading(overloaded=src, underloaded=dst)``."""
        b = ld.brokers
        pct = float(conf["maxUnloadPercentage"])
        msg_need = (float(b.msg_rate[src]) - float(b.msg_rate[dst])) * pct
        thr_need = (float(b.msg_throughput[src]) - float(b.msg_throughput[dst])) * pct
        if msg_need > conf["minUnloadMessage"]:
            need, values, mode = msg_need, short_term_msg_rate(ld), "msgRate"
        elif thr_need > conf["minUnloadMessageThroughput"]:
            need, values, mode = thr_need, short_term_throughput(ld), "msgThroughput"
        else:
            skip.note("MinUnload")
            return []
        rows, vals = ranked_candidates(ld, src, values, candidates)
        picked, _ = select_fitting(vals, need, int_need=False, positive_only=True)
        if picked.size == 0:
            skip.note("NoCandidates")
        src_id, dst_id = b.ids[src], b.ids[dst]
        out: list[Unload] = []
        for k in picked.tolist():
            bundle = ld.bundles.names[int(rows[k])]
            self.pending_targets[bundle] = dst_id
            out.append(
                Unload(
                    broker=src_id,
                    bundle=bundle,
                    reason=f"{reason} ({mode})",
                    destination=dst_id,
                    details={
                        "score": float(scores[src]),
                        "targetScore": float(scores[dst]),
                        "scoreDifference": float(scores[src]) - float(scores[dst]),
                        "required": need,
                        "bundleLoad": float(vals[k]),
                    },
                )
            )
        return out

    # --- placement --------------------------------------------------------------------------------
    def select_broker(
        self, candidates: np.ndarray, bundle: str, ld: LoadData, conf: PulsarConfig, rng: np.random.Generator
    ) -> int:
        """``selectBroker``: the ``bundleBrokerMap`` entry if still a candidate, else a uniform pick, cached."""
        cand = np.sort(np.asarray(candidates, dtype=np.int64))
        self.drawn = None
        target = self.pending_targets.get(bundle)
        if target is not None:
            row = ld.brokers.index(target)
            if row >= 0 and row in cand:
                return int(row)
        if cand.size == 0:
            return -1
        # getExpectedBroker over sorted ids: crc32(new Random().nextInt()) % size, a random draw among them
        row, self.drawn = best_draw(cand, rng)
        self.pending_targets[bundle] = ld.brokers.ids[row]  # bundleBrokerMap.put(bundleToAssign, broker)
        return row

    def _score_map_order(self, ids: list[str], broker_data: list[int] | None = None) -> list[int]:
        """``calculateScoresAndSort``: ``brokerScoreMap`` (a ``HashMap`` field, ``clear()``-ed each call, so its
        table keeps its largest size) gets every broker in ``loadData.getBrokerData()`` order (``broker_data``:
        rows in that ``ConcurrentHashMap``'s order; default: row order); its ``entrySet()`` order
        (:mod:`lbreplay.kernel.java_hash_map`) is the sort's input. Broker rows in that order."""
        self.score_map.clear()
        for i in range(len(ids)) if broker_data is None else broker_data:
            self.score_map.put(ids[i])
        row = {bid: i for i, bid in enumerate(ids)}
        return [row[k] for k in self.score_map.keys()]

    # --- hooks and state --------------------------------------------------------------------------
    def on_active_brokers_change(self, active: set[str]) -> None:
        """The source keeps the interface's no-op: hit counts of departed brokers stay."""

    def on_unload_attempt_completed(self, bundles: set[str]) -> None:
        """The interface's no-op in every released jar: ``bundleBrokerMap`` keeps its entries."""

    def get_state(self) -> dict[str, Any]:
        return {
            "brokerHitCountForHigh": dict(sorted(self.hit_count_high.items())),
            "brokerHitCountForLow": dict(sorted(self.hit_count_low.items())),
            "pendingTargets": dict(sorted(self.pending_targets.items())),
            "brokerScoreMapCapacity": self.score_map.capacity,
        }

    def set_state(self, state: dict[str, Any] | None) -> None:
        state = state or {}
        self.hit_count_high = {str(k): int(v) for k, v in (state.get("brokerHitCountForHigh") or {}).items()}
        self.hit_count_low = {str(k): int(v) for k, v in (state.get("brokerHitCountForLow") or {}).items()}
        self.pending_targets = {str(k): str(v) for k, v in (state.get("pendingTargets") or {}).items()}
        self.score_map = JavaHashMap.cleared(int(state.get("brokerScoreMapCapacity") or 0))
