"""Bundle placement of the modular load manager (PULSAR-LB-SPEC.md §4.1, §4.7).

Mirrors ``ModularLoadManagerImpl.selectBrokerForAssignment`` / ``selectBroker`` / ``preallocateBundle`` and the
preallocation clean-up of ``updateBundleData`` / ``reapDeadBrokerPreallocations``, plus the candidate filters
``LoadManagerShared.filterBrokersWithLargeTopicCount`` / ``removeMostServicingBrokersForNamespace``,
``BrokerLoadManagerClassFilter`` and ``BrokerVersionFilter``.

Candidate sets are boolean masks over the sorted broker rows; strategies receive the selected rows in ascending
order. Preallocations live in ``LoadData`` (``preallocated_bundle_to_broker``; ``Bundles.preallocated_to`` plus
``LoadData.preallocated_also``, i.e. each broker's ``BrokerData.preallocatedBundleData``); ``LeaderState`` holds
the leader's other mutable structures.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from lbreplay.kernel.broker_candidate_cache import PolicyFill
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.leader_state import LeaderState, ensure_bundle_data
from lbreplay.kernel.load_data import (
    SYSTEM_NAMESPACE,
    LoadData,
    PreallocationFollower,
    cached,
    derived_cache,
    invalidate_derived,
)
from lbreplay.kernel.load_data_order import available_broker_order
from lbreplay.kernel.naming import split_bundle_name
from lbreplay.kernel.policies import IsolationPolicy, NamespacePolicies
from lbreplay.kernel.preallocated_bundle_data import note_preallocation, preallocation_sums
from lbreplay.kernel.resource_usage import overload_check_usage
from lbreplay.kernel.signatures import same_parameters
from lbreplay.kernel.strategy import ModularLoadManagerStrategy
from lbreplay.kernel.version_profile import profile_for


# --- candidate filters -------------------------------------------------------------------------
def filter_brokers_with_large_topic_count(ld: LoadData, candidates: np.ndarray, max_topics: int) -> np.ndarray:
    """``LoadManagerShared.filterBrokersWithLargeTopicCount``: keep brokers whose reported topics plus the topics
    of their preallocated bundles are at most ``loadBalancerBrokerMaxTopics``; keep all if none would remain."""
    fits = preallocation_sums(ld).total_topics <= max_topics
    return _mask(_within_topic_limit(candidates.nonzero()[0], fits), len(candidates))


def _within_topic_limit(rows: np.ndarray, fits: np.ndarray) -> np.ndarray:
    """:func:`filter_brokers_with_large_topic_count` over candidate rows, given the brokers that fit."""
    kept = rows[fits[rows]]
    return kept if kept.size else rows


def remove_most_servicing_brokers_for_namespace(
    bundle: str, ids: list[str], candidates: np.ndarray, leader: LeaderState
) -> np.ndarray:
    """``LoadManagerShared.removeMostServicingBrokersForNamespace``: drop candidates serving more bundles of the
    bundle's namespace (reported + preallocated) than the least-serving candidate."""
    ns, _ = split_bundle_name(bundle)
    return _mask(_least_servicing(ns, ids, candidates.nonzero()[0], leader), len(candidates))


def _least_servicing(ns: str, ids: list[str], rows: np.ndarray, leader: LeaderState) -> np.ndarray:
    """:func:`remove_most_servicing_brokers_for_namespace` over candidate rows (ascending in, ascending out)."""
    if rows.size == 0:  # no candidate
        return rows
    counts = leader._counts(ns, ids)[rows]
    return rows[counts == counts.min()]


def broker_load_manager_class_filter(ld: LoadData, candidates: np.ndarray, conf: PulsarConfig) -> np.ndarray:
    """``BrokerLoadManagerClassFilter``: remove brokers whose ``loadManagerClassName`` differs from this broker's
    (``Objects.equals``: a report without the field is removed)."""
    return candidates & _same_class(ld, conf)


def _same_class(ld: LoadData, conf: PulsarConfig) -> np.ndarray:
    """Brokers reporting this broker's ``loadManagerClassName`` (cached inside a ``derived_cache`` block)."""

    def compute() -> np.ndarray:
        name = conf["loadManagerClassName"]
        return np.array([c == name for c in ld.brokers.load_manager_class_name], dtype=bool)

    return cached(ld, "broker", "same_class", compute, conf)


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
    return (0, tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts.split(".")))


