"""Broker filter pipeline of the extensible load manager, on boolean candidate masks over ``ExtensibleContext`` rows.

Mirrors ``extensions.filter.BrokerLoadManagerClassFilter``, ``BrokerMaxTopicCountFilter`` and
``BrokerVersionFilter`` (the pipeline built in the ``ExtensibleLoadManagerImpl`` constructor, in that order),
then the context's ``extra_filters``: ``AntiAffinityGroupPolicyFilter`` and ``BrokerIsolationPoliciesFilter``
(``POLICY_FILTERS``, added in that order by ``initialize`` on every line 3.0-5.0).
Error handling follows the two callers:

* ``ExtensibleLoadManagerImpl.selectAsync`` (assignment): a failing filter resets the candidates to the last
  set every earlier filter agreed on (``availableBrokers.keySet().retainAll(...)``) — ``on_error="reset"``;
* ``TransferShedder.isTransferable``: a failing filter makes the bundle not transferable — ``on_error="fail"``
  (the pipeline returns ``None``).

The two callers copy the registry's map differently (``HashMap`` / ``ConcurrentHashMap``): ``BrokerVersionFilter``
walks that copy (see :func:`version_filter`).
"""

from __future__ import annotations

import functools
import re
from typing import Literal

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.context import BrokerFilterFn, ExtensibleContext
from lbreplay.kernel.extensible.map_order import available_brokers_order
from lbreplay.kernel.load_data import Brokers
from lbreplay.kernel.naming import split_bundle_name
from lbreplay.kernel.policies import NamespacePolicies, parse_broker_host


class BrokerFilterError(Exception):
    """``BrokerFilterException`` (and ``BrokerFilterBadVersionException``)."""


def load_manager_class_filter(ctx: ExtensibleContext, conf: PulsarConfig, bundle: str, cand: np.ndarray) -> np.ndarray:
    """``BrokerLoadManagerClassFilter``: keep brokers whose ``BrokerLookupData.loadManagerClassName`` equals
    ``loadManagerClassName`` (a missing class name, from an old broker, never matches). Skipped when the context
    carries no lookup data at all."""
    if ctx.load_manager_class_name is None or not cand.any():
        return cand
    return cand & _same_class(tuple(ctx.load_manager_class_name), conf["loadManagerClassName"])


@functools.lru_cache(maxsize=64)
def _same_class(names: tuple[str | None, ...], want: str) -> np.ndarray:
    """Mask of ``names`` equal to ``want`` (read-only: shared between calls)."""
    same = np.array([c == want for c in names], dtype=bool)
    same.flags.writeable = False
    return same


def max_topic_count_filter(ctx: ExtensibleContext, conf: PulsarConfig, bundle: str, cand: np.ndarray) -> np.ndarray:
    """``BrokerMaxTopicCountFilter``: drop brokers with ``BrokerLoadData.topics >= loadBalancerBrokerMaxTopics``
    (no load data counts as 0 topics)."""
    topics = np.where(ctx.has_load_data, ctx.load.topics, 0)
    return cand & (topics < int(conf["loadBalancerBrokerMaxTopics"]))


# --- semantic versions (com.github.zafarkhaja.semver.Version 0.9.0, the java-semver of every checked line) --------
# ``VersionParser``: ASCII digits / letters / hyphens only, no leading zero in a numeric identifier (the normal
# version's numbers and numeric pre-release identifiers), build identifiers may have them.
_SEMVER = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1

SemVer = tuple[tuple[int, int, int], tuple[str, ...], tuple[str, ...]]


def parse_semver(text: str) -> SemVer:
    """``Version.valueOf``: strict SemVer 2.0 ``MAJOR.MINOR.PATCH[-pre][+build]``; raises ``ValueError``
    (also for a normal-version number beyond ``Integer.MAX_VALUE``: ``Integer.parseInt`` throws)."""
    m = _SEMVER.fullmatch(text)
    if not m:
        raise ValueError(f"invalid version {text!r}")
    normal = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if max(normal) > _INT_MAX:
        raise ValueError(f"invalid version {text!r}: number out of int range")
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    build = tuple(m.group(5).split(".")) if m.group(5) else ()
    return normal, pre, build


def _cmp(a: object, b: object) -> int:
    return (a > b) - (a < b)  # type: ignore[operator]


def _java_int(x: str) -> int | None:
    """``Integer.parseInt(x)``, or None where it throws ``NumberFormatException`` (``MetadataVersion.isInt``)."""
    if not _JAVA_INT.fullmatch(x):
        return None
    v = int(x)
    return v if _INT_MIN <= v <= _INT_MAX else None


