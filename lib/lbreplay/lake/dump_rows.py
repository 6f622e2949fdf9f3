"""Shaping dump objects into table rows: one parser per Pulsar type (LocalBrokerData, BundleData,
TimeAverageBrokerData, BrokerLoadData, TopBundlesLoadData), each reading the object through
:class:`~lbreplay.kernel.json_readers.JsonObject` (errors name the file and the JSON path) into row dicts of
the tables ``ingest`` writes; Pulsar's defaults fill absent counters and totals."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from lbreplay.collect.leader_log import placements, shedding_runs, shedding_views
from lbreplay.errors import InvalidInputError
from lbreplay.kernel.json_readers import JsonObject, child
from lbreplay.kernel.leader_election import MINUTE_MS, run_read_times
from lbreplay.kernel.naming import bundle_bounds, split_bundle_name
from lbreplay.kernel.resource_usage import printed_resource_usage
from lbreplay.lake.dump_tables import (
    BROKER_DEPARTURE,
    BROKER_LOAD_DATA_EXT,
    BROKER_TIME_AVERAGE,
    BUNDLE_DATA,
    LEADER_ELECTION,
    LEADER_PLACEMENT,
    SHEDDING_RUN,
    TOP_BUNDLES_LOAD_DATA,
    TOP_BUNDLES_PUBLICATION,
)
from lbreplay.lake.dump_tree import (
    BROKER_LOAD_DATA,
    BUNDLE_DATA_KIND,
    KINDS,
    LEADER_LOG_KIND,
    LOCAL_BROKER_DATA,
    METADATA_VERSIONS_KIND,
    TIME_AVERAGE_BROKER_DATA,
    TIME_AVERAGE_FIELDS,
    TOP_BUNDLES_KIND,
    DumpSource,
    broker_from_path,
    broker_id,
    bundle_from_path,
    detect_kind,
    load_json,
    snapshot_tick,
    tick_of,
)
from lbreplay.lake.registry import INGESTED
from lbreplay.lake.tables import BROKER_LOAD, BUNDLE_LOAD, RESOURCES, TOPIC_LOAD, Table

#: JSON names of the five resources (LocalBrokerData / BrokerLoadData) in lbreplay's column order.
RESOURCE_JSON = dict(zip(RESOURCES, ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")))
_RATES = {
    "msg_rate_in": "msgRateIn",
    "msg_rate_out": "msgRateOut",
    "msg_throughput_in": "msgThroughputIn",
    "msg_throughput_out": "msgThroughputOut",
}
_BUNDLE_RE = re.compile(r"(?P<ns>.+)/(?P<range>0x[0-9a-fA-F]{1,8}_0x[0-9a-fA-F]{1,8})")

#: Tables ``ingest`` writes (replaced per cluster), in write order: the registry's ingested tables.
INGEST_TABLES: tuple[Table, ...] = INGESTED
#: ``collect``'s record of znode versions (``lbreplay.collect.layout``) and the leader's znode in it.
METADATA_VERSIONS = Path(METADATA_VERSIONS_KIND)
LEADER_PATH = "/loadbalance/leader"
EXTENSION_LEADER_PATH = "/loadbalance/extension/leader"  # ExtensibleLoadManagerImpl's LeaderElectionService
#: the leader's log lines, when the dump carries them (``collect/layout``): when its timed tasks really ran
LEADER_LOG = Path(LEADER_LOG_KIND)


def split_bundle(name: str) -> tuple[str | None, int | None, int | None]:
    """``tenant/ns/0xLLLLLLLL_0xUUUUUUUU`` -> (namespace, lower, upper); range None when malformed
    (``LoadManagerShared.getNamespaceNameFromBundleName`` / ``getBundleRangeFromBundleName``)."""
    if not _BUNDLE_RE.fullmatch(name):
        ns = split_bundle_name(name)[0]
        return (ns or None), None, None
    ns, lower, upper = bundle_bounds(name)
    return ns, lower, upper


def _utc(ms: int | None) -> datetime | None:
    if ms is None or ms <= 0:
        return None
    return tick_of(ms)


@dataclass
class DumpRows:
    """Row dicts per table name, plus how many reports of each kind were read."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {t.name: [] for t in INGEST_TABLES})
    reports: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    files: int = 0
    outside: int = 0  # rows dropped by a time window

    @property
    def ticks(self) -> int:
        """Distinct snapshot times (the leader's logged runs and placements are not snapshots)."""
        logged = (SHEDDING_RUN.name, LEADER_PLACEMENT.name)
        return len({r["ts"] for name, rows in self.rows.items() if name not in logged for r in rows})


