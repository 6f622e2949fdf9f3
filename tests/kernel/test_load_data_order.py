"""LoadData's maps in the JVM's order: brokerData (ConcurrentHashMap) and getBundleDataForLoadShedding() (HashMap)
decide the modular shedders' ties. Orders as JDK 17 prints them: a ConcurrentHashMap of "b0", "b1", "b2" (hashes
3086, 3087, 3088: bins 14, 15, 0) iterates b2, b0, b1; a HashMap of the fixtures' bundles
"tenant/b<i>/0x00000000_0xffffffff" iterates b2, b1, b0 (b2, b0 without b1) -- neither is the sorted order."""

from __future__ import annotations

import numpy as np

from lbreplay.kernel.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from lbreplay.kernel.load_data_order import broker_candidate_order, broker_data_order, bundle_data_for_load_shedding_rank
from lbreplay.kernel.overload_shedder import OverloadShedder
from lbreplay.kernel.threshold_shedder import ThresholdShedder
from lbreplay.kernel.uniform_load_shedder import UniformLoadShedder
from tests.kernel.fixtures import MB, B, Bd, Cluster, by_broker, conf, label, thr


def test_broker_data_order_is_the_hash_bins() -> None:
    ld = Cluster(brokers={"b0": B(), "b1": B(), "b2": B()}).build()
    assert [ld.brokers.ids[i] for i in broker_data_order(ld)] == ["b2", "b0", "b1"]


def test_bundle_rank_follows_the_hash_map() -> None:
    """Bundles b0, b1, b2 of one broker, b1 filtered out: the HashMap visits b2, b0; b1 has no rank (3)."""
    c = Cluster(brokers={"x": B(), "y": B()})
    for name in ("b0", "b1", "b2"):
        c.bundles[name] = Bd(owner="x", short=thr(MB))
    ld = c.build()
    keep = np.array([label(name) != "b1" for name in ld.bundles.names])
    rank = bundle_data_for_load_shedding_rank(ld, keep)
    assert {label(n): r for n, r in zip(ld.bundles.names, rank.tolist())} == {"b0": 1, "b1": 3, "b2": 0}
    everything = bundle_data_for_load_shedding_rank(ld, np.ones(3, dtype=bool))
    assert {label(n): r for n, r in zip(ld.bundles.names, everything.tolist())} == {"b0": 2, "b1": 1, "b2": 0}


def test_uniform_max_tie_goes_to_the_first_broker_in_jvm_order() -> None:
    """b1 and b2 tie for the max throughput (strict ``>``): brokersData.forEach meets b2 first, so b2 sheds."""
    c = Cluster()
    for owner, t in (("b0", 0.0), ("b1", 10 * MB), ("b2", 10 * MB)):
        c.brokers[owner] = B(thr_in=t)
        for j, share in enumerate((0.1, 0.9)):
            c.bundles[f"{owner}-{j}"] = Bd(owner=owner, short=(t * share, 0.0, 0.0, 0.0))
    out = UniformLoadShedder().find_bundles_for_unloading(c.build(), conf(loadBalancerMsgRateDifferenceShedderThreshold=0))
    assert by_broker(out) == {"b2": ["b2-0"]}


def test_equal_bundles_keep_the_hash_map_order() -> None:
    """OverloadShedder needs 30 MiB/s x (0.90 - 0.85 + 0.05) = 3 MiB/s: one of three equal 5 MiB/s bundles, the
    first in the HashMap (b2), not the first name (b0)."""
    c = Cluster(brokers={"hot": B(bw_in=(90.0, 100.0), thr_in=30 * MB), "cold": B()})
    for name in ("b0", "b1", "b2"):
        c.bundles[name] = Bd(owner="hot", short=thr(5 * MB))
    out = OverloadShedder().find_bundles_for_unloading(c.build(), conf(loadBalancerBrokerOverloadedThresholdPercentage=85))
    assert by_broker(out) == {"hot": ["b2"]}


def test_threshold_average_sums_in_jvm_order() -> None:
    """ThresholdShedder's average: the EWMAs summed in brokerData's order (b2, b0, b1), as Java's loop does."""
    usage = {"b0": 0.1, "b1": 0.2, "b2": 0.03}  # (0.03 + 0.1) + 0.2 = 0.33, (0.1 + 0.2) + 0.03 = 0.33000000000000007
    c = Cluster()
    for owner, u in usage.items():
        c.brokers[owner] = B(bw_in=(u * 100, 100.0))
    s = ThresholdShedder()
    s.find_bundles_for_unloading(c.build(), conf())
    cur = s.stats()["brokerAvgResourceUsage"]
    assert s.stats()["loadAvg"] == ((cur["b2"] + cur["b0"]) + cur["b1"]) / 3


def test_broker_candidate_order_is_a_fresh_hash_set() -> None:
    """brokerCandidateCache (a HashSet) of b0, b1, b3 filled in brokerData's order iterates b0, b1, b3 ("b3": 3089,
    bin 1, after b2's bin 0 and before b0's 14); of b0, b1, b2: b2, b0, b1."""
    ld = Cluster(brokers={"b0": B(), "b1": B(), "b2": B(), "b3": B()}).build()

    def ids(rows: list[int]) -> list[str]:
        return [ld.brokers.ids[i] for i in broker_candidate_order(ld, np.array(rows))]

    assert ids([0, 1, 2]) == ["b2", "b0", "b1"]
    assert ids([0, 1, 3]) == ["b3", "b0", "b1"]
    assert ids([2]) == ["b2"]


def test_least_resource_usage_with_weight_sums_in_the_candidates_order() -> None:
    """Given the candidates in brokerCandidateCache's order (b2, b0, b1: the oracle's `assign` candidates), the
    average EWMA is summed in it, as Java's loop over that HashSet does."""
    c = Cluster()
    for owner, u in {"b0": 0.1, "b1": 0.2, "b2": 0.03}.items():
        c.brokers[owner] = B(bw_in=(u * 100, 100.0))
    ld = c.build()
    s = LeastResourceUsageWithWeight()
    rows = broker_candidate_order(ld, np.arange(3))
    s.select_broker(rows, "t/ns/0x00000000_0xffffffff", ld, conf(), np.random.default_rng(0))
    e = s.ema
    assert s.last_average == ((e["b2"] + e["b0"]) + e["b1"]) / 3
    assert s.last_average != ((e["b0"] + e["b1"]) + e["b2"]) / 3
