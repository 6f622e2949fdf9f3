"""Regenerate the checked-in sample dumps (deterministic; no randomness).

    python data/samples/make_samples.py
    python data/samples/make_samples.py --whatif RUN_WORK data/samples/whatif/<config>-<n>

``--whatif`` copies one run of scripts/pulsar/whatif.sh (its ``--work``/<run> directory) as a committed sample:
the recording (loadbalance/, collect/ without collect's read offsets of the brokers' logs, leader-decisions.log),
the brokers' broker.conf and the run's events.log (when the joining broker started, which broker was SIGKILLed);
the README is written by hand.

The JSON follows the shapes Pulsar serialises (LocalBrokerData as in the 3.1 docs sample, BundleData,
TimeAverageBrokerData, extensible BrokerLoadData / TopBundlesLoadData). Limits follow the docs sample: 8 cores
(cpu limit 800), heap 2096 MiB, direct memory 256 MiB, NIC 1.0E7 Kbit/s. Totals are the sums over ``lastStats``,
BundleData is the TimeAverageMessageData recursion over one sample per tick, TimeAverageBrokerData is the sum of
the owned bundles' BundleData (TimeAverageBrokerData.reset).
"""

from __future__ import annotations

import json
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
T0_MS = 1690977600000  # 2023-08-02T12:00:00Z
BROKERS = ("broker-1:8080", "broker-2:8080", "broker-3:8080")
OFFSET_MS = {"broker-1:8080": 5217, "broker-2:8080": 17903, "broker-3:8080": 33412}
RANGES = ("0x00000000_0x40000000", "0x40000000_0x80000000", "0x80000000_0xc0000000", "0xc0000000_0xffffffff")
NS = ("my-tenant/my-namespace", "public/default")
# bundle -> (msgRateIn, avg message size bytes, fan-out, topics, producers, consumers)
PROFILE = {
    f"{NS[0]}/{RANGES[0]}": (820.0, 1024, 2, 12, 12, 24),
    f"{NS[0]}/{RANGES[1]}": (410.0, 2048, 1, 7, 7, 7),
    f"{NS[0]}/{RANGES[2]}": (1350.0, 512, 3, 20, 20, 60),
    f"{NS[0]}/{RANGES[3]}": (95.0, 4096, 1, 3, 3, 3),
    f"{NS[1]}/{RANGES[0]}": (2200.0, 1024, 2, 31, 40, 62),
    f"{NS[1]}/{RANGES[1]}": (160.0, 1024, 1, 4, 4, 4),
    f"{NS[1]}/{RANGES[2]}": (640.0, 2048, 2, 9, 9, 18),
    f"{NS[1]}/{RANGES[3]}": (300.0, 1024, 1, 5, 5, 5),
}
SPLIT_PARENT = f"{NS[1]}/{RANGES[0]}"
SPLIT_CHILDREN = (f"{NS[1]}/0x00000000_0x20000000", f"{NS[1]}/0x20000000_0x40000000")
MOVED = f"{NS[1]}/{RANGES[2]}"
TICK_FACTOR = (1.0, 1.08, 0.95)


def owners(tick: int) -> dict[str, list[str]]:
    """Ownership per tick: tick 1 moves MOVED from broker-2 to broker-3; tick 2 splits SPLIT_PARENT on broker-1."""
    own = {
        "broker-1:8080": [f"{NS[0]}/{RANGES[0]}", f"{NS[0]}/{RANGES[2]}", f"{NS[1]}/{RANGES[0]}"],
        "broker-2:8080": [f"{NS[0]}/{RANGES[1]}", f"{NS[1]}/{RANGES[1]}", MOVED],
        "broker-3:8080": [f"{NS[0]}/{RANGES[3]}", f"{NS[1]}/{RANGES[3]}"],
    }
    if tick >= 1:
        own["broker-2:8080"].remove(MOVED)
        own["broker-3:8080"].append(MOVED)
    if tick >= 2:
        own["broker-1:8080"].remove(SPLIT_PARENT)
        own["broker-1:8080"].extend(SPLIT_CHILDREN)
    return {b: sorted(v) for b, v in own.items()}


