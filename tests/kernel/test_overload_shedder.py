"""OverloadShedder: ports of Pulsar's OverloadShedderTest plus the threshold/profile edge cases."""

from __future__ import annotations

import pytest

from lbreplay.kernel.overload_shedder import OverloadShedder
from tests.kernel.fixtures import MB, B, Bd, Cluster, by_broker, conf, name, pct, thr


def ten_bundle_broker(recent: tuple[str, ...] = (), other: bool = True) -> Cluster:
    """OverloadShedderTest fixture: broker-1 at 99.9 % bandwidth with bundle-i of i MiB/s in and out;
    ``another-broker`` owns copies of the same BundleData under other names."""
    c = Cluster()
    total = 0.0
    for i in range(1, 11):
        c.bundles[f"bundle-{i}"] = Bd(owner="broker-1", short=thr(i * MB))
        if other:
            c.bundles[f"another-broker-bundle-{10 + i}"] = Bd(owner="another-broker", short=thr(i * MB))
        total += i * MB
    c.brokers["broker-1"] = B(bw_in=(999, 1000), bw_out=(999, 1000), thr_in=total, thr_out=total)
    if other:
        c.brokers["another-broker"] = B()
    c.recently_unloaded = {b: 1 for b in recent}
    return c


def test_no_brokers() -> None:
    """OverloadShedderTest#testNoBrokers."""
    s = OverloadShedder()
    assert s.find_bundles_for_unloading(Cluster().build(), conf()) == []
    assert s.skip_reason() == "NoBrokers"


def test_brokers_with_no_bundles() -> None:
    """OverloadShedderTest#testBrokersWithNoBundles: overloaded but nothing to shed."""
    c = Cluster(brokers={"broker-1": B(bw_in=(999, 1000), bw_out=(999, 1000))})
    s = OverloadShedder()
    assert s.find_bundles_for_unloading(c.build(), conf()) == []
    assert s.skip_reason() == "NoBundles"


def test_broker_not_overloaded() -> None:
    """OverloadShedderTest#testBrokerNotOverloaded: 50 % bandwidth is below 85 %."""
    c = Cluster(
        brokers={"broker-1": B(bw_in=(500, 1000), bw_out=(500, 1000))},
        bundles={"bundle-1": Bd(owner="broker-1", short=thr(1000))},
    )
    s = OverloadShedder()
    assert s.find_bundles_for_unloading(c.build(), conf()) == []
    assert s.skip_reason() == "Balanced"


def test_broker_with_single_bundle() -> None:
    """OverloadShedderTest#testBrokerWithSingleBundle: a sole bundle is never shed."""
    c = Cluster(
        brokers={"broker-1": B(bw_in=(999, 1000), bw_out=(999, 1000))},
        bundles={"bundle-1": Bd(owner="broker-1", short=thr(1000))},
    )
    s = OverloadShedder()
    assert s.find_bundles_for_unloading(c.build(), conf()) == []
    assert s.skip_reason() == "SoleBundle"


def test_broker_with_multiple_bundles() -> None:
    """OverloadShedderTest#testBrokerWithMultipleBundles: need = 110 MiB/s * (0.999 - 0.85 + 0.05) = 21.9 MiB/s;
    bundle-10 (20) then bundle-9 (18) cross it; another-broker's bundles are not touched."""
    out = OverloadShedder().find_bundles_for_unloading(ten_bundle_broker().build(), conf())
    assert by_broker(out) == {"broker-1": ["bundle-10", "bundle-9"]}
    assert out[0].details["required"] == pytest.approx(110 * MB * (0.999 - 0.85 + 0.05), rel=1e-6)
    assert out[0].details["bundleLoad"] == 20 * MB


def test_filter_recently_unloaded() -> None:
    """OverloadShedderTest#testFilterRecentlyUnloaded: bundle-10 and bundle-9 are skipped."""
    c = ten_bundle_broker(recent=("bundle-10", "bundle-9"), other=False)
    out = OverloadShedder().find_bundles_for_unloading(c.build(), conf())
    assert by_broker(out) == {"broker-1": ["bundle-8", "bundle-7"]}


def two_bundles(broker: B) -> Cluster:
    return Cluster(
        brokers={"b1": broker, "b2": B()},
        bundles={"x": Bd(owner="b1", short=thr(3 * MB)), "y": Bd(owner="b1", short=thr(1 * MB))},
    )