def _resources(node: JsonObject) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for res, key in RESOURCE_JSON.items():
        r = node.obj(key)
        assert r is not None
        out[f"{res}_usage"] = r.num("usage")
        out[f"{res}_limit"] = r.num("limit")
    return out


def _bundle_stats(st: JsonObject) -> dict[str, Any]:
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


def _local_broker_data(node: JsonObject, src: DumpSource, cluster: str, out: DumpRows) -> None:
    """LocalBrokerData -> one broker_load row + one bundle_load row per ``lastStats`` entry."""
    broker = broker_id(node, src, urls=True)
    last_update = node.int_("lastUpdate", required=False)
    ts, _ = snapshot_tick(node, src, last_update)
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


def _tamd(node: JsonObject, key: str, prefix: str) -> dict[str, Any]:
    t = node.obj(key)
    assert t is not None
    return {
        f"{prefix}_max_samples": t.int_("maxSamples"),
        f"{prefix}_num_samples": t.int_("numSamples"),
        **{f"{prefix}_{col}": t.num(k) for col, k in _RATES.items()},
    }


def _bundle_data(node: JsonObject, src: DumpSource, cluster: str, out: DumpRows) -> None:
    """BundleData (``/loadbalance/bundle-data/<bundle>``) -> one bundle_data row."""
    name = src.key or bundle_from_path(src.rel)
    if not name:
        raise node.error(None, "no bundle name: expected …/<tenant>/<namespace>/<0x%08x_0x%08x>.json or a map key")
    ts, _ = snapshot_tick(node, src, None)
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


def _time_average_broker_data(node: JsonObject, src: DumpSource, cluster: str, out: DumpRows) -> None:
    """TimeAverageBrokerData (``/loadbalance/broker-time-average/<broker>``) -> one broker_time_average row."""
    broker = broker_id(node, src, urls=False)
    ts, _ = snapshot_tick(node, src, None)
    row: dict[str, Any] = {"cluster": cluster, "ts": ts, "broker": broker}
    row.update({col: node.num(key) for col, key in TIME_AVERAGE_FIELDS.items()})
    out.rows[BROKER_TIME_AVERAGE.name].append(row)


def _broker_load_data(node: JsonObject, src: DumpSource, cluster: str, out: DumpRows) -> None:
    """Extensible BrokerLoadData -> one broker_load_data_ext row."""
    broker = broker_id(node, src, urls=False)
    updated_at = node.int_("updatedAt", required=False)
    ts, _ = snapshot_tick(node, src, updated_at)
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


def _top_bundles(node: JsonObject, src: DumpSource, cluster: str, out: DumpRows) -> None:
    """TopBundlesLoadData -> one top_bundles_load_data row per listed bundle (list order kept as ``position``)."""
    broker = broker_id(node, src, urls=False)
    ts, _ = snapshot_tick(node, src, None)
    listed = list(node.objects("topBundlesLoadData"))
    out.rows[TOP_BUNDLES_PUBLICATION.name].append({"cluster": cluster, "ts": ts, "broker": broker,
                                                   "listed": len(listed)})
    for i, entry in enumerate(listed):
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


