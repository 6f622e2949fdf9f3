"""Pulsar's load-report JSON objects <-> lbreplay's columnar model (PULSAR-LB-SPEC.md §1, DESIGN.md §5).

Field names are Pulsar's own, as Jackson writes them (``ObjectMapperFactory``: null fields omitted,
unknown fields ignored on read). Mirrored classes (``pulsar-common`` ``policies.data.loadbalancer`` and
``broker.loadbalance.extensions.data``): ``ResourceUsage``, ``LocalBrokerData``, ``NamespaceBundleStats``,
``TimeAverageMessageData``, ``BundleData``, ``TimeAverageBrokerData``, ``BrokerLoadData``,
``TopBundlesLoadData``.

Every reader takes the JSON path of the value it reads and raises, with that path in the message,
``UsageError`` (exit 2) for a wrong JSON type and ``InvalidInputError`` (exit 3) for a bad value
(negative limit, NaN/inf, malformed bundle name or range, bundle owned by an unknown broker).
Fields lbreplay does not model (``protocols``, ``advertisedListeners``, ``properties`` …) are kept
verbatim in ``extra`` so that reading a dump and writing it back gives the same JSON object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.json_readers import (
    UNKNOWN_LIMIT,
    as_array,
    as_int,
    as_number,
    as_object,
    as_string,
    check_broker_id,
    check_keys,
    child,
    format_number,
    get_bool,
    get_int,
    get_number,
    get_str,
    parse_bundle_name,
    parse_timestamps,
)
from lbreplay.kernel.load_data import (
    NUM_LONG_SAMPLES,
    NUM_SHORT_SAMPLES,
)
from lbreplay.kernel.resource_usage import RESOURCES, max_resource_usage


# ----------------------------------------------------------------------------------------------------------
# Object model (one Python object per Pulsar object; parsing only, never on a hot path)
# ----------------------------------------------------------------------------------------------------------
@dataclass
class ResourceUsage:
    """``ResourceUsage``: ``{"usage", "limit"}`` (``percentUsage`` counts ``limit <= 0`` as 0 %).

    ``limit`` must be >= 0, except Pulsar's own "unknown" marker -1 (written for bandwidth when the NIC
    speed cannot be read, e.g. ``GenericBrokerHostUsageImpl``); ``usage`` may be negative (-1 when the
    collector fails).
    """

    usage: float = 0.0
    limit: float = 0.0

    @classmethod
    def from_json(cls, doc: Any, path: str) -> "ResourceUsage":
        o = as_object(doc, path)
        limit = get_number(o, "limit", path)
        if limit < 0 and limit != UNKNOWN_LIMIT:
            raise InvalidInputError(f"{child(path, 'limit')}: must be >= 0 (or -1 for unknown), got {format_number(limit)}")
        return cls(get_number(o, "usage", path), limit)

    def to_json(self) -> dict[str, Any]:
        return {"usage": self.usage, "limit": self.limit}


_STATS_FLOATS = ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut")
_STATS_INTS = ("consumerCount", "producerCount", "topics", "cacheSize")


@dataclass
class NamespaceBundleStats:
    """``NamespaceBundleStats`` (public fields; all start at 0)."""

    msgRateIn: float = 0.0
    msgThroughputIn: float = 0.0
    msgRateOut: float = 0.0
    msgThroughputOut: float = 0.0
    consumerCount: int = 0
    producerCount: int = 0
    topics: int = 0
    cacheSize: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Any, path: str) -> "NamespaceBundleStats":
        o = as_object(doc, path)
        values: dict[str, Any] = {k: get_number(o, k, path, minimum=0.0) for k in _STATS_FLOATS}
        values.update({k: get_int(o, k, path, minimum=0) for k in _STATS_INTS})
        s = cls(**values)
        s.extra = {k: v for k, v in o.items() if k not in _STATS_FLOATS and k not in _STATS_INTS}
        return s

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in _STATS_FLOATS + _STATS_INTS}
        out.update(self.extra)
        return out

    def message_data(self) -> list[float]:
        """The four rates in ``load_data.MESSAGE_FIELDS`` order (thrIn, thrOut, rateIn, rateOut)."""
        return [self.msgThroughputIn, self.msgThroughputOut, self.msgRateIn, self.msgRateOut]


_TAMD_FLOATS = ("msgThroughputIn", "msgThroughputOut", "msgRateIn", "msgRateOut")


@dataclass
class TimeAverageMessageData:
    """``TimeAverageMessageData``: running mean then EWMA over ``maxSamples`` samples."""

    maxSamples: int
    numSamples: int = 0
    msgThroughputIn: float = 0.0
    msgThroughputOut: float = 0.0
    msgRateIn: float = 0.0
    msgRateOut: float = 0.0

    @classmethod
    def from_json(cls, doc: Any, path: str, default_max: int) -> "TimeAverageMessageData":
        """``maxSamples`` 0 would make ``update`` divide by zero (NaN), so it must be >= 1."""
        o = as_object(doc, path)
        return cls(
            maxSamples=get_int(o, "maxSamples", path, default_max, minimum=1),
            numSamples=get_int(o, "numSamples", path, 0, minimum=0),
            **{k: get_number(o, k, path, minimum=0.0) for k in _TAMD_FLOATS},
        )

    def to_json(self) -> dict[str, Any]:
        return {"maxSamples": self.maxSamples, "numSamples": self.numSamples,
                **{k: getattr(self, k) for k in _TAMD_FLOATS}}

    def values(self) -> list[float]:
        return [getattr(self, k) for k in _TAMD_FLOATS]


@dataclass
class BundleData:
    """``BundleData``: short-term (10 samples) and long-term (1000 samples) message data plus ``topics``."""

    shortTermData: TimeAverageMessageData
    longTermData: TimeAverageMessageData
    topics: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Any, path: str) -> "BundleData":
        o = as_object(doc, path, allow_null=False)
        d = cls(
            TimeAverageMessageData.from_json(o.get("shortTermData"), child(path, "shortTermData"), NUM_SHORT_SAMPLES),
            TimeAverageMessageData.from_json(o.get("longTermData"), child(path, "longTermData"), NUM_LONG_SAMPLES),
            get_int(o, "topics", path, minimum=0),
        )
        d.extra = {k: v for k, v in o.items() if k not in ("shortTermData", "longTermData", "topics")}
        return d

    def to_json(self) -> dict[str, Any]:
        out = {"shortTermData": self.shortTermData.to_json(), "longTermData": self.longTermData.to_json(),
               "topics": self.topics}
        out.update(self.extra)
        return out


TABD_FIELDS: tuple[str, ...] = (
    "shortTermMsgThroughputIn", "shortTermMsgThroughputOut", "shortTermMsgRateIn", "shortTermMsgRateOut",
    "longTermMsgThroughputIn", "longTermMsgThroughputOut", "longTermMsgRateIn", "longTermMsgRateOut",
)


@dataclass
class TimeAverageBrokerData:
    """``TimeAverageBrokerData``: short/long-term sums over the broker's bundles (MESSAGE_FIELDS order)."""

    short: list[float]
    long: list[float]

    @classmethod
    def from_json(cls, doc: Any, path: str) -> "TimeAverageBrokerData":
        o = as_object(doc, path)
        vals = [get_number(o, k, path, minimum=0.0) for k in TABD_FIELDS]
        return cls(vals[:4], vals[4:])

    def to_json(self) -> dict[str, Any]:
        return dict(zip(TABD_FIELDS, list(self.short) + list(self.long)))


