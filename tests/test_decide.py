"""End-to-end ``lbreplay decide`` (DESIGN.md §5) through the CLI entry point.

The installed console script runs in a subprocess for the contract checks (start-up time, file input,
determinism, exit codes of a few bad requests, one two-tick flow); the other flows call the same entry
point (``lbreplay.cli:main``) in-process with redirected stdin/stdout/stderr.

Every expected decision is derived by hand from Pulsar's rules (PULSAR-LB-SPEC.md section cited in each
test), not copied from the implementation's output. Shared cluster of the shedding tests (namespace
``t/ns``, 16 bundles of 0x10000000 each, default 4.x config: CPU weight 1, memory/direct-memory weight 0,
bandwidth limits 0 so bandwidth counts 0 %):

* ``b1:8080`` — bundles r0 (40e6 B/s), r1 (20e6), r2 (10e6): 70e6 B/s in total;
* ``b2:8080`` — bundle r3 (1e6 B/s, long-term msg rate 500);
* ``b3:8080`` — bundle r4 (1e6 B/s, long-term msg rate 100).

Every broker reports ``ModularLoadManagerImpl`` (so BrokerLoadManagerClassFilter keeps all of them) and the
short-term (ranking) and long-term (placement) bundle data equal the reported stats unless stated.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time
import zlib
from pathlib import Path
from dataclasses import dataclass
from typing import Any

import pytest

from lbreplay.cli import main

LBREPLAY = str(Path(sys.executable).with_name("lbreplay"))
NOW = 1_700_000_000_000
MODULAR = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
EXTENSIBLE = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
NS = "t/ns/"


def r(i: int) -> str:
    """Bundle ``i`` of ``t/ns``: ``[i * 0x10000000, (i + 1) * 0x10000000)``."""
    return f"{NS}0x{i * 0x10000000:08x}_0x{(i + 1) * 0x10000000:08x}"


def stats(thr: float = 0.0, rate: float = 0.0, topics: int = 2) -> dict[str, Any]:
    return {"msgRateIn": rate, "msgThroughputIn": thr, "msgRateOut": 0.0, "msgThroughputOut": 0.0,
            "consumerCount": 0, "producerCount": 0, "topics": topics, "cacheSize": 0}


def bundle_data(thr: float = 0.0, rate: float = 0.0, long_rate: float | None = None) -> dict[str, Any]:
    def tamd(max_samples: int, msg_rate: float) -> dict[str, Any]:
        return {"maxSamples": max_samples, "numSamples": max_samples, "msgThroughputIn": thr,
                "msgThroughputOut": 0.0, "msgRateIn": msg_rate, "msgRateOut": 0.0}

    return {"shortTermData": tamd(10, rate), "longTermData": tamd(1000, rate if long_rate is None else long_rate),
            "topics": 2}


def broker(cpu: float, last_stats: dict[str, Any]) -> dict[str, Any]:
    return {"localData": {"cpu": {"usage": cpu, "limit": 100.0}, "loadManagerClassName": MODULAR,
                          "lastUpdate": NOW, "lastStats": last_stats}}


def cluster(cpus: tuple[float, float, float] = (90, 20, 10), **config: Any) -> dict[str, Any]:
    """The shared three-broker cluster (module docstring) with the given CPU percentages."""
    return {
        "config": config,
        "nowMillis": NOW,
        "loadData": {
            "brokers": {
                "b1:8080": broker(cpus[0], {r(0): stats(40e6), r(1): stats(20e6), r(2): stats(10e6)}),
                "b2:8080": broker(cpus[1], {r(3): stats(1e6)}),
                "b3:8080": broker(cpus[2], {r(4): stats(1e6)}),
            },
            "bundleData": {r(0): bundle_data(40e6), r(1): bundle_data(20e6), r(2): bundle_data(10e6),
                           r(3): bundle_data(1e6, 0, 500), r(4): bundle_data(1e6, 0, 100)},
        },
    }


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run(request: dict[str, Any] | str, *args: str, process: bool = False) -> Result:
    """``lbreplay decide --request - [args]`` with ``request`` on stdin.

    ``process=True`` spawns the installed console script; otherwise the same entry point
    (``lbreplay.cli:main``, what the console script calls) runs in this interpreter with argv, stdin, stdout and
    stderr redirected, which keeps the many multi-tick flows fast.
    """
    text = request if isinstance(request, str) else json.dumps(request)
    if process:
        proc = subprocess.run([LBREPLAY, "decide", "--request", "-", *args], input=text, capture_output=True,
                              text=True, timeout=60)
        return Result(proc.returncode, proc.stdout, proc.stderr)
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv, sys.stdin
    sys.argv, sys.stdin = ["lbreplay", "decide", "--request", "-", *args], io.StringIO(text)
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv, sys.stdin = saved
    return Result(code, out.getvalue(), err.getvalue())


def decide(request: dict[str, Any], *args: str, process: bool = False) -> dict[str, Any]:
    res = run(request, *args, process=process)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def unloads(resp: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(u["broker"], u["bundle"], u["destination"]) for u in resp["unload"]]


# --- contract basics --------------------------------------------------------------------------------------------
def test_minimal_request_answers_under_two_seconds() -> None:
    """DESIGN.md §5: ``echo '{"config":{}}' | lbreplay decide --request -`` answers in < 2 s wall (best of two
    runs, so a busy CI machine's one-off stall does not count) with the response shape of §5 (default action
    ["shed"]; no brokers -> nothing to shed)."""
    elapsed = []
    for _ in range(2):
        t0 = time.perf_counter()
        proc = subprocess.run(f"echo '{{\"config\":{{}}}}' | {LBREPLAY} decide --request -", shell=True,
                              capture_output=True, text=True, timeout=60)
        elapsed.append(time.perf_counter() - t0)
        assert proc.returncode == 0, proc.stderr
    assert min(elapsed) < 2.0
    resp = json.loads(proc.stdout)
    assert set(resp) == {"unload", "split", "assign", "lookup", "kept", "skip", "stats", "strategyState"}
    assert resp["unload"] == [] and resp["split"] == [] and resp["assign"] == [] and resp["lookup"] == []
    assert resp["skip"] == "NoBrokers"  # doLoadShedding: "Only 1 broker available"


def test_request_file_and_determinism(tmp_path: Path) -> None:
    """A request file gives the same answer as stdin; the same seed gives byte-identical output. b2 and b3 tie
    for LeastLongTermMessageRate (both long-term 100 msg/s), so the pick is the seeded uniform choice and must
    be one of the two tied brokers (LeastLongTermMessageRate.selectBroker: random among the best)."""
    req = cluster()
    req["loadData"]["bundleData"][r(3)] = bundle_data(1e6, 0, 100)
    req["actions"] = [{"assign": ["t/other/0x00000000_0x40000000"]}]
    path = tmp_path / "req.json"
    path.write_text(json.dumps(req))
    proc = subprocess.run([LBREPLAY, "decide", "--request", str(path), "--seed", "5"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    again = run(req, "--seed", "5", process=True)
    assert again.stdout == proc.stdout
    assert json.loads(proc.stdout)["assign"][0]["broker"] in ("b2:8080", "b3:8080")


# --- shedding strategies ----------------------------------------------------------------------------------------
def test_threshold_shedder_unloads_largest_bundle_to_least_long_term_rate() -> None:
    """ThresholdShedder (§3.2), first tick: EWMA = raw weighted max usage 0.9/0.2/0.1, avg 0.4; b1 0.9 >= 0.4+0.1,
    need = 70e6 * (0.9-0.4-0.1+0.05) = 31.5e6 >= 10 MiB; largest first: r0 (40e6) crosses it -> unload r0 only.
    Destination (§6 selectBroker, §4.2): even spread keeps b2, b3 (1 bundle of t/ns each vs 3); LLTMR long-term
    rate b2 500 > b3 100 -> b3."""
    resp = decide(cluster())
    assert unloads(resp) == [("b1:8080", r(0), "b3:8080")]
    assert resp["skip"] is None
    assert resp["stats"]["loadAvg"] == pytest.approx(0.4)
    assert resp["strategyState"]["shedding"]["state"]["brokerAvgResourceUsage"] == pytest.approx(
        {"b1:8080": 0.9, "b2:8080": 0.2, "b3:8080": 0.1})


def test_threshold_shedder_threads_ewma_and_recently_unloaded_bundles() -> None:
    """ThresholdShedder EWMA across ticks (§3.2, h = 0.9): second tick reports CPU 10/20/90 %, so
    b1 = 0.9*0.9 + 0.1*0.1 = 0.82, b2 = 0.2, b3 = 0.9*0.1 + 0.1*0.9 = 0.18, avg 0.4: b1 still sheds (without the
    state b3 would). r0 is recently unloaded (carried in strategyState, within the 30-min grace period) so it is no
    candidate; need = 70e6 * (0.82-0.4-0.1+0.05) = 25.9e6: r1 (20e6) then r2 (10e6) cross it. Destinations: b3 is
    now overloaded (0.9 > 0.85 -> score +inf), b2 scores 500 -> b2 for both (no preallocation in doLoadShedding)."""
    first = decide(cluster())
    req = cluster((10, 20, 90))
    req["strategyState"] = first["strategyState"]
    second = decide(req)
    assert unloads(second) == [("b1:8080", r(1), "b2:8080"), ("b1:8080", r(2), "b2:8080")]
    assert second["strategyState"]["shedding"]["state"]["brokerAvgResourceUsage"] == pytest.approx(
        {"b1:8080": 0.82, "b2:8080": 0.2, "b3:8080": 0.18})
    assert set(second["strategyState"]["leader"]["recentlyUnloadedBundles"]) == {r(0), r(1), r(2)}
    fresh = decide(cluster((10, 20, 90)))  # same snapshot without history: b3 is the outlier, 1 bundle -> no shed
    assert fresh["unload"] == []


def test_overload_shedder() -> None:
    """OverloadShedder (§3.1): b1 usage 0.9 >= 0.85; pct = 0.9 - 0.85 + 0.05 = 0.1, need = 7e6; largest first:
    r0 (40e6) crosses it -> unload r0; destination b3 as above."""
    resp = decide(cluster(loadBalancerLoadSheddingStrategy="org.apache.pulsar.broker.loadbalance.impl.OverloadShedder"))
    assert unloads(resp) == [("b1:8080", r(0), "b3:8080")]


def _rate_cluster(**config: Any) -> dict[str, Any]:
    """Message-rate cluster: b1 bundles 6000/1500/1000 msg/s (8500), b2 2000, b3 1000; CPU 30 % everywhere."""
    req = cluster((30, 30, 30), **config)
    ld = req["loadData"]
    ld["brokers"]["b1:8080"]["localData"]["lastStats"] = {r(0): stats(1e3, 6000), r(1): stats(1e3, 1500),
                                                          r(2): stats(1e3, 1000)}
    ld["brokers"]["b2:8080"]["localData"]["lastStats"] = {r(3): stats(1e3, 2000)}
    ld["brokers"]["b3:8080"]["localData"]["lastStats"] = {r(4): stats(1e3, 1000)}
    ld["bundleData"] = {r(0): bundle_data(1e3, 6000), r(1): bundle_data(1e3, 1500), r(2): bundle_data(1e3, 1000),
                        r(3): bundle_data(1e3, 2000, 500), r(4): bundle_data(1e3, 1000, 100)}
    return req


def test_uniform_load_shedder() -> None:
    """UniformLoadShedder (§3.3 + Corrections: select when v <= required): rate gap (8500-1000)/1000 = 750 % > 50 %;
    required = int(7500 * 0.2) = 1500 >= minUnloadMessage 1000; candidates by short-term rate 6000 (> 1500), 1500
    (<= 1500: take, required 0), 1000 (> 0) -> unload r1; destination b3 (long-term 100 < b2 500)."""
    resp = decide(_rate_cluster(loadBalancerLoadSheddingStrategy="UniformLoadShedder"))
    assert unloads(resp) == [("b1:8080", r(1), "b3:8080")]


def test_avg_shedder_needs_two_ticks_and_places_on_its_planned_target() -> None:
    """AvgShedder (§3.4): two brokers, scores 90 and 10 -> gap 80 >= high threshold 40: tick 1 only counts hits
    (high = 1 < 2, skip HitCount); tick 2 (state passed back) fires. msgNeed = (10000 - 0) * 0.2 = 2000 > 1000 ->
    RATE; short-term rates 6000 (> 2000), 2500 (> 2000), 1500 (<= 2000: take) -> unload r1, planned target b2,
    which AvgShedder's selectBroker returns as the destination."""
    def request() -> dict[str, Any]:
        return {
            "config": {"loadBalancerLoadSheddingStrategy": "AvgShedder", "loadBalancerLoadPlacementStrategy": "AvgShedder"},
            "nowMillis": NOW,
            "loadData": {
                "brokers": {"b1:8080": broker(90, {r(0): stats(1e3, 6000), r(1): stats(1e3, 1500),
                                                   r(2): stats(1e3, 2500)}),
                            "b2:8080": broker(10, {r(3): stats()})},
                "bundleData": {r(0): bundle_data(1e3, 6000), r(1): bundle_data(1e3, 1500),
                               r(2): bundle_data(1e3, 2500), r(3): bundle_data()},
            },
        }

    first = decide(request(), process=True)
    assert first["unload"] == [] and first["skip"] == "HitCount"
    assert first["strategyState"]["shedding"]["state"]["brokerHitCountForHigh"] == {"b1:8080": 1, "b2:8080": 1}
    req = request()
    req["strategyState"] = first["strategyState"]
    second = decide(req, process=True)
    assert unloads(second) == [("b1:8080", r(1), "b2:8080")]
    assert second["strategyState"]["shedding"]["state"]["brokerHitCountForHigh"] == {}  # reset after firing


