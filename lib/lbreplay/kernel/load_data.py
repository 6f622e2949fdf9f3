"""The leader's ``LoadData`` (modular load manager) in columnar form.

Mirrors ``org.apache.pulsar.broker.loadbalance.LoadData`` / ``BrokerData`` / ``LocalBrokerData`` /
``BundleData`` / ``TimeAverageMessageData`` / ``TimeAverageBrokerData`` (PULSAR-LB-SPEC.md §1).
Brokers are rows sorted by broker id; bundles are rows sorted by bundle name, so index order is the
deterministic "sorted visiting order" that stands in for Java hash-map order.

Four-value message data always uses the TimeAverageMessageData field order:
``msgThroughputIn, msgThroughputOut, msgRateIn, msgRateOut``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, fields

import numpy as np

THR_IN, THR_OUT, RATE_IN, RATE_OUT = range(4)
MESSAGE_FIELDS: tuple[str, ...] = ("msgThroughputIn", "msgThroughputOut", "msgRateIn", "msgRateOut")
NUM_SHORT_SAMPLES = 10  # ModularLoadManagerImpl.NUM_SHORT_SAMPLES
NUM_LONG_SAMPLES = 1000  # ModularLoadManagerImpl.NUM_LONG_SAMPLES
# ModularLoadManagerImpl default bundle stats for unseen bundles: 50 msg/s and 50000 B/s in and out.
DEFAULT_MESSAGE_DATA = np.array([50000.0, 50000.0, 50.0, 50.0])


def split_bundle_name(bundle: str) -> tuple[str, str]:
    """``tenant/ns/0x..._0x...`` -> (namespace, range), split at the last ``/`` (NamespaceBundle)."""
    ns, _, rng = bundle.rpartition("/")
    return ns, rng


def is_system_service_namespace(namespace: str) -> bool:
    """``NamespaceService.isSystemServiceNamespace``: heartbeat v1/v2, SLA monitor, and ``pulsar/system`` ([M])."""
    parts = namespace.split("/")
    if namespace == "pulsar/system":
        return True
    if parts[0] == "pulsar" and len(parts) in (2, 3) and ":" in parts[-1]:
        return True
    return parts[0] == "sla-monitor" and len(parts) == 3


@dataclass
class Brokers:
    """One row per broker: ``LocalBrokerData`` as the leader read it."""

    ids: list[str]
    usage: np.ndarray  # (B, 5) resource usage, Pulsar units (cpu %, MiB, MiB, Kbit/s, Kbit/s)
    limit: np.ndarray  # (B, 5)
    msg_rate_in: np.ndarray
    msg_rate_out: np.ndarray
    msg_throughput_in: np.ndarray
    msg_throughput_out: np.ndarray
    num_topics: np.ndarray
    num_consumers: np.ndarray
    num_producers: np.ndarray
    last_update: np.ndarray  # ms
    broker_version: list[str | None]
    load_manager_class_name: list[str | None]
    persistent_topics_enabled: np.ndarray
    non_persistent_topics_enabled: np.ndarray

    @classmethod
    def empty(cls, ids: list[str]) -> "Brokers":
        b = len(ids)
        return cls(
            ids=list(ids),
            usage=np.zeros((b, 5)),
            limit=np.zeros((b, 5)),
            msg_rate_in=np.zeros(b),
            msg_rate_out=np.zeros(b),
            msg_throughput_in=np.zeros(b),
            msg_throughput_out=np.zeros(b),
            num_topics=np.zeros(b, dtype=np.int64),
            num_consumers=np.zeros(b, dtype=np.int64),
            num_producers=np.zeros(b, dtype=np.int64),
            last_update=np.zeros(b, dtype=np.int64),
            broker_version=[None] * b,
            load_manager_class_name=[None] * b,
            persistent_topics_enabled=np.ones(b, dtype=bool),
            non_persistent_topics_enabled=np.ones(b, dtype=bool),
        )

    def __len__(self) -> int:
        return len(self.ids)

    def index(self, broker: str) -> int:
        """Row of ``broker``; -1 if unknown."""
        i = int(np.searchsorted(np.array(self.ids, dtype=object), broker)) if self.ids else 0
        return i if i < len(self.ids) and self.ids[i] == broker else -1

    @property
    def msg_rate(self) -> np.ndarray:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> np.ndarray:
        return self.msg_throughput_in + self.msg_throughput_out


@dataclass
class Bundles:
    """One row per bundle the leader knows: the owner's ``lastStats`` entry plus the leader's ``BundleData``."""

    names: list[str]
    namespaces: list[str]
    lower: np.ndarray  # int64
    upper: np.ndarray  # int64
    owner: np.ndarray  # int32 broker row whose lastStats reports the bundle; -1 none
    stats: np.ndarray  # (N, 4) NamespaceBundleStats rates, MESSAGE_FIELDS order
    topics: np.ndarray  # int64 NamespaceBundleStats.topics
    consumer_count: np.ndarray
    producer_count: np.ndarray
    cache_size: np.ndarray
    has_bundle_data: np.ndarray  # bool: present in LoadData.bundleData
    short: np.ndarray  # (N, 4) shortTermData
    short_samples: np.ndarray  # int32 numSamples
    short_max: np.ndarray  # int32 maxSamples (10)
    long: np.ndarray  # (N, 4) longTermData
    long_samples: np.ndarray
    long_max: np.ndarray  # int32 maxSamples (1000)
    bundle_topics: np.ndarray  # BundleData.topics
    preallocated_to: np.ndarray  # int32 broker row holding it in preallocatedBundleData; -1 none

    @classmethod
    def empty(cls, names: list[str]) -> "Bundles":
        n = len(names)
        from lbreplay.kernel.naming import parse_range  # local: naming imports nothing from here

        lower = np.zeros(n, dtype=np.int64)
        upper = np.zeros(n, dtype=np.int64)
        namespaces: list[str] = []
        for i, name in enumerate(names):
            ns, rng = split_bundle_name(name)
            namespaces.append(ns)
            lower[i], upper[i] = parse_range(rng)
        return cls(
            names=list(names),
            namespaces=namespaces,
            lower=lower,
            upper=upper,
            owner=np.full(n, -1, dtype=np.int32),
            stats=np.zeros((n, 4)),
            topics=np.zeros(n, dtype=np.int64),
            consumer_count=np.zeros(n, dtype=np.int64),
            producer_count=np.zeros(n, dtype=np.int64),
            cache_size=np.zeros(n, dtype=np.int64),
            has_bundle_data=np.zeros(n, dtype=bool),
            short=np.tile(DEFAULT_MESSAGE_DATA, (n, 1)),
            short_samples=np.zeros(n, dtype=np.int32),
            short_max=np.full(n, NUM_SHORT_SAMPLES, dtype=np.int32),
            long=np.tile(DEFAULT_MESSAGE_DATA, (n, 1)),
            long_samples=np.zeros(n, dtype=np.int32),
            long_max=np.full(n, NUM_LONG_SAMPLES, dtype=np.int32),
            bundle_topics=np.zeros(n, dtype=np.int64),
            preallocated_to=np.full(n, -1, dtype=np.int32),
        )

    def __len__(self) -> int:
        return len(self.names)

    def index(self, bundle: str) -> int:
        i = int(np.searchsorted(np.array(self.names, dtype=object), bundle)) if self.names else 0
        return i if i < len(self.names) and self.names[i] == bundle else -1


@dataclass
class LoadData:
    """``LoadData`` plus the leader-only maps the strategies read."""

    brokers: Brokers
    bundles: Bundles
    recently_unloaded_bundles: dict[str, int] = field(default_factory=dict)  # bundle -> unload time (ms)
    preallocated_bundle_to_broker: dict[str, str] = field(default_factory=dict)
    now_ms: int = 0
    # BrokerData.timeAverageData as of the last updateBundleData reset: (short, long), each (B, 4) in
    # MESSAGE_FIELDS order. None -> derived from the bundles (time_average_broker_data).
    tabd: tuple[np.ndarray, np.ndarray] | None = None

    def broker_time_average(self) -> tuple[np.ndarray, np.ndarray]:
        """``BrokerData.getTimeAverageData()`` per broker: the stored TABD, else derived from the bundles."""
        return self.tabd if self.tabd is not None else self.time_average_broker_data()

    def owned_mask(self, broker: int) -> np.ndarray:
        """Bundles in ``brokerData[broker].localData.bundles`` (= keys of its lastStats)."""
        return self.bundles.owner == broker

    def bundle_count(self) -> np.ndarray:
        """``localData.numBundles`` per broker."""
        own = self.bundles.owner
        return np.bincount(own[own >= 0], minlength=len(self.brokers))

    def shedding_candidates(self) -> np.ndarray:
        """``LoadData.getBundleDataForLoadShedding()`` restricted to not-recently-unloaded bundles."""
        b = self.bundles
        mask = b.has_bundle_data.copy()
        for i, ns in enumerate(b.namespaces):
            if mask[i] and is_system_service_namespace(ns):
                mask[i] = False
        if self.recently_unloaded_bundles:
            for name in self.recently_unloaded_bundles:
                j = b.index(name)
                if j >= 0:
                    mask[j] = False
        return mask

    def time_average_broker_data(self) -> tuple[np.ndarray, np.ndarray]:
        """``TimeAverageBrokerData.reset``: per broker (short, long) sums over its lastStats bundles.

        Bundles without BundleData contribute the default stats to both sums.
        """
        nb = len(self.brokers)
        b = self.bundles
        own = b.owner
        sel = own >= 0
        short_src = np.where(b.has_bundle_data[:, None], b.short, DEFAULT_MESSAGE_DATA)
        long_src = np.where(b.has_bundle_data[:, None], b.long, DEFAULT_MESSAGE_DATA)
        short = np.zeros((nb, 4))
        long = np.zeros((nb, 4))
        np.add.at(short, own[sel], short_src[sel])
        np.add.at(long, own[sel], long_src[sel])
        return short, long


def tamd_update(values: np.ndarray, num_samples: np.ndarray, max_samples: np.ndarray, sample: np.ndarray) -> None:
    """``TimeAverageMessageData.update`` in place for the selected rows: increment first, then running mean."""
    n = np.minimum(num_samples + 1, max_samples)
    num_samples[:] = n
    with np.errstate(divide="ignore", invalid="ignore"):
        values[:] = ((n[:, None] - 1) * values + sample) / n[:, None]


def update_bundle_data(ld: LoadData) -> None:
    """One ``updateBundleData`` sample: every bundle in some broker's lastStats gets ``BundleData.update(stats)``.

    A bundle the leader has no BundleData for starts from default stats with numSamples 0
    (``getBundleDataOrDefault``), so its first sample replaces the defaults.
    """
    b = ld.bundles
    rows = np.flatnonzero(b.owner >= 0)
    if rows.size == 0:
        return
    fresh = rows[~b.has_bundle_data[rows]]
    if fresh.size:
        b.short[fresh] = DEFAULT_MESSAGE_DATA
        b.long[fresh] = DEFAULT_MESSAGE_DATA
        b.short_samples[fresh] = 0
        b.long_samples[fresh] = 0
        b.has_bundle_data[fresh] = True
    sample = b.stats[rows]
    sv, sn = b.short[rows], b.short_samples[rows]
    tamd_update(sv, sn, b.short_max[rows], sample)
    b.short[rows], b.short_samples[rows] = sv, sn
    lv, ln = b.long[rows], b.long_samples[rows]
    tamd_update(lv, ln, b.long_max[rows], sample)
    b.long[rows], b.long_samples[rows] = lv, ln
    b.bundle_topics[rows] = b.topics[rows]


def insert_bundles(ld: LoadData, names: list[str]) -> np.ndarray:
    """Add rows for bundles the leader does not know yet, keeping rows sorted by name; returns the rows of ``names``.

    New rows carry no owner, no stats and no BundleData (``has_bundle_data`` False, default message data),
    i.e. what ``getBundleDataOrDefault`` would start from. Existing rows are untouched but may shift.
    """
    b = ld.bundles

    def row_of(bs: Bundles, name: str) -> int:
        i = bisect.bisect_left(bs.names, name)
        return i if i < len(bs.names) and bs.names[i] == name else -1

    new = sorted({n for n in names if row_of(b, n) < 0})
    if new:
        add = Bundles.empty(new)
        pos = [bisect.bisect_left(b.names, n) for n in new]  # insertion points in the old rows (non-decreasing)
        out = Bundles.empty([])
        for f in fields(Bundles):
            old_col, add_col = getattr(b, f.name), getattr(add, f.name)
            if isinstance(old_col, np.ndarray):
                setattr(out, f.name, np.insert(old_col, pos, add_col, axis=0))
            else:
                merged = list(old_col)
                for k, (p, v) in enumerate(zip(pos, add_col)):
                    merged.insert(p + k, v)
                setattr(out, f.name, merged)
        ld.bundles = out
    return np.array([row_of(ld.bundles, n) for n in names], dtype=np.int64)