# Jackson's field order of LocalBrokerData; extras (protocols, advertisedListeners, properties …) go
# after brokerVersionString, where Pulsar declares them.
_LBD_URLS = ("webServiceUrl", "webServiceUrlTls", "pulsarServiceUrl", "pulsarServiceUrlTls", "brokerId")
_LBD_TOTALS_F = ("msgThroughputIn", "msgThroughputOut", "msgRateIn", "msgRateOut")
_LBD_TOTALS_I = ("numTopics", "numBundles", "numConsumers", "numProducers")
_LBD_KNOWN = set(_LBD_URLS) | set(RESOURCES) | set(_LBD_TOTALS_F) | set(_LBD_TOTALS_I) | {
    "persistentTopicsEnabled", "nonPersistentTopicsEnabled", "lastUpdate", "lastStats", "bundles",
    "lastBundleGains", "lastBundleLosses", "brokerVersionString", "loadManagerClassName", "startTimestamp",
    "maxResourceUsage", "loadReportType",
}


@dataclass
class LocalBrokerData:
    """``LocalBrokerData``: the report a broker writes to ``/loadbalance/brokers/<brokerId>``.

    Totals (``msgRate*``, ``msgThroughput*``, ``num*``) and ``bundles`` absent from the JSON are derived
    from ``lastStats`` (``LocalBrokerData.update`` sums them the same way). ``maxResourceUsage`` is the
    serialized ``getMaxResourceUsage()`` getter: ignored on read, recomputed on write. ``bundleStats`` (the
    alias getter of older dumps) is read as ``lastStats`` when ``lastStats`` is absent.
    """

    resources: dict[str, ResourceUsage]
    lastStats: dict[str, NamespaceBundleStats]
    msgThroughputIn: float = 0.0
    msgThroughputOut: float = 0.0
    msgRateIn: float = 0.0
    msgRateOut: float = 0.0
    numTopics: int = 0
    numBundles: int = 0
    numConsumers: int = 0
    numProducers: int = 0
    bundles: list[str] = field(default_factory=list)
    lastBundleGains: list[str] = field(default_factory=list)
    lastBundleLosses: list[str] = field(default_factory=list)
    lastUpdate: int = 0
    persistentTopicsEnabled: bool = True
    nonPersistentTopicsEnabled: bool = True
    brokerVersionString: str | None = None
    loadManagerClassName: str | None = None
    startTimestamp: int | None = None
    urls: dict[str, str] = field(default_factory=dict)
    loadReportType: str | None = "LocalBrokerData"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Any, path: str) -> "LocalBrokerData":
        o = as_object(doc, path)
        stats_key = "lastStats" if o.get("lastStats") is not None or "bundleStats" not in o else "bundleStats"
        stats_path = child(path, stats_key)
        last_stats: dict[str, NamespaceBundleStats] = {}
        for name, s in as_object(o.get(stats_key), stats_path).items():
            p = child(stats_path, name)
            parse_bundle_name(name, p)
            last_stats[name] = NamespaceBundleStats.from_json(s, p)
        d = cls(resources={r: ResourceUsage.from_json(o.get(r), child(path, r)) for r in RESOURCES},
                lastStats=last_stats)
        sums: dict[str, Any] = {
            "msgThroughputIn": sum(s.msgThroughputIn for s in last_stats.values()),
            "msgThroughputOut": sum(s.msgThroughputOut for s in last_stats.values()),
            "msgRateIn": sum(s.msgRateIn for s in last_stats.values()),
            "msgRateOut": sum(s.msgRateOut for s in last_stats.values()),
            "numTopics": sum(s.topics for s in last_stats.values()),
            "numBundles": len(last_stats),
            "numConsumers": sum(s.consumerCount for s in last_stats.values()),
            "numProducers": sum(s.producerCount for s in last_stats.values()),
        }
        for k in _LBD_TOTALS_F:
            setattr(d, k, get_number(o, k, path, sums[k], minimum=0.0))
        for k in _LBD_TOTALS_I:
            setattr(d, k, get_int(o, k, path, sums[k], minimum=0))
        for k in ("bundles", "lastBundleGains", "lastBundleLosses"):
            if o.get(k) is None:
                continue
            p = child(path, k)
            items = [as_string(v, child(p, i)) for i, v in enumerate(as_array(o[k], p))]
            for i, name in enumerate(items):
                parse_bundle_name(name, child(p, i))
            setattr(d, k, items)
        if o.get("bundles") is None:
            d.bundles = sorted(last_stats)
        d.lastUpdate = get_int(o, "lastUpdate", path, 0, minimum=0)
        d.persistentTopicsEnabled = get_bool(o, "persistentTopicsEnabled", path, True)
        d.nonPersistentTopicsEnabled = get_bool(o, "nonPersistentTopicsEnabled", path, True)
        d.brokerVersionString = get_str(o, "brokerVersionString", path)
        d.loadManagerClassName = get_str(o, "loadManagerClassName", path)
        st = o.get("startTimestamp")
        d.startTimestamp = None if st is None else as_int(st, child(path, "startTimestamp"), minimum=0)
        d.urls = {k: v for k in _LBD_URLS if (v := get_str(o, k, path)) is not None}
        if "loadReportType" in o:
            d.loadReportType = get_str(o, "loadReportType", path)
        if "maxResourceUsage" in o and o["maxResourceUsage"] is not None:
            as_number(o["maxResourceUsage"], child(path, "maxResourceUsage"))  # type-checked, then ignored
        d.extra = {k: v for k, v in o.items() if k not in _LBD_KNOWN}
        return d

    def max_resource_usage(self, conf: PulsarConfig) -> float:
        """``getMaxResourceUsage()`` of the configured ``pulsarVersion`` (memory dropped since 3.0, #19559)."""
        usage = np.array([[self.resources[r].usage for r in RESOURCES]])
        limit = np.array([[self.resources[r].limit for r in RESOURCES]])
        return float(max_resource_usage(usage, limit, conf)[0])

    def to_json(self, conf: PulsarConfig | None = None) -> dict[str, Any]:
        """Jackson's output (NON_NULL): fields in declaration order, ``maxResourceUsage`` recomputed."""
        conf = conf or PulsarConfig.resolve({})
        out: dict[str, Any] = {}
        for k in ("webServiceUrl", "webServiceUrlTls", "pulsarServiceUrl", "pulsarServiceUrlTls"):
            if k in self.urls:
                out[k] = self.urls[k]
        out["persistentTopicsEnabled"] = self.persistentTopicsEnabled
        out["nonPersistentTopicsEnabled"] = self.nonPersistentTopicsEnabled
        for r in RESOURCES:
            out[r] = self.resources[r].to_json()
        for k in _LBD_TOTALS_F:
            out[k] = getattr(self, k)
        out["lastUpdate"] = self.lastUpdate
        out["lastStats"] = {b: s.to_json() for b, s in self.lastStats.items()}
        for k in _LBD_TOTALS_I:
            out[k] = getattr(self, k)
        out["bundles"] = list(self.bundles)
        out["lastBundleGains"] = list(self.lastBundleGains)
        out["lastBundleLosses"] = list(self.lastBundleLosses)
        if self.brokerVersionString is not None:
            out["brokerVersionString"] = self.brokerVersionString
        out.update(self.extra)
        if self.loadManagerClassName is not None:
            out["loadManagerClassName"] = self.loadManagerClassName
        if self.startTimestamp is not None:
            out["startTimestamp"] = self.startTimestamp
        if "brokerId" in self.urls:
            out["brokerId"] = self.urls["brokerId"]
        out["maxResourceUsage"] = self.max_resource_usage(conf)
        if self.loadReportType is not None:
            out["loadReportType"] = self.loadReportType
        return out