def _extensible_request() -> dict[str, Any]:
    """Extensible cluster: weightedMaxEMA a 0.9, b 0.1, c 0.5; a reports three 30e6 B/s top bundles."""
    def load(ema: float, thr: float) -> dict[str, Any]:
        return {"cpu": {"usage": ema * 100, "limit": 100.0}, "msgThroughputIn": thr, "msgThroughputOut": 0.0,
                "bundleCount": 3, "topics": 3, "maxResourceUsage": ema, "weightedMaxEMA": ema,
                "msgThroughputEMA": thr, "updatedAt": NOW, "reportedAt": NOW}

    top = [{"bundleName": r(i), "stats": stats(30e6)} for i in (0, 1, 2)]
    return {
        "config": {"loadManagerClassName": EXTENSIBLE},
        "nowMillis": NOW,
        "extensible": {"brokerLoadData": {"a:8080": load(0.9, 90e6), "b:8080": load(0.1, 10e6),
                                          "c:8080": load(0.5, 50e6)},
                       "topBundlesLoadData": {"a:8080": {"topBundlesLoadData": top}}},
    }


def test_transfer_shedder_needs_four_ticks_then_cools_down() -> None:
    """TransferShedder (§7.3) behind ExtensibleLoadManagerImpl: avg 0.5, std = sqrt((0.81+0.01+0.25)/3 - 0.25)
    = 0.3266 > 0.25 on every tick, so the hit count reaches 1, 2, 3 (skip HitCount) and sheds on tick 4 (> 3).
    Pair (a, b): offload (0.9-0.1)/2 = 0.4, target = 90e6 * 0.4 / 0.9 = 40e6; first top bundle r0 (30e6 <= 40e6)
    is transferred a -> b; r1 would overshoot (60e6) and b has no top bundles to swap -> stop. Std after:
    a 0.9-0.3, b 0.1+0.3 -> sqrt((0.36+0.16+0.25)/3 - 0.25) = 0.0816. Tick 5: a was unloaded at ``now`` and its
    load data is not 180 s newer -> CoolDown (UnloadScheduler records recentlyUnloadedBrokers)."""
    state = None
    skips = []
    for _ in range(3):
        req = _extensible_request()
        req["strategyState"] = state
        resp = decide(req)
        skips.append(resp["skip"])
        assert resp["unload"] == []
        state = resp["strategyState"]
    assert skips == ["HitCount"] * 3
    assert state["shedding"]["state"]["unloadConditionHitCount"] == 3
    req = _extensible_request()
    req["strategyState"] = state
    fourth = decide(req)
    assert [(u["broker"], u["bundle"], u["destination"], u["reason"]) for u in fourth["unload"]] == [
        ("a:8080", r(0), "b:8080", "Overloaded")]
    assert fourth["stats"]["loadStd"] == pytest.approx(0.32659863, rel=1e-6)
    assert fourth["stats"]["loadStdAfterShedding"] == pytest.approx(0.08164966, rel=1e-6)
    req = _extensible_request()
    req["strategyState"] = fourth["strategyState"]
    fifth = decide(req)
    assert fifth["unload"] == [] and fifth["skip"] == "CoolDown"


