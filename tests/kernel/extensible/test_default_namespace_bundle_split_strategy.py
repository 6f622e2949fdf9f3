"""Extensible split strategy (lbreplay.kernel.extensible.default_namespace_bundle_split_strategy).

Ports DefaultNamespaceBundleSplitStrategyTest (apache/pulsar, extensions/strategy). The Java test names its
bundles with upper-case hex (``0x0FFFFFFF``, accepted by ``Long.decode``); here they are in Pulsar's canonical
lower-case form. Its mocked split boundaries (0x7fffffff, 0x07ffffff) are what range_equally_divide computes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.default_namespace_bundle_split_strategy import DefaultNamespaceBundleSplitStrategy
from lbreplay.kernel.split_algorithms import MIB

BUNDLE1 = "tenant/namespace/0x00000000_0xffffffff"
BUNDLE2 = "tenant/namespace/0x00000000_0x0fffffff"
BROKER = "broker-1"
CHILDREN1 = ["tenant/namespace/0x00000000_0x7fffffff", "tenant/namespace/0x7fffffff_0xffffffff"]
CHILDREN2 = ["tenant/namespace/0x00000000_0x07ffffff", "tenant/namespace/0x07ffffff_0x0fffffff"]


def make_conf(**overrides: Any) -> PulsarConfig:
    """DefaultNamespaceBundleSplitStrategyTest#setup: all limits 100, 1 split per cycle, hit-count threshold 3."""
    base = {
        "loadBalancerDebugModeEnabled": True,
        "loadBalancerNamespaceMaximumBundles": 100,
        "loadBalancerNamespaceBundleMaxTopics": 100,
        "loadBalancerNamespaceBundleMaxSessions": 100,
        "loadBalancerNamespaceBundleMaxMsgRate": 100,
        "loadBalancerNamespaceBundleMaxBandwidthMbytes": 100,
        "loadBalancerMaxNumberOfBundlesToSplitPerCycle": 1,
        "loadBalancerNamespaceBundleSplitConditionHitCountThreshold": 3,
    }
    base.update(overrides)
    return PulsarConfig.resolve(base)


def stats(**fields: float) -> dict[str, float]:
    """The two bundles' NamespaceBundleStats (topics 5 by default), same values for both (as in the Java test)."""
    s = {"topics": 5, "msgRateIn": 0.0, "msgRateOut": 0.0, "msgThroughputIn": 0.0, "msgThroughputOut": 0.0,
         "producerCount": 0, "consumerCount": 0}
    s.update(fields)
    return s


def run(
    strategy: DefaultNamespaceBundleSplitStrategy,
    conf: PulsarConfig,
    s: dict[str, float],
    *,
    names: tuple[str, ...] = (BUNDLE1, BUNDLE2),
    counts: dict[str, int] | None = None,
    owner: str = BROKER,
    splitting: tuple[str, ...] = (),
) -> list[tuple[str, str, str, list[str]]]:
    """One cycle of broker-1 with bundle stats in LinkedHashMap order (bundle1, bundle2)."""
    lower = [int(n.rsplit("/", 1)[1][2:10], 16) for n in names]
    upper = [int(n.rsplit("/", 1)[1][13:21], 16) for n in names]
    k = len(names)
    out = strategy.find_bundles_to_split(
        conf,
        reporter=[BROKER] * k,
        bundles=list(names),
        namespaces=["tenant/namespace"] * k,
        lower=lower,
        upper=upper,
        msg_rate=np.full(k, s["msgRateIn"] + s["msgRateOut"]),
        msg_throughput=np.full(k, s["msgThroughputIn"] + s["msgThroughputOut"]),
        topics=np.full(k, s["topics"]),
        sessions=np.full(k, s["consumerCount"] + s["producerCount"]),
        bundle_count_per_namespace={"tenant/namespace": 0} if counts is None else counts,
        owner=[owner] * k,
        splitting_bundles=splitting,
    )
    return [(d.bundle, d.broker, d.reason, d.children) for d in out]


