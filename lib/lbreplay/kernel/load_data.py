"""The leader's ``LoadData`` (modular load manager) in columnar form.

Mirrors ``org.apache.pulsar.broker.loadbalance.LoadData`` / ``BrokerData`` / ``LocalBrokerData`` /
``BundleData`` / ``TimeAverageMessageData`` / ``TimeAverageBrokerData`` (PULSAR-LB-SPEC.md §1).
Brokers are rows sorted by broker id; bundles are rows sorted by bundle name, so index order is the
deterministic "sorted visiting order" that stands in for Java hash-map order.

Four-value message data always uses the TimeAverageMessageData field order:
``msgThroughputIn, msgThroughputOut, msgRateIn, msgRateOut``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import numpy as np

from lbreplay.kernel.naming import bundle_bounds

T = TypeVar("T")

THR_IN, THR_OUT, RATE_IN, RATE_OUT = range(4)
MESSAGE_FIELDS: tuple[str, ...] = ("msgThroughputIn", "msgThroughputOut", "msgRateIn", "msgRateOut")
NUM_SHORT_SAMPLES = 10  # ModularLoadManagerImpl.NUM_SHORT_SAMPLES
NUM_LONG_SAMPLES = 1000  # ModularLoadManagerImpl.NUM_LONG_SAMPLES
# ModularLoadManagerImpl default bundle stats for unseen bundles: 50 msg/s and 50000 B/s in and out.
DEFAULT_MESSAGE_DATA = np.array([50000.0, 50000.0, 50.0, 50.0])


# NamespaceService's patterns, matched whole (``Matcher.matches``; ``\d`` is ASCII). 2.10.5 .. 4.0.7: heartbeat v1
# ``pulsar/[^/]+/([^:]+:\d+)`` and v2 ``pulsar/([^:]+:\d+)``, SLA ``sla-monitor/[^/]+/([^:]+:\d+)``; 4.2.4 and
# 5.0.0-M1 keep ``pulsar/([^:]+:\d+)`` and widen SLA to ``sla-monitor/([^:]+:\d+)`` (VersionProfile.sla_pattern_v2).
HEARTBEAT_NAMESPACE_PATTERN = re.compile(r"pulsar/[^/]+/([^:]+:\d+)", re.ASCII)
HEARTBEAT_NAMESPACE_PATTERN_V2 = re.compile(r"pulsar/([^:]+:\d+)", re.ASCII)
SLA_NAMESPACE_PATTERN = re.compile(r"sla-monitor/[^/]+/([^:]+:\d+)", re.ASCII)
SLA_NAMESPACE_PATTERN_V2 = re.compile(r"sla-monitor/([^:]+:\d+)", re.ASCII)
SYSTEM_NAMESPACE = "pulsar/system"  # NamespaceName.SYSTEM_NAMESPACE
NAMESPACE_KINDS = ("heartbeat", "sla-monitor", SYSTEM_NAMESPACE)


def namespace_kind(namespace: str, sla_pattern_v2: bool = False) -> str | None:
    """Which of ``NAMESPACE_KINDS`` a namespace is (None: a user namespace): ``NamespaceService``'s heartbeat
    patterns (``pulsar/<cluster>/<host:port>``, ``pulsar/<host:port>``), its SLA pattern (``sla-monitor/<cluster>/
    <host:port>``; with ``sla_pattern_v2`` also ``sla-monitor/<host:port>``) and ``NamespaceName.SYSTEM_NAMESPACE``."""
    if namespace == SYSTEM_NAMESPACE:
        return SYSTEM_NAMESPACE
    if HEARTBEAT_NAMESPACE_PATTERN.fullmatch(namespace) or HEARTBEAT_NAMESPACE_PATTERN_V2.fullmatch(namespace):
        return "heartbeat"
    sla = SLA_NAMESPACE_PATTERN_V2 if sla_pattern_v2 else SLA_NAMESPACE_PATTERN
    return "sla-monitor" if sla.fullmatch(namespace) else None


def is_system_service_namespace(namespace: str, sla_pattern_v2: bool = False) -> bool:
    """``NamespaceService.isSystemServiceNamespace`` of 2.11.0+: heartbeat v1 / v2, SLA monitor, ``pulsar/system``."""
    return namespace_kind(namespace, sla_pattern_v2) is not None


# The last namespace column coded by namespace_codes: replay ticks and repeated requests see the same column
# again, and comparing two lists is much cheaper than coding one. One tuple, replaced whole (thread-safe reads).
_NS_CODES_LAST: tuple[list[str], np.ndarray, dict[str, int]] | None = None


def namespace_codes(namespaces: list[str]) -> tuple[np.ndarray, dict[str, int]]:
    """Integer code per row of a namespace column (codes in first-appearance order) and namespace -> code.

    Memoised for the last column seen, compared by content; the returned array is read-only.
    """
    global _NS_CODES_LAST
    last = _NS_CODES_LAST
    if last is not None and last[0] == namespaces:
        return last[1], last[2]
    column = list(namespaces)
    code = {ns: i for i, ns in enumerate(dict.fromkeys(column))}
    codes = np.fromiter(map(code.__getitem__, column), dtype=np.int64, count=len(column))
    codes.flags.writeable = False
    _NS_CODES_LAST = (column, codes, code)
    return codes, code


@dataclass
class Brokers:
    """One row per broker: ``LocalBrokerData`` as the leader read it."""

    ids: list[str]
    usage: np.ndarray  # (B, 5) resource usage, Pulsar units (cpu %, MiB, MiB, Kbit/s, Kbit/s)
    limit: np.ndarray  # (B, 5)
    msg_rate_in: np.ndarray
    msg_rate_out: np.ndarray
    msg_throughput_in: np.ndarray
    msg_throughput_out: np.ndarray
    num_topics: np.ndarray
    num_consumers: np.ndarray
    num_producers: np.ndarray
    last_update: np.ndarray  # ms
    broker_version: list[str | None]
    load_manager_class_name: list[str | None]
    persistent_topics_enabled: np.ndarray
    non_persistent_topics_enabled: np.ndarray

    @classmethod
    def empty(cls, ids: list[str]) -> "Brokers":
        b = len(ids)
        return cls(
            ids=list(ids),
            usage=np.zeros((b, 5)),
            limit=np.zeros((b, 5)),
            msg_rate_in=np.zeros(b),
            msg_rate_out=np.zeros(b),
            msg_throughput_in=np.zeros(b),
            msg_throughput_out=np.zeros(b),
            num_topics=np.zeros(b, dtype=np.int64),
            num_consumers=np.zeros(b, dtype=np.int64),
            num_producers=np.zeros(b, dtype=np.int64),
            last_update=np.zeros(b, dtype=np.int64),
            broker_version=[None] * b,
            load_manager_class_name=[None] * b,
            persistent_topics_enabled=np.ones(b, dtype=bool),
            non_persistent_topics_enabled=np.ones(b, dtype=bool),
        )

    def __len__(self) -> int:
        return len(self.ids)

    def index(self, broker: str) -> int:
        """Row of ``broker``; -1 if unknown (binary search over the sorted ids)."""
        ids = self.ids
        i = bisect.bisect_left(ids, broker)
        return i if i < len(ids) and ids[i] == broker else -1

    @property
    def msg_rate(self) -> np.ndarray:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> np.ndarray:
        return self.msg_throughput_in + self.msg_throughput_out


@dataclass
class Bundles:
    """One row per bundle the leader knows: the owner's ``lastStats`` entry plus the leader's ``BundleData``."""

    names: list[str]
    namespaces: list[str]
    lower: np.ndarray  # int64
    upper: np.ndarray  # int64
    owner: np.ndarray  # int32 broker row whose lastStats reports the bundle; -1 none
    stats: np.ndarray  # (N, 4) NamespaceBundleStats rates, MESSAGE_FIELDS order
    topics: np.ndarray  # int64 NamespaceBundleStats.topics
    consumer_count: np.ndarray
    producer_count: np.ndarray
    cache_size: np.ndarray
    has_bundle_data: np.ndarray  # bool: present in LoadData.bundleData
    short: np.ndarray  # (N, 4) shortTermData
    short_samples: np.ndarray  # int32 numSamples
    short_max: np.ndarray  # int32 maxSamples (10)
    long: np.ndarray  # (N, 4) longTermData
    long_samples: np.ndarray
    long_max: np.ndarray  # int32 maxSamples (1000)
    bundle_topics: np.ndarray  # BundleData.topics
    preallocated_to: np.ndarray  # int32 broker row holding it in preallocatedBundleData; -1 none

    @classmethod
    def empty(cls, names: list[str]) -> "Bundles":
        n = len(names)
        lower = np.zeros(n, dtype=np.int64)
        upper = np.zeros(n, dtype=np.int64)
        namespaces: list[str] = []
        for i, name in enumerate(names):
            ns, lower[i], upper[i] = bundle_bounds(name)
            namespaces.append(ns)
        return cls(
            names=list(names),
            namespaces=namespaces,
            lower=lower,
            upper=upper,
            owner=np.full(n, -1, dtype=np.int32),
            stats=np.zeros((n, 4)),
            topics=np.zeros(n, dtype=np.int64),
            consumer_count=np.zeros(n, dtype=np.int64),
            producer_count=np.zeros(n, dtype=np.int64),
            cache_size=np.zeros(n, dtype=np.int64),
            has_bundle_data=np.zeros(n, dtype=bool),
            short=np.tile(DEFAULT_MESSAGE_DATA, (n, 1)),
            short_samples=np.zeros(n, dtype=np.int32),
            short_max=np.full(n, NUM_SHORT_SAMPLES, dtype=np.int32),
            long=np.tile(DEFAULT_MESSAGE_DATA, (n, 1)),
            long_samples=np.zeros(n, dtype=np.int32),
            long_max=np.full(n, NUM_LONG_SAMPLES, dtype=np.int32),
            bundle_topics=np.zeros(n, dtype=np.int64),
            preallocated_to=np.full(n, -1, dtype=np.int32),
        )

    def __len__(self) -> int:
        return len(self.names)

    def index(self, bundle: str) -> int:
        """Row of ``bundle``; -1 if unknown (binary search over the sorted names)."""
        names = self.names
        i = bisect.bisect_left(names, bundle)
        return i if i < len(names) and names[i] == bundle else -1


@dataclass
class Membership:
    """Each broker's own ``LocalBrokerData.bundles`` set and ``lastStats`` map, as (broker row, bundle row) pairs.

    Pulsar keeps both per broker (``LocalBrokerData``), so a bundle may sit in two brokers' sets (while it moves
    or around a split) and a broker's ``bundles`` need not equal its ``lastStats`` keys. :class:`LoadData` carries
    a ``Membership`` only then; otherwise the one-owner fast path (``Bundles.owner`` + ``Bundles.stats``) says it
    all. Pairs are sorted by broker row, then bundle row (the sorted visiting order); each ``lastStats`` pair
    carries its own ``NamespaceBundleStats`` (``stats`` in MESSAGE_FIELDS order, ``topics``, sessions, cache).
    """

    owned_broker: np.ndarray  # int64: localData.bundles pairs
    owned_bundle: np.ndarray  # int64
    stats_broker: np.ndarray  # int64: localData.lastStats pairs
    stats_bundle: np.ndarray  # int64
    stats: np.ndarray  # (K, 4)
    topics: np.ndarray  # int64 per lastStats pair
    consumer_count: np.ndarray
    producer_count: np.ndarray
    cache_size: np.ndarray
    stats_rank: np.ndarray | None = None  # per lastStats pair: its place in the report's key order (None: names)

    def shift_bundle_rows(self, remap: np.ndarray) -> None:
        """Bundle rows moved (``insert_bundles``): old row r is now ``remap[r]`` (order is kept)."""
        self.owned_bundle = remap[self.owned_bundle]
        self.stats_bundle = remap[self.stats_bundle]


@dataclass
class LoadData:
    """``LoadData`` plus the leader-only maps the strategies read."""

    brokers: Brokers
    bundles: Bundles
    recently_unloaded_bundles: dict[str, int] = field(default_factory=dict)  # bundle -> unload time (ms)
    preallocated_bundle_to_broker: dict[str, str] = field(default_factory=dict)
    now_ms: int = 0
    # BrokerData.timeAverageData as of the last updateBundleData reset: (short, long), each (B, 4) in
    # MESSAGE_FIELDS order. None -> derived from the bundles (time_average_broker_data).
    tabd: tuple[np.ndarray, np.ndarray] | None = None
    # Per-broker bundles/lastStats when they are not the one-owner view (``Bundles.owner``); None: fast path.
    membership: Membership | None = None
    # Brokers besides ``Bundles.preallocated_to`` whose ``preallocatedBundleData`` also holds the bundle
    # (bundle -> broker ids): a bundle preallocated to A and assigned again to B before A reported it stays in
    # both maps (``ModularLoadManagerImpl.preallocateBundle`` puts it into B's map; nothing removes it from A's).
    preallocated_also: dict[str, list[str]] = field(default_factory=dict)

    def __getstate__(self) -> dict[str, Any]:
        """Copies and pickles leave the derived-value cache of an open :func:`derived_cache` block behind."""
        state = self.__dict__.copy()
        state.pop("_derived", None)
        return state

    def broker_time_average(self) -> tuple[np.ndarray, np.ndarray]:
        """``BrokerData.getTimeAverageData()`` per broker: the stored TABD, else derived from the bundles."""
        return self.tabd if self.tabd is not None else self.time_average_broker_data()

    def owned_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(broker rows, bundle rows) of every broker's ``localData.getBundles()``; within a broker, bundle rows
        ascending (so per-broker sums fold in the sorted visiting order)."""
        m = self.membership
        if m is not None:
            return m.owned_broker, m.owned_bundle
        own = self.bundles.owner
        rows = np.flatnonzero(own >= 0)
        return own[rows].astype(np.int64), rows

    def reported_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(broker rows, bundle rows) of every broker's ``localData.getLastStats()`` keys; within a broker, bundle
        rows ascending."""
        m = self.membership
        if m is not None:
            return m.stats_broker, m.stats_bundle
        return self.owned_pairs()

    def reported_stats(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`reported_pairs` (broker rows, bundle rows) with each entry's ``NamespaceBundleStats``:
        message data (MESSAGE_FIELDS order), topics, consumerCount + producerCount."""
        m = self.membership
        if m is not None:
            return m.stats_broker, m.stats_bundle, m.stats, m.topics, m.consumer_count + m.producer_count
        brokers, rows = self.owned_pairs()
        b = self.bundles
        return brokers, rows, b.stats[rows], b.topics[rows], (b.consumer_count + b.producer_count)[rows]

    def owned_mask(self, broker: int) -> np.ndarray:
        """Bundles in ``brokerData[broker].localData.getBundles()``."""
        m = self.membership
        if m is None:
            return self.bundles.owner == broker
        mask = np.zeros(len(self.bundles), dtype=bool)
        lo, hi = np.searchsorted(m.owned_broker, [broker, broker + 1])
        mask[m.owned_bundle[lo:hi]] = True
        return mask

    def bundle_count(self) -> np.ndarray:
        """``localData.getBundles().size()`` per broker (what the shedders compare with 1)."""
        m = self.membership
        if m is not None:
            return np.bincount(m.owned_broker, minlength=len(self.brokers))
        own = self.bundles.owner
        return np.bincount(own[own >= 0], minlength=len(self.brokers))

    def preallocated_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(broker rows, bundle rows) of every broker's ``preallocatedBundleData``, bundle rows ascending (a bundle
        in several brokers' maps appears once per broker)."""
        pre = self.bundles.preallocated_to
        rows = np.flatnonzero(pre >= 0)
        holders = pre[rows].astype(np.int64)
        if not self.preallocated_also:
            return holders, rows
        extra_b: list[int] = []
        extra_r: list[int] = []
        for bundle, brokers in self.preallocated_also.items():
            r = self.bundles.index(bundle)
            for broker in brokers:
                k = self.brokers.index(broker)
                if r >= 0 and k >= 0:
                    extra_b.append(k)
                    extra_r.append(r)
        all_b = np.concatenate([holders, np.asarray(extra_b, dtype=np.int64)])
        all_r = np.concatenate([rows, np.asarray(extra_r, dtype=np.int64)])
        order = np.lexsort((all_b, all_r))
        return all_b[order], all_r[order]

    def bundle_data_for_load_shedding(self, skips: tuple[str, ...], sla_pattern_v2: bool = False) -> np.ndarray:
        """``LoadData.getBundleDataForLoadShedding()``: ``skips`` are the namespace kinds the line's filter leaves
        out (``VersionProfile.shedding_skips``), with its SLA pattern; one test per namespace (``namespace_codes``)."""
        b = self.bundles
        mask = b.has_bundle_data.copy()
        codes, code = namespace_codes(b.namespaces)
        system = [c for ns, c in code.items() if namespace_kind(ns, sla_pattern_v2) in skips]
        if system:
            mask &= ~np.isin(codes, system)
        return mask

    def shedding_candidates(self, skips: tuple[str, ...], sla_pattern_v2: bool = False) -> np.ndarray:
        """:meth:`bundle_data_for_load_shedding` restricted to not-recently-unloaded bundles."""
        b = self.bundles
        mask = self.bundle_data_for_load_shedding(skips, sla_pattern_v2)
        if self.recently_unloaded_bundles:
            for name in self.recently_unloaded_bundles:
                j = b.index(name)
                if j >= 0:
                    mask[j] = False
        return mask

    def time_average_broker_data(self) -> tuple[np.ndarray, np.ndarray]:
        """``TimeAverageBrokerData.reset``: per broker (short, long) sums over its lastStats bundles (a bundle in
        two brokers' lastStats counts for both).

        Bundles without BundleData contribute the default stats to both sums.
        """
        nb = len(self.brokers)
        b = self.bundles
        holders, rows = self.reported_pairs()
        has = b.has_bundle_data[rows, None]
        short = np.zeros((nb, 4))
        long = np.zeros((nb, 4))
        np.add.at(short, holders, np.where(has, b.short[rows], DEFAULT_MESSAGE_DATA))
        np.add.at(long, holders, np.where(has, b.long[rows], DEFAULT_MESSAGE_DATA))
        return short, long


