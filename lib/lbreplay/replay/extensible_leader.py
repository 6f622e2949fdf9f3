"""The replay's driver of ``ExtensibleLoadManagerImpl`` (PIP-192): ``BrokerLoadDataReporter``, ``TopKBundles``,
``UnloadScheduler`` + ``TransferShedder``, ``SplitScheduler`` + ``DefaultNamespaceBundleSplitStrategyImpl`` and
the extensible ``LeastResourceUsageWithWeight`` assignment, on the replay's ownership.

* Every tick each live broker's ``BrokerLoadData`` is updated once per ``loadBalancerReportUpdateMinIntervalMillis``
  elapsed (the EMA steps every 5 s with the same host usage); it is *published* (what the leader reads) when the
  10 % / 15 min rule holds (in an audit: when the history shows a new report), together with the broker's top-K
  bundle list; entries of brokers that left stay in the store (TransferShedder ages them out by
  ``loadBalancerBrokerLoadDataTTLInSeconds``), except in a recording: there a broker gone from the held view (its
  registry znode deleted, ``broker_departure``) is dropped from the stores by ``ExtensibleLoadManager.refresh``
  (``ServiceUnitStateChannelImpl.doCleanup``).
* An audit of an extensible recording (``LoadView.recorded``) publishes each held version's BrokerLoadData as the
  broker published it (its ``weightedMaxEMA``, ``updatedAt``, ...) and its top bundles list in the published order
  (``TopKBundles``' order depends on the broker's stats map iteration, so it is not recomputed); with the leader's
  election known (``LoadView.timer_minute``) the ``UnloadScheduler`` and the split check run at its timer
  minutes (fixed rate from ``playLeader``), not at report versions.
* The service-unit state (``bundle_owners``) is the replay's ownership.
* A transfer moves the bundle to its destination (``TRANSFER``); an unload without transfer leaves it unowned
  until the assignment step places it (``UNLOAD`` then ``ASSIGN``). An audit records decisions only.
* Splits run every ``loadBalancerSplitIntervalMinutes`` on each broker's current bundle stats; children stay
  with the owner (extensible splits never unload).
"""

from __future__ import annotations

import numpy as np

from lbreplay.kernel.broker_report import WrittenReports
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.broker_filters import POLICY_FILTERS
from lbreplay.kernel.extensible.broker_load_data import BrokerLoadData
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.extensible.extensible_load_manager import (
    PLACEMENT_STRATEGY,
    SHEDDING_STRATEGY,
    ExtensibleLoadManager,
)
from lbreplay.kernel.extensible.split_scheduler import SPLIT_STRATEGY
from lbreplay.kernel.extensible.top_k_bundles import TopBundlesLoadData, top_k_bundles
from lbreplay.kernel.load_manager import LeaderTimers, create_load_manager
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.strategy import Unload
from lbreplay.replay.ownership import Ownership
from lbreplay.replay.records import SESSIONS, TOPICS, Decision, LoadView

TopBundleList = list[tuple[str, list[float]]]


