"""LeastResourceUsageWithWeight, modular (lbreplay.kernel.least_resource_usage_with_weight)."""

from __future__ import annotations

import numpy as np
import pytest

from lbreplay.kernel.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from tests.kernel.placement_fixtures import Br, Bu, World, conf, rows

ALL5 = (0, 1, 2, 3, 4)


def _test_conf():
    """ModularLoadManagerStrategyTest's ServiceConfiguration for the LRUWW cases."""
    return conf(
        loadBalancerCPUResourceWeight=1.0,
        loadBalancerMemoryResourceWeight=0.1,
        loadBalancerDirectMemoryResourceWeight=0.1,
        loadBalancerBandwithInResourceWeight=1.0,
        loadBalancerBandwithOutResourceWeight=1.0,
        loadBalancerHistoryResourcePercentage=0.5,
        loadBalancerAverageResourceUsageDifferenceThresholdPercentage=5,
    )


def _world(usages: dict[str, float], idle: tuple[str, ...] = ()) -> World:
    """initBrokerData(usage, 100): every resource at ``usage``%, msgRateIn/Out 100, one bundle."""
    return World(
        brokers={b: Br(usage=u, resources=ALL5, rate_in=100, rate_out=100) for b, u in usages.items()},
        bundles={f"{b}/ns/0x00000000_0xffffffff": Bu(owner=b) for b in usages if b not in idle},
    )


def _pick(strategy: LeastResourceUsageWithWeight, ld, ids, c, seed: int = 0) -> str:
    return ld.brokers.ids[strategy.select_broker(rows(ld, *ids), "t/n/0x00000000_0xffffffff", ld, c, np.random.default_rng(seed))]


def test_least_resource_usage_with_weight_sequence() -> None:
    """ModularLoadManagerStrategyTest#testLeastResourceUsageWithWeight (h=0.5, diff=5%): EWMAs
    1:.10 2:.30 3:.60 -> avg .333 -> "1"; then 20/30/50 -> "1"; 30/30/40 twice -> "1"; 35/20/45 -> "2"
    (EWMA .306/.25/.444, avg .333); broker 3 restarted (no bundles, 0%) resets to 0 -> "3"."""
    c = _test_conf()
    s = LeastResourceUsageWithWeight()
    ld = _world({"1": 10, "2": 30, "3": 60, "4": 5}).build()
    s.select_broker(rows(ld, "1", "2", "3", "4"), "x/y/0x00000000_0xffffffff", ld, c, np.random.default_rng(0))
    assert s.ema["4"] == pytest.approx(0.05)
    assert _pick(s, ld, ("1", "2", "3"), c) == "1"
    for usages, expected in (
        ({"1": 20, "2": 30, "3": 50, "4": 5}, "1"),
        ({"1": 30, "2": 30, "3": 40, "4": 5}, "1"),
        ({"1": 30, "2": 30, "3": 40, "4": 5}, "1"),
        ({"1": 35, "2": 20, "3": 45, "4": 5}, "2"),
    ):
        ld = _world(usages).build()
        assert _pick(s, ld, ("1", "2", "3"), c) == expected
    assert s.ema["1"] == pytest.approx(0.30625) and s.ema["2"] == pytest.approx(0.25)
    ld = _world({"1": 35, "2": 20, "3": 0, "4": 5}, idle=("3",)).build()
    assert _pick(s, ld, ("1", "2", "3"), c) == "3"
    assert s.ema["3"] == 0.0


def test_preset_history() -> None:
    """ModularLoadManagerStrategyTest#testLeastResourceUsageWithWeightWithArithmeticException: history
    {1:.1, 2:.3, 4:.05}, candidates 1,2,3 at 10/30/60% -> "1"."""
    c = _test_conf()
    s = LeastResourceUsageWithWeight()
    s.set_state({"brokerAvgResourceUsageWithWeight": {"1": 0.1, "2": 0.3, "4": 0.05}})
    ld = _world({"1": 10, "2": 30, "3": 60, "4": 5}).build()
    assert _pick(s, ld, ("1", "2", "3"), c) == "1"
    assert s.ema["4"] == 0.05  # not a candidate: untouched


