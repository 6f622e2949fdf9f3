"""``ModularLoadManagerImpl.brokerCandidateCache`` and ``LoadManagerShared``'s thread-local ``localPrimariesCache`` /
``localSecondaryCache``: the order in which the placement strategy walks its candidates.

``selectBroker`` (the same on every line 2.10 .. 5.0, read from the jars' bytecode) clears ``brokerCandidateCache``
(a ``HashSet`` field of the load manager) and calls ``LoadManagerShared.applyNamespacePolicies``, which clears the
calling thread's two ``HashSet`` caches (``FastThreadLocal``), fills them walking ``getAvailableBrokers()`` (a
``HashSet`` copy of the broker list) and adds the primaries' keys, then (on failover, or without an isolation
policy) the secondaries' keys to the candidate set, each in its own iteration order.
``filterBrokersWithLargeTopicCount`` collects the brokers within the topic limit into a fresh ``HashSet`` and,
unless none is, clears the candidate set and adds them back in that set's order (for keys sharing a bin this
keeps their order, but 8 or more in one bin resize the table); the other filters remove (``removeIf``, an
iterator's remove; ``BrokerLoadManagerClassFilter``'s ``remove(key)`` is taken as one too: they differ only in a
tree bin, 8+ candidates in one bin of a 64+ table); a
``BrokerFilterException`` or an empty set adds the policy set again without clearing; the strategy iterates the
set; an overloaded pick adds the policy set again (no clear) for the second strategy call.
``shouldNamespacePoliciesUnload`` (2.11+, ``doLoadShedding``) clears and fills the same candidate set.

A ``HashSet``'s ``clear()`` keeps its table, so what each set keeps between calls is its table length
(:class:`BrokerCandidateCache`, part of the leader's state); within a call the order follows from the keys'
hashes, the table lengths and the insertion order (:mod:`lbreplay.kernel.java_hash_map`), which only matters for
keys sharing a bin. Assumption: the leader places on one thread (Pulsar places lookups on the threads serving
them and sheds on the load manager's executor; the thread-local caches are then per thread and their history
unknown).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from lbreplay.kernel.java_hash_map import JavaHashMap, hash_map_hash


class PolicyFill(NamedTuple):
    """One ``applyNamespacePolicies`` call: the broker ids it puts into ``localPrimariesCache`` and
    ``localSecondaryCache`` (in ``getAvailableBrokers()`` order), and whether the secondaries join the candidates."""

    primaries: tuple[str, ...]
    secondaries: tuple[str, ...]
    add_secondaries: bool


Tables = tuple[int, int, int]  # table lengths: brokerCandidateCache, localPrimariesCache, localSecondaryCache


class _Crowded(Exception):
    """A bin of a :class:`_QuickSet` reached 7 keys: a tree bin may follow, so the exact model takes over."""


class _QuickSet:
    """A ``HashSet`` as its keys' insertion sequence and its table length: iterated by bin, then insertion (what
    :class:`JavaHashMap` gives while no bin holds 8 keys; raises :class:`_Crowded` before one could)."""

    __slots__ = ("_seq", "_next", "_table", "_bins")

    def __init__(self, table: int = 0) -> None:
        self._seq: dict[str, int] = {}
        self._next = 0
        self._table = table
        self._bins: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._seq)

    @property
    def capacity(self) -> int:
        return self._table

    def put(self, key: str) -> None:
        if key in self._seq:
            return
        if not self._table:
            self._table = 16
        b = hash_map_hash(key) & (self._table - 1)
        count = self._bins.get(b, 0)
        if count >= 7:
            raise _Crowded
        self._bins[b] = count + 1
        self._seq[key] = self._next
        self._next += 1
        if len(self._seq) > self._table * 3 // 4:  # resize: bins split, each half keeps its order
            self._table *= 2
            self._bins = {}
            for k in self._seq:
                nb = hash_map_hash(k) & (self._table - 1)
                self._bins[nb] = self._bins.get(nb, 0) + 1

    def remove(self, key: str, movable: bool = True) -> None:
        if self._seq.pop(key, None) is not None:
            b = hash_map_hash(key) & (self._table - 1)
            self._bins[b] -= 1

    def clear(self) -> None:
        self._seq.clear()
        self._bins.clear()

    def keys(self) -> list[str]:
        mask = self._table - 1
        return sorted(self._seq, key=lambda k: (hash_map_hash(k) & mask, self._seq[k]))


class _Sets:
    """The three ``HashSet`` s of one call, from their table lengths (``quick``: :class:`_QuickSet` s)."""

    def __init__(self, tables: Tables, quick: bool = False) -> None:
        make = _QuickSet if quick else JavaHashMap.cleared
        self.quick = quick
        self.candidates, self.primaries, self.secondaries = (make(t) for t in tables)

    def apply_namespace_policies(self, fill: PolicyFill) -> None:
        """``LoadManagerShared.applyNamespacePolicies`` into the candidate set (not cleared here)."""
        self.primaries.clear()
        self.secondaries.clear()
        for k in fill.primaries:
            self.primaries.put(k)
        for k in fill.secondaries:
            self.secondaries.put(k)
        for k in self.primaries.keys():
            self.candidates.put(k)
        if fill.add_secondaries:
            for k in self.secondaries.keys():
                self.candidates.put(k)

    def filter_large_topic_count(self, fit: frozenset[str]) -> None:
        """``filterBrokersWithLargeTopicCount``: the candidates in ``fit`` collected into a fresh ``HashSet``
        (``Collectors.toSet()``); unless empty, the candidate set is cleared and gets them back in its order."""
        within = _QuickSet() if self.quick else JavaHashMap()
        for k in self.candidates.keys():
            if k in fit:
                within.put(k)
        if len(within):
            self.candidates.clear()
            for k in within.keys():
                self.candidates.put(k)

    def retain(self, kept: frozenset[str]) -> None:
        """The broker filters: every candidate not in ``kept`` removed (``removeIf``: an iterator's remove)."""
        for k in self.candidates.keys():
            if k not in kept:
                self.candidates.remove(k, movable=False)

    @property
    def tables(self) -> Tables:
        return (self.candidates.capacity, self.primaries.capacity, self.secondaries.capacity)


@lru_cache(maxsize=4096)
def _select_order(
    tables: Tables, fill: PolicyFill, fit: frozenset[str], kept: frozenset[str], restored: bool, recheck: bool
) -> tuple[tuple[str, ...], Tables]:
    """The candidate set's iteration order at a ``selectBroker`` strategy call, and the tables after it."""
    try:
        return _select_steps(_Sets(tables, quick=True), fill, fit, kept, restored, recheck)
    except _Crowded:
        return _select_steps(_Sets(tables), fill, fit, kept, restored, recheck)


def _select_steps(
    sets: _Sets, fill: PolicyFill, fit: frozenset[str], kept: frozenset[str], restored: bool, recheck: bool
) -> tuple[tuple[str, ...], Tables]:
    sets.apply_namespace_policies(fill)
    sets.filter_large_topic_count(fit)
    sets.retain(kept)
    if restored:  # "restore the list of brokers to the full set"
        sets.apply_namespace_policies(fill)
    if recheck:  # "check if there is a better broker": the policy set added again
        sets.apply_namespace_policies(fill)
    return tuple(sets.candidates.keys()), sets.tables


@lru_cache(maxsize=1024)
def _policies_check_tables(tables: Tables, fill: PolicyFill) -> Tables:
    """The tables after ``shouldNamespacePoliciesUnload``'s fill (the quick model unless a bin crowds)."""
    try:
        return _policy_fill_steps(_Sets(tables, quick=True), fill)
    except _Crowded:
        return _policy_fill_steps(_Sets(tables), fill)


def _policy_fill_steps(sets: _Sets, fill: PolicyFill) -> Tables:
    sets.apply_namespace_policies(fill)
    return sets.tables


class BrokerCandidateCache:
    """The leader's ``brokerCandidateCache`` and its placing thread's two policy caches, as table lengths (0: never
    filled)."""

    __slots__ = ("tables",)

    def __init__(self, tables: Tables = (0, 0, 0)) -> None:
        self.tables: Tables = tables

    def select_order(
        self, fill: PolicyFill, fit: frozenset[str], kept: frozenset[str], restored: bool = False,
        recheck: bool = False,
    ) -> tuple[str, ...]:
        """The candidates ``selectBroker`` hands to its strategy, in the set's iteration order: the policy
        ``fill``, the topic-count filter's copy of those in ``fit``, thinned to ``kept`` by the other filters, the
        policy set added again when ``restored`` (a filter threw, or nothing was left), and again for the overload
        ``recheck`` (the second strategy call). Keeps the tables."""
        order, self.tables = _select_order(self.tables, fill, fit, kept, restored, recheck)
        return order

    def policies_check(self, fill: PolicyFill) -> None:
        """``shouldNamespacePoliciesUnload`` (2.11+): the candidate set cleared and filled with ``fill``."""
        self.tables = _policies_check_tables(self.tables, fill)

    def get_state(self) -> dict[str, Any]:
        c, p, s = self.tables
        return {"table": c, "localPrimariesCache": p, "localSecondaryCache": s}

    def set_state(self, state: dict[str, Any] | None) -> None:
        state = state or {}
        self.tables = tuple(_table(state.get(k)) for k in ("table", "localPrimariesCache", "localSecondaryCache"))  # type: ignore[assignment]


def _table(value: Any) -> int:
    """A carried table length: 0 or a power of two >= 16 (anything else is refused)."""
    n = int(value or 0)
    if n and (n < 16 or n & (n - 1)):
        raise ValueError(f"a HashSet table length is 0 or a power of two >= 16, got {value!r}")
    return n
