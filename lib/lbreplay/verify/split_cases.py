"""The extensible split cycle's cases (``DefaultNamespaceBundleSplitStrategy``: each broker's
``DefaultNamespaceBundleSplitStrategyImpl`` on its TopBundlesLoadData), drawn by
:meth:`lbreplay.verify.cases.Generator.case`."""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np

from lbreplay.kernel.naming import topic_hash_of
from lbreplay.kernel.version_profile import profile_for
from lbreplay.verify.draws import EXT, MB, NOW, even_layout, hex8, pick, system_namespaces


def extensible_split(rng: np.random.Generator, profile: str) -> dict[str, Any]:
    """The extensible split cycle (``DefaultNamespaceBundleSplitStrategyImpl`` of every broker, on its
    TopBundlesLoadData): 1-10 brokers, 1-3 namespaces of 1-16 bundles (sometimes a one-hash bundle that cannot
    split), stats straddling the topic / session / message-rate / bandwidth limits, bundles with fewer than 2
    topics, bundles reported by two brokers or owned by another one, namespaces at their bundle cap, hit-count
    thresholds 0-3, per-cycle limits, and topic lists for topic_count_equally_divide."""
    n = int(pick(rng, [1, 2, 3, 5, 10]))
    ids = [f"broker-{i}.example:8080" for i in range(n)]
    namespaces: dict[str, Any] = {}
    names: list[str] = []
    user = [f"t/ns{k}" for k in range(int(rng.integers(1, 4)))]
    for ns in user + system_namespaces(rng, ids, profile_for(profile).v1_namespace_names):  # no line skips any
        bounds = even_layout(int(pick(rng, [1, 2, 4, 8, 16])))
        if rng.random() < 0.2:  # a bundle one hash wide (NamespaceBundleFactory.canSplitBundle: false)
            bounds = sorted({*bounds, bounds[1] - 1})
        namespaces[ns] = {"boundaries": [hex8(b) for b in bounds]}
        names += [f"{ns}/{hex8(a)}_{hex8(b)}" for a, b in zip(bounds, bounds[1:])]
    max_topics = int(pick(rng, [3, 10, 1000]))
    max_sessions = int(pick(rng, [0, 10, 1000]))
    max_rate = int(pick(rng, [100, 1000, 30000]))
    max_bw = int(pick(rng, [1, 10, 100]))
    conf: dict[str, Any] = {
        "pulsarVersion": profile, "loadManagerClassName": EXT + "ExtensibleLoadManagerImpl",
        "loadBalancerLoadSheddingStrategy": EXT + "scheduler.TransferShedder",
        "loadBalancerAutoBundleSplitEnabled": bool(rng.random() < 0.9),
        "loadBalancerNamespaceBundleMaxTopics": max_topics,
        "loadBalancerNamespaceBundleMaxSessions": max_sessions,
        "loadBalancerNamespaceBundleMaxMsgRate": max_rate,
        "loadBalancerNamespaceBundleMaxBandwidthMbytes": max_bw,
        "loadBalancerNamespaceMaximumBundles": int(pick(rng, [1, 2, 4, 8, 17, 128])),
        "loadBalancerMaxNumberOfBundlesToSplitPerCycle": int(pick(rng, [1, 2, 10])),
        "loadBalancerNamespaceBundleSplitConditionHitCountThreshold": int(pick(rng, [0, 1, 3])),
        "defaultNamespaceBundleSplitAlgorithm": str(pick(rng, ["range_equally_divide",
                                                                "topic_count_equally_divide"])),
    }

    def straddle(limit: float) -> float:
        return float(limit * pick(rng, [0.0, 0.3, 0.5, 1.0, 1.0000001, 2.0]))

    top: dict[str, list[dict[str, Any]]] = {b: [] for b in ids}
    owners: dict[str, str] = {}
    topics: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        if rng.random() < 0.15:
            continue  # reported by nobody
        reporter = ids[int(rng.integers(n))]
        count = int(pick(rng, [0, 1, 2, 3, max_topics, max_topics + 1, 40]))
        sessions = straddle(max_sessions if max_sessions > 0 else 10)
        rate, thr = straddle(max_rate), straddle(max_bw * MB)
        share = float(pick(rng, [0.0, 0.5, 1.0]))
        stats = {"msgRateIn": rate * share, "msgRateOut": rate * (1 - share),
                 "msgThroughputIn": thr * share, "msgThroughputOut": thr * (1 - share),
                 "consumerCount": int(sessions // 2), "producerCount": int(sessions - sessions // 2),
                 "topics": count, "cacheSize": 0}
        top[reporter].append({"bundleName": name, "stats": stats})
        if n > 1 and rng.random() < 0.1:  # also in a second broker's list (a bundle moving)
            top[ids[int(rng.integers(n))]].append({"bundleName": name, "stats": dict(stats)})
        owners[name] = reporter if rng.random() < 0.9 else ids[int(rng.integers(n))]
        ns, _, rng_hex = name.rpartition("/")
        lo, hi = (int(x, 16) for x in rng_hex.split("_"))
        if rng.random() < 0.8 and hi - lo > 1 << 16:  # topic names hashing into the bundle (CRC-32)
            listed: list[dict[str, Any]] = []
            prefix = f"persistent://{ns}/topic-{int(rng.integers(0, 1 << 30))}-"
            for j in itertools.count():
                if len(listed) == min(count, 12):
                    break
                h = topic_hash_of(prefix + str(j))
                if lo <= h < hi or h == hi == 0xFFFFFFFF:
                    listed.append({"topic": prefix + str(j)})
            topics[name] = listed
    ext: dict[str, Any] = {"brokerLoadData": {},
                           "topBundlesLoadData": {b: {"topBundlesLoadData": e} for b, e in top.items()
                                                  if e or rng.random() < 0.5},
                           "recentlyUnloadedBundles": {}, "recentlyUnloadedBrokers": {}, "availableBrokers": ids}
    if rng.random() < 0.5:
        ext["bundleOwners"] = owners
    return {"config": conf, "nowMillis": NOW, "extensible": ext, "namespaces": namespaces, "topics": topics,
            "actions": ["split"]}

def evolve_extensible_split(rng: np.random.Generator, req: dict[str, Any]) -> dict[str, Any]:
    """The next split cycle: stats scaled across the limits, brokers whose list is missing this cycle."""
    nxt = json.loads(json.dumps(req))
    nxt["nowMillis"] = req["nowMillis"] + 60_000
    lists = nxt["extensible"]["topBundlesLoadData"]
    for broker in list(lists):
        if rng.random() < 0.15:
            del lists[broker]
            continue
        for e in lists[broker]["topBundlesLoadData"]:
            if rng.random() < 0.4:
                f = float(pick(rng, [0.0, 0.5, 1.0, 2.0]))
                for key in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut"):
                    e["stats"][key] *= f
    return nxt
