"""TopKBundles: dead-banded NamespaceBundleStats order, partition sort, exclusions, list order (PULSAR-LB-SPEC §1.3, §7.1)."""

from __future__ import annotations

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.top_k_bundles import (
    TopBundlesLoadData,
    compare_bundle_stats,
    partition_sort,
    top_k_bundles,
)

B1 = "my-tenant/my-namespace1/0x00000000_0x0FFFFFFF"
B2 = "my-tenant/my-namespace2/0x00000000_0x0FFFFFFF"
B3 = "my-tenant/my-namespace3/0x00000000_0x0FFFFFFF"
B4 = "my-tenant/my-namespace4/0x00000000_0x0FFFFFFF"


class _Policies:
    """Stand-in for NamespacePolicies: namespaces with an isolation policy or anti-affinity group."""

    def __init__(self, namespaces: set[str]) -> None:
        self.namespaces = namespaces

    def has_isolation_or_anti_affinity(self, namespace: str) -> bool:
        return namespace in self.namespaces


def _top(names: list[str], rate_in: list[float], k: int, conf: PulsarConfig, policies: object = None,
         order: str = "ascending") -> list[str]:
    n = len(names)
    stats = np.zeros((n, 4))
    stats[:, 2] = rate_in
    z = np.zeros(n, dtype=np.int64)
    idx = top_k_bundles(names, stats, z, z, z, z, k, conf, policies, order)  # type: ignore[arg-type]
    return [names[i] for i in idx]


def test_top_bundles_load_data() -> None:
    """TopKBundlesTest#testTopBundlesLoadData: msgRateIn 100000, 500, 10000, 0 with k=3 -> newest list order is
    the smallest of the top-3 first: bundle2 (500), bundle3 (10000), bundle1 (100000)."""
    conf = PulsarConfig.resolve({})
    assert _top([B1, B2, B3, B4], [100000, 500, 10000, 0], 3, conf) == [B2, B3, B1]
    # first version (b1ce2d4b) lists the highest first
    assert _top([B1, B2, B3, B4], [100000, 500, 10000, 0], 3, conf, order="descending") == [B1, B3, B2]


def test_system_namespace() -> None:
    """TopKBundlesTest#testSystemNamespace: pulsar/system bundles are never reported."""
    conf = PulsarConfig.resolve({})
    assert _top(["pulsar/system/0x00000000_0x0FFFFFFF", B1], [500, 10000], 2, conf) == [B1]


def test_shedding_excluded_namespaces() -> None:
    """TopKBundlesTest#testSheddingExcludedNamespaces (PIP-380)."""
    conf = PulsarConfig.resolve({"loadBalancerSheddingExcludedNamespaces": ["my-tenant/my-namespace2"]})
    assert _top([B2, B1], [500, 10000], 2, conf) == [B1]


def test_isolation_and_anti_affinity_policies() -> None:
    """TopKBundlesTest#testIsolationPolicy / #testAntiAffinityGroupPolicy /
    #testLoadBalancerSheddingBundlesWithPoliciesEnabledConfig: namespaces with policies are left out unless
    loadBalancerSheddingBundlesWithPoliciesEnabled; with both bundles, the order is bundle1 (500), bundle2 (10000)."""
    off = PulsarConfig.resolve({"loadBalancerSheddingBundlesWithPoliciesEnabled": False})
    on = PulsarConfig.resolve({"loadBalancerSheddingBundlesWithPoliciesEnabled": True})
    iso = _Policies({"my-tenant/my-namespace1"})
    aa = _Policies({"my-tenant/my-namespace2"})
    assert _top([B1, B2], [500, 10000], 2, off, iso) == [B2]
    assert _top([B1, B2], [500, 10000], 2, off, aa) == [B1]
    both = _Policies({"my-tenant/my-namespace1", "my-tenant/my-namespace2"})
    assert _top([B1, B2], [500, 10000], 2, on, both) == [B1, B2]
    assert _top([B1, B2], [500, 10000], 2, off, both) == []


def test_partition_sort_matches_full_sort() -> None:
    """TopKBundlesTest#testPartitionSort: for a consistent order, the first k after partitionSort equal the first
    k of a full descending sort (100 random cases, seeded)."""
    rng = np.random.default_rng(7)
    for _ in range(100):
        n = int(rng.integers(1, 11))
        vals = rng.integers(0, n, size=n).tolist()
        k = int(rng.integers(1, n + 1))
        arr = list(range(n))
        partition_sort(arr, k, lambda a, b: (vals[a] > vals[b]) - (vals[a] < vals[b]))
        assert [vals[i] for i in arr[:k]] == sorted(vals, reverse=True)[:k]


