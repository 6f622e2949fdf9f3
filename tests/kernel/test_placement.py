"""Placement pipeline and preallocation bookkeeping (lbreplay.kernel.placement, round_robin_broker_selector)."""

from __future__ import annotations

import numpy as np
import pytest

from lbreplay.kernel.least_long_term_message_rate import LeastLongTermMessageRate
from lbreplay.kernel.placement import (
    LeaderState,
    clear_preallocations,
    reap_dead_broker_preallocations,
    remove_most_servicing_brokers_for_namespace,
    select_broker,
    select_broker_detailed,
    select_broker_for_assignment,
)
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.round_robin_broker_selector import INT_MAX, RoundRobinBrokerSelector
from tests.kernel.placement_fixtures import Br, Bu, World, conf, ids_of, mask

FULL = "0x00000000_0xffffffff"


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_remove_most_servicing_brokers_for_namespace() -> None:
    """LoadManagerSharedTest#testRemoveMostServicingBrokersForNamespace, step by step."""
    ld = World(brokers={"broker1": Br(), "broker2": Br(), "broker3": Br()}).build()
    ids = ld.brokers.ids
    leader = LeaderState()
    bundle = "tenant1/ns1/0x00000000_0x40000000"

    def run(*cands: str) -> set[str]:
        return ids_of(ld, remove_most_servicing_brokers_for_namespace(bundle, ids, mask(ld, *cands), leader))

    assert run() == set()
    assert run("broker1") == {"broker1"}
    leader.add("broker1", "tenant1/ns1/0x40000000_0x80000000")
    assert run("broker1") == {"broker1"}
    assert run("broker1", "broker2") == {"broker2"}
    leader.add("broker2", "tenant1/ns1/0x80000000_0xc0000000")
    assert run("broker1", "broker2") == {"broker1", "broker2"}
    leader.add("broker2", "tenant1/ns1/0xc0000000_0xd0000000")
    assert run("broker1", "broker2") == {"broker1"}
    leader.add("broker3", "tenant1/ns1/0xd0000000_0xffffffff")
    assert run("broker1", "broker2", "broker3") == {"broker1", "broker3"}


def test_round_robin_broker_selector() -> None:
    """ModularLoadManagerStrategyTest#testRoundRobinBrokerSelector (candidate lists in the test's insertion order)."""
    s = RoundRobinBrokerSelector()
    assert s.select_ids([]) is None
    brokers = ["1", "2", "3"]
    i = 0
    for i in range(10):
        assert s.select_ids(brokers) == str(i % 3 + 1)
    for i in range(10, 20):
        assert s.select_ids(["2", "3", "1"]) == str(i % 3 + 1)  # same size, all cached: cache order kept
    assert [s.select_ids(["1", "2", "4"]) for _ in range(6)] == ["4", "1", "2", "4", "1", "2"]
    assert [s.select_ids(["2", "4"]) for _ in range(4)] == ["2", "4", "2", "4"]
    s.count = INT_MAX
    assert s.select_ids(brokers) == str(INT_MAX % 3 + 1)
    assert s.count == 0
    s2 = RoundRobinBrokerSelector()
    s2.set_state(s.get_state())
    assert s2.get_state() == {"count": 0, "cache": ["1", "2", "3"]}


def _lltmr_world() -> World:
    return World(brokers={"a:8080": Br(long_rate_in=100), "b:8080": Br(long_rate_in=110), "c:8080": Br(long_rate_in=120)})


def test_max_topic_distribution_to_broker() -> None:
    """ModularLoadManagerImplTest#testMaxTopicDistributionToBroker: once a bundle carrying more than
    loadBalancerBrokerMaxTopics topics is preallocated to a broker, no later bundle goes there."""
    w = World(brokers={"a:8080": Br(long_rate_in=0), "b:8080": Br(long_rate_in=0)})
    first = "test/test/0x00000000_0x08000000"
    w.bundles[first] = Bu(long_rate=(1000, 0), topics=50010)
    ld = w.build()
    leader, pol, c = LeaderState.from_load_data(ld), NamespacePolicies(), conf()
    s = LeastLongTermMessageRate()
    owner = select_broker_for_assignment(first, ld, c, s, leader, pol, _rng())
    others = {
        select_broker_for_assignment(f"test/test/0x{(i << 27):08x}_0x{((i + 1) << 27):08x}", ld, c, s, leader, pol, _rng(i))
        for i in range(1, 31)
    }
    assert owner not in others and len(others) == 1


