"""Bundle placement of the modular load manager (PULSAR-LB-SPEC.md §4.1, §4.7).

Mirrors ``ModularLoadManagerImpl.selectBrokerForAssignment`` / ``selectBroker`` / ``preallocateBundle`` and the
preallocation clean-up of ``updateBundleData`` / ``reapDeadBrokerPreallocations``, plus the candidate filters
``LoadManagerShared.filterBrokersWithLargeTopicCount`` / ``removeMostServicingBrokersForNamespace``,
``BrokerLoadManagerClassFilter`` and ``BrokerVersionFilter``.

Candidate sets are boolean masks over the sorted broker rows; strategies receive the selected rows in ascending
order. Preallocations live in ``LoadData`` (``preallocated_bundle_to_broker`` and ``Bundles.preallocated_to``,
i.e. ``BrokerData.preallocatedBundleData``); ``LeaderState`` holds the leader's other mutable structures.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data import LoadData, insert_bundles, split_bundle_name
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.resource_usage import overload_check_usage
from lbreplay.kernel.round_robin_broker_selector import RoundRobinBrokerSelector
from lbreplay.kernel.strategy import ModularLoadManagerStrategy
from lbreplay.kernel.version_profile import profile_for

SYSTEM_NAMESPACE = "pulsar/system"  # NamespaceName.SYSTEM_NAMESPACE
# BrokerLoadManagerClassFilter is in the filter pipeline since 3.0 (next to BrokerVersionFilter).
_CLASS_FILTER_PROFILES = frozenset({"3.x", "4.x"})
# Before loadBalancerDistributeBundlesEvenlyEnabled existed (2.9 line) the even spread was always applied.
_EVEN_SPREAD_ALWAYS_PROFILES = frozenset({"2.9"})


@dataclass
class LeaderState:
    """Leader-only mutable state of ``ModularLoadManagerImpl`` besides ``LoadData``.

    * ``bundle_ranges``: ``brokerToNamespaceToBundleRange`` (broker id -> namespace -> bundle ranges), rebuilt per
      broker from reported + preallocated bundles on every ``updateBundleData`` (:meth:`reload`) and extended by
      ``preallocateBundle``.
    * ``round_robin``: ``sheddingExcludedNamespaceSelectionStrategy``.

    Preallocations themselves are kept in ``LoadData``; :meth:`get_state` / :meth:`set_state` carry them too when
    given the ``LoadData``.
    """

    bundle_ranges: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    round_robin: RoundRobinBrokerSelector = field(default_factory=RoundRobinBrokerSelector)

    @classmethod
    def from_load_data(cls, ld: LoadData) -> "LeaderState":
        """A leader that has just run ``updateBundleData`` on ``ld``."""
        state = cls()
        state.reload(ld)
        return state

    def reload(self, ld: LoadData) -> None:
        """``brokerToNamespaceToBundleRange.reloadFromBundles`` for every broker in ``ld``: its reported bundles
        (``lastStats`` keys) plus its preallocated ones. Brokers absent from ``ld`` are dropped."""
        b = ld.bundles
        ids = ld.brokers.ids
        ranges: dict[str, dict[str, set[str]]] = {broker: {} for broker in ids}
        for holders in (b.owner, b.preallocated_to):
            rows = np.flatnonzero(holders >= 0)
            for row, holder in zip(rows.tolist(), holders[rows].tolist()):
                ns = b.namespaces[row]
                ns_map = ranges[ids[holder]]
                got = ns_map.get(ns)
                if got is None:
                    got = ns_map[ns] = set()
                got.add(b.names[row][len(ns) + 1 :])
        self.bundle_ranges = ranges

    def add(self, broker: str, bundle: str) -> None:
        """``brokerToNamespaceToBundleRange.add(broker, namespace, range)``."""
        ns, rng = split_bundle_name(bundle)
        self.bundle_ranges.setdefault(broker, {}).setdefault(ns, set()).add(rng)

    def namespace_bundle_counts(self, namespace: str, ids: list[str]) -> np.ndarray:
        """Per broker id in ``ids``: how many ranges of ``namespace`` it serves (0 when unknown)."""
        return np.array([len(self.bundle_ranges.get(b, {}).get(namespace, ())) for b in ids], dtype=np.int64)

    def get_state(self, ld: LoadData | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerToNamespaceToBundleRange": {
                b: {ns: sorted(r) for ns, r in sorted(m.items())} for b, m in sorted(self.bundle_ranges.items())
            },
            "roundRobin": self.round_robin.get_state(),
        }
        if ld is not None:
            b = ld.bundles
            pre: dict[str, list[str]] = {}
            for row in np.flatnonzero(b.preallocated_to >= 0):
                pre.setdefault(ld.brokers.ids[b.preallocated_to[row]], []).append(b.names[row])
            out["preallocatedBundleToBroker"] = dict(sorted(ld.preallocated_bundle_to_broker.items()))
            out["preallocatedBundleData"] = dict(sorted(pre.items()))
        return out

    def set_state(self, state: dict[str, Any], ld: LoadData | None = None) -> None:
        """Restore; with ``ld``, also re-apply preallocations to brokers present in ``ld``."""
        state = state or {}
        raw = state.get("brokerToNamespaceToBundleRange")
        if raw is not None:
            self.bundle_ranges = {str(b): {str(ns): set(r) for ns, r in m.items()} for b, m in raw.items()}
        self.round_robin.set_state(state.get("roundRobin") or {})
        if ld is None:
            return
        for broker, bundles in (state.get("preallocatedBundleData") or {}).items():
            row = ld.brokers.index(broker)
            if row < 0:
                continue
            for bundle in bundles:
                j = _ensure_bundle_data(ld, bundle)
                ld.bundles.preallocated_to[j] = row
        for bundle, broker in (state.get("preallocatedBundleToBroker") or {}).items():
            if ld.brokers.index(broker) >= 0:
                ld.preallocated_bundle_to_broker[str(bundle)] = str(broker)


def _ensure_bundle_data(ld: LoadData, bundle: str) -> int:
    """``loadData.getBundleData().computeIfAbsent(bundle, getBundleDataOrDefault)``: the bundle's row, with
    default BundleData (50 msg/s and 50000 B/s in and out, no samples) when the leader had none."""
    row = int(insert_bundles(ld, [bundle])[0])
    b = ld.bundles
    if not b.has_bundle_data[row]:
        b.has_bundle_data[row] = True  # rows start at the default message data with 0 samples
    return row


# --- candidate filters -------------------------------------------------------------------------
def filter_brokers_with_large_topic_count(ld: LoadData, candidates: np.ndarray, max_topics: int) -> np.ndarray:
    """``LoadManagerShared.filterBrokersWithLargeTopicCount``: keep brokers whose reported topics plus the topics
    of their preallocated bundles are at most ``loadBalancerBrokerMaxTopics``; keep all if none would remain."""
    b = ld.bundles
    pre = np.zeros(len(ld.brokers), dtype=np.int64)
    rows = np.flatnonzero(b.preallocated_to >= 0)
    if rows.size:
        np.add.at(pre, b.preallocated_to[rows], b.bundle_topics[rows])
    total = pre + np.asarray(ld.brokers.num_topics, dtype=np.int64)
    kept = candidates & (total <= max_topics)
    return kept if kept.any() else candidates


def remove_most_servicing_brokers_for_namespace(
    bundle: str, ids: list[str], candidates: np.ndarray, leader: LeaderState
) -> np.ndarray:
    """``LoadManagerShared.removeMostServicingBrokersForNamespace``: drop candidates serving more bundles of the
    bundle's namespace (reported + preallocated) than the least-serving candidate."""
    if not candidates.any():
        return candidates
    ns, _ = split_bundle_name(bundle)
    counts = leader.namespace_bundle_counts(ns, ids)
    least = counts[candidates].min()
    return candidates & (counts <= least)