def tamd_update(values: np.ndarray, num_samples: np.ndarray, max_samples: np.ndarray, sample: np.ndarray) -> None:
    """``TimeAverageMessageData.update`` in place for the selected rows: increment first, then running mean."""
    n = np.minimum(num_samples + 1, max_samples)
    num_samples[:] = n
    with np.errstate(divide="ignore", invalid="ignore"):
        values[:] = ((n[:, None] - 1) * values + sample) / n[:, None]


# getBundleDataOrDefault's metadata-store read: gives those of the rows it finds a stored BundleData for theirs
StoredRead = Callable[[Bundles, np.ndarray], object]


def update_bundle_data(ld: LoadData, stored: StoredRead | None = None) -> None:
    """One ``updateBundleData`` sample: every ``lastStats`` entry of every broker gets ``BundleData.update(stats)``.

    A bundle the leader has no BundleData for starts from its BundleData in the metadata store, where ``stored``
    (that read: it gives the rows it finds their BundleData) finds one, else from default stats with numSamples 0
    (``getBundleDataOrDefault``), so its first sample replaces the defaults. With per-broker sets
    (``ld.membership``) brokers are visited in row order: a bundle in two brokers' lastStats is sampled twice,
    each time with that broker's stats, and each broker's ``TimeAverageBrokerData.reset`` (``ld.tabd``) sums its
    lastStats bundles right after its own samples, as ``ModularLoadManagerImpl.updateBundleData`` does.
    """
    b = ld.bundles
    invalidate_derived(ld)
    if ld.membership is not None:
        _update_bundle_data_per_broker(ld, stored)
        return
    rows = np.flatnonzero(b.owner >= 0)
    if rows.size == 0:
        return
    _sample(b, rows, b.stats[rows], b.topics[rows], stored)


