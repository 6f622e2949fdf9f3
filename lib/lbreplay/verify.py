"""``lbreplay verify``: the differential check of the kernel against Pulsar's real classes (issue 16).

The oracle (``tests/pulsar_oracle``, a small Java program built by Maven against
``org.apache.pulsar:pulsar-broker:<version>``) answers ``decide`` requests with Pulsar's own strategy objects;
this module generates seeded random snapshots and multi-tick sequences per strategy, asks the oracle and the kernel
(through ``decide``'s own request parsing, :class:`lbreplay.decide.DecideRequest`) and compares the answers exactly:
unloads (broker, bundle), split candidates (bundle, broker), placements (the broker, or membership of Pulsar's own
set of equally good brokers where Pulsar picks with ``ThreadLocalRandom``), and the strategies' shared figures
(EWMA maps, hit counters) to 1e-12 relative. No Spark.

What the oracle runs per request line (see ``Oracle.java``): one leader refresh
(``onActiveBrokersChange`` on both strategies, as ``ModularLoadManagerImpl.cleanupDeadBrokersData``), then
``shed`` = ``findBundlesForUnloading`` after ``doLoadShedding``'s grace-period prune; ``assign`` =
``selectBroker`` over every broker of the snapshot; ``split`` = ``BundleSplitterTask.findBundlesToSplit``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import numpy as np

from lbreplay.errors import LbReplayError, UsageError

REPO_ROOT = Path(__file__).resolve().parents[2]
ORACLE_DIR = REPO_ROOT / "tests" / "pulsar_oracle"
IMPL = "org.apache.pulsar.broker.loadbalance.impl."
REL_TOL = 1e-12

# Pulsar line -> (newest jar checked, lbreplay profile name, JDK major the jar needs).
PULSAR_LINES: dict[str, tuple[str, str, int]] = {
    "4.0": ("4.0.7", "4.0", 17),
    # 4.2.x jars are Java 21 class files (a JDK >= 21 is picked for building and running the oracle).
    "4.2": ("4.2.4", "4.2", 21),
}
DEFAULT_LINE = "4.0"


class OracleError(LbReplayError):
    """The oracle could not be built or answered with an error."""


# ------------------------------------------------------------------------------------------------------------
# Building and running the oracle
# ------------------------------------------------------------------------------------------------------------
def _java_home(major: int) -> str | None:
    """A JDK of at least ``major`` (JAVA_HOME, else the java on PATH, else the usual Debian locations)."""
    candidates = [os.environ.get("JAVA_HOME")] + sorted(str(p) for p in Path("/usr/lib/jvm").glob("*"))
    for home in candidates:
        if not home:
            continue
        java = Path(home) / "bin" / "java"
        if java.exists() and _java_major(str(java)) >= major:
            return home
    return None


def _java_major(java: str) -> int:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False).stderr
    except (OSError, subprocess.SubprocessError):
        return 0
    for token in out.split('"')[1:2]:
        head = token.split(".")[0]
        return int(head) if head.isdigit() else 0
    return 0


def build_oracle(version: str, java_major: int = 17, quiet: bool = True) -> tuple[str, dict[str, str]]:
    """Build the oracle against ``pulsar-broker:<version>`` if not built yet (cached under ``target/``);
    return (classpath, environment for ``java``)."""
    out = ORACLE_DIR / "target" / f"pulsar-{version}"
    classes, cp_file = out / "classes", out / "classpath.txt"
    env = dict(os.environ)
    home = _java_home(java_major)
    if home:
        env["JAVA_HOME"] = home
    src_mtime = max(p.stat().st_mtime for p in (ORACLE_DIR / "src").rglob("*") if p.is_file())
    stale = not cp_file.exists() or not (classes / "lbreplay" / "oracle" / "Oracle.class").exists() or (
        (classes / "lbreplay" / "oracle" / "Oracle.class").stat().st_mtime < src_mtime
    )
    if stale:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise OracleError("verify: Maven (mvn) is needed to build the Pulsar oracle; install it (apt-get install maven)")
        cmd = [mvn, "-B", "-q", "-f", str(ORACLE_DIR / "pom.xml"), f"-Dpulsar.version={version}",
               f"-Djava.release={java_major}", "package"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            tail = " ".join((proc.stdout + proc.stderr).split()[-60:])
            raise OracleError(f"verify: building the oracle for Pulsar {version} failed: {tail}")
    return f"{classes}{os.pathsep}{cp_file.read_text().strip()}", env


class Oracle:
    """One JVM running ``lbreplay.oracle.Oracle``: one request line in, one answer line out."""

    def __init__(self, version: str, java_major: int = 17) -> None:
        cp, env = build_oracle(version, java_major)
        java = str(Path(env["JAVA_HOME"]) / "bin" / "java") if env.get("JAVA_HOME") else "java"
        self.proc = subprocess.Popen(
            [java, "-Xss8m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp, "lbreplay.oracle.Oracle"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request, separators=(",", ":")) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise OracleError("verify: the oracle JVM exited")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------------------------------------------
# The kernel's answer, through decide's own request parsing
# ------------------------------------------------------------------------------------------------------------
def kernel_answer(req: dict[str, Any], state: dict[str, Any] | None, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """What lbreplay's kernel answers to ``req`` (same shape as the oracle's), and the strategy state to carry.

    ``decide.DecideRequest`` parses the request exactly as ``decide`` does; the strategies then run alone, as the oracle
    runs Pulsar's: ``shed`` = the grace-period prune + ``find_bundles_for_unloading`` (the plan, before the load
    manager's destination pick), ``assign`` = ``select_broker`` over every broker, ``split`` =
    ``find_bundles_to_split``.
    """
    from lbreplay.decide import DecideRequest
    from lbreplay.kernel.bundle_split import find_bundles_to_split
    from lbreplay.kernel.config import PulsarConfig
    from lbreplay.kernel.modular_load_manager import prune_recently_unloaded

    full = dict(req)
    full.pop("sequence", None)
    full["strategyState"] = state
    conf = PulsarConfig.resolve(full["config"], path="$.config")
    tick = DecideRequest(full, conf, np.random.default_rng(seed))
    out: dict[str, Any] = {"unload": [], "split": [], "assign": [], "skip": None}
    if tick.extensible:
        return _kernel_extensible(tick, conf, out)
    ld = tick.ld
    for action in full.get("actions") or ["shed"]:
        if action == "shed":
            if len(ld.brokers) <= 1:
                out["skip"] = "NoBrokers"
                continue
            prune_recently_unloaded(ld, conf, tick.now)
            shedder = tick.manager.shedder  # the modular strategy (tick.shedder's type also admits TransferShedder)
            plan = shedder.find_bundles_for_unloading(ld, conf)
            shedder.on_unload_attempt_completed({u.bundle for u in plan})
            if shedder.skip_reason() == "ComparisonContractViolation":
                out["skip"] = "ComparisonContractViolation"
            out["unload"] = [{"broker": u.broker, "bundle": u.bundle, "destination": None} for u in plan]
        elif action == "split":
            layouts = {ns: v for ns, v in tick.layouts.items()}
            counts = {ns: int(v.size - 1) for ns, v in layouts.items()}
            for row, broker, _ in find_bundles_to_split(ld, conf, counts):
                out["split"].append({"broker": ld.brokers.ids[broker], "bundle": ld.bundles.names[row]})
        elif isinstance(action, dict) and "assign" in action:
            rows = np.arange(len(ld.brokers), dtype=np.int64)
            order = np.argsort(np.asarray(ld.brokers.ids, dtype=object), kind="stable")
            for bundle in action["assign"]:
                row = tick.placement.select_broker(rows[order], bundle, ld, conf, tick.rng)
                out["assign"].append({"bundle": bundle, "broker": ld.brokers.ids[row] if row >= 0 else None})
    new_state = {"version": 1, "mode": "modular", "shedding": {"class": tick.shed_name,
                                                             "state": tick.shedder.get_state()}}
    if tick.placement is not tick.shedder:
        new_state["placement"] = {"class": tick.place_name, "state": tick.placement.get_state()}
    out["figures"] = _kernel_figures(new_state)
    return out, new_state


def _kernel_extensible(tick: Any, conf: Any, out: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``UnloadScheduler.execute`` + ``TransferShedder.findBundlesForUnloading`` as ``decide`` runs them, with the
    request's recently-unloaded maps as the inputs (no carried copy)."""
    from lbreplay.kernel.extensible.transfer_shedder import (
        expire_recently_unloaded_bundles,
    )

    ctx = tick.ctx
    expire_recently_unloaded_bundles(ctx.recently_unloaded_bundles, tick.now, conf)
    if int(ctx.available.sum()) <= 1:
        out["skip"] = "NoBrokers"
    else:
        decisions = tick.shedder.find_bundles_for_unloading(ctx, conf)
        out["unload"] = [{"broker": u.broker, "bundle": u.bundle, "destination": u.destination, "reason": u.reason}
                         for u in decisions]
        stats = tick.shedder.stats()
        out["stats"] = {k: stats[k] for k in ("loadAvg", "loadStd") if k in stats}
    state = {"version": 1, "mode": "extensible",
             "shedding": {"class": tick.shed_name, "state": tick.shedder.get_state()}}
    hits = tick.shedder.get_state().get("unloadConditionHitCount")
    out["figures"] = {} if hits is None else {"unloadConditionHitCount": {"value": float(hits)}}
    return out, state