def test_ewma_advances_on_every_call_with_same_input() -> None:
    """updateAndGetMaxResourceUsageWithWeight runs per selectBroker call: with h=0.9 a history of 0.2 and a
    constant 50% load give 0.23 then 0.257 (PULSAR-LB-SPEC.md §4.3: a burst advances the EWMA per call)."""
    c = conf()
    s = LeastResourceUsageWithWeight()
    s.set_state({"brokerAvgResourceUsageWithWeight": {"a": 0.2}})
    ld = _world({"a": 50}).build()
    _pick(s, ld, ("a",), c)
    assert s.ema["a"] == pytest.approx(0.23)
    _pick(s, ld, ("a",), c)
    assert s.ema["a"] == pytest.approx(0.257)


def test_idle_broker_resets_history() -> None:
    """A broker reporting msgRateIn == msgRateOut == 0 restarts from its current usage."""
    c = conf()
    s = LeastResourceUsageWithWeight()
    s.set_state({"brokerAvgResourceUsageWithWeight": {"a": 0.9}})
    w = _world({"a": 10})
    w.brokers["a"].rate_in = w.brokers["a"].rate_out = 0
    _pick(s, w.build(), ("a",), c)
    assert s.ema["a"] == pytest.approx(0.1)


def test_two_candidates_need_twice_the_difference() -> None:
    """With 2 candidates the lower qualifies only when the gap is >= 2 x diff (0.2): 30/49 -> random among both,
    30/51 -> always the 30% broker."""
    c = conf()
    ld = _world({"a": 30, "b": 49}).build()
    assert {_pick(LeastResourceUsageWithWeight(), ld, ("a", "b"), c, seed) for seed in range(40)} == {"a", "b"}
    ld = _world({"a": 30, "b": 51}).build()
    assert {_pick(LeastResourceUsageWithWeight(), ld, ("a", "b"), c, seed) for seed in range(40)} == {"a"}


def test_state_roundtrip_prune_and_empty() -> None:
    """get_state/set_state thread the EWMA map; onActiveBrokersChange prunes dead brokers; no candidates -> -1."""
    s = LeastResourceUsageWithWeight()
    s.set_state({"brokerAvgResourceUsageWithWeight": {"a": 0.5, "b": 0.25}})
    s.on_active_brokers_change({"b"})
    assert s.get_state() == {"brokerAvgResourceUsageWithWeight": {"b": 0.25}}
    ld = _world({"a": 1}).build()
    assert s.select_broker(np.array([], dtype=np.int64), "t/n/x", ld, conf(), np.random.default_rng(0)) == -1


def test_the_all_overloaded_fallback_records_every_candidate_and_a_best_set_its_rows() -> None:
    """``LeastResourceUsageWithWeight.selectBroker``: no broker 5 % below the candidates' average -> "Assign randomly
    as all brokers are overloaded": the draw is among every candidate, and the strategy records them all; a best
    set of two records those two; a single best broker records none."""
    c = _test_conf()
    ld = _world({"1": 30, "2": 30, "3": 30}).build()
    s = LeastResourceUsageWithWeight()
    s.select_broker(rows(ld, "3", "1", "2"), "t/n/0x00000000_0xffffffff", ld, c, np.random.default_rng(0))
    assert [ld.brokers.ids[r] for r in s.drawn] == ["1", "2", "3"]
    s = LeastResourceUsageWithWeight()
    ld = _world({"1": 10, "2": 10, "3": 60}).build()
    assert _pick(s, ld, ("1", "2", "3"), c) in {"1", "2"}
    assert [ld.brokers.ids[r] for r in s.drawn] == ["1", "2"]
    s = LeastResourceUsageWithWeight()
    ld = _world({"1": 10, "2": 50, "3": 60}).build()
    assert (_pick(s, ld, ("1", "2", "3"), c), s.drawn) == ("1", None)