def _sample(b: Bundles, rows: np.ndarray, sample: np.ndarray, topics: np.ndarray, stored: StoredRead | None) -> None:
    """``BundleData.update(stats)`` for distinct ``rows`` (stored, else default BundleData first where there is
    none)."""
    fresh = rows[~b.has_bundle_data[rows]]
    if fresh.size and stored is not None:
        stored(b, fresh)
        fresh = fresh[~b.has_bundle_data[fresh]]
    if fresh.size:
        b.short[fresh] = DEFAULT_MESSAGE_DATA
        b.long[fresh] = DEFAULT_MESSAGE_DATA
        b.short_samples[fresh] = 0
        b.long_samples[fresh] = 0
        b.has_bundle_data[fresh] = True
    sv, sn = b.short[rows], b.short_samples[rows]
    tamd_update(sv, sn, b.short_max[rows], sample)
    b.short[rows], b.short_samples[rows] = sv, sn
    lv, ln = b.long[rows], b.long_samples[rows]
    tamd_update(lv, ln, b.long_max[rows], sample)
    b.long[rows], b.long_samples[rows] = lv, ln
    b.bundle_topics[rows] = topics


def _update_bundle_data_per_broker(ld: LoadData, stored: StoredRead | None) -> None:
    """:func:`update_bundle_data` over ``ld.membership``: one vectorised sample per broker, then its TABD reset."""
    m = ld.membership
    assert m is not None
    b = ld.bundles
    nb = len(ld.brokers)
    short_t = np.zeros((nb, 4))
    long_t = np.zeros((nb, 4))
    bounds = np.searchsorted(m.stats_broker, np.arange(nb + 1)).tolist()
    for k in range(nb):
        lo, hi = bounds[k], bounds[k + 1]
        if lo == hi:
            continue
        rows = m.stats_bundle[lo:hi]
        _sample(b, rows, m.stats[lo:hi], m.topics[lo:hi], stored)
        at = np.full(rows.size, k)
        np.add.at(short_t, at, b.short[rows])  # every row has BundleData now: no default term
        np.add.at(long_t, at, b.long[rows])
    ld.tabd = (short_t, long_t)


