"""The JVM iteration order of the extensible load manager's hash maps (read from the 3.0.7 .. 5.0.0-M1 bytecode).

* **The load-data stores** (``TableViewLoadDataStoreImpl.entrySet`` / ``forEach``): the client ``TableViewImpl``'s
  ``data``, a default ``ConcurrentHashMap`` on every line, living as long as the broker: a broker's report puts
  its key (an update keeps its place), its tombstone removes it, the table never shrinks.
  ``TransferShedder.LoadStats.update`` walks ``brokerLoadDataStore().entrySet()`` in this order (the CoolDown
  scan that drops ``recentlyUnloadedBrokers`` entries up to the first broker still cooling down, the sums of
  avg / std) and ``setLoadDataStore`` sorts ``brokersSortedByLoad`` with a stable ``List.sort`` over it (ties in
  ``weightedMaxEMA``). :class:`LoadDataStoreOrder` carries the map (its table size and key order) from cycle
  to cycle.
* **The available brokers** (``BrokerRegistryImpl.getAvailableBrokerLookupDataAsync``): a fresh default
  ``ConcurrentHashMap`` filled as the registry lists the brokers; ``TransferShedder.isTransferable`` copies it
  (``new HashMap<>(availableBrokers)``), ``ExtensibleLoadManagerImpl.selectAsync`` too (``new
  ConcurrentHashMap<>(availableBrokers)``), and hands the copy to the broker filters, where
  ``BrokerVersionFilter.getLatestVersionNumber`` looks for the latest version in its order (java-semver's order
  can be cyclic): :func:`available_brokers_order`. The other filters only remove entries.
* **A broker's bundle stats** (``BrokerService.getBundleStats()`` = ``PulsarStats.bundleStats``): a default
  ``ConcurrentHashMap`` that ``PulsarStats.updateStats`` clears (the table keeps its size) and refills;
  ``DefaultNamespaceBundleSplitStrategyImpl.findBundlesToSplit`` walks it, so the per-cycle cap
  (``loadBalancerMaxNumberOfBundlesToSplitPerCycle``) and the namespace cap let the first bundles in this order
  through: :func:`bundle_stats_order`.

Insertion history assumed: keys put in sorted order (brokers as lbreplay's rows list them, bundles by name; the
oracle builds its maps the same way). A live broker puts brokers as their reports arrive and bundles as its
topics map lists them: that only matters for keys sharing a bin, a later refinement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from lbreplay.kernel.java_hash_map import JavaConcurrentHashMap, JavaHashMap


class LoadDataStoreOrder:
    """``TableViewImpl.data`` of the broker load-data store across cycles: its table size and key order (from
    which each cycle rebuilds the map exactly, tree bins of 8+ colliding keys aside)."""

    def __init__(self) -> None:
        self.capacity = 0
        self.keys: list[str] = []

    def update(self, brokers: Iterable[str]) -> list[str]:
        """This cycle's store holds exactly ``brokers``: the others' tombstones remove them, then the new ones are
        put in sorted order (a present key keeps its place). Returns the store's iteration order."""
        present, known = set(brokers), set(self.keys)
        if known and present == known:  # no report added or removed: the map is as it was
            return list(self.keys)
        m = JavaConcurrentHashMap.cleared(self.capacity)
        for k in self.keys:  # the same bins in the same order: no resize, the map held them at this size
            m.put(k)
        for k in self.keys:
            if k not in present:
                m.remove(k)
        for k in sorted(present - known):
            m.put(k)
        self.capacity, self.keys = m.capacity, m.keys()
        return list(self.keys)

    def get_state(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "keys": list(self.keys)}

    def set_state(self, state: Mapping[str, Any] | None) -> None:
        self.capacity = int((state or {}).get("capacity", 0))
        self.keys = [str(k) for k in (state or {}).get("keys") or ()]


@lru_cache(maxsize=256)
def available_brokers_order(brokers: tuple[str, ...], copy_kind: str = "HashMap") -> tuple[str, ...]:
    """The order ``BrokerVersionFilter`` sees: the registry's ``ConcurrentHashMap`` (brokers put in the given
    order) copied by ``new HashMap<>(map)`` (``TransferShedder.isTransferable``) or ``new
    ConcurrentHashMap<>(map)`` (``ExtensibleLoadManagerImpl.selectAsync``)."""
    chm = JavaConcurrentHashMap()
    for b in brokers:
        chm.put(b)
    if copy_kind == "HashMap":
        return tuple(JavaHashMap.copy_of(chm.keys()).keys())
    return tuple(JavaConcurrentHashMap.copy_of(chm.keys()).keys())


@lru_cache(maxsize=1024)
def bundle_stats_order(bundles: tuple[str, ...], capacity: int) -> tuple[tuple[str, ...], int]:
    """``PulsarStats.bundleStats`` after ``clear()`` (a table of ``capacity``) and the puts of ``bundles`` in
    sorted order: the iteration order and the table size it keeps for the next cycle."""
    m = JavaConcurrentHashMap.cleared(capacity)
    for b in sorted(set(bundles)):
        m.put(b)
    return tuple(m.keys()), m.capacity