_BLD_FLOATS = ("msgThroughputIn", "msgThroughputOut", "msgRateIn", "msgRateOut")
_BLD_KNOWN = set(RESOURCES) | set(_BLD_FLOATS) | {
    "bundleCount", "topics", "maxResourceUsage", "weightedMaxEMA", "msgThroughputEMA", "updatedAt", "reportedAt",
}


@dataclass
class BrokerLoadData:
    """Extensible ``BrokerLoadData`` (``loadbalancer-broker-load-data`` topic); its EMAs are stored, not derived.

    A new object has ``weightedMaxEMA = maxResourceUsage = 1.0`` until its first ``update``.
    """

    resources: dict[str, ResourceUsage]
    msgThroughputIn: float = 0.0
    msgThroughputOut: float = 0.0
    msgRateIn: float = 0.0
    msgRateOut: float = 0.0
    bundleCount: int = 0
    topics: int = 0
    maxResourceUsage: float = 1.0
    weightedMaxEMA: float = 1.0
    msgThroughputEMA: float = 0.0
    updatedAt: int = 0
    reportedAt: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Any, path: str) -> "BrokerLoadData":
        o = as_object(doc, path, allow_null=False)
        d = cls(resources={r: ResourceUsage.from_json(o.get(r), child(path, r)) for r in RESOURCES})
        for k in _BLD_FLOATS:
            setattr(d, k, get_number(o, k, path, minimum=0.0))
        d.bundleCount = get_int(o, "bundleCount", path, 0, minimum=0)
        d.topics = get_int(o, "topics", path, 0, minimum=0)
        d.maxResourceUsage = get_number(o, "maxResourceUsage", path, 1.0)
        d.weightedMaxEMA = get_number(o, "weightedMaxEMA", path, 1.0)
        d.msgThroughputEMA = get_number(o, "msgThroughputEMA", path, 0.0, minimum=0.0)
        d.updatedAt = get_int(o, "updatedAt", path, 0, minimum=0)
        d.reportedAt = get_int(o, "reportedAt", path, 0, minimum=0)
        d.extra = {k: v for k, v in o.items() if k not in _BLD_KNOWN}
        return d

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {r: self.resources[r].to_json() for r in RESOURCES}
        for k in _BLD_FLOATS:
            out[k] = getattr(self, k)
        for k in ("bundleCount", "topics", "maxResourceUsage", "weightedMaxEMA", "msgThroughputEMA",
                  "updatedAt", "reportedAt"):
            out[k] = getattr(self, k)
        out.update(self.extra)
        return out


