"""Kernel tick benchmark: one leader tick on a 50-broker / 2,000-bundle snapshot, per shedding strategy.

A tick is what the leader does once per shedding interval: ``doLoadShedding`` (the strategy plus a
``selectBroker`` destination per unload), the automatic split check, and the placement
(``selectBrokerForAssignment``, with preallocation, through ``modular_load_manager.assign``) of every unloaded
bundle. Modular strategies run with ``LeastLongTermMessageRate`` (AvgShedder with its own placement);
``TransferShedder`` runs on the equivalent extensible context (the same brokers and bundles as ``BrokerLoadData``
+ top-10 ``TopBundlesLoadData``), with the extensible split strategy and ``LeastResourceUsageWithWeight`` for
placement.

Cross-tick state is primed so every timed tick decides (ThresholdShedder's EWMA history, AvgShedder's and
TransferShedder's hit counts and the extensible split hit counts one short of firing); each repetition starts from a
fresh copy of the snapshot and of the primed state (copies are not timed). Output: one JSON line per strategy with
median and p95 wall milliseconds per tick, the median per phase, and the median CPU milliseconds of the process
(less sensitive to a shared machine than wall time); then one line comparing the slowest strategy with the
5 ms target (with the 1-minute load average).

    .venv/bin/python bench/kernel_tick.py [--reps 200] [--brokers 50] [--bundles 2000] [--seed 7]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from lbreplay.kernel.bundle_split import check_namespace_bundle_split  # noqa: E402
from lbreplay.kernel.config import PulsarConfig  # noqa: E402
from lbreplay.kernel.extensible.broker_filters import filter_brokers  # noqa: E402
from lbreplay.kernel.extensible.context import ExtensibleContext  # noqa: E402
from lbreplay.kernel.extensible.default_namespace_bundle_split_strategy import (  # noqa: E402
    DefaultNamespaceBundleSplitStrategy,
)
from lbreplay.kernel.extensible.least_resource_usage_with_weight import LeastResourceUsageWithWeight  # noqa: E402
from lbreplay.kernel.extensible.transfer_shedder import TransferShedder  # noqa: E402
from lbreplay.kernel.load_data import Brokers, Bundles, LoadData  # noqa: E402
from lbreplay.kernel.modular_load_manager import assign, create_strategies, do_load_shedding  # noqa: E402
from lbreplay.kernel.naming import format_range, initial_boundaries  # noqa: E402
from lbreplay.kernel.placement import LeaderState  # noqa: E402
from lbreplay.kernel.policies import NamespacePolicies  # noqa: E402
from lbreplay.kernel.resource_usage import weighted_max_usage  # noqa: E402

NOW_MS = 1_700_000_000_000
MODULAR = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
EXTENSIBLE = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"


def build_snapshot(n_brokers: int, n_bundles: int, seed: int) -> LoadData:
    """A deterministic skewed cluster: 20 namespaces, lognormal bundle traffic, CPU following the load."""
    rng = np.random.default_rng(seed)
    n_ns = 20
    per_ns = n_bundles // n_ns
    names: list[str] = []
    for k in range(n_ns):
        b = initial_boundaries(per_ns).tolist()
        names += [f"tenant-{k % 4}/ns-{k}/{format_range(lo, hi)}" for lo, hi in zip(b[:-1], b[1:])]
    names = sorted(names)
    ids = sorted(f"broker-{i:02d}.pulsar:8080" for i in range(n_brokers))
    bundles = Bundles.empty(names)
    n = len(names)
    skew = rng.gamma(2.0, 1.0, n_brokers)
    bundles.owner[:] = rng.choice(n_brokers, size=n, p=skew / skew.sum()).astype(np.int32)
    thr = rng.lognormal(13.0, 1.2, n)  # bytes/s, median ~440 KB/s
    rate = thr / rng.uniform(500, 2000, n)  # msg/s
    bundles.stats[:] = np.column_stack([thr * 0.5, thr * 0.5, rate * 0.5, rate * 0.5])
    bundles.topics[:] = np.minimum(rng.lognormal(3.0, 1.0, n), 5000).astype(np.int64) + 1  # median ~20 topics
    bundles.topics[rng.random(n) < 0.002] += 1000  # a few bundles above loadBalancerNamespaceBundleMaxTopics
    bundles.consumer_count[:] = (bundles.topics * rng.uniform(0.5, 3.0, n)).astype(np.int64)
    bundles.producer_count[:] = (bundles.topics * rng.uniform(0.2, 1.5, n)).astype(np.int64)
    bundles.has_bundle_data[:] = True
    bundles.short[:] = bundles.stats * rng.uniform(0.8, 1.2, (n, 1))
    bundles.long[:] = bundles.stats * rng.uniform(0.7, 1.3, (n, 1))
    bundles.long[rng.random(n) < 0.002, 2:] *= 200.0  # a few hot bundles above the split message-rate limit
    bundles.short_samples[:] = 10
    bundles.long_samples[:] = 1000
    bundles.bundle_topics[:] = bundles.topics

    brokers = Brokers.empty(ids)
    own = bundles.owner
    for col, arr in (("msg_throughput_in", 0), ("msg_throughput_out", 1), ("msg_rate_in", 2), ("msg_rate_out", 3)):
        getattr(brokers, col)[:] = np.bincount(own, weights=bundles.stats[:, arr], minlength=n_brokers)
    brokers.num_topics[:] = np.bincount(own, weights=bundles.topics, minlength=n_brokers).astype(np.int64)
    total_thr = brokers.msg_throughput
    load = total_thr / total_thr.max()
    brokers.limit[:] = [800.0, 8192.0, 4096.0, 1e7, 1e7]
    cpu = 0.35 + 0.57 * (load - load.mean()) / max(float(load.max() - load.mean()), 1e-9)  # mean 35 %, max 92 %
    brokers.usage[:, 0] = 800.0 * np.clip(cpu + rng.normal(0, 0.02, n_brokers), 0.02, 0.99)
    brokers.usage[:, 1] = 8192.0 * rng.uniform(0.2, 0.6, n_brokers)
    brokers.usage[:, 2] = 4096.0 * rng.uniform(0.1, 0.4, n_brokers)
    brokers.usage[:, 3] = brokers.msg_throughput_in * 8 / 1024
    brokers.usage[:, 4] = brokers.msg_throughput_out * 8 / 1024
    brokers.last_update[:] = NOW_MS
    brokers.broker_version = ["4.0.0"] * n_brokers
    brokers.load_manager_class_name = [MODULAR] * n_brokers
    return LoadData(brokers=brokers, bundles=bundles, now_ms=NOW_MS)


def layouts_of(ld: LoadData) -> dict[str, np.ndarray]:
    out: dict[str, list[int]] = {}
    for ns, lo in zip(ld.bundles.namespaces, ld.bundles.lower.tolist()):
        out.setdefault(ns, []).append(lo)
    return {ns: np.asarray(sorted(v) + [0xFFFFFFFF], dtype=np.int64) for ns, v in out.items()}


def extensible_context(ld: LoadData, conf: PulsarConfig) -> ExtensibleContext:
    """The same cluster as the extensible load manager sees it: BrokerLoadData (EMAs at their steady state)
    and each broker's top-10 bundles by throughput (newest TopKBundles order: smallest of the top-K first)."""
    br, b = ld.brokers, ld.bundles
    weighted = weighted_max_usage(br.usage, br.limit, conf)
    load: dict[str, dict[str, Any]] = {}
    top: dict[str, list[tuple[str, list[float]]]] = {}
    counts = ld.bundle_count()
    thr = b.stats[:, 0] + b.stats[:, 1]
    for i, broker in enumerate(br.ids):
        load[broker] = {
            "usage": br.usage[i].tolist(), "limit": br.limit[i].tolist(),
            "msgThroughputIn": float(br.msg_throughput_in[i]), "msgThroughputOut": float(br.msg_throughput_out[i]),
            "msgRateIn": float(br.msg_rate_in[i]), "msgRateOut": float(br.msg_rate_out[i]),
            "bundleCount": int(counts[i]), "topics": int(br.num_topics[i]),
            "maxResourceUsage": float(weighted[i]), "weightedMaxEMA": float(weighted[i]),
            "msgThroughputEMA": float(br.msg_throughput[i]), "updatedAt": NOW_MS, "reportedAt": NOW_MS,
        }
        rows = np.flatnonzero(b.owner == i)
        best = rows[np.argsort(-thr[rows], kind="stable")][:10][::-1]
        top[broker] = [(b.names[r], b.stats[r].tolist() + [int(b.topics[r]), int(b.consumer_count[r]),
                                                          int(b.producer_count[r]), 0]) for r in best]
    lookup = {broker: {"brokerVersion": "4.0.0", "loadManagerClassName": EXTENSIBLE} for broker in br.ids}
    return ExtensibleContext.build(NOW_MS, load, top, br.ids, lookup=lookup)


