"""Automatic bundle split of the modular load manager.

``find_bundles_to_split`` mirrors ``BundleSplitterTask.findBundlesToSplit``; ``check_namespace_bundle_split``
mirrors ``ModularLoadManagerImpl.checkNamespaceBundleSplit`` up to the split itself (``splitAndOwnBundle``
with the default algorithm), returning the decisions for the caller to apply.

Java iterates ``loadData.getBrokerData()`` (a ``ConcurrentHashMap``: brokers visited in its JVM order,
:mod:`lbreplay.kernel.load_data_order`) and each broker's ``lastStats``, which the leader deserialised from the
broker's report into a ``LinkedHashMap``: the report's key order (``Membership.stats_rank``; sorted names where the
view has no per-broker order, e.g. the replay's rows).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.java_hash_map import iteration_order
from lbreplay.kernel.load_data import RATE_IN, RATE_OUT, THR_IN, THR_OUT, LoadData
from lbreplay.kernel.load_data_order import broker_data_order
from lbreplay.kernel.naming import bundle_index_in_layout
from lbreplay.kernel.signatures import same_parameters
from lbreplay.kernel.split_algorithms import (
    MIB,
    TopicStats,
    algorithm_by_name,
    apply_split,
    child_names,
    split_boundaries,
)
from lbreplay.kernel.version_profile import profile_for

# SplitDecision.Reason names (extensible load manager); the modular task logs the same four conditions.
TOPICS, SESSIONS, MSG_RATE, BANDWIDTH = "Topics", "Sessions", "MsgRate", "Bandwidth"
REASON_NAMES: tuple[str, ...] = (TOPICS, SESSIONS, MSG_RATE, BANDWIDTH, "")  # by split_reason_codes code
_REASONS = np.array(REASON_NAMES, dtype=object)


@dataclass
class SplitDecision:
    """One split the load manager asks for. ``boundaries == []`` means the split was attempted but the
    algorithm found no valid boundary (Pulsar still dropped the parent's BundleData before trying)."""

    bundle: str
    namespace: str
    lower: int
    upper: int
    broker: str
    boundaries: list[int]
    children: list[str]
    algorithm: str
    reason: str
    unload: bool
    bundle_row: int = -1
    broker_row: int = -1
    details: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.children)


def split_thresholds(conf: PulsarConfig) -> tuple[int, int, int, float, float]:
    """(maxBundles, maxTopics, maxSessions, maxMsgRate, maxBandwidth bytes/s) from the ``loadBalancerNamespace*`` keys."""
    return (
        int(conf["loadBalancerNamespaceMaximumBundles"]),
        int(conf["loadBalancerNamespaceBundleMaxTopics"]),
        int(conf["loadBalancerNamespaceBundleMaxSessions"]),
        float(conf["loadBalancerNamespaceBundleMaxMsgRate"]),
        float(conf["loadBalancerNamespaceBundleMaxBandwidthMbytes"]) * MIB,
    )


NO_REASON = 4  # split_reason_codes: no condition holds


def split_reason_codes(
    topics: np.ndarray,
    sessions: np.ndarray,
    msg_rate: np.ndarray,
    msg_throughput: np.ndarray,
    max_topics: int,
    max_sessions: int,
    max_rate: float,
    max_bw: float,
    sessions_guard: bool = True,
) -> np.ndarray:
    """Index of the first hit condition per bundle (0 Topics, 1 Sessions, 2 MsgRate, 3 Bandwidth) or
    ``NO_REASON`` (vectorized); :func:`split_reasons` gives the names.

    ``sessions_guard``: ``loadBalancerNamespaceBundleMaxSessions <= 0`` disables the sessions condition (>= 2.10).
    """
    sess_hit = sessions > max_sessions
    if sessions_guard:
        sess_hit &= max_sessions > 0
    first = np.full(np.shape(topics), NO_REASON, dtype=np.int64)
    for code, hit in ((3, msg_throughput > max_bw), (2, msg_rate > max_rate), (1, sess_hit), (0, topics > max_topics)):
        first[hit] = code  # later assignments win: the first condition in order takes precedence
    return first


@same_parameters(split_reason_codes)
def split_reasons(*args: Any, **kwargs: Any) -> np.ndarray:
    """First hit condition per bundle (Topics, Sessions, MsgRate, Bandwidth) or "" (vectorized): the names of
    :func:`split_reason_codes` (same arguments)."""
    return _REASONS[split_reason_codes(*args, **kwargs)]