@dataclass
class TopBundlesLoadData:
    """``TopBundlesLoadData``: ``{"topBundlesLoadData": [{"bundleName", "stats"}]}`` in the reporter's order.

    An early PIP-192 version wrote the list under ``top_bundles_load_data``; it is accepted on read.
    """

    entries: list[tuple[str, NamespaceBundleStats]]

    @classmethod
    def from_json(cls, doc: Any, path: str) -> "TopBundlesLoadData":
        o = as_object(doc, path, allow_null=False)
        key = "topBundlesLoadData" if "topBundlesLoadData" in o or "top_bundles_load_data" not in o \
            else "top_bundles_load_data"
        lp = child(path, key)
        entries: list[tuple[str, NamespaceBundleStats]] = []
        for i, e in enumerate(as_array(o.get(key), lp)):
            ep = child(lp, i)
            eo = as_object(e, ep, allow_null=False)
            if eo.get("bundleName") is None:
                raise UsageError(f"{child(ep, 'bundleName')}: missing")
            name = as_string(eo["bundleName"], child(ep, "bundleName"))
            parse_bundle_name(name, child(ep, "bundleName"))
            entries.append((name, NamespaceBundleStats.from_json(eo.get("stats"), child(ep, "stats"))))
        return cls(entries)

    def to_json(self) -> dict[str, Any]:
        return {"topBundlesLoadData": [{"bundleName": n, "stats": s.to_json()} for n, s in self.entries]}