def parse_file(path: Path, root: Path, cluster: str, out: DumpRows) -> None:
    """Parse one dump file into ``out`` (single object or a map of objects of one type)."""
    shown = str(path)
    rel = path.relative_to(root)
    doc = load_json(path, shown)
    tag = doc.get("loadReportType") if isinstance(doc, dict) else None
    if isinstance(tag, str) and tag != LOCAL_BROKER_DATA:
        raise InvalidInputError(
            f"{shown}: $.loadReportType: unsupported load report type {tag!r} "
            "(only the modular LocalBrokerData and the extensible load manager's data are supported)"
        )
    kind = detect_kind(doc)
    if kind is not None:
        _PARSERS[kind](JsonObject(doc, shown, "$"), DumpSource(shown, rel, root, None), cluster, out)
        out.reports[kind] += 1
        return
    if isinstance(doc, dict) and doc and all(isinstance(v, dict) for v in doc.values()):
        kinds = {k: detect_kind(v) for k, v in doc.items()}
        found = set(kinds.values())
        if len(found) == 1 and None not in found:
            (kind,) = found
            assert kind is not None
            for key in sorted(doc):
                node = JsonObject(doc[key], shown, child("$", key))
                _PARSERS[kind](node, DumpSource(shown, rel, root, key), cluster, out)
                out.reports[kind] += 1
            return
        bad = next((k for k in sorted(doc) if kinds[k] is None), None)
        if bad is not None and len(found) > 1:
            raise InvalidInputError(f"{shown}: {child('$', bad)}: not a recognised Pulsar load object")
        if len(found) > 1:
            raise InvalidInputError(f"{shown}: $: a map mixing {sorted(k for k in found if k)}; use one file per type")
    raise InvalidInputError(
        f"{shown}: $: not a recognised Pulsar load dump (expected LocalBrokerData, BundleData, TimeAverageBrokerData, "
        "BrokerLoadData or TopBundlesLoadData, or an object mapping names to one of them)"
    )


