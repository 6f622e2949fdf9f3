"""UniformLoadShedder: ports of Pulsar's UniformLoadShedderTest plus the int/threshold edge cases."""

from __future__ import annotations

from collections.abc import Callable

from lbreplay.kernel.uniform_load_shedder import UniformLoadShedder
from tests.kernel.fixtures import MB, B, Bd, Cluster, by_broker, conf, rate, thr


def shed(c: Cluster, **keys: object) -> dict[str, list[str]]:
    return by_broker(UniformLoadShedder().find_bundles_for_unloading(c.build(), conf(**keys)))


def one_busy_broker(n: int, each: Callable[[int], float]) -> Cluster:
    """broker-1 owns bundle-1..n, bundle-i ``each(i)`` bytes/s in and out (broker totals match); broker2 is idle."""
    c = Cluster()
    for i in range(1, n + 1):
        c.bundles[f"bundle-{i}"] = Bd(owner="broker-1", short=thr(each(i)))
    total = sum(each(i) for i in range(1, n + 1))
    c.brokers["broker-1"] = B(thr_in=total, thr_out=total)
    c.brokers["broker2"] = B()
    return c


def test_max_unload_bundle_num_per_shedding() -> None:
    """UniformLoadShedderTest#testMaxUnloadBundleNumPerShedding: 20 bundles of 2 MiB/s fit the need, the cap is 2."""
    assert sum(map(len, shed(one_busy_broker(20, lambda i: MB), maxUnloadBundleNumPerShedding=2).values())) == 2


def test_broker_with_multiple_bundles() -> None:
    """UniformLoadShedderTest#testBrokerWithMultipleBundles (asserts non-empty). Exactly: idle broker2's 0 becomes
    1.0, required = (int) ((110 MiB - 1) * 0.2) = 23068671; bundle-10 (20 MiB/s) fits, leaving 2097151, one byte
    short of bundle-1's 2 MiB/s."""
    assert shed(one_busy_broker(10, lambda i: i * MB)) == {"broker-1": ["bundle-10"]}


def five_brokers() -> Cluster:
    """UniformLoadShedderTest#testOverloadBrokerSelect fixture (msgRateIn and msgThroughputIn only)."""
    rates = [50000, 60000, 70000, 10000, 20000]
    thrs = [50 * MB, 60 * MB, 70 * MB, 80 * MB, 10 * MB]
    c = Cluster()
    for k in range(5):
        c.brokers[f"broker{k}"] = B(rate_in=rates[k], thr_in=thrs[k])
        for i in range(5):
            c.bundles[f"broker-{k}-bundle-{i}"] = Bd(owner=f"broker{k}", short=(thrs[k] / 5, 0.0, rates[k] / 5, 0.0))
    return c


def test_overload_broker_select() -> None:
    """UniformLoadShedderTest#testOverloadBrokerSelect: rate path picks broker2 (max rate), throughput path
    broker3 (max throughput), and the rate path takes precedence when both thresholds are exceeded."""
    keys = {"maxUnloadBundleNumPerShedding": 1, "maxUnloadPercentage": 0.5}
    rate_only = shed(five_brokers(), **keys, loadBalancerMsgRateDifferenceShedderThreshold=50,
                     loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=0)
    assert list(rate_only) == ["broker2"] and len(rate_only["broker2"]) == 1
    thr_only = shed(five_brokers(), **keys, loadBalancerMsgRateDifferenceShedderThreshold=0,
                    loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=2)
    assert list(thr_only) == ["broker3"] and len(thr_only["broker3"]) == 1
    both = shed(five_brokers(), **keys, loadBalancerMsgRateDifferenceShedderThreshold=50,
                loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=2)
    assert list(both) == ["broker2"] and len(both["broker2"]) == 1


SMALL = {"minUnloadMessage": 0, "minUnloadMessageThroughput": 0, "maxUnloadPercentage": 0.5}


