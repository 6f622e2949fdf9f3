"""``ExtensibleContext``: the leader's view for the extensible load manager (``LoadManagerContext`` + scheduler maps).

Mirrors what ``TransferShedder.findBundlesForUnloading`` and ``BrokerSelectionStrategy.select`` read:
``context.brokerLoadDataStore()`` (``BrokerLoadData``), ``context.topBundleLoadDataStore()``
(``TopBundlesLoadData``), ``brokerRegistry().getAvailableBrokerLookupDataAsync()`` (available brokers and their
``BrokerLookupData``: broker version, load manager class name), the service-unit state channel
(``isOwner``), and ``UnloadScheduler``'s ``recentlyUnloadedBundles`` / ``recentlyUnloadedBrokers``.

Broker rows are the sorted union of every broker named anywhere (load store, top-bundles store, registry). Where
a Java map's iteration order decides (the load store in ``TransferShedder``, the candidate map in
``BrokerVersionFilter``, a broker's bundle stats in the split strategy), the JVM's order is taken from
:mod:`lbreplay.kernel.extensible.map_order`, not from the row order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbreplay.kernel.extensible.broker_load_data import BrokerLoadData
from lbreplay.kernel.extensible.top_k_bundles import HasNamespacePolicies, TopBundlesLoadData
from lbreplay.kernel.resource_usage import RESOURCES

# A broker filter of the extensible pipeline: (ctx, conf, bundle, candidate mask) -> new candidate mask.
# It may raise ``BrokerFilterError`` (``BrokerFilterException``).
BrokerFilterFn = Callable[["ExtensibleContext", Any, str, np.ndarray], np.ndarray]


@dataclass
class ExtensibleContext:
    """Columnar snapshot of the extensible load manager's stores at ``now_ms``.

    * ``load`` rows are meaningful only where ``has_load_data`` (the broker has a ``BrokerLoadData`` entry).
    * ``top`` holds each broker's reported top-bundles list (``top.present`` = has an entry).
    * ``available``: brokers in the broker registry (``getAvailableBrokerLookupDataAsync``).
    * ``broker_version`` / ``load_manager_class_name``: ``BrokerLookupData`` per row; ``None`` (the whole list)
      means "not known", and the filter that needs it is skipped.
    * ``bundle_owners``: service-unit state (bundle -> owner); ``None`` = no ownership check.
    * ``recently_unloaded_bundles`` / ``recently_unloaded_brokers``: the scheduler's maps (name -> ms); the
      shedder removes expired broker entries from the latter, as Pulsar does.
    * ``policies``: optional namespace policies (isolation / anti-affinity presence).
    * ``extra_filters``: broker filters appended to the pipeline (``BrokerIsolationPoliciesFilter``,
      ``AntiAffinityGroupPolicyFilter``, added at ``ExtensibleLoadManagerImpl.initialize``).
    """

    broker_ids: list[str]
    load: BrokerLoadData
    has_load_data: np.ndarray
    top: TopBundlesLoadData
    available: np.ndarray
    now_ms: int
    broker_version: list[str | None] | None = None
    load_manager_class_name: list[str | None] | None = None
    bundle_owners: dict[str, str] | None = None
    recently_unloaded_bundles: dict[str, int] = field(default_factory=dict)
    recently_unloaded_brokers: dict[str, int] = field(default_factory=dict)
    policies: HasNamespacePolicies | None = None
    extra_filters: list[BrokerFilterFn] = field(default_factory=list)
    # anti-affinity counts per (group, policies) (``broker_filters.anti_affinity_counts``): the snapshot does not
    # change while the leader decides, and each bundle of a group would count the whole ownership again
    anti_affinity_memo: dict[tuple[str, int], np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.broker_ids)

    def index(self, broker: str) -> int:
        """Row of ``broker``; -1 if unknown."""
        i = int(np.searchsorted(np.asarray(self.broker_ids, dtype=object), broker)) if self.broker_ids else 0
        return i if i < len(self.broker_ids) and self.broker_ids[i] == broker else -1

    def drop_brokers(self, rows: np.ndarray) -> None:
        """The brokers of ``rows`` gone from the stores: not available, no ``BrokerLoadData`` (``new
        BrokerLoadData()`` values), no ``TopBundlesLoadData`` entry."""
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        self.available[rows] = False
        self.has_load_data[rows] = False
        self.load.clear(rows)
        self.top = self.top.without(rows)
        self.anti_affinity_memo.clear()

    def is_owner(self, bundle: str, broker: int) -> bool:
        """``ServiceUnitStateChannel.isOwner(bundle, broker)``; always true without an ownership snapshot."""
        if self.bundle_owners is None:
            return True
        return self.bundle_owners.get(bundle) == self.broker_ids[broker]

    @classmethod
    def build(
        cls,
        now_ms: int,
        load: Mapping[str, Mapping[str, Any]] | None = None,
        top_bundles: Mapping[str, Sequence[tuple[str, Sequence[float]]]] | None = None,
        available: Sequence[str] | None = None,
        *,
        lookup: Mapping[str, Mapping[str, Any]] | None = None,
        bundle_owners: Mapping[str, str] | None = None,
        recently_unloaded_bundles: Mapping[str, int] | None = None,
        recently_unloaded_brokers: Mapping[str, int] | None = None,
        policies: HasNamespacePolicies | None = None,
        extra_filters: Sequence[BrokerFilterFn] = (),
    ) -> "ExtensibleContext":
        """Build from plain mappings (broker id -> values). ``available`` defaults to the brokers with load data.

        ``load[b]`` keys: ``usage``/``limit`` (5 values, resource order) or the Pulsar resource names with
        ``{"usage", "limit"}``; ``msgThroughputIn``, ``msgThroughputOut``, ``msgRateIn``, ``msgRateOut``,
        ``bundleCount``, ``topics``, ``maxResourceUsage``, ``weightedMaxEMA``, ``msgThroughputEMA``,
        ``updatedAt``, ``reportedAt`` (missing: ``new BrokerLoadData()`` values).
        ``top_bundles[b]``: ``(bundle, (thrIn, thrOut, rateIn, rateOut[, topics, consumers, producers, cache]))``
        in the broker's list order. ``lookup[b]``: ``brokerVersion`` / ``loadManagerClassName``.
        """
        load = dict(load or {})
        top_bundles = dict(top_bundles or {})
        avail = sorted(set(available)) if available is not None else sorted(load)
        ids = sorted(set(load) | set(top_bundles) | set(avail) | set(lookup or {}))
        pos = {b: i for i, b in enumerate(ids)}
        n = len(ids)
        store = BrokerLoadData.empty(n)
        has = np.zeros(n, dtype=bool)
        for b, d in load.items():
            i = pos[b]
            has[i] = True
            if "usage" in d and not isinstance(d["usage"], Mapping):
                store.usage[i] = np.asarray(d["usage"], dtype=np.float64)
                store.limit[i] = np.asarray(d["limit"], dtype=np.float64)
            else:
                for r, res in enumerate(RESOURCES):
                    ru = d.get(res) or {}
                    store.usage[i, r] = float(ru.get("usage", 0.0))
                    store.limit[i, r] = float(ru.get("limit", 0.0))
            store.msg_throughput_in[i] = float(d.get("msgThroughputIn", 0.0))
            store.msg_throughput_out[i] = float(d.get("msgThroughputOut", 0.0))
            store.msg_rate_in[i] = float(d.get("msgRateIn", 0.0))
            store.msg_rate_out[i] = float(d.get("msgRateOut", 0.0))
            store.bundle_count[i] = int(d.get("bundleCount", 0))
            store.topics[i] = int(d.get("topics", 0))
            store.max_resource_usage[i] = float(d.get("maxResourceUsage", 1.0))
            store.weighted_max_ema[i] = float(d.get("weightedMaxEMA", 1.0))
            store.msg_throughput_ema[i] = float(d.get("msgThroughputEMA", 0.0))
            store.updated_at[i] = int(d.get("updatedAt", 0))
            store.reported_at[i] = int(d.get("reportedAt", 0))
        top = TopBundlesLoadData.from_lists([top_bundles.get(b) for b in ids])
        av = np.zeros(n, dtype=bool)
        for b in avail:
            av[pos[b]] = True
        versions: list[str | None] | None = None
        classes: list[str | None] | None = None
        if lookup is not None:
            versions = [(lookup.get(b) or {}).get("brokerVersion") for b in ids]
            classes = [(lookup.get(b) or {}).get("loadManagerClassName") for b in ids]
        return cls(
            broker_ids=ids,
            load=store,
            has_load_data=has,
            top=top,
            available=av,
            now_ms=int(now_ms),
            broker_version=versions,
            load_manager_class_name=classes,
            bundle_owners=None if bundle_owners is None else dict(bundle_owners),
            recently_unloaded_bundles=dict(recently_unloaded_bundles or {}),
            recently_unloaded_brokers=dict(recently_unloaded_brokers or {}),
            policies=policies,
            extra_filters=list(extra_filters),
        )

    @classmethod
    def from_snapshot(
        cls,
        snap: Any,
        now_ms: int,
        *,
        lookup: Mapping[str, Mapping[str, Any]] | None = None,
        policies: HasNamespacePolicies | None = None,
        extra_filters: Sequence[BrokerFilterFn] = (),
    ) -> "ExtensibleContext":
        """From a parsed ``extensible`` request block (``pulsar_json.ExtensibleSnapshot``: ``brokerLoadData``,
        ``topBundlesLoadData``, ``recentlyUnloadedBundles``, ``recentlyUnloadedBrokers``, ``availableBrokers``,
        ``bundleOwners``); the reported EMAs are used as they are."""
        load: dict[str, dict[str, Any]] = {}
        for b, d in snap.brokerLoadData.items():
            load[b] = {
                "usage": [d.resources[r].usage for r in RESOURCES],
                "limit": [d.resources[r].limit for r in RESOURCES],
                **{k: getattr(d, k) for k in (
                    "msgThroughputIn", "msgThroughputOut", "msgRateIn", "msgRateOut", "bundleCount", "topics",
                    "maxResourceUsage", "weightedMaxEMA", "msgThroughputEMA", "updatedAt", "reportedAt")},
            }
        top: dict[str, list[tuple[str, list[float]]]] = {}
        for b, t in snap.topBundlesLoadData.items():
            top[b] = [(name, [s.msgThroughputIn, s.msgThroughputOut, s.msgRateIn, s.msgRateOut,
                              s.topics, s.consumerCount, s.producerCount, s.cacheSize]) for name, s in t.entries]
        return cls.build(
            now_ms, load, top, snap.availableBrokers, lookup=lookup, bundle_owners=snap.bundleOwners,
            recently_unloaded_bundles=snap.recentlyUnloadedBundles,
            recently_unloaded_brokers=snap.recentlyUnloadedBrokers, policies=policies, extra_filters=extra_filters,
        )

