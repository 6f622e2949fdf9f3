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
from lbreplay.kernel.load_data import (
    DEFAULT_MESSAGE_DATA,
    RATE_IN,
    RATE_OUT,
    LoadData,
    PreallocationFollower,
    cached,
)
from lbreplay.kernel.preallocated_bundle_data import preallocation_sums
from lbreplay.kernel.resource_usage import overload_check_usage
from lbreplay.kernel.strategy import best_draw


def preallocated_long_term_rate(ld: LoadData) -> np.ndarray:
    """Per broker row: sum of ``longTermData`` msgRateIn + msgRateOut over its ``preallocatedBundleData``."""
    b = ld.bundles
    nb = len(ld.brokers)
    holders, rows = ld.preallocated_pairs()  # a bundle in two brokers' maps counts for both
    if rows.size == 0:
        return np.zeros(nb)
    lt = np.where(b.has_bundle_data[rows, None], b.long[rows], DEFAULT_MESSAGE_DATA)
    rate = lt[:, RATE_IN] + lt[:, RATE_OUT]
    return np.bincount(holders, weights=rate, minlength=nb)


def time_average_long_term_rate(ld: LoadData) -> np.ndarray:
    """``TimeAverageBrokerData.longTermMsgRateIn + longTermMsgRateOut`` per broker row: the stored TABD, else
    ``TimeAverageBrokerData.reset`` over the broker's reported bundles (in and out summed separately, as Java
    does; bundles without BundleData count the default stats)."""
    nb = len(ld.brokers)
    if ld.tabd is not None:
        long = ld.tabd[1]
        return long[:, RATE_IN] + long[:, RATE_OUT]
    b = ld.bundles
    has = b.has_bundle_data
    rate_in = np.where(has, b.long[:, RATE_IN], DEFAULT_MESSAGE_DATA[RATE_IN])
    rate_out = np.where(has, b.long[:, RATE_OUT], DEFAULT_MESSAGE_DATA[RATE_OUT])
    if ld.membership is not None:  # each broker's lastStats keys (a bundle in two brokers' maps counts twice)
        own, rows = ld.reported_pairs()
        rate_in, rate_out = rate_in[rows], rate_out[rows]
    else:
        own = b.owner
        reported = own >= 0
        if not reported.all():  # bincount over the reported rows only, in row order
            own, rate_in, rate_out = own[reported], rate_in[reported], rate_out[reported]
    return np.bincount(own, weights=rate_in, minlength=nb) + np.bincount(own, weights=rate_out, minlength=nb)


def long_term_message_rate_scores(ld: LoadData, conf: PulsarConfig) -> np.ndarray:
    """``LeastLongTermMessageRate.getScore`` for every broker row.

    Usage above the overload threshold (strict ``>``) -> +inf; the usage function is the weighted max since
    PIP-358 (4.0), ``getMaxResourceUsage()`` before (``resource_usage.overload_check_usage``).
    Inside a ``load_data.derived_cache`` block the scores and their parts are computed once and each preallocation
    updates the scores of the two brokers involved (:class:`_Scores`).
    """
    br = ld.brokers
    if "_derived" not in ld.__dict__:  # no derived_cache block: compute directly
        usage = overload_check_usage(br.usage, br.limit, conf)
        score = preallocated_long_term_rate(ld) + time_average_long_term_rate(ld)
        return np.where(usage > conf.overload_threshold, np.inf, score)
    return _scorer(ld, conf).scores


def _scorer(ld: LoadData, conf: PulsarConfig) -> "_Scores":
    """The :class:`_Scores` of ``ld`` in the open ``derived_cache`` block."""
    return cached(ld, "prealloc", "lltmr_scores", lambda: _Scores(ld, conf), conf)


