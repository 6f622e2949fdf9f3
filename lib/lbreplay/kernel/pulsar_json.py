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

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data import (
    NUM_LONG_SAMPLES,
    NUM_SHORT_SAMPLES,
    Brokers,
    Bundles,
    LoadData,
)
from lbreplay.kernel.resource_usage import RESOURCES, max_resource_usage
from lbreplay.kernel.naming import split_bundle_name

# ----------------------------------------------------------------------------------------------------------
# JSON paths and typed readers
# ----------------------------------------------------------------------------------------------------------
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RANGE = re.compile(r"0x([0-9a-f]{8})_0x([0-9a-f]{8})\Z")
_MAX_HASH = 0xFFFFFFFF
UNKNOWN_LIMIT = -1.0  # ResourceUsage limit Pulsar writes when it cannot measure it (e.g. NIC speed)


def child(path: str, key: str | int) -> str:
    """JSON path of ``key`` under ``path``: ``$.a.b``, ``$.brokers["b1:8080"]``, ``$.list[3]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENT.match(key):
        return f"{path}.{key}"
    return f'{path}["{_escape(key)}"]'


def _escape(key: str) -> str:
    return key.replace("\\", "\\\\").replace('"', '\\"')


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value (for messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def as_object(value: Any, path: str, *, allow_null: bool = True) -> dict[str, Any]:
    """A JSON object (``null`` reads as empty, as Jackson leaves the field at its default)."""
    if value is None and allow_null:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{path}: expected an object, got {json_type(value)}")
    return value


def as_array(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"{path}: expected an array, got {json_type(value)}")
    return value


def as_string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{path}: expected a string, got {json_type(value)}")
    return value


def as_number(value: Any, path: str, *, minimum: float | None = None) -> float:
    """A finite JSON number (``bool`` is not a number); ``minimum`` is inclusive."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{path}: expected a number, got {json_type(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"{path}: must be a finite number, got {value}")
    if minimum is not None and value < minimum:
        raise InvalidInputError(f"{path}: must be >= {_fmt(minimum)}, got {_fmt(value)}")
    return float(value)


def as_int(value: Any, path: str, *, minimum: int | None = None) -> int:
    """A JSON integer (an integral float such as ``3.0`` is accepted, as Jackson's int coercion does)."""
    num = as_number(value, path)
    if not num.is_integer():
        raise UsageError(f"{path}: expected an integer, got {value}")
    if minimum is not None and num < minimum:
        raise InvalidInputError(f"{path}: must be >= {minimum}, got {_fmt(value)}")
    return int(value)


def as_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{path}: expected a boolean, got {json_type(value)}")
    return value


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def get_number(obj: Mapping[str, Any], key: str, path: str, default: float = 0.0, *,
               minimum: float | None = None) -> float:
    value = obj.get(key)
    return default if value is None else as_number(value, child(path, key), minimum=minimum)


def get_int(obj: Mapping[str, Any], key: str, path: str, default: int = 0, *, minimum: int | None = None) -> int:
    value = obj.get(key)
    return default if value is None else as_int(value, child(path, key), minimum=minimum)


