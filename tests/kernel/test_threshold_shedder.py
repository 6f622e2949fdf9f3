"""ThresholdShedder: ports of Pulsar's ThresholdShedderTest plus EWMA / gate edge cases."""

from __future__ import annotations

import json

import pytest

from lbreplay.kernel.threshold_shedder import ThresholdShedder
from tests.kernel.fixtures import MB, B, Bd, Cluster, by_broker, conf, pct, thr

H = 0.9  # loadBalancerHistoryResourcePercentage default


def ten_bundle_cluster(recent: tuple[str, ...] = ()) -> Cluster:
    """ThresholdShedderTest fixture: broker-1 at 99.9 % bandwidth owning bundle-i (i MiB/s in and out);
    broker2 idle, owning copies of the BundleData under other names."""
    c = Cluster()
    total = 0.0
    for i in range(1, 11):
        c.bundles[f"bundle-{i}"] = Bd(owner="broker-1", short=thr(i * MB))
        c.bundles[f"broker2-bundle-{10 + i}"] = Bd(owner="broker2", short=thr(i * MB))
        total += i * MB
    c.brokers["broker-1"] = B(bw_in=(999, 1000), bw_out=(999, 1000), thr_in=total, thr_out=total)
    c.brokers["broker2"] = B()
    c.recently_unloaded = {b: 1 for b in recent}
    return c


def test_no_brokers() -> None:
    """ThresholdShedderTest#testNoBrokers."""
    s = ThresholdShedder()
    assert s.find_bundles_for_unloading(Cluster().build(), conf()) == []
    assert s.skip_reason() == "NoBrokers"


def test_brokers_with_no_bundles() -> None:
    """ThresholdShedderTest#testBrokersWithNoBundles: a lone broker equals the average."""
    c = Cluster(brokers={"broker-1": B(bw_in=(999, 1000), bw_out=(999, 1000))})
    assert ThresholdShedder().find_bundles_for_unloading(c.build(), conf()) == []


def test_broker_not_reach_threshold() -> None:
    """ThresholdShedderTest#testBrokerNotReachThreshold."""
    c = Cluster(
        brokers={"broker-1": B(bw_in=(500, 1000), bw_out=(500, 1000))},
        bundles={"bundle-1": Bd(owner="broker-1", short=thr(1000))},
    )
    s = ThresholdShedder()
    assert s.find_bundles_for_unloading(c.build(), conf()) == []
    assert s.skip_reason() == "Balanced"


def test_broker_reach_threshold() -> None:
    """ThresholdShedderTest#testBrokerReachThreshold: cpu 140 % vs 10 % (avg 0.95), throughput Double.MAX_VALUE;
    only bundle-2 has BundleData, so it is the one selected."""
    c = Cluster(
        brokers={
            "broker-2": B(
                cpu=pct(140), memory=pct(10), direct_memory=pct(10), bw_in=(500, 1000), bw_out=(500, 1000),
                thr_in=1.7976931348623157e308,
            ),
            "broker-3": B(cpu=pct(10), memory=pct(10), direct_memory=pct(10), bw_in=(500, 1000), bw_out=(500, 1000)),
        },
        bundles={
            "bundle-1": Bd(owner="broker-2"),
            "bundle-2": Bd(owner="broker-2", short=thr(1000)),
            "bundle-3": Bd(owner="broker-3"),
            "bundle-4": Bd(owner="broker-3"),
        },
    )
    out = ThresholdShedder().find_bundles_for_unloading(c.build(), conf())
    assert by_broker(out) == {"broker-2": ["bundle-2"]}


def test_broker_with_single_bundle() -> None:
    """ThresholdShedderTest#testBrokerWithSingleBundle."""
    c = Cluster(
        brokers={"broker-1": B(bw_in=(999, 1000), bw_out=(999, 1000))},
        bundles={"bundle-1": Bd(owner="broker-1", short=thr(1000))},
    )
    assert ThresholdShedder().find_bundles_for_unloading(c.build(), conf()) == []


def test_broker_with_multiple_bundles() -> None:
    """ThresholdShedderTest#testBrokerWithMultipleBundles: avg = (0.999 + 0) / 2; need = 110 MiB/s *
    (0.999 - 0.4995 - 0.1 + 0.05) = 49.4 MiB/s -> bundle-10, 9, 8 (20 + 18 + 16)."""
    out = ThresholdShedder().find_bundles_for_unloading(ten_bundle_cluster().build(), conf())
    assert by_broker(out) == {"broker-1": ["bundle-10", "bundle-9", "bundle-8"]}
    d = out[0].details
    assert d["average"] == pytest.approx(0.4995, rel=1e-6)
    assert d["required"] == pytest.approx(110 * MB * (0.999 - 0.4995 - 0.1 + 0.05), rel=1e-6)


def test_filter_recently_unloaded() -> None:
    """ThresholdShedderTest#testFilterRecentlyUnloaded."""
    out = ThresholdShedder().find_bundles_for_unloading(ten_bundle_cluster(("bundle-10", "bundle-9")).build(), conf())
    assert by_broker(out) == {"broker-1": ["bundle-8", "bundle-7", "bundle-6", "bundle-5"]}


