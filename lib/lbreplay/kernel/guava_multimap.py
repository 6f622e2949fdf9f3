"""Guava's ``ArrayListMultimap<String, String>``: the order ``ModularLoadManagerImpl.doLoadShedding`` walks the plan.

``doLoadShedding`` (every line 2.10 .. 5.0, read from the jars' bytecode) calls
``bundlesToUnload.asMap().forEach((broker, bundles) -> bundles.forEach(...))`` on the multimap the shedding
strategy's ``findBundlesForUnloading`` returned; per bundle it runs ``shouldNamespacePoliciesUnload`` (2.11+),
``shouldAntiAffinityNamespaceUnload`` and (3.0+) ``selectBroker`` for the destination, so the brokers' order decides
destinations (RoundRobinBrokerSelector's counter, the seeded draws, ``brokerCandidateCache``'s table history, the
run clock's stamps). Every strategy returns an ``ArrayListMultimap.create()``:

* ``OverloadShedder``, ``ThresholdShedder``, ``UniformLoadShedder``: the field ``selectedBundlesCache``, created
  by the constructor and ``clear()``ed at the start of each ``findBundlesForUnloading``. The strategy instance
  lives as long as the load manager, and ``AbstractMapBasedMultimap.clear()`` clears the backing ``HashMap``,
  which keeps its table: what the multimap keeps between runs is that table's length, in the strategy's state
  as ``strategyState.shedding.state.selectedBundlesCache.table`` (:class:`SelectedBundlesCache`; written only
  once the table grew past the line's initial length, a power of two >= 16, anything else refused).
  UniformLoadShedder plans for one broker at most, so its table never grows: it keeps no state.
* ``AvgShedder``: a local ``ArrayListMultimap.create()`` per call (``findBundlesForUnloading``): a fresh table every
  run.

``ArrayListMultimap.create()`` is ``new ArrayListMultimap<>(12, 3)``: its backing map is
``Platform.newHashMapWithExpectedSize(12)`` = ``Maps.newHashMapWithExpectedSize(12)`` = ``new HashMap<>(
Maps.capacity(12))``. ``Maps.capacity`` was ``(int) (12 / 0.75f + 1.0f)`` = 17 (a table of 32) up to Guava 31 and
is ``(int) Math.ceil(12 / 0.75)`` = 16 (a table of 16) from Guava 32.0.0. The Guava each line's jar depends on
(the pulsar parent POM's ``guava.version``): 2.10.5 32.0.0-jre, 2.11.0 31.0.1-jre, 3.0.7 32.1.1-jre, 3.3.6 and
4.0.7 32.1.2-jre, 4.2.4 33.4.8-jre, 5.0.0-M1 33.6.0-jre (2.9: Guava 30, before the change). Patch releases
before apache/pulsar#20459 (2.10.0-2.10.4, 2.11.0-2.11.1, 3.0.0) shipped Guava 31: the line's newest jar is
what a ``pulsarVersion`` line means here.

``put(broker, bundle)`` (``AbstractMapBasedMultimap.put``) puts a broker into the ``HashMap`` the first time it
gets a bundle (a new key at the end of its bin) and appends the bundle to its ``ArrayList``; ``asMap()`` is an
``AsMap`` over that ``HashMap`` whose ``forEach`` (``Map``'s default, over ``entrySet()``) walks the map's entries:
brokers in the ``HashMap``'s iteration order (:mod:`lbreplay.kernel.java_hash_map`), bundles of a broker in the
order they were put. The plan's :class:`~lbreplay.kernel.strategy.Unload` list is in put order (each strategy
appends as its Java loop puts).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from lbreplay.kernel.java_hash_map import JavaHashMap
from lbreplay.kernel.version_profile import line_of

T = TypeVar("T")

# The table of ``new HashMap<>(Maps.capacity(12))`` per line: 32 with Guava < 32.0 (``(int) (12 / .75f + 1)`` =
# 17), 16 from Guava 32.0.0 (``ceil(12 / .75)`` = 16).
GUAVA_BEFORE_32 = frozenset({"2.9", "2.11"})


def initial_table(pulsar_version: str) -> int:
    """The table length of a fresh ``ArrayListMultimap.create()``'s backing map on ``pulsar_version``'s line."""
    return 32 if line_of(pulsar_version) in GUAVA_BEFORE_32 else 16


def as_map(puts: Iterable[tuple[str, T]], table: int) -> tuple[list[tuple[str, list[T]]], int]:
    """``asMap().forEach`` over a multimap whose backing ``HashMap`` has a table of ``table`` (a power of two >= 16;
    the map empty) and then gets ``put(key, value)`` of ``puts`` in order: (key, its values) in the iteration
    order, and the table length after the puts."""
    keys = JavaHashMap.cleared(table)
    values: dict[str, list[T]] = {}
    for key, value in puts:
        if key not in values:
            values[key] = []
            keys.put(key)
        values[key].append(value)
    return [(k, values[k]) for k in keys.keys()], keys.capacity or table


class SelectedBundlesCache:
    """A strategy's ``selectedBundlesCache`` field: the length its backing table grew to (0: never past the line's
    initial length)."""

    __slots__ = ("table",)

    def __init__(self, table: int = 0) -> None:
        self.table = table

    def walk(self, puts: Iterable[tuple[str, T]], pulsar_version: str) -> list[tuple[str, list[T]]]:
        """``clear()``, the puts of one ``findBundlesForUnloading``, then ``asMap().forEach``'s order; keeps the
        table."""
        start = initial_table(pulsar_version)
        order, table = as_map(puts, max(self.table, start))
        self.table = table if table > start else 0
        return order

    def get_state(self) -> dict[str, Any]:
        return {"table": self.table} if self.table else {}

    def set_state(self, state: Any) -> None:
        if state is not None and not isinstance(state, dict):
            raise ValueError(f"selectedBundlesCache is an object with a table length, got {state!r}")
        value = (state or {}).get("table", 0)
        if isinstance(value, bool) or not isinstance(value, int) or (value and (value < 16 or value & (value - 1))):
            raise ValueError(f"selectedBundlesCache.table is 0 or a power of two >= 16, got {value!r}")
        self.table = value


def plan_order(shedder: object, puts: Iterable[tuple[str, T]], pulsar_version: str) -> list[tuple[str, list[T]]]:
    """The plan of ``shedder`` (its puts in order) as ``doLoadShedding`` walks it: through the strategy's
    :class:`SelectedBundlesCache` when it keeps one, else a fresh ``ArrayListMultimap.create()``."""
    cache = getattr(shedder, "selected_bundles_cache", None)
    if isinstance(cache, SelectedBundlesCache):
        return cache.walk(puts, pulsar_version)
    return as_map(puts, initial_table(pulsar_version))[0]
