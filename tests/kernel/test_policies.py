"""Namespace isolation, anti-affinity and failure-domain policies (lbreplay.kernel.policies)."""

from __future__ import annotations

import numpy as np
import pytest

from lbreplay.errors import InvalidInputError
from lbreplay.kernel.policies import IsolationPolicy, NamespacePolicies, broker_host
from tests.kernel.placement_fixtures import Br, World, ids_of, mask


def _iso(primary: str, secondary: str, min_limit: object, ns: str = "my-property/my-ns.*") -> dict:
    return {
        "namespaces": [ns],
        "primary": [primary],
        "secondary": [secondary],
        "auto_failover_policy": {"policy_type": "min_available", "parameters": {"min_limit": min_limit, "usage_threshold": 80}},
    }


def test_broker_host_strips_port_only() -> None:
    """LoadManagerShared.applyNamespacePolicies: ``new URL("http://" + broker).getHost()``; DESIGN.md §5: an id
    without ``:port`` is its own host."""
    assert broker_host("broker-1:8080") == "broker-1"
    assert broker_host("broker-1") == "broker-1"
    assert broker_host("10.0.0.7:8080") == "10.0.0.7"
    assert broker_host("[::1]:8080") == "[::1]"


def test_from_json_design_example_parses_string_parameters() -> None:
    """DESIGN.md §5 request shapes: failover parameters are strings (MinAvailablePolicy uses Integer.parseInt)."""
    pol = NamespacePolicies.from_json(
        {
            "policy-1": {
                "namespaces": ["tenant/ns.*"],
                "primary": ["broker-1.*"],
                "secondary": ["broker-2.*"],
                "auto_failover_policy": {"policy_type": "min_available", "parameters": {"min_limit": "1", "usage_threshold": "80"}},
            }
        },
        {"domain-a": {"brokers": ["broker-1:8080"]}},
        {"tenant/ns": {"policies": {"namespaceAntiAffinityGroup": "group-a"}}, "tenant/other": {"policies": {}}},
        failure_domains_enabled=True,
        shedding_excluded_namespaces=["pulsar/system"],
    )
    (p,) = pol.isolation
    assert (p.name, p.min_limit, p.usage_threshold) == ("policy-1", 1, 80)
    assert p.primary == ("broker-1.*",) and p.secondary == ("broker-2.*",)
    assert pol.anti_affinity_groups == {"tenant/ns": "group-a"}
    assert pol.broker_to_domain() == {"broker-1:8080": "domain-a"}
    assert pol.is_shedding_excluded("pulsar/system") and not pol.is_shedding_excluded("tenant/ns")
    assert pol.has_isolation_or_anti_affinity("tenant/ns")
    assert pol.has_isolation_or_anti_affinity("tenant/ns-iso")  # matches the isolation regex only
    assert not pol.has_isolation_or_anti_affinity("other/ns")
    assert IsolationPolicy.from_json("policy-1", p.to_json()) == p


def test_failure_domains_ignored_unless_enabled() -> None:
    """LoadManagerShared.refreshBrokerToFailureDomainMap returns early unless failureDomainsEnabled."""
    pol = NamespacePolicies.from_json(None, {"d": {"brokers": ["b:1"]}}, None)
    assert pol.broker_to_domain() == {}


@pytest.mark.parametrize(
    "doc, fragment",
    [
        ({"namespaces": ["a/b"], "primary": [], "auto_failover_policy": {"parameters": {"min_limit": "1", "usage_threshold": "80"}}}, "primary"),
        ({"namespaces": ["a/b"], "primary": ["("], "auto_failover_policy": {"parameters": {"min_limit": "1", "usage_threshold": "80"}}}, "invalid regex"),
        ({"namespaces": ["a/b"], "primary": ["x"], "auto_failover_policy": {"parameters": {"min_limit": "one", "usage_threshold": "80"}}}, "min_limit"),
        ({"namespaces": ["a/b"], "primary": ["x"]}, "auto_failover_policy"),
        ({"namespaces": ["a/b"], "primary": ["x"], "auto_failover_policy": {"policy_type": "other", "parameters": {}}}, "policy_type"),
    ],
)
def test_from_json_rejects_what_pulsar_validate_rejects(doc: dict, fragment: str) -> None:
    """NamespaceIsolationDataImpl.validate / MinAvailablePolicy(AutoFailoverPolicyData): exit-3 errors naming the field."""
    with pytest.raises(InvalidInputError, match=fragment):
        NamespacePolicies.from_json({"p": doc})