def _kernel_figures(state: dict[str, Any]) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    for part in ("shedding", "placement"):
        st = (state.get(part) or {}).get("state") or {}
        for name in ("brokerAvgResourceUsage", "brokerAvgResourceUsageWithWeight", "brokerHitCountForHigh",
                     "brokerHitCountForLow"):
            if name in st:
                figures[name] = {str(k): float(v) for k, v in st[name].items()}
    return figures


# ------------------------------------------------------------------------------------------------------------
# Comparison
# ------------------------------------------------------------------------------------------------------------
def _close(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=REL_TOL, abs_tol=0.0)


def compare(strategy: str, java: dict[str, Any], kernel: dict[str, Any]) -> list[str]:
    """Differences between the oracle's and the kernel's answers (empty: they agree)."""
    diffs: list[str] = []
    if "error" in java:
        return [f"oracle error: {java['error']}"]
    ju = sorted((u["broker"], u["bundle"], u.get("destination"), u.get("reason")) for u in java["unload"])
    ku = sorted((u["broker"], u["bundle"], u.get("destination"), u.get("reason")) for u in kernel["unload"])
    if ju != ku:
        diffs.append(f"unload: pulsar {ju} lbreplay {ku}")
    js = sorted((s["bundle"], s["broker"]) for s in java["split"])
    ks = sorted((s["bundle"], s["broker"]) for s in kernel["split"])
    if js != ks:
        diffs.append(f"split: pulsar {js} lbreplay {ks}")
    ties = (java.get("oracle") or {}).get("tieSets") or []
    for i, (ja, ka) in enumerate(zip(java["assign"], kernel["assign"])):
        if ja["broker"] == ka["broker"]:
            continue
        tie = ties[i] if i < len(ties) else []
        if len(tie) > 1 and ka["broker"] in tie:
            continue  # an equally good broker: Pulsar picks one of them with ThreadLocalRandom
        diffs.append(f"assign {ja['bundle']}: pulsar {ja['broker']} (ties {tie}) lbreplay {ka['broker']}")
    if len(java["assign"]) != len(kernel["assign"]):
        diffs.append("assign: different lengths")
    js_, ks_ = java.get("stats") or {}, kernel.get("stats") or {}
    for key in sorted(set(js_) & set(ks_)):
        a, b = js_[key], ks_[key]
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not _close(float(a), float(b)):
            diffs.append(f"stats.{key}: pulsar {a!r} lbreplay {b!r}")
    if java.get("skip") != kernel.get("skip"):
        diffs.append(f"skip: pulsar {java.get('skip')} lbreplay {kernel.get('skip')}")
    jf = (java.get("oracle") or {}).get("figures") or {}
    kf = kernel.get("figures") or {}
    for name in sorted(set(jf) & set(kf)):
        a, b = jf[name], kf[name]
        if set(a) != set(b):
            diffs.append(f"{name}: brokers pulsar {sorted(a)} lbreplay {sorted(b)}")
            continue
        for broker in sorted(a):
            if not _close(float(a[broker]), float(b[broker])):
                diffs.append(f"{name}[{broker}]: pulsar {a[broker]!r} lbreplay {b[broker]!r}")
    return diffs


