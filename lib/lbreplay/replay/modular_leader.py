"""The replay's driver of ``ModularLoadManagerImpl``: the leader's report/update/split/shed/assign cycle on
the replay's ownership.

Each tick
1. brokers write reports by Pulsar's 10 % / 15 min rule (``kernel.broker_report``; in an audit: when the
   history shows a new report): the leader only sees the last written report, bundles included;
2. each written report, and each broker gone (its znode deleted, ``broker_departure``), triggers ``updateAll``
   (``ModularLoadManager.update_all``) = ``cleanupDeadBrokersData`` (``onActiveBrokersChange`` on both strategies;
   also when a broker comes or goes) and one ``updateBundleData`` sample of every reported bundle, and the 15-min
   bundle-data write (``LoadResourceQuotaUpdaterTask`` -> ``writeBundleDataOnZooKeeper``) one more
   (PULSAR-LB-SPEC.md §1.7); the split check (``checkNamespaceBundleSplit``) ends ``updateAll``, so it runs after
   such a notification only;
3. every ``loadBalancerSheddingIntervalMinutes`` the leader runs ``doLoadShedding`` (``LoadSheddingTask``): in a
   recording whose leader's election is known, at the timer minutes it started (``kernel.leader_election``),
   else at the first tick an interval after the last run;
4. orphans and split children are placed with ``selectBrokerForAssignment`` (closed loop only). In an audit of a
   recording whose leader is known, the split children's lookups are replayed too: the leader preallocates them
   (``preallocateBundle``), and its next placements and shedding destinations count them until ``updateBundleData``
   drops them (every preallocation the leader itself does not own, ``getOwnedServiceUnits()``). An audit of a
   recording with placement lines (``leader_placement``) replays the lookups its leader logged instead, each at
   the start of the first tick at or after it, on the LoadData the previous tick left (ASSIGN decisions).
"""

from __future__ import annotations

import functools

import numpy as np

from lbreplay.kernel.broker_report import WrittenReports
from lbreplay.kernel.config import PulsarConfig, short_class
from lbreplay.kernel.load_data import (
    Brokers,
    Bundles,
    LoadData,
    Membership,
    derived_cache,
    insert_bundles,
    invalidate_derived,
)
from lbreplay.kernel.load_manager import LeaderTimers, ModularLoadManager, create_load_manager
from lbreplay.kernel.modular_load_manager import RunClock
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.version_profile import profile_for
from lbreplay.replay.ownership import Layout, Ownership
from lbreplay.replay.records import (
    KEPT_REASON,
    RATE_IN,
    RATE_OUT,
    SESSIONS,
    THR_IN,
    THR_OUT,
    TOPICS,
    Decision,
    LoadView,
    with_draw,
)
from lbreplay.replay.stored_bundle_data import BundleDataStore

SPLIT_TASK = "BundleSplitterTask"


