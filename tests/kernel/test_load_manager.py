"""One load-manager interface for both families (lbreplay.kernel.load_manager): refresh (a departed broker
dropped), split, assign, owner and the leader's state between two calls, on the modular and extensible managers."""

from __future__ import annotations

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.load_manager import ExtensibleLoadManager, ModularLoadManager, create_load_manager
from lbreplay.kernel.policies import NamespacePolicies
from tests.kernel.placement_fixtures import Br, Bu, World

EXT = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
BROKERS = ("a:8080", "b:8080", "c:8080")


def _ext_context() -> ExtensibleContext:
    load = {b: {"usage": [u] * 5, "limit": [100.0] * 5, "weightedMaxEMA": u / 100, "maxResourceUsage": u / 100,
                "updatedAt": 1_000, "reportedAt": 1_000} for b, u in zip(BROKERS, (30.0, 10.0, 20.0))}
    top = {b: [(f"t/ns/0x{k}0000000_0x{k + 1}0000000", [1.0, 2.0, 3.0, 4.0, 5, 1, 1, 0])]
           for k, b in enumerate(BROKERS)}
    return ExtensibleContext.build(2_000, load, top, list(BROKERS), bundle_owners={})


def _ext_manager() -> ExtensibleLoadManager:
    m = create_load_manager(PulsarConfig.resolve({"loadManagerClassName": EXT}), None, np.random.default_rng(0))
    assert isinstance(m, ExtensibleLoadManager)
    return m


def test_extensible_refresh_drops_a_departed_brokers_load_data_and_top_bundles() -> None:
    """ServiceUnitStateChannelImpl.doCleanup: the deleted broker's BrokerLoadData and TopBundlesLoadData entries are
    removed and it is no longer available; the others' entries stay as they were."""
    ctx, m = _ext_context(), _ext_manager()
    before = [list(ctx.top.names[ctx.top.offsets[i]:ctx.top.offsets[i + 1]]) for i in range(3)]
    assert m.refresh(ctx, ["b:8080", "gone:1"]) == ["b:8080"]
    b = ctx.index("b:8080")
    assert not ctx.available[b] and not ctx.has_load_data[b] and not ctx.top.present[b]
    assert ctx.load.updated_at[b] == 0 and ctx.load.weighted_max_ema[b] == 1.0  # new BrokerLoadData()
    assert ctx.available.tolist() == [True, False, True] and ctx.has_load_data.tolist() == [True, False, True]
    after = [list(ctx.top.names[ctx.top.offsets[i]:ctx.top.offsets[i + 1]]) for i in range(3)]
    assert after == [before[0], [], before[2]]
    assert m.refresh(ctx) == []


def test_extensible_assign_never_picks_the_departed_broker() -> None:
    """b (10 %) is the least loaded broker: chosen before its departure, never after it."""
    ctx, m = _ext_context(), _ext_manager()
    assert m.assign(["t/ns/0xf0000000_0xffffffff"], ctx) == [("t/ns/0xf0000000_0xffffffff", "b:8080")]
    ctx, m = _ext_context(), _ext_manager()
    m.refresh(ctx, ["b:8080"])
    assert m.assign(["t/ns/0xf0000000_0xffffffff"], ctx) == [("t/ns/0xf0000000_0xffffffff", "c:8080")]


def test_extensible_owner_split_and_state_round_trip() -> None:
    ctx, m = _ext_context(), _ext_manager()
    assert m.owner(ctx, "t/ns/0x10000000_0x20000000") is None  # bundle_owners given: the channel says no owner
    ctx.bundle_owners = None
    assert m.owner(ctx, "t/ns/0x10000000_0x20000000") == "b:8080"  # else the top-bundles list naming it
    splitting = m.split(ctx, lambda namespaces: {ns: np.array([0, 1 << 32], dtype=np.int64) for ns in namespaces})
    assert splitting.splits == [] and splitting.stats is not None
    m.assigned = {"t/ns/x": "a:8080"}
    ctx.recently_unloaded_brokers["c:8080"] = 5
    state = m.get_state(ctx)
    assert state["extensible"] == {"recentlyUnloadedBundles": {}, "recentlyUnloadedBrokers": {"c:8080": 5},
                                   "assigned": {"t/ns/x": "a:8080"}}
    fresh, ctx2 = _ext_manager(), _ext_context()
    fresh.set_state(state, ctx2, given={"recentlyUnloadedBrokers"})  # a given map replaces the carried copy
    assert fresh.assigned == {"t/ns/x": "a:8080"} and ctx2.recently_unloaded_brokers == {}
    fresh.set_state(state, ctx2)
    assert ctx2.recently_unloaded_brokers == {"c:8080": 5}


def test_modular_refresh_reports_the_brokers_gone_since_the_last_one() -> None:
    """updateAll -> cleanupDeadBrokersData: the active brokers are those of the LoadData; a broker gone from it is
    dropped, and the placement strategy forgets it (onActiveBrokersChange)."""
    conf = PulsarConfig.resolve({"loadBalancerLoadPlacementStrategy": "LeastResourceUsageWithWeight"})
    m = create_load_manager(conf, NamespacePolicies(), np.random.default_rng(0))
    assert isinstance(m, ModularLoadManager) and m.family == "modular"
    three = World({b: Br(usage=u) for b, u in zip(BROKERS, (30.0, 10.0, 20.0))},
                  {"t/ns/0x00000000_0xffffffff": Bu("a:8080")}).build()
    assert m.refresh(three) == []
    m.assign(["t/ns/0x00000000_0x10000000"], three)  # the placement strategy's EWMA now has its candidates
    assert {"b:8080", "c:8080"} <= set(m.placement.get_state()["brokerAvgResourceUsageWithWeight"])
    two = World({b: Br(usage=u) for b, u in zip(("a:8080", "c:8080"), (30.0, 20.0))},
                {"t/ns/0x00000000_0xffffffff": Bu("a:8080")}).build()
    assert m.refresh(two) == ["b:8080"]
    assert set(m.placement.get_state()["brokerAvgResourceUsageWithWeight"]) == {"c:8080"}