def json_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of each JSON object line of ``collect``'s JSON Lines file ``path``; lines that are not
    JSON (a blank line, or a record torn by a collector killed mid-write) are skipped, as ``collect`` reads them."""
    for n, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(rec, dict):
            yield n, rec


def leader_elections(root: Path, cluster: str, out: DumpRows, runs_ms: list[int] | None = None) -> None:
    """The leader's elections in ``collect``'s record under ``root`` -> leader_election rows: each version of
    ``/loadbalance/leader`` or ``/loadbalance/extension/leader`` (an ephemeral znode created by the elected broker,
    ``LeaderElectionImpl``) is one election at its ``ctime``, its ``brokerId`` the leader. Lines that are not JSON
    (torn by a collector killed mid-write) are skipped, as ``collect`` reads them; a leader record without a usable
    ``ctime`` or ``brokerId`` names the file, line and field.

    The extensible leader starts its ``UnloadScheduler`` in ``playLeader``, which waits until the broker is ready
    for requests (``runWhenReadyForIncomingRequests``): a broker elected while it starts begins its timer seconds
    after the election. With the leader's log in the dump (``leader-decisions.log``), the timer's start is the
    earliest phase of its logged runs after the election, less the whole minutes back to it (:func:`timer_start`;
    ``runs_ms``: those runs, :func:`logged_runs`, read from the dump when not given)."""
    path = root / METADATA_VERSIONS
    if not path.is_file():
        return
    found: list[tuple[int, str, str]] = []  # (ctime, path, broker) of each election, once
    seen: set[int] = set()
    for n, rec in json_records(path):
        where = f"{path}: line {n}"
        if rec.get("path") not in (LEADER_PATH, EXTENSION_LEADER_PATH) or rec.get("event") != "version":
            continue
        ctime, data = rec.get("ctime"), rec.get("data")
        if isinstance(ctime, bool) or not isinstance(ctime, int) or ctime <= 0:
            raise InvalidInputError(f"{where}: $.ctime: expected the znode's creation time in epoch ms, got {ctime!r}")
        broker = data.get("brokerId") if isinstance(data, dict) else None
        if not isinstance(broker, str) or not broker:
            raise InvalidInputError(f"{where}: $.data.brokerId: expected the leader's broker id, got {broker!r}")
        if ctime not in seen:
            seen.add(ctime)
            found.append((ctime, rec["path"], broker))
    runs = runs_ms
    extension = sorted(c for c, p, _ in found if p == EXTENSION_LEADER_PATH)
    for ctime, where_path, broker in found:
        start = ctime
        if where_path == EXTENSION_LEADER_PATH:
            runs = logged_runs(root) if runs is None else runs
            later = [c for c in extension if c > ctime]
            start = timer_start(ctime, runs, later[0] if later else None)
        out.rows[LEADER_ELECTION.name].append({"cluster": cluster, "ts": tick_of(start), "broker": broker})


def broker_departures(root: Path, cluster: str, out: DumpRows) -> None:
    """``collect``'s ``absent`` records under ``root`` (a ``/loadbalance/brokers/<broker>`` znode deleted: the broker
    stopped, was killed or lost its session) -> broker_departure rows at the record's ``at``, the moment the leader's
    watch fires and ``updateAll`` drops the broker (``cleanupDeadBrokersData``). Torn lines are skipped, as
    ``collect`` reads them; an ``absent`` record without a usable ``at`` or broker names the file, line and field."""
    path = root / METADATA_VERSIONS
    if not path.is_file():
        return
    seen: set[tuple[int, str]] = set()
    for n, rec in json_records(path):
        if rec.get("event") != "absent":
            continue
        where = f"{path}: line {n}"
        at, broker = rec.get("at"), rec.get("broker")
        if isinstance(at, bool) or not isinstance(at, int) or at <= 0:
            raise InvalidInputError(f"{where}: $.at: expected the deletion time in epoch ms, got {at!r}")
        if not isinstance(broker, str) or not broker:
            raise InvalidInputError(f"{where}: $.broker: expected the broker id host:port, got {broker!r}")
        if (at, broker) not in seen:
            seen.add((at, broker))
            out.rows[BROKER_DEPARTURE.name].append({"cluster": cluster, "ts": tick_of(at), "broker": broker})


def load_data_tombstones(root: Path, cluster: str, out: DumpRows) -> None:
    """``collect``'s ``extensible/broker-load-data/<host_port>/<publish ms>.tombstone`` files -> broker_load_data_ext
    rows whose load columns and ``updated_at`` are null: the broker removed its BrokerLoadData
    (``BrokerLoadDataReporter.tombstone`` when a bundle leaves or reaches it), so the leader has none of it until
    its next report (TransferShedder: ``NoLoadData``)."""
    for ms, broker in _tombstones(root, "broker-load-data"):
        out.rows[BROKER_LOAD_DATA_EXT.name].append({"cluster": cluster, "ts": tick_of(ms), "broker": broker})


def top_bundles_tombstones(root: Path, cluster: str, out: DumpRows) -> None:
    """``collect``'s ``extensible/top-bundles-load-data/<host_port>/<publish ms>.tombstone`` files ->
    top_bundles_publication rows with ``listed`` null: the broker removed its TopBundlesLoadData
    (``TopBundleLoadDataReporter.tombstone`` when a bundle leaves or reaches it), so the leader's TransferShedder
    reads none of its bundles until its next list."""
    for ms, broker in _tombstones(root, "top-bundles-load-data"):
        out.rows[TOP_BUNDLES_PUBLICATION.name].append({"cluster": cluster, "ts": tick_of(ms), "broker": broker})


def _tombstones(root: Path, kind: str) -> Iterator[tuple[int, str]]:
    """(publish ms, broker) of each ``extensible/<kind>/<host_port>/<ms>.tombstone`` file under ``root``."""
    base = root / "extensible" / kind
    for f in sorted(base.glob("*/*.tombstone")) if base.is_dir() else ():
        if not f.stem.isdigit():
            raise InvalidInputError(f"{f}: a tombstone's name is its publish time in epoch ms (<ms>.tombstone)")
        broker = broker_from_path(f.relative_to(root), root)  # as the broker's own files are named
        if broker is None:
            raise InvalidInputError(f"{f}: no broker id: no host_port (or host:port) in the path")
        yield int(f.stem), broker


def shedding_run_rows(runs_ms: list[int], cluster: str, out: DumpRows, lines: Sequence[str] = ()) -> None:
    """The leader's shedding runs in the dump's ``leader-decisions.log`` (:func:`logged_runs`) -> shedding_run rows;
    ``read_at`` where the reports a run's strategy printed (in the log's ``lines``) are older than those written
    before its lines (``kernel.leader_election.run_read_times``, against the dump's ``broker_load`` rows: call after
    them)."""
    versions: dict[str, list[tuple[int, dict[str, str]]]] = {}
    for r in out.rows[BROKER_LOAD.name] if lines else ():
        usage = [r.get(f"{c}_usage") or 0.0 for c in RESOURCES]
        limit = [r.get(f"{c}_limit") or 0.0 for c in RESOURCES]
        versions.setdefault(r["broker"], []).append((epoch_ms(r["ts"]), printed_resource_usage(usage, limit)))
    for v in versions.values():
        v.sort(key=lambda x: x[0])
    reads = run_read_times(runs_ms, shedding_views(lines), versions) if lines else [None] * len(runs_ms)
    out.rows[SHEDDING_RUN.name].extend({"cluster": cluster, "ts": tick_of(t), "read_at": None if r is None else tick_of(r)}
                                       for t, r in zip(runs_ms, reads))


def leader_placement_rows(lines: Sequence[str], cluster: str, out: DumpRows) -> None:
    """The placements the dump's ``leader-decisions.log`` shows (``collect.leader_log.placements``) ->
    leader_placement rows, numbered in log order (``seq``)."""
    out.rows[LEADER_PLACEMENT.name].extend(
        {"cluster": cluster, "ts": tick_of(p.at_ms), "seq": k, "broker": p.broker, "thread": p.thread,
         "bundle": p.bundle, "candidates": p.candidates, "selected": p.selected, "lookup": p.lookup}
        for k, p in enumerate(placements(lines)))


def epoch_ms(ts: datetime) -> int:
    """A row's timestamp (``tick_of``'s UTC datetime) as epoch milliseconds, exactly."""
    return int(ts.timestamp()) * 1000 + ts.microsecond // 1000


def leader_log_lines(root: Path) -> list[str]:
    """The lines of the dump's ``leader-decisions.log`` (none without one)."""
    log = root / LEADER_LOG
    return log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []


def logged_runs(root: Path) -> list[int]:
    """When the leader's shedding task ran, from the dump's leader log (empty without one)."""
    return shedding_runs(leader_log_lines(root))


def timer_start(elected_ms: int, runs_ms: list[int], until_ms: int | None = None) -> int:
    """The extensible leader's timer start from its logged runs within the hour after ``elected_ms`` (and before
    ``until_ms``, the next election): ``UnloadScheduler`` runs at a fixed rate, so each run is at or after its
    timer minute; the earliest phase among them (each run's offset from the first's, modulo a minute) less the
    whole minutes back to the election is the start, whatever the shedding interval (the election itself without
    such a run). A late first run (its pool busy) no longer shifts the timer."""
    end = elected_ms + 60 * MINUTE_MS if until_ms is None else min(until_ms, elected_ms + 60 * MINUTE_MS)
    runs = [t for t in sorted(runs_ms) if elected_ms <= t <= end]
    if not runs:
        return elected_ms
    first = runs[0]
    half = MINUTE_MS // 2
    early = min((t - first + half) % MINUTE_MS - half for t in runs)  # each run against the first's phase
    return elected_ms + (first + early - elected_ms) % MINUTE_MS


#: collect's admin polls (``lbreplay.collect.admin``): one JSON line per request; ``source`` "topics" is
#: ``/admin/v2/broker-stats/topics`` of one broker (its topics, grouped by namespace and bundle)
ADMIN_POLLS = Path("collect") / "admin"
TOPIC_STATS_STALE_MS = 3 * MINUTE_MS  # a broker's topics poll older than this at a tick is left out (it died)
_SNAPSHOT_TABLES = (BROKER_LOAD.name, BUNDLE_LOAD.name, BROKER_LOAD_DATA_EXT.name)