def test_equality_counts_as_overloaded() -> None:
    """OverloadShedder skips only ``usage < threshold``: cpu 85/100 weighs exactly 0.85 (4.x weighted max)."""
    at = two_bundles(B(cpu=pct(85), thr_in=MB, thr_out=MB))
    below = two_bundles(B(cpu=pct(84.99), thr_in=MB, thr_out=MB))
    assert by_broker(OverloadShedder().find_bundles_for_unloading(at.build(), conf())) == {"b1": ["x"]}
    assert OverloadShedder().find_bundles_for_unloading(below.build(), conf()) == []


def test_no_minimum_throughput_gate() -> None:
    """Unlike ThresholdShedder there is no minimum: a broker moving 2 bytes/s still sheds its largest bundle."""
    c = two_bundles(B(cpu=pct(95), thr_in=1, thr_out=1))
    out = OverloadShedder().find_bundles_for_unloading(c.build(), conf())
    assert by_broker(out) == {"b1": ["x"]}
    assert out[0].details["required"] == pytest.approx(2 * (0.95 - 0.85 + 0.05), rel=1e-6)


@pytest.mark.parametrize(
    "version,resource,overloaded",
    [
        ("4.x", "direct_memory", False),  # PIP-358 weighted max, directMemory weight 0
        ("3.x", "direct_memory", True),  # getMaxResourceUsage(): cpu, directMemory, bandwidth
        ("3.x", "memory", False),  # memory dropped from getMaxResourceUsage() by #19559
        ("2.11", "memory", True),  # memory still counted up to 2.11
    ],
)
def test_usage_function_per_version(version: str, resource: str, overloaded: bool) -> None:
    """Spec §1.2 caller table: OverloadShedder's usage function depends on the version profile."""
    broker = B(cpu=pct(10), thr_in=MB, thr_out=MB)
    setattr(broker, resource, pct(95))
    out = OverloadShedder().find_bundles_for_unloading(two_bundles(broker).build(), conf(pulsarVersion=version))
    assert bool(out) is overloaded


def test_ranking_uses_short_term_data_and_ties_keep_name_order() -> None:
    """selectLargestFirst ranks by shortTermData throughput (not long-term); equal values keep sorted-name order."""
    c = Cluster(
        brokers={"b1": B(cpu=pct(99), thr_in=50 * MB, thr_out=50 * MB), "b2": B()},
        bundles={
            "a-long-heavy": Bd(owner="b1", short=thr(1 * MB), long=thr(90 * MB)),
            "b-tie": Bd(owner="b1", short=thr(5 * MB)),
            "c-tie": Bd(owner="b1", short=thr(5 * MB)),
        },
    )
    # need = 100 MiB * 0.19 = 19 MiB: b-tie (10), c-tie (20) crosses it.
    out = OverloadShedder().find_bundles_for_unloading(c.build(), conf())
    assert by_broker(out) == {"b1": ["b-tie", "c-tie"]}


@pytest.mark.parametrize(
    ("line", "expected"),
    [("4.0", "pulsar/system/0x00000000_0xffffffff"), ("3.0", "pulsar/system/0x00000000_0xffffffff"),
     ("2.11", "small"), ("2.10", "pulsar/system/0x00000000_0xffffffff")],
)
def test_shedding_candidates_follow_the_lines_namespace_filter(line: str, expected: str) -> None:
    """getBundleDataForLoadShedding: only bundles with BundleData; heartbeat (v1, v2) and SLA-monitor namespaces
    are left out on every line, ``pulsar/system`` only on 2.11 (isSystemServiceNamespace there; 3.0+ filter with
    isSLAOrHeartbeatNamespace, 2.10's isSystemServiceNamespace has no pulsar/system)."""
    c = Cluster(
        brokers={"b1": B(cpu=pct(99), thr_in=50 * MB, thr_out=50 * MB), "b2": B()},
        bundles={
            "no-data": Bd(owner="b1"),
            "pulsar/c1/b1:8080/0x00000000_0xffffffff": Bd(owner="b1", short=thr(60 * MB)),
            "pulsar/b1:8080/0x00000000_0xffffffff": Bd(owner="b1", short=thr(55 * MB)),
            "sla-monitor/c1/b1:8080/0x00000000_0xffffffff": Bd(owner="b1", short=thr(50 * MB)),
            "pulsar/system/0x00000000_0xffffffff": Bd(owner="b1", short=thr(40 * MB)),
            "small": Bd(owner="b1", short=thr(1 * MB)),
        },
    )
    out = OverloadShedder().find_bundles_for_unloading(c.build(), conf(pulsarVersion=line))
    assert [u.bundle for u in out] == [name(expected)]
