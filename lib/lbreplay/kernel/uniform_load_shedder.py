"""``org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder`` (#12902, #13915, #21906).

Compares the brokers with the highest and lowest instantaneous message rate / throughput
(``localData`` totals). If ``(maxRate - minRate) * 100 / minRate`` exceeds
``loadBalancerMsgRateDifferenceShedderThreshold`` (rate path, takes precedence) or
``maxThroughput / minThroughput`` exceeds ``loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold``,
it sheds from the max broker (if it owns more than one bundle) ``required = (int) ((max - min) *
maxUnloadPercentage)``, provided ``required >= minUnloadMessage`` (``minUnloadMessageThroughput``):
short-term bundle values are visited largest first and a bundle is taken when ``value <= required``,
then ``required -= (int) value`` (``MutableInt.add``), at most ``maxUnloadBundleNumPerShedding`` bundles.

Current source (apache/pulsar#21906): no ``+ 1000`` slack and no ``value > 0`` filter, so idle bundles of
the max broker are taken too. The running max/min start at -1 and ``Integer.MAX_VALUE`` and use strict
comparisons; a minimum within 1e-6 of 0 is replaced by 1.0.

``profile.uniform_legacy`` (2.9-era source): one max broker among those with more than one bundle and one
min broker, each chosen when its rate OR throughput beats the running value (both values then taken from
it); the gap is halved (``(max - min) / 2``); no minimum gates, no count limit, no 0 -> 1.0 replacement;
the rate path compares ``value <= required + 1000`` while the throughput path has no slack.

Brokers are visited in ``LoadData.getBrokerData()``'s order and bundles of equal value keep
``getBundleDataForLoadShedding()``'s order, as the JVM iterates those maps (:mod:`lbreplay.kernel.load_data_order`):
a tie for the max broker goes to the first in that order.
"""

from __future__ import annotations

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data import LoadData
from lbreplay.kernel.load_data_order import broker_data_order
from lbreplay.kernel.selection import (
    INT_MAX,
    SkipReasons,
    StatelessShedder,
    java_int,
    ranked_candidates,
    select_fitting,
    shedding_candidates,
    short_term_msg_rate,
    short_term_throughput,
)
from lbreplay.kernel.strategy import Unload
from lbreplay.kernel.version_profile import profile_for

EPS = 1e-6  # UniformLoadShedder.EPS
LEGACY_RATE_DELTA = 1000  # the "+ 1000 /* delta */" of the pre-#21906 rate comparison
RATE_REASON = "msgRate difference above threshold"
THROUGHPUT_REASON = "msgThroughput multiplier above threshold"
# Skip reasons, least to most progress.
SKIPS = ("NoBrokers", "Balanced", "SoleBundle", "MinUnload", "NoCandidates")