def test_split_condition_threshold_zero() -> None:
    """#testNamespaceBundleSplitConditionThreshold: threshold 0, msgRateIn = max + 1 -> one decision (1 per cycle)."""
    got = run(DefaultNamespaceBundleSplitStrategy(), make_conf(loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0),
              stats(msgRateIn=101))
    assert got == [(BUNDLE1, BROKER, "MsgRate", CHILDREN1)]


def test_not_enough_topics() -> None:
    """#testNotEnoughTopics: topics = 1 -> nothing."""
    conf = make_conf(loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0)
    assert run(DefaultNamespaceBundleSplitStrategy(), conf, stats(msgRateIn=101, topics=1)) == []


def test_namespace_maximum_bundles() -> None:
    """#testNamespaceMaximumBundles: getBundleCount = loadBalancerNamespaceMaximumBundles -> nothing."""
    conf = make_conf(loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0)
    assert run(DefaultNamespaceBundleSplitStrategy(), conf, stats(msgRateIn=101), counts={"tenant/namespace": 100}) == []
    assert len(run(DefaultNamespaceBundleSplitStrategy(), conf, stats(msgRateIn=101), counts={"tenant/namespace": 99})) == 1


def test_empty_bundle_stats() -> None:
    """#testEmptyBundleStats."""
    conf = make_conf(loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0)
    assert run(DefaultNamespaceBundleSplitStrategy(), conf, stats(msgRateIn=101), names=()) == []


def test_no_bundle_owner() -> None:
    """#testNoBundleOwner: the channel says another broker owns the bundles -> nothing, no failure counted."""
    strategy = DefaultNamespaceBundleSplitStrategy()
    conf = make_conf(loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0)
    assert run(strategy, conf, stats(msgRateIn=101), owner="broker-2") == []
    assert strategy.stats()["splitFailures"] == 0


def test_error_getting_bundle_count() -> None:
    """#testError: getBundleCount fails for both bundles -> nothing, two Failure/Unknown counts."""
    strategy = DefaultNamespaceBundleSplitStrategy()
    conf = make_conf(loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0)
    assert run(strategy, conf, stats(msgRateIn=101), counts={}) == []
    assert strategy.stats()["splitFailures"] == 2


def test_splitting_bundle() -> None:
    """#testSplittingBundle: a bundle of the namespace in Splitting state with the same lower bound blocks both."""
    strategy = DefaultNamespaceBundleSplitStrategy()
    conf = make_conf(loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0)
    assert run(strategy, conf, stats(msgRateIn=101), splitting=("tenant/namespace/0x00000000_0xffffffff",)) == []
    assert strategy.stats()["splitFailures"] == 0
    # a Splitting bundle sharing neither bound does not block
    got = run(DefaultNamespaceBundleSplitStrategy(), conf, stats(msgRateIn=101),
              splitting=("tenant/namespace/0x10000000_0x20000000",))
    assert got == [(BUNDLE1, BROKER, "MsgRate", CHILDREN1)]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"msgRateOut": 51, "msgRateIn": 51}, "MsgRate"),  # #testMaxMsgRate
        ({"topics": 101}, "Topics"),  # #testMaxTopics
        ({"producerCount": 51, "consumerCount": 51}, "Sessions"),  # #testMaxSessions
        ({"msgThroughputOut": 100 * MIB / 2 + 1, "msgThroughputIn": 100 * MIB / 2 + 1}, "Bandwidth"),  # #testMaxBandwidthMbytes
    ],
)
def test_hit_count_cycles(fields: dict[str, float], reason: str) -> None:
    """#testMaxMsgRate / #testMaxTopics / #testMaxSessions / #testMaxBandwidthMbytes: with threshold 3 nothing splits
    for 3 cycles; cycle 3 splits bundle1 (1 per cycle, bundle2's count stays at 3 as the loop stops), cycle 4 splits
    bundle2; no failures."""
    strategy = DefaultNamespaceBundleSplitStrategy()
    conf = make_conf()
    threshold = 3
    for i in range(threshold + 2):
        got = run(strategy, conf, stats(**fields))
        if i == threshold:
            assert got == [(BUNDLE1, BROKER, reason, CHILDREN1)]
        elif i == threshold + 1:
            assert got == [(BUNDLE2, BROKER, reason, CHILDREN2)]
        else:
            assert got == []
        assert strategy.stats()["splitFailures"] == 0


