"""``DefaultNamespaceBundleSplitStrategyImpl`` (extensible load manager, PIP-192).

Each broker runs the strategy every ``loadBalancerSplitIntervalMinutes`` on its **current**
``NamespaceBundleStats`` (``BrokerService.getBundleStats``), with its own ``splitConditionHitCounts``. One
object here stands for the strategy instances of all brokers: rows are grouped by the reporting broker (each
broker's strategy is its own: their order does not matter), and each broker's rows are walked in the JVM's order
of its ``PulsarStats.bundleStats`` (a ``ConcurrentHashMap`` cleared and refilled each stats cycle, bundles put by
name: ``map_order.bundle_stats_order``), which decides which bundles the per-cycle and namespace caps let
through. State: ``{"splitConditionHitCounts": {broker: {bundle: n}}}``, plus ``"bundleStatsCapacity": {broker:
table size}`` for a broker whose map has grown beyond the default 16 (``clear()`` keeps the table).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from lbreplay.kernel.bundle_split import NO_REASON, REASON_NAMES, SplitDecision, split_reason_codes, split_thresholds
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.map_order import bundle_stats_order
from lbreplay.kernel.naming import can_split, format_range
from lbreplay.kernel.split_algorithms import TopicStats, algorithm_by_name, child_names, split_boundaries


class DefaultNamespaceBundleSplitStrategy:
    """``DefaultNamespaceBundleSplitStrategyImpl.findBundlesToSplit`` with its hit counters and SplitCounter."""

    def __init__(self) -> None:
        self.split_condition_hit_counts: dict[str, dict[str, int]] = {}
        self.bundle_stats_capacity: dict[str, int] = {}  # each broker's PulsarStats.bundleStats table size
        self._failures = 0  # SplitCounter.update(Failure, Unknown) of the last call
        self._decisions = 0

    # --- state threading -------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "splitConditionHitCounts": {b: dict(m) for b, m in sorted(self.split_condition_hit_counts.items())}
        }
        grown = {b: c for b, c in sorted(self.bundle_stats_capacity.items()) if c > 16}
        if grown:
            state["bundleStatsCapacity"] = grown
        return state

    def set_state(self, state: Mapping[str, Any] | None) -> None:
        raw = (state or {}).get("splitConditionHitCounts") or {}
        self.split_condition_hit_counts = {str(b): {str(k): int(v) for k, v in m.items()} for b, m in raw.items()}
        caps = (state or {}).get("bundleStatsCapacity") or {}
        self.bundle_stats_capacity = {str(b): int(c) for b, c in caps.items()}

    def stats(self) -> dict[str, Any]:
        """``SplitCounter`` figures of the last call: failed split attempts (Failure/Unknown) and decisions."""
        return {"splitFailures": self._failures, "splitDecisions": self._decisions}

    def skip_reason(self) -> str | None:
        return None

    # --- the strategy ------------------------------------------------------------------------------------
    def find_bundles_to_split(
        self,
        conf: PulsarConfig,
        *,
        reporter: Sequence[str],
        bundles: Sequence[str],
        namespaces: Sequence[str],
        lower: Sequence[int] | np.ndarray,
        upper: Sequence[int] | np.ndarray,
        msg_rate: Sequence[float] | np.ndarray,
        msg_throughput: Sequence[float] | np.ndarray,
        topics: Sequence[int] | np.ndarray,
        sessions: Sequence[int] | np.ndarray,
        bundle_count_per_namespace: Mapping[str, int],
        owner: Sequence[str | None] | None = None,
        splitting_bundles: Iterable[str] = (),
        topic_stats: Mapping[str, TopicStats] | None = None,
        running: Iterable[str] | None = None,
    ) -> list[SplitDecision]:
        """One split cycle of every reporting broker.

        Row ``i``: bundle ``bundles[i]`` in the stats of broker ``reporter[i]``; ``msg_rate`` and
        ``msg_throughput`` are in + out, ``sessions`` consumers + producers. ``owner[i]`` is the bundle's owner in
        the service-unit channel (``channel.isOwner``; None = no ownership check). ``splitting_bundles`` are the
        channel's bundles in ``Splitting`` state. A namespace missing from ``bundle_count_per_namespace`` counts as
        a failed lookup (Java: ``getBundleCount`` throws). Per broker: skip rows with < 2 topics, not owned, or
        that can't split (failure); count a hit when a condition holds (Topics, Sessions if ``…MaxSessions`` > 0,
        MsgRate, Bandwidth; else reset); act only when hits > ``loadBalancerNamespaceBundleSplitConditionHitCountThreshold``,
        the namespace stays below ``loadBalancerNamespaceMaximumBundles`` with this broker's planned splits, and no
        bundle of the namespace in Splitting state shares the lower or upper hex bound; split with the default
        algorithm, which must give exactly one boundary (else failure); stop after
        ``loadBalancerMaxNumberOfBundlesToSplitPerCycle`` decisions of that broker. Decisions never unload.
        ``running``: the brokers whose strategy runs this cycle (a broker without rows among them has empty stats:
        its hit counts are cleared); the hit counts of the other brokers are kept, their strategy did not run.
        ``None``: every broker runs (the hit counts of brokers without rows are cleared).
        """
        self._failures = 0
        self._decisions = 0
        if not conf["loadBalancerAutoBundleSplitEnabled"]:
            return []
        n = len(bundles)
        lo = np.asarray(lower, dtype=np.int64)
        hi = np.asarray(upper, dtype=np.int64)
        tp = np.asarray(topics, dtype=np.int64)
        sess = np.asarray(sessions)
        rate = np.asarray(msg_rate)
        thr = np.asarray(msg_throughput)
        max_bundles, max_topics, max_sessions, max_rate, max_bw = split_thresholds(conf)
        reasons = split_reason_codes(
            tp,
            np.asarray(sess, dtype=np.int64),
            np.asarray(rate, dtype=np.float64),
            np.asarray(thr, dtype=np.float64),
            max_topics,
            max_sessions,
            max_rate,
            max_bw,
        )
        splittable = np.asarray(can_split(lo, hi), dtype=bool).reshape(n)
        rep = list(reporter)
        owned = np.ones(n, dtype=bool) if owner is None else np.array(
            [o is None or o == r for o, r in zip(owner, rep)], dtype=bool
        )
        max_split = int(conf["loadBalancerMaxNumberOfBundlesToSplitPerCycle"])
        threshold = int(conf["loadBalancerNamespaceBundleSplitConditionHitCountThreshold"])
        algorithm = algorithm_by_name(conf["defaultNamespaceBundleSplitAlgorithm"], conf)
        # bundle -> range of the channel's Splitting entries (LoadManagerShared.getBundleRangeFromBundleName)
        splitting = sorted((b, b.rpartition("/")[2]) for b in set(splitting_bundles))

        # Rows where the per-row step does something: a failure (can't split) or a condition hit; plus, below,
        # rows whose bundle has a hit count to reset. Every other row leaves counters and decisions unchanged.
        eligible = (tp >= 2) & owned
        acting = eligible & (~splittable | (reasons != NO_REASON))
        resettable = eligible & splittable & (reasons == NO_REASON)
        if threshold < 0:  # a row without hits passes the hit-count gate: walk every eligible row
            acting = eligible
        brokers = sorted(set(rep) | set(running or ()))
        code = {b: i for i, b in enumerate(brokers)}
        codes = np.fromiter(map(code.__getitem__, rep), dtype=np.int64, count=n)
        act_rows = np.flatnonzero(acting)
        act_rows = act_rows[np.argsort(codes[act_rows], kind="stable")]
        bounds = np.searchsorted(codes[act_rows], np.arange(len(brokers) + 1))
        names = list(bundles)
        row_of = dict(zip(names, range(n)))
        unique_names = len(row_of) == n
        by_broker = np.argsort(codes, kind="stable")
        all_bounds = np.searchsorted(codes[by_broker], np.arange(len(brokers) + 1))

        out: list[SplitDecision] = []
        new_counts: dict[str, dict[str, int]] = {}
        for bc, broker in enumerate(brokers):
            prior = self.split_condition_hit_counts.get(broker, {})
            rows_l = act_rows[bounds[bc] : bounds[bc + 1]].tolist()
            if not unique_names:  # a bundle listed twice: walk every eligible row of this broker
                rows_all = np.flatnonzero(codes == bc).tolist()
                in_stats = {names[i] for i in rows_all}
                hits = {k: v for k, v in prior.items() if k in in_stats}  # retainAll(bundleStatsMap.keySet())
                rows_l = [i for i in rows_all if eligible[i]]
            elif prior:
                # retainAll(bundleStatsMap.keySet())
                hits = {k: v for k, v in prior.items() if (r := row_of.get(k)) is not None and codes[r] == bc}
                extra = [row_of[k] for k in hits if resettable[row_of[k]] and not acting[row_of[k]]]
                if extra:
                    rows_l = sorted(rows_l + extra)
            else:
                hits = {}
            # PulsarStats.bundleStats: cleared (the table keeps its size), refilled; walked in its JVM order
            mine = tuple(names[i] for i in by_broker[all_bounds[bc] : all_bounds[bc + 1]].tolist())
            rank = self._bundle_stats_rank(str(broker), mine)
            rows_l = sorted(rows_l, key=lambda i: (rank[names[i]], i))
            planned: dict[str, int] = {}
            decided = 0
            for i in rows_l:
                name, ns = names[i], namespaces[i]
                if not splittable[i]:
                    self._failures += 1
                    continue
                rc = int(reasons[i])
                if rc != NO_REASON:
                    hits[name] = hits.get(name, 0) + 1
                else:
                    hits.pop(name, None)
                if hits.get(name, 0) <= threshold:
                    continue
                if ns not in bundle_count_per_namespace:
                    self._failures += 1
                    continue
                if int(bundle_count_per_namespace[ns]) + planned.get(ns, 0) >= max_bundles:
                    continue
                low_hex, _, up_hex = format_range(int(lo[i]), int(hi[i])).partition("_")
                if any(
                    sb.startswith(ns) and (sb_rng.startswith(low_hex) or sb_rng.endswith(up_hex))
                    for sb, sb_rng in splitting
                ):
                    continue  # a (parent) bundle is in Splitting state
                try:
                    cuts = split_boundaries(
                        algorithm,
                        int(lo[i]),
                        int(hi[i]),
                        topics=(topic_stats or {}).get(name),
                        topic_count=int(tp[i]),
                        conf=conf,
                    )
                except ValueError:
                    cuts = []
                if len(cuts) != 1 or not (int(lo[i]) < cuts[0] < int(hi[i])):
                    self._failures += 1
                    continue
                out.append(
                    SplitDecision(
                        bundle=name,
                        namespace=ns,
                        lower=int(lo[i]),
                        upper=int(hi[i]),
                        broker=str(broker),
                        boundaries=list(cuts),
                        children=child_names(ns, int(lo[i]), int(hi[i]), cuts),
                        algorithm=algorithm,
                        reason=REASON_NAMES[rc],
                        unload=False,
                        bundle_row=int(i),
                        details={
                            "topics": float(tp[i]),
                            "sessions": float(sess[i]),
                            "msgRate": float(rate[i]),
                            "msgThroughput": float(thr[i]),
                            "hitCount": float(hits[name]),
                        },
                    )
                )
                planned[ns] = planned.get(ns, 0) + 1
                hits.pop(name, None)
                decided += 1
                if decided == max_split:
                    break
            new_counts[str(broker)] = hits
        if running is not None:  # brokers that did not run keep their counts (and their bundleStats map)
            new_counts.update({b: m for b, m in self.split_condition_hit_counts.items() if b not in new_counts})
        self.split_condition_hit_counts = {b: m for b, m in sorted(new_counts.items()) if m}
        self._decisions = len(out)
        return out

    def _bundle_stats_rank(self, broker: str, bundles: tuple[str, ...]) -> dict[str, int]:
        """Position of each of ``bundles`` in ``broker``'s ``PulsarStats.bundleStats`` after this cycle's refill;
        the table size is kept for the next cycle."""
        order, capacity = bundle_stats_order(bundles, self.bundle_stats_capacity.get(broker, 0))
        if capacity:
            self.bundle_stats_capacity[broker] = capacity
        return {b: k for k, b in enumerate(order)}
