"""Modular automatic split: BundleSplitterTask / checkNamespaceBundleSplit (lbreplay.kernel.bundle_split)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lbreplay.kernel.bundle_split import check_namespace_bundle_split, find_bundles_to_split
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data import RATE_IN, RATE_OUT, THR_IN, Brokers, Bundles, LoadData
from lbreplay.kernel.split_algorithms import MIB, TopicStats

MAX_RATE = 30000  # loadBalancerNamespaceBundleMaxMsgRate default


def make_ld(brokers: list[str], rows: list[dict[str, Any]]) -> LoadData:
    """LoadData with one lastStats row per dict: name, owner (broker id), topics, sessions, long-term rate/thr."""
    rows = sorted(rows, key=lambda r: r["name"])
    br = Brokers.empty(sorted(brokers))
    bu = Bundles.empty([r["name"] for r in rows])
    for i, r in enumerate(rows):
        bu.owner[i] = br.index(r["owner"]) if r.get("owner") else -1
        bu.topics[i] = r.get("topics", 5)
        bu.consumer_count[i] = r.get("consumers", 0)
        bu.producer_count[i] = r.get("producers", 0)
        if "long_rate_in" in r or "long_thr_in" in r or r.get("bundle_data"):
            bu.has_bundle_data[i] = True
            bu.long[i] = 0.0
            bu.long[i, RATE_IN] = r.get("long_rate_in", 0.0)
            bu.long[i, RATE_OUT] = r.get("long_rate_out", 0.0)
            bu.long[i, THR_IN] = r.get("long_thr_in", 0.0)
        bu.stats[i] = r.get("stats", [0.0, 0.0, 0.0, 0.0])
    return LoadData(br, bu)


def test_split_task_when_topic_just_one() -> None:
    """BundleSplitterTaskTest#testSplitTaskWhenTopicJustOne: topics = 1 with long-term rate max+1 -> no split;
    the same bundle with 2 topics splits (control)."""
    conf = PulsarConfig.resolve({})
    row = {"name": "ten/ns/0x00000000_0x80000000", "owner": "broker", "topics": 1, "long_rate_in": MAX_RATE, "long_rate_out": 1}
    assert find_bundles_to_split(make_ld(["broker"], [row]), conf, {"ten/ns": 2}) == []
    row["topics"] = 2
    assert find_bundles_to_split(make_ld(["broker"], [row]), conf, {"ten/ns": 2}) == [(0, 0, "MsgRate")]


def test_namespace_maximum_bundles_counts_planned_splits() -> None:
    """BundleSplitterTaskTest#testLoadBalancerNamespaceMaximumBundles: max 3 bundles, current count 1 (a namespace
    without bundle policies has the single full bundle), 3 hot bundles -> 3 - 1 = 2 splits, in visiting order."""
    conf = PulsarConfig.resolve({"loadBalancerNamespaceMaximumBundles": 3})
    rows = [
        {"name": f"ten/ns/{r}", "owner": "broker", "topics": 5, "long_rate_in": 2 * MAX_RATE, "long_rate_out": 1}
        for r in ("0x00000000_0x20000000", "0x20000000_0x40000000", "0x40000000_0x60000000")
    ]
    got = find_bundles_to_split(make_ld(["broker"], rows), conf, {"ten/ns": 1})
    assert [(row, reason) for row, _, reason in got] == [(0, "MsgRate"), (1, "MsgRate")]


def test_legacy_version_has_no_guards() -> None:
    """Spec §5.1 older versions (pulsarVersion 2.9): no 2-topic guard and the cap ignores planned splits
    (BundleSplitterTask @0f6f07c8: bundleCount < max only)."""
    conf = PulsarConfig.resolve({"loadBalancerNamespaceMaximumBundles": 3, "pulsarVersion": "2.9"})
    rows = [
        {"name": f"ten/ns/{r}", "owner": "broker", "topics": 1, "long_rate_in": 2 * MAX_RATE}
        for r in ("0x00000000_0x20000000", "0x20000000_0x40000000", "0x40000000_0x60000000")
    ]
    assert [r for r, _, _ in find_bundles_to_split(make_ld(["broker"], rows), conf, {"ten/ns": 1})] == [0, 1, 2]


def test_max_sessions_non_positive_disables() -> None:
    """BundleSplitterTask (>= 2.10): maxBundleSessions > 0 guard; 2.9 compares against 0 and splits."""
    row = {"name": "t/ns/0x00000000_0x80000000", "owner": "b1", "topics": 5, "consumers": 3, "producers": 2}
    conf = PulsarConfig.resolve({"loadBalancerNamespaceBundleMaxSessions": 0})
    assert find_bundles_to_split(make_ld(["b1"], [row]), conf, {"t/ns": 2}) == []
    conf_old = PulsarConfig.resolve({"loadBalancerNamespaceBundleMaxSessions": 0, "pulsarVersion": "2.9"})
    assert find_bundles_to_split(make_ld(["b1"], [row]), conf_old, {"t/ns": 2}) == [(0, 0, "Sessions")]
    conf_pos = PulsarConfig.resolve({"loadBalancerNamespaceBundleMaxSessions": 4})
    assert find_bundles_to_split(make_ld(["b1"], [row]), conf_pos, {"t/ns": 2}) == [(0, 0, "Sessions")]


def test_conditions_and_reasons() -> None:
    """Spec §5.1: instantaneous topics > 1000, sessions > 1000, long-term rate > 30000, long-term throughput
    > 100 MiB/s (in + out); equal values do not trigger."""
    conf = PulsarConfig.resolve({})
    rows = [
        {"name": "t/ns/0x00000000_0x10000000", "owner": "b1", "topics": 1001},
        {"name": "t/ns/0x10000000_0x20000000", "owner": "b1", "consumers": 600, "producers": 401},
        {"name": "t/ns/0x20000000_0x30000000", "owner": "b1", "long_rate_in": 20000, "long_rate_out": 10001},
        {"name": "t/ns/0x30000000_0x40000000", "owner": "b1", "long_thr_in": 100 * MIB + 1},
        {"name": "t/ns/0x40000000_0x50000000", "owner": "b1", "topics": 1000, "consumers": 1000,
         "long_rate_in": 30000, "long_thr_in": 100 * MIB},
    ]
    got = find_bundles_to_split(make_ld(["b1"], rows), conf, {"t/ns": 10})
    assert [(r, reason) for r, _, reason in got] == [(0, "Topics"), (1, "Sessions"), (2, "MsgRate"), (3, "Bandwidth")]


def test_uses_long_term_not_instantaneous_rates() -> None:
    """BundleSplitterTask reads BundleData.longTermData; without BundleData the rates count as 0."""
    conf = PulsarConfig.resolve({})
    hot_now = [0.0, 0.0, 50000.0, 50000.0]  # lastStats rates far above the limit
    rows = [
        {"name": "t/ns/0x00000000_0x10000000", "owner": "b1", "stats": hot_now, "long_rate_in": 100.0},
        {"name": "t/ns/0x10000000_0x20000000", "owner": "b1", "stats": hot_now},
    ]
    assert find_bundles_to_split(make_ld(["b1"], rows), conf, {"t/ns": 10}) == []


def test_visiting_order_brokers_then_bundles() -> None:
    """Brokers visited in row order (sorted ids) and then each broker's bundles: with room for one split the
    bundle on broker "a" wins even though its name sorts after the bundle on broker "b"."""
    conf = PulsarConfig.resolve({"loadBalancerNamespaceMaximumBundles": 3})
    rows = [
        {"name": "t/ns/0x00000000_0x10000000", "owner": "b", "long_rate_in": 40000},
        {"name": "t/ns/0x10000000_0x20000000", "owner": "a", "long_rate_in": 40000},
    ]
    got = find_bundles_to_split(make_ld(["a", "b"], rows), conf, {"t/ns": 2})
    assert got == [(1, 0, "MsgRate")]


def test_bundle_count_falls_back_to_known_bundles() -> None:
    """Without a given count, a namespace counts the bundles LoadData knows in it."""
    conf = PulsarConfig.resolve({"loadBalancerNamespaceMaximumBundles": 2})
    rows = [
        {"name": "t/ns/0x00000000_0x10000000", "owner": "b1", "long_rate_in": 40000},
        {"name": "t/ns/0x10000000_0xffffffff", "owner": "b1"},
    ]
    assert find_bundles_to_split(make_ld(["b1"], rows), conf) == []
    assert find_bundles_to_split(make_ld(["b1"], rows), conf, {"t/ns": 1}) == [(0, 0, "MsgRate")]


# --- checkNamespaceBundleSplit -----------------------------------------------------------------------------

_LAYOUT = {"t/ns": np.array([0, 0x40000000, 0x80000000, 0xFFFFFFFF])}


def _hot(name: str, owner: str = "b1", **extra: Any) -> dict[str, Any]:
    return {"name": name, "owner": owner, "topics": 5, "long_rate_in": 40000.0, **extra}


def test_check_split_default_algorithm_and_children() -> None:
    """checkNamespaceBundleSplit with range_equally_divide: 0x40000000_0x80000000 -> 0x60000000, children owned by
    the reporting broker, unloaded (loadBalancerAutoUnloadSplitBundlesEnabled default true)."""
    conf = PulsarConfig.resolve({})
    ld = make_ld(["b1", "b2"], [_hot("t/ns/0x40000000_0x80000000", "b2")])
    (d,) = check_namespace_bundle_split(ld, conf, _LAYOUT)
    assert (d.bundle, d.broker, d.boundaries, d.algorithm, d.reason, d.unload) == (
        "t/ns/0x40000000_0x80000000", "b2", [0x60000000], "range_equally_divide", "MsgRate", True,
    )
    assert d.children == ["t/ns/0x40000000_0x60000000", "t/ns/0x60000000_0x80000000"]
    assert d.details["msgRate"] == 40000.0 and d.details["maxMsgRate"] == 30000.0


def test_check_split_skips_when_disabled_or_single_broker() -> None:
    """loadBalancerAutoBundleSplitEnabled=false, or knownBrokers.size() <= 1 ([M]): no split."""
    ld1 = make_ld(["b1"], [_hot("t/ns/0x40000000_0x80000000")])
    assert check_namespace_bundle_split(ld1, PulsarConfig.resolve({}), _LAYOUT) == []
    ld2 = make_ld(["b1", "b2"], [_hot("t/ns/0x40000000_0x80000000")])
    assert check_namespace_bundle_split(ld2, PulsarConfig.resolve({"loadBalancerAutoBundleSplitEnabled": False}), _LAYOUT) == []
    assert len(check_namespace_bundle_split(ld2, PulsarConfig.resolve({}), _LAYOUT)) == 1


def test_check_split_unload_flag() -> None:
    """unload = loadBalancerAutoUnloadSplitBundlesEnabled && shouldNamespacePoliciesUnload && shouldAntiAffinity…."""
    ld = make_ld(["b1", "b2"], [_hot("t/ns/0x40000000_0x80000000")])
    off = PulsarConfig.resolve({"loadBalancerAutoUnloadSplitBundlesEnabled": False})
    assert check_namespace_bundle_split(ld, off, _LAYOUT)[0].unload is False
    seen: list[tuple[str, str]] = []

    def policy(bundle: str, broker: str) -> bool:
        seen.append((bundle, broker))
        return False

    assert check_namespace_bundle_split(ld, PulsarConfig.resolve({}), _LAYOUT, should_unload=policy)[0].unload is False
    assert seen == [("t/ns/0x40000000_0x80000000", "b1")]


def test_check_split_skips_stale_and_unsplittable() -> None:
    """[M] a bundle no longer in the namespace layout is skipped; canSplitBundle false is skipped."""
    conf = PulsarConfig.resolve({})
    ld = make_ld(["b1", "b2"], [_hot("t/ns/0x00000000_0x80000000"), _hot("u/ns/0x00000000_0x00000001")])
    got = check_namespace_bundle_split(ld, conf, {**_LAYOUT, "u/ns": np.array([0, 1, 0xFFFFFFFF])})
    assert got == []


def test_check_split_two_in_same_namespace_update_layout() -> None:
    """Two hot bundles of one namespace both split; each split is checked against the layout so far."""
    conf = PulsarConfig.resolve({})
    ld = make_ld(["b1", "b2"], [_hot("t/ns/0x00000000_0x40000000"), _hot("t/ns/0x80000000_0xffffffff", "b2")])
    got = check_namespace_bundle_split(ld, conf, _LAYOUT)
    assert [(d.bundle, d.boundaries) for d in got] == [
        ("t/ns/0x00000000_0x40000000", [0x20000000]),
        ("t/ns/0x80000000_0xffffffff", [0xBFFFFFFF]),
    ]


def test_check_split_topic_count_default_algorithm() -> None:
    """defaultNamespaceBundleSplitAlgorithm=topic_count_equally_divide uses the bundle's topic hashes: H = 0x01000000,
    0x02000000, 0x10000000, 0x30000000 -> 0x02000000 + (0x10000000 - 0x02000000) / 2 = 0x09000000. A bundle without
    topic data finds no boundary; a midpoint equal to the lower end (duplicate hashes) is rejected by the factory
    (NamespaceBundleFactory.splitBundles "fixed key must between the key range"): attempted, no children."""
    conf = PulsarConfig.resolve({"defaultNamespaceBundleSplitAlgorithm": "topic_count_equally_divide"})
    ts = TopicStats(np.array([0x30000000, 0x01000000, 0x10000000, 0x02000000]), np.ones(4), np.ones(4))
    dup = TopicStats(np.array([0x80000000, 0x80000000, 0x80000000, 0x90000000]), np.ones(4), np.ones(4))
    ld = make_ld(
        ["b1", "b2"],
        [_hot("t/ns/0x00000000_0x40000000"), _hot("t/ns/0x40000000_0x80000000"), _hot("t/ns/0x80000000_0xffffffff")],
    )
    got = check_namespace_bundle_split(
        ld, conf, _LAYOUT, topics={"t/ns/0x00000000_0x40000000": ts, "t/ns/0x80000000_0xffffffff": dup}
    )
    assert [d.algorithm for d in got] == ["topic_count_equally_divide"] * 3
    by = {d.bundle: d for d in got}
    assert by["t/ns/0x00000000_0x40000000"].boundaries == [0x09000000] and by["t/ns/0x00000000_0x40000000"].ok
    no_topics = by["t/ns/0x40000000_0x80000000"]
    assert no_topics.boundaries == [] and no_topics.children == [] and not no_topics.ok
    assert by["t/ns/0x80000000_0xffffffff"].boundaries == [] and not by["t/ns/0x80000000_0xffffffff"].ok


@pytest.mark.parametrize("algo", ["specified_positions_divide"])
def test_check_split_default_specified_positions_fails(algo: str) -> None:
    """Auto split passes no positions: SpecifiedPositionsBundleSplitAlgorithm throws, the split fails."""
    conf = PulsarConfig.resolve({"defaultNamespaceBundleSplitAlgorithm": algo})
    ld = make_ld(["b1", "b2"], [_hot("t/ns/0x00000000_0x40000000")])
    (d,) = check_namespace_bundle_split(ld, conf, _LAYOUT)
    assert d.boundaries == [] and not d.ok


def test_a_brokers_last_stats_are_walked_in_the_reports_key_order() -> None:
    """The leader's ``lastStats`` is Jackson's ``LinkedHashMap`` in the report's key order: with room for one more
    bundle in ``t/ns`` (4 of at most 5), the split goes to the bundle b1 wrote first, not the first by name."""
    from lbreplay.kernel.load_data_json import load_data_from_request

    names = [f"t/ns/0x{lo:08x}_0x{hi:08x}" for lo, hi in ((0, 0x40000000), (0x40000000, 0x80000000),
                                                            (0x80000000, 0xC0000000))]
    written = list(reversed(names))
    local = {"bundles": names, "lastStats": {n: {"topics": 2000} for n in written}}
    ld = load_data_from_request({"loadData": {"brokers": {"b1:8080": {"localData": local}}}})
    assert ld.membership is not None and ld.membership.stats_rank is not None
    conf = PulsarConfig.resolve({"loadBalancerNamespaceBundleMaxTopics": 1000, "loadBalancerNamespaceMaximumBundles": 5})
    got = find_bundles_to_split(ld, conf, {"t/ns": 4})
    assert [ld.bundles.names[row] for row, _, _ in got] == [written[0]]
    in_order = load_data_from_request({"loadData": {"brokers": {"b1:8080": {"localData": {
        "bundles": names, "lastStats": {n: {"topics": 2000} for n in names}}}}}})
    assert in_order.membership is None  # written in name order: the one-owner view
    assert [in_order.bundles.names[row] for row, _, _ in find_bundles_to_split(in_order, conf, {"t/ns": 4})] == [names[0]]
