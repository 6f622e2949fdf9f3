"""Extensible broker filters (PULSAR-LB-SPEC §7.4): ported from Pulsar's BrokerMaxTopicCountFilterTest,
BrokerVersionFilterTest and BrokerLoadManagerClassFilterTest (extensions.filter), plus the pipeline's error rules
(ExtensibleLoadManagerImpl.selectAsync: reset to the last good set; TransferShedder.isTransferable: fail)."""

from __future__ import annotations

import numpy as np
import pytest

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.broker_filters import (
    POLICY_FILTERS,
    BrokerFilterError,
    anti_affinity_counts,
    anti_affinity_group_policy_filter,
    compare_semver,
    compare_semver_build_aware,
    filter_brokers,
    isolation_policies_filter,
    load_manager_class_filter,
    max_topic_count_filter,
    parse_semver,
    version_filter,
)
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.verify.cases import BAD_VERSIONS, VERSION_POOLS

EXT = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
MOD = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
CONF = PulsarConfig.resolve({})


def _names(ctx: ExtensibleContext, mask: np.ndarray) -> list[str]:
    return [b for b, m in zip(ctx.broker_ids, mask) if m]


def test_max_topic_count_filter() -> None:
    """BrokerMaxTopicCountFilterTest#test: topics == max and 2 x max are dropped; a broker with 0 topics and one
    without load data (counts as 0) stay."""
    conf = PulsarConfig.resolve({})
    mx = conf["loadBalancerBrokerMaxTopics"]
    ctx = ExtensibleContext.build(0, {"broker1": {"topics": mx}, "broker2": {}, "broker3": {"topics": 2 * mx}},
                                  available=["broker1", "broker2", "broker3", "broker4"])
    assert _names(ctx, max_topic_count_filter(ctx, conf, "a/b/0x0_0x1", ctx.available.copy())) == ["broker2", "broker4"]


def _lookup(versions: dict[str, str | None], cls: str | None = EXT) -> dict[str, dict[str, str | None]]:
    return {b: {"brokerVersion": v, "loadManagerClassName": cls} for b, v in versions.items()}


def test_version_filter() -> None:
    """BrokerVersionFilterTest#testFilter: keep the newest version; 2.10.1-SNAPSHOT < 2.10.1 < 2.10.2-SNAPSHOT."""
    conf = PulsarConfig.resolve({"preferLaterVersions": True})
    cases = [
        ({"localhost:6650": "2.10.0", "localhost:6651": "2.10.1", "localhost:6652": "2.10.1", "localhost:6653": "2.10.1"},
         ["localhost:6651", "localhost:6652", "localhost:6653"]),
        ({"localhost:6650": "2.10.0", "localhost:6651": "2.10.1-SNAPSHOT", "localhost:6652": "2.10.1",
          "localhost:6653": "2.10.1"}, ["localhost:6652", "localhost:6653"]),
        ({"localhost:6650": "2.10.0", "localhost:6651": "2.10.1-SNAPSHOT", "localhost:6652": "2.10.1",
          "localhost:6653": "2.10.2-SNAPSHOT"}, ["localhost:6653"]),
    ]
    for versions, expected in cases:
        ctx = ExtensibleContext.build(0, available=list(versions), lookup=_lookup(versions))
        assert _names(ctx, version_filter(ctx, conf, "a/b/0x0_0x1", ctx.available.copy())) == expected


def test_version_filter_disabled_and_empty() -> None:
    """BrokerVersionFilterTest#testDisabledFilter / #testFilterEmptyBrokerList: preferLaterVersions=false or no
    brokers -> unchanged."""
    versions = {"localhost:6650": "2.10.0", "localhost:6651": "2.10.1"}
    ctx = ExtensibleContext.build(0, available=list(versions), lookup=_lookup(versions))
    off = PulsarConfig.resolve({"preferLaterVersions": False})
    assert version_filter(ctx, off, "a/b/0x0_0x1", ctx.available.copy()).all()
    on = PulsarConfig.resolve({"preferLaterVersions": True})
    assert not version_filter(ctx, on, "a/b/0x0_0x1", np.zeros(2, dtype=bool)).any()


def test_version_filter_invalid_version() -> None:
    """BrokerVersionFilterTest#testInvalidVersionString: "xxx" -> BrokerFilterBadVersionException."""
    ctx = ExtensibleContext.build(0, available=["localhost:6650"], lookup=_lookup({"localhost:6650": "xxx"}))
    with pytest.raises(BrokerFilterError):
        version_filter(ctx, PulsarConfig.resolve({"preferLaterVersions": True}), "a/b/0x0_0x1", ctx.available.copy())