def test_state_round_trip_and_pruning() -> None:
    """splitConditionHitCounts survives get_state/set_state (decide's strategyState); a bundle missing from the
    broker's stats is pruned (retainAll); a cycle without the condition resets the count."""
    conf = make_conf()
    hot = stats(msgRateIn=101)
    s1 = DefaultNamespaceBundleSplitStrategy()
    run(s1, conf, hot)
    run(s1, conf, hot)
    state = s1.get_state()
    assert state == {"splitConditionHitCounts": {BROKER: {BUNDLE1: 2, BUNDLE2: 2}}}
    s2 = DefaultNamespaceBundleSplitStrategy()
    s2.set_state(state)
    assert run(s2, conf, hot) == []  # 3rd hit: not above the threshold
    assert run(s2, conf, hot) == [(BUNDLE1, BROKER, "MsgRate", CHILDREN1)]  # 4th hit
    run(s2, conf, hot, names=(BUNDLE1,))  # bundle2 missing from the stats: its count is dropped
    assert BUNDLE2 not in s2.get_state()["splitConditionHitCounts"][BROKER]
    run(s2, conf, stats())
    assert s2.get_state() == {"splitConditionHitCounts": {}}


def test_disabled_auto_split_leaves_state() -> None:
    """The split scheduler runs the strategy only when loadBalancerAutoBundleSplitEnabled."""
    s = DefaultNamespaceBundleSplitStrategy()
    s.set_state({"splitConditionHitCounts": {BROKER: {BUNDLE1: 2}}})
    assert run(s, make_conf(loadBalancerAutoBundleSplitEnabled=False), stats(msgRateIn=101)) == []
    assert s.get_state() == {"splitConditionHitCounts": {BROKER: {BUNDLE1: 2}}}


def test_brokers_have_separate_counters_and_caps() -> None:
    """Each broker runs its own strategy instance: per-broker hit counts and per-broker per-cycle caps."""
    conf = make_conf(loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0)
    s = DefaultNamespaceBundleSplitStrategy()
    names = ["t/ns/0x00000000_0x80000000", "t/ns/0x80000000_0xffffffff"]
    out = s.find_bundles_to_split(
        conf,
        reporter=["b2", "b1"],
        bundles=names,
        namespaces=["t/ns", "t/ns"],
        lower=[0, 0x80000000],
        upper=[0x80000000, 0xFFFFFFFF],
        msg_rate=[101.0, 101.0],
        msg_throughput=[0.0, 0.0],
        topics=[5, 5],
        sessions=[0, 0],
        bundle_count_per_namespace={"t/ns": 2},
    )
    assert [(d.broker, d.bundle, d.boundaries) for d in out] == [
        ("b1", names[1], [0xBFFFFFFF]),
        ("b2", names[0], [0x40000000]),
    ]
    assert all(d.unload is False for d in out)


def test_default_algorithm_must_give_one_boundary() -> None:
    """A default algorithm giving no boundary (topic_count without topic data) counts a failure, no decision."""
    conf = make_conf(
        loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0,
        defaultNamespaceBundleSplitAlgorithm="topic_count_equally_divide",
    )
    s = DefaultNamespaceBundleSplitStrategy()
    assert run(s, conf, stats(msgRateIn=101)) == []
    assert s.stats()["splitFailures"] == 2


def test_brokers_that_did_not_run_keep_their_hit_counts() -> None:
    """Each broker's strategy instance keeps its ``splitConditionHitCounts`` between its own cycles
    (``DefaultNamespaceBundleSplitStrategyImpl`` fields): a broker outside ``running`` did not run and keeps them;
    a running broker without stats clears them (``splitConditionHitCounts.keySet().retainAll(bundleStatsMap.keySet())``).
    Found by the oracle (``DefaultNamespaceBundleSplitStrategy`` cases: a broker missing from one cycle's
    TopBundlesLoadData split one cycle early in Pulsar)."""
    conf = make_conf()
    s = DefaultNamespaceBundleSplitStrategy()
    s.set_state({"splitConditionHitCounts": {"b-absent": {BUNDLE1: 2}, "b-empty": {BUNDLE2: 1}}})
    s.find_bundles_to_split(conf, reporter=[], bundles=[], namespaces=[], lower=[], upper=[], msg_rate=[],
                            msg_throughput=[], topics=[], sessions=[], bundle_count_per_namespace={},
                            running=["b-empty"])
    assert s.get_state() == {"splitConditionHitCounts": {"b-absent": {BUNDLE1: 2}}}
    # without ``running`` every broker runs: both are cleared
    s.find_bundles_to_split(conf, reporter=[], bundles=[], namespaces=[], lower=[], upper=[], msg_rate=[],
                            msg_throughput=[], topics=[], sessions=[], bundle_count_per_namespace={})
    assert s.get_state() == {"splitConditionHitCounts": {}}