# --- placement ------------------------------------------------------------------------------------------------
def test_assign_least_long_term_message_rate_with_preallocation() -> None:
    """selectBrokerForAssignment (§4.1, §4.7) with LeastLongTermMessageRate: x1 of the new namespace t/other ->
    b3 (b1 overloaded = +inf, b3 100 < b2 500); x2 -> the even-spread filter drops b3, which now serves 1
    preallocated bundle of t/other -> b2; x1 again -> the preallocatedBundleToBroker cache -> b3."""
    req = cluster()
    x1, x2 = "t/other/0x00000000_0x40000000", "t/other/0x40000000_0x80000000"
    req["actions"] = [{"assign": [x1, x2, x1]}]
    resp = decide(req)
    assert resp["assign"] == [{"bundle": x1, "broker": "b3:8080"}, {"bundle": x2, "broker": "b2:8080"},
                              {"bundle": x1, "broker": "b3:8080"}]
    leader = resp["strategyState"]["leader"]
    assert leader["preallocatedBundleToBroker"] == {x1: "b3:8080", x2: "b2:8080"}
    assert resp["unload"] == []  # no "shed" action requested


def test_assign_least_resource_usage_with_weight() -> None:
    """LeastResourceUsageWithWeight (§4.3): usages 0.9/0.5/0.1, first EWMA = raw, avg 0.5, best = ema + 0.1 <= 0.5
    -> b3 only. x2: b3 excluded by the even spread (1 preallocated); C = {b1, b2}, EWMA unchanged (same input),
    avg 0.7, b2 0.6 <= 0.7 -> b2."""
    req = cluster((90, 50, 10), loadBalancerLoadPlacementStrategy="LeastResourceUsageWithWeight")
    x1, x2 = "t/other/0x00000000_0x40000000", "t/other/0x40000000_0x80000000"
    req["actions"] = [{"assign": [x1, x2]}]
    resp = decide(req)
    assert [a["broker"] for a in resp["assign"]] == ["b3:8080", "b2:8080"]
    assert resp["strategyState"]["placement"]["state"]["brokerAvgResourceUsageWithWeight"] == pytest.approx(
        {"b1:8080": 0.9, "b2:8080": 0.5, "b3:8080": 0.1})