def _three_brokers(broker1: str = "localhost0:8080", broker2: str = "localhost1:8080") -> World:
    return World(brokers={broker1: Br(), broker2: Br(), "broker3:8080": Br()})


@pytest.mark.parametrize(
    "min_limit, available, expected",
    [
        (1, ["broker3:8080", "localhost0:8080", "localhost1:8080"], {"localhost0:8080"}),
        (1, ["broker3:8080", "localhost1:8080"], {"localhost1:8080"}),
        (1, ["broker3:8080"], set()),
        (2, ["broker3:8080", "localhost0:8080", "localhost1:8080"], {"localhost0:8080", "localhost1:8080"}),
        (2, ["broker3:8080", "localhost1:8080"], {"localhost1:8080"}),
        (2, ["broker3:8080"], set()),
    ],
)
def test_isolation_primary_and_secondary(min_limit: int, available: list[str], expected: set[str]) -> None:
    """ModularLoadManagerImplTest#testNamespaceIsolationPoliciesForPrimaryAndSecondaryBrokers: primary=broker1,
    secondary=broker2, shared=broker3; secondaries join when #primaries < min_limit; the shared broker never does.
    The regexes name hosts without port, so matching must strip ``:8080``."""
    ld = _three_brokers().build()
    pol = NamespacePolicies.from_json({"my-ns-isolation-policies": _iso("localhost0", "localhost1", min_limit)})
    got = pol.apply_namespace_policies("my-property/my-ns", ld.brokers, mask(ld, *available))
    assert ids_of(ld, got) == expected


def test_broker_regex_matches_whole_host() -> None:
    """NamespaceIsolationPolicyImpl.matchesBrokerRegex uses String.matches (whole string): ``broker-1`` does not
    match host ``broker-10``, and shared brokers exclude every policy's primaries."""
    ld = World(brokers={"broker-1:8080": Br(), "broker-10:8080": Br(), "broker-2:8080": Br()}).build()
    pol = NamespacePolicies.from_json({"p": _iso("broker-1", "nomatch", "1", ns="iso/.*")})
    everyone = np.ones(3, dtype=bool)
    assert ids_of(ld, pol.apply_namespace_policies("iso/ns", ld.brokers, everyone)) == {"broker-1:8080"}
    # Uncontrolled namespace: shared brokers only (broker-1 is some policy's primary).
    assert ids_of(ld, pol.apply_namespace_policies("free/ns", ld.brokers, everyone)) == {"broker-10:8080", "broker-2:8080"}


def test_no_policy_uses_topic_domain_predicate() -> None:
    """applyNamespacePolicies without isolation: brokers must enable the bundle's topic domain
    (BrokerTopicLoadingPredicate on persistentTopicsEnabled / nonPersistentTopicsEnabled)."""
    ld = World(brokers={"a:1": Br(persistent=False), "b:1": Br(non_persistent=False), "c:1": Br()}).build()
    pol = NamespacePolicies()
    everyone = np.ones(3, dtype=bool)
    assert ids_of(ld, pol.apply_namespace_policies("t/n", ld.brokers, everyone)) == {"b:1", "c:1"}
    assert ids_of(ld, pol.apply_namespace_policies("t/n", ld.brokers, everyone, non_persistent=True)) == {"a:1", "c:1"}
    assert ids_of(ld, pol.apply_namespace_policies("t/n", ld.brokers, mask(ld, "a:1", "b:1"))) == {"b:1"}


def test_first_matching_policy_by_name_wins() -> None:
    """NamespaceIsolationPolicies.getPolicyByNamespace returns the first match of a HashMap; lbreplay visits
    policy names in sorted order."""
    pol = NamespacePolicies.from_json({"z-policy": _iso("zz", "", "1", ns="t/.*"), "a-policy": _iso("aa", "", "1", ns="t/n")})
    assert pol.policy_for("t/n").name == "a-policy"
    assert pol.policy_for("t/m").name == "z-policy"