def test_the_managers_split_check_runs_on_the_split_schedulers_timer() -> None:
    """``ExtensibleLoadManager.check_split`` (the replay's split cycle): ``SplitScheduler.execute`` runs at once,
    then not before ``loadBalancerSplitIntervalMinutes`` passed; each run is the strategy over the stats given."""
    from lbreplay.kernel.extensible.extensible_load_manager import ExtensibleLoadManager

    conf = make_conf(loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0, loadBalancerSplitIntervalMinutes=1)
    manager = ExtensibleLoadManager(conf=conf)
    s = stats(msgRateIn=101)
    rows = dict(reporter=[BROKER], bundles=[BUNDLE1], namespaces=["tenant/namespace"], lower=[0], upper=[0xFFFFFFFF],
                msg_rate=np.array([s["msgRateIn"] + s["msgRateOut"]]),
                msg_throughput=np.array([s["msgThroughputIn"] + s["msgThroughputOut"]]), topics=np.array([s["topics"]]),
                sessions=np.array([s["consumerCount"] + s["producerCount"]]),
                bundle_count_per_namespace={"tenant/namespace": 0})
    got = [(d.bundle, d.reason, d.children) for d in manager.check_split(10_000, **rows)]
    assert got == [(BUNDLE1, "MsgRate", CHILDREN1)]
    assert manager.check_split(69_999, **rows) == []  # the scheduler's interval has not passed
    assert [d.bundle for d in manager.check_split(70_000, **rows)] == [BUNDLE1]


# --- the JVM order of the broker's bundle stats (PulsarStats.bundleStats, a ConcurrentHashMap) ----------------------
X, Y, Z = (f"tenant/namespace/0x{i << 28:08x}_0x{(i + 1) << 28:08x}" for i in range(3))


def test_per_cycle_cap_follows_the_bundle_stats_map_order() -> None:
    """Three hot bundles, one split per cycle: findBundlesToSplit walks bundleStats in the ConcurrentHashMap's
    order (Y, Z, X for a 16-bin table), not by name, so Y splits first, then Z, then X."""
    conf = make_conf(loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0)
    s = DefaultNamespaceBundleSplitStrategy()
    got = [run(s, conf, stats(msgRateIn=101), names=names)[0][0] for names in ((X, Y, Z), (X, Z), (X,))]
    assert got == [Y, Z, X]


def test_bundle_stats_table_size_is_kept_across_cycles() -> None:
    """PulsarStats.updateStats clears the map, which keeps its table: after 13 bundles (table 32) the three hot
    bundles are walked Z, X, Y (32 bins) instead of Y, Z, X (16 bins). The size is carried in the state."""
    conf = make_conf(loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0)
    many = tuple(f"tenant/namespace/0x{i << 24:08x}_0x{(i + 1) << 24:08x}" for i in range(13))
    s = DefaultNamespaceBundleSplitStrategy()
    assert run(s, conf, stats(msgRateIn=0), names=many) == []
    state = s.get_state()
    assert state == {"splitConditionHitCounts": {}, "bundleStatsCapacity": {BROKER: 32}}
    restored = DefaultNamespaceBundleSplitStrategy()
    restored.set_state(state)
    assert run(restored, conf, stats(msgRateIn=101), names=(X, Y, Z))[0][0] == Z
    assert run(DefaultNamespaceBundleSplitStrategy(), conf, stats(msgRateIn=101), names=(X, Y, Z))[0][0] == Y