@pytest.mark.parametrize("line,expected", [("2.11", "b3"), ("3.0", "b2:8080"), ("5.0", "b2:8080")])
def test_assign_broker_id_without_port_per_line(line: str, expected: str) -> None:
    """``LoadManagerShared.applyNamespacePolicies`` reads the host of ``new URL("http://" + id)`` up to 3.1 (an id
    without a port is its own host), and ``parseBrokerHost`` (the id up to its last ':'; an id without ':' is
    skipped, never a candidate) from apache/pulsar#21894 (3.2.0; in the 3.0 line by 3.0.7). b3 without its port is
    the least loaded broker of ``cluster()``: 2.11 places there, 3.0+ never. Found by the oracle's placement-pipeline
    cases with a port-less broker id (``VersionProfile.broker_host_by_last_colon``)."""
    req = json.loads(json.dumps(cluster()).replace('"b3:8080"', '"b3"'))
    req["config"]["pulsarVersion"] = line
    req["actions"] = [{"assign": ["t/other/0x00000000_0x40000000"]}]
    assert decide(req)["assign"] == [{"bundle": "t/other/0x00000000_0x40000000", "broker": expected}]


def test_assign_respects_isolation_policy() -> None:
    """applyNamespacePolicies (§4.1 a) with Pulsar's NamespaceIsolationData JSON: t/iso.* is primary on host b1
    (regex on the host, port dropped) and min_available needs 1 primary, so b1 is the only candidate although it
    is overloaded (LLTMR: a single candidate is returned even at +inf); other namespaces never get b1 (it is not
    shared) -> b3 (least long-term rate)."""
    req = cluster()
    req["isolationPolicies"] = {"p1": {"namespaces": ["t/iso.*"], "primary": ["b1"], "secondary": [],
                                       "auto_failover_policy": {"policy_type": "min_available",
                                                                "parameters": {"min_limit": "1",
                                                                               "usage_threshold": "80"}}}}
    req["actions"] = [{"assign": ["t/iso1/0x00000000_0x40000000", "t/free/0x00000000_0x40000000"]}]
    resp = decide(req)
    assert [a["broker"] for a in resp["assign"]] == ["b1:8080", "b3:8080"]