def test_should_namespace_policies_unload() -> None:
    """ModularLoadManagerImplTest#testLoadSheddingWithNamespaceIsolationPolicies: two brokers on host
    ``localhost`` (different ports). No policy -> another broker can take it; a policy naming an absent host ->
    nobody else; a policy naming ``localhost`` -> the other broker on that host can."""
    ld = World(brokers={"localhost:8080": Br(), "localhost:8081": Br()}).build()
    avail = np.ones(2, dtype=bool)
    owner = ld.brokers.index("localhost:8080")
    ns = "my-tenant/my-ns"
    assert NamespacePolicies().should_namespace_policies_unload(ns, owner, ld.brokers, avail)
    absent = NamespacePolicies.from_json({"p": _iso("localhost1", "localhost1", 1, ns="my-tenant/my-ns.*")})
    assert not absent.should_namespace_policies_unload(ns, ld.brokers.index("localhost1:8080"), ld.brokers, avail)
    same_host = NamespacePolicies.from_json({"p": _iso("localhost", "localhost", 1, ns="my-tenant/my-ns.*")})
    assert same_host.should_namespace_policies_unload(ns, owner, ld.brokers, avail)
    only_one = NamespacePolicies.from_json({"p": _iso("localhost", "x", 1, ns="my-tenant/my-ns.*")})
    assert not only_one.should_namespace_policies_unload(ns, owner, ld.brokers, mask(ld, "localhost:8080"))


def _group(n: int, prefix: str = "my-tenant/use/my-ns", group: str = "my-antiaffinity") -> dict:
    return {f"{prefix}{i}": {"policies": {"namespaceAntiAffinityGroup": group}} for i in range(n)}


def test_anti_affinity_filtering_with_domain() -> None:
    """AntiAffinityNamespaceGroupTest#testAntiAffinityNamespaceFilteringWithDomain: domains d0={b0,b1},
    d1={b2,b3}; ns0->b0, then ns1 only on d1, ns2 on {b1,b3}, ns3 on {b3}, ns4 on all four."""
    brokers = [f"brokerName-{i}" for i in range(4)]
    ld = World(brokers={b: Br() for b in brokers}).build()
    pol = NamespacePolicies.from_json(
        None,
        {"domain-0": {"brokers": brokers[:2]}, "domain-1": {"brokers": brokers[2:]}},
        _group(5),
        failure_domains_enabled=True,
    )
    ranges: dict[str, dict[str, set[str]]] = {}
    everyone = np.ones(4, dtype=bool)

    def cands(i: int) -> set[str]:
        return ids_of(ld, pol.filter_anti_affinity_group_owned_brokers(f"my-tenant/use/my-ns{i}", ld.brokers, everyone, ranges))

    assert cands(0) == set(brokers)
    ranges["brokerName-0"] = {"my-tenant/use/my-ns0": {"0x00000000_0xffffffff"}}
    assert cands(1) == {"brokerName-2", "brokerName-3"}
    ranges["brokerName-2"] = {"my-tenant/use/my-ns1": {"0x00000000_0xffffffff"}}
    assert cands(2) == {"brokerName-1", "brokerName-3"}
    ranges["brokerName-1"] = {"my-tenant/use/my-ns2": {"0x00000000_0xffffffff"}}
    assert cands(3) == {"brokerName-3"}
    ranges["brokerName-3"] = {"my-tenant/use/my-ns3": {"0x00000000_0xffffffff"}}
    assert cands(4) == set(brokers)


def test_anti_affinity_filtering_without_domain() -> None:
    """AntiAffinityNamespaceGroupTest#testAntiAffinityNamespaceFilteringWithoutDomain (b0, b1, b2)."""
    brokers = ["broker-0", "broker-1", "broker-2"]
    ld = World(brokers={b: Br() for b in brokers}).build()
    pol = NamespacePolicies.from_json(None, None, _group(5))
    ranges: dict[str, dict[str, set[str]]] = {}
    everyone = np.ones(3, dtype=bool)

    def cands(i: int) -> set[str]:
        return ids_of(ld, pol.filter_anti_affinity_group_owned_brokers(f"my-tenant/use/my-ns{i}", ld.brokers, everyone, ranges))

    assert cands(0) == set(brokers)
    ranges["broker-0"] = {"my-tenant/use/my-ns0": {"r"}}
    assert cands(1) == {"broker-1", "broker-2"}
    ranges["broker-1"] = {"my-tenant/use/my-ns1": {"r"}}
    assert cands(2) == {"broker-2"}
    ranges["broker-2"] = {"my-tenant/use/my-ns2": {"r"}}
    assert cands(3) == set(brokers)


