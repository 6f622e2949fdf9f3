"""Extensible BrokerLoadData: update, max usage without memory, weighted EMA, msgThroughputEMA (PULSAR-LB-SPEC §7.1)."""

from __future__ import annotations

import numpy as np
import pytest

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.broker_load_data import BrokerLoadData, max_resource_usage, weighted_max_usage

NOW = 1_700_000_000_000


def _conf() -> PulsarConfig:
    return PulsarConfig.resolve({
        "loadBalancerCPUResourceWeight": 0.5,
        "loadBalancerMemoryResourceWeight": 0.5,
        "loadBalancerDirectMemoryResourceWeight": 0.5,
        "loadBalancerBandwidthInResourceWeight": 0.5,
        "loadBalancerBandwidthOutResourceWeight": 0.5,
        "loadBalancerHistoryResourcePercentage": 0.75,
    })


def _update(data: BrokerLoadData, usage: list[float], limit: list[float], vals: list[float], now: int) -> None:
    data.update(np.array([0]), np.array([usage]), np.array([limit]), [vals[0]], [vals[1]], [vals[2]], [vals[3]],
                [int(vals[4])], [int(vals[5])], now, _conf())


def test_update_by_system_resource_usage() -> None:
    """BrokerLoadDataTest#testUpdateBySystemResourceUsage.

    First update: cpu 1 %, memory 400 %, dm 2 %, in 3 %, out 4 %; maxResourceUsage skips memory -> 0.04 exactly;
    weightedMaxEMA = max(..., 400*0.5, ...)/100 = 2 (raw, first update); msgThroughputEMA = 1 + 2 = 3.
    Second update: cpu 300 %, memory 100 %: maxResourceUsage 3.0; weightedMaxEMA = 2*0.75 + 0.25*1.5 = 1.875;
    msgThroughputEMA = 3*0.75 + 0.25*11 = 5.
    """
    data = BrokerLoadData.empty(1)
    assert data.weighted_max_ema[0] == 1.0 and data.max_resource_usage[0] == 1.0 and data.updated_at[0] == 0
    _update(data, [1.0, 800.0, 2.0, 3.0, 4.0], [100.0, 200.0, 100.0, 100.0, 100.0], [1, 2, 3, 4, 5, 6], NOW)
    assert data.msg_throughput_in[0] == 1.0 and data.msg_throughput_out[0] == 2.0
    assert data.msg_rate_in[0] == 3.0 and data.msg_rate_out[0] == 4.0
    assert data.bundle_count[0] == 5 and data.topics[0] == 6
    assert data.max_resource_usage[0] == 0.04
    assert data.weighted_max_ema[0] == 2.0
    assert data.msg_throughput_ema[0] == 3.0
    assert data.updated_at[0] == NOW

    _update(data, [300.0, 200.0, 2.0, 3.0, 4.0], [100.0, 200.0, 100.0, 100.0, 100.0], [5, 6, 7, 8, 9, 10], NOW + 5000)
    assert data.max_resource_usage[0] == 3.0
    assert data.weighted_max_ema[0] == 1.875
    assert data.msg_throughput_ema[0] == 5.0
    assert data.bundle_count[0] == 9 and data.topics[0] == 10
    assert data.updated_at[0] == NOW + 5000 and data.reported_at[0] == 0

    data.clear(np.array([0]))
    fresh = BrokerLoadData.empty(1)
    for name in BrokerLoadData.__dataclass_fields__:
        assert np.array_equal(getattr(data, name), getattr(fresh, name)), name


def test_update_by_broker_load_data() -> None:
    """BrokerLoadDataTest#testUpdateByBrokerLoadData: copying another BrokerLoadData gives an equal object."""
    other = BrokerLoadData.empty(1)
    _update(other, [1.0, 800.0, 2.0, 3.0, 4.0], [100.0, 200.0, 100.0, 100.0, 100.0], [1, 2, 3, 4, 5, 6], NOW)
    data = BrokerLoadData.empty(1)
    data.copy_rows(np.array([0]), other, np.array([0]))
    for name in BrokerLoadData.__dataclass_fields__:
        assert np.array_equal(getattr(data, name), getattr(other, name)), name


def test_vectorized_update_seeds_only_new_rows() -> None:
    """updateWeightedMaxEMA: rows with updatedAt == 0 take the raw value, the others step the EWMA (h = 0.75).

    Row 0 was updated before with weighted max 0.5; a new raw 0.1 gives 0.5*0.75 + 0.1*0.25 = 0.4.
    Row 1 is new and takes 0.1 as is.
    """
    conf = PulsarConfig.resolve({"loadBalancerHistoryResourcePercentage": 0.75})
    data = BrokerLoadData.empty(2)
    lim = np.full((1, 5), 100.0)
    data.update(np.array([0]), np.array([[50.0, 0, 0, 0, 0]]), lim, [0.0], [0.0], [0.0], [0.0], [0], [0], NOW, conf)
    u = np.array([[10.0, 0, 0, 0, 0], [10.0, 0, 0, 0, 0]])
    data.update(np.array([0, 1]), u, np.full((2, 5), 100.0), [10.0, 10.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0],
                [1, 1], [1, 1], NOW + 5000, conf)
    assert data.weighted_max_ema == pytest.approx([0.4, 0.1], abs=1e-12)
    assert data.msg_throughput_ema.tolist() == [2.5, 10.0]


def test_max_resource_usage_excludes_memory_and_weights_include_it() -> None:
    """updateMaxResourceUsage skips memory (#19559); the 5-weight max uses loadBalancerMemoryResourceWeight,
    0 by default in 4.x, 1.0 in the 3.x profile: memory 90 % -> weighted 0.9 (3.x) vs cpu 20 % -> 0.2 (4.x)."""
    usage = np.array([[20.0, 90.0, 0.0, 0.0, 0.0]])
    limit = np.full((1, 5), 100.0)
    assert max_resource_usage(usage, limit)[0] == pytest.approx(0.2, abs=1e-7)
    assert weighted_max_usage(usage, limit, PulsarConfig.resolve({}))[0] == pytest.approx(0.2, abs=1e-7)
    assert weighted_max_usage(usage, limit, PulsarConfig.resolve({"pulsarVersion": "3.x"}))[0] == pytest.approx(0.9, abs=1e-6)


def test_percent_usage_is_float32() -> None:
    """ResourceUsage.percentUsage is float: 30/100 -> 30.000001907348633 %, so the load is 0.30000001907348633
    (this is what makes TransferShedderTest#testTargetStd's average 0.2000000063578288)."""
    assert max_resource_usage(np.array([[30.0, 0, 0, 0, 0]]), np.full((1, 5), 100.0))[0] == 0.30000001907348633
