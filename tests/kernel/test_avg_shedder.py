"""AvgShedder: ports of Pulsar's AvgShedderTest plus hit-count, guard and placement cases."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lbreplay.errors import UsageError
from lbreplay.kernel.avg_shedder import AvgShedder
from lbreplay.kernel.load_data import LoadData
from tests.kernel.fixtures import B, Bd, Cluster, by_broker, conf, label, name, pct, rate

HALF = {"maxUnloadPercentage": 0.5}


def rows(ld: LoadData, *ids: str) -> np.ndarray:
    return np.array([ld.brokers.index(b) for b in ids])


def three_brokers(cpu1: float, cpu2: float) -> Cluster:
    """AvgShedderTest fixture: broker1 (cpu1 %, 20000 msg/s, 11 bundles of 900 msg/s), broker2 (cpu2 %,
    2000 msg/s), broker3 in the middle (50 %, 10000 msg/s)."""
    c = Cluster(
        brokers={
            "broker1": B(cpu=pct(cpu1), rate_in=10000, rate_out=10000),
            "broker2": B(cpu=pct(cpu2), rate_in=1000, rate_out=1000),
            "broker3": B(cpu=pct(50), rate_in=5000, rate_out=5000),
        }
    )
    for i in range(11):
        c.bundles[f"bundle-{i}"] = Bd(owner="broker1", short=rate(450))
    return c


def assert_all_to(s: AvgShedder, ld: LoadData, out: list, source: str, target: str) -> None:
    everyone = np.arange(len(ld.brokers))
    rng = np.random.default_rng(0)
    for u in out:
        assert u.broker == source and u.destination == target
        assert ld.brokers.ids[s.select_broker(everyone, u.bundle, ld, conf(), rng)] == target


def test_hit_high_threshold() -> None:
    """AvgShedderTest#testHitHighThreshold: scores 80 / 30 (gap 50 >= 40) shed on the 2nd call:
    (20000 - 2000) * 0.5 = 9000 msg/s = ten 900 msg/s bundles, all planned for broker2."""
    ld = three_brokers(80, 30).build()
    s = AvgShedder()
    keys = {**HALF, "loadBalancerAvgShedderHighThreshold": 40, "loadBalancerAvgShedderHitCountHighThreshold": 2}
    assert s.find_bundles_for_unloading(ld, conf(**keys)) == []
    assert s.skip_reason() == "HitCount"
    out = s.find_bundles_for_unloading(ld, conf(**keys))
    assert len(out) == 10
    assert_all_to(s, ld, out, "broker1", "broker2")


def test_hit_low_threshold() -> None:
    """AvgShedderTest#testHitLowThreshold: scores 60 / 40 (gap 20 >= low 20, < high 40) shed on the 6th call."""
    ld = three_brokers(60, 40).build()
    s = AvgShedder()
    keys = {**HALF, "loadBalancerAvgShedderLowThreshold": 20, "loadBalancerAvgShedderHitCountLowThreshold": 6}
    for _ in range(5):
        assert s.find_bundles_for_unloading(ld, conf(**keys)) == []
    out = s.find_bundles_for_unloading(ld, conf(**keys))
    assert len(out) == 10
    assert_all_to(s, ld, out, "broker1", "broker2")


