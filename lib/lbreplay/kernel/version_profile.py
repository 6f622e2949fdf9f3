"""Version-dependent behaviour of Pulsar's load manager, selected by the ``pulsarVersion`` config key.

``pulsarVersion`` names a released Pulsar line; each line's profile is checked by the differential oracle
(``tests/pulsar_oracle``) against that line's newest ``pulsar-broker`` jar on Maven Central (the jar per line is in
``lbreplay.verify.PULSAR_LINES``). Each switch names the Pulsar change that introduced it and the first release
carrying it (PULSAR-LB-SPEC.md section 9). Default values of config keys that changed are in
``conf/pulsar/defaults.yaml``.

``ALIASES``: ``"4.x"`` (the default of configs written before the lines were checked) means the newest checked
4.x line, ``"3.x"`` the newest checked 3.x line. ``"2.9"`` is the one line not checked by the oracle (kept for the
configs that name it; see docs/how-we-know.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class VersionProfile:
    name: str
    # LocalBrokerData.getMaxResourceUsage() includes memory up to 2.11; apache/pulsar#19559 (3.0) dropped it.
    max_usage_includes_memory: bool
    # getMaxResourceUsageWithWeight: the 5-arg form (with memory) up to 2.11, the 4-arg form since 3.0 (#19559).
    weighted_max_includes_memory: bool
    # ThresholdShedder.updateAvg: first observation taken as-is since 2.10 (#13217 era); older versions seeded the
    # history with 0.0 (first value = (1-h) * u) and used a symmetric band check.
    threshold_first_sample_raw: bool
    # PIP-358 (#22888/#22889, 4.0): OverloadShedder, LeastLongTermMessageRate and the post-placement overload
    # re-check use the weighted max usage instead of getMaxResourceUsage().
    overload_checks_weighted: bool
    # TransferShedder: target = maxThr * offload / maxLoad in the hit-count/swap versions (3.x+, #19830 era);
    # the first versions (3.0) used maxThr * offload, had no hit count and no swap.
    transfer_target_scaled: bool
    transfer_hit_count: bool
    # UniformLoadShedder: the 2.9-era version halves the gap and has no minimum gates.
    uniform_legacy: bool
    # [M] doLoadShedding unloads with a destination chosen by selectBroker (3.x+); older versions unload
    # without one and the bundle is placed at its next lookup.
    unload_with_destination: bool
    # [M] updateBundleData drops BundleData of bundles no broker reported this round.
    drop_unreported_bundle_data: bool
    # BundleSplitterTask: `topics < 2` guard and per-cycle per-namespace accounting since 2.10.
    split_min_two_topics: bool
    # AvgShedder (PIP-364) exists since 3.3 / 4.0.
    avg_shedder_available: bool
    # UniformLoadShedder takes a bundle while `bundleLoad <= required + 1000` (int arithmetic, wraps at 2^31-1):
    # the 4.0.x jars still carry the `+ 1000` (checked on 4.0.7 by the oracle); apache/pulsar#21906 removed it
    # on master and was not cherry-picked to branch-4.0.
    uniform_unload_slack: int = 0
    # AvgShedder.calculateScoresAndSort compares scores with `(int) (a - b)` in 4.0.x (scores less than 1 apart
    # compare equal; the order is not transitive, TimSort may throw "Comparison method violates its general
    # contract!"); master compares with Double.compare. Checked on the 4.0.7 jar.
    avg_shedder_int_comparator: bool = False
    # PIP-357 (apache/pulsar#22824, first in 4.0.0) added the correctly spelled loadBalancerBandwidth{In,Out}
    # ResourceWeight keys (the new key wins unless it is 1.0, then the old spelling); before, ServiceConfiguration
    # has only loadBalancerBandwith{In,Out}ResourceWeight and the new spelling is an unknown (ignored) key.
    # Checked on 3.3.6 (ThresholdShedder.updateAvg, LeastResourceUsageWithWeight, AvgShedder read the old key).
    bandwidth_weight_keys_pip357: bool = True
    # TransferShedder.findBundlesForUnloading skips bundles with zero throughput (on the max broker and among the
    # min broker's swap candidates): apache/pulsar#23626 (Nov 2024), in 3.3.6 / 4.0.x, not in 3.0.7 (checked).
    transfer_skips_zero_throughput: bool = True
    # UniformLoadShedder before apache/pulsar#21025 (merged Aug 2023; in 3.0.2+, backported to 2.11.3 by #21178):
    # one over/underloaded broker for rate and throughput together (a broker wins when its rate OR throughput
    # beats the running value) and the gate `rateRequired >= minUnloadMessage || throughputRequired >=
    # minUnloadMessageThroughput`. Checked on 2.11.0 and 2.10.5.
    uniform_coupled_extremes: bool = False
    # UniformLoadShedder of 2.10.x: brokers with at most one bundle are left out of the max/min scan and the unload
    # percentage and minimums are the constants 0.2 / 1000 / 1 MB (maxUnloadPercentage, minUnloadMessage,
    # minUnloadMessageThroughput and maxUnloadBundleNumPerShedding are read from 2.11.0 on). Checked on 2.10.5.
    uniform_2_10_constants: bool = False
    # LeastResourceUsageWithWeight restarts a broker's EWMA from its current usage when it reports no bundles or
    # no message rate: apache/pulsar#16766 (merged Jul 2022; in 3.0.0, not in 2.11.0 -- checked on 2.11.0).
    lruw_idle_restart: bool = True
    # Placement strategies absent from the line's jar (LeastResourceUsageWithWeight arrived with #16281 in 2.11.0,
    # RoundRobinBrokerSelector in 3.0.0).
    absent_strategies: tuple[str, ...] = ()
    # ThresholdShedder's lowerBoundarySheddingEnabled pass (tryLowerBoundaryShedding, which advances the EWMA a
    # second time that tick): apache/pulsar#17456, first in 2.11.0; 2.10.x ignores the key (checked on 2.10.5).
    threshold_lower_boundary: bool = True
    # ModularLoadManagerImpl.cleanupDeadBrokersData calls onActiveBrokersChange on the shedding and placement
    # strategies (ThresholdShedder / LeastResourceUsageWithWeight forget a departed broker's EWMA):
    # apache/pulsar#19560 (merged Feb 2023), first in 3.0.0; 2.11.x and 2.10.x have no such hook.
    active_brokers_change_hook: bool = True
    # [M] BrokerLoadManagerClassFilter in the candidate pipeline of selectBrokerForAssignment (3.0+).
    broker_class_filter: bool = True
    # [M] selectBrokerForAssignment always applies removeMostServicingBrokersForNamespace before the switch
    # loadBalancerDistributeBundlesEvenlyEnabled (apache/pulsar#16059, merged Jun 2022, first in 2.11.0): the
    # 2.10.5 jar has no such key (checked by the oracle's placement-pipeline cases).
    even_spread_always: bool = False
    # loadBalancerSheddingExcludedNamespaces (PIP-380, apache/pulsar#23549, merged Nov 2024, first in 4.1.0): the
    # modular doLoadShedding skips those namespaces and selectBroker places them with a RoundRobinBrokerSelector
    # (ModularLoadManagerImpl.sheddingExcludedNamespaceSelectionStrategy); the extensible TopKBundles leaves them
    # out. Before, ServiceConfiguration has no such key (ignored). Checked: absent from 4.0.7, present in 4.2.4.
    shedding_excluded_namespaces: bool = True
    # [M] doLoadShedding skips a planned bundle when no other broker passes the namespace isolation policies
    # (ModularLoadManagerImpl.shouldNamespacePoliciesUnload, apache/pulsar#16476, merged Jul 2022, first in 2.11.0;
    # 2.10.5 has no such method). Checked by the oracle's LoadSheddingDestination cases.
    unload_checks_namespace_policies: bool = True
    # [M] LoadManagerShared.applyNamespacePolicies reads a broker id's host with parseBrokerHost (the id up to its
    # last ':'; an id without ':' is skipped, never a candidate) where older lines parse new URL("http://" + id)
    # (apache/pulsar#21894, merged Jan 2024: first in 3.2.0 and in the 3.0 line by 3.0.7; 3.0.2 and 3.1.0 still parse
    # a URL, checked on the jars). Checked by the oracle's placement-pipeline cases with a port-less broker id.
    broker_host_by_last_colon: bool = True
    # The extensible load manager's TransferShedder is in the jar (org.apache.pulsar.broker.loadbalance.extensions,
    # complete since 3.0).
    transfer_shedder_available: bool = True
    # [M] updateBundleData drops every preallocation whose bundle the leader itself does not own
    # (``getNamespaceService().getOwnedServiceUnits()`` on the leader): in the 2.10.5, 3.0.7, 3.3.6, 4.0.7, 4.2.4 and
    # 5.0.0-M1 jars, not in 2.11.0 (checked on the class files).
    preallocations_kept_if_leader_owned: bool = True
    # [M] LoadData.getBundleDataForLoadShedding() leaves out the bundles of these namespace kinds (the kinds of
    # load_data.namespace_kind), so no modular shedder (Overload / Threshold / Uniform / AvgShedder) sees them:
    # 3.0.7 .. 5.0.0-M1 filter with NamespaceService.isSLAOrHeartbeatNamespace (heartbeat v1 / v2, SLA monitor:
    # ``pulsar/system`` bundles are shed like any other); 2.11.0 with isSystemServiceNamespace, which adds
    # ``pulsar/system``; 2.10.5 with isSystemServiceNamespace, which there is heartbeat v1 / v2 and SLA monitor only.
    # BundleSplitterTask.findBundlesToSplit and the extensible DefaultNamespaceBundleSplitStrategyImpl skip no
    # namespace on any line; the extensible TopKBundles.update skips isSystemServiceNamespace (all three kinds) on
    # every line that has it. Checked on the jars' bytecode.
    shedding_skips: tuple[str, ...] = ("heartbeat", "sla-monitor")
    # [M] ModularLoadManagerImpl.selectBroker spreads ``pulsar/system`` bundles evenly like
    # loadBalancerDistributeBundlesEvenlyEnabled (``|| serviceUnit.getNamespaceObject().equals(SYSTEM_NAMESPACE)``):
    # in 3.0.7 .. 5.0.0-M1, not in 2.11.0 / 2.10.5 (no NamespaceName.SYSTEM_NAMESPACE in their selectBroker).
    system_namespace_even_spread: bool = True
    # NamespaceService.SLA_NAMESPACE_PATTERN is ``sla-monitor/([^:]+:\d+)`` in 4.2.4 and 5.0.0-M1 (also the v2 form
    # ``sla-monitor/<host:port>``), ``sla-monitor/[^/]+/([^:]+:\d+)`` (v1 form only) in 2.10.5 .. 4.0.7; the
    # heartbeat pattern ``pulsar/([^:]+:\d+)`` matches both forms on every line. Checked on the jars.
    sla_pattern_v2: bool = False
    # NamespaceName accepts v1 names (``tenant/cluster/namespace``): not in 4.2.4 / 5.0.0-M1 ("Invalid namespace
    # format", and NamespaceBundle.getBundleNamespace no longer splits such a bundle name), so their clusters have no
    # v1 heartbeat or SLA namespace (the verify generator draws v2 forms only there). Checked by running them.
    v1_namespace_names: bool = True


_4_2 = VersionProfile("4.2", False, False, True, True, True, True, False, True, True, True, True, sla_pattern_v2=True,
                      v1_namespace_names=False)
# 3.3.6 carries UniformLoadShedder's `+ 1000` and AvgShedder's `(int) (a - b)` as 4.0.x does (the same source).
_3_3 = VersionProfile("3.3", False, False, True, False, True, True, False, True, False, True, True,
                      uniform_unload_slack=1000, avg_shedder_int_comparator=True, bandwidth_weight_keys_pip357=False,
                      shedding_excluded_namespaces=False)
_2_11 = VersionProfile("2.11", True, True, True, False, False, False, False, False, False, True, False,
                       broker_class_filter=False, transfer_shedder_available=False,
                       bandwidth_weight_keys_pip357=False, uniform_coupled_extremes=True, lruw_idle_restart=False,
                       absent_strategies=("RoundRobinBrokerSelector",), active_brokers_change_hook=False,
                       shedding_excluded_namespaces=False, broker_host_by_last_colon=False,
                       preallocations_kept_if_leader_owned=False, system_namespace_even_spread=False,
                       shedding_skips=("heartbeat", "sla-monitor", "pulsar/system"))

PROFILES: dict[str, VersionProfile] = {
    # 5.0.x: checked against the 5.0.0-M1 jar (5.0.1's dependency tree is not on Maven Central).
    "5.0": replace(_4_2, name="5.0"),
    # 4.2.x: no UniformLoadShedder slack, Double.compare in AvgShedder; checked against the 4.2.4 jar.
    "4.2": _4_2,
    # 4.0.x: checked against the 4.0.7 jar.
    "4.0": replace(_4_2, name="4.0", uniform_unload_slack=1000, avg_shedder_int_comparator=True,
                   shedding_excluded_namespaces=False, sla_pattern_v2=False, v1_namespace_names=True),
    # 3.3.x: checked against the 3.3.6 jar.
    "3.3": _3_3,
    # 3.0.x: checked against the 3.0.7 jar (no AvgShedder).
    "3.0": replace(_3_3, name="3.0", avg_shedder_available=False, transfer_skips_zero_throughput=False),
    # 2.11.x / 2.10.x: checked against the 2.11.0 / 2.10.5 jars (no AvgShedder, no TransferShedder).
    "2.11": _2_11,
    "2.10": replace(_2_11, name="2.10", uniform_2_10_constants=True, threshold_lower_boundary=False,
                    even_spread_always=True, unload_checks_namespace_policies=False,
                    preallocations_kept_if_leader_owned=True, shedding_skips=("heartbeat", "sla-monitor"),
                    absent_strategies=("RoundRobinBrokerSelector", "LeastResourceUsageWithWeight")),
    # 2.9.x: not checked by the oracle (namespace filters assumed as 2.10.5's, its successor).
    "2.9": VersionProfile("2.9", True, True, False, False, False, False, True, False, False, False, False,
                          broker_class_filter=False, even_spread_always=True, transfer_shedder_available=False,
                          bandwidth_weight_keys_pip357=False, threshold_lower_boundary=False,
                          absent_strategies=("RoundRobinBrokerSelector", "LeastResourceUsageWithWeight"),
                          active_brokers_change_hook=False, shedding_excluded_namespaces=False,
                          unload_checks_namespace_policies=False, broker_host_by_last_colon=False,
                          preallocations_kept_if_leader_owned=False, system_namespace_even_spread=False),
}

# Names kept for configs written before the lines were checked: the newest checked line of that major.
ALIASES: dict[str, str] = {"4.x": "4.2", "3.x": "3.3"}


def line_of(version: str) -> str:
    """The released line a ``pulsarVersion`` value names (aliases resolved)."""
    return ALIASES.get(version, version)


def profile_for(version: str) -> VersionProfile:
    return PROFILES[line_of(version)]