def broker_load_manager_class_filter(ld: LoadData, candidates: np.ndarray, conf: PulsarConfig) -> np.ndarray:
    """``BrokerLoadManagerClassFilter``: remove brokers whose ``loadManagerClassName`` differs from this broker's
    (``Objects.equals``: a report without the field is removed)."""
    name = conf["loadManagerClassName"]
    same = np.array([c == name for c in ld.brokers.load_manager_class_name], dtype=bool)
    return candidates & same


class BrokerFilterError(Exception):
    """``BrokerFilterException`` (``BrokerFilterBadVersionException``): makes selectBroker reset its candidates."""


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


def _ident_key(parts: str | None) -> tuple[int, tuple[tuple[int, int | str], ...]]:
    """Semver identifier list order; an absent pre-release / build ranks above any present one (jsemver)."""
    if parts is None:
        return (1, ())
    return (0, tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts.split(".")))  # type: ignore[misc]


def parse_semver(text: str | None) -> tuple[Any, ...]:
    """``Version.valueOf`` (jsemver): (major, minor, patch, pre-release key, build key); raises on a bad string."""
    if not text:
        raise BrokerFilterError("no version string in load report")
    m = _SEMVER.match(text)
    if m is None:
        raise BrokerFilterError(f"invalid version string {text!r}")
    return (int(m[1]), int(m[2]), int(m[3]), _ident_key(m[4]), _ident_key(m[5]))