def test_anti_affinity_ignores_other_groups_and_empty_ranges_and_is_case_insensitive() -> None:
    """getAntiAffinityNamespaceOwnedBrokers: a namespace counts only with a non-empty range set and a group equal
    ignoring case; a namespace without a group is never filtered."""
    ld = World(brokers={"a": Br(), "b": Br()}).build()
    ns_doc = {
        "t/x": {"policies": {"namespaceAntiAffinityGroup": "Group"}},
        "t/y": {"policies": {"namespaceAntiAffinityGroup": "group"}},
        "t/z": {"policies": {"namespaceAntiAffinityGroup": "other"}},
    }
    pol = NamespacePolicies.from_json(None, None, ns_doc)
    everyone = np.ones(2, dtype=bool)
    assert ids_of(ld, pol.filter_anti_affinity_group_owned_brokers("t/x", ld.brokers, everyone, {"a": {"t/y": {"r"}}})) == {"b"}
    assert ids_of(ld, pol.filter_anti_affinity_group_owned_brokers("t/x", ld.brokers, everyone, {"a": {"t/y": set()}})) == {"a", "b"}
    assert ids_of(ld, pol.filter_anti_affinity_group_owned_brokers("t/x", ld.brokers, everyone, {"a": {"t/z": {"r"}}})) == {"a", "b"}
    assert ids_of(ld, pol.filter_anti_affinity_group_owned_brokers("t/free", ld.brokers, everyone, {"a": {"t/y": {"r"}}})) == {"a", "b"}


def test_should_anti_affinity_namespace_unload() -> None:
    """AntiAffinityNamespaceGroupTest#testLoadSheddingUtilWithAntiAffinityNamespace: b0 owns ns0 -> can unload;
    b1 owns ns1 -> still (b2 owns none); b2 owns ns2 -> every broker owns one: refuse."""
    ld = World(brokers={f"broker-{i}": Br() for i in range(3)}).build()
    pol = NamespacePolicies.from_json(None, None, _group(5))
    avail = np.ones(3, dtype=bool)
    ns0 = "my-tenant/use/my-ns0"
    ranges: dict[str, dict[str, set[str]]] = {"broker-0": {ns0: {"r"}}}
    cur = ld.brokers.index("broker-0")
    assert pol.should_anti_affinity_namespace_unload(ns0, cur, ld.brokers, avail, ranges)
    ranges["broker-1"] = {"my-tenant/use/my-ns1": {"r"}}
    assert pol.should_anti_affinity_namespace_unload(ns0, cur, ld.brokers, avail, ranges)
    ranges["broker-2"] = {"my-tenant/use/my-ns2": {"r"}}
    assert not pol.should_anti_affinity_namespace_unload(ns0, cur, ld.brokers, avail, ranges)
    # The owner holding more than the least may always unload.
    ranges["broker-0"]["my-tenant/use/my-ns3"] = {"r"}
    assert pol.should_anti_affinity_namespace_unload(ns0, cur, ld.brokers, avail, ranges)
    # Without a group the check always passes.
    assert NamespacePolicies().should_anti_affinity_namespace_unload(ns0, cur, ld.brokers, avail, ranges)


def test_should_anti_affinity_unload_with_an_idle_second_broker() -> None:
    """AntiAffinityNamespaceGroupTest#testLoadSheddingWithAntiAffinityNamespace: two brokers, the owner holds the
    only group namespace -> the other owns 0 -> unload allowed."""
    ld = World(brokers={"primary:8080": Br(), "secondary:8080": Br()}).build()
    pol = NamespacePolicies.from_json(None, None, _group(5))
    ns0 = "my-tenant/use/my-ns0"
    ranges = {"primary:8080": {ns0: {"0x00000000_0xffffffff"}}}
    assert pol.should_anti_affinity_namespace_unload(ns0, 0, ld.brokers, np.ones(2, dtype=bool), ranges)
