"""Pulsar JSON objects <-> columnar model (lbreplay.kernel.pulsar_json).

Samples are real dumps: the Modular and Extensible load reports of Pulsar's admin docs
(``administration-load-balance``, 3.1 docs; quoted in PULSAR-LB-SPEC.md §1.2 and §7.1) and a 2.10 broker's
``/loadbalance/brokers`` and ``/loadbalance/broker-time-average`` znodes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data_json import bundle_data_json, load_data_from_request
from lbreplay.kernel.pulsar_json import (
    BrokerLoadData,
    BundleData,
    LocalBrokerData,
    TimeAverageBrokerData,
    TopBundlesLoadData,
    parse_extensible,
)

DOCS_LOCAL_BROKER_DATA = (
    '{"webServiceUrl":"http://broker-1:8080","pulsarServiceUrl":"pulsar://broker-1:6650",'
    '"persistentTopicsEnabled":true,"nonPersistentTopicsEnabled":true,'
    '"cpu":{"usage":7.311714728372232,"limit":800.0},"memory":{"usage":124.0,"limit":2096.0},'
    '"directMemory":{"usage":36.0,"limit":256.0},"bandwidthIn":{"usage":0.8324254085661579,"limit":1.0E7},'
    '"bandwidthOut":{"usage":0.7155446715644209,"limit":1.0E7},"msgThroughputIn":0.0,"msgThroughputOut":0.0,'
    '"msgRateIn":0.0,"msgRateOut":0.0,"lastUpdate":1690979816792,'
    '"lastStats":{"my-tenant/my-namespace/0x4ccccccb_0x66666664":{"msgRateIn":0.0,"msgThroughputIn":0.0,'
    '"msgRateOut":0.0,"msgThroughputOut":0.0,"consumerCount":2,"producerCount":0,"topics":1,"cacheSize":0}},'
    '"numTopics":1,"numBundles":1,"numConsumers":2,"numProducers":0,'
    '"bundles":["my-tenant/my-namespace/0x4ccccccb_0x66666664"],"lastBundleGains":[],"lastBundleLosses":[],'
    '"brokerVersionString":"3.1.0-SNAPSHOT","protocols":{},'
    '"advertisedListeners":{"internal":{"brokerServiceUrl":"pulsar://broker-1:6650"}},'
    '"loadManagerClassName":"org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",'
    '"startTimestamp":1690940955211,"maxResourceUsage":0.140625,"loadReportType":"LocalBrokerData"}'
)
# A 2.10 broker on a host without NIC speed: bandwidth limit -1, and the legacy "bundleStats" alias.
DUMP_2_10_LOCAL_BROKER_DATA = (
    '{"webServiceUrl":"http://192.168.1.7:8080","pulsarServiceUrl":"pulsar://192.168.1.7:6650",'
    '"persistentTopicsEnabled":true,"nonPersistentTopicsEnabled":true,'
    '"cpu":{"usage":164.48346692969946,"limit":1600.0},"memory":{"usage":70.26119232177734,"limit":4096.0},'
    '"directMemory":{"usage":0.0,"limit":4096.0},"bandwidthIn":{"usage":-1.0,"limit":-1.0},'
    '"bandwidthOut":{"usage":-1.0,"limit":-1.0},"msgThroughputIn":0.0,"msgThroughputOut":0.0,"msgRateIn":0.0,'
    '"msgRateOut":0.0,"lastUpdate":1653038710563,"lastStats":{},"numTopics":0,"numBundles":0,"numConsumers":0,'
    '"numProducers":0,"bundles":[],"lastBundleGains":[],"lastBundleLosses":[],'
    '"brokerVersionString":"2.10.1-SNAPSHOT","protocols":{},"advertisedListeners":{},"bundleStats":{},'
    '"maxResourceUsage":0.10280216485261917,"loadReportType":"LocalBrokerData"}'
)
DUMP_2_10_TIME_AVERAGE = (
    '{"shortTermMsgThroughputIn":0.0,"shortTermMsgThroughputOut":0.0,"shortTermMsgRateIn":0.0,'
    '"shortTermMsgRateOut":0.0,"longTermMsgThroughputIn":0.0,"longTermMsgThroughputOut":0.0,'
    '"longTermMsgRateIn":0.0,"longTermMsgRateOut":0.0}'
)
DOCS_BROKER_LOAD_DATA = (
    '{"cpu":{"usage":14.397985201479854,"limit":800.0},"memory":{"usage":300.0,"limit":2096.0},'
    '"directMemory":{"usage":40.0,"limit":256.0},"bandwidthIn":{"usage":0.7817884878178855,"limit":1.0E7},'
    '"bandwidthOut":{"usage":0.7213945272139455,"limit":1.0E7},"msgThroughputIn":3.000538680274058,'
    '"msgThroughputOut":3.0005621893825616,"msgRateIn":0.03333931866971176,"msgRateOut":0.033339579882028465,'
    '"bundleCount":3,"topics":3,"maxResourceUsage":0.15625,"weightedMaxEMA":0.15625,'
    '"msgThroughputEMA":38.88925615962549,"updatedAt":1691043751060,"reportedAt":1691043631073}'
)
B = "t/ns/"


def _bundle_data(short: list[float], long: list[float], ns: int = 10, nl: int = 20, topics: int = 3) -> dict:
    keys = ("msgThroughputIn", "msgThroughputOut", "msgRateIn", "msgRateOut")
    return {
        "shortTermData": {"maxSamples": 10, "numSamples": ns, **dict(zip(keys, short))},
        "longTermData": {"maxSamples": 1000, "numSamples": nl, **dict(zip(keys, long))},
        "topics": topics,
    }


def _stats(rate_in: float, rate_out: float, thr_in: float, thr_out: float, topics: int = 2) -> dict:
    return {"msgRateIn": rate_in, "msgThroughputIn": thr_in, "msgRateOut": rate_out, "msgThroughputOut": thr_out,
            "consumerCount": 1, "producerCount": 1, "topics": topics, "cacheSize": 0}


# --- round trips ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["4.x", "3.x", "2.11"])
def test_local_broker_data_docs_sample_round_trips(version: str) -> None:
    """administration-load-balance (3.1 docs) Modular sample, PULSAR-LB-SPEC.md §1.2: read and write back gives the
    same JSON object. maxResourceUsage is recomputed: directMemory 36/256 = 14.0625 % is the max with or without
    memory (124/2096 = 5.9 %), so 0.140625 in every version."""
    doc = json.loads(DOCS_LOCAL_BROKER_DATA)
    out = LocalBrokerData.from_json(doc, "$").to_json(PulsarConfig.resolve({"pulsarVersion": version}))
    assert out == doc
    assert list(out) == list(doc)  # Jackson's field order too


def test_local_broker_data_2_10_dump_round_trips_with_float32_max_usage() -> None:
    """A 2.10 /loadbalance/brokers znode: bandwidth limit -1 (unknown NIC speed, counts as 0 %), the legacy
    ``bundleStats`` alias kept verbatim. maxResourceUsage = float32(164.48346692969946/1600*100)/100 =
    0.10280216485261917 (LocalBrokerData.getMaxResourceUsage, float arithmetic; cpu is the max)."""
    doc = json.loads(DUMP_2_10_LOCAL_BROKER_DATA)
    d = LocalBrokerData.from_json(doc, "$")
    assert d.to_json(PulsarConfig.resolve({"pulsarVersion": "2.10"})) == doc
    assert d.resources["bandwidthIn"].limit == -1.0


def test_max_resource_usage_is_ignored_on_input() -> None:
    """maxResourceUsage is the serialized getter (PULSAR-LB-SPEC.md §1.2): a wrong stored value is recomputed."""
    doc = json.loads(DOCS_LOCAL_BROKER_DATA)
    doc["maxResourceUsage"] = 0.99
    out = LocalBrokerData.from_json(doc, "$").to_json(PulsarConfig.resolve({}))
    assert out["maxResourceUsage"] == 0.140625


def test_broker_load_data_docs_sample_round_trips() -> None:
    """administration-load-balance (3.1 docs) Extensible sample (loadbalancer-broker-load-data), §7.1: the EMAs are
    stored fields, kept as read."""
    doc = json.loads(DOCS_BROKER_LOAD_DATA)
    d = BrokerLoadData.from_json(doc, "$")
    assert d.to_json() == doc
    assert d.weightedMaxEMA == 0.15625 and d.updatedAt == 1691043751060


def test_time_average_broker_data_dump_round_trips() -> None:
    """/loadbalance/broker-time-average znode of a 2.10 broker (§1.5 field names)."""
    doc = json.loads(DUMP_2_10_TIME_AVERAGE)
    assert TimeAverageBrokerData.from_json(doc, "$").to_json() == doc


def test_bundle_data_and_top_bundles_round_trip() -> None:
    """BundleData (§1.4: shortTermData/longTermData/topics) and TopBundlesLoadData ({bundleName, stats} list, §7.1)."""
    bd = _bundle_data([1.5, 2.5, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0], 7, 900, 5)
    assert BundleData.from_json(bd, "$").to_json() == bd
    top = {"topBundlesLoadData": [{"bundleName": B + "0x00000000_0x80000000", "stats": _stats(1, 2, 3, 4)},
                                  {"bundleName": B + "0x80000000_0xffffffff", "stats": _stats(5, 6, 7, 8)}]}
    assert TopBundlesLoadData.from_json(top, "$").to_json() == top
    legacy = {"top_bundles_load_data": top["topBundlesLoadData"]}  # early PIP-192 @JsonProperty name
    assert TopBundlesLoadData.from_json(legacy, "$").to_json() == top


# --- request -> columnar LoadData -----------------------------------------------------------------------------
def _request() -> dict:
    return {
        "nowMillis": 1_700_000_000_000,
        "loadData": {
            "brokers": {
                "b2:8080": {"localData": {"cpu": {"usage": 50, "limit": 100},
                                          "lastStats": {B + "0x80000000_0xc0000000": _stats(10, 20, 1000, 2000),
                                                        B + "0x00000000_0x40000000": _stats(1, 2, 100, 200)}},
                            "preallocatedBundleData": {B + "0xc0000000_0xffffffff": _bundle_data(
                                [5, 5, 5, 5], [7, 7, 7, 7])}},
                "b1:8080": {"localData": {"lastStats": {B + "0x40000000_0x80000000": _stats(3, 4, 300, 400)}},
                            "timeAverageData": json.loads(DUMP_2_10_TIME_AVERAGE)},
            },
            "bundleData": {
                B + "0x80000000_0xc0000000": _bundle_data([1, 2, 3, 4], [11, 12, 13, 14]),
                "other/ns/0x00000000_0xffffffff": _bundle_data([9, 9, 9, 9], [8, 8, 8, 8]),
            },
            "recentlyUnloadedBundles": {B + "0x40000000_0x80000000": 1_699_999_990_000},
        },
    }


def test_load_data_columns_brokers_sorted_and_bundle_union() -> None:
    """Brokers sorted by id; bundles = sorted union of bundleData keys, every lastStats key and preallocated keys;
    owner from lastStats; totals absent from localData are sums over lastStats (LocalBrokerData.update)."""
    ld = load_data_from_request(_request())
    assert ld.brokers.ids == ["b1:8080", "b2:8080"]
    assert ld.bundles.names == [
        "other/ns/0x00000000_0xffffffff",
        B + "0x00000000_0x40000000",
        B + "0x40000000_0x80000000",
        B + "0x80000000_0xc0000000",
        B + "0xc0000000_0xffffffff",
    ]
    assert ld.bundles.owner.tolist() == [-1, 1, 0, 1, -1]
    assert ld.bundles.preallocated_to.tolist() == [-1, -1, -1, -1, 1]
    # b2 reports rates 10+1 in, 20+2 out, throughput 1000+100 in, 2000+200 out; 2 topics per bundle.
    assert ld.brokers.msg_rate_in.tolist() == [3.0, 11.0]
    assert ld.brokers.msg_throughput_out.tolist() == [400.0, 2200.0]
    assert ld.brokers.num_topics.tolist() == [2, 4]
    assert ld.brokers.usage[1, 0] == 50 and ld.brokers.limit[1, 0] == 100
    # lastStats rows in MESSAGE_FIELDS order: thrIn, thrOut, rateIn, rateOut.
    assert ld.bundles.stats[3].tolist() == [1000.0, 2000.0, 10.0, 20.0]
    assert ld.recently_unloaded_bundles == {B + "0x40000000_0x80000000": 1_699_999_990_000}
    assert ld.now_ms == 1_700_000_000_000


def test_load_data_bundle_data_defaults_and_preallocated_data() -> None:
    """A reported bundle without BundleData keeps getBundleDataOrDefault's 50 msg/s / 50000 B/s with numSamples 0
    (has_bundle_data False); a preallocated bundle's BundleData is the bundleData entry (preallocateBundle puts the
    same object in both maps)."""
    ld = load_data_from_request(_request())
    b = ld.bundles
    assert b.has_bundle_data.tolist() == [True, False, False, True, True]
    assert b.short[1].tolist() == [50000.0, 50000.0, 50.0, 50.0] and b.short_samples[1] == 0
    assert b.long[3].tolist() == [11.0, 12.0, 13.0, 14.0] and b.long_samples[3] == 20 and b.long_max[3] == 1000
    assert b.short[4].tolist() == [5.0, 5.0, 5.0, 5.0]
    assert bundle_data_json(ld, 3) == _bundle_data([1, 2, 3, 4], [11, 12, 13, 14])


def test_time_average_data_given_or_derived() -> None:
    """timeAverageData is used where given (b1: the all-zero 2.10 dump) and derived elsewhere (b2:
    TimeAverageBrokerData.reset over its lastStats bundles: the default stats for 0x00000000_0x40000000 plus the
    bundleData of 0x80000000_0xc0000000; preallocated bundles are not in lastStats and do not count)."""
    short, long = load_data_from_request(_request()).broker_time_average()
    assert short[0].tolist() == [0.0, 0.0, 0.0, 0.0] and long[0].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert short[1].tolist() == [50001.0, 50002.0, 53.0, 54.0]
    assert long[1].tolist() == [50011.0, 50012.0, 63.0, 64.0]


def test_time_average_data_derived_when_absent_everywhere() -> None:
    """Without any timeAverageData, LoadData derives it (tabd stays None)."""
    req = _request()
    del req["loadData"]["brokers"]["b1:8080"]["timeAverageData"]
    ld = load_data_from_request(req)
    assert ld.tabd is None
    short, _ = ld.broker_time_average()
    assert short[0].tolist() == [50000.0, 50000.0, 50.0, 50.0]  # b1's only bundle has no BundleData


# --- validation: JSON path + exit code --------------------------------------------------------------------------
def _err(req: dict) -> Exception:
    with pytest.raises((UsageError, InvalidInputError)) as exc:
        load_data_from_request(req)
    return exc.value


def test_negative_limit_is_invalid_with_json_path() -> None:
    """A negative ResourceUsage limit other than Pulsar's -1 "unknown" is invalid (exit 3)."""
    req = _request()
    req["loadData"]["brokers"]["b1:8080"]["localData"]["cpu"] = {"usage": 1, "limit": -5}
    e = _err(req)
    assert isinstance(e, InvalidInputError)
    assert str(e).startswith('$.loadData.brokers["b1:8080"].localData.cpu.limit: must be >= 0')


