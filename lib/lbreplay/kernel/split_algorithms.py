"""The four ``NamespaceBundleSplitAlgorithm`` implementations and the split of a namespace layout.

Each algorithm is a pure function returning the list of split boundaries (``getSplitBoundary``); an empty list
means "no split" (Java's ``null`` or empty result, which ``NamespaceService.splitAndOwnBundle`` logs as
"No valid boundary found"). ``apply_split`` mirrors ``NamespaceBundleFactory.splitBundles``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lbreplay.errors import InvalidInputError
from lbreplay.kernel.naming import format_range, topic_hash

RANGE_EQUALLY_DIVIDE = "range_equally_divide"
TOPIC_COUNT_EQUALLY_DIVIDE = "topic_count_equally_divide"
SPECIFIED_POSITIONS_DIVIDE = "specified_positions_divide"
FLOW_OR_QPS_EQUALLY_DIVIDE = "flow_or_qps_equally_divide"
ALGORITHMS: tuple[str, ...] = (
    RANGE_EQUALLY_DIVIDE,
    TOPIC_COUNT_EQUALLY_DIVIDE,
    SPECIFIED_POSITIONS_DIVIDE,
    FLOW_OR_QPS_EQUALLY_DIVIDE,
)
MIB = 1024 * 1024  # FlowOrQpsEquallyDivideBundleSplitAlgorithm.MBytes, LoadManagerShared.MIBI


@dataclass(frozen=True)
class TopicStats:
    """Per-topic inputs of the topic-aware algorithms for one bundle (``getOwnedTopicListForNamespaceBundle`` +
    ``BrokerService.getTopicStats(bundle)``): CRC-32 hashes, ``msgRateIn + msgRateOut`` and
    ``msgThroughputIn + msgThroughputOut``; NaN rate and throughput = topic without stats."""

    hashes: np.ndarray  # int64
    rates: np.ndarray  # float64
    throughputs: np.ndarray  # float64

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> "TopicStats":
        """From ``[{"topic": …, "msgRateIn": …, "msgRateOut": …, "msgThroughputIn": …, "msgThroughputOut": …}]``;
        a record without any rate/throughput field counts as a topic without stats."""
        recs = list(records)
        hashes = topic_hash([str(r["topic"]) for r in recs])
        keys_r, keys_t = ("msgRateIn", "msgRateOut"), ("msgThroughputIn", "msgThroughputOut")

        def total(r: Mapping[str, Any], keys: tuple[str, str]) -> float:
            if not any(k in r for k in (*keys_r, *keys_t)):
                return math.nan
            return float(r.get(keys[0], 0.0) or 0.0) + float(r.get(keys[1], 0.0) or 0.0)

        rates = np.array([total(r, keys_r) for r in recs], dtype=np.float64)
        thr = np.array([total(r, keys_t) for r in recs], dtype=np.float64)
        return cls(hashes, rates, thr)


def range_equally_divide(lower: int, upper: int) -> list[int]:
    """``RangeEquallyDivideBundleSplitAlgorithm``: ``lower + (upper - lower) // 2``; full range -> 0x7fffffff."""
    return [int(lower) + (int(upper) - int(lower)) // 2]


def topic_count_equally_divide(lower: int, upper: int, topic_hashes: Sequence[int] | np.ndarray) -> list[int]:
    """``TopicCountEquallyDivideBundleSplitAlgorithm``: the midpoint of the two middle sorted topic hashes.

    ``topic_hashes`` are the bundle's topics (Java takes them from ``getOwnedTopicListForNamespaceBundle``;
    ``lower``/``upper`` are not used). ``<= 1`` topic: no split.
    """
    h = np.sort(np.asarray(topic_hashes, dtype=np.int64))
    n = h.size
    if n <= 1:
        return []
    start = int(h[max(n // 2 - 1, 0)])
    end = int(h[n // 2])
    return [start + (end - start) // 2]


def specified_positions_divide(
    lower: int, upper: int, positions: Sequence[int] | None, topic_count: int
) -> list[int]:
    """``SpecifiedPositionsBundleSplitAlgorithm``: the sorted positions strictly inside ``(lower, upper)``.

    No positions -> ValueError ("SplitBoundaries can't be empty"); ``topic_count <= 1`` or no position inside:
    no split. Duplicates are kept, as Java does (``apply_split`` then rejects them, as the factory does).
    """
    if not positions:
        raise ValueError("specified_positions_divide: split boundaries can't be empty")
    if topic_count <= 1:
        return []
    lo, hi = int(lower), int(upper)
    return [int(p) for p in sorted(int(p) for p in positions) if lo < int(p) < hi]


def flow_or_qps_equally_divide(
    lower: int,
    upper: int,
    topic_hashes: Sequence[int] | np.ndarray,
    rates: Sequence[float] | np.ndarray,
    throughputs: Sequence[float] | np.ndarray,
    max_msg_rate: float,
    max_bandwidth_bytes: float,
    diff_fraction: float,
) -> list[int]:
    """``FlowOrQpsEquallyDivideBundleSplitAlgorithm``: cut the hash-sorted topics into runs under the limits.

    ``rates``/``throughputs`` are per topic (in + out); NaN means no stats. Topics without stats or with
    ``rate <= 0 and throughput <= 0`` are skipped. No split when fewer than 2 topics (or 2 distinct hashes)
    remain, or when the bundle total is below ``max * (1 + diff_fraction)`` for both rate and throughput.
    A cut between hashes ``H[i-1]`` and ``H[i]`` is at ``H[i-1] + (H[i] - H[i-1]) // 2 + 1``. As in Java the
    per-topic figures are keyed by hash, so topics sharing a hash all take the figures of the last of them.
    """
    h_all = np.asarray(topic_hashes, dtype=np.int64)
    if h_all.size <= 1:
        return []
    r_all = np.asarray(rates, dtype=np.float64)
    t_all = np.asarray(throughputs, dtype=np.float64)
    has_stats = ~(np.isnan(r_all) & np.isnan(t_all))
    r0, t0 = np.nan_to_num(r_all), np.nan_to_num(t_all)
    keep = has_stats & ~((r0 <= 0) & (t0 <= 0))
    h, r, t = h_all[keep], r0[keep], t0[keep]
    info: dict[int, tuple[float, float]] = {}
    for hv, rv, tv in zip(h.tolist(), r.tolist(), t.tolist()):
        info[hv] = (rv, tv)  # HashMap.put: the last topic with a hash wins
    bundle_rate = float(sum(r.tolist()))
    bundle_thr = float(sum(t.tolist()))
    if len(info) < 2 or (
        bundle_rate < max_msg_rate * (1 + diff_fraction) and bundle_thr < max_bandwidth_bytes * (1 + diff_fraction)
    ):
        return []
    order = sorted(h.tolist())
    acc_rate, acc_thr = info[order[0]]
    out: list[int] = []
    for prev, cur in zip(order[:-1], order[1:]):
        rate, thr = info[cur]
        if (
            acc_rate > max_msg_rate
            or acc_thr > max_bandwidth_bytes
            or acc_rate + rate > max_msg_rate
            or acc_thr + thr > max_bandwidth_bytes
        ):
            out.append(prev + (cur - prev) // 2 + 1)
            acc_rate, acc_thr = rate, thr
        else:
            acc_rate += rate
            acc_thr += thr
    return out


def algorithm_by_name(name: str | None, conf: Mapping[str, Any]) -> str:
    """``NamespaceService.getNamespaceBundleSplitAlgorithmByName``: an unknown or empty name falls back to
    ``defaultNamespaceBundleSplitAlgorithm``, then to ``range_equally_divide``."""
    if name in ALGORITHMS:
        return str(name)
    default = conf.get("defaultNamespaceBundleSplitAlgorithm")
    return str(default) if default in ALGORITHMS else RANGE_EQUALLY_DIVIDE


def check_operator_split(algorithm: str | None, positions: Sequence[int] | None, conf: Mapping[str, Any]) -> str:
    """Validate an operator split like ``NamespacesBase.internalSplitNamespaceBundleAsync``; return the algorithm.

    Raises InvalidInputError where Pulsar's admin API fails: an algorithm not in
    ``supportedNamespaceBundleSplitAlgorithms``, ``specified_positions_divide`` without positions, and
    ``flow_or_qps_equally_divide`` while ``defaultNamespaceBundleSplitAlgorithm`` is another algorithm
    (``NamespaceService.getBundleSplitOption`` builds the topic-stats option only for the default; the
    algorithm's cast then fails).
    """
    if algorithm:
        supported = list(conf.get("supportedNamespaceBundleSplitAlgorithms") or [])
        if algorithm not in supported:
            raise InvalidInputError(
                f"unsupported namespace bundle split algorithm {algorithm!r}, supported algorithms are {supported}"
            )
        if algorithm == SPECIFIED_POSITIONS_DIVIDE and not positions:
            raise InvalidInputError("with specified_positions_divide split algorithm, splitBoundaries must not be empty")
    chosen = algorithm_by_name(algorithm, conf)
    if chosen == FLOW_OR_QPS_EQUALLY_DIVIDE and conf.get("defaultNamespaceBundleSplitAlgorithm") != chosen:
        raise InvalidInputError(
            "flow_or_qps_equally_divide needs defaultNamespaceBundleSplitAlgorithm=flow_or_qps_equally_divide "
            "(Pulsar builds the topic-stats split option only for the default algorithm)"
        )
    return chosen


def split_boundaries(
    algorithm: str,
    lower: int,
    upper: int,
    *,
    topics: TopicStats | None = None,
    topic_count: int | None = None,
    positions: Sequence[int] | None = None,
    conf: Mapping[str, Any] | None = None,
    max_msg_rate: float | None = None,
    max_bandwidth_bytes: float | None = None,
    diff_fraction: float | None = None,
) -> list[int]:
    """Dispatch to one algorithm (``NamespaceService.getSplitBoundary``); ``[]`` = no split.

    ``topics`` is the bundle's per-topic data; without it the topic-aware algorithms see no topics (no split),
    except that ``specified_positions_divide`` uses ``topic_count`` when given. The flow/QPS limits default to
    ``loadBalancerNamespaceBundleMaxMsgRate``, ``loadBalancerNamespaceBundleMaxBandwidthMbytes`` × MiB and
    ``flowOrQpsDifferenceThresholdPercentage`` / 100 from ``conf``.
    """
    if algorithm == RANGE_EQUALLY_DIVIDE:
        return range_equally_divide(lower, upper)
    hashes = topics.hashes if topics is not None else np.zeros(0, dtype=np.int64)
    if algorithm == TOPIC_COUNT_EQUALLY_DIVIDE:
        return topic_count_equally_divide(lower, upper, hashes)
    if algorithm == SPECIFIED_POSITIONS_DIVIDE:
        count = int(topic_count) if topic_count is not None else int(hashes.size)
        return specified_positions_divide(lower, upper, positions, count)
    if algorithm == FLOW_OR_QPS_EQUALLY_DIVIDE:
        c: Mapping[str, Any] = conf or {}
        rate = max_msg_rate if max_msg_rate is not None else float(c["loadBalancerNamespaceBundleMaxMsgRate"])
        bw = (
            max_bandwidth_bytes
            if max_bandwidth_bytes is not None
            else float(c["loadBalancerNamespaceBundleMaxBandwidthMbytes"]) * MIB
        )
        diff = diff_fraction if diff_fraction is not None else float(c["flowOrQpsDifferenceThresholdPercentage"]) / 100.0
        if topics is None:
            return []
        return flow_or_qps_equally_divide(lower, upper, hashes, topics.rates, topics.throughputs, rate, bw, diff)
    raise ValueError(f"unknown split algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")


def equal_split_boundaries(lower: int, upper: int, num_bundles: int) -> list[int]:
    """``NamespaceBundleFactory.splitBundles(bundle, n, null)``: ``n - 1`` cuts ``segSize = (upper-lower) // n``
    apart (the last child absorbs the remainder)."""
    if num_bundles < 2:
        raise ValueError("a bundle splits into at least 2 bundles")
    seg = (int(upper) - int(lower)) // num_bundles
    return [int(lower) + seg * (j + 1) for j in range(num_bundles - 1)]


def child_ranges(lower: int, upper: int, boundaries: Sequence[int]) -> list[tuple[int, int]]:
    """Children ``[lower, b1), [b1, b2), …, [bk, upper]`` of a split (the last keeps the parent's upper end)."""
    cuts = [int(lower)] + [int(b) for b in boundaries] + [int(upper)]
    return list(zip(cuts[:-1], cuts[1:]))


def child_names(namespace: str, lower: int, upper: int, boundaries: Sequence[int]) -> list[str]:
    """Full names of the children of a split."""
    return [f"{namespace}/{format_range(lo, hi)}" for lo, hi in child_ranges(lower, upper, boundaries)]


def apply_split(
    namespace_boundaries: Sequence[int] | np.ndarray, parent_lower: int, parent_upper: int, new_boundaries: Sequence[int]
) -> np.ndarray:
    """``NamespaceBundleFactory.splitBundles``: insert ``new_boundaries`` into the layout at the parent bundle.

    ValueError when the parent cannot split (``canSplitBundle``), is not a bundle of the layout ("bundle not
    found under namespace"), or a boundary is not strictly inside the parent or repeats (the factory's
    "fixed keys must be between the key range" check; a repeated boundary would make an empty bundle, which
    ``NamespaceBundle`` rejects).
    """
    b = np.asarray(namespace_boundaries, dtype=np.int64)
    lo, hi = int(parent_lower), int(parent_upper)
    if not hi - lo > 1:  # naming.can_split (NamespaceBundleFactory.canSplitBundle)
        raise ValueError(f"bundle {format_range(lo, hi)} can't be split further")
    cuts = sorted(int(x) for x in new_boundaries)
    if not cuts:
        raise ValueError("no split boundaries given")
    if cuts[0] <= lo or cuts[-1] >= hi:
        raise ValueError(f"split boundaries must be strictly inside the key range of bundle {format_range(lo, hi)}")
    if len(set(cuts)) != len(cuts):
        raise ValueError(f"repeated split boundary for bundle {format_range(lo, hi)}")
    i = int(b.searchsorted(lo, side="left"))
    if not (i < b.size - 1 and int(b[i]) == lo and int(b[i + 1]) == hi):
        raise ValueError(f"bundle {format_range(lo, hi)} not found in the namespace layout")
    return np.concatenate([b[: i + 1], np.asarray(cuts, dtype=np.int64), b[i + 1 :]])