def insert_bundles(ld: LoadData, names: list[str]) -> np.ndarray:
    """Add rows for bundles the leader does not know yet, keeping rows sorted by name; returns the rows of ``names``.

    New rows carry no owner, no stats and no BundleData (``has_bundle_data`` False, default message data),
    i.e. what ``getBundleDataOrDefault`` would start from. Existing rows are untouched but may shift.
    """
    b = ld.bundles

    def row_of(bs: Bundles, name: str) -> int:
        i = bisect.bisect_left(bs.names, name)
        return i if i < len(bs.names) and bs.names[i] == name else -1

    rows = [row_of(b, n) for n in names]
    if min(rows, default=0) >= 0:  # every bundle known: nothing moves
        return np.array(rows, dtype=np.int64)
    new = sorted({n for n, r in zip(names, rows) if r < 0})
    if new:
        add = Bundles.empty(new)
        pos = [bisect.bisect_left(b.names, n) for n in new]  # insertion points in the old rows (non-decreasing)
        out = Bundles.empty([])
        for f in fields(Bundles):
            old_col, add_col = getattr(b, f.name), getattr(add, f.name)
            if isinstance(old_col, np.ndarray):
                setattr(out, f.name, np.insert(old_col, pos, add_col, axis=0))
            else:
                merged = list(old_col)
                for k, (p, v) in enumerate(zip(pos, add_col)):
                    merged.insert(p + k, v)
                setattr(out, f.name, merged)
        ld.bundles = out
        if ld.membership is not None:
            old_rows = np.arange(len(b), dtype=np.int64)
            ld.membership.shift_bundle_rows(old_rows + np.searchsorted(np.asarray(pos), old_rows, side="right"))
        invalidate_derived(ld)
    return np.array([row_of(ld.bundles, n) for n in names], dtype=np.int64)