def test_assign_extensible_least_resource_usage_with_weight() -> None:
    """ExtensibleLoadManagerImpl.assign (§7.4): a bundle the channel already owns keeps its owner (bundleOwners);
    a new one goes through the filters and LeastResourceUsageWithWeight on the reported weightedMaxEMA:
    a 0.9, b 0.1, c 0.5 -> avg 0.5, only b has ema + 0.1 <= 0.5 -> b."""
    req = _extensible_request()
    req["extensible"]["bundleOwners"] = {r(0): "a:8080"}
    req["actions"] = [{"assign": [r(0), "t/new/0x00000000_0x40000000"]}]
    resp = decide(req)
    assert resp["assign"] == [{"bundle": r(0), "broker": "a:8080"},
                              {"bundle": "t/new/0x00000000_0x40000000", "broker": "b:8080"}]


# --- split ----------------------------------------------------------------------------------------------------------
def test_automatic_split_then_lookup_finds_the_children() -> None:
    """checkNamespaceBundleSplit (§5.1): r0 reports 1500 topics > loadBalancerNamespaceBundleMaxTopics 1000 ->
    split with range_equally_divide (§5.2): 0x00000000 + 0x10000000 // 2 = 0x08000000. A later lookup in the same
    request maps a topic hashing below 0x08000000 to the lower child (findBundle on the updated layout)."""
    req = cluster()
    req["loadData"]["brokers"]["b1:8080"]["localData"]["lastStats"][r(0)]["topics"] = 1500
    topics = [f"persistent://t/ns/topic-{i}" for i in range(64)]
    low = [t for t in topics if zlib.crc32(t.encode()) < 0x08000000]
    high = [t for t in topics if 0x08000000 <= zlib.crc32(t.encode()) < 0x10000000]
    assert low and high
    req["actions"] = ["split", {"lookup": low + high}]
    resp = decide(req)
    assert resp["split"] == [{"broker": "b1:8080", "bundle": r(0), "boundaries": ["0x08000000"],
                              "algorithm": "range_equally_divide", "reason": "Topics"}]
    assert [x["bundle"] for x in resp["lookup"]] == (
        ["t/ns/0x00000000_0x08000000"] * len(low) + ["t/ns/0x08000000_0x10000000"] * len(high))


def test_extensible_split_after_four_consecutive_hits() -> None:
    """DefaultNamespaceBundleSplitStrategyImpl (§7.5): a top bundle with 1001 topics (> 1000) counts a hit per call
    and splits once hits > loadBalancerNamespaceBundleSplitConditionHitCountThreshold (3): on the 4th call, at
    0x00000000 + 0x40000000 // 2 = 0x20000000 (the namespace's default 4-bundle layout)."""
    def request() -> dict[str, Any]:
        return {"config": {"loadManagerClassName": EXTENSIBLE}, "nowMillis": NOW,
                "extensible": {"brokerLoadData": {"a:8080": {"updatedAt": NOW}, "b:8080": {"updatedAt": NOW}},
                               "topBundlesLoadData": {"a:8080": {"topBundlesLoadData": [
                                   {"bundleName": "t/ns/0x00000000_0x40000000",
                                    "stats": {"topics": 1001, "msgRateIn": 10.0}}]}}},
                "actions": ["split"]}

    state = None
    for expected_hits in (1, 2, 3):
        req = request()
        req["strategyState"] = state
        resp = decide(req)
        assert resp["split"] == []
        state = resp["strategyState"]
        assert state["split"]["state"]["splitConditionHitCounts"] == {
            "a:8080": {"t/ns/0x00000000_0x40000000": expected_hits}}
    req = request()
    req["strategyState"] = state
    resp = decide(req)
    assert resp["split"] == [{"broker": "a:8080", "bundle": "t/ns/0x00000000_0x40000000", "boundaries": ["0x20000000"],
                              "algorithm": "range_equally_divide", "reason": "Topics"}]