@pytest.mark.parametrize(
    "mutate, kind, path",
    [
        (lambda r: r["loadData"]["brokers"]["b2:8080"]["localData"].update(msgRateIn=float("nan")),
         InvalidInputError, '$.loadData.brokers["b2:8080"].localData.msgRateIn: must be a finite number'),
        (lambda r: r["loadData"]["brokers"]["b2:8080"]["localData"]["cpu"].update(usage="high"),
         UsageError, '$.loadData.brokers["b2:8080"].localData.cpu.usage: expected a number, got string'),
        (lambda r: r["loadData"].update(brokers=[]), UsageError, "$.loadData.brokers: expected an object, got array"),
        (lambda r: r["loadData"]["bundleData"].update({"t/ns/0x0_0x1": _bundle_data([0] * 4, [0] * 4)}),
         InvalidInputError, '$.loadData.bundleData["t/ns/0x0_0x1"]: malformed bundle range'),
        (lambda r: r["loadData"]["bundleData"].update({"ns-only/0x00000000_0x10000000": _bundle_data([0] * 4, [0] * 4)}),
         InvalidInputError, '$.loadData.bundleData["ns-only/0x00000000_0x10000000"]: malformed bundle name'),
        (lambda r: r["loadData"]["bundleData"].update({B + "0x80000000_0x40000000": _bundle_data([0] * 4, [0] * 4)}),
         InvalidInputError, "lower bound must be below upper bound"),
        (lambda r: r["loadData"]["bundleData"][B + "0x80000000_0xc0000000"]["shortTermData"].update(maxSamples=0),
         InvalidInputError, '$.loadData.bundleData["t/ns/0x80000000_0xc0000000"].shortTermData.maxSamples: must be >= 1'),
        (lambda r: r["loadData"]["recentlyUnloadedBundles"].update({B + "0x00000000_0x40000000": -1}),
         InvalidInputError, '$.loadData.recentlyUnloadedBundles["t/ns/0x00000000_0x40000000"]: must be >= 0'),
        (lambda r: r["loadData"]["brokers"]["b1:8080"]["localData"].update(numTopics=1.5),
         UsageError, '$.loadData.brokers["b1:8080"].localData.numTopics: expected an integer'),
        (lambda r: r["loadData"]["brokers"]["b1:8080"]["localData"].update(persistentTopicsEnabled="yes"),
         UsageError, '$.loadData.brokers["b1:8080"].localData.persistentTopicsEnabled: expected a boolean'),
        (lambda r: r["loadData"].update(bundleDatas={}), UsageError, "$.loadData.bundleDatas: unknown key"),
        (lambda r: r["loadData"]["brokers"]["b1:8080"].update(localdata={}),
         UsageError, '$.loadData.brokers["b1:8080"].localdata: unknown key'),
    ],
)
def test_bad_values_name_their_json_path(mutate, kind: type, path: str) -> None:
    """Wrong JSON types are usage errors (exit 2), bad values invalid input (exit 3); the message names the path."""
    req = _request()
    mutate(req)
    e = _err(req)
    assert type(e) is kind
    assert path in str(e)