def parse_semver(text: str | None) -> tuple[Any, ...]:
    """``Version.valueOf`` (jsemver): (major, minor, patch, pre-release key, build key); raises on a bad string."""
    if not text:
        raise BrokerFilterError("no version string in load report")
    return _parse_semver(text)


@functools.lru_cache(maxsize=1024)
def _parse_semver(text: str) -> tuple[Any, ...]:
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
    row: int = -1  # the broker's row (-1: none, or a cached decision for a broker not in the LoadData)
    # the brokers the strategy drew ``broker`` from at random (ThreadLocalRandom; sorted ids; after an overload
    # re-check, its draw); None: no draw (a single best broker, round robin, a cached decision)
    drawn_among: tuple[str, ...] | None = None


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
    preallocate: bool = False,
) -> Placement:
    """``ModularLoadManagerImpl.selectBroker`` ([M]) with the candidate sets it went through; see
    :func:`select_broker`. With ``preallocate``: ``selectBrokerForAssignment`` (:func:`select_broker_for_assignment`).
    Runs in a ``derived_cache`` block (inside an open block: that block)."""
    with derived_cache(ld):
        place = selection(ld, conf, placement, leader, policies, available, non_persistent)
        return place.assign_detailed(bundle, rng) if preallocate else place.select(bundle, rng)


def selection(
    ld: LoadData,
    conf: PulsarConfig,
    placement: ModularLoadManagerStrategy,
    leader: LeaderState,
    policies: NamespacePolicies,
    available: np.ndarray | None = None,
    non_persistent: bool = False,
) -> "Selection":
    """The :class:`Selection` for these arguments in the open ``derived_cache`` block on ``ld`` (one per distinct
    set of arguments). Callers placing many bundles take it once and call :meth:`Selection.select` per bundle."""
    if "_derived" not in ld.__dict__:
        raise RuntimeError("selection() needs an open load_data.derived_cache block on the LoadData")
    avail_key = "" if available is None else np.asarray(available, dtype=bool).tobytes().hex()
    return cached(
        ld,
        "broker",
        ("selection", avail_key, non_persistent),
        lambda: Selection(ld, conf, placement, leader, policies, available, non_persistent),
        conf,
        placement,
        leader,
        policies,
    )


