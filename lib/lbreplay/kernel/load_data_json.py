"""Pulsar's modular load-manager JSON (``LocalBrokerData``, ``BundleData``, ``TimeAverageBrokerData``) to the
kernel's columnar :class:`~lbreplay.kernel.load_data.LoadData` and back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.json_readers import (
    as_int,
    as_object,
    check_broker_id,
    check_keys,
    child,
    parse_bundle_name,
    parse_timestamps,
)
from lbreplay.kernel.load_data import (
    Brokers,
    Bundles,
    LoadData,
    Membership,
)
from lbreplay.kernel.pulsar_json import (
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
    TimeAverageBrokerData,
    TimeAverageMessageData,
)
from lbreplay.kernel.resource_usage import RESOURCES


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




def build_load_data(parsed: ParsedLoadData, now_ms: int = 0) -> LoadData:
    """Columnar ``LoadData`` from parsed objects.

    Brokers are rows sorted by id; bundles are the sorted union of ``bundleData`` keys, every broker's
    ``bundles`` and ``lastStats`` keys and every ``preallocatedBundleData`` key. Each broker keeps its own
    ``bundles`` set and ``lastStats`` map, as ``LocalBrokerData`` does: when every bundle is listed by one broker
    at most and each broker's ``bundles`` equal its ``lastStats`` keys, the one-owner columns say it all
    (``Bundles.owner`` / ``Bundles.stats``); otherwise (a bundle moving or around a split sits in two brokers'
    sets) ``LoadData.membership`` holds the per-broker pairs. A bundle without ``bundleData`` has
    ``has_bundle_data`` False and default stats (``getBundleDataOrDefault``), unless it is preallocated:
    ``preallocateBundle`` put the same ``BundleData`` object into both maps, so its preallocated data counts as its
    bundle data. A bundle may be in several brokers' ``preallocatedBundleData``. ``timeAverageData`` is used where
    given and derived (``TimeAverageBrokerData.reset``) elsewhere.
    """
    broker_ids = sorted(parsed.brokers)
    row = {b: i for i, b in enumerate(broker_ids)}
    names: set[str] = set(parsed.bundleData)
    owner_of: dict[str, str] = {}
    per_broker = False  # some bundle in two brokers' sets, bundles != lastStats keys, or lastStats not in name order
    for broker in broker_ids:
        local = parsed.brokers[broker].localData
        listed = set(local.bundles)
        if listed != set(local.lastStats) or _unsorted(local.lastStats):
            per_broker = True
        for name in listed:
            if name in owner_of:
                per_broker = True
            else:
                owner_of[name] = broker
        names.update(local.lastStats)
        names.update(parsed.brokers[broker].preallocatedBundleData)
    names.update(owner_of)
    bundle_names = sorted(names)

    brokers = _broker_rows(parsed, broker_ids)

    bundles = Bundles.empty(bundle_names)
    membership = _membership(parsed, broker_ids, bundles) if per_broker else None
    if membership is None:
        for k, name in enumerate(bundle_names):
            owner = owner_of.get(name)
            if owner is not None:
                bundles.owner[k] = row[owner]
                _set_stats(bundles, k, parsed.brokers[owner].localData.lastStats[name])
    prealloc: dict[str, list[tuple[str, BundleData]]] = {}
    for broker in broker_ids:  # sorted: the last broker listing a bundle is the newest holder
        for name, bd in parsed.brokers[broker].preallocatedBundleData.items():
            prealloc.setdefault(name, []).append((broker, bd))
    preallocated_also: dict[str, list[str]] = {}
    for name, holders in prealloc.items():
        k = bundles.index(name)
        broker, bd = holders[-1]
        bundles.preallocated_to[k] = row[broker]
        if len(holders) > 1:
            preallocated_also[name] = [h for h, _ in holders[:-1]]
        if name not in parsed.bundleData:
            _set_bundle_data(bundles, k, bd)
    for name, bd in parsed.bundleData.items():
        _set_bundle_data(bundles, bundles.index(name), bd)

    ld = LoadData(brokers=brokers, bundles=bundles,
                  recently_unloaded_bundles=dict(parsed.recentlyUnloadedBundles), now_ms=int(now_ms),
                  membership=membership, preallocated_also=preallocated_also)
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


def _broker_rows(parsed: ParsedLoadData, broker_ids: list[str]) -> Brokers:
    """One ``Brokers`` row per broker id (sorted), from each ``LocalBrokerData``."""
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
    return brokers


def _set_stats(bundles: Bundles, k: int, s: NamespaceBundleStats) -> None:
    bundles.stats[k] = s.message_data()
    bundles.topics[k] = s.topics
    bundles.consumer_count[k] = s.consumerCount
    bundles.producer_count[k] = s.producerCount
    bundles.cache_size[k] = s.cacheSize


def _unsorted(keys: Iterable[str]) -> bool:
    """Keys not in ascending order."""
    prev = None
    for k in keys:
        if prev is not None and k < prev:
            return True
        prev = k
    return False


def _membership(parsed: ParsedLoadData, broker_ids: list[str], bundles: Bundles) -> Membership:
    """Each broker's ``bundles`` set and ``lastStats`` entries as sorted (broker row, bundle row) pairs.

    ``Bundles.owner`` is set to the first broker (sorted) listing the bundle in its ``bundles``, and the bundle
    columns of stats to the first ``lastStats`` entry (what a one-owner reader such as a dump sees). Each
    ``lastStats`` pair keeps its place in the report's key order (``stats_rank``): the leader deserialises
    ``lastStats`` into a ``LinkedHashMap`` (Jackson's map for a ``Map`` property, every line 2.10 .. 5.0), so the
    split check walks a broker's bundles in the order the broker wrote them."""
    ob: list[int] = []
    orow: list[int] = []
    sb: list[int] = []
    srow: list[int] = []
    rank: list[int] = []
    entries: list[NamespaceBundleStats] = []
    for i, broker in enumerate(broker_ids):
        local = parsed.brokers[broker].localData
        for name in sorted(set(local.bundles)):
            k = bundles.index(name)
            ob.append(i)
            orow.append(k)
            if bundles.owner[k] < 0:
                bundles.owner[k] = i
        place = {name: j for j, name in enumerate(local.lastStats)}
        for name in sorted(local.lastStats):
            k = bundles.index(name)
            sb.append(i)
            srow.append(k)
            rank.append(place[name])
            entries.append(local.lastStats[name])
    first = np.zeros(len(bundles), dtype=bool)
    for k, st in zip(reversed(srow), reversed(entries)):  # the first entry of each bundle wins
        _set_stats(bundles, k, st)
        first[k] = True
    return Membership(
        owned_broker=np.asarray(ob, dtype=np.int64), owned_bundle=np.asarray(orow, dtype=np.int64),
        stats_broker=np.asarray(sb, dtype=np.int64), stats_bundle=np.asarray(srow, dtype=np.int64),
        stats=np.asarray([st.message_data() for st in entries], dtype=np.float64).reshape(-1, 4),
        topics=np.asarray([st.topics for st in entries], dtype=np.int64),
        consumer_count=np.asarray([st.consumerCount for st in entries], dtype=np.int64),
        producer_count=np.asarray([st.producerCount for st in entries], dtype=np.int64),
        cache_size=np.asarray([st.cacheSize for st in entries], dtype=np.int64),
        stats_rank=np.asarray(rank, dtype=np.int64),
    )


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
    m = ld.membership
    if m is None:
        rows = np.flatnonzero(b.owner == i)
        stats = {b.names[k]: NamespaceBundleStats.from_json(bundle_stats_json(ld, int(k)), "$") for k in rows}
        listed = sorted(stats)
    else:
        stats = {}
        for j in np.flatnonzero(m.stats_broker == i).tolist():
            thr_in, thr_out, rate_in, rate_out = map(float, m.stats[j])
            stats[b.names[m.stats_bundle[j]]] = NamespaceBundleStats(
                rate_in, thr_in, rate_out, thr_out, int(m.consumer_count[j]), int(m.producer_count[j]),
                int(m.topics[j]), int(m.cache_size[j]))
        listed = [b.names[k] for k in m.owned_bundle[m.owned_broker == i].tolist()]
    d = LocalBrokerData(
        resources={r: ResourceUsage(float(br.usage[i, j]), float(br.limit[i, j])) for j, r in enumerate(RESOURCES)},
        lastStats=stats,
        msgThroughputIn=float(br.msg_throughput_in[i]), msgThroughputOut=float(br.msg_throughput_out[i]),
        msgRateIn=float(br.msg_rate_in[i]), msgRateOut=float(br.msg_rate_out[i]),
        numTopics=int(br.num_topics[i]), numBundles=len(listed), numConsumers=int(br.num_consumers[i]),
        numProducers=int(br.num_producers[i]), bundles=listed, lastUpdate=int(br.last_update[i]),
        persistentTopicsEnabled=bool(br.persistent_topics_enabled[i]),
        nonPersistentTopicsEnabled=bool(br.non_persistent_topics_enabled[i]),
        brokerVersionString=br.broker_version[i], loadManagerClassName=br.load_manager_class_name[i],
    )
    return d.to_json(conf)


def time_average_broker_data_json(ld: LoadData, i: int) -> dict[str, Any]:
    short, long = ld.broker_time_average()
    return TimeAverageBrokerData(list(map(float, short[i])), list(map(float, long[i]))).to_json()