def test_extensible_bundle_owner_must_be_a_known_broker() -> None:
    """extensible.bundleOwners (service-unit state) naming a broker that is neither available nor reporting: exit 3."""
    doc = {"brokerLoadData": {"b1:8080": json.loads(DOCS_BROKER_LOAD_DATA)},
           "bundleOwners": {B + "0x00000000_0xffffffff": "ghost:8080"}}
    with pytest.raises(InvalidInputError, match=r'\$\.extensible\.bundleOwners\["t/ns/0x00000000_0xffffffff"\]: '
                                                r'bundle owned by unknown broker "ghost:8080"'):
        parse_extensible(doc)
    doc["bundleOwners"] = {B + "0x00000000_0xffffffff": "b1:8080"}
    snap = parse_extensible(doc)
    assert snap.availableBrokers == ["b1:8080"] and snap.bundleOwners == {B + "0x00000000_0xffffffff": "b1:8080"}


def test_empty_request_gives_empty_load_data() -> None:
    ld = load_data_from_request({})
    assert len(ld.brokers) == 0 and len(ld.bundles) == 0
    assert np.asarray(ld.bundle_count()).size == 0


EXT_LM = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"


def test_extensible_broker_lookup_data_is_parsed() -> None:
    """extensible.brokerLookupData: BrokerLookupData per broker (the registry's view the broker filters read);
    absent fields are null as in an old broker's lookup data, its other fields (a pasted registry entry) ignored,
    and the block absent means "not known" (None: the lookup filters are skipped)."""
    load = {"b1:8080": json.loads(DOCS_BROKER_LOAD_DATA), "b2:8080": json.loads(DOCS_BROKER_LOAD_DATA)}
    assert parse_extensible({"brokerLoadData": load}).brokerLookupData is None
    snap = parse_extensible({"brokerLoadData": load, "brokerLookupData": {
        "b1:8080": {"brokerVersion": "4.0.7", "loadManagerClassName": EXT_LM, "webServiceUrl": "http://b1:8080"},
        "b2:8080": {"brokerVersion": None}}})
    assert snap.brokerLookupData == {"b1:8080": {"brokerVersion": "4.0.7", "loadManagerClassName": EXT_LM},
                                     "b2:8080": {"brokerVersion": None, "loadManagerClassName": None}}