# ----------------------------------------------------------------------------------------------------------
# Extensible load manager view
# ----------------------------------------------------------------------------------------------------------
@dataclass
class ExtensibleSnapshot:
    """The request's ``extensible`` block, validated (ExtensibleLoadManagerImpl's stores and channel view).

    ``availableBrokers`` defaults to the brokers with load data (the broker registry). ``bundleOwners`` is
    the service-unit state snapshot; ``None`` means no ownership check. ``brokerLookupData`` is the registry's
    ``BrokerLookupData`` of each broker (``brokerVersion``, ``loadManagerClassName``; a field not given is
    ``null``, as in an old broker's data); ``None`` means not known, and the filters that read it are skipped.
    """

    brokerLoadData: dict[str, BrokerLoadData]
    topBundlesLoadData: dict[str, TopBundlesLoadData]
    recentlyUnloadedBundles: dict[str, int]
    recentlyUnloadedBrokers: dict[str, int]
    availableBrokers: list[str]
    bundleOwners: dict[str, str] | None
    brokerLookupData: dict[str, dict[str, str | None]] | None = None


# The BrokerLookupData fields the broker filters read (BrokerLoadManagerClassFilter, BrokerVersionFilter).
LOOKUP_FIELDS = ("brokerVersion", "loadManagerClassName")