def test_even_spread_per_namespace_dominates_message_rate() -> None:
    """removeMostServicingBrokersForNamespace (loadBalancerDistributeBundlesEvenlyEnabled, default true) spreads
    one namespace's bundles evenly even when message rates say otherwise (ModularLoadManagerImplTest
    #testEvenBundleDistribution); disabled, LLTMR with preallocation decides alone."""
    ld = World(brokers={"a:8080": Br(long_rate_in=0), "b:8080": Br(long_rate_in=10_000)}).build()
    leader, pol, s = LeaderState.from_load_data(ld), NamespacePolicies(), LeastLongTermMessageRate()
    got = [
        select_broker_for_assignment(f"test/test/0x{(i << 28):08x}_0x{((i + 1) << 28) - (i == 15):08x}", ld, conf(), s, leader, pol, _rng(i))
        for i in range(16)
    ]
    assert got.count("a:8080") == 8 and got.count("b:8080") == 8
    ld = World(brokers={"a:8080": Br(long_rate_in=0), "b:8080": Br(long_rate_in=10_000)}).build()
    leader = LeaderState.from_load_data(ld)
    c = conf(loadBalancerDistributeBundlesEvenlyEnabled=False)
    got = [select_broker_for_assignment(f"test/test/0x{(i << 28):08x}_0x{((i + 1) << 28):08x}", ld, c, s, leader, pol, _rng(i)) for i in range(15)]
    assert got == ["a:8080"] * 15  # 15 default bundles x 100 msg/s < 10000


@pytest.mark.parametrize(("line", "spread"), [("4.0", True), ("3.0", True), ("2.11", False)])
def test_even_spread_for_system_namespace_from_3_0(line: str, spread: bool) -> None:
    """selectBroker applies the even spread to ``pulsar/system`` even when the flag is off (3.0+; 2.11.0's
    selectBroker has no such test: the least loaded broker takes them all)."""
    ld = World(brokers={"a:8080": Br(long_rate_in=0), "b:8080": Br(long_rate_in=10_000)}).build()
    leader, s = LeaderState.from_load_data(ld), LeastLongTermMessageRate()
    c = conf(loadBalancerDistributeBundlesEvenlyEnabled=False, pulsarVersion=line)
    got = [select_broker_for_assignment(f"pulsar/system/0x{(i << 28):08x}_0x{((i + 1) << 28):08x}", ld, c, s,
                                        leader, NamespacePolicies(), _rng(i)) for i in range(4)]
    assert sorted(got) == (["a:8080", "a:8080", "b:8080", "b:8080"] if spread else ["a:8080"] * 4)


def test_version_filter_prefers_latest_and_resets_on_bad_version() -> None:
    """BrokerVersionFilter with preferLaterVersions: only the newest semver survives (even against a better
    score); a missing version raises BrokerFilterBadVersionException and selectBroker resets to the policy set."""
    w = World(
        brokers={
            "a:8080": Br(long_rate_in=1, version="3.0.0"),
            "b:8080": Br(long_rate_in=2, version="3.3.1"),
            "c:8080": Br(long_rate_in=3, version="3.3.1-SNAPSHOT"),
        }
    )
    ld = w.build()
    c = conf(preferLaterVersions=True)
    bundle = f"t/n/{FULL}"
    assert select_broker(bundle, ld, c, LeastLongTermMessageRate(), LeaderState(), NamespacePolicies(), _rng()) == "b:8080"
    assert select_broker(bundle, ld, conf(), LeastLongTermMessageRate(), LeaderState(), NamespacePolicies(), _rng()) == "a:8080"
    ld.brokers.broker_version[2] = "3.3"  # not semver -> filter error -> reset
    assert select_broker(bundle, ld, c, LeastLongTermMessageRate(), LeaderState(), NamespacePolicies(), _rng()) == "a:8080"