def test_extensible_split_reads_each_brokers_bundle_stats_as_a_map() -> None:
    """``BrokerService.getBundleStats()`` is a map: a bundle listed twice in one broker's TopBundlesLoadData counts
    once (the last entry), and a broker absent from ``topBundlesLoadData`` keeps its hit counts (its
    DefaultNamespaceBundleSplitStrategyImpl did not run); both found by the oracle's
    ``DefaultNamespaceBundleSplitStrategy`` cases."""
    hot = {"bundleName": "t/ns/0x00000000_0x40000000", "stats": {"topics": 1001, "msgRateIn": 10.0}}
    cold = {"bundleName": "t/ns/0x00000000_0x40000000", "stats": {"topics": 5, "msgRateIn": 10.0}}

    def request(top: dict[str, Any], state: Any = None) -> dict[str, Any]:
        return {"config": {"loadManagerClassName": EXTENSIBLE,
                           "loadBalancerNamespaceBundleSplitConditionHitCountThreshold": 1}, "nowMillis": NOW,
                "extensible": {"brokerLoadData": {"a:8080": {"updatedAt": NOW}, "b:8080": {"updatedAt": NOW}},
                               "topBundlesLoadData": top},
                "actions": ["split"], "strategyState": state}

    first = decide(request({"a:8080": {"topBundlesLoadData": [hot, hot]}}))
    assert first["split"] == []  # one hit, not two
    counts = first["strategyState"]["split"]["state"]["splitConditionHitCounts"]
    assert counts == {"a:8080": {"t/ns/0x00000000_0x40000000": 1}}
    # the last entry wins: [hot, cold] resets the count
    reset = decide(request({"a:8080": {"topBundlesLoadData": [hot, cold]}}, first["strategyState"]))
    assert reset["split"] == []
    assert reset["strategyState"]["split"]["state"]["splitConditionHitCounts"] == {}
    # broker a absent for a cycle (only b reports): a's count survives, and a splits on its next hit
    away = decide(request({"b:8080": {"topBundlesLoadData": []}}, first["strategyState"]))
    assert away["strategyState"]["split"]["state"]["splitConditionHitCounts"] == counts
    back = decide(request({"a:8080": {"topBundlesLoadData": [hot]}}, away["strategyState"]))
    assert [s["bundle"] for s in back["split"]] == ["t/ns/0x00000000_0x40000000"]


def _hashes(topics: list[str]) -> list[int]:
    return sorted(zlib.crc32(t.encode()) for t in topics)


def test_operator_split_with_each_algorithm() -> None:
    """Operator splits (§5.2), one per algorithm in one request, computed independently:
    * range_equally_divide of t/a/0x40000000_0x80000000 (default 4-bundle layout) -> 0x60000000;
    * topic_count_equally_divide of t/b's full bundle with 6 topics: sorted hashes H, mid of H[2] and H[3];
    * specified_positions_divide of t/c's full bundle at 0x50000000, 0x30000000 and 0xffffffff: the positions
      strictly inside, sorted -> 0x30000000, 0x50000000 (the bundle has 2 topics);
    and a following lookup sees t/a's new children."""
    tb = [f"persistent://t/b/tc-{i}" for i in range(6)]
    tc = ["persistent://t/c/one", "persistent://t/c/two"]
    h = _hashes(tb)
    mid = h[2] + (h[3] - h[2]) // 2
    full = ["0x00000000", "0xffffffff"]
    req = {
        "config": {},
        "namespaces": {"t/b": {"boundaries": full}, "t/c": {"boundaries": full}},
        "topics": {"t/b/0x00000000_0xffffffff": [{"topic": t} for t in tb],
                   "t/c/0x00000000_0xffffffff": [{"topic": t} for t in tc]},
        "actions": [
            {"splitBundle": {"bundle": "t/a/0x40000000_0x80000000", "algorithm": "range_equally_divide"}},
            {"splitBundle": {"bundle": "t/b/0x00000000_0xffffffff", "algorithm": "topic_count_equally_divide"}},
            {"splitBundle": {"bundle": "t/c/0x00000000_0xffffffff", "algorithm": "specified_positions_divide",
                             "positions": ["0x50000000", "0x30000000", "0xffffffff"]}},
        ],
    }
    resp = decide(req)
    assert [(s["bundle"], s["boundaries"], s["algorithm"], s["reason"]) for s in resp["split"]] == [
        ("t/a/0x40000000_0x80000000", ["0x60000000"], "range_equally_divide", "Admin"),
        ("t/b/0x00000000_0xffffffff", [f"0x{mid:08x}"], "topic_count_equally_divide", "Admin"),
        ("t/c/0x00000000_0xffffffff", ["0x30000000", "0x50000000"], "specified_positions_divide", "Admin"),
    ]


def test_operator_split_flow_or_qps() -> None:
    """flow_or_qps_equally_divide (§5.2, Corrections: cut at H[i-1] + (H[i]-H[i-1])//2 + 1), allowed for an operator
    split when it is the default algorithm: 4 topics of 12000 msg/s (bundle 48000 >= 30000 * 1.1); accumulating
    in hash order 12000, 24000, then 36000 > 30000 -> one cut between H[1] and H[2]; the last topic fits."""
    topics = [f"persistent://t/f/flow-{i}" for i in range(4)]
    h = _hashes(topics)
    req = {"config": {"defaultNamespaceBundleSplitAlgorithm": "flow_or_qps_equally_divide"},
           "namespaces": {"t/f": {"boundaries": ["0x00000000", "0xffffffff"]}},
           "topics": {"t/f/0x00000000_0xffffffff": [{"topic": t, "msgRateIn": 12000.0} for t in topics]},
           "actions": [{"splitBundle": {"bundle": "t/f/0x00000000_0xffffffff",
                                        "algorithm": "flow_or_qps_equally_divide"}}]}
    resp = decide(req)
    assert resp["split"][0]["boundaries"] == [f"0x{h[1] + (h[2] - h[1]) // 2 + 1:08x}"]


