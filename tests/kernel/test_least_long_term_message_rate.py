"""LeastLongTermMessageRate (lbreplay.kernel.least_long_term_message_rate)."""

from __future__ import annotations

import numpy as np

from lbreplay.kernel.least_long_term_message_rate import LeastLongTermMessageRate, long_term_message_rate_scores
from lbreplay.kernel.load_data import RATE_IN
from tests.kernel.placement_fixtures import Br, Bu, World, conf, rows


def _select(ld, *ids: str, seed: int = 0, c=None) -> str:
    strategy = LeastLongTermMessageRate()
    row = strategy.select_broker(rows(ld, *ids), "t/n/0x00000000_0xffffffff", ld, c or conf(), np.random.default_rng(seed))
    return ld.brokers.ids[row]


def test_least_long_term_message_rate() -> None:
    """ModularLoadManagerStrategyTest#testLeastLongTermMessageRate: TABD long-term msgRateIn 100/200/300 -> "1";
    broker 1 raised to 400 -> "2"; broker 2 at 90% CPU (above 85%) scores +inf -> "3"."""
    w = World(brokers={"1": Br(long_rate_in=100), "2": Br(long_rate_in=200), "3": Br(long_rate_in=300)})
    ld = w.build()
    assert _select(ld, "1", "2", "3") == "1"
    ld.tabd[1][0, RATE_IN] = 400
    assert _select(ld, "1", "2", "3") == "2"
    ld.brokers.usage[1, 0] = 90.0
    assert _select(ld, "1", "2", "3") == "3"
    assert np.isinf(long_term_message_rate_scores(ld, conf())[1])


def test_overload_is_strictly_above_threshold() -> None:
    """LeastLongTermMessageRate.getScore: ``maxUsage > overloadThreshold``; 85/100 in float32 is exactly 85%,
    so it is not overloaded, while 85.01% is."""
    ld = World(brokers={"a": Br(usage=85.0, long_rate_in=10), "b": Br(usage=85.01, long_rate_in=10)}).build()
    s = long_term_message_rate_scores(ld, conf())
    assert s[0] == 10.0 and np.isinf(s[1])


def test_all_overloaded_picks_uniformly_among_all() -> None:
    """selectBroker: +inf == +inf, so every overloaded broker ties; the pick is uniform among them."""
    ld = World(brokers={b: Br(usage=95.0, long_rate_in=r) for b, r in (("a", 1), ("b", 2), ("c", 3))}).build()
    picks = {_select(ld, "a", "b", "c", seed=s) for s in range(60)}
    assert picks == {"a", "b", "c"}


def test_ties_are_random_and_seeded() -> None:
    """Equal least scores -> uniform among them (ThreadLocalRandom in Pulsar; the seeded rng here)."""
    ld = World(brokers={"a": Br(long_rate_in=5), "b": Br(long_rate_in=5), "c": Br(long_rate_in=6)}).build()
    picks = [_select(ld, "a", "b", "c", seed=s) for s in range(60)]
    assert set(picks) == {"a", "b"}
    assert picks == [_select(ld, "a", "b", "c", seed=s) for s in range(60)]


def test_score_adds_preallocated_long_term_rates_and_derives_tabd() -> None:
    """getScore = sum(preallocated BundleData longTerm rateIn+rateOut) + TABD longTerm rateIn+rateOut. Without a
    stored TABD it is TimeAverageBrokerData.reset over the broker's bundles (default 50+50 for bundles without
    BundleData)."""
    w = World(
        brokers={"a": Br(), "b": Br()},
        bundles={
            "t/n/0x00000000_0x80000000": Bu(owner="a", long_rate=(30, 10)),
            "t/n/0x80000000_0xffffffff": Bu(owner="b"),  # no BundleData -> default 100 msg/s
            "t/m/0x00000000_0xffffffff": Bu(long_rate=(7, 8)),
        },
    )
    ld = w.build()
    assert list(long_term_message_rate_scores(ld, conf())) == [40.0, 100.0]
    ld.bundles.preallocated_to[ld.bundles.index("t/m/0x00000000_0xffffffff")] = 0
    assert list(long_term_message_rate_scores(ld, conf())) == [55.0, 100.0]


def test_no_candidates() -> None:
    ld = World(brokers={"a": Br()}).build()
    assert LeastLongTermMessageRate().select_broker(np.array([], dtype=np.int64), "t/n/x", ld, conf(), np.random.default_rng(0)) == -1


def test_pre_pip358_uses_max_resource_usage_not_weights() -> None:
    """Before PIP-358 (3.x profile) the overload check is getMaxResourceUsage(), which ignores weights; 4.x uses
    the weighted max, so a zero CPU weight hides a 95% CPU."""
    ld = World(brokers={"a": Br(usage=95.0, long_rate_in=1), "b": Br(long_rate_in=2)}).build()
    assert _select(ld, "a", "b", c=conf(pulsarVersion="3.x", loadBalancerCPUResourceWeight=0.0)) == "b"
    assert _select(ld, "a", "b", c=conf(loadBalancerCPUResourceWeight=0.0)) == "a"


def test_a_tie_records_the_set_drawn_from_and_a_single_best_none() -> None:
    """``LeastLongTermMessageRate.selectBroker``: ``bestBrokers.get(ThreadLocalRandom.current().nextInt(size))``
    draws only when several brokers share the least score; the strategy keeps the rows it drew among (ascending),
    and None when one broker is best (no draw, nothing consumed from the generator)."""
    ld = World(brokers={"a": Br(long_rate_in=5), "b": Br(long_rate_in=6), "c": Br(long_rate_in=5)}).build()
    s = LeastLongTermMessageRate()
    rng = np.random.default_rng(7)
    row = s.select_broker(rows(ld, "c", "b", "a"), "t/n/0x00000000_0xffffffff", ld, conf(), rng)
    assert s.drawn is not None and [ld.brokers.ids[r] for r in s.drawn] == ["a", "c"]
    assert ld.brokers.ids[row] in {"a", "c"}
    before = rng.bit_generator.state
    row = s.select_broker(rows(ld, "a", "b"), "t/n/0x00000000_0xffffffff", ld, conf(), rng)
    assert (ld.brokers.ids[row], s.drawn) == ("a", None) and rng.bit_generator.state == before