def test_small_traffic_shedding() -> None:
    """UniformLoadShedderTest#testSmallTrafficShedding: 5 bundles of 100 msg/s vs an idle broker: required =
    (int) ((500 - 1) * 0.5) = 249 -> two bundles (the old ``+ 1000`` slack would take all five); same for
    throughput with 2 KiB/s bundles (required 5119)."""
    c = Cluster(brokers={"broker-1": B(rate_in=250, rate_out=250), "broker-2": B()})
    for i in range(1, 6):
        c.bundles[f"bundle-{i}"] = Bd(owner="broker-1", short=rate(50))
    assert len(shed(c, **SMALL)["broker-1"]) == 2
    c = Cluster(brokers={"broker-1": B(thr_in=5120, thr_out=5120), "broker-2": B()})
    for i in range(1, 6):
        c.bundles[f"bundle-{i}"] = Bd(owner="broker-1", short=thr(1024))
    assert len(shed(c, **SMALL)["broker-1"]) == 2


def rate_pair(busy: float, bundles: dict[str, float]) -> Cluster:
    """A busy broker (total msg rate ``busy``) with bundles of the given total short-term rates, and an idle one."""
    c = Cluster(brokers={"a": B(rate_in=busy), "b": B()})
    for lbl, v in bundles.items():
        c.bundles[lbl] = Bd(owner="a", short=rate(v / 2))
    return c


def test_required_is_truncated_to_int() -> None:
    """required = (int) ((500 - 1) * 0.5) = 249, so a 249.5 msg/s bundle no longer fits, a 100 msg/s one does."""
    assert shed(rate_pair(500, {"big": 249.5, "small": 100}), **SMALL) == {"a": ["small"]}


def test_remaining_need_subtracts_truncated_values() -> None:
    """MutableInt.add(-v) truncates: 300 - (int) 150.5 = 150, so the 150 msg/s bundle still fits (a double need
    of 149.5 would reject it). Gap (601 - 1) * 0.5 = 300."""
    assert shed(rate_pair(601, {"x": 150.5, "y": 150}), **SMALL) == {"a": ["x", "y"]}


def test_idle_bundles_are_not_filtered_out() -> None:
    """Current source has no ``value > 0`` filter: a 0 msg/s bundle always fits the remaining need."""
    assert shed(rate_pair(601, {"x": 150.5, "y": 150, "z-idle": 0}), **SMALL) == {"a": ["x", "y", "z-idle"]}


def test_minimum_starts_at_integer_max_value() -> None:
    """The running minimum starts at Integer.MAX_VALUE: with 3 GB/s and 10 GB/s brokers the minimum stays
    2147483647, so the multiplier is 4.66 > 4 (the true 3.3 would not shed). required = (int) ((1e10 -
    2147483647) * 0.2) = 1570503270 fits one 1 GB/s bundle."""
    c = Cluster(brokers={"low": B(thr_in=3e9), "high": B(thr_in=1e10)})
    for i in range(10):
        c.bundles[f"h{i}"] = Bd(owner="high", short=(1e9, 0.0, 0.0, 0.0))
    c.bundles["l0"] = Bd(owner="low", short=(1e9, 0.0, 0.0, 0.0))
    c.bundles["l1"] = Bd(owner="low", short=(1e9, 0.0, 0.0, 0.0))
    s = UniformLoadShedder()
    out = s.find_bundles_for_unloading(c.build(), conf(loadBalancerMsgRateDifferenceShedderThreshold=0))
    assert by_broker(out) == {"high": ["h9"]}  # equal bundles: getBundleDataForLoadShedding()'s HashMap order
    assert s.stats()["minThroughput"] == 2147483647.0
    assert out[0].details["required"] == 1570503270


def test_minimum_unload_gate_and_sole_bundle() -> None:
    """required >= minUnloadMessage (1000) and more than one bundle on the source broker."""
    s = UniformLoadShedder()
    assert s.find_bundles_for_unloading(rate_pair(600, {"x": 300, "y": 300}).build(), conf()) == []
    assert s.skip_reason() == "MinUnload"  # (int) ((600 - 1) * 0.2) = 119 < 1000
    assert s.find_bundles_for_unloading(rate_pair(9000, {"x": 300}).build(), conf()) == []
    assert s.skip_reason() == "SoleBundle"