def test_compare_to_dead_bands() -> None:
    """NamespaceBundleStats.compareTo: differences up to the band are ties, checked field by field in order."""
    base = (1e6, 1e6, 100.0, 10, 0)
    assert compare_bundle_stats(base, (1e6 + 1e5, 1e6, 100.0, 10, 0)) == 0  # exactly the band: equal
    assert compare_bundle_stats(base, (1e6 + 1e5 + 1, 0.0, 0.0, 0, 0)) == -1  # thrIn decides first
    assert compare_bundle_stats(base, (1e6, 1e6 - 2e5, 1e4, 10, 0)) == 1  # thrOut before msg rate
    assert compare_bundle_stats(base, (1e6, 1e6, 201.0, 10, 0)) == -1  # msg rate band 100
    assert compare_bundle_stats(base, (1e6, 1e6, 150.0, 511, 0)) == -1  # topics+connections band 500
    assert compare_bundle_stats(base, (1e6, 1e6, 150.0, 500, 100001)) == -1  # cache band 100000


def test_dead_band_ties_follow_the_partition_swaps() -> None:
    """Throughputs within 1e5 B/s of each other tie, so their order is whatever TopKBundles.partitionSort's swaps
    leave. Hand trace for k=3 over [A 1.00e6, B 1.05e6, C 5e6, D 0] (input in name order): pass 1 (pivot D) moves
    A, B, C in front of D; pass 2 (pivot C) swaps C to the front and B before A: [C, B, A, D]; pass 3 (pivot A)
    finds B == A, stops with end = 1, sorts nothing more. Top-3 = C, B, A; the ascending list is A, B, C."""
    conf = PulsarConfig.resolve({})
    names = ["t/n/0x00000000_0x40000000", "t/n/0x40000000_0x80000000", "t/n/0x80000000_0xc0000000",
             "t/n/0xc0000000_0xffffffff"]
    stats = np.zeros((4, 4))
    stats[:, 0] = [1.0e6, 1.05e6, 5e6, 0.0]
    z = np.zeros(4, dtype=np.int64)
    assert top_k_bundles(names, stats, z, z, z, z, 3, conf).tolist() == [0, 1, 2]
    assert top_k_bundles(names, stats, z, z, z, z, 3, conf, order="descending").tolist() == [2, 1, 0]


def test_zero_k_reports_nothing() -> None:
    """loadBalancerMaxNumberOfBundlesInBundleLoadReport <= 0: an empty top-bundles list."""
    conf = PulsarConfig.resolve({})
    assert _top([B1, B2], [1, 2], 0, conf) == []


def test_top_bundles_store_layout() -> None:
    """TopBundlesLoadData store: per-broker slices in list order; None = no entry, [] = present but empty."""
    top = TopBundlesLoadData.from_lists([[("a/b/0x0_0x1", (1, 2, 3, 4)), ("a/b/0x1_0x2", (5, 6, 7, 8, 9))], None, []])
    assert list(top.entries(0)) == [0, 1] and top.count(1) == 0 and top.count(2) == 0
    assert top.present.tolist() == [True, False, True]
    assert top.throughput.tolist() == [3.0, 11.0] and top.topics.tolist() == [0, 9]


def test_a_removed_brokers_entry_is_gone_and_the_others_stay() -> None:
    """``ServiceUnitStateChannelImpl.doCleanup`` removes a deleted broker's ``TopBundlesLoadData`` entry
    (``LoadDataStore.removeAsync``): no list at all for it (not an empty one), every other list unchanged."""
    from lbreplay.kernel.extensible.top_k_bundles import TopBundlesLoadData

    a = [("t/n/0x00000000_0x40000000", [1.0, 2.0, 3.0, 4.0, 5, 6, 7, 8])]
    c = [("t/n/0x80000000_0xc0000000", [9.0, 1.0, 2.0, 3.0, 4, 5, 6, 7]), ("t/n/0xc0000000_0xffffffff", [0.5] * 8)]
    b = [("t/n/0x40000000_0x80000000", [2.0] * 8)]
    store = TopBundlesLoadData.from_lists([a, b, c, None])
    got = store.without(np.array([1]))
    want = TopBundlesLoadData.from_lists([a, None, c, None])
    assert got.names == want.names and got.offsets.tolist() == want.offsets.tolist()
    assert got.present.tolist() == [True, False, True, False]
    for field in ("stats", "topics", "consumer_count", "producer_count", "cache_size"):
        assert np.array_equal(getattr(got, field), getattr(want, field)), field
    assert store.present.tolist() == [True, True, True, False]  # the store it came from is left as it was