# ------------------------------------------------------------------------------------------------------------
# Case generation
# ------------------------------------------------------------------------------------------------------------
@dataclass
class Case:
    strategy: str
    steps: list[dict[str, Any]] = field(default_factory=list)


STRATEGIES = ("ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder",
              "LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "RoundRobinBrokerSelector", "BundleSplit",
              "TransferShedder")
EXT = "org.apache.pulsar.broker.loadbalance.extensions."
NOW = 1_700_000_000_000
MB = 1024.0 * 1024.0


def _hex(x: int) -> str:
    return f"0x{x:08x}"


def _layout(n: int) -> list[int]:
    step = 0x100000000 // n
    return [i * step for i in range(n)] + [0xFFFFFFFF]


class Generator:
    """Seeded random snapshots: 1-200 brokers, heterogeneous limits, skew, ties, zero traffic, one-bundle
    brokers, recently unloaded bundles, split thresholds straddled, preallocations, multi-tick sequences."""

    def __init__(self, seed: int, profile: str, *, prealloc_twice: bool = False) -> None:
        self.rng = np.random.default_rng(seed)
        self.profile = profile
        # A bundle preallocated to two brokers (assigned again before its first broker reported it): legal in
        # Pulsar (each BrokerData has its own preallocatedBundleData); decide keeps one copy (known divergence).
        self.prealloc_twice = prealloc_twice

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
            return float(rng.choice([10.0, 50.0, 100.0]))
        return float(np.round(rng.uniform(lo, hi), int(rng.integers(0, 4))))

    def snapshot(self, strategy: str) -> dict[str, Any]:
        rng = self.rng
        n = self._brokers()
        ties = rng.random() < 0.2
        skew = rng.random() < 0.4
        host_ids = [f"broker-{i}.example:{8080 + int(rng.integers(0, 2))}" for i in range(n)]
        n_ns = int(rng.integers(1, 4))
        layouts = {f"t/ns{k}": _layout(int(rng.choice([1, 2, 4, 8, 16]))) for k in range(n_ns)}
        all_bundles = [f"{ns}/{_hex(lo)}_{_hex(hi)}" for ns, b in layouts.items() for lo, hi in itertools.pairwise(b)]
        rng.shuffle(all_bundles)
        owner = {b: int(rng.integers(0, n)) for b in all_bundles}
        if rng.random() < 0.2:  # one-bundle brokers
            for i, b in enumerate(all_bundles):
                owner[b] = i % n
        bundle_data: dict[str, Any] = {}
        stats: dict[str, dict[str, Any]] = {}
        for b in all_bundles:
            hot = skew and owner[b] == 0
            scale = 20.0 if hot else 1.0
            rin, rout = self._num(0, 5000 * scale, ties=ties), self._num(0, 5000 * scale, ties=ties)
            tin, tout = self._num(0, 30 * MB * scale, ties=ties), self._num(0, 30 * MB * scale, ties=ties)
            topics = int(rng.choice([0, 1, 2, 5, 50, 1500]))
            sessions = int(rng.integers(0, 3000))
            stats[b] = {"msgRateIn": rin, "msgThroughputIn": tin, "msgRateOut": rout, "msgThroughputOut": tout,
                        "consumerCount": sessions // 2, "producerCount": sessions - sessions // 2, "topics": topics,
                        "cacheSize": 0}
            f = float(rng.choice([0.5, 1.0, 1.0, 2.0]))
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
            lim = float(rng.choice([1000.0, 10000.0, 100000.0]))

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
        recently = {}
        for b in all_bundles:
            if rng.random() < 0.1:
                recently[b] = NOW - int(rng.choice([0, 10 * 60_000, 29 * 60_000, 31 * 60_000, 90 * 60_000]))
        conf = self.config(strategy)
        return {
            "config": conf, "nowMillis": NOW,
            "loadData": {"brokers": brokers, "bundleData": bundle_data, "recentlyUnloadedBundles": recently},
            "namespaces": {ns: {"boundaries": [_hex(x) for x in b]} for ns, b in layouts.items()},
        }

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
        conf["loadBalancerBrokerOverloadedThresholdPercentage"] = int(rng.choice([50, 70, 85, 95]))
        conf["loadBalancerBrokerThresholdShedderPercentage"] = int(rng.choice([0, 5, 10, 25]))
        conf["loadBalancerHistoryResourcePercentage"] = float(rng.choice([0.0, 0.5, 0.9, 1.0]))
        conf["loadBalancerAverageResourceUsageDifferenceThresholdPercentage"] = int(rng.choice([0, 10, 20]))
        conf["lowerBoundarySheddingEnabled"] = bool(rng.random() < 0.4)
        conf["loadBalancerMsgRateDifferenceShedderThreshold"] = float(rng.choice([10.0, 50.0]))
        conf["loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold"] = float(rng.choice([1.5, 4.0]))
        conf["maxUnloadPercentage"] = float(rng.choice([0.1, 0.2, 0.5]))
        conf["maxUnloadBundleNumPerShedding"] = int(rng.choice([-1, 1, 3]))
        conf["minUnloadMessage"] = int(rng.choice([0, 1000]))
        conf["minUnloadMessageThroughput"] = int(rng.choice([0, 1048576]))
        conf["loadBalancerAvgShedderLowThreshold"] = int(rng.choice([5, 15]))
        conf["loadBalancerAvgShedderHighThreshold"] = int(rng.choice([20, 40]))
        conf["loadBalancerAvgShedderHitCountLowThreshold"] = int(rng.choice([1, 2, 8]))
        conf["loadBalancerAvgShedderHitCountHighThreshold"] = int(rng.choice([1, 2]))
        for key in ("loadBalancerCPUResourceWeight", "loadBalancerMemoryResourceWeight",
                    "loadBalancerDirectMemoryResourceWeight", "loadBalancerBandwidthInResourceWeight",
                    "loadBalancerBandwidthOutResourceWeight"):
            conf[key] = float(rng.choice([0.0, 0.5, 1.0, 1.0]))
        conf["loadBalancerNamespaceBundleMaxTopics"] = int(rng.choice([2, 50, 1000]))
        conf["loadBalancerNamespaceBundleMaxSessions"] = int(rng.choice([0, 100, 1000]))
        conf["loadBalancerNamespaceBundleMaxMsgRate"] = int(rng.choice([0, 3000, 30000]))
        conf["loadBalancerNamespaceBundleMaxBandwidthMbytes"] = int(rng.choice([0, 20, 100]))
        conf["loadBalancerNamespaceMaximumBundles"] = int(rng.choice([2, 8, 128]))
        return conf

    def evolve(self, req: dict[str, Any]) -> dict[str, Any]:
        """The next tick of a sequence: same brokers and bundles, usage and rates drift, time moves 1 minute."""
        rng = self.rng
        nxt = json.loads(json.dumps(req))
        nxt["nowMillis"] = req["nowMillis"] + 60_000
        for b in nxt["loadData"]["brokers"].values():
            local = b["localData"]
            local["lastUpdate"] += 60_000
            for r in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut"):
                if rng.random() < 0.5:
                    local[r]["usage"] = float(np.round(local[r]["usage"] * rng.uniform(0.5, 1.5), 3))
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
        for bid in ids:
            usage = {r: {"usage": self._num(0, 100, ties=ties), "limit": 100.0}
                     for r in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")}
            ema = float(np.round(rng.uniform(0, 1.2), 4)) if not ties else float(rng.choice([0.1, 0.5, 0.9]))
            entries: list[dict[str, Any]] = []
            for _ in range(int(rng.choice([0, 1, 2, 5, 10]))):
                name = f"t/ns{k % 3}/{_hex(k * 0x100)}_{_hex(k * 0x100 + 0x100)}"
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
        return {"config": conf, "nowMillis": NOW, "extensible": ext, "actions": ["shed"]}

    def evolve_extensible(self, req: dict[str, Any]) -> dict[str, Any]:
        rng = self.rng
        nxt = json.loads(json.dumps(req))
        nxt["nowMillis"] = req["nowMillis"] + 60_000
        for d in nxt["extensible"]["brokerLoadData"].values():
            d["updatedAt"] += 60_000
            if rng.random() < 0.5:
                d["weightedMaxEMA"] = float(np.round(d["weightedMaxEMA"] * rng.uniform(0.7, 1.3), 4))
        return nxt

    def case(self, strategy: str) -> Case:
        if strategy == "TransferShedder":
            steps = [self.extensible()]
            if self.rng.random() < 0.6:
                for _ in range(int(self.rng.integers(1, 5))):
                    steps.append(self.evolve_extensible(steps[-1]))
            return Case(strategy, steps)
        req = self.snapshot(strategy)
        if strategy in ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "RoundRobinBrokerSelector"):
            bundles = list(req["loadData"]["bundleData"])
            new = [f"t/new/{_hex(0)}_{_hex(0x40000000)}"]
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


