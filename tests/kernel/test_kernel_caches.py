"""Derived-value caching of the kernel's hot paths gives the same decisions as computing everything afresh.

Covers ``load_data.derived_cache`` / ``cached`` / ``PreallocationSums`` / ``namespace_codes``, the lazy
``placement.LeaderState`` (snapshot + per-namespace count arrays), batch placement through
``modular_load_manager.assign`` (one cache block for the whole list) and the row-skipping walk of the extensible
split strategy. Each test states the Pulsar behaviour it pins down; the expected figures are derived by hand.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np

from lbreplay.kernel.bundle_split import NO_REASON, split_reason_codes, split_reasons
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.default_namespace_bundle_split_strategy import DefaultNamespaceBundleSplitStrategy
from lbreplay.kernel.least_long_term_message_rate import (
    LeastLongTermMessageRate,
    long_term_message_rate_scores,
    preallocated_long_term_rate,
)
from lbreplay.kernel.load_data import (
    Brokers,
    Bundles,
    LoadData,
    cached,
    derived_cache,
    invalidate_derived,
    namespace_codes,
)
from lbreplay.kernel.modular_load_manager import assign
from lbreplay.kernel.placement import LeaderState, preallocate_bundle, select_broker
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.preallocated_bundle_data import note_preallocation, preallocation_sums
from tests.kernel.placement_fixtures import Br, Bu, World, conf

FULL = "0x00000000_0xffffffff"


def _bundles16(ns: str = "test/test") -> list[str]:
    """``LoadBalancerTestingUtils.makeBundles(..., 16)``: 16 equal ranges of one namespace."""
    return [f"{ns}/0x{(i << 28):08x}_0x{(((i + 1) << 28) - (i == 15)):08x}" for i in range(16)]


# --- batch placement: one derived_cache block for a whole list -------------------------------------------------
def test_assign_list_spreads_one_namespace_evenly() -> None:
    """ModularLoadManagerImplTest#testEvenBundleDistribution, all 16 bundles placed by one ``assign`` call: after
    every even number of assignments both brokers hold the same number of the namespace's bundles, although the
    first bundle carries 1000 msg/s (a message-rate placement would leave it alone on one broker). The even spread
    reads the leader's ranges, which each preallocation extends, so a stale candidate set would fail this."""
    bundles = _bundles16()
    w = World(brokers={"a:8080": Br(long_rate_in=0), "b:8080": Br(long_rate_in=0)})
    w.bundles[bundles[0]] = Bu(long_rate=(1000, 0))
    ld = w.build()
    leader = LeaderState.from_load_data(ld)
    got = assign(bundles, ld, conf(), LeastLongTermMessageRate(), leader, NamespacePolicies(), np.random.default_rng(3))
    brokers = [b for _, b in got]
    for k in range(2, 17, 2):
        assert brokers[:k].count("a:8080") == brokers[:k].count("b:8080") == k // 2
    assert leader.namespace_bundle_counts("test/test", ld.brokers.ids).tolist() == [8, 8]


def test_assign_list_keeps_max_topic_broker_out() -> None:
    """ModularLoadManagerImplTest#testMaxTopicDistributionToBroker in one ``assign`` call: the first bundle has
    loadBalancerBrokerMaxTopics + 10 topics, so once it is preallocated its broker is filtered out
    (filterBrokersWithLargeTopicCount counts preallocated topics) and every later bundle goes to the other one.
    The preallocated-topic sums are updated inside the block, not recomputed, so this checks the update."""
    bundles = _bundles16()
    w = World(brokers={"a:8080": Br(long_rate_in=0), "b:8080": Br(long_rate_in=0)})
    w.bundles[bundles[0]] = Bu(long_rate=(1000, 0), topics=50_010)
    ld = w.build()
    got = dict(assign(bundles, ld, conf(), LeastLongTermMessageRate(), LeaderState.from_load_data(ld),
                      NamespacePolicies(), np.random.default_rng(0)))
    first = got.pop(bundles[0])
    assert set(got.values()) == {"a:8080", "b:8080"} - {first}


