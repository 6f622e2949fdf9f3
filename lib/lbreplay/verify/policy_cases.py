"""The namespace policies of the TransferShedder cases (``isTransferable``'s policy checks), drawn by
:meth:`lbreplay.verify.cases.Generator.extensible` in its last branch."""

from __future__ import annotations

import re
from typing import Any

import numpy as np


def transfer_policies(rng: np.random.Generator, req: dict[str, Any], ids: list[str]) -> None:
    """Namespace policies for TransferShedder's ``isTransferable``: ``loadBalancerSheddingBundlesWithPolicies
    Enabled`` either way, isolation policies over the bundles' namespaces (primary / secondary host regexes,
    ``min_limit`` failover, a second policy whose primaries are no longer shared), anti-affinity groups (names
    differing in case, blank) with more bundles of the group owned around the cluster, and failure domains."""
    conf, ext = req["config"], req["extensible"]
    conf["loadBalancerSheddingBundlesWithPoliciesEnabled"] = bool(rng.random() < 0.5)
    if rng.random() < 0.7:  # reach the bundle loop more often: no hit-count wait, no broker cool-down
        conf["loadBalancerSheddingConditionHitCountThreshold"] = 0
        ext["recentlyUnloadedBrokers"] = {}
    hosts = sorted({b.rpartition(":")[0] for b in ids})
    n = len(hosts)

    def some_hosts() -> list[str]:
        k = int(rng.integers(0, n + 1))
        picked = sorted(hosts[int(i)] for i in rng.choice(n, size=k, replace=False)) if k else []
        return [re.escape(h) for h in picked] or ["nobody\\.example"]

    if rng.random() < 0.7:
        iso: dict[str, Any] = {}
        for j in range(int(rng.integers(1, 3))):
            ns_rx = str(rng.choice(["t/ns0", "t/ns[01]", "t/ns.*", "t/ns2", "t/aa.*"]))
            iso[f"policy-{j}"] = {
                "namespaces": [ns_rx], "primary": some_hosts(),
                "secondary": some_hosts() if rng.random() < 0.7 else [],
                "auto_failover_policy": {"policy_type": "min_available", "parameters": {
                    "min_limit": str(int(rng.choice([0, 1, 2, 3, n]))), "usage_threshold": "80"}}}
        req["isolationPolicies"] = iso
    if rng.random() < 0.7:
        groups = ["g1", "G1", "g2", "  "]
        namespaces: dict[str, Any] = {}
        for ns in ["t/ns0", "t/ns1", "t/ns2", "t/aa0", "t/aa1"]:
            if rng.random() < 0.6:
                namespaces[ns] = {"policies": {"namespaceAntiAffinityGroup": groups[int(rng.integers(4))]}}
        req["namespaces"] = namespaces
        owners = ext.get("bundleOwners")
        if owners is not None:  # bundles of the group's other namespaces, owned around the cluster
            known = sorted(set(ext["availableBrokers"]) | set(ext["brokerLoadData"]))
            for j in range(int(rng.integers(0, 6))):
                lo = j * 0x1000
                owners[f"t/aa{j % 2}/0x{lo:08x}_0x{lo + 0x1000:08x}"] = known[int(rng.integers(len(known)))]
    if rng.random() < 0.4:
        conf["failureDomainsEnabled"] = True
        domains: dict[str, Any] = {}
        for b in ids:
            if rng.random() < 0.8:
                domains.setdefault(f"domain-{int(rng.integers(0, 3))}", {"brokers": []})["brokers"].append(b)
        req["failureDomains"] = domains