def test_balanced_cluster() -> None:
    """Both differences within thresholds: 120 vs 100 msg/s (20 % < 50 %), equal throughput."""
    c = Cluster(brokers={"a": B(rate_in=120, thr_in=MB), "b": B(rate_in=100, thr_in=MB)})
    s = UniformLoadShedder()
    assert s.find_bundles_for_unloading(c.build(), conf()) == []
    assert s.skip_reason() == "Balanced"


def test_legacy_variant_halves_the_gap_with_rate_slack_and_no_gates() -> None:
    """2.9-era source (profile.uniform_legacy): required = (int) ((300 - 100) / 2) = 100 with ``+ 1000`` slack and no
    minimum gate, so all six 50 msg/s bundles go; the current source stops at minUnloadMessage."""
    c = Cluster(brokers={"a": B(rate_in=300, thr_in=MB), "b": B(rate_in=100, thr_in=MB)})
    for i in range(6):
        c.bundles[f"x{i}"] = Bd(owner="a", short=rate(25))
    assert len(shed(c, pulsarVersion="2.9")["a"]) == 6
    assert shed(c) == {}


def test_legacy_variant_skips_single_bundle_brokers_and_throughput_has_no_slack() -> None:
    """2.9-era: the max broker must own more than one bundle (top-rate 'a' has one, so 'b' is the source);
    the throughput path compares ``v <= required`` without slack: (int) ((60 - 4) MiB / 2) = 28 MiB takes 20 MiB/s,
    then the 8 MiB/s + 500 B/s bundle exceeds the remaining 8 MiB/s (the rate path's 1000 slack would take it)."""
    c = Cluster(
        brokers={"a": B(thr_in=100 * MB), "b": B(thr_in=60 * MB), "c": B(thr_in=4 * MB)},
        bundles={
            "a0": Bd(owner="a", short=(100 * MB, 0.0, 0.0, 0.0)),
            "b0": Bd(owner="b", short=(20 * MB, 0.0, 0.0, 0.0)),
            "b1": Bd(owner="b", short=(8 * MB + 500, 0.0, 0.0, 0.0)),
            "c0": Bd(owner="c", short=(4 * MB, 0.0, 0.0, 0.0)),
        },
    )
    assert shed(c, pulsarVersion="2.9") == {"b": ["b0"]}


def test_4_0_takes_a_bundle_up_to_required_plus_1000() -> None:
    """UniformLoadShedder.findBundlesForUnloading in 4.0.x: ``bundleMsgRate <= required + 1000`` (int; the
    ``+ 1000`` that apache/pulsar#21906 removed on master is in the 4.0.7 jar, found by the differential oracle).
    required = (int) ((110 MiB - 1) * 0.2) = 23068671; bundle-10 (20 MiB/s) leaves 2097151, and bundle-1
    (2 MiB/s = 2097152) now fits within the slack: 4.0 unloads both, the master-branch profile one."""
    c = one_busy_broker(10, lambda i: i * MB)
    assert shed(c, pulsarVersion="4.0") == {"broker-1": ["bundle-10", "bundle-1"]}
    assert shed(c, pulsarVersion="4.x") == {"broker-1": ["bundle-10"]}


def test_4_0_slack_wraps_when_required_is_saturated() -> None:
    """Java's ``required + 1000`` is an int addition: with ``required`` at Integer.MAX_VALUE it wraps negative,
    so 4.0.x takes no bundle at all (UniformLoadShedder.findBundlesForUnloading, 4.0.7)."""
    c = one_busy_broker(3, lambda i: 4e10 * i)
    assert shed(c, pulsarVersion="4.0", maxUnloadPercentage=0.9) == {}