def test_load_manager_class_filter() -> None:
    """BrokerLoadManagerClassFilter (3.x+): brokers whose loadManagerClassName differs (or is absent, Objects.equals)
    are removed; if that empties the set, selectBroker resets to the policy set. The 2.x pipeline has no such filter."""
    w = World(brokers={"old:8080": Br(long_rate_in=1, lm_class=None), "new:8080": Br(long_rate_in=50)})
    ld = w.build()
    bundle = f"t/n/{FULL}"
    assert select_broker(bundle, ld, conf(), LeastLongTermMessageRate(), LeaderState(), NamespacePolicies(), _rng()) == "new:8080"
    assert select_broker(bundle, ld, conf(pulsarVersion="2.10"), LeastLongTermMessageRate(), LeaderState(), NamespacePolicies(), _rng()) == "old:8080"
    ld.brokers.load_manager_class_name[ld.brokers.index("new:8080")] = "x.Other"
    assert select_broker(bundle, ld, conf(), LeastLongTermMessageRate(), LeaderState(), NamespacePolicies(), _rng()) == "old:8080"


def test_overload_recheck_uses_policy_set() -> None:
    """selectBroker: if the pick is overloaded (weighted max > 85%), the strategy runs again over the candidates
    of the namespace policies only, dropping the even-spread filter that forced the overloaded broker."""
    w = World(
        brokers={"hot:8080": Br(usage=95.0, long_rate_in=0), "cool:8080": Br(long_rate_in=500)},
        bundles={f"t/n/0x00000000_0x80000000": Bu(owner="cool:8080", long_rate=(1, 1))},
    )
    ld = w.build()
    leader = LeaderState.from_load_data(ld)
    res = select_broker_detailed("t/n/0x80000000_0xffffffff", ld, conf(), LeastLongTermMessageRate(), leader, NamespacePolicies(), _rng())
    assert res.overload_recheck and res.candidates == 1 and res.broker == "cool:8080"


def test_shedding_excluded_namespace_uses_round_robin() -> None:
    """PIP-380: bundles of loadBalancerSheddingExcludedNamespaces are placed by RoundRobinBrokerSelector over the
    filtered candidates in brokerCandidateCache's order (a HashSet: "b:1", "a:1", "c:1", bins 8, 9, 11 of 16),
    ignoring load."""
    ld = World(brokers={"a:1": Br(long_rate_in=0), "b:1": Br(long_rate_in=9e9), "c:1": Br(long_rate_in=9e9)}).build()
    pol = NamespacePolicies(shedding_excluded_namespaces=frozenset({"ex/ns"}))
    leader = LeaderState.from_load_data(ld)
    c = conf(loadBalancerDistributeBundlesEvenlyEnabled=False)
    got = [select_broker(f"ex/ns/0x{i:08x}_0x{i + 1:08x}", ld, c, LeastLongTermMessageRate(), leader, pol, _rng()) for i in range(4)]
    assert got == ["b:1", "a:1", "c:1", "b:1"]
    assert leader.round_robin.get_state()["count"] == 4