def broker_version_filter(ld: LoadData, candidates: np.ndarray, conf: PulsarConfig) -> np.ndarray:
    """``BrokerVersionFilter``: with ``preferLaterVersions``, keep the candidates running the latest version
    (``BUILD_AWARE_ORDER`` for the maximum, equality ignoring build metadata). An empty set or a missing/invalid
    version raises :class:`BrokerFilterError`."""
    if not conf["preferLaterVersions"]:
        return candidates
    rows = np.flatnonzero(candidates)
    if rows.size == 0:
        raise BrokerFilterError("Unable to determine latest version since broker set was empty")
    versions = [parse_semver(ld.brokers.broker_version[i]) for i in rows]
    latest = max(versions)
    out = np.zeros_like(candidates)
    for i, v in zip(rows, versions):
        out[i] = v[:4] == latest[:4]
    return out


# --- selectBroker ----------------------------------------------------------------------------
@dataclass
class Placement:
    """What ``select_broker`` decided, with the candidate sets it went through (for decisions/details)."""

    broker: str | None
    candidates: int = 0
    overload_recheck: bool = False
    round_robin: bool = False


def select_broker_detailed(
    bundle: str,
    ld: LoadData,
    conf: PulsarConfig,
    placement: ModularLoadManagerStrategy,
    leader: LeaderState,
    policies: NamespacePolicies,
    rng: np.random.Generator,
    available: np.ndarray | None = None,
    *,
    non_persistent: bool = False,
) -> Placement:
    """``ModularLoadManagerImpl.selectBroker`` ([M]); see :func:`select_broker`."""
    _ensure_bundle_data(ld, bundle)
    br = ld.brokers
    ns, _ = split_bundle_name(bundle)
    avail = np.ones(len(br), dtype=bool) if available is None else np.asarray(available, dtype=bool)

    def policy_set() -> np.ndarray:
        return policies.apply_namespace_policies(ns, br, avail, non_persistent=non_persistent)

    cand = policy_set()
    cand = filter_brokers_with_large_topic_count(ld, cand, int(conf["loadBalancerBrokerMaxTopics"]))
    cand = policies.filter_anti_affinity_group_owned_brokers(ns, br, cand, leader.bundle_ranges)
    profile = profile_for(conf["pulsarVersion"])
    even = conf["loadBalancerDistributeBundlesEvenlyEnabled"] or ns == SYSTEM_NAMESPACE
    if even or profile.name in _EVEN_SPREAD_ALWAYS_PROFILES:
        cand = remove_most_servicing_brokers_for_namespace(bundle, br.ids, cand, leader)
    try:
        if profile.name in _CLASS_FILTER_PROFILES:
            cand = broker_load_manager_class_filter(ld, cand, conf)
        cand = broker_version_filter(ld, cand, conf)
    except BrokerFilterError:
        cand = policy_set()  # "restore the list of brokers to the full set"
    if not cand.any():
        cand = policy_set()
    rows = np.flatnonzero(cand)
    result = Placement(None, candidates=int(rows.size))
    if policies.is_shedding_excluded(ns):
        row = leader.round_robin.select_broker(rows, bundle, ld, conf, rng)
        result.round_robin = True
    else:
        row = placement.select_broker(rows, bundle, ld, conf, rng)
    if row < 0:
        return result
    usage = overload_check_usage(br.usage[row : row + 1], br.limit[row : row + 1], conf)[0]
    if usage > conf.overload_threshold:
        # "All brokers that were in the filtered list were overloaded, so check if there is a better broker"
        again = placement.select_broker(np.flatnonzero(policy_set()), bundle, ld, conf, rng)
        result.overload_recheck = True
        if again >= 0:
            row = again
    result.broker = br.ids[row]
    return result