def modular_tick_fn(base: LoadData, conf: PulsarConfig, shedder_state: dict[str, Any]
                    ) -> Callable[[np.random.Generator], tuple[Tick, None]]:
    layouts = layouts_of(base)
    policies = NamespacePolicies()

    def prepare(rng: np.random.Generator) -> tuple[Tick, None]:
        ld = copy.deepcopy(base)
        shedder, placement = create_strategies(conf)
        shedder.set_state(copy.deepcopy(shedder_state))
        leader = LeaderState.from_load_data(ld)

        def tick() -> tuple[int, int, list[float]]:
            t0 = time.perf_counter()
            unloads = do_load_shedding(ld, conf, shedder, placement, leader, policies, rng, NOW_MS)
            t1 = time.perf_counter()
            splits = check_namespace_bundle_split(ld, conf, layouts)
            t2 = time.perf_counter()
            assign([u.bundle for u in unloads], ld, conf, placement, leader, policies, rng)
            t3 = time.perf_counter()
            return len(unloads), sum(1 for s in splits if s.ok), [t1 - t0, t2 - t1, t3 - t2]

        return tick, None

    return prepare


def extensible_tick_fn(base: LoadData, conf: PulsarConfig
                       ) -> Callable[[np.random.Generator], tuple[Tick, None]]:
    ctx0 = extensible_context(base, conf)
    b = base.bundles
    sessions = b.consumer_count + b.producer_count
    rate = b.stats[:, 2] + b.stats[:, 3]
    thr = b.stats[:, 0] + b.stats[:, 1]
    reporter = [base.brokers.ids[o] for o in b.owner.tolist()]
    counts: dict[str, int] = {}
    for ns in b.namespaces:
        counts[ns] = counts.get(ns, 0) + 1
    threshold = int(conf["loadBalancerSheddingConditionHitCountThreshold"])
    split_args = dict(reporter=reporter, bundles=b.names, namespaces=b.namespaces, lower=b.lower, upper=b.upper,
                      msg_rate=rate, msg_throughput=thr, topics=b.topics, sessions=sessions,
                      bundle_count_per_namespace=counts)
    warm = DefaultNamespaceBundleSplitStrategy()
    for _ in range(int(conf["loadBalancerNamespaceBundleSplitConditionHitCountThreshold"])):
        warm.find_bundles_to_split(conf, **split_args)  # hit counts one short of splitting
    split_state = warm.get_state()

    def prepare(rng: np.random.Generator) -> tuple[Tick, None]:
        ctx = copy.deepcopy(ctx0)
        shedder = TransferShedder()
        shedder.set_state({"unloadConditionHitCount": threshold})  # this tick fires
        splitter = DefaultNamespaceBundleSplitStrategy()
        splitter.set_state(copy.deepcopy(split_state))
        placement = LeastResourceUsageWithWeight()

        def tick() -> tuple[int, int, list[float]]:
            t0 = time.perf_counter()
            unloads = shedder.find_bundles_for_unloading(ctx, conf)
            t1 = time.perf_counter()
            splits = splitter.find_bundles_to_split(conf, **split_args)
            t2 = time.perf_counter()
            for u in unloads:
                cand = filter_brokers(ctx, conf, u.bundle)
                placement.select(cand, ctx, conf, rng)
            t3 = time.perf_counter()
            return len(unloads), len(splits), [t1 - t0, t2 - t1, t3 - t2]

        return tick, None

    return prepare


