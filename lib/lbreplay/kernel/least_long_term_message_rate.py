"""``LeastLongTermMessageRate``: the default modular placement strategy (PULSAR-LB-SPEC.md §4.2).

Mirrors ``org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate`` (``getScore`` / ``selectBroker``):
a broker's score is the long-term message rate of its ``TimeAverageBrokerData`` plus the long-term rates of the
bundles preallocated to it; a broker whose usage is above ``loadBalancerBrokerOverloadedThresholdPercentage``
scores +inf. The broker is drawn uniformly among the least scores (Pulsar: ``ThreadLocalRandom``; here the
``rng`` passed in, drawn only when more than one broker ties).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data import DEFAULT_MESSAGE_DATA, RATE_IN, RATE_OUT, LoadData, cached, preallocation_sums
from lbreplay.kernel.resource_usage import overload_check_usage


def preallocated_long_term_rate(ld: LoadData) -> np.ndarray:
    """Per broker row: sum of ``longTermData`` msgRateIn + msgRateOut over its ``preallocatedBundleData``."""
    b = ld.bundles
    nb = len(ld.brokers)
    rows = np.flatnonzero(b.preallocated_to >= 0)
    if rows.size == 0:
        return np.zeros(nb)
    lt = np.where(b.has_bundle_data[rows, None], b.long[rows], DEFAULT_MESSAGE_DATA)
    rate = lt[:, RATE_IN] + lt[:, RATE_OUT]
    return np.bincount(b.preallocated_to[rows], weights=rate, minlength=nb)


def time_average_long_term_rate(ld: LoadData) -> np.ndarray:
    """``TimeAverageBrokerData.longTermMsgRateIn + longTermMsgRateOut`` per broker row: the stored TABD, else
    ``TimeAverageBrokerData.reset`` over the broker's reported bundles (in and out summed separately, as Java
    does; bundles without BundleData count the default stats)."""
    nb = len(ld.brokers)
    if ld.tabd is not None:
        long = ld.tabd[1]
        return long[:, RATE_IN] + long[:, RATE_OUT]
    b = ld.bundles
    rows = np.flatnonzero(b.owner >= 0)
    has = b.has_bundle_data[rows]
    own = b.owner[rows]
    rate_in = np.bincount(own, weights=np.where(has, b.long[rows, RATE_IN], DEFAULT_MESSAGE_DATA[RATE_IN]), minlength=nb)
    rate_out = np.bincount(own, weights=np.where(has, b.long[rows, RATE_OUT], DEFAULT_MESSAGE_DATA[RATE_OUT]), minlength=nb)
    return rate_in + rate_out


def long_term_message_rate_scores(ld: LoadData, conf: PulsarConfig) -> np.ndarray:
    """``LeastLongTermMessageRate.getScore`` for every broker row.

    Usage above the overload threshold (strict ``>``) -> +inf; the usage function is the weighted max since
    PIP-358 (4.0), ``getMaxResourceUsage()`` before (``resource_usage.overload_check_usage``).
    Inside a ``load_data.derived_cache`` block the scores and their parts are computed once (the preallocation
    part again after each preallocation).
    """
    br = ld.brokers
    if "_derived" not in ld.__dict__:  # no derived_cache block: compute directly
        usage = overload_check_usage(br.usage, br.limit, conf)
        score = preallocated_long_term_rate(ld) + time_average_long_term_rate(ld)
        return np.where(usage > conf.overload_threshold, np.inf, score)

    def parts() -> tuple[np.ndarray, np.ndarray]:
        usage = cached(ld, "broker", "overload_usage", lambda: overload_check_usage(br.usage, br.limit, conf), conf)
        return usage > conf.overload_threshold, time_average_long_term_rate(ld)

    def scores() -> np.ndarray:
        overloaded, tabd = cached(ld, "bundle", ("lltmr_parts", id(ld.tabd)), parts, conf, ld.tabd)
        # preallocation_sums(ld).rate == preallocated_long_term_rate(ld)
        return np.where(overloaded, np.inf, preallocation_sums(ld).rate + tabd)

    return cached(ld, "prealloc", "lltmr_scores", scores, conf)


def least_score_rows(candidates: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The ``bestBrokers`` loop: all candidates whose score equals the least (+inf ties too; NaN never matches);
    every candidate when none qualifies."""
    cand = np.asarray(candidates, dtype=np.int64)
    if cand.size == 0:
        return cand
    s = scores[cand]
    least = s.min()
    if least == least:  # no NaN among the candidates' scores
        return cand[s == least]
    valid = ~np.isnan(s)
    return cand[valid & (s == s[valid].min())] if valid.any() else cand


def pick_least(candidates: np.ndarray, scores: np.ndarray, rng: np.random.Generator) -> int:
    """:func:`least_score_rows`, then a uniform pick (drawn only when several tie). -1 for no candidates."""
    best = least_score_rows(candidates, scores)
    if best.size <= 1:
        return int(best[0]) if best.size else -1
    return int(best[rng.integers(best.size)])


class LeastLongTermMessageRate:
    """``ModularLoadManagerStrategy`` without state of its own (it reads preallocations and TABD from LoadData)."""

    def __init__(self) -> None:
        self.last_scores: np.ndarray = np.zeros(0)  # getScore per broker row at the last call

    def select_broker(
        self, candidates: np.ndarray, bundle: str, ld: LoadData, conf: PulsarConfig, rng: np.random.Generator
    ) -> int:
        """``selectBroker``: a broker row among ``candidates`` (sorted rows) with the least score; -1 if none.

        Inside a ``load_data.derived_cache`` block the least-score set of a candidate array is kept until the next
        preallocation (the scores do not change before), so only the uniform draw is repeated.
        """
        scores = long_term_message_rate_scores(ld, conf)
        self.last_scores = scores
        cand = np.asarray(candidates, dtype=np.int64)
        if "_derived" not in ld.__dict__:
            return pick_least(cand, scores, rng)
        best = cached(ld, "prealloc", "lltmr_best", lambda: least_score_rows(cand, scores), scores, cand)
        if best.size <= 1:
            return int(best[0]) if best.size else -1
        return int(best[rng.integers(best.size)])

    def on_active_brokers_change(self, active: set[str]) -> None:
        """No per-broker state to prune."""

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        """Stateless: nothing to restore."""