def test_assign_list_equals_one_call_per_bundle() -> None:
    """``assign`` (one block) and ``select_broker_for_assignment`` per bundle (a block each) make the same
    choices with the same random draws: LLTMR scores rise with each preallocated bundle's long-term rate
    (LeastLongTermMessageRate.getScore over preallocatedBundleData), so the order of choices is forced here:
    a (0 msg/s) takes bundles until its score passes b's 250 msg/s."""
    from lbreplay.kernel.placement import select_broker_for_assignment

    def world() -> LoadData:
        return World(brokers={"a:8080": Br(long_rate_in=0), "b:8080": Br(long_rate_in=250)}).build()

    bundles = [f"ns-{k}/x/{FULL}" for k in range(4)]  # one bundle per namespace: no even-spread effect
    c = conf()
    ld1, ld2 = world(), world()
    batch = assign(bundles, ld1, c, LeastLongTermMessageRate(), LeaderState.from_load_data(ld1), NamespacePolicies(),
                   np.random.default_rng(9))
    leader2, rng2, s2 = LeaderState.from_load_data(ld2), np.random.default_rng(9), LeastLongTermMessageRate()
    single = [(b, select_broker_for_assignment(b, ld2, c, s2, leader2, NamespacePolicies(), rng2)) for b in bundles]
    # default BundleData = 100 msg/s each: a scores 0, 100, 200, then 300 > 250
    assert batch == single == [(bundles[0], "a:8080"), (bundles[1], "a:8080"), (bundles[2], "a:8080"),
                               (bundles[3], "b:8080")]


# --- PreallocationSums: exact incremental sums ------------------------------------------------------------------
def _three_bundle_ld() -> LoadData:
    names = [f"t/n/0x0000000{k}_0x0000000{k + 1}" for k in range(3)]
    w = World(brokers={"a:8080": Br(), "b:8080": Br()})
    for name, rate, topics in zip(names, (0.1, 0.2, 0.3), (1, 20, 300)):
        w.bundles[name] = Bu(long_rate=(rate, 0.0), topics=topics)
    return w.build()


def test_preallocation_sums_fold_in_row_order() -> None:
    """LeastLongTermMessageRate.getScore sums the preallocated bundles' long-term rates; ``preallocated_long_term_rate``
    does it with ``np.bincount`` in row order: ((0 + 0.1) + 0.2) + 0.3 = 0.6000000000000001. Preallocating the rows
    in the order 1, 2, 0 inside a block must give that figure, not the arrival-order sum
    ((0.2 + 0.3) + 0.1) = 0.6; moving a bundle to another broker re-folds both brokers."""
    ld = _three_bundle_ld()
    a, b = ld.brokers.index("a:8080"), ld.brokers.index("b:8080")
    with derived_cache(ld):
        sums = preallocation_sums(ld)
        for row in (1, 2, 0):
            old = int(ld.bundles.preallocated_to[row])
            ld.bundles.preallocated_to[row] = a
            note_preallocation(ld, row, old)
        assert preallocation_sums(ld) is sums  # updated in place, not rebuilt
        assert sums.rate[a] == 0.6000000000000001 != 0.6
        assert sums.rate.tolist() == preallocated_long_term_rate(ld).tolist()
        assert sums.topics.tolist() == [321, 0] and sums.total_topics.tolist() == [321, 0]
        ld.bundles.preallocated_to[1] = b  # 0.2 moves to b: a keeps 0.1 + 0.3 = 0.4
        note_preallocation(ld, 1, a)
        assert preallocation_sums(ld).rate.tolist() == [0.1 + 0.3, 0.2] == preallocated_long_term_rate(ld).tolist()
        assert preallocation_sums(ld).topics.tolist() == [301, 20]