def get_bool(obj: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
    value = obj.get(key)
    return default if value is None else as_bool(value, child(path, key))


def get_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    return None if value is None else as_string(value, child(path, key))


def parse_bundle_name(name: Any, path: str) -> tuple[str, int, int]:
    """Validate a full bundle name ``tenant/ns/0x%08x_0x%08x`` (``NamespaceBundleFactory.getBundle``).

    The namespace is everything before the last ``/`` and must be ``tenant/ns`` (or V1
    ``tenant/cluster/ns``); the range is lower-case 8-digit hex, ``lower < upper <= 0xffffffff``.
    Returns (namespace, lower, upper).
    """
    text = as_string(name, path)
    ns, rng = split_bundle_name(text)
    parts = ns.split("/")
    if len(parts) not in (2, 3) or any(not p or p != p.strip() for p in parts):
        raise InvalidInputError(f"{path}: malformed bundle name {text!r}: expected tenant/namespace/0x%08x_0x%08x")
    lower, upper = parse_bundle_range(rng, path, text)
    return ns, lower, upper


def parse_bundle_range(rng: str, path: str, shown: str | None = None) -> tuple[int, int]:
    """Validate a bundle range ``0x%08x_0x%08x`` with ``lower < upper``."""
    m = _RANGE.match(rng)
    if not m:
        raise InvalidInputError(f"{path}: malformed bundle range {rng!r} in {shown or rng!r}: expected 0x%08x_0x%08x")
    lower, upper = int(m.group(1), 16), int(m.group(2), 16)
    if lower >= upper:
        raise InvalidInputError(f"{path}: malformed bundle range {rng!r}: lower bound must be below upper bound")
    return lower, upper


def parse_boundary(value: Any, path: str) -> int:
    """A hash boundary: a hex string ``0x…`` (``Long.decode``) or an integer, in ``[0, 0xffffffff]``."""
    if isinstance(value, str):
        text = value.strip()
        try:
            num = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
        except ValueError:
            raise InvalidInputError(f"{path}: malformed boundary {value!r}: expected 0x%08x") from None
    else:
        num = as_int(value, path)
    if not 0 <= num <= _MAX_HASH:
        raise InvalidInputError(f"{path}: boundary {value!r} outside [0x00000000, 0xffffffff]")
    return num


def check_keys(obj: Mapping[str, Any], known: tuple[str, ...], path: str) -> None:
    """Request-structure objects (not Pulsar's own, which ignore unknown fields) reject unknown keys (exit 2)."""
    for key in obj:
        if key not in known:
            raise UsageError(f"{child(path, key)}: unknown key; known: {', '.join(known)}")


def check_broker_id(name: str, path: str) -> str:
    if not name or name != name.strip():
        raise InvalidInputError(f"{path}: malformed broker id {name!r}")
    return name


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
            raise InvalidInputError(f"{child(path, 'limit')}: must be >= 0 (or -1 for unknown), got {_fmt(limit)}")
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
        s = cls(**{k: get_number(o, k, path, minimum=0.0) for k in _STATS_FLOATS},
                **{k: get_int(o, k, path, minimum=0) for k in _STATS_INTS})
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
        sums = {
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
# Request -> columnar LoadData (modular load manager view)
# ----------------------------------------------------------------------------------------------------------
@dataclass
class BrokerEntry:
    """``BrokerData``: ``localData``, ``timeAverageData`` (None = derive), ``preallocatedBundleData``."""

    localData: LocalBrokerData
    timeAverageData: TimeAverageBrokerData | None = None
    preallocatedBundleData: dict[str, BundleData] = field(default_factory=dict)


@dataclass
class ParsedLoadData:
    """The ``loadData`` block of a request, validated, before it becomes columns."""

    brokers: dict[str, BrokerEntry]
    bundleData: dict[str, BundleData]
    recentlyUnloadedBundles: dict[str, int]


def parse_load_data(doc: Any, path: str = "$.loadData") -> ParsedLoadData:
    """Validate the request's ``loadData`` block (``LoadData``: brokerData, bundleData, recentlyUnloadedBundles)."""
    o = as_object(doc, path)
    check_keys(o, ("brokers", "bundleData", "recentlyUnloadedBundles"), path)
    bp = child(path, "brokers")
    brokers: dict[str, BrokerEntry] = {}
    for broker, entry in as_object(o.get("brokers"), bp).items():
        ep = child(bp, broker)
        check_broker_id(broker, ep)
        eo = as_object(entry, ep, allow_null=False)
        check_keys(eo, ("localData", "timeAverageData", "preallocatedBundleData"), ep)
        local = LocalBrokerData.from_json(eo.get("localData"), child(ep, "localData"))
        tad = eo.get("timeAverageData")
        tabd = None if tad is None else TimeAverageBrokerData.from_json(tad, child(ep, "timeAverageData"))
        pp = child(ep, "preallocatedBundleData")
        pre: dict[str, BundleData] = {}
        for name, bd in as_object(eo.get("preallocatedBundleData"), pp).items():
            parse_bundle_name(name, child(pp, name))
            pre[name] = BundleData.from_json(bd, child(pp, name))
        brokers[broker] = BrokerEntry(local, tabd, pre)
    dp = child(path, "bundleData")
    bundle_data: dict[str, BundleData] = {}
    for name, bd in as_object(o.get("bundleData"), dp).items():
        parse_bundle_name(name, child(dp, name))
        bundle_data[name] = BundleData.from_json(bd, child(dp, name))
    rp = child(path, "recentlyUnloadedBundles")
    recent = parse_timestamps(o.get("recentlyUnloadedBundles"), rp, bundles=True)
    return ParsedLoadData(brokers, bundle_data, recent)


def parse_timestamps(doc: Any, path: str, *, bundles: bool) -> dict[str, int]:
    """A ``name -> epoch ms`` map (``recentlyUnloadedBundles`` / ``recentlyUnloadedBrokers``)."""
    out: dict[str, int] = {}
    for name, ts in as_object(doc, path).items():
        p = child(path, name)
        if bundles:
            parse_bundle_name(name, p)
        else:
            check_broker_id(name, p)
        out[name] = as_int(ts, p, minimum=0)
    return out


def build_load_data(parsed: ParsedLoadData, now_ms: int = 0) -> LoadData:
    """Columnar ``LoadData`` from parsed objects.

    Brokers are rows sorted by id; bundles are the sorted union of ``bundleData`` keys, every broker's
    ``lastStats`` keys and every ``preallocatedBundleData`` key. The owner of a bundle is the broker whose
    ``lastStats`` reports it (two reporters are rejected: the columnar model has one owner). A bundle
    without ``bundleData`` has ``has_bundle_data`` False and default stats (``getBundleDataOrDefault``),
    unless it is preallocated: ``preallocateBundle`` put the same ``BundleData`` object into both maps, so
    its preallocated data counts as its bundle data. ``timeAverageData`` is used where given and derived
    (``TimeAverageBrokerData.reset``) elsewhere.
    """
    broker_ids = sorted(parsed.brokers)
    row = {b: i for i, b in enumerate(broker_ids)}
    names: set[str] = set(parsed.bundleData)
    owner_of: dict[str, str] = {}
    for broker in broker_ids:
        for name in parsed.brokers[broker].localData.lastStats:
            if name in owner_of:
                raise InvalidInputError(
                    f'$.loadData.brokers{_key(broker)}.localData.lastStats{_key(name)}: bundle already reported '
                    f'by broker "{owner_of[name]}"; a bundle has one owner')
            owner_of[name] = broker
        names.update(parsed.brokers[broker].preallocatedBundleData)
    names.update(owner_of)
    bundle_names = sorted(names)

    brokers = Brokers.empty(broker_ids)
    for i, broker in enumerate(broker_ids):
        d = parsed.brokers[broker].localData
        for j, r in enumerate(RESOURCES):
            brokers.usage[i, j] = d.resources[r].usage
            brokers.limit[i, j] = d.resources[r].limit
        brokers.msg_rate_in[i] = d.msgRateIn
        brokers.msg_rate_out[i] = d.msgRateOut
        brokers.msg_throughput_in[i] = d.msgThroughputIn
        brokers.msg_throughput_out[i] = d.msgThroughputOut
        brokers.num_topics[i] = d.numTopics
        brokers.num_consumers[i] = d.numConsumers
        brokers.num_producers[i] = d.numProducers
        brokers.last_update[i] = d.lastUpdate
        brokers.broker_version[i] = d.brokerVersionString
        brokers.load_manager_class_name[i] = d.loadManagerClassName
        brokers.persistent_topics_enabled[i] = d.persistentTopicsEnabled
        brokers.non_persistent_topics_enabled[i] = d.nonPersistentTopicsEnabled

    bundles = Bundles.empty(bundle_names)
    for k, name in enumerate(bundle_names):
        owner = owner_of.get(name)
        if owner is not None:
            s = parsed.brokers[owner].localData.lastStats[name]
            bundles.owner[k] = row[owner]
            bundles.stats[k] = s.message_data()
            bundles.topics[k] = s.topics
            bundles.consumer_count[k] = s.consumerCount
            bundles.producer_count[k] = s.producerCount
            bundles.cache_size[k] = s.cacheSize
    prealloc: dict[str, tuple[str, BundleData]] = {}
    for broker in broker_ids:  # sorted: the last broker listing a bundle wins (one row per bundle)
        for name, bd in parsed.brokers[broker].preallocatedBundleData.items():
            prealloc[name] = (broker, bd)
    for name, (broker, bd) in prealloc.items():
        k = bundles.index(name)
        bundles.preallocated_to[k] = row[broker]
        if name not in parsed.bundleData:
            _set_bundle_data(bundles, k, bd)
    for name, bd in parsed.bundleData.items():
        _set_bundle_data(bundles, bundles.index(name), bd)

    ld = LoadData(brokers=brokers, bundles=bundles,
                  recently_unloaded_bundles=dict(parsed.recentlyUnloadedBundles), now_ms=int(now_ms))
    given = [b for b in broker_ids if parsed.brokers[b].timeAverageData is not None]
    if given:
        short, long = ld.time_average_broker_data()
        for b in given:
            t = parsed.brokers[b].timeAverageData
            assert t is not None
            short[row[b]] = t.short
            long[row[b]] = t.long
        set_time_average_override(ld, short, long)
    return ld


def set_time_average_override(ld: LoadData, short: np.ndarray, long: np.ndarray) -> None:
    """Use dumped ``TimeAverageBrokerData`` (``LoadData.tabd``) instead of the sums derived from bundle data."""
    ld.tabd = (short, long)


def _set_bundle_data(bundles: Bundles, k: int, bd: BundleData) -> None:
    bundles.has_bundle_data[k] = True
    bundles.short[k] = bd.shortTermData.values()
    bundles.short_samples[k] = bd.shortTermData.numSamples
    bundles.short_max[k] = bd.shortTermData.maxSamples
    bundles.long[k] = bd.longTermData.values()
    bundles.long_samples[k] = bd.longTermData.numSamples
    bundles.long_max[k] = bd.longTermData.maxSamples
    bundles.bundle_topics[k] = bd.topics


def _key(name: str) -> str:
    return child("", name)


def load_data_from_request(req: Mapping[str, Any]) -> LoadData:
    """The modular ``LoadData`` of a ``decide`` request (its ``loadData`` block and ``nowMillis``)."""
    now = req.get("nowMillis")
    now_ms = 0 if now is None else as_int(now, "$.nowMillis", minimum=0)
    return build_load_data(parse_load_data(req.get("loadData"), "$.loadData"), now_ms)


# ----------------------------------------------------------------------------------------------------------
# Columnar -> JSON (for dumps written by replay / generator, and for round-trip tests)
# ----------------------------------------------------------------------------------------------------------
def bundle_data_json(ld: LoadData, k: int) -> dict[str, Any]:
    """``BundleData`` of bundle row ``k``."""
    b = ld.bundles
    return BundleData(
        TimeAverageMessageData(int(b.short_max[k]), int(b.short_samples[k]), *map(float, b.short[k])),
        TimeAverageMessageData(int(b.long_max[k]), int(b.long_samples[k]), *map(float, b.long[k])),
        int(b.bundle_topics[k]),
    ).to_json()


def bundle_stats_json(ld: LoadData, k: int) -> dict[str, Any]:
    """``NamespaceBundleStats`` of bundle row ``k`` (its owner's ``lastStats`` entry)."""
    b = ld.bundles
    thr_in, thr_out, rate_in, rate_out = map(float, b.stats[k])
    return NamespaceBundleStats(rate_in, thr_in, rate_out, thr_out, int(b.consumer_count[k]),
                                int(b.producer_count[k]), int(b.topics[k]), int(b.cache_size[k])).to_json()


def local_broker_data_json(ld: LoadData, i: int, conf: PulsarConfig | None = None) -> dict[str, Any]:
    """``LocalBrokerData`` of broker row ``i`` rebuilt from the columns (URLs and extras are not kept there)."""
    br, b = ld.brokers, ld.bundles
    rows = np.flatnonzero(b.owner == i)
    stats = {b.names[k]: NamespaceBundleStats.from_json(bundle_stats_json(ld, int(k)), "$") for k in rows}
    d = LocalBrokerData(
        resources={r: ResourceUsage(float(br.usage[i, j]), float(br.limit[i, j])) for j, r in enumerate(RESOURCES)},
        lastStats=stats,
        msgThroughputIn=float(br.msg_throughput_in[i]), msgThroughputOut=float(br.msg_throughput_out[i]),
        msgRateIn=float(br.msg_rate_in[i]), msgRateOut=float(br.msg_rate_out[i]),
        numTopics=int(br.num_topics[i]), numBundles=len(rows), numConsumers=int(br.num_consumers[i]),
        numProducers=int(br.num_producers[i]), bundles=sorted(stats), lastUpdate=int(br.last_update[i]),
        persistentTopicsEnabled=bool(br.persistent_topics_enabled[i]),
        nonPersistentTopicsEnabled=bool(br.non_persistent_topics_enabled[i]),
        brokerVersionString=br.broker_version[i], loadManagerClassName=br.load_manager_class_name[i],
    )
    return d.to_json(conf)


def time_average_broker_data_json(ld: LoadData, i: int) -> dict[str, Any]:
    short, long = ld.broker_time_average()
    return TimeAverageBrokerData(list(map(float, short[i])), list(map(float, long[i]))).to_json()


# ----------------------------------------------------------------------------------------------------------
# Extensible load manager view
# ----------------------------------------------------------------------------------------------------------
@dataclass
class ExtensibleSnapshot:
    """The request's ``extensible`` block, validated (ExtensibleLoadManagerImpl's stores and channel view).

    ``availableBrokers`` defaults to the brokers with load data (the broker registry). ``bundleOwners`` is
    the service-unit state snapshot; ``None`` means no ownership check.
    """

    brokerLoadData: dict[str, BrokerLoadData]
    topBundlesLoadData: dict[str, TopBundlesLoadData]
    recentlyUnloadedBundles: dict[str, int]
    recentlyUnloadedBrokers: dict[str, int]
    availableBrokers: list[str]
    bundleOwners: dict[str, str] | None


def parse_extensible(doc: Any, path: str = "$.extensible") -> ExtensibleSnapshot:
    o = as_object(doc, path)
    check_keys(o, ("brokerLoadData", "topBundlesLoadData", "recentlyUnloadedBundles", "recentlyUnloadedBrokers",
                   "availableBrokers", "bundleOwners"), path)
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
    return ExtensibleSnapshot(load, top, recent_bundles, recent_brokers, available, owners)