class ModularLeader:
    """The modular leader's cross-tick state for one replay: written reports, LoadData, strategies, tasks."""

    def __init__(self, conf: PulsarConfig, broker_ids: list[str], policies: NamespacePolicies | None,
                 rng: np.random.Generator) -> None:
        self.conf = conf
        self.broker_ids = broker_ids
        self.broker_row = {b: i for i, b in enumerate(broker_ids)}
        self.profile = profile_for(conf["pulsarVersion"])
        manager = create_load_manager(conf, policies or NamespacePolicies(), rng)
        assert isinstance(manager, ModularLoadManager)
        self.manager = manager
        self.strategy = short_class(conf["loadBalancerLoadSheddingStrategy"])
        self.placement_strategy = short_class(conf["loadBalancerLoadPlacementStrategy"])
        n = len(broker_ids)
        self.reports = WrittenReports(n)
        # the rest of each broker's written report (LocalBrokerData)
        self.report_rate_in = np.zeros(n)
        self.report_rate_out = np.zeros(n)
        self.report_throughput_in = np.zeros(n)
        self.report_throughput_out = np.zeros(n)
        self.report_topics = np.zeros(n)
        self.report_usage = np.zeros((n, 5))
        self.report_limit = np.zeros((n, 5))
        self.ld: LoadData | None = None
        self.timers = LeaderTimers(conf)  # LoadSheddingTask, LoadResourceQuotaUpdaterTask
        self._alive: np.ndarray | None = None  # the brokers the last tick held (a departure: an updateAll)
        self._shedding_lag_ms = 0  # LoadSheddingTask's start behind its timer minute: its earlier runs' durations
        self._last_timer_run = 0
        self._split_done: set[str] = set()  # audit of report versions: bundles split (a retry is refused: it is gone)
        self._split_dropped: list[tuple[int, list[str]]] = []  # (tick ms, bundles whose BundleData a split check dropped)
        self.store: BundleDataStore | None = None  # the recorded BundleData (getBundleDataOrDefaultAsync), if any
        # audit of report versions: each broker's TimeAverageBrokerData as of the last updateBundleData (its reset)
        self._time_average: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    # ---------------------------------------------------------------- the cycle
    def tick(self, view: LoadView, ownership: Ownership) -> list[Decision]:
        conf = self.conf
        looked_up = self._lookups(view) if self.ld is not None else None  # on the LoadData the last tick left
        write = self._write_reports(view)
        ld = self._leader_view(ownership.layout, view.bundle_values, write, view.alive, view.ts_ms, view.listings)
        if looked_up is None:  # the first tick: no earlier LoadData, the lookups go on this one before its refresh
            looked_up = self._lookups(view)
        writes = int(write.sum())
        # a recorded broker gone (its znode deleted) notifies the leader as a write does: one more updateAll (a
        # generated history keeps its modelled refreshes, at report writes only)
        left = view.listings is not None and self._alive is not None and bool((self._alive & ~view.alive).any())
        self._alive = view.alive.copy()
        refresh = writes + int(left)
        samples = refresh  # updateAll per notification; the quota task's writeBundleDataOnZooKeeper samples once
        quota = self.timers.quota_due(view.ts_ms, view.timer_minute)
        shed = self.timers.shedding_due(view.ts_ms, view.timer_minute)
        decisions: list[Decision] = looked_up
        to_assign: list[str] = []
        if shed and quota and self.timers.first_runs_together(view.timer_minute):
            # both tasks' first runs fall at the same instant: startLoadBalancerTasks scheduled LoadSheddingTask
            # first, so it runs first (later, its runs lag the quota task's fixed rate by their own durations)
            decisions += self._shed(ld, view, ownership, to_assign)
            shed = False
        samples += int(quota)
        stored = None
        if self.store is not None:
            self.store.start_tick(view.ts_ms)
            stored = functools.partial(self.store.seed, now_ms=view.ts_ms)
        self.manager.update_all(
            ld, samples=samples, refresh=bool(refresh), stored=stored,
            after_samples=self._keep_time_average if view.listings is not None else None,
            leader_owned=functools.partial(self._leader_owned, view=view))
        if quota:
            self._quota_ran_at_its_minute(ld, view)
        if refresh and conf["loadBalancerAutoBundleSplitEnabled"]:  # updateAll ends with the split check
            decisions += self._split(ld, view, ownership, to_assign)
            assert self.ld is not None
            ld = self.ld
        if shed:
            decisions += self._shed(ld, view, ownership, to_assign)
        pending = list(dict.fromkeys(to_assign + ownership.layout.unowned()))
        if pending and view.alive.any() and view.apply:
            decisions += self._assign(pending, view, ownership)
        if self.store is not None and self.ld is not None:
            self.store.note_held(self.ld.bundles, view.ts_ms)
        return decisions

    def _quota_ran_at_its_minute(self, ld: LoadData, view: LoadView) -> None:
        """``LoadResourceQuotaUpdaterTask`` runs at its fixed rate, on the timer minute; a shedding run lags it by
        its earlier runs' durations, and this tick is that lagged run. A report written in between came after the
        quota task's ``updateBundleData`` on the leader: the split check it triggered dropped BundleData the
        quota's sample (taken here, later) must not bring back before the shedding run."""
        if not view.timer_minute or not view.timer_lag_ms:
            return
        minute_ms = view.ts_ms - int(view.timer_lag_ms)
        rows = [ld.bundles.index(b) for t, found in self._split_dropped if minute_ms < t < view.ts_ms for b in found]
        for row in rows:
            if row >= 0:
                ld.bundles.has_bundle_data[row] = False

    def _leader_owned(self, ld: LoadData, *, view: LoadView) -> set[str] | None:
        """In an audit of a recording whose leader is known: the bundles the leader owns
        (``getNamespaceService().getOwnedServiceUnits()`` in ``updateBundleData``): those its held report lists, and
        those preallocated to it that no other held report lists (a bundle another broker reports went there, not
        to the leader). None where Pulsar's line keeps other preallocations too or the leader is not known (the
        reported-with-BundleData rule alone)."""
        if view.listings is None or view.leader_broker is None or not self.profile.preallocations_kept_if_leader_owned:
            return None
        k = ld.brokers.index(view.leader_broker)
        if k < 0:
            return set()
        b = ld.bundles
        brokers, rows = ld.owned_pairs()  # every held report's bundles
        listed, elsewhere = np.zeros(len(b), dtype=bool), np.zeros(len(b), dtype=bool)
        listed[rows[brokers == k]] = True
        elsewhere[rows[brokers != k]] = True
        mine = listed | ((b.preallocated_to == k) & ~elsewhere)
        owned = {b.names[r] for r in np.flatnonzero(mine).tolist()}
        for bundle, holders in ld.preallocated_also.items():
            r = b.index(bundle)
            if view.leader_broker in holders and r >= 0 and not elsewhere[r]:
                owned.add(bundle)
        return owned

    def score(self, weighted_max: np.ndarray, shedder_state: dict | None = None) -> np.ndarray:
        """Each broker's score as the shedding strategy keeps it (AvgShedder's average), else the weighted max."""
        state = {}
        try:
            state = self.manager.shedder.get_state() or {}
        except Exception:  # noqa: BLE001 - a strategy without state has no score of its own
            state = {}
        ema = state.get("brokerAvgResourceUsage") if isinstance(state, dict) else None
        if isinstance(ema, dict):
            return np.array([float(ema.get(b, np.nan)) for b in self.broker_ids])
        return weighted_max.copy()

    def _write_reports(self, view: LoadView) -> np.ndarray:
        """The brokers whose report the leader sees anew this tick; their written figures are kept."""
        tot = view.totals
        rate, thr = view.msg_rate, view.msg_throughput
        write = view.alive & self.reports.due(view.ts_ms, rate, thr, view.num_bundles, view.compared_usage, self.conf)
        if view.observed_writes is not None:
            write = view.observed_writes
        w = np.flatnonzero(write)
        self.reports.record(w, view.ts_ms, rate, thr, view.num_bundles, view.compared_usage)
        self.report_rate_in[w], self.report_rate_out[w] = tot[w, RATE_IN], tot[w, RATE_OUT]
        self.report_throughput_in[w], self.report_throughput_out[w] = tot[w, THR_IN], tot[w, THR_OUT]
        self.report_topics[w] = tot[w, TOPICS]
        self.report_usage[w], self.report_limit[w] = view.usage[w], view.limit[w]
        return write

    # ---------------------------------------------------------------- kernel calls
    def _shed(self, ld: LoadData, view: LoadView, ownership: Ownership, to_assign: list[str]) -> list[Decision]:
        """``doLoadShedding``; a bundle unloaded with a destination moves there, without one it is placed later."""
        layout = ownership.layout
        row_of = layout.rows()
        out = []
        now, clock = view.ts_ms, None
        if view.timer_minute:  # LoadSheddingTask: later than its timer minute by its earlier runs' durations
            if view.timer_minute <= self._last_timer_run:
                self._shedding_lag_ms = 0  # a new election started the task afresh
            self._last_timer_run = view.timer_minute
            # the run's clock stays the modelled one (its stamps in recentlyUnloadedBundles against the grace period
            # are consistent with it); a tick at the leader's logged run holds the reports it read at its real time
            minute_ms = view.ts_ms - (view.timer_lag_ms or 0)
            now, clock = minute_ms + self._shedding_lag_ms, RunClock()
        shedding = self.manager.shed(ld, now, clock)
        if clock is not None:
            self._shedding_lag_ms += clock.end_ms - now
        for u in shedding.unloads:
            row = row_of.get(u.bundle)
            if row is None:
                continue
            src_id = ownership.owner_id(row) or u.broker
            if view.apply:
                if u.destination is not None:
                    ownership.set_owner(row, self.broker_row[u.destination])
                else:
                    ownership.set_owner(row, -1)
                    to_assign.append(u.bundle)
            out.append(with_draw(view.decision("UNLOAD", u.bundle, src_id, u.destination, u.reason, self.strategy,
                                            u.details), u.drawn_among))
        for k in shedding.kept:  # doLoadShedding: "The destination broker ... is the same as the current owner"
            row = row_of.get(k.bundle)
            if row is not None:
                owner = ownership.owner_id(row) or k.broker
                out.append(with_draw(view.decision("KEEP", k.bundle, owner, owner, KEPT_REASON, self.strategy),
                                  k.drawn_among))
        return out

    def _split(self, ld: LoadData, view: LoadView, ownership: Ownership, to_assign: list[str]) -> list[Decision]:
        """The split check; splits change the layout (children stay with the owner, or are unloaded)."""
        layout = ownership.layout
        found = self.manager.check_split(ld, _namespace_boundaries(layout),
                                         should_unload=self.manager.split_children_unload(ld))
        self._split_dropped = [x for x in self._split_dropped if x[0] > view.ts_ms - 60_000]
        self._split_dropped.append((view.ts_ms, [d.bundle for d in found]))
        out = []
        changed = False
        looked_up: list[str] = []  # an audit's unloaded split children, looked up at once
        owner_of = dict(zip(layout.names, layout.owner.tolist()))
        for d in found:
            # "Make sure the same bundle is not selected again": the parent's BundleData goes before the split call,
            # also when the call fails or repeats (a held report still lists it: the next updateAll samples it anew)
            ld.bundles.has_bundle_data[d.bundle_row] = False
            if not d.ok or d.bundle not in owner_of or d.bundle in self._split_done:
                continue
            if view.listings is not None:  # a recorded cluster split it: NamespaceService refuses a second split
                self._split_done.add(d.bundle)
            if view.apply:  # the what-if applies the split; an audit only records it
                ownership.split(d.bundle, list(d.children), d.unload)
                if d.unload:
                    to_assign += d.children
                changed = True
            elif d.unload and view.leader_broker is not None and view.lookups is None:  # (logged lookups cover them)
                looked_up += d.children
            parent_owner = owner_of[d.bundle]
            details = dict(d.details)
            details["boundaries"] = float(len(d.boundaries))
            src = self.broker_ids[parent_owner] if parent_owner >= 0 else d.broker
            out.append(view.decision("SPLIT", d.bundle, src, src if not d.unload else None, d.reason, SPLIT_TASK, details,
                                     children=list(d.children)))
        if changed:
            self._rebuild_leader_rows(ownership.layout)
        if looked_up and self.ld is not None:
            # the split's unload sends the children's clients to the leader at once: selectBrokerForAssignment
            # preallocates each (ModularLoadManagerWrapper.getLeastLoaded, no affinity for a split child)
            self.manager.assign(looked_up, self.ld)
        return out

    def _lookups(self, view: LoadView) -> list[Decision]:
        """An audit of a recording with placement lines: the lookups its leader logged since the last tick, in
        logged order, each ``selectBrokerForAssignment`` on the leader's LoadData (``ModularLoadManagerWrapper.
        getLeastLoaded``: preallocation; the strategy's own state, e.g. ``RoundRobinBrokerSelector``'s counter,
        moves with every call); an ASSIGN each, to the kernel's choice. The ownership stays the recorded one."""
        if not view.lookups or self.ld is None or not view.alive.any():
            return []
        # the leader's logged "Selected broker": its preallocation (a draw among equals included) is observed
        observed = {bundle: selected for _, bundle, selected in view.lookups if selected is not None}
        placed = self.manager.assign([bundle for _, bundle, _ in view.lookups], self.ld, observed=observed)
        draws = self.manager.assign_draws
        return [with_draw(view.decision("ASSIGN", bundle, None, broker, "recorded lookup (selectBrokerForAssignment)",
                                        self.placement_strategy, {"logged_at_ms": float(ms)}), draws.get(bundle))
                for (ms, bundle, _), (_, broker) in zip(view.lookups, placed)]

    def _assign(self, bundles: list[str], view: LoadView, ownership: Ownership) -> list[Decision]:
        """``selectBrokerForAssignment`` for each unowned bundle in order (its next lookup)."""
        ld = self.ld
        assert ld is not None
        layout = ownership.layout
        row_of = layout.rows()
        unowned = [b for b in bundles if b in row_of and layout.owner[row_of[b]] < 0]
        out = []
        # one derived-value cache for the whole assignment burst (only kernel calls mutate ld inside it)
        with derived_cache(ld):
            for bundle, broker in self.manager.assign(unowned, ld):
                if broker is None:
                    continue
                ownership.set_owner(row_of[bundle], self.broker_row[broker])
                out.append(with_draw(view.decision("ASSIGN", bundle, None, broker, "Assignment", self.placement_strategy),
                                  self.manager.assign_draws.get(bundle)))
        return out

    # ---------------------------------------------------------------- the leader's LoadData
    def _universe_rows(self, ld: LoadData, local: np.ndarray) -> np.ndarray:
        m = np.array([self.broker_row[b] for b in ld.brokers.ids] + [-1], dtype=np.int32)
        return np.where(local >= 0, m[np.where(local >= 0, local, -1)], -1).astype(np.int32)

    def _carry(self, layout: Layout) -> tuple[Bundles, np.ndarray, np.ndarray]:
        """Bundle rows for ``layout`` carrying BundleData, reported owner and preallocation (universe rows)."""
        prev = self.ld.bundles if self.ld is not None else None
        rep_prev = pre_prev = None
        if self.ld is not None and prev is not None:
            rep_prev = self._universe_rows(self.ld, prev.owner)
            pre_prev = self._universe_rows(self.ld, prev.preallocated_to)
        b, pre = _bundles_like(prev, rep_prev, layout, pre_prev)
        return b, b.owner.copy(), pre

    def _assemble(self, b: Bundles, rep: np.ndarray, pre: np.ndarray, alive: np.ndarray, now_ms: int) -> LoadData:
        ids = self.broker_ids
        alive_rows = np.flatnonzero(alive)
        to_local = np.full(len(ids) + 1, -1, dtype=np.int32)
        to_local[alive_rows] = np.arange(len(alive_rows), dtype=np.int32)
        brokers = Brokers.empty([ids[i] for i in alive_rows])
        brokers.usage = self.report_usage[alive_rows].copy()
        brokers.limit = self.report_limit[alive_rows].copy()
        brokers.msg_rate_in = self.report_rate_in[alive_rows].copy()
        brokers.msg_rate_out = self.report_rate_out[alive_rows].copy()
        brokers.msg_throughput_in = self.report_throughput_in[alive_rows].copy()
        brokers.msg_throughput_out = self.report_throughput_out[alive_rows].copy()
        brokers.num_topics = self.report_topics[alive_rows].astype(np.int64)
        brokers.last_update = self.reports.written_ms[alive_rows].copy()
        brokers.load_manager_class_name = [self.conf["loadManagerClassName"]] * len(alive_rows)
        b.owner = to_local[rep].astype(np.int32)
        b.preallocated_to = to_local[pre].astype(np.int32)
        old = self.ld
        alive_ids = set(brokers.ids)
        prealloc = {k: v for k, v in (old.preallocated_bundle_to_broker.items() if old else []) if v in alive_ids}
        ld = LoadData(brokers, b, old.recently_unloaded_bundles if old else {}, prealloc, now_ms)
        self.ld = ld
        return ld

    def _rebuild_leader_rows(self, layout: Layout) -> None:
        """After a split: the leader's rows follow the new layout (children start without BundleData)."""
        assert self.ld is not None
        alive = np.zeros(len(self.broker_ids), dtype=bool)
        alive[[self.broker_row[b] for b in self.ld.brokers.ids]] = True
        b, rep, pre = self._carry(layout)
        self._assemble(b, rep, pre, alive, self.ld.now_ms)

    def _leader_view(self, layout: Layout, vals: np.ndarray, write: np.ndarray, alive: np.ndarray,
                     now_ms: int, listings: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> LoadData:
        """Build/refresh the leader's LoadData from the written reports (stale by construction).

        A broker's written report lists the bundles it owned when it wrote, with their stats then; a report
        of a broker that died disappears with its lock node. Where two stale reports claim one bundle, the
        most recent writer is kept. An audit of report versions (``listings``: the reports the leader holds) keeps
        each report's own ``lastStats`` (``LoadData.membership`` when a bundle sits in two brokers' reports).
        """
        if listings is not None:
            return self._held_view(layout, vals, alive, now_ms, listings)
        b, rep, pre = self._carry(layout)
        wrote_owned = (layout.owner >= 0) & write[np.maximum(layout.owner, 0)]
        rep[wrote_owned] = layout.owner[wrote_owned]
        b.stats[wrote_owned] = vals[wrote_owned, :4]
        b.topics[wrote_owned] = vals[wrote_owned, TOPICS].astype(np.int64)
        b.consumer_count[wrote_owned] = vals[wrote_owned, SESSIONS].astype(np.int64)
        b.producer_count[wrote_owned] = 0
        stale_rep = (rep >= 0) & ((~alive[np.maximum(rep, 0)]) | (write[np.maximum(rep, 0)] & (layout.owner != rep)))
        rep[stale_rep] = -1
        pre[(pre >= 0) & ~alive[np.maximum(pre, 0)]] = -1
        return self._assemble(b, rep, pre, alive, now_ms)

    def _held_view(self, layout: Layout, vals: np.ndarray, alive: np.ndarray, now_ms: int,
                   listings: tuple[np.ndarray, np.ndarray, np.ndarray]) -> LoadData:
        """The leader's LoadData from the reports it holds (each broker's latest version): every held report's
        ``lastStats`` as that report wrote them; the one-owner columns follow the newest report listing a bundle."""
        b, _rep, pre = self._carry(layout)
        rep = layout.owner.copy()
        owned = rep >= 0
        b.stats[owned] = vals[owned, :4]
        b.topics[owned] = vals[owned, TOPICS].astype(np.int64)
        b.consumer_count[owned] = vals[owned, SESSIONS].astype(np.int64)
        b.producer_count[owned] = 0
        pre[(pre >= 0) & ~alive[np.maximum(pre, 0)]] = -1
        outside = self._preallocated_outside(layout)
        ld = self._assemble(b, rep, pre, alive, now_ms)
        brokers, rows, lv = listings
        keep = alive[brokers]
        brokers, rows, lv = brokers[keep], rows[keep], lv[keep]
        if len(np.unique(rows)) < len(rows):  # a bundle in two brokers' reports: per-broker sets
            local = np.full(len(self.broker_ids), -1, dtype=np.int64)
            local[np.flatnonzero(alive)] = np.arange(int(alive.sum()))
            order = np.lexsort((rows, local[brokers]))
            sb, sr, sv = local[brokers][order], rows[order], lv[order]
            ld.membership = Membership(
                owned_broker=sb, owned_bundle=sr, stats_broker=sb.copy(), stats_bundle=sr.copy(), stats=sv[:, :4].copy(),
                topics=sv[:, TOPICS].astype(np.int64), consumer_count=sv[:, SESSIONS].astype(np.int64),
                producer_count=np.zeros(len(sr), dtype=np.int64), cache_size=np.zeros(len(sr), dtype=np.int64))
        if outside is not None:
            _restore_preallocated(ld, *outside)
        if self._time_average:
            zero = (np.zeros(4), np.zeros(4))  # a broker not yet sampled: a new TimeAverageBrokerData
            held = [self._time_average.get(b, zero) for b in ld.brokers.ids]
            ld.tabd = (np.array([s for s, _ in held]).reshape(-1, 4), np.array([lt for _, lt in held]).reshape(-1, 4))
        return ld

    def _keep_time_average(self, ld: LoadData) -> None:
        """Keep each broker's ``TimeAverageBrokerData`` as ``updateBundleData`` just reset it: placement reads it
        (``LeastLongTermMessageRate.getScore``) until the next ``updateAll``, whatever BundleData goes in between
        (a split check drops the parents' BundleData right after it)."""
        short, long = ld.broker_time_average()
        ld.tabd = (short, long)
        self._time_average = {b: (short[k], long[k]) for k, b in enumerate(ld.brokers.ids)}

    def _preallocated_outside(self, layout: Layout) -> tuple[list[str], dict[str, np.ndarray], list[str],
                                                             dict[str, list[str]]] | None:
        """The held view's carry-over of the leader's preallocations no held report lists yet (split children it
        assigned): their rows of the previous LoadData, their holders' ids and ``preallocated_also``."""
        old = self.ld
        if old is None:
            return None
        b = old.bundles
        listed = set(layout.names)
        rows = [r for r in np.flatnonzero(b.preallocated_to >= 0).tolist() if b.names[r] not in listed]
        also = {n: list(h) for n, h in old.preallocated_also.items()}
        if not rows and not also:
            return None
        idx = np.array(rows, dtype=np.int64)
        data = {f: getattr(b, f)[idx].copy() for f in _BUNDLE_DATA}
        return [b.names[r] for r in rows], data, [old.brokers.ids[b.preallocated_to[r]] for r in rows], also


# Bundles columns: what a report lists (lastStats), and the leader's BundleData
_REPORTED = ("stats", "topics", "consumer_count", "producer_count", "cache_size")
_BUNDLE_DATA = ("has_bundle_data", "short", "short_samples", "short_max", "long", "long_samples", "long_max",
                "bundle_topics")


def _restore_preallocated(ld: LoadData, names: list[str], data: dict[str, np.ndarray], holders: list[str],
                          also: dict[str, list[str]]) -> None:
    """Put preallocations carried from the previous held view back: rows the layout lacks come back with their
    BundleData and holder (a holder gone dead drops it, as reapDeadBrokerPreallocations does)."""
    alive = set(ld.brokers.ids)
    keep = [i for i, h in enumerate(holders) if h in alive]
    if keep:
        at = insert_bundles(ld, [names[i] for i in keep])
        b = ld.bundles
        for f in _BUNDLE_DATA:
            getattr(b, f)[at] = data[f][keep]
        b.preallocated_to[at] = [ld.brokers.index(holders[i]) for i in keep]
    for bundle, brokers in also.items():
        live = [h for h in brokers if h in alive]
        if live and ld.bundles.index(bundle) >= 0:
            ld.preallocated_also[bundle] = live
    invalidate_derived(ld)


def _namespace_boundaries(layout: Layout) -> dict[str, np.ndarray]:
    """Each namespace's boundary list (``NamespaceBundles.partitions``) from the layout's bundles: their distinct
    bounds, sorted. A tiling layout gives its lower bounds then the top; an audit's layout lists only the bundles
    in some report, so a bundle no report lists leaves a gap whose bounds are still boundaries, and a split parent
    still listed by its old owner beside its children is no longer a bundle between two boundaries."""
    out: dict[str, np.ndarray] = {}
    ns_idx = layout.ns_idx
    for k in np.unique(ns_idx).tolist():
        rows = np.flatnonzero(ns_idx == k)
        out[layout.namespace[int(rows[0])]] = np.unique(np.concatenate([layout.lower[rows], layout.upper[rows]]))
    return out


def _bundles_like(prev: Bundles | None, rep_prev: np.ndarray | None, layout: Layout,
                  pre_prev: np.ndarray | None = None) -> tuple[Bundles, np.ndarray]:
    """Bundles rows for ``layout``; rows whose name existed in ``prev`` keep their BundleData and reported state.
    Also ``pre_prev`` (per ``prev`` row) carried to the same rows (-1 elsewhere).

    ``owner`` here carries *universe* rows of the previous reported owner (remapped by the caller).
    """
    n = len(layout)
    pre = np.full(n, -1, dtype=np.int32)
    out = Bundles(
        names=layout.names, namespaces=layout.namespace, lower=layout.lower, upper=layout.upper,
        owner=np.full(n, -1, dtype=np.int32), stats=np.zeros((n, 4)), topics=np.zeros(n, dtype=np.int64),
        consumer_count=np.zeros(n, dtype=np.int64), producer_count=np.zeros(n, dtype=np.int64),
        cache_size=np.zeros(n, dtype=np.int64), has_bundle_data=np.zeros(n, dtype=bool),
        short=np.tile(np.array([50000.0, 50000.0, 50.0, 50.0]), (n, 1)), short_samples=np.zeros(n, dtype=np.int32),
        short_max=np.full(n, 10, dtype=np.int32), long=np.tile(np.array([50000.0, 50000.0, 50.0, 50.0]), (n, 1)),
        long_samples=np.zeros(n, dtype=np.int32), long_max=np.full(n, 1000, dtype=np.int32),
        bundle_topics=np.zeros(n, dtype=np.int64), preallocated_to=np.full(n, -1, dtype=np.int32),
    )
    if prev is None:
        return out, pre
    if prev.names == layout.names:
        rows_new = np.arange(n)
        rows_old = np.arange(n)
    else:
        pos = {name: i for i, name in enumerate(prev.names)}
        pairs = [(i, pos[name]) for i, name in enumerate(layout.names) if name in pos]
        if not pairs:
            return out, pre
        rows_new = np.array([p[0] for p in pairs])
        rows_old = np.array([p[1] for p in pairs])
    for f in _REPORTED + _BUNDLE_DATA:
        getattr(out, f)[rows_new] = getattr(prev, f)[rows_old]
    if rep_prev is not None:
        out.owner[rows_new] = rep_prev[rows_old]
    if pre_prev is not None:
        pre[rows_new] = pre_prev[rows_old]
    return out, pre