class Selection:
    """``selectBroker`` (:func:`select_broker`) for one set of arguments inside a ``derived_cache`` block: the
    config switches, the load-manager-class mask and the overload-check usage are read once, and the candidate rows
    of a namespace (everything before the strategy) are kept until the next preallocation or leader change."""

    def __init__(
        self,
        ld: LoadData,
        conf: PulsarConfig,
        placement: ModularLoadManagerStrategy,
        leader: LeaderState,
        policies: NamespacePolicies,
        available: np.ndarray | None,
        non_persistent: bool,
    ) -> None:
        self.ld, self.conf, self.placement, self.leader, self.policies = ld, conf, placement, leader, policies
        self.available = None if available is None else np.asarray(available, dtype=bool)
        self.non_persistent = non_persistent
        profile = profile_for(conf["pulsarVersion"])
        self.max_topics = int(conf["loadBalancerBrokerMaxTopics"])
        self.even = bool(conf["loadBalancerDistributeBundlesEvenlyEnabled"]) or (
            profile.even_spread_always
        )
        self.spread_system = profile.system_namespace_even_spread  # `|| ... equals(SYSTEM_NAMESPACE)` (3.0+)
        # broker_load_manager_class_filter (3.x+); None when it keeps every broker
        same = _same_class(ld, conf) if profile.broker_class_filter else None
        self.same_class = None if same is None or same.all() else same
        self.prefer_later = bool(conf["preferLaterVersions"])
        # PIP-380 (4.1+): shedding-excluded namespaces are placed by round robin
        self.excluded = policies.shedding_excluded_namespaces if profile.shedding_excluded_namespaces else frozenset()
        self.threshold = conf.overload_threshold
        self.usage = overload_usage(ld, conf).tolist()
        self._brokers = ld.brokers
        self._policy: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # namespace -> (policy set, its rows)
        self._by_isolation: dict[IsolationPolicy | None, tuple[np.ndarray, np.ndarray]] = {}
        self._fills: dict[IsolationPolicy | None, PolicyFill] = {}
        self._row_of = {b: i for i, b in enumerate(ld.brokers.ids)}
        cache = ld.__dict__["_derived"]
        cache._refs[id(self)] = self  # memo keys below carry id(self)
        self._cache = cache

    def policy_set(self, ns: str) -> np.ndarray:
        """:func:`namespace_policy_set` of ``ns`` (a shared mask: read only)."""
        return self._policy_of(ns)[0]

    def policy_rows(self, ns: str) -> np.ndarray:
        """The broker rows of :meth:`policy_set`, ascending (shared: read only)."""
        return self._policy_of(ns)[1]

    def _policy_of(self, ns: str) -> tuple[np.ndarray, np.ndarray]:
        """The policy set of ``ns`` and its rows, kept per namespace for the selection's broker rows.

        ``apply_namespace_policies`` reads the namespace only through its isolation policy
        (``NamespacePolicies.policy_for``), so namespaces under the same policy (or none) share one entry."""
        if self._brokers is not self.ld.brokers:
            self._policy.clear()
            self._by_isolation.clear()
            self._fills.clear()
            self._brokers = self.ld.brokers
            self._row_of = {b: i for i, b in enumerate(self.ld.brokers.ids)}
        got = self._policy.get(ns)
        if got is None:
            iso = self.policies.policy_for(ns)
            got = self._by_isolation.get(iso)
            if got is None:
                mask = namespace_policy_set(self.ld, self.policies, ns, self.available, self.non_persistent)
                got = self._by_isolation[iso] = (mask, mask.nonzero()[0])
            self._policy[ns] = got
        return got

    def policy_fill(self, ns: str) -> PolicyFill:
        """``applyNamespacePolicies``' thread-local sets for ``ns`` in ``getAvailableBrokers()`` order (kept per
        isolation policy, as :meth:`_policy_of`)."""
        self._policy_of(ns)  # resets the per-namespace memos when the broker rows changed
        iso = self.policies.policy_for(ns)
        fill = self._fills.get(iso)
        if fill is None:
            ld = self.ld
            every = np.ones(len(ld.brokers), dtype=bool) if self.available is None else self.available
            prim, sec, add = self.policies.policy_fill(ns, ld.brokers, every, non_persistent=self.non_persistent)
            order = available_broker_order(ld, self.available).tolist()
            ids = ld.brokers.ids
            fill = self._fills[iso] = PolicyFill(tuple(ids[r] for r in order if prim[r]),
                                                 tuple(ids[r] for r in order if sec[r]), add)
        return fill

    def policies_check(self, ns: str) -> None:
        """``shouldNamespacePoliciesUnload``'s fill of ``brokerCandidateCache`` (its table history; 2.11+)."""
        self.leader.candidate_cache.policies_check(self.policy_fill(ns))

    def _in_set_order(self, ns: str, cand: "_Candidates", recheck: bool) -> np.ndarray:
        """The candidate rows in ``brokerCandidateCache``'s iteration order at the strategy call."""
        ids = self.ld.brokers.ids
        fit = frozenset(ids[r] for r in cand.fit.tolist())
        kept = frozenset(ids[r] for r in cand.kept.tolist())
        order = self.leader.candidate_cache.select_order(self.policy_fill(ns), fit, kept, cand.restored, recheck)
        row_of = self._row_of
        return np.fromiter((row_of[b] for b in order), dtype=np.int64, count=len(order))

    def select(self, bundle: str, rng: np.random.Generator) -> Placement:
        """``selectBroker`` for ``bundle`` (no preallocation)."""
        return self._select(bundle, rng)[0]

    def _select(self, bundle: str, rng: np.random.Generator) -> tuple[Placement, int]:
        """:meth:`select` and the bundle's row. The strategy gets the candidates in ``brokerCandidateCache``'s
        order (:mod:`lbreplay.kernel.broker_candidate_cache`)."""
        ld, cache = self.ld, self._cache
        bundle_row = ensure_bundle_data(ld, bundle)
        if cache._brokers is not ld.brokers or cache._bundles is not ld.bundles:
            cache.sync(ld)
        ns = bundle.rpartition("/")[0]  # split_bundle_name
        memo = cache.groups["prealloc"]
        key = ("candidates", ns, self.leader._version, id(self))
        cand = memo.get(key)
        if cand is None:
            cand = memo[key] = self.candidates(bundle, ns)
        rows = self._in_set_order(ns, cand, recheck=False)
        result = Placement(None, int(rows.size))
        drawn: np.ndarray | None = None
        if ns in self.excluded:  # policies.is_shedding_excluded
            row = self.leader.round_robin.select_broker(rows, bundle, ld, self.conf, rng)
            result.round_robin = True
        else:
            row = self.placement.select_broker(rows, bundle, ld, self.conf, rng)
            drawn = getattr(self.placement, "drawn", None)
        if row < 0:
            return result, bundle_row
        if self.usage[row] > self.threshold:
            # "All brokers that were in the filtered list were overloaded, so check if there is a better broker"
            again = self.placement.select_broker(self._in_set_order(ns, cand, recheck=True), bundle, ld, self.conf,
                                                 rng)
            result.overload_recheck = True
            if again >= 0:
                row, drawn = again, getattr(self.placement, "drawn", None)
        result.broker = ld.brokers.ids[row]
        result.row = row
        if drawn is not None:
            ids = ld.brokers.ids
            result.drawn_among = tuple(sorted(ids[r] for r in drawn.tolist()))
        return result, bundle_row

    def assign(self, bundle: str, rng: np.random.Generator) -> str | None:
        """``selectBrokerForAssignment`` (:func:`select_broker_for_assignment`) for ``bundle``."""
        return self.assign_detailed(bundle, rng).broker

    def assign_detailed(self, bundle: str, rng: np.random.Generator, observed: str | None = None) -> Placement:
        """:meth:`assign` with what :meth:`select` went through (only the broker for a cached decision).
        ``observed``: the broker the real leader chose (an audit of its logged "Selected broker"): the strategy is
        called as on the leader (its state moves), the result is its own choice, but the preallocation goes to the
        observed broker when it is one of this LoadData's, as the leader's did."""
        ld = self.ld
        known = ld.preallocated_bundle_to_broker.get(bundle)
        if known is not None:
            return Placement(known, row=ld.brokers.index(known))
        result, bundle_row = self._select(bundle, rng)
        to, to_row = result.broker, result.row
        observed_row = -1 if observed is None else ld.brokers.index(observed)
        if observed_row >= 0:
            to, to_row = observed, observed_row
        if to is not None:
            _preallocate(ld, self.leader, bundle, bundle_row, to_row, to)
        return result

    def candidates(self, bundle: str, ns: str) -> "_Candidates":
        """The candidates before the strategy (see :func:`select_broker`), filtered as row arrays."""
        ld, leader, policies = self.ld, self.leader, self.policies
        br = ld.brokers
        policy, rows = self._policy_of(ns)
        fit = cached(ld, "prealloc", ("topic_fit", self.max_topics), lambda: _TopicFit(ld, self.max_topics)).mask
        within = rows if fit is None else rows[fit[rows]]  # filter_brokers_with_large_topic_count
        if within.size:  # (none within the limit: all kept)
            rows = within
        if policies.anti_affinity_groups.get(ns) is not None:  # anti_affinity_group: no group keeps them all
            rows = policies.filter_anti_affinity_group_owned_brokers(ns, br, _mask(rows, len(br)), leader.bundle_ranges)
            rows = rows.nonzero()[0]
        if self.even or (ns == SYSTEM_NAMESPACE and self.spread_system):  # remove_most_servicing_brokers_for_namespace
            rows = _least_servicing(ns, br.ids, rows, leader)
        try:
            if self.same_class is not None:  # broker_load_manager_class_filter
                rows = rows[self.same_class[rows]]
            if self.prefer_later:
                rows = broker_version_filter(ld, _mask(rows, len(br)), self.conf).nonzero()[0]
        except BrokerFilterError:  # "restore the list of brokers to the full set"
            return _Candidates(within, rows, True)
        return _Candidates(within, rows, not rows.size)