def select_broker(
    bundle: str,
    ld: LoadData,
    conf: PulsarConfig,
    placement: ModularLoadManagerStrategy,
    leader: LeaderState,
    policies: NamespacePolicies,
    rng: np.random.Generator,
    available: np.ndarray | None = None,
    *,
    non_persistent: bool = False,
) -> str | None:
    """``ModularLoadManagerImpl.selectBroker``: the broker for ``bundle``, or None. No preallocation.

    Pipeline: namespace policies -> max-topics filter (with preallocated topics) -> anti-affinity (failure domains)
    -> even bundle spread per namespace (``loadBalancerDistributeBundlesEvenlyEnabled`` or ``pulsar/system``) ->
    load-manager-class filter (3.x+) and version filter (a filter error resets to the policy set) -> reset to the
    policy set if empty -> round robin for shedding-excluded namespaces, else the placement strategy -> when the
    chosen broker is overloaded, a second strategy call over the policy set. ``available``: mask of live brokers
    (default: every broker row). Inserts default BundleData for an unknown bundle (``computeIfAbsent``).
    """
    return select_broker_detailed(
        bundle, ld, conf, placement, leader, policies, rng, available, non_persistent=non_persistent
    ).broker


def preallocate_bundle(ld: LoadData, leader: LeaderState, bundle: str, broker: str) -> None:
    """``ModularLoadManagerImpl.preallocateBundle``: record ``bundle`` in ``broker``'s preallocatedBundleData, in
    ``preallocatedBundleToBroker`` and in ``brokerToNamespaceToBundleRange``."""
    row = _ensure_bundle_data(ld, bundle)
    ld.bundles.preallocated_to[row] = ld.brokers.index(broker)
    ld.preallocated_bundle_to_broker[bundle] = broker
    leader.add(broker, bundle)


def select_broker_for_assignment(
    bundle: str,
    ld: LoadData,
    conf: PulsarConfig,
    placement: ModularLoadManagerStrategy,
    leader: LeaderState,
    policies: NamespacePolicies,
    rng: np.random.Generator,
    available: np.ndarray | None = None,
    *,
    non_persistent: bool = False,
) -> str | None:
    """``ModularLoadManagerImpl.selectBrokerForAssignment``: the cached ``preallocatedBundleToBroker`` decision if
    any, else :func:`select_broker` followed by :func:`preallocate_bundle`."""
    cached = ld.preallocated_bundle_to_broker.get(bundle)
    if cached is not None:
        return cached
    broker = select_broker(bundle, ld, conf, placement, leader, policies, rng, available, non_persistent=non_persistent)
    if broker is not None:
        preallocate_bundle(ld, leader, bundle, broker)
    return broker


# --- preallocation clean-up (updateBundleData / reapDeadBrokerPreallocations) ----------------
def clear_preallocations(ld: LoadData, leader_owned: Collection[str] | None = None) -> None:
    """The preallocation clean-up inside ``updateBundleData``, for every broker:

    * ``preallocatedBundleToBroker`` drops every bundle in the broker's ``preallocatedBundleData`` (all versions);
    * an entry leaves ``preallocatedBundleData`` once the broker reports the bundle and the leader has its
      BundleData (2.x rule, and part of [M]); with ``leader_owned`` given ([M]: the leader's own
      ``getOwnedServiceUnits()``), also every entry whose bundle the leader itself does not own.
    Pulsar runs it right after sampling the broker's reported bundles, so call it after ``update_bundle_data``
    (a reported bundle then has BundleData), then :meth:`LeaderState.reload`.
    """
    b = ld.bundles
    rows = np.flatnonzero(b.preallocated_to >= 0)
    for row in rows:
        ld.preallocated_bundle_to_broker.pop(b.names[row], None)
    reported = b.owner[rows] == b.preallocated_to[rows]
    drop = reported & b.has_bundle_data[rows]
    if leader_owned is not None:
        owned = set(leader_owned)
        drop |= np.array([b.names[r] not in owned for r in rows], dtype=bool)
    b.preallocated_to[rows[drop]] = -1


def reap_dead_broker_preallocations(ld: LoadData, alive: Iterable[str]) -> None:
    """``reapDeadBrokerPreallocations``: forget ``preallocatedBundleToBroker`` entries pointing at dead brokers."""
    live = set(alive)
    for bundle, broker in list(ld.preallocated_bundle_to_broker.items()):
        if broker not in live:
            del ld.preallocated_bundle_to_broker[bundle]