def test_isolation_and_anti_affinity_in_pipeline() -> None:
    """applyNamespacePolicies keeps an isolated namespace on its primary broker even when another broker scores
    better; AntiAffinityNamespaceGroupTest#testBrokerSelectionForAntiAffinityGroup: two namespaces of one group,
    brokers in two failure domains, end up on different brokers."""
    ld = World(brokers={"iso-1:8080": Br(long_rate_in=900), "free-1:8080": Br(long_rate_in=0)}).build()
    pol = NamespacePolicies.from_json(
        {"p": {"namespaces": ["t/iso.*"], "primary": ["iso-.*"], "secondary": [], "auto_failover_policy": {"parameters": {"min_limit": "1", "usage_threshold": "80"}}}},
        {"domain1": {"brokers": ["iso-1:8080"]}, "domain2": {"brokers": ["free-1:8080"]}},
        {"t/ns1": {"policies": {"namespaceAntiAffinityGroup": "group"}}, "t/ns2": {"policies": {"namespaceAntiAffinityGroup": "group"}}},
        failure_domains_enabled=True,
    )
    leader, s, c = LeaderState.from_load_data(ld), LeastLongTermMessageRate(), conf()
    assert select_broker_for_assignment(f"t/iso/{FULL}", ld, c, s, leader, pol, _rng()) == "iso-1:8080"
    # Uncontrolled namespaces may only use shared brokers: iso-1 is a primary, so never chosen here.
    first = select_broker_for_assignment(f"t/ns1/{FULL}", ld, c, s, leader, pol, _rng())
    assert first == "free-1:8080"
    pol2 = NamespacePolicies.from_json(None, {"d1": {"brokers": ["iso-1:8080"]}, "d2": {"brokers": ["free-1:8080"]}},
                                       {"t/ns1": {"policies": {"namespaceAntiAffinityGroup": "group"}}, "t/ns2": {"policies": {"namespaceAntiAffinityGroup": "group"}}},
                                       failure_domains_enabled=True)
    ld = World(brokers={"iso-1:8080": Br(long_rate_in=900), "free-1:8080": Br(long_rate_in=0)}).build()
    leader = LeaderState.from_load_data(ld)
    b1 = select_broker_for_assignment(f"t/ns1/{FULL}", ld, c, s, leader, pol2, _rng())
    b2 = select_broker_for_assignment(f"t/ns2/{FULL}", ld, c, s, leader, pol2, _rng())
    assert (b1, b2) == ("free-1:8080", "iso-1:8080")


def test_select_broker_for_assignment_caches_and_preallocates() -> None:
    """selectBrokerForAssignment returns preallocatedBundleToBroker's entry while it lasts; preallocateBundle
    inserts default BundleData (computeIfAbsent), fills preallocatedBundleData and brokerToNamespaceToBundleRange;
    plain selectBroker (used by shedding) preallocates nothing."""
    ld = _lltmr_world().build()
    leader, pol, s, c = LeaderState.from_load_data(ld), NamespacePolicies(), LeastLongTermMessageRate(), conf()
    bundle = f"new/ns/{FULL}"
    assert select_broker(bundle, ld, c, s, leader, pol, _rng()) == "a:8080"
    assert ld.preallocated_bundle_to_broker == {} and (ld.bundles.preallocated_to < 0).all()
    row = ld.bundles.index(bundle)
    assert row >= 0 and ld.bundles.has_bundle_data[row] and ld.bundles.long_samples[row] == 0
    assert select_broker_for_assignment(bundle, ld, c, s, leader, pol, _rng()) == "a:8080"
    assert ld.preallocated_bundle_to_broker == {bundle: "a:8080"}
    assert ld.bundles.preallocated_to[ld.bundles.index(bundle)] == ld.brokers.index("a:8080")
    assert leader.bundle_ranges["a:8080"] == {"new/ns": {FULL}}
    ld.tabd[1][0, 2] = 1e9  # a:8080 now looks terrible, but the cached decision stands
    assert select_broker_for_assignment(bundle, ld, c, s, leader, pol, _rng()) == "a:8080"


def test_clear_preallocations_and_reap() -> None:
    """updateBundleData clean-up: preallocatedBundleToBroker drops every preallocated bundle; preallocatedBundleData
    keeps a bundle until its broker reports it (older rule), or, with the leader's owned set ([M]), also drops
    bundles the leader does not own. reapDeadBrokerPreallocations forgets entries of dead brokers."""
    ld = _lltmr_world().build()
    leader, pol, s, c = LeaderState.from_load_data(ld), NamespacePolicies(), LeastLongTermMessageRate(), conf()
    x, y = f"x/ns/{FULL}", f"y/ns/{FULL}"
    select_broker_for_assignment(x, ld, c, s, leader, pol, _rng())
    select_broker_for_assignment(y, ld, c, s, leader, pol, _rng())
    bx, by = ld.preallocated_bundle_to_broker[x], ld.preallocated_bundle_to_broker[y]
    ld.bundles.owner[ld.bundles.index(x)] = ld.brokers.index(bx)  # bx reports x now
    saved = ld.bundles.preallocated_to.copy()
    clear_preallocations(ld)
    assert ld.preallocated_bundle_to_broker == {}
    assert ld.bundles.preallocated_to[ld.bundles.index(x)] == -1
    assert ld.bundles.preallocated_to[ld.bundles.index(y)] == ld.brokers.index(by)
    leader.reload(ld)
    assert leader.bundle_ranges[by] == {"y/ns": {FULL}} and leader.bundle_ranges[bx] == {"x/ns": {FULL}}
    ld.bundles.preallocated_to[:] = saved
    clear_preallocations(ld, leader_owned={x})
    assert (ld.bundles.preallocated_to < 0).all()
    ld.preallocated_bundle_to_broker.update({x: "a:8080", y: "gone:8080"})
    reap_dead_broker_preallocations(ld, ["a:8080", "b:8080", "c:8080"])
    assert ld.preallocated_bundle_to_broker == {x: "a:8080"}


