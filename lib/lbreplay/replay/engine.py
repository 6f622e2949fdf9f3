"""The stateful tick loop of a replay run (pure NumPy; runs inside a Spark task or in-process).

Closed loop (what-if): ownership evolves from the replay's own decisions. Each tick
1. brokers that left release their bundles (orphans, assigned at the next lookup);
2. bundle loads come from history under the replay's *current* layout (``ring_load``), broker load from
   ownership through the calibrated load model (``load_model``);
3. the leader of the configured load manager runs its cycle on that view (``modular_leader`` for
   ``ModularLoadManagerImpl``, ``extensible_leader`` for ``ExtensibleLoadManagerImpl``): report writes, bundle
   data, split, shed, assign.
Observed mode (audit): the same leader on the observed ownership and usage, with no feedback: its decisions
are recorded, not applied.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from lbreplay.kernel.config import PulsarConfig, is_extensible
from lbreplay.kernel.naming import bundle_bounds, format_range
from lbreplay.kernel.resource_usage import max_resource_usage, percent_usage, weighted_max_usage
from lbreplay.kernel.version_profile import profile_for
from lbreplay.replay.extensible_leader import ExtensibleLeader
from lbreplay.replay.load_model import MIN_MEASURED_CPU, model_usage, modelled_cpu, recorded_usage
from lbreplay.replay.modular_leader import ModularLeader
from lbreplay.replay.ownership import Layout, Ownership
from lbreplay.replay.records import (
    SESSIONS,
    TOPICS,
    BrokerTick,
    Decision,
    LoadView,
    ObservedTick,
    OwnershipInterval,
    RunSpec,
    StaticInputs,
    TickResult,
)
from lbreplay.replay.ring_load import IntervalLoad, PointLoad, TopicWeightedLoad, bundle_span, finest
from lbreplay.replay.stored_bundle_data import BundleDataStore

__all__ = [
    "BrokerTick", "Decision", "Layout", "ObservedTick", "OwnershipInterval", "Replay", "RunSpec", "StaticInputs",
    "TickResult", "format_bundle", "run_ticks",
]


class Replay:
    """One run's state across ticks. ``step`` consumes one ObservedTick and returns its TickResult."""

    def __init__(self, run: RunSpec, static: StaticInputs):
        self.run = run
        self.static = static
        self.conf = PulsarConfig.resolve(run.config)
        self.profile = profile_for(self.conf["pulsarVersion"])
        self.what_if = run.mode != "observed"
        # a closed loop's lead-in (ticks < 0 of a window inside a recording) is replayed as the audit: the leader
        # starts the window with what the recorded leader held (reports, BundleData, strategy history)
        self.closed_loop = self.what_if
        rng = np.random.default_rng(run.seed)
        self.leader: ModularLeader | ExtensibleLeader
        if is_extensible(self.conf):
            self.leader = ExtensibleLeader(self.conf, static.broker_ids, static.policies, rng)
        else:
            self.leader = ModularLeader(self.conf, static.broker_ids, static.policies, rng)
            if static.stored_bundle_data is not None and len(static.stored_bundle_data):
                self.leader.store = BundleDataStore(static.stored_bundle_data, what_if=self.what_if)
        self.ownership = Ownership(static.broker_ids, static.namespaces)
        nb = len(static.broker_ids)
        self.last_usage = np.zeros((nb, 5))
        self.last_limit = np.zeros((nb, 5))
        self.seq = 0
        self.seen_last_update = np.full(nb, -1, dtype=np.int64)
        self._load_of: tuple[ObservedTick, PointLoad | IntervalLoad] | None = None  # the last tick's load source

    @property
    def layout(self) -> Layout:
        return self.ownership.layout

    @property
    def strategy_name(self) -> str:
        """The shedding strategy the decisions name (``TransferShedder`` under the extensible load manager)."""
        return self.leader.strategy

    def finish(self) -> list[OwnershipInterval]:
        """Still-open ownership intervals (``to_*`` null)."""
        return self.ownership.finish()

    def step(self, obs: ObservedTick) -> TickResult:
        conf = self.conf
        nb = len(self.static.broker_ids)
        alive = obs.alive.astype(bool)
        self.last_usage[alive] = obs.usage[alive]
        self.last_limit[alive] = obs.limit[alive]
        ownership = self.ownership
        ownership.begin_tick(obs.tick, obs.ts_ms)
        self._warm_up(obs.tick)
        observed_layout = Layout(list(obs.bundle_names), obs.bundle_owner.copy(), self.static.namespaces)
        # a recording's closed loop: the held report versions (listings) drive it from the recorded state
        recorded = self.closed_loop and obs.listings is not None
        if not ownership.started or not self.closed_loop:
            ownership.follow(observed_layout)
        elif recorded:
            ownership.adopt(observed_layout)
        ownership.release(alive)
        layout = ownership.layout

        # loads: bundles under the replay layout, brokers by ownership through the load model
        vals = self.bundle_values(obs, layout) if self.closed_loop else self._observed_values(obs, layout)
        tot, num_bundles, listings = self._broker_totals(obs, layout, vals)
        usage, cal_err = self._usage(obs, alive, tot, layout, observed_layout, recorded)
        limit = self.last_limit
        wmax = weighted_max_usage(usage, limit, conf)
        compared = wmax if self.profile.overload_checks_weighted else max_resource_usage(usage, limit, conf)
        writes = self._observed_writes(obs, alive) if not self.closed_loop or recorded else None
        if recorded and obs.broker_meta and obs.listings is not None:  # an extensible recording's closed loop:
            listings = self._held_lists(obs, layout)  # its brokers' published top bundles lists
        view = LoadView(obs.tick, obs.ts_ms, alive, vals, usage, limit, tot, num_bundles, compared,
                        observed_writes=writes, apply=self.closed_loop, listings=listings,
                        timer_minute=obs.timer_minute,
                        leader_broker=None if self.closed_loop else obs.leader_broker,
                        timer_lag_ms=None if self.closed_loop and not recorded else obs.timer_lag_ms,
                        recorded=self._recorded_load_data(obs, recorded, wmax, limit),
                        lookups=None if self.closed_loop else obs.lookups)
        decisions = self.leader.tick(view, ownership)
        for d in decisions:
            self.seq += 1
            d.seq = self.seq

        # what this tick looked like (true modelled load, not the leader's stale view)
        layout = ownership.layout
        owned = layout.owner >= 0
        bt = BrokerTick(obs.tick, obs.ts_ms, percent_usage(usage, limit).astype(np.float64),
                        max_resource_usage(usage, limit, conf), wmax, self.leader.score(wmax), view.msg_rate,
                        view.msg_throughput, np.bincount(layout.owner[owned], minlength=nb), tot[:, TOPICS], alive)
        return TickResult(bt, decisions, ownership.closed, cal_err)

    @staticmethod
    def _held_lists(obs: ObservedTick, layout: Layout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The held reports' listings on ``layout``'s rows (-1: a bundle the replay's layout does not have)."""
        assert obs.listings is not None
        lb, li, lv = obs.listings
        row_of = layout.rows()
        return lb, np.array([row_of.get(obs.bundle_names[i], -1) for i in li.tolist()], dtype=np.int64), lv

    def _recorded_load_data(self, obs: ObservedTick, recorded: bool, wmax: np.ndarray,
                            limit: np.ndarray) -> dict[str, np.ndarray] | None:
        """An extensible recording's BrokerLoadData as published (``ObservedTick.broker_meta``): for its audit, and
        for its closed loop with each broker's modelled change of weighted max usage against the recorded one
        (``weighted_max_change``: zero while the replay's ownership is the recording's)."""
        if not obs.broker_meta or (self.closed_loop and not recorded):
            return None
        if not self.closed_loop:
            return obs.broker_meta
        return {**obs.broker_meta, "weighted_max_change": wmax - weighted_max_usage(obs.usage, limit, self.conf)}

    def _warm_up(self, tick: int) -> None:
        """A closed loop replays its lead-in (ticks < 0) as the audit; at its window's first tick it takes over the
        observed ownership, its intervals starting then."""
        closed = self.what_if and tick >= 0
        if closed and not self.closed_loop and self.ownership.started:
            self.ownership.restamp()
        self.closed_loop = closed
        store = getattr(self.leader, "store", None)
        if store is not None:
            store.what_if = closed  # the what-if reads the BundleData recorded up to its first own tick

    def _broker_totals(self, obs: ObservedTick, layout: Layout, vals: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
        """Each broker's (B, 6) load and bundle count: of its held report's own lastStats in an audit of report
        versions (also returned, as the leader's ``listings``), else of the bundles the layout gives it."""
        nb = len(self.static.broker_ids)
        tot = np.zeros((nb, 6))
        if obs.listings is not None and not self.closed_loop:  # each held report's own lastStats
            lb, li, lv = obs.listings
            row_of = layout.rows()
            listings = (lb, np.array([row_of[obs.bundle_names[i]] for i in li.tolist()], dtype=np.int64), lv)
            np.add.at(tot, lb, lv)
            return tot, np.bincount(lb, minlength=nb).astype(np.float64), listings
        owned = layout.owner >= 0
        np.add.at(tot, layout.owner[owned], vals[owned])
        return tot, np.bincount(layout.owner[owned], minlength=nb).astype(np.float64), None

    def _usage(self, obs: ObservedTick, alive: np.ndarray, tot: np.ndarray, layout: Layout, observed_layout: Layout,
               recorded: bool) -> tuple[np.ndarray, float | None]:
        """The brokers' (B, 5) usage and the calibration's error at this tick. An audit: as observed. A closed
        loop: through the load model (``load_model``); of a recording, the recorded usage plus the modelled change
        of each broker's traffic against its held report's. The error (cpu MAPE of the fitted model against the
        observed cpu, readings under ``MIN_MEASURED_CPU`` left out) is taken where the replay's ownership is the
        observed one."""
        if not self.closed_loop:
            return self.last_usage.copy(), None
        msg_rate = tot[:, 2] + tot[:, 3]
        if recorded:
            assert obs.listings is not None
            held = np.zeros_like(tot)
            np.add.at(held, obs.listings[0], obs.listings[2])
            usage = recorded_usage(self.static.calibration, tot, held, self.last_usage)
        else:
            usage = model_usage(self.static.calibration, msg_rate, tot[:, 0], tot[:, 1], self.last_usage)
        cal_err = None
        if layout.names == observed_layout.names and np.array_equal(layout.owner, observed_layout.owner):
            obs_cpu = obs.usage[alive, 0]
            ok = obs_cpu >= MIN_MEASURED_CPU
            if ok.any():
                fitted = modelled_cpu(self.static.calibration, msg_rate)[alive]
                cal_err = float(np.mean(np.abs(fitted[ok] - obs_cpu[ok]) / obs_cpu[ok]))
        return usage, cal_err

    def _observed_writes(self, obs: ObservedTick, alive: np.ndarray) -> np.ndarray:
        """Audit: the observed table holds what the leader saw, so a report was written when lastUpdate changed
        (every tick when the history has no lastUpdate)."""
        if obs.last_update is None:
            return alive.copy()
        write = alive & (obs.last_update != self.seen_last_update)
        self.seen_last_update = np.where(alive, obs.last_update, self.seen_last_update)
        return write

    def bundle_values(self, obs: ObservedTick, layout: Layout) -> np.ndarray:
        """The (n, 6) loads of ``layout``'s bundles at ``obs`` (topic points or observed bundles by range overlap)."""
        if self._load_of is not None and self._load_of[0] is obs:  # this tick's again (a layout the tick changed)
            src: PointLoad | IntervalLoad = self._load_of[1]
        elif obs.topic_values is not None and obs.topic_positions is not None and obs.listings is None:
            src = PointLoad(obs.topic_positions, obs.topic_values)
        else:  # observed bundles by range; a recording's with its topics: spread as they are (TopicWeightedLoad)
            topics = None if obs.topic_values is None or obs.topic_positions is None \
                else PointLoad(obs.topic_positions, obs.topic_values)
            parsed = [bundle_bounds(n) for n in obs.bundle_names]
            ns_index = {ns: i for i, ns in enumerate(self.static.namespaces)}
            ns_idx = np.array([ns_index[p[0]] for p in parsed], dtype=np.int64)
            s, e = bundle_span(ns_idx, np.array([p[1] for p in parsed]), np.array([p[2] for p in parsed]))
            keep = finest(s, e) if obs.listings is not None else None  # a recording's held reports: a split
            held = obs.bundle_values
            if keep is not None and not keep.all():  # parent (an older report) beside its children
                s, e, held = s[keep], e[keep], held[keep]
            src = IntervalLoad(s, e, held) if topics is None else TopicWeightedLoad(s, e, held, topics)
        self._load_of = (obs, src)
        vals = src.range_sum(layout.start, layout.end)
        if not isinstance(src, PointLoad):
            vals[:, SESSIONS:] = np.round(vals[:, SESSIONS:])
        return vals

    def _observed_values(self, obs: ObservedTick, layout: Layout) -> np.ndarray:
        pos = {n: i for i, n in enumerate(obs.bundle_names)}
        idx = np.array([pos[n] for n in layout.names], dtype=np.int64)
        return obs.bundle_values[idx] if len(idx) else np.zeros((0, 6))


def format_bundle(namespace: str, lower: int, upper: int) -> str:
    return f"{namespace}/{format_range(lower, upper)}"


def run_ticks(run: RunSpec, static: StaticInputs, ticks: Iterator[ObservedTick]) -> Iterator[TickResult]:
    replay = Replay(run, static)
    for obs in ticks:
        yield replay.step(obs)
