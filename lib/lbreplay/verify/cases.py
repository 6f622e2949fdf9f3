"""Seeded random ``decide`` requests (snapshots and multi-tick sequences) per strategy, for the oracle."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbreplay.kernel.version_profile import profile_for
from lbreplay.verify.draws import EXT, IMPL, MB, NOW, even_layout, hex8, pick, system_namespaces
from lbreplay.verify.policy_cases import transfer_policies
from lbreplay.verify.split_cases import evolve_extensible_split, extensible_split


# ------------------------------------------------------------------------------------------------------------
# Case generation
# ------------------------------------------------------------------------------------------------------------
@dataclass
class Case:
    strategy: str
    steps: list[dict[str, Any]] = field(default_factory=list)


STRATEGIES = ("ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder",
              "LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "RoundRobinBrokerSelector", "BundleSplit",
              "TransferShedder", "PlacementPipeline", "NamespaceBundleSplitAlgorithm", "LoadSheddingDestination",
              "DefaultNamespaceBundleSplitStrategy")
# The placement strategies a PlacementPipeline case draws from (those the line's jar has).
# NamespaceBundleSplitAlgorithm.AVAILABLE_ALGORITHMS per line: specified_positions_divide since 2.11,
# flow_or_qps_equally_divide since 3.0 (checked on the jars).
SPLIT_ALGORITHMS = {"2.10": ("range_equally_divide", "topic_count_equally_divide"),
                    "2.11": ("range_equally_divide", "topic_count_equally_divide", "specified_positions_divide")}
ALL_SPLIT_ALGORITHMS = ("range_equally_divide", "topic_count_equally_divide", "specified_positions_divide",
                        "flow_or_qps_equally_divide")
PLACEMENT_STRATEGIES = ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "RoundRobinBrokerSelector",
                        "AvgShedder")
# Broker versions for BrokerVersionFilter: one release everywhere, mixed releases, pre-releases / build metadata.
# java-semver 0.9.0 compares a numeric identifier with an alphanumeric one as text ("5" > "0a", "-1" a number), so
# its order can be cyclic (1.0.0-9 < 1.0.0-10 < 1.0.0-1a < 1.0.0-9) and the "latest" then follows hash-map order;
# no pool holds such a cycle (tests/kernel/extensible/test_broker_filters.py checks it).
VERSION_POOLS = (
    ("4.0.7",),
    ("3.0.7", "3.3.6", "4.0.7", "4.0.8", "4.0.10", "10.0.0", "9.0.0"),
    ("4.0.7", "4.0.7-SNAPSHOT", "4.0.7-rc.1", "4.0.7-rc.2", "4.0.7-rc.10", "4.0.7+b1", "4.0.7+b2.001",
     "4.0.8-rc.1+build.7"),
    ("4.0.8-0a", "4.0.8-5", "4.0.8--1", "4.0.8-x"),  # text order: -1 < 0a < 5 < x (SemVer 2.0: 5 < -1 < 0a < x)
)
BAD_VERSIONS = (None, "", "4.0", "v4.0.7", "4.0.07", "4.0.7-01", "2147483648.0.0", "4.0.7-", "4.0.7+", "4.0.7 ")


class Generator:
    """Seeded random snapshots: 1-200 brokers, heterogeneous limits, skew, ties, zero traffic, one-bundle
    brokers, recently unloaded bundles, split thresholds straddled, preallocations (one bundle in two brokers' maps
    too), bundles in two brokers' sets, multi-tick sequences with brokers leaving and returning."""

    def __init__(self, seed: int, profile: str, *, prealloc_twice: bool | None = None,
                 double_listing: float = 0.2, churn: float = 0.2) -> None:
        self.rng = np.random.default_rng(seed)
        self.profile = profile
        self.v1_names = profile_for(profile).v1_namespace_names  # v1 heartbeat / SLA namespaces exist on the line
        # A bundle preallocated to two brokers (assigned again before its first broker reported it): legal in
        # Pulsar (each BrokerData has its own preallocatedBundleData). None: drawn per case (about a third).
        self._prealloc_twice = prealloc_twice
        self.prealloc_twice = bool(prealloc_twice)
        # Share of snapshots where bundles sit in two brokers' sets (LocalBrokerData.bundles / lastStats) or a
        # broker's bundles differ from its lastStats keys, as while a bundle moves or around a split.
        self.double_listing = double_listing
        # Share of multi-tick steps where a broker leaves (its report disappears) or the one that left returns.
        self.churn = churn
        self._away: tuple[str, Any] | None = None

    def _brokers(self) -> int:
        r = self.rng.random()
        if r < 0.03:
            return 1
        if r < 0.6:
            return int(self.rng.integers(2, 6))
        if r < 0.95:
            return int(self.rng.integers(6, 30))
        return int(self.rng.integers(30, 201))

    def _num(self, lo: float, hi: float, *, zero: float = 0.1, ties: bool = False) -> float:
        rng = self.rng
        if rng.random() < zero:
            return 0.0
        if ties:
            return float(pick(rng, [10.0, 50.0, 100.0]))
        x, scale = float(rng.uniform(lo, hi)), 10.0 ** int(rng.integers(0, 4))
        return round(x * scale) / scale  # np.round(x, d): rint(x * 10**d) / 10**d (half to even, as round())

    def snapshot(self, strategy: str) -> dict[str, Any]:
        rng = self.rng
        n = self._brokers()
        ties = rng.random() < 0.2
        skew = rng.random() < 0.4
        host_ids = [f"broker-{i}.example:{8080 + int(rng.integers(0, 2))}" for i in range(n)]
        n_ns = int(rng.integers(1, 4))
        layouts = {f"t/ns{k}": even_layout(int(pick(rng, [1, 2, 4, 8, 16]))) for k in range(n_ns)}
        layouts.update({ns: even_layout(int(pick(rng, [1, 2, 4]))) for ns in system_namespaces(rng, host_ids, self.v1_names)})
        all_bundles = [f"{ns}/{hex8(lo)}_{hex8(hi)}" for ns, b in layouts.items() for lo, hi in itertools.pairwise(b)]
        rng.shuffle(all_bundles)
        owner = {b: int(rng.integers(0, n)) for b in all_bundles}
        if rng.random() < 0.2:  # one-bundle brokers
            owner = {b: i % n for i, b in enumerate(all_bundles)}
        bundle_data: dict[str, Any] = {}
        stats: dict[str, dict[str, Any]] = {}
        for b in all_bundles:
            hot = skew and owner[b] == 0
            scale = 20.0 if hot else 1.0
            rin, rout = self._num(0, 5000 * scale, ties=ties), self._num(0, 5000 * scale, ties=ties)
            tin, tout = self._num(0, 30 * MB * scale, ties=ties), self._num(0, 30 * MB * scale, ties=ties)
            topics = int(pick(rng, [0, 1, 2, 5, 50, 1500]))
            sessions = int(rng.integers(0, 3000))
            stats[b] = {"msgRateIn": rin, "msgThroughputIn": tin, "msgRateOut": rout, "msgThroughputOut": tout,
                        "consumerCount": sessions // 2, "producerCount": sessions - sessions // 2, "topics": topics,
                        "cacheSize": 0}
            f = float(pick(rng, [0.5, 1.0, 1.0, 2.0]))
            bundle_data[b] = {
                "shortTermData": {"maxSamples": 10, "numSamples": int(rng.integers(0, 11)), "msgRateIn": rin,
                                  "msgRateOut": rout, "msgThroughputIn": tin, "msgThroughputOut": tout},
                "longTermData": {"maxSamples": 1000, "numSamples": int(rng.integers(0, 1001)), "msgRateIn": rin * f,
                                 "msgRateOut": rout * f, "msgThroughputIn": tin * f, "msgThroughputOut": tout * f},
                "topics": topics,
            }
        brokers: dict[str, Any] = {}
        for i, bid in enumerate(host_ids):
            mine = [b for b in all_bundles if owner[b] == i]
            hot = skew and i == 0
            lim = float(pick(rng, [1000.0, 10000.0, 100000.0]))

            def res(hi: float, limit: float = 100.0, hot: bool = hot) -> dict[str, float]:
                u = self._num(0, hi, ties=ties)
                return {"usage": min(u * (3 if hot else 1), limit * 1.2), "limit": limit}

            local: dict[str, Any] = {
                "webServiceUrl": f"http://{bid}", "pulsarServiceUrl": f"pulsar://{bid}",
                "cpu": res(100.0), "memory": res(100.0, 4096.0), "directMemory": res(100.0, 4096.0),
                "bandwidthIn": res(lim, lim), "bandwidthOut": res(lim, lim),
                "msgThroughputIn": sum(stats[b]["msgThroughputIn"] for b in mine),
                "msgThroughputOut": sum(stats[b]["msgThroughputOut"] for b in mine),
                "msgRateIn": sum(stats[b]["msgRateIn"] for b in mine),
                "msgRateOut": sum(stats[b]["msgRateOut"] for b in mine),
                "numTopics": sum(stats[b]["topics"] for b in mine), "numBundles": len(mine),
                "bundles": mine, "lastStats": {b: stats[b] for b in mine},
                "lastUpdate": NOW - int(rng.integers(0, 60_000)),
                "loadManagerClassName": IMPL + "ModularLoadManagerImpl",
            }
            tad = {
                "shortTermMsgThroughputIn": sum(bundle_data[b]["shortTermData"]["msgThroughputIn"] for b in mine),
                "shortTermMsgThroughputOut": sum(bundle_data[b]["shortTermData"]["msgThroughputOut"] for b in mine),
                "shortTermMsgRateIn": sum(bundle_data[b]["shortTermData"]["msgRateIn"] for b in mine),
                "shortTermMsgRateOut": sum(bundle_data[b]["shortTermData"]["msgRateOut"] for b in mine),
                "longTermMsgThroughputIn": sum(bundle_data[b]["longTermData"]["msgThroughputIn"] for b in mine),
                "longTermMsgThroughputOut": sum(bundle_data[b]["longTermData"]["msgThroughputOut"] for b in mine),
                "longTermMsgRateIn": sum(bundle_data[b]["longTermData"]["msgRateIn"] for b in mine),
                "longTermMsgRateOut": sum(bundle_data[b]["longTermData"]["msgRateOut"] for b in mine),
            }
            brokers[bid] = {"localData": local, "timeAverageData": tad}
        if n >= 2 and rng.random() < self.double_listing:
            self._double_list(brokers, host_ids, all_bundles, stats)
        recently = {}
        for b in all_bundles:
            if rng.random() < 0.1:
                recently[b] = NOW - int(pick(rng, [0, 10 * 60_000, 29 * 60_000, 31 * 60_000, 90 * 60_000]))
        conf = self.config(strategy)
        return {
            "config": conf, "nowMillis": NOW,
            "loadData": {"brokers": brokers, "bundleData": bundle_data, "recentlyUnloadedBundles": recently},
            "namespaces": {ns: {"boundaries": [hex8(x) for x in b]} for ns, b in layouts.items()},
        }

    def _double_list(self, brokers: dict[str, Any], ids: list[str], bundles: list[str],
                     stats: dict[str, dict[str, Any]]) -> None:
        """Per-broker sets as Pulsar's leader sees them mid-move: a few bundles also listed by a second broker (in
        its ``bundles``, and in its ``lastStats`` with that broker's own stats, or not yet), and sometimes a bundle
        a broker lists in ``bundles`` without a ``lastStats`` entry (or the other way round)."""
        rng = self.rng
        for b in rng.choice(bundles, size=min(len(bundles), int(rng.integers(1, 4))), replace=False).tolist():
            local = brokers[ids[int(rng.integers(len(ids)))]]["localData"]
            if b in local["bundles"]:
                continue
            local["bundles"].append(b)
            if rng.random() < 0.7:
                f = float(pick(rng, [0.0, 0.5, 1.0, 3.0]))
                local["lastStats"][b] = {**stats[b], **{k: stats[b][k] * f for k in (
                    "msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")},
                    "topics": int(pick(rng, [0, 2, stats[b]["topics"]]))}
        if rng.random() < 0.3:
            local = brokers[ids[int(rng.integers(len(ids)))]]["localData"]
            if local["bundles"]:
                gone = local["bundles"][int(rng.integers(len(local["bundles"])))]
                if rng.random() < 0.5:
                    local["lastStats"].pop(gone, None)  # listed, not in lastStats
                else:
                    local["bundles"].remove(gone)  # in lastStats, no longer listed

    def config(self, strategy: str) -> dict[str, Any]:
        rng = self.rng
        conf: dict[str, Any] = {"pulsarVersion": self.profile}
        shed, place = "ThresholdShedder", "LeastLongTermMessageRate"
        if strategy in ("ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder"):
            shed = strategy
        if strategy in ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "RoundRobinBrokerSelector"):
            place = strategy
        if strategy == "AvgShedder":
            place = "AvgShedder"
        conf["loadBalancerLoadSheddingStrategy"] = IMPL + shed
        conf["loadBalancerLoadPlacementStrategy"] = IMPL + place
        conf["loadBalancerBrokerOverloadedThresholdPercentage"] = int(pick(rng, [50, 70, 85, 95]))
        conf["loadBalancerBrokerThresholdShedderPercentage"] = int(pick(rng, [0, 5, 10, 25]))
        conf["loadBalancerHistoryResourcePercentage"] = float(pick(rng, [0.0, 0.5, 0.9, 1.0]))
        conf["loadBalancerAverageResourceUsageDifferenceThresholdPercentage"] = int(pick(rng, [0, 10, 20]))
        conf["lowerBoundarySheddingEnabled"] = bool(rng.random() < 0.4)
        conf["loadBalancerMsgRateDifferenceShedderThreshold"] = float(pick(rng, [10.0, 50.0]))
        conf["loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold"] = float(pick(rng, [1.5, 4.0]))
        conf["maxUnloadPercentage"] = float(pick(rng, [0.1, 0.2, 0.5]))
        conf["maxUnloadBundleNumPerShedding"] = int(pick(rng, [-1, 1, 3]))
        conf["minUnloadMessage"] = int(pick(rng, [0, 1000]))
        conf["minUnloadMessageThroughput"] = int(pick(rng, [0, 1048576]))
        conf["loadBalancerAvgShedderLowThreshold"] = int(pick(rng, [5, 15]))
        conf["loadBalancerAvgShedderHighThreshold"] = int(pick(rng, [20, 40]))
        conf["loadBalancerAvgShedderHitCountLowThreshold"] = int(pick(rng, [1, 2, 8]))
        conf["loadBalancerAvgShedderHitCountHighThreshold"] = int(pick(rng, [1, 2]))
        for key in ("loadBalancerCPUResourceWeight", "loadBalancerMemoryResourceWeight",
                    "loadBalancerDirectMemoryResourceWeight", "loadBalancerBandwidthInResourceWeight",
                    "loadBalancerBandwidthOutResourceWeight"):
            conf[key] = float(pick(rng, [0.0, 0.5, 1.0, 1.0]))
        conf["loadBalancerNamespaceBundleMaxTopics"] = int(pick(rng, [2, 50, 1000]))
        conf["loadBalancerNamespaceBundleMaxSessions"] = int(pick(rng, [0, 100, 1000]))
        conf["loadBalancerNamespaceBundleMaxMsgRate"] = int(pick(rng, [0, 3000, 30000]))
        conf["loadBalancerNamespaceBundleMaxBandwidthMbytes"] = int(pick(rng, [0, 20, 100]))
        conf["loadBalancerNamespaceMaximumBundles"] = int(pick(rng, [2, 8, 128]))
        return conf

    def evolve(self, req: dict[str, Any]) -> dict[str, Any]:
        """The next tick of a sequence: usage drifts, time moves 1 minute; now and then a broker leaves and returns
        a few ticks later (``cleanupDeadBrokersData`` -> ``onActiveBrokersChange``)."""
        rng = self.rng
        nxt = json.loads(json.dumps(req))
        nxt["nowMillis"] = req["nowMillis"] + 60_000
        brokers = nxt["loadData"]["brokers"]
        if self._away is not None and rng.random() < 0.7:  # the broker that left comes back (a fresh report)
            brokers[self._away[0]] = self._away[1]
            self._away = None
        elif self._away is None and len(brokers) > 2 and rng.random() < self.churn:  # a broker leaves
            gone = sorted(brokers)[int(rng.integers(len(brokers)))]
            self._away = (gone, brokers.pop(gone))
        for b in brokers.values():
            local = b["localData"]
            local["lastUpdate"] += 60_000
            for r in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut"):
                if rng.random() < 0.5:
                    local[r]["usage"] = round(local[r]["usage"] * float(rng.uniform(0.5, 1.5)) * 1e3) / 1e3
        return nxt

    def extensible(self) -> dict[str, Any]:
        """An extensible-load-manager snapshot (BrokerLoadData, TopBundlesLoadData, recently unloaded maps)."""
        rng = self.rng
        n = self._brokers()
        ties = rng.random() < 0.2
        ids = [f"broker-{i}.example:{8080 + int(rng.integers(0, 2))}" for i in range(n)]
        load: dict[str, Any] = {}
        top: dict[str, Any] = {}
        owners: dict[str, str] = {}
        k = 0
        spaces = ["t/ns0", "t/ns1", "t/ns2", *system_namespaces(rng, ids, self.v1_names)]  # TopKBundles skips them
        for bid in ids:
            usage = {r: {"usage": self._num(0, 100, ties=ties), "limit": 100.0}
                     for r in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")}
            ema = float(np.round(rng.uniform(0, 1.2), 4)) if not ties else float(rng.choice([0.1, 0.5, 0.9]))
            entries: list[dict[str, Any]] = []
            for _ in range(int(rng.choice([0, 1, 2, 5, 10]))):
                name = f"{spaces[k % len(spaces)]}/{hex8(k * 0x100)}_{hex8(k * 0x100 + 0x100)}"
                k += 1
                tin, tout = self._num(0, 5 * MB, ties=ties), self._num(0, 5 * MB, ties=ties)
                entries.append({"bundleName": name, "stats": {
                    "msgRateIn": self._num(0, 1000), "msgRateOut": self._num(0, 1000), "msgThroughputIn": tin,
                    "msgThroughputOut": tout, "consumerCount": 1, "producerCount": 1, "topics": 2, "cacheSize": 0}})
                owners[name] = bid if rng.random() < 0.95 else ids[int(rng.integers(n))]
            thr = sum(e["stats"]["msgThroughputIn"] + e["stats"]["msgThroughputOut"] for e in entries)
            stale = rng.random() < 0.05
            load[bid] = {**usage, "msgThroughputIn": thr / 2, "msgThroughputOut": thr / 2,
                         "msgRateIn": 10.0, "msgRateOut": 10.0, "bundleCount": len(entries), "topics": 2 * len(entries),
                         "maxResourceUsage": ema, "weightedMaxEMA": ema,
                         "msgThroughputEMA": thr * float(rng.choice([1.0, 0.5])),
                         "updatedAt": NOW - (3_600_000 if stale else int(rng.integers(0, 60_000))), "reportedAt": 0}
            if entries or rng.random() < 0.8:
                top[bid] = {"topBundlesLoadData": entries}
        ru_bundles = {b: NOW - int(rng.choice([0, 5, 40, 90])) * 60_000 for b in owners if rng.random() < 0.1}
        ru_brokers = {b: NOW - int(rng.choice([0, 5, 40, 90])) * 60_000 for b in ids if rng.random() < 0.1}
        available = [b for b in ids if rng.random() < 0.95]
        conf: dict[str, Any] = {
            "pulsarVersion": self.profile, "loadManagerClassName": EXT + "ExtensibleLoadManagerImpl",
            "loadBalancerLoadSheddingStrategy": EXT + "scheduler.TransferShedder",
            "loadBalancerBrokerLoadTargetStd": float(rng.choice([0.05, 0.1, 0.25])),
            "loadBalancerSheddingConditionHitCountThreshold": int(rng.choice([0, 1, 3])),
            "loadBalancerTransferEnabled": bool(rng.random() < 0.8),
            "loadBalancerMaxNumberOfBrokerSheddingPerCycle": int(rng.choice([1, 3, 10])),
            "loadBalancerBrokerOverloadedThresholdPercentage": int(rng.choice([50, 85])),
            "minUnloadMessage": int(rng.choice([0, 1000])),
            "minUnloadMessageThroughput": int(rng.choice([0, 1048576])),
            "maxUnloadPercentage": float(rng.choice([0.1, 0.2, 0.5])),
            "loadBalancerSheddingBundlesWithPoliciesEnabled": False,
        }
        ext: dict[str, Any] = {"brokerLoadData": load, "topBundlesLoadData": top,
                               "recentlyUnloadedBundles": ru_bundles, "recentlyUnloadedBrokers": ru_brokers,
                               "availableBrokers": available}
        if rng.random() < 0.5:
            ext["bundleOwners"] = owners
        # the broker filters' inputs, drawn after everything above so those draws stay as they were
        if rng.random() < 0.3:  # BrokerMaxTopicCountFilter: a limit among the brokers' topic counts (0-20)
            conf["loadBalancerBrokerMaxTopics"] = int(rng.choice([1, 2, 3, 5, 10, 11, 21]))
        if rng.random() < 0.75:
            ext["brokerLookupData"] = self._lookup_data(available)
            conf["preferLaterVersions"] = bool(rng.random() < 0.6)
        req: dict[str, Any] = {"config": conf, "nowMillis": NOW, "extensible": ext, "actions": ["shed"]}
        # the policy checks' inputs, drawn last and only in this branch so the cases above stay as they were
        if rng.random() < 0.35:
            transfer_policies(rng, req, ids)
        return req

    def _lookup_data(self, brokers: list[str]) -> dict[str, dict[str, Any]]:
        """``BrokerLookupData`` per broker for BrokerLoadManagerClassFilter / BrokerVersionFilter: mostly
        ExtensibleLoadManagerImpl, now and then another or no class name; versions all equal, mixed releases,
        pre-releases and build metadata, or with one missing / invalid version (``BrokerFilterBadVersionException``).
        The pools hold no three versions whose java-semver 0.9.0 order is cyclic (see ``VERSION_POOLS``)."""
        rng = self.rng
        mode = rng.choice(len(VERSION_POOLS) + 1, p=[0.3, 0.2, 0.25, 0.15, 0.1])
        if mode < len(VERSION_POOLS):
            pool = VERSION_POOLS[int(mode)]
            picks = [pool[int(i)] for i in rng.choice(len(pool), size=min(len(pool), int(rng.integers(1, 4))),
                                                      replace=False)]
        else:
            picks = [VERSION_POOLS[0][0]]
        out: dict[str, dict[str, Any]] = {}
        for b in brokers:
            d: dict[str, Any] = {}
            r = rng.random()
            if r < 0.9:
                d["loadManagerClassName"] = EXT + "ExtensibleLoadManagerImpl"
            elif r < 0.95:
                d["loadManagerClassName"] = IMPL + "ModularLoadManagerImpl"
            elif r < 0.975:
                d["loadManagerClassName"] = "ExtensibleLoadManagerImpl"  # not the configured string
            d["brokerVersion"] = picks[int(rng.integers(len(picks)))]
            out[b] = d
        if mode == len(VERSION_POOLS) and brokers:  # one broker with a missing or invalid version
            bad = BAD_VERSIONS[int(rng.integers(len(BAD_VERSIONS)))]
            victim = out[brokers[int(rng.integers(len(brokers)))]]
            if bad is None:
                del victim["brokerVersion"]
            else:
                victim["brokerVersion"] = bad
        return out

    def evolve_extensible(self, req: dict[str, Any]) -> dict[str, Any]:
        rng = self.rng
        nxt = json.loads(json.dumps(req))
        nxt["nowMillis"] = req["nowMillis"] + 60_000
        for d in nxt["extensible"]["brokerLoadData"].values():
            d["updatedAt"] += 60_000
            if rng.random() < 0.5:
                d["weightedMaxEMA"] = float(np.round(d["weightedMaxEMA"] * rng.uniform(0.7, 1.3), 4))
        return nxt

    def pipeline(self, shedding: bool = False) -> Case:
        """``ModularLoadManagerImpl.selectBrokerForAssignment`` for 1-4 new bundles (preallocated one after the
        other) under namespace isolation policies (primary / secondary broker regexes, ``min_limit`` failover),
        anti-affinity groups (namespaces of the group already owned or preallocated across the brokers, group
        names differing in case, blank groups), failure domains (``failureDomainsEnabled``, brokers in no domain or
        in two), the max-topics filter, the even spread, the load-manager-class filter, brokers refusing
        persistent topics, and an overloaded first pick (the re-check over the policy set)."""
        rng = self.rng
        prof = profile_for(self.profile)
        places = [p for p in PLACEMENT_STRATEGIES if p not in prof.absent_strategies
                  and (p != "AvgShedder" or prof.avg_shedder_available)]
        place = places[int(rng.integers(len(places)))]
        req = self.snapshot(place)
        conf = req["config"]
        brokers = req["loadData"]["brokers"]
        ids = sorted(brokers)
        hosts = sorted({b.rpartition(":")[0] for b in ids})
        conf["loadBalancerDistributeBundlesEvenlyEnabled"] = bool(rng.random() < 0.5)
        conf["failureDomainsEnabled"] = bool(rng.random() < 0.7)
        if rng.random() < 0.3:
            conf["loadBalancerBrokerMaxTopics"] = int(pick(rng, [0, 100, 2000]))
        conf["loadManagerClassName"] = IMPL + "ModularLoadManagerImpl"
        for bid in ids:
            local = brokers[bid]["localData"]
            if rng.random() < 0.08:
                local["loadManagerClassName"] = IMPL + "SimpleLoadManagerImpl"
            if rng.random() < 0.08:
                local["persistentTopicsEnabled"] = False
        namespaces = req["namespaces"]
        groups = ["g1", "G1", "g2", "  "]
        new_ns = [f"t/aa{j}" for j in range(int(rng.integers(1, 4)))]
        for ns in list(namespaces) + new_ns:
            entry = namespaces.setdefault(ns, {"boundaries": [hex8(x) for x in even_layout(4)]})
            if rng.random() < 0.7:
                entry["policies"] = {"namespaceAntiAffinityGroup": groups[int(rng.integers(len(groups)))]}
        # namespaces of the groups already placed: bundles of t/aa* preallocated to (or reported by) random brokers
        bundle_data = req["loadData"]["bundleData"]
        template = {"shortTermData": {"maxSamples": 10, "numSamples": 1, "msgRateIn": 10.0, "msgRateOut": 10.0,
                                      "msgThroughputIn": 1000.0, "msgThroughputOut": 1000.0},
                    "longTermData": {"maxSamples": 1000, "numSamples": 1, "msgRateIn": 10.0, "msgRateOut": 10.0,
                                     "msgThroughputIn": 1000.0, "msgThroughputOut": 1000.0}, "topics": 1}
        bounds = even_layout(4)
        free = [f"{ns}/{hex8(lo)}_{hex8(hi)}" for ns in new_ns for lo, hi in itertools.pairwise(bounds)]
        rng.shuffle(free)
        for b in free[: int(rng.integers(0, len(free)))]:
            bundle_data[b] = json.loads(json.dumps(template))
            holder = brokers[ids[int(rng.integers(len(ids)))]]
            if rng.random() < 0.5:
                holder.setdefault("preallocatedBundleData", {})[b] = bundle_data[b]
            else:
                holder["localData"]["bundles"].append(b)
                holder["localData"]["lastStats"][b] = {"msgRateIn": 10.0, "topics": 1}
            free.remove(b)
        assign = free[: int(rng.integers(1, 5))] or [f"t/aa9/{hex8(0)}_{hex8(0xFFFFFFFF)}"]
        for b in assign:
            bundle_data[b] = json.loads(json.dumps(template))
        if rng.random() < 0.6:
            req["isolationPolicies"] = self._isolation_policies(hosts)
        if rng.random() < 0.7:
            req["failureDomains"] = self._failure_domains(ids)
        if rng.random() < 0.2:  # PIP-380: honoured from 4.1 only (VersionProfile.shedding_excluded_namespaces)
            conf["loadBalancerSheddingExcludedNamespaces"] = [new_ns[0]]
        if rng.random() < 0.15:  # a broker id without a port (VersionProfile.broker_host_by_last_colon)
            victim = ids[int(rng.integers(len(ids)))]
            req = json.loads(json.dumps(req).replace(f'"{victim}"', f'"{victim.rpartition(":")[0]}"'))
        if shedding:
            return self._shedding(req, prof)
        req["actions"] = [{"selectBrokerForAssignment": assign}]
        return Case("PlacementPipeline", [req])

    def _isolation_policies(self, hosts: list[str]) -> dict[str, Any]:
        """1-2 namespace isolation policies: primary / secondary broker regexes and a ``min_available`` failover."""
        rng = self.rng
        iso: dict[str, Any] = {}
        for k in range(int(rng.integers(1, 3))):
            lo = int(rng.integers(0, max(1, len(hosts))))
            prim = [rf"broker-{lo}\.example"] if rng.random() < 0.5 else [rf"broker-[0-{min(lo, 9)}]\..*"]
            sec = [] if rng.random() < 0.3 else [r"broker-.*[5-9]\.example"]
            nss = [str(pick(rng, ["t/aa0", "t/aa[01]", "t/ns0", "t/.*", "t/aa.*"]))]
            iso[f"policy-{k}"] = {"namespaces": nss, "primary": prim, "secondary": sec,
                                  "auto_failover_policy": {"policy_type": "min_available", "parameters": {
                                      "min_limit": str(int(pick(rng, [0, 1, 2, 3]))), "usage_threshold": "80"}}}
        return iso

    def _failure_domains(self, ids: list[str]) -> dict[str, dict[str, list[str]]]:
        """Failure domains over the brokers: some in none (the "default" domain), a few listed in two."""
        rng = self.rng
        domains: dict[str, dict[str, list[str]]] = {}
        for bid in ids:
            r = rng.random()
            if r < 0.2:
                continue  # the "default" domain
            d = f"domain-{int(rng.integers(0, 3))}"
            domains.setdefault(d, {"brokers": []})["brokers"].append(bid)
            if r > 0.95:  # listed in a second domain: the last listed (name order) wins
                domains.setdefault("domain-9", {"brokers": []})["brokers"].append(bid)
        return domains

    def _shedding(self, req: dict[str, Any], prof: Any) -> Case:
        """``ModularLoadManagerImpl.doLoadShedding`` on the pipeline's cluster: each planned unload's destination."""
        rng = self.rng
        conf = req["config"]
        sheds = [s for s in ("ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder")
                 if s != "AvgShedder" or prof.avg_shedder_available]
        shed = sheds[int(rng.integers(len(sheds)))]
        conf["loadBalancerLoadSheddingStrategy"] = IMPL + shed
        if shed == "AvgShedder":
            conf["loadBalancerLoadPlacementStrategy"] = IMPL + "AvgShedder"
        elif conf["loadBalancerLoadPlacementStrategy"] == IMPL + "AvgShedder":
            conf["loadBalancerLoadPlacementStrategy"] = IMPL + "LeastLongTermMessageRate"
        req["actions"] = ["doLoadShedding"]
        return Case("LoadSheddingDestination", [req])

    def split_algorithm(self) -> Case:
        """``NamespaceBundleSplitAlgorithm.getSplitBoundary`` for one bundle: 0-40 topics (some without stats,
        idle ones, hot ones), random positions (inside, outside, on the bounds, repeated) and limits straddled."""
        rng = self.rng
        algs = SPLIT_ALGORITHMS.get(self.profile, ALL_SPLIT_ALGORITHMS)
        algorithm = algs[int(rng.integers(len(algs)))]
        n = int(pick(rng, [1, 2, 4, 16, 64]))
        k = int(rng.integers(n))
        lo, hi = even_layout(n)[k], even_layout(n)[k + 1]
        bundle = f"t/ns/{hex8(lo)}_{hex8(hi)}"
        topics: list[dict[str, Any]] = []
        for i in range(int(pick(rng, [0, 1, 2, 3, 5, 10, 40]))):
            rec: dict[str, Any] = {"topic": f"persistent://t/ns/topic-{int(rng.integers(0, 10_000))}-{i}"}
            r = rng.random()
            if r < 0.8:
                rec.update({"msgRateIn": self._num(0, 2000, zero=0.2), "msgRateOut": self._num(0, 2000, zero=0.3),
                            "msgThroughputIn": self._num(0, 20 * MB, zero=0.2),
                            "msgThroughputOut": self._num(0, 20 * MB, zero=0.3)})
            topics.append(rec)
        positions = sorted({int(x) for x in rng.integers(lo, hi + 1, size=int(rng.integers(1, 5)))})
        if rng.random() < 0.3:
            positions.append(int(pick(rng, [lo, hi, 0, 0xFFFFFFFF])))
        conf = {"pulsarVersion": self.profile,
                "loadBalancerNamespaceBundleMaxMsgRate": int(pick(rng, [0, 100, 1000, 30000])),
                "loadBalancerNamespaceBundleMaxBandwidthMbytes": int(pick(rng, [0, 1, 20, 100])),
                "flowOrQpsDifferenceThresholdPercentage": int(pick(rng, [0, 10, 50]))}
        arg = {"bundle": bundle, "algorithm": algorithm, "positions": [hex8(p) for p in positions],
               "topics": topics}
        return Case("NamespaceBundleSplitAlgorithm", [{"config": conf, "nowMillis": NOW,
                                                      "loadData": {"brokers": {}}, "actions": [{"splitBoundary": arg}]}])

    def case(self, strategy: str) -> Case:
        self._away = None
        if strategy == "PlacementPipeline":
            return self.pipeline()
        if strategy == "LoadSheddingDestination":
            return self.pipeline(shedding=True)
        if strategy == "NamespaceBundleSplitAlgorithm":
            return self.split_algorithm()
        if self._prealloc_twice is None:
            self.prealloc_twice = bool(self.rng.random() < 0.35)
        if strategy == "DefaultNamespaceBundleSplitStrategy":
            steps = [extensible_split(self.rng, self.profile)]
            for _ in range(int(self.rng.integers(0, 5))):
                steps.append(evolve_extensible_split(self.rng, steps[-1]))
            return Case(strategy, steps)
        if strategy == "TransferShedder":
            steps = [self.extensible()]
            if self.rng.random() < 0.6:
                for _ in range(int(self.rng.integers(1, 5))):
                    steps.append(self.evolve_extensible(steps[-1]))
            return Case(strategy, steps)
        req = self.snapshot(strategy)
        if strategy in ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "RoundRobinBrokerSelector"):
            bundles = list(req["loadData"]["bundleData"])
            new = [f"t/new/{hex8(0)}_{hex8(0x40000000)}"]
            req["loadData"]["bundleData"][new[0]] = {
                "shortTermData": {"maxSamples": 10, "numSamples": 1, "msgRateIn": 10.0, "msgRateOut": 10.0,
                                  "msgThroughputIn": 1000.0, "msgThroughputOut": 1000.0},
                "longTermData": {"maxSamples": 1000, "numSamples": 1, "msgRateIn": 10.0, "msgRateOut": 10.0,
                                 "msgThroughputIn": 1000.0, "msgThroughputOut": 1000.0}, "topics": 1}
            if bundles and self.rng.random() < 0.5:  # preallocations
                brokers = list(req["loadData"]["brokers"])
                for b in bundles[: int(self.rng.integers(1, 4))]:
                    for _ in range(int(self.rng.integers(1, 3)) if self.prealloc_twice else 1):
                        target = brokers[int(self.rng.integers(len(brokers)))]
                        pre = req["loadData"]["brokers"][target].setdefault("preallocatedBundleData", {})
                        pre[b] = req["loadData"]["bundleData"][b]
            req["actions"] = [{"assign": new}]
        elif strategy == "BundleSplit":
            req["actions"] = ["split"]
        else:
            req["actions"] = ["shed"]
        steps = [req]
        if strategy in ("ThresholdShedder", "AvgShedder", "LeastResourceUsageWithWeight",
                        "RoundRobinBrokerSelector") and self.rng.random() < 0.6:
            for _ in range(int(self.rng.integers(1, 5))):
                steps.append(self.evolve(steps[-1]))
        return Case(strategy, steps)