def test_operator_split_without_boundary_is_not_an_error() -> None:
    """DESIGN.md §5: a split whose algorithm finds no boundary returns an empty split list (topic_count with a
    single topic: TopicCountEquallyDivideBundleSplitAlgorithm returns no boundary for <= 1 topic)."""
    req = {"config": {}, "topics": {"t/s/0x00000000_0x40000000": [{"topic": "persistent://t/s/alone"}]},
           "actions": [{"splitBundle": {"bundle": "t/s/0x00000000_0x40000000",
                                        "algorithm": "topic_count_equally_divide"}}]}
    if zlib.crc32(b"persistent://t/s/alone") >= 0x40000000:
        req["namespaces"] = {"t/s": {"boundaries": ["0x00000000", "0x40000000", "0xffffffff"]}}
        req["topics"] = {"t/s/0x40000000_0xffffffff": [{"topic": "persistent://t/s/alone"}]}
        req["actions"][0]["splitBundle"]["bundle"] = "t/s/0x40000000_0xffffffff"
    resp = decide(req)
    assert resp["split"] == []


# --- lookup ------------------------------------------------------------------------------------------------------------
def test_lookup_default_and_explicit_layouts() -> None:
    """Topic -> bundle (§2): crc32 of the full topic name; a namespace without a layout gets
    defaultNumberOfNamespaceBundles = 4 bundles of 0x40000000 (last one closed at 0xffffffff); t/two declares
    two bundles split at 0x7fffffff. Short names normalise to persistent://public/default/<name>."""
    t4 = [f"persistent://t/four/topic-{i}" for i in range(8)]
    t2 = [f"persistent://t/two/topic-{i}" for i in range(8)]
    req = {"config": {}, "namespaces": {"t/two": {"boundaries": ["0x00000000", "0x7fffffff", "0xffffffff"]}},
           "actions": [{"lookup": t4 + t2 + ["my-topic"]}]}
    resp = decide(req)
    bounds4 = [0, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF]

    def expect4(t: str, ns: str = "t/four") -> str:
        i = min(zlib.crc32(t.encode()) // 0x40000000, 3)
        return f"{ns}/0x{bounds4[i]:08x}_0x{bounds4[i + 1]:08x}"

    def expect2(t: str) -> str:
        return "t/two/0x00000000_0x7fffffff" if zlib.crc32(t.encode()) < 0x7FFFFFFF else "t/two/0x7fffffff_0xffffffff"

    expected = [expect4(t) for t in t4] + [expect2(t) for t in t2]
    expected.append(expect4("persistent://public/default/my-topic", "public/default"))
    assert [x["bundle"] for x in resp["lookup"]] == expected
    assert resp["lookup"][-1]["topic"] == "my-topic"


# --- bad requests --------------------------------------------------------------------------------------------------------
def _negative_limit() -> dict[str, Any]:
    req = cluster()
    req["loadData"]["brokers"]["b1:8080"]["localData"]["cpu"]["limit"] = -800
    return req


def _nan() -> str:
    return json.dumps(cluster()).replace('"usage": 90', '"usage": NaN')


def _bundle_name(name: str) -> dict[str, Any]:
    req = cluster()
    req["loadData"]["bundleData"][name] = bundle_data()
    return req


def _unknown_owner() -> dict[str, Any]:
    req = _extensible_request()
    req["extensible"]["bundleOwners"] = {r(0): "ghost:8080"}
    return req


BAD_REQUESTS = [
    ("malformed-json", '{"config": {', 2, "$: malformed JSON"),
    ("not-an-object", "[1, 2]", 2, "$: expected an object, got array"),
    ("unknown-config-key", {"config": {"loadBalancerNoSuchKey": 1}}, 2, "$.config.loadBalancerNoSuchKey"),
    ("unknown-action", {"config": {}, "actions": ["shed", "rebalance"]}, 2, "$.actions[1]"),
    ("unknown-request-key", {"config": {}, "action": ["shed"]}, 2, "$.action"),
    ("wrong-type", {"config": {}, "loadData": {"brokers": []}}, 2, "$.loadData.brokers: expected an object"),
    ("wrong-type-number", {"config": {}, "nowMillis": "soon"}, 2, "$.nowMillis: expected a number"),
    ("avg-placement-mismatch", {"config": {"loadBalancerLoadPlacementStrategy": "AvgShedder"}}, 2,
     "$.config.loadBalancerLoadSheddingStrategy"),
    ("malformed-bundle-name", _bundle_name("just-a-name"), 3, '$.loadData.bundleData["just-a-name"]: malformed bundle'),
    ("malformed-range", _bundle_name(NS + "0x0000_0xffffffff"), 3,
     '$.loadData.bundleData["t/ns/0x0000_0xffffffff"]: malformed bundle range'),
    ("negative-limit", _negative_limit(), 3, '$.loadData.brokers["b1:8080"].localData.cpu.limit: must be >= 0'),
    ("nan", _nan(), 3, '$.loadData.brokers["b1:8080"].localData.cpu.usage: must be a finite number'),
    ("nan-config", '{"config": {"maxUnloadPercentage": NaN}}', 3, "$.config.maxUnloadPercentage"),
    ("unknown-owner", _unknown_owner(), 3, "bundle owned by unknown broker"),
    ("split-not-in-layout", {"config": {}, "namespaces": {"t/x": {"boundaries": ["0x00000000", "0xffffffff"]}},
                             "actions": [{"splitBundle": {"bundle": "t/x/0x00000000_0x40000000"}}]}, 3,
     "$.actions[0].splitBundle.bundle: bundle 't/x/0x00000000_0x40000000' is not in the bundle layout"),
    ("unsupported-algorithm", {"config": {"supportedNamespaceBundleSplitAlgorithms": ["range_equally_divide"]},
                               "actions": [{"splitBundle": {"bundle": "t/x/0x00000000_0x40000000",
                                                            "algorithm": "topic_count_equally_divide"}}]}, 3,
     "$.actions[0].splitBundle.algorithm: unsupported namespace bundle split algorithm"),
    ("positions-missing", {"config": {}, "actions": [{"splitBundle": {
        "bundle": "t/x/0x00000000_0x40000000", "algorithm": "specified_positions_divide"}}]}, 3,
     "$.actions[0].splitBundle.positions"),
    ("bad-topic", {"config": {}, "actions": [{"lookup": ["persistent://only-tenant"]}]}, 3, "$.actions[0].lookup[0]"),
]


IN_PROCESS_ONLY = {"not-an-object", "unknown-request-key", "wrong-type-number", "avg-placement-mismatch",
                   "malformed-bundle-name", "nan-config", "positions-missing", "bad-topic"}


@pytest.mark.parametrize("request_doc, code, path, process", [(*c[1:], c[0] not in IN_PROCESS_ONLY)
                                                              for c in BAD_REQUESTS], ids=[c[0] for c in BAD_REQUESTS])
def test_bad_requests_exit_with_code_and_json_path(request_doc: dict[str, Any] | str, code: int, path: str,
                                                   process: bool) -> None:
    """DESIGN.md §3/§5: usage errors exit 2, invalid values exit 3, with one line on stderr naming the JSON path of
    the offending field; never a Python traceback. Admin split rejections mirror
    NamespacesBase.internalSplitNamespaceBundle (unsupported algorithm; specified_positions_divide without
    positions)."""
    proc = run(request_doc, process=process)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == ""
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr
    assert len(err.splitlines()) == 1
    assert path in err


def test_unexpected_failure_exits_1_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """DESIGN.md §3: any other failure exits 1 with a one-line reason, never a traceback."""
    import lbreplay.decide as decide_module

    def boom(*_: Any) -> None:
        raise RuntimeError("kernel exploded\nsecond line")

    monkeypatch.setattr(decide_module.DecideRequest, "run", boom)
    res = run({"config": {}})
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == ["lbreplay: decide failed: RuntimeError: kernel exploded second line"]


def test_null_actions_mean_the_default_and_negative_seed_is_usage() -> None:
    """``actions`` absent or null -> ["shed"] (skip NoBrokers here); a negative --seed is a usage error (exit 2)."""
    assert decide({"config": {}, "actions": None})["skip"] == "NoBrokers"
    assert decide({"config": {}, "actions": []})["skip"] is None
    res = run({"config": {}}, "--seed", "-1")
    assert res.returncode == 2 and "--seed" in res.stderr


def test_missing_request_file_is_a_usage_error(tmp_path: Path) -> None:
    """An unreadable --request file: exit 2 with the reason on one line."""
    proc = subprocess.run([LBREPLAY, "decide", "--request", str(tmp_path / "nope.json")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert "--request" in proc.stderr and "Traceback" not in proc.stderr


def test_a_destination_drawn_at_random_says_so_and_the_owner_drawn_is_kept() -> None:
    """Every broker above 85 %: ``LeastLongTermMessageRate.getScore`` gives each +inf, so ``selectBroker`` draws
    (``ThreadLocalRandom``) among all three. Each unload and assignment so drawn names the brokers in
    ``drawnAmong``; a bundle OverloadShedder planned whose draw hit its owner is in ``kept`` (doLoadShedding's "The
    destination broker … is the same as the current owner broker": no unload). A single best broker: no
    ``drawnAmong``."""
    every = ["b1:8080", "b2:8080", "b3:8080"]
    req = cluster((95, 95, 95), loadBalancerLoadSheddingStrategy="OverloadShedder")
    req["actions"] = ["shed", {"assign": ["t/other/0x00000000_0x40000000"]}]
    unloads, kept = [], []
    for seed in range(8):
        resp = decide(req, "--seed", str(seed))
        unloads += resp["unload"]
        kept += resp["kept"]
        assert len(resp["unload"]) + len(resp["kept"]) == 1  # b1's bundle (b2 and b3 own one bundle each)
        assert resp["assign"][0]["drawnAmong"] == every
    assert unloads and kept
    assert all(u["drawnAmong"] == every and u["destination"] != u["broker"] for u in unloads)
    assert all(set(k) == {"broker", "bundle", "drawnAmong"} and k["drawnAmong"] == every for k in kept)
    one = cluster()
    one["actions"] = [{"assign": ["t/other/0x00000000_0x40000000"]}]
    assert decide(one)["assign"] == [{"bundle": "t/other/0x00000000_0x40000000", "broker": "b3:8080"}]
