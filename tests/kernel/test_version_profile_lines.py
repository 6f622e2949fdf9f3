"""Version switches of the released Pulsar lines (kernel/version_profile.py), each against the source of the
Pulsar class and release that decides it. The oracle proves every line against its jar
(tests/pulsar_oracle/test_lines.py); these tests pin each switch on a small hand-made case."""

from __future__ import annotations

import numpy as np
import pytest

from lbreplay.kernel.config import PulsarConfig, versions
from lbreplay.kernel.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from lbreplay.kernel.threshold_shedder import ThresholdShedder
from lbreplay.kernel.uniform_load_shedder import UniformLoadShedder
from lbreplay.kernel.version_profile import ALIASES, PROFILES, profile_for
from lbreplay.verify import PULSAR_LINES
from tests.kernel.fixtures import MB, B, Bd, Cluster, by_broker, conf, thr
from tests.kernel.test_uniform_load_shedder import five_brokers


def test_lines_and_aliases() -> None:
    """pulsarVersion names the released lines; "4.x" / "3.x" are the newest checked 4.x / 3.x line; the default
    is the newest released line checked by the oracle (never a milestone: 5.0 is checked on 5.0.0-M1)."""
    assert set(PULSAR_LINES) <= set(PROFILES)
    assert profile_for("4.x") is PROFILES["4.2"] and profile_for("3.x") is PROFILES["3.3"]
    assert PulsarConfig.resolve({"pulsarVersion": "4.x"})["pulsarVersion"] == "4.x"
    assert PulsarConfig.resolve({"pulsarVersion": "3.x"})["loadBalancerMemoryResourceWeight"] == 1.0
    assert set(ALIASES) <= set(versions())
    released = [line for line, (jar, _, _) in PULSAR_LINES.items() if "-" not in jar]
    newest = max(released, key=lambda v: tuple(int(x) for x in v.split(".")))
    assert PulsarConfig.resolve({})["pulsarVersion"] == newest == "4.2"


def test_bandwidth_weight_keys_pip357() -> None:
    """ServiceConfiguration.getLoadBalancerBandwidthInResourceWeight (PIP-357, apache/pulsar#22824, 4.0.0): the new
    spelling wins unless it is 1.0; 3.3.6's ServiceConfiguration has only loadBalancerBandwithInResourceWeight
    (ThresholdShedder.updateAvgResourceUsage reads it), so the new spelling does nothing there."""
    new = {"loadBalancerBandwidthInResourceWeight": 0.5}
    old = {"loadBalancerBandwithInResourceWeight": 0.25}
    assert PulsarConfig.resolve({"pulsarVersion": "4.0", **new}).bandwidth_in_weight() == 0.5
    assert PulsarConfig.resolve({"pulsarVersion": "3.3", **new}).bandwidth_in_weight() == 1.0
    assert PulsarConfig.resolve({"pulsarVersion": "3.3", **old}).bandwidth_in_weight() == 0.25
    assert PulsarConfig.resolve({"pulsarVersion": "4.0", **old}).bandwidth_in_weight() == 0.25


def _shed_uniform(c: Cluster, **keys: object) -> dict[str, list[str]]:
    return by_broker(UniformLoadShedder().find_bundles_for_unloading(c.build(), conf(**keys)))


