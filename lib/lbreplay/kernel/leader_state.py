"""The modular leader's own state beside LoadData (``ModularLoadManagerImpl``): ``brokerToNamespaceToBundleRange``
(kept incrementally), the round-robin selector, and the bookkeeping of preallocations."""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from lbreplay.kernel.broker_candidate_cache import BrokerCandidateCache
from lbreplay.kernel.load_data import (
    LoadData,
    insert_bundles,
    invalidate_derived,
    namespace_codes,
)
from lbreplay.kernel.naming import split_bundle_name
from lbreplay.kernel.round_robin_broker_selector import RoundRobinBrokerSelector


class _RangeSnapshot:
    """The bundle rows :meth:`LeaderState.reload` read: ids, names, namespaces and the two holder columns
    (``owner``: the lastStats reporter, ``pre``: the preallocation holder), plus ``extra``: further
    (broker row, bundle row) pairs when a broker's lastStats or preallocations are not the one-holder view."""

    __slots__ = ("ids", "pos", "names", "namespaces", "owner", "pre", "extra")

    def __init__(self, ld: LoadData) -> None:
        b = ld.bundles
        self.ids = list(ld.brokers.ids)
        self.pos = {broker: i for i, broker in enumerate(self.ids)}
        self.names = list(b.names)
        self.namespaces = list(b.namespaces)
        self.pre = np.array(b.preallocated_to, dtype=np.int64)
        self.extra: set[tuple[int, int]] = set()
        if ld.membership is None:
            self.owner = np.array(b.owner, dtype=np.int64)
        else:  # reloadFromBundles(broker, lastStats keys + preallocated keys): every reporter of a bundle
            self.owner = np.full(len(b), -1, dtype=np.int64)
            holders, rows = ld.reported_pairs()
            first = np.zeros(rows.size, dtype=bool)
            first[np.unique(rows, return_index=True)[1]] = True  # pairs go by broker: the first reporter
            self.owner[rows[first]] = holders[first]
            self.extra.update(zip(holders[~first].tolist(), rows[~first].tolist()))
        if ld.preallocated_also:
            holders, rows = ld.preallocated_pairs()
            for k, r in zip(holders.tolist(), rows.tolist()):
                if k != self.pre.item(r):
                    self.extra.add((k, r))
        self.extra = {(k, r) for k, r in self.extra if self.owner.item(r) != k and self.pre.item(r) != k}

    def holds(self, broker: str, ns: str, rng: str, bundle: str) -> bool:
        """Whether the reloaded ranges of ``broker`` already contain ``ns``/``rng``."""
        k = self.pos.get(broker)
        if k is None:
            return False
        names = self.names
        row = bisect.bisect_left(names, bundle)
        if row >= len(names) or names[row] != bundle:
            return False
        if self.namespaces[row] != ns or names[row][len(ns) + 1 :] != rng:
            return False
        return self.owner.item(row) == k or self.pre.item(row) == k or (k, row) in self.extra

    def counts(self) -> dict[str, np.ndarray]:
        """Per namespace, per broker row: distinct bundle ranges held (reported or preallocated), vectorized."""
        codes, code = namespace_codes(self.namespaces)
        nb, nns = len(self.ids), len(code)
        total = np.zeros(nb * nns, dtype=np.int64)
        if nns:
            own = self.owner >= 0
            pre = (self.pre >= 0) & (self.pre != self.owner)  # a range held both ways counts once
            total += np.bincount(self.owner[own] * nns + codes[own], minlength=nb * nns)
            total += np.bincount(self.pre[pre] * nns + codes[pre], minlength=nb * nns)
            for k, r in self.extra:  # distinct ranges: extra pairs are neither the owner nor the holder
                total[k * nns + codes[r]] += 1
        matrix = total.reshape(nb, nns)
        return {ns: matrix[:, c].copy() for ns, c in code.items()}