def test_preallocate_bundle_refreshes_scores_inside_a_block() -> None:
    """preallocateBundle adds the bundle's long-term rate to its broker's LLTMR score (getScore): inside a block
    the score array seen after the preallocation is the fresh one (a: 0 -> 0.3 msg/s)."""
    ld = _three_bundle_ld()
    c = conf()
    leader = LeaderState.from_load_data(ld)
    with derived_cache(ld):
        before = long_term_message_rate_scores(ld, c)
        preallocate_bundle(ld, leader, ld.bundles.names[2], "a:8080")
        after = long_term_message_rate_scores(ld, c)
    assert before.tolist() == [0.0, 0.0] and after.tolist() == [0.3, 0.0]
    assert after.tolist() == long_term_message_rate_scores(ld, c).tolist()  # = computed without a block


def test_bundle_data_created_inside_a_block_reaches_the_scores() -> None:
    """selectBroker's ``computeIfAbsent(bundle, getBundleDataOrDefault)`` marks the bundle as having BundleData;
    a broker's time-average long-term rate then counts the bundle's own long-term data instead of the default
    50 + 50 msg/s. Here the row still holds 1000 msg/s (data the leader dropped, as after a split attempt), so a's
    score goes from 100 to 1000 within the same block."""
    w = World(brokers={"a:8080": Br(), "b:8080": Br()},
              bundles={f"x/y/{FULL}": Bu(owner="a:8080", long_rate=(1000, 0))})
    ld = w.build()
    ld.bundles.has_bundle_data[0] = False
    c = conf()
    with derived_cache(ld):
        assert long_term_message_rate_scores(ld, c).tolist() == [100.0, 0.0]
        assert select_broker(f"x/y/{FULL}", ld, c, LeastLongTermMessageRate(), LeaderState.from_load_data(ld),
                             NamespacePolicies(), np.random.default_rng(0)) == "b:8080"
        assert long_term_message_rate_scores(ld, c).tolist() == [1000.0, 0.0]


# --- the cache block itself -----------------------------------------------------------------------------------
def test_cached_only_inside_a_block_and_dropped_by_group() -> None:
    """Outside a block every call computes; inside, once per key until its group is invalidated ("prealloc" <
    "bundle" < "broker"), or until ``ld.bundles`` is replaced (insert_bundles), which drops bundle-derived values
    but keeps broker-derived ones."""
    ld = _three_bundle_ld()
    calls: list[str] = []

    def compute(tag: str) -> str:
        calls.append(tag)
        return tag

    cached(ld, "broker", "k", lambda: compute("outside"))
    cached(ld, "broker", "k", lambda: compute("outside"))
    assert calls == ["outside", "outside"]
    calls.clear()
    with derived_cache(ld):
        for group in ("broker", "bundle", "prealloc"):
            cached(ld, group, "k", lambda g=group: compute(g))
            cached(ld, group, "k", lambda g=group: compute(g))
        assert calls == ["broker", "bundle", "prealloc"]
        invalidate_derived(ld, "prealloc")
        invalidate_derived(ld, "prealloc")
        for group in ("broker", "bundle", "prealloc"):
            cached(ld, group, "k", lambda g=group: compute(g))
        assert calls[3:] == ["prealloc"]
        invalidate_derived(ld, "bundle")
        for group in ("broker", "bundle", "prealloc"):
            cached(ld, group, "k", lambda g=group: compute(g))
        assert calls[4:] == ["bundle", "prealloc"]
        ld.bundles = copy.deepcopy(ld.bundles)
        for group in ("broker", "bundle", "prealloc"):
            cached(ld, group, "k", lambda g=group: compute(g))
        assert calls[6:] == ["bundle", "prealloc"]
        c1, c2 = conf(), conf()
        cached(ld, "broker", "w", lambda: compute("c1"), c1)
        cached(ld, "broker", "w", lambda: compute("c2"), c2)
        cached(ld, "broker", "w", lambda: compute("c1"), c1)
        assert calls[8:] == ["c1", "c2"]  # keyed by the dependency's identity
        with derived_cache(ld):  # nested blocks share the cache
            cached(ld, "broker", "k", lambda: compute("nested"))
        assert calls[10:] == []
    cached(ld, "broker", "k", lambda: compute("after"))
    assert calls[10:] == ["after"]


