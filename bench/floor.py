"""Floor benchmark: the minimal vectorised closed loop of the replay's leader logic, beside the kernel loop.

The floor replays the same prepared tick stream as the kernel-only loop of ``bench/replay_m.py`` (the observed
ticks the Spark task iterates), with the same leader logic for the modular load manager's defaults --
``ThresholdShedder`` + ``LeastLongTermMessageRate`` + the automatic split check -- written as whole-array NumPy
steps: topic -> bundle by binary search on the current bundle ranges, per-broker sums by ``bincount``, report
writes (10 % / 15 min), ``updateBundleData`` samples, the shedder's EWMA and greedy selection, placement with
preallocation and the even-spread filter, range-equal splits. No Python loop per bundle: Python loops run per
sample, per unloaded bundle, per broker over the threshold and per placed bundle only.

Both loops run in one pass over the stream (each tick decoded once, each loop timed on its own), and every tick
the floor's decisions (action, bundle, source, target) must equal the kernel's: the floor is a check, not a toy.
It covers what the bench scenarios exercise and refuses the rest with a clear error (broker churn, namespace
policies, other strategies or versions).

Prints one JSON line: size, scenario, ticks, decisions, kernel_ms_per_tick, floor_ms_per_tick, ratio
(kernel / floor), load averages. Timings are per tick of the leader loop only (stream decoding excluded).

    python bench/floor.py --size S|M|L [--scenario heterogeneous] [--lake DIR] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from lbreplay.kernel.config import PulsarConfig, short_class
from lbreplay.kernel.java_hash_map import iteration_order
from lbreplay.kernel.naming import format_range
from lbreplay.kernel.version_profile import profile_for

RING = np.int64(1) << np.int64(32)
LAST = 0xFFFFFFFF
THR_IN, THR_OUT, RATE_IN, RATE_OUT, SESSIONS, TOPICS = range(6)
DEFAULT_MESSAGE_DATA = np.array([50000.0, 50000.0, 50.0, 50.0])  # BundleData default (TimeAverageMessageData)
MB = 1024.0 * 1024.0
KBIT_PER_BYTE = 8.0 / 1024.0
COLS_4 = np.array([0, 2, 3, 4])  # cpu, directMemory, bandwidthIn, bandwidthOut (4-arg weighted max, 3.0+)


# The Pulsar lines whose ThresholdShedder, LeastLongTermMessageRate and BundleSplitterTask are the source the floor
# implements (their version profiles differ only in UniformLoadShedder / AvgShedder switches).
FLOOR_LINES = ("5.0", "4.2", "4.0")


class FloorUnsupported(Exception):
    """The scenario or config uses something the floor does not implement."""


Decision = tuple[int, str, str, str | None, str | None]  # (tick, action, bundle, source, target)


def _weighted_max(usage: np.ndarray, limit: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """getMaxResourceUsageWithWeight, 4-arg: float32 percentages, weighted, max, / 100."""
    u = usage.astype(np.float32)
    lim = limit.astype(np.float32)
    pos = lim > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(pos, u / np.where(pos, lim, np.float32(1)), np.float32(0)) * np.float32(100)
    return (pct[:, COLS_4].astype(np.float64) * weights[COLS_4]).max(axis=1) / 100.0


def _pct_change(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = 100.0 * np.abs(old - new) / old
    return np.where(old == 0, np.where(new == 0, 0.0, np.inf), pct)


class Floor:
    """The closed loop's leader, vectorised. Bundles are rows sorted by global ring start (= name order)."""

    def __init__(self, broker_ids: list[str], namespaces: list[str], cpu_base: np.ndarray, cpu_per_msg: np.ndarray,
                 pulsar: dict[str, Any], seed: int = 0) -> None:
        conf = PulsarConfig.resolve(pulsar)
        prof = profile_for(conf["pulsarVersion"])
        if short_class(conf["loadBalancerLoadSheddingStrategy"]) != "ThresholdShedder" or \
                short_class(conf["loadBalancerLoadPlacementStrategy"]) != "LeastLongTermMessageRate":
            raise FloorUnsupported("the floor implements ThresholdShedder + LeastLongTermMessageRate only")
        if prof.name not in FLOOR_LINES or conf["lowerBoundarySheddingEnabled"] or not conf["loadBalancerEnabled"] \
                or not conf["loadBalancerSheddingEnabled"] or conf["preferLaterVersions"] \
                or not conf["loadBalancerDistributeBundlesEvenlyEnabled"] \
                or conf["defaultNamespaceBundleSplitAlgorithm"] != "range_equally_divide":
            raise FloorUnsupported("the floor implements Pulsar 4.x defaults of the shedding/placement/split switches")
        if any(ns == "pulsar/system" or ns.startswith("pulsar/system") for ns in namespaces):
            raise FloorUnsupported("system namespaces")
        self.ids = list(broker_ids)
        self.namespaces = list(namespaces)
        self.ns_prefix = [ns + "/" for ns in namespaces]
        self.cpu_base, self.cpu_per_msg = np.asarray(cpu_base, float), np.asarray(cpu_per_msg, float)
        self.rng = np.random.default_rng(seed)
        self.weights = np.asarray(conf.resource_weights(), dtype=np.float64)
        self.h = conf.history_percentage
        self.overload = conf.overload_threshold
        self.threshold = conf["loadBalancerBrokerThresholdShedderPercentage"] / 100.0
        self.min_thr = conf["loadBalancerBundleUnloadMinThroughputThreshold"] * MB
        self.grace_ms = int(conf["loadBalancerSheddingGracePeriodMinutes"]) * 60_000
        self.shed_ms = conf["loadBalancerSheddingIntervalMinutes"] * 60_000
        self.quota_ms = conf["loadBalancerResourceQuotaUpdateIntervalMinutes"] * 60_000
        self.max_int_ms = conf["loadBalancerReportUpdateMaxIntervalMinutes"] * 60_000
        self.report_pct = conf["loadBalancerReportUpdateThresholdPercentage"]
        self.max_topics_broker = int(conf["loadBalancerBrokerMaxTopics"])
        self.split = bool(conf["loadBalancerAutoBundleSplitEnabled"])
        self.split_unload = bool(conf["loadBalancerAutoUnloadSplitBundlesEnabled"])
        self.max_bundles = int(conf["loadBalancerNamespaceMaximumBundles"])
        self.max_b_topics = int(conf["loadBalancerNamespaceBundleMaxTopics"])
        self.max_sessions = int(conf["loadBalancerNamespaceBundleMaxSessions"])
        self.max_rate = float(conf["loadBalancerNamespaceBundleMaxMsgRate"])
        self.max_bw = float(conf["loadBalancerNamespaceBundleMaxBandwidthMbytes"]) * MB
        nb = len(self.ids)
        self.w_ms = np.full(nb, -1, dtype=np.int64)
        self.w_rate, self.w_thr, self.w_nb, self.w_max = np.zeros(nb), np.zeros(nb), np.zeros(nb), np.zeros(nb)
        self.w_thr_in, self.w_thr_out, self.w_topics = np.zeros(nb), np.zeros(nb), np.zeros(nb)
        self.w_usage, self.w_limit = np.zeros((nb, 5)), np.zeros((nb, 5))
        self.last_usage, self.last_limit = np.zeros((nb, 5)), np.zeros((nb, 5))
        self.ewma = np.full(nb, np.nan)
        self.last_shed: int | None = None
        self.last_quota: int | None = None
        self.n = 0
        self.started = False
        self.ever_alive: np.ndarray | None = None

    # ------------------------------------------------------------------ bundle rows
    def _init_rows(self, ns: np.ndarray, lo: np.ndarray, hi: np.ndarray, owner: np.ndarray) -> None:
        order = np.lexsort((lo, ns))
        self.ns, self.lo, self.hi = ns[order], lo[order], hi[order]
        self.owner = owner[order].astype(np.int64)
        n = self.n = len(order)
        self.rep = np.full(n, -1, dtype=np.int64)  # broker whose written report lists the bundle
        self.pre = np.full(n, -1, dtype=np.int64)  # preallocatedBundleData holder
        self.pmap = np.full(n, -1, dtype=np.int64)  # preallocatedBundleToBroker
        self.stats = np.zeros((n, 4))
        self.b_topics = np.zeros(n, dtype=np.int64)
        self.b_sessions = np.zeros(n, dtype=np.int64)
        self.bundle_topics = np.zeros(n, dtype=np.int64)
        self.has = np.zeros(n, dtype=bool)
        self.short = np.tile(DEFAULT_MESSAGE_DATA, (n, 1))
        self.long = np.tile(DEFAULT_MESSAGE_DATA, (n, 1))
        self.short_n = np.zeros(n, dtype=np.int64)
        self.long_n = np.zeros(n, dtype=np.int64)
        self.unloaded_at = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)  # recentlyUnloadedBundles
        self._spans()

    def _spans(self) -> None:
        up = np.where(self.hi == LAST, RING, self.hi)
        self.start = self.ns * RING + self.lo
        self.end = self.ns * RING + up

    def name(self, row: int) -> str:
        return self.ns_prefix[self.ns[row]] + format_range(int(self.lo[row]), int(self.hi[row]))

    def _layout_counts(self) -> np.ndarray:
        return np.bincount(self.ns, minlength=len(self.namespaces))

    # ------------------------------------------------------------------ leader state: namespace bundle counts
    def _reload_counts(self) -> None:
        """brokerToNamespaceToBundleRange reloaded: per (broker, namespace) ranges reported or preallocated."""
        nb, nns = len(self.ids), len(self.namespaces)
        own = self.rep >= 0
        pre = (self.pre >= 0) & (self.pre != self.rep)
        total = np.bincount(self.rep[own] * nns + self.ns[own], minlength=nb * nns)
        total += np.bincount(self.pre[pre] * nns + self.ns[pre], minlength=nb * nns)
        self.ns_counts = total.reshape(nb, nns)
        self.snap = (self.start.copy(), self.end.copy(), self.rep.copy(), self.pre.copy())
        self.added: set[tuple[int, int, int]] = set()

    def _count_add(self, broker: int, row: int) -> None:
        s_start, s_end, s_rep, s_pre = self.snap
        key = (broker, int(self.start[row]), int(self.end[row]))
        if key in self.added:
            return
        k = int(np.searchsorted(s_start, self.start[row]))
        if k < len(s_start) and s_start[k] == self.start[row] and s_end[k] == self.end[row] and \
                (s_rep[k] == broker or s_pre[k] == broker):
            return
        self.added.add(key)
        self.ns_counts[broker, self.ns[row]] += 1

    # ------------------------------------------------------------------ placement (selectBroker, LLTMR)
    def _scores(self) -> np.ndarray:
        nb = len(self.ids)
        rep = self.rep >= 0
        r_in = np.where(self.has, self.long[:, RATE_IN], DEFAULT_MESSAGE_DATA[RATE_IN])[rep]
        r_out = np.where(self.has, self.long[:, RATE_OUT], DEFAULT_MESSAGE_DATA[RATE_OUT])[rep]
        tabd = np.bincount(self.rep[rep], weights=r_in, minlength=nb) + \
            np.bincount(self.rep[rep], weights=r_out, minlength=nb)
        p = np.flatnonzero(self.pre >= 0)
        lt = np.where(self.has[p, None], self.long[p], DEFAULT_MESSAGE_DATA)
        pre_rate = np.bincount(self.pre[p], weights=lt[:, RATE_IN] + lt[:, RATE_OUT], minlength=nb)
        self.pre_topics = np.bincount(self.pre[p], weights=self.bundle_topics[p], minlength=nb).astype(np.int64)
        return np.where(self.overloaded, np.inf, pre_rate + tabd)

    def _pick(self, cand: np.ndarray, scores: np.ndarray) -> int:
        s = scores[cand]
        best = cand[s == s.min()]
        if best.size <= 1:
            return int(best[0]) if best.size else -1
        return int(best[self.rng.integers(best.size)])

    def _select(self, row: int, scores: np.ndarray) -> int:
        alive_rows = self.alive_rows
        fits = (self.pre_topics + self.w_topics.astype(np.int64)) <= self.max_topics_broker
        rows = alive_rows[fits[alive_rows]]
        if rows.size == 0:
            rows = alive_rows
        counts = self.ns_counts[rows, self.ns[row]]
        rows = rows[counts == counts.min()]
        got = self._pick(rows, scores)
        if got >= 0 and self.w_over[got] > self.overload:
            again = self._pick(alive_rows, scores)
            if again >= 0:
                got = again
        return got

    # ------------------------------------------------------------------ one tick
    def step(self, tick: int, ts: int, alive: np.ndarray, usage_obs: np.ndarray, limit_obs: np.ndarray,
             names: list[str], owner_obs: np.ndarray, pos: np.ndarray, tvals: np.ndarray) -> list[Decision]:
        ids = self.ids
        out: list[Decision] = []
        if self.ever_alive is None:
            self.ever_alive = alive.copy()
        elif not np.array_equal(alive, self.ever_alive):
            raise FloorUnsupported(f"tick {tick}: brokers joined or left (the floor covers a fixed broker set)")
        self.last_usage[alive] = usage_obs[alive]
        self.last_limit[alive] = limit_obs[alive]
        if not self.started:
            ns_index = {ns: i for i, ns in enumerate(self.namespaces)}
            parts = [n.rpartition("/") for n in names]
            ns = np.array([ns_index[p[0]] for p in parts], dtype=np.int64)
            rngs = [p[2].partition("_") for p in parts]
            lo = np.array([int(r[0], 16) for r in rngs], dtype=np.int64)
            hi = np.array([int(r[2], 16) for r in rngs], dtype=np.int64)
            self._init_rows(ns, lo, hi, np.asarray(owner_obs))
            if [self.name(i) for i in range(self.n)] != sorted(names):
                raise FloorUnsupported("bundle name order differs from ring order")
            self.started = True
        self.alive_rows = np.flatnonzero(alive)
        nb = len(ids)

        # loads: topic -> bundle by binary search on the current ranges, sums by bincount
        idx = np.searchsorted(self.start, pos, side="right") - 1
        ok = (idx >= 0) & (pos < self.end[np.maximum(idx, 0)])
        idx_ok = idx[ok]
        vals = np.column_stack([np.bincount(idx_ok, weights=tvals[ok, c], minlength=self.n) for c in range(6)])
        owned = self.owner >= 0
        own = self.owner[owned]
        tot = np.column_stack([np.bincount(own, weights=vals[owned, c], minlength=nb) for c in range(6)])
        num_bundles = np.bincount(own, minlength=nb).astype(np.float64)
        rate = tot[:, RATE_IN] + tot[:, RATE_OUT]
        thr = tot[:, THR_IN] + tot[:, THR_OUT]
        usage = self.last_usage.copy()
        usage[:, 0] = self.cpu_base + self.cpu_per_msg * rate
        usage[:, 3] = tot[:, THR_IN] * KBIT_PER_BYTE
        usage[:, 4] = tot[:, THR_OUT] * KBIT_PER_BYTE
        limit = self.last_limit
        wmax = _weighted_max(usage, limit, self.weights)

        # report writes (needBrokerDataUpdate)
        change = np.maximum.reduce([_pct_change(self.w_rate, rate), _pct_change(self.w_thr, thr),
                                    _pct_change(self.w_nb, num_bundles), 100.0 * np.abs(self.w_max - wmax)])
        write = alive & ((self.w_ms < 0) | ((ts - self.w_ms) > self.max_int_ms) | (change > self.report_pct))
        w = np.flatnonzero(write)
        self.w_ms[w] = ts
        self.w_rate[w], self.w_thr[w], self.w_nb[w], self.w_max[w] = rate[w], thr[w], num_bundles[w], wmax[w]
        self.w_thr_in[w], self.w_thr_out[w], self.w_topics[w] = tot[w, THR_IN], tot[w, THR_OUT], tot[w, TOPICS]
        self.w_usage[w], self.w_limit[w] = usage[w], limit[w]

        # the leader's view: a written report lists its bundles with their stats now
        wrote = owned & write[np.maximum(self.owner, 0)]
        self.rep[wrote] = self.owner[wrote]
        self.stats[wrote] = vals[wrote, :4]
        self.b_topics[wrote] = vals[wrote, TOPICS].astype(np.int64)
        self.b_sessions[wrote] = vals[wrote, SESSIONS].astype(np.int64)
        r = np.maximum(self.rep, 0)
        stale = (self.rep >= 0) & (~alive[r] | (write[r] & (self.owner != self.rep)))
        self.rep[stale] = -1

        # updateAll: one updateBundleData sample per written report (+ the 15-min bundle-data write, which samples
        # but checks no split: writeBundleDataOnZooKeeper)
        writes = int(write.sum())
        samples = writes
        if self.last_quota is None:
            self.last_quota = ts
        elif ts - self.last_quota >= self.quota_ms:
            samples += 1
            self.last_quota = ts
        rows = np.flatnonzero(self.rep >= 0)
        if samples and rows.size:
            fresh = rows[~self.has[rows]]
            self.short[fresh] = DEFAULT_MESSAGE_DATA
            self.long[fresh] = DEFAULT_MESSAGE_DATA
            self.short_n[fresh] = 0
            self.long_n[fresh] = 0
            self.has[fresh] = True
            sample = self.stats[rows]
            sv, sn, lv, ln = self.short[rows], self.short_n[rows], self.long[rows], self.long_n[rows]
            for _ in range(samples):
                sn = np.minimum(sn + 1, 10)
                sv = ((sn[:, None] - 1) * sv + sample) / sn[:, None]
                ln = np.minimum(ln + 1, 1000)
                lv = ((ln[:, None] - 1) * lv + sample) / ln[:, None]
            self.short[rows], self.short_n[rows], self.long[rows], self.long_n[rows] = sv, sn, lv, ln
            self.bundle_topics[rows] = self.b_topics[rows]
        if samples:
            self.has &= self.rep >= 0  # drop_unreported_bundle_data
            p = np.flatnonzero(self.pre >= 0)
            self.pmap[p] = -1
            drop = (self.rep[p] == self.pre[p]) & self.has[p]
            self.pre[p[drop]] = -1
            self._reload_counts()
        self.w_over = _weighted_max(self.w_usage, self.w_limit, self.weights)  # reported usage, overload checks
        self.overloaded = self.w_over > self.overload

        to_assign: list[int] = []  # split children by global ring start (rows move when the layout changes)
        if writes and self.split and len(self.alive_rows) > 1:
            out += self._split_check(tick, to_assign)

        # doLoadShedding on its interval
        if self.last_shed is None:
            self.last_shed = ts
        elif ts - self.last_shed >= self.shed_ms:
            self.last_shed = ts
            out += self._shed(tick, ts)

        # placement of split children and orphans (selectBrokerForAssignment, with preallocation)
        orphans = [int(self.start[r]) for r in np.flatnonzero(self.owner < 0)]
        pending = list(dict.fromkeys(to_assign + orphans))
        if pending and alive.any():
            scores = self._scores()
            for start in pending:
                row = int(np.searchsorted(self.start, start))
                if self.owner[row] >= 0:
                    continue
                known = int(self.pmap[row])
                if known >= 0:
                    broker = known
                else:
                    self.has[row] = True  # computeIfAbsent(BundleData)
                    broker = self._select(row, scores)
                    if broker < 0:
                        continue
                    self.pre[row] = broker
                    self.pmap[row] = broker
                    self._count_add(broker, row)
                    scores = self._scores()
                self.owner[row] = broker
                out.append((tick, "ASSIGN", self.name(row), None, ids[broker]))
        return out

    def _shed(self, tick: int, ts: int) -> list[Decision]:
        if len(self.alive_rows) <= 1:
            return []
        ids = self.ids
        self.unloaded_at[self.unloaded_at < ts - self.grace_ms] = np.iinfo(np.int64).min
        a = self.alive_rows
        u = _weighted_max(self.w_usage[a], self.w_limit[a], self.weights)
        prev = self.ewma[a]
        cur = np.where(np.isnan(prev), u, prev * self.h + (1 - self.h) * u)
        self.ewma[a] = cur
        avg = float(np.cumsum(cur)[-1]) / len(a)
        if avg == 0:
            return []
        throughput = (self.w_thr_in + self.w_thr_out)[a]
        counts = np.bincount(self.rep[self.rep >= 0], minlength=len(ids))[a]
        need = throughput * (cur - avg - self.threshold + 0.05)
        values = self.short[:, THR_IN] + self.short[:, THR_OUT]
        cand = self.has & (self.unloaded_at == np.iinfo(np.int64).min)
        plan: list[tuple[int, int]] = []  # (source broker, bundle row)
        for k in np.flatnonzero(~(cur < avg + self.threshold)).tolist():
            if need[k] < self.min_thr or counts[k] <= 1:
                continue
            broker = int(a[k])
            rows = np.flatnonzero(cand & (self.rep == broker))
            if rows.size == 0:
                continue
            v = values[rows]
            order = np.argsort(np.where(np.isnan(v), -np.inf, -v), kind="stable")
            rows, v = rows[order], v[order]
            before = np.concatenate(([0.0], np.cumsum(v)[:-1]))
            take = before < need[k]
            take[0] = True
            stop = int(np.argmin(take)) if not take.all() else take.size
            plan += [(broker, int(r)) for r in rows[:stop]]
        out: list[Decision] = []
        if not plan:
            return out
        for _, row in plan:
            self.has[row] = True
        scores = self._scores()
        for broker, row in plan:  # brokers in id order, bundles in plan order
            dest = self._select(row, scores)
            if dest < 0 or dest == broker:
                continue
            self.unloaded_at[row] = ts
            src = int(self.owner[row])
            name = self.name(row)
            self.owner[row] = dest
            out.append((tick, "UNLOAD", name, ids[src] if src >= 0 else ids[broker], ids[dest]))
        return out

    def _split_check(self, tick: int, to_assign: list[int]) -> list[Decision]:
        rate = np.where(self.has, self.long[:, RATE_IN] + self.long[:, RATE_OUT], 0.0)
        thr = np.where(self.has, self.long[:, THR_IN] + self.long[:, THR_OUT], 0.0)
        hit = (self.b_topics > self.max_b_topics) | ((self.b_sessions > self.max_sessions) & (self.max_sessions > 0)) \
            | (rate > self.max_rate) | (thr > self.max_bw)
        rows = np.flatnonzero((self.rep >= 0) & hit & (self.b_topics >= 2))
        if rows.size == 0:
            return []
        # BundleSplitterTask walks getBrokerData() (a ConcurrentHashMap: the JVM's order of the broker ids), then each
        # broker's bundles by name; checkNamespaceBundleSplit walks the result, a HashMap (kernel.bundle_split)
        rank = np.empty(len(self.ids), dtype=np.int64)
        rank[[self.ids.index(b) for b in iteration_order(self.ids, "ConcurrentHashMap")]] = np.arange(len(self.ids))
        rows = rows[np.lexsort((rows, rank[self.rep[rows]]))]
        counts = self._layout_counts()
        planned = np.zeros_like(counts)
        found = []
        for row in rows.tolist():
            ns = int(self.ns[row])
            if counts[ns] + planned[ns] < self.max_bundles:
                found.append(row)
                planned[ns] += 1
        position = {name: k for k, name in enumerate(iteration_order(self.name(r) for r in found))}
        found.sort(key=lambda r: position[self.name(r)])
        out: list[Decision] = []
        parents: list[tuple[int, int]] = []
        for row in found:
            lo, hi = int(self.lo[row]), int(self.hi[row])
            if not hi - lo > 1:  # canSplitBundle
                continue
            self.has[row] = False  # the parent's BundleData goes before the split is tried
            mid = lo + (hi - lo) // 2  # RangeEquallyDivideBundleSplitAlgorithm
            parents.append((row, mid))
            src = int(self.owner[row])
            src_id = self.ids[src] if src >= 0 else self.ids[int(self.rep[row])]
            out.append((tick, "SPLIT", self.name(row), src_id, None if self.split_unload else src_id))
        if not parents:
            return out
        children = [int(self.ns[p] * RING + v) for p, m in parents for v in (self.lo[p], m)]
        # replace each parent by its two children (new rows without BundleData, unowned when unloaded)
        keep = np.ones(self.n, dtype=bool)
        keep[[p for p, _ in parents]] = False
        k = 2 * len(parents)
        new = {
            "ns": np.array([self.ns[p] for p, _ in parents for _ in (0, 1)], dtype=np.int64),
            "lo": np.array([v for p, m in parents for v in (self.lo[p], m)], dtype=np.int64),
            "hi": np.array([v for p, m in parents for v in (m, self.hi[p])], dtype=np.int64),
            "owner": np.array([(-1 if self.split_unload else self.owner[p]) for p, _ in parents for _ in (0, 1)],
                              dtype=np.int64),
            "rep": np.full(k, -1, dtype=np.int64), "pre": np.full(k, -1, dtype=np.int64),
            "pmap": np.full(k, -1, dtype=np.int64), "stats": np.zeros((k, 4)),
            "b_topics": np.zeros(k, dtype=np.int64), "b_sessions": np.zeros(k, dtype=np.int64),
            "bundle_topics": np.zeros(k, dtype=np.int64), "has": np.zeros(k, dtype=bool),
            "short": np.tile(DEFAULT_MESSAGE_DATA, (k, 1)), "long": np.tile(DEFAULT_MESSAGE_DATA, (k, 1)),
            "short_n": np.zeros(k, dtype=np.int64), "long_n": np.zeros(k, dtype=np.int64),
            "unloaded_at": np.full(k, np.iinfo(np.int64).min, dtype=np.int64),
        }
        merged = {name: np.concatenate([getattr(self, name)[keep], arr]) for name, arr in new.items()}
        order = np.lexsort((merged["lo"], merged["ns"]))
        for name, arr in merged.items():
            setattr(self, name, arr[order])
        self.n = len(order)
        self._spans()
        if self.split_unload:
            to_assign += children
        return out


