"""Each released Pulsar line that ``pulsarVersion`` names, checked against that line's newest jar (issue 16).

The 4.0 line runs 500 cases per strategy in ``test_differential.py``; every other line runs ``CASES`` seeded cases
per strategy here (``lbreplay.verify.verify``: the same generator and comparison as ``lbreplay verify``). A line
whose jar or dependency tree Maven cannot resolve is skipped (the reason names the line); a strategy the line's
jar does not have is reported "not in this line" and not compared.
"""

from __future__ import annotations

import pytest

from lbreplay.kernel.config import PulsarConfig
from lbreplay.verify import (
    NOT_IN_LINE,
    PULSAR_LINES,
    STRATEGIES,
    Oracle,
    OracleError,
    compare,
    kernel_answer,
    line_strategies,
    verify,
)

# 500 per strategy per line, as on 4.0 (test_differential.py); pipelined through the oracle, one line's 6,000 cases
# take ~2 minutes (bench/verify_pipeline.py)
CASES = 500
LINES = [line for line in PULSAR_LINES if line != "4.0"]


def _oracle_or_skip(line: str) -> Oracle:
    jar, _, java = PULSAR_LINES[line]
    try:
        return Oracle(jar, java, extensible="TransferShedder" in line_strategies(line))
    except OracleError as e:
        if "resolve" in str(e):
            pytest.skip(f"Pulsar {line}: the jar {jar} or its dependencies do not resolve from Maven Central: {e}")
        raise


@pytest.mark.parametrize("line", LINES)
def test_line_agrees_with_its_jar(line: str) -> None:
    """``CASES`` random snapshots / sequences per strategy agree exactly with the line's jar; the strategies the
    jar lacks are reported as such."""
    _oracle_or_skip(line).close()
    results = verify(line, CASES, seed=11)
    assert [r["strategy"] for r in results] == list(STRATEGIES)
    missing = [r["strategy"] for r in results if r.get("status") == NOT_IN_LINE]
    assert missing == [s for s in STRATEGIES if s not in line_strategies(line)]
    bad = [(r["strategy"], r["agree"], r["examples"][:1]) for r in results
           if r.get("status") != NOT_IN_LINE and r["agree"] != r["cases"]]
    assert not bad, f"Pulsar {line} ({PULSAR_LINES[line][0]}) disagrees: {bad}"


@pytest.mark.parametrize("line", list(PULSAR_LINES))
def test_config_defaults_are_the_jars(line: str) -> None:
    """``conf/pulsar/defaults.yaml`` for the line equals the line's ``ServiceConfiguration`` defaults for every key
    the jar has (keys the jar lacks are lbreplay's or a later line's)."""
    jar, profile, _ = PULSAR_LINES[line]
    with _oracle_or_skip(line) as oracle:
        defaults = oracle.ask({"configDefaults": True})["oracle"]["configDefaults"]
        assert oracle.ask({"pulsarVersionCheck": True})["oracle"]["implementationVersion"] == jar
    conf = PulsarConfig.resolve({"pulsarVersion": profile})
    diffs = []
    for key in conf:
        if key == "pulsarVersion" or key not in defaults:
            continue
        ours, theirs = conf[key], defaults[key]
        if isinstance(ours, (int, float)) and not isinstance(ours, bool) and isinstance(theirs, (int, float)):
            same = float(ours) == float(theirs)
        else:
            same = ours == theirs
        if not same:
            diffs.append((key, ours, theirs))
    assert not diffs, f"defaults.yaml {line} vs {jar}'s ServiceConfiguration: {diffs}"
    assert "loadBalancerLoadSheddingStrategy" in defaults


# ----------------------------------------------------------------------------------------------------------------
# Divergences found by the placement-pipeline cases (ModularLoadManagerImpl.selectBrokerForAssignment)
# ----------------------------------------------------------------------------------------------------------------
IMPL = "org.apache.pulsar.broker.loadbalance.impl."
NOW = 1_700_000_000_000


def _placement_request(line: str, config: dict[str, object]) -> dict:
    """b1:8080 idle but serving three bundles of ``t/ns``; b2:8080 busier, serving none of them. One more ``t/ns``
    bundle is assigned (LeastLongTermMessageRate: b1 scores lower; the even spread keeps b2 only)."""
    names = [f"t/ns/0x{lo:08x}_0x{hi:08x}" for lo, hi in
             ((0, 0x40000000), (0x40000000, 0x80000000), (0x80000000, 0xC0000000), (0xC0000000, 0xFFFFFFFF))]
    other = "t/other/0x00000000_0xffffffff"

    def data(rate: float) -> dict:
        td = {"maxSamples": 10, "numSamples": 10, "msgRateIn": rate, "msgRateOut": rate,
              "msgThroughputIn": rate * 100, "msgThroughputOut": rate * 100}
        return {"shortTermData": td, "longTermData": {**td, "maxSamples": 1000}, "topics": 1}

    bundle_data = {n: data(1.0) for n in names}
    bundle_data[other] = data(5000.0)

    def broker(owned: list[str], cpu: float) -> dict:
        rate = sum(bundle_data[b]["shortTermData"]["msgRateIn"] for b in owned)
        return {"localData": {
            "cpu": {"usage": cpu, "limit": 100.0}, "memory": {"usage": 10.0, "limit": 100.0},
            "directMemory": {"usage": 0.0, "limit": 100.0}, "bandwidthIn": {"usage": 0.0, "limit": 1000.0},
            "bandwidthOut": {"usage": 0.0, "limit": 1000.0}, "msgRateIn": rate, "msgRateOut": rate,
            "msgThroughputIn": rate * 100, "msgThroughputOut": rate * 100, "bundles": owned,
            "lastStats": {b: {"msgRateIn": bundle_data[b]["shortTermData"]["msgRateIn"], "topics": 1} for b in owned},
            "lastUpdate": NOW, "loadManagerClassName": IMPL + "ModularLoadManagerImpl"},
            "timeAverageData": {"longTermMsgRateIn": rate, "longTermMsgRateOut": rate,
                                "longTermMsgThroughputIn": rate * 100, "longTermMsgThroughputOut": rate * 100}}

    return {
        "config": {"pulsarVersion": line, "loadManagerClassName": IMPL + "ModularLoadManagerImpl",
                   "loadBalancerLoadPlacementStrategy": IMPL + "LeastLongTermMessageRate", **config},
        "nowMillis": NOW,
        "loadData": {"brokers": {"b1:8080": broker(names[:3], 10.0), "b2:8080": broker([other], 20.0)},
                     "bundleData": bundle_data},
        "actions": [{"selectBrokerForAssignment": [names[3]]}],
    }