def test_copies_made_inside_a_block_carry_no_cache() -> None:
    """A deep copy or pickle of ``LoadData`` taken inside a block is an ordinary object: nothing cached."""
    ld = _three_bundle_ld()
    with derived_cache(ld):
        cached(ld, "broker", "k", lambda: 1)
        for dup in (copy.deepcopy(ld), pickle.loads(pickle.dumps(ld))):
            assert "_derived" not in dup.__dict__
            assert dup.bundles.names == ld.bundles.names


def test_namespace_codes_follow_the_column_content() -> None:
    """Codes in first-appearance order; the memo compares content, so editing a list in place is seen."""
    column = ["t/b", "t/a", "t/b", "t/c"]
    codes, code = namespace_codes(column)
    assert codes.tolist() == [0, 1, 0, 2] and code == {"t/b": 0, "t/a": 1, "t/c": 2}
    column[0] = "t/c"
    codes, code = namespace_codes(column)
    assert codes.tolist() == [0, 1, 2, 0] and code == {"t/c": 0, "t/a": 1, "t/b": 2}


def test_brokers_and_bundles_index() -> None:
    """Row lookups by binary search over the sorted ids / names; -1 when absent (also for empty tables)."""
    br = Brokers.empty(["a:1", "b:1", "c:1"])
    assert [br.index(x) for x in ("a:1", "b:1", "c:1", "0", "bb", "d")] == [0, 1, 2, -1, -1, -1]
    assert Brokers.empty([]).index("a") == -1 and Bundles.empty([]).index("a/b/c") == -1
    bu = Bundles.empty([f"a/x/{FULL}", f"b/x/{FULL}"])
    assert bu.index(f"b/x/{FULL}") == 1 and bu.index(f"a/x/{FULL}x") == -1


# --- LeaderState: snapshot + count arrays -------------------------------------------------------------------------
def _leader_world() -> LoadData:
    x1, x2, y = "t/x/0x00000000_0x80000000", "t/x/0x80000000_0xffffffff", f"t/y/{FULL}"
    ld = World(brokers={"a:8080": Br(), "b:8080": Br()},
               bundles={x1: Bu(owner="a:8080"), x2: Bu(owner="b:8080"), y: Bu(owner="a:8080")}).build()
    a = ld.brokers.index("a:8080")
    ld.bundles.preallocated_to[ld.bundles.index(x2)] = a  # also preallocated to a
    ld.bundles.preallocated_to[ld.bundles.index(y)] = a  # reported and preallocated by a: one range
    return ld


EXPECTED_RANGES = {
    "a:8080": {"t/x": {"0x00000000_0x80000000", "0x80000000_0xffffffff"}, "t/y": {FULL}},
    "b:8080": {"t/x": {"0x80000000_0xffffffff"}},
}


def _adds(leader: LeaderState) -> None:
    leader.add("b:8080", f"t/y/{FULL}")  # new for b
    leader.add("a:8080", "t/x/0x00000000_0x80000000")  # a holds it already
    leader.add("b:8080", f"t/z/{FULL}")  # new namespace
    leader.add("b:8080", f"t/z/{FULL}")  # twice
    leader.add("c:8080", "t/x/0x00000000_0x80000000")  # broker not in LoadData


def test_leader_state_reload_builds_ranges_and_counts() -> None:
    """brokerToNamespaceToBundleRange.reloadFromBundles: each broker's reported plus preallocated ranges (a range
    held both ways once); removeMostServicingBrokersForNamespace counts them per namespace."""
    ld = _leader_world()
    leader = LeaderState.from_load_data(ld)
    assert leader.namespace_bundle_counts("t/x", ld.brokers.ids).tolist() == [2, 1]
    assert leader.namespace_bundle_counts("t/y", ld.brokers.ids).tolist() == [1, 0]
    assert leader.namespace_bundle_counts("t/none", ld.brokers.ids).tolist() == [0, 0]
    assert leader.bundle_ranges == EXPECTED_RANGES