class LeaderState:
    """Leader-only mutable state of ``ModularLoadManagerImpl`` besides ``LoadData``.

    * ``bundle_ranges``: ``brokerToNamespaceToBundleRange`` (broker id -> namespace -> bundle ranges), rebuilt per
      broker from reported + preallocated bundles on every ``updateBundleData`` (:meth:`reload`) and extended by
      ``preallocateBundle`` (:meth:`add`). Mutate it only through :meth:`reload`, :meth:`add`, :meth:`set_state`
      or by assigning a whole new mapping.
    * ``round_robin``: ``sheddingExcludedNamespaceSelectionStrategy``.
    * ``candidate_cache``: ``brokerCandidateCache`` and the placing thread's policy caches (their table lengths:
      the order placement walks its candidates, :mod:`lbreplay.kernel.broker_candidate_cache`).

    :meth:`reload` only snapshots the bundle columns; the nested dict is built on first access of
    ``bundle_ranges``, and :meth:`namespace_bundle_counts` (what placement reads on every call) comes from per-namespace
    count arrays computed from the snapshot in one vectorized pass and kept in step by :meth:`add`.

    Preallocations themselves are kept in ``LoadData``; :meth:`get_state` / :meth:`set_state` carry them too when
    given the ``LoadData``.
    """

    def __init__(
        self,
        bundle_ranges: dict[str, dict[str, set[str]]] | None = None,
        round_robin: RoundRobinBrokerSelector | None = None,
    ) -> None:
        self.round_robin = round_robin if round_robin is not None else RoundRobinBrokerSelector()
        self.candidate_cache = BrokerCandidateCache()
        self._ranges: dict[str, dict[str, set[str]]] | None
        self.bundle_ranges = bundle_ranges if bundle_ranges is not None else {}

    # --- brokerToNamespaceToBundleRange ------------------------------------------------------------
    @property
    def bundle_ranges(self) -> dict[str, dict[str, set[str]]]:
        if self._ranges is None:
            self._ranges = self._materialize()
        return self._ranges

    @bundle_ranges.setter
    def bundle_ranges(self, value: dict[str, dict[str, set[str]]]) -> None:
        self._ranges = value
        self._snap: _RangeSnapshot | None = None
        self._pending: list[tuple[str, str, str]] = []  # add() calls not yet applied to _ranges
        self._added: set[tuple[str, str, str]] = set()  # ranges add() contributed beyond the snapshot
        self._ns_counts: dict[str, np.ndarray] | None = None
        self._same_ids: list[str] | None = None  # a broker id list equal to the snapshot's
        self._version = getattr(self, "_version", 0) + 1  # bumped on every change (keys placement memos)

    def __repr__(self) -> str:
        return f"LeaderState(bundle_ranges={self.bundle_ranges!r}, round_robin={self.round_robin!r})"

    @classmethod
    def from_load_data(cls, ld: LoadData) -> "LeaderState":
        """A leader that has just run ``updateBundleData`` on ``ld``."""
        state = cls()
        state.reload(ld)
        return state

    def reload(self, ld: LoadData) -> None:
        """``brokerToNamespaceToBundleRange.reloadFromBundles`` for every broker in ``ld``: its reported bundles
        (``lastStats`` keys) plus its preallocated ones. Brokers absent from ``ld`` are dropped."""
        self.bundle_ranges = None  # type: ignore[assignment]
        self._snap = _RangeSnapshot(ld)

    def _materialize(self) -> dict[str, dict[str, set[str]]]:
        """The nested dict of the last :meth:`reload` plus the :meth:`add` calls since (same order as built eagerly)."""
        snap = self._snap
        ranges: dict[str, dict[str, set[str]]] = {}
        if snap is not None:
            ids = snap.ids
            ranges = {broker: {} for broker in ids}
            for holders in (snap.owner, snap.pre):
                rows = np.flatnonzero(holders >= 0)
                for row, holder in zip(rows.tolist(), holders[rows].tolist()):
                    ns = snap.namespaces[row]
                    ns_map = ranges[ids[holder]]
                    got = ns_map.get(ns)
                    if got is None:
                        got = ns_map[ns] = set()
                    got.add(snap.names[row][len(ns) + 1 :])
            for holder, row in sorted(snap.extra):
                ns = snap.namespaces[row]
                ranges[ids[holder]].setdefault(ns, set()).add(snap.names[row][len(ns) + 1 :])
        for broker, ns, rng in self._pending:
            ranges.setdefault(broker, {}).setdefault(ns, set()).add(rng)
        self._pending = []
        return ranges

    def add(self, broker: str, bundle: str) -> None:
        """``brokerToNamespaceToBundleRange.add(broker, namespace, range)``."""
        ns, rng = split_bundle_name(bundle)
        self._version += 1
        snap = self._snap
        if snap is not None:
            key = (broker, ns, rng)
            if key not in self._added and not snap.holds(broker, ns, rng, bundle):
                self._added.add(key)
                k = snap.pos.get(broker)
                if self._ns_counts is not None and k is not None:
                    counts = self._ns_counts.get(ns)
                    if counts is None:
                        counts = self._ns_counts[ns] = np.zeros(len(snap.ids), dtype=np.int64)
                    counts[k] = counts.item(k) + 1
        if self._ranges is not None:
            self._ranges.setdefault(broker, {}).setdefault(ns, set()).add(rng)
        else:
            self._pending.append((broker, ns, rng))

    def namespace_bundle_counts(self, namespace: str, ids: list[str]) -> np.ndarray:
        """Per broker id in ``ids``: how many ranges of ``namespace`` it serves (0 when unknown)."""
        return self._counts(namespace, ids).copy()

    def _counts(self, namespace: str, ids: list[str]) -> np.ndarray:
        """:meth:`namespace_bundle_counts` without the copy: the array may be shared and updated by :meth:`add`,
        so the caller must only read it, and before the next :meth:`add`."""
        snap = self._snap
        if snap is not None and (ids is self._same_ids or ids == snap.ids):
            self._same_ids = ids  # broker id lists are never edited in place: compare each list once
            if self._ns_counts is None:
                self._ns_counts = snap.counts()
                for broker, ns, _ in self._added:
                    k = snap.pos.get(broker)
                    if k is not None:
                        counts = self._ns_counts.get(ns)
                        if counts is None:
                            counts = self._ns_counts[ns] = np.zeros(len(snap.ids), dtype=np.int64)
                        counts[k] += 1
            got = self._ns_counts.get(namespace)
            return got if got is not None else np.zeros(len(ids), dtype=np.int64)
        ranges = self.bundle_ranges
        return np.array([len(ranges.get(b, {}).get(namespace, ())) for b in ids], dtype=np.int64)

    def get_state(self, ld: LoadData | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerToNamespaceToBundleRange": {
                b: {ns: sorted(r) for ns, r in sorted(m.items())} for b, m in sorted(self.bundle_ranges.items())
            },
            "roundRobin": self.round_robin.get_state(),
            "brokerCandidateCache": self.candidate_cache.get_state(),
        }
        if ld is not None:
            b = ld.bundles
            pre: dict[str, list[str]] = {}
            for k, row in zip(*ld.preallocated_pairs()):
                pre.setdefault(ld.brokers.ids[k], []).append(b.names[row])
            out["preallocatedBundleToBroker"] = dict(sorted(ld.preallocated_bundle_to_broker.items()))
            out["preallocatedBundleData"] = dict(sorted(pre.items()))
        return out

    def set_state(self, state: dict[str, Any], ld: LoadData | None = None) -> None:
        """Restore; with ``ld``, also re-apply preallocations to brokers present in ``ld``."""
        state = state or {}
        raw = state.get("brokerToNamespaceToBundleRange")
        if raw is not None:
            self.bundle_ranges = {str(b): {str(ns): set(r) for ns, r in m.items()} for b, m in raw.items()}
        self.round_robin.set_state(state.get("roundRobin") or {})
        self.candidate_cache.set_state(state.get("brokerCandidateCache"))
        if ld is None:
            return
        for broker, bundles in (state.get("preallocatedBundleData") or {}).items():
            row = ld.brokers.index(broker)
            if row < 0:
                continue
            for bundle in bundles:
                add_preallocation(ld, ensure_bundle_data(ld, bundle), row)
        invalidate_derived(ld, "prealloc")
        for bundle, broker in (state.get("preallocatedBundleToBroker") or {}).items():
            if ld.brokers.index(broker) >= 0:
                ld.preallocated_bundle_to_broker[str(bundle)] = str(broker)


def add_preallocation(ld: LoadData, row: int, broker_row: int) -> None:
    """Put bundle ``row`` into broker ``broker_row``'s ``preallocatedBundleData`` (other holders keep it)."""
    pre = ld.bundles.preallocated_to
    old = pre.item(row)
    if old == broker_row:
        return
    if old >= 0:
        also = ld.preallocated_also.setdefault(ld.bundles.names[row], [])
        broker = ld.brokers.ids[broker_row]
        if broker not in also:
            also.append(broker)
        return
    pre[row] = broker_row


def ensure_bundle_data(ld: LoadData, bundle: str) -> int:
    """``loadData.getBundleData().computeIfAbsent(bundle, getBundleDataOrDefault)``: the bundle's row, with
    default BundleData (50 msg/s and 50000 B/s in and out, no samples) when the leader had none."""
    row = ld.bundles.index(bundle)
    if row < 0:
        row = int(insert_bundles(ld, [bundle])[0])
    b = ld.bundles
    if not b.has_bundle_data.item(row):
        b.has_bundle_data[row] = True  # rows start at the default message data with 0 samples
        invalidate_derived(ld, "bundle")
    return row
