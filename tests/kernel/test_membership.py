"""Per-broker bundle sets (``LoadData.membership``) and per-broker preallocations (``LoadData.preallocated_also``).

Pulsar's leader keeps, per broker, its own ``LocalBrokerData.bundles`` set and ``lastStats`` map and its own
``BrokerData.preallocatedBundleData``; a bundle may sit in two brokers' sets while it moves or around a split.
Each test names the Pulsar class and method whose behaviour it pins.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from lbreplay.decide import decide
from lbreplay.kernel.bundle_split import find_bundles_to_split
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.leader_state import LeaderState
from lbreplay.kernel.least_long_term_message_rate import long_term_message_rate_scores
from lbreplay.kernel.load_data import RATE_IN, insert_bundles, update_bundle_data
from lbreplay.kernel.load_data_json import load_data_from_request, local_broker_data_json
from lbreplay.kernel.modular_load_manager import ModularLoadManager
from lbreplay.kernel.overload_shedder import OverloadShedder
from lbreplay.kernel.placement import clear_preallocations, preallocate_bundle
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.threshold_shedder import ThresholdShedder

IMPL = "org.apache.pulsar.broker.loadbalance.impl."
NOW = 1_700_000_000_000
B = ["t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000", "t/ns/0x80000000_0xc0000000",
     "t/ns/0xc0000000_0xffffffff"]


def _stats(rate: float, topics: int = 3) -> dict[str, Any]:
    return {"msgRateIn": rate, "msgThroughputIn": rate * 1000, "topics": topics}


def _bd(rate: float) -> dict[str, Any]:
    td = {"maxSamples": 10, "numSamples": 10, "msgRateIn": rate, "msgRateOut": 0.0,
          "msgThroughputIn": rate * 1000, "msgThroughputOut": 0.0}
    return {"shortTermData": td, "longTermData": {**td, "maxSamples": 1000}, "topics": 3}


def _local(cpu: float, bundles: list[str], last_stats: dict[str, Any]) -> dict[str, Any]:
    return {"cpu": {"usage": cpu, "limit": 100.0}, "memory": {"usage": 1.0, "limit": 100.0},
            "directMemory": {"usage": 0.0, "limit": 100.0}, "bandwidthIn": {"usage": 0.0, "limit": 1000.0},
            "bandwidthOut": {"usage": 0.0, "limit": 1000.0}, "msgRateIn": 5000.0, "msgThroughputIn": 5e6,
            "bundles": bundles, "lastStats": last_stats, "lastUpdate": NOW,
            "loadManagerClassName": IMPL + "ModularLoadManagerImpl"}


def _request(shedder: str = "OverloadShedder") -> dict[str, Any]:
    """b1 owns B0, B1; b2 owns B2, B3 and also lists B1 (the bundle moving to it), with its own stats."""
    return {
        "config": {"loadBalancerLoadSheddingStrategy": IMPL + shedder,
                   "loadBalancerBrokerOverloadedThresholdPercentage": 85},
        "nowMillis": NOW,
        "loadData": {
            "brokers": {
                "b1:8080": {"localData": _local(95.0, [B[0], B[1]], {B[0]: _stats(1000.0), B[1]: _stats(3000.0)})},
                "b2:8080": {"localData": _local(95.0, [B[1], B[2], B[3]],
                                                {B[1]: _stats(500.0), B[2]: _stats(10.0), B[3]: _stats(20.0)})},
            },
            "bundleData": {B[0]: _bd(1000.0), B[1]: _bd(3000.0), B[2]: _bd(10.0), B[3]: _bd(20.0)},
        },
    }


def test_one_owner_request_keeps_the_fast_path() -> None:
    """Bundles listed once, ``bundles`` == ``lastStats`` keys: no membership structure, ``Bundles.owner`` says it."""
    req = _request()
    req["loadData"]["brokers"]["b2:8080"]["localData"]["bundles"].remove(B[1])
    del req["loadData"]["brokers"]["b2:8080"]["localData"]["lastStats"][B[1]]
    ld = load_data_from_request(req)
    assert ld.membership is None
    assert ld.bundles.owner.tolist() == [0, 0, 1, 1]
    assert ld.bundle_count().tolist() == [2, 2]


def test_bundle_in_two_sets_counts_for_both_brokers() -> None:
    """``LocalBrokerData.getBundles()`` per broker: B1 is in both sets, so b1 has 2 bundles and b2 has 3
    (``OverloadShedder``/``ThresholdShedder.findBundlesForUnloading`` compare ``getBundles().size()`` with 1)."""
    ld = load_data_from_request(_request())
    assert ld.membership is not None
    assert ld.bundle_count().tolist() == [2, 3]
    assert ld.owned_mask(0).tolist() == [True, True, False, False]
    assert ld.owned_mask(1).tolist() == [False, True, True, True]
    holders, rows = ld.reported_pairs()
    assert list(zip(holders.tolist(), rows.tolist())) == [(0, 0), (0, 1), (1, 1), (1, 2), (1, 3)]


def test_bundle_in_two_sets_is_planned_from_both_brokers() -> None:
    """``OverloadShedder.findBundlesForUnloading`` filters ``getBundleDataForLoadShedding()`` by each broker's
    ``localData.getBundles().contains(bundle)``: with both brokers overloaded, B1 (largest) is planned from each,
    and ``doLoadShedding`` issues both entries of the multimap."""
    ld = load_data_from_request(_request())
    plan = OverloadShedder().find_bundles_for_unloading(ld, PulsarConfig.resolve(_request()["config"]))
    assert [(u.broker, u.bundle) for u in plan][:1] == [("b1:8080", B[1])]
    assert ("b2:8080", B[1]) in [(u.broker, u.bundle) for u in plan]


def test_listed_without_last_stats_is_owned() -> None:
    """A broker's ``bundles`` without ``lastStats`` entries (the report lists what it serves; stats come later):
    the shedders still see the bundles (``getBundles()``), ``TimeAverageBrokerData.reset`` sums nothing."""
    req = _request()
    for b in req["loadData"]["brokers"].values():
        b["localData"]["lastStats"] = {}
    ld = load_data_from_request(req)
    assert ld.bundle_count().tolist() == [2, 3]
    short, long = ld.time_average_broker_data()
    assert short.sum() == 0.0 and long.sum() == 0.0


def test_update_bundle_data_samples_each_last_stats_entry_in_broker_order() -> None:
    """``ModularLoadManagerImpl.updateBundleData``: brokers in turn, each lastStats entry a ``BundleData.update``
    (B1 twice: b1's 3000 then b2's 500), and each broker's ``TimeAverageBrokerData.reset`` right after its own
    samples (b1's sum sees B1 after one sample, b2's after both)."""
    req = _request()
    req["loadData"]["bundleData"] = {}  # getBundleDataOrDefault: default data with 0 samples
    ld = load_data_from_request(req)
    update_bundle_data(ld)
    b = ld.bundles
    assert b.short_samples.tolist() == [1, 2, 1, 1]
    assert b.short[1, RATE_IN] == pytest.approx((3000.0 + 500.0) / 2)
    assert ld.tabd is not None
    short, _ = ld.tabd
    assert short[0, RATE_IN] == 1000.0 + 3000.0  # b1 reset before b2 sampled B1 again
    assert short[1, RATE_IN] == 1750.0 + 10.0 + 20.0


def test_split_check_reads_each_last_stats_entry() -> None:
    """``BundleSplitterTask.findBundlesToSplit`` walks each broker's lastStats with that broker's stats:
    B1 has 3 topics at b1 and 1500 at b2 -> split, attributed to b2 (``bundleCache.put``)."""
    req = _request()
    req["loadData"]["brokers"]["b2:8080"]["localData"]["lastStats"][B[1]]["topics"] = 1500
    ld = load_data_from_request(req)
    conf = PulsarConfig.resolve({})
    found = find_bundles_to_split(ld, conf, {"t/ns": 4})
    assert [(ld.bundles.names[r], ld.brokers.ids[k]) for r, k, _ in found] == [(B[1], "b2:8080")]


def test_insert_bundles_keeps_membership_rows() -> None:
    """Rows shift when the leader learns a new bundle (``computeIfAbsent``); the per-broker pairs follow."""
    ld = load_data_from_request(_request())
    before = {(ld.brokers.ids[k], ld.bundles.names[r]) for k, r in zip(*ld.owned_pairs())}
    insert_bundles(ld, ["t/ns/0x00000000_0x20000000", "t/a/0x00000000_0xffffffff"])
    after = {(ld.brokers.ids[k], ld.bundles.names[r]) for k, r in zip(*ld.owned_pairs())}
    assert after == before
    reported = {(ld.brokers.ids[k], ld.bundles.names[r]) for k, r in zip(*ld.reported_pairs())}
    assert ("b2:8080", B[1]) in reported and ("b1:8080", B[1]) in reported


def test_local_broker_data_json_writes_each_brokers_own_sets() -> None:
    """The dumped ``LocalBrokerData`` of each broker lists its own ``bundles`` and ``lastStats``."""
    ld = load_data_from_request(_request())
    b2 = local_broker_data_json(ld, 1)
    assert b2["bundles"] == [B[1], B[2], B[3]] and b2["numBundles"] == 3
    assert b2["lastStats"][B[1]]["msgRateIn"] == 500.0


def test_leader_ranges_include_every_reporter() -> None:
    """``brokerToNamespaceToBundleRange.reloadFromBundles(broker, lastStats keys + preallocated keys)`` per
    broker: B1's range belongs to both reporters."""
    ld = load_data_from_request(_request())
    ranges = LeaderState.from_load_data(ld).bundle_ranges
    rng = B[1].split("/")[-1]
    assert rng in ranges["b1:8080"]["t/ns"] and rng in ranges["b2:8080"]["t/ns"]
    leader = LeaderState.from_load_data(ld)
    assert leader.namespace_bundle_counts("t/ns", ld.brokers.ids).tolist() == [2, 3]