def eleven_brokers(low: int, usage: float, throughput: float, many: int | None = None) -> Cluster:
    """ThresholdShedderTest lower-boundary fixture: broker-i at ``usage`` % bandwidth (broker-``low`` at 0),
    each owning 10 bundles (or 1, except broker-``many``) of ``throughput`` in and out."""
    c = Cluster()
    for i in range(11):
        idle = i == low
        t = 0.0 if idle else throughput
        for j in range(10 if many is None or i == many else 1):
            c.bundles[f"broker-{i}-bundle-{j}"] = Bd(owner=f"broker-{i}", short=thr(t))
        u = (0.0, 100.0) if idle else (usage, 100.0)
        c.brokers[f"broker-{i}"] = B(bw_in=u, bw_out=u, thr_in=t, thr_out=t)
    return c


def test_lower_boundary_shedding() -> None:
    """ThresholdShedderTest#testLowerBoundaryShedding: 10 brokers at 80 %, one at 0 % (avg 72.7 %) -> nothing
    unless lowerBoundarySheddingEnabled. need = 200 MiB/s * 0.1 * 0.5 = 10 MiB/s (== minimum, allowed); the
    tie among the 80 % brokers goes to the first in brokerData's ConcurrentHashMap order (broker-8: its hash bin comes
    first), and its equal bundles keep getBundleDataForLoadShedding()'s HashMap order (broker-8-bundle-9 first)."""
    c = eleven_brokers(low=10, usage=80, throughput=100 * MB)
    assert ThresholdShedder().find_bundles_for_unloading(c.build(), conf()) == []
    out = ThresholdShedder().find_bundles_for_unloading(c.build(), conf(lowerBoundarySheddingEnabled=True))
    assert by_broker(out) == {"broker-8": ["broker-8-bundle-9"]}
    assert out[0].reason == "lower boundary shedding"
    assert out[0].details["required"] == pytest.approx(10 * MB)


def test_lower_boundary_shedding_no_broker_to_offload() -> None:
    """ThresholdShedderTest#testLowerBoundarySheddingNoBrokerToOffload: all at 80 %, nobody below the bound."""
    c = Cluster()
    for i in range(11):
        for j in range(10):
            c.bundles[f"broker-{i}-bundle-{j}"] = Bd(owner=f"broker-{i}", short=thr(80 * MB))
        c.brokers[f"broker-{i}"] = B(bw_in=pct(80), bw_out=pct(80), thr_in=80 * MB, thr_out=80 * MB)
    assert ThresholdShedder().find_bundles_for_unloading(c.build(), conf()) == []
    assert ThresholdShedder().find_bundles_for_unloading(c.build(), conf(lowerBoundarySheddingEnabled=True)) == []


def test_lower_boundary_shedding_broker_with_one_bundle() -> None:
    """ThresholdShedderTest#testLowerBoundarySheddingBrokerWithOneBundle: only broker-3 owns > 1 bundle."""
    c = eleven_brokers(low=5, usage=80, throughput=100 * MB, many=3)
    assert ThresholdShedder().find_bundles_for_unloading(c.build(), conf()) == []
    out = ThresholdShedder().find_bundles_for_unloading(c.build(), conf(lowerBoundarySheddingEnabled=True))
    assert len(out) == 1 and out[0].broker == "broker-3"


def cpu_cluster(*usages: float, throughput: float = 100 * MB) -> Cluster:
    """Brokers b0.. at the given cpu %, each owning two 1-MiB/s bundles."""
    c = Cluster()
    for i, u in enumerate(usages):
        c.brokers[f"b{i}"] = B(cpu=pct(u), thr_in=throughput / 2, thr_out=throughput / 2)
        c.bundles[f"b{i}-x"] = Bd(owner=f"b{i}", short=thr(MB))
        c.bundles[f"b{i}-y"] = Bd(owner=f"b{i}", short=thr(MB / 2))
    return c


@pytest.mark.parametrize(
    "version,first,second",
    [
        ("4.x", 0.5, 0.5 * H + (1 - H) * 0.9),  # first observation taken raw (2.10+)
        ("2.9", (1 - H) * 0.5, (1 - H) * 0.5 * H + (1 - H) * 0.9),  # history seeded with 0.0
    ],
)
def test_ewma_first_sample_per_version(version: str, first: float, second: float) -> None:
    """ThresholdShedder.updateAvgResourceUsage; seed 000 §5 ``usage = x * prevUsage + (1 - x) * usage``."""
    s = ThresholdShedder()
    s.find_bundles_for_unloading(cpu_cluster(50, 50).build(), conf(pulsarVersion=version))
    assert s.get_state()["brokerAvgResourceUsage"]["b0"] == pytest.approx(first, rel=1e-12)
    s.find_bundles_for_unloading(cpu_cluster(90, 50).build(), conf(pulsarVersion=version))
    assert s.get_state()["brokerAvgResourceUsage"]["b0"] == pytest.approx(second, rel=1e-12)