def _java_div(a: float, b: float) -> float:
    """Java double division (x/0 is +-Infinity or NaN instead of an exception)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(a) / np.float64(b))


class UniformLoadShedder(StatelessShedder):
    """``UniformLoadShedder.findBundlesForUnloading``; stateless across ticks."""

    def find_bundles_for_unloading(self, ld: LoadData, conf: PulsarConfig) -> list[Unload]:
        skip = SkipReasons(SKIPS)
        self._stats = {}
        if len(ld.brokers) == 0:
            skip.note("NoBrokers")
            return self._finish([], skip)
        prof = profile_for(conf["pulsarVersion"])
        if prof.uniform_legacy:
            out = self._legacy(ld, conf, skip)
        elif prof.uniform_coupled_extremes:
            out = self._coupled(ld, conf, skip)
        else:
            out = self._current(ld, conf, skip)
        return self._finish(out, skip)

    # --- current source ---------------------------------------------------------------------------
    def _current(self, ld: LoadData, conf: PulsarConfig, skip: SkipReasons) -> list[Unload]:
        b = ld.brokers
        visit = broker_data_order(ld)  # brokersData.forEach
        rate = b.msg_rate[visit]
        thr = b.msg_throughput[visit]
        # Running max from -1 / min from Integer.MAX_VALUE with strict comparisons: the first extreme
        # in brokerData's order wins and NaN never does.
        rate_max_row = int(visit[int(np.argmax(np.where(np.isnan(rate), -np.inf, rate)))])
        thr_max_row = int(visit[int(np.argmax(np.where(np.isnan(thr), -np.inf, thr)))])
        rate, thr = b.msg_rate, b.msg_throughput
        max_rate = max(float(np.nan_to_num(rate[rate_max_row], nan=-1.0)), -1.0)
        max_thr = max(float(np.nan_to_num(thr[thr_max_row], nan=-1.0)), -1.0)
        min_rate = min(float(np.min(np.where(np.isnan(rate), np.inf, rate))), float(INT_MAX))
        min_thr = min(float(np.min(np.where(np.isnan(thr), np.inf, thr))), float(INT_MAX))
        if -EPS <= min_rate <= EPS:
            min_rate = 1.0
        if -EPS <= min_thr <= EPS:
            min_thr = 1.0
        rate_hit, thr_hit = self._differences(conf, max_rate, min_rate, max_thr, min_thr)
        if not (rate_hit or thr_hit):
            skip.note("Balanced")
            return []
        pct = float(conf["maxUnloadPercentage"])
        if rate_hit:
            src, gap, gate = rate_max_row, max_rate - min_rate, conf["minUnloadMessage"]
            values, reason = short_term_msg_rate(ld), RATE_REASON
        else:
            src, gap, gate = thr_max_row, max_thr - min_thr, conf["minUnloadMessageThroughput"]
            values, reason = short_term_throughput(ld), THROUGHPUT_REASON
        required = java_int(gap * pct)
        self._stats["required"] = required
        if ld.bundle_count()[src] <= 1:
            skip.note("SoleBundle")
            return []
        if required < gate:
            skip.note("MinUnload")
            return []
        rows, vals = ranked_candidates(ld, src, values, shedding_candidates(ld, conf))
        # `bundleLoad <= required + 1000` in 4.0.x (UniformLoadShedder.findBundlesForUnloading, the int `+ 1000`
        # removed on master by apache/pulsar#21906); the int addition wraps, as Java's does.
        slack = profile_for(conf["pulsarVersion"]).uniform_unload_slack
        picked, _ = select_fitting(
            vals, required, int_need=True, slack=slack, limit=int(conf["maxUnloadBundleNumPerShedding"])
        )
        return self._unloads(ld, src, rows, vals, picked, reason, gap, required, skip)

    # --- before apache/pulsar#21025 (2.10.x, 2.11.0-2.11.2, 3.0.0-3.0.1) -----------------------------
    def _coupled(self, ld: LoadData, conf: PulsarConfig, skip: SkipReasons) -> list[Unload]:
        """One overloaded broker, taken when its rate OR its throughput beats the running max (both values then
        read from it), likewise one underloaded broker; both requirements are computed and the gate is
        ``rateRequired >= minUnloadMessage || throughputRequired >= minUnloadMessageThroughput``; the rate path
        compares ``value <= required + 1000``, the throughput path has no slack (UniformLoadShedder of 2.11.0).
        ``uniform_2_10_constants``: brokers owning at most one bundle are left out of the max/min scan and the
        percentage / gates are the constants 0.2, 1000 msg/s and 1 MB/s with no count limit (2.10.5)."""
        b = ld.brokers
        counts = ld.bundle_count()
        constants = profile_for(conf["pulsarVersion"]).uniform_2_10_constants
        rate = b.msg_rate.tolist()
        thr = b.msg_throughput.tolist()
        over, max_rate, max_thr = -1, -1.0, -1.0
        min_rate, min_thr = float(INT_MAX), float(INT_MAX)
        for i in broker_data_order(ld).tolist():  # coupled running max/min in brokerData's order
            if constants and counts[i] <= 1:
                continue
            if rate[i] > max_rate or thr[i] > max_thr:
                over, max_rate, max_thr = i, rate[i], thr[i]
            if rate[i] < min_rate or thr[i] < min_thr:
                min_rate, min_thr = rate[i], thr[i]
        if -EPS <= min_rate <= EPS:
            min_rate = 1.0
        if -EPS <= min_thr <= EPS:
            min_thr = 1.0
        rate_hit, thr_hit = self._differences(conf, max_rate, min_rate, max_thr, min_thr)
        if not (rate_hit or thr_hit) or over < 0:
            skip.note("Balanced")
            return []
        if constants:
            pct, min_msg, min_thr_gate, limit = 0.2, 1000, 1024 * 1024, -1
        else:
            pct, min_msg = float(conf["maxUnloadPercentage"]), int(conf["minUnloadMessage"])
            min_thr_gate, limit = int(conf["minUnloadMessageThroughput"]), int(conf["maxUnloadBundleNumPerShedding"])
        rate_required = java_int((max_rate - min_rate) * pct)
        thr_required = java_int((max_thr - min_thr) * pct)
        if counts[over] <= 1:
            skip.note("SoleBundle")
            return []
        if not (rate_required >= min_msg or thr_required >= min_thr_gate):
            skip.note("MinUnload")
            return []
        if rate_hit:
            gap, required, values, slack, reason = (max_rate - min_rate, rate_required, short_term_msg_rate(ld),
                                                    LEGACY_RATE_DELTA, RATE_REASON)
        else:
            gap, required, values, slack, reason = (max_thr - min_thr, thr_required, short_term_throughput(ld), 0,
                                                    THROUGHPUT_REASON)
        self._stats["required"] = required
        rows, vals = ranked_candidates(ld, over, values, shedding_candidates(ld, conf))
        picked, _ = select_fitting(vals, required, int_need=True, slack=slack, limit=limit)
        return self._unloads(ld, over, rows, vals, picked, reason, gap, required, skip)

    # --- 2.9-era source ---------------------------------------------------------------------------
    def _legacy(self, ld: LoadData, conf: PulsarConfig, skip: SkipReasons) -> list[Unload]:
        b = ld.brokers
        counts = ld.bundle_count()
        rate = b.msg_rate.tolist()
        thr = b.msg_throughput.tolist()
        over, max_rate, max_thr = -1, -1.0, -1.0
        min_rate, min_thr = float(INT_MAX), float(INT_MAX)
        for i in broker_data_order(ld).tolist():  # coupled running max/min in brokerData's order
            if counts[i] > 1 and (rate[i] > max_rate or thr[i] > max_thr):
                over, max_rate, max_thr = i, rate[i], thr[i]
            if rate[i] < min_rate or thr[i] < min_thr:
                min_rate, min_thr = rate[i], thr[i]
        rate_hit, thr_hit = self._differences(conf, max_rate, min_rate, max_thr, min_thr)
        if not (rate_hit or thr_hit):
            skip.note("Balanced")
            return []
        if over < 0:  # Java would fail on the missing broker; nothing to shed
            skip.note("SoleBundle")
            return []
        if rate_hit:
            gap, values, slack, reason = max_rate - min_rate, short_term_msg_rate(ld), LEGACY_RATE_DELTA, RATE_REASON
        else:
            gap, values, slack, reason = max_thr - min_thr, short_term_throughput(ld), 0, THROUGHPUT_REASON
        required = java_int(gap / 2)
        self._stats["required"] = required
        rows, vals = ranked_candidates(ld, over, values, shedding_candidates(ld, conf))
        picked, _ = select_fitting(vals, required, int_need=True, slack=slack)
        return self._unloads(ld, over, rows, vals, picked, reason, gap, required, skip)

    def _differences(
        self, conf: PulsarConfig, max_rate: float, min_rate: float, max_thr: float, min_thr: float
    ) -> tuple[bool, bool]:
        """The rate-difference percentage and throughput multiplier (recorded in the stats) against their
        thresholds (a threshold <= 0 disables its check): (rate hit, throughput hit)."""
        rate_pct = _java_div((max_rate - min_rate) * 100, min_rate)
        thr_mult = _java_div(max_thr, min_thr)
        rate_threshold = conf["loadBalancerMsgRateDifferenceShedderThreshold"]
        thr_threshold = conf["loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold"]
        self._stats = {
            "maxMsgRate": max_rate,
            "minMsgRate": min_rate,
            "maxThroughput": max_thr,
            "minThroughput": min_thr,
            "msgRateDifferencePercentage": rate_pct,
            "msgThroughputDifferenceRate": thr_mult,
        }
        return rate_threshold > 0 and rate_pct > rate_threshold, thr_threshold > 0 and thr_mult > thr_threshold

    @staticmethod
    def _unloads(
        ld: LoadData,
        src: int,
        rows: np.ndarray,
        vals: np.ndarray,
        picked: np.ndarray,
        reason: str,
        gap: float,
        required: int,
        skip: SkipReasons,
    ) -> list[Unload]:
        if picked.size == 0:
            skip.note("NoCandidates")
        return [
            Unload(
                broker=ld.brokers.ids[src],
                bundle=ld.bundles.names[int(rows[k])],
                reason=reason,
                details={"difference": float(gap), "required": float(required), "bundleLoad": float(vals[k])},
            )
            for k in picked.tolist()
        ]
