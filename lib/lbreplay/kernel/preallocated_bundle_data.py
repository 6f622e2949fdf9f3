"""The leader's per-broker sums over ``BrokerData.getPreallocatedBundleData()`` (preallocated bundles' long-term
rates and topics), kept exact while placement preallocates bundle after bundle in one tick.

Read by ``LeastLongTermMessageRate.getScore`` and the max-topics filter of
``ModularLoadManagerImpl.selectBrokerForAssignment``.
"""

from __future__ import annotations

import bisect

import numpy as np

from lbreplay.kernel.load_data import (
    DEFAULT_MESSAGE_DATA,
    RATE_IN,
    RATE_OUT,
    Bundles,
    DerivedCache,
    LoadData,
    PreallocationFollower,
    cached,
)


class PreallocationSums(PreallocationFollower):
    """Per broker row, sums over its ``preallocatedBundleData``: ``longTermData`` msgRateIn + msgRateOut (what
    ``LeastLongTermMessageRate.getScore`` adds) and ``BundleData.topics`` (what
    ``filterBrokersWithLargeTopicCount`` adds).

    Built like ``np.bincount`` over the preallocated rows in row order; :meth:`move` keeps it exact after one
    bundle changes broker by re-folding only the two brokers involved, in the same row order. ``rate_list`` and
    ``total_topics_list`` hold the same figures as Python numbers, for followers that read one broker at a time.
    """

    __slots__ = ("rate", "topics", "total_topics", "rate_list", "topics_list", "total_topics_list", "_rows", "_row_rate")

    def __init__(self, ld: LoadData) -> None:
        b = ld.bundles
        nb = len(ld.brokers)
        holders, rows = ld.preallocated_pairs()
        self._rows: dict[int, list[int]] = {}
        for row, holder in zip(rows.tolist(), holders.tolist()):
            self._rows.setdefault(holder, []).append(row)
        self.topics = np.zeros(nb, dtype=np.int64)
        self.rate: np.ndarray
        if rows.size == 0:
            self.rate = np.zeros(nb)
        else:
            lt = np.where(b.has_bundle_data[rows, None], b.long[rows], DEFAULT_MESSAGE_DATA)
            self.rate = np.bincount(holders, weights=lt[:, RATE_IN] + lt[:, RATE_OUT], minlength=nb)
            np.add.at(self.topics, holders, b.bundle_topics[rows])
        # reported topics plus preallocated ones (filterBrokersWithLargeTopicCount)
        self.total_topics = self.topics + np.asarray(ld.brokers.num_topics, dtype=np.int64)
        self.rate_list: list[float] = self.rate.tolist()
        self.topics_list: list[int] = self.topics.tolist()
        self.total_topics_list: list[int] = self.total_topics.tolist()
        self._row_rate: dict[int, float] = {}  # _long_term_rate per row, read once (rows do not change in a block)

    def move(self, ld: LoadData, row: int, old: int, new: int) -> None:
        """Bundle ``row`` left broker ``old`` and is now preallocated to ``new`` (-1: none)."""
        if old == new:
            return
        b = ld.bundles
        topics = b.bundle_topics.item(row)
        row_rate = self._row_rate
        if row not in row_rate:
            row_rate[row] = _long_term_rate(b, row)
        for broker, sign in ((old, -1), (new, 1)):
            if broker < 0:
                continue
            rows = self._rows.setdefault(broker, [])
            if sign > 0:
                bisect.insort(rows, row)
            else:
                rows.remove(row)
            total = 0.0
            for r in rows:  # np.bincount's order: rows ascending, starting from 0.0
                rate = row_rate.get(r)
                if rate is None:
                    rate = row_rate[r] = _long_term_rate(b, r)
                total += rate
            self.rate[broker] = self.rate_list[broker] = total
            self.topics[broker] = self.topics_list[broker] = self.topics_list[broker] + sign * topics
            self.total_topics[broker] = self.total_topics_list[broker] = self.total_topics_list[broker] + sign * topics


def _long_term_rate(b: Bundles, row: int) -> float:
    """``longTermData.msgRateIn + msgRateOut`` of a row (the default data without BundleData)."""
    if b.has_bundle_data.item(row):
        return b.long.item(row, RATE_IN) + b.long.item(row, RATE_OUT)
    return float(DEFAULT_MESSAGE_DATA[RATE_IN]) + float(DEFAULT_MESSAGE_DATA[RATE_OUT])


def preallocation_sums(ld: LoadData) -> PreallocationSums:
    """:class:`PreallocationSums` of ``ld`` (kept in a ``derived_cache`` block and updated by :func:`note_preallocation`)."""
    return cached(ld, "prealloc", "sums", lambda: PreallocationSums(ld))


def note_preallocation(ld: LoadData, row: int, old: int) -> None:
    """After ``ld.bundles.preallocated_to[row]`` changed from ``old``: move the cached sums and the other
    :class:`PreallocationFollower` values (in the order they were cached) and drop every other value derived from
    preallocations."""
    cache: DerivedCache | None = ld.__dict__.get("_derived")
    if cache is None:
        return
    entries = cache.group(ld, "prealloc")
    followers = cache.followers = [(k, v) for k, v in cache.followers if entries.get(k) is v]
    entries.clear()
    new = ld.bundles.preallocated_to.item(row)
    for key, value in followers:
        value.move(ld, row, old, new)
        entries[key] = value
