"""``TransferShedder`` (PIP-220), the shedding strategy of the extensible load manager, on ``ExtensibleContext``.

Mirrors ``extensions.scheduler.TransferShedder.findBundlesForUnloading`` with its ``LoadStats``
(``update``, ``offload``, ``hasTransferableBrokers``), ``isUnderLoaded``, ``isOverLoaded``, ``isTransferable``
and ``isLoadBalancerSheddingBundlesWithPoliciesEnabled``. Ported tests: ``TransferShedderTest``.

Two versions, chosen by ``pulsarVersion`` (``VersionProfile.transfer_hit_count``):

* **current** (index id 7245172105, 3.x / 4.x): brokers sorted by ``weightedMaxEMA`` (every entry of the
  load store, stale ones included; stale entries are left out of avg/std only); the shedding condition
  (std > ``loadBalancerBrokerLoadTargetStd``, or the min broker underloaded, or the max broker overloaded)
  must hold on more than ``loadBalancerSheddingConditionHitCountThreshold`` consecutive calls; then up to
  ``loadBalancerMaxNumberOfBrokerSheddingPerCycle`` (max, min) pairs: offload target
  ``maxThroughput * (maxLoad - minLoad) / 2 / maxLoad`` (``transfer_target_scaled``), top bundles walked in
  list order, always leaving one, zero-throughput bundles skipped, and when the next bundle overshoots the
  target a swap of the min broker's top bundles back to the max broker is tried (one iterator shared by all
  bundles of this max broker).
* **first version** (id 7856206173, 3.0): no hit count and no swap; min/max brokers from bounded priority
  queues of size ``...SheddingPerCycle``; target ``maxThroughput * offload``; bundles picked while the
  marked traffic is below the target (at least one); with std <= target only a min broker with zero
  throughput is a reason to continue; skip reason ``Balanced``.

**Swap gain (the debug-mode bug).** In the current source ``trafficMarkedToGain += swapThroughput`` sits inside
``if (debugMode)``, so the traffic gained by a swap is subtracted from the offloaded traffic (and from the std
adjustment) only when ``loadBalancerDebugModeEnabled`` is true. We reproduce that by default
(``swap_gain_only_in_debug=True``); pass ``False`` to model the evidently intended behaviour.

Order: ``LoadStats.update`` walks the broker load-data store (``TableViewImpl``'s ``ConcurrentHashMap``) in the
JVM's order (:class:`~lbreplay.kernel.extensible.map_order.LoadDataStoreOrder`, carried in the state as
``loadDataStore``: the table size and key order, brokers new to the store put in sorted order): the CoolDown scan,
the sequential sums of avg / std, and ``brokersSortedByLoad``'s stable sort (ties in ``weightedMaxEMA``) follow it.
Decisions are returned in the order they are made (Pulsar returns a ``HashSet``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.broker_filters import filter_brokers
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.extensible.map_order import LoadDataStoreOrder
from lbreplay.kernel.naming import split_bundle_name
from lbreplay.kernel.strategy import Unload
from lbreplay.kernel.version_profile import profile_for

# UnloadDecision.Reason
OVERLOADED = "Overloaded"
UNDERLOADED = "Underloaded"
BALANCED = "Balanced"
NO_BUNDLES = "NoBundles"
COOL_DOWN = "CoolDown"
OUT_DATED_DATA = "OutDatedData"
NO_LOAD_DATA = "NoLoadData"
NO_BROKERS = "NoBrokers"
HIT_COUNT = "HitCount"
UNKNOWN = "Unknown"


def _java_sqrt(x: float) -> float:
    """``Math.sqrt``: NaN for a negative argument (rounding can make ``sqSum/n - avg^2`` slightly negative)."""
    return math.sqrt(x) if x >= 0 else math.nan


def _seq_sum(values: np.ndarray) -> float:
    """Left-to-right sum, as a Java loop (``np.sum`` is pairwise)."""
    return float(np.cumsum(values)[-1]) if values.size else 0.0


def expire_recently_unloaded_bundles(recent: dict[str, int], now_ms: int, conf: PulsarConfig) -> None:
    """``UnloadScheduler.execute``: drop ``recentlyUnloadedBundles`` entries older than
    ``loadBalancerSheddingGracePeriodMinutes`` (the shedder itself only tests membership)."""
    grace = int(conf["loadBalancerSheddingGracePeriodMinutes"]) * 60_000
    for bundle in [b for b, t in recent.items() if now_ms - t > grace]:
        del recent[bundle]


def has_policies_blocking_shedding(ctx: ExtensibleContext, conf: PulsarConfig, bundle: str) -> bool:
    """``!isLoadBalancerSheddingBundlesWithPoliciesEnabled``: the namespace has an isolation policy or an
    anti-affinity group and ``loadBalancerSheddingBundlesWithPoliciesEnabled`` is false."""
    if ctx.policies is None or conf["loadBalancerSheddingBundlesWithPoliciesEnabled"]:
        return False
    return bool(ctx.policies.has_isolation_or_anti_affinity(split_bundle_name(bundle)[0]))


def is_transferable(ctx: ExtensibleContext, conf: PulsarConfig, bundle: str, src: int, dst: int | None) -> bool:
    """``TransferShedder.isTransferable``: policies allow shedding, and after the broker filter pipeline
    (a failing filter = not transferable) ``dst`` survives, and — transfer: ``dst`` is a candidate other than
    ``src``; unload: some candidate other than ``src`` remains."""
    if has_policies_blocking_shedding(ctx, conf, bundle):
        return False
    cand = filter_brokers(ctx, conf, bundle, on_error="fail")
    if cand is None:
        return False
    if dst is not None and not cand[dst]:
        return False
    cand[src] = False
    if dst is None or not conf["loadBalancerTransferEnabled"]:
        return bool(cand.any())
    return bool(cand[dst])


class TransferShedder:
    """``NamespaceUnloadStrategy`` of the extensible load manager; holds ``unloadConditionHitCount`` across calls."""

    def __init__(self, swap_gain_only_in_debug: bool = True) -> None:
        self.swap_gain_only_in_debug = swap_gain_only_in_debug
        self.unload_condition_hit_count = 0
        self._stats: dict[str, Any] = {}
        self._skip: str | None = None
        self.store = LoadDataStoreOrder()
        self._store_rows = np.zeros(0, dtype=np.int64)

    # --- strategy protocol -------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """``loadAvg``/``loadStd`` as computed (``UnloadCounter.updateLoadData``), and where the plan expects the
        cluster to land: ``loadAvgAfterShedding``/``loadStdAfterShedding`` (``LoadStats`` after ``offload``).
        A NaN std (Java ``Math.sqrt`` of a rounding-negative variance) is reported as None."""
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self._stats.items()}

    def skip_reason(self) -> str | None:
        return self._skip

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"unloadConditionHitCount": self.unload_condition_hit_count}
        if self.store.keys:
            state["loadDataStore"] = self.store.get_state()
        return state

    def set_state(self, state: dict[str, Any] | None) -> None:
        self.unload_condition_hit_count = int((state or {}).get("unloadConditionHitCount", 0))
        self.store.set_state((state or {}).get("loadDataStore"))

    def on_active_brokers_change(self, active: set[str]) -> None:
        return None

    def on_unload_attempt_completed(self, bundles: set[str]) -> None:
        return None

    # --- findBundlesForUnloading -------------------------------------------------------------------------------
    def find_bundles_for_unloading(self, ctx: ExtensibleContext, conf: PulsarConfig) -> list[Unload]:
        """One shedding cycle; mutates ``ctx.recently_unloaded_brokers`` (expired entries removed) like Pulsar."""
        self._stats = {}
        self._skip = None
        order = self.store.update(ctx.broker_ids[i] for i in np.flatnonzero(ctx.has_load_data).tolist())
        self._store_rows = np.fromiter((ctx.index(b) for b in order), dtype=np.int64, count=len(order))
        if profile_for(conf["pulsarVersion"]).transfer_hit_count:
            return self._find_current(ctx, conf)
        return self._find_first_version(ctx, conf)

    def _fresh_rows(self, ctx: ExtensibleContext, conf: PulsarConfig) -> tuple[np.ndarray | None, str | None]:
        """``LoadStats.update`` scan over the store's entries: the rows counted in avg/std (in the store's order), or
        a skip reason (CoolDown wins at once; the brokers before it have left ``recentlyUnloadedBrokers``)."""
        rows = self._store_rows
        upd = ctx.load.updated_at[rows]
        stale = (ctx.now_ms - upd) > int(conf["loadBalancerBrokerLoadDataTTLInSeconds"]) * 1000
        reason = OUT_DATED_DATA if stale.any() else None
        fresh = rows[~stale]
        delay = int(conf["loadBalanceSheddingDelayInSeconds"]) * 1000
        recent = ctx.recently_unloaded_brokers
        for i in fresh.tolist():
            b = ctx.broker_ids[i]
            if b in recent:
                if int(ctx.load.updated_at[i]) - recent[b] < delay:
                    return None, COOL_DOWN
                del recent[b]
        if fresh.size == 0:
            return None, reason or NO_BROKERS
        return fresh, None

    def _skip_early(self, reason: str) -> list[Unload]:
        self._skip = reason
        self._stats = {"loadAvg": 0.0, "loadStd": 0.0, "unloadConditionHitCount": self.unload_condition_hit_count}
        return []

    def _find_current(self, ctx: ExtensibleContext, conf: PulsarConfig) -> list[Unload]:
        fresh, reason = self._fresh_rows(ctx, conf)
        if reason is None and bool((ctx.available & ~ctx.has_load_data).any()):
            reason = NO_LOAD_DATA
        if reason is not None or fresh is None:
            return self._skip_early(reason or NO_BROKERS)
        ema = ctx.load.weighted_max_ema
        thr_ema = ctx.load.msg_throughput_ema
        loads = ema[fresh]
        n = int(fresh.size)
        total = _seq_sum(loads)
        sq = _seq_sum(loads * loads)
        avg = total / n
        std = _java_sqrt(sq / n - avg * avg)
        self._stats = {"loadAvg": avg, "loadStd": std}

        rows = self._store_rows
        order = rows[np.argsort(ema[rows], kind="stable")].tolist()  # brokersSortedByLoad (stale included)
        min_idx, max_idx = 0, len(order) - 1
        shed_count = 0
        max_shed = int(conf["loadBalancerMaxNumberOfBrokerSheddingPerCycle"])
        target_std = float(conf["loadBalancerBrokerLoadTargetStd"])
        overload = conf.overload_threshold
        transfer = bool(conf["loadBalancerTransferEnabled"])
        debug = bool(conf["loadBalancerDebugModeEnabled"])
        count_gain = debug or not self.swap_gain_only_in_debug
        scaled = profile_for(conf["pulsarVersion"]).transfer_target_scaled
        skip_zero = profile_for(conf["pulsarVersion"]).transfer_skips_zero_throughput
        mult = min(0.5, max(0.0, target_std / 2.0))

        def underloaded(i: int) -> bool:
            if ema[i] < avg * mult:
                return True
            return bool(thr_ema[i] < thr_ema[order[max_idx]] * mult)

        def overloaded(i: int) -> bool:
            return bool(ema[i] > overload and ema[i] > avg + target_std)

        if std > target_std or underloaded(order[min_idx]) or overloaded(order[max_idx]):
            self.unload_condition_hit_count += 1
        else:
            self.unload_condition_hit_count = 0
        self._stats["unloadConditionHitCount"] = self.unload_condition_hit_count
        if self.unload_condition_hit_count <= int(conf["loadBalancerSheddingConditionHitCountThreshold"]):
            self._skip = HIT_COUNT
            self._finish_stats(avg, std, shed_count, shed_count < max_shed and min_idx < max_idx)
            return []

        top = ctx.top
        top_thr = top.throughput
        thr = ctx.load.msg_throughput
        decisions: list[Unload] = []
        seen: set[tuple[str, str, str | None, str]] = set()

        def emit(src: int, bundle: str, dst: int, why: str, details: dict[str, float]) -> None:
            u = Unload(ctx.broker_ids[src], bundle, why, ctx.broker_ids[dst] if transfer else None, details)
            key = (u.broker, u.bundle, u.destination, u.reason)
            if key not in seen:
                seen.add(key)
                decisions.append(u)

        empty_load_data = few_bundles = 0
        while shed_count < max_shed and min_idx < max_idx:
            if std > target_std:
                why = OVERLOADED
            elif underloaded(order[min_idx]):
                why = UNDERLOADED
            elif overloaded(order[max_idx]):
                why = OVERLOADED
            else:
                break
            mx = order[max_idx]
            max_idx -= 1
            mn = order[min_idx]
            max_load, min_load = float(ema[mx]), float(ema[mn])
            offload = (max_load - min_load) / 2
            max_thr, min_thr = float(thr[mx]), float(thr[mn])
            target = max_thr * offload / max_load if scaled else max_thr * offload
            if not top.present[mx] or top.count(mx) == 0:
                empty_load_data += 1
                continue
            if top.count(mx) == 1:
                few_bundles += 1
                continue
            min_iter = iter(top.entries(mn)) if top.present[mn] else None
            marked = gain = 0.0
            remaining = top.count(mx)
            base = {"maxLoad": max_load, "minLoad": min_load, "offload": offload, "offloadThroughput": target,
                    "loadAvg": avg, "loadStd": std}
            for e in top.entries(mx):
                bundle = top.names[e]
                if not ctx.is_owner(bundle, mx):
                    continue
                if bundle in ctx.recently_unloaded_bundles:
                    continue
                if not is_transferable(ctx, conf, bundle, mx, mn):
                    continue
                if remaining <= 1:
                    break
                t = float(top_thr[e])
                if t == 0 and skip_zero:
                    continue
                swap = False
                swaps: list[int] = []
                swap_thr = 0.0
                if marked - gain + t > target:
                    if transfer and min_iter is not None:
                        new_max = max_thr - marked + gain - t
                        new_min = min_thr + marked - gain + t
                        for f in min_iter:
                            if not is_transferable(ctx, conf, top.names[f], mn, mx):
                                continue
                            ft = float(top_thr[f])
                            if ft == 0 and skip_zero:
                                continue
                            if new_max + ft < max_thr and new_min - ft < max_thr:
                                swaps.append(f)
                                new_max += ft
                                new_min -= ft
                                swap_thr += ft
                                if new_min <= new_max and new_max < max_thr * 0.75:
                                    swap = True
                                    break
                    if not swap:
                        break
                if transfer and swap:
                    for f in swaps:
                        emit(mn, top.names[f], mx, why, {**base, "bundleThroughput": float(top_thr[f]), "swap": 1.0})
                    if count_gain:
                        gain += swap_thr
                emit(mx, bundle, mn, why, {**base, "bundleThroughput": t})
                marked += t
                remaining -= 1
            if marked > 0:
                adj = (marked - gain) * max_load / max_thr
                sq -= max_load * max_load + min_load * min_load
                maxd = max(0.0, max_load - adj)
                mind = min_load + adj
                sq += maxd * maxd + mind * mind
                std = _java_sqrt(abs(sq / n - avg * avg))
                shed_count += 1
                min_idx += 1
            else:
                few_bundles += 1

        if not decisions:
            self._skip = NO_LOAD_DATA if empty_load_data else (NO_BUNDLES if few_bundles else HIT_COUNT)
        else:
            self.unload_condition_hit_count = 0
        self._finish_stats(avg, std, shed_count, shed_count < max_shed and min_idx < max_idx)
        return decisions

    def _finish_stats(self, avg: float, std_after: float, shed_count: int, has_transferable: bool) -> None:
        """``LoadStats`` after the loop: avg is kept, std reflects every ``offload``."""
        self._stats.update({
            "loadAvgAfterShedding": avg,
            "loadStdAfterShedding": std_after,
            "sheddingCount": shed_count,
            "hasTransferableBrokers": bool(has_transferable),
            "unloadConditionHitCount": self.unload_condition_hit_count,
        })

    def _find_first_version(self, ctx: ExtensibleContext, conf: PulsarConfig) -> list[Unload]:
        """The 3.0 ``TransferShedder`` (index id 7856206173): priority queues, no hit count, no swap."""
        fresh, reason = self._fresh_rows(ctx, conf)
        if reason is not None or fresh is None:
            return self._skip_early(reason or NO_BROKERS)
        ema = ctx.load.weighted_max_ema
        loads = ema[fresh]
        n = int(fresh.size)
        sq = _seq_sum(loads * loads)
        avg = _seq_sum(loads) / n
        std = _java_sqrt(sq / n - avg * avg)
        self._stats = {"loadAvg": avg, "loadStd": std}
        max_t = int(conf["loadBalancerMaxNumberOfBrokerSheddingPerCycle"])
        asc = fresh[np.argsort(loads, kind="stable")].tolist()
        # minBrokers keeps the max_t lowest (pollLast = lowest), maxBrokers the max_t highest (pollLast = highest)
        min_q = asc[:max_t] if max_t > 0 else []
        max_q = asc[-max_t:] if max_t > 0 else []
        target_std = float(conf["loadBalancerBrokerLoadTargetStd"])
        transfer = bool(conf["loadBalancerTransferEnabled"])
        scaled = profile_for(conf["pulsarVersion"]).transfer_target_scaled
        thr = ctx.load.msg_throughput
        top = ctx.top
        top_thr = top.throughput
        decisions: list[Unload] = []
        seen: set[tuple[str, str, str | None, str]] = set()
        empty_load_data = few_bundles = shed_count = 0
        while min_q and max_q and max_q[-1] != min_q[0]:
            if std <= target_std:
                if thr[min_q[0]] > 0.0:
                    break
                why = UNDERLOADED
            else:
                why = OVERLOADED
            mx = max_q.pop()
            mn = min_q.pop(0)
            max_load, min_load = float(ema[mx]), float(ema[mn])
            offload = (max_load - min_load) / 2
            max_thr = float(thr[mx])
            target = max_thr * offload / max_load if scaled else max_thr * offload
            if not top.present[mx] or top.count(mx) == 0:
                empty_load_data += 1
                continue
            marked = 0.0
            selected = False
            if top.count(mx) > 1:
                remaining = top.count(mx)
                base = {"maxLoad": max_load, "minLoad": min_load, "offload": offload, "offloadThroughput": target,
                        "loadAvg": avg, "loadStd": std}
                for e in top.entries(mx):
                    bundle = top.names[e]
                    if bundle in ctx.recently_unloaded_bundles or not is_transferable(ctx, conf, bundle, mx, mn):
                        continue
                    if remaining > 1 and (marked < target or not selected):
                        u = Unload(ctx.broker_ids[mx], bundle, why, ctx.broker_ids[mn] if transfer else None,
                                   {**base, "bundleThroughput": float(top_thr[e])})
                        key = (u.broker, u.bundle, u.destination, u.reason)
                        if key not in seen:
                            seen.add(key)
                            decisions.append(u)
                        marked += float(top_thr[e])
                        selected = True
                        remaining -= 1
                if not selected:
                    few_bundles += 1
            else:
                few_bundles += 1
            if marked > 0:
                sq -= max_load * max_load + min_load * min_load
                maxd = max(0.0, max_load - offload)
                mind = min_load + offload
                sq += maxd * maxd + mind * mind
                std = _java_sqrt(sq / n - avg * avg)
                shed_count += 1
        if not decisions:
            self._skip = NO_LOAD_DATA if empty_load_data else (NO_BUNDLES if few_bundles else BALANCED)
        self._finish_stats(avg, std, shed_count, bool(min_q and max_q and max_q[-1] != min_q[0]))
        return decisions