def test_shedding_multiple_pairs() -> None:
    """AvgShedderTest#testSheddingMultiplePairs: scores 30, 35, 75, 80 pair (broker2, broker1) and
    (broker4, broker3); each pair sheds ten bundles on the 2nd call, each to its own partner."""
    c = Cluster(
        brokers={
            "broker1": B(cpu=pct(80), rate_in=10000, rate_out=10000),
            "broker2": B(cpu=pct(30), rate_in=1000, rate_out=1000),
            "broker3": B(cpu=pct(75), rate_in=10000, rate_out=10000),
            "broker4": B(cpu=pct(35), rate_in=1000, rate_out=1000),
        }
    )
    for i in range(11):
        c.bundles[f"bundle1-{i}"] = Bd(owner="broker1", short=rate(450))
        c.bundles[f"bundle3-{i}"] = Bd(owner="broker3", short=rate(450))
    ld = c.build()
    s = AvgShedder()
    keys = {**HALF, "loadBalancerAvgShedderHighThreshold": 40, "loadBalancerAvgShedderHitCountHighThreshold": 2}
    assert s.find_bundles_for_unloading(ld, conf(**keys)) == []
    out = s.find_bundles_for_unloading(ld, conf(**keys))
    got = by_broker(out)
    assert sorted(got) == ["broker1", "broker3"] and len(got["broker1"]) == 10 and len(got["broker3"]) == 10
    assert_all_to(s, ld, [u for u in out if label(u.bundle).startswith("bundle1-")], "broker1", "broker2")
    assert_all_to(s, ld, [u for u in out if label(u.bundle).startswith("bundle3-")], "broker3", "broker4")


def pair(cpu_hi: float, cpu_lo: float = 10) -> Cluster:
    c = Cluster(brokers={"hi": B(cpu=pct(cpu_hi), rate_in=6000), "lo": B(cpu=pct(cpu_lo), rate_in=0)})
    c.bundles["h0"] = Bd(owner="hi", short=rate(500))
    c.bundles["h1"] = Bd(owner="hi", short=rate(250))
    return c


def test_small_gap_resets_hit_counts() -> None:
    """findBrokerPairs: a gap below the low threshold removes both brokers' counts, so a high gap must be seen
    on 2 consecutive calls again (gap 50, gap 5, gap 50 -> no shedding; a 4th call with gap 50 sheds)."""
    s = AvgShedder()
    assert s.find_bundles_for_unloading(pair(60).build(), conf()) == []
    assert s.find_bundles_for_unloading(pair(15).build(), conf()) == []
    assert s.get_state()["brokerHitCountForHigh"] == {} and s.skip_reason() == "Balanced"
    assert s.find_bundles_for_unloading(pair(60).build(), conf()) == []
    assert s.get_state()["brokerHitCountForHigh"] == {"hi": 1, "lo": 1}
    out = s.find_bundles_for_unloading(pair(60).build(), conf())
    # need (6000 - 0) * 0.2 = 1200 > 1000 msg/s: h0 (1000) fits, then h1 (500) exceeds the remaining 200.
    assert by_broker(out) == {"hi": ["h0"]}
    assert out[0].details["required"] == pytest.approx(1200.0)
    assert s.get_state()["brokerHitCountForHigh"] == {}


def test_low_band_resets_high_count_only() -> None:
    """A gap in [low, high) bumps the low count and drops the high count: 50, 30, 50 -> high count 1, low 3."""
    s = AvgShedder()
    for cpu in (60, 40, 60):
        s.find_bundles_for_unloading(pair(cpu).build(), conf())
    state = s.get_state()
    assert state["brokerHitCountForHigh"] == {"hi": 1, "lo": 1}
    assert state["brokerHitCountForLow"] == {"hi": 3, "lo": 3}


def test_sole_bundle_is_still_shed() -> None:
    """No "more than one bundle" guard: the high broker's only bundle goes if it fits the need."""
    c = Cluster(brokers={"hi": B(cpu=pct(90), rate_in=6000), "lo": B(cpu=pct(10))})
    c.bundles["only"] = Bd(owner="hi", short=rate(500))
    s = AvgShedder()
    s.find_bundles_for_unloading(c.build(), conf())
    assert by_broker(s.find_bundles_for_unloading(c.build(), conf())) == {"hi": ["only"]}


