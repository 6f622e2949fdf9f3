"""Namespace isolation, anti-affinity and failure-domain policies (modular load manager).

Mirrors ``NamespaceIsolationPolicies`` / ``NamespaceIsolationPolicyImpl`` / ``MinAvailablePolicy``
(pulsar-common ``policies.impl``), ``SimpleResourceAllocationPolicies`` and the policy functions of
``LoadManagerShared`` (``applyNamespacePolicies``, ``filterAntiAffinityGroupOwnedBrokers``,
``shouldAntiAffinityNamespaceUnload``) plus ``ModularLoadManagerImpl.shouldNamespacePoliciesUnload`` /
``shouldAntiAffinityNamespaceUnload``.

Broker sets are boolean masks over the sorted broker rows of ``Brokers``. Where Pulsar iterates a
``HashMap`` whose order decides the result (several isolation policies matching one namespace, a broker
listed in several failure domains) we visit names in sorted order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbreplay.errors import InvalidInputError
from lbreplay.kernel.load_data import Brokers

# LoadManagerShared.DEFAULT_DOMAIN: the failure domain of a broker listed in none.
DEFAULT_DOMAIN = "default"
# MinAvailablePolicy.MAX_USAGE_THRESHOLD
MAX_USAGE_THRESHOLD = 100
_UNSET = object()

BrokerNamespaceRanges = Mapping[str, Mapping[str, Collection[str]]]
"""``brokerToNamespaceToBundleRange``: broker id -> namespace -> bundle ranges (reported + preallocated)."""


def broker_host(broker: str) -> str:
    """``new URL("http://" + broker).getHost()``: the broker id without its ``:port``.

    A broker id without a port is its own host; ``[v6]:port`` keeps the brackets, as ``URL.getHost`` does.
    """
    if broker.startswith("["):
        end = broker.find("]")
        return broker[: end + 1] if end >= 0 else broker
    host, sep, port = broker.rpartition(":")
    return host if sep and port.isdigit() else broker


def parse_broker_host(broker: str) -> str | None:
    """``LoadManagerShared.parseBrokerHost`` (the extensible load manager's ``applyNamespacePoliciesAsync``): the id
    up to its last ``:``; None for an id without one (Pulsar throws and skips that broker)."""
    i = broker.rfind(":")
    return broker[:i] if i >= 0 else None


@dataclass(frozen=True)
class IsolationPolicy:
    """``NamespaceIsolationData`` with a ``min_available`` ``AutoFailoverPolicy`` (the only policy type).

    Regexes match whole strings (Java ``String.matches``): ``namespaces`` against ``tenant/ns``,
    ``primary``/``secondary`` against the broker host (no port).
    """

    name: str
    namespaces: tuple[str, ...]
    primary: tuple[str, ...]
    secondary: tuple[str, ...] = ()
    min_limit: int = 1
    usage_threshold: int = MAX_USAGE_THRESHOLD

    def matches_namespace(self, namespace: str) -> bool:
        """``NamespaceIsolationPolicies.namespaceMatches``."""
        return any(re.fullmatch(rx, namespace) for rx in self.namespaces)

    def is_primary_host(self, host: str) -> bool:
        """``NamespaceIsolationPolicyImpl.isPrimaryBroker``."""
        return any(re.fullmatch(rx, host) for rx in self.primary)

    def is_secondary_host(self, host: str) -> bool:
        """``NamespaceIsolationPolicyImpl.isSecondaryBroker``."""
        return any(re.fullmatch(rx, host) for rx in self.secondary)

    def should_failover(self, total_primary_candidates: int) -> bool:
        """``MinAvailablePolicy.shouldFailoverToSecondary(int)``: fewer primaries than ``min_limit``.

        The modular load manager calls the ``int`` overload, so ``usage_threshold`` plays no part here.
        """
        return total_primary_candidates < self.min_limit

    @classmethod
    def from_json(cls, name: str, doc: Any, path: str = "isolationPolicies") -> "IsolationPolicy":
        """Parse Pulsar's admin JSON (``NamespaceIsolationData``); checks mirror ``NamespaceIsolationDataImpl.validate``."""
        where = f"{path}.{name}"
        if not isinstance(doc, Mapping):
            raise InvalidInputError(f"{where}: expected an object")
        namespaces = _regex_list(doc.get("namespaces"), f"{where}.namespaces", required=True)
        primary = _regex_list(doc.get("primary"), f"{where}.primary", required=True)
        secondary = _regex_list(doc.get("secondary", []), f"{where}.secondary", required=False)
        afp = doc.get("auto_failover_policy")
        if not isinstance(afp, Mapping):
            raise InvalidInputError(f"{where}.auto_failover_policy: required object (policy_type min_available)")
        ptype = afp.get("policy_type", "min_available")
        if ptype != "min_available":
            raise InvalidInputError(f"{where}.auto_failover_policy.policy_type: unsupported {ptype!r}")
        params = afp.get("parameters")
        if not isinstance(params, Mapping):
            raise InvalidInputError(f"{where}.auto_failover_policy.parameters: required object")
        min_limit = _java_int(params.get("min_limit"), f"{where}.auto_failover_policy.parameters.min_limit")
        usage = _java_int(params.get("usage_threshold"), f"{where}.auto_failover_policy.parameters.usage_threshold")
        return cls(name, namespaces, primary, secondary, min_limit, usage)

    def to_json(self) -> dict[str, Any]:
        return {
            "namespaces": list(self.namespaces),
            "primary": list(self.primary),
            "secondary": list(self.secondary),
            "auto_failover_policy": {
                "policy_type": "min_available",
                "parameters": {"min_limit": str(self.min_limit), "usage_threshold": str(self.usage_threshold)},
            },
        }


def _regex_list(value: Any, where: str, *, required: bool) -> tuple[str, ...]:
    if value is None:
        value = []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInputError(f"{where}: expected a list of regex strings")
    if required and not value:
        raise InvalidInputError(f"{where}: must not be empty")
    for rx in value:
        try:
            re.compile(rx)
        except re.error as exc:
            raise InvalidInputError(f"{where}: invalid regex {rx!r}: {exc}") from None
    return tuple(value)


def _java_int(value: Any, where: str) -> int:
    """``Integer.parseInt`` of a failover parameter (strings in Pulsar's JSON; plain ints accepted)."""
    if isinstance(value, bool) or value is None:
        raise InvalidInputError(f"{where}: required integer string")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value):
        return int(value)
    raise InvalidInputError(f"{where}: expected an integer string, got {value!r}")


