"""Version-dependent behaviour of Pulsar's load manager, selected by the ``pulsarVersion`` config key.

Each switch names the Pulsar change that introduced it (PULSAR-LB-SPEC.md §9). Default profile: the
current 4.x line. Default values of config keys that changed are in ``conf/pulsar/defaults.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass


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


PROFILES: dict[str, VersionProfile] = {
    # 4.0.x (checked against the 4.0.7 jar by the differential oracle, tests/pulsar_oracle).
    "4.0": VersionProfile("4.0", False, False, True, True, True, True, False, True, True, True, True,
                          uniform_unload_slack=1000, avg_shedder_int_comparator=True),
    # 4.2.x: the master-branch behaviour of "4.x" (no UniformLoadShedder slack, Double.compare in AvgShedder);
    # checked against the 4.2.4 jar by the differential oracle.
    "4.2": VersionProfile("4.2", False, False, True, True, True, True, False, True, True, True, True),
    "4.x": VersionProfile("4.x", False, False, True, True, True, True, False, True, True, True, True),
    "3.x": VersionProfile("3.x", False, False, True, False, True, True, False, True, False, True, True),
    "2.11": VersionProfile("2.11", True, True, True, False, False, False, False, False, False, True, False),
    "2.10": VersionProfile("2.10", True, True, True, False, False, False, False, False, False, True, False),
    "2.9": VersionProfile("2.9", True, True, False, False, False, False, True, False, False, False, False),
}


def profile_for(version: str) -> VersionProfile:
    return PROFILES[version]