def test_decide_accepts_a_bundle_in_two_brokers_sets() -> None:
    """decide's contract: a bundle in two brokers' ``localData`` is legal (Pulsar's leader sees it while it moves)."""
    out = decide(_request())  # refused before ("a bundle has one owner")
    assert sorted(out["stats"]["usage"]) == ["b1:8080", "b2:8080"]
    assert out["skip"] is None or out["skip"] == "NoDestination"


# --- preallocation per broker -------------------------------------------------------------------------------
def _prealloc_request() -> dict[str, Any]:
    req = _request("ThresholdShedder")
    req["config"]["loadBalancerLoadPlacementStrategy"] = IMPL + "LeastLongTermMessageRate"
    for b in req["loadData"]["brokers"].values():
        b["localData"]["cpu"]["usage"] = 10.0
        b["timeAverageData"] = {"longTermMsgRateIn": 100.0, "longTermMsgRateOut": 0.0}
    req["loadData"]["bundleData"]["t/new/0x00000000_0xffffffff"] = _bd(40.0)
    return req


def test_preallocation_listed_by_two_brokers_scores_for_both() -> None:
    """``LeastLongTermMessageRate.getScore`` adds the long-term rates of the broker's own
    ``getPreallocatedBundleData()``: a bundle in both brokers' maps adds 40 msg/s to each."""
    req = _prealloc_request()
    for broker in ("b1:8080", "b2:8080"):
        req["loadData"]["brokers"][broker]["preallocatedBundleData"] = {
            "t/new/0x00000000_0xffffffff": _bd(40.0)}
    ld = load_data_from_request(req)
    holders, rows = ld.preallocated_pairs()
    assert holders.tolist() == [0, 1] and rows.tolist() == [ld.bundles.index("t/new/0x00000000_0xffffffff")] * 2
    scores = long_term_message_rate_scores(ld, PulsarConfig.resolve(req["config"]))
    assert scores.tolist() == [140.0, 140.0]


