"""``ExtensibleLoadManagerImpl`` (PIP-192) on the leader: its unload and split schedulers and its assignment."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, MutableMapping
from typing import Any

import numpy as np

from lbreplay.kernel.bundle_split import SplitDecision
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.broker_filters import filter_brokers
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.extensible.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from lbreplay.kernel.extensible.split_scheduler import SPLIT_STRATEGY, SplitScheduler
from lbreplay.kernel.extensible.transfer_shedder import TransferShedder
from lbreplay.kernel.extensible.unload_scheduler import UnloadScheduler
from lbreplay.kernel.modular_load_manager import RunClock, Shedding, Splitting, restore_component
from lbreplay.kernel.naming import parse_bundle_name
from lbreplay.kernel.split_algorithms import TopicStats
from lbreplay.kernel.strategy import Unload

PLACEMENT_STRATEGY = "LeastResourceUsageWithWeight"
SHEDDING_STRATEGY = "TransferShedder"


class ExtensibleLoadManager:
    """The extensible leader's strategies: ``TransferShedder`` in the ``UnloadScheduler``,
    ``DefaultNamespaceBundleSplitStrategyImpl`` in the ``SplitScheduler``, ``LeastResourceUsageWithWeight``.
    ``conf`` and ``rng`` serve :meth:`shed` and :meth:`assign` (the ``kernel.load_manager`` interface)."""

    family = "extensible"

    def __init__(self, shedder: TransferShedder | None = None, *, conf: PulsarConfig | None = None,
                 rng: np.random.Generator | None = None) -> None:
        self.unload_scheduler = UnloadScheduler(shedder)
        self.split_scheduler = SplitScheduler()
        self.selector = LeastResourceUsageWithWeight()
        self.conf = conf if conf is not None else PulsarConfig.resolve({})
        self.rng = rng if rng is not None else np.random.default_rng(0)
        # what this leader assigned before (decide's carried ``assigned``); None: not kept (the replay's ownership
        # is the service-unit state)
        self.assigned: dict[str, str] | None = None

    @property
    def shedder(self) -> TransferShedder:
        return self.unload_scheduler.shedder

    def class_names(self) -> tuple[str, str]:
        """The shedding and placement strategies' short names."""
        return SHEDDING_STRATEGY, PLACEMENT_STRATEGY

    def select_broker(self, ctx: ExtensibleContext, conf: PulsarConfig, bundle: str,
                      rng: np.random.Generator) -> int:
        """``ExtensibleLoadManagerImpl.selectAsync``: the broker filter pipeline, then the placement strategy;
        the broker row, -1 when no broker is left."""
        candidates = filter_brokers(ctx, conf, bundle)
        if candidates is None or not candidates.any():
            return -1
        return self.selector.select(candidates, ctx, conf, rng)

    def refresh(self, view: ExtensibleContext, departed: Iterable[str] = ()) -> list[str]:
        """The leader's stores on a broker's deletion: the ``BrokerRegistry`` listener takes it out of the available
        set and ``ServiceUnitStateChannelImpl.doCleanup`` removes its ``BrokerLoadData`` and ``TopBundlesLoadData``
        entries (``LoadDataStore.removeAsync``, 4.0.7), so a broker that returns starts afresh. Returns the brokers
        dropped (those of ``departed`` the view knows)."""
        rows = [r for r in (view.index(b) for b in sorted(set(departed))) if r >= 0]
        if rows:
            view.drop_brokers(np.asarray(rows, dtype=np.int64))
        return [view.broker_ids[r] for r in rows]

    def shed(self, view: ExtensibleContext, now_ms: int, clock: RunClock | None = None,
             issue: Callable[[Unload], bool] | None = None) -> Shedding:
        """``UnloadScheduler.execute`` on the leader's stores (``view.now_ms`` is the scheduler's clock)."""
        return self.unload_scheduler.execute(view, self.conf, issue)

    def assign(self, bundles: Iterable[str], view: ExtensibleContext,
               assigned: MutableMapping[str, str] | None = None) -> list[tuple[str, str | None]]:
        """``ExtensibleLoadManagerImpl.assign`` for each bundle in order: the owner the service-unit state channel
        has (``view.bundle_owners``, or ``assigned``: what this leader assigned before), else ``selectAsync``;
        each new choice goes into ``assigned``."""
        owners = view.bundle_owners or {}
        assigned = self.assigned if assigned is None else assigned
        out: list[tuple[str, str | None]] = []
        for bundle in bundles:
            owner = owners.get(bundle) or (assigned.get(bundle) if assigned is not None else None)
            if owner is None:
                row = self.select_broker(view, self.conf, bundle, self.rng)
                owner = view.broker_ids[row] if row >= 0 else None
                if owner is not None and assigned is not None:
                    assigned[bundle] = owner
            out.append((bundle, owner))
        return out

    def check_split(self, now_ms: int, **bundle_stats: Any) -> list[SplitDecision]:
        """``SplitScheduler.execute`` when its timer is due (every ``loadBalancerSplitIntervalMinutes``, the first
        run at once): the split strategy over every broker's own bundle stats (``BrokerService.getBundleStats()``:
        every bundle it owns, not only its top-K list; the keyword rows of ``find_bundles_to_split``); nothing when
        it is not due. The replay's split cycle (the modular ``check_split``'s counterpart)."""
        if not self.split_scheduler.due(now_ms, self.conf):
            return []
        return self.split_scheduler.find(self.conf, **bundle_stats)

    def split(self, view: ExtensibleContext, layouts_for: Callable[[Iterable[str]], Mapping[str, np.ndarray]],
              topics: Mapping[str, TopicStats] | None = None) -> Splitting:
        """``SplitScheduler.execute`` on the top-bundles store: every reporting broker's bundle stats (its
        ``BrokerService.getBundleStats()`` is a map: a bundle listed twice counts once, with its last entry), brokers
        and bundles in sorted order."""
        top = view.top
        rows: list[tuple[str, str, int]] = []
        for b in np.flatnonzero(top.present).tolist():
            last = {top.names[k]: k for k in range(int(top.offsets[b]), int(top.offsets[b + 1]))}
            rows += [(view.broker_ids[b], name, last[name]) for name in sorted(last)]
        parsed = [parse_bundle_name(name) for _, name, _ in rows]
        namespaces = [p[0] for p in parsed]
        layouts = layouts_for(namespaces)
        k = np.asarray([r[2] for r in rows], dtype=np.int64)
        st = top.stats[k]
        owners = view.bundle_owners
        found = self.split_scheduler.find(
            self.conf, reporter=[r[0] for r in rows], bundles=[r[1] for r in rows], namespaces=namespaces,
            lower=[p[1] for p in parsed], upper=[p[2] for p in parsed],
            msg_rate=(st[:, 2] + st[:, 3]).tolist(), msg_throughput=(st[:, 0] + st[:, 1]).tolist(),
            topics=top.topics[k].tolist(), sessions=(top.consumer_count[k] + top.producer_count[k]).tolist(),
            bundle_count_per_namespace={ns: int(v.size - 1) for ns, v in layouts.items()},
            owner=None if owners is None else [owners.get(r[1], "") for r in rows],
            topic_stats=topics, running=[view.broker_ids[b] for b in np.flatnonzero(top.present).tolist()],
        )
        return Splitting(list(found), self.split_scheduler.splitter.stats())

    def owner(self, view: ExtensibleContext, bundle: str) -> str | None:
        """The service-unit state's owner of ``bundle``; without one, the first broker (sorted) whose top-bundles
        list names it."""
        if view.bundle_owners is not None:
            return view.bundle_owners.get(bundle)
        top = view.top
        for b in np.flatnonzero(top.present).tolist():
            if bundle in top.names[int(top.offsets[b]):int(top.offsets[b + 1])]:
                return view.broker_ids[b]
        return None

    # --- the leader's state between two calls (decide's ``strategyState``) -----------------------------
    def set_state(self, state: Mapping[str, Any], view: ExtensibleContext, given: Collection[str] = ()) -> None:
        """Restore ``strategyState``: ``TransferShedder`` and the split strategy when the same class saved them,
        the ``UnloadScheduler``'s ``recentlyUnloadedBundles`` / ``recentlyUnloadedBrokers`` unless the view already
        has the scheduler's map (``given``: ``UnloadScheduler.execute`` passes it to the strategy), and what this
        leader assigned."""
        restore_component(self.shedder, state.get("shedding"), SHEDDING_STRATEGY, "shedding")
        restore_component(self.split_scheduler.splitter, state.get("split"), SPLIT_STRATEGY, "split")
        saved = state.get("extensible") or {}
        for key, target in (("recentlyUnloadedBundles", view.recently_unloaded_bundles),
                            ("recentlyUnloadedBrokers", view.recently_unloaded_brokers)):
            if key not in given:
                for name, ts in (saved.get(key) or {}).items():
                    target[str(name)] = int(ts)
        self.assigned = {str(k): str(v) for k, v in (saved.get("assigned") or {}).items()}

    def get_state(self, view: ExtensibleContext) -> dict[str, Any]:
        """``strategyState`` after the call: both strategies' state and the scheduler's maps."""
        return {
            "shedding": {"class": SHEDDING_STRATEGY, "state": self.shedder.get_state()},
            "split": {"class": SPLIT_STRATEGY, "state": self.split_scheduler.splitter.get_state()},
            "extensible": {
                "recentlyUnloadedBundles": dict(sorted(view.recently_unloaded_bundles.items())),
                "recentlyUnloadedBrokers": dict(sorted(view.recently_unloaded_brokers.items())),
                "assigned": dict(sorted((self.assigned or {}).items())),
            },
        }