def find_bundles_to_split(
    ld: LoadData, conf: PulsarConfig, bundle_count_per_namespace: Mapping[str, int] | None = None
) -> list[tuple[int, int, str]]:
    """``BundleSplitterTask.findBundlesToSplit``: (bundle row, broker row, reason) per bundle to split.

    Condition per reported bundle (``lastStats``): instantaneous topics > ``loadBalancerNamespaceBundleMaxTopics``,
    or consumers + producers > ``…MaxSessions`` (only if > 0), or the **long-term** msg rate / throughput
    (in + out; 0 without BundleData) above ``…MaxMsgRate`` / ``…MaxBandwidthMbytes`` × MiB. Bundles with fewer
    than 2 topics are skipped. A namespace takes a split only while its current bundle count plus the splits
    planned this cycle stays below ``loadBalancerNamespaceMaximumBundles``. Before 2.10 (version profile):
    no 2-topic guard, no sessions guard, and the cap ignores the splits planned this cycle.

    ``bundle_count_per_namespace`` is ``NamespaceService.getBundleCount``; a namespace missing from it counts
    the bundles ``ld`` knows in it.
    """
    b = ld.bundles
    n = len(b)
    if n == 0:
        return []
    prof = profile_for(str(conf["pulsarVersion"]))
    max_bundles, max_topics, max_sessions, max_rate, max_bw = split_thresholds(conf)
    has = b.has_bundle_data
    long = b.long
    rate = np.where(has, long[:, RATE_IN] + long[:, RATE_OUT], 0.0)  # = (in or 0) + (out or 0)
    thr = np.where(has, long[:, THR_IN] + long[:, THR_OUT], 0.0)
    # one entry per lastStats entry of each broker (a bundle in two brokers' lastStats is checked twice, each time
    # with that broker's stats; the later broker's bundleCache.put wins and both count for the namespace)
    holders, rows, _, topics, sessions = ld.reported_stats()
    reasons = split_reason_codes(
        topics, sessions, rate[rows], thr[rows], max_topics, max_sessions, max_rate, max_bw, prof.split_min_two_topics
    )
    cand = reasons != NO_REASON
    if prof.split_min_two_topics:
        cand &= topics >= 2
    pick = np.flatnonzero(cand)
    # brokers in getBrokerData()'s order, then each broker's lastStats in its report's key order (LinkedHashMap)
    m = ld.membership
    within = m.stats_rank[pick] if m is not None and m.stats_rank is not None else rows[pick]  # rows: names
    position = np.empty(len(ld.brokers), dtype=np.int64)
    position[broker_data_order(ld)] = np.arange(len(ld.brokers))
    pick = pick[np.lexsort((within, position[holders[pick]]))]
    counts = _NamespaceCounts(ld, bundle_count_per_namespace)
    planned: dict[str, int] = {}
    out: list[tuple[int, int, str]] = []
    at: dict[int, int] = {}
    for j in pick.tolist():
        row = int(rows[j])
        ns = b.namespaces[row]
        current = counts.get(ns)
        extra = planned.get(ns, 0) if prof.split_min_two_topics else 0
        if current + extra < max_bundles:
            found = (row, int(holders[j]), REASON_NAMES[reasons[j]])
            if row in at:
                out[at[row]] = found
            else:
                at[row] = len(out)
                out.append(found)
            planned[ns] = planned.get(ns, 0) + 1
    return out


class _NamespaceCounts:
    """``NamespaceService.getBundleCount`` per namespace: the given count, else the bundles ``ld`` knows in it
    (counted on first use)."""

    def __init__(self, ld: LoadData, given: Mapping[str, int] | None) -> None:
        self._namespaces = ld.bundles.namespaces
        self._counts: dict[str, int] = {k: int(v) for k, v in given.items()} if given else {}

    def get(self, ns: str) -> int:
        got = self._counts.get(ns)
        if got is None:
            got = self._counts[ns] = self._namespaces.count(ns)
        return got