def _compare_identifier(x: str, y: str) -> int:
    """``MetadataVersion.compareIdentifiers`` (0.9.0): both parse as a Java ``int`` -> ``parseInt(x) - parseInt(y)``
    (32-bit, so it may wrap), else ``String.compareTo`` -- a numeric identifier against an alphanumeric one compares
    as text (``"5" > "0a"``), not "numeric lower" as SemVer 2.0 says; an identifier such as ``-5`` counts as a
    number."""
    xi, yi = _java_int(x), _java_int(y)
    if xi is not None and yi is not None:
        d = (xi - yi) & 0xFFFFFFFF
        return _cmp(d - (1 << 32) if d >= 1 << 31 else d, 0)
    return _cmp(x, y)


def _compare_ids(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """``MetadataVersion.compareTo`` of two non-empty identifier lists: the first differing identifier
    (``compareIdentifiers``), else the shorter list is lower."""
    for x, y in zip(a, b):
        c = _compare_identifier(x, y)
        if c:
            return c
    return _cmp(len(a), len(b))


def compare_semver(a: SemVer, b: SemVer) -> int:
    """``Version.compareTo``: normal version, then pre-release (a pre-release is lower than the release); build
    metadata ignored (``Version.equals`` is ``compareTo == 0``)."""
    c = _cmp(a[0], b[0])
    if c:
        return c
    if a[1] and b[1]:
        return _compare_ids(a[1], b[1])
    return _cmp(not a[1], not b[1])


def compare_semver_build_aware(a: SemVer, b: SemVer) -> int:
    """``Version.BUILD_AWARE_ORDER``: as ``compareTo``, then build metadata (a version with build metadata is higher)."""
    c = compare_semver(a, b)
    if c:
        return c
    if a[2] and b[2]:
        return _compare_ids(a[2], b[2])
    return _cmp(bool(a[2]), bool(b[2]))


def version_filter(
    ctx: ExtensibleContext, conf: PulsarConfig, bundle: str, cand: np.ndarray, *, copy_kind: str = "HashMap"
) -> np.ndarray:
    """``BrokerVersionFilter`` (when ``preferLaterVersions``): keep only brokers on the latest version
    (``BUILD_AWARE_ORDER``; kept brokers are those whose version ``equals`` the latest). A missing or invalid
    version string raises ``BrokerFilterError``. Skipped when the context carries no lookup data.

    ``getLatestVersionNumber`` walks the candidate map, and java-semver's order can be cyclic, so its order counts:
    the registry's ``ConcurrentHashMap`` copied by the caller, ``new HashMap<>(availableBrokers)`` in
    ``TransferShedder.isTransferable`` (``copy_kind="HashMap"``), ``new ConcurrentHashMap<>(availableBrokers)`` in
    ``ExtensibleLoadManagerImpl.selectAsync`` (``"ConcurrentHashMap"``), see ``map_order.available_brokers_order``."""
    if not conf["preferLaterVersions"] or not cand.any() or ctx.broker_version is None:
        return cand
    rows = _candidate_order(ctx, np.flatnonzero(cand), copy_kind)
    parsed: dict[int, SemVer] = {}
    latest: SemVer | None = None
    for i in rows.tolist():
        text = ctx.broker_version[i]
        if not text:
            raise BrokerFilterError(f'No version string in lookup data for broker "{ctx.broker_ids[i]}"')
        try:
            v = parse_semver(text)
        except ValueError:
            raise BrokerFilterError(f'Invalid version string in lookup data for broker "{ctx.broker_ids[i]}"') from None
        parsed[i] = v
        if latest is None or compare_semver_build_aware(latest, v) < 0:
            latest = v
    out = cand.copy()
    for i, v in parsed.items():
        if compare_semver(v, latest) != 0:  # type: ignore[arg-type]
            out[i] = False
    return out


def _candidate_order(ctx: ExtensibleContext, rows: np.ndarray, copy_kind: str) -> np.ndarray:
    """``rows`` in the order of the candidate map (the copy of the available brokers' map; a row not available
    comes last, by row)."""
    avail = tuple(ctx.broker_ids[i] for i in np.flatnonzero(ctx.available).tolist())
    rank = {b: k for k, b in enumerate(available_brokers_order(avail, copy_kind))}
    n = len(rank)
    return np.asarray(sorted(rows.tolist(), key=lambda i: (rank.get(ctx.broker_ids[i], n), i)), dtype=np.int64)


# --- the policy filters of ExtensibleLoadManagerImpl.initialize ------------------------------------------------------
def anti_affinity_counts(ctx: ExtensibleContext, policies: NamespacePolicies, group: str) -> np.ndarray:
    """``LoadManagerShared.getAntiAffinityNamespaceOwnedBrokers(pulsar, namespace, channel.getOwnershipEntrySet())``:
    per broker row, how many Owned bundles (not namespaces, as the modular load manager counts) of namespaces in
    ``group`` (case-insensitive) it holds. The ownership entries are ``bundle_owners``, or without it every
    (reporter, bundle) pair of the top-bundles lists (each reporter owns its bundles, as ``is_owner`` says).
    Counted once per snapshot and group (``ctx.anti_affinity_memo``; the array is read-only)."""
    g = group.lower()
    memo = ctx.anti_affinity_memo.get((g, id(policies)))
    if memo is not None:
        return memo
    counts = np.zeros(len(ctx), dtype=np.int64)
    if ctx.bundle_owners is not None:
        pairs: set[tuple[str, str]] = set(ctx.bundle_owners.items())
    else:
        pairs = {(ctx.top.names[j], ctx.broker_ids[i]) for i in range(len(ctx)) for j in ctx.top.entries(i)}
    for bundle, owner in pairs:
        other = policies.anti_affinity_group(split_bundle_name(bundle)[0])
        row = ctx.index(owner)
        if other is not None and other.lower() == g and row >= 0:
            counts[row] += 1
    counts.setflags(write=False)
    ctx.anti_affinity_memo[(g, id(policies))] = counts
    return counts


def anti_affinity_group_policy_filter(
    ctx: ExtensibleContext, conf: PulsarConfig, bundle: str, cand: np.ndarray
) -> np.ndarray:
    """``AntiAffinityGroupPolicyFilter`` -> ``AntiAffinityGroupPolicyHelper.filterAsync`` ->
    ``LoadManagerShared.filterAntiAffinityGroupOwnedBrokersAsync``: for a namespace in an anti-affinity group, keep
    the candidates (of the least-loaded failure domain with ``failureDomainsEnabled``) holding the fewest bundles of
    the group."""
    pol = ctx.policies
    if not isinstance(pol, NamespacePolicies) or not cand.any():
        return cand
    group = pol.anti_affinity_group(split_bundle_name(bundle)[0])
    if group is None:
        return cand
    return pol.keep_least_anti_affinity_count(ctx.broker_ids, cand, anti_affinity_counts(ctx, pol, group))


@functools.lru_cache(maxsize=16)
def _registry_brokers(ids: tuple[str, ...]) -> Brokers:
    """The registry's brokers as ``Brokers`` rows (persistent and non-persistent topics enabled: the
    ``BrokerLookupData`` defaults; ``decide`` does not read those two fields)."""
    return Brokers.empty(list(ids))


def isolation_policies_filter(ctx: ExtensibleContext, conf: PulsarConfig, bundle: str, cand: np.ndarray) -> np.ndarray:
    """``BrokerIsolationPoliciesFilter`` -> ``IsolationPoliciesHelper.applyIsolationPoliciesAsync`` ->
    ``LoadManagerShared.applyNamespacePoliciesAsync``: the namespace's isolation policy (primary, secondary on
    ``min_limit`` failover), else the shared brokers; a broker id without ``:`` is skipped (``parseBrokerHost``)."""
    pol = ctx.policies if isinstance(ctx.policies, NamespacePolicies) else _NO_POLICIES
    ns = split_bundle_name(bundle)[0]
    brokers = _registry_brokers(tuple(ctx.broker_ids))
    return cand & pol.apply_namespace_policies(ns, brokers, cand, host_of=parse_broker_host)


_NO_POLICIES = NamespacePolicies()
POLICY_FILTERS: tuple[BrokerFilterFn, ...] = (anti_affinity_group_policy_filter, isolation_policies_filter)


DEFAULT_PIPELINE: tuple[BrokerFilterFn, ...] = (load_manager_class_filter, max_topic_count_filter, version_filter)


def filter_brokers(
    ctx: ExtensibleContext,
    conf: PulsarConfig,
    bundle: str,
    candidates: np.ndarray | None = None,
    *,
    on_error: Literal["reset", "fail"] = "reset",
) -> np.ndarray | None:
    """Run the pipeline (defaults, then ``ctx.extra_filters``) for ``bundle`` over ``candidates``
    (default: the available brokers). Returns the surviving mask, or ``None`` when a filter fails and
    ``on_error == "fail"``."""
    good = (ctx.available if candidates is None else np.asarray(candidates, dtype=bool)).copy()
    cand = good.copy()
    copy_kind = "HashMap" if on_error == "fail" else "ConcurrentHashMap"
    for f in (*DEFAULT_PIPELINE, *ctx.extra_filters):
        if f is version_filter:
            f = functools.partial(version_filter, copy_kind=copy_kind)
        try:
            cand = np.asarray(f(ctx, conf, bundle, cand.copy()), dtype=bool)
            good &= cand
        except BrokerFilterError:
            if on_error == "fail":
                return None
            cand = good.copy()
    return cand
