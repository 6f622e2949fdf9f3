"""``NamespaceService``'s namespace kinds (lbreplay.kernel.load_data.namespace_kind)."""

from __future__ import annotations

import pytest

from lbreplay.kernel.load_data import is_system_service_namespace, namespace_kind

# namespace -> kind; the isSystemServiceNamespace / isSLAOrHeartbeatNamespace answers of the 4.0.7 jar's
# NamespaceService for the same strings (checked by running them) agree with these kinds.
CASES = {
    "pulsar/system": "pulsar/system",
    "pulsar/c1/b1:8080": "heartbeat",
    "pulsar/b1:8080": "heartbeat",
    "pulsar/localhost:8080": "heartbeat",
    "pulsar/c1/b1.x:8080": "heartbeat",
    "sla-monitor/c1/b1:8080": "sla-monitor",
    "pulsar/b1": None,
    "pulsar/c1/b1": None,
    "sla-monitor/c1/b1": None,
    "sla-monitor/b1:8080": None,
    "public/default": None,
    "tenant/sys": None,
    "pulsar/c1/b1:80x": None,
    "pulsar/c1/b1:\u0663": None,  # Java's \\d is ASCII only
}


@pytest.mark.parametrize(("namespace", "kind"), list(CASES.items()))
def test_namespace_kind_matches_namespace_service(namespace: str, kind: str | None) -> None:
    assert namespace_kind(namespace) == kind
    assert is_system_service_namespace(namespace) == (kind is not None)


# 4.2.4 and 5.0.0-M1: SLA_NAMESPACE_PATTERN = sla-monitor/([^:]+:\d+) (5.0.0-M1's answers, checked by running them)
V2_SLA = {"sla-monitor/b1:8080": "sla-monitor", "sla-monitor/c1/b1:8080": "sla-monitor", "sla-monitor/b1": None,
          "pulsar/b1:8080": "heartbeat", "pulsar/system": "pulsar/system"}


@pytest.mark.parametrize(("namespace", "kind"), list(V2_SLA.items()))
def test_namespace_kind_with_the_v2_sla_pattern(namespace: str, kind: str | None) -> None:
    assert namespace_kind(namespace, sla_pattern_v2=True) == kind