def test_semver_build_aware_order() -> None:
    """Version.BUILD_AWARE_ORDER: pre-release < release; numeric identifiers compare numerically; a version with
    build metadata ranks above the same version without."""
    assert compare_semver_build_aware(parse_semver("2.10.1-SNAPSHOT"), parse_semver("2.10.1")) < 0
    assert compare_semver_build_aware(parse_semver("1.0.0-alpha.10"), parse_semver("1.0.0-alpha.9")) > 0
    assert compare_semver_build_aware(parse_semver("1.0.0-1"), parse_semver("1.0.0-alpha")) < 0
    assert compare_semver_build_aware(parse_semver("3.1.0+b7"), parse_semver("3.1.0")) > 0
    with pytest.raises(ValueError):
        parse_semver("2.10")


def test_load_manager_class_filter() -> None:
    """BrokerLoadManagerClassFilterTest#test: keep brokers running the configured load manager class; a broker
    without a class name (old version) never matches."""
    ids = ["broker1", "broker2", "broker3", "broker4", "broker5"]
    classes = [EXT, EXT, MOD, MOD, None]
    lookup = {b: {"brokerVersion": "3.0.0", "loadManagerClassName": c} for b, c in zip(ids, classes)}
    ctx = ExtensibleContext.build(0, available=ids, lookup=lookup)
    ext = PulsarConfig.resolve({"loadManagerClassName": EXT})
    assert _names(ctx, load_manager_class_filter(ctx, ext, "a/b/0x0_0x1", ctx.available.copy())) == ["broker1", "broker2"]
    mod = PulsarConfig.resolve({"loadManagerClassName": MOD})
    assert _names(ctx, load_manager_class_filter(ctx, mod, "a/b/0x0_0x1", ctx.available.copy())) == ["broker3", "broker4"]


def test_pipeline_error_handling() -> None:
    """selectAsync keeps what earlier filters agreed on and skips a failing filter (reset to the last good set);
    isTransferable treats a failing filter as "not transferable" (None)."""
    conf = PulsarConfig.resolve({"loadManagerClassName": EXT, "preferLaterVersions": True})
    ids = ["b1", "b2", "b3"]
    lookup = {"b1": {"brokerVersion": "3.0.0", "loadManagerClassName": EXT},
              "b2": {"brokerVersion": "bad", "loadManagerClassName": EXT},
              "b3": {"brokerVersion": "3.0.0", "loadManagerClassName": MOD}}
    ctx = ExtensibleContext.build(0, available=ids, lookup=lookup)
    # class filter drops b3, version filter fails on b2's "bad" version -> reset to {b1, b2}
    assert _names(ctx, filter_brokers(ctx, conf, "a/b/0x0_0x1")) == ["b1", "b2"]  # type: ignore[arg-type]
    assert filter_brokers(ctx, conf, "a/b/0x0_0x1", on_error="fail") is None


def test_semver_identifiers_compare_as_java_semver_0_9_0() -> None:
    """java-semver 0.9.0 (the Version class of every checked line's BrokerVersionFilter),
    ``MetadataVersion.compareIdentifiers``: two identifiers that ``Integer.parseInt`` accepts compare by
    ``parseInt(a) - parseInt(b)`` (an int subtraction, which wraps), any other pair by ``String.compareTo`` -- not
    SemVer 2.0's "numeric identifiers are lower than alphanumeric ones". Checked against the jars by the
    TransferShedder oracle cases (pool 4 of ``VERSION_POOLS``)."""
    v = parse_semver
    assert compare_semver(v("1.0.0-5"), v("1.0.0-0a")) > 0  # text: "5" > "0a" (SemVer 2.0 says lower)
    assert compare_semver(v("1.0.0--1"), v("1.0.0-0a")) < 0  # "-1" parses as the int -1
    assert compare_semver(v("1.0.0--5"), v("1.0.0--3")) < 0  # -5 < -3 (as text "-5" > "-3")
    assert compare_semver(v("1.0.0-2147483647"), v("1.0.0--2")) < 0  # 2147483647 - (-2) wraps negative
    assert compare_semver(v("1.0.0-99999999999"), v("1.0.0-5")) > 0  # beyond int: text, "9..." > "5"
    assert compare_semver(v("1.0.0-rc.10"), v("1.0.0-rc.9")) > 0
    assert compare_semver(v("1.0.0-1"), v("1.0.0-alpha")) < 0
    assert compare_semver(v("1.0.0+b2"), v("1.0.0+b1")) == 0  # Version.equals ignores build metadata
    assert compare_semver_build_aware(v("1.0.0+001"), v("1.0.0+1")) == 0  # "001" parses as 1


@pytest.mark.parametrize("text", ["2147483648.0.0", "1.2147483648.0", "1\u0661.0.0", "4.0.07", "4.0.7-01", "4.0.7-",
                                  "4.0.7+", "4.0.7 ", "v4.0.7", "4.0", "4.0.7-a..b", "4.0.7-a_b"])