def test_leader_state_roundtrip_restores_preallocations() -> None:
    """LeaderState.get_state/set_state thread brokerToNamespaceToBundleRange, the round-robin counter and the
    preallocations into a fresh LoadData (as ``decide`` rebuilds it per call), so LLTMR keeps seeing them."""
    ld = _lltmr_world().build()
    leader, s = LeaderState.from_load_data(ld), LeastLongTermMessageRate()
    c = conf(loadBalancerDistributeBundlesEvenlyEnabled=False)
    assert select_broker_for_assignment(f"n/a/{FULL}", ld, c, s, leader, NamespacePolicies(), _rng()) == "a:8080"
    state = leader.get_state(ld)
    ld2 = _lltmr_world().build()
    leader2 = LeaderState()
    leader2.set_state(state, ld2)
    assert leader2.bundle_ranges == leader.bundle_ranges
    assert ld2.preallocated_bundle_to_broker == {f"n/a/{FULL}": "a:8080"}
    # a:8080 = 100 + 100 (default preallocated bundle) > b:8080 = 110
    assert select_broker_for_assignment(f"n/b/{FULL}", ld2, c, s, leader2, NamespacePolicies(), _rng()) == "b:8080"


def test_unavailable_brokers_are_not_candidates() -> None:
    """getAvailableBrokers(): only live brokers are candidates."""
    ld = _lltmr_world().build()
    got = select_broker(f"t/n/{FULL}", ld, conf(), LeastLongTermMessageRate(), LeaderState(), NamespacePolicies(), _rng(),
                        available=mask(ld, "b:8080", "c:8080"))
    assert got == "b:8080"


@pytest.mark.parametrize("version", ["4.x", "2.9"])
def test_no_available_broker_returns_none(version: str) -> None:
    ld = _lltmr_world().build()
    got = select_broker(f"t/n/{FULL}", ld, conf(pulsarVersion=version), LeastLongTermMessageRate(), LeaderState(),
                        NamespacePolicies(), _rng(), available=np.zeros(3, dtype=bool))
    assert got is None


def test_unknown_bundle_gets_a_sorted_row_with_default_bundle_data() -> None:
    """selectBroker's ``bundleData.computeIfAbsent(bundle, getBundleDataOrDefault)``: a bundle the leader never saw
    gets a row (rows stay sorted by name, existing rows keep their data) with default BundleData."""
    w = World(
        brokers={"a:8080": Br(), "b:8080": Br()},
        bundles={f"a/ns/{FULL}": Bu(owner="a:8080", long_rate=(1, 2)), f"z/ns/{FULL}": Bu(owner="b:8080", long_rate=(3, 4))},
    )
    ld = w.build()
    select_broker_for_assignment(f"m/ns/{FULL}", ld, conf(), LeastLongTermMessageRate(), LeaderState.from_load_data(ld),
                                 NamespacePolicies(), _rng())
    b = ld.bundles
    assert b.names == [f"a/ns/{FULL}", f"m/ns/{FULL}", f"z/ns/{FULL}"]
    assert b.namespaces == ["a/ns", "m/ns", "z/ns"]
    assert list(b.owner) == [0, -1, 1] and list(b.long[:, 2]) == [1.0, 50.0, 3.0]
    assert list(b.has_bundle_data) == [True, True, True] and b.long_samples[1] == 0