# ----------------------------------------------------------------------------------------------------------
# the bench
# ----------------------------------------------------------------------------------------------------------
def emit(**kw: object) -> None:
    print(json.dumps(kw), flush=True)


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def kernel_decisions(res: Any) -> list[Decision]:
    """The kernel's decisions but KEEP (a planned bundle its placement kept on the owner: no move, not modelled)."""
    return [(d.tick, d.action, d.bundle, d.source_broker, d.target_broker) for d in res.decisions if d.action != "KEEP"]


def compare(meta: Any, pulsar: dict[str, Any], replay: dict[str, Any], ticks: Iterator[Any],
            seed: int = 0, floor_pulsar: dict[str, Any] | None = None) -> dict[str, Any]:
    """Both loops over one pass of the tick stream; raises AssertionError at the first tick they disagree.
    ``floor_pulsar`` gives the floor other Pulsar keys than the kernel (to show the check can fail)."""
    from lbreplay.replay.engine import Replay, RunSpec, StaticInputs

    static = StaticInputs(meta.broker_ids, meta.namespaces, meta.calibration())
    kernel = Replay(RunSpec("kernel-only", "bench", "closed-loop", pulsar, seed, replay), static)
    floor = Floor(meta.broker_ids, meta.namespaces, np.array(meta.cpu_base), np.array(meta.cpu_per_msg),
                  floor_pulsar if floor_pulsar is not None else pulsar, seed)
    k_s = f_s = 0.0
    n_ticks = 0
    counts: dict[str, int] = {}
    for obs in ticks:
        if obs.topic_values is None:
            raise FloorUnsupported(f"tick {obs.tick}: no topic loads (the floor reads topic_load)")
        t0 = time.perf_counter()
        res = kernel.step(obs)
        t1 = time.perf_counter()
        got = floor.step(obs.tick, obs.ts_ms, obs.alive.astype(bool), obs.usage, obs.limit, obs.bundle_names,
                         obs.bundle_owner, obs.topic_positions, obs.topic_values)
        t2 = time.perf_counter()
        k_s += t1 - t0
        f_s += t2 - t1
        n_ticks += 1
        want = kernel_decisions(res)
        if got != want:
            raise AssertionError(f"tick {obs.tick}: floor and kernel disagree\n kernel: {want}\n floor:  {got}")
        for d in want:
            counts[d[1]] = counts.get(d[1], 0) + 1
    return {"ticks": n_ticks, "decisions": counts, "kernel_s": k_s, "floor_s": f_s}