class _Candidates(NamedTuple):
    """``selectBroker``'s candidates before the strategy, as ``BrokerCandidateCache.select_order`` replays them:
    those within the topic limit (``fit``: the topic-count filter's copy), what the filters ``kept``, and whether
    the policy set was ``restored`` (a filter threw, or none was left). The set itself, in its order, is
    :meth:`Selection._in_set_order`."""

    fit: np.ndarray
    kept: np.ndarray
    restored: bool


def _mask(rows: np.ndarray, size: int) -> np.ndarray:
    """Boolean mask over ``size`` broker rows with ``rows`` set."""
    mask = np.zeros(size, dtype=bool)
    mask[rows] = True
    return mask


class _TopicFit(PreallocationFollower):
    """The brokers within ``loadBalancerBrokerMaxTopics`` (reported + preallocated topics) as a mask, or None
    (:attr:`mask`) while every broker is; a preallocation re-checks the two brokers involved."""

    __slots__ = ("_ok", "_fits", "_over", "_max", "_sums")

    def __init__(self, ld: LoadData, max_topics: int) -> None:
        self._sums = preallocation_sums(ld)
        self._max = max_topics
        self._ok = self._sums.total_topics <= max_topics
        self._fits: list[bool] = self._ok.tolist()
        self._over = self._fits.count(False)

    @property
    def mask(self) -> np.ndarray | None:
        return self._ok if self._over else None

    def move(self, ld: LoadData, row: int, old: int, new: int) -> None:
        for broker in (old, new):
            if broker >= 0:
                fits = self._sums.total_topics_list[broker] <= self._max
                if fits != self._fits[broker]:
                    self._fits[broker] = fits
                    self._ok = self._ok.copy()  # masks handed out earlier keep their values
                    self._ok[broker] = fits
                    self._over += -1 if fits else 1