# ------------------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------------------
def run_case(oracle: Oracle, case: Case, case_id: str) -> list[str]:
    """Run a case's steps through both sides; the differences of the first disagreeing step."""
    state: dict[str, Any] | None = None
    for i, req in enumerate(case.steps):
        java = oracle.ask({**req, "sequence": case_id})
        kernel, state = kernel_answer(req, state)
        diffs = compare(case.strategy, java, kernel)
        if diffs:
            return [f"step {i}: {d}" for d in diffs]
    return []


def cases(seed: int, strategy: str, count: int, profile: str) -> Iterator[Case]:
    gen = Generator(seed * 1_000_003 + STRATEGIES.index(strategy), profile)
    for _ in range(count):
        yield gen.case(strategy)


def verify(version: str, count: int, seed: int, strategies: tuple[str, ...] = STRATEGIES,
           emit: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``count`` cases per strategy; one result dict per strategy."""
    line = version if version in PULSAR_LINES else ".".join(version.split(".")[:2])
    if line not in PULSAR_LINES:
        raise UsageError(f"--pulsar-version: unsupported {version!r}; supported lines: {', '.join(PULSAR_LINES)}")
    jar, profile, java_major = PULSAR_LINES[line]
    if version.count(".") == 2:
        jar = version
    results = []
    with Oracle(jar, java_major) as oracle:
        for strategy in strategies:
            agree = 0
            examples: list[dict[str, Any]] = []
            for k, case in enumerate(cases(seed, strategy, count, profile)):
                diffs = run_case(oracle, case, f"{strategy}-{seed}-{k}")
                if diffs:
                    if len(examples) < 5:
                        examples.append({"case": k, "diffs": diffs[:3]})
                else:
                    agree += 1
            res = {"pulsarVersion": jar, "profile": profile, "strategy": strategy, "cases": count,
                   "agree": agree, "agreement": agree / count if count else 1.0, "examples": examples}
            results.append(res)
            if emit:
                emit(res)
    return results


def verify_command(version: str, count: int, seed: int) -> None:
    """``lbreplay verify``: one JSON line per strategy; exit 1 when any case disagrees."""
    if count < 1:
        raise UsageError(f"--cases: must be >= 1, got {count}")
    results = verify(version, count, seed, emit=lambda r: print(json.dumps(r), flush=True))
    if any(r["agree"] != r["cases"] for r in results):
        sys.exit(1)