# --- derived-value cache -------------------------------------------------------------------------
class DerivedCache:
    """Per-broker values derived from a ``LoadData`` (usage figures, TABD sums, preallocation sums, masks), kept
    while a :func:`derived_cache` block is open.

    Entries live in three groups with their own invalidation: ``broker`` (from ``Brokers``), ``bundle`` (from the
    bundle rows: reported owner, BundleData) and ``prealloc`` (from ``preallocatedBundleData``). The cache
    remembers the ``Brokers`` / ``Bundles`` objects its entries were computed from, so replacing one of them
    (``insert_bundles``) empties the affected groups by itself. Entries that depend on other objects (the config,
    the policies) are keyed by their identity too; the cache keeps those objects alive, so identities stay unique.
    """

    __slots__ = ("groups", "_brokers", "_bundles", "_refs", "followers")

    def __init__(self) -> None:
        self.groups: dict[str, dict[Any, Any]] = {"broker": {}, "bundle": {}, "prealloc": {}}
        self._brokers: object | None = None
        self._bundles: object | None = None
        self._refs: dict[int, object] = {}
        # (key, value) of the PreallocationFollower entries of "prealloc", in the order they were cached; an entry
        # the group no longer holds (cleared since) is skipped and forgotten by note_preallocation
        self.followers: list[tuple[Any, Any]] = []

    def clear(self) -> None:
        for entries in self.groups.values():
            entries.clear()

    def sync(self, ld: "LoadData") -> None:
        """Drop what no longer matches ``ld``'s ``Brokers`` / ``Bundles`` objects."""
        if self._brokers is not ld.brokers:
            self.clear()
        elif self._bundles is not ld.bundles:
            self.groups["bundle"].clear()
            self.groups["prealloc"].clear()
        self._brokers, self._bundles = ld.brokers, ld.bundles

    def group(self, ld: "LoadData", name: str) -> dict[Any, Any]:
        """The entries of group ``name`` ("broker", "bundle", "prealloc") that are valid for ``ld``."""
        if self._brokers is not ld.brokers or self._bundles is not ld.bundles:
            self.sync(ld)
        return self.groups[name]


