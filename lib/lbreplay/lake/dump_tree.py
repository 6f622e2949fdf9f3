"""Reading a tree of Pulsar load-balancer dumps: which files it holds, what each one is (detected by content), and
the broker ids, bundle names and snapshot times its reports and paths carry (see :mod:`lbreplay.lake.ingest`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lbreplay.errors import InvalidInputError
from lbreplay.kernel.json_readers import JsonObject

LOCAL_BROKER_DATA = "LocalBrokerData"
BUNDLE_DATA_KIND = "BundleData"
TIME_AVERAGE_BROKER_DATA = "TimeAverageBrokerData"
BROKER_LOAD_DATA = "BrokerLoadData"
TOP_BUNDLES_KIND = "TopBundlesLoadData"
KINDS = (LOCAL_BROKER_DATA, BUNDLE_DATA_KIND, TIME_AVERAGE_BROKER_DATA, BROKER_LOAD_DATA, TOP_BUNDLES_KIND)
#: The dump's other sources (files at fixed paths, not detected by content): ``collect``'s record of znode versions
#: (``lbreplay.collect.layout``: the leader's elections), the leader's log (its shedding runs), and the extensible
#: BrokerLoadData and TopBundlesLoadData tombstones ``collect`` records (``extensible/<kind>/<host_port>/<ms>.tombstone``).
METADATA_VERSIONS_KIND = "collect/metadata-versions.jsonl"
LEADER_LOG_KIND = "leader-decisions.log"
TOMBSTONE_KIND = "BrokerLoadData tombstone"
TOP_BUNDLES_TOMBSTONE_KIND = "TopBundlesLoadData tombstone"
#: ``collect``'s polls of ``/admin/v2/broker-stats/topics`` (``collect/admin/*.jsonl``, source "topics")
TOPIC_STATS_KIND = "collect/admin topics"
#: Every source a table can be ingested from (a table's ``dump_kinds``, :mod:`lbreplay.lake.registry`).
DUMP_SOURCES = (*KINDS, METADATA_VERSIONS_KIND, LEADER_LOG_KIND, TOMBSTONE_KIND, TOP_BUNDLES_TOMBSTONE_KIND,
                TOPIC_STATS_KIND)

#: TimeAverageBrokerData's fields: column -> JSON name.
TIME_AVERAGE_FIELDS = {
    "short_msg_throughput_in": "shortTermMsgThroughputIn",
    "short_msg_throughput_out": "shortTermMsgThroughputOut",
    "short_msg_rate_in": "shortTermMsgRateIn",
    "short_msg_rate_out": "shortTermMsgRateOut",
    "long_msg_throughput_in": "longTermMsgThroughputIn",
    "long_msg_throughput_out": "longTermMsgThroughputOut",
    "long_msg_rate_in": "longTermMsgRateIn",
    "long_msg_rate_out": "longTermMsgRateOut",
}
_RANGE_PART_RE = re.compile(r"0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}")
_BROKER_PART_RE = re.compile(r"([A-Za-z0-9][A-Za-z0-9.\-]*)[:_](\d{1,5})")
_ISO_RE = re.compile(
    r"(?<!\d)(\d{4})-?(\d{2})-?(\d{2})[T_\-](\d{2})[:\-]?(\d{2})[:\-]?(\d{2})(?:[.,](\d{1,9}))?Z?(?!\d)"
)
_MILLIS_RE = re.compile(r"(?<![0-9A-Za-z])(\d{13})(?!\d)")
_SECONDS_RE = re.compile(r"(?<![0-9A-Za-z])(\d{10})(?!\d)")


@dataclass(frozen=True)
class DumpSource:
    """Where a dump object came from."""

    file: str  # as shown in messages
    rel: Path  # relative to the source root
    root: Path
    key: str | None  # map key when the object came from a map file


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


def load_json(path: Path, shown: str) -> Any:
    """The parsed JSON of dump ``path`` (``shown`` in messages); unreadable or invalid JSON is an input error."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{shown}: cannot read: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{shown}: $: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc


def detect_kind(obj: Any) -> str | None:
    """The Pulsar type of a parsed JSON object (the table in :mod:`lbreplay.lake.ingest`), or None if not recognised."""
    if not isinstance(obj, dict):
        return None
    tag = obj.get("loadReportType")
    if tag == LOCAL_BROKER_DATA:
        return LOCAL_BROKER_DATA
    if "topBundlesLoadData" in obj:
        return TOP_BUNDLES_KIND
    if "shortTermData" in obj or "longTermData" in obj:
        return BUNDLE_DATA_KIND
    if any(k in obj for k in TIME_AVERAGE_FIELDS.values()):
        return TIME_AVERAGE_BROKER_DATA
    if "weightedMaxEMA" in obj or "updatedAt" in obj or "bundleCount" in obj:
        return BROKER_LOAD_DATA
    if tag is None and ("lastStats" in obj or "bundleStats" in obj):
        return LOCAL_BROKER_DATA
    return None


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
    """Snapshot time -> tick: epoch milliseconds as the exact UTC datetime, built from integers (no float rounding).

    Each report version is its own tick, at the time its broker wrote it (``LocalBrokerData.lastUpdate``,
    ``System.currentTimeMillis()``): the leader acts on versions, not on minutes."""
    return datetime.fromtimestamp(ms // 1000, tz=timezone.utc) + timedelta(milliseconds=ms % 1000)


def snapshot_tick(node: JsonObject, src: DumpSource, report_ms: int | None) -> tuple[datetime, int]:
    """The report's tick and time (epoch ms): its own time when positive, else a timestamp in its path."""
    ms = report_ms if report_ms is not None and report_ms > 0 else timestamp_from_path(src.rel, src.root)
    if ms is None:
        raise node.error(
            None,
            "no snapshot time: the report has no lastUpdate/updatedAt and the path has no timestamp "
            "(e.g. 20230802T120000Z or epoch millis)",
        )
    return tick_of(ms), ms


def broker_id(node: JsonObject, src: DumpSource, urls: bool) -> str:
    """``brokerId``, else the host:port of the web service URLs (``urls``), else the map key, else the path."""
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