def test_throughput_mode_and_minimum_gates() -> None:
    """Message-rate need below minUnloadMessage falls back to throughput (> minUnloadMessageThroughput);
    both below -> skip ``MinUnload``."""
    c = Cluster(brokers={"hi": B(cpu=pct(90), rate_in=100, thr_in=20e6), "lo": B(cpu=pct(10))})
    c.bundles["big"] = Bd(owner="hi", short=(3e6, 0.0, 60.0, 0.0))
    c.bundles["small"] = Bd(owner="hi", short=(1e6, 0.0, 40.0, 0.0))
    s = AvgShedder()
    s.find_bundles_for_unloading(c.build(), conf())
    out = s.find_bundles_for_unloading(c.build(), conf())  # need 20e6 * 0.2 = 4e6 B/s: big + small
    assert by_broker(out) == {"hi": ["big", "small"]} and "msgThroughput" in out[0].reason
    c.brokers["hi"].thr_in = 5e6  # 1e6 B/s need, below 1 MiB/s
    s.find_bundles_for_unloading(c.build(), conf())
    assert s.find_bundles_for_unloading(c.build(), conf()) == []
    assert s.skip_reason() == "MinUnload"


def test_placement_fallback_is_uniform_among_sorted_candidates_and_cached() -> None:
    """AvgShedder.selectBroker (3.3.6 .. 5.0.0-M1 jars): without an entry in ``bundleBrokerMap`` the pick is
    random among the candidates (generator-driven, deterministic per seed), never outside them, and cached
    (``bundleBrokerMap.put``): the next call returns it while it is a candidate; no candidates -> -1."""
    c = Cluster(brokers={f"b{i}": B() for i in range(4)})
    ld = c.build()
    cand = rows(ld, "b1", "b3", "b2")
    picks = {AvgShedder().select_broker(cand, name("x"), ld, conf(), np.random.default_rng(seed))
             for seed in range(40)}
    assert picks == set(cand.tolist())
    s = AvgShedder()
    first = s.select_broker(cand, name("x"), ld, conf(), np.random.default_rng(7))
    assert s.get_state()["pendingTargets"] == {name("x"): ld.brokers.ids[first]}
    assert all(s.select_broker(cand, name("x"), ld, conf(), np.random.default_rng(seed)) == first
               for seed in range(20))
    others = np.array([r for r in cand.tolist() if r != first], dtype=np.int64)
    assert s.select_broker(others, name("x"), ld, conf(), np.random.default_rng(0)) in others.tolist()
    assert s.select_broker(np.array([], dtype=np.int64), name("y"), ld, conf(), np.random.default_rng(0)) == -1


def test_planned_target_needs_to_be_a_candidate_and_is_kept() -> None:
    """The shedding pass puts its planned destination into ``bundleBrokerMap``; a target that is not a candidate
    falls back (and the fallback is cached). Released jars never clear the map: neither
    ``onUnloadAttemptCompleted`` (the interface's no-op) nor the next shedding pass drops an entry
    (apache/pulsar#26246, which does, is in no release)."""
    c = pair(90)
    ld = c.build()
    s = AvgShedder()
    s.find_bundles_for_unloading(ld, conf())
    out = s.find_bundles_for_unloading(ld, conf())
    bundle = out[0].bundle
    assert s.get_state()["pendingTargets"] == {bundle: "lo"}
    s.on_unload_attempt_completed({bundle})
    assert s.get_state()["pendingTargets"] == {bundle: "lo"}
    s.find_bundles_for_unloading(ld, conf())  # first hit of a new round: nothing planned, the entry stays
    assert s.get_state()["pendingTargets"] == {bundle: "lo"}
    assert s.select_broker(rows(ld, "lo", "hi"), bundle, ld, conf(), np.random.default_rng(0)) == ld.brokers.index("lo")
    only_hi = rows(ld, "hi")
    assert s.select_broker(only_hi, bundle, ld, conf(), np.random.default_rng(0)) == ld.brokers.index("hi")
    assert s.get_state()["pendingTargets"] == {bundle: "hi"}


def test_state_round_trips_through_json() -> None:
    """Hit counts threaded through get_state/set_state continue where the previous instance stopped."""
    first = AvgShedder()
    first.find_bundles_for_unloading(pair(90).build(), conf())
    second = AvgShedder()
    second.set_state(json.loads(json.dumps(first.get_state())))
    assert by_broker(second.find_bundles_for_unloading(pair(90).build(), conf())) == {"hi": ["h0"]}