@dataclass
class NamespacePolicies:
    """Everything placement and shedding need to know about namespaces besides load.

    ``isolation`` is kept sorted by policy name (stand-in for ``HashMap`` order in
    ``NamespaceIsolationPolicies.getPolicyByNamespace``: the first matching policy wins).
    """

    isolation: tuple[IsolationPolicy, ...] = ()
    anti_affinity_groups: dict[str, str] = field(default_factory=dict)  # namespace -> namespaceAntiAffinityGroup
    failure_domains: dict[str, tuple[str, ...]] = field(default_factory=dict)  # domain -> broker ids
    failure_domains_enabled: bool = False  # broker.conf failureDomainsEnabled
    shedding_excluded_namespaces: frozenset[str] = frozenset()  # loadBalancerSheddingExcludedNamespaces (PIP-380)
    # a broker id's host for applyNamespacePolicies (VersionProfile.broker_host_by_last_colon: parse_broker_host)
    host_of: Callable[[str], str | None] = field(default=broker_host, repr=False, compare=False)
    _mask_cache: dict[tuple[str, bool, Callable[[str], str | None], tuple[str, ...]],
                      tuple[np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self.isolation = tuple(sorted(self.isolation, key=lambda p: p.name))

    # --- parsing ------------------------------------------------------------------------------
    @classmethod
    def from_json(
        cls,
        isolation_policies: Mapping[str, Any] | None = None,
        failure_domains: Mapping[str, Any] | None = None,
        namespaces: Mapping[str, Any] | None = None,
        *,
        failure_domains_enabled: bool = False,
        shedding_excluded_namespaces: Iterable[str] = (),
    ) -> "NamespacePolicies":
        """Build from ``decide``'s request parts (DESIGN.md §5).

        ``isolation_policies``: ``{name: NamespaceIsolationData}``; ``failure_domains``: ``{domain: {"brokers": [...]}}``;
        ``namespaces``: ``{ns: {"policies": {"namespaceAntiAffinityGroup": g}, ...}}``. ``failure_domains_enabled`` and
        ``shedding_excluded_namespaces`` come from the config keys ``failureDomainsEnabled`` /
        ``loadBalancerSheddingExcludedNamespaces``.
        """
        iso: list[IsolationPolicy] = []
        if isolation_policies is not None:
            if not isinstance(isolation_policies, Mapping):
                raise InvalidInputError("isolationPolicies: expected an object of policy name -> policy")
            iso = [IsolationPolicy.from_json(str(k), v) for k, v in isolation_policies.items()]
        domains: dict[str, tuple[str, ...]] = {}
        if failure_domains is not None:
            if not isinstance(failure_domains, Mapping):
                raise InvalidInputError("failureDomains: expected an object of domain -> {brokers: [...]}")
            for name, doc in failure_domains.items():
                brokers = doc.get("brokers", []) if isinstance(doc, Mapping) else None
                if not isinstance(brokers, list) or not all(isinstance(b, str) for b in brokers):
                    raise InvalidInputError(f"failureDomains.{name}.brokers: expected a list of broker ids")
                domains[str(name)] = tuple(brokers)
        groups: dict[str, str] = {}
        if namespaces is not None:
            if not isinstance(namespaces, Mapping):
                raise InvalidInputError("namespaces: expected an object of namespace -> {...}")
            for ns, doc in namespaces.items():
                pol = doc.get("policies") if isinstance(doc, Mapping) else None
                if pol is None:
                    continue
                if not isinstance(pol, Mapping):
                    raise InvalidInputError(f"namespaces.{ns}.policies: expected an object")
                group = pol.get("namespaceAntiAffinityGroup")
                if group is not None and not isinstance(group, str):
                    raise InvalidInputError(f"namespaces.{ns}.policies.namespaceAntiAffinityGroup: expected a string")
                if group is not None and group.strip():  # StringUtils.isBlank -> no group
                    groups[str(ns)] = group
        return cls(
            isolation=tuple(iso),
            anti_affinity_groups=groups,
            failure_domains=domains,
            failure_domains_enabled=bool(failure_domains_enabled),
            shedding_excluded_namespaces=frozenset(shedding_excluded_namespaces),
        )

    # --- lookups ------------------------------------------------------------------------------
    def policy_for(self, namespace: str) -> IsolationPolicy | None:
        """``NamespaceIsolationPolicies.getPolicyByNamespace``: the first matching policy (sorted by name)."""
        for pol in self.isolation:
            if pol.matches_namespace(namespace):
                return pol
        return None

    def anti_affinity_group(self, namespace: str) -> str | None:
        """``LocalPolicies.namespaceAntiAffinityGroup`` of ``namespace`` (None when blank or absent)."""
        return self.anti_affinity_groups.get(namespace)

    def has_isolation_or_anti_affinity(self, namespace: str) -> bool:
        """True when placement or unloading of ``namespace`` depends on policies (isolation or an anti-affinity group)."""
        return self.policy_for(namespace) is not None or self.anti_affinity_group(namespace) is not None

    def is_shedding_excluded(self, namespace: str) -> bool:
        """``loadBalancerSheddingExcludedNamespaces.contains(namespace)`` (PIP-380)."""
        return namespace in self.shedding_excluded_namespaces

    def broker_to_domain(self) -> dict[str, str]:
        """``LoadManagerShared.refreshBrokerToFailureDomainMap``; empty unless ``failureDomainsEnabled``.

        Domains are visited in sorted order, so a broker listed twice ends in the last domain by name.
        """
        if not self.failure_domains_enabled:
            return {}
        out: dict[str, str] = {}
        for domain in sorted(self.failure_domains):
            for broker in self.failure_domains[domain]:
                out[broker] = domain
        return out

    # --- applyNamespacePolicies ---------------------------------------------------------------
    def _host_masks(
        self, namespace: str, brokers: Brokers, policy: object = _UNSET,
        host_of: Callable[[str], str | None] = broker_host,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(primary, secondary, shared) host-match masks over broker rows, cached per (namespace, broker ids).

        ``policy``: ``policy_for(namespace)`` when the caller has it already. ``host_of``: the broker id's host
        (None: the broker is skipped, in no mask)."""
        ids = tuple(brokers.ids)
        pol = self.policy_for(namespace) if policy is _UNSET else policy
        assert pol is None or isinstance(pol, IsolationPolicy)  # for the type checker
        key = (pol.name if pol is not None else "", pol is not None, host_of, ids)
        hit = self._mask_cache.get(key)
        if hit is not None:
            return hit
        n = len(ids)
        primary = np.zeros(n, dtype=bool)
        secondary = np.zeros(n, dtype=bool)
        shared = np.ones(n, dtype=bool)
        for i, broker in enumerate(ids):
            host = host_of(broker)
            if host is None:
                shared[i] = False
                continue
            if pol is not None:
                primary[i] = pol.is_primary_host(host)
                secondary[i] = (not primary[i]) and pol.is_secondary_host(host)
            # NamespaceIsolationPolicies.isSharedBroker: not the primary broker of any policy
            shared[i] = not any(p.is_primary_host(host) for p in self.isolation)
        if len(self._mask_cache) > 4096:
            self._mask_cache.clear()
        self._mask_cache[key] = (primary, secondary, shared)
        return primary, secondary, shared

    def apply_namespace_policies(
        self,
        namespace: str,
        brokers: Brokers,
        candidate_mask: np.ndarray,
        usage: np.ndarray | None = None,
        *,
        non_persistent: bool = False,
        host_of: Callable[[str], str | None] | None = None,
    ) -> np.ndarray:
        """``LoadManagerShared.applyNamespacePolicies``: the brokers among ``candidate_mask`` (available brokers)
        that may own a bundle of ``namespace``. ``host_of`` gives a broker id's host (default: the policies'
        ``host_of``; ``parse_broker_host`` for ``applyNamespacePoliciesAsync``, which skips an id without ``:``).

        * With an isolation policy: its primary brokers, plus its secondary ones when
          ``MinAvailablePolicy.shouldFailoverToSecondary(#primaries)`` (fewer primaries than ``min_limit``).
        * Without: the shared brokers (primary for no policy) that load the topic domain
          (``persistentTopicsEnabled``, or ``nonPersistentTopicsEnabled`` for a non-persistent bundle).

        ``usage`` is accepted for callers that have it at hand; the modular load manager calls the ``int``
        overload of ``shouldFailover``, which ignores ``usage_threshold``, so it does not change the result.
        """
        del usage  # see docstring: shouldFailover(int) ignores broker usage
        prim, sec, add_secondaries = self.policy_fill(namespace, brokers, candidate_mask, non_persistent=non_persistent,
                                                      host_of=host_of)
        return prim | sec if add_secondaries else prim

    def policy_fill(
        self,
        namespace: str,
        brokers: Brokers,
        candidate_mask: np.ndarray,
        *,
        non_persistent: bool = False,
        host_of: Callable[[str], str | None] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        """``applyNamespacePolicies``' two thread-local sets as masks, ``localPrimariesCache`` and
        ``localSecondaryCache``, and whether the secondaries join the candidates (the policy's failover, or no
        policy: the shared brokers are the secondaries). See :meth:`apply_namespace_policies`."""
        avail = np.asarray(candidate_mask, dtype=bool)
        pol = self.policy_for(namespace)
        primary, secondary, shared = self._host_masks(namespace, brokers, pol, host_of or self.host_of)
        if pol is not None:
            prim = avail & primary
            return prim, avail & secondary, pol.should_failover(int(prim.sum()))
        enabled = brokers.non_persistent_topics_enabled if non_persistent else brokers.persistent_topics_enabled
        return np.zeros_like(avail), avail & np.asarray(enabled, dtype=bool) & shared, True

    def should_namespace_policies_unload(
        self, namespace: str, current_broker: int, brokers: Brokers, available_mask: np.ndarray
    ) -> bool:
        """``ModularLoadManagerImpl.shouldNamespacePoliciesUnload``: some broker other than the owner passes the policies."""
        mask = self.apply_namespace_policies(namespace, brokers, available_mask).copy()
        if 0 <= current_broker < len(mask):
            mask[current_broker] = False
        return bool(mask.any())

    # --- anti-affinity ------------------------------------------------------------------------
    def anti_affinity_namespace_counts(
        self, namespace: str, brokers: Brokers, ranges: BrokerNamespaceRanges
    ) -> np.ndarray | None:
        """``LoadManagerShared.getAntiAffinityNamespaceOwnedBrokers``: per broker row, how many namespaces of
        ``namespace``'s anti-affinity group it owns (a namespace counts when it has at least one bundle range,
        reported or preallocated). None when ``namespace`` has no group. Groups compare case-insensitively.
        """
        group = self.anti_affinity_group(namespace)
        if group is None:
            return None
        g = group.lower()
        counts = np.zeros(len(brokers), dtype=np.int64)
        for broker, ns_map in ranges.items():
            row = brokers.index(broker)
            if row < 0:
                continue
            c = 0
            for ns, rngs in ns_map.items():
                if not rngs:
                    continue
                other = self.anti_affinity_groups.get(ns)
                if other is not None and other.lower() == g:
                    c += 1
            counts[row] = c
        return counts

    def filter_anti_affinity_group_owned_brokers(
        self, namespace: str, brokers: Brokers, candidate_mask: np.ndarray, ranges: BrokerNamespaceRanges
    ) -> np.ndarray:
        """``LoadManagerShared.filterAntiAffinityGroupOwnedBrokers``.

        With ``failureDomainsEnabled`` (and a non-empty domain map) keep only the failure domains whose summed
        count over candidates is least (a broker in no domain belongs to ``"default"``); then keep the brokers
        with the least count (a broker with no count counts 0).
        """
        cand = np.asarray(candidate_mask, dtype=bool).copy()
        if not cand.any():
            return cand
        counts = self.anti_affinity_namespace_counts(namespace, brokers, ranges)
        if counts is None:
            return cand
        return self.keep_least_anti_affinity_count(brokers.ids, cand, counts)

    def keep_least_anti_affinity_count(self, broker_ids: list[str], cand: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The private ``LoadManagerShared.filterAntiAffinityGroupOwnedBrokers(pulsar, candidates, brokerToDomainMap,
        brokerToAntiAffinityNamespaceCount)`` both load managers end in, given the counts per broker row (0 where a
        broker has none).

        With ``failureDomainsEnabled`` (and a non-empty domain map, ``filterDomainsNotHavingLeastNumberAntiAffinity
        Namespaces``) keep only the failure domains whose summed count over candidates is least (a broker in no
        domain belongs to ``"default"``); then keep the brokers with the least count.
        """
        cand = np.asarray(cand, dtype=bool).copy()
        if not cand.any():
            return cand
        b2d = self.broker_to_domain()
        if b2d:
            domain = [b2d.get(b, DEFAULT_DOMAIN) for b in broker_ids]
            per_domain: dict[str, int] = {}
            for i in np.flatnonzero(cand):
                per_domain[domain[i]] = per_domain.get(domain[i], 0) + int(counts[i])
            least_domain = min(per_domain.values())
            for i in np.flatnonzero(cand):
                if per_domain[domain[i]] != least_domain:
                    cand[i] = False
        least = counts[cand].min()
        return cand & (counts == least)

    def should_anti_affinity_namespace_unload(
        self,
        namespace: str,
        current_broker: int,
        brokers: Brokers,
        available_mask: np.ndarray,
        ranges: BrokerNamespaceRanges,
    ) -> bool:
        """``ModularLoadManagerImpl.shouldAntiAffinityNamespaceUnload`` ->
        ``LoadManagerShared.shouldAntiAffinityNamespaceUnload``.

        Among the brokers passing the namespace policies: unload when some broker owns no namespace of the
        group, or the owner owns more than the least; refuse when every candidate owns the same count.
        Always true for a namespace without a group, or when no broker owns a namespace of the group.
        """
        counts = self.anti_affinity_namespace_counts(namespace, brokers, ranges)
        if counts is None or not counts.any():
            return True
        cand = self.apply_namespace_policies(namespace, brokers, available_mask)
        if not cand.any():
            return False  # Java: no candidates -> 0 brokers hold the least count == candidate count 0 -> false
        c = counts[cand]
        least = int(c.min())
        current = int(counts[current_broker]) if cand[current_broker] else 0
        if least == 0 or current > least:
            return True
        return int((c == least).sum()) != int(cand.sum())