def bundle_stats(bundle: str, tick: int) -> dict:
    """NamespaceBundleStats of a bundle at a tick (a split child carries 60/40 of its parent's load)."""
    share = 1.0
    prof_key = bundle
    if bundle in SPLIT_CHILDREN:
        prof_key, share = SPLIT_PARENT, (0.6 if bundle == SPLIT_CHILDREN[0] else 0.4)
    rate_in, size, fanout, topics, producers, consumers = PROFILE[prof_key]
    wobble = 1.0 + 0.01 * ((sum(map(ord, bundle)) + 7 * tick) % 5 - 2)
    r_in = round(rate_in * TICK_FACTOR[tick] * wobble * share, 3)
    r_out = round(r_in * fanout, 3)
    return {
        "msgRateIn": r_in,
        "msgThroughputIn": round(r_in * size, 3),
        "msgRateOut": r_out,
        "msgThroughputOut": round(r_out * size, 3),
        "consumerCount": round(consumers * share),
        "producerCount": round(producers * share),
        "topics": round(topics * share),
        "cacheSize": round(r_in * size * 4),
    }


def pct(usage: float, limit: float) -> float:
    return usage / limit * 100 if limit > 0 else 0.0


def resources(stats: dict[str, dict], tick: int, broker: str) -> dict:
    """Host usage consistent with the broker's traffic (cpu in % of one core, MiB, Kbit/s)."""
    rate = sum(s["msgRateIn"] + s["msgRateOut"] for s in stats.values())
    thr_in = sum(s["msgThroughputIn"] for s in stats.values())
    thr_out = sum(s["msgThroughputOut"] for s in stats.values())
    k = BROKERS.index(broker)
    return {
        "cpu": {"usage": round(35.0 + 0.025 * rate + 3 * k, 2), "limit": 800.0},
        "memory": {"usage": round(980.0 + 40 * k + 12 * tick + thr_in / 2**20 * 30, 1), "limit": 2096.0},
        "directMemory": {"usage": round(48.0 + thr_out / 2**20 * 8, 1), "limit": 256.0},
        "bandwidthIn": {"usage": round(thr_in * 8 / 1024 * 1.02, 2), "limit": 1.0e7},
        "bandwidthOut": {"usage": round(thr_out * 8 / 1024 * 1.02, 2), "limit": 1.0e7},
    }


def local_broker_data(broker: str, tick: int) -> dict:
    host = broker.split(":")[0]
    own = owners(tick)[broker]
    stats = {b: bundle_stats(b, tick) for b in own}
    res = resources(stats, tick, broker)
    prev = set(owners(tick - 1)[broker]) if tick else set()
    max_usage = max(pct(**res[r]) for r in ("cpu", "directMemory", "bandwidthIn", "bandwidthOut")) / 100
    return {
        "webServiceUrl": f"http://{host}:8080",
        "pulsarServiceUrl": f"pulsar://{host}:6650",
        "persistentTopicsEnabled": True,
        "nonPersistentTopicsEnabled": True,
        **res,
        "msgThroughputIn": round(sum(s["msgThroughputIn"] for s in stats.values()), 3),
        "msgThroughputOut": round(sum(s["msgThroughputOut"] for s in stats.values()), 3),
        "msgRateIn": round(sum(s["msgRateIn"] for s in stats.values()), 3),
        "msgRateOut": round(sum(s["msgRateOut"] for s in stats.values()), 3),
        "lastUpdate": T0_MS + tick * 60_000 + OFFSET_MS[broker],
        "lastStats": stats,
        "numTopics": sum(s["topics"] for s in stats.values()),
        "numBundles": len(stats),
        "numConsumers": sum(s["consumerCount"] for s in stats.values()),
        "numProducers": sum(s["producerCount"] for s in stats.values()),
        "bundles": own,
        "lastBundleGains": sorted(set(own) - prev) if tick else [],
        "lastBundleLosses": sorted(prev - set(own)) if tick else [],
        "brokerVersionString": "3.1.0",
        "protocols": {},
        "advertisedListeners": {"internal": {"brokerServiceUrl": f"pulsar://{host}:6650"}},
        "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
        "startTimestamp": 1690940955211 + 1000 * BROKERS.index(broker),
        "maxResourceUsage": round(max_usage, 6),
        "loadReportType": "LocalBrokerData",
    }