def test_semver_invalid_versions(text: str) -> None:
    """``VersionParser``: ASCII digits only, no leading zero in a numeric identifier, no empty identifier, nothing
    after the version; a normal-version number beyond ``Integer.MAX_VALUE`` makes ``Integer.parseInt`` throw
    (BrokerVersionFilter: "Invalid version string", the filter fails)."""
    with pytest.raises(ValueError):
        parse_semver(text)
    assert parse_semver("4.0.7+01").__getitem__(2) == ("01",)  # build identifiers may have leading zeros


def test_version_filter_latest_follows_text_order() -> None:
    """Regression (oracle, TransferShedder on 4.0.7): BrokerVersionFilter.getLatestVersionNumber keeps 1.0.0-5 over
    1.0.0-0a (MetadataVersion.compareIdentifiers compares them as text); the kernel used SemVer 2.0's order, kept
    the 0a broker and transferred bundles to it where Pulsar found no transferable destination."""
    conf = PulsarConfig.resolve({"preferLaterVersions": True})
    versions = {"b1": "1.0.0-5", "b2": "1.0.0-0a", "b3": "1.0.0--1"}
    ctx = ExtensibleContext.build(0, available=list(versions), lookup=_lookup(versions))
    assert _names(ctx, version_filter(ctx, conf, "a/b/0x0_0x1", ctx.available.copy())) == ["b1"]


def test_case_version_pools_have_no_cyclic_order() -> None:
    """java-semver 0.9.0's order is not transitive (1.0.0-9 < 1.0.0-10 < 1.0.0-1a < 1.0.0-9), so BrokerVersionFilter's
    "latest" may then depend on hash-map order. The oracle cases draw versions from pools where it is a total order
    (every triple transitive, no two distinct strings equal unless they differ only in build metadata); the bad
    versions are rejected by the parser."""
    for pool in VERSION_POOLS:
        vs = [parse_semver(t) for t in pool]
        for a in vs:
            for b in vs:
                assert compare_semver_build_aware(a, b) == -compare_semver_build_aware(b, a)
                for c in vs:
                    if compare_semver_build_aware(a, b) < 0 and compare_semver_build_aware(b, c) < 0:
                        assert compare_semver_build_aware(a, c) < 0, (a, b, c)
    for bad in BAD_VERSIONS:
        if bad:
            with pytest.raises(ValueError):
                parse_semver(bad)


# --- the policy filters ExtensibleLoadManagerImpl.initialize adds ---------------------------------------------------
def _policy_ctx(owners: dict[str, str] | None, policies: NamespacePolicies,
                top: dict[str, list[str]] | None = None) -> ExtensibleContext:
    ids = ["a:8080", "b:8080", "c:8080"]
    lists = {b: [(n, (1.0, 1.0, 1.0, 1.0)) for n in names] for b, names in (top or {}).items()}
    return ExtensibleContext.build(0, {b: {} for b in ids}, lists, ids, bundle_owners=owners, policies=policies,
                                   extra_filters=POLICY_FILTERS)


def _groups(**groups: str) -> NamespacePolicies:
    return NamespacePolicies.from_json(namespaces={f"t/{ns}": {"policies": {"namespaceAntiAffinityGroup": g}}
                                                   for ns, g in groups.items()})


def test_anti_affinity_counts_owned_bundles_not_namespaces() -> None:
    """LoadManagerShared.getAntiAffinityNamespaceOwnedBrokers(pulsar, ns, ownershipEntrySet) (extensible) adds 1
    per Owned entry of a namespace in the group (case-insensitive): a broker owning two bundles of one namespace
    counts 2 (the modular overload over brokerToNamespaceToBundleRange counts namespaces)."""
    pol = _groups(ns="g", x="G", y="g", z="other")
    owners = {"t/x/0x00000000_0x00000100": "a:8080", "t/x/0x00000100_0x00000200": "a:8080",
              "t/y/0x00000000_0x00000100": "b:8080", "t/z/0x00000000_0x00000100": "c:8080"}
    ctx = _policy_ctx(owners, pol)
    assert anti_affinity_counts(ctx, pol, "g").tolist() == [2, 1, 0]
    # counted once per snapshot and group (any case), read-only; another group is counted on its own
    assert anti_affinity_counts(ctx, pol, "G") is anti_affinity_counts(ctx, pol, "g")
    assert not anti_affinity_counts(ctx, pol, "g").flags.writeable
    assert anti_affinity_counts(ctx, pol, "other").tolist() == [0, 0, 1]
    # the least count is 0 (c): only c stays; without c's candidacy the least is b's 1
    assert _names(ctx, anti_affinity_group_policy_filter(ctx, CONF, "t/ns/0x0_0x1", ctx.available.copy())) == ["c:8080"]
    cand = np.array([True, True, False])
    assert _names(ctx, anti_affinity_group_policy_filter(ctx, CONF, "t/ns/0x0_0x1", cand)) == ["b:8080"]
    # a namespace in no group is not filtered
    assert _names(ctx, anti_affinity_group_policy_filter(ctx, CONF, "t/z2/0x0_0x1", cand)) == ["a:8080", "b:8080"]