def test_preallocated_again_stays_with_the_first_broker() -> None:
    """``ModularLoadManagerImpl.selectBrokerForAssignment`` -> ``preallocateBundle``: after ``updateBundleData``
    dropped the bundle from ``preallocatedBundleToBroker`` but b1 has not reported it, assigning it again to b2
    puts it into b2's map too; b1's stays (nothing removes it), so both scores carry it."""
    req = _prealloc_request()
    ld = load_data_from_request(req)
    leader = LeaderState.from_load_data(ld)
    name = "t/new/0x00000000_0xffffffff"
    preallocate_bundle(ld, leader, name, "b1:8080")
    clear_preallocations(ld)  # the refresh: preallocatedBundleToBroker forgets it, b1 has not reported it
    assert name not in ld.preallocated_bundle_to_broker
    preallocate_bundle(ld, leader, name, "b2:8080")
    holders, _ = ld.preallocated_pairs()
    assert sorted(holders.tolist()) == [0, 1]
    assert long_term_message_rate_scores(ld, PulsarConfig.resolve(req["config"])).tolist() == [140.0, 140.0]
    state = leader.get_state(ld)["preallocatedBundleData"]
    assert state == {"b1:8080": [name], "b2:8080": [name]}
    # carried through strategyState: restored to both brokers
    ld2 = load_data_from_request(_prealloc_request())
    LeaderState().set_state(leader.get_state(ld), ld2)
    assert sorted(ld2.preallocated_pairs()[0].tolist()) == [0, 1]


def test_preallocation_leaves_the_broker_that_reports_it() -> None:
    """``updateBundleData``'s clean-up, per broker: an entry leaves a broker's ``preallocatedBundleData`` once that
    broker lists the bundle in ``getBundles()`` and the leader has its BundleData; the other broker keeps it."""
    req = _prealloc_request()
    name = "t/new/0x00000000_0xffffffff"
    for broker in ("b1:8080", "b2:8080"):
        req["loadData"]["brokers"][broker]["preallocatedBundleData"] = {name: _bd(40.0)}
    req["loadData"]["brokers"]["b2:8080"]["localData"]["bundles"].append(name)
    ld = load_data_from_request(req)
    clear_preallocations(ld)
    assert ld.preallocated_pairs()[0].tolist() == [0]