@pytest.mark.parametrize(("line", "expected"), [("2.10", "b2:8080"), ("2.11", "b1:8080")])
def test_even_spread_has_no_switch_before_2_11(line: str, expected: str) -> None:
    """``loadBalancerDistributeBundlesEvenlyEnabled`` arrived with apache/pulsar#16059 (2.11.0): 2.10.5's
    ``ModularLoadManagerImpl.selectBrokerForAssignment`` always calls
    ``LoadManagerShared.removeMostServicingBrokersForNamespace``, so with the key false the bundle still goes to the
    broker serving fewest bundles of its namespace (b2); from 2.11 on the key turns the spread off (b1, the least
    loaded)."""
    req = _placement_request(line, {"loadBalancerDistributeBundlesEvenlyEnabled": False})
    with _oracle_or_skip(line) as oracle:
        java = oracle.ask({**req, "sequence": None})
    kernel, _ = kernel_answer(req, None)
    assert java["assign"] == [{"bundle": req["actions"][0]["selectBrokerForAssignment"][0], "broker": expected}]
    assert compare("PlacementPipeline", java, kernel) == []


@pytest.mark.parametrize(("line", "expected"), [("4.0", "b2:8080"), ("4.2", "b1:8080")])
def test_shedding_excluded_namespaces_exist_from_4_1(line: str, expected: str) -> None:
    """``loadBalancerSheddingExcludedNamespaces`` (PIP-380, apache/pulsar#23549, first in 4.1.0): 4.2.4's
    ``selectBroker`` places such a namespace with its RoundRobinBrokerSelector (first call: the first candidate of
    the sorted set, b1), 4.0.7 has no such key and places it with the configured strategy. The kernel applies the
    key only where the line has it (``VersionProfile.shedding_excluded_namespaces``); here a LeastLongTermMessageRate
    that prefers b2 shows the difference."""
    req = _placement_request(line, {"loadBalancerSheddingExcludedNamespaces": ["t/ns"]})
    # b1 busier than b2 now: LeastLongTermMessageRate picks b2, round robin takes the first candidate (b1)
    req["loadData"]["brokers"]["b1:8080"]["timeAverageData"]["longTermMsgRateIn"] = 90000.0
    req["config"]["loadBalancerDistributeBundlesEvenlyEnabled"] = False
    with _oracle_or_skip(line) as oracle:
        java = oracle.ask({**req, "sequence": None})
    kernel, _ = kernel_answer(req, None)
    assert java["assign"][0]["broker"] == expected
    assert compare("PlacementPipeline", java, kernel) == []


@pytest.mark.parametrize(("line", "issued"), [("2.10", True), ("2.11", False), ("4.0", False)])
def test_unload_checks_namespace_policies_from_2_11(line: str, issued: bool) -> None:
    """``ModularLoadManagerImpl.doLoadShedding`` skips a planned bundle when no broker other than its owner passes
    the namespace isolation policies (``shouldNamespacePoliciesUnload``, apache/pulsar#16476, first in 2.11.0);
    2.10.5 unloads it (no destination). b1 is overloaded (OverloadShedder plans one of its ``t/ns`` bundles) and
    an isolation policy keeps ``t/ns`` on b1 only."""
    req = _placement_request(line, {"loadBalancerLoadSheddingStrategy": IMPL + "OverloadShedder",
                                    "loadBalancerBrokerOverloadedThresholdPercentage": 85})
    req["loadData"]["brokers"]["b1:8080"]["localData"]["cpu"]["usage"] = 95.0
    req["isolationPolicies"] = {"p": {"namespaces": ["t/ns"], "primary": ["b1"], "secondary": [],
                                      "auto_failover_policy": {"policy_type": "min_available",
                                                               "parameters": {"min_limit": "1",
                                                                              "usage_threshold": "100"}}}}
    req["actions"] = ["doLoadShedding"]
    with _oracle_or_skip(line) as oracle:
        java = oracle.ask({**req, "sequence": None})
    kernel, _ = kernel_answer(req, None)
    assert [u["broker"] for u in java["unload"]] == (["b1:8080"] if issued else [])
    assert compare("LoadSheddingDestination", java, kernel) == []
    # without the policy the bundle is unloaded on every line (3.0+: to b2, the only other broker)
    del req["isolationPolicies"]
    with _oracle_or_skip(line) as oracle:
        java = oracle.ask({**req, "sequence": None})
    kernel, _ = kernel_answer(req, None)
    assert [u["broker"] for u in java["unload"]] == ["b1:8080"]
    assert java["unload"][0]["destination"] == (None if line.startswith("2.") else "b2:8080")
    assert compare("LoadSheddingDestination", java, kernel) == []
