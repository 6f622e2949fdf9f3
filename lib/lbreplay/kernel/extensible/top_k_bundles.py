"""Top-K bundle selection of the extensible load manager and the ``TopBundlesLoadData`` store, columnar.

Mirrors ``extensions.models.TopKBundles`` (``update``, ``partitionSort``) and
``NamespaceBundleStats.compareTo`` (pulsar-common) as read at 028ed6295a (newest) and b1ce2d4b (first version);
ported tests: ``TopKBundlesTest``.

``NamespaceBundleStats.compareTo`` is lexicographic with dead-bands (two values are equal unless they differ by
more than the band): msgThroughputIn (1e5 B/s), msgThroughputOut (1e5), msgRateIn+msgRateOut (100),
topics+consumerCount+producerCount (500), cacheSize (100000). It is not transitive, so the quickselect and the
final sort are ported step by step: the result depends on the input order, which in Pulsar is the order of the
broker's ``PulsarStats.bundleStats`` (a ``ConcurrentHashMap``, ``map_order.bundle_stats_order``). We feed
bundles in sorted name order (row order) instead: only the replay's own reports use this (an audit reads the
recorded lists, ``decide`` and the oracle take the lists as given).

**List order** (``order``): the newest ``TopKBundles`` (028ed629) writes the top-K list reversed, the smallest
of the top-K first (``"ascending"``, the default); the first version (b1ce2d4b) wrote the highest first
(``"descending"``). TransferShedder walks the list in this order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data import RATE_IN, RATE_OUT, THR_IN, THR_OUT, is_system_service_namespace
from lbreplay.kernel.naming import split_bundle_name
from lbreplay.kernel.version_profile import profile_for

TopKOrder = Literal["ascending", "descending"]

# NamespaceBundleStats dead-bands
THROUGHPUT_DIFFERENCE_THRESHOLD = 1e5
MSG_RATE_DIFFERENCE_THRESHOLD = 100.0
TOPIC_CONNECTION_DIFFERENCE_THRESHOLD = 500
CACHE_SIZE_DIFFERENCE_THRESHOLD = 100000

# A comparison key: (msgThroughputIn, msgThroughputOut, msgRateIn+msgRateOut, topics+consumers+producers, cacheSize)
StatsKey = tuple[float, float, float, int, int]


class HasNamespacePolicies(Protocol):
    """The part of ``lbreplay.kernel.policies.NamespacePolicies`` the extensible kernel uses
    (``IsolationPoliciesHelper.hasIsolationPolicy`` or ``AntiAffinityGroupPolicyHelper.hasAntiAffinityGroupPolicy``)."""

    def has_isolation_or_anti_affinity(self, namespace: str) -> bool: ...


def _java_compare(a: float, b: float) -> int:
    return -1 if a < b else (1 if a > b else 0)


def compare_bundle_stats(a: StatsKey, b: StatsKey) -> int:
    """``NamespaceBundleStats.compareTo``: dead-banded lexicographic comparison (-1, 0, 1)."""
    if abs(a[0] - b[0]) > THROUGHPUT_DIFFERENCE_THRESHOLD:
        return _java_compare(a[0], b[0])
    if abs(a[1] - b[1]) > THROUGHPUT_DIFFERENCE_THRESHOLD:
        return _java_compare(a[1], b[1])
    if abs(a[2] - b[2]) > MSG_RATE_DIFFERENCE_THRESHOLD:
        return _java_compare(a[2], b[2])
    if abs(a[3] - b[3]) > TOPIC_CONNECTION_DIFFERENCE_THRESHOLD:
        return _java_compare(a[3], b[3])
    if abs(a[4] - b[4]) > CACHE_SIZE_DIFFERENCE_THRESHOLD:
        return _java_compare(a[4], b[4])
    return 0


def stats_keys(
    stats: np.ndarray,
    topics: np.ndarray,
    consumer_count: np.ndarray,
    producer_count: np.ndarray,
    cache_size: np.ndarray,
) -> list[StatsKey]:
    """Comparison keys per row of a (N, 4) stats array (``load_data.MESSAGE_FIELDS`` order) plus the counters."""
    s = np.asarray(stats, dtype=np.float64).reshape(-1, 4)
    conn = (np.asarray(topics, dtype=np.int64) + np.asarray(consumer_count, dtype=np.int64)
            + np.asarray(producer_count, dtype=np.int64))
    return list(zip(s[:, THR_IN].tolist(), s[:, THR_OUT].tolist(), (s[:, RATE_IN] + s[:, RATE_OUT]).tolist(),
                    conn.tolist(), np.asarray(cache_size, dtype=np.int64).tolist()))


def java_small_sort(arr: list[int], cmp: Callable[[int, int], int]) -> None:
    """``Collections.sort`` (TimSort) on a short list, in place: ``countRunAndMakeAscending`` + ``binarySort``.

    This is exactly TimSort's path below ``MIN_MERGE`` (32 elements); longer lists use the same binary
    insertion here, which gives the same stable result whenever ``cmp`` is a consistent order.
    """
    n = len(arr)
    if n < 2:
        return
    run_hi = 1
    if cmp(arr[run_hi], arr[0]) < 0:
        run_hi += 1
        while run_hi < n and cmp(arr[run_hi], arr[run_hi - 1]) < 0:
            run_hi += 1
        arr[:run_hi] = arr[:run_hi][::-1]
    else:
        run_hi += 1
        while run_hi < n and cmp(arr[run_hi], arr[run_hi - 1]) >= 0:
            run_hi += 1
    for start in range(run_hi, n):
        pivot = arr[start]
        left, right = 0, start
        while left < right:
            mid = (left + right) >> 1
            if cmp(pivot, arr[mid]) < 0:
                right = mid
            else:
                left = mid + 1
        arr[left + 1 : start + 1] = arr[left:start]
        arr[left] = pivot


def partition_sort(arr: list[int], k: int, cmp: Callable[[int, int], int]) -> None:
    """``TopKBundles.partitionSort``: 3-way quickselect so that ``arr[:k]`` holds the k largest, sorted descending.

    ``cmp(a, b)`` is ``a.compareTo(b)`` on the items of ``arr``; the pivot is the last item of the range.
    """
    start, end, target = 0, len(arr) - 1, k - 1
    while start < end:
        lo, hi, mid = start, end, start
        pivot = arr[hi]
        while mid <= hi:
            c = cmp(pivot, arr[mid])
            if c < 0:
                arr[lo], arr[mid] = arr[mid], arr[lo]
                lo += 1
                mid += 1
            elif c > 0:
                arr[mid], arr[hi] = arr[hi], arr[mid]
                hi -= 1
            else:
                mid += 1
        if lo <= target < mid:
            end = lo
            break
        if target < lo:
            end = lo - 1
        else:
            start = mid
    head = arr[:max(end, 0)]
    java_small_sort(head, lambda a, b: cmp(b, a))
    arr[:len(head)] = head


def top_k_bundles(
    names: Sequence[str],
    stats: np.ndarray,
    topics: np.ndarray,
    consumer_count: np.ndarray,
    producer_count: np.ndarray,
    cache_size: np.ndarray,
    k: int,
    conf: PulsarConfig,
    policies: HasNamespacePolicies | None = None,
    order: TopKOrder = "ascending",
) -> np.ndarray:
    """``TopKBundles.update(bundleStats, topk)``: indices (into ``names``) of the reported top-K list, in list order.

    Excludes system-service namespaces (``NamespaceService.isSystemServiceNamespace``), bundles whose namespace
    has isolation or anti-affinity policies unless ``loadBalancerSheddingBundlesWithPoliciesEnabled``, and
    ``loadBalancerSheddingExcludedNamespaces``. ``k`` is ``loadBalancerMaxNumberOfBundlesInBundleLoadReport``;
    ``k <= 0`` reports nothing. Visiting order of the input is the given order (pass bundles sorted by name).
    """
    with_policies = bool(conf["loadBalancerSheddingBundlesWithPoliciesEnabled"])
    profile = profile_for(conf["pulsarVersion"])
    pip380 = profile.shedding_excluded_namespaces  # the key exists since 4.1
    excluded = set(conf["loadBalancerSheddingExcludedNamespaces"] or ()) if pip380 else set()
    keep: list[int] = []
    for i, name in enumerate(names):
        ns, _ = split_bundle_name(name)
        if is_system_service_namespace(ns, profile.sla_pattern_v2):
            continue
        if not with_policies and policies is not None and policies.has_isolation_or_anti_affinity(ns):
            continue
        if ns in excluded:
            continue
        keep.append(i)
    if not keep or k <= 0:
        return np.zeros(0, dtype=np.int64)
    keys = stats_keys(stats, topics, consumer_count, producer_count, cache_size)
    k = min(k, len(keep))
    partition_sort(keep, k, lambda a, b: compare_bundle_stats(keys[a], keys[b]))
    top = keep[:k]
    if order == "ascending":
        top = top[::-1]
    return np.asarray(top, dtype=np.int64)


@dataclass
class TopBundlesLoadData:
    """The top-bundles store (``loadbalancer-top-bundles-load-data``): each broker's reported list, flattened.

    Broker row ``i`` owns entries ``offsets[i]:offsets[i+1]`` in its reported list order; ``present[i]`` says
    whether the broker has a ``TopBundlesLoadData`` entry at all (an empty list is present but empty).
    """

    names: list[str]
    stats: np.ndarray  # (E, 4) msgThroughputIn, msgThroughputOut, msgRateIn, msgRateOut
    topics: np.ndarray  # (E,) int64
    consumer_count: np.ndarray
    producer_count: np.ndarray
    cache_size: np.ndarray
    offsets: np.ndarray  # (B+1,) int64
    present: np.ndarray  # (B,) bool

    @classmethod
    def empty(cls, n_brokers: int) -> "TopBundlesLoadData":
        topics, consumers, producers, cache = (np.zeros(0, dtype=np.int64) for _ in range(4))
        return cls([], np.zeros((0, 4)), topics, consumers, producers, cache,
                   np.zeros(n_brokers + 1, dtype=np.int64), np.zeros(n_brokers, dtype=bool))

    @classmethod
    def from_lists(cls, per_broker: Sequence[Iterable[tuple[str, Sequence[float]]] | None]) -> "TopBundlesLoadData":
        """Build from one list per broker row (None = no entry) of ``(bundle, stats)``.

        ``stats`` is ``(msgThroughputIn, msgThroughputOut, msgRateIn, msgRateOut[, topics, consumerCount,
        producerCount, cacheSize])``.
        """
        names: list[str] = []
        rows: list[list[float]] = []
        offsets = [0]
        present = []
        for entries in per_broker:
            present.append(entries is not None)
            for name, s in entries or ():
                vals = list(s) + [0] * (8 - len(s))
                names.append(name)
                rows.append([float(v) for v in vals[:8]])
            offsets.append(len(names))
        arr = np.asarray(rows, dtype=np.float64).reshape(-1, 8)
        topics, consumers, producers, cache = (arr[:, j].astype(np.int64) for j in range(4, 8))
        return cls(names, arr[:, :4].copy(), topics, consumers, producers, cache,
                   np.asarray(offsets, dtype=np.int64), np.asarray(present, dtype=bool))

    def __len__(self) -> int:
        return len(self.names)

    def without(self, brokers: np.ndarray) -> "TopBundlesLoadData":
        """The store with no entry for the broker rows ``brokers`` (``LoadDataStore.removeAsync``), the other
        brokers' lists as they are."""
        gone = np.zeros(len(self.present), dtype=bool)
        gone[np.asarray(brokers, dtype=np.int64)] = True
        counts = np.where(gone, 0, np.diff(self.offsets))
        keep = np.flatnonzero(np.repeat(~gone, np.diff(self.offsets)))
        return TopBundlesLoadData([self.names[k] for k in keep.tolist()], self.stats[keep], self.topics[keep],
                                  self.consumer_count[keep], self.producer_count[keep], self.cache_size[keep],
                                  np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), self.present & ~gone)

    def entries(self, broker: int) -> range:
        """Entry indices of ``broker``'s list, in list order."""
        return range(int(self.offsets[broker]), int(self.offsets[broker + 1]))

    def count(self, broker: int) -> int:
        return int(self.offsets[broker + 1] - self.offsets[broker])

    @property
    def throughput(self) -> np.ndarray:
        """``msgThroughputIn + msgThroughputOut`` per entry."""
        return self.stats[:, THR_IN] + self.stats[:, THR_OUT]