Tick = Callable[[], tuple[int, int, list[float]]]


TARGET_MS = 5.0  # the budget per tick, one core


def measure(prepare: Callable[[np.random.Generator], tuple[Tick, None]], reps: int, seed: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """Per repetition: total tick wall ms, ms of its (shed, split, placement) phases, and the tick's CPU ms."""
    totals: list[float] = []
    phases: list[list[float]] = []
    cpu: list[float] = []
    result = (0, 0)
    for k in range(reps + 3):
        tick, _ = prepare(np.random.default_rng(seed + k))
        c0 = time.process_time()
        t0 = time.perf_counter()
        unloads, splits, parts = tick()
        dt = (time.perf_counter() - t0) * 1000.0
        dc = (time.process_time() - c0) * 1000.0
        result = (unloads, splits)
        if k >= 3:  # warm-up ticks (imports, caches) are not counted
            totals.append(dt)
            phases.append([p * 1000.0 for p in parts])
            cpu.append(dc)
    return np.asarray(totals), np.asarray(phases), np.asarray(cpu), result


def primed_state(base: LoadData, conf: PulsarConfig) -> dict[str, Any]:
    """State after one untimed tick (EWMA history), with AvgShedder's hit counts one short of firing."""
    shedder, placement = create_strategies(conf)
    ld = copy.deepcopy(base)
    do_load_shedding(ld, conf, shedder, placement, LeaderState.from_load_data(ld), NamespacePolicies(),
                     np.random.default_rng(0), NOW_MS)
    state = shedder.get_state()
    if "brokerHitCountForHigh" in state:
        high = int(conf["loadBalancerAvgShedderHitCountHighThreshold"]) - 1
        state["brokerHitCountForHigh"] = {b: high for b in base.brokers.ids}
    return state


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--brokers", type=int, default=50)
    ap.add_argument("--bundles", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    base = build_snapshot(args.brokers, args.bundles, args.seed)
    runs: list[tuple[str, str, Callable[..., Any]]] = []
    for shedder in ("ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder"):
        placement = "AvgShedder" if shedder == "AvgShedder" else "LeastLongTermMessageRate"
        conf = PulsarConfig.resolve({"loadBalancerLoadSheddingStrategy": shedder,
                                     "loadBalancerLoadPlacementStrategy": placement})
        runs.append((shedder, placement, modular_tick_fn(base, conf, primed_state(base, conf))))
    ext_conf = PulsarConfig.resolve({"loadManagerClassName": EXTENSIBLE,
                                     "loadBalancerLoadSheddingStrategy": "TransferShedder"})
    runs.append(("TransferShedder", "LeastResourceUsageWithWeight(extensible)", extensible_tick_fn(base, ext_conf)))
    medians: dict[str, tuple[float, float]] = {}
    for shedder, placement, prepare in runs:
        arr, phases, cpu, (unloads, splits) = measure(prepare, args.reps, args.seed)
        med = np.median(phases, axis=0) if len(phases) else np.zeros(3)
        medians[shedder] = (float(np.median(arr)), float(np.median(cpu)))
        print(json.dumps({
            "strategy": shedder, "placement": placement, "brokers": args.brokers, "bundles": len(base.bundles),
            "reps": args.reps, "median_ms": round(float(np.median(arr)), 3),
            "p95_ms": round(float(np.percentile(arr, 95)), 3), "median_cpu_ms": round(float(np.median(cpu)), 3),
            "unloads_per_tick": unloads, "splits_per_tick": splits,
            "median_shed_ms": round(float(med[0]), 3), "median_split_ms": round(float(med[1]), 3),
            "median_placement_ms": round(float(med[2]), 3),
        }), flush=True)
    worst = max(medians, key=lambda k: medians[k][0])
    print(json.dumps({
        "target_ms": TARGET_MS, "slowest_strategy": worst, "slowest_median_ms": round(medians[worst][0], 3),
        "slowest_median_cpu_ms": round(max(c for _, c in medians.values()), 3),
        "meets_target": bool(medians[worst][0] <= TARGET_MS),
        "strategies_over_target": sorted(k for k, (w, _) in medians.items() if w > TARGET_MS),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
