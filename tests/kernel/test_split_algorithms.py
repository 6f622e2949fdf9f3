"""The four NamespaceBundleSplitAlgorithm implementations and layout splits (lbreplay.kernel.split_algorithms)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from lbreplay.errors import InvalidInputError
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.naming import bundle_names, can_split, topic_hash
from lbreplay.kernel.split_algorithms import (
    MIB,
    TopicStats,
    algorithm_by_name,
    apply_split,
    check_operator_split,
    child_names,
    child_ranges,
    equal_split_boundaries,
    flow_or_qps_equally_divide,
    range_equally_divide,
    specified_positions_divide,
    split_boundaries,
    topic_count_equally_divide,
)

# --- range_equally_divide ----------------------------------------------------------------------------------


def test_range_equally_divide_pulsar_case() -> None:
    """RangeEquallyDivideBundleSplitAlgorithmTest#testGetSplitBoundaryMethodReturnCorrectResult:
    [10, 0xffffffff] -> 10 + (0xffffffff - 10) / 2 = 2147483652."""
    assert range_equally_divide(10, 0xFFFFFFFF) == [2147483652]


def test_range_equally_divide_full_range_and_quarter() -> None:
    """Spec §5.2: full range -> 0x7fffffff (not 0x80000000); 0x40000000_0x80000000 -> 0x60000000."""
    assert range_equally_divide(0, 0xFFFFFFFF) == [0x7FFFFFFF]
    assert range_equally_divide(0x40000000, 0x80000000) == [0x60000000]


def test_split_bundle_in_two_repeatedly() -> None:
    """NamespaceBundlesTest#testSplitBundleInTwo: full -> 0x7fffffff; then 0x3fffffff / 0xbfffffff;
    then 0x1fffffff, 0x5fffffff, 0x9fffffff, 0xdfffffff (non-power-of-two boundaries)."""
    layout = np.array([0, 0xFFFFFFFF])
    layout = apply_split(layout, 0, 0xFFFFFFFF, range_equally_divide(0, 0xFFFFFFFF))
    assert bundle_names("pulsar/global/ns1", layout) == [
        "pulsar/global/ns1/0x00000000_0x7fffffff",
        "pulsar/global/ns1/0x7fffffff_0xffffffff",
    ]
    for lo, hi in [(0, 0x7FFFFFFF), (0x7FFFFFFF, 0xFFFFFFFF)]:
        layout = apply_split(layout, lo, hi, range_equally_divide(lo, hi))
    assert layout.tolist() == [0, 0x3FFFFFFF, 0x7FFFFFFF, 0xBFFFFFFF, 0xFFFFFFFF]
    for lo, hi in [(0, 0x3FFFFFFF), (0x3FFFFFFF, 0x7FFFFFFF), (0x7FFFFFFF, 0xBFFFFFFF), (0xBFFFFFFF, 0xFFFFFFFF)]:
        layout = apply_split(layout, lo, hi, range_equally_divide(lo, hi))
    assert layout.tolist() == [
        0, 0x1FFFFFFF, 0x3FFFFFFF, 0x5FFFFFFF, 0x7FFFFFFF, 0x9FFFFFFF, 0xBFFFFFFF, 0xDFFFFFFF, 0xFFFFFFFF
    ]


# --- topic_count_equally_divide ----------------------------------------------------------------------------


def test_topic_count_single_topic_no_split() -> None:
    """TopicCountEquallyDivideBundleSplitAlgorithmTest#testTopicsSizeLessThan1: one topic -> null (no split)."""
    assert topic_count_equally_divide(0, 0xFFFFFFFF, [zlib.crc32(b"a")]) == []
    assert topic_count_equally_divide(0, 0xFFFFFFFF, []) == []