def prepared_stream(size: str, scenario: str, lake: str | None, seed: int) -> tuple[Any, Iterator[Any]]:
    """Generate (unless already there) and prepare the bench cluster; returns its stream's meta and ticks."""
    from lbreplay.lake.generator import generate
    from lbreplay.replay import preparation as R
    from lbreplay.replay.tick_stream import ticks_from_stream
    from lbreplay.spark import get_spark

    lake = lake or str(Path(__file__).resolve().parents[1] / "data" / "bench-lake")
    spark = get_spark(lake, master="local[2]", conf={"spark.ui.enabled": "false"})
    cluster = f"floor{size.lower()}{scenario.replace('-', '')}{seed}"
    if not os.path.isdir(f"{lake}/broker_load") or not spark.read.format("delta").load(f"{lake}/broker_load") \
            .where(f"cluster = '{cluster}'").limit(1).count():
        t0 = time.time()
        generate(spark, lake, scenario, cluster, seed=seed, size=size)
        emit(step="generate", size=size, scenario=scenario, seconds=round(time.time() - t0, 1), load_average=load_avg())
    versions = R.input_versions(spark, lake, cluster)
    _, meta = R.prepare(spark, lake, cluster, versions)
    return meta, ticks_from_stream(meta)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="S")
    ap.add_argument("--scenario", default="heterogeneous")
    ap.add_argument("--lake", default=None, help="lake to generate into / read from (default data/bench-lake)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    from lbreplay.replay.run_config import resolve_run_config

    pulsar, replay = resolve_run_config("threshold-lltmr")
    meta, ticks = prepared_stream(args.size.upper(), args.scenario, args.lake, args.seed)
    before = load_avg()
    r = compare(meta, pulsar, replay, ticks)
    k_ms, f_ms = 1000 * r["kernel_s"] / r["ticks"], 1000 * r["floor_s"] / r["ticks"]
    emit(size=args.size.upper(), scenario=args.scenario, brokers=len(meta.broker_ids), ticks=r["ticks"],
         decisions=r["decisions"], decisions_agree=True, kernel_ms_per_tick=round(k_ms, 3),
         floor_ms_per_tick=round(f_ms, 3), ratio=round(k_ms / f_ms, 2), load_average_before=before,
         load_average=load_avg())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