class ExtensibleLeader:
    """Cross-tick state of the extensible load manager for one replay."""

    def __init__(self, conf: PulsarConfig, broker_ids: list[str], policies: NamespacePolicies | None,
                 rng: np.random.Generator) -> None:
        n = len(broker_ids)
        self.conf = conf
        self.broker_ids = broker_ids
        self.policies = policies
        self.rng = rng
        self.strategy = SHEDDING_STRATEGY
        manager = create_load_manager(conf, policies, rng)
        assert isinstance(manager, ExtensibleLoadManager)
        self.manager = manager
        self.live = BrokerLoadData.empty(n)  # each broker's own, updated every 5 s
        self.published = BrokerLoadData.empty(n)  # the store the leader reads
        self.reports = WrittenReports(n)
        self.top_lists: list[TopBundleList | None] = [None] * n
        self.recently_unloaded_bundles: dict[str, int] = {}
        self.recently_unloaded_brokers: dict[str, int] = {}
        self.last_report_ms: int | None = None
        self.timers = LeaderTimers(conf)  # the UnloadScheduler's timer
        self.moved: set[int] = set()  # closed loop: brokers a decision moved a bundle from or to
        self._alive: np.ndarray | None = None  # the brokers the last tick held (one gone: the stores' clean-up)

    def tick(self, view: LoadView, ownership: Ownership) -> list[Decision]:
        if view.recorded is not None and view.apply:  # the closed loop of an extensible recording
            self._report(view, ownership)  # the top bundles lists of the replay's ownership
            computed = list(self.top_lists)
            self._publish_recorded(view, ownership)  # as recorded: BrokerLoadData and top bundles lists
            self._shift_recorded(view)  # plus the modelled change of each broker's load
            self._keep_own_lists(view, ownership, computed)
        elif view.recorded is not None:
            self._publish_recorded(view, ownership)
        else:
            self._report(view, ownership)
        self._refresh(view, ownership)
        minute = view.timer_minute  # None: no recorded election, the tasks run by the ticks' own clock
        decisions = self._split(view, ownership) if minute is None or minute > 0 else []
        to_assign: list[str] = []
        if self.timers.shedding_due(view.ts_ms, minute):
            decisions += self._shed(view, ownership, to_assign)
        pending = list(dict.fromkeys(to_assign + ownership.layout.unowned()))
        if pending and view.alive.any() and view.apply:
            decisions += self._assign(pending, view, ownership)
        return decisions

    def _refresh(self, view: LoadView, ownership: Ownership) -> None:
        """A recorded broker gone (its registry znode deleted, ``broker_departure``; the held view no longer holds
        it): ``ExtensibleLoadManager.refresh`` drops it from the stores. A generated history keeps the entries of a
        broker that died (``TransferShedder`` ages them out by ``loadBalancerBrokerLoadDataTTLInSeconds``)."""
        gone = np.zeros(0, dtype=np.int64)
        if view.listings is not None and self._alive is not None:
            gone = np.flatnonzero(self._alive & ~view.alive)
        self._alive = view.alive.copy()
        if gone.size:
            dropped = self.manager.refresh(self._context(view, ownership), [self.broker_ids[b] for b in gone])
            for b in dropped:  # the driver's copy of the top-bundles store follows the kernel's clean-up
                self.top_lists[self.broker_ids.index(b)] = None

    def score(self, weighted_max: np.ndarray) -> np.ndarray:
        """The EMA of each broker's weighted max usage as published (``BrokerLoadData.weightedMaxEMA``)."""
        return self.published.weighted_max_ema.copy()

    def _report(self, view: LoadView, ownership: Ownership) -> None:
        """BrokerLoadDataReporter + TopBundleLoadDataReporter for this tick."""
        conf = self.conf
        tot, nb = view.totals, view.num_bundles
        rows = np.flatnonzero(view.alive)
        step_ms = int(conf["loadBalancerReportUpdateMinIntervalMillis"])
        steps = 1 if self.last_report_ms is None else max(1, int((view.ts_ms - self.last_report_ms) // step_ms))
        self.last_report_ms = view.ts_ms
        for k in range(steps):
            self.live.update(rows, view.usage[rows], view.limit[rows], tot[rows, 0], tot[rows, 1], tot[rows, 2],
                             tot[rows, 3], nb[rows].astype(np.int64), tot[rows, 5].astype(np.int64),
                             view.ts_ms - (steps - 1 - k) * step_ms, conf)
        rate, thr, usage = view.msg_rate, view.msg_throughput, self.live.max_resource_usage
        write = view.alive & self.reports.due(view.ts_ms, rate, thr, nb, usage, conf)
        if view.observed_writes is not None:
            write = view.observed_writes
        w = np.flatnonzero(write)
        if w.size == 0:
            return
        self.published.copy_rows(w, self.live, w)
        self.published.reported_at[w] = view.ts_ms
        self.reports.record(w, view.ts_ms, rate, thr, nb, usage)
        layout = ownership.layout
        k = int(conf["loadBalancerMaxNumberOfBundlesInBundleLoadReport"])
        for b in w:
            own = np.flatnonzero(layout.owner == b)
            if own.size == 0:
                self.top_lists[b] = []
                continue
            names = [layout.names[i] for i in own]
            v = view.bundle_values[own]
            idx = top_k_bundles(names, v[:, :4], v[:, TOPICS].astype(np.int64), v[:, SESSIONS].astype(np.int64),
                                np.zeros(own.size, dtype=np.int64), np.zeros(own.size, dtype=np.int64), k, conf,
                                self.policies)
            self.top_lists[b] = [(names[i], [*v[i, :4].tolist(), float(v[i, TOPICS]), float(v[i, SESSIONS]), 0.0,
                                             0.0]) for i in idx]

    def _publish_recorded(self, view: LoadView, ownership: Ownership) -> None:
        """Audit of an extensible recording: the store holds each held broker's latest BrokerLoadData and top
        bundles list as recorded (``BrokerLoadDataReporter`` / ``TopBundleLoadDataReporter`` published them); none
        of a broker whose last TopBundlesLoadData message removed its entry (``TopBundleLoadDataReporter.tombstone``)
        or listed nothing, until its next list."""
        rec = view.recorded
        assert rec is not None
        self.published.clear(np.flatnonzero(view.alive & np.isnan(rec["updated_at_ms"])))  # tombstoned: no load data
        w = np.flatnonzero(view.alive & ~np.isnan(rec["updated_at_ms"]))
        p = self.published
        p.usage[w], p.limit[w] = view.usage[w], view.limit[w]
        for name in ("weighted_max_ema", "msg_throughput_ema", "max_resource_usage", "msg_throughput_in",
                     "msg_throughput_out", "msg_rate_in", "msg_rate_out"):
            getattr(p, name)[w] = np.nan_to_num(rec[name][w])
        for name, key in (("bundle_count", "bundle_count"), ("topics", "topics"), ("updated_at", "updated_at_ms"),
                          ("reported_at", "reported_at_ms")):
            getattr(p, name)[w] = np.nan_to_num(rec[key][w]).astype(np.int64)
        if view.listings is None:
            return
        lb, li, lv = view.listings  # each broker's entries in its published list's order
        names = ownership.layout.names
        cleared = rec.get("top_bundles_cleared")
        for b in w.tolist():
            if cleared is not None and cleared[b] == 1:  # its entry removed (a tombstone) or its list empty
                self.top_lists[b] = None
                continue
            mine = np.flatnonzero(lb == b)
            self.top_lists[b] = [(names[li[i]], [*lv[i, :4].tolist(), float(lv[i, TOPICS]), float(lv[i, SESSIONS]),
                                                 0.0, 0.0]) for i in mine]

    def _keep_own_lists(self, view: LoadView, ownership: Ownership, computed: list[TopBundleList | None]) -> None:
        """A broker a closed-loop decision moved a bundle from or to, or whose recorded list names a bundle the
        replay's layout lacks or another broker owns, publishes the list of its own bundles (``TopKBundles``);
        the others the list they published (its order is the broker's, not recomputed)."""
        if view.listings is None:
            return
        lb, rows, _ = view.listings
        owner = ownership.layout.owner
        for b in range(len(self.broker_ids)):
            mine = rows[lb == b]
            if b in self.moved or (mine < 0).any() or (owner[mine[mine >= 0]] != b).any():
                self.top_lists[b] = computed[b]

    def _shift_recorded(self, view: LoadView) -> None:
        """Closed loop of an extensible recording: each broker's recorded BrokerLoadData moved by the modelled
        change of its load against the recording (weighted max usage and its EMA; msg rates and throughput are the
        replay's), so it equals the recorded one while the replay's ownership is the recording's."""
        rec = view.recorded
        assert rec is not None
        w = np.flatnonzero(view.alive & ~np.isnan(rec["updated_at_ms"]))
        p, change, tot = self.published, rec["weighted_max_change"], view.totals
        p.weighted_max_ema[w] = np.maximum(p.weighted_max_ema[w] + change[w], 0.0)
        p.max_resource_usage[w] = np.maximum(p.max_resource_usage[w] + change[w], 0.0)
        moved = np.abs(change[w]) > 1e-12
        if moved.any():
            r = w[moved]
            p.msg_throughput_in[r], p.msg_throughput_out[r] = tot[r, 0], tot[r, 1]
            p.msg_rate_in[r], p.msg_rate_out[r] = tot[r, 2], tot[r, 3]

    def _context(self, view: LoadView, ownership: Ownership) -> ExtensibleContext:
        layout = ownership.layout
        ids = self.broker_ids
        owners = {n: ids[o] for n, o in zip(layout.names, layout.owner) if o >= 0}
        return ExtensibleContext(
            broker_ids=ids, load=self.published, has_load_data=self.published.updated_at > 0,
            top=TopBundlesLoadData.from_lists(self.top_lists), available=view.alive.astype(bool).copy(),
            now_ms=view.ts_ms, bundle_owners=owners, recently_unloaded_bundles=self.recently_unloaded_bundles,
            recently_unloaded_brokers=self.recently_unloaded_brokers, policies=self.policies,
            extra_filters=list(POLICY_FILTERS),
        )

    def _shed(self, view: LoadView, ownership: Ownership, to_assign: list[str]) -> list[Decision]:
        """UnloadScheduler: issue the TransferShedder's decisions on bundles of the layout."""
        ctx = self._context(view, ownership)
        row_of = ownership.layout.rows()
        index = {b: i for i, b in enumerate(self.broker_ids)}
        out = []

        def issue(u: Unload) -> bool:
            row = row_of.get(u.bundle)
            if row is None:
                return False
            action = "UNLOAD" if u.destination is None else "TRANSFER"
            if view.apply:
                self.moved.update(index[b] for b in (u.broker, u.destination) if b in index)
                ownership.set_owner(row, -1 if u.destination is None else index[u.destination])
                if u.destination is None:
                    to_assign.append(u.bundle)
            out.append(view.decision(action, u.bundle, u.broker, u.destination, u.reason, self.strategy, u.details))
            return True

        self.manager.shed(ctx, view.ts_ms, issue=issue)
        return out

    def _split(self, view: LoadView, ownership: Ownership) -> list[Decision]:
        """SplitScheduler: the split strategy on every broker's current bundle stats. The owners' own timers are not
        recorded: the check goes by the leader's timer minute (a tick at the leader's logged run is that late)."""
        layout = ownership.layout
        ids = self.broker_ids
        owned = np.flatnonzero(layout.owner >= 0)
        vals = view.bundle_values
        found = self.manager.check_split(
            view.ts_ms - (view.timer_lag_ms or 0), reporter=[ids[layout.owner[i]] for i in owned],
            bundles=[layout.names[i] for i in owned],
            namespaces=[layout.namespace[i] for i in owned], lower=layout.lower[owned], upper=layout.upper[owned],
            msg_rate=vals[owned, 2] + vals[owned, 3], msg_throughput=vals[owned, 0] + vals[owned, 1],
            topics=vals[owned, TOPICS].astype(np.int64), sessions=vals[owned, SESSIONS].astype(np.int64),
            bundle_count_per_namespace=layout.counts_per_namespace(),
        )
        owner_of = dict(zip(layout.names, layout.owner.tolist()))
        out = []
        for d in found:
            if not d.ok or d.bundle not in owner_of:
                continue
            parent = owner_of[d.bundle]
            if view.apply:  # the what-if applies the split; an audit only records it
                ownership.split(d.bundle, list(d.children), False)
            src = ids[parent] if parent >= 0 else d.broker
            out.append(view.decision("SPLIT", d.bundle, src, src, d.reason, SPLIT_STRATEGY, d.details,
                                     children=list(d.children)))
        return out

    def _assign(self, bundles: list[str], view: LoadView, ownership: Ownership) -> list[Decision]:
        """Extensible assignment: the broker filter pipeline, then LeastResourceUsageWithWeight (extensions)."""
        ctx = self._context(view, ownership)
        layout = ownership.layout
        row_of = layout.rows()
        unowned = [b for b in bundles if b in row_of and layout.owner[row_of[b]] < 0]
        index = {b: i for i, b in enumerate(self.broker_ids)}
        out = []
        for bundle, broker in self.manager.assign(unowned, ctx):
            if broker is None:
                continue
            ownership.set_owner(row_of[bundle], index[broker])
            self.moved.add(index[broker])
            out.append(view.decision("ASSIGN", bundle, None, broker, "Assignment", PLACEMENT_STRATEGY))
        return out