def test_topic_count_pulsar_case() -> None:
    """TopicCountEquallyDivideBundleSplitAlgorithmTest#testAlgorithmReturnCorrectResult: topics a, b, c hashed with
    crc32 of the raw names; expected = s + (e - s) / 2 with s = H[max(n/2 - 1, 0)], e = H[n/2] of sorted H."""
    h = sorted(zlib.crc32(t.encode()) for t in ("a", "b", "c"))
    s, e = h[max(len(h) // 2 - 1, 0)], h[len(h) // 2]
    assert topic_count_equally_divide(0, 0xFFFFFFFF, [zlib.crc32(t.encode()) for t in ("c", "a", "b")]) == [
        s + (e - s) // 2
    ]


def test_topic_count_seed_docs_example() -> None:
    """Seed 004 (topic_count_equally_divide): hashes 0x10000000 … 0x75000000 in [0, 0x80000000) -> 0x4d000000
    per the spec's Corrections (H[2]=0x35000000, H[3]=0x65000000); the docs' 0x50000000 is illustrative."""
    hashes = [0x10000000, 0x20000000, 0x35000000, 0x65000000, 0x70000000, 0x75000000]
    assert topic_count_equally_divide(0, 0x80000000, hashes) == [0x4D000000]


def test_topic_count_seed_blog_example() -> None:
    """Seed 000 §3: hashes 0x0000, 0x0005, 0x0010, 0x0015, 0x0020, 0x0025 -> split at 0x0012."""
    assert topic_count_equally_divide(0, 0x8000, [0x0025, 0x0000, 0x0010, 0x0005, 0x0020, 0x0015]) == [0x0012]


# --- specified_positions_divide ----------------------------------------------------------------------------


def test_specified_positions_single_topic_no_split() -> None:
    """SpecifiedPositionsBundleSplitAlgorithmTest#testTotalTopicsSizeLessThan1."""
    assert specified_positions_divide(0, 0xFFFFFFFF, [1, 2], topic_count=1) == []


@pytest.mark.parametrize("positions", [None, []])
def test_specified_positions_empty_raises(positions: list[int] | None) -> None:
    """SpecifiedPositionsBundleSplitAlgorithmTest#testSpecifiedPositionsLessThan1: IllegalArgumentException."""
    with pytest.raises(ValueError):
        specified_positions_divide(0, 0xFFFFFFFF, positions, topic_count=5)


def test_specified_positions_pulsar_case() -> None:
    """SpecifiedPositionsBundleSplitAlgorithmTest#testAlgorithmReturnCorrectResult: bundle [1, 1000), positions
    -1, 0, 1, 100, 200, 500, 800, 1000, 1100 -> 100, 200, 500, 800."""
    got = specified_positions_divide(1, 1000, [800, -1, 0, 1, 100, 200, 500, 1000, 1100], topic_count=2)
    assert got == [100, 200, 500, 800]


def test_specified_positions_seed_example() -> None:
    """Seed 004 (specified_positions_divide): topics at 0x30000000 and 0x35000000 in [0, 0x40000000), split at
    0x33000000; the children separate the two topics."""
    cuts = specified_positions_divide(0, 0x40000000, [0x33000000], topic_count=2)
    assert cuts == [0x33000000]
    assert child_ranges(0, 0x40000000, cuts) == [(0, 0x33000000), (0x33000000, 0x40000000)]


# --- flow_or_qps_equally_divide ----------------------------------------------------------------------------

_SEED_HASHES = [0x10000000, 0x15000000, 0x24000000, 0x39000000, 0x58000000, 0x76000000]
_SEED_RATES = [100.0, 200.0, 300.0, 400.0, 500.0, 600.0]
_SEED_THR = [10.0 * MIB, 20.0 * MIB, 30.0 * MIB, 40.0 * MIB, 50.0 * MIB, 60.0 * MIB]


@pytest.mark.parametrize(
    ("max_rate", "max_mb", "expected"),
    [
        (450, 200, [0x1C800001, 0x2E800001, 0x48800001, 0x67000001]),  # case 1 (docs: 0x19500000, …)
        (1900, 90, [0x2E800001, 0x67000001]),  # case 2 (docs: 0x31500000, 0x67000000)
        (1100, 110, [0x48800001]),  # case 3 (docs: 0x48500000)
    ],
)
def test_flow_or_qps_seed_cases(max_rate: int, max_mb: int, expected: list[int]) -> None:
    """Seed 004 (flow_or_qps_equally_divide) cases 1-3 with the Corrections' values: cut at
    H[i-1] + (H[i]-H[i-1]) // 2 + 1; the docs' figures (plain midpoints, one with a wrong midpoint) are illustrative."""
    got = flow_or_qps_equally_divide(0, 0x80000000, _SEED_HASHES, _SEED_RATES, _SEED_THR, max_rate, max_mb * MIB, 0.10)
    assert got == expected


def test_flow_or_qps_below_threshold_no_split() -> None:
    """No split when the bundle is below max * (1 + diff) in both rate and throughput."""
    got = flow_or_qps_equally_divide(0, 0x80000000, _SEED_HASHES, _SEED_RATES, _SEED_THR, 2000, 200 * MIB, 0.10)
    assert got == []  # 2100 < 2200 and 210 MiB < 220 MiB
    got = flow_or_qps_equally_divide(0, 0x80000000, _SEED_HASHES, _SEED_RATES, _SEED_THR, 1900, 200 * MIB, 0.10)
    assert got != []  # 2100 >= 2090: the rate side triggers


def test_flow_or_qps_skips_empty_and_statless_topics() -> None:
    """Topics with rate <= 0 and throughput <= 0, or without stats (NaN), are skipped; < 2 left -> no split."""
    hashes = [0x10000000, 0x20000000, 0x30000000]
    assert flow_or_qps_equally_divide(0, 0xFFFFFFFF, hashes, [5000, 0, np.nan], [0, 0, np.nan], 100, MIB, 0.1) == []
    got = flow_or_qps_equally_divide(0, 0xFFFFFFFF, hashes, [5000, 0, 5000], [0, 0, 0], 100, MIB, 0.1)
    assert got == [0x10000000 + (0x30000000 - 0x10000000) // 2 + 1]


def test_flow_or_qps_first_position_overloaded() -> None:
    """FlowOrQpsEquallyDivideBundleSplitAlgorithmTest#testFirstPositionIsOverLoad: the lowest-hash topic alone is
    over the limit -> the first cut is right after it, at H0 + (H1 - H0) / 2 + 1."""
    names = [f"persistent://test-tenant1/test-namespace1/test-partition-{i}" for i in range(5)]
    hashes = [zlib.crc32(n.encode()) for n in names]
    order = np.argsort(hashes)
    rates = np.full(5, 49.5)
    thr = np.full(5, 2000.0)
    rates[order[0]], thr[order[0]] = 2000.0, 2000.0
    got = flow_or_qps_equally_divide(0, 0xFFFFFFFF, hashes, rates, thr, 1010, 100 * MIB, 0.10)
    h = sorted(hashes)
    assert got[0] == h[0] + (h[1] - h[0]) // 2 + 1


def test_flow_or_qps_pulsar_runs_stay_under_limits() -> None:
    """FlowOrQpsEquallyDivideBundleSplitAlgorithmTest#testSplitBundleByFlowOrQps: 100 partitions at 49.5 msg/s, 140 at
    50.5 msg/s and one at 60 msg/s (2000 B/s each); every run of topics before each cut stays under 1010 msg/s."""
    names, rates = [], []
    for i in range(1, 13):
        for j in range(20):
            names.append(f"persistent://test-tenant1/test-namespace1/test{i}-partition-{j}")
            rates.append(49.5 if i < 6 else 50.5)
    names.append("persistent://test-tenant1/test-namespace1/test695-partition-0")
    rates.append(60.0)
    stats = TopicStats(topic_hash(names), np.array(rates), np.full(len(names), 2000.0))
    cuts = split_boundaries(
        "flow_or_qps_equally_divide", 0, 0xFFFFFFFF, topics=stats,
        max_msg_rate=1010, max_bandwidth_bytes=100 * MIB, diff_fraction=0.10,
    )
    assert len(cuts) >= 11  # 12080 msg/s in runs of at most 1010 msg/s
    order = np.argsort(stats.hashes)
    h, r = stats.hashes[order], stats.rates[order]
    i = 0
    for cut in cuts:
        run = 0.0
        while h[i] < cut:
            run += r[i]
            i += 1
        assert run < 1010


def test_topic_stats_from_records() -> None:
    """TopicStats from decide's per-bundle topic records: in+out sums, hashes of the full names."""
    ts = TopicStats.from_records(
        [
            {"topic": "persistent://t/ns/a", "msgRateIn": 1, "msgRateOut": 2, "msgThroughputIn": 10, "msgThroughputOut": 20},
            {"topic": "persistent://t/ns/b"},
        ]
    )
    assert ts.hashes.tolist() == [zlib.crc32(b"persistent://t/ns/a"), zlib.crc32(b"persistent://t/ns/b")]
    assert ts.rates[0] == 3 and ts.throughputs[0] == 30
    assert np.isnan(ts.rates[1]) and np.isnan(ts.throughputs[1])


# --- dispatcher, operator checks ---------------------------------------------------------------------------


def test_algorithm_by_name_fallbacks() -> None:
    """NamespaceService.getNamespaceBundleSplitAlgorithmByName: unknown -> default -> range_equally_divide."""
    conf = PulsarConfig.resolve({"defaultNamespaceBundleSplitAlgorithm": "topic_count_equally_divide"})
    assert algorithm_by_name("nope", conf) == "topic_count_equally_divide"
    assert algorithm_by_name(None, conf) == "topic_count_equally_divide"
    assert algorithm_by_name("flow_or_qps_equally_divide", conf) == "flow_or_qps_equally_divide"
    assert algorithm_by_name("nope", {"defaultNamespaceBundleSplitAlgorithm": "bogus"}) == "range_equally_divide"


def test_check_operator_split_rejections() -> None:
    """NamespacesBase.internalSplitNamespaceBundleAsync: unsupported algorithm and specified_positions_divide
    without positions fail (PRECONDITION_FAILED) -> exit code 3."""
    conf = PulsarConfig.resolve({"supportedNamespaceBundleSplitAlgorithms": ["range_equally_divide", "specified_positions_divide"]})
    with pytest.raises(InvalidInputError) as err:
        check_operator_split("topic_count_equally_divide", None, conf)
    assert err.value.exit_code == 3
    with pytest.raises(InvalidInputError):
        check_operator_split("specified_positions_divide", [], conf)
    assert check_operator_split("specified_positions_divide", [5], conf) == "specified_positions_divide"
    assert check_operator_split(None, None, conf) == "range_equally_divide"


def test_check_operator_split_flow_needs_default() -> None:
    """NamespaceService.getBundleSplitOption builds the topic-stats option only when the default algorithm is
    flow_or_qps_equally_divide; otherwise the algorithm's cast fails."""
    with pytest.raises(InvalidInputError):
        check_operator_split("flow_or_qps_equally_divide", None, PulsarConfig.resolve({}))
    conf = PulsarConfig.resolve({"defaultNamespaceBundleSplitAlgorithm": "flow_or_qps_equally_divide"})
    assert check_operator_split("flow_or_qps_equally_divide", None, conf) == "flow_or_qps_equally_divide"


def test_split_boundaries_dispatch_uses_conf_limits() -> None:
    """split_boundaries reads loadBalancerNamespaceBundleMaxMsgRate / …MaxBandwidthMbytes / flowOrQps… from conf."""
    conf = PulsarConfig.resolve({"loadBalancerNamespaceBundleMaxMsgRate": 450, "loadBalancerNamespaceBundleMaxBandwidthMbytes": 200})
    ts = TopicStats(np.array(_SEED_HASHES), np.array(_SEED_RATES), np.array(_SEED_THR))
    assert split_boundaries("flow_or_qps_equally_divide", 0, 0x80000000, topics=ts, conf=conf) == [
        0x1C800001, 0x2E800001, 0x48800001, 0x67000001
    ]
    # H[2] = 0x24000000, H[3] = 0x39000000 -> 0x24000000 + 0x15000000 // 2
    assert split_boundaries("topic_count_equally_divide", 0, 0x80000000, topics=ts) == [0x2E800000]
    assert split_boundaries("topic_count_equally_divide", 0, 0x80000000) == []
    assert split_boundaries("specified_positions_divide", 0, 0x80000000, positions=[0x100], topic_count=3) == [0x100]
    with pytest.raises(ValueError):
        split_boundaries("bogus", 0, 1)


# --- layout splits -----------------------------------------------------------------------------------------


def test_apply_split_seed_example() -> None:
    """Seed 000 §4 / seed 004: partitions [0x0000, 0x8000, 0xFFFF], boundary 0x4000 on [0x0000, 0x8000) ->
    [0x0000, 0x4000, 0x8000, 0xFFFF]; ranges [0x0000,0x4000), [0x4000,0x8000), [0x8000,0xFFFF]."""
    got = apply_split([0x0000, 0x8000, 0xFFFF], 0x0000, 0x8000, [0x4000])
    assert got.tolist() == [0x0000, 0x4000, 0x8000, 0xFFFF]
    assert child_ranges(0, 0x8000, [0x4000]) == [(0, 0x4000), (0x4000, 0x8000)]


def test_split_by_fix_boundary() -> None:
    """NamespaceBundlesTest#testSplitBundleByFixBoundary: a boundary equal to the lower or upper end is rejected;
    lower + 10 gives children starting at lower and at lower + 10."""
    full = [0, 0xFFFFFFFF]
    with pytest.raises(ValueError):
        apply_split(full, 0, 0xFFFFFFFF, [0])
    with pytest.raises(ValueError):
        apply_split(full, 0, 0xFFFFFFFF, [0xFFFFFFFF])
    got = apply_split(full, 0, 0xFFFFFFFF, [10])
    assert got.tolist() == [0, 10, 0xFFFFFFFF]
    assert child_names("pulsar/global/ns1", 0, 0xFFFFFFFF, [10]) == [
        "pulsar/global/ns1/0x00000000_0x0000000a",
        "pulsar/global/ns1/0x0000000a_0xffffffff",
    ]


def test_split_bundles_into_n() -> None:
    """NamespaceBundlesTest#testSplitBundles: split the full bundle in 4 (1 + 4 - 1 bundles spanning the full
    range), then its first child in 4 (4 + 4 - 1) and its second child in 3 (4 + 3 - 1)."""
    layout = apply_split([0, 0xFFFFFFFF], 0, 0xFFFFFFFF, equal_split_boundaries(0, 0xFFFFFFFF, 4))
    assert layout.size - 1 == 4 and layout[0] == 0 and layout[-1] == 0xFFFFFFFF
    seg = 0xFFFFFFFF // 4
    assert layout.tolist() == [0, seg, 2 * seg, 3 * seg, 0xFFFFFFFF]
    first = apply_split(layout, int(layout[0]), int(layout[1]), equal_split_boundaries(int(layout[0]), int(layout[1]), 4))
    assert first.size - 1 == 7 and first[0] == layout[0] and first[4] == layout[1]
    second = apply_split(layout, int(layout[1]), int(layout[2]), equal_split_boundaries(int(layout[1]), int(layout[2]), 3))
    assert second.size - 1 == 6 and second[1] == layout[1] and second[4] == layout[2]


def test_apply_split_errors() -> None:
    """splitBundles returns null for a bundle not in the layout; canSplitBundle false; repeated cuts rejected."""
    layout = [0, 0x40000000, 0xFFFFFFFF]
    with pytest.raises(ValueError, match="not found"):
        apply_split(layout, 0, 0x20000000, [0x10000000])
    with pytest.raises(ValueError, match="can't be split"):
        apply_split([0, 1, 0xFFFFFFFF], 0, 1, [0])
    with pytest.raises(ValueError, match="repeated"):
        apply_split(layout, 0, 0x40000000, [0x100, 0x100])
    assert not can_split(0, 1)
    got = apply_split(layout, 0x40000000, 0xFFFFFFFF, [0xA0000000, 0x80000000])
    assert got.tolist() == [0, 0x40000000, 0x80000000, 0xA0000000, 0xFFFFFFFF]