def test_odd_middle_broker_pairs_with_itself_and_ties_sort_by_id() -> None:
    """Five brokers: ranks 0/4 and 1/3 pair, the middle one pairs with itself (gap 0 < low) and gets no count;
    equal scores keep sorted-id order, so of two 80 % brokers the later id is the top rank."""
    c = Cluster(brokers={"a": B(cpu=pct(20)), "b": B(cpu=pct(80)), "c": B(cpu=pct(80)), "d": B(cpu=pct(50)),
                         "e": B(cpu=pct(20))})
    s = AvgShedder()
    s.find_bundles_for_unloading(c.build(), conf())
    assert s.stats()["pairs"] == [["a", "c"], ["e", "b"]]
    assert set(s.get_state()["brokerHitCountForLow"]) == {"a", "b", "c", "e"}


def test_not_available_before_3_3() -> None:
    """AvgShedder (PIP-364) does not exist in 2.x: configuring it is a usage error."""
    with pytest.raises(UsageError):
        AvgShedder().find_bundles_for_unloading(pair(90).build(), conf(pulsarVersion="2.11"))


def test_idle_bundles_are_not_shed() -> None:
    """selectBundleForUnloading takes a bundle only if ``traffic > 0 && traffic <= remaining`` (unlike
    UniformLoadShedder, which takes idle bundles too)."""
    c = pair(90)
    c.bundles["h2-idle"] = Bd(owner="hi", short=rate(0))
    s = AvgShedder()
    s.find_bundles_for_unloading(c.build(), conf())
    assert by_broker(s.find_bundles_for_unloading(c.build(), conf())) == {"hi": ["h0"]}


def test_4_0_comparator_truncates_score_differences() -> None:
    """AvgShedder.calculateScoresAndSort in 4.0.x sorts with ``(a, b) -> (int) (a - b)`` (4.0.7 bytecode: dsub,
    d2i): scores less than 1 apart compare equal, so [2.0, 1.5, 0.6] stays in input (sorted-id) order -- one
    ascending run for Java's TimSort -- where Double.compare gives [2, 1, 0]."""
    from lbreplay.kernel.avg_shedder import java_sort_int_difference

    assert java_sort_int_difference([2.0, 1.5, 0.6]) == [0, 1, 2]
    assert java_sort_int_difference([5.0, 0.5, 1.2]) == [1, 2, 0]  # descending run reversed, then binary insert
    assert java_sort_int_difference([3.0, 1.0, 2.0, 0.0]) == [3, 1, 2, 0]


def test_score_map_order_is_the_jvms_and_its_table_size_carries_over() -> None:
    """calculateScoresAndSort: brokerScoreMap is a HashMap field, cleared per call (its table keeps its largest
    size); equal scores keep its iteration order. 13 brokers grow the table to 32; with 3 brokers left, a fresh map
    (16 bins) and the kept one (32 bins) iterate differently, and the state carries the size."""
    ids = [f"b{i}" for i in range(13)]
    s = AvgShedder()
    # the JDK 17 HashMap's keySet() for the same puts (checked by running them): below, too
    assert [ids[i] for i in s._score_map_order(ids)] == ["b10", "b12", "b11", "b0", "b1", "b2", "b3", "b4", "b5",
                                                         "b6", "b7", "b8", "b9"]
    assert s.get_state()["brokerScoreMapCapacity"] == 32
    few = ["b12", "b3", "b9x"]
    fresh = AvgShedder()
    kept = AvgShedder()
    kept.set_state(json.loads(json.dumps(s.get_state())))
    assert [few[i] for i in fresh._score_map_order(few)] == ["b9x", "b3", "b12"]
    assert [few[i] for i in kept._score_map_order(few)] == ["b9x", "b12", "b3"]