class _Scores(PreallocationFollower):
    """The scores of :func:`long_term_message_rate_scores` in a ``derived_cache`` block: ``inf`` for an overloaded
    broker, else its preallocated long-term rate (``preallocation_sums``) plus its TABD long-term rate. A
    preallocation re-scores the two brokers involved, each with the same double addition, into a new array (arrays
    handed out earlier keep their values). The least-score set of a candidate array is kept until then."""

    __slots__ = ("scores", "_overloaded", "_tabd", "_sums", "_best")

    def __init__(self, ld: LoadData, conf: PulsarConfig) -> None:
        br = ld.brokers

        def parts() -> tuple[np.ndarray, np.ndarray]:
            usage = cached(ld, "broker", "overload_usage", lambda: overload_check_usage(br.usage, br.limit, conf), conf)
            return usage > conf.overload_threshold, time_average_long_term_rate(ld)

        overloaded, tabd = cached(ld, "bundle", ("lltmr_parts", id(ld.tabd)), parts, conf, ld.tabd)
        self._sums = preallocation_sums(ld)  # preallocation_sums(ld).rate == preallocated_long_term_rate(ld)
        self.scores = np.where(overloaded, np.inf, self._sums.rate + tabd)
        self._overloaded: list[bool] = overloaded.tolist()
        self._tabd: list[float] = tabd.tolist()
        self._best: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(candidates) -> (candidates, least rows)

    def least(self, candidates: np.ndarray) -> np.ndarray:
        """:func:`least_score_rows` of ``candidates`` (an int64 row array) under the current scores."""
        got = self._best.get(id(candidates))
        if got is not None and got[0] is candidates:
            return got[1]
        best = least_score_rows(candidates, self.scores)
        self._best[id(candidates)] = (candidates, best)
        return best

    def move(self, ld: LoadData, row: int, old: int, new: int) -> None:
        scores = self.scores.copy()
        for broker in (old, new):
            if broker >= 0:
                scores[broker] = np.inf if self._overloaded[broker] else self._sums.rate_list[broker] + self._tabd[broker]
        self.scores = scores
        self._best = {}


def least_score_rows(candidates: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The ``bestBrokers`` loop: all candidates whose score equals the least (+inf ties too; NaN never matches);
    every candidate when none qualifies."""
    cand = np.asarray(candidates, dtype=np.int64)
    if cand.size == 0:
        return cand
    s = scores[cand]
    least = s[s.argmin()]  # the first NaN if there is one
    if least == least:  # no NaN among the candidates' scores
        return cand[s == least]
    valid = ~np.isnan(s)
    return cand[valid & (s == s[valid].min())] if valid.any() else cand


class LeastLongTermMessageRate:
    """``ModularLoadManagerStrategy`` without state of its own (it reads preallocations and TABD from LoadData)."""

    def __init__(self) -> None:
        self.last_scores: np.ndarray = np.zeros(0)  # getScore per broker row at the last call
        self.drawn: np.ndarray | None = None  # the bestBrokers the last call drew among (ascending); None: no draw

    def select_broker(
        self, candidates: np.ndarray, bundle: str, ld: LoadData, conf: PulsarConfig, rng: np.random.Generator
    ) -> int:
        """``selectBroker``: a broker row among ``candidates`` (any order) with the least score; -1 if none.

        Inside a ``load_data.derived_cache`` block the least-score set of a candidate array is kept until the next
        preallocation (the scores do not change before), so only the uniform draw is repeated.
        """
        cand = np.asarray(candidates, dtype=np.int64)
        if "_derived" not in ld.__dict__:
            self.last_scores = long_term_message_rate_scores(ld, conf)
            best = least_score_rows(cand, self.last_scores)
        else:
            scorer = _scorer(ld, conf)
            self.last_scores = scorer.scores
            best = scorer.least(cand)
        row, self.drawn = best_draw(best, rng)  # bestBrokers.get(ThreadLocalRandom...nextInt(size))
        return row

    def on_active_brokers_change(self, active: set[str]) -> None:
        """No per-broker state to prune."""

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        """Stateless: nothing to restore."""
