"""``lbreplay ingest``: load a directory of real Pulsar load-balancer dumps into the lake's input tables.

Accepted files (``*.json`` anywhere under ``--source``; other files are ignored), each detected by content:

==========================  ==========================================================  ========================
type                        recognised by                                               rows go to
==========================  ==========================================================  ========================
LocalBrokerData (modular)   ``loadReportType == "LocalBrokerData"``, or ``lastStats`` /  ``broker_load`` (+ its
                            ``bundleStats``                                             ``lastStats`` ->
                                                                                        ``bundle_load``)
BundleData                  ``shortTermData`` / ``longTermData``                        ``bundle_data``
TimeAverageBrokerData       ``shortTermMsgRateIn`` … ``longTermMsgThroughputOut``       ``broker_time_average``
BrokerLoadData (extensible) ``weightedMaxEMA`` / ``updatedAt`` / ``bundleCount``        ``broker_load_data_ext``
TopBundlesLoadData          ``topBundlesLoadData``                                      ``top_bundles_load_data``
==========================  ==========================================================  ========================

A file may also hold a JSON object mapping keys to objects of one of these types (e.g. a dump of every
``/loadbalance/brokers/<broker>`` child in one file, or DESIGN.md §5's ``{"broker-1:8080": {BrokerLoadData}}``);
the key is then the broker id (broker types) or the bundle name (BundleData). The SimpleLoadManager's
``LoadReport`` (``loadReportType == "LoadReport"``) is rejected.

**Broker id** (``host:port``, the key under ``/loadbalance/brokers``): the report's ``brokerId``, else the host:port
of ``webServiceUrl`` (then ``webServiceUrlTls``), else the map key, else the path: the file stem, then each parent
directory (innermost first) — the first part that reads ``host:port`` or ``host_port`` (``_`` stands for ``:`` so
names stay portable), also as the part before ``@`` or ``__`` in a name like ``broker-1_8080__1690977600000.json``.

**Bundle name** of a BundleData file: the map key, else the path ``…/<tenant>/<namespace>/<0x%08x_0x%08x>[.json]``
(the range is the file stem or a directory; the two components before it are tenant and namespace).

**Snapshot time**: the report's own time — ``lastUpdate`` (LocalBrokerData) or ``updatedAt`` (BrokerLoadData), in
epoch milliseconds, when positive — else a timestamp in the path (file stem first, then parent directories
innermost first, the source directory's own name last). Accepted path timestamps: ISO-8601 UTC in basic or
extended form with seconds (``20230802T120000Z``, ``2023-08-02T12:00:00Z``, ``2023-08-02T12-00-00Z``,
``20230802-120000``, ``2023-08-02_12-00-00``; optional fraction; a missing ``Z`` still means UTC), a 13-digit epoch
in milliseconds, or a 10-digit epoch in seconds. A file with no time at all is an error naming the file.

**Ticks**: the leader refreshes its view about once a minute, so ``ts`` is the snapshot time truncated to the
minute (UTC); the exact time stays in ``last_update`` / ``updated_at``. All reports of one minute form one tick;
two reports of the same broker in one minute are a duplicate ``(cluster, ts, broker)`` that ``lbreplay validate``
rejects — dump one report per broker per tick.

Ingest is strict about structure (bad JSON, a missing required field, a value of the wrong type ->
:class:`~lbreplay.errors.InvalidInputError` naming the file and the JSON path) and faithful about content:
negative or non-finite numbers, malformed bundle names and overlapping ranges are loaded as they are and left to
``lbreplay validate``. Numbers Jackson writes as strings (``"NaN"``, ``"Infinity"``) are read as floats. Fields
Pulsar's objects default (NamespaceBundleStats counters, LocalBrokerData totals) take Pulsar's default when absent:
0 for counters, and for LocalBrokerData totals the sums over ``lastStats`` (``LocalBrokerData.updateBundleData``).

Every table ingest writes is replaced for the cluster as a whole (``replace_partitions`` where
``cluster = …``), including tables the dump has no rows for; ``topic_load`` and ``namespace_policy`` are not
touched. With ``--since`` / ``--until`` (a half-open UTC window ``[since, until)``, see
:mod:`lbreplay.lake.window`) only snapshots whose tick falls in the window are loaded, and only the cluster's
rows in the window are replaced (``replaceWhere`` on cluster, the ``date`` partitions and the ``ts`` range; one
commit per table), so ingesting day D keeps day D-1. A window no snapshot falls in is a usage error and leaves
the lake untouched.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import urlsplit

from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.kernel.naming import bundle_bounds, split_bundle_name
from lbreplay.lake.dump_tables import (
    BROKER_LOAD_DATA_EXT,
    BROKER_TIME_AVERAGE,
    BUNDLE_DATA,
    TOP_BUNDLES_LOAD_DATA,
)
from lbreplay.lake.tables import BROKER_LOAD, BUNDLE_LOAD, RESOURCES, Table
from lbreplay.lake.window import TimeWindow, window_from_flags

LOCAL_BROKER_DATA = "LocalBrokerData"
BUNDLE_DATA_KIND = "BundleData"
TIME_AVERAGE_BROKER_DATA = "TimeAverageBrokerData"
BROKER_LOAD_DATA = "BrokerLoadData"
TOP_BUNDLES_KIND = "TopBundlesLoadData"
KINDS = (LOCAL_BROKER_DATA, BUNDLE_DATA_KIND, TIME_AVERAGE_BROKER_DATA, BROKER_LOAD_DATA, TOP_BUNDLES_KIND)

#: JSON names of the five resources (LocalBrokerData / BrokerLoadData) in lbreplay's column order.
RESOURCE_JSON = dict(zip(RESOURCES, ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")))
_TABD_FIELDS = {
    "short_msg_throughput_in": "shortTermMsgThroughputIn",
    "short_msg_throughput_out": "shortTermMsgThroughputOut",
    "short_msg_rate_in": "shortTermMsgRateIn",
    "short_msg_rate_out": "shortTermMsgRateOut",
    "long_msg_throughput_in": "longTermMsgThroughputIn",
    "long_msg_throughput_out": "longTermMsgThroughputOut",
    "long_msg_rate_in": "longTermMsgRateIn",
    "long_msg_rate_out": "longTermMsgRateOut",
}
_RATES = {
    "msg_rate_in": "msgRateIn",
    "msg_rate_out": "msgRateOut",
    "msg_throughput_in": "msgThroughputIn",
    "msg_throughput_out": "msgThroughputOut",
}
_BUNDLE_RE = re.compile(r"(?P<ns>.+)/(?P<range>0x[0-9a-fA-F]{1,8}_0x[0-9a-fA-F]{1,8})")
_RANGE_PART_RE = re.compile(r"0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}")
_BROKER_PART_RE = re.compile(r"([A-Za-z0-9][A-Za-z0-9.\-]*)[:_](\d{1,5})")
_ISO_RE = re.compile(
    r"(?<!\d)(\d{4})-?(\d{2})-?(\d{2})[T_\-](\d{2})[:\-]?(\d{2})[:\-]?(\d{2})(?:[.,](\d{1,9}))?Z?(?!\d)"
)
_MILLIS_RE = re.compile(r"(?<![0-9A-Za-z])(\d{13})(?!\d)")
_SECONDS_RE = re.compile(r"(?<![0-9A-Za-z])(\d{10})(?!\d)")
_CLUSTER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]*")
_NON_NUMERIC = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf, "-Infinity": -math.inf}

#: Tables ``ingest`` writes (replaced per cluster), in write order.
INGEST_TABLES: tuple[Table, ...] = (
    BROKER_LOAD,
    BUNDLE_LOAD,
    BUNDLE_DATA,
    BROKER_TIME_AVERAGE,
    BROKER_LOAD_DATA_EXT,
    TOP_BUNDLES_LOAD_DATA,
)


# ----------------------------------------------------------------------------------------------------------------
# JSON access with file + JSON-path error messages


def _jp(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{parent}.{key}"
    return f"{parent}[{json.dumps(key)}]"


class _Node:
    """A JSON object plus where it came from, with typed getters that raise InvalidInputError."""

    def __init__(self, value: dict[str, Any], file: str, path: str) -> None:
        self.value = value
        self.file = file
        self.path = path

    def error(self, key: str | int | None, message: str) -> InvalidInputError:
        where = self.path if key is None else _jp(self.path, key)
        return InvalidInputError(f"{self.file}: {where}: {message}")

    def has(self, key: str) -> bool:
        return self.value.get(key) is not None

    def obj(self, key: str, required: bool = True) -> "_Node | None":
        v = self.value.get(key)
        if v is None:
            if required:
                raise self.error(key, "required object is missing")
            return None
        if not isinstance(v, dict):
            raise self.error(key, f"expected an object, got {type(v).__name__}")
        return _Node(v, self.file, _jp(self.path, key))

    def items(self) -> Iterable[tuple[str, "_Node"]]:
        for k in sorted(self.value):
            v = self.value[k]
            if not isinstance(v, dict):
                raise self.error(k, f"expected an object, got {type(v).__name__}")
            yield k, _Node(v, self.file, _jp(self.path, k))

    def num(self, key: str, required: bool = True, default: float | None = None) -> float | None:
        v = self.value.get(key)
        if v is None:
            if required:
                raise self.error(key, "required number is missing")
            return default
        if isinstance(v, str) and v in _NON_NUMERIC:
            return _NON_NUMERIC[v]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.error(key, f"expected a number, got {json.dumps(v)[:40]}")
        return float(v)

    def int_(self, key: str, required: bool = True, default: int | None = None) -> int | None:
        v = self.value.get(key)
        if v is None:
            if required:
                raise self.error(key, "required integer is missing")
            return default
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(key, f"expected an integer, got {json.dumps(v)[:40]}")
        return v

    def str_(self, key: str, required: bool = True) -> str | None:
        v = self.value.get(key)
        if v is None:
            if required:
                raise self.error(key, "required string is missing")
            return None
        if not isinstance(v, str):
            raise self.error(key, f"expected a string, got {json.dumps(v)[:40]}")
        return v

    def bool_(self, key: str, default: bool | None = None) -> bool | None:
        v = self.value.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self.error(key, f"expected true/false, got {json.dumps(v)[:40]}")
        return v


# ----------------------------------------------------------------------------------------------------------------
# type detection, names and times


def detect_kind(obj: Any) -> str | None:
    """The Pulsar type of a parsed JSON object (see the module docstring), or None if not recognised."""
    if not isinstance(obj, dict):
        return None
    tag = obj.get("loadReportType")
    if tag == LOCAL_BROKER_DATA:
        return LOCAL_BROKER_DATA
    if "topBundlesLoadData" in obj:
        return TOP_BUNDLES_KIND
    if "shortTermData" in obj or "longTermData" in obj:
        return BUNDLE_DATA_KIND
    if any(k in obj for k in _TABD_FIELDS.values()):
        return TIME_AVERAGE_BROKER_DATA
    if "weightedMaxEMA" in obj or "updatedAt" in obj or "bundleCount" in obj:
        return BROKER_LOAD_DATA
    if tag is None and ("lastStats" in obj or "bundleStats" in obj):
        return LOCAL_BROKER_DATA
    return None


def split_bundle(name: str) -> tuple[str | None, int | None, int | None]:
    """``tenant/ns/0xLLLLLLLL_0xUUUUUUUU`` -> (namespace, lower, upper); range None when malformed
    (``LoadManagerShared.getNamespaceNameFromBundleName`` / ``getBundleRangeFromBundleName``)."""
    if not _BUNDLE_RE.fullmatch(name):
        ns = split_bundle_name(name)[0]
        return (ns or None), None, None
    ns, lower, upper = bundle_bounds(name)
    return ns, lower, upper


def broker_from_url(url: str | None) -> str | None:
    """``http://broker-1:8080`` -> ``broker-1:8080`` (the broker id Pulsar derives from its web service URL)."""
    if not url:
        return None
    netloc = urlsplit(url if "://" in url else f"http://{url}").netloc
    return netloc or None