def tamd_update(d: dict, s: dict) -> None:
    """TimeAverageMessageData.update: numSamples first, then the running mean / EWMA."""
    n = min(d["numSamples"] + 1, d["maxSamples"])
    d["numSamples"] = n
    for key in ("msgThroughputIn", "msgThroughputOut", "msgRateIn", "msgRateOut"):
        d[key] = ((n - 1) * d[key] + s[key]) / n


def bundle_data_after(ticks: int) -> dict[str, dict]:
    """BundleData of every bundle alive after ``ticks`` leader refreshes (one sample per refresh)."""
    data: dict[str, dict] = {}
    for tick in range(ticks):
        alive = {b for own in owners(tick).values() for b in own}
        for b in sorted(alive):
            s = bundle_stats(b, tick)
            if b not in data:  # new BundleData(10, 1000, defaultStats): numSamples 0, overwritten by the 1st sample
                default = {"msgThroughputIn": 50000.0, "msgThroughputOut": 50000.0, "msgRateIn": 50.0, "msgRateOut": 50.0}
                data[b] = {
                    "shortTermData": {"maxSamples": 10, "numSamples": 0, **default},
                    "longTermData": {"maxSamples": 1000, "numSamples": 0, **default},
                    "topics": 0,
                }
            tamd_update(data[b]["shortTermData"], s)
            tamd_update(data[b]["longTermData"], s)
            data[b]["topics"] = s["topics"]
        for b in list(data):  # [M] drops bundles no broker reported
            if b not in alive:
                del data[b]
    for d in data.values():
        for term in ("shortTermData", "longTermData"):
            for k, v in d[term].items():
                if isinstance(v, float):
                    d[term][k] = round(v, 3)
    return data


def time_average(broker: str, tick: int, data: dict[str, dict]) -> dict:
    out = {}
    for term, prefix in (("shortTermData", "shortTerm"), ("longTermData", "longTerm")):
        for key in ("MsgThroughputIn", "MsgThroughputOut", "MsgRateIn", "MsgRateOut"):
            field = key[0].lower() + key[1:]
            out[f"{prefix}{key}"] = round(sum(data[b][term][field] for b in owners(tick)[broker]), 3)
    return out