def test_anti_affinity_ownership_without_bundle_owners_is_the_reporters() -> None:
    """Without extensible.bundleOwners (no ownership check: each reporter owns its listed bundles) the ownership
    entries are every (reporter, bundle) pair of topBundlesLoadData, as the oracle's channel answers."""
    pol = _groups(ns="g", x="g")
    ctx = _policy_ctx(None, pol, {"a:8080": ["t/x/0x00000000_0x00000100"],
                                  "b:8080": ["t/x/0x00000000_0x00000100", "t/x/0x00000100_0x00000200"]})
    assert anti_affinity_counts(ctx, pol, "g").tolist() == [1, 2, 0]


def test_anti_affinity_failure_domains() -> None:
    """filterDomainsNotHavingLeastNumberAntiAffinityNamespaces (failureDomainsEnabled): the domain whose candidates
    hold the fewest bundles of the group wins (a broker in no domain is in "default"), then the least broker."""
    pol = NamespacePolicies.from_json(
        failure_domains={"d1": {"brokers": ["a:8080", "b:8080"]}},
        namespaces={"t/ns": {"policies": {"namespaceAntiAffinityGroup": "g"}},
                    "t/x": {"policies": {"namespaceAntiAffinityGroup": "g"}}},
        failure_domains_enabled=True)
    ctx = _policy_ctx({"t/x/0x00000000_0x00000100": "c:8080"}, pol)
    # d1 (a, b) holds 0, default (c) holds 1 -> a and b
    assert _names(ctx, anti_affinity_group_policy_filter(ctx, CONF, "t/ns/0x0_0x1", ctx.available.copy())) == [
        "a:8080", "b:8080"]


def test_isolation_policies_filter_skips_ids_without_colon() -> None:
    """BrokerIsolationPoliciesFilter -> LoadManagerShared.applyNamespacePoliciesAsync: parseBrokerHost takes the id
    up to its last ':' and throws without one (that broker is skipped), with or without an isolation policy."""
    ids = ["a:8080", "b", "[::1]:8080"]
    for pol in (NamespacePolicies(), NamespacePolicies.from_json({"p": {
            "namespaces": ["t/ns"], "primary": ["b", "a", r"\[::1\]"],
            "auto_failover_policy": {"policy_type": "min_available",
                                     "parameters": {"min_limit": "1", "usage_threshold": "80"}}}})):
        ctx = ExtensibleContext.build(0, {b: {} for b in ids}, None, ids, policies=pol)
        got = _names(ctx, isolation_policies_filter(ctx, CONF, "t/ns/0x0_0x1", ctx.available.copy()))
        assert got == ["[::1]:8080", "a:8080"]


def test_cyclic_versions_follow_each_callers_map_copy() -> None:
    """With a cyclic java-semver order (1.0.0-9 < 1.0.0-10 < 1.0.0-1a < 1.0.0-9) getLatestVersionNumber's answer is
    the last version that beat the running latest in the candidate map's order. TransferShedder.isTransferable walks
    new HashMap<>(available) (8 bins: broker1, broker3, broker2 -> latest 1.0.0-10, broker2);
    ExtensibleLoadManagerImpl.selectAsync walks new ConcurrentHashMap<>(available) (16 bins: broker1, broker2,
    broker3 -> latest 1.0.0-1a, broker3)."""
    conf = PulsarConfig.resolve({"preferLaterVersions": True, "loadManagerClassName": EXT})
    versions = {"broker1:8080": "1.0.0-9", "broker2:8080": "1.0.0-10", "broker3:8080": "1.0.0-1a"}
    ctx = ExtensibleContext.build(0, available=list(versions), lookup=_lookup(versions))
    shed = filter_brokers(ctx, conf, "a/b/0x0_0x1", on_error="fail")
    assert shed is not None and _names(ctx, shed) == ["broker2:8080"]
    assert _names(ctx, filter_brokers(ctx, conf, "a/b/0x0_0x1", on_error="reset")) == ["broker3:8080"]  # type: ignore[arg-type]
    assert _names(ctx, version_filter(ctx, conf, "a/b/0x0_0x1", ctx.available.copy())) == ["broker2:8080"]