def _topic_polls(root: Path) -> list[tuple[int, str, dict[str, dict[str, Any]]]]:
    """(at ms, admin URL, topic -> topic_load columns) of every successful topics poll under ``root``; lines that
    are not JSON (a collector killed mid-write) are skipped, as ``collect`` reads them."""
    polls = []
    for f in sorted((root / ADMIN_POLLS).glob("*.jsonl")) if (root / ADMIN_POLLS).is_dir() else ():
        for _n, rec in json_records(f):
            if rec.get("source") != "topics" or rec.get("status") != 200 \
                    or not isinstance(rec.get("body"), dict) or not isinstance(rec.get("at"), int):
                continue
            topics: dict[str, dict[str, Any]] = {}
            for namespace, bundles in rec["body"].items():
                for kinds in (bundles or {}).values():
                    for stats in (kinds or {}).values():
                        for topic, st in (stats or {}).items():
                            if isinstance(st, dict):
                                topics[topic] = _topic_columns(namespace, st)
            polls.append((rec["at"], str(rec.get("admin_url")), topics))
    return sorted(polls, key=lambda p: p[0])


def _topic_columns(namespace: str, st: dict[str, Any]) -> dict[str, Any]:
    """A TopicStats object (``broker-stats/topics``) -> topic_load's load columns."""
    subs = st.get("subscriptions") or {}
    consumers = sum(len(s.get("consumers") or []) for s in subs.values() if isinstance(s, dict))
    row: dict[str, Any] = {col: float(st.get(key) or 0.0) for col, key in _RATES.items()}
    return {"namespace": namespace, **row, "producer_count": int(st.get("producerCount") or 0),
            "consumer_count": consumers}


def topic_stats_rows(root: Path, cluster: str, out: DumpRows, ticks: list[datetime] | None = None) -> None:
    """collect's per-topic stats -> topic_load rows at each snapshot time of the dump's reports (the ticks the
    replay joins topics to): every topic as the latest topics poll at or before the tick lists it, each broker's
    latest poll (at most :data:`TOPIC_STATS_STALE_MS` old) taken, the newest listing of a topic winning (a moved
    topic). The closed loop spreads a recorded bundle's load over its range as its topics are (a split divides
    it by its topics' hashes: ``ring_load.TopicWeightedLoad``). Ticks before the first poll get none; ``ticks``
    (default: the snapshot times of ``out``'s reports) are the times to stamp."""
    polls = _topic_polls(root)
    if not polls:
        return
    ticks = sorted(ticks if ticks is not None else {r["ts"] for name in _SNAPSHOT_TABLES for r in out.rows[name]})
    latest: dict[str, tuple[int, dict[str, dict[str, Any]]]] = {}  # admin URL -> its latest poll so far
    k = 0
    for ts in ticks:
        ms = round(ts.timestamp() * 1000)
        while k < len(polls) and polls[k][0] <= ms:
            latest[polls[k][1]] = (polls[k][0], polls[k][2])
            k += 1
        merged: dict[str, dict[str, Any]] = {}
        for _at, topics in sorted(p for p in latest.values() if ms - p[0] <= TOPIC_STATS_STALE_MS):
            merged.update(topics)  # oldest first: the newest listing of a topic wins
        out.rows[TOPIC_LOAD.name].extend({"cluster": cluster, "ts": ts, "topic": t, **cols}
                                         for t, cols in sorted(merged.items()))