def stamp(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def write(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")


def modular(root: Path) -> None:
    for tick in range(3):
        for broker in BROKERS:
            lbd = local_broker_data(broker, tick)
            write(root / "loadbalance" / "brokers" / broker.replace(":", "_") / f"{stamp(lbd['lastUpdate'])}.json", lbd)
    written = T0_MS + 2 * 60_000 + 45_000  # the leader's bundle-data / time-average write at 12:02:45
    data = bundle_data_after(3)
    for bundle, bd in sorted(data.items()):
        tenant, ns, rng = bundle.split("/")
        write(root / "loadbalance" / "bundle-data" / stamp(written) / tenant / ns / f"{rng}.json", bd)
    for broker in BROKERS:
        write(
            root / "loadbalance" / "broker-time-average" / stamp(written) / f"{broker.replace(':', '_')}.json",
            time_average(broker, 2, data),
        )


def extensible(root: Path) -> None:
    """BrokerLoadData (4.x weights: cpu 1, memory 0, directMemory 0, bandwidth 1/1; h = 0.9, EMA step every 5 s)
    and TopBundlesLoadData (highest load first, as the older TopKBundles wrote it)."""
    ema: dict[str, tuple[float, float]] = {}
    for tick in range(3):
        for broker in BROKERS:
            own = owners(tick)[broker]
            stats = {b: bundle_stats(b, tick) for b in own}
            res = resources(stats, tick, broker)
            p = {r: pct(**res[r]) for r in res}
            max_usage = max(p["cpu"], p["directMemory"], p["bandwidthIn"], p["bandwidthOut"]) / 100
            weighted = max(p["cpu"], p["bandwidthIn"], p["bandwidthOut"]) / 100
            thr = sum(s["msgThroughputIn"] + s["msgThroughputOut"] for s in stats.values())
            if broker not in ema:
                ema[broker] = (weighted, thr)
            else:
                w0, t0 = ema[broker]
                decay = 0.9**12
                ema[broker] = (weighted + (w0 - weighted) * decay, thr + (t0 - thr) * decay)
            updated = T0_MS + tick * 60_000 + OFFSET_MS[broker] % 5000 + 4000
            bld = {
                **res,
                "msgThroughputIn": round(sum(s["msgThroughputIn"] for s in stats.values()), 3),
                "msgThroughputOut": round(sum(s["msgThroughputOut"] for s in stats.values()), 3),
                "msgRateIn": round(sum(s["msgRateIn"] for s in stats.values()), 3),
                "msgRateOut": round(sum(s["msgRateOut"] for s in stats.values()), 3),
                "bundleCount": len(stats),
                "topics": sum(s["topics"] for s in stats.values()),
                "maxResourceUsage": round(max_usage, 6),
                "weightedMaxEMA": round(ema[broker][0], 6),
                "msgThroughputEMA": round(ema[broker][1], 3),
                "updatedAt": updated,
                "reportedAt": updated + 212,
            }
            name = broker.replace(":", "_")
            write(root / "broker-load-data" / name / f"{stamp(T0_MS + tick * 60_000)}.json", bld)
            top = sorted(stats.items(), key=lambda kv: (-kv[1]["msgThroughputIn"], kv[0]))
            tbl = {"topBundlesLoadData": [{"bundleName": b, "stats": s} for b, s in top]}
            write(root / "top-bundles-load-data" / name / f"{stamp(T0_MS + tick * 60_000)}.json", tbl)


def whatif(run: Path, out: Path) -> None:
    """One what-if run's recording, as committed (everything the audit and the prediction read)."""
    dump = run / "dump"
    out.mkdir(parents=True, exist_ok=True)
    for name in ("loadbalance", "collect"):
        if (out / name).exists():
            shutil.rmtree(out / name)
        shutil.copytree(dump / name, out / name, ignore=shutil.ignore_patterns("leader-log-offsets.jsonl", ".*"))
    for src, dst in ((dump / "leader-decisions.log", "leader-decisions.log"), (dump / "broker.conf", "broker.conf"),
                     (run / "events.log", "events.log")):
        shutil.copyfile(src, out / dst)
    # the recording machine's directories (collect's --leader-log-dir, the cluster's run directory) stay out
    root = str(HERE.parents[1])
    for path in (out / "collect" / "session.jsonl", out / "events.log"):
        path.write_text(path.read_text(encoding="utf-8").replace(root + "/", "").replace(root, "."), encoding="utf-8")


def main() -> None:
    if sys.argv[1:2] == ["--whatif"]:
        whatif(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    for name, fn in (("modular-3brokers", modular), ("extensible-3brokers", extensible)):
        root = HERE / name
        for sub in root.iterdir() if root.exists() else ():
            if sub.is_dir():
                shutil.rmtree(sub)
        fn(root)


if __name__ == "__main__":
    main()