def test_leader_state_add_keeps_counts_and_ranges_in_step() -> None:
    """brokerToNamespaceToBundleRange.add (preallocateBundle) adds a range to a set: whether the count arrays were
    built before the adds, after them, or the nested dict was materialised first, the result is the same."""
    expected = copy.deepcopy(EXPECTED_RANGES)
    expected["b:8080"]["t/y"] = {FULL}
    expected["b:8080"]["t/z"] = {FULL}
    expected["c:8080"] = {"t/x": {"0x00000000_0x80000000"}}
    want = {"t/x": [2, 1], "t/y": [1, 1], "t/z": [0, 1]}
    for order in ("counts-first", "adds-first", "dict-first"):
        ld = _leader_world()
        ids = ld.brokers.ids
        leader = LeaderState.from_load_data(ld)
        if order == "counts-first":
            leader.namespace_bundle_counts("t/x", ids)
        if order == "dict-first":
            assert leader.bundle_ranges == EXPECTED_RANGES
        _adds(leader)
        got = {ns: leader.namespace_bundle_counts(ns, ids).tolist() for ns in want}
        assert got == want, order
        assert leader.bundle_ranges == expected, order
        # other broker lists read the dict: b and the unknown-to-LoadData c
        assert leader.namespace_bundle_counts("t/x", ["b:8080", "c:8080"]).tolist() == [1, 1]


def test_leader_state_set_state_and_assignment_replace_the_snapshot() -> None:
    """A restored or assigned mapping is used as given (no snapshot), and reload() replaces it again."""
    ld = _leader_world()
    leader = LeaderState.from_load_data(ld)
    leader.set_state({"brokerToNamespaceToBundleRange": {"b:8080": {"t/x": ["r1", "r2", "r3"]}}})
    assert leader.namespace_bundle_counts("t/x", ld.brokers.ids).tolist() == [0, 3]
    leader.bundle_ranges = {"a:8080": {"t/x": {"r"}}}
    assert leader.namespace_bundle_counts("t/x", ld.brokers.ids).tolist() == [1, 0]
    leader.reload(ld)
    assert leader.namespace_bundle_counts("t/x", ld.brokers.ids).tolist() == [2, 1]


# --- split condition codes ----------------------------------------------------------------------------------------
def test_split_reason_codes_first_condition_wins() -> None:
    """BundleSplitterTask / DefaultNamespaceBundleSplitStrategyImpl test Topics, then Sessions (only when
    loadBalancerNamespaceBundleMaxSessions > 0), then MsgRate, then Bandwidth; NaN rates hit nothing."""
    topics = np.array([11, 11, 5, 5, 5, 5, 5])
    sessions = np.array([0, 21, 21, 0, 0, 0, 21])
    rate = np.array([0.0, 0.0, 31.0, 31.0, np.nan, 0.0, 0.0])
    thr = np.array([0.0, 0.0, 0.0, 41.0, 41.0, 41.0, 0.0])
    codes = split_reason_codes(topics, sessions, rate, thr, 10, 20, 30.0, 40.0)
    assert codes.tolist() == [0, 0, 1, 2, 3, 3, 1]
    assert split_reasons(topics, sessions, rate, thr, 10, 20, 30.0, 40.0).tolist() == [
        "Topics", "Topics", "Sessions", "MsgRate", "Bandwidth", "Bandwidth", "Sessions"]
    no_sessions = split_reason_codes(topics, sessions, rate, thr, 10, 0, 30.0, 40.0)
    assert no_sessions.tolist() == [0, 0, 2, 2, 3, 3, NO_REASON]