def _path_candidates(rel: Path, root: Path) -> list[str]:
    """File stem, then parent directory names innermost first, then the source directory's own name."""
    names = [rel.stem, *reversed(rel.parent.parts)]
    if root.name:
        names.append(root.name)
    return names


def broker_from_path(rel: Path, root: Path) -> str | None:
    """First path part reading ``host:port`` / ``host_port`` (also before ``@`` / ``__``), innermost first."""
    for name in _path_candidates(rel, root):
        for part in (name, *re.split(r"@|__", name)):
            m = _BROKER_PART_RE.fullmatch(part)
            if m:
                return f"{m.group(1)}:{m.group(2)}"
    return None


def _host_port(part: str) -> str | None:
    m = _BROKER_PART_RE.fullmatch(part)
    return f"{m.group(1)}:{m.group(2)}" if m else None


def bundle_from_path(rel: Path) -> str | None:
    """``…/<tenant>/<namespace>/<0x%08x_0x%08x>[.json]`` -> ``tenant/namespace/0x…_0x…``.

    Brokers' heartbeat namespaces keep their own shape (``NamespaceService.getHeartbeatNamespace`` /
    ``getHeartbeatNamespaceV2``): ``…/pulsar/<cluster>/<host_port>/<range>`` -> ``pulsar/<cluster>/<host:port>/…``
    and ``…/pulsar/<host_port>/<range>`` -> ``pulsar/<host:port>/…`` (``_`` stands for ``:`` in the path)."""
    parts = [*rel.parent.parts, rel.stem]
    for i in range(len(parts) - 1, 1, -1):
        if _RANGE_PART_RE.fullmatch(parts[i]):
            broker = _host_port(parts[i - 1])
            if broker and i >= 3 and parts[i - 3] == "pulsar":
                return f"pulsar/{parts[i - 2]}/{broker}/{parts[i]}"
            if broker and parts[i - 2] == "pulsar":
                return f"pulsar/{broker}/{parts[i]}"
            return f"{parts[i - 2]}/{parts[i - 1]}/{parts[i]}"
    return None