def namespace_policy_set(
    ld: LoadData,
    policies: NamespacePolicies,
    ns: str,
    available: np.ndarray | None = None,
    non_persistent: bool = False,
) -> np.ndarray:
    """``policies.apply_namespace_policies`` over the available brokers (all when ``available`` is None); it depends
    only on the namespace, the broker set and the available brokers, so a ``derived_cache`` block keeps it."""
    br = ld.brokers
    if available is None:
        key = ("policy_set", ns, non_persistent, "")

        def compute() -> np.ndarray:
            every = cached(ld, "broker", "all_available", lambda: np.ones(len(br), dtype=bool))
            return policies.apply_namespace_policies(ns, br, every, non_persistent=non_persistent)

    else:
        avail = np.asarray(available, dtype=bool)
        key = ("policy_set", ns, non_persistent, avail.tobytes().hex())

        def compute() -> np.ndarray:
            return policies.apply_namespace_policies(ns, br, avail, non_persistent=non_persistent)

    return cached(ld, "broker", key, compute, policies)


def overload_usage(ld: LoadData, conf: PulsarConfig) -> np.ndarray:
    """``resource_usage.overload_check_usage`` per broker row (cached inside a ``derived_cache`` block)."""
    br = ld.brokers
    return cached(ld, "broker", "overload_usage", lambda: overload_check_usage(br.usage, br.limit, conf), conf)


@same_parameters(select_broker_detailed)
def select_broker(*args: Any, **kwargs: Any) -> str | None:
    """``ModularLoadManagerImpl.selectBroker``: the broker for ``bundle``, or None. No preallocation.

    Pipeline: namespace policies -> max-topics filter (with preallocated topics) -> anti-affinity (failure domains)
    -> even bundle spread per namespace (``loadBalancerDistributeBundlesEvenlyEnabled`` or ``pulsar/system``) ->
    load-manager-class filter (3.x+) and version filter (a filter error resets to the policy set) -> reset to the
    policy set if empty -> round robin for shedding-excluded namespaces, else the placement strategy -> when the
    chosen broker is overloaded, a second strategy call over the policy set. ``available``: mask of live brokers
    (default: every broker row). Inserts default BundleData for an unknown bundle (``computeIfAbsent``).
    Arguments: those of :func:`select_broker_detailed`.
    """
    return select_broker_detailed(*args, **kwargs).broker