def test_comparison_uses_the_ewma_not_the_instant_usage() -> None:
    """History 0.2 for both; now 90 % vs 10 %: EWMAs 0.27 / 0.19 (avg 0.23) stay under avg + 0.1, although the
    instantaneous 0.9 would be far above (0.5 + 0.1)."""
    s = ThresholdShedder()
    s.set_state({"brokerAvgResourceUsage": {"b0": 0.2, "b1": 0.2}})
    assert s.find_bundles_for_unloading(cpu_cluster(90, 10).build(), conf()) == []
    assert s.stats()["loadAvg"] == pytest.approx((0.2 * H + (1 - H) * 0.9 + 0.2 * H + (1 - H) * 0.1) / 2)
    fresh = ThresholdShedder()  # need 100 MiB/s * 0.35 takes both of b0's bundles (2 + 1 MiB/s)
    assert by_broker(fresh.find_bundles_for_unloading(cpu_cluster(90, 10).build(), conf())) == {"b0": ["b0-x", "b0-y"]}


@pytest.mark.parametrize("lower_boundary,expected_c", [(False, 0.5 * H), (True, 0.5 * H * H)])
def test_lower_boundary_advances_the_ewma_a_second_time(lower_boundary: bool, expected_c: float) -> None:
    """tryLowerBoundaryShedding calls getBrokerAvgUsage again: with the flag on (and nothing selected) every
    EWMA gets two updates with the same input. History 0.5 each; now 50, 50, 0 %."""
    s = ThresholdShedder()
    s.set_state({"brokerAvgResourceUsage": {"b0": 0.5, "b1": 0.5, "b2": 0.5}})
    keys = conf(lowerBoundarySheddingEnabled=lower_boundary)
    assert s.find_bundles_for_unloading(cpu_cluster(50, 50, 0).build(), keys) == []
    state = s.get_state()["brokerAvgResourceUsage"]
    assert state["b2"] == pytest.approx(expected_c, rel=1e-12)
    assert state["b0"] == pytest.approx(0.5, rel=1e-12)


def test_zero_average_is_an_exact_check() -> None:
    """``if (avgUsage == 0) return``: with a 0 % threshold and no minimum, an all-idle cluster sheds nothing,
    while a cluster whose average is merely tiny sheds from the broker at or above it."""
    keys = {"loadBalancerBrokerThresholdShedderPercentage": 0, "loadBalancerBundleUnloadMinThroughputThreshold": 0}
    s = ThresholdShedder()
    assert s.find_bundles_for_unloading(cpu_cluster(0, 0).build(), conf(**keys)) == []
    assert s.skip_reason() == "ZeroAvgUsage"
    out = ThresholdShedder().find_bundles_for_unloading(cpu_cluster(0.001, 0).build(), conf(**keys))
    assert by_broker(out) == {"b0": ["b0-x", "b0-y"]}  # need ~ 100 MiB/s * 0.05 > 2 MiB/s


@pytest.mark.parametrize("throughput_mib,sheds", [(60, False), (80, True)])
def test_minimum_throughput_gate(throughput_mib: float, sheds: bool) -> None:
    """need = throughput * (0.4 - 0.2 - 0.1 + 0.05) = 0.15 * throughput must reach 10 MiB/s
    (loadBalancerBundleUnloadMinThroughputThreshold): 9 MiB/s is skipped, 12 MiB/s sheds."""
    c = cpu_cluster(40, 10, 10, throughput=throughput_mib * MB)
    s = ThresholdShedder()
    out = s.find_bundles_for_unloading(c.build(), conf())
    assert bool(out) is sheds
    if not sheds:
        assert s.skip_reason() == "MinThroughput"


def test_more_than_one_bundle_guard() -> None:
    """An overloaded broker with a single bundle only logs a warning."""
    c = cpu_cluster(40, 10, 10)
    del c.bundles["b0-y"]
    s = ThresholdShedder()
    assert s.find_bundles_for_unloading(c.build(), conf()) == []
    assert s.skip_reason() == "SoleBundle"


def test_active_brokers_change_prunes_history_and_state_round_trips_json() -> None:
    """onActiveBrokersChange drops departed brokers (a returning broker starts raw again); state is plain JSON."""
    s = ThresholdShedder()
    s.find_bundles_for_unloading(cpu_cluster(50, 20).build(), conf())
    s.on_active_brokers_change({"b0"})
    assert set(s.get_state()["brokerAvgResourceUsage"]) == {"b0"}
    restored = ThresholdShedder()
    restored.set_state(json.loads(json.dumps(s.get_state())))
    restored.find_bundles_for_unloading(cpu_cluster(50, 90).build(), conf())
    state = restored.get_state()["brokerAvgResourceUsage"]
    assert state["b1"] == pytest.approx(0.9)  # raw first observation after pruning
    assert state["b0"] == pytest.approx(0.5)
