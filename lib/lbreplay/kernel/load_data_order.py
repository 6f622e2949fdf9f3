"""The iteration order of ``org.apache.pulsar.broker.loadbalance.LoadData``'s maps in the leader's JVM.

``LoadData()`` makes ``brokerData`` and ``bundleData`` default ``ConcurrentHashMap``s (every line 2.10 .. 5.0,
checked on the jars' bytecode); ``getBundleDataForLoadShedding()`` streams ``bundleData`` through the line's
namespace filter into ``Collectors.toMap`` (a default ``HashMap``, ``putIfAbsent`` in ``bundleData``'s order).
The modular shedders iterate them (``getBrokerData().forEach``: UniformLoadShedder's first max broker,
ThresholdShedder's sum and lower-boundary broker, BundleSplitterTask's caps; a stable sort over the
``getBundleDataForLoadShedding()`` entries: bundles of equal traffic), so their order decides ties.

The insertion history assumed: brokers and bundles put in sorted id / name order (the order lbreplay's rows have;
the oracle builds its ``LoadData`` the same way). The JVM's order then follows from the keys' hashes and the
tables' sizes, mirrored by :mod:`lbreplay.kernel.java_hash_map`. A real leader puts brokers as ZooKeeper lists
them and keeps its maps across ticks; that only matters for keys sharing a bin.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from lbreplay.kernel.java_hash_map import JavaConcurrentHashMap, JavaHashMap, java_hash_set_copy
from lbreplay.kernel.load_data import LoadData, cached


@lru_cache(maxsize=64)
def _order(keys: tuple[str, ...], concurrent: bool) -> tuple[int, ...]:
    """Positions in ``keys`` in the iteration order of a default-constructed map that ``put`` them in order."""
    m: JavaConcurrentHashMap | JavaHashMap = JavaConcurrentHashMap() if concurrent else JavaHashMap()
    for k in keys:
        m.put(k)
    pos = {k: i for i, k in enumerate(keys)}
    return tuple(pos[k] for k in m.keys())


def broker_data_order(ld: LoadData) -> np.ndarray:
    """Broker rows in ``LoadData.getBrokerData()`` order (a ``ConcurrentHashMap``, brokers put in row order)."""
    ids = tuple(ld.brokers.ids)
    return cached(ld, "broker", "brokerDataOrder", lambda: np.asarray(_order(ids, True), dtype=np.int64))


def bundle_data_for_load_shedding_rank(ld: LoadData, in_map: np.ndarray) -> np.ndarray:
    """Per bundle row, its position in ``getBundleDataForLoadShedding()``'s iteration (``len(ld.bundles)`` for a
    row not in it). ``in_map``: the rows the line's filter keeps (``LoadData.bundle_data_for_load_shedding``)."""

    n = len(ld.bundles)
    names = ld.bundles.names
    data_rows = np.flatnonzero(ld.bundles.has_bundle_data)  # bundleData: a ConcurrentHashMap
    chm = data_rows[np.asarray(_order(tuple(names[r] for r in data_rows.tolist()), True), dtype=np.int64)]
    kept = chm[in_map[chm]]
    hm = kept[np.asarray(_order(tuple(names[r] for r in kept.tolist()), False), dtype=np.int64)]
    rank = np.full(n, n, dtype=np.int64)
    rank[hm] = np.arange(hm.size, dtype=np.int64)
    return rank


def broker_candidate_order(ld: LoadData, rows: np.ndarray) -> np.ndarray:
    """Candidate broker ``rows`` in the order of a fresh ``HashSet`` filled walking the available brokers
    (:func:`_available_order`): the oracle's ``assign`` candidates (the strategy alone). The placement pipeline's
    ``brokerCandidateCache``, with its history and the thread's policy caches, is
    :mod:`lbreplay.kernel.broker_candidate_cache`."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size < 2:
        return rows
    ids = ld.brokers.ids
    available = np.asarray(_available_order(tuple(ids)), dtype=np.int64)
    ordered = available[np.isin(available, rows)]
    return ordered[np.asarray(_order(tuple(ids[r] for r in ordered.tolist()), False), dtype=np.int64)]


def available_broker_order(ld: LoadData, available: np.ndarray | None = None) -> np.ndarray:
    """Broker rows in ``getAvailableBrokers()`` order (:func:`_available_order`): every broker, or the rows of the
    ``available`` mask (listed in ``brokerData``'s order)."""
    ids = tuple(ld.brokers.ids)
    if available is None:
        return np.asarray(_available_order(ids), dtype=np.int64)
    mask = np.asarray(available, dtype=bool)
    return np.asarray(_available_order(ids, mask.tobytes()), dtype=np.int64)


@lru_cache(maxsize=64)
def _available_order(ids: tuple[str, ...], mask: bytes | None = None) -> tuple[int, ...]:
    """``getAvailableBrokers()``: ``Sets.newHashSet`` of the broker list (``brokerData``'s order; ``mask``: only
    those rows), a presized ``HashSet`` copy: broker rows in its order."""
    chm = _order(ids, True)
    if mask is not None:
        chm = tuple(i for i in chm if mask[i])
    pos = {ids[i]: i for i in chm}
    return tuple(pos[k] for k in java_hash_set_copy(ids[i] for i in chm).keys())