def timestamp_from_name(name: str) -> int | None:
    """Epoch milliseconds of the first accepted timestamp pattern in ``name`` (see the module docstring)."""
    for m in _ISO_RE.finditer(name):
        y, mo, d, h, mi, s, frac = m.groups()
        try:
            dt = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=timezone.utc)
        except ValueError:
            continue
        ms = int((frac or "0").ljust(3, "0")[:3])
        return int(dt.timestamp()) * 1000 + ms
    millis = _MILLIS_RE.search(name)
    if millis:
        return int(millis.group(1))
    seconds = _SECONDS_RE.search(name)
    if seconds:
        return int(seconds.group(1)) * 1000
    return None


def timestamp_from_path(rel: Path, root: Path) -> int | None:
    for name in _path_candidates(rel, root):
        ms = timestamp_from_name(name)
        if ms is not None:
            return ms
    return None


def tick_of(ms: int) -> datetime:
    """Snapshot time -> tick: epoch milliseconds truncated to the minute, as a UTC datetime."""
    return datetime.fromtimestamp((ms // 60_000) * 60, tz=timezone.utc)


def _utc(ms: int | None) -> datetime | None:
    if ms is None or ms <= 0:
        return None
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


# ----------------------------------------------------------------------------------------------------------------
# parsing: files -> row dicts (pure Python, no Spark)


@dataclass
class DumpRows:
    """Row dicts per table name, plus how many reports of each kind were read."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {t.name: [] for t in INGEST_TABLES})
    reports: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    files: int = 0
    outside: int = 0  # rows dropped by a time window

    @property
    def ticks(self) -> int:
        return len({r["ts"] for rows in self.rows.values() for r in rows})


@dataclass(frozen=True)
class _Source:
    file: str  # as shown in messages
    rel: Path  # relative to the source root
    root: Path
    key: str | None  # map key when the object came from a map file


def _snapshot(node: _Node, src: _Source, report_ms: int | None) -> tuple[datetime, int]:
    ms = report_ms if report_ms is not None and report_ms > 0 else timestamp_from_path(src.rel, src.root)
    if ms is None:
        raise node.error(
            None,
            "no snapshot time: the report has no lastUpdate/updatedAt and the path has no timestamp "
            "(e.g. 20230802T120000Z or epoch millis)",
        )
    return tick_of(ms), ms


def _broker(node: _Node, src: _Source, urls: bool) -> str:
    broker = node.str_("brokerId", required=False)
    if not broker and urls:
        broker = broker_from_url(node.str_("webServiceUrl", required=False)) or broker_from_url(
            node.str_("webServiceUrlTls", required=False)
        )
    if not broker and src.key:
        broker = broker_from_url(src.key) if "://" in src.key else src.key
    broker = broker or broker_from_path(src.rel, src.root)
    if not broker:
        raise node.error(
            None, "no broker id: no brokerId/webServiceUrl in the report and no host_port (or host:port) in the path"
        )
    return broker


def _resources(node: _Node) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for res, key in RESOURCE_JSON.items():
        r = node.obj(key)
        assert r is not None
        out[f"{res}_usage"] = r.num("usage")
        out[f"{res}_limit"] = r.num("limit")
    return out


def _bundle_stats(st: _Node) -> dict[str, Any]:
    """NamespaceBundleStats -> column values (absent counters are 0, as a new NamespaceBundleStats)."""
    return {
        **{col: st.num(key, required=False, default=0.0) for col, key in _RATES.items()},
        "topics": st.int_("topics", required=False, default=0),
        "consumer_count": st.int_("consumerCount", required=False, default=0),
        "producer_count": st.int_("producerCount", required=False, default=0),
        "cache_size": st.int_("cacheSize", required=False, default=0),
    }


def _bundle_cols(name: str) -> dict[str, Any]:
    ns, lower, upper = split_bundle(name)
    return {"bundle": name, "namespace": ns, "range_lower": lower, "range_upper": upper}


def _local_broker_data(node: _Node, src: _Source, cluster: str, out: DumpRows) -> None:
    """LocalBrokerData -> one broker_load row + one bundle_load row per ``lastStats`` entry."""
    broker = _broker(node, src, urls=True)
    last_update = node.int_("lastUpdate", required=False)
    ts, _ = _snapshot(node, src, last_update)
    stats = node.obj("lastStats", required=False) or node.obj("bundleStats", required=False)
    if stats is None:
        raise node.error("lastStats", "required object is missing")
    bundle_rows = []
    for name, st in stats.items():
        bundle_rows.append({"cluster": cluster, "ts": ts, "broker": broker, **_bundle_cols(name), **_bundle_stats(st)})

    def total(col: str) -> Any:
        return sum(r[col] for r in bundle_rows)

    row: dict[str, Any] = {"cluster": cluster, "ts": ts, "broker": broker, **_resources(node)}
    for col, key in _RATES.items():
        row[col] = node.num(key, required=False, default=float(total(col)))
    row["num_topics"] = node.int_("numTopics", required=False, default=total("topics"))
    row["num_bundles"] = node.int_("numBundles", required=False, default=len(bundle_rows))
    row["num_consumers"] = node.int_("numConsumers", required=False, default=total("consumer_count"))
    row["num_producers"] = node.int_("numProducers", required=False, default=total("producer_count"))
    row["broker_version"] = node.str_("brokerVersionString", required=False)
    row["load_manager_class_name"] = node.str_("loadManagerClassName", required=False)
    # LocalBrokerData initialises both flags to true; Jackson keeps that when the key is absent.
    row["persistent_topics_enabled"] = node.bool_("persistentTopicsEnabled", default=True)
    row["non_persistent_topics_enabled"] = node.bool_("nonPersistentTopicsEnabled", default=True)
    row["last_update"] = _utc(last_update)
    out.rows[BROKER_LOAD.name].append(row)
    out.rows[BUNDLE_LOAD.name].extend(bundle_rows)


def _tamd(node: _Node, key: str, prefix: str) -> dict[str, Any]:
    t = node.obj(key)
    assert t is not None
    return {
        f"{prefix}_max_samples": t.int_("maxSamples"),
        f"{prefix}_num_samples": t.int_("numSamples"),
        **{f"{prefix}_{col}": t.num(k) for col, k in _RATES.items()},
    }


def _bundle_data(node: _Node, src: _Source, cluster: str, out: DumpRows) -> None:
    """BundleData (``/loadbalance/bundle-data/<bundle>``) -> one bundle_data row."""
    name = src.key or bundle_from_path(src.rel)
    if not name:
        raise node.error(None, "no bundle name: expected …/<tenant>/<namespace>/<0x%08x_0x%08x>.json or a map key")
    ts, _ = _snapshot(node, src, None)
    out.rows[BUNDLE_DATA.name].append(
        {
            "cluster": cluster,
            "ts": ts,
            **_bundle_cols(name),
            "topics": node.int_("topics", required=False, default=0),
            **_tamd(node, "shortTermData", "short"),
            **_tamd(node, "longTermData", "long"),
        }
    )


def _time_average_broker_data(node: _Node, src: _Source, cluster: str, out: DumpRows) -> None:
    """TimeAverageBrokerData (``/loadbalance/broker-time-average/<broker>``) -> one broker_time_average row."""
    broker = _broker(node, src, urls=False)
    ts, _ = _snapshot(node, src, None)
    row: dict[str, Any] = {"cluster": cluster, "ts": ts, "broker": broker}
    row.update({col: node.num(key) for col, key in _TABD_FIELDS.items()})
    out.rows[BROKER_TIME_AVERAGE.name].append(row)


def _broker_load_data(node: _Node, src: _Source, cluster: str, out: DumpRows) -> None:
    """Extensible BrokerLoadData -> one broker_load_data_ext row."""
    broker = _broker(node, src, urls=False)
    updated_at = node.int_("updatedAt", required=False)
    ts, _ = _snapshot(node, src, updated_at)
    row: dict[str, Any] = {"cluster": cluster, "ts": ts, "broker": broker, **_resources(node)}
    row.update({col: node.num(key) for col, key in _RATES.items()})
    row["bundle_count"] = node.int_("bundleCount")
    row["topics"] = node.int_("topics", required=False)
    row["max_resource_usage"] = node.num("maxResourceUsage", required=False)
    row["weighted_max_ema"] = node.num("weightedMaxEMA", required=False)
    row["msg_throughput_ema"] = node.num("msgThroughputEMA", required=False)
    row["updated_at"] = _utc(updated_at)
    row["reported_at"] = _utc(node.int_("reportedAt", required=False))
    out.rows[BROKER_LOAD_DATA_EXT.name].append(row)


def _top_bundles(node: _Node, src: _Source, cluster: str, out: DumpRows) -> None:
    """TopBundlesLoadData -> one top_bundles_load_data row per listed bundle (list order kept as ``position``)."""
    broker = _broker(node, src, urls=False)
    ts, _ = _snapshot(node, src, None)
    items = node.value.get("topBundlesLoadData")
    if not isinstance(items, list):
        raise node.error("topBundlesLoadData", "expected a list")
    base = _jp(node.path, "topBundlesLoadData")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidInputError(f"{src.file}: {_jp(base, i)}: expected an object")
        entry = _Node(item, src.file, _jp(base, i))
        name = entry.str_("bundleName")
        assert name is not None
        stats = entry.obj("stats")
        assert stats is not None
        out.rows[TOP_BUNDLES_LOAD_DATA.name].append(
            {
                "cluster": cluster,
                "ts": ts,
                "broker": broker,
                "position": i,
                **_bundle_cols(name),
                **_bundle_stats(stats),
            }
        )


_PARSERS = {
    LOCAL_BROKER_DATA: _local_broker_data,
    BUNDLE_DATA_KIND: _bundle_data,
    TIME_AVERAGE_BROKER_DATA: _time_average_broker_data,
    BROKER_LOAD_DATA: _broker_load_data,
    TOP_BUNDLES_KIND: _top_bundles,
}


def _load_json(path: Path, shown: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{shown}: cannot read: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{shown}: $: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc


def parse_file(path: Path, root: Path, cluster: str, out: DumpRows) -> None:
    """Parse one dump file into ``out`` (single object or a map of objects of one type)."""
    shown = str(path)
    rel = path.relative_to(root)
    doc = _load_json(path, shown)
    tag = doc.get("loadReportType") if isinstance(doc, dict) else None
    if isinstance(tag, str) and tag != LOCAL_BROKER_DATA:
        raise InvalidInputError(
            f"{shown}: $.loadReportType: unsupported load report type {tag!r} "
            "(only the modular LocalBrokerData and the extensible load manager's data are supported)"
        )
    kind = detect_kind(doc)
    if kind is not None:
        _PARSERS[kind](_Node(doc, shown, "$"), _Source(shown, rel, root, None), cluster, out)
        out.reports[kind] += 1
        return
    if isinstance(doc, dict) and doc and all(isinstance(v, dict) for v in doc.values()):
        kinds = {k: detect_kind(v) for k, v in doc.items()}
        found = set(kinds.values())
        if len(found) == 1 and None not in found:
            (kind,) = found
            assert kind is not None
            for key in sorted(doc):
                node = _Node(doc[key], shown, _jp("$", key))
                _PARSERS[kind](node, _Source(shown, rel, root, key), cluster, out)
                out.reports[kind] += 1
            return
        bad = next((k for k in sorted(doc) if kinds[k] is None), None)
        if bad is not None and len(found) > 1:
            raise InvalidInputError(f"{shown}: {_jp('$', bad)}: not a recognised Pulsar load object")
        if len(found) > 1:
            raise InvalidInputError(f"{shown}: $: a map mixing {sorted(k for k in found if k)}; use one file per type")
    raise InvalidInputError(
        f"{shown}: $: not a recognised Pulsar load dump (expected LocalBrokerData, BundleData, TimeAverageBrokerData, "
        "BrokerLoadData or TopBundlesLoadData, or an object mapping names to one of them)"
    )


def dump_files(source: Path) -> list[Path]:
    """``*.json`` files under ``source`` (recursive, sorted; hidden files and directories skipped)."""
    files = []
    for p in sorted(source.rglob("*")):
        rel = p.relative_to(source)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if p.is_file() and p.suffix.lower() == ".json":
            files.append(p)
    return files


def read_dumps(source: str | Path, cluster: str) -> DumpRows:
    """Parse every dump under ``source`` into row dicts (no Spark). Raises UsageError / InvalidInputError."""
    check_cluster(cluster)
    root = Path(source)
    if not root.is_dir():
        raise UsageError(f"--source {source}: not a directory")
    files = dump_files(root)
    if not files:
        raise InvalidInputError(f"{source}: no *.json dump files found")
    out = DumpRows()
    first: dict[str, Path] = {}  # load manager family -> first file of it
    for f in files:
        before = dict(out.reports)
        parse_file(f, root, cluster, out)
        out.files += 1
        for kind, n in out.reports.items():
            if n > before.get(kind, 0):
                first.setdefault(EXTENSIBLE_FAMILY if kind in EXTENSIBLE_KINDS else MODULAR_FAMILY, f)
    if len(first) > 1:
        raise InvalidInputError(
            f"{source}: mixes the modular load manager's reports ({first[MODULAR_FAMILY]}) and the extensible one's "
            f"({first[EXTENSIBLE_FAMILY]}); a cluster runs one load manager: ingest each tree as its own --cluster")
    return out


MODULAR_FAMILY, EXTENSIBLE_FAMILY = "modular", "extensible"
EXTENSIBLE_KINDS = frozenset({"BrokerLoadData", "TopBundlesLoadData"})


def in_window(dump: DumpRows, window: TimeWindow, source: str | Path) -> DumpRows:
    """The rows of ``dump`` whose tick (``ts``) is in ``window``; a UsageError naming the flags when none is."""
    rows = {name: [r for r in table_rows if window.contains(r["ts"])] for name, table_rows in dump.rows.items()}
    kept = sum(map(len, rows.values()))
    if not kept:
        raise UsageError(f"{window.flag_text()}: no snapshot under {source} falls in {window.describe()}")
    total = sum(map(len, dump.rows.values()))
    return DumpRows(rows=rows, reports=dump.reports, files=dump.files, outside=total - kept)


def check_cluster(cluster: str) -> str:
    """Cluster names are plain identifiers (letters, digits, ``.``, ``_``, ``-``): they go into SQL predicates."""
    if not cluster or not _CLUSTER_RE.fullmatch(cluster):
        raise UsageError(f"--cluster {cluster!r}: use letters, digits, '.', '_' or '-'")
    return cluster


# ----------------------------------------------------------------------------------------------------------------
# Spark side


def rows_frame(spark: Any, table: Table, rows: list[dict[str, Any]]) -> Any:
    """A DataFrame of ``rows`` with ``table``'s columns (except the derived ``date``), typed as the table."""
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    cols = [c for c in table.columns if c.name != "date"]
    schema = StructType([StructField(c.name, _parse_datatype_string(c.type), True) for c in cols])
    return spark.createDataFrame([tuple(r.get(c.name) for c in cols) for r in rows], schema)


def ingest(spark: Any, lake: str, source: str | Path, cluster: str, window: TimeWindow | None = None) -> DumpRows:
    """Read the dumps under ``source`` and replace ``cluster``'s rows in every ingest table (one commit each);
    with ``window``, only the snapshots and the rows in it."""
    from lbreplay.lake.tables import ensure_table, replace_partitions, table_location

    dump = read_dumps(source, cluster)
    where = f"cluster = '{cluster}'"
    if window is not None:
        dump = in_window(dump, window, source)
        where = f"{where} AND {window.predicate()}"
    for table in INGEST_TABLES:
        rows = dump.rows[table.name]
        if not rows:  # only clear old rows (no empty commit, so other clusters' validations stay on the fast path)
            ensure_table(spark, lake, table)
            if not spark.read.format("delta").load(table_location(lake, table.name)).where(where).limit(1).count():
                continue
        if any(c.name == "ts" for c in table.columns):  # time-ordered files: the replay task streams them in order
            rows = sorted(rows, key=lambda r: r["ts"])  # stable: a snapshot keeps its rows' order
        replace_partitions(spark, lake, table, rows_frame(spark, table, rows), where)
    return dump


def ingest_command(source: str | Path, cluster: str, lake: str, master: str | None = None,
                   since: str | None = None, until: str | None = None) -> None:
    """CLI ``lbreplay ingest --source DIR --cluster NAME [--since TS] [--until TS]``: ingest, print what was loaded."""
    check_cluster(cluster)
    window = window_from_flags(since, until, ("--since", "--until"))
    from lbreplay.spark import get_spark, lake_path

    lake_abs = lake_path(lake)
    spark = get_spark(lake_abs, master=master)
    dump = ingest(spark, lake_abs, source, cluster, window)
    kinds = ", ".join(f"{k}={n}" for k, n in dump.reports.items() if n)
    tables = ", ".join(f"{t.name}={len(dump.rows[t.name])}" for t in INGEST_TABLES)
    span = f" in {window.describe()} ({dump.outside} rows outside skipped)" if window else ""
    print(f"ingested {dump.files} files ({kinds}) from {source} into cluster {cluster}: {dump.ticks} ticks{span}")
    print(f"rows: {tables}")
    print(f"lake: {lake_abs}  (next: lbreplay validate --cluster {cluster})")
