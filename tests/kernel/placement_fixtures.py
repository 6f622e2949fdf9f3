"""Builders of columnar ``LoadData`` for the placement / orchestration tests.

They mirror how Pulsar's tests assemble ``LoadData``: per broker a ``LocalBrokerData`` (resource usage, message
rates, topic count, version and load-manager class) and optionally its ``TimeAverageBrokerData`` long-term rates;
per bundle its owner (``lastStats``) and, optionally, its ``BundleData`` long-term rates and topic count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data import RATE_IN, RATE_OUT, Brokers, Bundles, LoadData

MODULAR = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"


@dataclass
class Br:
    """A broker. ``usage`` is the percentage of every resource listed in ``resources`` (limit 100)."""

    usage: float = 0.0
    resources: tuple[int, ...] = (0,)  # resource columns set to ``usage`` (0 = cpu)
    rate_in: float = 0.0
    rate_out: float = 0.0
    topics: int = 0
    version: str | None = "4.0.0"
    lm_class: str | None = MODULAR
    persistent: bool = True
    non_persistent: bool = True
    long_rate_in: float | None = None  # TimeAverageBrokerData.longTermMsgRateIn (None: derived from bundles)
    long_rate_out: float = 0.0


@dataclass
class Bu:
    """A bundle: owner broker id, BundleData long-term msgRateIn/Out (None: no BundleData) and topic count."""

    owner: str | None = None
    long_rate: tuple[float, float] | None = None
    topics: int = 0


@dataclass
class World:
    brokers: dict[str, Br] = field(default_factory=dict)
    bundles: dict[str, Bu] = field(default_factory=dict)

    def build(self) -> LoadData:
        ids = sorted(self.brokers)
        br = Brokers.empty(ids)
        for i, bid in enumerate(ids):
            s = self.brokers[bid]
            br.limit[i, :] = 100.0
            for r in s.resources:
                br.usage[i, r] = s.usage
            br.msg_rate_in[i] = s.rate_in
            br.msg_rate_out[i] = s.rate_out
            br.num_topics[i] = s.topics
            br.broker_version[i] = s.version
            br.load_manager_class_name[i] = s.lm_class
            br.persistent_topics_enabled[i] = s.persistent
            br.non_persistent_topics_enabled[i] = s.non_persistent
        names = sorted(self.bundles)
        bd = Bundles.empty(names)
        for nm, s in self.bundles.items():
            j = bd.index(nm)
            if s.owner is not None:
                bd.owner[j] = ids.index(s.owner)
            bd.topics[j] = s.topics
            bd.bundle_topics[j] = s.topics
            if s.long_rate is not None:
                bd.has_bundle_data[j] = True
                bd.long[j, RATE_IN], bd.long[j, RATE_OUT] = s.long_rate
                bd.short[j, RATE_IN], bd.short[j, RATE_OUT] = s.long_rate
        ld = LoadData(br, bd)
        if any(s.long_rate_in is not None for s in self.brokers.values()):
            short, long = ld.time_average_broker_data()
            for i, bid in enumerate(ids):
                s = self.brokers[bid]
                if s.long_rate_in is not None:
                    long[i, RATE_IN], long[i, RATE_OUT] = s.long_rate_in, s.long_rate_out
            ld.tabd = (short, long)
        return ld


def conf(**keys: object) -> PulsarConfig:
    return PulsarConfig.resolve(dict(keys))


def rows(ld: LoadData, *ids: str) -> np.ndarray:
    """Sorted broker rows of ``ids``."""
    return np.array(sorted(ld.brokers.index(b) for b in ids), dtype=np.int64)


def mask(ld: LoadData, *ids: str) -> np.ndarray:
    m = np.zeros(len(ld.brokers), dtype=bool)
    for b in ids:
        m[ld.brokers.index(b)] = True
    return m


def ids_of(ld: LoadData, m: np.ndarray) -> set[str]:
    return {ld.brokers.ids[i] for i in np.flatnonzero(m)}