@contextmanager
def derived_cache(ld: LoadData) -> Iterator[DerivedCache]:
    """Within the block, per-broker values derived from ``ld`` are computed once and reused (see
    :func:`cached`). Inside it ``ld`` may change only through kernel functions, which keep the cache in step
    (``insert_bundles``, ``update_bundle_data``, preallocation and its clean-up in ``placement``); a caller that
    edits arrays of ``ld`` itself inside the block must call :func:`invalidate_derived`. Nested blocks share
    the outer cache. Outside any block nothing is cached.
    """
    cache = ld.__dict__.get("_derived")
    if cache is not None:
        yield cache
        return
    cache = DerivedCache()
    ld.__dict__["_derived"] = cache
    try:
        yield cache
    finally:
        ld.__dict__.pop("_derived", None)


def cached(ld: LoadData, group: str, key: Any, compute: Callable[[], T], *deps: object) -> T:
    """``compute()``, memoised in ``group`` under ``key`` (and the identities of ``deps``) while a
    :func:`derived_cache` block is open on ``ld``; plain ``compute()`` otherwise."""
    cache: DerivedCache | None = ld.__dict__.get("_derived")
    if cache is None:
        return compute()
    if cache._brokers is not ld.brokers or cache._bundles is not ld.bundles:
        cache.sync(ld)
    entries = cache.groups[group]
    if deps:
        key = (key, id(deps[0])) if len(deps) == 1 else (key, *map(id, deps))
    value = entries.get(key, _MISSING)
    if value is _MISSING:
        for d in deps:
            cache._refs[id(d)] = d
        value = entries[key] = compute()
        if group == "prealloc" and isinstance(value, PreallocationFollower):
            cache.followers.append((key, value))
    return value


_MISSING = object()


def invalidate_derived(ld: LoadData, group: str = "broker") -> None:
    """Forget cached values after ``ld`` changed: ``"prealloc"`` (preallocations), ``"bundle"`` (bundle rows;
    also drops "prealloc"), ``"broker"`` (default: everything)."""
    cache: DerivedCache | None = ld.__dict__.get("_derived")
    if cache is None:
        return
    groups = cache.groups
    groups["prealloc"].clear()
    if group in ("bundle", "broker"):
        groups["bundle"].clear()
    if group == "broker":
        groups["broker"].clear()


class PreallocationFollower:
    """A value in the ``prealloc`` group of a :func:`derived_cache` block that :func:`note_preallocation` keeps up to
    date (:meth:`move`) instead of dropping. Followers are moved in the order they entered the group, so one built
    on :func:`preallocation_sums` (which enters first) reads the moved sums."""

    __slots__ = ()

    def move(self, ld: LoadData, row: int, old: int, new: int) -> None:
        """Bundle ``row`` left broker ``old`` and is now preallocated to ``new`` (-1: none)."""
        raise NotImplementedError
