"""Load of arbitrary bundle ranges from observed load on the hash ring (the topic-hash-to-bundle range join).

Positions are "global ring" coordinates ``namespace_index * 2**32 + hash`` so every namespace's ring lives in
one sorted array and one ``searchsorted`` serves all bundles of all namespaces at once.

* Topic-level load (``topic_load``): each topic is a point mass at ``crc32(topic)``
  (``NamespaceBundleFactory.getBundle``); a bundle's load is the sum of its topics' stats.
* Bundle-level load (``bundle_load`` only): each observed bundle's stats are spread uniformly over its
  range, so a replay bundle receives the share of every observed bundle proportional to the overlap of
  their ranges (documented apportioning rule: uniform hash density inside an observed bundle).
* Both (a recording: the brokers' reports and ``collect``'s per-topic stats): each observed bundle's stats are
  spread over its range as its topics are (:class:`TopicWeightedLoad`): a bundle that exists in the recording
  keeps its recorded load exactly, and a split child of it receives the share of the parent's load its topics
  carry in the topic stats (each column by that column's topic sums; uniform where the parent's topics carry
  none of it).
"""

from __future__ import annotations

import numpy as np

RING = np.int64(1) << np.int64(32)
LAST = 0xFFFFFFFF


def global_positions(ns_index: np.ndarray, value: np.ndarray) -> np.ndarray:
    return ns_index.astype(np.int64) * RING + value.astype(np.int64)


def bundle_span(ns_index: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Half-open global [start, end) of bundles; the last bundle's inclusive 0xffffffff end becomes 2**32."""
    up = np.where(upper == LAST, RING, upper.astype(np.int64))
    return global_positions(ns_index, lower), ns_index.astype(np.int64) * RING + up


def _prefix_sums(values: np.ndarray) -> np.ndarray:
    """(T + 1, k): a zero row, then the running sums of ``values`` down its rows."""
    cum = np.empty((values.shape[0] + 1, values.shape[1]))
    cum[0] = 0.0
    np.cumsum(values, axis=0, out=cum[1:])
    return cum


class PointLoad:
    """Point masses (topics) sorted by global position; ``values`` is (T, k)."""

    def __init__(self, positions: np.ndarray, values: np.ndarray):
        if positions.size < 2 or bool(np.all(positions[1:] >= positions[:-1])):  # the tick stream's are sorted
            self.positions, self.order = positions, None
        else:
            order = np.argsort(positions, kind="stable")
            self.positions, self.order = positions[order], order
        self.cum = _prefix_sums(values if self.order is None else values[self.order])

    def with_values(self, values: np.ndarray) -> "PointLoad":
        """Same positions (topics), new per-tick values: reuses the sort."""
        new = object.__new__(PointLoad)
        new.positions, new.order = self.positions, self.order
        new.cum = _prefix_sums(values if self.order is None else values[self.order])
        return new

    def range_sum(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        a = np.searchsorted(self.positions, start, side="left")
        b = np.searchsorted(self.positions, end, side="left")
        return self.cum[b] - self.cum[a]


class IntervalLoad:
    """Values spread uniformly over disjoint half-open global intervals [start, end)."""

    def __init__(self, start: np.ndarray, end: np.ndarray, values: np.ndarray):
        order = np.argsort(start, kind="stable")
        self.start = start[order]
        self.end = end[order]
        self.values = values[order]
        self.cum = np.vstack([np.zeros((1, values.shape[1])), np.cumsum(self.values, axis=0)])

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.start, x, side="right") - 1  # interval starting at or before x
        k_clip = np.clip(k, 0, len(self.start) - 1)
        length = (self.end[k_clip] - self.start[k_clip]).astype(np.float64)
        frac = np.clip((x - self.start[k_clip]).astype(np.float64) / np.maximum(length, 1.0), 0.0, 1.0)
        out = self.cum[k_clip] + self.values[k_clip] * frac[:, None]
        out[k < 0] = 0.0
        return out

    def range_sum(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        if len(self.start) == 0:
            return np.zeros((len(start), self.values.shape[1]))
        return self._cdf(end) - self._cdf(start)


def finest(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask of the intervals containing no other one. Bundle ranges are nested or disjoint
    (``NamespaceBundleFactory#splitBundles``); a recording's held reports may list a split parent (an older report)
    beside its children (a newer one): the children are the bundles that exist, and a child missing from every
    report owns no topics. Disjoint intervals keep all (no copy of the work when nothing overlaps)."""
    keep = np.ones(len(start), dtype=bool)
    if len(start) < 2:
        return keep
    order = np.lexsort((-end, start))  # by start, the widest first
    s, e = start[order], end[order]
    if bool(np.all(e[:-1] <= s[1:])):
        return keep
    contains_next = np.zeros(len(s), dtype=bool)
    contains_next[:-1] = s[1:] < e[:-1]  # nested: the next interval starts inside this one
    keep[order[contains_next]] = False
    return keep


class TopicWeightedLoad(IntervalLoad):
    """Observed bundles' values over disjoint intervals, spread inside each interval as the ``topics``' point
    masses are (column by column); uniformly where an interval's topics sum to nothing in a column."""

    def __init__(self, start: np.ndarray, end: np.ndarray, values: np.ndarray, topics: PointLoad):
        super().__init__(start, end, values)
        self.topics = topics

    def _mass(self, x: np.ndarray) -> np.ndarray:
        """(len(x), k): the topics' sums at positions < x."""
        return self.topics.cum[np.searchsorted(self.topics.positions, x, side="left")]

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.start, x, side="right") - 1
        k_clip = np.clip(k, 0, len(self.start) - 1)
        lo, hi = self.start[k_clip], self.end[k_clip]
        length = (hi - lo).astype(np.float64)
        uniform = np.clip((x - lo).astype(np.float64) / np.maximum(length, 1.0), 0.0, 1.0)[:, None]
        below, total = self._mass(np.minimum(np.maximum(x, lo), hi)) - self._mass(lo), self._mass(hi) - self._mass(lo)
        frac = np.where(total > 0, below / np.where(total > 0, total, 1.0), uniform)
        out = self.cum[k_clip] + self.values[k_clip] * frac
        out[k < 0] = 0.0
        return out