def parse_broker_lookup_data(doc: Any, path: str) -> dict[str, dict[str, str | None]] | None:
    """``extensible.brokerLookupData``: ``{broker: {"brokerVersion": str, "loadManagerClassName": str}}``
    (``BrokerLookupData`` field names; ``null`` or absent fields stay ``null``; its other fields, e.g. a whole
    registry entry pasted in, are ignored as Pulsar's Jackson model ignores unknown ones); ``None`` when absent."""
    if doc is None:
        return None
    out: dict[str, dict[str, str | None]] = {}
    for broker, d in as_object(doc, path).items():
        p = child(path, broker)
        check_broker_id(broker, p)
        o = as_object(d, p, allow_null=False)
        out[broker] = {k: get_str(o, k, p) for k in LOOKUP_FIELDS}
    return out


def parse_extensible(doc: Any, path: str = "$.extensible") -> ExtensibleSnapshot:
    o = as_object(doc, path)
    check_keys(o, ("brokerLoadData", "topBundlesLoadData", "recentlyUnloadedBundles", "recentlyUnloadedBrokers",
                   "availableBrokers", "bundleOwners", "brokerLookupData"), path)
    lp = child(path, "brokerLoadData")
    load: dict[str, BrokerLoadData] = {}
    for broker, d in as_object(o.get("brokerLoadData"), lp).items():
        check_broker_id(broker, child(lp, broker))
        load[broker] = BrokerLoadData.from_json(d, child(lp, broker))
    tp = child(path, "topBundlesLoadData")
    top: dict[str, TopBundlesLoadData] = {}
    for broker, d in as_object(o.get("topBundlesLoadData"), tp).items():
        check_broker_id(broker, child(tp, broker))
        top[broker] = TopBundlesLoadData.from_json(d, child(tp, broker))
    recent_bundles = parse_timestamps(o.get("recentlyUnloadedBundles"), child(path, "recentlyUnloadedBundles"),
                                      bundles=True)
    recent_brokers = parse_timestamps(o.get("recentlyUnloadedBrokers"), child(path, "recentlyUnloadedBrokers"),
                                      bundles=False)
    ap = child(path, "availableBrokers")
    if o.get("availableBrokers") is None:
        available = sorted(load)
    else:
        available = []
        for i, b in enumerate(as_array(o["availableBrokers"], ap)):
            available.append(check_broker_id(as_string(b, child(ap, i)), child(ap, i)))
        available = sorted(set(available))
    owners: dict[str, str] | None = None
    if o.get("bundleOwners") is not None:
        op = child(path, "bundleOwners")
        known = set(available) | set(load)
        owners = {}
        for name, broker in as_object(o["bundleOwners"], op).items():
            p = child(op, name)
            parse_bundle_name(name, p)
            owner = as_string(broker, p)
            if owner not in known:
                raise InvalidInputError(f'{p}: bundle owned by unknown broker "{owner}" (not in availableBrokers '
                                        f'or brokerLoadData)')
            owners[name] = owner
    lookup = parse_broker_lookup_data(o.get("brokerLookupData"), child(path, "brokerLookupData"))
    if lookup is not None:
        # the broker registry lists each available broker with its lookup data: one cannot come without the other
        for b in available:
            if b not in lookup:
                raise InvalidInputError(f'{child(child(path, "brokerLookupData"), b)}: missing; every broker of '
                                        f'availableBrokers needs its BrokerLookupData once brokerLookupData is given')
    return ExtensibleSnapshot(load, top, recent_bundles, recent_brokers, available, owners, lookup)
