"""Who owns which bundle when, in a generated history: a small driver-side model over (bundle x event) metadata.

Initial placement balances bundle message rates (capacity-blind, like ``LeastLongTermMessageRate``); a departing
broker's bundles go to the least-loaded survivors; a joining (or restarted) broker starts empty and receives bundles
gradually, a few moves per tick from the most- to the least-loaded broker (shedding-like). The result is a list of
ownership intervals, which :mod:`lbreplay.lake.generator` joins to the per-tick data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lbreplay.errors import UsageError
from lbreplay.lake.scenario import Event, RebalanceSpec


@dataclass
class OwnershipPlan:
    """Ownership intervals (inclusive ticks) and broker lifetimes produced by :func:`plan_ownership`."""

    bundle: np.ndarray  # int, per interval
    broker: np.ndarray
    from_tick: np.ndarray
    to_tick: np.ndarray
    alive: list[tuple[int, int, int]]  # (broker, from_tick, to_tick)
    changes: list[tuple[int, int]]  # (broker, tick): the broker's bundle set changed at tick
    num_brokers: int
    moves: int = 0

    def owner_at(self, tick: int) -> np.ndarray:
        """Owner broker per bundle at ``tick`` (-1 if none)."""
        nb = int(self.bundle.max()) + 1 if len(self.bundle) else 0
        out = np.full(nb, -1, dtype=np.int64)
        m = (self.from_tick <= tick) & (self.to_tick >= tick)
        out[self.bundle[m]] = self.broker[m]
        return out

    def alive_at(self, tick: int) -> list[int]:
        return sorted(b for b, lo, hi in self.alive if lo <= tick <= hi)


def plan_ownership(weights: np.ndarray, capacity: np.ndarray, initial: int, events: tuple[Event, ...], ticks: int,
                   rebalance: RebalanceSpec | None = None) -> OwnershipPlan:
    """Who owns which bundle when, for the observed history.

    ``weights``: per-bundle load (msg/s in+out); ``capacity``: capacity factor per broker index (all brokers
    that ever exist: the initial ones, then joiners in order). Brokers and bundles are visited in index order;
    ties go to the lowest index. A leave removes the highest-numbered alive brokers (a StatefulSet scale-down);
    a rolling restart takes every alive broker down in turn, highest first, for ``down_ticks``. ``rebalance``
    defaults to :class:`RebalanceSpec`'s defaults.
    """
    spec = rebalance or RebalanceSpec()
    return _OwnershipModel(np.asarray(weights, dtype=np.float64), capacity, initial, events, spec).run(ticks)


class _OwnershipModel:
    """The state :func:`plan_ownership` advances tick by tick: owners, live brokers, and the intervals so far."""

    def __init__(self, weights: np.ndarray, capacity: np.ndarray, initial: int, events: tuple[Event, ...],
                 rebalance: RebalanceSpec) -> None:
        self.weights = weights
        self.initial = initial
        self.events = events
        self.rebalance_spec = rebalance
        nb = len(weights)
        self.n_total = n_total = initial + sum(e.count for e in events if e.kind == "join")
        if len(capacity) < n_total:
            raise ValueError("capacity must cover every broker that ever exists")
        cap = np.asarray(capacity[:n_total], dtype=np.float64)
        self.norm = cap if rebalance.by == "capacity" else np.ones(n_total)
        self.owner = np.full(nb, -1, dtype=np.int64)
        self.alive = np.zeros(n_total, dtype=bool)
        self.alive_since = np.full(n_total, -1, dtype=np.int64)
        self.since = np.zeros(nb, dtype=np.int64)
        self.iv_bundle: list[int] = []
        self.iv_broker: list[int] = []
        self.iv_from: list[int] = []
        self.iv_to: list[int] = []
        self.alive_iv: list[tuple[int, int, int]] = []
        self.changes: set[tuple[int, int]] = set()
        self.next_id = initial
        self.moves = 0
        self.schedule: dict[int, list[tuple[str, int]]] = {}
        for e in events:
            self.schedule.setdefault(e.tick, []).append((e.kind, e.count))

    def run(self, ticks: int) -> OwnershipPlan:
        prev = self.owner.copy()
        for t in range(ticks):
            if t == 0:
                self.start(list(range(self.initial)), 0)
                self.place(np.arange(len(self.weights)), False)
            # a list extended while it is walked: a rolling restart's first "down" happens at its own tick
            for kind, count in self.schedule.get(t, []):
                self.apply(kind, count, t)
            if self.rebalance_spec.enabled and t > 0 and t % self.rebalance_spec.every_ticks == 0:
                self.rebalance(t)
            self.record_changes(prev, t)
            prev = self.owner.copy()
        return self.finish(ticks)

    def loads(self) -> np.ndarray:
        owned = self.owner >= 0
        return np.bincount(self.owner[owned], weights=self.weights[owned], minlength=self.n_total) / self.norm

    def place(self, bundles: np.ndarray, stale: bool) -> None:
        """Bundles to the least-loaded live broker, heaviest first (all to one broker when ``stale``)."""
        weights, norm, owner = self.weights, self.norm, self.owner
        order = bundles[np.lexsort((bundles, -weights[bundles]))]
        cur = self.loads()
        cand = np.flatnonzero(self.alive)
        if len(cand) == 0:
            raise UsageError("the scenario leaves no broker alive")
        if stale:
            owner[order] = cand[np.argmin(cur[cand])]
            return
        for b in order:
            target = cand[np.argmin(cur[cand])]
            owner[b] = target
            cur[target] += weights[b] / norm[target]

    def kill(self, brokers: list[int], t: int) -> None:
        for br in brokers:
            self.alive[br] = False
            if self.alive_since[br] <= t - 1:
                self.alive_iv.append((br, int(self.alive_since[br]), t - 1))
        orphans = np.flatnonzero(np.isin(self.owner, brokers))
        self.owner[orphans] = -1
        self.place(orphans, self.rebalance_spec.orphans == "stale")

    def start(self, brokers: list[int], t: int) -> None:
        for br in brokers:
            self.alive[br] = True
            self.alive_since[br] = t

    def apply(self, kind: str, count: int, t: int) -> None:
        """One scheduled event at tick ``t`` (``count``: brokers to leave/join, or the broker going down/up)."""
        if kind == "leave":
            up = np.flatnonzero(self.alive)
            if count >= len(up):
                raise UsageError(f"event at tick {t}: cannot remove {count} of {len(up)} brokers")
            self.kill([int(b) for b in up[::-1][:count]], t)
        elif kind == "join":
            self.start(list(range(self.next_id, self.next_id + count)), t)
            self.next_id += count
        elif kind == "rolling_restart":
            ev = next(e for e in self.events if e.tick == t and e.kind == kind)
            for i, br in enumerate(np.flatnonzero(self.alive)[::-1]):
                down = t + i * ev.interval_ticks
                self.schedule.setdefault(down, []).append(("down", int(br)))
                self.schedule.setdefault(down + ev.down_ticks, []).append(("up", int(br)))
        elif kind == "down":
            if self.alive[count]:
                if self.alive.sum() <= 1:
                    raise UsageError(f"rolling restart at tick {t} would leave no broker alive")
                self.kill([count], t)
        elif kind == "up":
            if not self.alive[count]:
                self.start([count], t)

    def rebalance(self, t: int) -> None:
        """Up to ``max_moves`` moves from the most- to the least-loaded broker, each the bundle nearest the ideal."""
        spec, weights, norm, owner = self.rebalance_spec, self.weights, self.norm, self.owner
        cur = self.loads()
        cand = np.flatnonzero(self.alive & (self.alive_since < t))  # a broker (re)started now has not reported yet
        for _ in range(spec.max_moves):
            if len(cand) < 2:
                break
            hi = cand[np.argmax(cur[cand])]
            lo = cand[np.argmin(cur[cand])]
            gap = cur[hi] - cur[lo]
            if gap <= spec.tolerance * float(cur[cand].mean()) or gap <= 0:
                break
            mine = np.flatnonzero(owner == hi)
            limit = gap * norm[lo]  # moving w helps only if cur[lo] + w/norm[lo] < cur[hi]
            ok = mine[weights[mine] < limit]
            if len(ok) == 0:
                break
            ideal = gap / (1.0 / norm[hi] + 1.0 / norm[lo])
            pick = ok[np.lexsort((ok, np.abs(weights[ok] - ideal)))][0]
            owner[pick] = lo
            cur[hi] -= weights[pick] / norm[hi]
            cur[lo] += weights[pick] / norm[lo]
            self.moves += 1

    def record_changes(self, prev: np.ndarray, t: int) -> None:
        """Close the intervals of bundles whose owner changed at ``t``; both brokers' bundle sets changed."""
        owner = self.owner
        for b in np.flatnonzero(owner != prev):
            if prev[b] >= 0:
                self.iv_bundle.append(int(b))
                self.iv_broker.append(int(prev[b]))
                self.iv_from.append(int(self.since[b]))
                self.iv_to.append(t - 1)
                if self.alive[prev[b]]:
                    self.changes.add((int(prev[b]), t))
            self.since[b] = t
            self.changes.add((int(owner[b]), t))

    def finish(self, ticks: int) -> OwnershipPlan:
        for b in range(len(self.weights)):
            self.iv_bundle.append(b)
            self.iv_broker.append(int(self.owner[b]))
            self.iv_from.append(int(self.since[b]))
            self.iv_to.append(ticks - 1)
        for br in np.flatnonzero(self.alive):
            self.alive_iv.append((int(br), int(self.alive_since[br]), ticks - 1))
        return OwnershipPlan(
            np.asarray(self.iv_bundle, dtype=np.int64), np.asarray(self.iv_broker, dtype=np.int64),
            np.asarray(self.iv_from, dtype=np.int64), np.asarray(self.iv_to, dtype=np.int64),
            sorted(self.alive_iv), sorted(self.changes), self.n_total, self.moves,
        )
