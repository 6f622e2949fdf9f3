"""Small builders of columnar ``LoadData`` for the shedding-strategy tests.

They mirror how Pulsar's own unit tests assemble ``LoadData``: a ``LocalBrokerData`` per broker (resource
usages and message totals) plus ``BundleData`` short-term values for some bundles. A bundle label that is
not already a full bundle name becomes ``tenant/<label>/0x00000000_0xffffffff``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data import Brokers, Bundles, LoadData

MB = 1024 * 1024
RESOURCE_KEYS = ("cpu", "memory", "direct_memory", "bw_in", "bw_out")


def name(label: str) -> str:
    """Full bundle name of a test label."""
    if "/" in label and "_0x" in label:
        return label
    return f"tenant/{label}/0x00000000_0xffffffff"


def label(bundle: str) -> str:
    """Inverse of ``name`` for generated names."""
    parts = bundle.split("/")
    return parts[1] if len(parts) == 3 and parts[0] == "tenant" and parts[2] == "0x00000000_0xffffffff" else bundle


@dataclass
class B:
    """One broker's LocalBrokerData: ``(usage, limit)`` per resource and the message totals."""

    cpu: tuple[float, float] = (0.0, 0.0)
    memory: tuple[float, float] = (0.0, 0.0)
    direct_memory: tuple[float, float] = (0.0, 0.0)
    bw_in: tuple[float, float] = (0.0, 0.0)
    bw_out: tuple[float, float] = (0.0, 0.0)
    rate_in: float = 0.0
    rate_out: float = 0.0
    thr_in: float = 0.0
    thr_out: float = 0.0


@dataclass
class Bd:
    """One bundle: its owner (``localData.bundles``) and, if ``short`` is set, its BundleData short-term
    values ``(msgThroughputIn, msgThroughputOut, msgRateIn, msgRateOut)``."""

    owner: str | None = None
    short: tuple[float, float, float, float] | None = None
    long: tuple[float, float, float, float] | None = None


@dataclass
class Cluster:
    brokers: dict[str, B] = field(default_factory=dict)
    bundles: dict[str, Bd] = field(default_factory=dict)
    recently_unloaded: dict[str, int] = field(default_factory=dict)

    def build(self) -> LoadData:
        ids = sorted(self.brokers)
        br = Brokers.empty(ids)
        for i, bid in enumerate(ids):
            spec = self.brokers[bid]
            for r, key in enumerate(RESOURCE_KEYS):
                br.usage[i, r], br.limit[i, r] = getattr(spec, key)
            br.msg_rate_in[i] = spec.rate_in
            br.msg_rate_out[i] = spec.rate_out
            br.msg_throughput_in[i] = spec.thr_in
            br.msg_throughput_out[i] = spec.thr_out
        names = sorted(name(lbl) for lbl in self.bundles)
        bd = Bundles.empty(names)
        for lbl, spec in self.bundles.items():
            j = bd.index(name(lbl))
            if spec.owner is not None:
                bd.owner[j] = ids.index(spec.owner)
            if spec.short is not None:
                bd.has_bundle_data[j] = True
                bd.short[j] = spec.short
                bd.long[j] = spec.long if spec.long is not None else spec.short
        return LoadData(
            brokers=br,
            bundles=bd,
            recently_unloaded_bundles={name(k): v for k, v in self.recently_unloaded.items()},
        )


def conf(**keys: object) -> PulsarConfig:
    return PulsarConfig.resolve(dict(keys))


def thr(x: float) -> tuple[float, float, float, float]:
    """Short-term data with throughput in = out = x (Pulsar tests' ``setMsgThroughputIn/Out``)."""
    return (x, x, 0.0, 0.0)


def rate(x: float) -> tuple[float, float, float, float]:
    """Short-term data with msg rate in = out = x."""
    return (0.0, 0.0, x, x)


def pct(p: float) -> tuple[float, float]:
    """A resource at ``p`` percent (limit 100)."""
    return (p, 100.0)


def by_broker(unloads: list) -> dict[str, list[str]]:
    """Multimap broker -> [bundle labels] in selection order (Pulsar's ``Multimap.get``)."""
    out: dict[str, list[str]] = {}
    for u in unloads:
        out.setdefault(u.broker, []).append(label(u.bundle))
    return out