def test_uniform_coupled_extremes_before_21025() -> None:
    """UniformLoadShedder.findBundlesForUnloading of 2.11.0: a broker becomes "overloaded" when its rate OR its
    throughput beats the running max (apache/pulsar#21016's five brokers, visited in sorted order): broker4
    (20000 msg/s, 10 MB/s) ends as both max and min, so nothing is shed; after #21025 (3.0.2+, 2.11.3) the rate
    path picks broker2, the highest rate."""
    c = five_brokers()  # UniformLoadShedderTest#testOverloadBrokerSelect fixture
    keys = {"maxUnloadBundleNumPerShedding": 1, "maxUnloadPercentage": 0.5,
            "loadBalancerMsgRateDifferenceShedderThreshold": 50,
            "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 0}
    assert _shed_uniform(c, pulsarVersion="2.11", **keys) == {}
    assert list(_shed_uniform(c, pulsarVersion="4.2", **keys)) == ["broker2"]


def test_uniform_2_10_constants() -> None:
    """UniformLoadShedder of 2.10.5: MAX_UNLOAD_PERCENTAGE = 0.2 whatever maxUnloadPercentage says (read from
    2.11.0 on). broker-1 (bundles of 2i MiB/s, 110 MiB/s in total) vs broker-2 (two idle bundles): with 0.5,
    2.11 needs (int) ((110 MiB - 1) * 0.5) and takes bundle-10, -9, -8; 2.10 needs 0.2 of it and takes bundle-10."""
    c = Cluster()
    for i in range(1, 11):
        c.bundles[f"bundle-{i}"] = Bd(owner="broker-1", short=thr(i * MB))
    c.brokers["broker-1"] = B(thr_in=55 * MB, thr_out=55 * MB)
    c.bundles["idle-1"] = Bd(owner="broker-2", short=thr(0.0))
    c.bundles["idle-2"] = Bd(owner="broker-2", short=thr(0.0))
    c.brokers["broker-2"] = B()
    keys = {"maxUnloadPercentage": 0.5, "loadBalancerMsgRateDifferenceShedderThreshold": 0}
    assert sorted(_shed_uniform(c, pulsarVersion="2.11", **keys)["broker-1"]) == ["bundle-10", "bundle-8", "bundle-9"]
    assert _shed_uniform(c, pulsarVersion="2.10", **keys) == {"broker-1": ["bundle-10"]}


def test_threshold_lower_boundary_since_2_11() -> None:
    """ThresholdShedder.tryLowerBoundaryShedding (apache/pulsar#17456, 2.11.0) calls getBrokerAvgUsage again, so
    with lowerBoundarySheddingEnabled and nothing shed the EWMA advances twice per tick; 2.10.5 has no such pass.
    cpu 50 % then 60 % with history 0.5: 2.10 -> 0.55; 2.11 -> 0.5 * 0.55 + 0.5 * 0.6 = 0.575."""
    got = {}
    for version in ("2.10", "2.11"):
        c = conf(pulsarVersion=version, lowerBoundarySheddingEnabled=True, loadBalancerHistoryResourcePercentage=0.5,
                 loadBalancerCPUResourceWeight=1.0)
        shedder = ThresholdShedder()
        for cpu in (50.0, 60.0):
            cl = Cluster()
            cl.brokers["a"] = B(cpu=(cpu, 100.0))
            cl.brokers["b"] = B(cpu=(cpu, 100.0))
            shedder.find_bundles_for_unloading(cl.build(), c)
        got[version] = shedder.get_state()["brokerAvgResourceUsage"]["a"]
    assert got["2.10"] == pytest.approx(0.55, rel=1e-6)
    assert got["2.11"] == pytest.approx(0.575, rel=1e-6)


def test_lruw_idle_restart_since_16766() -> None:
    """LeastResourceUsageWithWeight.updateAndGetMaxResourceUsageWithWeight: since apache/pulsar#16766 (3.0.0) a
    broker with no bundles or no message rate restarts from its current usage; 2.11.0 keeps the EWMA.
    cpu 80 % then 20 % (idle broker, history 0.9): 3.0 -> 0.2; 2.11 -> 0.9 * 0.8 + 0.1 * 0.2 = 0.74."""
    got = {}
    for version in ("2.11", "3.0"):
        c = conf(pulsarVersion=version, loadBalancerHistoryResourcePercentage=0.9, loadBalancerCPUResourceWeight=1.0)
        lruw = LeastResourceUsageWithWeight()
        for cpu in (80.0, 20.0):
            cl = Cluster()
            cl.brokers["a"] = B(cpu=(cpu, 100.0))
            value = lruw.update_usage(np.array([0]), cl.build(), c)
        got[version] = float(value[0])
    assert got["3.0"] == pytest.approx(0.2, rel=1e-6)
    assert got["2.11"] == pytest.approx(0.74, rel=1e-6)


def test_strategies_absent_from_a_line() -> None:
    """AvgShedder (PIP-364) is in 3.3.6 / 4.x, not 3.0.7; the extensible TransferShedder and RoundRobinBrokerSelector
    are in 3.0.0+; LeastResourceUsageWithWeight (#16281) in 2.11.0+ (checked: the classes of each jar)."""
    from lbreplay.verify import line_strategies

    assert "AvgShedder" not in line_strategies("3.0") and "AvgShedder" in line_strategies("3.3")
    assert "TransferShedder" not in line_strategies("2.11") and "TransferShedder" in line_strategies("3.0")
    assert "RoundRobinBrokerSelector" not in line_strategies("2.11")
    assert "LeastResourceUsageWithWeight" not in line_strategies("2.10")
    assert "LeastResourceUsageWithWeight" in line_strategies("2.11")


@pytest.mark.parametrize(("line", "forgets"), [("3.0", True), ("4.0", True), ("2.11", False), ("2.10", False)])
def test_active_brokers_change_hook(line: str, forgets: bool) -> None:
    """ModularLoadManagerImpl.cleanupDeadBrokersData calls LoadSheddingStrategy.onActiveBrokersChange since
    apache/pulsar#19560 (3.0.0): ThresholdShedder forgets the EWMA of a broker that left. 2.11 / 2.10 have no hook,
    so the departed broker's EWMA stays and resumes when it returns."""
    from lbreplay.kernel.modular_load_manager import ModularLoadManager
    from lbreplay.kernel.policies import NamespacePolicies

    c = PulsarConfig.resolve({"pulsarVersion": line, "loadBalancerLoadSheddingStrategy":
                              "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"})
    manager = ModularLoadManager(c, NamespacePolicies(), np.random.default_rng(0))
    assert isinstance(manager.shedder, ThresholdShedder)
    manager.shedder.broker_avg_resource_usage = {"b1:8080": 0.5, "b3:8080": 0.7}
    manager.cleanup_dead_brokers_data(["b1:8080", "b2:8080"])
    expected = {"b1:8080": 0.5} if forgets else {"b1:8080": 0.5, "b3:8080": 0.7}
    assert manager.shedder.broker_avg_resource_usage == expected