@pytest.mark.parametrize(("lookup", "kind", "message"), [
    ([], UsageError, r"^\$\.extensible\.brokerLookupData: expected an object, got array"),
    ({"b1:8080": None, "b2:8080": {}}, UsageError,
     r'^\$\.extensible\.brokerLookupData\["b1:8080"\]: expected an object, got null'),
    ({"b1:8080": {"brokerVersion": 4}, "b2:8080": {}}, UsageError,
     r'^\$\.extensible\.brokerLookupData\["b1:8080"\]\.brokerVersion: expected a string, got number'),
    ({"b1:8080": {"loadManagerClassName": ["x"]}, "b2:8080": {}}, UsageError,
     r'^\$\.extensible\.brokerLookupData\["b1:8080"\]\.loadManagerClassName: expected a string, got array'),
    ({" b1:8080": {}, "b1:8080": {}, "b2:8080": {}}, InvalidInputError,
     r'^\$\.extensible\.brokerLookupData\[" b1:8080"\]: malformed broker id'),
    ({"b1:8080": {}}, InvalidInputError,
     r'^\$\.extensible\.brokerLookupData\["b2:8080"\]: missing; every broker of availableBrokers'),
])
def test_extensible_broker_lookup_data_errors_name_their_json_path(lookup: object, kind: type, message: str) -> None:
    """Wrong JSON types exit 2, bad values 3; each message names the JSON path. The broker registry lists every
    available broker with its lookup data, so an available broker without an entry is refused."""
    doc = {"brokerLoadData": {"b1:8080": json.loads(DOCS_BROKER_LOAD_DATA), "b2:8080": json.loads(DOCS_BROKER_LOAD_DATA)},
           "brokerLookupData": lookup}
    with pytest.raises(kind, match=message) as info:
        parse_extensible(doc)
    assert type(info.value) is kind
