"""The stateful tick loop of a replay run (pure NumPy; runs inside a Spark task or in-process).

Closed loop (what-if): ownership evolves from the replay's own decisions. Each tick
1. brokers that left release their bundles (orphans, assigned at the next lookup);
2. bundle loads come from history under the replay's *current* layout (``ring_load``), broker load from
   ownership through the calibrated load model (``load_model``);
3. brokers write reports by Pulsar's 10 % / 15 min rule (``kernel.broker_report``): the leader only sees the
   last written report, bundles included; each written report triggers ``updateAll`` = one
   ``updateBundleData`` sample of every reported bundle, and the 15-min bundle-data write one more
   (PULSAR-LB-SPEC.md §1.7); the split check runs after ``updateAll``;
4. every ``loadBalancerSheddingIntervalMinutes`` the leader runs ``doLoadShedding``;
5. orphans and split children are placed with ``selectBrokerForAssignment``.
Observed mode (audit): the same leader logic on the observed ownership and usage, with no feedback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from lbreplay.kernel.broker_report import need_broker_data_update
from lbreplay.kernel.config import PulsarConfig, short_class
from lbreplay.kernel.load_data import Brokers, Bundles, LoadData, update_bundle_data
from lbreplay.kernel.naming import format_range
from lbreplay.kernel.placement import clear_preallocations
from lbreplay.kernel.resource_usage import percent_usage, weighted_max_usage, max_resource_usage
from lbreplay.kernel.version_profile import profile_for
from lbreplay.replay.load_model import Calibration, model_usage
from lbreplay.replay.ring_load import IntervalLoad, PointLoad, bundle_span

# Columns of the per-bundle load vectors: TimeAverageMessageData order, then sessions and topics.
THR_IN, THR_OUT, RATE_IN, RATE_OUT, SESSIONS, TOPICS = range(6)


@dataclass
class RunSpec:
    run_id: str
    cluster: str
    mode: str  # "closed-loop" | "observed"
    config: dict[str, Any]  # Pulsar keys as given by the user (resolved inside)
    seed: int = 0
    replay: dict[str, Any] = field(default_factory=dict)
    # A slice of the ticks (audit mode runs slices in parallel): outputs for [tick_start, tick_end), after
    # replaying ``warmup`` earlier ticks to rebuild the strategies' state (EWMA, hit counts, bundle averages).
    tick_start: int = 0
    tick_end: int | None = None
    warmup: int = 0


@dataclass
class StaticInputs:
    """What a run needs besides the tick stream; small (brokers, namespaces, calibration, policies)."""

    broker_ids: list[str]  # sorted universe of brokers seen in the history
    namespaces: list[str]  # sorted
    calibration: Calibration
    policies: Any = None  # kernel.policies.NamespacePolicies or None


@dataclass
class ObservedTick:
    tick: int
    ts_ms: int
    alive: np.ndarray  # (B,) bool
    usage: np.ndarray  # (B, 5) observed (for memory and calibration error)
    limit: np.ndarray  # (B, 5)
    broker_meta: dict[str, np.ndarray] = field(default_factory=dict)
    # observed layout and ownership (bundle_load): names, owner (universe row), values (n, 6)
    bundle_names: list[str] = field(default_factory=list)
    bundle_owner: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    bundle_values: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))
    topic_values: np.ndarray | None = None  # (T, 6) aligned with topic_positions
    topic_positions: np.ndarray | None = None  # (T,) global ring positions of this tick's topics
    last_update: np.ndarray | None = None  # (B,) ms of each broker's report (LocalBrokerData.lastUpdate)


@dataclass
class Decision:
    tick: int
    ts_ms: int
    seq: int
    action: str  # UNLOAD | TRANSFER | ASSIGN | SPLIT
    bundle: str
    source_broker: str | None
    target_broker: str | None
    child_bundles: list[str] | None
    strategy: str
    reason: str
    details: dict[str, float]


@dataclass
class BrokerTick:
    tick: int
    ts_ms: int
    pct: np.ndarray  # (B, 5)
    max_usage: np.ndarray
    weighted_max_usage: np.ndarray
    score: np.ndarray
    msg_rate: np.ndarray
    msg_throughput: np.ndarray
    num_bundles: np.ndarray
    num_topics: np.ndarray
    alive: np.ndarray


@dataclass
class OwnershipInterval:
    bundle: str
    namespace: str
    range_lower: int
    range_upper: int
    broker: str
    from_tick: int
    to_tick: int | None
    from_ts_ms: int
    to_ts_ms: int | None


@dataclass
class TickResult:
    broker_tick: BrokerTick
    decisions: list[Decision]
    closed: list[OwnershipInterval]
    calibration_error: float | None  # MAPE of modelled vs observed cpu when ownership equals the observed one


def _split_name(name: str) -> tuple[str, int, int]:
    ns, _, rng = name.rpartition("/")
    lo, _, hi = rng.partition("_")
    return ns, int(lo, 16), int(hi, 16)


class Layout:
    """The replay's current bundles (sorted by name) with their owners (broker universe rows)."""

    def __init__(self, names: list[str], owner: np.ndarray, namespaces: list[str]):
        order = sorted(range(len(names)), key=names.__getitem__)
        self.names = [names[i] for i in order]
        self.owner = owner[order].astype(np.int32)
        ns_index = {ns: i for i, ns in enumerate(namespaces)}
        parsed = [_split_name(n) for n in self.names]
        self.namespace = [p[0] for p in parsed]
        self.ns_idx = np.array([ns_index[p[0]] for p in parsed], dtype=np.int64)
        self.lower = np.array([p[1] for p in parsed], dtype=np.int64)
        self.upper = np.array([p[2] for p in parsed], dtype=np.int64)
        self.start, self.end = bundle_span(self.ns_idx, self.lower, self.upper)

    def __len__(self) -> int:
        return len(self.names)

    def counts_per_namespace(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for ns in self.namespace:
            out[ns] = out.get(ns, 0) + 1
        return out


class Replay:
    """One run's state across ticks. ``step`` consumes one ObservedTick and returns its TickResult."""

    def __init__(self, run: RunSpec, static: StaticInputs):
        from lbreplay.kernel.strategy import strategy_class

        self.run = run
        self.static = static
        self.conf = PulsarConfig.resolve(run.config)
        self.profile = profile_for(self.conf["pulsarVersion"])
        self.rng = np.random.default_rng(run.seed)
        self.closed_loop = run.mode != "observed"
        from lbreplay.replay import extensible_bridge

        self.extensible = extensible_bridge.is_extensible(self.conf)
        self.ext = None
        if self.extensible:
            self.shedder = strategy_class("shedding", "TransferShedder")()
            self.placement = None
            self.ext = extensible_bridge.ExtensibleLeader(len(static.broker_ids))
        else:
            from lbreplay.kernel.modular_load_manager import create_strategies

            self.shedder, self.placement = create_strategies(self.conf)
        self.strategy_name = "TransferShedder" if self.extensible else short_class(self.conf["loadBalancerLoadSheddingStrategy"])
        self.placement_name = short_class(self.conf["loadBalancerLoadPlacementStrategy"])
        nb = len(static.broker_ids)
        self.layout: Layout | None = None
        # leader's view: the last written report of every broker
        self.w_ms = np.full(nb, -1, dtype=np.int64)
        self.w_rate = np.zeros(nb)
        self.w_thr = np.zeros(nb)
        self.w_rate_in = np.zeros(nb)
        self.w_rate_out = np.zeros(nb)
        self.w_thr_in = np.zeros(nb)
        self.w_thr_out = np.zeros(nb)
        self.w_nb = np.zeros(nb)
        self.w_topics = np.zeros(nb)
        self.w_usage = np.zeros((nb, 5))
        self.w_limit = np.zeros((nb, 5))
        self.w_max = np.zeros(nb)
        self.last_usage = np.zeros((nb, 5))
        self.last_limit = np.zeros((nb, 5))
        self.ld: LoadData | None = None
        self.last_shed_ms: int | None = None
        self.last_quota_ms: int | None = None
        self.leader = None  # kernel LeaderState, created lazily
        self.seq = 0
        self.seen_last_update = np.full(nb, -1, dtype=np.int64)
        self.open_intervals: dict[str, tuple[int, int, int]] = {}  # bundle -> (broker, from_tick, from_ts)

    # ---------------------------------------------------------------- helpers
    def _bundle_values(self, obs: ObservedTick, layout: Layout) -> np.ndarray:
        if obs.topic_values is not None and obs.topic_positions is not None:
            src = PointLoad(obs.topic_positions, obs.topic_values)
        else:
            parsed = [_split_name(n) for n in obs.bundle_names]
            ns_index = {ns: i for i, ns in enumerate(self.static.namespaces)}
            ns_idx = np.array([ns_index[p[0]] for p in parsed], dtype=np.int64)
            s, e = bundle_span(ns_idx, np.array([p[1] for p in parsed]), np.array([p[2] for p in parsed]))
            src = IntervalLoad(s, e, obs.bundle_values)
        vals = src.range_sum(layout.start, layout.end)
        if obs.topic_values is None:
            vals[:, SESSIONS:] = np.round(vals[:, SESSIONS:])
        return vals

    def _close(self, bundle: str, tick: int, ts_ms: int, out: list[OwnershipInterval]) -> None:
        entry = self.open_intervals.pop(bundle, None)
        if entry is None:
            return
        broker, f_tick, f_ts = entry
        ns, lo, hi = _split_name(bundle)
        out.append(OwnershipInterval(bundle, ns, lo, hi, self.static.broker_ids[broker], f_tick, tick, f_ts, ts_ms))

    def _set_owner(self, row: int, broker: int, tick: int, ts_ms: int, out: list[OwnershipInterval]) -> None:
        assert self.layout is not None
        name = self.layout.names[row]
        current = self.open_intervals.get(name)
        if current is not None and current[0] == broker:
            self.layout.owner[row] = broker
            return
        self._close(name, tick, ts_ms, out)
        self.layout.owner[row] = broker
        if broker >= 0:
            self.open_intervals[name] = (broker, tick, ts_ms)

    def apply_split(self, parent: str, children: list[str], unload: bool, obs: ObservedTick,
                    closed: list[OwnershipInterval]) -> int | None:
        """Replace ``parent`` by ``children`` in the layout (``NamespaceBundleFactory#splitBundles``).

        The children stay with the parent's owner, or are left unowned for their next lookup when ``unload``
        (``loadBalancerAutoUnloadSplitBundlesEnabled``). Returns the parent's owner row (-1: unowned), or None
        when the parent is not in the layout.
        """
        assert self.layout is not None
        layout = self.layout
        try:
            i = layout.names.index(parent)
        except ValueError:
            return None
        parent_owner = int(layout.owner[i])
        self._close(parent, obs.tick, obs.ts_ms, closed)
        child_owner = -1 if unload else parent_owner
        names = layout.names[:i] + layout.names[i + 1:] + list(children)
        owner = np.concatenate([np.delete(layout.owner, i), np.full(len(children), child_owner, dtype=np.int32)])
        if child_owner >= 0:
            for c in children:
                self.open_intervals[c] = (child_owner, obs.tick, obs.ts_ms)
        self.layout = Layout(names, owner, self.static.namespaces)
        return parent_owner

    def finish(self) -> list[OwnershipInterval]:
        """Still-open ownership intervals (``to_*`` null)."""
        out = []
        for bundle, (broker, f_tick, f_ts) in sorted(self.open_intervals.items()):
            ns, lo, hi = _split_name(bundle)
            out.append(OwnershipInterval(bundle, ns, lo, hi, self.static.broker_ids[broker], f_tick, None, f_ts, None))
        return out

    def _decision(self, obs: ObservedTick, action: str, bundle: str, src: str | None, dst: str | None,
                  reason: str, details: dict[str, float] | None = None, children: list[str] | None = None,
                  strategy: str | None = None) -> Decision:
        self.seq += 1
        return Decision(obs.tick, obs.ts_ms, self.seq, action, bundle, src, dst, children,
                        strategy or self.strategy_name, reason, dict(details or {}))

    # ---------------------------------------------------------------- the tick
    def step(self, obs: ObservedTick) -> TickResult:
        conf = self.conf
        ids = self.static.broker_ids
        nb = len(ids)
        closed: list[OwnershipInterval] = []
        decisions: list[Decision] = []
        alive = obs.alive.astype(bool)
        self.last_usage[alive] = obs.usage[alive]
        self.last_limit[alive] = obs.limit[alive]

        observed_layout = Layout(list(obs.bundle_names), obs.bundle_owner.copy(), self.static.namespaces)
        if self.layout is None or not self.closed_loop:
            if self.layout is None:
                for row, name in enumerate(observed_layout.names):
                    if observed_layout.owner[row] >= 0:
                        self.open_intervals[name] = (int(observed_layout.owner[row]), obs.tick, obs.ts_ms)
            elif not self.closed_loop:
                for row, name in enumerate(observed_layout.names):
                    cur = self.open_intervals.get(name)
                    own = int(observed_layout.owner[row])
                    if cur is None or cur[0] != own:
                        self._close(name, obs.tick, obs.ts_ms, closed)
                        if own >= 0:
                            self.open_intervals[name] = (own, obs.tick, obs.ts_ms)
                for name in list(self.open_intervals):
                    if name not in set(observed_layout.names):
                        self._close(name, obs.tick, obs.ts_ms, closed)
            self.layout = observed_layout
        layout = self.layout

        # 1. brokers that left release their bundles
        dead = (layout.owner >= 0) & ~alive[np.maximum(layout.owner, 0)]
        for row in np.flatnonzero(dead):
            self._set_owner(int(row), -1, obs.tick, obs.ts_ms, closed)

        # 2. loads: bundles under the replay layout, brokers by ownership through the load model
        vals = self._bundle_values(obs, layout) if self.closed_loop else self._observed_values(obs, layout)
        owned = layout.owner >= 0
        tot = np.zeros((nb, 6))
        np.add.at(tot, layout.owner[owned], vals[owned])
        num_bundles = np.bincount(layout.owner[owned], minlength=nb).astype(np.float64)
        rate = tot[:, RATE_IN] + tot[:, RATE_OUT]
        thr = tot[:, THR_IN] + tot[:, THR_OUT]
        if self.closed_loop:
            usage = model_usage(self.static.calibration, rate, tot[:, THR_IN], tot[:, THR_OUT], self.last_usage)
        else:
            usage = self.last_usage.copy()
        limit = self.last_limit
        wmax = weighted_max_usage(usage, limit, conf)
        cmp_usage = wmax if self.profile.overload_checks_weighted else max_resource_usage(usage, limit, conf)

        # calibration error: modelled vs observed cpu where the replay's ownership equals the observed one
        cal_err = None
        if self.closed_loop and layout.names == observed_layout.names and np.array_equal(layout.owner, observed_layout.owner):
            obs_cpu = obs.usage[alive, 0]
            ok = obs_cpu > 0
            if ok.any():
                cal_err = float(np.mean(np.abs(usage[alive, 0][ok] - obs_cpu[ok]) / obs_cpu[ok]))

        if self.extensible and self.closed_loop:
            return self._step_extensible(obs, layout, vals, usage, limit, tot, num_bundles, wmax, rate, thr, alive,
                                         cal_err, closed)

        # 3. report writes (10 % / 15 min rule); the leader sees the written reports
        write = alive & need_broker_data_update(self.w_ms, obs.ts_ms, self.w_rate, rate, self.w_thr, thr,
                                                self.w_nb, num_bundles, self.w_max, cmp_usage, conf)
        if not self.closed_loop:
            # the observed table holds what the leader saw: a report was written when lastUpdate changed
            if obs.last_update is not None:
                write = alive & (obs.last_update != self.seen_last_update)
                self.seen_last_update = np.where(alive, obs.last_update, self.seen_last_update)
            else:
                write = alive.copy()
        w = np.flatnonzero(write)
        self.w_ms[w] = obs.ts_ms
        self.w_rate[w], self.w_thr[w], self.w_nb[w], self.w_max[w] = rate[w], thr[w], num_bundles[w], cmp_usage[w]
        self.w_rate_in[w], self.w_rate_out[w] = tot[w, RATE_IN], tot[w, RATE_OUT]
        self.w_thr_in[w], self.w_thr_out[w] = tot[w, THR_IN], tot[w, THR_OUT]
        self.w_topics[w] = tot[w, TOPICS]
        self.w_usage[w], self.w_limit[w] = usage[w], limit[w]
        ld = self._leader_view(layout, vals, write, alive, obs.ts_ms)

        # 4. updateAll per written report (+ the 15-min bundle-data write): bundle-data samples, then split check
        samples = int(write.sum())
        quota_ms = conf["loadBalancerResourceQuotaUpdateIntervalMinutes"] * 60_000
        if self.last_quota_ms is None:
            self.last_quota_ms = obs.ts_ms
        elif obs.ts_ms - self.last_quota_ms >= quota_ms:
            samples += 1
            self.last_quota_ms = obs.ts_ms
        for _ in range(samples):
            update_bundle_data(ld)
        if samples:
            if self.profile.drop_unreported_bundle_data:
                ld.bundles.has_bundle_data &= ld.bundles.owner >= 0
            clear_preallocations(ld)
            from lbreplay.replay.kernel_bridge import leader_of

            leader_of(self).reload(ld)
        to_assign: list[str] = []
        if samples and conf["loadBalancerAutoBundleSplitEnabled"]:
            decisions += self._split(ld, obs, to_assign, closed)
            layout = self.layout
            ld = self.ld

        # 5. shedding on its interval
        interval_ms = conf["loadBalancerSheddingIntervalMinutes"] * 60_000
        if self.last_shed_ms is None:
            self.last_shed_ms = obs.ts_ms  # first run one interval after leadership
        elif obs.ts_ms - self.last_shed_ms >= interval_ms:
            self.last_shed_ms = obs.ts_ms
            decisions += self._shed(ld, obs, to_assign, closed)

        # 6. placement of orphans, split children and bundles unloaded without a destination
        assert self.layout is not None
        orphans = [self.layout.names[r] for r in np.flatnonzero(self.layout.owner < 0)]
        pending = list(dict.fromkeys(to_assign + orphans))
        if pending and alive.any() and self.closed_loop:
            decisions += self._assign(pending, obs, closed)

        # 7. what this tick looked like (true modelled load, not the leader's stale view)
        layout = self.layout
        owned = layout.owner >= 0
        nbund = np.bincount(layout.owner[owned], minlength=nb)
        score = self._scores(wmax)
        pct = percent_usage(usage, limit).astype(np.float64)
        bt = BrokerTick(obs.tick, obs.ts_ms, pct, max_resource_usage(usage, limit, conf), wmax, score, rate, thr,
                        nbund, tot[:, TOPICS], alive)
        return TickResult(bt, decisions, closed, cal_err)

    def _step_extensible(self, obs: ObservedTick, layout: Layout, vals: np.ndarray, usage: np.ndarray,
                         limit: np.ndarray, tot: np.ndarray, num_bundles: np.ndarray, wmax: np.ndarray,
                         rate: np.ndarray, thr: np.ndarray, alive: np.ndarray, cal_err: float | None,
                         closed: list[OwnershipInterval]) -> TickResult:
        """One tick of the extensible load manager (see ``extensible_bridge``)."""
        from lbreplay.replay import extensible_bridge as X

        conf = self.conf
        decisions: list[Decision] = []
        to_assign: list[str] = []
        X.report(self, obs, usage, limit, tot, num_bundles, vals)
        decisions += X.split(self, obs, vals, closed)
        interval_ms = conf["loadBalancerSheddingIntervalMinutes"] * 60_000
        if self.last_shed_ms is None:
            self.last_shed_ms = obs.ts_ms
        elif obs.ts_ms - self.last_shed_ms >= interval_ms:
            self.last_shed_ms = obs.ts_ms
            decisions += X.shed(self, obs, to_assign, closed)
        orphans = [self.layout.names[r] for r in np.flatnonzero(self.layout.owner < 0)]
        pending = list(dict.fromkeys(to_assign + orphans))
        if pending and alive.any():
            decisions += X.assign(self, pending, obs, closed)
        lay = self.layout
        nb = len(self.static.broker_ids)
        owned = lay.owner >= 0
        nbund = np.bincount(lay.owner[owned], minlength=nb)
        pct = percent_usage(usage, limit).astype(np.float64)
        score = self.ext.published.weighted_max_ema.copy()
        bt = BrokerTick(obs.tick, obs.ts_ms, pct, max_resource_usage(usage, limit, conf), wmax, score, rate, thr,
                        nbund, tot[:, TOPICS], alive)
        return TickResult(bt, decisions, closed, cal_err)

    def _observed_values(self, obs: ObservedTick, layout: Layout) -> np.ndarray:
        pos = {n: i for i, n in enumerate(obs.bundle_names)}
        idx = np.array([pos[n] for n in layout.names], dtype=np.int64)
        return obs.bundle_values[idx] if len(idx) else np.zeros((0, 6))

    def _scores(self, wmax: np.ndarray) -> np.ndarray:
        state = {}
        try:
            state = self.shedder.get_state() or {}
        except Exception:  # noqa: BLE001 - a strategy without state has no score of its own
            state = {}
        ema = state.get("brokerAvgResourceUsage") if isinstance(state, dict) else None
        if isinstance(ema, dict):
            return np.array([float(ema.get(b, np.nan)) for b in self.static.broker_ids])
        return wmax.copy()

    # ---------------------------------------------------------------- leader view
    def _universe_rows(self, ld: LoadData, local: np.ndarray) -> np.ndarray:
        index = {b: i for i, b in enumerate(self.static.broker_ids)}
        m = np.array([index[b] for b in ld.brokers.ids] + [-1], dtype=np.int32)
        return np.where(local >= 0, m[np.where(local >= 0, local, -1)], -1).astype(np.int32)

    def _carry(self, layout: Layout) -> tuple[Bundles, np.ndarray, np.ndarray]:
        """Bundle rows for ``layout`` carrying BundleData, reported owner and preallocation (universe rows)."""
        prev = self.ld.bundles if self.ld is not None else None
        rep_prev = pre_prev = None
        if self.ld is not None and prev is not None:
            rep_prev = self._universe_rows(self.ld, prev.owner)
            pre_prev = self._universe_rows(self.ld, prev.preallocated_to)
        b = _bundles_like(prev, rep_prev, layout)
        pre = np.full(len(layout), -1, dtype=np.int32)
        if prev is not None and pre_prev is not None:
            pos = {n: i for i, n in enumerate(prev.names)}
            for i, n in enumerate(layout.names):
                j = pos.get(n)
                if j is not None:
                    pre[i] = pre_prev[j]
        return b, b.owner.copy(), pre

    def _assemble(self, b: Bundles, rep: np.ndarray, pre: np.ndarray, alive: np.ndarray, now_ms: int) -> LoadData:
        ids = self.static.broker_ids
        alive_rows = np.flatnonzero(alive)
        to_local = np.full(len(ids) + 1, -1, dtype=np.int32)
        to_local[alive_rows] = np.arange(len(alive_rows), dtype=np.int32)
        brokers = Brokers.empty([ids[i] for i in alive_rows])
        brokers.usage = self.w_usage[alive_rows].copy()
        brokers.limit = self.w_limit[alive_rows].copy()
        brokers.msg_rate_in = self.w_rate_in[alive_rows].copy()
        brokers.msg_rate_out = self.w_rate_out[alive_rows].copy()
        brokers.msg_throughput_in = self.w_thr_in[alive_rows].copy()
        brokers.msg_throughput_out = self.w_thr_out[alive_rows].copy()
        brokers.num_topics = self.w_topics[alive_rows].astype(np.int64)
        brokers.last_update = self.w_ms[alive_rows].copy()
        brokers.load_manager_class_name = [self.conf["loadManagerClassName"]] * len(alive_rows)
        b.owner = to_local[rep].astype(np.int32)
        b.preallocated_to = to_local[pre].astype(np.int32)
        old = self.ld
        alive_ids = set(brokers.ids)
        prealloc = {k: v for k, v in (old.preallocated_bundle_to_broker.items() if old else []) if v in alive_ids}
        ld = LoadData(brokers, b, old.recently_unloaded_bundles if old else {}, prealloc, now_ms)
        self.ld = ld
        return ld

    def rebuild_leader_rows(self) -> None:
        """After a split: the leader's rows follow the new layout (children start without BundleData)."""
        assert self.layout is not None and self.ld is not None
        alive = np.zeros(len(self.static.broker_ids), dtype=bool)
        index = {b: i for i, b in enumerate(self.static.broker_ids)}
        alive[[index[b] for b in self.ld.brokers.ids]] = True
        b, rep, pre = self._carry(self.layout)
        self._assemble(b, rep, pre, alive, self.ld.now_ms)

    def _leader_view(self, layout: Layout, vals: np.ndarray, write: np.ndarray, alive: np.ndarray, now_ms: int) -> LoadData:
        """Build/refresh the leader's LoadData from the written reports (stale by construction).

        A broker's written report lists the bundles it owned when it wrote, with their stats then; a report
        of a broker that died disappears with its lock node. Where two stale reports claim one bundle, the
        most recent writer is kept.
        """
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

    # ---------------------------------------------------------------- kernel calls
    def _shed(self, ld: LoadData, obs: ObservedTick, to_assign: list[str], closed: list[OwnershipInterval]) -> list[Decision]:
        from lbreplay.replay import kernel_bridge

        return kernel_bridge.shed(self, ld, obs, to_assign, closed)

    def _split(self, ld: LoadData, obs: ObservedTick, to_assign: list[str], closed: list[OwnershipInterval]) -> list[Decision]:
        from lbreplay.replay import kernel_bridge

        return kernel_bridge.split(self, ld, obs, to_assign, closed)

    def _assign(self, bundles: list[str], obs: ObservedTick, closed: list[OwnershipInterval]) -> list[Decision]:
        from lbreplay.replay import kernel_bridge

        return kernel_bridge.assign(self, bundles, obs, closed)


def _bundles_like(prev: Bundles | None, rep_prev: np.ndarray | None, layout: Layout) -> Bundles:
    """Bundles rows for ``layout``; rows whose name existed in ``prev`` keep their BundleData and reported state.

    ``owner`` here carries *universe* rows of the previous reported owner (remapped by the caller).
    """
    n = len(layout)
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
        return out
    if prev.names == layout.names:
        rows_new = np.arange(n)
        rows_old = np.arange(n)
    else:
        pos = {name: i for i, name in enumerate(prev.names)}
        pairs = [(i, pos[name]) for i, name in enumerate(layout.names) if name in pos]
        if not pairs:
            return out
        rows_new = np.array([p[0] for p in pairs])
        rows_old = np.array([p[1] for p in pairs])
    for f in ("stats", "topics", "consumer_count", "producer_count", "cache_size", "has_bundle_data", "short",
              "short_samples", "short_max", "long", "long_samples", "long_max", "bundle_topics"):
        getattr(out, f)[rows_new] = getattr(prev, f)[rows_old]
    if rep_prev is not None:
        out.owner[rows_new] = rep_prev[rows_old]
    return out


def format_bundle(namespace: str, lower: int, upper: int) -> str:
    return f"{namespace}/{format_range(lower, upper)}"


def run_ticks(run: RunSpec, static: StaticInputs, ticks: Iterator[ObservedTick]) -> Iterator[TickResult]:
    replay = Replay(run, static)
    for obs in ticks:
        yield replay.step(obs)