def check_namespace_bundle_split(
    ld: LoadData,
    conf: PulsarConfig,
    namespace_boundaries: Mapping[str, np.ndarray] | None = None,
    *,
    should_unload: Callable[[str, str], bool] | None = None,
    topics: Mapping[str, TopicStats] | None = None,
) -> list[SplitDecision]:
    """``ModularLoadManagerImpl.checkNamespaceBundleSplit`` on the leader: the splits of this refresh.

    Skipped when ``loadBalancerAutoBundleSplitEnabled`` is false or at most one broker is known. For each
    bundle of ``find_bundles_to_split``: skip if it can't split (``canSplitBundle``) or is no longer in its
    namespace layout (``namespace_boundaries``; namespaces without a layout are not checked); otherwise split
    with ``defaultNamespaceBundleSplitAlgorithm`` (``algorithm_by_name``; ``topics`` gives per-bundle topic
    data for the topic-aware algorithms). ``unload`` = ``loadBalancerAutoUnloadSplitBundlesEnabled`` and
    ``should_unload(bundle, broker)`` (``shouldNamespacePoliciesUnload`` and
    ``shouldAntiAffinityNamespaceUnload``; default: True). The caller applies each decision: drop the
    parent's BundleData and lastStats entry (also when ``boundaries`` is empty), replace the layout with
    ``apply_split`` and give the children to ``broker`` (then unload them if ``unload``).
    """
    if not conf["loadBalancerAutoBundleSplitEnabled"] or len(ld.brokers) <= 1:
        return []
    layouts = {ns: np.asarray(v, dtype=np.int64) for ns, v in (namespace_boundaries or {}).items()}
    counts = {ns: int(v.size - 1) for ns, v in layouts.items()}
    found = find_bundles_to_split(ld, conf, counts)
    # BundleSplitterTask's bundleCache (a HashMap; 2.10 / 2.11: a HashSet, the same order) iterated by checkNamespaceBundleSplit:
    # a fresh map's order (a cleared map keeps its table: more than 12 splits in an earlier cycle is not mirrored)
    order = {name: k for k, name in enumerate(iteration_order(ld.bundles.names[r] for r, _, _ in found))}
    found.sort(key=lambda f: order[ld.bundles.names[f[0]]])
    algorithm = algorithm_by_name(conf["defaultNamespaceBundleSplitAlgorithm"], conf)
    unload_enabled = bool(conf["loadBalancerAutoUnloadSplitBundlesEnabled"])
    thresholds = split_thresholds(conf)
    b = ld.bundles
    out: list[SplitDecision] = []
    for row, broker_row, reason in found:
        name, ns = b.names[row], b.namespaces[row]
        lo, hi = int(b.lower[row]), int(b.upper[row])
        if not hi - lo > 1:  # naming.can_split (NamespaceBundleFactory.canSplitBundle)
            continue
        layout = layouts.get(ns)
        if layout is not None and bundle_index_in_layout(layout, lo, hi) < 0:
            continue  # [M] "Bundle has been removed, skip split this bundle"
        broker = ld.brokers.ids[broker_row]
        unload = unload_enabled and (should_unload(name, broker) if should_unload is not None else True)
        try:
            cuts = split_boundaries(
                algorithm,
                lo,
                hi,
                topics=(topics or {}).get(name),
                topic_count=int(b.topics[row]),
                conf=conf,
            )
            if cuts and layout is not None:
                layouts[ns] = apply_split(layout, lo, hi, cuts)
            elif cuts:
                apply_split([lo, hi], lo, hi, cuts)  # validates the boundaries
        except ValueError:
            cuts = []  # the factory rejects the boundaries: the split fails
        out.append(
            SplitDecision(
                bundle=name,
                namespace=ns,
                lower=lo,
                upper=hi,
                broker=broker,
                boundaries=list(cuts),
                children=child_names(ns, lo, hi, cuts) if cuts else [],
                algorithm=algorithm,
                reason=reason,
                unload=unload,
                bundle_row=row,
                broker_row=broker_row,
                details=_split_details(ld, row, thresholds),
            )
        )
    return out


def _split_details(ld: LoadData, row: int, thresholds: tuple[int, int, int, float, float]) -> dict[str, float]:
    """A split bundle's figures next to the thresholds of :func:`split_thresholds` they were compared with."""
    _, max_topics, max_sessions, max_rate, max_bw = thresholds
    b = ld.bundles
    long_src = b.long[row] if b.has_bundle_data[row] else np.zeros(4)
    return {
        "topics": float(b.topics[row]),
        "maxTopics": float(max_topics),
        "sessions": float(b.consumer_count[row] + b.producer_count[row]),
        "maxSessions": float(max_sessions),
        "msgRate": float(long_src[RATE_IN] + long_src[RATE_OUT]),
        "maxMsgRate": max_rate,
        "msgThroughput": float(long_src[THR_IN] + long_src[THR_OUT]),
        "maxMsgThroughput": max_bw,
    }
