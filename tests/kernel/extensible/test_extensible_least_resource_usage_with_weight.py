"""Extensible LeastResourceUsageWithWeight.select (PULSAR-LB-SPEC §7.4), ported from Pulsar's
extensions.strategy.LeastResourceUsageWithWeightTest (commit 0524997).

Fixture port: conf weights cpu 1.0, memory 0.1, direct memory 0.1, bandwidth in/out 1.0, history 0.5,
loadBalancerAverageResourceUsageDifferenceThresholdPercentage 5; ``createBrokerData(usage, 100)`` is a fresh
BrokerLoadData updated once with every resource at ``usage`` %, ``updateLoad`` steps an existing one (EWMA).
"""

from __future__ import annotations

import numpy as np
import pytest

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.extensible.least_resource_usage_with_weight import LeastResourceUsageWithWeight, best_brokers

NOW = 1_700_000_000_000
CONF = PulsarConfig.resolve({
    "loadBalancerCPUResourceWeight": 1.0,
    "loadBalancerMemoryResourceWeight": 0.1,
    "loadBalancerDirectMemoryResourceWeight": 0.1,
    "loadBalancerBandwidthInResourceWeight": 1.0,
    "loadBalancerBandwidthOutResourceWeight": 1.0,
    "loadBalancerHistoryResourcePercentage": 0.5,
    "loadBalancerAverageResourceUsageDifferenceThresholdPercentage": 5,
})
IDS = ["1", "2", "3", "4", "5"]


def _ctx() -> ExtensibleContext:
    return ExtensibleContext.build(NOW, {}, None, IDS)


def _create(ctx: ExtensibleContext, broker: str, usage: float) -> None:
    """``createBrokerData``: replace the broker's entry with a fresh BrokerLoadData updated once."""
    i = ctx.index(broker)
    ctx.load.clear(np.array([i]))
    _update(ctx, broker, usage)
    ctx.has_load_data[i] = True


def _update(ctx: ExtensibleContext, broker: str, usage: float) -> None:
    """``updateLoad``: BrokerLoadData.update with every resource at ``usage`` %."""
    i = ctx.index(broker)
    ctx.load.update(np.array([i]), np.full((1, 5), usage), np.full((1, 5), 100.0), [1.0], [1.0], [1.0], [1.0],
                    [1], [1], NOW, CONF)


def _remove(ctx: ExtensibleContext, broker: str) -> None:
    ctx.has_load_data[ctx.index(broker)] = False


def _mask(ctx: ExtensibleContext, brokers: list[str]) -> np.ndarray:
    m = np.zeros(len(ctx), dtype=bool)
    for b in brokers:
        m[ctx.index(b)] = True
    return m


def _setup() -> ExtensibleContext:
    ctx = _ctx()
    for b, u in zip(["1", "2", "3", "4"], [10, 30, 60, 5]):
        _create(ctx, b, u)
    return ctx


def _pick(ctx: ExtensibleContext, cands: list[str], seed: int = 0) -> str:
    row = LeastResourceUsageWithWeight().select(_mask(ctx, cands), ctx, CONF, np.random.default_rng(seed))
    return ctx.broker_ids[row]


def test_select() -> None:
    """LeastResourceUsageWithWeightTest#testSelect, candidates {1, 2, 3} (broker 4 at 5 % is not a candidate):
    1. loads 0.1/0.3/0.6, avg 1/3: only 0.1 + 0.05 <= avg -> "1";
    2. fresh 0.2/0.3/0.5 -> "1";
    3. EWMA (h 0.5) with 30/30/40 -> 0.25/0.3/0.45 -> "1"; again -> 0.275/0.3/0.425 -> "1";
    4. 35/20/45 -> 0.3125/0.25/0.4375: only "2" (0.30 <= 0.3333);
    5. 35/20 and a restarted broker 3 at 0 -> 0.33125/0.225/0.0, avg 0.1854: only "3"."""
    ctx = _setup()
    cands = ["1", "2", "3"]
    assert _pick(ctx, cands) == "1"
    for b, u in zip(cands, [20, 30, 50]):
        _create(ctx, b, u)
    assert _pick(ctx, cands) == "1"
    for _ in range(2):
        for b, u in zip(cands, [30, 30, 40]):
            _update(ctx, b, u)
        assert _pick(ctx, cands) == "1"
    for b, u in zip(cands, [35, 20, 45]):
        _update(ctx, b, u)
    assert ctx.load.weighted_max_ema[:3] == pytest.approx([0.3125, 0.25, 0.4375], abs=1e-6)  # float32 percents
    assert _pick(ctx, cands) == "2"
    _update(ctx, "1", 35)
    _update(ctx, "2", 20)
    _create(ctx, "3", 0)
    assert _pick(ctx, cands) == "3"


def test_arithmetic_exception() -> None:
    """#testArithmeticException: weightedMaxEMA 0.1 / 0.3 / 0.6 for candidates 1, 2, 3 -> "1"."""
    ctx = _setup()
    ctx.load.weighted_max_ema[[0, 1, 3]] = [0.1, 0.3, 0.05]
    assert _pick(ctx, ["1", "2", "3"]) == "1"


def test_no_load_data_brokers() -> None:
    """#testNoLoadDataBrokers: candidates 1 (50 %), 2 (100 %), 5 (no data): avg over brokers with data 0.75 ->
    "1". With 1 also at 100 % nobody is below avg - 5 % -> uniform over all candidates, no-data broker included;
    likewise when no candidate has data."""
    ctx = _setup()
    _create(ctx, "1", 50)
    _create(ctx, "2", 100)
    _remove(ctx, "3")
    _remove(ctx, "4")
    cands = ["1", "2", "5"]
    assert _pick(ctx, cands) == "1"
    _create(ctx, "1", 100)
    assert best_brokers(_mask(ctx, cands), ctx, CONF).tolist() == [0, 1, 4]
    picks = {_pick(ctx, cands, seed) for seed in range(40)}
    assert picks == {"1", "2", "5"}
    _remove(ctx, "1")
    _remove(ctx, "2")
    assert best_brokers(_mask(ctx, cands), ctx, CONF).tolist() == [0, 1, 4]


def test_empty_candidates() -> None:
    """select with no candidates -> Optional.empty() (-1)."""
    ctx = _setup()
    assert LeastResourceUsageWithWeight().select(np.zeros(len(ctx), dtype=bool), ctx, CONF,
                                                 np.random.default_rng(0)) == -1


def test_ties_drawn_uniformly_with_the_given_generator() -> None:
    """Several best brokers: the pick is ``best[rng.integers(len(best))]`` — reproducible for a seed."""
    ctx = _ctx()
    for b, u in zip(IDS, [10, 10, 90, 90, 90]):
        _create(ctx, b, u)
    cands = IDS
    assert best_brokers(_mask(ctx, cands), ctx, CONF).tolist() == [0, 1]
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    sel = LeastResourceUsageWithWeight()
    a = [sel.select(_mask(ctx, cands), ctx, CONF, rng_a) for _ in range(20)]
    expected = [[0, 1][int(rng_b.integers(2))] for _ in range(20)]
    assert a == expected and set(a) == {0, 1}
