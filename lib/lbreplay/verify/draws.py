"""Shared pieces of the oracle's random cases: constants and fast draws."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

IMPL = "org.apache.pulsar.broker.loadbalance.impl."
EXT = "org.apache.pulsar.broker.loadbalance.extensions."
NOW = 1_700_000_000_000
MB = 1024.0 * 1024.0
_T = TypeVar("_T")


def pick(rng: np.random.Generator, options: Sequence[_T]) -> _T:
    """``rng.choice(options)`` of a short list: the same draw (``rng.integers(0, len(options))``, checked on
    numpy's Generator) without building an array, ~5x faster."""
    return options[int(rng.integers(0, len(options)))]


def hex8(x: int) -> str:
    """A bundle boundary as Pulsar writes it: ``0x%08x``."""
    return f"0x{x:08x}"


def even_layout(n: int) -> list[int]:
    """``n`` equal bundles over the hash range (``PoliciesUtil.getBundles``)."""
    step = 0x100000000 // n
    return [i * step for i in range(n)] + [0xFFFFFFFF]


CLUSTER = "c1"


def system_namespaces(rng: np.random.Generator, hosts: Sequence[str], v1_names: bool = True,
                      p: float = 0.4) -> list[str]:
    """With probability ``p``, 1-3 of the namespaces each line's filters treat apart (``load_data.namespace_kind``):
    ``pulsar/system``, a heartbeat namespace in the v2 (``pulsar/<host:port>``) or, where the line has v1 names
    (``VersionProfile.v1_namespace_names``), the v1 form (``pulsar/<cluster>/<host:port>``), an SLA-monitor
    namespace (``sla-monitor/<host:port>``, and ``sla-monitor/<cluster>/<host:port>`` with v1 names), or a near miss
    (no port)."""
    if not hosts or rng.random() >= p:
        return []
    forms = ["pulsar/system", "pulsar/{h}", "sla-monitor/{h}", "pulsar/{b}"]
    if v1_names:
        forms += [f"pulsar/{CLUSTER}/{{h}}", f"sla-monitor/{CLUSTER}/{{h}}", f"pulsar/{CLUSTER}/{{b}}"]
    out: list[str] = []
    for _ in range(int(rng.integers(1, 4))):
        host = pick(rng, hosts)
        ns = pick(rng, forms).format(h=host, b=host.split(":")[0])
        if ns not in out:
            out.append(ns)
    return out