def preallocate_bundle(ld: LoadData, leader: LeaderState, bundle: str, broker: str) -> None:
    """``ModularLoadManagerImpl.preallocateBundle``: record ``bundle`` in ``broker``'s preallocatedBundleData, in
    ``preallocatedBundleToBroker`` and in ``brokerToNamespaceToBundleRange``."""
    _preallocate(ld, leader, bundle, ensure_bundle_data(ld, bundle), ld.brokers.index(broker), broker)


def _preallocate(ld: LoadData, leader: LeaderState, bundle: str, row: int, broker_row: int, broker: str) -> None:
    """:func:`preallocate_bundle` with the bundle's row and the broker's row known.

    ``preallocateBundle`` puts the bundle into ``broker``'s ``preallocatedBundleData`` only: a broker that already
    held it (assigned before, not yet reported) keeps it (``LoadData.preallocated_also``), so its
    ``LeastLongTermMessageRate.getScore`` and topic count still include it.
    """
    pre = ld.bundles.preallocated_to
    old = pre.item(row)
    if old != broker_row:
        also = ld.preallocated_also.get(bundle)
        held = also is not None and broker in also
        if old >= 0:
            ld.preallocated_also.setdefault(bundle, []).append(ld.brokers.ids[old])
        if held:
            assert also is not None
            also.remove(broker)
        pre[row] = broker_row
        # the followers gain the new holder only (old holders keep theirs); no change if it held the bundle already
        note_preallocation(ld, row, broker_row if held else -1)
    ld.preallocated_bundle_to_broker[bundle] = broker
    leader.add(broker, bundle)


@same_parameters(select_broker_detailed)
def select_broker_for_assignment(*args: Any, **kwargs: Any) -> str | None:
    """``ModularLoadManagerImpl.selectBrokerForAssignment``: the cached ``preallocatedBundleToBroker`` decision if
    any, else :func:`select_broker` followed by :func:`preallocate_bundle` (arguments: those of
    :func:`select_broker_detailed`)."""
    return select_broker_detailed(*args, preallocate=True, **kwargs).broker


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
    for bundle in ld.preallocated_also:
        ld.preallocated_bundle_to_broker.pop(bundle, None)
    owned = None if leader_owned is None else set(leader_owned)
    if ld.membership is None:
        reported = b.owner[rows] == b.preallocated_to[rows]
    else:  # localData.getBundles().contains(bundle), per broker: (broker, bundle) pairs as one key each
        n = max(len(b), 1)
        listers, listed_rows = ld.owned_pairs()
        listed = listers * n + listed_rows
        reported = np.isin(b.preallocated_to[rows].astype(np.int64) * n + rows, listed)
    drop = reported & b.has_bundle_data[rows]
    if owned is not None:
        drop |= np.array([b.names[r] not in owned for r in rows], dtype=bool)
    b.preallocated_to[rows[drop]] = -1
    for bundle, holders in list(ld.preallocated_also.items()):
        r = b.index(bundle)
        keep = []
        for broker in holders:
            k = ld.brokers.index(broker)
            if r < 0 or k < 0:
                continue
            if (bool(ld.owned_mask(k)[r]) and bool(b.has_bundle_data[r])) or (owned is not None and bundle not in owned):
                continue
            keep.append(broker)
        if keep and r >= 0 and b.preallocated_to[r] < 0:  # the newest holder left: the next one stands in
            b.preallocated_to[r] = ld.brokers.index(keep.pop())
        if keep:
            ld.preallocated_also[bundle] = keep
        else:
            del ld.preallocated_also[bundle]
    invalidate_derived(ld, "prealloc")


def reap_dead_broker_preallocations(ld: LoadData, alive: Iterable[str]) -> None:
    """``reapDeadBrokerPreallocations``: forget ``preallocatedBundleToBroker`` entries pointing at dead brokers."""
    live = set(alive)
    for bundle, broker in list(ld.preallocated_bundle_to_broker.items()):
        if broker not in live:
            del ld.preallocated_bundle_to_broker[bundle]