# --- onActiveBrokersChange at every refresh ------------------------------------------------------------------
def test_cleanup_dead_brokers_data_forgets_departed_ewma() -> None:
    """``ModularLoadManagerImpl.cleanupDeadBrokersData`` -> ``ThresholdShedder.onActiveBrokersChange``: the EWMA
    of a broker that left is dropped, so on its return it restarts from its raw usage."""
    req = _request("ThresholdShedder")
    conf = PulsarConfig.resolve({**req["config"], "loadBalancerHistoryResourcePercentage": 0.9})
    manager = ModularLoadManager(conf, NamespacePolicies(), np.random.default_rng(0))
    assert isinstance(manager.shedder, ThresholdShedder)
    manager.shedder.broker_avg_resource_usage = {"b1:8080": 0.5, "b3:8080": 0.7}
    manager.cleanup_dead_brokers_data(["b1:8080", "b2:8080"])
    assert manager.shedder.broker_avg_resource_usage == {"b1:8080": 0.5}


def test_decide_refresh_forgets_brokers_missing_from_the_snapshot() -> None:
    """Each decide call is one refresh: a carried EWMA of a broker absent from the request is dropped."""
    req = _request("ThresholdShedder")
    first = decide(req)
    assert "b2:8080" in first["strategyState"]["shedding"]["state"]["brokerAvgResourceUsage"]
    gone = copy.deepcopy(req)
    del gone["loadData"]["brokers"]["b2:8080"]
    gone["loadData"]["brokers"]["b3:8080"] = copy.deepcopy(req["loadData"]["brokers"]["b1:8080"])
    second = decide({**gone, "strategyState": first["strategyState"]})
    assert sorted(second["strategyState"]["shedding"]["state"]["brokerAvgResourceUsage"]) == ["b1:8080", "b3:8080"]


# --- maps given in the request replace the carried copies ---------------------------------------------------------
def test_recently_unloaded_bundles_given_replace_the_carried_copy() -> None:
    """``LoadData.getRecentlyUnloadedBundles()`` is the leader's map: a request that gives it (even ``{}``) states
    it; only an absent map is taken from ``strategyState`` (DESIGN.md: inputs given replace the carried state)."""
    req = _request("ThresholdShedder")
    req["config"]["loadBalancerBundleUnloadMinThroughputThreshold"] = 0
    req["loadData"]["brokers"]["b2:8080"]["localData"]["cpu"]["usage"] = 10.0
    first = decide(req)
    carried = first["strategyState"]["leader"]["recentlyUnloadedBundles"]
    assert carried, "the first call unloads something"
    absent = decide({**req, "strategyState": first["strategyState"]})
    assert set(carried) <= set(absent["strategyState"]["leader"]["recentlyUnloadedBundles"])
    given = copy.deepcopy(req)
    given["loadData"]["recentlyUnloadedBundles"] = {}
    emptied = decide({**given, "strategyState": first["strategyState"], "actions": []})
    assert emptied["strategyState"]["leader"]["recentlyUnloadedBundles"] == {}


def test_extensible_maps_given_replace_the_carried_copies() -> None:
    """``UnloadScheduler.execute`` passes its ``recentlyUnloadedBundles`` / ``recentlyUnloadedBrokers`` to
    ``TransferShedder.findBundlesForUnloading``: given maps (even ``{}``) are the input; absent ones fall back to
    the carried copies."""
    from lbreplay.decide import DecideRequest

    ext = "org.apache.pulsar.broker.loadbalance.extensions."
    conf_doc = {"loadManagerClassName": ext + "ExtensibleLoadManagerImpl"}
    state = {"version": 1, "mode": "extensible", "extensible": {
        "recentlyUnloadedBundles": {B[0]: NOW - 1000}, "recentlyUnloadedBrokers": {"b1:8080": NOW - 1000}}}
    conf = PulsarConfig.resolve(conf_doc)

    def ctx(extensible: dict[str, Any]) -> Any:
        req = {"config": conf_doc, "nowMillis": NOW, "extensible": extensible, "strategyState": state}
        return DecideRequest(req, conf, np.random.default_rng(0)).ctx

    given = ctx({"recentlyUnloadedBundles": {}, "recentlyUnloadedBrokers": {}})
    assert given.recently_unloaded_bundles == {} and given.recently_unloaded_brokers == {}
    absent = ctx({})
    assert absent.recently_unloaded_bundles == {B[0]: NOW - 1000}
    assert absent.recently_unloaded_brokers == {"b1:8080": NOW - 1000}