# --- extensible split strategy: rows that change nothing are skipped -------------------------------------------
def _split_conf(**keys: object) -> PulsarConfig:
    base: dict[str, object] = {
        "loadBalancerNamespaceBundleMaxMsgRate": 100,
        "loadBalancerMaxNumberOfBundlesToSplitPerCycle": 1,
        "loadBalancerNamespaceBundleSplitConditionHitCountThreshold": 1,
    }
    base.update(keys)
    return PulsarConfig.resolve(base)


def _split_call(strategy: DefaultNamespaceBundleSplitStrategy, conf_: PulsarConfig, names: list[str],
                rates: list[float]) -> list[str]:
    k = len(names)
    lo = [int(n.rsplit("/", 1)[1][2:10], 16) for n in names]
    hi = [int(n.rsplit("/", 1)[1][13:21], 16) for n in names]
    out = strategy.find_bundles_to_split(
        conf_, reporter=["broker-1"] * k, bundles=names, namespaces=["t/n"] * k, lower=lo, upper=hi,
        msg_rate=np.array(rates, dtype=float), msg_throughput=np.zeros(k), topics=np.full(k, 5),
        sessions=np.zeros(k, dtype=int), bundle_count_per_namespace={"t/n": 4},
    )
    return [d.bundle for d in out]


A, B, C = "t/n/0x00000000_0x40000000", "t/n/0x40000000_0x80000000", "t/n/0x80000000_0xc0000000"


def test_split_cycle_stops_at_the_cap_and_leaves_later_counts() -> None:
    """DefaultNamespaceBundleSplitStrategyImpl.findBundlesToSplit breaks out of the stats loop once
    loadBalancerMaxNumberOfBundlesToSplitPerCycle decisions are made: bundles after that point keep their hit
    counts untouched (neither incremented nor reset) for this cycle. The loop walks the broker's bundle stats
    (a ConcurrentHashMap) in the JVM's order: B, C, A."""
    s = DefaultNamespaceBundleSplitStrategy()
    s.set_state({"splitConditionHitCounts": {"broker-1": {B: 1, C: 5}}})
    # B hot (count 2 > 1): split, stop. C (cold, count 5) and A (cold, no count) are not visited.
    assert _split_call(s, _split_conf(), [A, B, C], [0.0, 101.0, 0.0]) == [B]
    assert s.get_state() == {"splitConditionHitCounts": {"broker-1": {C: 5}}}


def test_split_cycle_resets_counts_of_cooled_bundles() -> None:
    """A bundle with a hit count whose stats no longer meet any condition is reset
    (``bundleHighTrafficFrequency.remove``), even though nothing else happens for it."""
    s = DefaultNamespaceBundleSplitStrategy()
    s.set_state({"splitConditionHitCounts": {"broker-1": {B: 7}}})
    assert _split_call(s, _split_conf(), [A, B, C], [0.0, 0.0, 101.0]) == []  # C: 1, not above 1
    assert s.get_state() == {"splitConditionHitCounts": {"broker-1": {C: 1}}}
    assert _split_call(s, _split_conf(), [A, B, C], [0.0, 0.0, 101.0]) == [C]  # C: 2 > 1


def test_split_rows_of_a_bundle_listed_twice_are_walked_in_order() -> None:
    """Rows are processed like the per-row loop even when one report lists a bundle twice: a hot row followed by
    a cold row of the same bundle resets its count each cycle, so it never reaches the threshold."""
    s = DefaultNamespaceBundleSplitStrategy()
    for _ in range(4):
        assert _split_call(s, _split_conf(), [A, A], [101.0, 0.0]) == []
    assert s.get_state() == {"splitConditionHitCounts": {}}
    assert _split_call(s, _split_conf(), [A, A], [0.0, 101.0]) == []  # cold then hot: count 1
    assert _split_call(s, _split_conf(), [A, A], [0.0, 101.0]) == []  # reset then 1 again
    assert s.get_state() == {"splitConditionHitCounts": {"broker-1": {A: 1}}}
